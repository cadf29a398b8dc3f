/* test_fmm2d.c -- the 2D adaptive FMM (method fmm, dim 2, CPU) against direct sums (long double
 * reference): for eps in {1e-3, 1e-6, 1e-10, 1e-13}, kernels log2d and cauchy2d, on the three
 * distributions of Goude & Engblom (uniform in the unit square; normal with variance 1/100;
 * the layer: x uniform, y normal with variance 1/100; both rejected to the unit square), plus
 * duplicated points and a far outlier: relative l2 errors of potential and gradient <= eps, and
 * the maximum relative error (their eq. 5.3) reported; the error falls as the order rises;
 * separate targets; N = 1, 2 and all points identical; the interaction lists cover every pair
 * of finest boxes exactly once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmm2d/fmm2d.h"
#include "testutil.h"

enum { N_SAMPLE = 600 };

/* n points (n, 2) of a set; the outlier set's point on a grid of 2^-26 */
static void make_points(test_set2d d, int64_t n, uint64_t seed, double *x)
{
    static const double outlier[2] = {1e4, -3e3};
    test_points_set2d(d, n, seed, outlier, 26, x);
}

typedef struct errs {
    double pot, grad, max_rel; /* relative l2 of potential and gradient; eq. 5.3 */
} errs;

/* Runs the FMM (targets NULL: at the sources) and compares it with the reference at up to
 * N_SAMPLE targets. */
static fmk_status fmm_errors(fmk_kernel k, double eps, int order, int64_t leaf, int64_t ns,
                             const double *src, const double *q, int64_t nt, const double *trg,
                             errs *err, fmk_info *info)
{
    const int64_t m = trg ? nt : ns;
    const double *y = trg ? trg : src;
    const int w = k == FMK_KERNEL_CAUCHY2D ? 2 : 1;
    double *pot = test_alloc(w * m + 1), *grad = test_alloc(2 * m + 1);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    o.threads = 2;
    o.order = order;
    o.leaf_size = leaf;
    const fmk_status st = test_run_opts(k, eps, &o, ns, src, q, nt, trg, pot, grad, info);
    const int64_t ms = m < N_SAMPLE ? m : N_SAMPLE, stride = ms > 0 ? m / ms : 1;
    double *ys = test_alloc(2 * ms + 1), *rp = test_alloc(w * ms + 1), *rg = test_alloc(2 * ms + 1);
    double *fp = test_alloc(w * ms + 1), *fg = test_alloc(2 * ms + 1);
    for (int64_t i = 0; i < ms; i++) {
        const int64_t t = i * stride;
        memcpy(ys + 2 * i, y + 2 * t, 2 * sizeof(double));
        memcpy(fp + w * i, pot + w * t, w * sizeof(double));
        memcpy(fg + 2 * i, grad + 2 * t, 2 * sizeof(double));
    }
    /* the reference skips pairs at distance 0, which includes each source's own term */
    test_reference(k, 0, ns, src, q, ms, ys, rp, rg);
    err->pot = test_rel_l2(fp, rp, w * ms);
    err->grad = test_rel_l2(fg, rg, 2 * ms);
    err->max_rel = 0;
    for (int64_t i = 0; i < ms; i++) {
        double dr = fp[w * i] - rp[w * i], di = w == 2 ? fp[2 * i + 1] - rp[2 * i + 1] : 0;
        double er = rp[w * i], ei = w == 2 ? rp[2 * i + 1] : 0;
        double a = hypot(er, ei);
        if (a > 0 && hypot(dr, di) / a > err->max_rel)
            err->max_rel = hypot(dr, di) / a;
    }
    free(pot), free(grad), free(ys), free(rp), free(rg), free(fp), free(fg);
    return st;
}

static void accuracy_matrix(void)
{
    const double epss[] = {1e-3, 1e-6, 1e-10, 1e-13};
    const int64_t n = SANITIZED ? 1200 : 3000;
    double *x = test_alloc(2 * n), *q = test_alloc(2 * n);
    printf("%-8s %-10s %-6s %3s %6s %4s %9s %9s %9s\n", "kernel", "points", "eps", "p", "levels",
           "N_d", "err pot", "err grad", "max rel");
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        for (int d = 0; d < TEST_SET2D_COUNT; d++) {
            make_points((test_set2d)d, n, 100 + d, x);
            test_charges(n, kk, 7 + d, q);
            for (int e = 0; e < 4; e++) {
                errs err;
                fmk_info info;
                check_context("%s, %s, eps %g", fmk_kernel_name(k), test_set2d_name((test_set2d)d),
                              epss[e]);
                CHECK_STATUS(fmm_errors(k, epss[e], -1, 0, n, x, q, 0, NULL, &err, &info), FMK_OK);
                printf("%-8s %-10s %-6.0e %3d %6d %4lld %9.2e %9.2e %9.2e\n", fmk_kernel_name(k),
                       test_set2d_name((test_set2d)d), epss[e], info.order, info.levels,
                       (long long)info.leaf_size, err.pot, err.grad, err.max_rel);
                /* eps as for every method: the relative l2 error of the potential within eps,
                 * of the gradient within 10 eps (docs/choosing.md); the pointwise maximum
                 * (the paper's eq. 5.3) is printed */
                CHECK_MSG(err.pot <= epss[e], "potential error %.3e > eps", err.pot);
                CHECK_MSG(err.grad <= 10 * epss[e], "gradient error %.3e > 10 eps", err.grad);
            }
        }
    }
    free(x), free(q);
}

