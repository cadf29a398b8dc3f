/*
 * p2p.cu -- the GPU direct sum: tiled all-pairs kernels for every kernel and precision, and the
 * packing passes that prepare the device layout (cuda/device.h).
 *
 * Each block of THREADS threads owns THREADS * T targets (T per thread, strided by THREADS so
 * loads and stores coalesce) and walks the sources in tiles of TILE 4-vectors staged in shared
 * memory; every thread reads each staged source once (one broadcast 16- or 32-byte load) and
 * applies it to its T targets. A tile is summed in the working precision and added into a
 * double accumulator, as the CPU engine does with its cache tiles. When there are too few
 * target blocks to fill the device in whole waves, the sources are split into ranges
 * (blockIdx.y) whose partial sums a second kernel adds in a fixed order: results do not depend
 * on scheduling. A long sum is cut into launches of bounded work (so that the host can stop
 * between them: fmk_cuda_p2p_args' ranges), each a range of target blocks and of each split's
 * source tiles; a launch that stops short of a split's last tile leaves each target's double
 * totals in memory and the next one takes them up, so every target sees the same additions
 * in the same order however the sum is cut.
 *
 * Instruction budget (fp32 laplace, potential + gradient), per pair:
 *   3 FADD (y - x), FMUL + 2 FFMA (r^2), MUFU.RSQ, FMNMX (the r^2 == 0 mask: coincident points,
 *   exact in the frame, internal.h; see pair()), FMUL (q/r), FADD (phi), 2 FMUL (q/r^3),
 *   3 FFMA (gradient) = 15, plus one shared load per T pairs. fp64 replaces MUFU.RSQ by MUFU.RSQ64H (a 20-bit
 *   seed) and one third-order correction, y (1 + e/2 + 3e^2/8) with e = 1 - r^2 y^2, which
 *   leaves a relative error of about 5e^3/16, far below 2^-53.
 */
#include <float.h>
#include <limits.h>
#include <math.h>

#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "cuda/device.h"
#include "kernels/pair_exact.h"
#include "kernels/rsqrt.cuh"

