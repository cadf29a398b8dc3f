/*
 * fmm2d_ops.h -- the 2D FMM's operators on one box or one pair of boxes (CPU), in the scaled
 * form of fmm2d.h: a multipole about centre c with scale r is a_0 log(z - c) + sum_k a_k
 * (r / (z - c))^k, a local expansion sum_l b_l ((z - c) / r)^l, k, l = 0 .. p. Charges are
 * complex (log2d: imaginary part 0); every operator adds into its output. The value V and the
 * derivative D that L2P, M2P and P2P accumulate are those of F (log2d) or f (cauchy2d), fmm2d.h.
 * The GPU engine implements the same formulas (cuda/fmm2d.cu).
 */
#ifndef FMMKIT_FMM2D_OPS_H
#define FMMKIT_FMM2D_OPS_H

#include "fmm2d/fmm2d.h"

#ifdef __cplusplus
extern "C" {
#endif

/* P2M: n sources (xy interleaved, charges q) into the multipole a of a box (c, r). */
void fmk_fmm2d_p2m(int is_log, int p, fmk_cplx c, double r, int64_t n, const double *xy,
                   const fmk_cplx *q, fmk_cplx *a);
/* M2M: child multipole (cc, rc, a) into the parent's (cp, rp, ap); Goude & Engblom Alg. 3.4. */
void fmk_fmm2d_m2m(int p, fmk_cplx cc, double rc, const fmk_cplx *a, fmk_cplx cp, double rp,
                   fmk_cplx *ap);
/* M2L: multipole (cs, rs, a) into the local expansion (ct, rt, b); Alg. 3.6. */
void fmk_fmm2d_m2l(int p, fmk_cplx cs, double rs, const fmk_cplx *a, fmk_cplx ct, double rt,
                   fmk_cplx *b);
/* L2L: parent local (cp, rp, b) into the child's (cc, rc, bc); Alg. 3.5. */
void fmk_fmm2d_l2l(int p, fmk_cplx cp, double rp, const fmk_cplx *b, fmk_cplx cc, double rc,
                   fmk_cplx *bc);
/* P2L: n sources (far from the box) into the local expansion b of the box (c, r). */
void fmk_fmm2d_p2l(int is_log, int p, fmk_cplx c, double r, int64_t n, const double *xy,
                   const fmk_cplx *q, fmk_cplx *b);
/* L2P and M2P at one point z: V and D of the expansion added into v[0], v[1]. */
void fmk_fmm2d_l2p(int p, fmk_cplx c, double r, const fmk_cplx *b, fmk_cplx z, fmk_cplx v[2]);
void fmk_fmm2d_m2p(int p, fmk_cplx c, double r, const fmk_cplx *a, fmk_cplx z, fmk_cplx v[2]);
/* P2P at z from sources [0, n): V, D into v[0], v[1]; the charge of sources at distance 0 (left
 * out: the self term and coincident points) into *q_zero (log2d's frame shift needs it). */
void fmk_fmm2d_p2p(int is_log, int64_t n, const double *xy, const fmk_cplx *q, fmk_cplx z,
                   fmk_cplx v[2], double *q_zero);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_FMM2D_OPS_H */
