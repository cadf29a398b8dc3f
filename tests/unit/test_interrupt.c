/* test_interrupt.c -- stopping long calls: fmk_plan_set_interrupt and fmk_plan_interrupt.
 *
 * A check that says stop after a few calls (tens of milliseconds of work) must stop a large
 * eval of every CPU engine with FMK_ERR_INTERRUPTED long before the eval would have ended, and
 * the same plan must then evaluate correctly (against a direct reference at some targets).
 * fmk_plan_interrupt from a second thread stops an eval too; an interrupted set_points leaves
 * the plan without points, and a new set_points makes it whole. Sizes are chosen so that a full
 * eval takes about a second on two cores. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testutil.h"
#include "interrupter.h"

enum { N_REF = 200 }; /* targets checked against the reference */

/* The sanitizer build runs the loops 5-15 times slower: smaller sizes keep a whole eval near a
 * second there too. */
#ifdef __SANITIZE_ADDRESS__
#define SIZE(release, sanitized) (sanitized)
#else
#define SIZE(release, sanitized) (release)
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct engine_case {
    const char *name;
    fmk_method method;
    fmk_kernel kernel;
    int64_t n;  /* sources, and as many separate targets */
    double tol; /* relative l2 error allowed against the reference */
} engine_case;

static fmk_plan *make_plan(const engine_case *e)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.method = e->method;
    test_tree_theta(&o);
    o.threads = 2;
    fmk_plan *plan = NULL;
    if (fmk_plan_create(&plan, fmk_kernel_dim(e->kernel), e->kernel, 1e-6, &o) != FMK_OK)
        printf("%s: %s\n", e->name, fmk_plan_last_error(NULL));
    return plan;
}

/* The plan's potential at the first N_REF targets against the direct reference. */
static void check_against_reference(const engine_case *e, int64_t n, const double *x,
                                    const double *q, const double *y, const double *pot)
{
    double ref[N_REF];
    test_reference(e->kernel, 0, n, x, q, N_REF, y, ref, NULL);
    const double err = test_rel_l2(pot, ref, N_REF);
    CHECK_MSG(err < e->tol, "relative error %.3g after an interrupted eval (allowed %.1g)", err,
              e->tol);
}

static void stop_eval(const engine_case *e)
{
    check_context("%s: a check that says stop", e->name);
    const int dim = fmk_kernel_dim(e->kernel);
    const int64_t n = e->n;
    double *x = test_alloc(n * dim), *y = test_alloc(n * dim), *q = test_alloc(n);
    double *pot = test_alloc(n), *grad = test_alloc(n * dim);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 1, x);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 2, y);
    test_charges(n, 0, 3, q);
    fmk_plan *plan = make_plan(e);
    if (!CHECK(plan != NULL))
        goto done;
    double t0 = now();
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, n, y), FMK_OK);
    const double t_setup = now() - t0;

    counter c = {0, 3};
    CHECK_STATUS(fmk_plan_set_interrupt(plan, count_check, &c), FMK_OK);
    t0 = now();
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, grad), FMK_ERR_INTERRUPTED);
    const double t_stopped = now() - t0;
    CHECK_MSG(strcmp(fmk_plan_last_error(plan), "interrupted") == 0, "message \"%s\"",
              fmk_plan_last_error(plan));
    CHECK_MSG(c.calls == 3, "the check ran %d times after it said stop at 3", c.calls);
    CHECK_MSG(t_stopped < 1.5, "an eval asked to stop after ~30 ms took %.2f s", t_stopped);

    /* the same plan, its check now never saying stop: a whole, correct eval */
    c.calls = 0, c.stop_at = 0;
    t0 = now();
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, grad), FMK_OK);
    const double t_full = now() - t0;
    CHECK_MSG(c.calls >= 1, "a %.2f s eval never ran the check", t_full);
    CHECK_MSG(t_stopped < 0.6 * t_full, "stopped after %.2f s, a whole eval takes %.2f s",
              t_stopped, t_full);
    check_against_reference(e, n, x, q, y, pot);
    printf("%-10s stopped after %.3f s, a whole eval %.3f s (%d checks), set_points %.3f s\n",
           e->name, t_stopped, t_full, c.calls, t_setup);

    CHECK_STATUS(fmk_plan_set_interrupt(plan, NULL, NULL), FMK_OK); /* removes the check */
done:
    fmk_plan_destroy(plan);
    free(x), free(y), free(q), free(pot), free(grad);
}

