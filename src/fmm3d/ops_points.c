/*
 * ops_points.c -- the 3D FMM's point operators (P2M, P2L, M2P, L2P; conventions in
 * fmm3d_ops.h, formulas in docs/fmm3d.md) for nv charge vectors at once: each point's harmonics
 * are computed once for every vector.
 *
 * Sources (P2M, P2L): the harmonics of TILE points side by side, then every vector's
 * expansion gathers the tile's charges, coefficient by coefficient.
 *
 * Targets (L2P, M2P): every output is a real linear functional of the target's harmonics H
 * (regular for L2P, irregular to degree p + 1 for M2P's gradient). The expansion and the
 * derivative formulas of docs/fmm3d.md give, once per box and vector, the coefficients of the
 * four functionals (potential, three gradient components) on the real and imaginary parts of
 * H, in A[k][f]; at each tile of TILE targets the outputs are then the product of A with the
 * tile's harmonics H[k][t], a small matrix product whose TILE targets fill one vector register.
 */
#include <math.h>
#include <string.h>

#include "core/internal.h" /* FMK_TARGET_CLONES */
#include "fmm3d/fmm3d_ops.h"

#define IDX FMK_FMM3D_IDX

enum {
    TILE = 8,     /* points whose harmonics are computed side by side */
    GROUP_MAX = 16 /* functionals contracted together (accumulators held in registers) */
};

#if defined(__GNUC__)
#define POINTS_INLINE inline __attribute__((always_inline))
#else
#define POINTS_INLINE inline
#endif

/* Doubles of the harmonics to degree d: 2 ncoef(d). */
static int64_t harm_doubles(int degree)
{
    return 2 * fmk_fmm3d_ncoef(degree);
}

int64_t fmk_fmm3d_points_work_size(const fmk_fmm3d_ops_ctx *ctx, int nv)
{
    const int64_t K = harm_doubles(ctx->order + 1);
    return K * (TILE + 4 * (int64_t)(nv > 0 ? nv : 1));
}

/* The harmonics of TILE points side by side (fmk_fmm3d_regular's recursion, each step for the
 * TILE points at once, which fill a vector register): double k of point t at H[k TILE + t]. */
static FMK_TARGET_CLONES void regular_tile(const fmk_fmm3d_ops_ctx *ctx, int degree, const double *x,
                         const double *y, const double *z, double *H)
{
    double r2[TILE], dr[TILE], di[TILE], pr[TILE], pi[TILE], qr[TILE], qi[TILE];
#pragma omp simd
    for (int t = 0; t < TILE; t++)
        r2[t] = x[t] * x[t] + y[t] * y[t] + z[t] * z[t], dr[t] = 1, di[t] = 0;
    for (int m = 0; m <= degree; m++) {
        if (m > 0) {
            const double f = -ctx->rec_diag[m];
#pragma omp simd
            for (int t = 0; t < TILE; t++) {
                const double nr = f * (x[t] * dr[t] - y[t] * di[t]);
                const double ni = f * (x[t] * di[t] + y[t] * dr[t]);
                dr[t] = nr, di[t] = ni;
            }
        }
        double *c = H + 2 * IDX(m, m) * TILE;
#pragma omp simd
        for (int t = 0; t < TILE; t++)
            c[t] = dr[t], c[TILE + t] = di[t];
        if (m + 1 > degree)
            break;
        const double a1 = ctx->rec_a[IDX(m + 1, m)];
        c = H + 2 * IDX(m + 1, m) * TILE;
#pragma omp simd
        for (int t = 0; t < TILE; t++) {
            pr[t] = dr[t], pi[t] = di[t];
            qr[t] = a1 * z[t] * dr[t], qi[t] = a1 * z[t] * di[t];
            c[t] = qr[t], c[TILE + t] = qi[t];
        }
        for (int n = m + 2; n <= degree; n++) {
            const double a = ctx->rec_a[IDX(n, m)], b = ctx->rec_b[IDX(n, m)];
            c = H + 2 * IDX(n, m) * TILE;
#pragma omp simd
            for (int t = 0; t < TILE; t++) {
                const double az = a * z[t], br = b * r2[t];
                const double sr = az * qr[t] - br * pr[t], si = az * qi[t] - br * pi[t];
                c[t] = sr, c[TILE + t] = si;
                pr[t] = qr[t], pi[t] = qi[t], qr[t] = sr, qi[t] = si;
            }
        }
    }
}

/* The harmonics of u = (x_t - c) / s for the first nt <= TILE of the points x into H (layout
 * of regular_tile; lanes past nt repeat the first point), regular or irregular (Kelvin
 * inversion: I_n^m(u) = R_n^m(u / |u|^2) / |u|). */
