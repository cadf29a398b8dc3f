/* close32.h -- the offset of a near-field pair in the fp32 fast methods (treecode and 3D FMM, CPU
 * and GPU), written once.
 *
 * Those methods form a pair's offset y - x from positions relative to a nearby centre (the
 * group's or the leaf's), rounded to fp32 once: an error of 2^-24 of the pair's distance to that
 * centre, not of the frame, so close pairs keep their accuracy. But that offset resolves pairs
 * the frame's fp32 coordinates do not: two points that coincide after mapping (core/internal.h:
 * equal fp32 coordinates of the box frame) had a tiny offset instead of none (their 1/r^3
 * overflowed fp32: Inf and NaN), and points a unit of the frame apart could have an offset of
 * almost nothing. So a pair whose fp32 frame coordinates lie at most FMK_CLOSE32 apart on every
 * axis (equal or next to each other: the frame's units are 2^-23 in [1, 2), 2^-22 at 2) takes
 * the frame's offset, exactly what the fp32 direct sum uses: 0 for coincident points (the pair
 * adds nothing, docs/kernels.md), at least a unit otherwise. Any other pair is at least 2^-22
 * apart, its relative offset (error at most 2^-23, the rounding of two positions within the
 * frame's [1, 2]^3 of their centre) at least 2^-23: r^2 >= 2^-46, as in the frame. */
#ifndef FMMKIT_CLOSE32_H
#define FMMKIT_CLOSE32_H

#include <math.h>

#ifndef FMK_HD_CLOSE32
#ifdef __CUDACC__
#define FMK_HD_CLOSE32 __host__ __device__ __forceinline__
#else
#define FMK_HD_CLOSE32 inline __attribute__((always_inline))
#endif
#endif

#define FMK_CLOSE32 0x1p-22f

/* 1 when the frame offset (fx, fy, fz) (of fp32 frame coordinates, exact) makes the pair close:
 * limit is FMK_CLOSE32 times the power of two that scales the engine's coordinates (1 on the
 * CPU, 2^12 in the GPU treecode, 2^23 in the GPU FMM's near field). */
static FMK_HD_CLOSE32 int fmk_close32(float fx, float fy, float fz, float limit)
{
    /* comparisons, not fmaxf: GCC vectorizes these, not fmaxf's NaN rule */
    return (fabsf(fx) <= limit) & (fabsf(fy) <= limit) & (fabsf(fz) <= limit);
}

#endif /* FMMKIT_CLOSE32_H */
