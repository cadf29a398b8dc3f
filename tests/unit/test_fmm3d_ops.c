/* test_fmm3d_ops.c -- the Laplace expansion operators of the 3D FMM (src/fmm3d_ops.h) against
 * direct summation in long double: P2M -> M2P and P2L -> L2P convergence in p, gradients
 * (against the direct sum and against finite differences of the expansion's own potential), the
 * operator chain P2M -> M2M -> M2L -> L2L -> L2P on a hand-built tree (also at tree depth 18),
 * the point-and-shoot translations against their O(p^4) references for random and special
 * directions (+z, -z, x, nearly z, zero shift), p = 0, 1, 2 against the closed-form monopole,
 * dipole and quadrupole, mixed-sign charges, the worst M2L pair of a V list, order_for, and the
 * context's argument checks. The accuracy tables it prints are those of docs/fmm3d.md.
 * Linked against the static library to reach the internal operators. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmm3d/fmm3d_ops.h"
#include "check.h"
#include "testutil.h"

#define MAXP 40

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------ */

/* n points uniform in the ball of radius a about c. */
static void ball(test_rng *rng, int64_t n, const double c[3], double a, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        double v[3], r2;
        do {
            for (int k = 0; k < 3; k++)
                v[k] = 2 * test_uniform(rng) - 1;
            r2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
        } while (r2 > 1);
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = c[k] + a * v[k];
    }
}

/* n points uniform on the sphere of radius r about c. */
static void shell(test_rng *rng, int64_t n, const double c[3], double r, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        double v[3], r2;
        do {
            for (int k = 0; k < 3; k++)
                v[k] = test_normal(rng);
            r2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
        } while (r2 < 1e-6);
        const double f = r / sqrt(r2);
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = c[k] + f * v[k];
    }
}

/* n points uniform in the cube of centre c and side l. */
static void cube(test_rng *rng, int64_t n, const double c[3], double l, double *x)
{
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = c[k] + l * (test_uniform(rng) - 0.5);
}

static void charges(test_rng *rng, int64_t n, int mixed, double *q)
{
    for (int64_t i = 0; i < n; i++)
        q[i] = mixed ? 2 * test_uniform(rng) - 1 : 0.5 + test_uniform(rng);
}

/* Direct sum in long double: pot[i], grad[3 i + k] of 1/|y - x|. */
static void direct(int64_t ns, const double *x, const double *q, int64_t nt, const double *y,
                   double *pot, double *grad)
{
    for (int64_t i = 0; i < nt; i++) {
        long double p = 0, g[3] = {0, 0, 0};
        for (int64_t j = 0; j < ns; j++) {
            long double d[3];
            for (int k = 0; k < 3; k++)
                d[k] = (long double)y[3 * i + k] - x[3 * j + k];
            const long double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            const long double u = 1 / sqrtl(r2);
            p += q[j] * u;
            for (int k = 0; k < 3; k++)
                g[k] -= q[j] * d[k] * u * u * u;
        }
        pot[i] = (double)p;
        for (int k = 0; k < 3; k++)
            grad[3 * i + k] = (double)g[k];
    }
}

/* max |a - b| / max |b| over n values. */
static double rel_max(int64_t n, const double *a, const double *b)
{
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}

/* ||a - b|| / ||b|| (2-norm) over n doubles. */
static double rel_l2(int64_t n, const double *a, const double *b)
{
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        e += (a[i] - b[i]) * (a[i] - b[i]);
        m += b[i] * b[i];
    }
    return m > 0 ? sqrt(e / m) : sqrt(e);
}

typedef struct ops {
    fmk_fmm3d_ops_ctx ctx;
    double *work;
    double *A, *B, *C, *D; /* four expansions */
    int64_t nc2;
} ops;

static int ops_open(ops *o, int p)
{
    memset(o, 0, sizeof *o);
    if (fmk_fmm3d_ops_create(&o->ctx, p) != FMK_OK)
        return 0;
    o->nc2 = 2 * o->ctx.n_coef;
    o->work = malloc((size_t)fmk_fmm3d_work_size(&o->ctx) * sizeof(double));
    o->A = calloc((size_t)(4 * o->nc2), sizeof(double));
    o->B = o->A + o->nc2, o->C = o->B + o->nc2, o->D = o->C + o->nc2;
    return o->work && o->A;
}

static void ops_close(ops *o)
{
    fmk_fmm3d_ops_destroy(&o->ctx);
    free(o->work);
    free(o->A);
}

/* ---------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------ */

