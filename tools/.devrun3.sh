#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
s0=$(date +%s); el() { echo "   ($(( $(date +%s) - s0 )) s)"; }
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFMMKIT_OCTAVE=OFF > $OUT/cmake.log 2>&1 || exit 1
cmake --build build-gpu -j16 > $OUT/build.log 2>&1 || { grep -i error $OUT/build.log | head; exit 1; }
el
BB=build-gpu/bench
echo "== sim"; BENCH_SIM_PHASES=1 timeout 150 $BB/bench_sim_gpu --min-log2 16 --max-log2 22 --only "tree fp32" --steps 40 2>&1 | tail -40
el
echo "== tree"; timeout 60 $BB/bench_tree --headline 2>&1 | tail -4
el
echo "== ctest gpu"; (cd build-gpu && timeout 400 ctest -L gpu -E "gpu_fmm3d$|gpu_fmm2d" -j2 --timeout 300 --output-on-failure > $OUT/ctest.log 2>&1; tail -25 $OUT/ctest.log)
el
