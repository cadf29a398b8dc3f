/* test_interrupt_gpu.c -- stopping long calls on the GPU (fmk_plan_set_interrupt,
 * fmk_plan_interrupt), like tests/unit/test_interrupt.c on the CPU.
 *
 * Every exit: for the direct sum (cut into launches of 2^22 pairs by the knob
 * direct.launch_pairs: over the targets, and over the sources with one split and with several),
 * the treecode (group walks with and without tickets, the stackless walk, both tree builds),
 * the 3D FMM (two streams and one, the M2L by GEMMs and by rotations) and the 2D FMM, with host
 * and device arrays, targets = sources and separate targets, evals made long by the knob
 * cuda.check_min = 0 (they wait between their phases and cut their walks and M2L), the k-th
 * interrupt check of a set_points + eval says stop (the knob cuda.stop_at_check), for every k
 * up to the checks of a clean run. The call must return FMK_ERR_INTERRUPTED with the message
 * "interrupted", and the plan must then give the clean run's results (set_points again after
 * an interrupted set_points).
 *
 * In time: direct sums of 2^20 points (3D, about 1.5 s on an H100) and 2^18 (log2d) stopped by
 * a check that says stop at its first call, and by fmk_plan_interrupt from another thread, must
 * return within half a second and then give the first eval's results and agree with a direct
 * reference at some targets; the treecode and the 3D FMM (long by their size) stop within a
 * second. --quick: the first part on one case per engine (compute-sanitizer). Exit 77
 * without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "core/tune.h"
#include "../unit/check.h"
#include "../unit/testutil.h"
#include "gpu_cases.h"
#include "../unit/interrupter.h"

/* A plan of the case whose evals all count as long (they wait between their phases and cut
 * their walks). */
#define LONG_EVALS "cuda.check_min=0"

/* ---------------------------------------------------------------- every exit */

static long checks_of(const fmk_plan *p)
{
    return (long)gc_counter(p, "cuda.checks");
}

/* The run whose check k says stop. */
static void stopped_run(const gcase *c, inputs *in, long k)
{
    fmk_plan *p = NULL;
    CHECK_PLAN_OK(gc_create(c, LONG_EVALS, &p), NULL);
    if (!p)
        return;
    CHECK_PLAN_OK(fmk_plan_tune(p, "cuda.stop_at_check", (double)k), p);
    const char *stage = "set_points";
    fmk_status st = gc_set_points(c, in, p);
    if (st == FMK_OK) {
        stage = "eval";
        st = gc_eval(c, in, p);
    }
    CHECK_MSG(st == FMK_ERR_INTERRUPTED, "%s returned %d (%s) with check %ld saying stop: \"%s\"",
              stage, (int)st, fmk_status_string(st), k, fmk_plan_last_error(p));
    CHECK_MSG(strcmp(fmk_plan_last_error(p), "interrupted") == 0, "message \"%s\"",
              fmk_plan_last_error(p));
    CHECK_MSG(checks_of(p) == k, "%ld checks made, the call stopped at %ld", checks_of(p), k);
    if (strcmp(stage, "set_points") == 0) {
        CHECK_STATUS(fmk_plan_eval(p, in->q, in->pot, in->grad), FMK_ERR_STATE);
        CHECK_PLAN_OK(gc_set_points(c, in, p), p);
    }
    st = gc_eval(c, in, p);
    CHECK_PLAN_OK(st, p);
    if (st == FMK_OK)
        gc_check_results(in, "the eval after the interrupt");
    fmk_plan_destroy(p);
}

static void sweep(const gcase *c)
{
    check_context("%s", c->name);
    const double t0 = gc_now();
    inputs in;
    gc_make_inputs(c, 21, &in);
    fmk_plan *p = NULL;
    long clean = 0;
    CHECK_PLAN_OK(gc_create(c, LONG_EVALS, &p), NULL);
    if (p) {
        CHECK_PLAN_OK(gc_set_points(c, &in, p), p);
        CHECK_PLAN_OK(gc_eval(c, &in, p), p);
        gc_keep_reference(&in);
        clean = checks_of(p);
        fmk_plan_destroy(p);
    }
    CHECK_MSG(clean >= 2, "%ld interrupt checks in a long set_points + eval", clean);
    for (long k = 1; k <= clean; k++) {
        check_context("%s, check %ld of %ld says stop", c->name, k, clean);
        stopped_run(c, &in, k);
    }
    check_context("");
    gc_free_inputs(&in);
    printf("%-40s %3ld checks, each said stop in turn (%.2f s)\n", c->name, clean, gc_now() - t0);
    fflush(stdout);
}

