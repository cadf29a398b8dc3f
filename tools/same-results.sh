#!/bin/sh
# Checks that this tree computes what an earlier fmmkit computed, and as fast: a check for
# changes that must not change behaviour (run on a machine with an NVIDIA GPU).
#
#   tools/same-results.sh OLD_SRC OUT_DIR [--no-bench]
#
# OLD_SRC is a checkout of the earlier fmmkit (for example `git archive REV | tar -x -C DIR`).
# Both trees are built with the CUDA backend; tests/golden/golden (public API only) runs every
# engine on both, the old build twice (what differs between two runs of one build is not
# deterministic, and is reported as such); tools/same-results.py compares the outputs. Then
# the headline benchmarks (direct 2^20, treecode 2^20, 3D FMM 2^20 at eps 1e-6, 2D FMM 2^20)
# of the two builds run alternately, three times each, in this one call.
set -eu
OLD=${1:?usage: tools/same-results.sh OLD_SRC OUT_DIR [--no-bench]}
OUT=${2:?usage: tools/same-results.sh OLD_SRC OUT_DIR [--no-bench]}
BENCH=${3:-}
CUDA=${CUDA_HOME:-/usr/local/cuda}
JOBS=$(nproc 2>/dev/null || echo 4)
mkdir -p "$OUT"
NEW_B=build-gpu
OLD_B="$OLD/build-gpu"
for pair in "$OLD:$OLD_B" ".:$NEW_B"; do
  src=${pair%%:*} b=${pair#*:}
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build "$b" -j"$JOBS" --target fmmkit bench_direct bench_tree bench_fmm3d bench_fmm2d >/dev/null
  cc -O2 -DFMK_GOLDEN_CUDA -I"$src/include" -Iinclude -I"$CUDA/include" tests/golden/golden.c \
    -o "$b/golden" -L"$b" -lfmmkit -L"$CUDA/lib64" -lcudart -lm -Wl,-rpath,"$PWD/$b" \
    -Wl,-rpath,"$(cd "$b" && pwd)"
done
run_golden() { # build dir, tag
  rm -rf "$OUT/$2.d" && mkdir -p "$OUT/$2.d"
  "$1/golden" "$OUT/$2.d" > "$OUT/$2.log" 2>&1 || true
}
run_golden "$OLD_B" old
run_golden "$OLD_B" old2
run_golden "$NEW_B" new
echo "== old against old (a second run of the same build: not deterministic where it differs)"
python3 tools/same-results.py "$OUT/old.log" "$OUT/old.d" "$OUT/old2.log" "$OUT/old2.d" \
  > "$OUT/old-old.txt" || true
tail -1 "$OUT/old-old.txt"
echo "== old against new"
python3 tools/same-results.py "$OUT/old.log" "$OUT/old.d" "$OUT/new.log" "$OUT/new.d" \
  "$OUT/old2.log" "$OUT/old2.d" > "$OUT/old-new.txt" || true
tail -1 "$OUT/old-new.txt"
rm -rf "$OUT/old.d" "$OUT/old2.d" "$OUT/new.d"
[ "$BENCH" = "--no-bench" ] && exit 0
echo "== headline benchmarks, old and new alternately"
for i in 1 2 3; do
  for b in "$OLD_B" "$NEW_B"; do
    echo "-- $b run $i"
    "$b/bench/bench_direct" --headline
    "$b/bench/bench_tree" --headline
    "$b/bench/bench_fmm3d" bar
    "$b/bench/bench_fmm2d" --no-grid --no-cpu
  done
done
