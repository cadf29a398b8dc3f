/* p2p_many.cu -- the GPU direct sum of several charge vectors in one pass (eval_many,
 * p2p_many.h): p2p.cu's tiled all-pairs kernel for the 3D radial kernels (laplace, plummer,
 * regularized), with NV = 2 or 4 vectors. A block owns THREADS * T targets and walks the sources
 * in tiles staged in shared memory with every vector's charge; each pair's offset, 1/r and the
 * kernel's factors (pair.h's _k forms) are made once, then applied to each vector's charge. A
 * tile is summed in the working precision and added into double totals, as p2p.cu does; source
 * ranges (blockIdx.y) keep partial sums that a second kernel adds in a fixed order. */
#include <math.h>

#include "direct/cuda/p2p_many.h"
#include "kernels/rsqrt.cuh"

namespace {

constexpr int THREADS = 128, T = 2;

template <typename R> struct tile_of;
template <> struct tile_of<float> {
    static constexpr int TILE = 256;
};
template <> struct tile_of<double> {
    static constexpr int TILE = 128;
};
static_assert(FMK_CUDA_PAD % (THREADS * T) == 0 && FMK_CUDA_PAD % 256 == 0, "padding");

#define FMK_PAIR_FN static __device__ __forceinline__
#define RSQRT(x) rsqrt_plain(x)
#define PAIR(name) mpair_##name
#define REAL float
#define PAIR_T(name) mpair_##name##_f32
#include "kernels/pair.h"
#undef REAL
#undef PAIR_T
#define REAL double
#define PAIR_T(name) mpair_##name##_f64
#include "kernels/pair.h"
#undef REAL
#undef PAIR_T
#undef PAIR
#undef RSQRT
#undef FMK_PAIR_FN

template <typename R, int NV> struct many_params {
    const typename vec4<R>::type *src, *trg;
    const R *q;
    int64_t n_pad, m;
    int splits, self;
    double *pot, *grad, *partial;
    int pe[NV], ge[NV];
    R eps2, e15, e25;
};

/* One source at this thread's target (tx, ty, tz) for NV vectors, added into acc (working
 * units); skip: the smooth kernels' self term. p2p.cu's pair(), the charges applied last. */
template <typename R, int K, bool POT, bool GRAD, int NV>
__device__ __forceinline__ void pair_many(R tx, R ty, R tz, R sx, R sy, R sz, const R *q,
                                          R (&acc)[NV][4], const many_params<R, NV> &p, bool skip)
{
    const R dx = tx - sx, dy = ty - sy, dz = tz - sz;
    const R r2 = dx * dx + dy * dy + dz * dz;
    R rinv;
    if constexpr (K == FMK_KERNEL_LAPLACE && sizeof(R) == 4)
        rinv = fminf(rsqrtf(r2), r2); /* p2p.cu: r2 is 0 or >= 1 (coordinates times 2^23) */
    else if constexpr (K == FMK_KERNEL_LAPLACE)
        rinv = rsqrt_masked(r2);
    else
        rinv = rsqrt_plain(r2 + p.eps2);
    auto k = K == FMK_KERNEL_REGULARIZED ? mpair_regularized_k(rinv, rinv * rinv, r2, p.e15, p.e25)
                                         : mpair_laplace_k(rinv);
    if (skip)
        k.pot = 0, k.g = 0;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        if (POT)
            acc[v][0] += q[v] * k.pot;
        if (GRAD) {
            const R g = q[v] * k.g;
            acc[v][1] -= g * dx, acc[v][2] -= g * dy, acc[v][3] -= g * dz;
        }
    }
}

