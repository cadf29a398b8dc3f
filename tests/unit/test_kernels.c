/* test_kernels.c -- every kernel against the long-double reference (testutil.c): potential and
 * gradient relative l2 errors, fp64 and fp32, on several point distributions, targets = sources
 * and separate targets, 1 and 2 threads. Also checks the reference's gradients against central
 * differences of its own potential, so the two formulas of each kernel are tied together. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

/* Sources and separate targets per test set: 3D, 2D (2D sets are sparser, so that their closest
 * pairs stay as far apart, relative to the box, as the 3D ones). */
static const int64_t n_sources[2] = {1000, 300}, n_targets[2] = {600, 200};

static const double tol_fp64 = 1e-13, tol_fp32 = 1e-5, tol_threads = 1e-15;

/* Minimum separation of the test sets (sources and targets together), per distribution. The
 * coordinates themselves are rounded to 2^-24 of the box in fp32, which moves a pair term by
 * about 2^-24 box / r (twice that for gradients); in 2D the nearest pairs dominate sums of
 * 1/r^2 (the cauchy2d derivative), so the 2D sets are sparser. With these separations the
 * worst fp32 error is about 7e-6; without them it reaches 1e-3 (layer), which measures the
 * input, not the library. */
static double min_separation(test_dist d)
{
    static const double table[TEST_DIST_COUNT] = {0.03, 0.1, 0.02, 0.03, 0.03, 0.15, 0.015};
    return table[d];
}

/* Softening for the smooth kernels, about a tenth of the mean spacing of the test sets. */
static const double softening = 0.01;

/* The reference gradient is the derivative of the reference potential (central differences,
 * long double inside the reference, step 1e-5 of the unit scale). */
static void check_reference_gradients(fmk_kernel kernel)
{
    const int dim = fmk_kernel_dim(kernel), cplx = fmk_kernel_is_complex(kernel);
    const int n = 20, pw = test_pot_width(kernel), gw = test_grad_width(kernel);
    double src[3 * 20], q[2 * 20], trg[3], pot_p[2], pot_m[2], grad[3];
    check_context("reference gradient, %s", fmk_kernel_name(kernel));
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 11, src);
    test_charges(n, cplx, 12, q);
    for (int t = 0; t < 5; t++) {
        double y[3];
        test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, 1, 100 + t, y);
        test_reference(kernel, 0.1, n, src, q, 1, y, NULL, grad);
        const double h = 1e-5;
        double fd[3], scale = 0;
        for (int k = 0; k < (cplx ? 1 : dim); k++) {
            for (int c = 0; c < dim; c++)
                trg[c] = y[c];
            trg[k] = y[k] + h;
            test_reference(kernel, 0.1, n, src, q, 1, trg, pot_p, NULL);
            trg[k] = y[k] - h;
            test_reference(kernel, 0.1, n, src, q, 1, trg, pot_m, NULL);
            if (cplx) /* analytic: dphi/dz equals the derivative along x */
                fd[0] = (pot_p[0] - pot_m[0]) / (2 * h), fd[1] = (pot_p[1] - pot_m[1]) / (2 * h);
            else
                fd[k] = (pot_p[0] - pot_m[0]) / (2 * h);
        }
        (void)pw;
        double err = 0;
        for (int k = 0; k < gw; k++) {
            err = fmax(err, fabs(fd[k] - grad[k]));
            scale = fmax(scale, fabs(grad[k]));
        }
        CHECK_LE(err / scale, 1e-6, "finite-difference mismatch of the reference gradient");
    }
}

/* Library results for one precision and thread count. */
static void run(fmk_kernel kernel, fmk_precision prec, int threads, int64_t ns, const double *src,
                const double *q, int64_t nt, const double *trg, double *pot, double *grad)
{
    CHECK_STATUS(test_run(kernel, prec, threads, softening, ns, src, q, nt, trg, pot, grad),
                 FMK_OK);
}

