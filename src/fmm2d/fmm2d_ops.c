/* fmm2d_ops.c -- the 2D FMM's operators on the CPU (fmm2d_ops.h; the formulas are those of
 * Greengard & Rokhlin's lemmas for the expansions of eq. 2.2, written for scaled coefficients
 * so that every factor is at most 1 in modulus, as in Goude & Engblom Alg. 3.4b-3.6). */
#include "fmm2d/fmm2d_ops.h"

#include <pthread.h>

#define NC (FMK_FMM2D_MAX_ORDER + 1)

/* Binomial coefficients C(n, k), n < 2 NC, k < NC (Pascal's triangle, built once), the same
 * as diag[l][j] = C(l + j, j) for M2L's contiguous inner loop, and 1 / l: the translations use
 * them in their inner loops, where computing them on the fly cost a division per term. */
static double binom[2 * NC][NC], diag[NC][NC], inv_int[2 * NC];
static pthread_once_t binom_once = PTHREAD_ONCE_INIT;

static void binom_init(void)
{
    for (int n = 0; n < 2 * NC; n++) {
        binom[n][0] = 1;
        for (int k = 1; k < NC; k++)
            binom[n][k] = n == 0 ? 0 : binom[n - 1][k - 1] + binom[n - 1][k];
        inv_int[n] = n ? 1.0 / n : 0;
    }
    for (int l = 0; l < NC; l++)
        for (int j = 0; j < NC; j++)
            diag[l][j] = binom[l + j][j];
}

static void tables(void)
{
    pthread_once(&binom_once, binom_init);
}

void fmk_fmm2d_p2m(int is_log, int p, fmk_cplx c, double r, int64_t n, const double *xy,
                   const fmk_cplx *q, fmk_cplx *a)
{
    const double inv_r = 1.0 / r;
    tables();
    for (int64_t j = 0; j < n; j++) {
        const fmk_cplx w = fmk_c((xy[2 * j] - c.re) * inv_r, (xy[2 * j + 1] - c.im) * inv_r);
        if (is_log) { /* a_0 = sum q, a_k = -sum q w^k / k */
            fmk_cplx pw = q[j];
            a[0] = fmk_cadd(a[0], q[j]);
            for (int k = 1; k <= p; k++) {
                pw = fmk_cmul(pw, w);
                a[k] = fmk_csub(a[k], fmk_cscale(pw, inv_int[k]));
            }
        } else { /* a_k = sum G w^(k-1) / r */
            fmk_cplx pw = fmk_cscale(q[j], inv_r);
            for (int k = 1; k <= p; k++) {
                a[k] = fmk_cadd(a[k], pw);
                pw = fmk_cmul(pw, w);
            }
        }
    }
}

/* z^0 .. z^p */
static void powers(int p, fmk_cplx z, fmk_cplx *out)
{
    out[0] = fmk_c(1, 0);
    for (int k = 1; k <= p; k++)
        out[k] = fmk_cmul(out[k - 1], z);
}

void fmk_fmm2d_m2m(int p, fmk_cplx cc, double rc, const fmk_cplx *a, fmk_cplx cp, double rp,
                   fmk_cplx *ap)
{
    /* b_l = -a_0 t^l / l + sum_{k=1..l} a_k u^k C(l-1, k-1) t^(l-k), t = (cc - cp) / rp,
     * u = rc / rp */
    fmk_cplx tp[NC], au[NC];
    const fmk_cplx t = fmk_cscale(fmk_csub(cc, cp), 1.0 / rp);
    const double u = rc / rp;
    powers(p, t, tp);
    double uk = 1;
    for (int k = 1; k <= p; k++) {
        uk *= u;
        au[k] = fmk_cscale(a[k], uk);
    }
    tables();
    ap[0] = fmk_cadd(ap[0], a[0]);
    for (int l = 1; l <= p; l++) {
        fmk_cplx s = fmk_cscale(fmk_cmul(a[0], tp[l]), -inv_int[l]);
        for (int k = 1; k <= l; k++)
            fmk_cfma(&s, fmk_cscale(au[k], binom[l - 1][k - 1]), tp[l - k]);
        ap[l] = fmk_cadd(ap[l], s);
    }
}

void fmk_fmm2d_m2l(int p, fmk_cplx cs, double rs, const fmk_cplx *a, fmk_cplx ct, double rt,
                   fmk_cplx *b)
{
    /* z0 = cs - ct; rho_s = -rs / z0, rho_t = rt / z0; c_k = a_k rho_s^k;
     * b_0 += a_0 log(-z0) + sum c_k, b_l += rho_t^l (-a_0 / l + sum_k c_k C(l+k-1, k-1)) */
    fmk_cplx ck[NC], rt_pow[NC];
    double cr[NC], ci[NC];
    tables();
    const fmk_cplx z0 = fmk_csub(cs, ct), iz = fmk_cinv(z0);
    powers(p, fmk_cscale(iz, -rs), ck);
    powers(p, fmk_cscale(iz, rt), rt_pow);
    fmk_cplx s0 = fmk_c(0, 0);
    for (int k = 1; k <= p; k++) {
        ck[k] = fmk_cmul(ck[k], a[k]);
        cr[k - 1] = ck[k].re, ci[k - 1] = ck[k].im;
        s0 = fmk_cadd(s0, ck[k]);
    }
    if (a[0].re != 0 || a[0].im != 0)
        s0 = fmk_cadd(s0, fmk_cmul(a[0], fmk_clog(fmk_csub(ct, cs))));
    b[0] = fmk_cadd(b[0], s0);
    for (int l = 1; l <= p; l++) {
        const double *D = diag[l]; /* C(l + j, j), j = k - 1 */
        double sr = -a[0].re * inv_int[l], si = -a[0].im * inv_int[l];
#pragma omp simd reduction(+ : sr, si)
        for (int j = 0; j < p; j++)
            sr += cr[j] * D[j], si += ci[j] * D[j];
        fmk_cfma(&b[l], fmk_c(sr, si), rt_pow[l]);
    }
}

