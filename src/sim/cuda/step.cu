/* step.cu -- the leapfrog's kernels on the device state (step.c has the same arithmetic on the
 * host): the drift into the next buffer, the comoving background term, the check that the new
 * forces are finite, and the two kicks in one pass followed by the swap of the buffers. */
#include "sim/cuda/sim_cuda.cuh"

using namespace fmk_sim_cuda_detail;

namespace {

/* x1 = x + (v + a k1) d over the 3n coordinates (Newtonian: k1 = dt/2, d = dt). */
__global__ void k_drift(int64_t m, const double *x, const double *v, const double *a, double k1,
                        double d, double *x1)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < m;
         k += (int64_t)gridDim.x * blockDim.x)
        x1[k] = x[k] + (v[k] + a[k] * k1) * d;
}

/* v = (v + a k1) + a1 k2 (Newtonian: k1 = k2 = dt/2). */
__global__ void k_kick(int64_t m, double *v, const double *a, const double *a1, double k1,
                       double k2)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < m;
         k += (int64_t)gridDim.x * blockDim.x)
        v[k] = (v[k] + a[k] * k1) + a1[k] * k2;
}

/* a = a + c x (comoving: the background's attraction taken out; forces.c on the host). */
__global__ void k_background(int64_t m, const double *x, double c, double *a)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < m;
         k += (int64_t)gridDim.x * blockDim.x)
        a[k] = a[k] + c * x[k];
}

/* The smallest index whose acceleration or potential (either NULL: not checked) is not
 * finite, into *bad (which starts at ~0). */
__global__ void k_check(int64_t n, const double *acc, const double *pot, unsigned long long *bad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if ((pot && !isfinite(pot[i])) ||
            (acc &&
             (!isfinite(acc[3 * i]) || !isfinite(acc[3 * i + 1]) || !isfinite(acc[3 * i + 2]))))
            atomicMin(bad, (unsigned long long)i);
}

} // namespace

fmk_status fmk_sim_cuda_sync(fmk_sim_cuda *d, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    return launched("the step's kernels", msg, cap, 1);
}

fmk_status fmk_sim_cuda_drift(fmk_sim_cuda *d, double k1, double dd, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    const int c = d->cur;
    k_drift<<<blocks_for(3 * d->n), THREADS>>>(3 * d->n, d->d_pos[c], d->d_vel, d->d_acc[c], k1, dd,
                                               d->d_pos[1 - c]);
    return launched("the drift", msg, cap);
}

fmk_status fmk_sim_cuda_background(fmk_sim_cuda *d, double c, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    const int nx = 1 - d->cur;
    k_background<<<blocks_for(3 * d->n), THREADS>>>(3 * d->n, d->d_pos[nx], c, d->d_acc[nx]);
    return launched("the background term", msg, cap);
}

fmk_status fmk_sim_cuda_check(fmk_sim_cuda *d, const double *acc, const double *pot, int64_t *bad,
                              char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    cudaError_t err = cudaMemset(d->d_flag, 0xff, sizeof(unsigned long long));
    if (err != cudaSuccess)
        return fail(err, "the forces' check", msg, cap);
    k_check<<<blocks_for(d->n), THREADS>>>(d->n, acc, pot, d->d_flag);
    unsigned long long first = 0;
    err = cudaGetLastError();
    if (err == cudaSuccess) /* waits for the check: the one 8-byte transfer of a step */
        err = cudaMemcpy(&first, d->d_flag, sizeof first, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fail(err, "the forces' check", msg, cap);
    *bad = first == ~0ull ? -1 : (int64_t)first;
    return FMK_OK;
}

fmk_status fmk_sim_cuda_kick_swap(fmk_sim_cuda *d, double k1, double k2, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    const int c = d->cur;
    k_kick<<<blocks_for(3 * d->n), THREADS>>>(3 * d->n, d->d_vel, d->d_acc[c], d->d_acc[1 - c], k1,
                                              k2);
    fmk_status st = launched("the kick", msg, cap);
    if (st == FMK_OK)
        d->cur = 1 - c;
    return st;
}
