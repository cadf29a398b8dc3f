/*
 * resolution.h -- the resolution guard of the fast methods (docs/reliability.md, "Resolution").
 *
 * Every point is mapped to x' = 1.5 + (x - c) / w (core/internal.h), so each coordinate is
 * known to about u w (u = 2^-53 in fp64); an engine that also rounds positions to fp32
 * relative to a local centre (the treecode's groups, the 3D FMM's leaves) adds about 2^-25 of
 * that box. A pair term q / r then moves by about q dr / r^2, where dr, the error of r, is
 * a few of those units: the relative error grows as r shrinks. This guard estimates the
 * relative l2 error that rounding alone gives a method on the plan's points, and refuses the
 * points (FMK_ERR_ACCURACY) when it exceeds the accuracy asked for.
 *
 * The estimate (unit charges of random sign, the case where cancellation leaves rounding
 * most exposed). Points are sorted along the Morton curve at full fp64 resolution. For each
 * point i:
 *   - r_i, the distance to its nearest distinct neighbour along the curve (two on each side;
 *     coincident points are skipped: they add nothing to each other);
 *   - windows of 2^d, 4^d, 8^d, ... points centred on i along the curve, up to all points:
 *     window k holds w_k points inside a dyadic box of side h_k (the smallest one that holds
 *     the window's two ends, hence all of it), so its points lie within sqrt(d) h_k of i.
 * With s the mapped softening (0 for singular kernels), the squared potential of i is
 * modelled as the random walk P_i = 1/(r_i^2 + s^2) + sum_k (w_k - 1) / (d h_k^2 + s^2), the
 * squared error of its potential as E_i = delta_i^2 (r_i^2/(r_i^2 + s^2)^3 + sum_k (w_k - 1)
 * d h_k^2 / (d h_k^2 + s^2)^3) (each term's d(1/rho)/dr = r / rho^3 times dr), and the
 * gradient's likewise one power of the distance higher and twice the error. The estimate is
 *     e_pot = C sqrt(sum_i E_i / sum_i P_i),  e_grad = C sqrt(sum_i G_i / sum_i Q_i),
 * where delta_i is the frame's unit (0 when every point mapped exactly: fmk_frame.exact) plus,
 * for pairs within twice the engine's local box (its near field), the local unit times that
 * box's side, and C = FMK_RESOLUTION_C: the RMS of the radial error of a difference of two
 * rounded points, sqrt(2/3) delta, times a margin of 2. The points are refused when
 * e_pot > tol or e_grad > 10 tol (log2d: its potential log r is insensitive; only its
 * gradient, 1/r, counts). Sets of more than 2^14 points sum the windows at every
 * (n / 2^14)-th point, weighted; the neighbours, which carry the closest pairs, at every point.
 *
 * Cost: a sort of the keys (the radix sort of the octree; an engine's octree is reused where
 * it holds all the points) and O(n) work after it; no allocation stays behind. The calibration
 * against measured errors is in docs/reliability.md.
 */
#ifndef FMMKIT_RESOLUTION_H
#define FMMKIT_RESOLUTION_H

#include <math.h>
#include <stdint.h>

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define FMK_RES_HD __host__ __device__
#else
#define FMK_RES_HD
#endif

/* The estimate's constant: sqrt(2/3) (the RMS of the radial error of a difference of two
 * coordinates each rounded within +-delta) times a margin of 2. */
#define FMK_RESOLUTION_C 1.633

/* The rounding units of the frame's coordinates, as bounds of a uniform error: fp64 (half an
 * ulp in [1, 2], plus a quarter for the rounding of x - c) and fp32 (the direct engine's fp32
 * coordinates). */
#define FMK_RESOLUTION_FP64 (1.25 * 0x1p-53)
#define FMK_RESOLUTION_FP32 (0x1p-24)
/* The local unit of fp32 positions relative to the centre of their box, per side of the box:
 * positions spread over the box round by 0.218 2^-25 of its side (RMS), which is the RMS of a
 * uniform error within +-0.375 2^-25. */
