/*
 * fmm3d_ops.c -- the Laplace expansion operators of the 3D FMM (conventions in fmm3d_ops.h,
 * derivations in docs/fmm3d.md).
 *
 * Notation in the comments: R, I are the Schmidt-normalised solid harmonics of the header;
 * F(n, m) = sqrt((n + m)! (n - m)!) converts them to the factorial-normalised ones of the
 * classical addition theorems (R_fact = R / F, I_fact = I F), in which
 *     R_fact_n^m(x + y) = sum_{k,l} R_fact_k^l(x) R_fact_{n-k}^{m-l}(y)              (A1)
 *     I_fact_n^m(D + b) = sum_{k,l} (-1)^k conj(R_fact_k^l(b)) I_fact_{n+k}^{m+l}(D),  |b|<|D|  (A2)
 * Every F-ratio that survives in the operators is a square root of a product of binomials, so
 * the tables hold sqrt(C(a, b)) and nothing factorial-sized is stored.
 */
#include "fmm3d/fmm3d_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IDX FMK_FMM3D_IDX

/* ---------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------ */

void fmk_fmm3d_ops_destroy(fmk_fmm3d_ops_ctx *ctx)
{
    if (!ctx)
        return;
    free(ctx->sqrt_int);
    free(ctx->rec_a);
    free(ctx->rec_b);
    free(ctx->rec_diag);
    free(ctx->log_fact);
    free(ctx->sqrt_binom);
    memset(ctx, 0, sizeof *ctx);
}

fmk_status fmk_fmm3d_ops_create(fmk_fmm3d_ops_ctx *ctx, int order)
{
    if (!ctx)
        return FMK_ERR_NULL;
    memset(ctx, 0, sizeof *ctx);
    if (order < 0 || order > FMK_FMM3D_MAX_ORDER)
        return FMK_ERR_ARG;
    const int p = order;
    const int deg = 2 * p + 1; /* highest harmonic degree (references) */
    const int64_t nh = fmk_fmm3d_ncoef(deg);
    const int nb = 2 * p + 1; /* sqrt_binom is nb x nb */
    ctx->order = p;
    ctx->n_coef = fmk_fmm3d_ncoef(p);
    ctx->sqrt_int = malloc((size_t)(2 * p + 5) * sizeof(double));
    ctx->rec_a = malloc((size_t)nh * sizeof(double));
    ctx->rec_b = malloc((size_t)nh * sizeof(double));
    ctx->rec_diag = malloc((size_t)(deg + 1) * sizeof(double));
    ctx->log_fact = malloc((size_t)(4 * p + 3) * sizeof(long double));
    ctx->sqrt_binom = calloc((size_t)nb * (size_t)nb, sizeof(double));
    if (!ctx->sqrt_int || !ctx->rec_a || !ctx->rec_b || !ctx->rec_diag || !ctx->log_fact ||
        !ctx->sqrt_binom) {
        fmk_fmm3d_ops_destroy(ctx);
        return FMK_ERR_NOMEM;
    }
    for (int i = 0; i <= 2 * p + 4; i++)
        ctx->sqrt_int[i] = sqrt((double)i);
    /* R_n^m = a(n,m) z R_{n-1}^m - b(n,m) r^2 R_{n-2}^m  (Legendre's three-term recursion
     * (n-m) P_n^m = (2n-1) x P_{n-1}^m - (n+m-1) P_{n-2}^m, rescaled by F); and
     * R_m^m = -(x + i y) sqrt((2m-1)/(2m)) R_{m-1}^{m-1}. */
    for (int n = 0; n <= deg; n++)
        for (int m = 0; m <= n; m++) {
            double a = 0, b = 0;
            if (n > m) {
                const double nm = (double)(n + m) * (n - m);
                a = (2.0 * n - 1) / sqrt(nm);
                b = sqrt((double)(n + m - 1) * (n - m - 1) / nm);
            }
            ctx->rec_a[IDX(n, m)] = a;
            ctx->rec_b[IDX(n, m)] = b;
        }
    ctx->rec_diag[0] = 1;
    for (int m = 1; m <= deg; m++)
        ctx->rec_diag[m] = sqrt((2.0 * m - 1) / (2.0 * m));
    ctx->log_fact[0] = 0;
    for (int i = 1; i <= 4 * p + 2; i++)
        ctx->log_fact[i] = ctx->log_fact[i - 1] + logl((long double)i);
    /* Pascal's triangle in double (C(80, 40) ~ 1e23: relative error ~ 80 eps), then sqrt. */
    double *row = ctx->sqrt_binom;
    for (int a = 0; a < nb; a++) {
        row = ctx->sqrt_binom + (int64_t)a * nb;
        row[0] = 1;
        for (int b = 1; b <= a; b++) {
            const double *up = ctx->sqrt_binom + (int64_t)(a - 1) * nb;
            /* the previous row still holds C, not sqrt(C): see the second pass below */
            row[b] = up[b - 1] + (b <= a - 1 ? up[b] : 0);
        }
    }
    for (int64_t i = 0; i < (int64_t)nb * nb; i++)
        ctx->sqrt_binom[i] = sqrt(ctx->sqrt_binom[i]);

    int64_t rot = 2 * (p + 1);
    for (int n = 0; n <= p; n++)
        rot += 4 * (int64_t)(n + 1) * (n + 1);
    ctx->rot_size = rot;
    /* two expansions | Risbo's two matrices (side 2p + 2) | rotation; or the harmonics up to
     * degree 2p + 1 (point operators, references) */
    const int64_t risbo = 2 * (int64_t)(2 * p + 2) * (2 * p + 2);
    const int64_t shoot = 4 * ctx->n_coef + risbo + rot;
    ctx->work_size = shoot > 2 * nh ? shoot : 2 * nh;
    const int64_t points = fmk_fmm3d_points_work_size(ctx, 1);
    if (ctx->work_size < points)
        ctx->work_size = points;
    return FMK_OK;
}