namespace {

constexpr int THREADS = 128;

/* Tuning knobs (bench/p2p_variants.cu builds other values; the defaults are the measured best). */
#ifndef FMK_CUDA_T32
#define FMK_CUDA_T32 4
#endif
#ifndef FMK_CUDA_UNROLL
#define FMK_CUDA_UNROLL 8
#endif
#ifndef FMK_CUDA_MINB32
#define FMK_CUDA_MINB32 1
#endif
constexpr int UNROLL = FMK_CUDA_UNROLL;

/* Targets per thread (T) and sources per shared-memory tile (TILE); THREADS * T and TILE
 * divide FMK_CUDA_PAD. */
template <typename R> struct shape;
template <> struct shape<float> {
    static constexpr int T = FMK_CUDA_T32, TILE = 256;
};
template <> struct shape<double> {
    static constexpr int T = 2, TILE = 128;
};
/* Resident blocks asked of the compiler (__launch_bounds__). fp32: none (FMK_CUDA_MINB32 = 1);
 * capping laplace at 64 registers (8 blocks of 128 threads per SM) measured 11% slower on an
 * H100 (bench/RESULTS.md). fp64: 4 blocks. */
template <typename R, int K> constexpr int min_blocks()
{
    return sizeof(R) == 4 && K == FMK_KERNEL_LAPLACE ? FMK_CUDA_MINB32 : sizeof(R) == 4 ? 1 : 4;
}
static_assert(FMK_CUDA_PAD % (THREADS * FMK_CUDA_T32) == 0 && FMK_CUDA_PAD % 256 == 0, "padding");

template <typename R> struct consts {
    R eps2, e15, e25, logw;
};

__device__ __forceinline__ float log_(float x)
{
    return __logf(x);
}
__device__ __forceinline__ double log_(double x)
{
    return log(x);
}

/* kernels/pair.h in both precisions, overloaded on REAL under one name (dpair_<kernel>). This
 * engine forms 1/r itself (pair() below) and calls the _r forms; the others serve the 2D
 * kernels. */
#define FMK_PAIR_FN static __device__ __forceinline__
#define LOG(x) log_(x)
#define SQRT(x) sqrt(x)
#define RSQRT(x) rsqrt_plain(x)
#define PAIR(name) dpair_##name
#define REAL float
#define PAIR_T(name) dpair_##name##_f32
#include "kernels/pair.h"
#undef REAL
#undef PAIR_T
#define REAL double
#define PAIR_T(name) dpair_##name##_f64
#include "kernels/pair.h"
#undef REAL
#undef PAIR_T
#undef PAIR
#undef RSQRT
#undef SQRT
#undef LOG
#undef FMK_PAIR_FN

/* One pair: source (sx, sy, sz, q) at target (tx, ty, tz), added into a[4] (working units),
 * by kernels/pair.h's formulas. 1/r is this engine's: */
template <typename R, int K, bool POT, bool GRAD>
__device__ __forceinline__ void pair(R tx, R ty, R tz, R sx, R sy, R sz, R q, R (&a)[4],
                                     const consts<R> &c)
{
    if constexpr (K == FMK_KERNEL_LAPLACE || K == FMK_KERNEL_PLUMMER ||
                  K == FMK_KERNEL_REGULARIZED) {
        const R dx = tx - sx, dy = ty - sy, dz = tz - sz;
        const R r2 = dx * dx + dy * dy + dz * dz;
        R rinv;
        if constexpr (K == FMK_KERNEL_LAPLACE && sizeof(R) == 4)
            /* Coordinates are scaled by 2^23 (FMK_CUDA_LAPLACE32_SCALE), so r^2 is 0 or >= 1
             * and 1/r <= 1: min(1/r, r^2) is the masked 1/r in one instruction (FMNMX). */
            rinv = fminf(rsqrtf(r2), r2);
        else if constexpr (K == FMK_KERNEL_LAPLACE)
            rinv = rsqrt_masked(r2); /* 0 at r2 == 0 */
        else
            rinv = rsqrt_plain(r2 + c.eps2); /* eps2 > 0 */
        auto w = K == FMK_KERNEL_REGULARIZED
                     ? dpair_regularized_r(rinv, rinv * rinv, r2, q, c.e15, c.e25)
                     : dpair_laplace_r(rinv, q);
        if (POT)
            a[0] += w.pot;
        if (GRAD) {
            a[1] -= w.g * dx;
            a[2] -= w.g * dy;
            a[3] -= w.g * dz;
        }
    } else if constexpr (K == FMK_KERNEL_LOG2D) {
        const R dx = tx - sx, dy = ty - sy;
        auto w = dpair_log2d(dx * dx + dy * dy, q, c.logw);
        if (POT)
            a[0] += w.pot;
        if (GRAD) {
            a[1] -= w.g * dx;
            a[2] -= w.g * dy;
        }
    } else { /* cauchy2d: w = z_j - z = ax + i b, Gamma = q + i sz */
        auto w = dpair_cauchy2d(sx - tx, sy - ty, q, sz);
        if (POT) {
            a[0] += w.pr;
            a[1] += w.pi;
        }
        if (GRAD) {
            a[2] += w.dr;
            a[3] += w.di;
        }
    }
}

/* Results of target i (double accumulators, working units, and c: careful pairs already in
 * caller units) into the caller's layout: every scale is a power of two, applied once (pe, ge:
 * fmk_cuda_p2p_args), as the CPU engine does; exact unless the result leaves the doubles. */
template <int K, bool POT, bool GRAD>
__device__ __forceinline__ void store(int64_t i, const double (&a)[4], double *pot, double *grad,
                                      int pe, int ge, const double (&c)[4])
{
    if constexpr (K == FMK_KERNEL_CAUCHY2D) {
        if (POT)
            pot[2 * i] = ldexp(a[0], pe) + c[0], pot[2 * i + 1] = ldexp(a[1], pe) + c[1];
        if (GRAD)
            grad[2 * i] = ldexp(a[2], ge) + c[2], grad[2 * i + 1] = ldexp(a[3], ge) + c[3];
    } else if constexpr (K == FMK_KERNEL_LOG2D) {
        if (POT)
            pot[i] = ldexp(a[0], pe) + c[0]; /* log(width) was added per source */
        if (GRAD)
            grad[2 * i] = ldexp(a[1], ge) + c[1], grad[2 * i + 1] = ldexp(a[2], ge) + c[2];
    } else {
        if (POT)
            pot[i] = ldexp(a[0], pe) + c[0];
        if (GRAD)
            grad[3 * i] = ldexp(a[1], ge) + c[1], grad[3 * i + 1] = ldexp(a[2], ge) + c[2],
                     grad[3 * i + 2] = ldexp(a[3], ge) + c[3];
    }
}

template <typename R> struct p2p_params {
    const typename vec4<R>::type *src, *trg;
    int64_t n_pad, m;
    int splits;
    int self;
    double *pot, *grad, *partial;
    int pe, ge;
    consts<R> c;
};

/* A launch's share of the sum (fmk_cuda_p2p_args), kernel arguments apart from p2p_params:
 * in that struct they cost the kernels registers. */
struct p2p_range {
    int64_t block0;       /* the grid's first target block */
    int64_t tile0, tile1; /* of each split's source tiles, counted from its first */
    double *carry;        /* one split (splits = 1): the totals between launches, per target
                             from block0's first (splits > 1: partial holds them) */
};

/* Where target ik's totals of this block's split are kept between launches (and, with several
 * splits, for k_p2p_finish). */
template <typename R>
__device__ __forceinline__ double *carried(const p2p_params<R> &p, const p2p_range &r, int64_t ik)
{
    constexpr int T = shape<R>::T;
    return p.splits > 1 ? p.partial + ((int64_t)blockIdx.y * p.m + ik) * 4
                        : r.carry + (ik - r.block0 * (THREADS * T)) * 4;
}

/* Sums one staged tile at this thread's T targets. MASK: leave out source j0 + j at target
 * i + k THREADS (the smooth kernels' self term; the singular ones drop it by r^2 == 0). */
template <typename R, int K, bool POT, bool GRAD, bool MASK>
__device__ __forceinline__ void tile_sum(const typename vec4<R>::type *tile,
                                         const R (&tx)[shape<R>::T], const R (&ty)[shape<R>::T],
                                         const R (&tz)[shape<R>::T], R (&acc)[shape<R>::T][4],
                                         const consts<R> &c, int64_t j0, int64_t i)
{
    constexpr int T = shape<R>::T, TILE = shape<R>::TILE;
#pragma unroll UNROLL
    for (int j = 0; j < TILE; j++) {
        const typename vec4<R>::type s = tile[j];
#pragma unroll
        for (int k = 0; k < T; k++) {
            R q = s.w;
            if (MASK && j0 + j == i + k * THREADS)
                q = 0;
            pair<R, K, POT, GRAD>(tx[k], ty[k], tz[k], s.x, s.y, s.z, q, acc[k], c);
        }
    }
}

/* CUT: the launch takes a range of each split's tiles (p.tile0, p.tile1), its totals carried
 * from and to memory; else every tile, as one launch of the whole sum (no registers spent on
 * the range). */
template <typename R, int K, bool POT, bool GRAD, bool CUT>
__global__ void __launch_bounds__(THREADS, (min_blocks<R, K>()))
    k_p2p(const p2p_params<R> p, const p2p_range r)
{
    typedef typename vec4<R>::type V;
    constexpr int T = shape<R>::T, TILE = shape<R>::TILE;
    constexpr bool smooth = K == FMK_KERNEL_PLUMMER || K == FMK_KERNEL_REGULARIZED;
    __shared__ V tile[TILE];
    /* Each thread's double totals live in shared memory, not registers: they are touched once
     * per tile, and the 8 T registers they would pin decide how many blocks fit on an SM. */
    __shared__ double tot[T][4][THREADS];

    /* this launch's tiles of the block's split: none left (a split one tile shorter than the
     * longest) means that an earlier launch finished it */
    const int64_t ntiles = p.n_pad / TILE;
    const int64_t s0 = ntiles * blockIdx.y / p.splits, s1 = ntiles * (blockIdx.y + 1) / p.splits;
    int64_t t0 = s0, t1 = s1;
    bool first = true, last = true;
    if (CUT) {
        t0 = s0 + r.tile0, t1 = s0 + r.tile1 < s1 ? s0 + r.tile1 : s1;
        if (t0 >= t1)
            return;
        first = r.tile0 == 0, last = s0 + r.tile1 >= s1;
    }
    const int64_t i0 = ((int64_t)blockIdx.x + r.block0) * (THREADS * T);
    const int64_t i = i0 + threadIdx.x;
    const V *trg = p.self ? p.src : p.trg;
    R tx[T], ty[T], tz[T];
#pragma unroll
    for (int k = 0; k < T; k++) {
        V y = trg[i + k * THREADS];
        tx[k] = y.x, ty[k] = y.y, tz[k] = y.z;
        const int64_t ik = i + k * THREADS;
        const double *c = !CUT || first || ik >= p.m ? NULL : carried(p, r, ik);
#pragma unroll
        for (int v = 0; v < 4; v++)
            tot[k][v][threadIdx.x] = c ? c[v] : 0;
    }
    for (int64_t t = t0; t < t1; t++) {
        const int64_t j0 = t * TILE;
#pragma unroll
        for (int l = threadIdx.x; l < TILE; l += THREADS)
            tile[l] = p.src[j0 + l];
        __syncthreads();
        R acc[T][4];
#pragma unroll
        for (int k = 0; k < T; k++)
            acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0;
        if (smooth && p.self && j0 < i0 + THREADS * T && i0 < j0 + TILE)
            tile_sum<R, K, POT, GRAD, true>(tile, tx, ty, tz, acc, p.c, j0, i);
        else
            tile_sum<R, K, POT, GRAD, false>(tile, tx, ty, tz, acc, p.c, j0, i);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; k++)
#pragma unroll
            for (int v = 0; v < 4; v++)
                tot[k][v][threadIdx.x] += (double)acc[k][v];
    }
#pragma unroll
    for (int k = 0; k < T; k++) {
        const int64_t ik = i + k * THREADS;
        if (ik >= p.m)
            continue;
        const double a[4] = {tot[k][0][threadIdx.x], tot[k][1][threadIdx.x], tot[k][2][threadIdx.x],
                             tot[k][3][threadIdx.x]};
        if (p.splits > 1 || (CUT && !last)) {
            double *o = carried(p, r, ik);
            o[0] = a[0], o[1] = a[1], o[2] = a[2], o[3] = a[3];
        } else {
            const double none[4] = {0, 0, 0, 0};
            store<K, POT, GRAD>(ik, a, p.pot, p.grad, p.pe, p.ge, none);
        }
    }
}