void fmk_fmm2d_l2l(int p, fmk_cplx cp, double rp, const fmk_cplx *b, fmk_cplx cc, double rc,
                   fmk_cplx *bc)
{
    /* bc_m += u^m sum_{l=m..p} b_l C(l, m) t^(l-m), t = (cc - cp) / rp, u = rc / rp */
    fmk_cplx tp[NC];
    const fmk_cplx t = fmk_cscale(fmk_csub(cc, cp), 1.0 / rp);
    const double u = rc / rp;
    powers(p, t, tp);
    tables();
    double um = 1;
    for (int m = 0; m <= p; m++) {
        fmk_cplx s = fmk_c(0, 0);
        for (int l = m; l <= p; l++)
            fmk_cfma(&s, fmk_cscale(b[l], binom[l][m]), tp[l - m]);
        bc[m] = fmk_cadd(bc[m], fmk_cscale(s, um));
        um *= u;
    }
}

void fmk_fmm2d_p2l(int is_log, int p, fmk_cplx c, double r, int64_t n, const double *xy,
                   const fmk_cplx *q, fmk_cplx *b)
{
    tables();
    for (int64_t j = 0; j < n; j++) {
        const fmk_cplx d = fmk_c(xy[2 * j] - c.re, xy[2 * j + 1] - c.im); /* z_j - c */
        const fmk_cplx id = fmk_cinv(d), w = fmk_cscale(id, r);
        if (is_log) { /* b_0 = sum q log(c - z_j), b_l = -sum q w^l / l */
            b[0] = fmk_cadd(b[0], fmk_cmul(q[j], fmk_clog(fmk_cscale(d, -1))));
            fmk_cplx pw = q[j];
            for (int l = 1; l <= p; l++) {
                pw = fmk_cmul(pw, w);
                b[l] = fmk_csub(b[l], fmk_cscale(pw, inv_int[l]));
            }
        } else { /* b_l = -sum G w^l / (z_j - c) */
            fmk_cplx pw = fmk_cscale(fmk_cmul(q[j], id), -1);
            for (int l = 0; l <= p; l++) {
                b[l] = fmk_cadd(b[l], pw);
                pw = fmk_cmul(pw, w);
            }
        }
    }
}

void fmk_fmm2d_l2p(int p, fmk_cplx c, double r, const fmk_cplx *b, fmk_cplx z, fmk_cplx v[2])
{
    fmk_fmm2d_l2p_at(p, c, r, b, z, v);
}

void fmk_fmm2d_m2p(int p, fmk_cplx c, double r, const fmk_cplx *a, fmk_cplx z, fmk_cplx v[2])
{
    fmk_fmm2d_m2p_at(p, c, r, a, z, v);
}

/* cauchy2d's P2P, branch-free so that it vectorizes: a source at distance 0 contributes 0 to
 * the sums and its charge to out[4]. */
static FMK_TARGET_CLONES void p2p_cauchy(int64_t n, const double *restrict xy,
                                         const fmk_cplx *restrict q, double zr, double zi,
                                         double out[5])
{
    double vr = 0, vi = 0, dr = 0, di = 0, qz = 0;
#pragma omp simd reduction(+ : vr, vi, dr, di, qz)
    for (int64_t j = 0; j < n; j++) {
        const double a = zr - xy[2 * j], bb = zi - xy[2 * j + 1]; /* z - z_j */
        const double r2 = a * a + bb * bb;
        const int zero = r2 == 0;
        const double s = zero ? 0.0 : 1.0 / (zero ? 1.0 : r2);
        const double ir = a * s, ii = -bb * s; /* 1 / (z - z_j), 0 at distance 0 */
        const double qr = q[j].re, qi = q[j].im;
        const double gr = qr * ir - qi * ii, gi = qr * ii + qi * ir; /* G / (z - z_j) */
        vr += gr, vi += gi;
        dr -= gr * ir - gi * ii, di -= gr * ii + gi * ir;
        qz += zero ? qr : 0.0;
    }
    out[0] += vr, out[1] += vi, out[2] += dr, out[3] += di, out[4] += qz;
}

void fmk_fmm2d_p2p(int is_log, int64_t n, const double *xy, const fmk_cplx *q, fmk_cplx z,
                   fmk_cplx v[2], double *q_zero)
{
    if (!is_log) {
        double o[5] = {0, 0, 0, 0, 0};
        p2p_cauchy(n, xy, q, z.re, z.im, o);
        v[0].re += o[0], v[0].im += o[1], v[1].re += o[2], v[1].im += o[3];
        *q_zero += o[4];
        return;
    }
    double vr = 0, dr = 0, di = 0, qz = 0;
    for (int64_t j = 0; j < n; j++) {
        const double a = z.re - xy[2 * j], bb = z.im - xy[2 * j + 1]; /* z - z_j */
        const double r2 = a * a + bb * bb;
        if (r2 == 0) {
            qz += q[j].re;
            continue;
        }
        const double s = 1.0 / r2, ir = a * s, ii = -bb * s; /* 1 / (z - z_j) */
        const double qr = q[j].re;
        vr += qr * 0.5 * log(r2);
        dr += qr * ir, di += qr * ii;
    }
    v[0].re += vr, v[1].re += dr, v[1].im += di;
    *q_zero += qz;
}
