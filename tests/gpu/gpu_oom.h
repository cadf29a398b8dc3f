/* gpu_oom.h -- the out-of-device-memory check the GPU test programs share (include after
 * check.h): all but 2 MB of the device's free memory is taken, then fmk_plan_set_points of the n
 * points x (targets = sources) must return FMK_ERR_DEVICE_NOMEM with the bytes in its message,
 * twice. A leak on that path loses memory at every refusal, so the second refusal must leave the
 * free device memory exactly as the first left it; the first may take at most one 2 MB page of
 * the CUDA runtime's own, kept after a first use in the process (a page of small allocations,
 * a kernel module loaded at its first launch: seen after many earlier tests in one process,
 * not when the check runs alone). compute-sanitizer's leak check (make gpu-test) checks the
 * rest. Returns the memory it took: the caller runs its own checks under that pressure, then
 * cudaFree()s it and checks that the plan works again. */
#ifndef FMK_GPU_OOM_H
#define FMK_GPU_OOM_H

#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"

static void *gpu_oom_set_points(fmk_plan *p, int64_t n, const double *x)
{
    size_t free0 = 0, total = 0;
    cudaMemGetInfo(&free0, &total);
    void *hog = NULL;
    size_t want = free0 > (4u << 20) ? free0 - (2u << 20) : 0;
    while (want > 0 && cudaMalloc(&hog, want) != cudaSuccess) {
        cudaGetLastError();
        want -= 1u << 20;
    }
    size_t free1 = 0, free2 = 0, free3 = 0;
    cudaMemGetInfo(&free1, &total);
    for (int k = 0; k < 2; k++) {
        fmk_status st = fmk_plan_set_points(p, n, x, 0, NULL);
        CHECK_MSG(st == FMK_ERR_DEVICE_NOMEM, "status %d (%s)", (int)st, fmk_plan_last_error(p));
        CHECK_MSG(strstr(fmk_plan_last_error(p), "bytes") != NULL, "message: %s",
                  fmk_plan_last_error(p));
        cudaMemGetInfo(k ? &free3 : &free2, &total);
    }
    CHECK_MSG(free2 + (2u << 20) >= free1,
              "device memory lost at the first refusal: %zu -> %zu free", free1, free2);
    CHECK_MSG(free3 == free2, "device memory leaked by a refused set_points: %zu -> %zu free",
              free2, free3);
    return hog;
}

#endif /* FMK_GPU_OOM_H */
