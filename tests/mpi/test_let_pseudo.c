/* test_let_pseudo.c -- the FMM's pseudo-particles of order p (src/mpi/let_pseudo.c, compiled in:
 * it is not exported; one process, no MPI calls): the sphere's rule, M2M against P2M, the
 * pseudo-particles' moments against the node's to degree p, and their far potential and
 * gradient against the node's sources, the error falling like (a/d)^(p+1). */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi/let.h"

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
        }                                                        \
    } while (0)

static unsigned long long rng = 12345;
static double uniform(void) /* splitmix64 in [-1, 1) */
{
    unsigned long long z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return 2 * ((double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53) - 1;
}

enum { NSRC = 200, NMAX = (LET_ORDER_MAX + 1) * (2 * LET_ORDER_MAX + 1) };

/* potential and gradient at x of n charges q at y */
static void field(const double *x, int n, const double *y, const double *q, double *pot,
                  double g[3])
{
    *pot = 0, g[0] = g[1] = g[2] = 0;
    for (int j = 0; j < n; j++) {
        const double d[3] = {x[0] - y[3 * j], x[1] - y[3 * j + 1], x[2] - y[3 * j + 2]};
        const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2], ir = 1 / sqrt(r2);
        *pot += q[j] * ir;
        for (int k = 0; k < 3; k++)
            g[k] -= q[j] * d[k] * ir * ir * ir;
    }
}

static void sphere_rule(void)
{
    for (int p = 1; p <= LET_ORDER_MAX; p += 5) {
        const int K = fmk_let_pseudo_count(p);
        double *u = malloc((size_t)K * 3 * sizeof *u), *w = malloc((size_t)K * sizeof *w);
        double sw = 0, sz = 0, sx2 = 0;
        fmk_let_sphere(p, u, w);
        for (int k = 0; k < K; k++) {
            sw += w[k], sz += w[k] * u[3 * k + 2], sx2 += w[k] * u[3 * k] * u[3 * k];
            CHECK(fabs(u[3 * k] * u[3 * k] + u[3 * k + 1] * u[3 * k + 1] +
                       u[3 * k + 2] * u[3 * k + 2] - 1) < 1e-14,
                  "p %d: direction %d not unit", p, k);
        }
        const double pi4 = 16 * atan(1.0);
        CHECK(fabs(sw - pi4) < 1e-12 && fabs(sz) < 1e-12 && fabs(sx2 - pi4 / 3) < 1e-12,
              "p %d: weights %g, z %g, x^2 %g", p, sw, sz, sx2);
        free(u), free(w);
    }
}

/* the node: NSRC charges in the box [-h, h]^3 about c, radius a = sqrt(3) h */
static void node(double *y, double *q, const double c[3], double h, int positive)
{
    for (int j = 0; j < NSRC; j++) {
        for (int k = 0; k < 3; k++)
            y[3 * j + k] = c[k] + h * uniform();
        q[j] = positive ? 1 + 0.5 * uniform() : uniform();
    }
}

