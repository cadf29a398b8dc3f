/* pair_exact.h -- the fp64 direct sum's pairs in the exact frame (core/internal.h,
 * FMK_FRAME_EXACT) that its fast loops do not take, written once for the CPU engine
 * (direct/p2p_cpu.c) and the GPU one (direct/cuda/p2p.cu).
 *
 * In the exact frame mapped coordinates are the caller's, scaled by 2^-E (E the frame's width
 * exponent) and lie in (-2, 2); the charges are scaled by 2^-qexp so that |q| < 1. The fast loops
 * (kernels/pair.h) then neither overflow nor lose accuracy for every pair at least
 * FMK_EXACT_TINY apart in some coordinate (r'^2 >= 2^-600, q / r'^3 <= 2^900). Closer pairs exist
 * only in a plan with a mapped coordinate x' of 0 < |x'| < FMK_EXACT_COORD_MIN (distinct doubles
 * that are 0 or at least 2^-248 in magnitude differ by at least 2^-300, the spacing at 2^-248).
 * Such a plan ("careful") sums each pair in one of three classes by the largest component m of
 * its offset d = y' - x': class 0 (m >= 2^-300) as the fast loops do; class 1
 * (2^-700 <= m < 2^-300) and class 2 (m < 2^-700) on the offset times 2^500 and 2^900 (exact:
 * the scaled offset lies in [2^-200, 2^200), each component above 2^-574), where the same
 * formulas hold, into sums of their own. A sum of class c carries 2^(p shift_c) of the mapped
 * value, p the power of the width in that value (fmk_exact_power): the results are
 * sum_c ldexp(sum_c, qexp + p (shift_c - E)). So every pair is the kernel of the caller's offset
 * rounded once, for any finite input, with no call per pair (the loops stay vectorized). */
#ifndef FMMKIT_PAIR_EXACT_H
#define FMMKIT_PAIR_EXACT_H

#include <math.h>

#include "fmmkit.h"

#ifndef FMK_HD_EXACT
#ifdef __CUDACC__
#define FMK_HD_EXACT __host__ __device__ __forceinline__
#else
#define FMK_HD_EXACT inline __attribute__((always_inline))
#endif
#endif

/* Pairs closer than this (largest |y' - x'| of the three axes) are not the fast loops'. */
#define FMK_EXACT_TINY 0x1p-300
/* A plan with a mapped coordinate of 0 < |x'| below this may hold such pairs. */
#define FMK_EXACT_COORD_MIN 0x1p-248
/* The classes' scales: offsets times 2^0, 2^500, 2^900. */
#define FMK_EXACT_SHIFT1 500
#define FMK_EXACT_SHIFT2 900

/* 1 when mapped coordinate x (exact frame) can make a pair closer than FMK_EXACT_TINY. */
static FMK_HD_EXACT int fmk_exact_coord_is_tiny(double x)
{
    return x != 0 && fabs(x) < FMK_EXACT_COORD_MIN;
}

/* The class of a pair by the largest component m of its offset: 0, 1 or 2 (see above; a
 * coincident pair, m = 0, is class 2 and stays at offset 0). */
static FMK_HD_EXACT int fmk_exact_class(double m)
{
    return m >= FMK_EXACT_TINY ? 0 : m >= 0x1p-700 ? 1 : 2;
}

/* The scale of a class's offsets (exact powers of two) and its exponent. */
static FMK_HD_EXACT double fmk_exact_scale(int c)
{
    return c == 0 ? 1.0 : c == 1 ? 0x1p500 : 0x1p900;
}
static FMK_HD_EXACT int fmk_exact_shift(int c)
{
    return c == 0 ? 0 : c == 1 ? FMK_EXACT_SHIFT1 : FMK_EXACT_SHIFT2;
}

/* The power p of 1/width in sum v (0..3) of a kernel's four: laplace and the smooth kernels
 * (pot, gx, gy, gz): 1, 2, 2, 2; log2d (pot, gx, gy): 0 (log(width) is added per source), 1, 1;
 * cauchy2d (phi re, im, dphi/dz re, im): 1, 1, 2, 2. */
static FMK_HD_EXACT int fmk_exact_power(fmk_kernel kernel, int v)
{
    if (kernel == FMK_KERNEL_LOG2D)
        return v == 0 ? 0 : 1;
    if (kernel == FMK_KERNEL_CAUCHY2D)
        return v < 2 ? 1 : 2;
    return v == 0 ? 1 : 2;
}

/* Sum v in caller units from the sums of the classes (a[c][v], nclass of them: 1 for the fast
 * loops, 3 for a careful plan): each scaled by one ldexp, exact unless the result leaves the
 * range of doubles. */
static FMK_HD_EXACT double fmk_exact_value(fmk_kernel kernel, const double a[][4], int nclass,
                                           int v, int qexp, int wexp)
{
    const int p = fmk_exact_power(kernel, v);
    double r = 0;
    for (int c = 0; c < nclass; c++)
        r += ldexp(a[c][v], qexp + p * (fmk_exact_shift(c) - wexp));
    return r;
}

/* The exponent that brings the largest |charge| big into [0.5, 1): charges are scaled by
 * 2^-exponent (exactly) before the sums, and the results by 2^exponent after them. */
static FMK_HD_EXACT int fmk_exact_charge_exp(double big)
{
    return big > 0 && isfinite(big) ? ilogb(big) + 1 : 0;
}

#endif /* FMMKIT_PAIR_EXACT_H */
