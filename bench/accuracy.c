/*
 * accuracy.c -- what accuracy each method reaches for what it is asked: relative l2 errors of
 * the potential and the gradient against a compensated direct sum, on the five distributions
 * of docs/choosing.md (uniform cube, Plummer sphere, sphere surface, corner cluster, nested
 * clusters), Laplace 3D, targets = sources, charges uniform in [-1, 1].
 *
 *   bench_accuracy eps    [fmm|tree] [cpu|cuda] [N]  each method's eps 1e-3, 1e-6, 1e-9 (tree:
 *                                                    its theta and order from eps)
 *   bench_accuracy orders [cpu|cuda] [N]             the 3D FMM at orders 2 .. 36
 *   bench_accuracy theta  [cpu|cuda] [N]             the treecode at theta 0.2 .. 0.9, orders
 *                                                    0, 1, 2
 *   --json                                           one JSON object per row instead of a table
 *
 * The reference sums over every source at 2000 sampled targets (all when N <= 2000), in long
 * double; the errors are over those targets. N defaults to 10^5.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "fmmkit.h"

#define SAMPLES 2000

static int json;

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double urand(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static const char *dists[] = {"cube", "plummer", "sphere", "corner", "nested"};
enum { N_DISTS = 5 };

/* n points of distribution d into x (n x 3). */
static void points(int d, int64_t n, double *x)
{
    rng_state = 0x2545F4914F6CDD1Dull + (uint64_t)d;
    for (int64_t i = 0; i < n; i++) {
        double *p = x + 3 * i;
        if (d == 0) { /* uniform in the unit cube */
            p[0] = urand(), p[1] = urand(), p[2] = urand();
        } else if (d == 1) { /* Plummer sphere, scale radius 1, cut at radius 10 */
            double r;
            do
                r = 1 / sqrt(pow(urand() * 0.99 + 1e-12, -2.0 / 3.0) - 1);
            while (r > 10);
            const double z = 2 * urand() - 1, t = 6.283185307179586 * urand(), s = sqrt(1 - z * z);
            p[0] = r * s * cos(t), p[1] = r * s * sin(t), p[2] = r * z;
        } else if (d == 2) { /* uniform on the unit sphere's surface */
            const double z = 2 * urand() - 1, t = 6.283185307179586 * urand(), s = sqrt(1 - z * z);
            p[0] = s * cos(t), p[1] = s * sin(t), p[2] = z;
        } else if (d == 3) { /* corner cluster: uniform cubed per coordinate */
            for (int k = 0; k < 3; k++) {
                const double u = urand();
                p[k] = u * u * u;
            }
        } else { /* nested clusters: a uniform point scaled by 2^-k, k uniform in 0 .. 10 */
            const double s = ldexp(1.0, -(int)(11 * urand()));
            p[0] = s * urand(), p[1] = s * urand(), p[2] = s * urand();
        }
    }
}

/* The reference potential and gradient at the sampled targets (index list t), in long double,
 * leaving out the target itself (and coincident sources, laplace's rule). */
static void reference(int64_t n, const double *x, const double *q, int m, const int64_t *t,
                      double *pot, double *grad)
{
#pragma omp parallel for schedule(dynamic, 8)
    for (int k = 0; k < m; k++) {
        const double *y = x + 3 * t[k];
        long double p = 0, g[3] = {0, 0, 0};
        for (int64_t j = 0; j < n; j++) {
            const long double dx = (long double)y[0] - x[3 * j], dy = (long double)y[1] - x[3 * j + 1],
                              dz = (long double)y[2] - x[3 * j + 2];
            const long double r2 = dx * dx + dy * dy + dz * dz;
            if (r2 == 0)
                continue;
            const long double rinv = 1 / sqrtl(r2), qr = q[j] * rinv, qr3 = qr * rinv * rinv;
            p += qr, g[0] -= qr3 * dx, g[1] -= qr3 * dy, g[2] -= qr3 * dz;
        }
        pot[k] = (double)p;
        for (int c = 0; c < 3; c++)
            grad[3 * k + c] = (double)g[c];
    }
}

static double rel_l2(const double *a, const double *b, int64_t n)
{
    long double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const long double d = (long double)a[i] - b[i];
        num += d * d, den += (long double)b[i] * b[i];
    }
    return den > 0 ? (double)sqrtl(num / den) : (double)sqrtl(num);
}

typedef struct setup {
    int64_t n;
    double *x, *q, *pot, *grad;
    int m;
    int64_t t[SAMPLES];
    double rpot[SAMPLES], rgrad[3 * SAMPLES], spot[SAMPLES], sgrad[3 * SAMPLES];
} setup;

static void make_setup(setup *s, int d, int64_t n)
{
    s->n = n;
    points(d, n, s->x);
    for (int64_t i = 0; i < n; i++)
        s->q[i] = 2 * urand() - 1;
    s->m = n < SAMPLES ? (int)n : SAMPLES;
    for (int k = 0; k < s->m; k++)
        s->t[k] = n <= SAMPLES ? k : (int64_t)(urand() * (double)n);
    reference(n, s->x, s->q, s->m, s->t, s->rpot, s->rgrad);
}