static void moments_and_m2m(int p)
{
    const int T = fmk_let_pseudo_terms(p);
    double y[3 * NSRC], q[NSRC];
    const double c[3] = {0.1, -0.2, 0.3}, h = 0.5;
    node(y, q, c, h, 0);
    double complex *direct = calloc((size_t)T, sizeof *direct);
    double complex *moved = calloc((size_t)T, sizeof *moved);
    double complex *child = calloc((size_t)T, sizeof *child);
    double complex *work = malloc((size_t)fmk_let_pseudo_work(p) * sizeof *work);
    fmk_let_p2m(p, c, 1.0, NSRC, y, 1, q, direct, work);
    double qabs = 0;
    for (int j = 0; j < NSRC; j++)
        qabs += fabs(q[j]);
    /* the same sources as 8 octants' moments moved to c */
    for (int oct = 0; oct < 8; oct++) {
        const double cc[3] = {c[0] + (oct & 1 ? 0.25 : -0.25), c[1] + (oct & 2 ? 0.25 : -0.25),
                              c[2] + (oct & 4 ? 0.25 : -0.25)};
        for (int t = 0; t < T; t++)
            child[t] = 0;
        for (int j = 0; j < NSRC; j++) {
            const int o =
                (y[3 * j] > c[0]) | (y[3 * j + 1] > c[1]) << 1 | (y[3 * j + 2] > c[2]) << 2;
            if (o == oct)
                fmk_let_p2m(p, cc, 1.0, 1, y + 3 * j, 1, q + j, child, work);
        }
        const double t[3] = {cc[0] - c[0], cc[1] - c[1], cc[2] - c[2]};
        fmk_let_m2m(p, t, child, moved, work);
    }
    double worst = 0;
    for (int t = 0; t < T; t++)
        worst = fmax(worst, cabs(moved[t] - direct[t]) / (cabs(direct[0]) + 1e-300));
    CHECK(worst < 1e-13, "p %d: M2M vs P2M %.3g", p, worst);
    /* the pseudo-particles' moments are the node's to degree p */
    const int K = fmk_let_pseudo_count(p);
    const double a = sqrt(3.0) * h;
    double *u = malloc((size_t)K * 3 * sizeof *u), *w = malloc((size_t)K * sizeof *w);
    double *qk = malloc((size_t)K * sizeof *qk), *xk = malloc((size_t)K * 3 * sizeof *xk);
    double complex *B = malloc((size_t)K * T * sizeof *B);
    fmk_let_sphere(p, u, w);
    fmk_let_pseudo_table(p, K, u, w, B, work);
    fmk_let_pseudo_charges(p, K, B, a, direct, qk, 1);
    for (int k = 0; k < 3 * K; k++)
        xk[k] = c[k % 3] + a * u[k];
    for (int t = 0; t < T; t++)
        moved[t] = 0;
    fmk_let_p2m(p, c, 1.0, K, xk, 1, qk, moved, work);
    worst = 0;
    for (int n = 0, t = 0; n <= p; n++)
        for (int m = 0; m <= n; m++, t++) /* relative to |R_n^m| <= a^n / sqrt((n-m)! (n+m)!) */
            worst = fmax(worst,
                         cabs(moved[t] - direct[t]) /
                             (qabs * pow(a, n) / sqrt(tgamma(n - m + 1.0) * tgamma(n + m + 1.0))));
    CHECK(worst < 1e-11, "p %d: pseudo-particles' moments off by %.3g", p, worst);
    free(direct), free(moved), free(child), free(work), free(u), free(w), free(qk), free(xk);
    free(B);
}

/* the worst relative error of potential and gradient on targets at distance d a of the centre,
 * for a node of radius a (the moments in units of a) */
