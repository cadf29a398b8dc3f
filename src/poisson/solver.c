/* solver.c -- the Poisson solver's life cycle (include/fmmkit_poisson.h, docs/poisson.md): every
 * check of the caller's input, the staging of results (nothing reaches the caller unless the
 * whole solve succeeded with finite values), errors and interrupts. The methods live in
 * fft_cpu.c and sum_cpu.c. */
#include <math.h>
#include <stdarg.h>
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

fmk_status fmk_solver_fail(fmk_poisson *s, fmk_status status, const char *fmt, ...)
{
    char buf[FMK_ERROR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!s)
        return fmk_error_set(NULL, status, "%s", buf);
    memcpy(s->error, buf, sizeof buf);
    return status;
}

int fmk_solver_poll(fmk_poisson *s)
{
    return fmk_interrupt_poll_state(&s->interrupt);
}

int fmk_solver_check(void *solver)
{
    return fmk_solver_poll(solver);
}

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

const char *fmk_poisson_method_name(fmk_poisson_method method)
{
    switch (method) {
    case FMK_POISSON_AUTO: return "auto";
    case FMK_POISSON_DIRECT: return "direct";
    case FMK_POISSON_FMM: return "fmm";
    case FMK_POISSON_FFT: return "fft";
    }
    return NULL;
}

int fmk_poisson_method_available(fmk_poisson_method method)
{
    switch (method) {
    case FMK_POISSON_AUTO:
    case FMK_POISSON_DIRECT:
    case FMK_POISSON_FMM: return 1;
    case FMK_POISSON_FFT: return fmk_fft_cpu_available();
    }
    return 0;
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
    if (o->backend == FMK_BACKEND_CUDA)
        return fmk_solver_fail(NULL, FMK_ERR_UNAVAILABLE,
                               "the Poisson solver runs on the CPU only so far: use "
                               "FMK_BACKEND_CPU or FMK_BACKEND_AUTO");
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
    o->backend = FMK_BACKEND_CPU;
    if (o->method == FMK_POISSON_AUTO)
        o->method = fmk_fft_cpu_available() ? FMK_POISSON_FFT : FMK_POISSON_FMM;
    if (o->method == FMK_POISSON_FFT && !fmk_fft_cpu_available())
        return fmk_solver_fail(NULL, FMK_ERR_UNAVAILABLE,
                               "method fft needs FFTW, which this build of fmmkit did not find "
                               "(Debian: apt-get install libfftw3-dev, then configure again); "
                               "methods direct and fmm compute the same sum");
    if (o->method != FMK_POISSON_FFT)
        return fmk_sum_cpu_check_eps(o->method, eps, o->threads);
    return FMK_OK;
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
    s->info.backend = o.backend;
    s->info.eps = eps;
    s->info.threads = s->threads;
    *solver = s;
    return FMK_OK;
}

static void release_grid(fmk_poisson *s)
{
    fmk_fft_cpu_release(s);
    fmk_sum_cpu_release(s);
    free(s->staged);
    s->staged = NULL;
    s->staged_len = 0;
    s->bytes = 0;
    s->has_grid = 0;
    memset(s->n, 0, sizeof s->n);
    s->n_points = 0;
    s->info.nx = s->info.ny = s->info.nz = 0;
    s->info.h = s->info.smoothing = 0;
    s->info.components = 0;
    s->info.n_sources = 0;
    s->info.bytes_host = 0;
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
    const double smoothing = s->opts.smoothing > 0 ? s->opts.smoothing : h;
    const double e = smoothing / h;
    if (!(e >= 1 / POISSON_SMOOTHING_RANGE && e <= POISSON_SMOOTHING_RANGE))
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "opts.smoothing = %g is %g grid spacings (h = %g); it must lie "
                               "between 2^-20 h and 2^20 h",
                               smoothing, e, h);

    const double t0 = fmk_time_now();
    release_grid(s);
    memcpy(s->n, n, sizeof s->n);
    s->n_points = nx * ny * nz;
    s->h = h;
    memcpy(s->origin, origin, sizeof s->origin);
    s->smoothing = smoothing;
    s->e = e;
    s->has_grid = 1;
    fmk_status st = s->opts.method == FMK_POISSON_FFT ? fmk_fft_cpu_setup(s) : fmk_sum_cpu_setup(s);
    if (st != FMK_OK) {
        char msg[FMK_ERROR_LEN];
        memcpy(msg, s->error, sizeof msg);
        release_grid(s);
        memcpy(s->error, msg, sizeof msg);
        return st;
    }
    s->bytes = fmk_fft_cpu_bytes(s) + fmk_sum_cpu_bytes(s);
    s->info.nx = nx, s->info.ny = ny, s->info.nz = nz;
    s->info.h = h;
    s->info.smoothing = smoothing;
    s->info.bytes_host = s->bytes;
    s->info.setup_time = fmk_time_now() - t0;
    if (s->opts.verbose)
        fprintf(stderr, "fmmkit poisson: %s grid %lld x %lld x %lld, h = %g, eps = %g: %.3f s\n",
                fmk_poisson_method_name(s->opts.method), (long long)nx, (long long)ny,
                (long long)nz, h, smoothing, s->info.setup_time);
    return FMK_OK;
}

