/* test_api.c -- misuse of the API: NULL plans, calls out of order, arguments out of range, bad
 * options, unavailable methods and backends. Every failure must return the documented status,
 * leave a non-empty message (on the plan, or on the thread for calls without a plan), and leave
 * the outputs untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

#define SENTINEL (-12345.678)

static void fill(double *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = SENTINEL;
}

static int untouched(const double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (x[i] != SENTINEL)
            return 0;
    return 1;
}

static int has_message(const fmk_plan *plan)
{
    const char *m = fmk_plan_last_error(plan);
    return m != NULL && m[0] != '\0';
}

/* fmk_plan_create must fail with status, set *plan to NULL and leave a thread message. */
static void create_fails(int dim, fmk_kernel k, double eps, const fmk_opts *o, fmk_status status,
                         const char *what)
{
    fmk_plan *plan = (fmk_plan *)&plan; /* not NULL: create must reset it */
    check_context("create with %s", what);
    fmk_plan_last_error(NULL); /* (the thread message is overwritten by the failure) */
    CHECK_STATUS(fmk_plan_create(&plan, dim, k, eps, o), status);
    CHECK(plan == NULL);
    CHECK(has_message(NULL));
    /* the one-shot call fails the same way */
    double src[3] = {0, 0, 0}, q[2] = {1, 0}, pot[2] = {SENTINEL, SENTINEL};
    CHECK_STATUS(fmk_eval(dim, k, eps, o, 1, src, q, 0, NULL, pot, NULL), status);
    CHECK(has_message(NULL));
    CHECK(untouched(pot, 2));
    plan = NULL;
}

static fmk_opts cpu_opts(void)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    return o;
}

