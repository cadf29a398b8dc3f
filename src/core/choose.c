/*
 * choose.c -- method auto: which method a plan uses for the sizes of its points
 * (docs/choosing.md).
 *
 * The direct sum costs a N M pair terms, an FMM about b (N + M) (its trees, translations and
 * near field, per point); the FMM is the faster from N M / (N + M) = b / a on, which for
 * targets at the sources is N = 2 b / a =: N*. So a plan picks the FMM where
 *     2 N M / (N + M) >= N*(backend, dimension, precision, eps)
 * and the direct sum below: a handful of targets against many sources (or the reverse) stays
 * direct however large the other set. N* comes from measured crossovers (bench_choose,
 * recorded in docs/choosing.md with device and date), at eps 1e-3, 1e-6 and 1e-9,
 * interpolated in log eps. Above N*, the treecode (theta from eps) where its row says it beats
 * the FMM from some eps on (measured; on the CPU it never does: docs/choosing.md).
 *
 * The smooth kernels (plummer, regularized) with a softening so large against the points'
 * extent that the FMM's tree cannot go deep take the treecode (plummer, where it meets eps)
 * or the direct sum instead (smooth_fmm_degenerate below).
 *
 * A picked engine that refuses the plan (a kernel, precision or eps it does not do, such as
 * regularized in the treecode or fp32 in the GPU 2D FMM) leaves the plan with the next: the
 * treecode the FMM, the FMM the direct sum of its backend.
 */
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "core/tune.h"

typedef struct crossover {
    fmk_backend backend;
    int dim;
    fmk_precision precision;
    double n_star[3]; /* at eps 1e-3, 1e-6, 1e-9 */
    double tree_eps;  /* from this eps up the treecode (theta from eps) beats the FMM above N*
                       * (INFINITY: never) */
} crossover;

/* Measured with bench_choose (docs/choosing.md): CPU, 2 cores, after the CPU FMMs' point
 * operators and orders of 2026-11-28 (fp32 not measured: fp64's; the 2D FMM is the faster from
 * the smallest N measured, 256, at eps 1e-3 and 1e-6); GPU, one H200 (fp32 at eps 1e-3 only; the
 * GPU 2D FMM takes no fp32); 2026-11-28. */
static const crossover table[] = {
    {FMK_BACKEND_CPU, 3, FMK_PRECISION_FP64, {2900, 4700, 13500}, INFINITY},
    {FMK_BACKEND_CPU, 3, FMK_PRECISION_FP32, {2900, 4700, 13500}, INFINITY},
    {FMK_BACKEND_CPU, 2, FMK_PRECISION_FP64, {256, 256, 360}, INFINITY},
    {FMK_BACKEND_CPU, 2, FMK_PRECISION_FP32, {256, 256, 360}, INFINITY},
    {FMK_BACKEND_CUDA, 3, FMK_PRECISION_FP64, {41500, 49000, 111000}, INFINITY},
    {FMK_BACKEND_CUDA, 3, FMK_PRECISION_FP32, {8000, 8000, 8000}, 5e-3},
    {FMK_BACKEND_CUDA, 2, FMK_PRECISION_FP64, {31500, 31800, 32200}, INFINITY},
};

static const crossover *row_of(const fmk_plan *plan)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].backend == plan->opts.backend && table[i].dim == plan->dim &&
            table[i].precision == plan->opts.precision)
            return &table[i];
    return NULL;
}

static double n_star(const fmk_plan *plan)
{
    const crossover *c = row_of(plan);
    if (!c)
        return INFINITY;
    /* log-linear in log10 eps between -3, -6 and -9, flat outside */
    double t = -log10(plan->eps);
    t = t < 3 ? 3 : t > 9 ? 9 : t;
    const int k = t < 6 ? 0 : 1;
    const double f = (t - 3 * (k + 1)) / 3;
    return exp((1 - f) * log(c->n_star[k]) + f * log(c->n_star[k + 1]));
}

/* The smooth kernels' FMM takes its far field from laplace expansions only beyond
 * d_min = s / sqrt(eps) (plummer) or s / eps^(1/4) (regularized), s the softening
 * (fmm3d/fmm3d.h, fmk_fmm3d_max_level: no box narrower than d_min is split). Where d_min is
 * more than an eighth of the points' extent its tree stops above level 3 and it is a direct sum
 * with an FMM's overhead (measured: 300 times slower than the direct sum on a softened Plummer
 * sphere, bench/RESULTS.md, "Simulation driver, GPU"). 1 when that is so, or, with the extent
 * unknown (width < 0: points on the device), for plummer, whose treecode takes any softening. */
static int smooth_fmm_degenerate(const fmk_plan *plan, double width)
{
    const fmk_kernel k = plan->kernel;
    if ((k != FMK_KERNEL_PLUMMER && k != FMK_KERNEL_REGULARIZED) || !(plan->opts.softening > 0))
        return 0;
    if (!(width >= 0))
        return k == FMK_KERNEL_PLUMMER;
    const double s = plan->opts.softening;
    const double d_min = k == FMK_KERNEL_PLUMMER ? s / sqrt(plan->eps) : s / sqrt(sqrt(plan->eps));
    return d_min > width / 8;
}