/* One plan: create, set_points, eval; errors at the samples, times, the plan's info. */
static int run(const setup *s, double eps, const fmk_opts *o, const char *dist, const char *what)
{
    fmk_plan *p = NULL;
    fmk_info info;
    const double t0 = bench_now();
    fmk_status st = fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, eps, o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(p, s->n, s->x, 0, NULL);
    const double t1 = bench_now();
    if (st == FMK_OK)
        st = fmk_plan_eval(p, s->q, s->pot, s->grad);
    const double t2 = bench_now();
    if (st != FMK_OK || fmk_plan_info(p, &info) != FMK_OK) {
        fprintf(stderr, "accuracy: %s %s: %s\n", dist, what, fmk_plan_last_error(p));
        fmk_plan_destroy(p);
        return 1;
    }
    fmk_plan_destroy(p);
    double *spot = (double *)s->spot, *sgrad = (double *)s->sgrad;
    for (int k = 0; k < s->m; k++) {
        spot[k] = s->pot[s->t[k]];
        for (int c = 0; c < 3; c++)
            sgrad[3 * k + c] = s->grad[3 * s->t[k] + c];
    }
    const double ep = rel_l2(spot, s->rpot, s->m), eg = rel_l2(sgrad, s->rgrad, 3 * s->m);
    if (json)
        printf("{\"method\": \"%s\", \"backend\": \"%s\", \"dist\": \"%s\", \"n\": %lld, "
               "\"eps\": %.1e, \"order\": %d, \"theta\": %.3g, \"leaf_size\": %lld, "
               "\"err_pot\": %.3e, \"err_grad\": %.3e, \"setup_s\": %.4f, \"eval_s\": %.4f}\n",
               fmk_method_name(info.method), fmk_backend_name(info.backend), dist,
               (long long)s->n, eps, info.order, o->theta, (long long)info.leaf_size, ep, eg,
               t1 - t0, t2 - t1);
    else
        printf("%-5s %-5s %-8s %-14s p %2d leaf %4lld  pot %.2e grad %.2e  (pot/eps %8.2e)  "
               "%.3f + %.3f s\n",
               fmk_method_name(info.method), fmk_backend_name(info.backend), dist, what,
               info.order, (long long)info.leaf_size, ep, eg, ep / eps, t1 - t0, t2 - t1);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = "eps";
    fmk_method method = FMK_METHOD_FMM;
    fmk_backend backend = FMK_BACKEND_CPU;
    int64_t n = 100000;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--json"))
            json = 1;
        else if (!strcmp(argv[a], "fmm"))
            method = FMK_METHOD_FMM;
        else if (!strcmp(argv[a], "tree"))
            method = FMK_METHOD_TREE;
        else if (!strcmp(argv[a], "cpu"))
            backend = FMK_BACKEND_CPU;
        else if (!strcmp(argv[a], "cuda"))
            backend = FMK_BACKEND_CUDA;
        else if (argv[a][0] >= '0' && argv[a][0] <= '9')
            n = (int64_t)atof(argv[a]);
        else if (!strcmp(argv[a], "eps") || !strcmp(argv[a], "orders") ||
                 !strcmp(argv[a], "theta"))
            mode = argv[a];
        else {
            fprintf(stderr, "usage: bench_accuracy [eps|orders|theta] [fmm|tree] [cpu|cuda] "
                            "[N] [--json]\n");
            return 2;
        }
    }
    setup *s = (setup *)calloc(1, sizeof *s);
    s->x = (double *)malloc(sizeof(double) * 3 * (size_t)n);
    s->q = (double *)malloc(sizeof(double) * (size_t)n);
    s->pot = (double *)malloc(sizeof(double) * (size_t)n);
    s->grad = (double *)malloc(sizeof(double) * 3 * (size_t)n);
    if (!s->x || !s->q || !s->pot || !s->grad) {
        fprintf(stderr, "accuracy: out of memory\n");
        return 1;
    }
    int fails = 0;
    for (int d = 0; d < N_DISTS; d++) {
        make_setup(s, d, n);
        fmk_opts o;
        fmk_opts_default(&o);
        o.backend = backend;
        char what[64];
        if (!strcmp(mode, "eps")) {
            const double epss[] = {1e-3, 1e-6, 1e-9};
            o.method = method;
            for (int e = 0; e < 3; e++) {
                snprintf(what, sizeof what, "eps %.0e", epss[e]);
                fails += run(s, epss[e], &o, dists[d], what);
            }
        } else if (!strcmp(mode, "orders")) {
            o.method = FMK_METHOD_FMM;
            for (int p = 2; p <= 36; p++) {
                o.order = p;
                snprintf(what, sizeof what, "order %d", p);
                fails += run(s, 1e-6, &o, dists[d], what);
            }
        } else {
            o.method = FMK_METHOD_TREE;
            for (int p = 0; p <= 2; p++)
                for (int t = 2; t <= 9; t++) {
                    o.order = p, o.theta = 0.1 * t;
                    snprintf(what, sizeof what, "theta %.1f p %d", o.theta, p);
                    fails += run(s, 1e-6, &o, dists[d], what);
                }
        }
    }
    free(s->x), free(s->q), free(s->pot), free(s->grad), free(s);
    return fails ? 1 : 0;
}