static void create_arguments(void)
{
    fmk_opts o = cpu_opts();
    check_context("create with plan = NULL");
    CHECK_STATUS(fmk_plan_create(NULL, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_ERR_NULL);
    CHECK(has_message(NULL));

    create_fails(4, FMK_KERNEL_LAPLACE, 1e-6, &o, FMK_ERR_ARG, "dim 4");
    create_fails(1, FMK_KERNEL_LAPLACE, 1e-6, &o, FMK_ERR_ARG, "dim 1");
    create_fails(2, FMK_KERNEL_LAPLACE, 1e-6, &o, FMK_ERR_ARG, "laplace in 2D");
    create_fails(3, FMK_KERNEL_LOG2D, 1e-6, &o, FMK_ERR_ARG, "log2d in 3D");
    create_fails(3, FMK_KERNEL_CAUCHY2D, 1e-6, &o, FMK_ERR_ARG, "cauchy2d in 3D");
    create_fails(3, (fmk_kernel)0, 1e-6, &o, FMK_ERR_ARG, "kernel 0");
    create_fails(3, (fmk_kernel)99, 1e-6, &o, FMK_ERR_ARG, "kernel 99");
    create_fails(3, FMK_KERNEL_LAPLACE, 0, &o, FMK_ERR_ARG, "eps 0");
    create_fails(3, FMK_KERNEL_LAPLACE, 1, &o, FMK_ERR_ARG, "eps 1");
    create_fails(3, FMK_KERNEL_LAPLACE, -1, &o, FMK_ERR_ARG, "eps -1");
    create_fails(3, FMK_KERNEL_LAPLACE, NAN, &o, FMK_ERR_ARG, "eps NaN");
    create_fails(3, FMK_KERNEL_LAPLACE, INFINITY, &o, FMK_ERR_ARG, "eps Inf");

    /* NULL opts means defaults: valid */
    fmk_plan *plan = NULL;
    check_context("create with opts NULL");
    CHECK_STATUS(fmk_plan_create(&plan, 2, FMK_KERNEL_LOG2D, 1e-6, NULL), FMK_OK);
    fmk_plan_destroy(plan);
}

static void bad_options(void)
{
    fmk_opts o;
    const fmk_kernel lap = FMK_KERNEL_LAPLACE, plum = FMK_KERNEL_PLUMMER,
                     reg = FMK_KERNEL_REGULARIZED;
#define BAD(kernel, stmt, status)                         \
    do {                                                  \
        o = cpu_opts();                                   \
        o.softening = (kernel) == lap ? 0 : 0.1;          \
        stmt;                                             \
        create_fails(3, kernel, 1e-6, &o, status, #stmt); \
    } while (0)
    BAD(lap, o.method = (fmk_method)4, FMK_ERR_ARG);
    BAD(lap, o.method = (fmk_method)-1, FMK_ERR_ARG);
    BAD(lap, o.backend = (fmk_backend)3, FMK_ERR_ARG);
    BAD(lap, o.backend = (fmk_backend)-1, FMK_ERR_ARG);
    BAD(lap, o.precision = (fmk_precision)2, FMK_ERR_ARG);
    BAD(lap, o.precision = (fmk_precision)-1, FMK_ERR_ARG);
    BAD(lap, o.threads = -1, FMK_ERR_ARG);
    BAD(lap, o.device = -1, FMK_ERR_ARG);
    BAD(lap, o.order = -2, FMK_ERR_ARG);
    BAD(lap, o.order = 61, FMK_ERR_ARG);
    BAD(lap, o.leaf_size = -1, FMK_ERR_ARG);
    BAD(lap, o.theta = -0.5, FMK_ERR_ARG);
    BAD(lap, o.theta = 2, FMK_ERR_ARG);
    BAD(lap, o.theta = NAN, FMK_ERR_ARG);
    BAD(lap, o.verbose = 2, FMK_ERR_ARG);
    BAD(lap, o.walk = (fmk_walk)7, FMK_ERR_ARG);
    BAD(lap, o.softening = -1, FMK_ERR_ARG);
    BAD(lap, o.softening = NAN, FMK_ERR_ARG);
    BAD(plum, o.softening = 0, FMK_ERR_ARG);
    BAD(plum, o.softening = -0.1, FMK_ERR_ARG);
    BAD(plum, o.softening = NAN, FMK_ERR_ARG);
    BAD(plum, o.softening = INFINITY, FMK_ERR_ARG);
    BAD(reg, o.softening = 0, FMK_ERR_ARG);
    BAD(reg, o.softening = -0.1, FMK_ERR_ARG);
    BAD(reg, o.softening = NAN, FMK_ERR_ARG);
    BAD(reg, o.method = FMK_METHOD_TREE, FMK_ERR_UNAVAILABLE); /* tree: laplace, plummer */
#undef BAD

    /* the unavailable methods say so */
    const fmk_method later[1] = {FMK_METHOD_FMM};
    for (int i = 0; i < 1; i++) {
        fmk_plan *plan = NULL;
        o = cpu_opts();
        o.method = later[i];
        check_context("method %s", fmk_method_name(later[i]));
        /* fmm exists in 3D (laplace, plummer, regularized) and 2D (log2d, cauchy2d) on the
         * CPU; the 2D FMM works in fp64 only */
        o.precision = FMK_PRECISION_FP32;
        CHECK_STATUS(fmk_plan_create(&plan, 2, FMK_KERNEL_LOG2D, 1e-6, &o), FMK_ERR_UNAVAILABLE);
        CHECK_MSG(strstr(fmk_plan_last_error(NULL), "fp64") != NULL,
                  "message \"%s\" lacks \"fp64\"", fmk_plan_last_error(NULL));
        CHECK(fmk_method_available(later[i], 2, FMK_BACKEND_CPU) == 1); /* the 2D FMM */
    }
    check_context("method availability");
    CHECK(fmk_method_available(FMK_METHOD_TREE, 3, FMK_BACKEND_CPU) == 1);
    CHECK(fmk_method_available(FMK_METHOD_FMM, 3, FMK_BACKEND_CPU) == 1);
    CHECK(fmk_method_available(FMK_METHOD_TREE, 2, FMK_BACKEND_CPU) == 0);
    CHECK(fmk_method_available(FMK_METHOD_DIRECT, 3, FMK_BACKEND_CPU) == 1);
    CHECK(fmk_method_available(FMK_METHOD_DIRECT, 2, FMK_BACKEND_CPU) == 1);
    CHECK(fmk_method_available(FMK_METHOD_DIRECT, 4, FMK_BACKEND_CPU) == 0);
    CHECK(fmk_method_available(FMK_METHOD_DIRECT, 3, (fmk_backend)7) == 0);

    /* the CUDA backend on a machine (or build) without a GPU */
    check_context("backend cuda without a GPU");
    if (fmk_cuda_device_count() == 0) {
        o = cpu_opts();
        o.backend = FMK_BACKEND_CUDA;
        create_fails(3, FMK_KERNEL_LAPLACE, 1e-6, &o, FMK_ERR_UNAVAILABLE, "backend cuda, no GPU");
        CHECK(fmk_method_available(FMK_METHOD_DIRECT, 3, FMK_BACKEND_CUDA) == 0);
        /* AUTO resolves to the CPU */
        fmk_plan *plan = NULL;
        fmk_info info;
        CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, NULL), FMK_OK);
        CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
        CHECK(info.backend == FMK_BACKEND_CPU && info.method == FMK_METHOD_DIRECT);
        fmk_plan_destroy(plan);
    } else {
        printf("note: %d CUDA device(s) present; the no-GPU checks are skipped\n",
               fmk_cuda_device_count());
        o = cpu_opts();
        o.backend = FMK_BACKEND_CUDA;
        o.device = fmk_cuda_device_count();
        create_fails(3, FMK_KERNEL_LAPLACE, 1e-6, &o, FMK_ERR_ARG, "device beyond the last");
    }
}