/* Target blocks block0 + blockIdx.x, source range blockIdx.y (of splits). */
template <typename R, int K, bool POT, bool GRAD, int NV>
__global__ void __launch_bounds__(THREADS) k_p2p_many(const many_params<R, NV> p, int64_t block0)
{
    typedef typename vec4<R>::type V;
    constexpr int TILE = tile_of<R>::TILE;
    constexpr bool smooth = K == FMK_KERNEL_PLUMMER || K == FMK_KERNEL_REGULARIZED;
    __shared__ V tile[TILE];
    __shared__ R tq[TILE][NV];
    __shared__ double tot[T][NV][4][THREADS]; /* p2p.cu: totals in shared memory */
    const int64_t ntiles = p.n_pad / TILE;
    const int64_t t0 = ntiles * blockIdx.y / p.splits, t1 = ntiles * (blockIdx.y + 1) / p.splits;
    const int64_t i0 = ((int64_t)blockIdx.x + block0) * (THREADS * T);
    const int64_t i = i0 + threadIdx.x;
    const V *trg = p.self ? p.src : p.trg;
    R tx[T], ty[T], tz[T];
#pragma unroll
    for (int k = 0; k < T; k++) {
        const V y = trg[i + k * THREADS];
        tx[k] = y.x, ty[k] = y.y, tz[k] = y.z;
#pragma unroll
        for (int v = 0; v < NV; v++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                tot[k][v][c][threadIdx.x] = 0;
    }
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j0 = t * TILE;
        for (int l = threadIdx.x; l < TILE; l += THREADS) {
            tile[l] = p.src[j0 + l];
#pragma unroll
            for (int v = 0; v < NV; v++)
                tq[l][v] = p.q[v * p.n_pad + j0 + l];
        }
        __syncthreads();
        R acc[T][NV][4];
#pragma unroll
        for (int k = 0; k < T; k++)
#pragma unroll
            for (int v = 0; v < NV; v++)
                acc[k][v][0] = acc[k][v][1] = acc[k][v][2] = acc[k][v][3] = 0;
        const bool mask = smooth && p.self && j0 < i0 + THREADS * T && i0 < j0 + TILE;
#pragma unroll 4
        for (int j = 0; j < TILE; j++) {
            const V s = tile[j];
            R q[NV];
#pragma unroll
            for (int v = 0; v < NV; v++)
                q[v] = tq[j][v];
#pragma unroll
            for (int k = 0; k < T; k++)
                pair_many<R, K, POT, GRAD, NV>(tx[k], ty[k], tz[k], s.x, s.y, s.z, q, acc[k], p,
                                               mask && j0 + j == i + k * THREADS);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; k++)
#pragma unroll
            for (int v = 0; v < NV; v++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    tot[k][v][c][threadIdx.x] += (double)acc[k][v][c];
    }
#pragma unroll
    for (int k = 0; k < T; k++) {
        const int64_t ik = i + k * THREADS;
        if (ik >= p.m)
            continue;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            const double *a = &tot[k][v][0][threadIdx.x];
            if (p.splits > 1) {
                double *o = p.partial + (((int64_t)blockIdx.y * NV + v) * p.m + ik) * 4;
                for (int c = 0; c < 4; c++)
                    o[c] = a[c * THREADS];
                continue;
            }
            if (POT)
                p.pot[v * p.m + ik] = ldexp(a[0], p.pe[v]);
            if (GRAD)
                for (int c = 0; c < 3; c++)
                    p.grad[3 * (v * p.m + ik) + c] = ldexp(a[(c + 1) * THREADS], p.ge[v]);
        }
    }
}

/* The splits' partial sums of each target and vector added in order, then stored. */
template <bool POT, bool GRAD, int NV>
__global__ void k_many_finish(const double *partial, int splits, int64_t m, double *pot,
                              double *grad, const many_params<double, NV> p)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < m * NV;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int v = (int)(t / m);
        const int64_t i = t - v * m;
        double a[4] = {0, 0, 0, 0};
        for (int s = 0; s < splits; s++)
            for (int c = 0; c < 4; c++)
                a[c] += partial[(((int64_t)s * NV + v) * m + i) * 4 + c];
        if (POT)
            pot[v * m + i] = ldexp(a[0], p.pe[v]);
        if (GRAD)
            for (int c = 0; c < 3; c++)
                grad[3 * (v * m + i) + c] = ldexp(a[c + 1], p.ge[v]);
    }
}

template <typename R, int K, bool POT, bool GRAD, int NV>
cudaError_t launch(const fmk_cuda_many_args *a)
{
    constexpr int TILE = tile_of<R>::TILE;
    many_params<R, NV> p;
    p.src = (const typename vec4<R>::type *)a->d_src;
    p.trg = (const typename vec4<R>::type *)a->d_trg;
    p.q = (const R *)a->d_q;
    p.n_pad = a->n_pad, p.m = a->m, p.splits = a->splits, p.self = a->self;
    p.pot = a->d_pot, p.grad = a->d_grad, p.partial = a->d_partial;
    for (int v = 0; v < NV; v++)
        p.pe[v] = a->pot_exp[v], p.ge[v] = a->grad_exp[v];
    p.eps2 = (R)a->eps2, p.e15 = (R)1.5 * p.eps2, p.e25 = (R)2.5 * p.eps2;
    if (a->finish) {
        many_params<double, NV> pd; /* the exponents only */
        for (int v = 0; v < NV; v++)
            pd.pe[v] = a->pot_exp[v], pd.ge[v] = a->grad_exp[v];
        const int64_t blocks = (a->m * NV + 255) / 256;
        k_many_finish<POT, GRAD, NV><<<(unsigned)(blocks < 65535 ? blocks : 65535), 256>>>(
            a->d_partial, a->splits, a->m, a->d_pot, a->d_grad, pd);
        return cudaGetLastError();
    }
    const int64_t blocks = a->m_pad / (THREADS * T);
    const int64_t block1 = a->block1 < blocks ? a->block1 : blocks;
    if (block1 <= a->block0 || a->n_pad < TILE)
        return cudaSuccess;
    k_p2p_many<R, K, POT, GRAD, NV>
        <<<dim3((unsigned)(block1 - a->block0), (unsigned)a->splits), THREADS>>>(p, a->block0);
    return cudaGetLastError();
}