static void harmonics_tile(const fmk_fmm3d_ops_ctx *ctx, int irregular, int degree,
                           const double c[3], double inv_s, const double *x, int nt, double *H)
{
    double u[TILE], v[TILE], w[TILE], inv_r[TILE];
    for (int t = 0; t < TILE; t++) {
        const double *p = x + 3 * (t < nt ? t : 0);
        u[t] = (p[0] - c[0]) * inv_s, v[t] = (p[1] - c[1]) * inv_s, w[t] = (p[2] - c[2]) * inv_s;
    }
    if (!irregular) {
        regular_tile(ctx, degree, u, v, w, H);
        return;
    }
#pragma omp simd
    for (int t = 0; t < TILE; t++) {
        const double inv_r2 = 1 / (u[t] * u[t] + v[t] * v[t] + w[t] * w[t]);
        inv_r[t] = sqrt(inv_r2);
        u[t] *= inv_r2, v[t] *= inv_r2, w[t] *= inv_r2;
    }
    regular_tile(ctx, degree, u, v, w, H);
    const int64_t K = harm_doubles(degree);
    for (int64_t k = 0; k < K; k++)
#pragma omp simd
        for (int t = 0; t < TILE; t++)
            H[k * TILE + t] *= inv_r[t];
}

/* ---------------------------------------------------------------------------------------------
 * Sources: out_v += sum_j scale q_vj conj(H(x_j)), H regular (P2M, scale 1) or irregular
 * (P2L, scale 1/s).
 * ------------------------------------------------------------------------------------------ */

/* out_v[k] += sum_t scale q_v[t] H[k TILE + t] (conjugated) for the tile's nt points. */
static FMK_TARGET_CLONES void gather_tile(int64_t K, const double *H, int nt, int nv,
                                          const double *q, int64_t q_stride, double scale,
                                          double *out, int64_t out_stride)
{
    for (int v = 0; v < nv; v++) {
        double qt[TILE] = {0};
        for (int t = 0; t < nt; t++)
            qt[t] = q[v * q_stride + t] * scale;
        double *o = out + v * out_stride;
        for (int64_t k = 0; k < K; k++) {
            double a = 0;
#pragma omp simd reduction(+ : a)
            for (int t = 0; t < TILE; t++)
                a += qt[t] * H[k * TILE + t];
            o[k] += (k & 1) ? -a : a; /* conj */
        }
    }
}

static void from_sources(const fmk_fmm3d_ops_ctx *ctx, int irregular, const double c[3], double s,
                         int64_t n, const double *x, int nv, const double *q, int64_t q_stride,
                         double *out, int64_t out_stride, double *work)
{
    const int p = ctx->order;
    const int64_t K = harm_doubles(p);
    const double inv_s = 1 / s, scale = irregular ? inv_s : 1;
    double *H = work; /* K x TILE */
    for (int64_t j0 = 0; j0 < n; j0 += TILE) {
        const int nt = n - j0 < TILE ? (int)(n - j0) : TILE;
        harmonics_tile(ctx, irregular, p, c, inv_s, x + 3 * j0, nt, H);
        gather_tile(K, H, nt, nv, q + j0, q_stride, scale, out, out_stride);
    }
}

void fmk_fmm3d_p2m_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                        const double *x, int nv, const double *q, int64_t q_stride, double *M,
                        int64_t m_stride, double *work)
{
    from_sources(ctx, 0, c, s, n, x, nv, q, q_stride, M, m_stride, work);
}

void fmk_fmm3d_p2l_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                        const double *x, int nv, const double *q, int64_t q_stride, double *L,
                        int64_t l_stride, double *work)
{
    from_sources(ctx, 1, c, s, n, x, nv, q, q_stride, L, l_stride, work);
}

void fmk_fmm3d_p2m(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                   const double *x, const double *q, double *M, double *work)
{
    from_sources(ctx, 0, c, s, n, x, 1, q, 0, M, 0, work);
}

void fmk_fmm3d_p2l(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int64_t n,
                   const double *x, const double *q, double *L, double *work)
{
    from_sources(ctx, 1, c, s, n, x, 1, q, 0, L, 0, work);
}

/* ---------------------------------------------------------------------------------------------
 * Targets. A functional's coefficients: column f of A (row stride F), the real part of
 * harmonic k at row 2k, the imaginary part at row 2k + 1. For an expansion coefficient X and
 * a weight w, "w Re(X H_k)" adds (w Re X, -w Im X) and "w Im(X H_k)" adds (w Im X, w Re X).
 * ------------------------------------------------------------------------------------------ */

static POINTS_INLINE void add_re(double *A, int64_t F, int64_t k, int f, double w, const double *X)
{
    A[F * (2 * k) + f] += w * X[0];
    A[F * (2 * k + 1) + f] -= w * X[1];
}
static POINTS_INLINE void add_im(double *A, int64_t F, int64_t k, int f, double w, const double *X)
{
    A[F * (2 * k) + f] += w * X[1];
    A[F * (2 * k + 1) + f] += w * X[0];
}

