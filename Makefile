# fmmkit: the two commands of the quick start are `make demo` and `make test`.
#   make demo       build (CPU + CUDA backend when nvcc is found) and run `fmmkit demo`
#   make test       unit, CLI and Python tests on the CPU (ctest), the MPI tests (1-4 ranks
#                   under mpirun) when MPI is found, the Octave tests when Octave is found
#   make test-asan  the same tests built with AddressSanitizer + UndefinedBehaviorSanitizer
#   make gpu-test   on a GPU machine: GPU tests (sm_90) plus compute-sanitizer memcheck,
#                   synccheck and racecheck (GPU_TEST_PART=check or race: one half of
#                   tools/gpu-test.sh; check-ctest, check-mem, check-sync, race-tree,
#                   race-rest: the halves' parts)
#   make bench      on a GPU machine: the benchmark tables (bench/RESULTS.md records them)
#   make install    cmake --install (PREFIX=/usr/local)
#   make wheel-test the Python wheel alone (also part of `make test`, label wheel): built by pip
#                   (CPU only), repaired by auditwheel, tested in a fresh venv (tools/wheel.sh)
#   make fuzz       libFuzzer harnesses (clang, ASan + UBSan) of the .npy reader and the C API,
#                   each run FUZZ_SECONDS (default 60); fails on any crash (tests/fuzz/run.sh)
#   make format     clang-format (16 or later; `pip install clang-format`) over the C/CUDA sources
MAKEFLAGS += --no-print-directory
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=
CUDA_ARCH ?= 90
GPU_TEST_PART ?= all
FUZZ_SECONDS ?= 60

.PHONY: all deps build demo test test-asan wheel-test fuzz gpu-test bench install format clean

all: build

deps:
	@sh tools/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	@$(BUILD)/cli/fmmkit demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -LE gpu -j$(JOBS)

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
	  -DFMMKIT_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j$(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -LE gpu -j$(JOBS)

# The wheel lands in build-wheel/wheelhouse/ (repaired) and build-wheel/dist/ (as pip built it).
wheel-test: deps
	@sh tools/wheel.sh build-wheel

# Built without OpenMP (the harnesses run one thread; clang's OpenMP runtime may be absent).
fuzz:
	@FMMKIT_NEED_FUZZ=1 FMMKIT_NEED_PYTHON_TEST_DEPS=0 FMMKIT_NEED_OCTAVE=0 sh tools/deps.sh
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DFMMKIT_FUZZ=ON -DFMMKIT_TESTS=OFF -DFMMKIT_CUDA=OFF \
	  -DCMAKE_DISABLE_FIND_PACKAGE_OpenMP=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzz_npy fuzz_api
	@sh tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

gpu-test:
	@FMMKIT_NEED_PYTHON_TEST_DEPS=0 FMMKIT_NEED_OCTAVE=0 sh tools/deps.sh
	@cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) >/dev/null
	@cmake --build build-gpu -j$(JOBS)
	@sh tools/gpu-test.sh build-gpu $(GPU_TEST_PART)

bench:
	@FMMKIT_NEED_PYTHON_TEST_DEPS=0 FMMKIT_NEED_OCTAVE=0 sh tools/deps.sh
	@cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) >/dev/null
	@cmake --build build-gpu -j$(JOBS)
	@sh tools/bench.sh build-gpu

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# Generated files (src/treecode/bh_local.h, written by tools/bh_local.py) are left alone.
format:
	@command -v clang-format >/dev/null || python3 -m pip install -q clang-format
	@git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'cli/*.c' 'cli/*.h' 'tests/*.c' \
	  'tests/*.h' 'bench/*.c' 'bench/*.h' 'examples/*.c' 'include/*.h' 'matlab/*.c' | grep -v bh_local.h | \
	  xargs clang-format -i --style=file

clean:
	rm -rf build build-asan build-gpu build-fuzz build-wheel
