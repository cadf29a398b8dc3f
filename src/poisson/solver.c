/* solver.c -- the Poisson solver's life cycle (include/fmmkit_poisson.h, docs/poisson.md): every
 * check of the caller's input, the grid as boxes (poisson.h), the staging of results (nothing
 * reaches the caller unless the whole solve succeeded with finite values), errors and
 * interrupts. The methods are reached through their rows in methods.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/poisson.h"

/* Largest grid side and point count taken: 2^20 keeps the FFT's padded sides (2n) inside
 * FFTW's int sizes; 2^40 points (8 TB per scalar field) is beyond any machine's memory, so
 * every size and byte count below stays far inside int64. */
#define POISSON_SIDE_MAX ((int64_t)1 << 20)
#define POISSON_POINTS_MAX ((int64_t)1 << 40)
/* The smoothing may lie 2^20 above or below h: beyond that G's arithmetic in grid units
 * (e^2 in (r^2 + e^2)) leaves no useful digits, and no discretisation wants it. */
#define POISSON_SMOOTHING_RANGE 0x1p20

/* The start of every set_grid and solve: a request made while no call ran is dropped. */
static void call_begin(fmk_poisson *s)
{
    fmk_interrupt_start(&s->interrupt);
    const int t = fmk_opts_resolve_threads(s->opts.threads);
    if (t < s->threads)
        s->threads = t; /* only ever lower: a forked child runs one thread */
    s->info.threads = s->threads;
}

void fmk_poisson_opts_default(fmk_poisson_opts *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->method = FMK_POISSON_AUTO;
    opts->backend = FMK_BACKEND_AUTO;
}

static fmk_status check_opts(const fmk_poisson_opts *opts, double eps, fmk_poisson_opts *o)
{
    if (opts)
        *o = *opts;
    else
        fmk_poisson_opts_default(o);
    if (!fmk_poisson_method_name(o->method))
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "opts.method = %d is not an fmk_poisson_method",
                               (int)o->method);
    if (!fmk_backend_name(o->backend))
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "opts.backend = %d is not an fmk_backend",
                               (int)o->backend);
    if (!(isfinite(o->smoothing) && o->smoothing >= 0))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "opts.smoothing = %g; use 0 (eps = h) or a finite length > 0",
                               o->smoothing);
    if (o->threads < 0 || o->threads > FMK_THREADS_MAX)
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "opts.threads = %d; use 0 (OpenMP's default) or 1..%d",
                               (int)o->threads, FMK_THREADS_MAX);
    if (o->verbose != 0 && o->verbose != 1)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "opts.verbose = %d; use 0 or 1", (int)o->verbose);
    if (o->order < 0 || o->order > 30)
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "opts.order = %d; use 0 (from eps) or 1..30", (int)o->order);
    if (!(o->theta == 0 || (o->theta > 0 && o->theta < 1)))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "opts.theta = %g; use 0 (from eps) or 0 < theta < 1", o->theta);
    if (o->leaf_size < 0 || o->leaf_size > (1 << 20))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "opts.leaf_size = %d; use 0 (default) or 1..2^20",
                               (int)o->leaf_size);
    if (o->hybrid != 0 && o->hybrid != 1)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "opts.hybrid = %d; use 0 or 1", (int)o->hybrid);
    if (o->device < 0)
        return fmk_solver_fail(NULL, FMK_ERR_ARG, "opts.device = %d; devices count from 0",
                               (int)o->device);
    if (o->hybrid && (o->backend == FMK_BACKEND_CPU ||
                      (o->method != FMK_POISSON_TREECODE && o->method != FMK_POISSON_AUTO)))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "opts.hybrid = 1 is the treecode's mode with the GPU (method "
                               "treecode or auto, backend cuda or auto)");
    if (o->method == FMK_POISSON_AUTO)
        return FMK_OK; /* resolved for each grid, uniform or not (set_grid, set_blocks) */
    const fmk_poisson_method_ops *ops = fmk_poisson_ops_for(o);
    if (!ops)
        return FMK_ERR_UNAVAILABLE;
    o->backend = ops->backend;
    return ops->check ? ops->check(o, eps) : FMK_OK;
}

