/* test_fmm2d_ops.c -- the 2D FMM's operators (src/fmm2d_ops.h) against direct sums, for both
 * kernels: P2M + M2P, P2M + M2M + M2P, P2M + M2L + L2P, P2L + L2P, P2L + L2L + L2P, at a
 * separation ratio of 1/2 (theta), with errors that fall like 2^-p; and P2P's rule for
 * coincident points (left out, their charge reported). */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "fmm2d/fmm2d_ops.h"
#include "testutil.h"

enum { NS = 40, PMAX = 40 };

/* V and D of the sources at z, directly (fmm2d.h: F for log2d, f for cauchy2d). */
static void direct(int is_log, int n, const double *xy, const fmk_cplx *q, fmk_cplx z,
                   fmk_cplx v[2])
{
    double qz = 0;
    v[0] = v[1] = fmk_c(0, 0);
    fmk_fmm2d_p2p(is_log, n, xy, q, z, v, &qz);
}

/* n sources in the disc of radius r about c, charges in [-1, 1] (complex for cauchy2d). */
static void cluster(test_rng *g, int is_log, fmk_cplx c, double r, int n, double *xy, fmk_cplx *q)
{
    for (int j = 0; j < n; j++) {
        double a = 6.283185307179586 * test_uniform(g), d = r * sqrt(test_uniform(g));
        xy[2 * j] = c.re + d * cos(a), xy[2 * j + 1] = c.im + d * sin(a);
        q[j] = fmk_c(2 * test_uniform(g) - 1, is_log ? 0 : 2 * test_uniform(g) - 1);
    }
}

/* Relative error of (V, D) against the reference; log2d's V counts by its real part. */
static double rel(int is_log, const fmk_cplx a[2], const fmk_cplx b[2])
{
    double ev = is_log ? fabs(a[0].re - b[0].re) / fabs(b[0].re)
                       : hypot(a[0].re - b[0].re, a[0].im - b[0].im) / hypot(b[0].re, b[0].im);
    double ed = hypot(a[1].re - b[1].re, a[1].im - b[1].im) / hypot(b[1].re, b[1].im);
    return fmax(ev, ed);
}

static void chains(int is_log)
{
    test_rng g = test_rng_seed(5 + is_log);
    double xy[2 * NS];
    fmk_cplx q[NS];
    /* sources about cs (radius 0.25), targets about ct (radius 0.25), |cs - ct| = 1.5 */
    const fmk_cplx cs = fmk_c(1.2, 1.1), ct = fmk_c(2.1, 2.3);
    cluster(&g, is_log, cs, 0.25, NS, xy, q);
    const fmk_cplx z = fmk_c(ct.re + 0.1, ct.im - 0.15);
    fmk_cplx ref[2];
    direct(is_log, NS, xy, q, z, ref);
    double prev[5] = {1, 1, 1, 1, 1};
    const int ps[] = {6, 12, 20, 30, 40};
    for (int t = 0; t < 5; t++) {
        const int p = ps[t];
        fmk_cplx M[PMAX + 1] = {{0, 0}}, Mp[PMAX + 1] = {{0, 0}}, L[PMAX + 1] = {{0, 0}},
                          Lc[PMAX + 1] = {{0, 0}}, P[PMAX + 1] = {{0, 0}};
        fmk_cplx v[5][2];
        for (int k = 0; k < 5; k++)
            v[k][0] = v[k][1] = fmk_c(0, 0);
        fmk_fmm2d_p2m(is_log, p, cs, 0.25, NS, xy, q, M);
        fmk_fmm2d_m2p(p, cs, 0.25, M, z, v[0]); /* P2M, M2P */
        const fmk_cplx cp = fmk_c(1.3, 1.0);    /* parent, radius 0.4 */
        fmk_fmm2d_m2m(p, cs, 0.25, M, cp, 0.4, Mp);
        fmk_fmm2d_m2p(p, cp, 0.4, Mp, z, v[1]); /* + M2M */
        fmk_fmm2d_m2l(p, cs, 0.25, M, ct, 0.25, L);
        fmk_fmm2d_l2p(p, ct, 0.25, L, z, v[2]); /* + M2L, L2P */
        fmk_fmm2d_p2l(is_log, p, ct, 0.25, NS, xy, q, P);
        fmk_fmm2d_l2p(p, ct, 0.25, P, z, v[3]);               /* P2L, L2P */
        const fmk_cplx cc = fmk_c(ct.re + 0.08, ct.im - 0.1); /* child, radius 0.1 */
        fmk_fmm2d_l2l(p, ct, 0.25, P, cc, 0.1, Lc);
        fmk_fmm2d_l2p(p, cc, 0.1, Lc, z, v[4]); /* + L2L */
        static const char *names[] = {"P2M-M2P", "P2M-M2M-M2P", "P2M-M2L-L2P", "P2L-L2P",
                                      "P2L-L2L-L2P"};
        for (int k = 0; k < 5; k++) {
            const double e = rel(is_log, v[k], ref);
            check_context("%s, %s, p = %d", is_log ? "log2d" : "cauchy2d", names[k], p);
            CHECK_MSG(e < 4 * pow(0.62, p) + 1e-13, "error %.3e", e);
            CHECK_MSG(e < prev[k] || e < 1e-13, "error %.3e did not fall (previous %.3e)", e,
                      prev[k]);
            prev[k] = e;
        }
    }
}

static void p2p_coincident(void)
{
    const double xy[6] = {1.25, 1.5, 1.25, 1.5, 1.75, 1.5};
    const fmk_cplx q[3] = {{2, 0}, {3, 0}, {5, 0}};
    fmk_cplx v[2] = {{0, 0}, {0, 0}};
    double qz = 0;
    check_context("P2P coincident points");
    fmk_fmm2d_p2p(1, 3, xy, q, fmk_c(1.25, 1.5), v, &qz);
    CHECK_MSG(qz == 5, "charge at distance 0: %g", qz);
    CHECK_MSG(fabs(v[0].re - 5 * log(0.5)) < 1e-15, "V = %g", v[0].re);
    CHECK_MSG(fabs(v[1].re - 5 / -0.5) < 1e-14 && v[1].im == 0, "D = %g %g", v[1].re, v[1].im);
}

int main(void)
{
    chains(1);
    chains(0);
    p2p_coincident();
    return check_summary();
}
