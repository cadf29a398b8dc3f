/* engines.c -- the engine table: which engine does a method in a dimension on a backend.
 * Adding a method or a backend is a row here and a folder under src/ (docs/architecture.md). */
#include "core/internal.h"

extern const fmk_engine fmk_engine_direct_cpu; /* direct/p2p_cpu.c */
extern const fmk_engine fmk_engine_tree_cpu;   /* treecode/bh_cpu.c */
extern const fmk_engine fmk_engine_fmm_cpu;    /* fmm3d/fmm3d_cpu.c */
extern const fmk_engine fmk_engine_fmm2d_cpu;  /* fmm2d/fmm2d_cpu.c */
#ifdef FMK_HAVE_CUDA
extern const fmk_engine fmk_engine_direct_cuda; /* direct/cuda/engine.cu */
extern const fmk_engine fmk_engine_tree_cuda;   /* treecode/cuda/engine.cu */
extern const fmk_engine fmk_engine_fmm_cuda;    /* fmm3d/cuda/engine.cu */
extern const fmk_engine fmk_engine_fmm2d_cuda;  /* fmm2d/cuda/engine.cu */
#endif

typedef struct engine_row {
    fmk_method method;
    int dim;
    fmk_backend backend;
    const fmk_engine *engine;
} engine_row;

static const engine_row engine_table[] = {
    {.method = FMK_METHOD_DIRECT,
     .dim = 2,
     .backend = FMK_BACKEND_CPU,
     .engine = &fmk_engine_direct_cpu},
    {.method = FMK_METHOD_DIRECT,
     .dim = 3,
     .backend = FMK_BACKEND_CPU,
     .engine = &fmk_engine_direct_cpu},
    {.method = FMK_METHOD_TREE,
     .dim = 3,
     .backend = FMK_BACKEND_CPU,
     .engine = &fmk_engine_tree_cpu},
    {.method = FMK_METHOD_FMM, .dim = 3, .backend = FMK_BACKEND_CPU, .engine = &fmk_engine_fmm_cpu},
    {.method = FMK_METHOD_FMM,
     .dim = 2,
     .backend = FMK_BACKEND_CPU,
     .engine = &fmk_engine_fmm2d_cpu},
#ifdef FMK_HAVE_CUDA
    {.method = FMK_METHOD_DIRECT,
     .dim = 2,
     .backend = FMK_BACKEND_CUDA,
     .engine = &fmk_engine_direct_cuda},
    {.method = FMK_METHOD_DIRECT,
     .dim = 3,
     .backend = FMK_BACKEND_CUDA,
     .engine = &fmk_engine_direct_cuda},
    {.method = FMK_METHOD_TREE,
     .dim = 3,
     .backend = FMK_BACKEND_CUDA,
     .engine = &fmk_engine_tree_cuda},
    {.method = FMK_METHOD_FMM,
     .dim = 3,
     .backend = FMK_BACKEND_CUDA,
     .engine = &fmk_engine_fmm_cuda},
    {.method = FMK_METHOD_FMM,
     .dim = 2,
     .backend = FMK_BACKEND_CUDA,
     .engine = &fmk_engine_fmm2d_cuda},
#endif
};

const fmk_engine *fmk_engines_find(fmk_method method, int dim, fmk_backend backend)
{
    for (size_t i = 0; i < sizeof engine_table / sizeof engine_table[0]; i++) {
        const engine_row *r = &engine_table[i];
        if (r->method == method && r->dim == dim && r->backend == backend)
            return r->engine;
    }
    return NULL;
}

#ifndef FMK_HAVE_CUDA
/* A build without the CUDA backend: no devices. */
int fmk_cuda_count_devices(void)
{
    return -1;
}

fmk_status fmk_cuda_device_name(fmk_plan *plan, int device, char *name, size_t size)
{
    (void)device;
    if (size)
        name[0] = '\0';
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE, "this build of fmmkit has no CUDA backend");
}

fmk_status fmk_cuda_points_extent(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                  const double *d_t, double *width)
{
    (void)ns, (void)d_s, (void)nt, (void)d_t;
    *width = -1;
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE, "this build of fmmkit has no CUDA backend");
}

fmk_status fmk_cuda_copy(fmk_plan *plan, void *dst, const void *src, size_t bytes, const char *what)
{
    (void)dst, (void)src, (void)bytes, (void)what;
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE, "this build of fmmkit has no CUDA backend");
}

fmk_status fmk_cuda_sort_pairs(fmk_plan *plan, int64_t n, void *pairs, int key_bits)
{
    (void)n, (void)pairs, (void)key_bits;
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE, "this build of fmmkit has no CUDA backend");
}
#endif
