/* tree_close.h -- the point set of the treecode's fp32 close-pair tests (test_tree.c on the CPU,
 * tests/gpu/test_tree_gpu.c on the GPU), and their check.
 *
 * Four close pairs (charges +1 and -1, separations sep[k] of the core's size) sit in a core of
 * n_core points uniform in the unit cube, and 8 outliers 0.1 far .. far from the core (far
 * 1e3 .. 1e4) make the frame about far wide, so a pair is 1e-6 .. 3e-5 of the frame apart.
 * The core's points and the outliers carry charges below 1e-6, and the pairs are 0.7 apart, so
 * each pair point's field is its partner's to ~1e-5, and the tree's truncation of the rest
 * adds ~1e-8 relative: what the check sees is the rounding of the pair's offset.
 *
 * The bound (1e-5 relative, gradient at each pair point against a long double reference):
 * with positions held as offsets from the group's centre (bh_walk.h, bh.cu), a pair d apart
 * in a group of radius R_g errs by ~2^-24 (2 R_g + d), so the gradient by ~2^-23 (2 R_g + d)
 * / d relative: ~4e-6 at worst for R_g = 0.16 (127 targets of 20000 in the unit cube; 32 on
 * the GPU: 0.1) and d = 0.01. With fp32 coordinates of the frame it was 2^-23 frame / d,
 * 1e-2 .. 1e-1 here. */
#ifndef FMK_TREE_CLOSE_H
#define FMK_TREE_CLOSE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "testutil.h"

enum { TREE_CLOSE_PAIRS = 4, TREE_CLOSE_OUTLIERS = 8 };

/* Points n_core + 2 TREE_CLOSE_PAIRS + TREE_CLOSE_OUTLIERS into x (3 per point) and q; pair[]
 * gets the indices of the pair points. Returns the point count. */
static int64_t tree_close_set(int64_t n_core, double far, const double sep[TREE_CLOSE_PAIRS],
                              uint64_t seed, double *x, double *q,
                              int64_t pair[2 * TREE_CLOSE_PAIRS])
{
    test_rng rng = test_rng_seed(seed);
    int64_t n = 0;
    for (; n < n_core; n++) {
        for (int k = 0; k < 3; k++)
            x[3 * n + k] = test_uniform(&rng);
        q[n] = 1e-6 * test_uniform(&rng);
    }
    static const double at[TREE_CLOSE_PAIRS][3] = {
        {0.25, 0.25, 0.25}, {0.75, 0.75, 0.25}, {0.75, 0.25, 0.75}, {0.25, 0.75, 0.75}};
    for (int p = 0; p < TREE_CLOSE_PAIRS; p++) {
        double u[3], norm = 0;
        for (int k = 0; k < 3; k++)
            u[k] = test_normal(&rng), norm += u[k] * u[k];
        norm = sqrt(norm);
        for (int k = 0; k < 3; k++) {
            x[3 * n + k] = at[p][k] + 0.05 * test_uniform(&rng);
            x[3 * (n + 1) + k] = x[3 * n + k] + sep[p] * u[k] / norm;
        }
        q[n] = 1, q[n + 1] = -1;
        pair[2 * p] = n, pair[2 * p + 1] = n + 1;
        n += 2;
    }
    for (int j = 0; j < TREE_CLOSE_OUTLIERS; j++, n++) {
        double u[3], norm = 0;
        for (int k = 0; k < 3; k++)
            u[k] = test_normal(&rng), norm += u[k] * u[k];
        const double r = far * pow(10.0, -j / (double)(TREE_CLOSE_OUTLIERS - 1)) / sqrt(norm);
        for (int k = 0; k < 3; k++)
            x[3 * n + k] = 0.5 + r * u[k];
        q[n] = 1e-6 * test_uniform(&rng);
    }
    return n;
}

/* The width of the set's bounding cube (the frame's, before its margin). */
static double tree_close_width(int64_t n, const double *x)
{
    double w = 0;
    for (int k = 0; k < 3; k++) {
        double lo = x[k], hi = x[k];
        for (int64_t i = 1; i < n; i++)
            lo = x[3 * i + k] < lo ? x[3 * i + k] : lo, hi = x[3 * i + k] > hi ? x[3 * i + k] : hi;
        w = hi - lo > w ? hi - lo : w;
    }
    return w;
}

/* The largest relative error of the gradient at the pair points: grad (all n points) against
 * ref (the pair points only, in pair order). */
static double tree_close_error(const double *grad, const double *ref,
                               const int64_t pair[2 * TREE_CLOSE_PAIRS])
{
    double worst = 0;
    for (int p = 0; p < 2 * TREE_CLOSE_PAIRS; p++) {
        double e = 0, r = 0;
        for (int k = 0; k < 3; k++) {
            const double d = grad[3 * pair[p] + k] - ref[3 * p + k];
            e += d * d, r += ref[3 * p + k] * ref[3 * p + k];
        }
        const double rel = sqrt(e / r);
        worst = rel > worst || rel != rel ? rel : worst;
    }
    return worst;
}

#endif /* FMK_TREE_CLOSE_H */
