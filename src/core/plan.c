/* plan.c -- the plan life cycle: create, set_points, eval, info, destroy, and the one-shot call.
 * Everything the caller passes is validated here; engines receive checked, mapped input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "core/internal.h"
#include "core/tune.h"

/* Smallest mapped softening each precision can resolve: below it s'^2 is lost against the
 * spacing of mapped coordinates (2^-52 / 2^-23 of the box). */
static const double min_softening[2] = {1e-15, 1e-7};

static int kernel_is_smooth(fmk_kernel k)
{
    return fmk_kernel_desc_of(k)->smooth;
}

int fmk_method_available(fmk_method method, int dim, fmk_backend backend)
{
    if ((dim != 2 && dim != 3) || !fmk_method_name(method) || !fmk_backend_name(backend))
        return 0;
    /* devices are counted for backends auto and cuda only: asking about the CPU never starts
     * the CUDA runtime */
    if (backend == FMK_BACKEND_AUTO)
        backend = fmk_cuda_count_devices() > 0 ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
    else if (backend == FMK_BACKEND_CUDA && fmk_cuda_count_devices() <= 0)
        return 0;
    if (method == FMK_METHOD_AUTO)
        method = FMK_METHOD_DIRECT;
    return fmk_engines_find(method, dim, backend) != NULL;
}

/* The engine's own checks: it exists, its accuracy range, its options (check_opts). */
fmk_status fmk_plan_engine_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps, fmk_info *info)
{
    const fmk_engine *engine = fmk_engines_find(o->method, dim, o->backend);
    if (!engine)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method %s is not available in %dD on backend %s (kernel %s)",
                             fmk_method_name(o->method), dim, fmk_backend_name(o->backend),
                             fmk_kernel_name(kernel));
    if (o->order == -1 && eps < engine->eps_min)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "eps = %g is below what method %s reaches on backend %s (about %g, "
                             "with its largest expansion order): use backend cpu (or auto), or "
                             "set opts.order to accept what an order gives",
                             eps, fmk_method_name(o->method), fmk_backend_name(o->backend),
                             engine->eps_min);
    if (engine->check_opts)
        return engine->check_opts(o, kernel, dim, eps, info);
    return FMK_OK;
}

/* Checks opts against what holds for every method; resolves AUTO method and backend into *out
 * and lets the chosen engine check the rest (and fill what it resolved into *info). plan is
 * NULL here: messages go to the calling thread. */
