/* pair.h -- the pair interaction of each kernel, written once for the CPU and the GPU: one
 * source's contribution (potential and gradient) at one target, in the frame's working units
 * (core/internal.h), with the coincidence rule of docs/kernels.md.
 *
 * Included once per working precision, as p2p_tile.h and bh_terms.h are, with defined:
 *   REAL        float or double
 *   RSQRT(x)    its 1/sqrt (the CPU: 1 / sqrt(x); a GPU engine its own instruction)
 *   SQRT(x)     its sqrt (only for regularized: without SQRT there is no regularized pair)
 *   LOG(x)      its log (only for log2d: without LOG there is no log2d pair)
 *   PAIR(name)  the name of each function and type of this instantiation
 *   PAIR_T(name) optional: the name of each type, where it must differ from the functions'
 *               (a C++ caller that instantiates both precisions under one overloaded name)
 * Each caller keeps its own offset (how it forms y - x) and accumulation; the functions take
 * the squared distance (or 1/r, the _r forms) and the charge, and return what the caller adds.
 *
 * Radial kernels return {pot, g}: the potential, and g with grad_y = -g (y - x). */

#ifndef FMMKIT_PAIR_H
#define FMMKIT_PAIR_H
/* FMK_HD marks a function for host and device; FMK_INLINE makes sure it is inlined, so the
 * caller's loop sees the same expressions as if written in place (the same fused multiply-adds
 * and the same vectorization): FMK_PAIR_FN REAL f(...). */
#ifdef __CUDACC__
#define FMK_HD __host__ __device__
#define FMK_INLINE __forceinline__
#else
#define FMK_HD
#define FMK_INLINE inline __attribute__((always_inline))
#endif
#endif /* FMMKIT_PAIR_H */

/* How each function is declared: host and device, inlined; a device-only caller whose RSQRT or
 * LOG exists on the device alone defines FMK_PAIR_FN as static __device__ __forceinline__. */
#ifndef FMK_PAIR_FN
#define FMK_PAIR_FN FMK_HD static FMK_INLINE
#define FMK_PAIR_FN_DEFAULT
#endif

#ifndef PAIR_T /* the name of each type (C++ callers that overload on REAL give types apart) */
#define PAIR_T(name) PAIR(name)
#define FMK_PAIR_T_DEFAULT
#endif

typedef struct PAIR_T(radial) {
    REAL pot, g;
} PAIR_T(radial);

/* Each radial kernel has a form that takes 1/r (or 1/sqrt(d)) from the caller, who forms it
 * with its own instruction (RSQRT, a masked GPU seed, a Newton step) and its own coincidence
 * mask, and the form on r2 that uses RSQRT with the mask of docs/kernels.md. The formulas are
 * those of the _r form; the other is a convenience. */

/* laplace, G = 1/r, from rinv = 1/r (0 for a coincident pair): pot = q / r, g = q / r^3. */
FMK_PAIR_FN PAIR_T(radial) PAIR(laplace_r)(REAL rinv, REAL q)
{
    const REAL qr = q * rinv;
    const PAIR_T(radial) w = {qr, qr * rinv * rinv};
    return w;
}

/* laplace on r2: a coincident pair (r2 == 0, exact in the frame) adds nothing. */
FMK_PAIR_FN PAIR_T(radial) PAIR(laplace)(REAL r2, REAL q)
{
    return PAIR(laplace_r)(r2 > 0 ? RSQRT(r2) : 0, q);
}

/* plummer, G = 1/sqrt(r^2 + s^2) (eps2 = s^2): laplace_r of t = r2 + eps2. With eps2 = 0 it is
 * laplace with its coincidence rule (the treecode uses it so). */
FMK_PAIR_FN PAIR_T(radial) PAIR(plummer)(REAL r2, REAL q, REAL eps2)
{
    const REAL t = r2 + eps2;
    return PAIR(laplace_r)(t > 0 ? RSQRT(t) : 0, q);
}