int fmk_fmm3d_order_for(double eps, double rho)
{
    if (!(rho > 0 && rho < 1) || !(eps > 0 && eps < 1))
        return -1;
    /* rho^(p+1) (1 + rho)/(1 - rho) <= eps  <=>  p + 1 >= log(eps (1-rho)/(1+rho)) / log(rho) */
    const double need = log(eps * (1 - rho) / (1 + rho)) / log(rho) - 1;
    int p = need <= 0 ? 0 : (int)ceil(need - 1e-9);
    return p > FMK_FMM3D_MAX_ORDER ? FMK_FMM3D_MAX_ORDER : p;
}

/* ---------------------------------------------------------------------------------------------
 * Harmonics
 * ------------------------------------------------------------------------------------------ */

void fmk_fmm3d_regular(const fmk_fmm3d_ops_ctx *ctx, int degree, double x, double y, double z,
                       double *R)
{
    const double r2 = x * x + y * y + z * z;
    double dr = 1, di = 0; /* R_m^m */
    for (int m = 0; m <= degree; m++) {
        if (m > 0) {
            const double f = -ctx->rec_diag[m];
            const double nr = f * (x * dr - y * di), ni = f * (x * di + y * dr);
            dr = nr, di = ni;
        }
        double *c = R + 2 * IDX(m, m);
        c[0] = dr, c[1] = di;
        if (m + 1 > degree)
            break;
        double pr = dr, pi = di; /* R_{n-2}^m, R_{n-1}^m */
        double qr = ctx->rec_a[IDX(m + 1, m)] * z * dr, qi = ctx->rec_a[IDX(m + 1, m)] * z * di;
        R[2 * IDX(m + 1, m)] = qr, R[2 * IDX(m + 1, m) + 1] = qi;
        for (int n = m + 2; n <= degree; n++) {
            const double a = ctx->rec_a[IDX(n, m)] * z, b = ctx->rec_b[IDX(n, m)] * r2;
            const double sr = a * qr - b * pr, si = a * qi - b * pi;
            R[2 * IDX(n, m)] = sr, R[2 * IDX(n, m) + 1] = si;
            pr = qr, pi = qi, qr = sr, qi = si;
        }
    }
}

