/* p2p_kernels.cuh -- the pair kernels of the GPU 3D FMM's near field (p2p.cu): each a tag type
 * whose static members add one source's potential and gradient at a target (add, one way) and
 * one pair both ways (both, sources = targets: the same 1/r and 1/r^3 serve both directions).
 * The P2P kernels take the tag as a template parameter, so that another kernel (Plummer,
 * regularized) plugs in as another tag with the same two members. */
#ifndef FMMKIT_CUDA_FMM3D_P2P_KERNELS_CUH
#define FMMKIT_CUDA_FMM3D_P2P_KERNELS_CUH

#include "cuda/device.h"
#include "kernels/rsqrt.cuh"

/* kernels/pair.h in both precisions under one overloaded name (fpair_<kernel>); this file forms
 * 1/r itself and calls the _r and _k forms. */
#define FMK_PAIR_FN static __device__ __forceinline__
#define RSQRT(x) rsqrt_plain(x)
#define PAIR(name) fpair_##name
#define REAL float
#define PAIR_T(name) fpair_##name##_f32
#include "kernels/pair.h"
#undef REAL
#undef PAIR_T
#define REAL double
#define PAIR_T(name) fpair_##name##_f64
#include "kernels/pair.h"
#undef REAL
#undef PAIR_T
#undef PAIR
#undef RSQRT
#undef FMK_PAIR_FN

/* 1/r of a P2P pair, 0 at r = 0: in fp64 the direct engine's masked MUFU seed and correction,
 * in fp32 MUFU.RSQ and a select. */
static __device__ __forceinline__ double pair_rsqrt(double r2)
{
    return rsqrt_masked(r2);
}
static __device__ __forceinline__ float pair_rsqrt(float r2)
{
    return r2 > 0 ? rsqrt_plain(r2) : 0.0f;
}
/* 1/r of a fp64 pair, 0 at r = 0, by the MUFU seed y and one Newton step, y (1 + e / 2) with
 * e = 1 - r2 y^2: relative error ~3 d^2 / 2 for the seed's d (below 1e-13, always low; the
 * correction above is exact to fp64's rounding). Three fp64 instructions instead of five: y / 2
 * is the seed with its exponent one lower, made on the integer pipe, and both are zeroed where
 * r2 == 0 (r2 >= 2^-104 otherwise: y normal, y / 2 exact). Used where eps >= 1e-11 (p2p). */
static __device__ __forceinline__ double pair_rsqrt_newton(double r2)
{
    const double y = rsqrt_seed(r2);
    const bool nz = __double2hiint(r2) != 0;
    const int hi = __double2hiint(y), lo = __double2loint(y);
    const double y0 = __hiloint2double(nz ? hi : 0, lo),
                 yh = __hiloint2double(nz ? hi - 0x100000 : 0, lo);
    return fma(yh, fma(-r2, y0 * y0, 1.0), y0);
}
/* 1/r of a pair: Newton's step where NEWTON (fp64 only) */
template <int NEWTON, typename R> static __device__ __forceinline__ R pair_inv(R r2)
{
    return NEWTON ? (R)pair_rsqrt_newton((double)r2) : pair_rsqrt(r2);
}
/* The same for pairs that never have r2 == 0 (two different leaves, whose points never
 * coincide: coincident points share a key and so a leaf; padding kept apart, k_p2p_pairs), with
 * no masking: MUFU.RSQ64H, the seed's high word less 2^20 (y0 / 2) and three fp64 instructions,
 * or the third-order correction. */
static __device__ __forceinline__ double pair_inv_distinct(int newton, double r2)
{
    if (!newton)
        return rsqrt_plain(r2);
    const double y0 = rsqrt_seed(r2);
    const double yh = __hiloint2double(__double2hiint(y0) - 0x100000, __double2loint(y0));
    return fma(yh, fma(-r2, y0 * y0, 1.0), y0);
}

/* Laplace: phi = q / r, grad phi = -q (y - s) / r^3 (kernels/pair.h); pairs at distance 0
 * contribute nothing. */
struct fmk_p2p_laplace {
    /* One source's potential and gradient at a target (offsets y - s), added to the sums. */
    template <int NEWTON, typename V, typename R>
    static __device__ __forceinline__ void add(const V s, R yx, R yy, R yz, R &tp, R &tx, R &ty,
                                               R &tz)
    {
        const R dx = yx - s.x, dy = yy - s.y, dz = yz - s.z;
        const auto w = fpair_laplace_r(pair_inv<NEWTON>(dx * dx + dy * dy + dz * dz), (R)s.w);
        tp += w.pot;
        tx -= dx * w.g, ty -= dy * w.g, tz -= dz * w.g;
    }

    /* One pair (i, j) both ways: i's sums (pi .. gzi) from j, j's (pj .. gzj) from i; the
     * kernel's factors (pair.h's _k form) serve both. */
    template <int NEWTON, int MASK>
    static __device__ __forceinline__ void both(double xi, double yi, double zi, double qi,
                                                double &pi, double &gxi, double &gyi, double &gzi,
                                                double xj, double yj, double zj, double qj,
                                                double &pj, double &gxj, double &gyj, double &gzj)
    {
        const double dx = xi - xj, dy = yi - yj, dz = zi - zj;
        const double r2 = dx * dx + dy * dy + dz * dz;
        const auto k = fpair_laplace_k(MASK ? pair_inv<NEWTON>(r2) : pair_inv_distinct(NEWTON, r2));
        pi = fma(qj, k.pot, pi), pj = fma(qi, k.pot, pj);
        const double fj = qj * k.g, fi = qi * k.g;
        gxi = fma(-fj, dx, gxi), gyi = fma(-fj, dy, gyi), gzi = fma(-fj, dz, gzi);
        gxj = fma(fi, dx, gxj), gyj = fma(fi, dy, gyj), gzj = fma(fi, dz, gzj);
    }
};

/* The P2P of leaf pairs (p2p.cu, p2p_many.cu): pairs a block takes at most, and the lane's point
 * of the stream of a points (chunk jc of the nj points of the run's a leaves r0 .. r1 - 1, the
 * leaves' first points s_j0 and counts s_n), or -1: its a leaf and place there. */
#define FMK_P2P_RUN_MAX 16
static __device__ __forceinline__ int stream_point(int jc, int nj, int r0, int r1,
                                                   const int32_t *s_j0, const int32_t *s_n)
{
    const int lane = threadIdx.x & 31;
    if (jc + lane >= nj)
        return -1;
    int off = jc + lane, e = r0;
    while (e < r1 - 1 && off >= s_n[e])
        off -= s_n[e], e++;
    return s_j0[e] + off;
}

#endif /* FMMKIT_CUDA_FMM3D_P2P_KERNELS_CUH */