static void check_case(fmk_kernel kernel, test_dist dist, int self)
{
    const int cplx = fmk_kernel_is_complex(kernel);
    const int pw = test_pot_width(kernel), gw = test_grad_width(kernel);
    const int dim = fmk_kernel_dim(kernel);
    const int64_t ns = n_sources[dim == 2], nt = self ? ns : n_targets[dim == 2];
    double *src = test_alloc(ns * dim), *trg = self ? NULL : test_alloc(nt * dim);
    double *q = test_alloc(ns * 2);
    double *ref_pot = test_alloc(nt * pw), *ref_grad = test_alloc(nt * gw);
    double *pot[2][2], *grad[2][2]; /* [precision][threads - 1] */
    /* Sources and targets are drawn together so the separation holds between them too. */
    const int64_t nall = ns + n_targets[dim == 2];
    double *all = test_alloc(nall * dim);
    test_points_separated(dist, nall, 1000 + dist, min_separation(dist), all);
    memcpy(src, all, sizeof(double) * ns * dim);
    if (trg)
        memcpy(trg, all + ns * dim, sizeof(double) * nt * dim);
    free(all);
    test_charges(ns, cplx, 3000 + kernel, q);
    test_reference(kernel, softening, ns, src, q, nt, trg, ref_pot, ref_grad);

    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++) {
            fmk_precision prec = p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
            const double tol = p ? tol_fp32 : tol_fp64;
            pot[p][t] = test_alloc(nt * pw);
            grad[p][t] = test_alloc(nt * gw);
            check_context("%s, %s, %s, %s, %d thread%s", fmk_kernel_name(kernel),
                          test_dist_name(dist), self ? "targets = sources" : "separate targets",
                          p ? "fp32" : "fp64", t + 1, t ? "s" : "");
            run(kernel, prec, t + 1, ns, src, q, nt, trg, pot[p][t], grad[p][t]);
            double ep = test_rel_l2(pot[p][t], ref_pot, nt * pw);
            double eg = test_rel_l2(grad[p][t], ref_grad, nt * gw);
            CHECK_LE(ep, tol, "potential relative l2 error");
            CHECK_LE(eg, tol, "gradient relative l2 error");
            if (t == 1) {
                CHECK_LE(test_rel_l2(pot[p][1], pot[p][0], nt * pw), tol_threads,
                         "potential, 2 threads vs 1 thread");
                CHECK_LE(test_rel_l2(grad[p][1], grad[p][0], nt * gw), tol_threads,
                         "gradient, 2 threads vs 1 thread");
            }
        }
    check_context("%s, %s, %s, fp32 vs fp64", fmk_kernel_name(kernel), test_dist_name(dist),
                  self ? "targets = sources" : "separate targets");
    CHECK_LE(test_rel_l2(pot[1][0], pot[0][0], nt * pw), tol_fp32, "potential, fp32 vs fp64");
    CHECK_LE(test_rel_l2(grad[1][0], grad[0][0], nt * gw), tol_fp32, "gradient, fp32 vs fp64");

    /* The outputs are independent: asking for one gives the same numbers as asking for both. */
    double *only = test_alloc(nt * (pw > gw ? pw : gw));
    run(kernel, FMK_PRECISION_FP64, 1, ns, src, q, nt, trg, only, NULL);
    CHECK(test_rel_l2(only, pot[0][0], nt * pw) == 0);
    run(kernel, FMK_PRECISION_FP64, 1, ns, src, q, nt, trg, NULL, only);
    CHECK(test_rel_l2(only, grad[0][0], nt * gw) == 0);
    free(only);

    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++)
            free(pot[p][t]), free(grad[p][t]);
    free(src), free(trg), free(q), free(ref_pot), free(ref_grad);
}

int main(void)
{
    const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                  FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};
    for (int k = 0; k < 5; k++)
        check_reference_gradients(kernels[k]);
    for (int k = 0; k < 5; k++)
        for (int d = 0; d < TEST_DIST_COUNT; d++) {
            if (test_dist_dim((test_dist)d) != fmk_kernel_dim(kernels[k]))
                continue;
            check_case(kernels[k], (test_dist)d, 1);
            check_case(kernels[k], (test_dist)d, 0);
        }
    return check_summary();
}