fmk_status fmk_poisson_create(fmk_poisson **solver, double eps, const fmk_poisson_opts *opts)
{
    if (!solver)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_create: solver is NULL");
    *solver = NULL;
    if (!(eps > 0 && eps < 1))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "eps = %g; the requested relative accuracy must lie in (0, 1)", eps);
    fmk_poisson_opts o;
    fmk_status st = check_opts(opts, eps, &o);
    if (st != FMK_OK)
        return st;
    fmk_poisson *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NOMEM,
                               "fmk_poisson_create: out of host memory (%zu bytes)", sizeof *s);
    s->opts = o;
    s->eps = eps;
    s->threads = fmk_opts_resolve_threads(o.threads);
    fmk_interrupt_init(&s->interrupt);
    s->info.method = o.method;
    s->info.backend = o.backend; /* AUTO until a grid resolves them (method auto) */
    s->info.eps = eps;
    s->info.threads = s->threads;
    *solver = s;
    return FMK_OK;
}

static void release_grid(fmk_poisson *s)
{
    if (s->ops)
        s->ops->release(s);
    s->state = NULL;
    free(s->staged);
    s->staged = NULL;
    s->staged_len = 0;
    free(s->boxes);
    s->boxes = NULL;
    s->n_boxes = 0;
    free(s->targets);
    s->targets = NULL;
    s->n_targets = s->n_target_points = 0;
    s->targets_gen++;
    s->info.n_targets = s->info.n_target_points = 0;
    s->bytes = 0;
    s->has_grid = 0;
    memset(s->n, 0, sizeof s->n);
    s->n_points = 0;
    s->block_size = 0;
    s->info.nx = s->info.ny = s->info.nz = 0;
    s->info.h = s->info.smoothing = s->info.h_min = 0;
    s->info.n_points = s->info.n_blocks = 0;
    s->info.components = 0;
    s->info.n_sources = 0;
    s->info.bytes_host = s->info.bytes_device = 0;
}

static void count_bytes(fmk_poisson *s)
{
    s->bytes = s->ops ? s->ops->bytes_host(s) : 0;
    s->info.bytes_host = s->bytes + (int64_t)sizeof(double) * s->staged_len +
                         (int64_t)sizeof(struct fmk_poisson_box) * s->n_boxes;
    s->info.bytes_device = s->ops && s->ops->bytes_device ? s->ops->bytes_device(s) : 0;
}

/* The grid's boxes (owned from here on, also on failure) become the solver's: the method of
 * opts for this grid, the smoothing, then the method's setup. On failure after the checks the
 * solver is left without a grid. */
