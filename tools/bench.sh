#!/bin/sh
# Runs the benchmark tables (direct sum, then treecode and its theta sweep). Usage: tools/bench.sh BUILD_DIR [--json] [--quick]
set -eu
BUILD=${1:?usage: tools/bench.sh BUILD_DIR [--json] [--quick]}
shift
if [ ! -x "$BUILD/bench/bench_direct" ]; then
  echo "bench: $BUILD/bench/bench_direct not built (the CUDA backend is needed)" >&2
  exit 1
fi
"$BUILD/bench/bench_direct" "$@"
if [ -x "$BUILD/bench/bench_tree" ]; then
  "$BUILD/bench/bench_tree" "$@"
  "$BUILD/bench/bench_tree" --theta-sweep "$@"
fi
for b in fmm3d fmm2d; do
  if [ -x "$BUILD/bench/bench_$b" ]; then
    "$BUILD/bench/bench_$b" "$@"
  fi
done
# The simulation driver with its state on the GPU (--json passes on; --quick stops at 2^20).
if [ -x "$BUILD/bench/bench_sim_gpu" ]; then
  sim_args=""
  for a in "$@"; do
    case $a in
      --json) sim_args="$sim_args --json" ;;
      --quick) sim_args="$sim_args --max-log2 20" ;;
    esac
  done
  "$BUILD/bench/bench_sim_gpu" $sim_args
fi
