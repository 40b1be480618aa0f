#!/usr/bin/env bash
# examples/consumer/run.sh BUILD_DIR WORK_DIR — proves that attn, once
# installed, serves programs outside its tree (the test consumer_install):
#
#   1. cmake --install BUILD_DIR --prefix WORK_DIR/stage, and the files are there;
#   2. guide.cpp built by examples/consumer/CMakeLists.txt with
#      find_package(attn), against libattn.so and against libattn.a, and run;
#      find_package(attn 9.9) is refused;
#   3. guide.cpp built with `c++ ... $(pkg-config --cflags --libs attn)`, and run;
#   4. the installed tree moved elsewhere: `attn train` still finds its
#      corpus, and attn.pc names the new place.
#
# guide trains d2l's Transformer for 30 epochs, so this takes a minute or two.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: examples/consumer/run.sh BUILD_DIR WORK_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "$1" && pwd)
rm -rf "$2"
mkdir -p "$2"
work=$(cd "$2" && pwd)
stage=$work/stage
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

step() { printf '\n==== %s\n' "$*"; }
fail() {
  echo "consumer: FAILED: $*" >&2
  exit 1
}
# Runs a command with its output in a log, shown only when it fails.
quietly() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$* (log: $log)"; }
}

step "cmake --install $build --prefix $stage"
quietly "$work/install.log" cmake --install "$build" --prefix "$stage"
for f in bin/attn include/attn/attn.h include/attn/version.h include/attn/core/tensor.h \
         share/attn/datasets/fra-eng/fra.txt.gz share/attn/datasets/fra-eng/README.md \
         share/doc/attn/README.md share/doc/attn/using-libattn.md; do
  [[ -f "$stage/$f" ]] || fail "not installed: $f"
done
find_one() {  # the one installed file named $1
  local found
  found=$(find "$stage" -name "$1" -not -type d)
  [[ -n "$found" && $(wc -l <<<"$found") -eq 1 ]] || fail "expected one installed $1, found: '$found'"
  echo "$found"
}
libattn_a=$(find_one libattn.a)
libattn_so=$(find_one 'libattn.so.*.*.*')
pc=$(find_one attn.pc)
config=$(find_one attnConfig.cmake)
find_one attnConfigVersion.cmake >/dev/null
echo "installed: ${libattn_a#"$stage"/}, ${libattn_so#"$stage"/}, ${pc#"$stage"/}, ${config#"$stage"/}"
corpus=$stage/share/attn/datasets/fra-eng/fra.txt.gz

run_guide() {  # run_guide NAME EXECUTABLE
  step "run $1"
  quietly "$work/$1.log" "$2" "$corpus" "$work/model-$1"
  cat "$work/$1.log"
  grep -q '^all checks passed$' "$work/$1.log" || fail "$1: not every check passed"
}

step "find_package(attn) -> libattn.so"
quietly "$work/shared-configure.log" cmake -S "$here" -B "$work/shared" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$stage"
quietly "$work/shared-build.log" cmake --build "$work/shared"
loaded=$(ldd "$work/shared/guide")  # (not piped into grep -q: with pipefail, ldd's SIGPIPE would fail it)
grep -q "$stage/.*libattn\.so" <<<"$loaded" || fail "guide does not load $stage's libattn.so"
run_guide find-package-shared "$work/shared/guide"

step "find_package(attn) with attn_USE_STATIC_LIBS -> libattn.a"
quietly "$work/static-configure.log" cmake -S "$here" -B "$work/static" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$stage" -Dattn_USE_STATIC_LIBS=ON
quietly "$work/static-build.log" cmake --build "$work/static"
loaded=$(ldd "$work/static/guide")
if grep -q libattn <<<"$loaded"; then fail "the static guide loads libattn.so"; fi
run_guide find-package-static "$work/static/guide"

step "find_package(attn 9.9) is refused (attnConfigVersion.cmake)"
if cmake -S "$here" -B "$work/too-new" "${generator[@]}" -DCMAKE_PREFIX_PATH="$stage" \
    -DATTN_CONSUMER_VERSION=9.9 >"$work/too-new.log" 2>&1; then
  fail "find_package(attn 9.9) accepted version $(sed -n 's/^#define ATTN_VERSION_STRING //p' "$stage/include/attn/version.h")"
fi
grep -q 'requested version "9.9"' "$work/too-new.log" &&
  grep -q 'attnConfig.cmake, version: ' "$work/too-new.log" ||
  { cat "$work/too-new.log"; fail "not refused for its version"; }
echo "refused: $(grep -o 'attnConfig.cmake, version: [0-9.]*' "$work/too-new.log")"

step "c++ guide.cpp \$(pkg-config --cflags --libs attn)"
export PKG_CONFIG_PATH=${pc%/*}
cflags=$(pkg-config --cflags attn)
libs=$(pkg-config --libs attn)
libdir=$(pkg-config --variable=libdir attn)
echo "pkg-config --cflags --libs attn: $cflags $libs"
mkdir -p "$work/pkg-config"
# shellcheck disable=SC2086
quietly "$work/pkg-config-build.log" "${CXX:-c++}" "$here/guide.cpp" -o "$work/pkg-config/guide" \
  $cflags $libs -Wl,-rpath,"$libdir"
loaded=$(ldd "$work/pkg-config/guide")
grep -q "$stage/.*libattn\.so" <<<"$loaded" || fail "the pkg-config guide does not load $stage's libattn.so"
run_guide pkg-config "$work/pkg-config/guide"

step "the installed tree, moved: attn finds its corpus, attn.pc its prefix"
moved=$work/moved
mv "$stage" "$moved"
"$moved/bin/attn" --version
quietly "$work/moved-train.log" env OMP_WAIT_POLICY=PASSIVE "$moved/bin/attn" --threads 1 train \
  --epochs 1 --num-examples 50 --out "$work/model-moved"
head -1 "$work/moved-train.log"
grep -q "from $moved/share/attn/datasets/fra-eng/fra.txt.gz" "$work/moved-train.log" ||
  fail "the moved attn did not train on $moved/share/attn/datasets/fra-eng/fra.txt.gz"
[[ -f "$work/model-moved/model.safetensors" ]] || fail "the moved attn wrote no model"
export PKG_CONFIG_PATH=$moved/${pc#"$stage"/}
PKG_CONFIG_PATH=${PKG_CONFIG_PATH%/*}
[[ "$(pkg-config --variable=includedir attn)" == "$moved"/* ]] ||
  fail "attn.pc does not follow the move: includedir $(pkg-config --variable=includedir attn)"

step "consumer: installed, found by CMake and pkg-config, built, run, moved: all passed"