static fmk_status check_opts(const fmk_opts *in, fmk_kernel kernel, int dim, double eps,
                             fmk_opts *out, fmk_info *info)
{
    fmk_opts o;
    if (in)
        o = *in;
    else
        fmk_opts_default(&o);
    if (!fmk_method_name(o.method))
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.method = %d is not an fmk_method",
                             (int)o.method);
    if (!fmk_backend_name(o.backend))
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.backend = %d is not an fmk_backend",
                             (int)o.backend);
    if (o.precision != FMK_PRECISION_FP64 && o.precision != FMK_PRECISION_FP32)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.precision = %d is not an fmk_precision",
                             (int)o.precision);
    if (o.threads < 0 || o.threads > FMK_THREADS_MAX)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "opts.threads = %d; use 0 for the default or a count in 1..%d "
                             "(FMK_THREADS_MAX)",
                             (int)o.threads, FMK_THREADS_MAX);
    if (o.device < 0)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.device = %d is negative", (int)o.device);
    if (o.order < -1 || o.order > 60)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.order = %d; use -1 (from eps) or 0..60",
                             (int)o.order);
    if (o.leaf_size < 0)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.leaf_size = %lld is negative",
                             (long long)o.leaf_size);
    if (!isfinite(o.softening) || o.softening < 0)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.softening = %g; it must be finite and >= 0",
                             o.softening);
    if (kernel_is_smooth(kernel) && !(o.softening > 0))
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "kernel %s needs a softening length: set opts.softening > 0",
                             fmk_kernel_name(kernel));
    if (!isfinite(o.theta) || o.theta < 0 || o.theta >= 2)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "opts.theta = %g; use 0 for the method default or a value in (0, 2)",
                             o.theta);
    if (o.verbose != 0 && o.verbose != 1)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.verbose = %d; use 0 or 1", (int)o.verbose);
    if (o.walk != FMK_WALK_AUTO && o.walk != FMK_WALK_GROUP && o.walk != FMK_WALK_STACKLESS)
        return fmk_error_set(NULL, FMK_ERR_ARG, "opts.walk = %d is not an fmk_walk", (int)o.walk);
    if (o.n_vectors < 0 || o.n_vectors > FMK_VECTORS_MAX)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "opts.n_vectors = %d; use 0 or 1 (one vector) up to %d "
                             "(FMK_VECTORS_MAX)",
                             (int)o.n_vectors, FMK_VECTORS_MAX);
    if (o.n_vectors == 0)
        o.n_vectors = 1;
    if (o.method == FMK_METHOD_AUTO) {
        /* auto picks the method at set_points, when the sizes are known (core/choose.c); the
         * expert settings belong to one method, so they ask for that method by name */
        const char *expert = o.order != -1             ? "order"
                             : o.theta != 0            ? "theta"
                             : o.leaf_size != 0        ? "leaf_size"
                             : o.walk != FMK_WALK_AUTO ? "walk"
                                                       : NULL;
        if (expert)
            return fmk_error_set(NULL, FMK_ERR_ARG,
                                 "opts.%s is an expert setting of one method, and method auto "
                                 "picks the method from the sizes at set_points: set opts.method "
                                 "(tree or fmm) with it",
                                 expert);
        o.method = FMK_METHOD_DIRECT; /* until set_points: every backend has it */
    }

    /* Devices are counted only where a GPU may be used: a CPU plan never starts the CUDA
     * runtime (which costs memory and time, and can fail on its own). */
    const int backend_auto = o.backend == FMK_BACKEND_AUTO;
    const int ndev = backend_auto || o.backend == FMK_BACKEND_CUDA ? fmk_cuda_count_devices() : 0;
    if (backend_auto)
        o.backend = ndev > 0 ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
    if (o.backend == FMK_BACKEND_CUDA) {
        if (ndev < 0)
            return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                                 "this build of fmmkit has no CUDA backend; use backend cpu");
        if (ndev == 0)
            return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                                 "no CUDA device was found; use backend cpu");
        if (o.device >= ndev)
            return fmk_error_set(NULL, FMK_ERR_ARG,
                                 "opts.device = %d but only %d CUDA device(s) exist", (int)o.device,
                                 ndev);
    }
    fmk_opts tried = o;
    fmk_info got = *info;
    fmk_status st = fmk_plan_engine_opts(&tried, kernel, dim, eps, &got);
    if (st == FMK_ERR_UNAVAILABLE && backend_auto && o.backend == FMK_BACKEND_CUDA) {
        /* backend auto: what the GPU engine cannot do (a kernel, a precision, an accuracy) is
         * done on the CPU */
        tried = o;
        tried.backend = FMK_BACKEND_CPU;
        got = *info;
        st = fmk_plan_engine_opts(&tried, kernel, dim, eps, &got);
    }
    if (st != FMK_OK)
        return st;
    *out = tried;
    *info = got;
    return FMK_OK;
}

static void cpu_device_name(fmk_plan *p)
{
    snprintf(p->info.device_name, sizeof p->info.device_name, "cpu (%d thread%s)", p->threads,
             p->threads == 1 ? "" : "s");
}

