/* test_fmm_coincident.c -- the CPU FMMs (3D: laplace, plummer, regularized; 2D: log2d,
 * cauchy2d) on coincident points (issue 31), against the rule of docs/kernels.md:
 *   - one run of M coincident points (100,000; 20,000 under ASan) and 300 others, targets =
 *     sources and separate targets (M on the run and 300 others): against a reference that
 *     sums the run as one source (the rule: a target gets nothing from its own position under
 *     a singular kernel, q G(0) from each coincident source but itself under a smooth one).
 *     The FMM must take a few seconds at most: a leaf of m coincident points costs O(m), not
 *     the m^2 pairs it took before (1e5 points: 5 to 31 s and 145 MB in 2D);
 *   - 300 groups of 5 coincident points, both precisions of the 3D FMM, against the direct
 *     reference of testutil over every point. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "testutil.h"

static const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                     FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};
static const double softening = 1e-4, eps = 1e-6;

static double now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* G(0): the value of a smooth kernel at r = 0 (0 for the singular ones). */
static double g_zero(fmk_kernel k)
{
    return k == FMK_KERNEL_PLUMMER       ? 1 / softening
           : k == FMK_KERNEL_REGULARIZED ? 1.5 / softening
                                         : 0;
}

static fmk_opts fmm_opts(fmk_precision precision)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM, o.backend = FMK_BACKEND_CPU, o.precision = precision;
    o.softening = softening;
    return o;
}

/* The FMM's relative l2 errors of pot and grad against a reference, at most tol each. */
static void check_errors(fmk_kernel k, int64_t m, const double *pot, const double *grad,
                         const double *rp, const double *rg, double tol)
{
    const int pw = test_pot_width(k), gw = test_grad_width(k);
    for (int64_t i = 0; i < m * pw; i++)
        if (!isfinite(pot[i]))
            CHECK_MSG(0, "pot[%lld] = %g", (long long)i, pot[i]);
    CHECK_LE(test_rel_l2(pot, rp, m * pw), tol, "potential error");
    CHECK_LE(test_rel_l2(grad, rg, m * gw), tol, "gradient error");
}

/* One run of big coincident points at x0 (the first ones) and 300 others. */
static void one_run(fmk_kernel k, int64_t big)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int pw = test_pot_width(k), gw = test_grad_width(k), w = cplx ? 2 : 1;
    const int64_t others = 300, n = big + others;
    const double x0[3] = {0.3, 0.6, 0.45};
    double *x = test_alloc(n * dim), *q = test_alloc(n * w);
    test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, others + 1, 5, 0.03,
                          x + (big - 1) * dim);
    for (int64_t i = 0; i < big; i++) /* (the first of the separated points is overwritten) */
        for (int c = 0; c < dim; c++)
            x[dim * i + c] = x0[c];
    test_charges(n, cplx, 6, q);
    /* the run as one source: its charge summed (compensation is not needed at 1e-6) */
    double *xs = test_alloc((others + 1) * dim), *qs = test_alloc((others + 1) * w);
    for (int64_t i = 0; i < (others + 1) * dim; i++)
        xs[i] = x[(big - 1) * dim + i];
    for (int c = 0; c < w; c++) {
        qs[c] = 0;
        for (int64_t i = 0; i < big; i++)
            qs[c] += q[w * i + c];
    }
    for (int64_t i = 0; i < others * w; i++)
        qs[w + i] = q[big * w + i];
    double *rs_p = test_alloc((others + 1) * pw), *rs_g = test_alloc((others + 1) * gw);
    double *rp = test_alloc(n * pw), *rg = test_alloc(n * gw);
    double *pot = test_alloc(n * pw), *grad = test_alloc(n * gw);
    const fmk_opts o = fmm_opts(FMK_PRECISION_FP64);

    /* targets = sources: the run's own charge is left out at its position (the reference's self
     * term); the smooth kernels add back the rest of the run, (Q - q_i) G(0) */
    test_reference(k, softening, others + 1, xs, qs, 0, NULL, rs_p, rs_g);
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = i < big ? 0 : i - big + 1;
        for (int c = 0; c < pw; c++)
            rp[pw * i + c] = rs_p[pw * r + c] + (i < big ? g_zero(k) * (qs[c] - q[w * i + c]) : 0);
        for (int c = 0; c < gw; c++)
            rg[gw * i + c] = rs_g[gw * r + c];
    }
    check_context("%s, %lld coincident points and %lld others, targets = sources",
                  fmk_kernel_name(k), (long long)big, (long long)others);
    double t0 = now();
    CHECK_STATUS(test_run_opts(k, eps, &o, n, x, q, 0, NULL, pot, grad, NULL), FMK_OK);
    CHECK_LE(now() - t0, 10.0, "seconds for set_points and eval");
    check_errors(k, n, pot, grad, rp, rg, 10 * eps);

    /* separate targets: the same points; nothing is left out by index, so every target on the
     * run gets Q G(0) from it */
    test_reference(k, softening, others + 1, xs, qs, others + 1, xs, rs_p, rs_g);
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = i < big ? 0 : i - big + 1;
        for (int c = 0; c < pw; c++)
            rp[pw * i + c] = rs_p[pw * r + c];
        for (int c = 0; c < gw; c++)
            rg[gw * i + c] = rs_g[gw * r + c];
    }
    check_context("%s, %lld coincident points and %lld others, separate targets",
                  fmk_kernel_name(k), (long long)big, (long long)others);
    t0 = now();
    CHECK_STATUS(test_run_opts(k, eps, &o, n, x, q, n, x, pot, grad, NULL), FMK_OK);
    CHECK_LE(now() - t0, 10.0, "seconds for set_points and eval");
    check_errors(k, n, pot, grad, rp, rg, 10 * eps);
    free(x), free(q), free(xs), free(qs), free(rs_p), free(rs_g);
    free(rp), free(rg), free(pot), free(grad);
}