static fmk_status install_grid(fmk_poisson *s, struct fmk_poisson_box *boxes, int64_t n_boxes,
                               int uniform, const int64_t n[3], double h, const double origin[3],
                               int32_t block_size)
{
    fmk_poisson_opts o = s->opts;
    fmk_poisson_resolve_auto(&o, uniform);
    const fmk_poisson_method_ops *ops = fmk_poisson_ops_for(&o);
    fmk_status st = FMK_OK;
    if (!ops)
        st = fmk_solver_fail(s, FMK_ERR_UNAVAILABLE, "%s", fmk_poisson_last_error(NULL));
    else if (ops->uniform_only && !uniform)
        st = fmk_solver_fail(s, FMK_ERR_UNAVAILABLE,
                             "method %s takes uniform grids only (fmk_poisson_set_grid); "
                             "methods treecode, fmm and direct take block grids",
                             fmk_poisson_method_name(o.method));
    else if (ops->check && (st = ops->check(&o, s->eps)) != FMK_OK)
        st = fmk_solver_fail(s, st, "%s", fmk_poisson_last_error(NULL));
    const double smoothing = s->opts.smoothing > 0 ? s->opts.smoothing : h;
    const double e = smoothing / h;
    if (st == FMK_OK && !(e >= 1 / POISSON_SMOOTHING_RANGE && e <= POISSON_SMOOTHING_RANGE))
        st = fmk_solver_fail(s, FMK_ERR_ARG,
                             "opts.smoothing = %g is %g finest grid spacings (h = %g); it must "
                             "lie between 2^-20 h and 2^20 h",
                             smoothing, e, h);
    if (st != FMK_OK) {
        free(boxes);
        return st;
    }

    const double t0 = fmk_time_now();
    release_grid(s);
    s->ops = ops;
    s->boxes = boxes;
    s->n_boxes = n_boxes;
    s->uniform = uniform;
    memcpy(s->n, n, sizeof s->n);
    s->n_points = 0;
    for (int64_t k = 0; k < n_boxes; k++)
        s->n_points += (int64_t)boxes[k].n[0] * boxes[k].n[1] * boxes[k].n[2];
    s->block_size = block_size;
    s->h = h;
    memcpy(s->origin, origin, sizeof s->origin);
    s->smoothing = smoothing;
    s->e = e;
    s->has_grid = 1;
    s->info.method = o.method;
    s->info.backend = o.backend;
    st = ops->setup(s);
    if (st != FMK_OK) {
        char msg[FMK_ERROR_LEN];
        memcpy(msg, s->error, sizeof msg);
        release_grid(s);
        memcpy(s->error, msg, sizeof msg);
        return st;
    }
    count_bytes(s);
    s->info.nx = n[0], s->info.ny = n[1], s->info.nz = n[2];
    s->info.h = s->info.h_min = h;
    s->info.smoothing = smoothing;
    s->info.n_points = s->n_points;
    s->info.n_blocks = n_boxes;
    s->info.n_target_points = s->n_points;
    s->info.setup_time = fmk_time_now() - t0;
    if (s->opts.verbose)
        fprintf(stderr,
                "fmmkit poisson: %s on %s, %lld points in %lld boxes, h = %g, eps = %g: %.3f s\n",
                fmk_poisson_method_name(o.method), fmk_backend_name(o.backend),
                (long long)s->n_points, (long long)n_boxes, h, smoothing, s->info.setup_time);
    return FMK_OK;
}

fmk_status fmk_poisson_set_grid(fmk_poisson *s, int64_t nx, int64_t ny, int64_t nz, double h,
                                const double origin[3])
{
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_set_grid: solver is NULL");
    call_begin(s);
    const int64_t n[3] = {nx, ny, nz};
    for (int k = 0; k < 3; k++)
        if (n[k] < 1 || n[k] > POISSON_SIDE_MAX)
            return fmk_solver_fail(s, FMK_ERR_ARG,
                                   "n%c = %lld; a grid has 1 to 2^20 points per axis", "xyz"[k],
                                   (long long)n[k]);
    if (nx * ny > POISSON_POINTS_MAX / nz)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "a grid of %lld x %lld x %lld points is beyond 2^40 points",
                               (long long)nx, (long long)ny, (long long)nz);
    if (!(isfinite(h) && h > 0))
        return fmk_solver_fail(s, FMK_ERR_ARG, "h = %g; the grid spacing must be finite and > 0",
                               h);
    const double zero[3] = {0, 0, 0};
    if (!origin)
        origin = zero;
    for (int k = 0; k < 3; k++)
        if (!isfinite(origin[k]) || !isfinite(origin[k] + h * (double)(n[k] - 1)))
            return fmk_solver_fail(s, FMK_ERR_NONFINITE,
                                   "origin[%d] = %g: the grid's points must be finite", k,
                                   origin[k]);
    struct fmk_poisson_box *box = calloc(1, sizeof *box);
    if (!box)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "fmk_poisson_set_grid: out of host memory");
    box->h = 1;
    for (int k = 0; k < 3; k++)
        box->n[k] = (int32_t)n[k];
    return install_grid(s, box, 1, 1, n, h, origin, 0);
}

fmk_status fmk_poisson_set_blocks(fmk_poisson *s, const fmk_grid *grid)
{
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_set_blocks: solver is NULL");
    call_begin(s);
    if (!grid)
        return fmk_solver_fail(s, FMK_ERR_NULL, "fmk_poisson_set_blocks: grid is NULL");
    struct fmk_poisson_box *boxes = NULL;
    int64_t n_boxes = 0;
    double h = 0, origin[3];
    int32_t b = 0;
    fmk_status st = fmk_grid_layout(s, grid, &boxes, &n_boxes, &h, origin, &b);
    if (st != FMK_OK)
        return st;
    const int64_t none[3] = {0, 0, 0};
    return install_grid(s, boxes, n_boxes, 0, none, h, origin, b);
}

