/* test_scale.c -- results do not depend on where the points sit or on their scale: the unit
 * cube (unit square in 2D) scaled by 1e-9 and 1e10, and offset by 1e8, against the reference
 * computed from the very coordinates passed in. The frame maps every box to [1, 2], so the
 * relative errors are those of the unit cube, in fp64 and fp32 alike. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

static const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                     FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};

typedef struct transform {
    const char *name;
    double scale, offset;
} transform;

static const transform transforms[] = {{"unit", 1, 0},
                                       {"scaled by 1e-9", 1e-9, 0},
                                       {"scaled by 1e10", 1e10, 0},
                                       {"offset by 1e8", 1, 1e8},
                                       {"scaled by 1e-9, offset by 1e-3", 1e-9, 1e-3}};

static void check_transform(fmk_kernel k, const transform *t, int self)
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int64_t ns = dim == 3 ? 600 : 300, nt = self ? ns : 200;
    const int pw = test_pot_width(k), gw = test_grad_width(k);
    const double softening = 0.02 * t->scale;
    double *all = test_alloc((ns + 200) * dim), *q = test_alloc(2 * ns);
    double *rp = test_alloc(nt * pw), *rg = test_alloc(nt * gw);
    double *pot = test_alloc(nt * pw), *grad = test_alloc(nt * gw);
    test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, ns + 200, 4242,
                          dim == 3 ? 0.03 : 0.03, all);
    for (int64_t i = 0; i < (ns + 200) * dim; i++)
        all[i] = all[i] * t->scale + t->offset;
    const double *src = all, *trg = self ? NULL : all + ns * dim;
    test_charges(ns, cplx, 17, q);
    test_reference(k, softening, ns, src, q, nt, trg, rp, rg);
    for (int p = 0; p < 2; p++) {
        const double tol = p ? 1e-5 : 1e-13;
        check_context("%s, unit %s %s, %s, %s", fmk_kernel_name(k), dim == 3 ? "cube" : "square",
                      t->name, self ? "targets = sources" : "separate targets",
                      p ? "fp32" : "fp64");
        CHECK_STATUS(test_run(k, p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64, 0, softening, ns, src,
                              q, nt, trg, pot, grad),
                     FMK_OK);
        CHECK_LE(test_rel_l2(pot, rp, nt * pw), tol, "potential relative l2 error");
        CHECK_LE(test_rel_l2(grad, rg, nt * gw), tol, "gradient relative l2 error");
    }
    free(all), free(q), free(rp), free(rg), free(pot), free(grad);
}

/* Scaling by a power of two is exact in the frame: laplace potentials scale by exactly 1/2^k and
 * gradients by 1/4^k. */
static void power_of_two_scaling(void)
{
    const int64_t n = 300;
    double *x = test_alloc(3 * n), *y = test_alloc(3 * n), *q = test_alloc(n);
    double *p1 = test_alloc(n), *g1 = test_alloc(3 * n), *p2 = test_alloc(n),
           *g2 = test_alloc(3 * n);
    test_points(TEST_DIST_CUBE, n, 5, x);
    test_charges(n, 0, 5, q);
    for (int64_t i = 0; i < 3 * n; i++)
        y[i] = ldexp(x[i], -40);
    check_context("laplace, unit cube scaled by 2^-40");
    CHECK_STATUS(test_run(FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, 1, 0, n, x, q, 0, NULL, p1, g1),
                 FMK_OK);
    CHECK_STATUS(test_run(FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, 1, 0, n, y, q, 0, NULL, p2, g2),
                 FMK_OK);
    int exact = 1;
    for (int64_t i = 0; i < n; i++) {
        exact &= p2[i] == ldexp(p1[i], 40);
        for (int c = 0; c < 3; c++)
            exact &= g2[3 * i + c] == ldexp(g1[3 * i + c], 80);
    }
    CHECK_MSG(exact,
              "results at scale 2^-40 are not exactly 2^40 (potential), 2^80 (gradient) times "
              "those at scale 1");
    free(x), free(y), free(q), free(p1), free(g1), free(p2), free(g2);
}

/* Boxes near the ends of the double range: results that are representable come out right.
 * A box of 1e-160 has 1/width^2 beyond the largest double, yet with charges of 1e-20 the
 * gradient (about 1e300) is representable; a box of 1e300 has gradients that underflow. */
static void extreme_scales(void)
{
    const double scales[] = {1e-160, 1e-300, 1e150, 1e300};
    const double charge_scale[] = {1e-20, 1e-300, 1, 1};
    const int64_t n = 40;
    for (int s = 0; s < 4; s++) {
        for (int kk = 0; kk < 5; kk++) {
            const fmk_kernel k = kernels[kk];
            const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
            const int pw = test_pot_width(k), gw = test_grad_width(k);
            double x[3 * 40], q[2 * 40], pot[2 * 40], grad[3 * 40], rp[2 * 40], rg[3 * 40];
            test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 99, 0.05, x);
            test_charges(n, cplx, 99, q);
            for (int i = 0; i < n * dim; i++)
                x[i] *= scales[s];
            for (int i = 0; i < n * (cplx ? 2 : 1); i++)
                q[i] *= charge_scale[s];
            check_context("%s, box %g, charges %g", fmk_kernel_name(k), scales[s], charge_scale[s]);
            CHECK_STATUS(
                test_run(k, FMK_PRECISION_FP64, 1, 0.02 * scales[s], n, x, q, 0, NULL, pot, grad),
                FMK_OK);
            test_reference(k, 0.02 * scales[s], n, x, q, 0, NULL, rp, rg);
            int finite = 1;
            for (int i = 0; i < n * gw; i++)
                finite &= isfinite(rg[i]) ? isfinite(grad[i]) : 1;
            CHECK_MSG(finite, "a representable gradient came out Inf or NaN");
            CHECK_LE(test_rel_l2(pot, rp, n * pw), 1e-13, "potential relative l2 error");
            /* gradients of a 1e300 box underflow into subnormals: compare where they are normal */
            if (scales[s] < 1e200)
                CHECK_LE(test_rel_l2(grad, rg, n * gw), 1e-13, "gradient relative l2 error");
        }
    }
}

int main(void)
{
    for (int k = 0; k < 5; k++)
        for (size_t t = 0; t < sizeof transforms / sizeof transforms[0]; t++) {
            check_transform(kernels[k], &transforms[t], 1);
            check_transform(kernels[k], &transforms[t], 0);
        }
    power_of_two_scaling();
    extreme_scales();
    return check_summary();
}