fmk_method fmk_choose_method(const fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                             double width)
{
    const double n = (double)n_sources, m = n_targets < 0 ? n : (double)n_targets;
    if (!(n > 0 && m > 0))
        return FMK_METHOD_DIRECT;
    if (2 * n * m / (n + m) < n_star(plan))
        return FMK_METHOD_DIRECT;
    const crossover *c = row_of(plan);
    const fmk_method fast = c && plan->eps >= c->tree_eps ? FMK_METHOD_TREE : FMK_METHOD_FMM;
    if (fast == FMK_METHOD_FMM && smooth_fmm_degenerate(plan, width)) /* the treecode where it
                                                                       * takes the plan */
        return plan->kernel == FMK_KERNEL_PLUMMER ? FMK_METHOD_TREE : FMK_METHOD_DIRECT;
    return fast;
}

/* The engine and resolved options for method m, or the next where m's engine refuses: the
 * treecode's next is the FMM, or the direct sum where the FMM would be degenerate (no_fmm). */
static const fmk_engine *engine_for(const fmk_plan *plan, fmk_method m, int no_fmm, fmk_opts *o,
                                    fmk_info *info)
{
    *o = plan->opts;
    o->method = m, o->order = -1, o->theta = 0, o->leaf_size = 0, o->walk = FMK_WALK_AUTO;
    *info = plan->info;
    info->order = info->levels = 0, info->leaf_size = 0, info->theta = 0;
    info->walk = FMK_WALK_AUTO;
    const fmk_engine *e = fmk_engines_find(m, plan->dim, o->backend);
    if (e && fmk_plan_engine_opts(o, plan->kernel, plan->dim, plan->eps, info) == FMK_OK)
        return e;
    if (m == FMK_METHOD_DIRECT)
        return NULL; /* not reached: every backend has the direct sum for every kernel */
    /* the treecode refused: the FMM; the FMM refused: the direct sum */
    return engine_for(plan, m == FMK_METHOD_TREE && !no_fmm ? FMK_METHOD_FMM : FMK_METHOD_DIRECT,
                      no_fmm, o, info);
}

fmk_status fmk_choose_engine(fmk_plan *plan, int64_t n_sources, int64_t n_targets, double width)
{
    if (!plan->method_auto)
        return FMK_OK;
    fmk_opts o;
    fmk_info info;
    const fmk_engine *e = engine_for(plan, fmk_choose_method(plan, n_sources, n_targets, width),
                                     smooth_fmm_degenerate(plan, width), &o, &info);
    if (!e)
        return fmk_error_set(plan, FMK_ERR_UNAVAILABLE,
                             "method auto found no engine for these points on backend %s",
                             fmk_backend_name(plan->opts.backend));
    if (e == plan->engine)
        return FMK_OK;
    /* the knobs and counters of the new engine first: a failure leaves the plan as it was */
    const fmk_engine *old = plan->engine;
    void *keep[4] = {plan->tune, plan->counters, plan->shared_tune, plan->shared_counters};
    plan->engine = e;
    if (fmk_tune_alloc(plan) != FMK_OK) {
        plan->engine = old;
        plan->tune = keep[0], plan->counters = keep[1];
        plan->shared_tune = keep[2], plan->shared_counters = keep[3];
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory switching to method %s",
                             fmk_method_name(o.method));
    }
    void *fresh[4] = {plan->tune, plan->counters, plan->shared_tune, plan->shared_counters};
    plan->engine = old, plan->tune = keep[0], plan->counters = keep[1];
    plan->shared_tune = keep[2], plan->shared_counters = keep[3];
    fmk_plan_drop_points(plan); /* with the old engine's release */
    fmk_tune_free(plan);
    plan->engine = e;
    plan->tune = fresh[0], plan->counters = fresh[1];
    plan->shared_tune = fresh[2], plan->shared_counters = fresh[3];
    plan->opts = o;
    info.method = o.method;
    plan->info = info;
    return FMK_OK;
}

void fmk_choose_memory(const fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                       int64_t *bytes_host, int64_t *bytes_device)
{
    if (!plan->method_auto) {
        plan->engine->memory(plan, n_sources, n_targets, bytes_host, bytes_device);
        return;
    }
    fmk_opts o;
    fmk_info info;
    const fmk_engine *e = engine_for(plan, fmk_choose_method(plan, n_sources, n_targets, -1),
                                     smooth_fmm_degenerate(plan, -1), &o, &info);
    if (!e || e == plan->engine) {
        plan->engine->memory(plan, n_sources, n_targets, bytes_host, bytes_device);
        return;
    }
    /* the estimate of the other engine on a copy of the plan with its default knobs */
    fmk_plan copy = *plan;
    copy.engine = e;
    copy.opts = o;
    copy.tune = e->tune ? (void *)e->tune->defaults : NULL;
    copy.shared_tune = e->shared_tune ? (void *)e->shared_tune->defaults : NULL;
    copy.counters = copy.shared_counters = NULL;
    copy.state = NULL;
    e->memory(&copy, n_sources, n_targets, bytes_host, bytes_device);
}
