/* p2p_kernels.cuh -- the pair kernels of the GPU 3D FMM's near field (p2p.cu, p2p_many.cu):
 * laplace, plummer and regularized, each a small struct (below) whose members add one source's
 * potential and gradient at a target (add, one way) or give a unit charge's factors (for one
 * pair both ways, pair_both: sources = targets, the same factors serve both directions; and for
 * several charge vectors). The P2P kernels take the struct as a template parameter and an
 * argument (its softening), so that each kernel's loops are compiled for it alone. */
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

/* The pair kernels, each a struct in the working precision R with what its pair needs (nothing
 * for laplace, the softening for the smooth kernels, in P2P's units: the tree's, times
 * FMK_CUDA_LAPLACE32_SCALE in fp32) and two members, passed by value to the P2P kernels:
 *   factors<NEWTON, MASK>(r2): a unit charge's {pot, g} at squared distance r2 (pair.h's _k
 *     form, grad = -g d), for a pair applied both ways or to several charge vectors; MASK: r2
 *     may be 0 (a coincident pair), else it is not;
 *   add<NEWTON>(s, y, sums): one source s (its charge in s.w) at a target, one way (pair.h's _r
 *     form).
 * smooth: the kernel has a finite value at r = 0 (docs/kernels.md), so a P2P over a leaf's own
 * points with sources = targets must leave out j = i by index, where laplace's r = 0 adds
 * nothing by itself. */

/* laplace: phi = q / r, grad phi = -q (y - s) / r^3 (kernels/pair.h); pairs at distance 0
 * contribute nothing. */
template <typename R> struct fmk_p2p_laplace {
    static constexpr bool smooth = false;

    template <int NEWTON, int MASK> __device__ __forceinline__ auto factors(R r2) const
    {
        if constexpr (MASK || sizeof(R) == 4)
            return fpair_laplace_k(pair_inv<NEWTON>(r2));
        else
            return fpair_laplace_k(pair_inv_distinct(NEWTON, r2));
    }

    /* One source's potential and gradient at a target (offsets y - s), added to the sums. */
    template <int NEWTON, typename V>
    __device__ __forceinline__ void add(const V s, R yx, R yy, R yz, R &tp, R &tx, R &ty,
                                        R &tz) const
    {
        const R dx = yx - s.x, dy = yy - s.y, dz = yz - s.z;
        const auto w = fpair_laplace_r(pair_inv<NEWTON>(dx * dx + dy * dy + dz * dz), (R)s.w);
        tp += w.pot;
        tx -= dx * w.g, ty -= dy * w.g, tz -= dz * w.g;
    }
};

/* 1/sqrt(d) of a smooth kernel's d = r^2 + s^2 > 0: no mask (fp64: the Newton step where
 * NEWTON, else the third-order correction; fp32: MUFU.RSQ). */
template <int NEWTON, typename R> static __device__ __forceinline__ R soft_inv(R d)
{
    if constexpr (sizeof(R) == 8)
        return pair_inv_distinct(NEWTON, d);
    else
        return rsqrt_plain(d);
}

/* plummer, G = 1/sqrt(r^2 + s^2): pair.h's plummer (laplace_r of r^2 + s^2) with this
 * engine's 1/sqrt; q / s at r = 0. */
template <typename R> struct fmk_p2p_plummer {
    static constexpr bool smooth = true;
    R eps2; /* s^2 */

    template <int NEWTON, int MASK> __device__ __forceinline__ auto factors(R r2) const
    {
        return fpair_laplace_k(soft_inv<NEWTON>(r2 + eps2));
    }

    template <int NEWTON, typename V>
    __device__ __forceinline__ void add(const V s, R yx, R yy, R yz, R &tp, R &tx, R &ty,
                                        R &tz) const
    {
        const R dx = yx - s.x, dy = yy - s.y, dz = yz - s.z;
        const auto w =
            fpair_laplace_r(soft_inv<NEWTON>(dx * dx + dy * dy + dz * dz + eps2), (R)s.w);
        tp += w.pot;
        tx -= dx * w.g, ty -= dy * w.g, tz -= dz * w.g;
    }
};

/* regularized, G = (r^2 + 1.5 s^2) / (r^2 + s^2)^(3/2): pair.h's regularized_r and _k with
 * 1/d = (1/sqrt(d))^2 (as the direct engine); 3 q / (2 s) at r = 0. */
template <typename R> struct fmk_p2p_regularized {
    static constexpr bool smooth = true;
    R eps2, e15, e25; /* s^2, 1.5 s^2, 2.5 s^2 */

    template <int NEWTON, int MASK> __device__ __forceinline__ auto factors(R r2) const
    {
        const R rinv = soft_inv<NEWTON>(r2 + eps2);
        return fpair_regularized_k(rinv, rinv * rinv, r2, e15, e25);
    }

    template <int NEWTON, typename V>
    __device__ __forceinline__ void add(const V s, R yx, R yy, R yz, R &tp, R &tx, R &ty,
                                        R &tz) const
    {
        const R dx = yx - s.x, dy = yy - s.y, dz = yz - s.z;
        const R r2 = dx * dx + dy * dy + dz * dz, rinv = soft_inv<NEWTON>(r2 + eps2);
        const auto w = fpair_regularized_r(rinv, rinv * rinv, r2, (R)s.w, e15, e25);
        tp += w.pot;
        tx -= dx * w.g, ty -= dy * w.g, tz -= dz * w.g;
    }
};

/* One pair (i, j) both ways (sources = targets, fp64): i's sums (pi .. gzi) from j, j's (pj ..
 * gzj) from i; the kernel's factors serve both. */
template <int NEWTON, int MASK, typename K>
static __device__ __forceinline__ void
pair_both(const K &ker, double xi, double yi, double zi, double qi, double &pi, double &gxi,
          double &gyi, double &gzi, double xj, double yj, double zj, double qj, double &pj,
          double &gxj, double &gyj, double &gzj)
{
    const double dx = xi - xj, dy = yi - yj, dz = zi - zj;
    const double r2 = dx * dx + dy * dy + dz * dz;
    const auto k = ker.template factors<NEWTON, MASK>(r2);
    pi = fma(qj, k.pot, pi), pj = fma(qi, k.pot, pj);
    const double fj = qj * k.g, fi = qi * k.g;
    gxi = fma(-fj, dx, gxi), gyi = fma(-fj, dy, gyi), gzi = fma(-fj, dz, gzi);
    gxj = fma(fi, dx, gxj), gyj = fma(fi, dy, gyj), gzj = fma(fi, dz, gzj);
}

/* The pair kernel of a plan in precision R (kernel, softening in the tree's units), passed to
 * f: f(fmk_p2p_laplace<R>{}) and so on. */
template <typename R, typename F>
static void fmk_p2p_with_kernel(fmk_kernel kernel, double softening, F &&f)
{
    const double cs = sizeof(R) == 4 ? FMK_CUDA_LAPLACE32_SCALE : 1.0;
    const double e2 = softening * cs * (softening * cs);
    if (kernel == FMK_KERNEL_PLUMMER)
        f(fmk_p2p_plummer<R>{(R)e2});
    else if (kernel == FMK_KERNEL_REGULARIZED)
        f(fmk_p2p_regularized<R>{(R)e2, (R)(1.5 * e2), (R)(2.5 * e2)});
    else
        f(fmk_p2p_laplace<R>{});
}

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