#define FMK_RESOLUTION_FP32_LOCAL (0.375 * 0x1p-25)

/* What a method's arithmetic does to coordinates, and the accuracy it must meet. */
typedef struct fmk_resolution_opts {
    double tol;           /* relative accuracy of the potential (the gradient: 10 tol) */
    double frame_unit;    /* rounding of a mapped coordinate (FMK_RESOLUTION_FP64) */
    double local_unit;    /* > 0: positions also rounded to this unit (FMK_RESOLUTION_FP32_LOCAL)
                           * times the side of the box of local_points points around them */
    int64_t local_points; /* the engine's leaf or group size */
    int rounds_anyway;    /* 1: the engine rounds mapped coordinates to frame_unit itself (the
                           * fp32 direct sum), so the unit counts even where the frame mapped
                           * the points exactly (fmk_frame.exact) */
} fmk_resolution_opts;

/* The estimate. */
typedef struct fmk_resolution_est {
    double pot, grad;  /* estimated relative l2 errors from rounding alone */
    double closest;    /* the smallest distance between distinct points found (mapped units) */
    double local_part; /* the share of the error from the local unit (0..1) */
} fmk_resolution_est;

/* The terms of one point (see above), before the rounding units: the nearest distinct
 * distance r (INFINITY: none), the squared mapped softening s2, near (pairs up to this distance
 * take the near unit: an engine's local fp32 positions serve its near field only), and the
 * windows (counts w, sides h, n of them). Adds to t[0..5]: E near, E far, G near, G far (to be
 * scaled by the squares of the units), P, Q. */
static inline FMK_RES_HD void fmk_resolution_point(int dim, double r, double s2, double near,
                                                   const double *w, const double *h, int n,
                                                   double t[6])
{
    if (r < INFINITY) {
        const double rho2 = r * r + s2, i1 = 1 / rho2, i3 = i1 * i1 * i1;
        const int k = r <= near ? 0 : 1;
        t[4] += i1;
        t[5] += i1 * i1;
        t[k] += r * r * i3;
        t[2 + k] += 4 * i3;
    }
    for (int j = 0; j < n; j++) {
        if (!(h[j] > 0))
            continue;
        const double a = dim * h[j] * h[j], i1 = 1 / (a + s2), i3 = i1 * i1 * i1, m = w[j] - 1;
        const int k = h[j] <= near ? 0 : 1;
        t[4] += m * i1;
        t[5] += m * i1 * i1;
        t[k] += m * a * i3;
        t[2 + k] += 4 * m * i3;
    }
}

/* Morton order of grid coordinates (x highest at each bit), by Chan's comparison of most
 * significant bits: the axis whose difference has the highest bit decides. -1, 0 (equal
 * points) or 1. */
static inline FMK_RES_HD int fmk_resolution_fine_compare(const uint64_t a[3], const uint64_t b[3])
{
    int axis = 0;
    uint64_t top = a[0] ^ b[0];
    for (int k = 1; k < 3; k++) {
        const uint64_t d = a[k] ^ b[k];
        if (top < d && top < (top ^ d))
            axis = k, top = d;
    }
    return top ? (a[axis] < b[axis] ? -1 : 1) : 0;
}

/* The estimate from the summed terms. */
static inline FMK_RES_HD void fmk_resolution_finish(const double sums[4], double *pot, double *grad)
{
    *pot = sums[1] > 0 ? FMK_RESOLUTION_C * sqrt(sums[0] / sums[1]) : 0;
    *grad = sums[3] > 0 ? FMK_RESOLUTION_C * sqrt(sums[2] / sums[3]) : 0;
}

/* Whether an estimate meets tol for a kernel (log2d: only its gradient counts). */
static inline FMK_RES_HD int fmk_resolution_meets(fmk_kernel kernel, double pot, double grad,
                                                  double tol)
{
    if (kernel == FMK_KERNEL_LOG2D) /* its gradient 1/r is the 1/r term above */
        return pot <= 10 * tol;
    return pot <= tol && grad <= 10 * tol;
}

