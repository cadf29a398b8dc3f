/* test_fmm3d.c -- the adaptive 3D FMM (method fmm, laplace, CPU) against fp64 direct sums:
 * relative l2 error of the potential <= eps and of the gradient <= 10 eps on sampled targets, for
 * eps in {1e-3, 1e-6, 1e-9, 1e-12} on five distributions; the error falls as the order rises;
 * the unit cube scaled by 1e-9 and 1e10 and offset by 1e8 gives the same errors; separate
 * targets; N = 1, 2, duplicates, mixed-sign charges; two evaluations with different charges on
 * one plan; and the lists themselves against a brute-force pair count, also on trees cut at a
 * level (fmk_tree3d_truncate) as the smooth kernels' depth cap (fmk_fmm3d_max_level) asks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmm3d/fmm3d.h"
#include "testutil.h"

enum { N_SAMPLE = 1000 };

/* opts.leaf_size for fmm_errors (0: from eps): the order and scale tests fix it, so that the
 * tree has several levels and the expansions, not P2P, carry the far field. */
static int64_t leaf_size;

/* The kernel, softening and precision of fmm_errors (laplace, fp64 unless a test sets them). */
static fmk_kernel kernel = FMK_KERNEL_LAPLACE;
static double softening;
static fmk_precision precision = FMK_PRECISION_FP64;

typedef enum dist { CUBE, SPHERE, PLUMMER, CORNER, NESTED, N_DIST } dist;
static const char *dist_names[] = {"uniform cube", "sphere surface", "Plummer", "corner cluster",
                                   "nested clusters"};

/* n points of a distribution into x (n, 3). */
static void make_points(dist d, int64_t n, uint64_t seed, double *x)
{
    test_rng r = test_rng_seed(seed);
    switch (d) {
    case CUBE: test_points(TEST_DIST_CUBE, n, seed, x); break;
    case SPHERE: test_points(TEST_DIST_SPHERE, n, seed, x); break;
    case PLUMMER: test_points(TEST_DIST_PLUMMER, n, seed, x); break;
    case CORNER: /* uniform^3 per coordinate: dense at the corner (0, 0, 0) */
        for (int64_t i = 0; i < 3 * n; i++) {
            double u = test_uniform(&r);
            x[i] = u * u * u;
        }
        break;
    default: /* nested clusters: half the points in a cube of side 1, a quarter in one of 1e-2
              * inside it, an eighth in one of 1e-4, ... down to 1e-8 */
        for (int64_t i = 0; i < n; i++) {
            double side = 1, lo[3] = {0, 0, 0};
            for (int lev = 0; lev < 4 && test_uniform(&r) < 0.5; lev++) {
                for (int k = 0; k < 3; k++)
                    lo[k] += side * 0.3;
                side *= 1e-2;
            }
            for (int k = 0; k < 3; k++)
                x[3 * i + k] = lo[k] + side * test_uniform(&r);
        }
        break;
    }
    /* coordinates on a grid of 2^-40, so that the frame maps them exactly: the reference then
     * sums over the very points the FMM sees, and the errors measure the method, not the
     * conditioning of the closest pairs of the clustered sets (points 1e-8 apart) */
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = ldexp(nearbyint(ldexp(x[i], 40)), -40);
}

/* The FMM's potential and gradient at all targets; the relative l2 errors against the direct
 * sum at (up to) N_SAMPLE of them. Returns the status; info is filled when not NULL. */
