/* test_exact.c -- the fp64 direct sum is exact to rounding for any finite input (core/internal.h,
 * the exact frame): far outliers (1e6 .. 1e300 from a unit cube), boxes at the ends of the double
 * range, a cluster far from the origin, and pairs far closer than the box (1e-200 apart in a unit
 * box), against the long-double, compensated reference of testutil.c, for every kernel (the
 * smooth ones where the softening is resolvable). Relative l2 errors of the potential and of the
 * gradient <= 1e-14 each. Before the exact frame the outlier at 1e12 cost 3e-3 and at 1e14 up
 * to 100%. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

static const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED,
                                     FMK_KERNEL_LOG2D, FMK_KERNEL_CAUCHY2D};

/* A point set and its charges: n points of dim coordinates built by make(), charges uniform
 * in [-1, 1] times charge_scale. */
typedef struct exact_case {
    const char *name;
    double outlier;      /* one point at (outlier, ..., outlier); 0: none */
    double scale, shift; /* x = unit cube * scale + shift */
    double charge_scale;
    double tiny; /* > 0: points at (tiny, 0..), (2 tiny, 0..), (2 tiny, 0..) (two equal) */
} exact_case;

static const exact_case cases[] = {
    {"unit cube + outlier at 1e6", 1e6, 1, 0, 1, 0},
    {"unit cube + outlier at 1e12", 1e12, 1, 0, 1, 0},
    {"unit cube + outlier at 1e14", 1e14, 1, 0, 1, 0},
    {"unit cube + outlier at 1e300", 1e300, 1, 0, 1, 0},
    {"cube of 1e300, charges 1e300", 0, 1e300, 0, 1e300, 0},
    {"cube of 1e-300, charges 1e-300", 0, 1e-300, 0, 1e-300, 0},
    {"cube of 1e-300 + outlier at 1e-10, charges 1e-300", 1e-10, 1e-300, 0, 1e-300, 0},
    {"unit cube at 1e8", 0, 1, 1e8, 1, 0},
    {"unit cube at 1e8 + outlier at 1e15", 1e15, 1, 1e8, 1, 0},
    {"unit cube + pairs 1e-200 apart, charges 1e-220", 0, 1, 0, 1e-220, 1e-200},
    {"unit cube + pairs 1e-300 apart, charges 1e-300", 0, 1, 0, 1e-300, 1e-300},
};

/* Fills x (n points) and q for case c; returns the number of points. */
static int64_t make_case(const exact_case *c, int dim, int cplx, int64_t n, uint64_t seed,
                         double *x, double *q)
{
    test_points_separated(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, seed, 0.01, x);
    for (int64_t i = 0; i < n * dim; i++)
        x[i] = x[i] * c->scale + c->shift;
    test_charges(n, cplx, seed + 1, q);
    if (c->outlier != 0)
        for (int k = 0; k < dim; k++)
            x[dim * (n - 1) + k] = c->outlier;
    if (c->tiny > 0) /* three points near the origin: a close pair and a coincident one */
        for (int p = 0; p < 3; p++)
            for (int k = 0; k < dim; k++)
                x[dim * p + k] = k == 0 ? (p ? 2 : 1) * c->tiny : 0;
    for (int64_t i = 0; i < n * (cplx ? 2 : 1); i++)
        q[i] *= c->charge_scale;
    return n;
}

/* The direct sum of case c for kernel k, at the sources and at separate targets (the second
 * half of the points), against the reference. */
static void check_case(fmk_kernel k, const exact_case *c, double worst[2])
{
    const int dim = fmk_kernel_dim(k), cplx = fmk_kernel_is_complex(k);
    const int smooth = k == FMK_KERNEL_PLUMMER || k == FMK_KERNEL_REGULARIZED;
    const int64_t n = k == FMK_KERNEL_LAPLACE ? 1001 : 400;
    const int pw = test_pot_width(k), gw = test_grad_width(k);
    double *x = test_alloc(n * dim), *q = test_alloc(2 * n);
    double *pot = test_alloc(n * pw), *grad = test_alloc(n * gw);
    double *rp = test_alloc(n * pw), *rg = test_alloc(n * gw);
    make_case(c, dim, cplx, n, 7, x, q);
    const double softening = smooth ? 0.05 * c->scale : 0;
    for (int sep = 0; sep < 2; sep++) {
        /* sep: sources the first half, targets the second */
        const int64_t ns = sep ? n / 2 : n, nt = sep ? n - n / 2 : 0;
        const double *trg = sep ? x + dim * ns : NULL;
        const int64_t m = sep ? nt : ns;
        check_context("%s, %s, %s", fmk_kernel_name(k), c->name,
                      sep ? "separate targets" : "targets = sources");
        fmk_status st = test_run(k, FMK_PRECISION_FP64, 2, softening, ns, x, q, nt, trg, pot, grad);
        if (smooth && st == FMK_ERR_ARG) /* a softening below 1e-15 of the box: refused */
            continue;
        if (!CHECK_MSG(st == FMK_OK, "status %d: %s", (int)st, fmk_plan_last_error(NULL)))
            continue;
        test_reference(k, softening, ns, x, q, nt, trg, rp, rg);
        const double ep = test_rel_l2(pot, rp, m * pw), eg = test_rel_l2(grad, rg, m * gw);
        CHECK_LE(ep, 1e-14, "potential relative l2 error");
        CHECK_LE(eg, 1e-14, "gradient relative l2 error");
        worst[0] = fmax(worst[0], ep), worst[1] = fmax(worst[1], eg);
    }
    free(x), free(q), free(pot), free(grad), free(rp), free(rg);
}

