/* test_resolution.c -- the resolution guard's bound from the softening alone
 * (fmk_resolution_softened_meets, src/tree/resolution.h): on many point sets and mapped
 * softenings, the estimate itself (fmk_resolution_estimate_points) never exceeds
 * C delta / (2 s) (potential) and 2 C delta / s (gradient), delta the frame's unit plus the
 * local unit times the frame's width; and where the bound meets tol, the guard's verdict on
 * the estimate is a pass too. Internal (links the static library). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tree/resolution.h"
#include "check.h"
#include "testutil.h"

/* Points mapped into [1, 2)^3 the way the frame maps them: the set scaled into the unit cube. */
static void mapped(test_dist dist, int64_t n, uint64_t seed, double *x)
{
    test_points(dist, n, seed, x);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < 3 * n; i++)
        lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    const double w = hi > lo ? 1.0001 * (hi - lo) : 1;
    for (int64_t i = 0; i < 3 * n; i++)
        x[i] = 1 + (x[i] - lo) / w;
}

/* a coincident group of n / 4 points and a tight cluster of n / 4 (radius 1e-9) */
static void crowded(int64_t n, uint64_t seed, double *x)
{
    mapped(TEST_DIST_CUBE, n, seed, x);
    for (int64_t i = 0; i < n / 4; i++)
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = 1.25;
    for (int64_t i = n / 4; i < n / 2; i++)
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = 1.75 + 1e-9 * (x[3 * i + k] - 1.5);
}

static void check_set(const char *name, const double *x, int64_t n, fmk_kernel kernel)
{
    const double softenings[] = {1e-9, 1e-7, 1e-5, 1e-3, 1e-1};
    for (int fp32 = 0; fp32 < 2; fp32++)
        for (size_t k = 0; k < sizeof softenings / sizeof *softenings; k++) {
            const double s = softenings[k];
            check_context("%s, %s, %s, mapped softening %g", name, fmk_kernel_name(kernel),
                          fp32 ? "fp32 local unit" : "fp64", s);
            fmk_plan plan;
            memset(&plan, 0, sizeof plan);
            plan.dim = 3, plan.kernel = kernel, plan.threads = 2, plan.self = 1;
            plan.sources = (double *)x, plan.raw_sources = x, plan.n_sources = n;
            plan.frame.softening = s, plan.frame.width = 1;
            fmk_resolution_opts o = {1e-6, FMK_RESOLUTION_FP64, 0, 0, 0};
            if (fp32)
                o.local_unit = FMK_RESOLUTION_FP32_LOCAL, o.local_points = 32;
            fmk_resolution_est e;
            CHECK_STATUS(fmk_resolution_estimate_points(&plan, &o, x, n, NULL, 0, &e), FMK_OK);
            const double delta = o.frame_unit + o.local_unit;
            const double bp = FMK_RESOLUTION_C * delta / (2 * s);
            const double bg = 2 * FMK_RESOLUTION_C * delta / s;
            CHECK_MSG(e.pot <= bp * (1 + 1e-12), "estimate %.3g above the bound %.3g", e.pot, bp);
            CHECK_MSG(e.grad <= bg * (1 + 1e-12), "gradient estimate %.3g above the bound %.3g",
                      e.grad, bg);
            /* tol at the bound: the shortcut passes, and so does the estimate */
            o.tol = fmax(bp, bg / 10);
            CHECK(fmk_resolution_softened_meets(kernel, &o, s, o.frame_unit, 1.0));
            CHECK(fmk_resolution_meets(kernel, e.pot, e.grad, o.tol));
            /* below it the shortcut declines (the estimate decides) */
            o.tol *= 0.5;
            CHECK(!fmk_resolution_softened_meets(kernel, &o, s, o.frame_unit, 1.0));
        }
    /* no softening: never a shortcut */
    fmk_resolution_opts o = {1, FMK_RESOLUTION_FP64, 0, 0, 0};
    CHECK(!fmk_resolution_softened_meets(FMK_KERNEL_LAPLACE, &o, 0, o.frame_unit, 1.0));
}

int main(void)
{
    const int64_t n = 3000;
    double *x = test_alloc(3 * n);
    const test_dist sets[] = {TEST_DIST_CUBE, TEST_DIST_PLUMMER, TEST_DIST_CLUSTERED,
                              TEST_DIST_SPHERE};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        mapped(sets[i], n, 7 + i, x);
        check_set(test_dist_name(sets[i]), x, n, FMK_KERNEL_PLUMMER);
        check_set(test_dist_name(sets[i]), x, n, FMK_KERNEL_REGULARIZED);
    }
    crowded(n, 11, x);
    check_set("coincident group and tight cluster", x, n, FMK_KERNEL_PLUMMER);
    free(x);
    return check_summary();
}