/* Every plan function with plan = NULL. */
static void null_plan(void)
{
    double x[3] = {0, 0, 0}, q[1] = {1}, pot[1] = {SENTINEL}, grad[3];
    int64_t h = -7, d = -7;
    fmk_info info;
    fill(grad, 3);
    check_context("plan = NULL");
    CHECK_STATUS(fmk_plan_set_points(NULL, 1, x, 0, NULL), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK_STATUS(fmk_plan_eval(NULL, q, pot, grad), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK_STATUS(fmk_plan_eval_many(NULL, 1, q, pot, grad), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK_STATUS(fmk_plan_set_points_device(NULL, 1, x, 0, NULL), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK_STATUS(fmk_plan_eval_device(NULL, q, pot, grad), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK_STATUS(fmk_plan_memory(NULL, 10, -1, &h, &d), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK(h == -7 && d == -7);
    CHECK_STATUS(fmk_plan_info(NULL, &info), FMK_ERR_NULL);
    CHECK(has_message(NULL));
    CHECK(untouched(pot, 1) && untouched(grad, 3));
    fmk_plan_destroy(NULL); /* a no-op */
    CHECK(fmk_plan_last_error(NULL) != NULL);
}

/* Failures on a real plan: the message goes to the plan, outputs stay untouched. */
static void plan_misuse(void)
{
    fmk_opts o = cpu_opts();
    fmk_plan *plan = NULL;
    double src[3 * 4] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}, q[4] = {1, 2, 3, 4};
    double pot[4], grad[12];
    fill(pot, 4), fill(grad, 12);
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    if (!plan)
        return;
    CHECK_MSG(strcmp(fmk_plan_last_error(plan), "") == 0, "a new plan has message \"%s\"",
              fmk_plan_last_error(plan));

    check_context("eval before set_points");
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, grad), FMK_ERR_STATE);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_eval_many(plan, 2, q, pot, grad), FMK_ERR_STATE);
    CHECK(has_message(plan));
    CHECK(untouched(pot, 4) && untouched(grad, 12));

    check_context("set_points arguments");
    CHECK_STATUS(fmk_plan_set_points(plan, -1, src, 0, NULL), FMK_ERR_ARG);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_set_points(plan, 4, src, -2, src), FMK_ERR_ARG);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_set_points(plan, INT64_MAX, src, 0, NULL), FMK_ERR_ARG);
    CHECK_STATUS(fmk_plan_set_points(plan, 4, NULL, 0, NULL), FMK_ERR_NULL);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_set_points(plan, 4, src, 3, NULL), FMK_ERR_NULL);
    CHECK(has_message(plan));
    /* still no points */
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, grad), FMK_ERR_STATE);

    CHECK_PLAN_OK(fmk_plan_set_points(plan, 4, src, 0, NULL), plan);

    check_context("eval arguments");
    CHECK_STATUS(fmk_plan_eval(plan, q, NULL, NULL), FMK_ERR_ARG);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_eval(plan, NULL, pot, grad), FMK_ERR_NULL);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_eval_many(plan, 1, q, NULL, NULL), FMK_ERR_ARG);
    CHECK_STATUS(fmk_plan_eval_many(plan, -1, q, pot, grad), FMK_ERR_ARG);
    CHECK(has_message(plan));
    CHECK(untouched(pot, 4) && untouched(grad, 12));

    check_context("device calls on a CPU plan");
    CHECK_STATUS(fmk_plan_set_points_device(plan, 4, src, 0, NULL), FMK_ERR_STATE);
    CHECK(has_message(plan));
    CHECK_STATUS(fmk_plan_eval_device(plan, q, pot, grad), FMK_ERR_STATE);
    CHECK(has_message(plan));
    CHECK(untouched(pot, 4) && untouched(grad, 12));
    /* the plan still works, with its points */
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, grad), plan);
    CHECK(pot[0] != SENTINEL && isfinite(pot[0]));

    check_context("fmk_plan_memory arguments");
    int64_t h = -7, d = -7;
    CHECK_STATUS(fmk_plan_memory(plan, -1, -1, &h, &d), FMK_ERR_ARG);
    CHECK_STATUS(fmk_plan_memory(plan, 10, -2, &h, &d), FMK_ERR_ARG);
    CHECK(h == -7 && d == -7);
    CHECK_STATUS(fmk_plan_memory(plan, 10, -1, NULL, &d), FMK_ERR_NULL);
    CHECK_STATUS(fmk_plan_memory(plan, 10, -1, &h, NULL), FMK_ERR_NULL);
    CHECK(h == -7 && d == -7);
    check_context("fmk_plan_info(plan, NULL)");
    CHECK_STATUS(fmk_plan_info(plan, NULL), FMK_ERR_NULL);
    fmk_plan_destroy(plan);
}

