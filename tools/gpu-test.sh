#!/bin/sh
# GPU tests: ctest's "gpu" label, then the GPU test programs under compute-sanitizer, then the
# Python GPU tests. Usage: tools/gpu-test.sh BUILD_DIR. Exits non-zero on any failure.
#
# compute-sanitizer runs one program at a time (processes would share the GPU by time slices):
# - memcheck with leak checking on each program's --quick set, and on test_fmm3d_gpu's
#   out-of-memory test (the failure path, which --quick leaves out); API errors are not
#   reported, because the tests provoke out-of-memory errors on purpose;
# - racecheck on the named subsets below, and on k_build_top, on the one-pass build's
#   kernels (k_tree_*) and on the grid frame (k_frame_grid) alone in three more. Its cost
#   grows with every kernel's shared-memory traffic, so the whole --quick sets take too long
#   under it; the subsets launch every kernel of each engine on small shapes. CUB's kernels
#   (sort, scan) are not instrumented.
# PART (optional): all (default), check (ctest and memcheck) or race (racecheck and pytest),
# so that the two halves can run one after the other where a command's time is bounded; check
# splits again into check-ctest and check-mem (the memchecks), race into race-tree (the
# treecode's racecheck subsets, the longest part) and race-rest (the other programs'
# racecheck and pytest).
set -u
PARTS="all|check|check-ctest|check-mem|race|race-tree|race-rest"
BUILD=${1:?usage: tools/gpu-test.sh BUILD_DIR [$PARTS]}
PART=${2:-all}
case "|$PARTS|" in
  *"|$PART|"*) ;;
  *) echo "gpu-test: unknown part '$PART' ($PARTS)" >&2; exit 2 ;;
esac
# the parts each step belongs to: check = check-ctest + check-mem; race = race-tree + race-rest
in_ctest() { [ "$PART" = all ] || [ "$PART" = check ] || [ "$PART" = check-ctest ]; }
in_mem() { [ "$PART" = all ] || [ "$PART" = check ] || [ "$PART" = check-mem ]; }
in_tree() { [ "$PART" = all ] || [ "$PART" = race ] || [ "$PART" = race-tree ]; }
in_rest() { [ "$PART" = all ] || [ "$PART" = race ] || [ "$PART" = race-rest ]; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
  echo "gpu-test: no build directory '$1' (make gpu-test builds it)" >&2; exit 2; }
T=$BUILD/tests/gpu
status=0
t0=$(date +%s)
elapsed() { echo "   ($(( $(date +%s) - t0 )) s)"; }

if in_ctest; then
echo "== ctest -L gpu"
(cd "$BUILD" && ctest -L gpu --output-on-failure) || status=1
elapsed
fi

sanitize() { # tool program args...
  tool=$1; shift
  name=$(basename "$1")
  echo "== compute-sanitizer $tool: $name ${*#"$1"}"
  case $tool in
    memcheck) compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
                --error-exitcode 3 "$@" || status=1 ;;
    racecheck) compute-sanitizer --tool racecheck --kernel-name-exclude kns=cub \
                --error-exitcode 3 "$@" || status=1 ;;
    racecheck-top) compute-sanitizer --tool racecheck --kernel-name kns=k_build_top \
                --error-exitcode 3 "$@" || status=1 ;;
    racecheck-pass) compute-sanitizer --tool racecheck --kernel-name kns=k_tree_ \
                --error-exitcode 3 "$@" || status=1 ;;
    racecheck-frame) compute-sanitizer --tool racecheck --kernel-name kns=k_frame_grid \
                --error-exitcode 3 "$@" || status=1 ;;
  esac
  elapsed
}

if command -v compute-sanitizer >/dev/null 2>&1; then
  if in_mem; then
  for BIN in "$T"/test_*gpu; do
    [ -x "$BIN" ] && sanitize memcheck "$BIN" --quick
  done
  sanitize memcheck "$T/test_fmm3d_gpu" oom
  fi
  if in_rest; then
  sanitize racecheck "$T/test_gpu" --quick
  sanitize racecheck "$T/test_fmm2d_gpu" --quick
  sanitize racecheck "$T/test_fmm3d_gpu" --quick race
  fi
  if in_tree; then
  sanitize racecheck "$T/test_tree_gpu" --quick targets small_paths one_wait moments_fused super_one small_fold tickets
  # the first levels of a tree built level by level (k_build_top), alone: every kernel of
  # same_tree's 450 builds under racecheck takes too long
  sanitize racecheck-top "$T/test_tree_gpu" --quick same_tree
  # the trees built in one pass over the points (k_tree_points, k_tree_nodes), alone
  sanitize racecheck-pass "$T/test_tree_gpu" --quick same_tree
  # the frame of large sets by a grid of blocks (k_frame_grid), alone
  sanitize racecheck-frame "$T/test_tree_gpu" --quick frame_grid
  fi
else
  echo "gpu-test: compute-sanitizer missing; skipping the sanitizer runs" >&2
fi

if in_rest && [ -d "$ROOT/tests/python" ]; then
  echo "== pytest -m gpu"
  (cd "$ROOT" && PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" FMMKIT_LIBRARY="$BUILD/libfmmkit.so" \
     python3 -m pytest -q tests/python -m gpu)
  rc=$?
  # 5: no tests collected (no GPU tests written yet) is not a failure
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; fi
fi

[ $status -eq 0 ] && echo "gpu-test ($PART): all passed" || echo "gpu-test ($PART): FAILED" >&2
exit $status