/* The repro: 2000 points in the unit cube and one at 1e12, 1e14; before the exact frame
 * the potential erred by 3e-3 and up to 100%. Also the fp32 direct sum, which keeps the box
 * frame: it cannot resolve the cube beside such an outlier, and refuses the points. */
static void outlier_repro(void)
{
    const int64_t n = 2001;
    double *x = test_alloc(3 * n), *q = test_alloc(n), *pot = test_alloc(n),
           *grad = test_alloc(3 * n), *rp = test_alloc(n), *rg = test_alloc(3 * n);
    test_points(TEST_DIST_CUBE, n, 11, x);
    test_charges(n, 0, 12, q);
    const double far[2] = {1e12, 1e14};
    for (int f = 0; f < 2; f++) {
        x[3 * (n - 1)] = x[3 * (n - 1) + 1] = x[3 * (n - 1) + 2] = far[f];
        test_reference(FMK_KERNEL_LAPLACE, 0, n, x, q, 0, NULL, rp, rg);
        for (int p = 0; p < 2; p++) {
            check_context("laplace, 2000 points and one at %g, %s", far[f], p ? "fp32" : "fp64");
            CHECK_STATUS(test_run(FMK_KERNEL_LAPLACE, p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64,
                                  2, 0, n, x, q, 0, NULL, pot, grad),
                         p ? FMK_ERR_ACCURACY : FMK_OK);
            if (p)
                continue;
            const double ep = test_rel_l2(pot, rp, n), eg = test_rel_l2(grad, rg, 3 * n);
            printf("2000 + one at %g, fp64: potential %.2e, gradient %.2e\n", far[f], ep, eg);
            CHECK_LE(ep, 1e-14, "potential relative l2 error");
            CHECK_LE(eg, 1e-14, "gradient relative l2 error");
        }
    }
    free(x), free(q), free(pot), free(grad), free(rp), free(rg);
}

/* Coincident means equal inputs in fp64: P1 = (2^-1074, 0, 0), the smallest distinct double
 * from 0, sees P0 = P3 = 0 (charges 2^-1074: each term is 1), while P0 and P3, equal, do not see
 * each other. */
static void smallest_distance(void)
{
    const double t = 0x1p-1074;
    double x[12] = {0, 0, 0, t, 0, 0, 1, 1, 1, 0, 0, 0}, q[4] = {t, t, 0.5, t}, pot[4];
    check_context("laplace, sources 2^-1074 apart");
    const fmk_status st =
        test_run(FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, 1, 0, 4, x, q, 0, NULL, pot, NULL);
    if (CHECK_MSG(st == FMK_OK, "status %d", (int)st)) {
        const double want[2] = {1 + 0.5 / sqrt(3.0), 2 + 0.5 / sqrt(3.0)};
        for (int i = 0; i < 2; i++)
            CHECK_MSG(fabs(pot[i] - want[i]) <= 1e-15 * want[i], "pot[%d] = %.17g, expected %.17g",
                      i, pot[i], want[i]);
        CHECK_MSG(pot[3] == pot[0], "pot[3] = %.17g, pot[0] = %.17g", pot[3], pot[0]);
    }
}

int main(void)
{
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double worst[2] = {0, 0};
        for (int k = 0; k < 5; k++)
            check_case(kernels[k], &cases[c], worst);
        printf("%-50s worst over the kernels: potential %.2e, gradient %.2e\n", cases[c].name,
               worst[0], worst[1]);
    }
    outlier_repro();
    smallest_distance();
    return check_summary();
}