/* The grid point of index p as "(i, j, k)" for messages. */
static void point_name(const fmk_poisson *s, int64_t p, char *buf, size_t size)
{
    snprintf(buf, size, "(%lld, %lld, %lld)", (long long)(p % s->n[0]),
             (long long)(p / s->n[0] % s->n[1]), (long long)(p / (s->n[0] * s->n[1])));
}

/* NaN or Inf in omega: the first one's point and component, FMK_OK when there is none. */
static fmk_status check_omega(fmk_poisson *s, int nc, const double *omega)
{
    const int64_t len = s->n_points * nc;
    int64_t bad = -1;
    for (int64_t i = 0; i < len; i++)
        if (!isfinite(omega[i])) {
            bad = i;
            break;
        }
    if (bad < 0)
        return FMK_OK;
    char where[96];
    point_name(s, bad / nc, where, sizeof where);
    return fmk_solver_fail(s, FMK_ERR_NONFINITE,
                           "omega[%lld] = %g (component %d of grid point %s) is not finite",
                           (long long)bad, omega[bad], (int)(bad % nc), where);
}

/* The staged results are all finite: FMK_OK, else the first one that is not, named. */
static fmk_status check_results(fmk_poisson *s, const double *v, int64_t len, int width,
                                const char *what)
{
    for (int64_t i = 0; i < len; i++)
        if (!isfinite(v[i])) {
            char where[96];
            point_name(s, i / width, where, sizeof where);
            return fmk_solver_fail(s, FMK_ERR_NONFINITE,
                                   "%s (component %d at grid point %s) is not finite: the sum "
                                   "overflows the doubles; scale omega down and the results "
                                   "back up",
                                   what, (int)(i % width), where);
        }
    return FMK_OK;
}

fmk_status fmk_poisson_solve(fmk_poisson *s, int32_t n_components, const double *omega, double *psi,
                             double *velocity)
{
    if (!s)
        return fmk_solver_fail(NULL, FMK_ERR_NULL, "fmk_poisson_solve: solver is NULL");
    call_begin(s);
    if (!s->has_grid)
        return fmk_solver_fail(s, FMK_ERR_STATE,
                               "fmk_poisson_solve: the solver has no grid; call "
                               "fmk_poisson_set_grid first");
    if (n_components != 1 && n_components != 3)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "n_components = %d; omega has 1 or 3 components per point",
                               (int)n_components);
    if (!omega)
        return fmk_solver_fail(s, FMK_ERR_NULL, "fmk_poisson_solve: omega is NULL");
    if (!psi && !velocity)
        return fmk_solver_fail(s, FMK_ERR_NULL,
                               "fmk_poisson_solve: psi and velocity are both NULL; ask for at "
                               "least one");
    if (velocity && n_components != 3)
        return fmk_solver_fail(s, FMK_ERR_ARG,
                               "the velocity u = curl Psi needs the 3 components of omega "
                               "(n_components = %d)",
                               (int)n_components);
    fmk_status st = check_omega(s, n_components, omega);
    if (st != FMK_OK)
        return st;

    const double t0 = fmk_time_now();
    const int64_t len_psi = psi ? s->n_points * n_components : 0;
    const int64_t len_u = velocity ? s->n_points * 3 : 0;
    if (len_psi + len_u > s->staged_len) {
        free(s->staged);
        s->staged_len = 0;
        s->staged = malloc(sizeof(double) * (size_t)(len_psi + len_u));
        if (!s->staged)
            return fmk_solver_fail(s, FMK_ERR_NOMEM,
                                   "fmk_poisson_solve: out of host memory (%lld bytes for the "
                                   "results)",
                                   (long long)(sizeof(double) * (size_t)(len_psi + len_u)));
        s->staged_len = len_psi + len_u;
    }
    double *psi_staged = psi ? s->staged : NULL, *u_staged = velocity ? s->staged + len_psi : NULL;
    st = s->opts.method == FMK_POISSON_FFT
             ? fmk_fft_cpu_solve(s, n_components, omega, psi_staged, u_staged)
             : fmk_sum_cpu_solve(s, n_components, omega, psi_staged, u_staged);
    s->bytes = fmk_fft_cpu_bytes(s) + fmk_sum_cpu_bytes(s);
    s->info.bytes_host = s->bytes + (int64_t)sizeof(double) * s->staged_len;
    if (st == FMK_OK && psi)
        st = check_results(s, psi_staged, len_psi, n_components, "Psi");
    if (st == FMK_OK && velocity)
        st = check_results(s, u_staged, len_u, 3, "u");
    if (st != FMK_OK)
        return st;
    if (psi)
        memcpy(psi, psi_staged, sizeof(double) * (size_t)len_psi);
    if (velocity)
        memcpy(velocity, u_staged, sizeof(double) * (size_t)len_u);
    s->info.components = n_components;
    s->info.solve_time = fmk_time_now() - t0;
    if (s->opts.verbose)
        fprintf(stderr, "fmmkit poisson: %s solve, %d components, %lld sources: %.3f s\n",
                fmk_poisson_method_name(s->opts.method), (int)n_components,
                (long long)s->info.n_sources, s->info.solve_time);
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
