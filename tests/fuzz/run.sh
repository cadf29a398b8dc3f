#!/bin/sh
# Runs each fuzz harness of a fuzz build for a while: sh tests/fuzz/run.sh BUILD_DIR SECONDS
# Each starts from its seed corpus (tests/fuzz/corpus/<name>, left unchanged) and the inputs
# earlier runs found (BUILD_DIR/fuzz-corpus/<name>). A crash, leak, sanitizer report, timeout or
# out-of-memory stops the run and fails it; the input is saved as BUILD_DIR/fuzz-artifacts/
# <name>-crash-* (replay: BUILD_DIR/tests/fuzz/fuzz_<name> FILE).
set -eu
build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:-60}
src=$(cd "$(dirname "$0")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
# the .npy reader from a pipe too (a stream of unknown length: npy.c reads it whole first)
export FMK_FUZZ_NPY_PIPE=${FMK_FUZZ_NPY_PIPE:-1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# name, -max_len: a .npy header and some data; 64 points of 3 coordinates with their charges
for spec in npy:4096 api:2048; do
  name=${spec%%:*}
  max_len=${spec#*:}
  mkdir -p "$build/fuzz-corpus/$name" "$build/fuzz-artifacts"
  echo "fuzz_$name: ${seconds}s"
  if ! "$build/tests/fuzz/fuzz_$name" -max_total_time="$seconds" -max_len="$max_len" \
      -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-artifacts/$name-" \
      "$build/fuzz-corpus/$name" "$src/corpus/$name" >"$build/fuzz-$name.log" 2>&1; then
    tail -n 60 "$build/fuzz-$name.log"
    echo "fuzz_$name failed: input in $build/fuzz-artifacts/, log in $build/fuzz-$name.log" >&2
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)|cov:.*DONE|DONE' "$build/fuzz-$name.log" |
    tail -n 3
done
# the closing line test runners print: every harness ran its time without a finding
echo "fuzz: 2 passed, 0 failed"
