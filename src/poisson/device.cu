/* device.cu -- the device side of fmk_poisson_solve_device (device.h): pointer checks, the scan
 * for NaN and Inf, and copies. */
#include "poisson/device.h"

static fmk_status fail(struct fmk_poisson *s, cudaError_t e, const char *what)
{
    cudaGetLastError();
    return fmk_solver_fail(s, e == cudaErrorMemoryAllocation ? FMK_ERR_DEVICE_NOMEM : FMK_ERR_DEVICE,
                           "fmk_poisson_solve_device: %s: %s", what, cudaGetErrorString(e));
}

fmk_status fmk_poisson_dev_pointer(struct fmk_poisson *s, int device, const void *p,
                                   const char *name)
{
    cudaPointerAttributes a;
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "fmk_poisson_solve_device: %s is not CUDA device memory (%s)", name,
                               cudaGetErrorString(e));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "fmk_poisson_solve_device: %s is host memory; pass a pointer from "
                               "cudaMalloc (or fmk_poisson_solve for host arrays)",
                               name);
    if (a.type == cudaMemoryTypeDevice && a.device != device)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "fmk_poisson_solve_device: %s is memory of device %d; the solver "
                               "runs on device %d (opts.device)",
                               name, a.device, device);
    return FMK_OK;
}

__global__ void k_first_nonfinite(const double *__restrict__ d, int64_t n,
                                   unsigned long long *first)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if (!isfinite(d[i]))
            atomicMin(first, (unsigned long long)i);
}

fmk_status fmk_poisson_dev_first_nonfinite(struct fmk_poisson *s, int device, const double *d,
                                           int64_t n, int64_t *first, double *value)
{
    *first = -1;
    *value = 0;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return fail(s, e, "cudaSetDevice");
    unsigned long long *dm = NULL, h = ~0ull;
    if ((e = cudaMalloc((void **)&dm, sizeof h)) != cudaSuccess)
        return fail(s, e, "the scan for NaN and Inf");
    e = cudaMemcpy(dm, &h, sizeof h, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && n > 0) {
        const int64_t blocks = (n + 255) / 256;
        k_first_nonfinite<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256>>>(d, n, dm);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(&h, dm, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(dm);
    if (e == cudaSuccess && h != ~0ull) {
        *first = (int64_t)h;
        e = cudaMemcpy(value, d + h, sizeof *value, cudaMemcpyDeviceToHost);
    }
    return e == cudaSuccess ? FMK_OK : fail(s, e, "the scan for NaN and Inf");
}

fmk_status fmk_poisson_dev_copy(struct fmk_poisson *s, int device, void *dst, const void *src,
                                int64_t bytes, int dir, const char *what)
{
    cudaError_t e = cudaSetDevice(device);
    const cudaMemcpyKind kind = dir == FMK_POISSON_H2D   ? cudaMemcpyHostToDevice
                                : dir == FMK_POISSON_D2H ? cudaMemcpyDeviceToHost
                                                         : cudaMemcpyDeviceToDevice;
    if (e == cudaSuccess && bytes > 0)
        e = cudaMemcpy(dst, src, (size_t)bytes, kind);
    return e == cudaSuccess ? FMK_OK : fail(s, e, what);
}

/* range blockIdx.x: r[3 k] its first point, r[3 k + 1] its points, r[3 k + 2] where it goes */
__global__ void k_gather(double *dst, const double *__restrict__ src, int width,
                         const int64_t *__restrict__ r)
{
    const int64_t k = blockIdx.x, from = r[3 * k] * width, n = r[3 * k + 1] * width,
                  to = r[3 * k + 2] * width;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        dst[to + i] = src[from + i];
}

fmk_status fmk_poisson_dev_gather(struct fmk_poisson *s, int device, double *dst, const double *src,
                                  int width, int64_t n_ranges, const int64_t *ranges)
{
    if (n_ranges <= 0)
        return FMK_OK;
    int64_t *h = (int64_t *)malloc(sizeof(int64_t) * 3 * (size_t)n_ranges);
    if (!h)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "fmk_poisson_solve_device: out of host memory");
    int64_t at = 0;
    for (int64_t k = 0; k < n_ranges; k++) {
        h[3 * k] = ranges[2 * k], h[3 * k + 1] = ranges[2 * k + 1], h[3 * k + 2] = at;
        at += ranges[2 * k + 1];
    }
    int64_t *d = NULL;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&d, sizeof(int64_t) * 3 * (size_t)n_ranges);
    if (e == cudaSuccess)
        e = cudaMemcpy(d, h, sizeof(int64_t) * 3 * (size_t)n_ranges, cudaMemcpyHostToDevice);
    for (int64_t k0 = 0; e == cudaSuccess && k0 < n_ranges; k0 += 65535) {
        const int64_t nk = n_ranges - k0 < 65535 ? n_ranges - k0 : 65535;
        k_gather<<<(unsigned)nk, 256>>>(dst, src, width, d + 3 * k0);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    cudaFree(d);
    free(h);
    return e == cudaSuccess ? FMK_OK : fail(s, e, "the chosen blocks' copy");
}