/* Kelvin inversion: I_n^m(x) = R_n^m(x) / r^(2n+1) = R_n^m(x / r^2) / r. */
void fmk_fmm3d_irregular(const fmk_fmm3d_ops_ctx *ctx, int degree, double x, double y, double z,
                         double *I)
{
    const double r2 = x * x + y * y + z * z;
    const double inv_r2 = 1 / r2, inv_r = sqrt(inv_r2);
    fmk_fmm3d_regular(ctx, degree, x * inv_r2, y * inv_r2, z * inv_r2, I);
    const int64_t nc = 2 * fmk_fmm3d_ncoef(degree);
    for (int64_t i = 0; i < nc; i++)
        I[i] *= inv_r;
}

/* The point operators (P2M, P2L, M2P, L2P) are in ops_points.c. */

/* ---------------------------------------------------------------------------------------------
 * Rotations
 *
 * For the unit vector u = (sin th cos ph, sin th sin ph, cos th), A = Rz(ph) Ry(th) takes e_z to
 * u; the rotated frame has coordinates x' = A^T x, so the translation vector lies along +z in it.
 * An expansion sum C_n^m X_n^m(x) (X = R or I) has in that frame the coefficients
 *     C'_n^m = sum_{m'} d^n_{m'm}(th) e^{i m' ph} C_n^{m'}
 * and back C_n^{m'} = e^{-i m' ph} sum_m d^n_{m'm}(th) C'_n^m, with d^n the real Wigner matrix
 * d^n_{m'm}(b) = <n m'| exp(-i b J_y) |n m> (docs/fmm3d.md section 3).
 *
 * Risbo's recursion (J. Geodesy 70, 1996): in the spinor picture the spin-j basis is
 * e_a = u^a v^(2j-a) / sqrt(a! (2j-a)!), a = j + m, and the SU(2) matrix [[c, -s], [s, c]],
 * c = cos(b/2), s = sin(b/2), maps u -> c u + s v, v -> -s u + c v. Writing
 * e_b^(J) = (sqrt(b) u e_{b-1}^(J-1) + sqrt(J-b) v e_b^(J-1)) / J  (J = 2j) gives d^(J) from
 * d^(J-1) with four terms per entry, all weights in [0, 1] and entries bounded by 1 (d is
 * orthogonal), so no large terms cancel; O(J^2) per half step, O(p^3) in all. Measured: the
 * rotated translations agree with the unrotated O(p^4) references to 5e-16 up to p = 40.
 *
 * Storage, per degree n (m, m' in 0..n, (n+1)^2 each), after 2 (p+1) doubles cos(m ph), sin(m ph):
 *   Fr[m][m'] = d_{0m} (m' = 0) or d_{m'm} + (-1)^m' d_{-m',m};  Fi[m][m'] = 0 or d_{m'm} - (-1)^m' d_{-m',m}
 *   Br[m'][m] = d_{m'0} (m = 0) or d_{m'm} + (-1)^m d_{m',-m};   Bi[m'][m] = 0 or d_{m'm} - (-1)^m d_{m',-m}
 * so that, with A_m' = e^{i m' ph} C_m',  Re C'_m = sum Fr Re A, Im C'_m = sum Fi Im A, and
 * B_m' = sum Br Re C' + i sum Bi Im C', C_m' = e^{-i m' ph} B_m' (the symmetry X^-m = (-1)^m
 * conj X^m folds the negative orders in).
 * ------------------------------------------------------------------------------------------ */

static inline int64_t rot_offset(int n)
{
    /* 4 sum_{k<n} (k+1)^2 = 4 n (n+1)(2n+1)/6 */
    return 4 * (int64_t)n * (n + 1) * (2 * n + 1) / 6;
}

void fmk_fmm3d_rot_phase(const fmk_fmm3d_ops_ctx *ctx, const double dir[3], double *phase)
{
    const double rxy = sqrt(dir[0] * dir[0] + dir[1] * dir[1]);
    const double ph = rxy > 0 ? atan2(dir[1], dir[0]) : 0;
    for (int m = 0; m <= ctx->order; m++) {
        phase[2 * m] = cos(m * ph);
        phase[2 * m + 1] = sin(m * ph);
    }
}

