/* test_coincident.c -- the self-term and coincidence rules of fmmkit.h and docs/kernels.md:
 *   - targets = sources (targets NULL): the term j = i is left out, for every kernel;
 *   - a source at r = 0 from a target contributes nothing for laplace, log2d, cauchy2d, and its
 *     finite value for plummer (q / s) and regularized (1.5 q / s);
 *   - "r = 0" means equal after mapping to the frame and rounding to the working precision:
 *     equal inputs in fp64 (the exact frame), equal in the box frame's fp32 coordinates in fp32. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

static const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                     FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};
static const double softening = 0.05;

static int all_finite(const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* Library vs reference for one point set, both precisions. */
static void compare(fmk_kernel k, int64_t ns, const double *src, const double *q, int64_t nt,
                    const double *trg)
{
    const int64_t m = trg ? nt : ns;
    const int pw = test_pot_width(k), gw = test_grad_width(k);
    double *rp = test_alloc(m * pw), *rg = test_alloc(m * gw);
    double *pot = test_alloc(m * pw), *grad = test_alloc(m * gw);
    test_reference(k, softening, ns, src, q, nt, trg, rp, rg);
    for (int p = 0; p < 2; p++) {
        const double tol = p ? 1e-5 : 1e-13;
        CHECK_STATUS(test_run(k, p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64, 0, softening, ns, src,
                              q, nt, trg, pot, grad),
                     FMK_OK);
        CHECK(all_finite(pot, m * pw) && all_finite(grad, m * gw));
        CHECK_LE(test_rel_l2(pot, rp, m * pw), tol,
                 p ? "fp32 potential error" : "fp64 potential error");
        CHECK_LE(test_rel_l2(grad, rg, m * gw), tol,
                 p ? "fp32 gradient error" : "fp64 gradient error");
    }
    free(rp), free(rg), free(pot), free(grad);
}

/* Duplicated sources (a pair and a triple) with targets = sources, and separate targets that
 * sit exactly on sources. */
static void duplicates(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int64_t n = 300, nt = 100;
    double *src = test_alloc(n * dim), *trg = test_alloc(nt * dim), *q = test_alloc(2 * n);
    double *all = test_alloc((n + nt) * dim);
    test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n + nt, 77, 0.03, all);
    for (int64_t i = 0; i < n * dim; i++)
        src[i] = all[i];
    for (int64_t i = 0; i < nt * dim; i++)
        trg[i] = all[n * dim + i];
    for (int c = 0; c < dim; c++) {
        src[dim * 1 + c] = src[c];                                 /* 1 == 0 */
        src[dim * 11 + c] = src[dim * 12 + c] = src[dim * 10 + c]; /* 10 == 11 == 12 */
        trg[c] = src[dim * 5 + c];                                 /* targets on sources */
        trg[dim * 3 + c] = src[dim * 10 + c];                      /* on the triple */
    }
    test_charges(n, cplx, 5, q);
    check_context("%s, duplicated sources, targets = sources", fmk_kernel_name(k));
    compare(k, n, src, q, 0, NULL);
    check_context("%s, targets on sources", fmk_kernel_name(k));
    compare(k, n, src, q, nt, trg);
    free(src), free(trg), free(q), free(all);
}

/* Two coincident sources and targets = sources: each sees the other only through a smooth
 * kernel, at r = 0: q/s (plummer), 1.5 q/s (regularized), nothing for the singular kernels.
 * The gradient at r = 0 is zero for all. Also a single source: its self term is left out. */
static void two_coincident(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    double src[6] = {0.3, -0.7, 0.3, -0.7}, q[4] = {2.0, 0.5, 3.0, -1.5}, pot[4], grad[6];
    if (dim == 3)
        src[0] = src[3] = 0.3, src[1] = src[4] = -0.7, src[2] = src[5] = 1.1;
    double expect[2] = {0, 0}; /* potential at target 0 from source 1 (real part) */
    if (k == FMK_KERNEL_PLUMMER)
        expect[0] = q[1] / softening, expect[1] = q[0] / softening;
    if (k == FMK_KERNEL_REGULARIZED)
        expect[0] = 1.5 * q[1] / softening, expect[1] = 1.5 * q[0] / softening;
    for (int p = 0; p < 2; p++) {
        check_context("%s, two coincident sources, targets = sources, %s", fmk_kernel_name(k),
                      p ? "fp32" : "fp64");
        const double tol = p ? 1e-6 : 1e-15;
        CHECK_STATUS(test_run(k, p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64, 1, softening, 2, src,
                              q, 0, NULL, pot, grad),
                     FMK_OK);
        for (int i = 0; i < 2; i++) {
            double v = cplx ? pot[2 * i] : pot[i];
            CHECK_MSG(fabs(v - expect[i]) <= tol * fabs(expect[i]),
                      "pot[%d] = %.17g, expected %.17g", i, v, expect[i]);
            if (cplx)
                CHECK_MSG(pot[2 * i + 1] == 0, "Im pot[%d] = %g, expected 0", i, pot[2 * i + 1]);
        }
        for (int i = 0; i < 2 * (cplx ? 2 : dim); i++)
            CHECK_MSG(grad[i] == 0, "grad[%d] = %g, expected 0", i, grad[i]);

        check_context("%s, one source, targets = sources, %s", fmk_kernel_name(k),
                      p ? "fp32" : "fp64");
        pot[0] = pot[1] = grad[0] = grad[1] = 99;
        CHECK_STATUS(test_run(k, p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64, 1, softening, 1, src,
                              q, 0, NULL, pot, grad),
                     FMK_OK);
        CHECK_MSG(pot[0] == 0 && grad[0] == 0 && grad[1] == 0,
                  "a lone source sees itself: pot %g grad %g %g", pot[0], grad[0], grad[1]);
    }
}

