/* test_alloc_fail_gpu.c -- device allocation failure in every GPU engine: for the direct sum,
 * the treecode, the 3D FMM and the 2D FMM (log2d and cauchy2d), with points and charges from
 * host arrays and from device arrays, targets = sources and separate targets, one
 * set_points + eval is run with the plan's k-th device (or pinned host) allocation failing
 * (the knob cuda.fail_alloc_at; every allocation of a GPU engine goes through
 * fmk_cuda_alloc_fails), for k = 1 .. the allocations of a clean run. Each run must fail with
 * FMK_ERR_DEVICE_NOMEM (FMK_ERR_NOMEM for pinned host memory) and a message that names the
 * bytes of the failed allocation, leave a failed host eval's outputs untouched, leak no device
 * memory (cudaMemGetInfo around each plan, within the CUDA runtime's pages; compute-sanitizer's
 * leak check in make gpu-test is the exact test) and leave the plan usable: set_points again
 * after a failed set_points, eval again after a failed eval, with the clean run's results.
 * --quick: one case per engine (compute-sanitizer). Exit 77 without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/internal.h"
#include "core/tune.h"
#include "../unit/check.h"
#include "../unit/testutil.h"
#include "gpu_cases.h"
#include "../unit/sentinel.h"

/* Free device memory may move by the runtime's own pages (2 MiB) as plans come and go (a
 * module loaded at its first launch, cuBLAS's caches); a leak at every refusal shows as more. */
#define PAGE_SLACK (4u << 20)

static size_t free_bytes(void)
{
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        cudaGetLastError();
    return f;
}

/* The clean run: the reference results, and the allocations a set_points + eval makes. */
static long clean_run(const gcase *c, inputs *in)
{
    fmk_plan *p = NULL;
    CHECK_PLAN_OK(gc_create(c, NULL, &p), NULL);
    if (!p)
        return 0;
    CHECK_PLAN_OK(gc_set_points(c, in, p), p);
    CHECK_PLAN_OK(gc_eval(c, in, p), p);
    gc_keep_reference(in);
    const long n = (long)gc_counter(p, "cuda.allocs");
    fmk_plan_destroy(p);
    return n;
}

/* The run whose allocation k fails. */
static void failing_run(const gcase *c, inputs *in, long k)
{
    const size_t free0 = free_bytes();
    fmk_plan *p = NULL;
    CHECK_PLAN_OK(gc_create(c, NULL, &p), NULL);
    if (!p)
        return;
    CHECK_PLAN_OK(fmk_plan_tune(p, "cuda.fail_alloc_at", (double)k), p);
    const char *stage = "set_points";
    fmk_status st = gc_set_points(c, in, p);
    if (st == FMK_OK) {
        stage = "eval";
        test_fill_sentinel(in->pot, in->m * in->cw), test_fill_sentinel(in->grad, in->m * in->gw);
        st = gc_eval(c, in, p);
    }
    const long made = (long)gc_counter(p, "cuda.allocs");
    CHECK_MSG(made >= k, "only %ld allocations (the clean run made more)", made);
    CHECK_MSG(st == FMK_ERR_DEVICE_NOMEM || st == FMK_ERR_NOMEM,
              "%s returned %d (%s) with allocation %ld failing: \"%s\"", stage, (int)st,
              fmk_status_string(st), k, fmk_plan_last_error(p));
    /* the message names the bytes of the allocation that failed */
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%lld", (long long)gc_counter(p, "cuda.fail_bytes"));
    const char *msg = fmk_plan_last_error(p);
    CHECK_MSG(strstr(msg, bytes) && strstr(msg, "bytes"),
              "%s: the message does not name %s bytes: \"%s\"", stage, bytes, msg);
    if (strcmp(stage, "set_points") == 0) {
        CHECK_STATUS(fmk_plan_eval(p, in->q, in->pot, in->grad), FMK_ERR_STATE);
        CHECK_PLAN_OK(gc_set_points(c, in, p), p);
    } else if (!c->on_device) {
        CHECK_MSG(test_untouched(in->pot, in->m * in->cw) &&
                      test_untouched(in->grad, in->m * in->gw),
                  "eval failed (allocation %ld) but wrote its outputs", k);
    }
    st = gc_eval(c, in, p);
    CHECK_PLAN_OK(st, p);
    if (st == FMK_OK)
        gc_check_results(in, "the retry");
    fmk_plan_destroy(p);
    const size_t free1 = free_bytes();
    CHECK_MSG(free1 + PAGE_SLACK >= free0, "device memory lost: %zu bytes free before, %zu after",
              free0, free1);
}