int64_t fmk_poisson_box_of(const fmk_poisson *s, int64_t p)
{
    int64_t lo = 0, hi = s->n_boxes - 1; /* the last box whose offset is <= p */
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (s->boxes[mid].offset <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

void fmk_poisson_point(const fmk_poisson *s, int64_t p, double x[3])
{
    const struct fmk_poisson_box *b = &s->boxes[fmk_poisson_box_of(s, p)];
    const int64_t q = p - b->offset;
    const int64_t i = q % b->n[0], j = q / b->n[0] % b->n[1], k = q / ((int64_t)b->n[0] * b->n[1]);
    x[0] = b->corner[0] + b->h * (double)i;
    x[1] = b->corner[1] + b->h * (double)j;
    x[2] = b->corner[2] + b->h * (double)k;
}

/* The grid point of field index p as "(i, j, k)" (uniform) or "(i, j, m) of block k". */
static void point_name(const fmk_poisson *s, int64_t p, char *buf, size_t size)
{
    const int64_t k = fmk_poisson_box_of(s, p);
    const struct fmk_poisson_box *b = &s->boxes[k];
    const int64_t q = p - b->offset;
    const long long i = (long long)(q % b->n[0]), j = (long long)(q / b->n[0] % b->n[1]),
                    m = (long long)(q / ((int64_t)b->n[0] * b->n[1]));
    if (s->uniform)
        snprintf(buf, size, "(%lld, %lld, %lld)", i, j, m);
    else
        snprintf(buf, size, "(%lld, %lld, %lld) of block %lld", i, j, m, (long long)k);
}

/* 1 when v[0 .. n) are all finite (the solver's threads: these scans see every value of the
 * grid twice a solve). */
static int all_finite(const double *v, int64_t n, int threads)
{
    int bad = 0;
    (void)threads;
#pragma omp parallel for schedule(static) reduction(| : bad) num_threads(threads) if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        bad |= !isfinite(v[i]);
    return !bad;
}

/* dst[0 .. n) = src, on the solver's threads */
static void copy_out(double *dst, const double *src, int64_t n, int threads)
{
    const int64_t chunk = 1 << 16, chunks = (n + chunk - 1) / chunk;
    (void)threads;
#pragma omp parallel for schedule(static) num_threads(threads) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t i = c * chunk, len = n - i < chunk ? n - i : chunk;
        memcpy(dst + i, src + i, sizeof(double) * (size_t)len);
    }
}

/* NaN or Inf in omega: the first one's point and component, FMK_OK when there is none. */
static fmk_status check_omega(fmk_poisson *s, int nc, const double *omega)
{
    const int64_t len = s->n_points * nc;
    if (all_finite(omega, len, s->threads))
        return FMK_OK;
    int64_t bad = 0;
    while (isfinite(omega[bad]))
        bad++;
    return fmk_poisson_omega_nonfinite(s, nc, bad, omega[bad]);
}

/* The staged results are all finite: FMK_OK, else the first one that is not, named. */
static fmk_status check_results(fmk_poisson *s, const double *v, int64_t len, int width,
                                const char *what)
{
    if (all_finite(v, len, s->threads))
        return FMK_OK;
    int64_t i = 0;
    while (isfinite(v[i]))
        i++;
    return fmk_poisson_results_nonfinite(s, what, i, width);
}

fmk_status fmk_poisson_solve_begin(fmk_poisson *s, int nc, const void *omega, const void *psi,
                                   const void *velocity, const char *fn)
{
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "%s: solver is NULL", fn);
    call_begin(s);
    if (!s->has_grid)
        return fmk_solver_fail(s, FMK_ERR_STATE,
                               "%s: the solver has no grid; call fmk_poisson_set_grid first", fn);
    if (nc != 1 && nc != 3)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "n_components = %d; omega has 1 or 3 components per point", nc);
    if (!omega)
        return fmk_solver_fail(s, FMK_ERR_NULL, "%s: omega is NULL", fn);
    if (!psi && !velocity)
        return fmk_solver_fail(s, FMK_ERR_NULL,
                               "%s: psi and velocity are both NULL; ask for at least one", fn);
    if (velocity && nc != 3)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "the velocity u = curl Psi needs the 3 components of omega "
                               "(n_components = %d)",
                               nc);
    return FMK_OK;
}

