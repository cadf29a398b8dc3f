/* test_finite.c -- no NaN or Inf with success (issue 31, item 3, and the library's guard):
 *   - the fp32 (and fp64) treecode, both walks, and the 3D FMM on 100 points in the unit cube and
 *     one at (0, 0, 1e15), and on pairs of points 1e-9 apart: refused with a status (the
 *     resolution guard, or results that are not finite) and the outputs untouched, or every
 *     value finite. Before, the tree and the FMM returned NaN in 100 of 101 gradient rows
 *     with success;
 *   - a result that overflows (charges of 1e308) is FMK_ERR_NONFINITE with a message, for
 *     every CPU method, with the outputs untouched; fmk_plan_eval_many writes the vectors
 *     before the one that overflows and leaves it and the rest untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

static int all_finite(const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static fmk_opts opts_of(fmk_method method, fmk_precision prec, fmk_walk walk)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method;
    test_tree_theta(&o);
    o.backend = FMK_BACKEND_CPU;
    o.precision = prec;
    o.walk = walk;
    o.threads = 2;
    return o;
}

/* The issue's two sets: 0: 100 points and one at (0, 0, 1e15); 1: 100 pairs 1e-9 apart. */
static int64_t issue_set(int set, double *x, double *q)
{
    test_rng r = test_rng_seed(31);
    const int64_t n = set ? 200 : 101;
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = test_uniform(&r);
    for (int64_t i = 0; i < n; i++)
        q[i] = test_uniform(&r) - 0.5;
    if (set == 0)
        x[3 * 100] = x[3 * 100 + 1] = 0, x[3 * 100 + 2] = 1e15;
    else
        for (int64_t i = 0; i < n; i += 2)
            for (int k = 0; k < 3; k++)
                x[3 * (i + 1) + k] = x[3 * i + k] + 1e-9;
    return n;
}

static void fast_methods_finite(void)
{
    double x[3 * 200], q[200], pd[200], gd[600], pf[200], gf[600];
    const char *sets[2] = {"100 + (0, 0, 1e15)", "pairs 1e-9 apart"};
    for (int set = 0; set < 2; set++) {
        const int64_t n = issue_set(set, x, q);
        /* the reference: the fp64 direct sum, exact to rounding for any finite input */
        fmk_opts od = opts_of(FMK_METHOD_DIRECT, FMK_PRECISION_FP64, FMK_WALK_AUTO);
        check_context("%s, direct, fp64", sets[set]);
        CHECK_STATUS(test_run_opts(FMK_KERNEL_LAPLACE, 1e-4, &od, n, x, q, 0, NULL, pd, gd, NULL),
                     FMK_OK);
        for (int p = 0; p < 2; p++) {
            const fmk_precision prec = p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
            for (int m = p ? -1 : 0; m < 3; m++) { /* -1: the fp32 direct sum */
                const fmk_method method = m == -1  ? FMK_METHOD_DIRECT
                                          : m == 2 ? FMK_METHOD_FMM
                                                   : FMK_METHOD_TREE;
                const fmk_walk walk = m == 1 ? FMK_WALK_STACKLESS : FMK_WALK_AUTO;
                fmk_opts of = opts_of(method, prec, walk);
                check_context("%s, %s%s, %s", sets[set], fmk_method_name(method),
                              m == 1 ? " (stackless)" : "", p ? "fp32" : "fp64");
                for (int64_t i = 0; i < n; i++)
                    pf[i] = gf[3 * i] = gf[3 * i + 1] = gf[3 * i + 2] = NAN;
                const fmk_status st =
                    test_run_opts(FMK_KERNEL_LAPLACE, 1e-4, &of, n, x, q, 0, NULL, pf, gf, NULL);
                /* refused (the resolution guard: the frame cannot hold these points to eps; or
                 * results that are not finite), with the outputs untouched; or finite */
                CHECK_MSG(st == FMK_OK || st == FMK_ERR_ACCURACY || st == FMK_ERR_NONFINITE,
                          "status %d", (int)st);
                if (st != FMK_OK) {
                    CHECK(isnan(pf[0]) && isnan(gf[0]));
                    printf("%-20s %-16s %s: refused (%d)\n", sets[set],
                           m == 1 ? "tree (stackless)" : fmk_method_name(method),
                           p ? "fp32" : "fp64", (int)st);
                    continue;
                }
                CHECK(all_finite(pf, n) && all_finite(gf, 3 * n));
                const double ep = test_rel_l2(pf, pd, n), eg = test_rel_l2(gf, gd, 3 * n);
                printf("%-20s %-16s %s: against the fp64 direct sum: potential "
                       "%.2e, gradient %.2e\n",
                       sets[set], m == 1 ? "tree (stackless)" : fmk_method_name(method),
                       p ? "fp32" : "fp64", ep, eg);
            }
        }
    }
}

