#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...] — builds attn's libFuzzer targets
# (fuzz/, with clang) into build/fuzz and runs each for SECONDS (default 60),
# one after another: safetensors, model_config, corpus (or the TARGETs named).
#
# Each run starts from the checked-in seeds (fuzz/seeds/<target>/) and past
# findings (fuzz/regressions/<target>/) plus the corpus grown by earlier runs
# (build/fuzz/corpus/<target>/, not checked in). It prints, per target, the
# executions per second and the corpus size, and exits 1 on a finding: the
# input is saved as build/fuzz/findings/<target>/crash-* (or leak-*, oom-*,
# timeout-*). After fixing the bug, copy that file into
# fuzz/regressions/<target>/: tests/io/fuzz_regressions_test.cpp then feeds
# it to the same entry function in every `make test`.
#
# Environment: FUZZ_BUILD_DIR (default build/fuzz), JOBS (build parallelism),
# FUZZ_ARGS (more libFuzzer flags, e.g. -jobs=1 -workers=1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-60}
if [[ $# -gt 0 ]]; then shift; fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [safetensors|model_config|corpus ...]" >&2
  exit 2
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(safetensors model_config corpus)
build=${FUZZ_BUILD_DIR:-build/fuzz}

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
if [[ ! -f "$build/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S fuzz -B "$build" -G Ninja -DATTN_FUZZ=ON >/dev/null
fi
if ! build_log=$(cmake --build "$build" --parallel "${JOBS:-$(nproc)}" 2>&1); then
  echo "$build_log" >&2
  echo "fuzz: the build failed" >&2
  exit 1
fi

# One thread, sleeping waits: the targets are single-threaded and other
# processes may share the cores.
export ATTN_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
for t in "${targets[@]}"; do
  exe="$build/${t}_fuzz"
  [[ -x "$exe" ]] || { echo "fuzz: no target '$t' ($exe)" >&2; exit 2; }
  mkdir -p "$build/corpus/$t" "$build/findings/$t" "$build/logs" "fuzz/regressions/$t"
  log="$build/logs/$t.log"
  # shellcheck disable=SC2086
  if "$exe" -max_total_time="$seconds" -max_len=4096 -timeout=20 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/findings/$t/" ${FUZZ_ARGS:-} \
      "$build/corpus/$t" "fuzz/seeds/$t" "fuzz/regressions/$t" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corpus=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
    echo "fuzz $t: ${runs:-?} runs in ${seconds} s, ${rate:-?} exec/s, corpus ${corpus:-?} (inputs/bytes), coverage ${cov:-?} edges, no finding"
  else
    status=1
    echo "fuzz $t: FINDING (log: $log)" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|finding:|terminate called|  what\(\)|.*runtime error:|artifact_prefix|Test unit written)' "$log" | head -20 >&2 || true
    echo "fuzz $t: reproduce with $exe <the input>; after the fix, copy the input into fuzz/regressions/$t/" >&2
  fi
done
exit $status
