/*
 * fmm3d_ops.h -- the Laplace expansion operators of the 3D FMM (P2M, M2M, M2L, L2L, L2P, P2L,
 * M2P) in double precision, shared by the CPU and GPU engines. docs/fmm3d.md derives every
 * formula used here; this header states the conventions a caller needs.
 *
 * Kernel: G(x, y) = 1/|x - y| (no 4 pi); gradients are grad_y of the potential at target y.
 *
 * Harmonics (Schmidt semi-normalised, Condon-Shortley phase; docs/fmm3d.md section 1). With
 * (r, theta, phi) the spherical coordinates of x and P_n^m the associated Legendre function
 * with the (-1)^m phase,
 *     regular    R_n^m(x) = r^n      sqrt((n-m)!/(n+m)!) P_n^m(cos theta) e^{i m phi}
 *     irregular  I_n^m(x) = r^-(n+1) sqrt((n-m)!/(n+m)!) P_n^m(cos theta) e^{i m phi}
 * for |m| <= n, X_n^-m = (-1)^m conj(X_n^m), and |R_n^m| <= r^n, |I_n^m| <= r^-(n+1): no
 * factorials reach the stored values. The addition theorem (paper 004 eq. 5 without 4 pi):
 *     1/|x - y| = sum_{n >= 0} sum_{|m| <= n} conj(R_n^m(y)) I_n^m(x),   |y| < |x|.
 *
 * Expansions of order p about a centre c with a scale s > 0 (the box side, say; it keeps the
 * stored values O(1) at any tree depth, so nothing under- or overflows to p = 40 at level 21):
 *     multipole  phi(y) = sum_{n <= p} sum_m  s^n M_n^m  I_n^m(y - c),
 *                M_n^m  = sum_j q_j conj(R_n^m((x_j - c) / s))                       (P2M)
 *     local      phi(y) = sum_{n <= p} sum_m  s^-n L_n^m  R_n^m(y - c),
 *                L_n^m  = sum_j q_j conj(I_n^m((x_j - c) / s)) / s                  (P2L)
 *
 * Layout. Only m >= 0 is stored (the rest follows from the symmetry above): coefficient (n, m),
 * 0 <= m <= n <= p, is the complex number at index FMK_FMM3D_IDX(n, m) = n (n + 1)/2 + m,
 * stored as two doubles, real then imaginary: c[2 idx], c[2 idx + 1]. An expansion of order p
 * is 2 * fmk_fmm3d_ncoef(p) = (p + 1)(p + 2) doubles. M_n^0 and L_n^0 are real.
 *
 * Translations (point and shoot, docs/fmm3d.md section 3): rotate the expansion so the
 * translation vector lies along +z (Wigner d matrices from Risbo's recursion), translate along
 * z, rotate back: O(p^3) each. A rotation depends only on the direction, so an engine can
 * precompute it (fmk_fmm3d_rot_init) for the few directions of a level's M2M/L2L (8) and M2L
 * (316) and pass it in; with rot == NULL the operator computes it into the work array. Each
 * translation has an O(p^4) reference (_ref) that applies the addition theorems directly; the
 * tests compare the two.
 *
 * Threads. The context is read-only after creation, so any number of threads may share it; each
 * thread passes its own work array of fmk_fmm3d_work_size(ctx) doubles. Nothing here allocates
 * except fmk_fmm3d_ops_create, prints or aborts. Outputs are accumulated (+=), never overwritten,
 * so an engine sums the contributions of many sources into one expansion.
 */
#ifndef FMMKIT_FMM3D_OPS_H
#define FMMKIT_FMM3D_OPS_H

#include <stdint.h>

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Orders supported (the tests cover 0..40; the coefficient tables stay finite to 80). */
#define FMK_FMM3D_MAX_ORDER 80

/* Index of the complex coefficient (n, m), 0 <= m <= n. */
#define FMK_FMM3D_IDX(n, m) ((n) * ((n) + 1) / 2 + (m))

/* Tables that depend only on the order p. Read-only after fmk_fmm3d_ops_create. */
typedef struct fmk_fmm3d_ops_ctx {
    int order;         /* p */
    int64_t n_coef;    /* (p + 1)(p + 2)/2 complex coefficients per expansion */
    int64_t rot_size;  /* doubles in one rotation (fmk_fmm3d_rot_init) */
    int64_t work_size; /* doubles of work each call needs */
    double *sqrt_int;  /* sqrt(i), 0 <= i <= 2p + 4 */
    double *rec_a;     /* harmonic recursion, idx(n, m) for n <= 2p + 1 (see .c) */
    double *rec_b;
    double *rec_diag;      /* sqrt((2m - 1)/(2m)), m <= 2p + 1 */
    long double *log_fact; /* log(i!), i <= 4p + 2 (the references only) */
    double *sqrt_binom;    /* sqrt(C(a, b)), a, b <= 2p: [a * (2p + 1) + b] */
} fmk_fmm3d_ops_ctx;