fmk_status fmk_plan_create(fmk_plan **plan, int dim, fmk_kernel kernel, double eps,
                           const fmk_opts *opts)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_create: plan (the output) is NULL");
    *plan = NULL;
    if (dim != 2 && dim != 3)
        return fmk_error_set(NULL, FMK_ERR_ARG, "dim = %d; fmmkit works in 2 or 3 dimensions", dim);
    if (!fmk_kernel_name(kernel))
        return fmk_error_set(NULL, FMK_ERR_ARG, "kernel = %d is not an fmk_kernel", (int)kernel);
    if (fmk_kernel_dim(kernel) != dim)
        return fmk_error_set(NULL, FMK_ERR_ARG, "kernel %s is %dD but dim = %d",
                             fmk_kernel_name(kernel), fmk_kernel_dim(kernel), dim);
    if (!(eps > 0 && eps < 1))
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "eps = %g; the requested relative accuracy must lie in (0, 1)", eps);
    fmk_opts o;
    fmk_info resolved;
    memset(&resolved, 0, sizeof resolved);
    fmk_status st = check_opts(opts, kernel, dim, eps, &o, &resolved);
    if (st != FMK_OK)
        return st;

    fmk_plan *p = calloc(1, sizeof *p);
    if (!p)
        return fmk_error_set(NULL, FMK_ERR_NOMEM, "fmk_plan_create: out of host memory (%zu bytes)",
                             sizeof *p);
    p->dim = dim;
    p->kernel = kernel;
    p->eps = eps;
    p->opts = o;
    p->threads = fmk_opts_resolve_threads(o.threads);
    p->engine = fmk_engines_find(o.method, dim, o.backend);
    p->method_auto = !opts || opts->method == FMK_METHOD_AUTO;
    if (fmk_tune_alloc(p) != FMK_OK || fmk_interrupt_alloc(p) != 0) {
        fmk_tune_free(p);
        free(p);
        return fmk_error_set(NULL, FMK_ERR_NOMEM, "fmk_plan_create: out of host memory");
    }

    fmk_info *in = &p->info;
    *in = resolved; /* what the engine's check resolved (order, theta) */
    in->dim = dim;
    in->kernel = kernel;
    in->method = o.method;
    in->backend = o.backend;
    in->precision = o.precision;
    in->eps = eps;
    if (o.backend == FMK_BACKEND_CUDA) {
        st = fmk_cuda_device_name(p, o.device, in->device_name, sizeof in->device_name);
        if (st != FMK_OK) {
            fmk_error_set(NULL, st, "%s", p->error);
            fmk_interrupt_free(p);
            fmk_tune_free(p);
            free(p);
            return st;
        }
    } else {
        cpu_device_name(p);
    }
    *plan = p;
    return FMK_OK;
}

/* The most sources (and the most targets) a plan takes: their coordinates and four values a
 * point stay well inside int64 bytes. */
#define MAX_POINTS (INT64_MAX / (8 * 3 * 4))

/* Before a call that runs parallel loops: in a child forked after the plan was made, one
 * thread (fmk_opts_resolve_threads). The count only ever goes down, so buffers sized for it
 * by an earlier set_points stay large enough. */
void fmk_plan_refresh_threads(fmk_plan *plan)
{
    int t = fmk_opts_resolve_threads(plan->threads);
    if (t < plan->threads) {
        plan->threads = t;
        if (plan->opts.backend != FMK_BACKEND_CUDA)
            cpu_device_name(plan);
    }
}

/* Loops over the caller's arrays (validation, bounding box, mapping) use the plan's threads
 * from this many values on. */
enum { PAR_MIN = 1 << 16 };

/* First non-finite value of an (n, dim) array, or -1. */
int64_t fmk_plan_first_nonfinite(const double *x, int64_t count, int threads)
{
    int64_t first = count;
#pragma omp parallel for reduction(min : first) num_threads(threads) if (count >= PAR_MIN)
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i]) && i < first)
            first = i;
    return first < count ? first : -1;
}

static fmk_status check_points(fmk_plan *plan, const char *what, int64_t n, const double *x)
{
    int64_t bad = fmk_plan_first_nonfinite(x, n * plan->dim, plan->threads);
    if (bad >= 0)
        return fmk_error_set(plan, FMK_ERR_NONFINITE, "%s[%lld][%d] is %g; points must be finite",
                             what, (long long)(bad / plan->dim), (int)(bad % plan->dim), x[bad]);
    return FMK_OK;
}

/* Bounding box of both point sets (host arrays). Empty sets leave lo > hi. */
static void bounding_box(int dim, int64_t ns, const double *s, int64_t nt, const double *t,
                         double lo[3], double hi[3], int threads)
{
    double l0 = INFINITY, l1 = INFINITY, l2 = INFINITY;
    double h0 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY;
    for (int pass = 0; pass < 2; pass++) {
        const double *x = pass ? t : s;
        const int64_t n = pass ? nt : ns;
#pragma omp parallel for reduction(min                                   \
                                   : l0, l1, l2) reduction(max           \
                                                           : h0, h1, h2) \
    num_threads(threads) if (n * dim >= PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            const double *p = x + dim * i;
            l0 = p[0] < l0 ? p[0] : l0, h0 = p[0] > h0 ? p[0] : h0;
            l1 = p[1] < l1 ? p[1] : l1, h1 = p[1] > h1 ? p[1] : h1;
            if (dim == 3)
                l2 = p[2] < l2 ? p[2] : l2, h2 = p[2] > h2 ? p[2] : h2;
        }
    }
    lo[0] = l0, lo[1] = l1, lo[2] = l2;
    hi[0] = h0, hi[1] = h1, hi[2] = h2;
}