/* Adds the splits' partial sums of each target in order and stores the result. */
template <int K, bool POT, bool GRAD>
__global__ void k_p2p_finish(const double *partial, int splits, int64_t m, double *pot,
                             double *grad, int pe, int ge)
{
    const double none[4] = {0, 0, 0, 0};
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m;
         i += (int64_t)gridDim.x * blockDim.x) {
        double a[4] = {0, 0, 0, 0};
        for (int s = 0; s < splits; s++)
            for (int v = 0; v < 4; v++)
                a[v] += partial[((int64_t)s * m + i) * 4 + v];
        store<K, POT, GRAD>(i, a, pot, grad, pe, ge, none);
    }
}

/* A careful plan (fp64, a singular kernel, points that can make pairs closer than
 * FMK_EXACT_TINY: kernels/pair_exact.h): one thread a target, every source in turn, as the CPU
 * engine's careful_block: each pair in its class, on its offset scaled for the class, into the
 * class's sums (a coincident pair, equal inputs, adds nothing). Slower than k_p2p (no tiles),
 * for inputs that need it only. */
template <int K, bool POT, bool GRAD>
__global__ void k_p2p_careful(const real4d *src, const real4d *trg, int64_t n_pad, int64_t m,
                              double *pot, double *grad, int qexp, int wexp, consts<double> cs)
{
    constexpr bool d3 = K == FMK_KERNEL_LAPLACE;
    const double ln2 = 0.693147180559945309417232121458176568;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m;
         i += (int64_t)gridDim.x * blockDim.x) {
        const real4d y = trg[i];
        double a[3][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
        for (int64_t j = 0; j < n_pad; j++) {
            const real4d s = src[j];
            const double dx = y.x - s.x, dy = y.y - s.y, dz = d3 ? y.z - s.z : 0.0;
            const int c = fmk_exact_class(fmax(fmax(fabs(dx), fabs(dy)), fabs(dz)));
            const double f = fmk_exact_scale(c);
            consts<double> cc = cs;
            cc.logw = cs.logw - fmk_exact_shift(c) * ln2;
            /* the scaled offset as a target at it and a source at 0 (cauchy2d: s.z is Im q) */
            double w[4] = {0, 0, 0, 0};
            pair<double, K, POT, GRAD>(dx * f, dy * f, dz * f, 0.0, 0.0,
                                       K == FMK_KERNEL_CAUCHY2D ? s.z : 0.0, s.w, w, cc);
            for (int v = 0; v < 4; v++)
                a[c][v] += w[v];
        }
        const fmk_kernel k = (fmk_kernel)K;
        if (K == FMK_KERNEL_CAUCHY2D) {
            for (int v = 0; v < 2; v++) {
                if (POT)
                    pot[2 * i + v] = fmk_exact_value(k, a, 3, v, qexp, wexp);
                if (GRAD)
                    grad[2 * i + v] = fmk_exact_value(k, a, 3, 2 + v, qexp, wexp);
            }
        } else {
            if (POT)
                pot[i] = fmk_exact_value(k, a, 3, 0, qexp, wexp);
            if (GRAD)
                for (int v = 0; v < (d3 ? 3 : 2); v++)
                    grad[(d3 ? 3 : 2) * i + v] = fmk_exact_value(k, a, 3, 1 + v, qexp, wexp);
        }
    }
}