/* Creates the tables for order p (0 <= p <= FMK_FMM3D_MAX_ORDER) into *ctx. Returns FMK_OK,
 * FMK_ERR_NULL (ctx NULL), FMK_ERR_ARG (p out of range) or FMK_ERR_NOMEM; on failure *ctx is
 * zeroed. */
fmk_status fmk_fmm3d_ops_create(fmk_fmm3d_ops_ctx *ctx, int order);

/* Frees the tables and zeroes *ctx; safe on a zeroed context and on NULL. */
void fmk_fmm3d_ops_destroy(fmk_fmm3d_ops_ctx *ctx);

/* Complex coefficients of an expansion of order p: (p + 1)(p + 2)/2. */
static inline int64_t fmk_fmm3d_ncoef(int order)
{
    return (int64_t)(order + 1) * (order + 2) / 2;
}

/* The order p for which truncating an expansion at separation ratio rho = a / r (a: radius of
 * the sphere holding the sources (multipole) or targets (local); r: distance from the centre to
 * the nearest target or source; for M2L rho = (a_source + a_target) / centre distance) keeps
 * the relative error below eps. Paper 004 eq. 6 bounds the error of the point-charge sum by
 * sum |q| / (r - a) rho^(p+1); relative to the potential of those charges at distance r + a,
 * that is rho^(p+1) (1 + rho)/(1 - rho), so p is the smallest integer with
 *     rho^(p+1) (1 + rho) / (1 - rho) <= eps.
 * Returns -1 for rho outside (0, 1) or eps outside (0, 1); at most FMK_FMM3D_MAX_ORDER. */
int fmk_fmm3d_order_for(double eps, double rho);

/* The harmonics of one point (x, y, z), 0 <= m <= n <= degree in the
 * layout above: R_n^m(x) into R, I_n^m(x) into I (x must not be the origin); degree <= 2p + 1. */
void fmk_fmm3d_regular(const fmk_fmm3d_ops_ctx *ctx, int degree, double x, double y, double z,
                       double *R);
void fmk_fmm3d_irregular(const fmk_fmm3d_ops_ctx *ctx, int degree, double x, double y, double z,
                         double *I);

/* Doubles of work array each operator needs. */
static inline int64_t fmk_fmm3d_work_size(const fmk_fmm3d_ops_ctx *ctx)
{
    return ctx->work_size;
}

/* ---------------------------------------------------------------------------------------------
 * Point operators. Points are interleaved (x[3 i + k]); centre c[3]; scale s > 0.
 * ------------------------------------------------------------------------------------------ */

/* P2M: M += the multipole of n charges q at x about (c, s). */
void fmk_fmm3d_p2m(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                   const double *x, const double *q, double *M, double *work);

/* P2L: L += the local expansion about (c, s) of n charges q at x (each |x - c| > 0). */
void fmk_fmm3d_p2l(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                   const double *x, const double *q, double *L, double *work);

/* M2P: pot[i] += phi(y_i), grad[3 i + k] += d phi / d y_k of the multipole M about (c, s), at
 * n targets y (each |y - c| > 0). pot or grad may be NULL. */
void fmk_fmm3d_m2p(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, const double *M,
                   int64_t n, const double *y, double *pot, double *grad, double *work);

/* L2P: the same for the local expansion L about (c, s). */
void fmk_fmm3d_l2p(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, const double *L,
                   int64_t n, const double *y, double *pot, double *grad, double *work);

/* The same four operators for nv expansions and charge vectors at once (ops_points.c): each
 * point's harmonics are computed once. Vector v's charges at q + v q_stride, its expansion at
 * M (or L) + v m_stride, its potential at pot + v p_stride and gradient at grad + v g_stride.
 * work: fmk_fmm3d_points_work_size(ctx, nv) doubles. */
int64_t fmk_fmm3d_points_work_size(const fmk_fmm3d_ops_ctx *ctx, int nv);
void fmk_fmm3d_p2m_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                        const double *x, int nv, const double *q, int64_t q_stride, double *M,
                        int64_t m_stride, double *work);
void fmk_fmm3d_p2l_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                        const double *x, int nv, const double *q, int64_t q_stride, double *L,
                        int64_t l_stride, double *work);
void fmk_fmm3d_m2p_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int nv,
                        const double *M, int64_t m_stride, int64_t n, const double *y, double *pot,
                        int64_t p_stride, double *grad, int64_t g_stride, double *work);
void fmk_fmm3d_l2p_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int nv,
                        const double *L, int64_t l_stride, int64_t n, const double *y, double *pot,
                        int64_t p_stride, double *grad, int64_t g_stride, double *work);

/* ---------------------------------------------------------------------------------------------
 * Translations: from an expansion about (c_from, s_from) into one about (c_to, s_to), added to
 * out. rot: NULL, or the rotation of fmk_fmm3d_rot_init for the direction c_to - c_from (it must
 * be that direction; c_to == c_from is allowed with any rot or NULL). M2L needs
 * |c_to - c_from| larger than the two expansions' radii together for convergence.
 * ------------------------------------------------------------------------------------------ */

/* Doubles in one rotation: 2 (p + 1) + 4 sum_{n <= p} (n + 1)^2. */
static inline int64_t fmk_fmm3d_rot_size(const fmk_fmm3d_ops_ctx *ctx)
{
    return ctx->rot_size;
}