/* The centre of axis [lo, hi] in an exact frame (internal.h): a value within a factor 2 of every
 * coordinate, so that x - center is exact (Sterbenz), when the axis lies on one side of 0 within
 * a factor 2; else 0. lo + (hi - lo) / 2 lies in [lo, hi] (hi - lo is exact). Either way
 * |x - center| < 2 w (w >= hi - lo): with centre 0 the axis holds 0, or its largest |x| is below
 * twice hi - lo. */
static double exact_center(double lo, double hi)
{
    if ((lo > 0 && hi <= 2 * lo) || (hi < 0 && lo >= 2 * hi)) {
        const double c = lo + 0.5 * (hi - lo);
        return c >= lo && c <= hi ? c : 0;
    }
    return 0;
}

/* The narrowest frame: 2^-1000, so that its inverse (pot_scale, up to 2^1000) is a double; the
 * points of a narrower box (subnormal coordinates) map into a small part of it. */
#define FRAME_MIN_EXP (-1000)

fmk_status fmk_plan_frame_from_box(fmk_plan *plan, const double lo_in[3], const double hi_in[3],
                                   fmk_frame *f)
{
    const int dim = plan->dim;
    double extent = 0;
    memset(f, 0, sizeof *f);
    f->kind = plan->engine ? plan->engine->frame[plan->opts.precision] : FMK_FRAME_BOX;
    f->offset = f->kind == FMK_FRAME_EXACT ? 0.0 : 1.5;
    for (int k = 0; k < dim; k++) {
        double lo = lo_in[k], hi = hi_in[k];
        if (lo > hi) /* no points at all */
            lo = hi = 0;
        f->center[k] = f->kind == FMK_FRAME_EXACT ? exact_center(lo, hi) : 0.5 * lo + 0.5 * hi;
        double e = hi - lo;
        if (!isfinite(e))
            return fmk_error_set(plan, FMK_ERR_ARG,
                                 "the points span more than the largest double along axis %d", k);
        extent = e > extent ? e : extent;
    }
    double s_soft = kernel_is_smooth(plan->kernel) ? plan->opts.softening : 0;
    double size = extent > s_soft ? extent : s_soft;
    if (size == 0)
        size = 1;
    int ex;
    double m = frexp(size, &ex); /* size = m 2^ex, m in [0.5, 1) */
    f->width_exp = m == 0.5 ? ex - 1 : ex;
    if (f->width_exp < FRAME_MIN_EXP) /* a box of subnormal size: 1 / width must be a double */
        f->width_exp = FRAME_MIN_EXP;
    f->width = ldexp(1.0, f->width_exp);
    if (!isfinite(f->width)) /* size > 2^1023: the power of two above it is not a double */
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "the points' box (%g) is wider than 2^1023, which fmmkit cannot "
                             "scale; rescale the coordinates",
                             size);
    f->pot_scale = 1.0 / f->width;
    f->grad_scale = f->pot_scale * f->pot_scale;
    f->log_width = log(f->width);
    f->softening = s_soft / f->width;
    if (s_soft > 0 && f->softening < min_softening[plan->opts.precision])
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "softening %g is below %g times the size of the points' box (%g), "
                             "which %s arithmetic cannot resolve; use a larger softening%s",
                             s_soft, min_softening[plan->opts.precision], extent,
                             plan->opts.precision == FMK_PRECISION_FP32 ? "fp32" : "fp64",
                             plan->opts.precision == FMK_PRECISION_FP32 ? " or fp64" : "");
    return FMK_OK;
}

/* Maps n points into the frame; returns 1 when every coordinate was mapped exactly: x - c
 * without rounding (its Knuth two-sum error is 0), the scaling without underflow, and the sum
 * with 1.5 without rounding (y - 1.5 is exact in [1, 2], Sterbenz). */