static void test_context(void)
{
    check_context("context");
    fmk_fmm3d_ops_ctx ctx;
    CHECK(fmk_fmm3d_ops_create(NULL, 4) == FMK_ERR_NULL);
    CHECK(fmk_fmm3d_ops_create(&ctx, -1) == FMK_ERR_ARG && ctx.sqrt_int == NULL);
    CHECK(fmk_fmm3d_ops_create(&ctx, FMK_FMM3D_MAX_ORDER + 1) == FMK_ERR_ARG);
    CHECK(fmk_fmm3d_ops_create(&ctx, FMK_FMM3D_MAX_ORDER) == FMK_OK);
    CHECK(ctx.n_coef == fmk_fmm3d_ncoef(FMK_FMM3D_MAX_ORDER));
    int finite = 1;
    for (int64_t i = 0; i < (int64_t)(2 * ctx.order + 1) * (2 * ctx.order + 1); i++)
        finite = finite && isfinite(ctx.sqrt_binom[i]);
    CHECK_MSG(finite, "sqrt-binomial table not finite at p = %d", ctx.order);
    fmk_fmm3d_ops_destroy(&ctx);
    fmk_fmm3d_ops_destroy(&ctx);
    fmk_fmm3d_ops_destroy(NULL);
    CHECK(ctx.sqrt_int == NULL);

    check_context("order_for");
    CHECK(fmk_fmm3d_order_for(1e-6, 0) == -1 && fmk_fmm3d_order_for(1e-6, 1) == -1);
    CHECK(fmk_fmm3d_order_for(0, 0.5) == -1 && fmk_fmm3d_order_for(2, 0.5) == -1);
    int prev = -1, mono = 1;
    for (double eps = 1e-2; eps >= 1e-14; eps /= 10) {
        const int p = fmk_fmm3d_order_for(eps, 0.5);
        mono = mono && p >= prev;
        prev = p;
        const double rho = 0.5, bound = pow(rho, p + 1) * (1 + rho) / (1 - rho);
        const double below = p > 0 ? pow(rho, p) * (1 + rho) / (1 - rho) : 2;
        CHECK_MSG(bound <= eps && below > eps, "order_for(%g, 0.5) = %d is not the smallest", eps,
                  p);
    }
    CHECK(mono);
}

/* ---------------------------------------------------------------------------------------------
 * Harmonics: the addition theorem 1/|x - y| = sum conj(R(y)) I(x) at p = 60, the symmetry of
 * |R_n^m| <= r^n, and R at 0.
 * ------------------------------------------------------------------------------------------ */

static void test_harmonics(void)
{
    check_context("harmonics");
    ops o;
    CHECK(ops_open(&o, 30));
    double *R = malloc((size_t)(2 * fmk_fmm3d_ncoef(61)) * sizeof(double));
    double *I = malloc((size_t)(2 * fmk_fmm3d_ncoef(61)) * sizeof(double));
    test_rng rng = test_rng_seed(11);
    double worst = 0;
    int bounded = 1;
    for (int trial = 0; trial < 20; trial++) {
        double x[3], y[3], c0[3] = {0, 0, 0};
        shell(&rng, 1, c0, 1.0, x);
        shell(&rng, 1, c0, 0.4, y);
        fmk_fmm3d_regular(&o.ctx, 60, y[0], y[1], y[2], R);
        fmk_fmm3d_irregular(&o.ctx, 60, x[0], x[1], x[2], I);
        long double s = 0;
        for (int n = 0; n <= 60; n++)
            for (int m = 0; m <= n; m++) {
                const int64_t i = FMK_FMM3D_IDX(n, m);
                const long double t =
                    (long double)R[2 * i] * I[2 * i] + (long double)R[2 * i + 1] * I[2 * i + 1];
                s += m ? 2 * t : t;
                bounded = bounded && hypot(R[2 * i], R[2 * i + 1]) <= pow(0.4, n) * (1 + 1e-12) &&
                          hypot(I[2 * i], I[2 * i + 1]) <= (1 + 1e-12);
            }
        const double d = sqrt((x[0] - y[0]) * (x[0] - y[0]) + (x[1] - y[1]) * (x[1] - y[1]) +
                              (x[2] - y[2]) * (x[2] - y[2]));
        worst = fmax(worst, fabs((double)s - 1 / d) * d);
    }
    CHECK_LE(worst, 1e-14, "addition theorem at degree 60, |y|/|x| = 0.4");
    CHECK_MSG(bounded, "Schmidt-normalised harmonics exceed r^n or r^-(n+1)");
    fmk_fmm3d_regular(&o.ctx, 5, 0, 0, 0, R);
    int zero = R[0] == 1 && R[1] == 0;
    for (int64_t i = 1; i < fmk_fmm3d_ncoef(5); i++)
        zero = zero && R[2 * i] == 0 && R[2 * i + 1] == 0;
    CHECK_MSG(zero, "R at the origin is not (1, 0, 0, ...)");
    free(R);
    free(I);
    ops_close(&o);
}

/* ---------------------------------------------------------------------------------------------
 * P2M -> M2P and P2L -> L2P: convergence in p, gradients
 * ------------------------------------------------------------------------------------------ */

#define NS 200
#define NT 100

static double err_m2p[MAXP + 1], err_l2p[MAXP + 1], err_gm2p[MAXP + 1], err_gl2p[MAXP + 1];
static double l2_m2p[MAXP + 1], l2_l2p[MAXP + 1];