/* The rotation that takes the unit vector dir / |dir| to +z, into rot (rot_size doubles),
 * using work (work_size doubles). dir = 0 gives the identity. O(p^3). */
void fmk_fmm3d_rot_init(const fmk_fmm3d_ops_ctx *ctx, const double dir[3], double *rot,
                        double *work);

/* The first part of a rotation, cos(m phi) and sin(m phi) for m <= p (2 (p + 1) doubles), phi
 * the azimuth of dir (0 on the z axis). The rest of a rotation, the Wigner matrices at
 * rot + 2 (p + 1), depends only on the polar angle of dir: directions that share it (the V-list
 * offsets with equal ox^2 + oy^2 and oz, 61 classes for 316 directions) share those matrices. */
void fmk_fmm3d_rot_phase(const fmk_fmm3d_ops_ctx *ctx, const double dir[3], double *phase);

/* Coefficients in the rotated frame (forward) and back (inverse): out = rotated in (out is
 * overwritten here, not accumulated; in and out must not overlap). O(p^3). */
void fmk_fmm3d_rotate(const fmk_fmm3d_ops_ctx *ctx, const double *rot, int inverse,
                      const double *in, double *out);

void fmk_fmm3d_m2m(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                   double s_from, const double *M, const double c_to[3], double s_to, double *out,
                   double *work);
void fmk_fmm3d_m2l(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                   double s_from, const double *M, const double c_to[3], double s_to, double *out,
                   double *work);
void fmk_fmm3d_l2l(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                   double s_from, const double *L, const double c_to[3], double s_to, double *out,
                   double *work);

/* Translations along +z by t >= 0 (c_to = c_from + t e_z): out += translated in. O(p^3). */
void fmk_fmm3d_m2m_z(const fmk_fmm3d_ops_ctx *ctx, double t, double s_from, const double *M,
                     double s_to, double *out);
void fmk_fmm3d_m2l_z(const fmk_fmm3d_ops_ctx *ctx, double t, double s_from, const double *M,
                     double s_to, double *out);
void fmk_fmm3d_l2l_z(const fmk_fmm3d_ops_ctx *ctx, double t, double s_from, const double *L,
                     double s_to, double *out);

/* ---------------------------------------------------------------------------------------------
 * M2L on blocks: the M2Ls of one direction between boxes of equal side s, applied to up to
 * FMK_FMM3D_BLOCK expansions at once (docs/fmm3d.md section 3.1). A block holds expansion c in
 * column c: double r of it at X[r * FMK_FMM3D_BLOCK + c], r < 2 ncoef.
 * ------------------------------------------------------------------------------------------ */

/* Columns of a block. */
#define FMK_FMM3D_BLOCK 32

/* Doubles in a coaxial M2L matrix: sum_{m <= p} (p - m + 1)^2. */
int64_t fmk_fmm3d_m2l_zmat_size(const fmk_fmm3d_ops_ctx *ctx);

/* The coaxial M2L between boxes of one side s with centres tau s apart along +z, as s times
 * fmk_fmm3d_m2l_z's map (it does not depend on s): Z = fmk_fmm3d_m2l_zmat_size doubles. */
void fmk_fmm3d_m2l_zmat(const fmk_fmm3d_ops_ctx *ctx, double tau, double *Z);

/* Y = the M2L of the multipoles in columns [0, width) of X, scaled by s: the caller adds column
 * c of Y times 1/s into its box's local expansion. The rotation of the direction c_to - c_from
 * comes in its two parts (fmk_fmm3d_rot_phase): phase, and wigner = the matrices at
 * rot + 2 (p + 1) of fmk_fmm3d_rot_init for that direction or any with the same polar angle;
 * Z is the matrix of the distance tau = |c_to - c_from| / s. Columns up to width rounded up to
 * a multiple of 8 are computed (they must hold finite values, zeros say). X and Y are
 * 2 ncoef FMK_FMM3D_BLOCK doubles (X is overwritten), T is 2 (p + 1) FMK_FMM3D_BLOCK. */
void fmk_fmm3d_m2l_block(const fmk_fmm3d_ops_ctx *ctx, const double *phase, const double *wigner,
                         const double *Z, int width, double *X, double *Y, double *T);

/* O(p^4) references of the three translations (the addition theorems applied directly, sums in
 * long double), for the tests. Same arguments and accumulation as above, no rotation. */
void fmk_fmm3d_m2m_ref(const fmk_fmm3d_ops_ctx *ctx, const double c_from[3], double s_from,
                       const double *M, const double c_to[3], double s_to, double *out,
                       double *work);
void fmk_fmm3d_m2l_ref(const fmk_fmm3d_ops_ctx *ctx, const double c_from[3], double s_from,
                       const double *M, const double c_to[3], double s_to, double *out,
                       double *work);
void fmk_fmm3d_l2l_ref(const fmk_fmm3d_ops_ctx *ctx, const double c_from[3], double s_from,
                       const double *L, const double c_to[3], double s_to, double *out,
                       double *work);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_FMM3D_OPS_H */