/* Softening below what the working precision resolves, relative to the box: checked when the
 * points are known (plan.c: 1e-15 of the frame width in fp64, 1e-7 in fp32). */
static void softening_limits(void)
{
    double src[6] = {0, 0, 0, 1, 1, 1}, q[2] = {1, 1}, pot[2];
    for (int p = 0; p < 2; p++) {
        const double limit = p ? 1e-7 : 1e-15;
        for (int below = 0; below < 2; below++) {
            fmk_opts o = cpu_opts();
            o.precision = p ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
            o.softening = below ? 0.2 * limit : 4 * limit; /* box side 1, frame width 1 */
            fmk_plan *plan = NULL;
            check_context("plummer, softening %g of the box, %s", o.softening, p ? "fp32" : "fp64");
            CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_PLUMMER, 1e-6, &o), FMK_OK);
            if (!plan)
                continue;
            fill(pot, 2);
            if (below) {
                CHECK_STATUS(fmk_plan_set_points(plan, 2, src, 0, NULL), FMK_ERR_ARG);
                CHECK(has_message(plan));
                CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_ERR_STATE);
                CHECK(untouched(pot, 2));
            } else {
                CHECK_PLAN_OK(fmk_plan_set_points(plan, 2, src, 0, NULL), plan);
                CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, NULL), plan);
                CHECK(isfinite(pot[0]) && fabs(pot[0] - 1 / sqrt(3.0)) < 1e-6);
            }
            fmk_plan_destroy(plan);
        }
    }
}

static void status_strings(void)
{
    check_context("status strings");
    const char *seen[FMK_ERR_ACCURACY + 1];
    for (int s = 0; s <= FMK_ERR_ACCURACY; s++) {
        const char *str = fmk_status_string((fmk_status)s);
        CHECK_MSG(str != NULL && str[0] != '\0', "status %d has no string", s);
        seen[s] = str;
        for (int t = 0; t < s; t++)
            CHECK_MSG(!str || !seen[t] || strcmp(str, seen[t]) != 0,
                      "statuses %d and %d share the string \"%s\"", t, s, str);
    }
    const char *unknown = fmk_status_string((fmk_status)1234);
    CHECK(unknown != NULL && unknown[0] != '\0');
    unknown = fmk_status_string((fmk_status)-1);
    CHECK(unknown != NULL && unknown[0] != '\0');
}

int main(void)
{
    create_arguments();
    bad_options();
    null_plan();
    plan_misuse();
    softening_limits();
    status_strings();
    return check_summary();
}
