/* test_stress_gpu.c -- the accuracy-under-stress suite (tests/stress/stress.h) on the CUDA
 * backend: the same case table, point sets and reference as the CPU run (test_stress), each
 * GPU result within its bound of the compensated direct sum or refused with a status and a
 * message; combinations a GPU engine does not take print N/A. --quick: 300 points per set
 * (the sanitizer runs of tools/gpu-test.sh). Exit 77 without a GPU. */
#include <stdio.h>
#include <string.h>

#include "stress.h"

int main(int argc, char **argv)
{
    if (fmk_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    stress_config c;
    stress_config_default(&c, FMK_BACKEND_CUDA, quick ? 300 : 1600);
    return stress_run(&c);
}