static void test_convergence(void)
{
    test_rng rng = test_rng_seed(5);
    static double xs[3 * NS], q[NS], yt[3 * NT], pot[NT], grad[3 * NT], rp[NT], rg[3 * NT];
    /* multipole: sources in a ball of radius 0.5 about c, targets at distance 1 (ratio 0.5) */
    const double c[3] = {1.3, 1.6, 1.45}, s = 0.25;
    ball(&rng, NS, c, 0.5, xs);
    charges(&rng, NS, 1, q);
    shell(&rng, NT, c, 1.0, yt);
    direct(NS, xs, q, NT, yt, rp, rg);
    /* local: the same geometry inverted (sources at distance 1, targets within 0.5) */
    static double xl[3 * NS], yl[3 * NT], lp[NT], lg[3 * NT];
    shell(&rng, NS, c, 1.0, xl);
    ball(&rng, NT, c, 0.5, yl);
    direct(NS, xl, q, NT, yl, lp, lg);
    for (int p = 0; p <= MAXP; p++) {
        ops o;
        check_context("convergence p = %d", p);
        CHECK(ops_open(&o, p));
        fmk_fmm3d_p2m(&o.ctx, c, s, NS, xs, q, o.A, o.work);
        memset(pot, 0, sizeof pot);
        memset(grad, 0, sizeof grad);
        fmk_fmm3d_m2p(&o.ctx, c, s, o.A, NT, yt, pot, grad, o.work);
        err_m2p[p] = rel_max(NT, pot, rp);
        l2_m2p[p] = rel_l2(NT, pot, rp);
        err_gm2p[p] = rel_max(3 * NT, grad, rg);
        fmk_fmm3d_p2l(&o.ctx, c, s, NS, xl, q, o.B, o.work);
        memset(pot, 0, sizeof pot);
        memset(grad, 0, sizeof grad);
        fmk_fmm3d_l2p(&o.ctx, c, s, o.B, NT, yl, pot, grad, o.work);
        err_l2p[p] = rel_max(NT, pot, lp);
        l2_l2p[p] = rel_l2(NT, pot, lp);
        err_gl2p[p] = rel_max(3 * NT, grad, lg);
        /* pot = NULL and grad = NULL give the same numbers */
        double p1[NT] = {0}, g1[3 * NT] = {0};
        fmk_fmm3d_m2p(&o.ctx, c, s, o.A, NT, yt, p1, NULL, o.work);
        fmk_fmm3d_m2p(&o.ctx, c, s, o.A, NT, yt, NULL, g1, o.work);
        memset(pot, 0, sizeof pot);
        memset(grad, 0, sizeof grad);
        fmk_fmm3d_m2p(&o.ctx, c, s, o.A, NT, yt, pot, grad, o.work);
        CHECK(memcmp(p1, pot, sizeof p1) == 0 && memcmp(g1, grad, sizeof g1) == 0);
        ops_close(&o);
    }
    printf("  p   P2M->M2P   grad      P2L->L2P   grad      (ratio 0.5, max error / max value)\n");
    for (int p = 0; p <= MAXP; p++)
        if (p <= 4 || p % 4 == 0)
            printf(" %2d   %.2e   %.2e   %.2e   %.2e   l2 %.2e %.2e\n", p, err_m2p[p], err_gm2p[p],
                   err_l2p[p], err_gl2p[p], l2_m2p[p], l2_l2p[p]);
    /* Monotone decay until rounding (1e-14) is reached, within the bound of paper 004 eq. 6
     * relative to the smallest |phi| the charges could give (mixed signs: use sum |q|). */
    double sum_abs = 0, max_pot = 0, max_lpot = 0;
    for (int i = 0; i < NS; i++)
        sum_abs += fabs(q[i]);
    for (int i = 0; i < NT; i++)
        max_pot = fmax(max_pot, fabs(rp[i])), max_lpot = fmax(max_lpot, fabs(lp[i]));
    for (int p = 0; p <= MAXP; p++) {
        check_context("convergence p = %d", p);
        const double bound = sum_abs / (1.0 - 0.5) * pow(0.5, p + 1);
        CHECK_LE(err_m2p[p], bound / max_pot + 2e-15, "P2M->M2P error / eq. 6 bound");
        CHECK_LE(err_l2p[p], bound / max_lpot + 2e-15, "P2L->L2P error / eq. 6 bound");
        /* Monotone: strictly over every two orders, and within a factor 1.6 from one order to
         * the next (the truncated term of degree p + 1 can be small by chance for a given charge
         * set, so the error of order p may then stay a little above that of p - 1). */
        if (p > 0 && l2_m2p[p - 1] > 1e-13)
            CHECK_MSG(l2_m2p[p] < 1.6 * l2_m2p[p - 1],
                      "M2P rms error rose from p - 1: %.3e -> %.3e", l2_m2p[p - 1], l2_m2p[p]);
        if (p > 0 && l2_l2p[p - 1] > 1e-13)
            CHECK_MSG(l2_l2p[p] < 1.6 * l2_l2p[p - 1],
                      "L2P rms error rose from p - 1: %.3e -> %.3e", l2_l2p[p - 1], l2_l2p[p]);
        if (p > 1 && err_m2p[p - 2] > 1e-13)
            CHECK_MSG(err_m2p[p] < err_m2p[p - 2], "M2P max error rose over two orders at p = %d",
                      p);
        if (p > 1 && err_l2p[p - 2] > 1e-13)
            CHECK_MSG(err_l2p[p] < err_l2p[p - 2], "L2P max error rose over two orders at p = %d",
                      p);
        if (p > 0 && err_gm2p[p - 1] > 1e-12)
            CHECK_MSG(err_gm2p[p] < err_gm2p[p - 1], "M2P gradient error rose at p = %d", p);
        if (p > 0 && err_gl2p[p - 1] > 1e-12)
            CHECK_MSG(err_gl2p[p] < err_gl2p[p - 1], "L2P gradient error rose at p = %d", p);
    }
    /* The rate: 20 more orders gain 0.5^20 (within a factor 30 either way). */
    check_context("convergence rate");
    const double gain = 1.0 / 1048576;
    CHECK_LE(err_m2p[30] / err_m2p[10], 30 * gain, "M2P gain from p = 10 to 30 / 0.5^20 bound");
    CHECK_LE(gain / 30, err_m2p[30] / err_m2p[10], "M2P gain not faster than (a/r)^p");
    CHECK_LE(err_l2p[30] / err_l2p[10], 30 * gain, "L2P gain from p = 10 to 30");
    check_context("convergence at p = 40, ratio 0.5");
    CHECK_LE(err_m2p[40], 5e-14, "P2M->M2P at p = 40");
    CHECK_LE(err_l2p[40], 5e-14, "P2L->L2P at p = 40");
    CHECK_LE(err_gm2p[40], 2e-12, "M2P gradient at p = 40");
    CHECK_LE(err_gl2p[40], 2e-11, "L2P gradient at p = 40");
}

