#!/bin/sh
# GPU tests: ctest's "gpu" label, then every GPU test program under compute-sanitizer (memcheck
# with leak checking on the quick set, racecheck on the quick set; API errors are not reported
# because the test provokes an out-of-memory on purpose), then the Python GPU tests if
# any. Usage: tools/gpu-test.sh BUILD_DIR. Exits non-zero on any failure.
set -u
BUILD=${1:?usage: tools/gpu-test.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
status=0

echo "== ctest -L gpu"
(cd "$BUILD" && ctest -L gpu --output-on-failure) || status=1

# Every GPU test program, small sizes (--quick leaves out the out-of-memory cases), under
# compute-sanitizer: memcheck with leak checking, then racecheck.
if command -v compute-sanitizer >/dev/null 2>&1; then
  for BIN in "$BUILD"/tests/gpu/test_*gpu; do
    [ -x "$BIN" ] || continue
    name=$(basename "$BIN")
    echo "== compute-sanitizer memcheck (leak check), $name"
    compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 3 "$BIN" --quick || status=1
    echo "== compute-sanitizer racecheck, $name"
    compute-sanitizer --tool racecheck --error-exitcode 3 "$BIN" --quick || status=1
  done
else
  echo "gpu-test: compute-sanitizer missing; skipping the sanitizer runs" >&2
fi

if [ -d "$ROOT/tests/python" ]; then
  echo "== pytest -m gpu"
  (cd "$ROOT" && PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" FMMKIT_LIBRARY="$BUILD/libfmmkit.so" \
     python3 -m pytest -q tests/python -m gpu)
  rc=$?
  # 5: no tests collected (no GPU tests written yet) is not a failure
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; fi
fi

[ $status -eq 0 ] && echo "gpu-test: all passed" || echo "gpu-test: FAILED" >&2
exit $status
