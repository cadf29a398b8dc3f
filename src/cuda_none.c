/* cuda_none.c -- the CUDA entry points of a CPU-only build: no devices, no GPU engine. */
#include "internal.h"

int fmk_cuda_count_devices(void) { return -1; }

fmk_status fmk_cuda_device_name(fmk_plan *plan, int device, char *name, size_t size)
{
    (void)device;
    if (size)
        name[0] = '\0';
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE, "this build of fmmkit has no CUDA backend");
}

static fmk_status no_setup(fmk_plan *plan)
{
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE, "this build of fmmkit has no CUDA backend");
}

static fmk_status no_eval(fmk_plan *plan, const double *c, double *p, double *g, int d)
{
    (void)c, (void)p, (void)g, (void)d;
    return no_setup(plan);
}

static void no_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    (void)plan, (void)ns, (void)nt;
    *h = *d = 0;
}

static void no_release(fmk_plan *plan) { (void)plan; }

const fmk_engine fmk_engine_direct_cuda = {"direct/none", no_setup, no_eval, no_memory, NULL, no_release, NULL, 0, 0};
const fmk_engine fmk_engine_tree_cuda = {"tree/none", no_setup, no_eval, no_memory, NULL, no_release, NULL, 0, 0};
/* No setup: refused as "not available" (the backend check comes first anyway). */
const fmk_engine fmk_engine_fmm_cuda = {"fmm/none", NULL, NULL, NULL, NULL, NULL, NULL, 0, 0};
const fmk_engine fmk_engine_fmm2d_cuda = {"fmm2d/none", NULL, NULL, NULL, NULL, NULL, NULL, 0, 0};