static fmk_status fmm_errors(double eps, int order, int64_t ns, const double *src, const double *q,
                             int64_t nt, const double *trg, double err[2], fmk_info *info)
{
    const int64_t m = nt == 0 ? ns : nt;
    const double *y = trg ? trg : src;
    double *pot = test_alloc(m), *grad = test_alloc(3 * m);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    o.threads = 2;
    o.order = order;
    o.leaf_size = leaf_size;
    o.softening = softening;
    o.precision = precision;
    const fmk_status st = test_run_opts(kernel, eps, &o, ns, src, q, nt, trg, pot, grad, info);
    /* the reference at a sample of targets */
    const int64_t ms = m < N_SAMPLE ? m : N_SAMPLE, stride = m / ms;
    double *ys = test_alloc(3 * ms), *rp = test_alloc(ms), *rg = test_alloc(3 * ms);
    double *fp = test_alloc(ms), *fg = test_alloc(3 * ms);
    double *sq = test_alloc(ns);
    for (int64_t i = 0; i < ms; i++) {
        const int64_t t = i * stride;
        memcpy(ys + 3 * i, y + 3 * t, 3 * sizeof(double));
        fp[i] = pot[t];
        memcpy(fg + 3 * i, grad + 3 * t, 3 * sizeof(double));
    }
    if (!trg) { /* the self term: the reference at a source must skip it, so zero its charge */
        memcpy(sq, q, sizeof(double) * (size_t)ns);
        /* the reference skips coincident pairs (r = 0), which includes the target itself */
    }
    if (!trg && kernel != FMK_KERNEL_LAPLACE) {
        /* a smooth kernel's reference must leave out the target itself, which only the
         * targets = sources form does: all targets, then the sample */
        double *ap = test_alloc(ns), *ag = test_alloc(3 * ns);
        test_reference(kernel, softening, ns, src, q, 0, NULL, ap, ag);
        for (int64_t i = 0; i < ms; i++) {
            rp[i] = ap[i * stride];
            memcpy(rg + 3 * i, ag + 3 * i * stride, 3 * sizeof(double));
        }
        free(ap), free(ag);
    } else {
        test_reference(kernel, softening, ns, src, q, ms, ys, rp, rg);
    }
    err[0] = test_rel_l2(fp, rp, ms);
    err[1] = test_rel_l2(fg, rg, 3 * ms);
    free(pot), free(grad), free(ys), free(rp), free(rg), free(fp), free(fg), free(sq);
    return st;
}

static void accuracy_matrix(void)
{
    const double epss[] = {1e-3, 1e-6, 1e-9, 1e-12};
    const int64_t n = SANITIZED ? 1500 : 4000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    printf("%-16s %-7s %3s %6s %4s %10s %10s\n", "distribution", "eps", "p", "levels", "leaf",
           "err pot", "err grad");
    for (int d = 0; d < N_DIST; d++) {
        make_points((dist)d, n, 100 + d, x);
        test_charges(n, 0, 7 + d, q);
        for (int e = 0; e < 4; e++) {
            if (SANITIZED && e == 3 && d > 0)
                continue;
            double err[2];
            fmk_info info;
            check_context("%s, eps %g", dist_names[d], epss[e]);
            CHECK_STATUS(fmm_errors(epss[e], -1, n, x, q, 0, NULL, err, &info), FMK_OK);
            printf("%-16s %-7.0e %3d %6d %4lld %10.2e %10.2e\n", dist_names[d], epss[e], info.order,
                   info.levels, (long long)info.leaf_size, err[0], err[1]);
            CHECK_MSG(err[0] <= epss[e], "potential error %.3e > eps", err[0]);
            CHECK_MSG(err[1] <= 10 * epss[e], "gradient error %.3e > 10 eps", err[1]);
        }
        /* at N = 4000 the large leaves of small eps leave little to the far field: again with
         * leaves of 100, so that p = 35 and 49 carry most of the sum */
        leaf_size = 100;
        for (int e = 2; e < (SANITIZED ? 3 : 4); e++) {
            double err[2];
            fmk_info info;
            check_context("%s, eps %g, leaves of 100", dist_names[d], epss[e]);
            CHECK_STATUS(fmm_errors(epss[e], -1, n, x, q, 0, NULL, err, &info), FMK_OK);
            printf("%-16s %-7.0e %3d %6d %4lld %10.2e %10.2e\n", dist_names[d], epss[e], info.order,
                   info.levels, (long long)info.leaf_size, err[0], err[1]);
            CHECK_MSG(err[0] <= epss[e], "potential error %.3e > eps", err[0]);
            CHECK_MSG(err[1] <= 10 * epss[e], "gradient error %.3e > 10 eps", err[1]);
        }
        leaf_size = 0;
    }
    free(x), free(q);
}

