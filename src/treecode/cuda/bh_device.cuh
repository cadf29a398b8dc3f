/*
 * bh_device.cuh -- device code that several files of the GPU treecode share (bh_cuda.h): the
 * expansion terms of bh_terms.h and bh_local.h in both precisions, the charge check as the
 * kernels read it, and the results' store.
 */
#ifndef FMMKIT_TREECODE_BH_DEVICE_CUH
#define FMMKIT_TREECODE_BH_DEVICE_CUH

#include "treecode/cuda/bh_cuda.h"

#define REAL float
#define RSQRT rsqrtf
#define BH(name) name##_f
#include "treecode/bh_terms.h"
#include "treecode/bh_local.h"
#undef REAL
#undef RSQRT
#undef BH
#define REAL double
#define RSQRT rsqrt
#define BH(name) name##_d
#include "treecode/bh_terms.h"
#include "treecode/bh_local.h"
#undef REAL
#undef RSQRT
#undef BH

static __device__ __forceinline__ void m2p(int order, float rx, float ry, float rz, float eps2,
                                           const float *m, float *phi, float *g)
{
    m2p_f(order, rx, ry, rz, eps2, m, phi, g);
}
static __device__ __forceinline__ void m2p(int order, double rx, double ry, double rz, double eps2,
                                           const double *m, double *phi, double *g)
{
    m2p_d(order, rx, ry, rz, eps2, m, phi, g);
}
static __device__ __forceinline__ void p2p(float dx, float dy, float dz, float q, float eps2,
                                           float *phi, float *g)
{
    p2p_f(dx, dy, dz, q, eps2, phi, g);
}
static __device__ __forceinline__ void p2p(double dx, double dy, double dz, double q, double eps2,
                                           double *phi, double *g)
{
    p2p_d(dx, dy, dz, q, eps2, phi, g);
}

static __device__ __forceinline__ float rsqrt_(float t)
{
    return rsqrtf(t);
}
static __device__ __forceinline__ double rsqrt_(double t)
{
    return rsqrt(t);
}

/* Accepted nodes of at most this many points are summed directly. */
template <int ORDER> struct p2p_cut {
    static constexpr int value = ORDER == 2 ? 3 : ORDER == 1 ? 2 : 1;
};

/* The charge check's words (k_charge_stats): stats[0] the complement of the first non-finite
 * charge's index (0: none; so that one memset clears every word), stats[1] the bits of the
 * largest |q|. The charges go to the walk times charge_scale:
 * in fp32 the power of two that brings the largest |q| into [1, 2) (exact, so the moments
 * neither under- nor overflow), else 1. Read on the device, so eval does not wait for the
 * check: with a bad charge the walks write nothing and the host reports it after the wait. */
template <typename R>
__device__ __forceinline__ double charge_scale(const unsigned long long *__restrict__ stats)
{
    if (sizeof(R) != 4 || stats[1] == 0)
        return 1.0;
    return ldexp(1.0, -ilogb(__longlong_as_double((long long)stats[1])));
}

static __device__ __forceinline__ bool charges_bad(const unsigned long long *__restrict__ stats)
{
    return stats[0] != 0;
}

/* u: 1 / charge_scale. */
template <typename R>
__device__ __forceinline__ void store(const fmk_bh_walk_args<R> &a, int32_t t, R phi, const R *g,
                                      double u, int64_t part = 0)
{
    const int64_t o = a.trg_order[t] + part * a.m;
    if (a.pot)
        a.pot[o] = (double)phi * a.pot_scale * u;
    if (a.grad) {
        const double gs = a.grad_scale * u;
        a.grad[3 * o] = (double)g[0] * gs * a.grad_scale2;
        a.grad[3 * o + 1] = (double)g[1] * gs * a.grad_scale2;
        a.grad[3 * o + 2] = (double)g[2] * gs * a.grad_scale2;
    }
}

#endif /* FMMKIT_TREECODE_BH_DEVICE_CUH */