/* The gradient of M2P and L2P is the derivative of their own potential: central differences
 * (h = 1e-4 of the distance; error h^2 ~ 1e-8 relative). */
static void test_gradient_fd(void)
{
    test_rng rng = test_rng_seed(9);
    const int p = 12;
    ops o;
    check_context("gradient vs finite differences, p = %d", p);
    CHECK(ops_open(&o, p));
    const double c[3] = {1.5, 1.5, 1.5}, s = 0.125;
    double xs[3 * 50], q[50], xl[3 * 50];
    ball(&rng, 50, c, 0.3, xs);
    shell(&rng, 50, c, 1.2, xl);
    charges(&rng, 50, 1, q);
    fmk_fmm3d_p2m(&o.ctx, c, s, 50, xs, q, o.A, o.work);
    fmk_fmm3d_p2l(&o.ctx, c, s, 50, xl, q, o.B, o.work);
    double worst_m = 0, worst_l = 0;
    for (int t = 0; t < 20; t++) {
        double y[3], yl[3];
        shell(&rng, 1, c, 0.9, y);
        ball(&rng, 1, c, 0.4, yl);
        double g[3] = {0, 0, 0}, gl[3] = {0, 0, 0};
        fmk_fmm3d_m2p(&o.ctx, c, s, o.A, 1, y, NULL, g, o.work);
        fmk_fmm3d_l2p(&o.ctx, c, s, o.B, 1, yl, NULL, gl, o.work);
        const double h = 1e-4;
        double fd[3], fdl[3];
        for (int k = 0; k < 3; k++) {
            double a[3], b[3], pa = 0, pb = 0, la = 0, lb = 0;
            memcpy(a, y, sizeof a), memcpy(b, y, sizeof b);
            a[k] += h, b[k] -= h;
            fmk_fmm3d_m2p(&o.ctx, c, s, o.A, 1, a, &pa, NULL, o.work);
            fmk_fmm3d_m2p(&o.ctx, c, s, o.A, 1, b, &pb, NULL, o.work);
            fd[k] = (pa - pb) / (2 * h);
            memcpy(a, yl, sizeof a), memcpy(b, yl, sizeof b);
            a[k] += h, b[k] -= h;
            fmk_fmm3d_l2p(&o.ctx, c, s, o.B, 1, a, &la, NULL, o.work);
            fmk_fmm3d_l2p(&o.ctx, c, s, o.B, 1, b, &lb, NULL, o.work);
            fdl[k] = (la - lb) / (2 * h);
        }
        worst_m = fmax(worst_m, rel_max(3, g, fd));
        worst_l = fmax(worst_l, rel_max(3, gl, fdl));
    }
    CHECK_LE(worst_m, 1e-6, "M2P gradient vs central differences of M2P");
    CHECK_LE(worst_l, 1e-6, "L2P gradient vs central differences of L2P");
    ops_close(&o);
}

/* ---------------------------------------------------------------------------------------------
 * p = 0, 1, 2: the multipole is the monopole, dipole and quadrupole of tree3d.h / bh_terms.h
 * ------------------------------------------------------------------------------------------ */