/* L2P's functionals of the local expansion L about a box of side s, into columns f0 (potential)
 * and, with grad, f0 + 1 .. f0 + 3 (gradient); docs/fmm3d.md, L2P:
 *   phi = sum L R,  d/dz phi = sum L_n^m R_{n-1}^m sqrt((n+m)(n-m)) / s,
 *   D- phi = -sum_n [ sum_{m=1..n} L_n^m R_{n-1}^{m-1} sqrt((n+m)(n+m-1))
 *                     - sum_{k=0..n-2} conj(L_n^k R_{n-1}^{k+1}) sqrt((n-k)(n-k-1)) ] / s,
 * g_x = Re(D- phi), g_y = -Im(D- phi); sums over all m are Re(X^0 H^0) + 2 Re(X^m H^m). */
static void local_functionals(const fmk_fmm3d_ops_ctx *ctx, const double *L, double inv_s,
                              int grad, int64_t F, int f0, double *A)
{
    const int p = ctx->order;
    const double *sq = ctx->sqrt_int;
    for (int n = 0; n <= p; n++)
        for (int m = 0; m <= n; m++) {
            const double *X = L + 2 * IDX(n, m);
            const double mult = m ? 2 : 1;
            add_re(A, F, IDX(n, m), f0, mult, X);
            if (!grad || n == 0)
                continue;
            if (m <= n - 1)
                add_re(A, F, IDX(n - 1, m), f0 + 3, mult * sq[n + m] * sq[n - m] * inv_s, X);
            if (m >= 1) {
                const double w1 = sq[n + m] * sq[n + m - 1] * inv_s;
                add_re(A, F, IDX(n - 1, m - 1), f0 + 1, -w1, X);
                add_im(A, F, IDX(n - 1, m - 1), f0 + 2, w1, X);
            }
            if (m <= n - 2) {
                const double w2 = sq[n - m] * sq[n - m - 1] * inv_s;
                add_re(A, F, IDX(n - 1, m + 1), f0 + 1, w2, X);
                add_im(A, F, IDX(n - 1, m + 1), f0 + 2, w2, X);
            }
        }
}

/* M2P's functionals of the multipole M about a box of side s (docs/fmm3d.md, M2P):
 *   phi = sum M I / s,  d/dz phi = -sum M_n^m I_{n+1}^m sqrt((n+1+m)(n+1-m)) / s^2,
 *   D- phi = -sum_n [ sum_{m=1..n} M_n^m I_{n+1}^{m-1} sqrt((n-m+2)(n-m+1))
 *                     - sum_{k=0..n} conj(M_n^k I_{n+1}^{k+1}) sqrt((n+k+2)(n+k+1)) ] / s^2. */
static void multipole_functionals(const fmk_fmm3d_ops_ctx *ctx, const double *M, double inv_s,
                                  int grad, int64_t F, int f0, double *A)
{
    const int p = ctx->order;
    const double *sq = ctx->sqrt_int;
    const double g2 = inv_s * inv_s;
    for (int n = 0; n <= p; n++)
        for (int m = 0; m <= n; m++) {
            const double *X = M + 2 * IDX(n, m);
            const double mult = m ? 2 : 1;
            add_re(A, F, IDX(n, m), f0, mult * inv_s, X);
            if (!grad)
                continue;
            add_re(A, F, IDX(n + 1, m), f0 + 3, -mult * sq[n + 1 + m] * sq[n + 1 - m] * g2, X);
            if (m >= 1) {
                const double w1 = sq[n - m + 2] * sq[n - m + 1] * g2;
                add_re(A, F, IDX(n + 1, m - 1), f0 + 1, -w1, X);
                add_im(A, F, IDX(n + 1, m - 1), f0 + 2, w1, X);
            }
            const double w2 = sq[n + m + 2] * sq[n + m + 1] * g2;
            add_re(A, F, IDX(n + 1, m + 1), f0 + 1, w2, X);
            add_im(A, F, IDX(n + 1, m + 1), f0 + 2, w2, X);
        }
}

/* acc[f][t] = sum_k A[k F + f0 + f] H[k TILE + t] for G functionals (a constant after
 * inlining, so the accumulators stay in registers). */
static POINTS_INLINE void contract(int G, int64_t K, const double *A, int64_t F, int f0,
                                   const double *H, double acc[GROUP_MAX][TILE])
{
    double a[GROUP_MAX][TILE];
    for (int f = 0; f < G; f++)
        for (int t = 0; t < TILE; t++)
            a[f][t] = 0;
    for (int64_t k = 0; k < K; k++) {
        const double *h = H + k * TILE, *w = A + k * F + f0;
        for (int f = 0; f < G; f++)
#pragma omp simd
            for (int t = 0; t < TILE; t++)
                a[f][t] += w[f] * h[t];
    }
    for (int f = 0; f < G; f++)
        for (int t = 0; t < TILE; t++)
            acc[f][t] = a[f][t];
}