template <typename R, int K, bool POT, bool GRAD> cudaError_t launch(const fmk_cuda_p2p_args *a)
{
    constexpr int T = shape<R>::T, TILE = shape<R>::TILE;
    const int64_t blocks = a->m_pad / (THREADS * T), tiles = a->n_pad / TILE;
    const int64_t block1 = a->block1 < blocks ? a->block1 : blocks;
    p2p_params<R> p;
    p.src = (const typename vec4<R>::type *)a->d_src;
    p.trg = (const typename vec4<R>::type *)a->d_trg;
    p.n_pad = a->n_pad;
    p.m = a->m;
    p.splits = a->splits;
    p.self = a->self;
    p.pot = a->d_pot;
    p.grad = a->d_grad;
    p.partial = a->d_partial;
    p.pe = a->pot_exp;
    p.ge = a->grad_exp;
    p.c.eps2 = (R)a->eps2;
    p.c.e15 = (R)1.5 * p.c.eps2;
    p.c.e25 = (R)2.5 * p.c.eps2;
    p.c.logw = (R)a->log_width;
    if constexpr (sizeof(R) == 8 && K != FMK_KERNEL_PLUMMER && K != FMK_KERNEL_REGULARIZED) {
        if (a->careful) { /* the whole sum in the first launch; nothing for the others */
            if (a->finish || a->block0 > 0 || a->tile0 > 0)
                return cudaSuccess;
            const int64_t blocks = (a->m + 127) / 128;
            k_p2p_careful<K, POT, GRAD><<<(unsigned)(blocks < 65535 ? blocks : 65535), 128>>>(
                p.src, p.self ? p.src : p.trg, p.n_pad, p.m, p.pot, p.grad, a->charge_exp,
                a->width_exp, p.c);
            return cudaGetLastError();
        }
    }
    p2p_range r;
    r.block0 = a->block0;
    r.tile0 = a->tile0, r.tile1 = a->tile1 < tiles ? a->tile1 : tiles;
    r.carry = a->d_carry;
    if (a->finish) { /* the splits' sums added up */
        int64_t blocks = (a->m + 255) / 256;
        k_p2p_finish<K, POT, GRAD><<<(unsigned)(blocks < 65535 ? blocks : 65535), 256>>>(
            a->d_partial, a->splits, a->m, a->d_pot, a->d_grad, a->pot_exp, a->grad_exp);
        return cudaGetLastError();
    }
    if (block1 <= a->block0)
        return cudaSuccess;
    dim3 grid((unsigned)(block1 - a->block0), (unsigned)a->splits);
    if (r.tile0 > 0 || r.tile1 < (tiles + a->splits - 1) / a->splits)
        k_p2p<R, K, POT, GRAD, true><<<grid, THREADS>>>(p, r);
    else
        k_p2p<R, K, POT, GRAD, false><<<grid, THREADS>>>(p, r);
    return cudaGetLastError();
}