static int map_points(const fmk_frame *f, int dim, int64_t n, const double *x, double *out,
                      int threads)
{
    int exact = 1;
#pragma omp parallel for num_threads(threads) if (n * dim >= PAR_MIN) reduction(&& : exact)
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < dim; k++) { /* fmk_frame_map, with its rounding checked */
            const double a = x[dim * i + k], b = -f->center[k], t = a + b;
            const double bt = t - a, at = t - bt, u = t * f->pot_scale, y = f->offset + u;
            out[dim * i + k] = y;
            exact = exact && (a - at) + (b - bt) == 0 && u * f->width == t && y - f->offset == u;
        }
    return exact;
}

/* Values per target of both outputs (plan.c stages host results: plan->staged). */
static int64_t output_width(const fmk_plan *plan)
{
    return fmk_kernel_width(plan->kernel) + fmk_kernel_grad_width(plan->kernel, plan->dim);
}

size_t fmk_plan_staged_bytes(const fmk_plan *plan, int64_t n_targets)
{
    return (size_t)(n_targets > 0 ? n_targets : 1) * (size_t)output_width(plan) * sizeof(double);
}

void fmk_plan_drop_points(fmk_plan *plan)
{
    if (plan->engine && plan->engine->release)
        plan->engine->release(plan);
    if (plan->targets != plan->sources)
        free(plan->targets);
    free(plan->sources);
    free(plan->staged);
    plan->sources = plan->targets = plan->staged = NULL;
    plan->has_points = 0;
    plan->n_sources = plan->n_targets = 0;
    plan->state_bytes_host = plan->state_bytes_device = 0;
    plan->info.bytes_host = plan->info.bytes_device = 0;
    plan->self_slice = 0;
    plan->self_base = 0;
    fmk_plan_clear_interactions(plan);
}

void fmk_plan_clear_interactions(fmk_plan *plan)
{
    plan->interactions_p2p = plan->interactions_far = 0;
    plan->info.interactions_p2p = plan->info.interactions_far = 0;
}

/* The threads a call of these sizes uses: the plan's (opts.threads, else OpenMP's), but at most
 * one a 2^20 pairs of the direct sum or a 2048 points of the other methods, so that a small
 * call does not pay for parallel regions and their barriers (on a busy machine a descheduled
 * thread holds every barrier for a time slice: the CPU 2D FMM of 400 points took 300 ms with
 * two threads against 0.4 ms with one). Set at set_points, before the engine sizes its
 * per-thread buffers; the evaluations keep it. */
static int threads_for_size(const fmk_plan *plan, int64_t n_sources, int64_t n_targets)
{
    const int most = fmk_opts_resolve_threads(plan->opts.threads);
    const double work = plan->opts.method == FMK_METHOD_DIRECT
                            ? (double)n_sources * (double)n_targets / (double)(1 << 20)
                            : (double)(n_sources + n_targets) / 2048.0;
    return work >= most ? most : work < 1 ? 1 : (int)work;
}

/* fmk_plan_set_points with a box the frame must contain (lo, hi; NULL: none) and the slice
 * of the sources that separate targets are (slice_base >= 0; core/hooks.h). */
