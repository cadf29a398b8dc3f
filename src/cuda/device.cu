/* device.cu -- CUDA device queries, device selection and error reporting for the GPU engine. */
#include <stdio.h>
#include <string.h>

#include "cuda/device.h"

extern "C" int fmk_cuda_count_devices(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: 0 devices, never an error */
        return 0;
    }
    return n;
}

extern "C" fmk_status fmk_cuda_device_name(fmk_plan *plan, int device, char *name, size_t size)
{
    cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        if (size)
            name[0] = '\0';
        return fmk_cuda_fail(plan, err, "cudaGetDeviceProperties");
    }
    if (size)
        snprintf(name, size, "%s", prop.name);
    return FMK_OK;
}

extern "C" int fmk_cuda_sm_count(int device)
{
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return n > 0 ? n : 1;
}

extern "C" fmk_status fmk_cuda_fail(fmk_plan *plan, cudaError_t err, const char *call)
{
    (void)cudaGetLastError(); /* clear it when it is not sticky */
    if (err == cudaErrorMemoryAllocation)
        return fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM, "%s: out of GPU memory (%s)", call,
                             cudaGetErrorString(err));
    return fmk_error_set(plan, FMK_ERR_DEVICE, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                         cudaGetErrorName(err));
}

extern "C" fmk_status fmk_cuda_alloc(fmk_plan *plan, void **ptr, size_t bytes, const char *what,
                                     long long total)
{
    *ptr = NULL;
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err == cudaSuccess)
        return FMK_OK;
    *ptr = NULL;
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        (void)cudaGetLastError(), free_b = 0;
    if (err == cudaErrorMemoryAllocation)
        return fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                             "out of GPU memory: %s needs %zu bytes; the plan needs %lld bytes "
                             "(%.1f MiB) on the GPU and %zu bytes (%.1f MiB) are free",
                             what, bytes, total, total / 1048576.0, free_b, free_b / 1048576.0);
    return fmk_error_set(plan, FMK_ERR_DEVICE, "cudaMalloc of %zu bytes for %s failed: %s", bytes,
                         what, cudaGetErrorString(err));
}

extern "C" fmk_status fmk_cuda_enter(fmk_plan *plan, int device, int *prev)
{
    *prev = device;
    cudaError_t err = cudaGetDevice(prev);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaGetDevice");
    if (*prev != device) {
        err = cudaSetDevice(device);
        if (err != cudaSuccess) {
            *prev = device;
            return fmk_cuda_fail(plan, err, "cudaSetDevice");
        }
    }
    return FMK_OK;
}

extern "C" void fmk_cuda_leave(int device, int prev)
{
    if (prev != device && cudaSetDevice(prev) != cudaSuccess)
        (void)cudaGetLastError();
}

extern "C" fmk_status fmk_cuda_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s,
                                                 int64_t nt, const double *d_t,
                                                 fmk_cuda_points_fn points)
{
    /* the contract: on failure the plan has no points; an engine that reuses its state
     * (fmk_engine.reuses_state) gets the previous points' state back through the drop */
    void *keep = plan->engine->reuses_state ? plan->state : NULL;
    if (keep)
        plan->state = NULL;
    fmk_plan_drop_points(plan);
    if (keep)
        plan->state = keep;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK) {
        fmk_plan_drop_points(plan);
        return st;
    }
    st = points(plan, ns, d_s, nt, d_t);
    if (st != FMK_OK)
        fmk_plan_drop_points(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

extern "C" fmk_status fmk_cuda_eval(fmk_plan *plan, const double *charges, double *pot,
                                    double *grad, int on_device, fmk_cuda_eval_fn run)
{
    if (!plan->state)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the GPU engine %s has no state",
                             plan->engine->name);
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK)
        return st;
    st = run(plan, charges, pot, grad, on_device);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}