void fmk_fmm3d_rot_init(const fmk_fmm3d_ops_ctx *ctx, const double dir[3], double *rot,
                        double *work)
{
    const int p = ctx->order;
    const double *sq = ctx->sqrt_int;
    const double rxy = sqrt(dir[0] * dir[0] + dir[1] * dir[1]);
    const double th = atan2(rxy, dir[2]); /* 0 for dir = 0: the identity */
    fmk_fmm3d_rot_phase(ctx, dir, rot);
    double *F = rot + 2 * (p + 1);
    const double c = cos(0.5 * th), s = sin(0.5 * th);
    /* Risbo's matrices with a zero border: entry (a, b) at [(a + 1) W + b + 1], so the terms
     * that fall outside d^(J-1) read zeros and the loop has no branches. */
    const int W = 2 * p + 2;
    double *old = work + 4 * ctx->n_coef, *cur = old + (int64_t)W * W;
    memset(old, 0, 2 * (size_t)W * (size_t)W * sizeof(double));
    cur[W + 1] = 1; /* d^0 */
    for (int J = 0; J <= 2 * p; J++) {
        if (J > 0) {
            double *t = old;
            old = cur, cur = t;
            const double inv = 1.0 / J;
            for (int a = 0; a <= J; a++) {
                const double *o0 = old + a * W, *o1 = old + (a + 1) * W; /* rows a-1, a */
                const double cu = c * sq[a], su = s * sq[J - a];
                const double sv = -s * sq[a], cv = c * sq[J - a];
                double *row = cur + (a + 1) * W + 1;
                for (int b = 0; b <= J; b++)
                    row[b] = (sq[b] * (cu * o0[b] + su * o1[b]) +
                              sq[J - b] * (sv * o0[b + 1] + cv * o1[b + 1])) *
                             inv;
            }
        }
        if (J & 1)
            continue;
        const int n = J / 2, n1 = n + 1;
        double *Fr = F + rot_offset(n), *Fi = Fr + n1 * n1, *Br = Fi + n1 * n1, *Bi = Br + n1 * n1;
#define D(mp, m) cur[((mp) + n + 1) * W + (m) + n + 1]
        for (int m = 0; m <= n; m++)
            for (int mp = 0; mp <= n; mp++) {
                if (mp == 0) {
                    Fr[m * n1] = D(0, m);
                    Fi[m * n1] = 0;
                } else {
                    const double sg = (mp & 1) ? -1 : 1;
                    Fr[m * n1 + mp] = D(mp, m) + sg * D(-mp, m);
                    Fi[m * n1 + mp] = D(mp, m) - sg * D(-mp, m);
                }
                /* B[m'][m] with m' = m here (row), m = mp (column) */
                if (mp == 0) {
                    Br[m * n1] = D(m, 0);
                    Bi[m * n1] = 0;
                } else {
                    const double sg = (mp & 1) ? -1 : 1;
                    Br[m * n1 + mp] = D(m, mp) + sg * D(m, -mp);
                    Bi[m * n1 + mp] = D(m, mp) - sg * D(m, -mp);
                }
            }
#undef D
    }
}