/* Every CPU method: two charges of 1e308 0.5 apart overflow. */
static void overflow_refused(void)
{
    static const struct {
        fmk_kernel kernel;
        fmk_method method;
        fmk_precision prec;
    } cases[] = {
        {FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, FMK_PRECISION_FP64},
        {FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, FMK_PRECISION_FP32},
        {FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, FMK_PRECISION_FP64},
        {FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, FMK_PRECISION_FP32},
        {FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, FMK_PRECISION_FP64},
        {FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, FMK_PRECISION_FP32},
        {FMK_KERNEL_CAUCHY2D, FMK_METHOD_DIRECT, FMK_PRECISION_FP64},
        {FMK_KERNEL_CAUCHY2D, FMK_METHOD_FMM, FMK_PRECISION_FP64},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const fmk_kernel k = cases[c].kernel;
        const int dim = fmk_kernel_dim(k), cw = fmk_kernel_is_complex(k) ? 2 : 1;
        const int gw = cw == 2 ? 2 : dim;
        const int64_t n = 40;
        double x[3 * 40], q[2 * 40], pot[2 * 40], grad[3 * 40];
        test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 5, x);
        test_charges(n, cw == 2, 5, q);
        for (int k2 = 0; k2 < dim; k2++)
            x[k2] = 0.25, x[dim + k2] = 0.25 + (k2 == 0 ? 0.5 : 0);
        q[0] = q[cw] = 1e308;
        for (int64_t i = 0; i < n * cw; i++)
            pot[i] = 7;
        for (int64_t i = 0; i < n * gw; i++)
            grad[i] = 7;
        check_context("%s, %s, %s: charges 1e308", fmk_kernel_name(k),
                      fmk_method_name(cases[c].method), cases[c].prec ? "fp32" : "fp64");
        fmk_opts o = opts_of(cases[c].method, cases[c].prec, FMK_WALK_AUTO);
        fmk_plan *plan = NULL;
        CHECK_STATUS(fmk_plan_create(&plan, dim, k, 1e-4, &o), FMK_OK);
        if (!plan)
            continue;
        CHECK_PLAN_OK(fmk_plan_set_points(plan, n, x, 0, NULL), plan);
        const fmk_status st = fmk_plan_eval(plan, q, pot, grad);
        CHECK_MSG(st == FMK_ERR_NONFINITE, "status %d: %s", (int)st, fmk_plan_last_error(plan));
        CHECK_MSG(strstr(fmk_plan_last_error(plan), "overflows") != NULL, "message: %s",
                  fmk_plan_last_error(plan));
        int untouched = 1;
        for (int64_t i = 0; i < n * cw; i++)
            untouched &= pot[i] == 7;
        for (int64_t i = 0; i < n * gw; i++)
            untouched &= grad[i] == 7;
        CHECK_MSG(untouched, "an output was written");
        /* and the plan is usable: moderate charges succeed */
        q[0] = q[cw] = 1;
        CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, grad), plan);
        CHECK(all_finite(pot, n * cw) && all_finite(grad, n * gw));
        fmk_plan_destroy(plan);
    }
}

/* eval_many: vector 0 moderate, vector 1 overflows, vector 2 moderate: nothing written. */
static void overflow_in_eval_many(void)
{
    const int64_t n = 30;
    double x[3 * 30], q[3 * 30], pot[3 * 30];
    test_points(TEST_DIST_CUBE, n, 6, x);
    for (int v = 0; v < 3; v++)
        test_charges(n, 0, 6 + v, q + v * n);
    x[0] = x[1] = x[2] = 0.25, x[3] = 0.75, x[4] = x[5] = 0.25;
    q[n] = q[n + 1] = 1e308;
    for (int64_t i = 0; i < 3 * n; i++)
        pot[i] = 7;
    check_context("eval_many, the second of three vectors overflows");
    fmk_opts o = opts_of(FMK_METHOD_DIRECT, FMK_PRECISION_FP64, FMK_WALK_AUTO);
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    if (!plan)
        return;
    CHECK_PLAN_OK(fmk_plan_set_points(plan, n, x, 0, NULL), plan);
    CHECK_STATUS(fmk_plan_eval_many(plan, 3, q, pot, NULL), FMK_ERR_NONFINITE);
    CHECK(strstr(fmk_plan_last_error(plan), "overflows") != NULL);
    CHECK(strstr(fmk_plan_last_error(plan), "charge vector 1") != NULL);
    int untouched = 1;
    for (int64_t i = 0; i < 3 * n; i++)
        untouched &= pot[i] == 7;
    CHECK_MSG(untouched, "a vector's results were written although the call failed");
    fmk_plan_destroy(plan);
}

int main(void)
{
    fast_methods_finite();
    overflow_refused();
    overflow_in_eval_many();
    return check_summary();
}