fmk_status fmk_poisson_omega_nonfinite(fmk_poisson *s, int nc, int64_t bad, double value)
{
    char where[96];
    point_name(s, bad / nc, where, sizeof where);
    return fmk_solver_fail(s, FMK_ERR_NONFINITE,
                           "omega[%lld] = %g (component %d of grid point %s) is not finite",
                           (long long)bad, value, (int)(bad % nc), where);
}

fmk_status fmk_poisson_results_nonfinite(fmk_poisson *s, const char *what, int64_t i, int width)
{
    char where[96];
    point_name(s, i / width, where, sizeof where);
    return fmk_solver_fail(s, FMK_ERR_NONFINITE,
                           "%s (component %d at grid point %s) is not finite: the sum overflows "
                           "the doubles; scale omega down and the results back up",
                           what, (int)(i % width), where);
}

fmk_status fmk_poisson_stage(fmk_poisson *s, int64_t len, double **staged)
{
    if (len > s->staged_len) {
        free(s->staged);
        s->staged_len = 0;
        s->staged = malloc(sizeof(double) * (size_t)len);
        if (!s->staged)
            return fmk_solver_fail(s, FMK_ERR_NOMEM,
                                   "fmk_poisson_solve: out of host memory (%lld bytes for the "
                                   "results)",
                                   (long long)(sizeof(double) * (size_t)len));
        s->staged_len = len;
    }
    *staged = s->staged;
    return FMK_OK;
}

fmk_status fmk_poisson_check_staged(fmk_poisson *s, int nc, const double *psi, const double *u)
{
    fmk_status st = FMK_OK;
    count_bytes(s);
    if (psi)
        st = check_results(s, psi, s->n_points * nc, nc, "Psi");
    if (st == FMK_OK && u)
        st = check_results(s, u, s->n_points * 3, 3, "u");
    return st;
}

void fmk_poisson_solve_end(fmk_poisson *s, int nc, double t0)
{
    count_bytes(s);
    s->info.components = nc;
    s->info.solve_time = fmk_time_now() - t0;
    if (s->opts.verbose)
        fprintf(stderr, "fmmkit poisson: %s solve, %d components, %lld sources: %.3f s\n",
                fmk_poisson_method_name(s->info.method), nc, (long long)s->info.n_sources,
                s->info.solve_time);
}

fmk_status fmk_poisson_solve(fmk_poisson *s, int32_t n_components, const double *omega, double *psi,
                             double *velocity)
{
    fmk_status st =
        fmk_poisson_solve_begin(s, n_components, omega, psi, velocity, "fmk_poisson_solve");
    if (st == FMK_OK)
        st = check_omega(s, n_components, omega);
    if (st != FMK_OK)
        return st;
    const double t0 = fmk_time_now();
    const int64_t len_psi = psi ? s->n_points * n_components : 0;
    const int64_t len_u = velocity ? s->n_points * 3 : 0;
    double *staged = NULL;
    if ((st = fmk_poisson_stage(s, len_psi + len_u, &staged)) != FMK_OK)
        return st;
    double *psi_staged = psi ? staged : NULL, *u_staged = velocity ? staged + len_psi : NULL;
    st = s->ops->solve(s, n_components, omega, psi_staged, u_staged);
    if (st == FMK_OK)
        st = fmk_poisson_check_staged(s, n_components, psi_staged, u_staged);
    if (st != FMK_OK) {
        count_bytes(s);
        return st;
    }
    if (psi)
        fmk_poisson_extract(s, psi, psi_staged, n_components);
    if (velocity)
        fmk_poisson_extract(s, velocity, u_staged, 3);
    fmk_poisson_solve_end(s, n_components, t0);
    return FMK_OK;
}

int64_t fmk_poisson_result_points(const fmk_poisson *s)
{
    return s->targets ? s->n_target_points : s->n_points;
}