template <typename R, int K> cudaError_t launch_k(const fmk_cuda_p2p_args *a)
{
    if (a->d_pot && a->d_grad)
        return launch<R, K, true, true>(a);
    if (a->d_pot)
        return launch<R, K, true, false>(a);
    return launch<R, K, false, true>(a);
}

template <typename R> cudaError_t launch_r(const fmk_cuda_p2p_args *a)
{
    switch (a->kernel) {
    case FMK_KERNEL_LAPLACE: return launch_k<R, FMK_KERNEL_LAPLACE>(a);
#ifndef FMK_CUDA_LAPLACE_ONLY /* bench/p2p_variants.cu: laplace alone compiles faster */
    case FMK_KERNEL_PLUMMER: return launch_k<R, FMK_KERNEL_PLUMMER>(a);
    case FMK_KERNEL_REGULARIZED: return launch_k<R, FMK_KERNEL_REGULARIZED>(a);
    case FMK_KERNEL_LOG2D: return launch_k<R, FMK_KERNEL_LOG2D>(a);
    case FMK_KERNEL_CAUCHY2D: return launch_k<R, FMK_KERNEL_CAUCHY2D>(a);
#endif
    default: break;
    }
    return cudaErrorInvalidValue;
}

/* Resident blocks per multiprocessor of the potential + gradient kernel. */
template <typename R> int blocks_per_sm(fmk_kernel kernel)
{
    int n = 0;
    cudaError_t err = cudaErrorInvalidValue;
    switch (kernel) {
    case FMK_KERNEL_LAPLACE:
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, k_p2p<R, FMK_KERNEL_LAPLACE, true, true, false>, THREADS, 0);
        break;
#ifndef FMK_CUDA_LAPLACE_ONLY
    case FMK_KERNEL_PLUMMER:
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, k_p2p<R, FMK_KERNEL_PLUMMER, true, true, false>, THREADS, 0);
        break;
    case FMK_KERNEL_REGULARIZED:
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, k_p2p<R, FMK_KERNEL_REGULARIZED, true, true, false>, THREADS, 0);
        break;
    case FMK_KERNEL_LOG2D:
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, k_p2p<R, FMK_KERNEL_LOG2D, true, true, false>, THREADS, 0);
        break;
    case FMK_KERNEL_CAUCHY2D:
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, k_p2p<R, FMK_KERNEL_CAUCHY2D, true, true, false>, THREADS, 0);
        break;