#define CONTRACT_CASE(g)                                                                           \
    case g:                                                                                        \
        contract(g, K, A, F, f0, H, acc);                                                          \
        break;
static FMK_TARGET_CLONES void contract_group(int G, int64_t K, const double *A, int64_t F, int f0, const double *H,
                           double acc[GROUP_MAX][TILE])
{
    switch (G) {
        CONTRACT_CASE(1)
        CONTRACT_CASE(2)
        CONTRACT_CASE(3)
        CONTRACT_CASE(4)
        CONTRACT_CASE(5)
        CONTRACT_CASE(6)
        CONTRACT_CASE(7)
        CONTRACT_CASE(8)
        CONTRACT_CASE(12)
        CONTRACT_CASE(16)
    default: /* no other group sizes are formed (to_targets) */
        break;
    }
}
#undef CONTRACT_CASE

/* Outputs at n targets of nv expansions E (stride e_stride): per vector w = 4 functionals
 * (potential, gradient) with grad, else 1, formed by functionals(); vector v's potential at
 * pot + v p_stride, gradient at grad + v g_stride (either NULL: skipped). */
static void to_targets(const fmk_fmm3d_ops_ctx *ctx, int irregular, const double c[3], double s,
                       int nv, const double *E, int64_t e_stride, int64_t n, const double *y,
                       double *pot, int64_t p_stride, double *grad, int64_t g_stride, double *work)
{
    if (n <= 0 || nv <= 0 || (!pot && !grad))
        return;
    const int p = ctx->order, g = grad != NULL;
    const int degree = irregular && g ? p + 1 : p;
    const int64_t K = harm_doubles(degree);
    const int w = g ? 4 : 1;
    const int64_t F = (int64_t)w * nv;
    const double inv_s = 1 / s;
    double *H = work, *A = H + K * TILE;
    memset(A, 0, sizeof(double) * (size_t)(K * F));
    for (int v = 0; v < nv; v++) {
        if (irregular)
            multipole_functionals(ctx, E + v * e_stride, inv_s, g, F, w * v, A);
        else
            local_functionals(ctx, E + v * e_stride, inv_s, g, F, w * v, A);
    }
    /* groups of whole vectors, at most GROUP_MAX functionals, of equal size where possible */
    const int per_group = w == 4 ? GROUP_MAX / 4 : 8, n_groups = (nv + per_group - 1) / per_group;
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
        const int nt = n - i0 < TILE ? (int)(n - i0) : TILE;
        harmonics_tile(ctx, irregular, degree, c, inv_s, y + 3 * i0, nt, H);
        for (int gi = 0; gi < n_groups; gi++) {
            const int v0 = nv * gi / n_groups, v1 = nv * (gi + 1) / n_groups;
            double acc[GROUP_MAX][TILE];
            contract_group(w * (v1 - v0), K, A, F, w * v0, H, acc);
            for (int v = v0; v < v1; v++) {
                const double *a = acc[w * (v - v0)];
                for (int t = 0; t < nt; t++) {
                    const int64_t i = i0 + t;
                    if (pot)
                        pot[v * p_stride + i] += a[t];
                    if (grad)
                        for (int d = 0; d < 3; d++)
                            grad[v * g_stride + 3 * i + d] += acc[w * (v - v0) + 1 + d][t];
                }
            }
        }
    }
}

void fmk_fmm3d_l2p_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int nv,
                        const double *L, int64_t l_stride, int64_t n, const double *y, double *pot,
                        int64_t p_stride, double *grad, int64_t g_stride, double *work)
{
    to_targets(ctx, 0, c, s, nv, L, l_stride, n, y, pot, p_stride, grad, g_stride, work);
}

void fmk_fmm3d_m2p_many(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, int nv,
                        const double *M, int64_t m_stride, int64_t n, const double *y, double *pot,
                        int64_t p_stride, double *grad, int64_t g_stride, double *work)
{
    to_targets(ctx, 1, c, s, nv, M, m_stride, n, y, pot, p_stride, grad, g_stride, work);
}

void fmk_fmm3d_m2p(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, const double *M,
                   int64_t n, const double *y, double *pot, double *grad, double *work)
{
    to_targets(ctx, 1, c, s, 1, M, 0, n, y, pot, 0, grad, 0, work);
}

void fmk_fmm3d_l2p(const fmk_fmm3d_ops_ctx *ctx, const double c[3], double s, const double *L,
                   int64_t n, const double *y, double *pot, double *grad, double *work)
{
    to_targets(ctx, 0, c, s, 1, L, 0, n, y, pot, 0, grad, 0, work);
}