void fmk_fmm3d_rotate(const fmk_fmm3d_ops_ctx *ctx, const double *rot, int inverse,
                      const double *in, double *out)
{
    const int p = ctx->order;
    const double *F = rot + 2 * (p + 1);
    for (int n = 0; n <= p; n++) {
        const int n1 = n + 1;
        const double *Fr = F + rot_offset(n), *Fi = Fr + n1 * n1, *Br = Fi + n1 * n1,
                     *Bi = Br + n1 * n1;
        const double *C = in + 2 * IDX(n, 0);
        double *O = out + 2 * IDX(n, 0);
        if (!inverse) {
            double ar[FMK_FMM3D_MAX_ORDER + 1], ai[FMK_FMM3D_MAX_ORDER + 1];
            for (int m = 0; m <= n; m++) { /* A = e^{i m ph} C */
                ar[m] = rot[2 * m] * C[2 * m] - rot[2 * m + 1] * C[2 * m + 1];
                ai[m] = rot[2 * m] * C[2 * m + 1] + rot[2 * m + 1] * C[2 * m];
            }
            for (int m = 0; m <= n; m++) {
                double re = 0, im = 0;
                for (int mp = 0; mp <= n; mp++) {
                    re += Fr[m * n1 + mp] * ar[mp];
                    im += Fi[m * n1 + mp] * ai[mp];
                }
                O[2 * m] = re, O[2 * m + 1] = im;
            }
        } else {
            for (int mp = 0; mp <= n; mp++) {
                double re = 0, im = 0;
                for (int m = 0; m <= n; m++) {
                    re += Br[mp * n1 + m] * C[2 * m];
                    im += Bi[mp * n1 + m] * C[2 * m + 1];
                }
                /* e^{-i m' ph} B */
                O[2 * mp] = rot[2 * mp] * re + rot[2 * mp + 1] * im;
                O[2 * mp + 1] = rot[2 * mp] * im - rot[2 * mp + 1] * re;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Translations along z (from A1, A2 with the vector on the z axis, where only R^0, I^0 survive:
 * R_k^0(t e_z) = t^k, I_k^0(t e_z) = t^-(k+1) for t > 0)
 * ------------------------------------------------------------------------------------------ */

#define SB(a, b) sb[(a) * nb + (b)]

/* M'_n^m = sum_{k=0}^{n-m} (-t/s_to)^k (s_from/s_to)^(n-k) sqrt(C(n+m,k) C(n-m,k)) M_{n-k}^m
 * (the old centre is at -t e_z from the new one). */
void fmk_fmm3d_m2m_z(const fmk_fmm3d_ops_ctx *ctx, double t, double s_from, const double *M,
                     double s_to, double *out)
{
    const int p = ctx->order, nb = 2 * p + 1;
    const double *sb = ctx->sqrt_binom;
    double pt[FMK_FMM3D_MAX_ORDER + 1], ps[FMK_FMM3D_MAX_ORDER + 1];
    pt[0] = ps[0] = 1;
    for (int k = 1; k <= p; k++) {
        pt[k] = pt[k - 1] * (-t / s_to);
        ps[k] = ps[k - 1] * (s_from / s_to);
    }
    for (int n = 0; n <= p; n++)
        for (int m = 0; m <= n; m++) {
            double re = 0, im = 0;
            for (int k = 0; k <= n - m; k++) {
                const double w = pt[k] * ps[n - k] * SB(n + m, k) * SB(n - m, k);
                re += w * M[2 * IDX(n - k, m)];
                im += w * M[2 * IDX(n - k, m) + 1];
            }
            out[2 * IDX(n, m)] += re;
            out[2 * IDX(n, m) + 1] += im;
        }
}

/* L'_k^m = sum_{n=k}^{p} (s_to/s_from)^k (t/s_from)^(n-k) sqrt(C(n+m,n-k) C(n-m,n-k)) L_n^m. */
void fmk_fmm3d_l2l_z(const fmk_fmm3d_ops_ctx *ctx, double t, double s_from, const double *L,
                     double s_to, double *out)
{
    const int p = ctx->order, nb = 2 * p + 1;
    const double *sb = ctx->sqrt_binom;
    double pt[FMK_FMM3D_MAX_ORDER + 1], ps[FMK_FMM3D_MAX_ORDER + 1];
    pt[0] = ps[0] = 1;
    for (int k = 1; k <= p; k++) {
        pt[k] = pt[k - 1] * (t / s_from);
        ps[k] = ps[k - 1] * (s_to / s_from);
    }
    for (int k = 0; k <= p; k++)
        for (int m = 0; m <= k; m++) {
            double re = 0, im = 0;
            for (int n = k; n <= p; n++) {
                const double w = pt[n - k] * SB(n + m, n - k) * SB(n - m, n - k);
                re += w * L[2 * IDX(n, m)];
                im += w * L[2 * IDX(n, m) + 1];
            }
            out[2 * IDX(k, m)] += ps[k] * re;
            out[2 * IDX(k, m) + 1] += ps[k] * im;
        }
}

/* L_k^m = (-1)^(k+m) / t sum_{j=m}^{p} (s_to/t)^k (s_from/t)^j sqrt(C(j+k,k+m) C(j+k,k-m)) M_j^m
 * (the sqrt-binomials reach C(2p, p); the powers of s/t < 1/2 keep every term O(|M|)). */
void fmk_fmm3d_m2l_z(const fmk_fmm3d_ops_ctx *ctx, double t, double s_from, const double *M,
                     double s_to, double *out)
{
    const int p = ctx->order, nb = 2 * p + 1;
    const double *sb = ctx->sqrt_binom;
    double pf[FMK_FMM3D_MAX_ORDER + 1], pl[FMK_FMM3D_MAX_ORDER + 1];
    const double inv_t = 1 / t;
    pf[0] = 1, pl[0] = inv_t;
    for (int k = 1; k <= p; k++) {
        pf[k] = pf[k - 1] * (s_from * inv_t);
        pl[k] = pl[k - 1] * (s_to * inv_t);
    }
    for (int k = 0; k <= p; k++)
        for (int m = 0; m <= k; m++) {
            double re = 0, im = 0;
            for (int j = m; j <= p; j++) {
                const double w = pf[j] * SB(j + k, k + m) * SB(j + k, k - m);
                re += w * M[2 * IDX(j, m)];
                im += w * M[2 * IDX(j, m) + 1];
            }
            const double f = ((k + m) & 1) ? -pl[k] : pl[k];
            out[2 * IDX(k, m)] += f * re;
            out[2 * IDX(k, m) + 1] += f * im;
        }
}

#undef SB

/* ---------------------------------------------------------------------------------------------
 * Point-and-shoot translations
 * ------------------------------------------------------------------------------------------ */

typedef void (*ztranslate)(const fmk_fmm3d_ops_ctx *, double, double, const double *, double,
                           double *);

static void shoot(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                  double s_from, const double *in, const double c_to[3], double s_to, double *out,
                  double *work, ztranslate z)
{
    const int64_t nc2 = 2 * ctx->n_coef;
    const double v[3] = {c_to[0] - c_from[0], c_to[1] - c_from[1], c_to[2] - c_from[2]};
    const double t = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    double *a = work, *b = work + nc2, *r = work + 2 * nc2;
    if (!rot) {
        /* rot_init's scratch starts at work + 2 nc2: put the rotation after it */
        r = work + 2 * nc2 + 2 * (int64_t)(2 * ctx->order + 2) * (2 * ctx->order + 2);
        fmk_fmm3d_rot_init(ctx, v, r, work);
        rot = r;
    }
    fmk_fmm3d_rotate(ctx, rot, 0, in, a);
    memset(b, 0, (size_t)nc2 * sizeof(double));
    z(ctx, t, s_from, a, s_to, b);
    fmk_fmm3d_rotate(ctx, rot, 1, b, a);
    for (int64_t i = 0; i < nc2; i++)
        out[i] += a[i];
}

void fmk_fmm3d_m2m(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                   double s_from, const double *M, const double c_to[3], double s_to, double *out,
                   double *work)
{
    shoot(ctx, rot, c_from, s_from, M, c_to, s_to, out, work, fmk_fmm3d_m2m_z);
}

void fmk_fmm3d_m2l(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                   double s_from, const double *M, const double c_to[3], double s_to, double *out,
                   double *work)
{
    shoot(ctx, rot, c_from, s_from, M, c_to, s_to, out, work, fmk_fmm3d_m2l_z);
}

void fmk_fmm3d_l2l(const fmk_fmm3d_ops_ctx *ctx, const double *rot, const double c_from[3],
                   double s_from, const double *L, const double c_to[3], double s_to, double *out,
                   double *work)
{
    shoot(ctx, rot, c_from, s_from, L, c_to, s_to, out, work, fmk_fmm3d_l2l_z);
}

/* ---------------------------------------------------------------------------------------------
 * M2L on a block of expansions that share one direction (docs/fmm3d.md section 3.1)
 *
 * Between boxes of one side s whose centres are tau s apart the coaxial M2L is (1/s) times a
 * matrix that depends on tau alone: with s_from = s_to = s and t = tau s, fmk_fmm3d_m2l_z's
 * factors are pl[k] = tau^-(k+1) / s and pf[j] = tau^-j. The rotations depend on the direction
 * alone. So the M2Ls of one direction, at any level, are one linear map applied to many
 * expansions: the block form applies it to up to FMK_FMM3D_BLOCK expansions stored as columns
 * (row r of a block holds double r of every expansion), and every inner loop runs along a row,
 * over the columns, with a coefficient of the rotation or of the matrix fixed: matrix-matrix
 * products that vectorize, with each coefficient loaded once per block instead of once per box.
 * ------------------------------------------------------------------------------------------ */

/* Build each block kernel for the widest vector unit of the running CPU (GCC dispatches at load
 * time), as p2p.c does for the direct sum. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(FMK_NO_CLONES)
#define FMK_TARGET_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define FMK_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define FMK_TARGET_CLONES
#define FMK_ALWAYS_INLINE inline
#endif

int64_t fmk_fmm3d_m2l_zmat_size(const fmk_fmm3d_ops_ctx *ctx)
{
    const int64_t p1 = ctx->order + 1;
    return p1 * (p1 + 1) * (2 * p1 + 1) / 6; /* sum_{m <= p} (p - m + 1)^2 */
}

#define SB(a, b) sb[(a) * nb + (b)]

void fmk_fmm3d_m2l_zmat(const fmk_fmm3d_ops_ctx *ctx, double tau, double *Z)
{
    const int p = ctx->order, nb = 2 * p + 1;
    const double *sb = ctx->sqrt_binom;
    double pw[2 * FMK_FMM3D_MAX_ORDER + 2];
    pw[0] = 1;
    for (int i = 1; i <= 2 * p + 1; i++)
        pw[i] = pw[i - 1] / tau;
    for (int m = 0; m <= p; m++) /* Z_m[k - m][j - m], k, j in m..p */
        for (int k = m; k <= p; k++)
            for (int j = m; j <= p; j++)
                *Z++ =
                    (((k + m) & 1) ? -1 : 1) * pw[j + k + 1] * SB(j + k, k + m) * SB(j + k, k - m);
}

#undef SB

/* Eight doubles as one vector (GCC/Clang vector extension; alignment 8, so rows need not be
 * 64-byte aligned). */
typedef double v8d __attribute__((vector_size(64), aligned(8)));

/* ar = sum_i f[i] row(2 i), ai = sum_i g[i] row(2 i + 1) over count pairs of rows of a block
 * (real and imaginary parts of count coefficients): one rotation row applied to NV vectors. */
static FMK_ALWAYS_INLINE void mac_pairs(v8d *ar, v8d *ai, const double *f, const double *g,
                                        const double *rows, int count, const int NV)
{
    enum { LD = FMK_FMM3D_BLOCK };
    for (int v = 0; v < NV; v++)
        ar[v] = ai[v] = (v8d){0};
    for (int i = 0; i < count; i++) {
        const double fi = f[i], gi = g[i];
        const v8d *re = (const v8d *)(rows + 2 * i * LD);
        const v8d *im = (const v8d *)(rows + (2 * i + 1) * LD);
        for (int v = 0; v < NV; v++) {
            ar[v] += fi * re[v];
            ai[v] += gi * im[v];
        }
    }
}

/* The block kernel for NV * 8 columns (NV <= FMK_FMM3D_BLOCK / 8), inlined with NV a constant
 * so that the accumulators of a row are NV vectors held in registers. */
static FMK_ALWAYS_INLINE void m2l_block_v(const fmk_fmm3d_ops_ctx *ctx, const double *phase,
                                          const double *F, const double *Z, double *restrict X,
                                          double *restrict Y, double *restrict T, const int NV)
{
    enum { LD = FMK_FMM3D_BLOCK, MAXV = FMK_FMM3D_BLOCK / 8 };
#define ROW(base, r) ((v8d *)((base) + (int64_t)(r) * LD))
    const int p = ctx->order;
    /* forward rotation, X -> Y: A = e^{i m' ph} C into T, then Re = Fr Re A, Im = Fi Im A */
    for (int n = 0; n <= p; n++) {
        const int n1 = n + 1;
        const double *Fr = F + rot_offset(n), *Fi = Fr + n1 * n1;
        const int64_t r0 = 2 * IDX(n, 0);
        for (int mp = 0; mp <= n; mp++) {
            const double cr = phase[2 * mp], si = phase[2 * mp + 1];
            const v8d *xr = ROW(X, r0 + 2 * mp), *xi = ROW(X, r0 + 2 * mp + 1);
            v8d *tr = ROW(T, 2 * mp), *ti = ROW(T, 2 * mp + 1);
            for (int v = 0; v < NV; v++) {
                const v8d a = xr[v], b = xi[v];
                tr[v] = cr * a - si * b;
                ti[v] = cr * b + si * a;
            }
        }
        for (int m = 0; m <= n; m++) {
            v8d ar[MAXV], ai[MAXV];
            mac_pairs(ar, ai, Fr + m * n1, Fi + m * n1, T, n1, NV);
            v8d *yr = ROW(Y, r0 + 2 * m), *yi = ROW(Y, r0 + 2 * m + 1);
            for (int v = 0; v < NV; v++)
                yr[v] = ar[v], yi[v] = ai[v];
        }
    }
    /* coaxial translation, Y -> X: for each m, X_k^m = sum_j Z_m[k][j] Y_j^m */
    for (int m = 0; m <= p; m++) {
        const int w = p - m + 1;
        for (int k = m; k <= p; k++) {
            const double *z = Z + (k - m) * w;
            v8d ar[MAXV], ai[MAXV];
            for (int v = 0; v < NV; v++)
                ar[v] = ai[v] = (v8d){0};
            for (int j = m; j <= p; j++) {
                const double f = z[j - m];
                const v8d *yr = ROW(Y, 2 * IDX(j, m)), *yi = ROW(Y, 2 * IDX(j, m) + 1);
                for (int v = 0; v < NV; v++) {
                    ar[v] += f * yr[v];
                    ai[v] += f * yi[v];
                }
            }
            v8d *xr = ROW(X, 2 * IDX(k, m)), *xi = ROW(X, 2 * IDX(k, m) + 1);
            for (int v = 0; v < NV; v++)
                xr[v] = ar[v], xi[v] = ai[v];
        }
        Z += (int64_t)w * w;
    }
    /* inverse rotation, X -> Y: B = Br Re C' + i Bi Im C', C = e^{-i m' ph} B */
    for (int n = 0; n <= p; n++) {
        const int n1 = n + 1;
        const double *Br = F + rot_offset(n) + 2 * n1 * n1, *Bi = Br + n1 * n1;
        const int64_t r0 = 2 * IDX(n, 0);
        for (int mp = 0; mp <= n; mp++) {
            v8d ar[MAXV], ai[MAXV];
            mac_pairs(ar, ai, Br + mp * n1, Bi + mp * n1, X + r0 * LD, n1, NV);
            const double cr = phase[2 * mp], si = phase[2 * mp + 1];
            v8d *yr = ROW(Y, r0 + 2 * mp), *yi = ROW(Y, r0 + 2 * mp + 1);
            for (int v = 0; v < NV; v++) {
                yr[v] = cr * ar[v] + si * ai[v];
                yi[v] = cr * ai[v] - si * ar[v];
            }
        }
    }
#undef ROW
}

FMK_TARGET_CLONES void fmk_fmm3d_m2l_block(const fmk_fmm3d_ops_ctx *ctx, const double *phase,
                                           const double *wigner, const double *Z, int width,
                                           double *X, double *Y, double *T)
{
    switch ((width + 7) / 8) {
    case 0: return;
    case 1: m2l_block_v(ctx, phase, wigner, Z, X, Y, T, 1); break;
    case 2: m2l_block_v(ctx, phase, wigner, Z, X, Y, T, 2); break;
    case 3: m2l_block_v(ctx, phase, wigner, Z, X, Y, T, 3); break;
    default: m2l_block_v(ctx, phase, wigner, Z, X, Y, T, 4); break;
    }
}
