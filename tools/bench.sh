#!/bin/sh
# Runs the benchmark tables. Usage: tools/bench.sh BUILD_DIR [--json] [--quick]
set -eu
BUILD=${1:?usage: tools/bench.sh BUILD_DIR [--json] [--quick]}
shift
if [ ! -x "$BUILD/bench/bench_direct" ]; then
  echo "bench: $BUILD/bench/bench_direct not built (the CUDA backend is needed)" >&2
  exit 1
fi
exec "$BUILD/bench/bench_direct" "$@"