/* The error falls as p rises (leaves of 20, so that the tree has several levels). */
static void error_falls_with_order(void)
{
    const int64_t n = SANITIZED ? 1200 : 3000;
    double *x = test_alloc(2 * n), *q = test_alloc(2 * n);
    make_points(TEST_SET2D_LAYER, n, 5, x);
    test_charges(n, 1, 9, q);
    const int orders[] = {2, 5, 10, 15, 20, 30};
    double prev = INFINITY;
    check_context("error against order");
    for (int i = 0; i < 6; i++) {
        errs err;
        CHECK_STATUS(
            fmm_errors(FMK_KERNEL_CAUCHY2D, 1e-6, orders[i], 20, n, x, q, 0, NULL, &err, NULL),
            FMK_OK);
        printf("p = %2d: pot %.2e grad %.2e max rel %.2e\n", orders[i], err.pot, err.grad,
               err.max_rel);
        CHECK_MSG(err.pot < prev, "p = %d: error %.3e did not fall (previous %.3e)", orders[i],
                  err.pot, prev);
        prev = err.pot;
    }
    CHECK_MSG(prev < 1e-9, "p = 30 error %.3e", prev);
    free(x), free(q);
}

/* Separate targets (some of them on sources), both kernels. */
static void separate_targets(void)
{
    const int64_t ns = 1500, nt = 900;
    double *x = test_alloc(2 * ns), *y = test_alloc(2 * nt), *q = test_alloc(2 * ns);
    make_points(TEST_SET2D_NORMAL, ns, 31, x);
    make_points(TEST_SET2D_UNIFORM, nt, 32, y);
    memcpy(y, x, 2 * 50 * sizeof(double)); /* 50 targets sit on sources */
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        test_charges(ns, kk, 33, q);
        errs err;
        check_context("separate targets, %s", fmk_kernel_name(k));
        CHECK_STATUS(fmm_errors(k, 1e-8, -1, 0, ns, x, q, nt, y, &err, NULL), FMK_OK);
        printf("separate targets %s: pot %.2e grad %.2e\n", fmk_kernel_name(k), err.pot, err.grad);
        CHECK_MSG(err.pot <= 1e-8 && err.grad <= 1e-7, "errors %.3e %.3e", err.pot, err.grad);
    }
    free(x), free(y), free(q);
}

/* N = 1, 2, 3 and all points identical: the results equal the reference (tiny trees). */
static void edge_cases(void)
{
    double x[2 * 64], q[2 * 64];
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        const int64_t ns_list[] = {1, 2, 3, 64};
        for (int c = 0; c < 4; c++) {
            const int64_t n = ns_list[c];
            make_points(TEST_SET2D_UNIFORM, n, 40 + c, x);
            test_charges(n, kk, 41 + c, q);
            errs err;
            check_context("%s, n = %lld", fmk_kernel_name(k), (long long)n);
            /* leaves of one point (an expert leaf size: the order table's margin holds for
             * the default leaves), so a factor 3 more */
            CHECK_STATUS(fmm_errors(k, 1e-10, -1, 1, n, x, q, 0, NULL, &err, NULL), FMK_OK);
            CHECK_MSG(err.pot <= 3e-10 && err.grad <= 3e-9, "errors %.3e %.3e", err.pot, err.grad);
        }
        /* all points identical: every term is coincident, so every result is 0 */
        for (int64_t i = 0; i < 64; i++)
            x[2 * i] = 0.25, x[2 * i + 1] = -3;
        test_charges(64, kk, 50, q);
        double pot[128], grad[128];
        fmk_opts o;
        fmk_opts_default(&o);
        o.method = FMK_METHOD_FMM;
        o.backend = FMK_BACKEND_CPU;
        o.leaf_size = 2;
        check_context("%s, identical points", fmk_kernel_name(k));
        CHECK_STATUS(fmk_eval(2, k, 1e-6, &o, 64, x, q, 0, NULL, pot, grad), FMK_OK);
        double big = 0;
        for (int i = 0; i < 64 * (kk + 1); i++)
            big = fmax(big, fmax(fabs(pot[i]), fabs(grad[i])));
        for (int i = 64 * (kk + 1); i < 128; i++)
            big = fmax(big, fabs(grad[i]));
        CHECK_MSG(big == 0, "largest result %g, not 0", big);
    }
}

