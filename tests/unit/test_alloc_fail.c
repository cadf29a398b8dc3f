/* test_alloc_fail.c -- host allocation failure in every CPU method: for direct, tree, the 3D FMM
 * and the 2D FMM, one create + set_points + eval is run with the k-th allocation made by the
 * library failing, for k = 1, 2, ... until a run makes fewer than k allocations. Each run that
 * hits the failure must return FMK_ERR_NOMEM with a message (or succeed with the same results,
 * where the allocation was one the library can do without), leave the failed eval's outputs
 * untouched, and leave the plan usable (set_points again after a failed set_points, eval again
 * after a failed eval, with the clean run's results); under the sanitizer build LeakSanitizer
 * checks that nothing leaks. A second sweep fails every allocation from the k-th on. The FMMs
 * run once more on sets with coincident points (their runs of coincident sources: issue 31).
 *
 * The library's allocations fail through alloc_shim.h (the linker's --wrap). This file itself
 * never allocates. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sentinel.h"

#include "alloc_shim.h"

#define MAX_N 400
#define MAX_OUT (MAX_N * 3)

typedef struct method_case {
    const char *name;
    int dim;
    fmk_kernel kernel;
    fmk_method method;
    int64_t n_sources, n_targets; /* n_targets = 0: targets are the sources */
    int64_t leaf_size;
    double eps;
    int coincident; /* 1: coincident sources and targets (make_inputs) */
} method_case;

static double sources[MAX_N * 3], targets[MAX_N * 3], charges[MAX_N * 2];
static double dup_sources[MAX_N * 3], dup_targets[MAX_N * 3]; /* coincident points */
static double ref_pot[MAX_OUT], ref_grad[MAX_OUT], pot[MAX_OUT], grad[MAX_OUT];

/* Deterministic points in [0, 1)^dim, charges in [-1, 1). */
static void make_inputs(void)
{
    uint64_t s = 12345;
    for (int i = 0; i < MAX_N * 3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        sources[i] = (double)(s >> 11) / 9007199254740992.0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        targets[i] = (double)(s >> 11) / 9007199254740992.0;
    }
    for (int i = 0; i < MAX_N * 2; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        charges[i] = 2 * (double)(s >> 11) / 9007199254740992.0 - 1;
    }
    /* groups of 12 coincident sources; 20 targets on source 0, every third other one on a
     * source: more coincident points than a leaf holds (the 2D FMM then builds its pyramid over
     * the distinct points). As 3D points: set_points keeps two coordinates for the 2D cases */
    for (int i = 0; i < MAX_N; i++)
        for (int c = 0; c < 3; c++) {
            dup_sources[3 * i + c] = sources[3 * (i - i % 12) + c];
            dup_targets[3 * i + c] = i < 20  ? sources[c]
                                     : i % 3 ? targets[3 * i + c]
                                             : dup_sources[3 * i + c];
        }
}

static int64_t n_out(const method_case *mc, int grad_out)
{
    int64_t nt = mc->n_targets ? mc->n_targets : mc->n_sources;
    int c = fmk_kernel_is_complex(mc->kernel) ? 2 : 1;
    return nt * (grad_out ? (c == 2 ? 2 : mc->dim) : c);
}

static fmk_status set_points(const method_case *mc, fmk_plan *plan)
{
    const double *x = mc->coincident ? dup_sources : sources;
    const double *y = mc->coincident ? dup_targets : targets;
    if (mc->coincident && mc->dim == 2) { /* the 2D layout of the same points */
        static double x2[MAX_N * 2], y2[MAX_N * 2];
        for (int i = 0; i < MAX_N; i++)
            for (int c = 0; c < 2; c++)
                x2[2 * i + c] = dup_sources[3 * i + c], y2[2 * i + c] = dup_targets[3 * i + c];
        x = x2, y = y2;
    }
    return fmk_plan_set_points(plan, mc->n_sources, x, mc->n_targets, mc->n_targets ? y : NULL);
}

static fmk_status create(const method_case *mc, fmk_plan **plan)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = mc->method;
    o.backend = FMK_BACKEND_CPU;
    o.threads = 1;
    o.leaf_size = mc->leaf_size;
    return fmk_plan_create(plan, mc->dim, mc->kernel, mc->eps, &o);
}

/* The results equal the clean run's (one thread: the same operations in the same order). */
static void check_results(const method_case *mc, const char *after)
{
    CHECK_MSG(memcmp(pot, ref_pot, (size_t)n_out(mc, 0) * sizeof(double)) == 0 &&
                  memcmp(grad, ref_grad, (size_t)n_out(mc, 1) * sizeof(double)) == 0,
              "%s: the results differ from a run without failures", after);
}

/* One run with allocation fail_at failing. Returns 1 when the run made fewer allocations, i.e.
 * the sweep is done. */