static void interrupt_from_thread(const engine_case *e)
{
    check_context("%s: fmk_plan_interrupt from another thread", e->name);
    const int64_t n = e->n;
    double *x = test_alloc(3 * n), *y = test_alloc(3 * n), *q = test_alloc(n), *pot = test_alloc(n);
    test_points(TEST_DIST_CUBE, n, 4, x);
    test_points(TEST_DIST_CUBE, n, 5, y);
    test_charges(n, 0, 6, q);
    fmk_plan *plan = make_plan(e);
    if (!CHECK(plan != NULL))
        goto done;
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, n, y), FMK_OK);
    interrupter it = {plan, 0, NULL, 0};
    pthread_t th;
    if (!CHECK(pthread_create(&th, NULL, interrupt_loop, &it) == 0))
        goto done;
    const double t0 = now();
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_ERR_INTERRUPTED);
    const double t = now() - t0;
    atomic_store(&it.done, 1);
    pthread_join(th, NULL);
    CHECK_MSG(t < 1.5, "an eval interrupted after ~5 ms took %.2f s", t);
    /* the flag is cleared when the next call starts */
    CHECK_STATUS(fmk_plan_interrupt(plan), FMK_OK);
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_OK);
    check_against_reference(e, n, x, q, y, pot);
done:
    fmk_plan_destroy(plan);
    free(x), free(y), free(q), free(pot);
}

/* An interrupted set_points (the treecode, between its two trees) leaves no points. */
static void stop_set_points(void)
{
    check_context("tree: an interrupted set_points");
    const engine_case e = {"tree", FMK_METHOD_TREE, FMK_KERNEL_LAPLACE, SIZE(200000, 100000), 1e-2};
    const int64_t n = e.n;
    double *x = test_alloc(3 * n), *y = test_alloc(3 * n), *q = test_alloc(n), *pot = test_alloc(n);
    test_points(TEST_DIST_CUBE, n, 7, x);
    test_points(TEST_DIST_CUBE, n, 8, y);
    test_charges(n, 0, 9, q);
    fmk_plan *plan = make_plan(&e);
    if (!CHECK(plan != NULL))
        goto done;
    counter c = {0, 1};
    CHECK_STATUS(fmk_plan_set_interrupt(plan, count_check, &c), FMK_OK);
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, n, y), FMK_ERR_INTERRUPTED);
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_ERR_STATE);
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    CHECK(info.bytes_host == 0);
    c.stop_at = 0;
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, n, y), FMK_OK);
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_OK);
    check_against_reference(&e, n, x, q, y, pot);
done:
    fmk_plan_destroy(plan);
    free(x), free(y), free(q), free(pot);
}

static void api(void)
{
    check_context("API");
    CHECK_STATUS(fmk_plan_set_interrupt(NULL, count_check, NULL), FMK_ERR_NULL);
    CHECK_STATUS(fmk_plan_interrupt(NULL), FMK_ERR_NULL);
    CHECK(strcmp(fmk_status_string(FMK_ERR_INTERRUPTED), "interrupted") == 0);
    CHECK(FMK_ERR_INTERRUPTED == 10);
    /* a request made while no call runs is dropped: the next call starts afresh */
    const engine_case e = {"direct", FMK_METHOD_DIRECT, FMK_KERNEL_LAPLACE, 1000, 1e-12};
    fmk_plan *plan = make_plan(&e);
    if (!CHECK(plan != NULL))
        return;
    double x[3 * 8], q[8], pot[8];
    test_points(TEST_DIST_CUBE, 8, 10, x);
    test_charges(8, 0, 11, q);
    CHECK_STATUS(fmk_plan_interrupt(plan), FMK_OK);
    CHECK_STATUS(fmk_plan_set_points(plan, 8, x, 0, NULL), FMK_OK);
    CHECK_STATUS(fmk_plan_interrupt(plan), FMK_OK);
    CHECK_STATUS(fmk_plan_eval(plan, q, pot, NULL), FMK_OK);
    fmk_plan_destroy(plan);
}

int main(void)
{
    api();
    const engine_case cases[] = {
        {"direct 3D", FMK_METHOD_DIRECT, FMK_KERNEL_LAPLACE, SIZE(40000, 15000), 1e-12},
        {"direct 2D", FMK_METHOD_DIRECT, FMK_KERNEL_LOG2D, SIZE(12000, 10000), 1e-12},
        {"tree", FMK_METHOD_TREE, FMK_KERNEL_LAPLACE, SIZE(200000, 60000), 1e-2},
        {"fmm 3D", FMK_METHOD_FMM, FMK_KERNEL_LAPLACE, SIZE(100000, 20000), 1e-5},
        {"fmm 2D", FMK_METHOD_FMM, FMK_KERNEL_LOG2D, SIZE(200000, 150000), 1e-5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        stop_eval(&cases[i]);
    interrupt_from_thread(&cases[0]);
    stop_set_points();
    return check_summary();
}