/* The error falls as p rises (leaves of 40, so that the tree has several levels). */
static void error_falls_with_order(void)
{
    const int64_t n = SANITIZED ? 1500 : 3000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    make_points(PLUMMER, n, 5, x);
    test_charges(n, 0, 9, q);
    const int orders[] = {2, 4, 8, 12, 16, 20};
    double prev = INFINITY;
    leaf_size = 40;
    check_context("error against order");
    for (int i = 0; i < 6; i++) {
        double err[2];
        fmk_opts o;
        (void)o;
        CHECK_STATUS(fmm_errors(1e-6, orders[i], n, x, q, 0, NULL, err, NULL), FMK_OK);
        printf("p = %2d: pot %.2e grad %.2e\n", orders[i], err[0], err[1]);
        CHECK_MSG(err[0] < prev, "p = %d: error %.3e did not fall (previous %.3e)", orders[i],
                  err[0], prev);
        prev = err[0];
    }
    CHECK_MSG(prev < 1e-8, "p = 20 error %.3e", prev);
    leaf_size = 0;
    free(x), free(q);
}

/* The unit cube scaled and offset gives the same errors (the frame); p = 14, leaves of 40. */
static void scale_and_offset(void)
{
    const int64_t n = 2000;
    double *x0 = test_alloc(3 * n), *x = test_alloc(3 * n), *q = test_alloc(n);
    make_points(CUBE, n, 21, x0);
    test_charges(n, 0, 22, q);
    const double scales[] = {1, 1e-9, 1e10, 1}, offsets[] = {0, 0, 0, 1e8};
    double base[2] = {0, 0};
    leaf_size = 40;
    for (int t = 0; t < 4; t++) {
        for (int64_t i = 0; i < 3 * n; i++)
            x[i] = x0[i] * scales[t] + offsets[t];
        double err[2];
        check_context("scale %g offset %g", scales[t], offsets[t]);
        CHECK_STATUS(fmm_errors(1e-6, 14, n, x, q, 0, NULL, err, NULL), FMK_OK);
        printf("scale %g offset %g: pot %.3e grad %.3e\n", scales[t], offsets[t], err[0], err[1]);
        if (t == 0) {
            base[0] = err[0], base[1] = err[1];
        } else {
            /* the frame's width is the power of two at or above the box: a scale of 1e-9 or 1e10
             * fills a different fraction of the root cube, so the tree differs and the truncation
             * errors differ (within a factor of a few); an offset of 1e8 keeps the tree (it rounds the coordinates
             * to ~1e-8 of the box, and the reference sums over the rounded points) */
            CHECK_MSG(err[0] <= 1e-6 && err[1] <= 1e-5, "pot %.3e grad %.3e", err[0], err[1]);
            CHECK_MSG(err[0] <= 10 * base[0] && base[0] <= 10 * err[0], "pot %.4e vs %.4e", err[0],
                      base[0]);
            CHECK_MSG(err[1] <= 10 * base[1] && base[1] <= 10 * err[1], "grad %.4e vs %.4e", err[1],
                      base[1]);
        }
    }
    leaf_size = 0;
    free(x0), free(x), free(q);
}

/* Separate targets: a different set, overlapping the sources' box and extending beyond it. */
static void separate_targets(void)
{
    const int64_t ns = 3000, nt = 1500;
    double *x = test_alloc(3 * ns), *y = test_alloc(3 * nt), *q = test_alloc(ns);
    make_points(PLUMMER, ns, 31, x);
    make_points(CUBE, nt, 32, y);
    for (int64_t i = 0; i < 3 * nt; i++)
        y[i] = 3 * y[i] - 1.5;
    test_charges(ns, 0, 33, q);
    for (int e = 0; e < 2; e++) {
        const double eps = e ? 1e-9 : 1e-4;
        double err[2];
        check_context("separate targets, eps %g", eps);
        CHECK_STATUS(fmm_errors(eps, -1, ns, x, q, nt, y, err, NULL), FMK_OK);
        printf("separate targets eps %g: pot %.2e grad %.2e\n", eps, err[0], err[1]);
        CHECK(err[0] <= eps && err[1] <= 10 * eps);
    }
    /* targets at some of the sources: coincident pairs contribute nothing */
    memcpy(y, x, 3 * sizeof(double) * 500);
    double err[2];
    check_context("targets on sources");
    CHECK_STATUS(fmm_errors(1e-6, -1, ns, x, q, 500, y, err, NULL), FMK_OK);
    CHECK(err[0] <= 1e-6 && err[1] <= 1e-5);
    free(x), free(y), free(q);
}