static void sweep(const gcase *c)
{
    check_context("%s", c->name);
    const double t0 = gc_now();
    inputs in;
    gc_make_inputs(c, 11, &in);
    const long clean = clean_run(c, &in);
    const size_t free0 = free_bytes();
    CHECK_MSG(clean > 0, "no device allocation was counted");
    for (long k = 1; k <= clean; k++) {
        check_context("%s, allocation %ld of %ld failing", c->name, k, clean);
        failing_run(c, &in, k);
    }
    const size_t free1 = free_bytes();
    check_context("%s", c->name);
    CHECK_MSG(free1 + PAGE_SLACK >= free0, "device memory lost over the sweep: %zu -> %zu free",
              free0, free1);
    gc_free_inputs(&in);
    printf("%-44s %3ld allocations, each failed in turn (%.2f s)\n", c->name, clean, gc_now() - t0);
    fflush(stdout);
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
    const gcase cases[] = {
        /* name, method, kernel, precision, eps, ns, nt, on_device, knobs, stackless, quick */
        {"direct 3D, host", D, L, P64, 1e-6, 3000, 0, 0, NULL, 0, 1},
        {"direct 3D, host, targets", D, L, P64, 1e-6, 2000, 1500, 0, NULL, 0, 0},
        {"direct 3D fp32, device", D, L, P32, 1e-3, 3000, 0, 1, NULL, 0, 0},
        {"direct 3D, device, targets", D, L, P64, 1e-6, 2000, 1500, 1, NULL, 0, 0},
        {"direct 3D, launches, one split", D, L, P64, 1e-6, 20000, 2000, 0,
         "direct.launch_pairs=4194304,direct.splits=1", 0, 0},
        {"direct 2D log2d, device", D, G, P64, 1e-6, 2000, 0, 1, NULL, 0, 0},
        {"tree, host", T, L, P64, 1e-3, 6000, 0, 0, NULL, 0, 1},
        {"tree fp32, host, targets", T, L, P32, 1e-3, 5000, 3000, 0, NULL, 0, 0},
        {"tree, device", T, L, P64, 1e-3, 6000, 0, 1, NULL, 0, 0},
        {"tree, device, targets", T, L, P64, 1e-3, 5000, 3000, 1, NULL, 0, 0},
        {"tree, device, level-by-level build", T, L, P64, 1e-3, 6000, 0, 1,
         "treecode.tree.small_max=0", 0, 0},
        {"tree fp32, device, targets, grid frame", T, L, P32, 1e-3, 6000, 2000, 1,
         "treecode.frame_small_max=0", 0, 0},
        {"fmm 3D, host", F, L, P64, 1e-3, 4000, 0, 0, NULL, 0, 1},
        {"fmm 3D, host, targets", F, L, P64, 1e-3, 3000, 2000, 0, NULL, 0, 0},
        {"fmm 3D, device", F, L, P64, 1e-3, 4000, 0, 1, NULL, 0, 0},
        {"fmm 3D, device, targets", F, L, P64, 1e-3, 3000, 2000, 1, NULL, 0, 0},
        {"fmm 3D, device, cuBLAS at set_points", F, L, P64, 1e-3, 4000, 0, 1, "fmm3d.blas_at=0", 0,
         0},
        {"fmm 3D, device, rotation M2L", F, L, P64, 1e-3, 4000, 0, 1, "fmm3d.m2l_rot_order=4", 0,
         0},
        {"fmm 2D log2d, host", F, G, P64, 1e-6, 4000, 0, 0, NULL, 0, 0},
        {"fmm 2D log2d, device", F, G, P64, 1e-6, 4000, 0, 1, NULL, 0, 0},
        {"fmm 2D cauchy2d, host, targets", F, C, P64, 1e-6, 3000, 2000, 0, NULL, 0, 1},
        {"fmm 2D cauchy2d, device, targets", F, C, P64, 1e-6, 3000, 2000, 1, NULL, 0, 0},
    };
    const char *only = argc > 1 && !quick ? argv[1] : NULL; /* a name's part: those cases */
    const double t0 = gc_now();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if ((!quick || cases[i].quick) && (!only || strstr(cases[i].name, only)))
            sweep(&cases[i]);
    check_context("");
    printf("all sweeps: %.1f s\n", gc_now() - t0);
    return check_summary();
}
