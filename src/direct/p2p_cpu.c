/* p2p.c -- the CPU direct-summation engine: OpenMP over blocks of targets, a vectorized loop
 * over cache-sized tiles of sources, fp64 or fp32 arithmetic with tiles summed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* Each inner loop is built for the widest vector unit the running CPU has (FMK_TARGET_CLONES,
 * internal.h). */

#define REAL double
#define SQRT sqrt
#define LOG log
#define P2P(name) p2p64_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P

#define REAL float
#define SQRT sqrtf
#define LOG logf
#define P2P(name) p2p32_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P

enum { TARGET_BLOCK = 32 };

typedef struct cpu_direct {
    void *src[4]; /* x, y, z (or Im charge for cauchy2d, unused for log2d), Re charge */
    void *trg;    /* n_targets * dim, interleaved */
    size_t real;  /* sizeof the working type */
} cpu_direct;

static size_t real_size(const fmk_plan *plan)
{
    return plan->opts.precision == FMK_PRECISION_FP32 ? sizeof(float) : sizeof(double);
}

static void direct_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    if (nt < 0)
        nt = ns;
    const int64_t real = (int64_t)real_size(plan);
    *h = fmk_bytes_plus((int64_t)sizeof(cpu_direct), 4 * real, ns);
    *h = fmk_bytes_plus(*h, plan->dim * real, nt);
    *d = 0;
}

static void direct_release(fmk_plan *plan)
{
    cpu_direct *s = plan->state;
    if (!s)
        return;
    for (int k = 0; k < 4; k++)
        free(s->src[k]);
    free(s->trg);
    free(s);
    plan->state = NULL;
}

/* Copies n doubles with stride into a working-precision array. */
static void store(void *dst, size_t real, const double *x, int64_t n, int stride)
{
    if (real == sizeof(float)) {
        float *f = dst;
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)x[stride * i];
    } else {
        double *g = dst;
        for (int64_t i = 0; i < n; i++)
            g[i] = x[stride * i];
    }
}

static fmk_status direct_setup(fmk_plan *plan)
{
    const int dim = plan->dim;
    const int64_t ns = plan->n_sources > 0 ? plan->n_sources : 1;
    const int64_t nt = plan->n_targets > 0 ? plan->n_targets : 1;
    cpu_direct *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    s->real = real_size(plan);
    for (int k = 0; k < 4; k++)
        s->src[k] = malloc((size_t)ns * s->real);
    s->trg = malloc((size_t)nt * dim * s->real);
    if (!s->src[0] || !s->src[1] || !s->src[2] || !s->src[3] || !s->trg) {
        long long bytes = (long long)(s->real * (4 * ns + dim * nt));
        direct_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM,
                             "out of host memory for the direct sum (%lld bytes)", bytes);
    }
    for (int k = 0; k < dim; k++)
        store(s->src[k], s->real, plan->sources + k, plan->n_sources, dim);
    if (dim == 2)
        memset(s->src[2], 0, (size_t)ns * s->real);
    store(s->trg, s->real, plan->targets, plan->n_targets * dim, 1);
    int64_t h, d;
    direct_memory(plan, plan->n_sources, plan->n_targets, &h, &d);
    plan->state_bytes_host = h;
    return FMK_OK;
}

static fmk_status direct_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                              int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    cpu_direct *s = plan->state;
    const int cw = fmk_kernel_width(plan->kernel);
    const int dim = plan->dim, cplx = cw == 2;
    const int64_t nt = plan->n_targets;
    const fmk_frame f = plan->frame;
    double t0 = fmk_time_now();
    store(s->src[3], s->real, charges, plan->n_sources, cw);
    if (cplx)
        store(s->src[2], s->real, charges + 1, plan->n_sources, cw);
    double t1 = fmk_time_now();

    const int64_t nblocks = (nt + TARGET_BLOCK - 1) / TARGET_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(plan->threads)
    for (int64_t b = 0; b < nblocks; b++) {
        if (fmk_interrupt_team(plan)) /* the caller asked to stop: skip the remaining blocks */
            continue;
        double acc[4 * TARGET_BLOCK];
        int64_t i0 = b * TARGET_BLOCK, i1 = i0 + TARGET_BLOCK < nt ? i0 + TARGET_BLOCK : nt;
        memset(acc, 0, sizeof acc);
        if (s->real == sizeof(float))
            p2p32_block(plan, (const float *const *)s->src, s->trg, i0, i1, acc);
        else
            p2p64_block(plan, (const double *const *)s->src, s->trg, i0, i1, acc);
        for (int64_t i = i0; i < i1; i++) {
            const double *a = acc + 4 * (i - i0);
            if (cplx) {
                if (pot)
                    pot[2 * i] = a[0] * f.pot_scale, pot[2 * i + 1] = a[1] * f.pot_scale;
                if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
                    grad[2 * i] = a[2] * f.pot_scale * f.pot_scale,
                             grad[2 * i + 1] = a[3] * f.pot_scale * f.pot_scale;
            } else {
                /* log2d keeps its own scale (log_width was added per source) */
                if (pot)
                    pot[i] = plan->kernel == FMK_KERNEL_LOG2D ? a[0] : a[0] * f.pot_scale;
                if (grad)
                    for (int k = 0; k < dim; k++)
                        grad[dim * i + k] = plan->kernel == FMK_KERNEL_LOG2D
                                                ? a[1 + k] * f.pot_scale
                                                : a[1 + k] * f.pot_scale * f.pot_scale;
            }
        }
    }
    if (fmk_interrupt_stopped(plan))
        return fmk_interrupt_status(plan);
    plan->info.phase_time[FMK_PHASE_UPLOAD] = t1 - t0;
    plan->info.phase_time[FMK_PHASE_P2P] = fmk_time_now() - t1;
    return FMK_OK;
}

const fmk_engine fmk_engine_direct_cpu = {
    .name = "direct/cpu",
    .setup = direct_setup,
    .eval = direct_eval,
    .memory = direct_memory,
    .release = direct_release,
};
