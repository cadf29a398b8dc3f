/* test_memory.c -- fmk_plan_memory at sizes no machine holds: every CPU engine's estimate either
 * comes out as a plausible count (at least the points' own bytes, growing with the sizes) or is
 * refused with FMK_ERR_ARG and a message, never a wrapped number (2^60 points once came out as
 * 48 bytes). Run under the sanitizer build, a signed overflow anywhere in the arithmetic fails
 * the test outright. */
#include <stdint.h>

#include "check.h"

typedef struct engine_case {
    fmk_method method;
    int dim;
    fmk_kernel kernel;
    fmk_precision precision;
} engine_case;

static const engine_case cases[] = {
    {FMK_METHOD_DIRECT, 3, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64},
    {FMK_METHOD_DIRECT, 3, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP32},
    {FMK_METHOD_DIRECT, 2, FMK_KERNEL_LOG2D, FMK_PRECISION_FP64},
    {FMK_METHOD_TREE, 3, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64},
    {FMK_METHOD_FMM, 3, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64},
    {FMK_METHOD_FMM, 3, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP32},
    {FMK_METHOD_FMM, 2, FMK_KERNEL_LOG2D, FMK_PRECISION_FP64},
};

static int has_message(const fmk_plan *plan)
{
    const char *m = fmk_plan_last_error(plan);
    return m && m[0];
}

/* The estimate for (ns, nt): OK with a count of at least the points' bytes, or FMK_ERR_ARG
 * with a message and the outputs untouched. Returns the host bytes, or -1 if refused. */
static int64_t estimate(const fmk_plan *plan, int dim, int64_t ns, int64_t nt)
{
    int64_t h = -7, d = -7;
    fmk_status st = fmk_plan_memory(plan, ns, nt, &h, &d);
    CHECK_MSG(st == FMK_OK || st == FMK_ERR_ARG, "ns = %lld, nt = %lld: status %d", (long long)ns,
              (long long)nt, (int)st);
    if (st != FMK_OK) {
        CHECK(has_message(plan));
        CHECK(h == -7 && d == -7);
        return -1;
    }
    /* the points alone: (ns + nt) * dim doubles, computed in long double to stay exact */
    const long double points = ((long double)ns + (long double)(nt < 0 ? 0 : nt)) * dim * 8;
    CHECK_MSG((long double)h >= points, "ns = %lld, nt = %lld: %lld host bytes < the points' %Lg",
              (long long)ns, (long long)nt, (long long)h, points);
    CHECK_MSG(h < INT64_MAX && d >= 0 && d < INT64_MAX, "ns = %lld: h = %lld, d = %lld",
              (long long)ns, (long long)h, (long long)d);
    return h;
}

static void huge_sizes(const engine_case *c, int order, int64_t leaf_size)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.method = c->method;
    if (o.method == FMK_METHOD_TREE)
        o.theta = 0.6; /* the expert theta: eps here is below what the tree reaches */
    o.precision = c->precision;
    o.order = order;
    o.leaf_size = leaf_size;
    fmk_plan *plan = NULL;
    check_context("%s %dD %s precision %d order %d leaf %lld", fmk_method_name(c->method), c->dim,
                  fmk_kernel_name(c->kernel), (int)c->precision, order, (long long)leaf_size);
    fmk_status st = fmk_plan_create(&plan, c->dim, c->kernel, 1e-4, &o);
    if (!CHECK_MSG(st == FMK_OK, "create: %s", fmk_plan_last_error(NULL)))
        return;
    for (int self = 0; self < 2; self++) {
        /* counts a machine may hold, then more: each estimate at least the one before */
        int64_t last = 0;
        for (int e = 10; e <= 56; e += 2) {
            const int64_t n = (int64_t)1 << e;
            const int64_t h = estimate(plan, c->dim, n, self ? -1 : n);
            if (h < 0) { /* refused: every larger size is refused too */
                last = -1;
                continue;
            }
            CHECK_MSG(last >= 0, "2^%d points estimated after a smaller size was refused", e);
            CHECK_MSG(h >= last, "2^%d points: %lld bytes, fewer than %lld for 2^%d", e,
                      (long long)h, (long long)last, e - 2);
            last = h;
        }
        CHECK_MSG(estimate(plan, c->dim, (int64_t)1 << 40, self ? -1 : 0) > 0,
                  "2^40 points should be estimated");
        /* sizes beyond what a plan takes, or whose bytes overflow int64: refused */
        const int64_t beyond[] = {(int64_t)1 << 57, (int64_t)1 << 60, INT64_MAX / 8, INT64_MAX / 2,
                                  INT64_MAX};
        for (size_t k = 0; k < sizeof beyond / sizeof beyond[0]; k++) {
            int64_t h = -7, d = -7;
            CHECK_STATUS(fmk_plan_memory(plan, beyond[k], self ? -1 : 1, &h, &d), FMK_ERR_ARG);
            CHECK_STATUS(fmk_plan_memory(plan, 1, beyond[k], &h, &d), FMK_ERR_ARG);
            CHECK(has_message(plan));
            CHECK(h == -7 && d == -7);
        }
    }
    fmk_plan_destroy(plan);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        huge_sizes(&cases[i], -1, 0);
    /* the largest expansions and one point a leaf: the 3D FMM's bytes per point are largest
     * (16 (p + 1)(p + 2) a node), so 2^50 points must be refused, not wrapped */
    huge_sizes(&cases[4], 60, 1);
    {
        fmk_opts o;
        fmk_opts_default(&o);
        o.backend = FMK_BACKEND_CPU;
        o.method = FMK_METHOD_FMM;
        o.order = 60;
        o.leaf_size = 1;
        fmk_plan *plan = NULL;
        check_context("fmm order 60, leaf 1, 2^50 points");
        fmk_status st = fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o);
        if (CHECK_MSG(st == FMK_OK, "create: %s", fmk_plan_last_error(NULL))) {
            int64_t h = -7, d = -7;
            CHECK_STATUS(fmk_plan_memory(plan, (int64_t)1 << 50, -1, &h, &d), FMK_ERR_ARG);
            CHECK(h == -7 && d == -7);
            fmk_plan_destroy(plan);
        }
    }
    return check_summary();
}