static fmk_status set_points_host(fmk_plan *plan, int64_t n_sources, const double *sources,
                                  int64_t n_targets, const double *targets, const double *box_lo,
                                  const double *box_hi, int64_t slice_base)
{
    fmk_plan_refresh_threads(plan);
    fmk_interrupt_begin(plan);
    double t0 = fmk_time_now();
    const int dim = plan->dim;
    const int64_t max_n = MAX_POINTS;
    if (n_sources < 0 || n_sources > max_n)
        return fmk_error_set(plan, FMK_ERR_ARG, "n_sources = %lld is out of range",
                             (long long)n_sources);
    if (n_targets < 0 || n_targets > max_n)
        return fmk_error_set(plan, FMK_ERR_ARG, "n_targets = %lld is out of range",
                             (long long)n_targets);
    if (!sources && n_sources > 0)
        return fmk_error_set(plan, FMK_ERR_NULL, "sources is NULL but n_sources = %lld",
                             (long long)n_sources);
    if (!targets && n_targets > 0)
        return fmk_error_set(plan, FMK_ERR_NULL,
                             "targets is NULL but n_targets = %lld (pass n_targets = 0 and "
                             "targets = NULL to evaluate at the sources)",
                             (long long)n_targets);
    const int self = targets == NULL;
    if (self)
        n_targets = n_sources;
    fmk_status st = check_points(plan, "sources", n_sources, sources);
    if (st == FMK_OK && !self)
        st = check_points(plan, "targets", n_targets, targets);
    double lo[3], hi[3], width = 0;
    if (st == FMK_OK) {
        bounding_box(dim, n_sources, sources, self ? 0 : n_targets, targets, lo, hi, plan->threads);
        for (int k = 0; box_lo && box_hi && k < dim; k++) {
            lo[k] = box_lo[k] < lo[k] ? box_lo[k] : lo[k];
            hi[k] = box_hi[k] > hi[k] ? box_hi[k] : hi[k];
        }
        for (int k = 0; k < dim; k++)
            width = hi[k] - lo[k] > width ? hi[k] - lo[k] : width;
    }
    if (st == FMK_OK) /* method auto: the engine for these sizes (it makes the frame) */
        st = fmk_choose_engine(plan, n_sources, self ? -1 : n_targets, width);
    if (st == FMK_OK) { /* no evaluation of these points yet; the threads for these sizes */
        fmk_plan_clear_interactions(plan);
        plan->threads = threads_for_size(plan, n_sources, n_targets);
    }
    fmk_frame frame;
    if (st == FMK_OK)
        st = fmk_plan_frame_from_box(plan, lo, hi, &frame);
    if (st != FMK_OK)
        return st;

    /* Validation passed: from here a failure leaves the plan without points. The host copies
     * are kept when the sizes repeat (new pages cost more than the copy into them). */
    double *keep_s = NULL, *keep_t = NULL, *keep_r = NULL;
    if (plan->sources && plan->n_sources == n_sources && (plan->targets == plan->sources) == self &&
        (self || plan->n_targets == n_targets)) {
        keep_s = plan->sources, keep_t = plan->targets, keep_r = plan->staged;
        plan->sources = plan->targets = plan->staged = NULL;
    }
    void *keep_state = NULL; /* an engine that reuses its state gets it back in setup */
    if (plan->engine->reuses_state)
        keep_state = plan->state, plan->state = NULL;
    fmk_plan_drop_points(plan);
    plan->state = keep_state;
    size_t sbytes = (size_t)(n_sources > 0 ? n_sources : 1) * dim * sizeof(double);
    size_t tbytes = (size_t)(n_targets > 0 ? n_targets : 1) * dim * sizeof(double);
    size_t rbytes = fmk_plan_staged_bytes(plan, n_targets);
    plan->sources = keep_s ? keep_s : malloc(sbytes);
    plan->targets = self ? plan->sources : keep_t ? keep_t : malloc(tbytes);
    plan->staged = keep_r ? keep_r : malloc(rbytes);
    if (!plan->sources || !plan->targets || !plan->staged) {
        fmk_plan_drop_points(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory copying %zu bytes of points",
                             sbytes + (self ? 0 : tbytes) + rbytes);
    }
    plan->frame = frame;
    plan->self = self;
    plan->self_slice = !self && slice_base >= 0 && plan->engine->takes_self_slice;
    plan->self_base = plan->self_slice ? slice_base : 0;
    plan->n_sources = n_sources;
    plan->n_targets = n_targets;
    plan->frame.exact = map_points(&frame, dim, n_sources, sources, plan->sources, plan->threads);
    if (!self)
        plan->frame.exact &=
            map_points(&frame, dim, n_targets, targets, plan->targets, plan->threads);

    plan->raw_sources = sources, plan->raw_targets = self ? NULL : targets;
    st = fmk_interrupt_poll(plan) ? fmk_interrupt_status(plan) : plan->engine->setup(plan);
    plan->raw_sources = plan->raw_targets = NULL;
    if (st != FMK_OK) {
        fmk_plan_drop_points(plan);
        return st;
    }
    plan->has_points = 1;
    fmk_info *in = &plan->info;
    in->n_sources = n_sources;
    in->n_targets = n_targets;
    in->bytes_host = (int64_t)(sbytes + (self ? 0 : tbytes) + rbytes) + plan->state_bytes_host;
    in->bytes_device = plan->state_bytes_device;
    const double tree_time = in->phase_time[FMK_PHASE_TREE]; /* the engine's setup wrote it */
    memset(in->phase_time, 0, sizeof in->phase_time);
    in->phase_time[FMK_PHASE_TREE] = tree_time;
    in->phase_time[FMK_PHASE_SETUP] = fmk_time_now() - t0;
    fmk_error_clear(plan);
    return FMK_OK;
}