/* regularized (van Rees et al. eq. 7 without -1/(4 pi)), d = r^2 + s^2, from rinv = 1/sqrt(d)
 * and dinv = 1/d: pot = q (r^2 + 1.5 s^2) / d^(3/2), g = q (r^2 + 2.5 s^2) / d^(5/2);
 * e15 = 1.5 eps2 and e25 = 2.5 eps2, computed once by the caller. */
FMK_PAIR_FN PAIR_T(radial)
    PAIR(regularized_r)(REAL rinv, REAL dinv, REAL r2, REAL q, REAL e15, REAL e25)
{
    const REAL qw = q * rinv * dinv; /* q / d^(3/2) */
    const PAIR_T(radial) w = {qw * (r2 + e15), qw * (r2 + e25) * dinv};
    return w;
}

#ifdef SQRT
/* regularized on r2 (needs SQRT): 1/d, then its square root. */
FMK_PAIR_FN PAIR_T(radial)
    PAIR(regularized)(REAL r2, REAL q, REAL eps2, REAL e15, REAL e25)
{
    const REAL dinv = (REAL)1 / (r2 + eps2);
    return PAIR(regularized_r)(SQRT(dinv), dinv, r2, q, e15, e25);
}
#endif

/* The factor form, for a pair applied both ways (sources = targets): pot = q * k.pot and
 * g = q * k.g for either charge, the factors formed once. */
FMK_PAIR_FN PAIR_T(radial) PAIR(laplace_k)(REAL rinv)
{
    const PAIR_T(radial) k = {rinv, rinv * rinv * rinv};
    return k;
}
FMK_PAIR_FN PAIR_T(radial)
    PAIR(regularized_k)(REAL rinv, REAL dinv, REAL r2, REAL e15, REAL e25)
{
    const REAL w = rinv * dinv;
    const PAIR_T(radial) k = {w * (r2 + e15), w * (r2 + e25) * dinv};
    return k;
}

#ifdef LOG
/* log2d, G = log r: pot = q (log r + logw), g = -q / r^2 (grad_y = q (y - x) / r^2); logw
 * restores the frame's scale (log of its width). A coincident pair adds nothing. */
FMK_PAIR_FN PAIR_T(radial) PAIR(log2d)(REAL r2, REAL q, REAL logw)
{
    const int near = r2 > 0;
    const REAL qm = near ? q : 0;
    const REAL r2inv = near ? (REAL)1 / r2 : 0;
    const PAIR_T(radial) w = {qm * ((REAL)0.5 * LOG(near ? r2 : (REAL)1) + logw), -(qm * r2inv)};
    return w;
}
#endif

/* cauchy2d (Goude & Engblom eq. 5.1): with w = z_j - z = a + ib (source minus target) and
 * Gamma = gr + i gi, phi = Gamma / w and dphi/dz = Gamma / w^2; a coincident pair adds nothing.
 * Returns phi (re, im) and dphi/dz (re, im). */
typedef struct PAIR_T(complex) {
    REAL pr, pi, dr, di;
} PAIR_T(complex);

FMK_PAIR_FN PAIR_T(complex) PAIR(cauchy2d)(REAL a, REAL b, REAL gr, REAL gi)
{
    const REAL r2 = a * a + b * b;
    const REAL r2inv = r2 > 0 ? (REAL)1 / r2 : 0;
    /* 1/w = (a - ib)/r^2 ; 1/w^2 = ((a^2 - b^2) - 2iab)/r^4 */
    const REAL ur = a * r2inv, ui = -b * r2inv;
    const REAL vr = ur * ur - ui * ui, vi = 2 * ur * ui;
    const PAIR_T(complex)
        c = {gr * ur - gi * ui, gr * ui + gi * ur, gr * vr - gi * vi, gr * vi + gi * vr};
    return c;
}

#ifdef FMK_PAIR_FN_DEFAULT
#undef FMK_PAIR_FN
#undef FMK_PAIR_FN_DEFAULT
#endif
#ifdef FMK_PAIR_T_DEFAULT
#undef PAIR_T
#undef FMK_PAIR_T_DEFAULT
#endif