#endif
    default: break;
    }
    if (err != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        return 4;
    }
    return n;
}

/* Point packing: map (or copy) to the working precision, times an exact power of two (scale),
 * zero charges, zero padding. */
template <typename R>
__global__ void k_pack_points(const double *x, int dim, int64_t n, int64_t n_pad, int map,
                              double c0, double c1, double c2, double offset, double inv, R scale,
                              typename vec4<R>::type *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_pad;
         i += (int64_t)gridDim.x * blockDim.x) {
        typename vec4<R>::type v = {0, 0, 0, 0};
        if (i < n) {
            double c[3] = {c0, c1, c2}, y[3] = {0, 0, 0};
            for (int k = 0; k < dim; k++) {
                y[k] = x[dim * i + k];
                /* core/internal.h's fmk_frame_map exactly: no fused multiply-add */
                if (map)
                    y[k] = __dadd_rn(offset, __dmul_rn(__dsub_rn(y[k], c[k]), inv));
            }
            v.x = (R)y[0] * scale, v.y = (R)y[1] * scale, v.z = (R)y[2] * scale;
        }
        out[i] = v;
    }
}

/* stats[0]: smallest index of a non-finite charge (atomicMin); stats[1]: the largest |charge|
 * as the bits of a double (atomicMax: for non-negative doubles the bits order as the values).
 * Each block reduces first, so there is one atomic per block, not one per thread on a single
 * address (which serialized to ~0.8 ms at 2^20 charges). Launch with 256 threads. */