fmk_status fmk_plan_set_points(fmk_plan *plan, int64_t n_sources, const double *sources,
                               int64_t n_targets, const double *targets)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_set_points: plan is NULL");
    if (plan->hooks)
        return plan->hooks->set_points(plan, n_sources, sources, n_targets, targets);
    return set_points_host(plan, n_sources, sources, n_targets, targets, NULL, NULL, -1);
}

fmk_status fmk_plan_set_points_in_box(fmk_plan *plan, int64_t n_sources, const double *sources,
                                      int64_t n_targets, const double *targets, const double lo[3],
                                      const double hi[3], int64_t slice_base, int *slice_taken)
{
    if (slice_taken)
        *slice_taken = 0;
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_set_points_in_box: plan is NULL");
    if (plan->hooks)
        return fmk_error_set(plan, FMK_ERR_STATE,
                             "fmk_plan_set_points_in_box takes an ordinary plan");
    if (slice_base >= 0 && (!targets || slice_base > n_sources - n_targets))
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "fmk_plan_set_points_in_box: the targets are not sources [%lld, "
                             "%lld + %lld) of %lld",
                             (long long)slice_base, (long long)slice_base, (long long)n_targets,
                             (long long)n_sources);
    fmk_status st =
        set_points_host(plan, n_sources, sources, n_targets, targets, lo, hi, slice_base);
    if (st == FMK_OK && slice_taken)
        *slice_taken = plan->self_slice;
    return st;
}

fmk_status fmk_plan_set_points_device(fmk_plan *plan, int64_t n_sources, const double *d_sources,
                                      int64_t n_targets, const double *d_targets)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_set_points_device: plan is NULL");
    if (plan->hooks && plan->hooks->set_points_device)
        return plan->hooks->set_points_device(plan, n_sources, d_sources, n_targets, d_targets);
    if (plan->hooks)
        return fmk_error_set(plan, FMK_ERR_UNAVAILABLE,
                             "fmk_plan_set_points_device does not take %s plans; use "
                             "fmk_plan_set_points",
                             plan->hooks->name);
    fmk_plan_refresh_threads(plan);
    fmk_interrupt_begin(plan);
    const int64_t max_n = MAX_POINTS;
    if (n_sources < 0 || n_sources > max_n || n_targets < 0 || n_targets > max_n)
        return fmk_error_set(plan, FMK_ERR_ARG, "n_sources = %lld, n_targets = %lld out of range",
                             (long long)n_sources, (long long)n_targets);
    if ((!d_sources && n_sources > 0) || (!d_targets && n_targets > 0))
        return fmk_error_set(plan, FMK_ERR_NULL,
                             "fmk_plan_set_points_device: a point array is NULL");
    if (!plan->engine->set_points_device)
        return fmk_error_set(
            plan, FMK_ERR_STATE,
            "fmk_plan_set_points_device needs a plan with backend cuda (this one is %s)",
            fmk_backend_name(plan->opts.backend));
    double t0 = fmk_time_now();
    /* method auto with a smooth kernel: the points' extent (its FMM's tree depth); where it
     * cannot be had, the choice for an unknown extent (choose.c) */
    double width = -1;
    const int smooth = plan->kernel == FMK_KERNEL_PLUMMER || plan->kernel == FMK_KERNEL_REGULARIZED;
    if (plan->method_auto && smooth && plan->opts.softening > 0 && n_sources > 0 &&
        fmk_cuda_points_extent(plan, n_sources, d_sources, d_targets ? n_targets : 0, d_targets,
                               &width) != FMK_OK)
        width = -1;
    fmk_status st = fmk_choose_engine(plan, n_sources, d_targets ? n_targets : -1, width);
    if (st == FMK_OK) { /* no evaluation of these points yet (the engine's setup may fill the
                         * plan's counts) */
        fmk_plan_clear_interactions(plan);
        st = plan->engine->set_points_device(plan, n_sources, d_sources, n_targets, d_targets);
    }
    if (st != FMK_OK)
        return st;
    fmk_info *in = &plan->info;
    in->n_sources = plan->n_sources;
    in->n_targets = plan->n_targets;
    in->bytes_host = plan->state_bytes_host;
    in->bytes_device = plan->state_bytes_device;
    const double tree_time = in->phase_time[FMK_PHASE_TREE]; /* the engine's setup wrote it */
    memset(in->phase_time, 0, sizeof in->phase_time);
    in->phase_time[FMK_PHASE_TREE] = tree_time;
    in->phase_time[FMK_PHASE_SETUP] = fmk_time_now() - t0;
    fmk_error_clear(plan);
    return FMK_OK;
}

