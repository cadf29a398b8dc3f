/* test_threads.c -- the thread count's cap (FMK_THREADS_MAX) and fork after use.
 *
 * ctest runs it with OMP_NUM_THREADS=100000: a default plan must be clamped to FMK_THREADS_MAX
 * (libgomp exits the process at a few tens of thousands of threads and crashes beyond 65535).
 * A child forked after the library ran its OpenMP loops must evaluate with one thread instead
 * of waiting forever for the parent's thread pool; an alarm turns such a hang into a failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

static fmk_opts cpu_opts(fmk_method method, int threads)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.method = method;
    test_tree_theta(&o);
    o.threads = threads;
    return o;
}

static void threads_cap(void)
{
    const int32_t too_many[] = {FMK_THREADS_MAX + 1, 40000, 65536, INT32_MAX};
    for (int i = 0; i < 4; i++) {
        check_context("opts.threads = %d", (int)too_many[i]);
        fmk_opts o = cpu_opts(FMK_METHOD_DIRECT, too_many[i]);
        fmk_plan *plan = (fmk_plan *)&plan;
        CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_ERR_ARG);
        CHECK(plan == NULL);
        const char *msg = fmk_plan_last_error(NULL);
        CHECK_MSG(msg && strstr(msg, "opts.threads") && strstr(msg, "FMK_THREADS_MAX"),
                  "message: %s", msg ? msg : "(null)");
        double x[3] = {0, 0, 0}, q[1] = {1}, pot[1] = {-7};
        CHECK_STATUS(fmk_eval(3, FMK_KERNEL_LAPLACE, 1e-6, &o, 1, x, q, 0, NULL, pot, NULL),
                     FMK_ERR_ARG);
        CHECK(pot[0] == -7);
    }

    check_context("opts.threads = FMK_THREADS_MAX is accepted");
    fmk_opts o = cpu_opts(FMK_METHOD_DIRECT, FMK_THREADS_MAX);
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    fmk_plan_destroy(plan);

    /* OMP_NUM_THREADS above the cap: clamped, not refused */
    check_context("opts.threads = 0 with OMP_NUM_THREADS=%s", getenv("OMP_NUM_THREADS"));
    o = cpu_opts(FMK_METHOD_DIRECT, 0);
    plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
    int threads = 0;
    CHECK(sscanf(info.device_name, "cpu (%d thread", &threads) == 1);
    CHECK(threads >= 1 && threads <= FMK_THREADS_MAX);
#ifdef _OPENMP
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && atol(env) > FMK_THREADS_MAX)
        CHECK_MSG(threads == FMK_THREADS_MAX, "device_name %s", info.device_name);
#endif
    fmk_plan_destroy(plan);
}

/* pot and grad of a plan with opts.threads = 2 (the parent's thread pool gets started). */
enum { N_FORK = 3000 };

static int same(const double *a, const double *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        s = fmax(s, fabs(b[i]));
    }
    return d <= 1e-13 * s;
}

/* In the child: the parent's plan, a new plan and the one-shot call, each against ref; the
 * exit status says which failed (0: all agree). */
static int child_work(fmk_plan *plan, fmk_method method, const double *x, const double *q,
                      const double *ref)
{
    alarm(60); /* a hang in the child kills it: the parent sees the signal */
    static double pot[N_FORK];
    if (fmk_plan_eval(plan, q, pot, NULL) != FMK_OK || !same(pot, ref, N_FORK))
        return 1;
    fmk_info info;
    fmk_plan_info(plan, &info);
    if (strcmp(info.device_name, "cpu (1 thread)") != 0)
        return 2;
    fmk_opts o = cpu_opts(method, 2);
    fmk_plan *fresh = NULL;
    if (fmk_plan_create(&fresh, 3, FMK_KERNEL_LAPLACE, 1e-6, &o) != FMK_OK ||
        fmk_plan_set_points(fresh, N_FORK, x, 0, NULL) != FMK_OK ||
        fmk_plan_eval(fresh, q, pot, NULL) != FMK_OK || !same(pot, ref, N_FORK))
        return 3;
    fmk_plan_destroy(fresh);
    memset(pot, 0, sizeof pot);
    if (fmk_eval(3, FMK_KERNEL_LAPLACE, 1e-6, &o, N_FORK, x, q, 0, NULL, pot, NULL) != FMK_OK ||
        !same(pot, ref, N_FORK))
        return 4;
    /* and the child's own child */
    pid_t pid = fork();
    if (pid == 0)
        _exit(fmk_plan_eval(plan, q, pot, NULL) == FMK_OK && same(pot, ref, N_FORK) ? 0 : 1);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return 5;
    return 0;
}

static void fork_after_use(fmk_method method)
{
    check_context("fork after use, method %s", fmk_method_name(method));
    static double x[3 * N_FORK], q[N_FORK], ref[N_FORK], again[N_FORK];
    test_points(TEST_DIST_CUBE, N_FORK, 5, x);
    test_charges(N_FORK, 0, 6, q);
    fmk_opts o = cpu_opts(method, 2);
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    CHECK_PLAN_OK(fmk_plan_set_points(plan, N_FORK, x, 0, NULL), plan);
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, ref, NULL), plan);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_work(plan, method, x, q, ref));
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "child: %s %d (exit 1-5: which result differed; SIGALRM: it hung)",
              WIFEXITED(status) ? "exit" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    /* the parent keeps its threads */
    CHECK_PLAN_OK(fmk_plan_eval(plan, q, again, NULL), plan);
    CHECK(same(again, ref, N_FORK));
    fmk_info info;
    CHECK_STATUS(fmk_plan_info(plan, &info), FMK_OK);
#ifdef _OPENMP
    CHECK_MSG(strcmp(info.device_name, "cpu (2 threads)") == 0, "%s", info.device_name);
#endif
    fmk_plan_destroy(plan);
}

int main(void)
{
    threads_cap();
    fork_after_use(FMK_METHOD_DIRECT);
    fork_after_use(FMK_METHOD_FMM);
    fork_after_use(FMK_METHOD_TREE);
    return check_summary();
}