__global__ void k_charge_stats(int cw, int64_t n, const double *q, unsigned long long *stats)
{
    typedef cub::BlockReduce<unsigned long long, 256> reduce;
    __shared__ typename reduce::TempStorage temp;
    unsigned long long big = 0, bad = ULLONG_MAX;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double re = fabs(q[cw * i]), im = cw == 2 ? fabs(q[cw * i + 1]) : 0.0;
        if (!isfinite(re) || !isfinite(im)) {
            if (bad == ULLONG_MAX)
                bad = (unsigned long long)i;
            continue;
        }
        unsigned long long b = (unsigned long long)__double_as_longlong(re > im ? re : im);
        big = b > big ? b : big;
    }
    const unsigned long long block_big = reduce(temp).Reduce(big, cuda::maximum<>{});
    __syncthreads(); /* temp is reused */
    const unsigned long long block_bad = reduce(temp).Reduce(bad, cuda::minimum<>{});
    if (threadIdx.x == 0) {
        if (block_bad != ULLONG_MAX)
            atomicMin(&stats[0], block_bad);
        if (block_big)
            atomicMax(&stats[1], block_big);
    }
}

template <typename R>
__global__ void k_pack_charges(int cw, int64_t n, const double *q, int exp,
                               typename vec4<R>::type *src)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        src[i].w = (R)ldexp(q[cw * i], -exp);
        if (cw == 2)
            src[i].z = (R)ldexp(q[cw * i + 1], -exp);
    }
}

/* fmk_cuda_tiny_coords: one flag for all the points (a plan is careful or not). */
__global__ void k_tiny_coords(int dim, int64_t n, const real4d *p, unsigned long long *flag)
{
    bool tiny = false;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const real4d v = p[i];
        tiny = tiny || fmk_exact_coord_is_tiny(v.x) || fmk_exact_coord_is_tiny(v.y) ||
               (dim == 3 && fmk_exact_coord_is_tiny(v.z));
    }
    if (__any_sync(0xffffffffu, tiny) && (threadIdx.x & 31) == 0)
        atomicOr(flag, 1ull);
}

unsigned grid_for(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

} // namespace

extern "C" int fmk_cuda_p2p_splits(int real, fmk_kernel kernel, int64_t n_pad, int64_t m_pad,
                                   int device)
{
    const int T = real == 4 ? shape<float>::T : shape<double>::T;
    const int TILE = real == 4 ? shape<float>::TILE : shape<double>::TILE;
    const int64_t per_sm = real == 4 ? blocks_per_sm<float>(kernel) : blocks_per_sm<double>(kernel);
    const int64_t wave = per_sm * fmk_cuda_sm_count(device);
    const int64_t tb = m_pad / (THREADS * T), ntiles = n_pad / TILE;
    /* Partial sums cost 32 bytes per target and split: allow 4 splits, or 64 MiB. */
    int64_t smax = ntiles < 65535 ? ntiles : 65535;
    int64_t by_mem = ((int64_t)64 << 20) / (32 * (m_pad > 0 ? m_pad : 1));
    if (smax > (by_mem > 4 ? by_mem : 4))
        smax = by_mem > 4 ? by_mem : 4;
    int64_t best = 1;
    double best_eff = 0;
    for (int64_t s = 1; s <= smax; s++) {
        int64_t blocks = tb * s, waves = (blocks + wave - 1) / wave;
        double eff = (double)blocks / (double)(waves * wave);
        if (eff > best_eff + 1e-9)
            best = s, best_eff = eff;
        if (eff >= 0.95)
            break;
    }
    return (int)(best < 1 ? 1 : best);
}