static void far_error(int p, double d, double a, double *err_pot, double *err_grad)
{
    const int K = fmk_let_pseudo_count(p), T = fmk_let_pseudo_terms(p);
    double y[3 * NSRC], q[NSRC];
    const double c[3] = {0, 0, 0}, h = a / sqrt(3.0);
    rng = 777; /* the same node at every scale */
    node(y, q, c, h, 1);
    double complex *mom = calloc((size_t)T, sizeof *mom);
    double complex *work = malloc((size_t)fmk_let_pseudo_work(p) * sizeof *work);
    double complex *B = malloc((size_t)K * T * sizeof *B);
    double *u = malloc((size_t)K * 3 * sizeof *u), *w = malloc((size_t)K * sizeof *w);
    double *qk = malloc((size_t)K * sizeof *qk), *xk = malloc((size_t)K * 3 * sizeof *xk);
    fmk_let_p2m(p, c, a, NSRC, y, 1, q, mom, work);
    fmk_let_sphere(p, u, w);
    fmk_let_pseudo_table(p, K, u, w, B, work);
    fmk_let_pseudo_charges(p, K, B, 1.0, mom, qk, 1);
    for (int k = 0; k < 3 * K; k++)
        xk[k] = c[k % 3] + a * u[k];
    *err_pot = 0, *err_grad = 0;
    for (int i = 0; i < 50; i++) {
        double x[3], r = 0;
        for (int k = 0; k < 3; k++)
            x[k] = uniform(), r += x[k] * x[k];
        for (int k = 0; k < 3; k++)
            x[k] *= d * a / sqrt(r);
        double p0, g0[3], p1, g1[3];
        field(x, NSRC, y, q, &p0, g0);
        field(x, K, xk, qk, &p1, g1);
        const double gn = sqrt(g0[0] * g0[0] + g0[1] * g0[1] + g0[2] * g0[2]);
        const double ge =
            sqrt((g1[0] - g0[0]) * (g1[0] - g0[0]) + (g1[1] - g0[1]) * (g1[1] - g0[1]) +
                 (g1[2] - g0[2]) * (g1[2] - g0[2]));
        *err_pot = fmax(*err_pot, fabs(p1 - p0) / fabs(p0));
        *err_grad = fmax(*err_grad, ge / gn);
    }
    free(mom), free(work), free(B), free(u), free(w), free(qk), free(xk);
}

int main(void)
{
    sphere_rule();
    for (int p = 1; p <= LET_ORDER_MAX; p += 3)
        moments_and_m2m(p);
    /* the far field: error below the bound 2 (a/d)^(p+1) / (1 - a/d) (relative: the charges
     * are positive, the potential at least Q / (d + a)), falling with p */
    const double d = 3; /* the MAC distance at theta 0.5 */
    double last = INFINITY;
    for (int p = 2; p <= 14; p += 4) {
        double ep, eg;
        far_error(p, d, 1.0, &ep, &eg);
        const double bound = 2 * pow(1 / d, p + 1) / (1 - 1 / d) * (d + 1) / d;
        printf("p %2d  K %4d  potential %.2e  gradient %.2e  bound %.2e\n", p,
               fmk_let_pseudo_count(p), ep, eg, bound);
        CHECK(ep < bound, "p %d: potential error %.3g above %.3g", p, ep, bound);
        CHECK(eg < (p + 2) * bound * 3, "p %d: gradient error %.3g", p, eg);
        CHECK(ep < last, "p %d: error %.3g does not fall", p, ep);
        last = ep;
    }
    /* in any units: a node of radius 1e-150 or 1e150 at the highest order, its moments in
     * units of its radius (as the sending tree's are in the root's), errs as one of radius 1 */
    double e1, g1;
    far_error(LET_ORDER_MAX, 2, 1.0, &e1, &g1);
    for (int k = 0; k < 2; k++) {
        const double a = k ? 1e150 : 1e-150;
        double ep, eg;
        far_error(LET_ORDER_MAX, 2, a, &ep, &eg);
        CHECK(ep < 2 * e1 + 1e-15 && eg < 2 * g1 + 1e-15 && ep == ep && eg == eg,
              "radius %g: errors %.3g %.3g against %.3g %.3g at radius 1", a, ep, eg, e1, g1);
    }
    /* the choice from eps: its bound below eps */
    const double eps[] = {1e-3, 1e-6, 1e-9};
    for (int i = 0; i < 3; i++) {
        int order;
        double theta;
        fmk_let_pseudo_choose(eps[i], &order, &theta);
        const double r = theta / (1 + theta);
        printf("eps %.0e: order %d, theta %.2f, K %d\n", eps[i], order, theta,
               fmk_let_pseudo_count(order));
        CHECK(pow(r, order + 1) <= eps[i] && pow(r, order) > eps[i], "eps %g: order %d too low",
              eps[i], order);
    }
    if (failures)
        printf("%d failures\n", failures);
    else
        printf("test_let_pseudo: all passed\n");
    return failures != 0;
}