/* A bound of the estimate from the softening alone, for a softened kernel (mapped softening
 * s > 0), whatever the points: with rho^2 = r^2 + s^2, each term of E is at most
 * delta^2 / (4 s^2) times its term of P (r^2 / rho^6 against 1 / rho^2: r^2 / rho^4 peaks at
 * r = s), and each term of G at most 4 delta^2 / s^2 times its term of Q (4 / rho^6 against
 * 1 / rho^4), delta the largest unit a point takes: the frame's unit plus the local unit times
 * the largest local box (side_max; the frame's width, 1, unless the points were spread wider).
 * So e_pot <= C delta / (2 s) and e_grad <= 2 C delta / s. When these meet tol the estimate
 * does too, and the guard passes the points without its pass over them (a simulation's
 * softened forces, set every step, skip it). */
static inline int fmk_resolution_softened_meets(fmk_kernel kernel, const fmk_resolution_opts *o,
                                                double s, double frame_unit, double side_max)
{
    if (!(s > 0) || !(side_max >= 1))
        return 0;
    const double delta = frame_unit + (o->local_unit > 0 ? o->local_unit * side_max : 0);
    return fmk_resolution_meets(kernel, FMK_RESOLUTION_C * delta / (2 * s),
                                2 * FMK_RESOLUTION_C * delta / s, o->tol);
}

struct fmk_tree3d;

/* Estimates the rounding error of the plan's points (plan->sources and, unless self,
 * plan->targets, mapped) for a method with options o: sorts them along the Morton curve first.
 * Returns FMK_OK or FMK_ERR_NOMEM (with a message). */
fmk_status fmk_resolution_estimate(fmk_plan *plan, const fmk_resolution_opts *o,
                                   fmk_resolution_est *est);
/* The same for given mapped points: ns sources xs and nt targets xt (NULL: none). */
fmk_status fmk_resolution_estimate_points(fmk_plan *plan, const fmk_resolution_opts *o,
                                          const double *xs, int64_t ns, const double *xt,
                                          int64_t nt, fmk_resolution_est *est);
/* The same from an octree's points, already in Morton order (tree/tree3d.h): the points of
 * the plan the tree was built from (all of them: the sum runs over tree->points). */
fmk_status fmk_resolution_estimate_tree(fmk_plan *plan, const fmk_resolution_opts *o,
                                        const struct fmk_tree3d *tree, fmk_resolution_est *est);

/* The guard: FMK_OK when the estimate meets o->tol; otherwise FMK_ERR_ACCURACY with a message
 * that names the method, says why and what to do (or FMK_ERR_NOMEM). method: "tree", "fmm".
 * _tree: from an octree of all the points, as fmk_resolution_estimate_tree. */
fmk_status fmk_resolution_check(fmk_plan *plan, const char *method, const fmk_resolution_opts *o);
fmk_status fmk_resolution_check_tree(fmk_plan *plan, const char *method,
                                     const fmk_resolution_opts *o, const struct fmk_tree3d *tree);

/* FMK_OK when an estimate meets o->tol, else FMK_ERR_ACCURACY with the guard's message. */
fmk_status fmk_resolution_verdict(fmk_plan *plan, const char *method, const fmk_resolution_opts *o,
                                  const fmk_resolution_est *e);

/* The guard on the GPU (tree/cuda/resolution.cu; CUDA builds only), from a device octree of
 * n 3D points: d_order (sorted position -> point) and the mapped points d_x (n * 3 doubles,
 * the tree's input) whose distances are scale times the frame's (the 3D FMM's shrunk root).
 * The same estimate as fmk_resolution_estimate_tree: where the tree's order is not Morton order
 * at full resolution (points that share a key keep their index order) a copy of it is sorted,
 * and runs of coincident points share their nearest distinct neighbours. A few launches and
 * waits on the default stream. Returns as fmk_resolution_check, or a CUDA failure. */
fmk_status fmk_cuda_resolution_check(fmk_plan *plan, const char *method,
                                     const fmk_resolution_opts *o, int64_t n,
                                     const int32_t *d_order, const double *d_x, double scale);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_RESOLUTION_H */