static void test_low_orders(void)
{
    test_rng rng = test_rng_seed(3);
    const double c[3] = {1.2, 1.7, 1.4};
    double x[3 * 30], q[30];
    ball(&rng, 30, c, 0.2, x);
    charges(&rng, 30, 1, q);
    double Q = 0, D[3] = {0, 0, 0}, S[3][3] = {{0}};
    for (int j = 0; j < 30; j++) {
        double d[3];
        for (int k = 0; k < 3; k++)
            d[k] = x[3 * j + k] - c[k];
        Q += q[j];
        for (int a = 0; a < 3; a++) {
            D[a] += q[j] * d[a];
            for (int b = 0; b < 3; b++)
                S[a][b] += q[j] * d[a] * d[b];
        }
    }
    for (int p = 0; p <= 2; p++) {
        check_context("low order p = %d", p);
        ops o;
        CHECK(ops_open(&o, p));
        fmk_fmm3d_p2m(&o.ctx, c, 0.5, 30, x, q, o.A, o.work);
        double worst = 0, worstg = 0;
        for (int t = 0; t < 10; t++) {
            double y[3];
            shell(&rng, 1, c, 1.0 + t, y);
            double r[3] = {y[0] - c[0], y[1] - c[1], y[2] - c[2]};
            const double r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2], r1 = sqrt(r2);
            const double u1 = 1 / r1, u3 = u1 / r2, u5 = u3 / r2, u7 = u5 / r2;
            /* bh_terms.h with eps2 = 0 */
            double phi = Q * u1, cr = -Q * u3, g[3] = {0, 0, 0};
            if (p >= 1) {
                const double dr = D[0] * r[0] + D[1] * r[1] + D[2] * r[2];
                phi += dr * u3;
                cr -= 3 * dr * u5;
                for (int k = 0; k < 3; k++)
                    g[k] += D[k] * u3;
            }
            if (p >= 2) {
                double sr[3], rsr = 0;
                for (int a = 0; a < 3; a++) {
                    sr[a] = S[a][0] * r[0] + S[a][1] * r[1] + S[a][2] * r[2];
                    rsr += r[a] * sr[a];
                }
                const double tr = S[0][0] + S[1][1] + S[2][2];
                phi += 1.5 * rsr * u5 - 0.5 * tr * u3;
                cr += 1.5 * tr * u5 - 7.5 * rsr * u7;
                for (int k = 0; k < 3; k++)
                    g[k] += 3 * sr[k] * u5;
            }
            for (int k = 0; k < 3; k++)
                g[k] += cr * r[k];
            double pm = 0, gm[3] = {0, 0, 0};
            fmk_fmm3d_m2p(&o.ctx, c, 0.5, o.A, 1, y, &pm, gm, o.work);
            worst = fmax(worst, fabs(pm - phi) / fabs(phi));
            worstg = fmax(worstg, rel_max(3, gm, g));
        }
        CHECK_LE(worst, 1e-14, "M2P against the closed-form moments");
        CHECK_LE(worstg, 1e-14, "M2P gradient against the closed-form moments");
        ops_close(&o);
    }
}

/* ---------------------------------------------------------------------------------------------
 * M2L on blocks: every column of fmk_fmm3d_m2l_block times 1/s is fmk_fmm3d_m2l of that column,
 * for every width 1..FMK_FMM3D_BLOCK (the kernels for 8, 16, 24 and 32 columns) and V-list
 * directions at distances 2 to 3 sqrt(3), with the Wigner matrices of another direction of the
 * same polar angle
 * ------------------------------------------------------------------------------------------ */

static void test_m2l_block(void)
{
    enum { LD = FMK_FMM3D_BLOCK };
    test_rng rng = test_rng_seed(33);
    const int orders[] = {0, 1, 4, 7, 20, 35};
    const int dirs[][3] = {{0, 0, 2}, {0, 0, -3}, {2, 1, -3}, {3, 3, 3}, {-2, 0, 0}, {1, -2, 2}};
    double worst = 0;
    for (size_t io = 0; io < sizeof orders / sizeof *orders; io++) {
        ops o;
        const int p = orders[io];
        check_context("M2L on blocks, p = %d", p);
        CHECK(ops_open(&o, p));
        const int64_t nc2 = o.nc2;
        double *X = malloc(sizeof(double) * (size_t)(2 * nc2 + 2 * (p + 1)) * LD);
        double *Y = X + nc2 * LD, *T = Y + nc2 * LD;
        double *Z = malloc(sizeof(double) * (size_t)fmk_fmm3d_m2l_zmat_size(&o.ctx));
        double *rot = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&o.ctx));
        double *rot2 = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&o.ctx));
        double phase[2 * (FMK_FMM3D_MAX_ORDER + 1)];
        double *Ms = malloc(sizeof(double) * (size_t)nc2 * LD);
        for (size_t id = 0; id < sizeof dirs / sizeof *dirs; id++) {
            const double s = 0.0625, c0[3] = {1.25, 1.5, 1.75};
            const double d[3] = {dirs[id][0], dirs[id][1], dirs[id][2]};
            const double c1[3] = {c0[0] + s * d[0], c0[1] + s * d[1], c0[2] + s * d[2]};
            /* the Wigner matrices of another direction with the same polar angle (turned by 90
             * degrees about z), the phases of this one */
            const double d90[3] = {-d[1], d[0], d[2]};
            fmk_fmm3d_rot_init(&o.ctx, d90, rot, o.work);
            fmk_fmm3d_rot_phase(&o.ctx, d, phase);
            const double *wigner = rot + 2 * (p + 1);
            fmk_fmm3d_rot_init(&o.ctx, d, rot2, o.work);
            fmk_fmm3d_m2l_zmat(&o.ctx, sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]), Z);
            /* LD multipoles of clusters in the source box */
            for (int c = 0; c < LD; c++) {
                double x[3 * 10], q[10];
                cube(&rng, 10, c0, s, x);
                charges(&rng, 10, 1, q);
                memset(Ms + c * nc2, 0, sizeof(double) * (size_t)nc2);
                fmk_fmm3d_p2m(&o.ctx, c0, s, 10, x, q, Ms + c * nc2, o.work);
            }
            for (int width = 1; width <= LD; width += (width < 9 ? 1 : 7)) {
                for (int64_t i = 0; i < nc2; i++)
                    for (int c = 0; c < LD; c++)
                        X[i * LD + c] = c < width ? Ms[c * nc2 + i] : 0;
                fmk_fmm3d_m2l_block(&o.ctx, phase, wigner, Z, width, X, Y, T);
                for (int c = 0; c < width; c++) {
                    memset(o.C, 0, sizeof(double) * (size_t)nc2);
                    fmk_fmm3d_m2l(&o.ctx, rot2, c0, s, Ms + c * nc2, c1, s, o.C, o.work);
                    for (int64_t i = 0; i < nc2; i++)
                        o.D[i] = Y[i * LD + c] / s;
                    worst = fmax(worst, rel_l2(nc2, o.D, o.C));
                }
            }
        }
        CHECK_LE(worst, 1e-14, "block M2L vs M2L (relative 2-norm, worst column)");
        free(X), free(Z), free(rot), free(rot2), free(Ms);
        ops_close(&o);
    }
    printf("M2L on blocks vs M2L: worst relative difference %.2e\n", worst);
}

