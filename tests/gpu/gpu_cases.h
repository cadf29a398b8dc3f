/* gpu_cases.h -- what the sweeps over every GPU engine share (test_alloc_fail_gpu.c,
 * test_interrupt_gpu.c; include after check.h and testutil.h): a case (engine, kernel,
 * precision, sizes, host or device arrays, knobs), its inputs on the host and the device, and
 * its set_points and eval through the host or the device path. */
#ifndef FMK_GPU_CASES_H
#define FMK_GPU_CASES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"
#include "core/tune.h"

typedef struct gcase {
    const char *name;
    fmk_method method;
    fmk_kernel kernel;
    fmk_precision precision;
    double eps;
    int64_t ns, nt;    /* nt = 0: the targets are the sources */
    int on_device;     /* points, charges and results in device arrays */
    const char *knobs; /* "name=value,name=value" (fmk_plan_tune), or NULL */
    int stackless;     /* the treecode's stackless walk */
    int quick;         /* in the --quick set (compute-sanitizer) */
} gcase;

/* A case's inputs on the host and (on_device) their device copies; the results and the
 * reference results. */
typedef struct inputs {
    int dim, cw, gw;
    int64_t ns, nt, m; /* m: the targets evaluated */
    double *x, *y, *q, *pot, *grad, *ref_pot, *ref_grad;
    double *d_x, *d_y, *d_q, *d_pot, *d_grad;
} inputs;

static double gc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *gc_dev_copy(const double *h, int64_t n)
{
    void *d = NULL;
    if (cudaMalloc(&d, (size_t)(n > 0 ? n : 1) * sizeof(double)) != cudaSuccess) {
        printf("cudaMalloc failed in the test itself\n");
        exit(2);
    }
    if (h && n > 0)
        cudaMemcpy(d, h, (size_t)n * sizeof(double), cudaMemcpyHostToDevice);
    return d;
}

static void gc_make_inputs(const gcase *c, uint64_t seed, inputs *in)
{
    memset(in, 0, sizeof *in);
    in->dim = fmk_kernel_dim(c->kernel);
    in->cw = test_pot_width(c->kernel), in->gw = test_grad_width(c->kernel);
    in->ns = c->ns, in->nt = c->nt, in->m = c->nt ? c->nt : c->ns;
    const test_dist d = in->dim == 3 ? TEST_DIST_CUBE : TEST_DIST_SQUARE;
    in->x = test_alloc(in->ns * in->dim);
    in->y = test_alloc((in->nt ? in->nt : 1) * in->dim);
    in->q = test_alloc(in->ns * in->cw);
    test_points(d, in->ns, seed, in->x);
    if (in->nt)
        test_points(d, in->nt, seed + 1, in->y);
    test_charges(in->ns, in->cw == 2, seed + 2, in->q);
    in->pot = test_alloc(in->m * in->cw), in->ref_pot = test_alloc(in->m * in->cw);
    in->grad = test_alloc(in->m * in->gw), in->ref_grad = test_alloc(in->m * in->gw);
    if (c->on_device) {
        in->d_x = gc_dev_copy(in->x, in->ns * in->dim);
        in->d_y = in->nt ? gc_dev_copy(in->y, in->nt * in->dim) : NULL;
        in->d_q = gc_dev_copy(in->q, in->ns * in->cw);
        in->d_pot = gc_dev_copy(NULL, in->m * in->cw);
        in->d_grad = gc_dev_copy(NULL, in->m * in->gw);
    }
}

static void gc_free_inputs(inputs *in)
{
    free(in->x), free(in->y), free(in->q), free(in->pot), free(in->grad);
    free(in->ref_pot), free(in->ref_grad);
    cudaFree(in->d_x), cudaFree(in->d_y), cudaFree(in->d_q), cudaFree(in->d_pot);
    cudaFree(in->d_grad);
}

/* Sets the knobs "name=value,name=value" of plan p. */
static fmk_status gc_set_knobs(fmk_plan *p, const char *knobs)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", knobs ? knobs : "");
    fmk_status st = FMK_OK;
    for (char *k = buf; *k && st == FMK_OK;) {
        char *end = strchr(k, ','), *eq = strchr(k, '=');
        if (end)
            *end = '\0';
        if (!eq || (end && eq > end))
            return FMK_ERR_ARG;
        *eq = '\0';
        st = fmk_plan_tune(p, k, atof(eq + 1));
        k = end ? end + 1 : k + strlen(k);
    }
    return st;
}

/* A GPU plan of the case with its knobs (and more, e.g. "cuda.check_min=0"). */
static fmk_status gc_create(const gcase *c, const char *more, fmk_plan **p)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method;
    o.backend = FMK_BACKEND_CUDA;
    o.precision = c->precision;
    if (c->stackless)
        o.walk = FMK_WALK_STACKLESS;
    fmk_status st = fmk_plan_create(p, fmk_kernel_dim(c->kernel), c->kernel, c->eps, &o);
    if (st == FMK_OK)
        st = gc_set_knobs(*p, c->knobs);
    if (st == FMK_OK)
        st = gc_set_knobs(*p, more);
    return st;
}

static fmk_status gc_set_points(const gcase *c, const inputs *in, fmk_plan *p)
{
    if (c->on_device)
        return fmk_plan_set_points_device(p, in->ns, in->d_x, in->nt, in->nt ? in->d_y : NULL);
    return fmk_plan_set_points(p, in->ns, in->x, in->nt, in->nt ? in->y : NULL);
}

/* One eval into in->pot, in->grad (a device eval's results copied back). */
static fmk_status gc_eval(const gcase *c, inputs *in, fmk_plan *p)
{
    if (!c->on_device)
        return fmk_plan_eval(p, in->q, in->pot, in->grad);
    fmk_status st = fmk_plan_eval_device(p, in->d_q, in->d_pot, in->d_grad);
    if (st == FMK_OK) {
        cudaMemcpy(in->pot, in->d_pot, (size_t)(in->m * in->cw) * sizeof(double),
                   cudaMemcpyDeviceToHost);
        cudaMemcpy(in->grad, in->d_grad, (size_t)(in->m * in->gw) * sizeof(double),
                   cudaMemcpyDeviceToHost);
    }
    return st;
}

/* The results as the reference (the clean run's). */
static void gc_keep_reference(inputs *in)
{
    memcpy(in->ref_pot, in->pot, (size_t)(in->m * in->cw) * sizeof(double));
    memcpy(in->ref_grad, in->grad, (size_t)(in->m * in->gw) * sizeof(double));
}

/* The results equal the clean run's: to rounding (the 3D FMM's atomic sums vary in their last
 * bits from run to run). */
static void gc_check_results(const inputs *in, const char *after)
{
    const double ep = test_rel_l2(in->pot, in->ref_pot, in->m * in->cw);
    const double eg = test_rel_l2(in->grad, in->ref_grad, in->m * in->gw);
    CHECK_MSG(ep <= 1e-12 && eg <= 1e-12, "%s: results differ from the clean run's (%.3g, %.3g)",
              after, ep, eg);
}

/* A counter of the plan ("cuda.allocs"; -1 if it has none). */
static double gc_counter(const fmk_plan *p, const char *name)
{
    double v = -1;
    if (fmk_plan_counter(p, name, &v) != FMK_OK)
        v = -1;
    return v;
}

#endif /* FMK_GPU_CASES_H */