/* Common checks of an evaluation call. */
fmk_status fmk_plan_memory(const fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                           int64_t *bytes_host, int64_t *bytes_device)
{
    if (!plan || !bytes_host || !bytes_device)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_memory: a pointer argument is NULL");
    if (n_sources < 0 || n_targets < -1)
        return fmk_error_set((fmk_plan *)plan, FMK_ERR_ARG,
                             "fmk_plan_memory: n_sources = %lld, n_targets = %lld out of range",
                             (long long)n_sources, (long long)n_targets);
    if (n_sources > MAX_POINTS || n_targets > MAX_POINTS)
        return fmk_error_set((fmk_plan *)plan, FMK_ERR_ARG,
                             "fmk_plan_memory: n_sources = %lld, n_targets = %lld; a plan takes "
                             "at most %lld points of each kind",
                             (long long)n_sources, (long long)n_targets, (long long)MAX_POINTS);
    int64_t h = 0, d = 0;
    fmk_plan sized = *plan; /* the threads (hence per-thread buffers) these sizes would use */
    sized.threads = threads_for_size(plan, n_sources, n_targets < 0 ? n_sources : n_targets);
    fmk_choose_memory(&sized, n_sources, n_targets, &h, &d);
    const int64_t points = n_sources + (n_targets < 0 ? 0 : n_targets);
    h = fmk_bytes_plus(h, plan->dim * (int64_t)sizeof(double), points);
    /* the staged results of host evaluations */
    h = fmk_bytes_plus(h, output_width(plan) * (int64_t)sizeof(double),
                       n_targets < 0 ? n_sources : n_targets);
    if (h == FMK_BYTES_OVERFLOW || d == FMK_BYTES_OVERFLOW)
        return fmk_error_set((fmk_plan *)plan, FMK_ERR_ARG,
                             "fmk_plan_memory: n_sources = %lld, n_targets = %lld would need more "
                             "bytes than an int64 counts (or than method %s on backend %s "
                             "estimates), far beyond any machine's memory",
                             (long long)n_sources, (long long)n_targets,
                             fmk_method_name(plan->opts.method),
                             fmk_backend_name(plan->opts.backend));
    *bytes_host = h;
    *bytes_device = d;
    return FMK_OK;
}

fmk_status fmk_plan_info(const fmk_plan *plan, fmk_info *info)
{
    if (!plan || !info)
        return fmk_error_set(NULL, FMK_ERR_NULL, "fmk_plan_info: plan or info is NULL");
    *info = plan->info;
    return FMK_OK;
}

void fmk_plan_destroy(fmk_plan *plan)
{
    if (!plan)
        return;
    if (plan->hooks && plan->hooks->release)
        plan->hooks->release(plan, plan->hook_state);
    fmk_plan_drop_points(plan);
    fmk_interrupt_free(plan);
    fmk_tune_free(plan);
    free(plan);
}

fmk_status fmk_eval(int dim, fmk_kernel kernel, double eps, const fmk_opts *opts, int64_t n_sources,
                    const double *sources, const double *charges, int64_t n_targets,
                    const double *targets, double *pot, double *grad)
{
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, dim, kernel, eps, opts);
    if (st != FMK_OK)
        return st;
    st = fmk_plan_set_points(plan, n_sources, sources, n_targets, targets);
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, charges, pot, grad);
    if (st != FMK_OK)
        fmk_error_set(NULL, st, "%s", plan->error);
    fmk_plan_destroy(plan);
    return st;
}
