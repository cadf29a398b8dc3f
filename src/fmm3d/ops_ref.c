/* ops_ref.c -- the 3D FMM's translations done the slow way, for the tests of fmm3d_ops.c's
 * rotation-based operators (tests/unit/test_fmm3d_ops.c). */
#include "fmm3d/fmm3d_ops.h"

#include <math.h>

#define IDX FMK_FMM3D_IDX

/* ---------------------------------------------------------------------------------------------
 * O(p^4) references: A1 and A2 applied to all (k, l), in the scaled Schmidt form
 *   M2M  M'_n^m = sum_{k,l} G conj(R_k^l(d / s_to)) (s_from/s_to)^(n-k) M_{n-k}^{m-l},
 *        d = c_from - c_to, G = F(n,m) / (F(k,l) F(n-k,m-l))
 *   L2L  L'_k^l = sum_{n,m} G (s_to/s_from)^k R_{n-k}^{m-l}(e / s_from) L_n^m,
 *        e = c_to - c_from, G = F(n,m) / (F(k,l) F(n-k,m-l))
 *   M2L  L_k^m = (-1)^(k+m) sum_{j,l} G (s_to/r)^k (s_from/r)^j / r I_{j+k}^{l-m}(D / r) M_j^l,
 *        D = c_to - c_from, r = |D|, G = F(j+k,l-m) / (F(k,m) F(j,l))
 * The F ratios come from log-factorials in long double; sums are in long double.
 * ------------------------------------------------------------------------------------------ */

/* Coefficient (n, m) of an expansion for any sign of m: C^-m = (-1)^m conj(C^m). */
static void coef(const double *C, int n, int m, long double *re, long double *im)
{
    const int am = m < 0 ? -m : m;
    *re = C[2 * IDX(n, am)];
    *im = C[2 * IDX(n, am) + 1];
    if (m < 0) {
        *im = -*im;
        if (am & 1)
            *re = -*re, *im = -*im;
    }
}

static long double log_F(const fmk_fmm3d_ops_ctx *ctx, int n, int m)
{
    return 0.5L * (ctx->log_fact[n + m] + ctx->log_fact[n - m]);
}

void fmk_fmm3d_m2m_ref(const fmk_fmm3d_ops_ctx *ctx, const double c_from[3], double s_from,
                       const double *M, const double c_to[3], double s_to, double *out,
                       double *work)
{
    const int p = ctx->order;
    double *R = work;
    fmk_fmm3d_regular(ctx, p, (c_from[0] - c_to[0]) / s_to, (c_from[1] - c_to[1]) / s_to,
                      (c_from[2] - c_to[2]) / s_to, R);
    const long double ratio = (long double)s_from / s_to;
    for (int n = 0; n <= p; n++)
        for (int m = 0; m <= n; m++) {
            long double re = 0, im = 0;
            for (int k = 0; k <= n; k++)
                for (int l = -k; l <= k; l++) {
                    const int j = n - k, i = m - l;
                    if (i < -j || i > j)
                        continue;
                    long double rr, ri, mr, mi;
                    coef(R, k, l, &rr, &ri);
                    ri = -ri; /* conj */
                    coef(M, j, i, &mr, &mi);
                    const long double g =
                        expl(log_F(ctx, n, m) - log_F(ctx, k, l) - log_F(ctx, j, i)) *
                        powl(ratio, j);
                    re += g * (rr * mr - ri * mi);
                    im += g * (rr * mi + ri * mr);
                }
            out[2 * IDX(n, m)] += (double)re;
            out[2 * IDX(n, m) + 1] += (double)im;
        }
}

void fmk_fmm3d_l2l_ref(const fmk_fmm3d_ops_ctx *ctx, const double c_from[3], double s_from,
                       const double *L, const double c_to[3], double s_to, double *out,
                       double *work)
{
    const int p = ctx->order;
    double *R = work;
    fmk_fmm3d_regular(ctx, p, (c_to[0] - c_from[0]) / s_from, (c_to[1] - c_from[1]) / s_from,
                      (c_to[2] - c_from[2]) / s_from, R);
    const long double ratio = (long double)s_to / s_from;
    for (int k = 0; k <= p; k++)
        for (int l = 0; l <= k; l++) {
            long double re = 0, im = 0;
            for (int n = k; n <= p; n++)
                for (int m = -n; m <= n; m++) {
                    const int j = n - k, i = m - l;
                    if (i < -j || i > j)
                        continue;
                    long double rr, ri, lr, li;
                    coef(R, j, i, &rr, &ri);
                    coef(L, n, m, &lr, &li);
                    const long double g =
                        expl(log_F(ctx, n, m) - log_F(ctx, k, l) - log_F(ctx, j, i));
                    re += g * (rr * lr - ri * li);
                    im += g * (rr * li + ri * lr);
                }
            const long double f = powl(ratio, k);
            out[2 * IDX(k, l)] += (double)(f * re);
            out[2 * IDX(k, l) + 1] += (double)(f * im);
        }
}

void fmk_fmm3d_m2l_ref(const fmk_fmm3d_ops_ctx *ctx, const double c_from[3], double s_from,
                       const double *M, const double c_to[3], double s_to, double *out,
                       double *work)
{
    const int p = ctx->order;
    const double D[3] = {c_to[0] - c_from[0], c_to[1] - c_from[1], c_to[2] - c_from[2]};
    const double r = sqrt(D[0] * D[0] + D[1] * D[1] + D[2] * D[2]);
    double *I = work;
    fmk_fmm3d_irregular(ctx, 2 * p, D[0] / r, D[1] / r, D[2] / r, I);
    const long double rt = (long double)s_to / r, rf = (long double)s_from / r;
    for (int k = 0; k <= p; k++)
        for (int m = 0; m <= k; m++) {
            long double re = 0, im = 0;
            for (int j = 0; j <= p; j++)
                for (int l = -j; l <= j; l++) {
                    const int n = j + k, i = l - m;
                    long double ir, ii, mr, mi;
                    coef(I, n, i, &ir, &ii);
                    coef(M, j, l, &mr, &mi);
                    const long double g =
                        expl(log_F(ctx, n, i) - log_F(ctx, k, m) - log_F(ctx, j, l)) * powl(rf, j);
                    re += g * (ir * mr - ii * mi);
                    im += g * (ir * mi + ii * mr);
                }
            const long double f = (((k + m) & 1) ? -1 : 1) * powl(rt, k) / r;
            out[2 * IDX(k, m)] += (double)(f * re);
            out[2 * IDX(k, m) + 1] += (double)(f * im);
        }
}
