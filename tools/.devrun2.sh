#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
s0=$(date +%s); el() { echo "   ($(( $(date +%s) - s0 )) s)"; }
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DFMMKIT_OCTAVE=OFF > $OUT/cmake.log 2>&1 || exit 1
cmake --build build-gpu -j16 > $OUT/build.log 2>&1 || { grep -i error $OUT/build.log | head; exit 1; }
el
TB=build-gpu/tests; M=$TB/mpi
for t in test_mpi_let test_mpi_let_fmm test_sim_mpi; do echo "== $t gpu"; FMK_TEST_BACKEND=gpu timeout 120 mpirun --mca btl_vader_single_copy_mechanism none -x FMK_TEST_BACKEND -np 2 $M/$t > $OUT/$t.log 2>&1; echo "rc $?"; tail -3 $OUT/$t.log; done
el
echo "== poisson"; (cd build-gpu && timeout 200 ctest -R 'gpu_poisson$' --output-on-failure > $OUT/poisson.log 2>&1; echo "rc $?"; grep -n -i -E "fail|error" $OUT/poisson.log | head -30)
el
echo "== fmm3d"; (cd build-gpu && timeout 280 ctest -R 'gpu_fmm3d$' --timeout 270 --output-on-failure > $OUT/fmm3d.log 2>&1; echo "rc $?"; grep -n -i -E "fail|error" $OUT/fmm3d.log | head -30; tail -3 $OUT/fmm3d.log)
el
