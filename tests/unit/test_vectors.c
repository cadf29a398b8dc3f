/* test_vectors.c -- several charge vectors per call (fmk_plan_eval_many) on the CPU: for every
 * method and kernel, nd vectors in one call give what nd calls of fmk_plan_eval give, to
 * rounding; counts below, at and above what a plan holds at once (opts.n_vectors, and the
 * engines' chunks of up to 8), potential only and gradient only, targets apart and the
 * sources themselves, coincident sources (the smooth kernels' runs), fp32; and zero vectors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

typedef struct vcase {
    const char *name;
    int dim;
    fmk_kernel kernel;
    fmk_method method;
    fmk_precision precision;
    double eps, softening;
    test_dist dist;
    int coincident; /* every 5th source a copy of the one before it */
} vcase;

/* The relative l2 difference of nd stacked vectors of width w, the worst vector. */
static double worst(const double *a, const double *b, int nd, int64_t per)
{
    double e = 0;
    for (int v = 0; v < nd; v++) {
        const double d = test_rel_l2(a + v * per, b + v * per, per);
        e = d > e ? d : e;
    }
    return e;
}

static void run_case(const vcase *c, int nd, int hint, int separate, int outputs)
{
    const int64_t ns = SANITIZED ? 300 : 3000, nt = separate ? 700 : ns, m = separate ? nt : ns;
    const int w = c->kernel == FMK_KERNEL_CAUCHY2D ? 2 : 1;
    const int gw = c->kernel == FMK_KERNEL_CAUCHY2D ? 2 : c->dim;
    double *x = test_alloc(c->dim * ns), *y = test_alloc(c->dim * nt);
    double *q = test_alloc(nd * ns * w);
    double *pm = test_alloc(nd * m * w + 1), *gm = test_alloc(nd * m * gw + 1);
    double *p1 = test_alloc(nd * m * w + 1), *g1 = test_alloc(nd * m * gw + 1);
    test_points(c->dist, ns, 11, x);
    test_points(c->dist, nt, 12, y);
    if (c->coincident)
        for (int64_t i = 5; i < ns; i += 5)
            memcpy(x + c->dim * i, x + c->dim * (i - 1), sizeof(double) * (size_t)c->dim);
    for (int v = 0; v < nd; v++)
        test_charges(ns, w == 2, 100 + (uint64_t)v, q + v * ns * w);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method, o.backend = FMK_BACKEND_CPU, o.precision = c->precision;
    o.softening = c->softening, o.n_vectors = hint, o.threads = 2;
    if (c->method == FMK_METHOD_TREE)
        test_tree_theta(&o);
    check_context("%s, nd %d, n_vectors %d, %s, outputs %d", c->name, nd, hint,
                  separate ? "targets apart" : "self", outputs);
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, c->dim, c->kernel, c->eps, &o), FMK_OK);
    if (!plan)
        goto done;
    CHECK_PLAN_OK(fmk_plan_set_points(plan, ns, x, separate ? nt : 0, separate ? y : NULL), plan);
    double *pot = outputs & 1 ? pm : NULL, *grad = outputs & 2 ? gm : NULL;
    CHECK_PLAN_OK(fmk_plan_eval_many(plan, nd, q, pot, grad), plan);
    for (int v = 0; v < nd; v++)
        CHECK_PLAN_OK(fmk_plan_eval(plan, q + v * ns * w, pot ? p1 + v * m * w : NULL,
                                    grad ? g1 + v * m * gw : NULL),
                      plan);
    const double tol = c->precision == FMK_PRECISION_FP32 ? 1e-6 : 1e-13;
    if (pot) {
        const double e = worst(pm, p1, nd, m * w);
        CHECK_MSG(e <= tol, "potential: eval_many against eval %.2e", e);
    }
    if (grad) {
        const double e = worst(gm, g1, nd, m * gw);
        CHECK_MSG(e <= tol, "gradient: eval_many against eval %.2e", e);
    }
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.method == c->method);
    fmk_plan_destroy(plan);
done:
    free(x), free(y), free(q), free(pm), free(gm), free(p1), free(g1);
}

/* Zero vectors: nothing to do, nothing written. */
static void zero_vectors(void)
{
    check_context("zero vectors");
    double x[3 * 50], q[50], pot[50];
    test_points(TEST_DIST_CUBE, 50, 3, x);
    test_charges(50, 0, 4, q);
    for (int i = 0; i < 50; i++)
        pot[i] = 7;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM, o.backend = FMK_BACKEND_CPU;
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    if (!plan)
        return;
    CHECK_PLAN_OK(fmk_plan_set_points(plan, 50, x, 0, NULL), plan);
    CHECK_PLAN_OK(fmk_plan_eval_many(plan, 0, q, pot, NULL), plan);
    CHECK(pot[0] == 7 && pot[49] == 7);
    CHECK_STATUS(fmk_plan_eval_many(plan, -1, q, pot, NULL), FMK_ERR_ARG);
    fmk_plan_destroy(plan);
    o.n_vectors = -1;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_ERR_ARG);
    o.n_vectors = FMK_VECTORS_MAX + 1;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_ERR_ARG);
}

int main(void)
{
    static const vcase cases[] = {
        {"fmm laplace", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, FMK_PRECISION_FP64, 1e-6, 0,
         TEST_DIST_PLUMMER, 0},
        {"fmm laplace coincident", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, FMK_PRECISION_FP64,
         1e-9, 0, TEST_DIST_CLUSTERED, 1},
        {"fmm plummer coincident", 3, FMK_KERNEL_PLUMMER, FMK_METHOD_FMM, FMK_PRECISION_FP64,
         1e-6, 1e-3, TEST_DIST_CUBE, 1},
        {"fmm regularized", 3, FMK_KERNEL_REGULARIZED, FMK_METHOD_FMM, FMK_PRECISION_FP64, 1e-3,
         1e-2, TEST_DIST_CUBE, 0},
        {"fmm laplace fp32", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, FMK_PRECISION_FP32, 1e-4, 0,
         TEST_DIST_CUBE, 0},
        {"tree laplace", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, FMK_PRECISION_FP64, 1e-3, 0,
         TEST_DIST_PLUMMER, 0},
        {"direct laplace", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, FMK_PRECISION_FP64, 1e-6, 0,
         TEST_DIST_CUBE, 1},
        {"direct plummer fp32", 3, FMK_KERNEL_PLUMMER, FMK_METHOD_DIRECT, FMK_PRECISION_FP32,
         1e-4, 1e-2, TEST_DIST_CUBE, 0},
        {"fmm log2d", 2, FMK_KERNEL_LOG2D, FMK_METHOD_FMM, FMK_PRECISION_FP64, 1e-6, 0,
         TEST_DIST_SQUARE, 0},
        {"fmm cauchy2d", 2, FMK_KERNEL_CAUCHY2D, FMK_METHOD_FMM, FMK_PRECISION_FP64, 1e-6, 0,
         TEST_DIST_NORMAL2D, 0},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n_cases; i++) {
        run_case(&cases[i], 3, 1, 0, 3);  /* more vectors than the plan holds at first */
        run_case(&cases[i], 2, 4, 1, 3);  /* fewer */
        run_case(&cases[i], 9, 4, 0, 1);  /* beyond the engines' chunk of 8: potential only */
        run_case(&cases[i], 5, 5, 1, 2);  /* gradient only */
        run_case(&cases[i], 1, 1, 1, 3);
    }
    zero_vectors();
    return check_summary();
}