/* ---------------------------------------------------------------- in time */

enum { N_REF = 50 };

/* A long eval (default knobs: long by its size; theta 0: the default) stopped by a check that
 * says stop at its first call (10 ms in at the earliest), then by another thread, each within
 * max_stop seconds; then a whole eval, equal to the first (to rounding) and, for the direct
 * sum, right at N_REF targets against the direct reference. */
static void stop_in_time(const char *name, fmk_method method, fmk_kernel kernel, int64_t n,
                         double eps, double theta, double max_stop)
{
    check_context("%s: stopped in time", name);
    const int dim = fmk_kernel_dim(kernel);
    double *x = test_alloc(n * dim), *q = test_alloc(n), *pot = test_alloc(n);
    double *first = test_alloc(n), *ref = test_alloc(N_REF);
    test_points(dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE, n, 31, x);
    test_charges(n, 0, 32, q);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method, o.backend = FMK_BACKEND_CUDA, o.theta = theta;
    fmk_plan *p = NULL;
    CHECK_PLAN_OK(fmk_plan_create(&p, dim, kernel, eps, &o), NULL);
    if (!p)
        goto done;
    CHECK_PLAN_OK(fmk_plan_set_points(p, n, x, 0, NULL), p);
    double t0 = gc_now();
    CHECK_PLAN_OK(fmk_plan_eval(p, q, first, NULL), p);
    const double t_full = gc_now() - t0;

    counter c = {0, 1};
    CHECK_STATUS(fmk_plan_set_interrupt(p, count_check, &c), FMK_OK);
    t0 = gc_now();
    CHECK_STATUS(fmk_plan_eval(p, q, pot, NULL), FMK_ERR_INTERRUPTED);
    const double t_check = gc_now() - t0;
    CHECK_MSG(t_check < max_stop, "stopped by its check after %.3f s (a whole eval %.3f s)",
              t_check, t_full);
    CHECK_STATUS(fmk_plan_set_interrupt(p, NULL, NULL), FMK_OK);

    interrupter it = {p, 0, NULL, 0};
    pthread_t th;
    double t_thread = -1;
    if (CHECK(pthread_create(&th, NULL, interrupt_loop, &it) == 0)) {
        t0 = gc_now();
        CHECK_STATUS(fmk_plan_eval(p, q, pot, NULL), FMK_ERR_INTERRUPTED);
        t_thread = gc_now() - t0;
        atomic_store(&it.done, 1);
        pthread_join(th, NULL);
        CHECK_MSG(t_thread < max_stop, "stopped from a thread after %.3f s (a whole eval %.3f s)",
                  t_thread, t_full);
    }
    /* the same plan, whole and right */
    CHECK_PLAN_OK(fmk_plan_eval(p, q, pot, NULL), p);
    const double again = test_rel_l2(pot, first, n);
    CHECK_MSG(again <= 1e-12, "the eval after the interrupts differs from the first by %.3g",
              again);
    if (method == FMK_METHOD_DIRECT) {
        test_reference(kernel, 0, n, x, q, N_REF, x, ref, NULL);
        const double err = test_rel_l2(pot, ref, N_REF);
        CHECK_MSG(err < 1e-12, "relative error %.3g against the reference", err);
    }
    printf("%-40s a whole eval %.3f s; stopped after %.3f s (check), %.3f s (thread)\n", name,
           t_full, t_check, t_thread);
done:
    fmk_plan_destroy(p);
    free(x), free(q), free(pot), free(first), free(ref);
    check_context("");
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (fmk_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const fmk_method D = FMK_METHOD_DIRECT, T = FMK_METHOD_TREE, F = FMK_METHOD_FMM;
    const fmk_kernel L = FMK_KERNEL_LAPLACE, G = FMK_KERNEL_LOG2D, C = FMK_KERNEL_CAUCHY2D;
    const fmk_precision P64 = FMK_PRECISION_FP64, P32 = FMK_PRECISION_FP32;
    /* "launches": the direct sum cut into launches of 2^22 pairs, over whole waves of target
     * blocks (many targets) or a wave over ranges of the sources' tiles, their totals carried
     * in the partial sums (splits > 1) or apart (one split) */
    const char *cut = "direct.launch_pairs=4194304";
    const gcase cases[] = {
        /* name, method, kernel, precision, eps, ns, nt, on_device, knobs, stackless, quick */
        {"direct 3D, host, cut sources, one split", D, L, P64, 1e-6, 20000, 2000, 0,
         "direct.launch_pairs=4194304,direct.splits=1", 0, 1},
        {"direct 3D, host, cut targets", D, L, P64, 1e-6, 1024, 600000, 0, cut, 0, 0},
        {"direct 3D, host, launches of whole waves", D, L, P64, 1e-6, 1024, 600000, 0,
         "direct.launch_pairs=134217728", 0, 0},
        {"direct 3D fp32, device, cut sources, 3 splits", D, L, P32, 1e-3, 30000, 3000, 1,
         "direct.launch_pairs=4194304,direct.splits=3", 0, 0},
        {"direct 2D cauchy2d, host, cut sources", D, C, P64, 1e-6, 20000, 1000, 0,
         "direct.launch_pairs=4194304,direct.splits=2", 0, 0},
        {"tree, host", T, L, P64, 1e-3, 20000, 0, 0, NULL, 0, 1},
        {"tree fp32, device, targets", T, L, P32, 1e-3, 20000, 8000, 1, NULL, 0, 0},
        {"tree, device, level-by-level build", T, L, P64, 1e-3, 20000, 0, 1,
         "treecode.tree.small_max=0", 0, 0},
        {"tree, one walk per warp", T, L, P64, 1e-3, 60000, 0, 0, "treecode.tickets=0", 0, 0},
        {"tree, stackless walk", T, L, P64, 1e-3, 20000, 0, 0, NULL, 1, 0},
        {"fmm 3D, host", F, L, P64, 1e-3, 6000, 0, 0, NULL, 0, 1},
        {"fmm 3D, device, targets", F, L, P64, 1e-3, 4000, 3000, 1, NULL, 0, 0},
        {"fmm 3D, one stream", F, L, P64, 1e-3, 6000, 0, 1, "fmm3d.overlap=0", 0, 0},
        {"fmm 3D, rotation M2L", F, L, P64, 1e-3, 6000, 0, 0, "fmm3d.m2l_rot_order=4", 0, 0},
        {"fmm 2D log2d, host", F, G, P64, 1e-6, 6000, 0, 0, NULL, 0, 1},
        {"fmm 2D cauchy2d, device, targets", F, C, P64, 1e-6, 4000, 3000, 1, NULL, 0, 0},
    };
    const double t0 = gc_now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!quick || cases[i].quick)
            sweep(&cases[i]);
    if (!quick) {
        /* the direct sums take about 1.5 s and 0.7 s on an H100 and the treecode at theta 0.2
         * about 0.3 s: stopped within 0.5 s; the 3D FMM (long by its size, 35 ms) at a check
         * between its phases */
        stop_in_time("direct 3D, 2^20 points", D, L, (int64_t)1 << 20, 1e-6, 0, 0.5);
        stop_in_time("direct 2D log2d, 2^18 points", D, G, (int64_t)1 << 18, 1e-6, 0, 0.5);
        stop_in_time("tree, theta 0.2, 2^22 points", T, L, (int64_t)1 << 22, 1e-6, 0.2, 0.5);
        stop_in_time("fmm 3D, 2^22 points", F, L, (int64_t)1 << 22, 1e-6, 0, 0.5);
    }
    printf("all: %.1f s\n", gc_now() - t0);
    return check_summary();
}