/* plummer and regularized: the exact smooth kernel in the near field, laplace multipoles in the
 * far field. The far field errs by the kernel's distance from 1/r at the nearest separated pair,
 * relative (s/r)^2 / 2 in the potential and 3/2 (s/r)^2 in the gradient (plummer), 3/8 (s/r)^4
 * and 15/8 (s/r)^4 (regularized), so the engine keeps the boxes at least d_min = s / sqrt(eps)
 * (plummer) or s / eps^(1/4) (regularized) wide: the test checks that the finest leaves are, and
 * that eps is met, as the softening halves (leaves of 40 asked for; test_fmm3d_smooth.c has
 * the full matrix). */
static void smooth_kernels(void)
{
    const int64_t n = SANITIZED ? 1500 : 3000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    make_points(CUBE, n, 51, x);
    test_charges(n, 0, 52, q);
    leaf_size = 40;
    const double softs[] = {0.032, 0.016, 0.008, 0.004, 1e-4}, epss[] = {1e-3, 1e-6};
    for (int kk = 0; kk < 2; kk++) {
        kernel = kk ? FMK_KERNEL_REGULARIZED : FMK_KERNEL_PLUMMER;
        for (int i = 0; i < 5; i++)
            for (int e = 0; e < 2; e++) {
                softening = softs[i];
                double err[2];
                fmk_info info;
                check_context("%s, softening %g, eps %g", fmk_kernel_name(kernel), softening,
                              epss[e]);
                CHECK_STATUS(fmm_errors(epss[e], -1, n, x, q, 0, NULL, err, &info), FMK_OK);
                const double d = 1.0 / (1 << (info.levels - 1)); /* the finest leaves' side */
                const double d_min = softening / pow(epss[e], kk ? 0.25 : 0.5);
                printf("%-11s softening %.4f eps %.0e: leaves %.2e (d_min %.2e) pot %.2e grad "
                       "%.2e\n",
                       fmk_kernel_name(kernel), softening, epss[e], d, d_min, err[0], err[1]);
                CHECK_MSG(d >= d_min || info.levels == 1, "leaves of %.3e < d_min %.3e", d, d_min);
                CHECK_MSG(err[0] <= epss[e] && err[1] <= 10 * epss[e], "pot %.3e grad %.3e", err[0],
                          err[1]);
            }
    }
    kernel = FMK_KERNEL_LAPLACE;
    softening = 0;
    leaf_size = 0;
    free(x), free(q);
}

/* fp32 (P2P in fp32 about each leaf's centre, expansions in fp64): eps = 1e-5 met on the five
 * distributions (potential <= eps, gradient <= 10 eps); eps below 1e-5 refused. */
static void single_precision(void)
{
    const int64_t n = SANITIZED ? 1500 : 4000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    precision = FMK_PRECISION_FP32;
    for (int d = 0; d < N_DIST; d++) {
        make_points((dist)d, n, 200 + d, x);
        test_charges(n, 0, 60 + d, q);
        double err[2];
        check_context("fp32, %s, eps 1e-5", dist_names[d]);
        const fmk_status st = fmm_errors(1e-5, -1, n, x, q, 0, NULL, err, NULL);
        if (d == NESTED && st == FMK_ERR_ACCURACY) { /* the resolution guard: see below */
            printf("fp32 %-16s eps 1e-5: refused\n", dist_names[d]);
            continue;
        }
        CHECK_STATUS(st, FMK_OK);
        printf("fp32 %-16s eps 1e-5: pot %.2e grad %.2e\n", dist_names[d], err[0], err[1]);
        /* fp32 resolves a position to 2^-24 of its leaf's side; the nested clusters put pairs
         * 1e-9 apart into leaves 1e-4 wide (at N = 1500 more than at 4000), where no fp32
         * arithmetic can meet 1e-5 in general (docs/fmm3d.md section 8; these points sit on a
         * grid that fp32 happens to hold): the resolution guard may refuse them, and otherwise
         * they are checked for what fp32 can do */
        const double bound = d == NESTED && n < 4000 ? 1e-2 : 1;
        CHECK_MSG(err[0] <= 1e-5 / bound && err[1] <= 1e-4 / bound, "pot %.3e grad %.3e", err[0],
                  err[1]);
    }
    check_context("fp32, eps 1e-6 refused");
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    o.precision = FMK_PRECISION_FP32;
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_ERR_ARG);
    CHECK(plan == NULL && strstr(fmk_plan_last_error(NULL), "fp32"));
    precision = FMK_PRECISION_FP64;
    free(x), free(q);
}

