/* reduce.cu -- reductions over the device state: the diagnostics (energies, momentum, angular
 * momentum, diag.c's sums), the adaptive step's largest |a|^2 / l^2, and the first bad value of
 * device input. Two passes of fixed shape (at most REDUCE_BLOCKS blocks, then one block over
 * their results), each a tree in shared memory: no atomics, so a reduction of the same values
 * gives the same bits every time. Computed only when asked (a diagnostics row, fmk_sim_info_get,
 * an adaptive step). */
#include "sim/cuda/sim_cuda.cuh"

using namespace fmk_sim_cuda_detail;

namespace {

enum op { SUM, MAX, MIN };

__device__ __forceinline__ double combine(op o, double a, double b)
{
    return o == SUM ? a + b : o == MAX ? fmax(a, b) : fmin(a, b);
}

__device__ __forceinline__ double identity(op o)
{
    return o == SUM ? 0.0 : o == MAX ? -HUGE_VAL : HUGE_VAL;
}

/* The K values of a block's threads reduced into out[0..K) (shared memory: THREADS K). */
template <int K> __device__ void block_reduce(op o, double *v, double *out)
{
    __shared__ double s[K][THREADS];
    for (int k = 0; k < K; k++)
        s[k][threadIdx.x] = v[k];
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            for (int k = 0; k < K; k++)
                s[k][threadIdx.x] = combine(o, s[k][threadIdx.x], s[k][threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < K; k++)
            out[k] = s[k][0];
}

/* Pass 1: each block's threads fold particles i (grid stride) through f into K values. */
template <int K, class F> __global__ void k_reduce(int64_t n, op o, F f, double *partial)
{
    double v[K];
    for (int k = 0; k < K; k++)
        v[k] = identity(o);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double w[K];
        f(i, w);
        for (int k = 0; k < K; k++)
            v[k] = combine(o, v[k], w[k]);
    }
    block_reduce<K>(o, v, partial + (int64_t)blockIdx.x * K);
}

/* Pass 2: one block over the blocks' results. */
template <int K> __global__ void k_reduce_final(int blocks, op o, double *partial)
{
    double v[K];
    for (int k = 0; k < K; k++)
        v[k] = identity(o);
    for (int b = threadIdx.x; b < blocks; b += blockDim.x)
        for (int k = 0; k < K; k++)
            v[k] = combine(o, v[k], partial[(int64_t)b * K + k]);
    __syncthreads(); /* every thread has read partial before block 0's results overwrite it */
    block_reduce<K>(o, v, partial);
}

template <int K, class F>
fmk_status reduce(fmk_sim_cuda *d, int64_t n, op o, F f, double *out, const char *what, char *msg,
                  size_t cap)
{
    cudaSetDevice(d->device);
    int blocks = (int)((n + THREADS - 1) / THREADS);
    blocks = blocks < 1 ? 1 : blocks > REDUCE_BLOCKS ? REDUCE_BLOCKS : blocks;
    k_reduce<K><<<blocks, THREADS>>>(n, o, f, d->d_partial);
    k_reduce_final<K><<<1, THREADS>>>(blocks, o, d->d_partial);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaMemcpy(out, d->d_partial, K * sizeof(double), cudaMemcpyDeviceToHost);
    return err == cudaSuccess ? FMK_OK : fail(err, what, msg, cap);
}

struct energies {
    const double *x, *v, *m, *pot;
    __device__ void operator()(int64_t i, double *w) const
    {
        const double mi = m[i], *xi = x + 3 * i, *vi = v + 3 * i;
        w[0] = 0.5 * mi * (vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2]);
        w[1] = -0.5 * mi * pot[i];
        for (int k = 0; k < 3; k++)
            w[2 + k] = mi * vi[k];
        w[5] = mi * (xi[1] * vi[2] - xi[2] * vi[1]);
        w[6] = mi * (xi[2] * vi[0] - xi[0] * vi[2]);
        w[7] = mi * (xi[0] * vi[1] - xi[1] * vi[0]);
    }
};

/* The comoving diagnostics' sums (diag.c, fmk_sim_comoving_sums). */
struct comoving_sums {
    const double *x, *v, *m, *pot;
    __device__ void operator()(int64_t i, double *w) const
    {
        const double mi = m[i], *xi = x + 3 * i, *vi = v + 3 * i;
        w[0] = 0.5 * mi * (vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2]);
        w[1] = -0.5 * mi * pot[i];
        w[2] = mi * (xi[0] * xi[0] + xi[1] * xi[1] + xi[2] * xi[2]);
    }
};

struct acc_over_length {
    const double *a, *soft;
    double scale, s;
    __device__ void operator()(int64_t i, double *w) const
    {
        const double *ai = a + 3 * i, l = scale * (soft ? soft[i] : s);
        w[0] = (ai[0] * ai[0] + ai[1] * ai[1] + ai[2] * ai[2]) / (l * l);
    }
};

/* The particle's index where a value is bad, else n (a minimum picks the first). */
struct bad_input {
    const double *m, *x, *v;
    int64_t n;
    __device__ void operator()(int64_t i, double *w) const
    {
        const double *xi = x + 3 * i, *vi = v + 3 * i, none = (double)n, at = (double)i;
        w[0] = isfinite(m[i]) && m[i] > 0 ? none : at;
        w[1] = isfinite(xi[0]) && isfinite(xi[1]) && isfinite(xi[2]) ? none : at;
        w[2] = isfinite(vi[0]) && isfinite(vi[1]) && isfinite(vi[2]) ? none : at;
    }
};

} // namespace

fmk_status fmk_sim_cuda_diagnostics(const fmk_sim_cuda *dc, double out[8], char *msg, size_t cap)
{
    fmk_sim_cuda *d = (fmk_sim_cuda *)dc; /* the reduction's scratch is not the state */
    const energies f = {d->d_pos[d->cur], d->d_vel, d->d_mass, d->d_pot[d->cur]};
    return reduce<8>(d, d->n, SUM, f, out, "the diagnostics", msg, cap);
}

fmk_status fmk_sim_cuda_comoving_sums(const fmk_sim_cuda *dc, double out[3], char *msg, size_t cap)
{
    fmk_sim_cuda *d = (fmk_sim_cuda *)dc; /* the reduction's scratch is not the state */
    const comoving_sums f = {d->d_pos[d->cur], d->d_vel, d->d_mass, d->d_pot[d->cur]};
    return reduce<3>(d, d->n, SUM, f, out, "the comoving diagnostics", msg, cap);
}

fmk_status fmk_sim_cuda_max_acc(fmk_sim_cuda *d, double scale, double soft, double *value,
                                char *msg, size_t cap)
{
    const acc_over_length f = {d->d_acc[d->cur], d->d_soft, scale, soft};
    return reduce<1>(d, d->n, MAX, f, value, "the adaptive step", msg, cap);
}

fmk_status fmk_sim_cuda_first_bad(fmk_sim_cuda *d, const double *d_mass, const double *d_pos,
                                  const double *d_vel, int64_t bad[3], char *msg, size_t cap)
{
    const bad_input f = {d_mass, d_pos, d_vel, d->n};
    double v[3];
    fmk_status st = reduce<3>(d, d->n, MIN, f, v, "checking the device arrays", msg, cap);
    for (int k = 0; k < 3; k++)
        bad[k] = st == FMK_OK && v[k] < (double)d->n ? (int64_t)v[k] : -1;
    return st;
}
