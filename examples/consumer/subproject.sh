#!/usr/bin/env bash
# examples/consumer/subproject.sh WORK_DIR — attn built as part of another
# project (make test-subproject): examples/consumer/CMakeLists.txt with
#
#   1. add_subdirectory(<this checkout>)
#   2. FetchContent from this checkout's git repository, at HEAD (committed
#      work only)
#
# each configured, built (only libattn.a: the subproject defaults) and run.
# Each builds the library from scratch: minutes. With --configure-only (what
# `make test` runs) each is configured and its targets checked, nothing built.
#
# The parent is a copy of examples/consumer with a folder examples/ of its own
# holding a file that does not compile: attn must neither glob nor build the
# parent's files (its paths are its own project's, not CMAKE_SOURCE_DIR's).
set -euo pipefail

configure_only=false
if [[ ${1:-} == --configure-only ]]; then
  configure_only=true
  shift
fi
if [[ $# -ne 1 ]]; then
  echo "usage: examples/consumer/subproject.sh [--configure-only] WORK_DIR" >&2
  exit 2
fi
consumer=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$consumer/../.." && pwd)
rm -rf "$1"
mkdir -p "$1"
work=$(cd "$1" && pwd)
here=$work/parent
mkdir -p "$here/examples"
cp "$consumer/CMakeLists.txt" "$consumer/guide.cpp" "$here/"
printf '#error "a parent project'"'"'s examples/ compiled into attn"\n' >"$here/examples/stray.cpp"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
corpus=$root/datasets/fra-eng/fra.txt.gz

fail() {
  echo "subproject: FAILED: $*" >&2
  exit 1
}
quietly() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -40 "$log" >&2; fail "$* (log: $log)"; }
}

build_and_run() {  # build_and_run NAME CMAKE_ARGS...
  local name=$1
  shift
  printf '\n==== %s\n' "$name"
  quietly "$work/$name-configure.log" cmake -S "$here" -B "$work/$name" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release "$@"
  # Only the library and guide: a subproject builds no tests, program or examples.
  for t in attn attn_shared attn_examples; do
    if grep -q "^build $t: phony" "$work/$name/build.ninja"; then
      fail "$name: the subproject defines the target $t"
    fi
  done
  if grep -q "stray" "$work/$name/build.ninja"; then
    fail "$name: the parent's examples/stray.cpp is part of the build"
  fi
  grep -q "^build guide: " "$work/$name/build.ninja" || fail "$name: no target guide"
  if $configure_only; then
    echo "$name: configured; no tests, program or examples of attn's, nothing of the parent's"
    return 0
  fi
  quietly "$work/$name-build.log" cmake --build "$work/$name" --parallel "${JOBS:-$(nproc)}"
  quietly "$work/$name-run.log" "$work/$name/guide" "$corpus" "$work/$name-model"
  grep -q '^all checks passed$' "$work/$name-run.log" || fail "$name: not every check passed"
  echo "$name: guide built and run, all checks passed"
}

build_and_run add_subdirectory -DATTN_CONSUMER_MODE=subdirectory -DATTN_SOURCE_DIR="$root"
build_and_run fetchcontent -DATTN_CONSUMER_MODE=fetchcontent -DATTN_GIT_REPOSITORY="$root" \
  -DATTN_GIT_TAG="$(git -C "$root" rev-parse HEAD)"