static int run_once(const method_case *mc, long k, int is_sticky)
{
    fmk_plan *plan = NULL;
    calls = 0, fail_at = k, sticky = is_sticky;
    const char *stage = "create";
    fmk_status st = create(mc, &plan);
    if (st == FMK_OK) {
        stage = "set_points";
        st = set_points(mc, plan);
    }
    if (st == FMK_OK) {
        stage = "eval";
        test_fill_sentinel(pot, MAX_OUT), test_fill_sentinel(grad, MAX_OUT);
        st = fmk_plan_eval(plan, charges, pot, grad);
    }
    const long made = calls;
    fail_at = 0;
    if (made < k) {
        CHECK_PLAN_OK(st, plan);
        if (st == FMK_OK)
            check_results(mc, "no failure");
        fmk_plan_destroy(plan);
        return 1;
    }
    if (st == FMK_OK) {
        /* an allocation the library can do without (a realloc that shrinks a buffer): the
         * failure is not an error, and the results are the same */
        tolerated++;
        check_results(mc, "a tolerated failure");
        fmk_plan_destroy(plan);
        return 0;
    }
    const char *msg = fmk_plan_last_error(st != FMK_OK && plan ? plan : NULL);
    CHECK_MSG(st == FMK_ERR_NOMEM, "%s returned %d (%s) after allocation %ld failed: \"%s\"", stage,
              (int)st, fmk_status_string(st), k, msg);
    CHECK_MSG(msg[0] != '\0', "%s failed (allocation %ld) with an empty message", stage, k);
    if (!plan) {
        CHECK_MSG(strcmp(stage, "create") == 0, "%s: the plan is gone", stage);
        return 0;
    }
    /* The plan must still be usable, with nothing half-written. */
    if (strcmp(stage, "set_points") == 0) {
        if (st != FMK_OK) {
            test_fill_sentinel(pot, MAX_OUT);
            CHECK_STATUS(fmk_plan_eval(plan, charges, pot, NULL), FMK_ERR_STATE);
            CHECK(test_untouched(pot, MAX_OUT));
        }
        CHECK_PLAN_OK(set_points(mc, plan), plan);
    } else if (strcmp(stage, "eval") == 0) {
        CHECK_MSG(test_untouched(pot, MAX_OUT) && test_untouched(grad, MAX_OUT),
                  "eval failed (allocation %ld) but wrote its outputs", k);
    }
    test_fill_sentinel(pot, MAX_OUT), test_fill_sentinel(grad, MAX_OUT);
    st = fmk_plan_eval(plan, charges, pot, grad);
    CHECK_PLAN_OK(st, plan);
    if (st == FMK_OK)
        check_results(mc, "a retry");
    fmk_plan_destroy(plan);
    return 0;
}

static void sweep(const method_case *mc)
{
    /* the clean run: the reference results, and the allocations a run makes */
    fmk_plan *plan = NULL;
    calls = 0, fail_at = 0;
    check_context("%s, clean run", mc->name);
    CHECK_PLAN_OK(create(mc, &plan), NULL);
    if (!plan)
        return;
    CHECK_PLAN_OK(set_points(mc, plan), plan);
    CHECK_PLAN_OK(fmk_plan_eval(plan, charges, ref_pot, ref_grad), plan);
    fmk_plan_destroy(plan);
    const long clean = calls;
    CHECK_MSG(clean > 0, "%s: no allocation was counted (is --wrap in effect?)", mc->name);
    tolerated = 0;
    for (int is_sticky = 0; is_sticky <= 1; is_sticky++) {
        long k = 1;
        for (; k <= clean + 1; k++) {
            check_context("%s, %s failure of allocation %ld of %ld", mc->name,
                          is_sticky ? "every" : "one", k, clean);
            if (run_once(mc, k, is_sticky))
                break;
        }
        CHECK_MSG(k <= clean + 1, "%s: a run with allocation %ld failing never finished", mc->name,
                  k);
    }
    printf("%s: %ld allocations, each failed in turn (%ld runs succeeded anyway)\n", mc->name,
           clean, tolerated);
}

/* With an argument, only the cases whose name contains it. */
int main(int argc, char **argv)
{
    make_inputs();
    const method_case cases[] = {
        /* small trees of several levels (leaf_size 8); the 3D FMM at a low order, whose
         * set-up is cheap enough to repeat a few hundred times under the sanitizers */
        {"direct 3D laplace", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, 100, 37, 0, 1e-6, 0},
        {"tree 3D laplace", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, 300, 0, 8, 1e-3, 0},
        {"fmm 3D laplace", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 300, 0, 8, 1e-3, 0},
        {"fmm 3D laplace, targets", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 200, 150, 8, 1e-3, 0},
        {"fmm 2D log2d", 2, FMK_KERNEL_LOG2D, FMK_METHOD_FMM, 400, 0, 8, 1e-6, 0},
        {"fmm 2D cauchy2d, targets", 2, FMK_KERNEL_CAUCHY2D, FMK_METHOD_FMM, 300, 100, 8, 1e-6, 0},
        {"fmm 3D laplace, coincident", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 300, 0, 8, 1e-3, 1},
        {"fmm 3D laplace, targets, coincident", 3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 200, 150, 8,
         1e-3, 1},
        {"fmm 2D log2d, coincident", 2, FMK_KERNEL_LOG2D, FMK_METHOD_FMM, 400, 0, 8, 1e-6, 1},
        {"fmm 2D cauchy2d, targets, coincident", 2, FMK_KERNEL_CAUCHY2D, FMK_METHOD_FMM, 300, 100,
         8, 1e-6, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (argc < 2 || strstr(cases[i].name, argv[1]))
            sweep(&cases[i]);
    check_context("");
    return check_summary();
}