/* Passing the sources again as an explicit target array is not "targets = sources": nothing is
 * left out by index, so each target sits on its own source (r = 0) and the rule for coincident
 * points applies: the smooth kernels add their finite self value, the singular ones nothing. */
static void explicit_same_array(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int64_t n = 200;
    const int pw = test_pot_width(k);
    double *src = test_alloc(n * dim), *q = test_alloc(2 * n);
    double *p_self = test_alloc(n * pw), *p_expl = test_alloc(n * pw);
    test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 9, 0.03, src);
    test_charges(n, cplx, 9, q);
    check_context("%s, targets = the sources' array passed explicitly", fmk_kernel_name(k));
    CHECK_STATUS(test_run(k, FMK_PRECISION_FP64, 0, softening, n, src, q, 0, NULL, p_self, NULL),
                 FMK_OK);
    CHECK_STATUS(test_run(k, FMK_PRECISION_FP64, 0, softening, n, src, q, n, src, p_expl, NULL),
                 FMK_OK);
    double self_value = k == FMK_KERNEL_PLUMMER       ? 1 / softening
                        : k == FMK_KERNEL_REGULARIZED ? 1.5 / softening
                                                      : 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = p_expl[pw * i] - p_self[pw * i] - self_value * q[cplx ? 2 * i : i];
        worst = fmax(worst, fabs(d) / (fabs(p_expl[pw * i]) + 1));
    }
    CHECK_LE(worst, 1e-13, "explicit minus implicit minus the self value");
    free(src), free(q), free(p_self), free(p_expl);
}

/* "Coincident" means equal after mapping (docs/kernels.md). fp32 works in the box frame: the
 * sources span [-1, 1] (frame width 2, centre 0), so at 1e-9 from A = 0.25 a point B maps onto A
 * (mapped spacing 2^-22 there) and the pair would add nothing, far from the exact sum: the fp32
 * direct sum's guard refuses such points (the softened kernels, flat at that range, take them).
 * fp64 works in the exact frame, where
 * coincident means equal inputs: B = nextafter(A), 2^-54 from A, is a distinct point and its
 * (huge) pair term is there, as is that of B = A + 1e-9, both exact to rounding. */
static void coincident_after_mapping(fmk_kernel k)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int n = 12;
    double src[3 * 12], snapped[3 * 12], q[2 * 12], pot[2 * 12], ref[2 * 12];
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 31, src);
    for (int i = 0; i < n * dim; i++)
        src[i] = 1.6 * src[i] - 0.8; /* inside (-0.8, 0.8) */
    for (int c = 0; c < dim; c++) {
        src[c] = -1, src[dim + c] = 1;              /* the box: [-1, 1]^dim */
        src[2 * dim + c] = src[3 * dim + c] = 0.25; /* A and B */
    }
    test_charges(n, cplx, 31, q);
    /* fp32: B = A + 1e-9 coincides with A */
    src[3 * dim] = 0.25 + 1e-9;
    for (int i = 0; i < n * dim; i++)
        snapped[i] = src[i];
    snapped[3 * dim] = 0.25;
    check_context("%s, points equal after mapping, fp32", fmk_kernel_name(k));
    CHECK_STATUS(test_run(k, FMK_PRECISION_FP32, 1, softening, n, src, q, 0, NULL, pot, NULL),
                 k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED ? FMK_OK
                                                                        : FMK_ERR_ACCURACY);
    /* with B moved onto A the fp32 sum is fine */
    check_context("%s, B moved onto A, fp32", fmk_kernel_name(k));
    CHECK_STATUS(test_run(k, FMK_PRECISION_FP32, 1, softening, n, snapped, q, 0, NULL, pot, NULL),
                 FMK_OK);
    test_reference(k, softening, n, snapped, q, 0, NULL, ref, NULL);
    CHECK(all_finite(pot, n * (cplx ? 2 : 1)));
    CHECK_LE(test_rel_l2(pot, ref, n * (cplx ? 2 : 1)), 1e-5,
             "potential vs the reference with B on A");
    /* fp64: B distinct from A however close */
    for (int b = 0; b < 2; b++) {
        src[3 * dim] = b ? 0.25 + 1e-9 : nextafter(0.25, 1.0);
        check_context("%s, B = %s, fp64", fmk_kernel_name(k), b ? "A + 1e-9" : "nextafter(A)");
        CHECK_STATUS(test_run(k, FMK_PRECISION_FP64, 1, softening, n, src, q, 0, NULL, pot, NULL),
                     FMK_OK);
        test_reference(k, softening, n, src, q, 0, NULL, ref, NULL);
        CHECK(all_finite(pot, n * (cplx ? 2 : 1)));
        CHECK_LE(test_rel_l2(pot, ref, n * (cplx ? 2 : 1)), 1e-14,
                 "potential vs the exact reference");
    }
}

int main(void)
{
    for (int i = 0; i < 5; i++) {
        duplicates(kernels[i]);
        two_coincident(kernels[i]);
        explicit_same_array(kernels[i]);
        coincident_after_mapping(kernels[i]);
    }
    return check_summary();
}