/* Options: fp32 and order 1 are refused. */
static void options(void)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    fmk_plan *plan = NULL;
    check_context("options");
    o.precision = FMK_PRECISION_FP32;
    CHECK_STATUS(fmk_plan_create(&plan, 2, FMK_KERNEL_LOG2D, 1e-6, &o), FMK_ERR_UNAVAILABLE);
    o.precision = FMK_PRECISION_FP64;
    o.order = 1;
    CHECK_STATUS(fmk_plan_create(&plan, 2, FMK_KERNEL_LOG2D, 1e-6, &o), FMK_ERR_ARG);
    o.order = -1;
    CHECK_STATUS(fmk_plan_create(&plan, 2, FMK_KERNEL_CAUCHY2D, 1e-6, &o), FMK_OK);
    fmk_plan_destroy(plan);
}

/* The lists cover every (target box, source box) pair of the finest level exactly once:
 * through M2L between ancestors (or the boxes themselves), P2L, M2P or P2P. */
static void lists_cover_pairs(void)
{
    const int64_t n = 2500;
    double *x = test_alloc(2 * n), *xm = test_alloc(2 * n);
    for (int d = 0; d < TEST_SET2D_COUNT; d++) {
        make_points((test_set2d)d, n, 60 + d, x);
        /* into [1, 2] as the frame does (any affine map keeps the structure) */
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (int64_t i = 0; i < n; i++)
            for (int c = 0; c < 2; c++)
                lo[c] = fmin(lo[c], x[2 * i + c]), hi[c] = fmax(hi[c], x[2 * i + c]);
        const double wdt = fmax(hi[0] - lo[0], hi[1] - lo[1]);
        for (int64_t i = 0; i < n; i++)
            for (int c = 0; c < 2; c++)
                xm[2 * i + c] = 1 + (x[2 * i + c] - lo[c]) / wdt;
        fmk_fmm2d_tree t;
        check_context("lists, %s", test_set2d_name((test_set2d)d));
        CHECK_STATUS(fmk_fmm2d_tree_build(&t, n, xm, 1, 0, NULL, 10, 2), FMK_OK);
        const int L = t.levels;
        const int64_t leaves = (int64_t)1 << (2 * L);
        int *cover = calloc((size_t)(leaves * leaves), sizeof(int));
        for (int l = 1; l <= L; l++) {
            const int64_t f = fmk_fmm2d_first(l), sh = 2 * (L - l);
            for (int64_t b = 0; b < ((int64_t)1 << (2 * l)); b++)
                for (int64_t e = t.weak_begin[f + b]; e < t.weak_begin[f + b + 1]; e++) {
                    const int64_t c = t.weak[e] - f;
                    for (int64_t i = b << sh; i < (b + 1) << sh; i++)
                        for (int64_t j = c << sh; j < (c + 1) << sh; j++)
                            cover[i * leaves + j]++;
                }
        }
        for (int64_t b = 0; b < leaves; b++) {
            const int64_t *beg[3] = {t.p2p_begin, t.m2p_begin, t.p2l_begin};
            const int32_t *lst[3] = {t.p2p, t.m2p, t.p2l};
            for (int k = 0; k < 3; k++)
                for (int64_t e = beg[k][b]; e < beg[k][b + 1]; e++)
                    cover[b * leaves + lst[k][e]]++;
        }
        int64_t bad = 0;
        for (int64_t i = 0; i < leaves * leaves; i++)
            bad += cover[i] != 1;
        printf("lists %s: levels %d, weak %lld, p2p %lld, m2p %lld, p2l %lld\n",
               test_set2d_name((test_set2d)d), L, (long long)t.weak_begin[t.n_boxes],
               (long long)t.p2p_begin[leaves], (long long)t.m2p_begin[leaves],
               (long long)t.p2l_begin[leaves]);
        CHECK_MSG(L >= 3, "only %d levels", L);
        CHECK_MSG(bad == 0, "%lld pairs of finest boxes not covered exactly once", (long long)bad);
        /* every box holds floor or ceil of n / 4^l points */
        free(cover);
        fmk_fmm2d_tree_free(&t);
    }
    free(x), free(xm);
}

int main(void)
{
    lists_cover_pairs();
    options();
    edge_cases();
    separate_targets();
    error_falls_with_order();
    accuracy_matrix();
    return check_summary();
}