/* N = 1, N = 2, duplicates, mixed signs, two evaluations on one plan. */
static void small_and_special(void)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    o.threads = 2;
    double x2[6] = {0.1, 0.2, 0.3, 0.7, -0.4, 0.9}, q2[2] = {2.0, -0.5}, pot[2], grad[6];
    check_context("N = 1");
    CHECK_STATUS(fmk_eval(3, FMK_KERNEL_LAPLACE, 1e-6, &o, 1, x2, q2, 0, NULL, pot, grad), FMK_OK);
    CHECK(pot[0] == 0 && grad[0] == 0 && grad[1] == 0 && grad[2] == 0);
    check_context("N = 2");
    CHECK_STATUS(fmk_eval(3, FMK_KERNEL_LAPLACE, 1e-6, &o, 2, x2, q2, 0, NULL, pot, grad), FMK_OK);
    double d[3] = {x2[0] - x2[3], x2[1] - x2[4], x2[2] - x2[5]};
    double r = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    CHECK(fabs(pot[0] - q2[1] / r) <= 1e-14 * fabs(q2[1] / r));
    CHECK(fabs(pot[1] - q2[0] / r) <= 1e-14 * fabs(q2[0] / r));
    CHECK(fabs(grad[0] + q2[1] * d[0] / (r * r * r)) <= 1e-13);

    /* duplicates: 3000 points of which every point appears three times, mixed-sign charges */
    const int64_t n = 3000;
    double *x = test_alloc(3 * n), *q = test_alloc(n), *q2b = test_alloc(n);
    make_points(CUBE, n / 3, 41, x);
    memcpy(x + n, x, sizeof(double) * n);
    memcpy(x + 2 * n, x, sizeof(double) * n);
    test_charges(n, 0, 42, q);
    double err[2];
    check_context("duplicates");
    CHECK_STATUS(fmm_errors(1e-6, -1, n, x, q, 0, NULL, err, NULL), FMK_OK);
    printf("duplicates: pot %.2e grad %.2e\n", err[0], err[1]);
    CHECK(err[0] <= 1e-6 && err[1] <= 1e-5);

    /* eval twice with different charges on one plan */
    make_points(CORNER, n, 43, x);
    test_charges(n, 0, 44, q2b);
    fmk_plan *plan = NULL;
    double *p1 = test_alloc(n), *g1 = test_alloc(3 * n), *rp = test_alloc(n),
           *rg = test_alloc(3 * n);
    check_context("two evaluations");
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-9, &o), FMK_OK);
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, 0, NULL), FMK_OK);
    for (int v = 0; v < 2; v++) {
        const double *qv = v ? q2b : q;
        CHECK_STATUS(fmk_plan_eval(plan, qv, p1, g1), FMK_OK);
        test_reference(FMK_KERNEL_LAPLACE, 0, n, x, qv, n, x, rp, rg);
        const double ep = test_rel_l2(p1, rp, n), eg = test_rel_l2(g1, rg, 3 * n);
        CHECK_MSG(ep <= 1e-9 && eg <= 1e-8, "eval %d: pot %.2e grad %.2e", v, ep, eg);
    }
    /* two vectors in one call: the same results as two calls to rounding (the vectors share
     * the geometry and each pair's 1/r; test_vectors.c covers every method) */
    check_context("eval_many");
    double *qq = test_alloc(2 * n), *pm = test_alloc(2 * n), *gm = test_alloc(6 * n);
    memcpy(qq, q, sizeof(double) * (size_t)n);
    memcpy(qq + n, q2b, sizeof(double) * (size_t)n);
    CHECK_STATUS(fmk_plan_eval_many(plan, 2, qq, pm, gm), FMK_OK);
    CHECK(test_rel_l2(pm + n, p1, n) <= 1e-14); /* p1, g1: the second eval */
    CHECK(test_rel_l2(gm + 3 * n, g1, 3 * n) <= 1e-14);
    CHECK_STATUS(fmk_plan_eval(plan, q, p1, g1), FMK_OK);
    CHECK(test_rel_l2(pm, p1, n) <= 1e-14);
    CHECK(test_rel_l2(gm, g1, 3 * n) <= 1e-14);
    free(qq), free(pm), free(gm);
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.order > 0 && info.levels > 1 && info.leaf_size > 0);
    CHECK(info.phase_time[FMK_PHASE_M2L] >= 0 && info.phase_time[FMK_PHASE_P2P] > 0);
    /* potential only */
    CHECK_STATUS(fmk_plan_eval(plan, q, p1, NULL), FMK_OK);
    fmk_plan_destroy(plan);

    /* eps outside [1e-14, 1e-2] */
    check_context("eps range");
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 0.05, &o), FMK_ERR_ARG);
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-15, &o), FMK_ERR_ARG);
    CHECK(fmk_method_available(FMK_METHOD_FMM, 3, FMK_BACKEND_CPU) == 1);
    CHECK(fmk_method_available(FMK_METHOD_FMM, 2, FMK_BACKEND_CPU) == 1);
    free(x), free(q), free(q2b), free(p1), free(g1), free(rp), free(rg);
}