/* 300 groups of 5 coincident points; separate targets: 200 on the groups, 100 elsewhere. */
static void groups(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int pw = test_pot_width(k), gw = test_grad_width(k);
    const int64_t n_groups = 300, size = 5, n = n_groups * size, nt = 300;
    double *x = test_alloc(n * dim), *q = test_alloc(2 * n), *y = test_alloc(nt * dim);
    double *spread = test_alloc((n_groups + 100) * dim);
    test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n_groups + 100, 7, 0.01,
                          spread);
    for (int64_t i = 0; i < n; i++) /* group g: points g, g + 300, ...: not side by side */
        for (int c = 0; c < dim; c++)
            x[dim * i + c] = spread[dim * (i % n_groups) + c];
    for (int64_t i = 0; i < nt; i++)
        for (int c = 0; c < dim; c++)
            y[dim * i + c] =
                i < 200 ? x[dim * (7 * i) + c] : spread[dim * (n_groups + i - 200) + c];
    test_charges(n, cplx, 8, q);
    double *rp = test_alloc(n * pw), *rg = test_alloc(n * gw);
    double *pot = test_alloc(n * pw), *grad = test_alloc(n * gw);
    const int n_prec = dim == 3 ? 2 : 1;
    for (int sep = 0; sep < 2; sep++) {
        const int64_t m = sep ? nt : n;
        test_reference(k, softening, n, x, q, nt, sep ? y : NULL, rp, rg);
        for (int p = 0; p < n_prec; p++) {
            check_context("%s, %lld groups of %lld coincident points, %s, %s", fmk_kernel_name(k),
                          (long long)n_groups, (long long)size,
                          sep ? "separate targets" : "targets = sources", p ? "fp32" : "fp64");
            const fmk_opts o = fmm_opts(p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64);
            const double e = p ? 1e-4 : eps;
            fmk_plan *plan = NULL;
            CHECK_STATUS(fmk_plan_create(&plan, dim, k, e, &o), FMK_OK);
            CHECK_PLAN_OK(fmk_plan_set_points(plan, n, x, sep ? nt : 0, sep ? y : NULL), plan);
            CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, grad), plan);
            check_errors(k, m, pot, grad, rp, rg, 10 * e);
            fmk_plan_destroy(plan);
        }
    }
    free(x), free(q), free(y), free(spread), free(rp), free(rg), free(pot), free(grad);
}

int main(void)
{
    const int64_t big = SANITIZED ? 20000 : 100000;
    for (int i = 0; i < 5; i++) {
        one_run(kernels[i], big);
        groups(kernels[i]);
    }
    return check_summary();
}