/* ---------------------------------------------------------------------------------------------
 * Point-and-shoot translations against the O(p^4) references
 * ------------------------------------------------------------------------------------------ */

static double worst_rot[3]; /* m2m, m2l, l2l over all p and directions */

static void compare_translations(int p, const double dir[3], const char *what, test_rng *rng)
{
    ops o;
    check_context("rotation-based translations, p = %d, direction %s", p, what);
    CHECK(ops_open(&o, p));
    /* A multipole of a cluster of side 0.25 about c, and a local of far sources about c. */
    const double c[3] = {1.375, 1.625, 1.375}, s = 0.25;
    double x[3 * 40], q[40], xf[3 * 40];
    cube(rng, 40, c, s, x);
    shell(rng, 40, c, 3.0, xf);
    charges(rng, 40, 1, q);
    fmk_fmm3d_p2m(&o.ctx, c, s, 40, x, q, o.A, o.work);
    fmk_fmm3d_p2l(&o.ctx, c, s, 40, xf, q, o.B, o.work);
    const double len = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    double u[3] = {0, 0, 0};
    if (len > 0)
        for (int k = 0; k < 3; k++)
            u[k] = dir[k] / len;
    /* M2M to the parent (side 0.5, centre at distance sqrt(3)/8 along u) */
    double cp[3], cl[3];
    for (int k = 0; k < 3; k++) {
        cp[k] = c[k] + 0.2165 * u[k];
        cl[k] = c[k] + 0.75 * u[k]; /* M2L target: 3 box sides away */
    }
    double *rot = malloc((size_t)fmk_fmm3d_rot_size(&o.ctx) * sizeof(double));
    double e[3];
    /* m2m, with rot = NULL and with a precomputed rotation */
    fmk_fmm3d_m2m(&o.ctx, NULL, c, s, o.A, cp, 2 * s, o.C, o.work);
    fmk_fmm3d_m2m_ref(&o.ctx, c, s, o.A, cp, 2 * s, o.D, o.work);
    e[0] = rel_l2(o.nc2, o.C, o.D);
    double v[3] = {cp[0] - c[0], cp[1] - c[1], cp[2] - c[2]};
    fmk_fmm3d_rot_init(&o.ctx, v, rot, o.work);
    memset(o.C, 0, (size_t)o.nc2 * sizeof(double));
    fmk_fmm3d_m2m(&o.ctx, len > 0 ? rot : NULL, c, s, o.A, cp, 2 * s, o.C, o.work);
    e[0] = fmax(e[0], rel_l2(o.nc2, o.C, o.D));
    /* m2l */
    memset(o.C, 0, 2 * (size_t)o.nc2 * sizeof(double));
    if (len > 0) {
        fmk_fmm3d_m2l(&o.ctx, NULL, c, s, o.A, cl, s, o.C, o.work);
        fmk_fmm3d_m2l_ref(&o.ctx, c, s, o.A, cl, s, o.D, o.work);
        e[1] = rel_l2(o.nc2, o.C, o.D);
    } else {
        e[1] = 0;
    }
    /* l2l to a child (side 0.125, centre sqrt(3)/16 along u) */
    memset(o.C, 0, 2 * (size_t)o.nc2 * sizeof(double));
    double cc[3];
    for (int k = 0; k < 3; k++)
        cc[k] = c[k] + 0.108 * u[k];
    fmk_fmm3d_l2l(&o.ctx, NULL, c, s, o.B, cc, s / 2, o.C, o.work);
    fmk_fmm3d_l2l_ref(&o.ctx, c, s, o.B, cc, s / 2, o.D, o.work);
    e[2] = rel_l2(o.nc2, o.C, o.D);
    const double tol = 2e-14 * (1 + p / 10.0);
    CHECK_LE(e[0], tol, "M2M vs reference (relative 2-norm)");
    CHECK_LE(e[1], tol, "M2L vs reference (relative 2-norm)");
    CHECK_LE(e[2], tol, "L2L vs reference (relative 2-norm)");
    for (int k = 0; k < 3; k++)
        worst_rot[k] = fmax(worst_rot[k], e[k]);
    /* rotating forth and back is the identity */
    fmk_fmm3d_rotate(&o.ctx, rot, 0, o.A, o.C);
    fmk_fmm3d_rotate(&o.ctx, rot, 1, o.C, o.D);
    CHECK_LE(rel_l2(o.nc2, o.D, o.A), tol, "rotate then rotate back");
    free(rot);
    ops_close(&o);
}