/* Sources of leaf b's targets reached through U, V, W, X of b and its ancestors: n when every
 * (target leaf, source leaf) pair is covered exactly once. */
static int64_t reached_from(const fmk_tree3d *t, const fmk_fmm3d_lists *l, const int64_t *cnt,
                            int64_t b)
{
    int64_t reached = 0;
    for (int64_t e = l->u_begin[b]; e < l->u_begin[b + 1]; e++)
        reached += cnt[l->u[e]];
    for (int64_t e = l->w_begin[b]; e < l->w_begin[b + 1]; e++)
        reached += cnt[l->w[e]];
    for (int64_t a = b; a >= 0; a = t->parent[a]) {
        for (int64_t e = l->v_begin[a]; e < l->v_begin[a + 1]; e++)
            reached += cnt[l->v[e]];
        for (int64_t e = l->x_begin[a]; e < l->x_begin[a + 1]; e++)
            reached += cnt[l->x[e]];
    }
    return reached;
}

/* The lists of tree t (every point a source and a target) cover each pair of leaves once;
 * returns the lists (free them). */
static void check_cover_once(const fmk_tree3d *t, int64_t n, fmk_fmm3d_lists *l)
{
    int64_t *cnt = malloc(sizeof(int64_t) * (size_t)t->n_nodes);
    for (int64_t b = 0; b < t->n_nodes; b++)
        cnt[b] = t->end[b] - t->begin[b];
    CHECK(fmk_fmm3d_lists_build(t, cnt, cnt, l, 2) == 0);
    int64_t bad = 0;
    for (int64_t b = 0; b < t->n_nodes && bad < 5; b++) {
        if (t->more[b] >= 0)
            continue;
        const int64_t reached = reached_from(t, l, cnt, b);
        bad += reached != n;
        CHECK_MSG(reached == n, "leaf %lld reaches %lld of %lld sources", (long long)b,
                  (long long)reached, (long long)n);
    }
    free(cnt);
}

/* Every (target leaf, source leaf) pair is covered exactly once by the lists: count, per target
 * box b with targets, the sources reached through U, V, W, X of b and its ancestors. */
static void lists_cover_once(void)
{
    const int64_t n = 4000;
    double *x = test_alloc(3 * n);
    make_points(CORNER, n, 51, x);
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = 1 + x[i] * 0.999; /* mapped coordinates in [1, 2] */
    fmk_tree3d t;
    CHECK_STATUS(fmk_tree3d_build(NULL, &t, n, x, 20, 1), FMK_OK);
    fmk_fmm3d_lists l;
    check_cover_once(&t, n, &l);
    printf("lists: %lld nodes, U %lld, V %lld, W %lld, X %lld entries\n", (long long)t.n_nodes,
           (long long)l.n_u, (long long)l.n_v, (long long)l.n_w, (long long)l.n_x);
    CHECK(l.n_w > 0 && l.n_x > 0);
    fmk_fmm3d_lists_free(&l);
    fmk_tree3d_free(&t);
    free(x);
}

/* The smooth kernels' depth cap, shared by the CPU and GPU engines (fmm3d.h,
 * fmk_fmm3d_max_level): the deepest level whose boxes are at least d_min = s / sqrt(eps)
 * (plummer) or s / eps^(1/4) (regularized) wide, none for laplace; and the cut itself
 * (fmk_tree3d_truncate): the nodes of that level become leaves holding their subtrees' points,
 * the lists of the cut tree still cover every pair once. */
