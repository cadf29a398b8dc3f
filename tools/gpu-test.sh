#!/bin/sh
# GPU tests: ctest's "gpu" label, then the GPU test programs under compute-sanitizer, then the
# Python GPU tests. Usage: tools/gpu-test.sh BUILD_DIR [PART]. Exits non-zero on any failure.
#
# compute-sanitizer runs one program at a time (processes would share the GPU by time slices),
# over every GPU engine (direct, tree, 3D FMM, 2D FMM) on small sizes:
# - memcheck with leak checking on each program's --quick set (test_alloc_fail_gpu: a device
#   allocation failing at every place, per engine; test_interrupt_gpu: a call stopped at every
#   interrupt check), and on test_fmm3d_gpu's out-of-memory test (the failure path, which
#   --quick leaves out); API errors are not reported, because the tests provoke out-of-memory
#   errors on purpose;
# - synccheck (barriers and warp-synchronous calls: a __syncthreads that not every thread of a
#   block reaches, a shuffle with lanes missing from its mask) on the racecheck subsets below,
#   which launch every kernel of each engine on small shapes, and on the kernels of the tree
#   builds that racecheck takes alone;
# - racecheck on the named subsets below, and on k_build_top, on the one-pass build's
#   kernels (k_tree_*) and on the grid frame (k_frame_grid) alone in three more. Its cost
#   grows with every kernel's shared-memory traffic, so the whole --quick sets take too long
#   under it. CUB's kernels (sort, scan) are left out of racecheck and synccheck (NVIDIA's).
# PART (optional): all (default), check (ctest, memcheck and synccheck) or race (racecheck and
# pytest), so that the two halves can run one after the other where a command's time is
# bounded; check splits again into check-ctest, check-mem (the memchecks) and check-sync (the
# synchecks), race into race-tree (the treecode's racecheck subsets, the longest part) and
# race-rest (the other programs' racecheck and pytest). Each step prints the seconds since the
# start.
set -u
PARTS="all|check|check-ctest|check-mem|check-sync|race|race-tree|race-rest"
BUILD=${1:?usage: tools/gpu-test.sh BUILD_DIR [$PARTS]}
PART=${2:-all}
case "|$PARTS|" in
  *"|$PART|"*) ;;
  *) echo "gpu-test: unknown part '$PART' ($PARTS)" >&2; exit 2 ;;
esac
# the parts each step belongs to: check = check-ctest + check-mem + check-sync;
# race = race-tree + race-rest
in_ctest() { [ "$PART" = all ] || [ "$PART" = check ] || [ "$PART" = check-ctest ]; }
in_mem() { [ "$PART" = all ] || [ "$PART" = check ] || [ "$PART" = check-mem ]; }
in_sync() { [ "$PART" = all ] || [ "$PART" = check ] || [ "$PART" = check-sync ]; }
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

# sanitize TOOL KERNELS PROGRAM ARGS...: compute-sanitizer's TOOL on PROGRAM ARGS, on the
# kernels whose names contain KERNELS (all: every kernel; -: every kernel but CUB's).
sanitize() {
  tool=$1 kernels=$2; shift 2
  name=$(basename "$1")
  case $kernels in
    all) filter='' label='' ;;
    -) filter="--kernel-name-exclude kns=cub" label='' ;;
    *) filter="--kernel-name kns=$kernels" label=" ($kernels kernels)" ;;
  esac
  args="$*"
  echo "== compute-sanitizer $tool$label: $name ${args#"$1"}"
  case $tool in
    memcheck) extra="--leak-check full --report-api-errors no" ;;
    *) extra= ;;
  esac
  # shellcheck disable=SC2086 # filter and extra are lists of options
  compute-sanitizer --tool "$tool" $filter $extra --error-exitcode 3 "$@" || status=1
  elapsed
}

# racecheck or synccheck over the subsets that launch every kernel of each engine on small
# shapes: the direct sum, the 2D FMM, the 3D FMM (rest) or the treecode and its tree builds
# (tree); the builds' kernels of many trees alone (same_tree's 450 builds would take too long
# with every kernel).
subsets() { # TOOL rest|tree
  if [ "$2" = rest ]; then
    sanitize "$1" - "$T/test_gpu" --quick
    sanitize "$1" - "$T/test_fmm2d_gpu" --quick
    sanitize "$1" - "$T/test_fmm3d_gpu" --quick race
    # the several-vector kernels: synccheck only (racecheck takes minutes on its plans)
    [ "$1" = synccheck ] && sanitize "$1" - "$T/test_many_gpu" --quick
    # the Poisson solver's treecode: its GPU part on a hand-made tree, and the whole solve with
    # omega on the device (multipoles, support check, weights) on a small grid
    sanitize "$1" - "$T/test_poisson_tc_gpu"
    sanitize "$1" - "$T/test_poisson_device_gpu" --quick
  else
    sanitize "$1" - "$T/test_tree_gpu" --quick targets small_paths one_wait moments_fused \
      super_one small_fold tickets interactions
    # the first levels of a tree built level by level (k_build_top), alone
    sanitize "$1" k_build_top "$T/test_tree_gpu" --quick same_tree
    # the trees built in one pass over the points (k_tree_points, k_tree_nodes), alone
    sanitize "$1" k_tree_ "$T/test_tree_gpu" --quick same_tree
    # the frame of large sets by a grid of blocks (k_frame_grid), alone
    sanitize "$1" k_frame_grid "$T/test_tree_gpu" --quick frame_grid
  fi
}

if command -v compute-sanitizer >/dev/null 2>&1; then
  if in_mem; then
  for BIN in "$T"/test_*gpu; do
    [ -x "$BIN" ] && sanitize memcheck all "$BIN" --quick
  done
  sanitize memcheck all "$T/test_fmm3d_gpu" oom
  fi
  if in_sync; then
  subsets synccheck rest
  subsets synccheck tree
  fi
  if in_rest; then
  subsets racecheck rest
  fi
  if in_tree; then
  subsets racecheck tree
  fi
else
  echo "gpu-test: compute-sanitizer missing; skipping the sanitizer runs" >&2
fi

# the distributed plans' local work on the GPU: the MPI tests under mpirun with their local
# plans of backend cuda (FMK_TEST_BACKEND=gpu), where libfmmkit_mpi was built
M=$BUILD/tests/mpi
if in_rest && [ -x "$M/test_mpi_let" ] && command -v mpirun > /dev/null; then
  for t in test_mpi_let test_mpi_let_fmm test_sim_mpi; do
    [ -x "$M/$t" ] || continue
    echo "== mpirun -np 2 $t (FMK_TEST_BACKEND=gpu)"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 FMK_TEST_BACKEND=gpu \
      mpirun --oversubscribe -x FMK_TEST_BACKEND -np 2 "$M/$t" | tail -3
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  done
  elapsed
fi

if in_rest && [ -d "$ROOT/tests/python" ]; then
  echo "== pytest -m gpu"
  (cd "$ROOT" && PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" FMMKIT_LIBRARY="$BUILD/libfmmkit.so" \
     python3 -m pytest -q tests/python -m gpu)
  rc=$?
  # 5: no tests collected (no GPU tests written yet) is not a failure
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; fi
  elapsed
fi

[ $status -eq 0 ] && echo "gpu-test ($PART): all passed" || echo "gpu-test ($PART): FAILED" >&2
exit $status