static void test_translations(void)
{
    test_rng rng = test_rng_seed(21);
    const int orders[] = {0, 1, 2, 3, 5, 8, 13, 20, 30, 40};
    const double special[][3] = {{0, 0, 1}, {0, 0, -1},  {1, 0, 0},     {0, -1, 0},
                                 {1, 1, 1}, {-1, 1, -1}, {1e-13, 0, 1}, {0, 1e-13, -1}};
    const char *names[] = {"+z",      "-z",        "+x",        "-y",
                           "(1,1,1)", "(-1,1,-1)", "nearly +z", "nearly -z"};
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
        const int p = orders[i];
        for (int d = 0; d < 8; d++)
            if (p <= 20 || d < 3)
                compare_translations(p, special[d], names[d], &rng);
        for (int r = 0; r < (p <= 20 ? 3 : 1); r++) {
            double dir[3];
            double c0[3] = {0, 0, 0};
            shell(&rng, 1, c0, 1.0, dir);
            compare_translations(p, dir, "random", &rng);
        }
    }
    /* zero shift: M2M and L2L with c_to == c_from and a new scale */
    const double zero[3] = {0, 0, 0};
    compare_translations(10, zero, "zero shift", &rng);
    printf("  rotation-based vs O(p^4) reference, worst relative 2-norm over p <= 40: "
           "M2M %.2e  M2L %.2e  L2L %.2e\n",
           worst_rot[0], worst_rot[1], worst_rot[2]);
}

/* ---------------------------------------------------------------------------------------------
 * The operator chain on a hand-built tree
 *
 * Root box [1, 2]^3 (the frame of internal.h). Sources fill leaf S (level 3) inside its parent
 * PS (level 2); targets fill leaf T (level 3) inside its parent PT (level 2); PS and PT are two
 * boxes apart (well separated: not neighbours). P2M at S, M2M S -> PS, M2L PS -> PT,
 * L2L PT -> T, L2P at the targets; and the scaled-down copy of the same tree at level 18.
 * Expected error: the M2L converges with rho = (a_S + a_T) / |c_PS - c_PT| where a_S and a_T
 * are the radii of the spheres about PS and PT's centres that hold the points.
 * ------------------------------------------------------------------------------------------ */

static void chain(int p, int depth_shift, int mixed, double *err, double *errg, double *rho)
{
    ops o;
    *err = *errg = *rho = 1;
    if (!ops_open(&o, p))
        return;
    test_rng rng = test_rng_seed(100 + p);
    const double f = ldexp(1.0, -depth_shift); /* box sizes scale by 2^-shift */
    const double l2 = 0.25 * f, l3 = 0.125 * f;
    /* parents: PS at the cell (0, 0, 0) of level 2 below the corner, PT at (3, 1, 0) */
    const double cPS[3] = {1 + 0.5 * l2, 1 + 0.5 * l2, 1 + 0.5 * l2};
    const double cPT[3] = {1 + 3.5 * l2, 1 + 1.5 * l2, 1 + 0.5 * l2};
    const double cS[3] = {cPS[0] + 0.5 * l3, cPS[1] - 0.5 * l3, cPS[2] + 0.5 * l3};
    const double cT[3] = {cPT[0] - 0.5 * l3, cPT[1] + 0.5 * l3, cPT[2] - 0.5 * l3};
    enum { N = 300 };
    static double xs[3 * N], q[N], yt[3 * N], pot[N], grad[3 * N], rp[N], rg[3 * N];
    cube(&rng, N, cS, l3, xs);
    cube(&rng, N, cT, l3, yt);
    charges(&rng, N, mixed, q);
    direct(N, xs, q, N, yt, rp, rg);
    fmk_fmm3d_p2m(&o.ctx, cS, l3, N, xs, q, o.A, o.work);
    fmk_fmm3d_m2m(&o.ctx, NULL, cS, l3, o.A, cPS, l2, o.B, o.work);
    fmk_fmm3d_m2l(&o.ctx, NULL, cPS, l2, o.B, cPT, l2, o.C, o.work);
    fmk_fmm3d_l2l(&o.ctx, NULL, cPT, l2, o.C, cT, l3, o.D, o.work);
    memset(pot, 0, sizeof pot);
    memset(grad, 0, sizeof grad);
    fmk_fmm3d_l2p(&o.ctx, cT, l3, o.D, N, yt, pot, grad, o.work);
    *err = rel_max(N, pot, rp);
    *errg = rel_max(3 * N, grad, rg);
    double aS = 0, aT = 0;
    for (int i = 0; i < N; i++) {
        aS = fmax(aS,
                  hypot(hypot(xs[3 * i] - cPS[0], xs[3 * i + 1] - cPS[1]), xs[3 * i + 2] - cPS[2]));
        aT = fmax(aT,
                  hypot(hypot(yt[3 * i] - cPT[0], yt[3 * i + 1] - cPT[1]), yt[3 * i + 2] - cPT[2]));
    }
    *rho = (aS + aT) / hypot(hypot(cPT[0] - cPS[0], cPT[1] - cPS[1]), cPT[2] - cPS[2]);
    ops_close(&o);
}