static void max_level_and_truncate(void)
{
    check_context("fmk_fmm3d_max_level");
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_LAPLACE, 0, 1e-6) == FMK_TREE_MAX_LEVEL);
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_LAPLACE, 0.5, 1e-3) == FMK_TREE_MAX_LEVEL);
    /* 2^-20 / 1e-3 = 9.54e-4: 2^-10 = 9.77e-4 is wide enough, 2^-11 is not */
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_PLUMMER, ldexp(1, -20), 1e-6) == 10);
    /* 2^-20 / 1e-2 = 9.54e-5: 2^-13 = 1.22e-4, 2^-14 = 6.1e-5 */
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_REGULARIZED, ldexp(1, -20), 1e-8) == 13);
    /* boxes exactly d_min wide are kept: 2^-12 / (1/4) = 2^-10 */
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_PLUMMER, ldexp(1, -12), 1.0 / 16) == 10);
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_REGULARIZED, ldexp(1, -12), 1.0 / 256) == 10);
    /* d_min beyond the root: the root alone; a softening below every level: no cap */
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_PLUMMER, 0.1, 1e-6) == 0);
    CHECK(fmk_fmm3d_max_level(FMK_KERNEL_REGULARIZED, 1e-15, 1e-3) == FMK_TREE_MAX_LEVEL);
    test_rng r = test_rng_seed(71);
    for (int i = 0; i < 200; i++) {
        const fmk_kernel k = i % 2 ? FMK_KERNEL_REGULARIZED : FMK_KERNEL_PLUMMER;
        const double s = pow(10, -12 * test_uniform(&r)), eps = pow(10, -2 - 12 * test_uniform(&r));
        const double d_min = s / pow(eps, k == FMK_KERNEL_PLUMMER ? 0.5 : 0.25);
        const int L = fmk_fmm3d_max_level(k, s, eps);
        CHECK_MSG(L >= 0 && L <= FMK_TREE_MAX_LEVEL && (L == 0 || ldexp(1, -L) >= d_min) &&
                      (L == FMK_TREE_MAX_LEVEL || ldexp(1, -(L + 1)) < d_min),
                  "%s s %g eps %g: level %d, d_min %g", fmk_kernel_name(k), s, eps, L, d_min);
    }

    const int64_t n = 4000;
    double *x = test_alloc(3 * n);
    make_points(CORNER, n, 53, x);
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = 1 + x[i] * 0.999;
    for (int cut = 0; cut <= 4; cut++) {
        check_context("fmk_tree3d_truncate at level %d", cut);
        fmk_tree3d t;
        CHECK_STATUS(fmk_tree3d_build(NULL, &t, n, x, 20, 1), FMK_OK);
        const int levels = t.levels;
        const int64_t kept = t.level_begin[cut + 1];
        CHECK(levels > cut + 1);
        fmk_tree3d_truncate(&t, cut);
        CHECK(t.levels == cut + 1 && t.n_nodes == kept);
        int64_t in_leaves = 0, bad = 0;
        for (int64_t b = 0; b < t.n_nodes; b++) {
            bad += t.level[b] > cut || t.parent[b] >= t.n_nodes || t.next[b] >= t.n_nodes;
            bad +=
                (t.more[b] < 0) != (t.n_children[b] == 0) || (t.level[b] == cut && t.more[b] >= 0);
            bad += t.more[b] >= t.n_nodes;
            if (t.more[b] < 0)
                in_leaves += t.end[b] - t.begin[b];
        }
        CHECK_MSG(bad == 0 && in_leaves == n, "%lld bad nodes, leaves hold %lld of %lld points",
                  (long long)bad, (long long)in_leaves, (long long)n);
        fmk_fmm3d_lists l;
        check_cover_once(&t, n, &l);
        fmk_fmm3d_lists_free(&l);
        fmk_tree3d_truncate(&t, FMK_TREE_MAX_LEVEL); /* no deeper: nothing to do */
        CHECK(t.levels == cut + 1 && t.n_nodes == kept);
        fmk_tree3d_free(&t);
    }
    check_context("%s", "");
    free(x);
}

int main(void)
{
    lists_cover_once();
    max_level_and_truncate();
    small_and_special();
    accuracy_matrix();
    error_falls_with_order();
    scale_and_offset();
    separate_targets();
    smooth_kernels();
    single_precision();
    return check_summary();
}