template <typename R, int K, int NV> cudaError_t launch_out(const fmk_cuda_many_args *a)
{
    if (a->d_pot && a->d_grad)
        return launch<R, K, true, true, NV>(a);
    if (a->d_pot)
        return launch<R, K, true, false, NV>(a);
    return launch<R, K, false, true, NV>(a);
}

template <typename R, int NV> cudaError_t launch_k(const fmk_cuda_many_args *a)
{
    switch (a->kernel) {
    case FMK_KERNEL_LAPLACE: return launch_out<R, FMK_KERNEL_LAPLACE, NV>(a);
    case FMK_KERNEL_PLUMMER: return launch_out<R, FMK_KERNEL_PLUMMER, NV>(a);
    case FMK_KERNEL_REGULARIZED: return launch_out<R, FMK_KERNEL_REGULARIZED, NV>(a);
    default: return cudaErrorInvalidValue;
    }
}

template <typename R> cudaError_t launch_r(const fmk_cuda_many_args *a)
{
    return a->nv == 2 ? launch_k<R, 2>(a) : launch_k<R, 4>(a);
}

template <typename R>
__global__ void k_pack_many(int64_t n, int64_t n_pad, const double *q, int exp, R *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_pad;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = i < n ? (R)ldexp(q[i], -exp) : (R)0;
}

/* Resident blocks per multiprocessor of the potential + gradient laplace kernel of nv vectors. */
int blocks_per_sm(int real, int nv)
{
    int n = 0;
    cudaError_t err;
    if (real == 4)
        err = nv == 2 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                            &n, k_p2p_many<float, FMK_KERNEL_LAPLACE, true, true, 2>, THREADS, 0)
                      : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                            &n, k_p2p_many<float, FMK_KERNEL_LAPLACE, true, true, 4>, THREADS, 0);
    else
        err = nv == 2 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                            &n, k_p2p_many<double, FMK_KERNEL_LAPLACE, true, true, 2>, THREADS, 0)
                      : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                            &n, k_p2p_many<double, FMK_KERNEL_LAPLACE, true, true, 4>, THREADS, 0);
    if (err != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        return 2;
    }
    return n;
}

unsigned grid_for(int64_t n)
{
    const int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

} // namespace

extern "C" int fmk_cuda_many_block_targets(int real)
{
    (void)real;
    return THREADS * T;
}

extern "C" int fmk_cuda_many_tile(int real)
{
    return real == 4 ? tile_of<float>::TILE : tile_of<double>::TILE;
}

extern "C" int fmk_cuda_many_splits(int real, fmk_kernel kernel, int nv, int64_t n_pad,
                                    int64_t m_pad, int device, int64_t *wave)
{
    (void)kernel;
    const int64_t w = (int64_t)blocks_per_sm(real, nv) * fmk_cuda_sm_count(device);
    if (wave)
        *wave = w;
    const int64_t tb = m_pad / (THREADS * T), ntiles = n_pad / fmk_cuda_many_tile(real);
    /* partial sums: 32 bytes per target, split and vector; at most 64 MiB, or 4 splits */
    int64_t smax = ntiles < 65535 ? ntiles : 65535;
    const int64_t by_mem = ((int64_t)64 << 20) / (32 * nv * (m_pad > 0 ? m_pad : 1));
    if (smax > (by_mem > 4 ? by_mem : 4))
        smax = by_mem > 4 ? by_mem : 4;
    int64_t best = 1;
    double best_eff = 0;
    for (int64_t s = 1; s <= smax; s++) { /* p2p.cu's fmk_cuda_p2p_splits */
        const int64_t blocks = tb * s, waves = (blocks + w - 1) / w;
        const double eff = (double)blocks / (double)(waves * w);
        if (eff > best_eff + 1e-9)
            best = s, best_eff = eff;
        if (eff >= 0.95)
            break;
    }
    return (int)(best < 1 ? 1 : best);
}

extern "C" cudaError_t fmk_cuda_p2p_many(const fmk_cuda_many_args *a)
{
    return a->real == 4 ? launch_r<float>(a) : launch_r<double>(a);
}

extern "C" cudaError_t fmk_cuda_pack_many(int real, int64_t n, int64_t n_pad, const double *d_q,
                                          int exp, void *d_out)
{
    if (n_pad == 0)
        return cudaSuccess;
    if (real == 4)
        k_pack_many<float><<<grid_for(n_pad), 256>>>(n, n_pad, d_q, exp, (float *)d_out);
    else
        k_pack_many<double><<<grid_for(n_pad), 256>>>(n, n_pad, d_q, exp, (double *)d_out);
    return cudaGetLastError();
}