static void test_chain(void)
{
    printf("  chain P2M->M2M->M2L->L2L->L2P (leaf side 1/8, parents 2 boxes apart)\n");
    printf("  p    potential  gradient   depth 18    mixed sign\n");
    const int orders[] = {0, 1, 2, 4, 8, 12, 16, 20, 24, 30};
    double prev = 1;
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
        const int p = orders[i];
        double e, eg, rho, e18, eg18, rho18, em, egm, rhom;
        check_context("chain p = %d", p);
        chain(p, 0, 0, &e, &eg, &rho);
        chain(p, 15, 0, &e18, &eg18, &rho18);
        chain(p, 0, 1, &em, &egm, &rhom);
        printf(" %2d    %.2e   %.2e   %.2e   %.2e\n", p, e, eg, e18, em);
        /* positive charges: error / |phi| <= rho^(p+1) (1 + rho)/(1 - rho) (order_for's model) */
        const double model = pow(rho, p + 1) * (1 + rho) / (1 - rho);
        CHECK_LE(e, model + 1e-14, "chain potential vs rho^(p+1) (1+rho)/(1-rho)");
        CHECK_LE(eg, 10 * (p + 1) * model + 1e-13, "chain gradient");
        CHECK_LE(fabs(e18 - e), 1e-3 * e + 1e-14, "the same tree at depth 18 (scale invariance)");
        CHECK_LE(em, 30 * model + 1e-13, "chain with mixed-sign charges");
        if (prev > 1e-13)
            CHECK_MSG(e < prev, "chain error did not fall: %.3e after %.3e", e, prev);
        prev = e;
    }
    double e, eg, rho;
    check_context("chain p = 30");
    chain(30, 0, 0, &e, &eg, &rho);
    CHECK_LE(e, 5e-14, "chain at p = 30 reaches rounding");
}

/* The worst M2L pair of an interaction list built from "not adjacent at the same level": two
 * boxes of side l whose centres are 2 l apart along x, both full of points. The rigorous ratio
 * (a_S + a_T) / R = sqrt(3) / 2 = 0.866 overstates the error by far; the table is what eps must
 * be calibrated on (docs/fmm3d.md section 4). */
static void test_worst_pair(void)
{
    enum { N = 400 };
    static double xs[3 * N], q[N], yt[3 * N], pot[N], grad[3 * N], rp[N], rg[3 * N];
    test_rng rng = test_rng_seed(77);
    const double l = 0.125, cS[3] = {1.0625, 1.0625, 1.0625}, cT[3] = {1.3125, 1.0625, 1.0625};
    cube(&rng, N, cS, l, xs);
    cube(&rng, N, cT, l, yt);
    charges(&rng, N, 0, q);
    direct(N, xs, q, N, yt, rp, rg);
    printf("  worst V-list pair (side l, centres 2l apart): P2M->M2L->L2P\n  p    potential  "
           "gradient\n");
    double prev = 1;
    for (int p = 2; p <= 40; p += 2) {
        ops o;
        check_context("worst pair p = %d", p);
        CHECK(ops_open(&o, p));
        fmk_fmm3d_p2m(&o.ctx, cS, l, N, xs, q, o.A, o.work);
        fmk_fmm3d_m2l(&o.ctx, NULL, cS, l, o.A, cT, l, o.B, o.work);
        memset(pot, 0, sizeof pot);
        memset(grad, 0, sizeof grad);
        fmk_fmm3d_l2p(&o.ctx, cT, l, o.B, N, yt, pot, grad, o.work);
        const double e = rel_max(N, pot, rp), eg = rel_max(3 * N, grad, rg);
        if (p % 4 == 0)
            printf(" %2d    %.2e   %.2e\n", p, e, eg);
        const double rho = sqrt(3.0) / 2, model = pow(rho, p + 1) * (1 + rho) / (1 - rho);
        CHECK_LE(e, model, "worst pair vs the rigorous model");
        if (prev > 1e-13)
            CHECK_MSG(e < prev, "worst-pair error did not fall: %.3e after %.3e", e, prev);
        prev = e;
        ops_close(&o);
    }
}

int main(void)
{
    test_context();
    test_harmonics();
    test_low_orders();
    test_convergence();
    test_gradient_fd();
    test_translations();
    test_m2l_block();
    test_chain();
    test_worst_pair();
    return check_summary();
}
