#!/bin/sh
# Checks what building and testing fmmkit needs; installs what is missing when it can
# (apt-get as root for system packages, pip for Python packages), else says what to install.
set -e
missing=""
for tool in cmake make cc c++; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing build tools:$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake make gcc g++ >/dev/null
  else
    echo "fmmkit: missing:$missing -- install them (Debian: apt-get install cmake make gcc g++)" >&2
    exit 1
  fi
fi
# FFTW3 for the Poisson solver's method fft (optional: without it that method is unavailable,
# and CMake says so).
fftw_ok() {
  { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists fftw3; } ||
    [ -f /usr/include/fftw3.h ]
}
if ! fftw_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing FFTW3 for the Poisson solver's FFT method"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libfftw3-dev >/dev/null
  else
    echo "fmmkit: FFTW3 is missing, so the Poisson solver's method fft will not be built" \
      "(Debian: apt-get install libfftw3-dev)" >&2
  fi
fi
# HDF5 (serial) and libpng for the simulation driver's snapshots, restart files and PNG
# projections (optional: without them those calls are unavailable, and CMake says so).
hdf5_ok() {
  { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists hdf5; } ||
    [ -f /usr/include/hdf5/serial/hdf5.h ] || [ -f /usr/include/hdf5.h ]
}
if ! hdf5_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing HDF5 for the simulation driver's snapshots and restart files"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libhdf5-dev >/dev/null
  else
    echo "fmmkit: HDF5 is missing, so simulation snapshots and restart files will not be built" \
      "(Debian: apt-get install libhdf5-dev)" >&2
  fi
fi
png_ok() {
  { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libpng; } ||
    [ -f /usr/include/png.h ]
}
if ! png_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing libpng for the simulation driver's PNG projections"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpng-dev >/dev/null
  else
    echo "fmmkit: libpng is missing, so simulation PNG projections will not be built" \
      "(Debian: apt-get install libpng-dev)" >&2
  fi
fi
# Open MPI for libfmmkit_mpi, the distributed plans, and their tests under mpirun (optional:
# without it they are not built, and CMake says so).
mpi_ok() {
  command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1
}
if [ "${FMMKIT_NEED_MPI:-1}" = 1 ] && ! mpi_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing Open MPI for the distributed plans (libfmmkit_mpi)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenmpi-dev openmpi-bin >/dev/null
  else
    echo "fmmkit: MPI is missing, so the distributed plans (libfmmkit_mpi) will not be built" \
      "(Debian: apt-get install libopenmpi-dev openmpi-bin)" >&2
  fi
fi
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip >/dev/null
    PY=$(command -v python3)
  else
    echo "fmmkit: python3 is missing (Debian: apt-get install python3 python3-pip)" >&2
    exit 1
  fi
fi
if [ "${FMMKIT_NEED_PYTHON_TEST_DEPS:-1}" = 1 ] && ! "$PY" -c "import numpy, pytest" >/dev/null 2>&1; then
  echo "fmmkit: installing numpy and pytest for the tests"
  "$PY" -m pip install --quiet numpy pytest 2>/dev/null ||
    "$PY" -m pip install --quiet --break-system-packages numpy pytest || {
      echo "fmmkit: could not install numpy and pytest (pip install numpy pytest)" >&2
      exit 1
    }
fi
# h5py checks the simulation snapshots' HDF5 layout (tests/python/test_sim_io.py, skipped
# without it).
if [ "${FMMKIT_NEED_PYTHON_TEST_DEPS:-1}" = 1 ] && ! "$PY" -c "import h5py" >/dev/null 2>&1; then
  echo "fmmkit: installing h5py for the tests"
  "$PY" -m pip install --quiet h5py 2>/dev/null ||
    "$PY" -m pip install --quiet --break-system-packages h5py 2>/dev/null ||
    echo "fmmkit: could not install h5py (pip install h5py); the HDF5 layout test will be" \
      "skipped" >&2
fi
# mpi4py for fmmkit.Plan(comm=...) (tests/python/test_mpi_plan.py under mpirun, skipped
# without it): pip compiles it against the Open MPI found above; a failure only skips that test.
if [ "${FMMKIT_NEED_PYTHON_TEST_DEPS:-1}" = 1 ] && mpi_ok && ! "$PY" -c "import mpi4py" >/dev/null 2>&1; then
  echo "fmmkit: installing mpi4py for the distributed-plan tests"
  "$PY" -m pip install --quiet mpi4py 2>/dev/null ||
    "$PY" -m pip install --quiet --break-system-packages mpi4py 2>/dev/null ||
    echo "fmmkit: could not install mpi4py (pip install mpi4py); the Python MPI tests will be" \
      "skipped" >&2
fi
# The fuzz harnesses (`make fuzz`, FMMKIT_NEED_FUZZ=1): clang with libFuzzer and the sanitizer
# runtimes (Debian keeps those in libclang-rt-dev, which clang only recommends).
fuzz_toolchain_ok() {
  tmp=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ return 0; }\n' \
    >"$tmp/probe.c"
  clang -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1
  rc=$?
  rm -rf "$tmp"
  return $rc
}
if [ "${FMMKIT_NEED_FUZZ:-0}" = 1 ] && ! fuzz_toolchain_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing clang and libFuzzer for the fuzz harnesses"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev >/dev/null
  fi
  if ! fuzz_toolchain_ok; then
    echo "fmmkit: clang with libFuzzer is missing (Debian: apt-get install clang libclang-rt-dev)" >&2
    exit 1
  fi
fi