void fmk_poisson_extract(const fmk_poisson *s, double *dst, const double *src, int width)
{
    if (!s->targets) {
        copy_out(dst, src, s->n_points * width, s->threads);
        return;
    }
    int64_t at = 0;
    for (int64_t k = 0; k < s->n_targets; k++) {
        const struct fmk_poisson_box *b = &s->boxes[s->targets[k]];
        const int64_t n = (int64_t)b->n[0] * b->n[1] * b->n[2] * width;
        memcpy(dst + at, src + b->offset * width, sizeof(double) * (size_t)n);
        at += n;
    }
}

fmk_status fmk_poisson_set_targets(fmk_poisson *s, int64_t n_blocks, const int64_t *blocks)
{
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_set_targets: solver is NULL");
    call_begin(s);
    if (!s->has_grid)
        return fmk_solver_fail(s, FMK_ERR_STATE,
                               "fmk_poisson_set_targets: the solver has no grid; call "
                               "fmk_poisson_set_blocks first");
    if (s->uniform)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "fmk_poisson_set_targets chooses blocks of a block grid; this "
                               "solver has a uniform grid (fmk_poisson_set_grid)");
    if (n_blocks < 0 || n_blocks > s->n_boxes)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "n_blocks = %lld; choose 0 (every point) to %lld blocks",
                               (long long)n_blocks, (long long)s->n_boxes);
    if (n_blocks > 0 && !blocks)
        return fmk_solver_fail(s, FMK_ERR_NULL, "fmk_poisson_set_targets: blocks is NULL");
    int64_t *t = NULL;
    unsigned char *seen = NULL;
    int64_t points = 0;
    if (n_blocks > 0) {
        t = malloc(sizeof(int64_t) * (size_t)n_blocks);
        seen = calloc((size_t)s->n_boxes, 1);
        if (!t || !seen) {
            free(t), free(seen);
            return fmk_solver_fail(s, FMK_ERR_NOMEM, "fmk_poisson_set_targets: out of host memory");
        }
        for (int64_t k = 0; k < n_blocks; k++) {
            const int64_t b = blocks[k];
            const char *why = b < 0 || b >= s->n_boxes ? "out of range" : seen[b] ? "repeated" : NULL;
            if (why) {
                free(t), free(seen);
                return fmk_solver_fail(s, FMK_ERR_ARG,
                                       "blocks[%lld] = %lld is %s (the grid has %lld blocks, "
                                       "each chosen at most once)",
                                       (long long)k, (long long)b, why, (long long)s->n_boxes);
            }
            seen[b] = 1;
            t[k] = b;
            points += (int64_t)s->boxes[b].n[0] * s->boxes[b].n[1] * s->boxes[b].n[2];
        }
        free(seen);
    }
    free(s->targets);
    s->targets = t;
    s->n_targets = n_blocks;
    s->n_target_points = t ? points : 0;
    s->targets_gen++;
    s->info.n_targets = n_blocks;
    s->info.n_target_points = fmk_poisson_result_points(s);
    return FMK_OK;
}

fmk_status fmk_poisson_get_info(const fmk_poisson *s, fmk_poisson_info *info)
{
    if (!s || !info)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_get_info: %s is NULL",
                               s ? "info" : "solver");
    *info = s->info;
    return FMK_OK;
}

const char *fmk_poisson_last_error(const fmk_poisson *s)
{
    return s ? s->error : fmk_plan_last_error(NULL);
}

fmk_status fmk_poisson_set_interrupt(fmk_poisson *s, fmk_interrupt_fn check, void *user)
{
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_set_interrupt: solver is NULL");
    fmk_interrupt_set_check(&s->interrupt, check, user);
    return FMK_OK;
}

fmk_status fmk_poisson_interrupt(fmk_poisson *s)
{
    if (!s)
        return FMK_ERR_NULL; /* no message: this may run in a signal handler */
    fmk_interrupt_request(&s->interrupt);
    return FMK_OK;
}

void fmk_poisson_destroy(fmk_poisson *s)
{
    if (!s)
        return;
    release_grid(s);
    free(s);
}