extern "C" int fmk_cuda_p2p_tile(int real)
{
    return real == 4 ? shape<float>::TILE : shape<double>::TILE;
}

extern "C" void fmk_cuda_p2p_shape(int real, fmk_kernel kernel, int64_t n_pad, int64_t m_pad,
                                   int splits, int device, fmk_cuda_p2p_geometry *g)
{
    const int T = real == 4 ? shape<float>::T : shape<double>::T;
    const int TILE = real == 4 ? shape<float>::TILE : shape<double>::TILE;
    const int64_t per_sm = real == 4 ? blocks_per_sm<float>(kernel) : blocks_per_sm<double>(kernel);
    const int64_t wave = per_sm * fmk_cuda_sm_count(device), sp = splits > 0 ? splits : 1;
    g->block_targets = THREADS * T;
    g->blocks = m_pad / g->block_targets;
    g->tile_sources = TILE;
    g->tiles = (n_pad / TILE + sp - 1) / sp;
    g->wave_blocks = (wave + sp - 1) / sp;
}

extern "C" cudaError_t fmk_cuda_p2p(const fmk_cuda_p2p_args *a)
{
    return a->real == 4 ? launch_r<float>(a) : launch_r<double>(a);
}

extern "C" cudaError_t fmk_cuda_pack_points(int real, int dim, int64_t n, int64_t n_pad,
                                            const double *d_x, int map, const double center[3],
                                            double offset, double inv_width, double scale,
                                            void *d_out)
{
    if (n_pad == 0)
        return cudaSuccess;
    if (real == 4)
        k_pack_points<float><<<grid_for(n_pad), 256>>>(d_x, dim, n, n_pad, map, center[0],
                                                       center[1], center[2], offset, inv_width,
                                                       (float)scale, (real4f *)d_out);
    else
        k_pack_points<double><<<grid_for(n_pad), 256>>>(d_x, dim, n, n_pad, map, center[0],
                                                        center[1], center[2], offset, inv_width,
                                                        scale, (real4d *)d_out);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_tiny_coords(int dim, int64_t n_pad, const void *d_pts,
                                            unsigned long long *d_flag)
{
    if (n_pad == 0)
        return cudaSuccess;
    k_tiny_coords<<<grid_for(n_pad), 256>>>(dim, n_pad, (const real4d *)d_pts, d_flag);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_charge_stats(int cw, int64_t n, const double *d_charges,
                                             unsigned long long *d_stats)
{
    /* {ULLONG_MAX, 0}, ordered before the kernel on the default stream (no host wait) */
    cudaError_t err = cudaMemsetAsync(d_stats, 0xff, sizeof *d_stats);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(d_stats + 1, 0, sizeof *d_stats);
    if (err != cudaSuccess || n == 0)
        return err;
    k_charge_stats<<<grid_for(n), 256>>>(cw, n, d_charges, d_stats);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_pack_charges(int real, int cw, int64_t n, const double *d_charges,
                                             int exp, void *d_src)
{
    if (n == 0)
        return cudaSuccess;
    if (real == 4)
        k_pack_charges<float><<<grid_for(n), 256>>>(cw, n, d_charges, exp, (real4f *)d_src);
    else
        k_pack_charges<double><<<grid_for(n), 256>>>(cw, n, d_charges, exp, (real4d *)d_src);
    return cudaGetLastError();
}
