/* fmmkit_mex.c -- the MEX gateway of fmmkit for MATLAB and GNU Octave: one MEX function whose
 * first argument names the command ('version', 'eval', 'plan_create', 'plan_set_points',
 * 'plan_eval', 'plan_info', 'plan_destroy'). The .m files beside it (fmmkit_eval.m,
 * +fmmkit/Plan.m, ...) are the interface; docs/octave.md is the manual.
 *
 * Only the MEX API common to MATLAB and Octave is used (mex.h, mxArray). Complex arrays are read
 * and written through either complex API: interleaved (MATLAB's -R2018a, Octave with
 * -DMX_HAS_INTERLEAVED_COMPLEX=1) or separate (mxGetPr/mxGetPi, the default of both).
 *
 * Memory: every buffer of a call is mxMalloc'd, which MATLAB and Octave free when the call
 * ends, by an error too; a one-shot plan is destroyed before any error is raised. Plans made by
 * 'plan_create' live in a table of this MEX file (the one piece of state a MEX gateway cannot
 * avoid), are reached by a number that is never reused, and are freed by 'plan_destroy' or
 * when the MEX file is cleared (`clear mex`, `clear all`, exit). The file is not locked
 * (mexLock): Octave cannot then exit cleanly while a plan lives. A handle that outlived its
 * table names no plan (fmmkit:state): its number is not given again, as the numbers of a table
 * start at an offset drawn from the clock.
 *
 * Ctrl-C: with -DFMK_MEX_OCTAVE (the CMake target fmmkit_octave and build_mex.m under Octave)
 * the plan's interrupt check reads Octave's pending-signal flags; with -DFMK_MEX_MATLAB_UT
 * (build_mex.m under MATLAB, linking libut) it asks utIsInterruptPending, an undocumented but
 * long-stable MATLAB function. Built without either, a call runs to its end.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmmkit.h"
#include "mex.h"

#if defined(FMK_MEX_OCTAVE)
#include <signal.h>
/* libinterp's flags (quit.h; C linkage): a caught signal not yet handled, and a pending
 * interrupt (> 0). */
extern volatile sig_atomic_t octave_signal_caught;
extern sig_atomic_t octave_interrupt_state;
#elif defined(FMK_MEX_MATLAB_UT)
#include <stdbool.h>
extern bool utIsInterruptPending(void);
#endif

/* ---------------------------------------------------------------------------------------------
 * Errors: identifiers fmmkit:<what> and the library's sentence
 * ------------------------------------------------------------------------------------------ */

static const char *status_id(fmk_status st)
{
    switch (st) {
    case FMK_ERR_NULL: return "fmmkit:null";
    case FMK_ERR_ARG: return "fmmkit:arg";
    case FMK_ERR_STATE: return "fmmkit:state";
    case FMK_ERR_NONFINITE: return "fmmkit:nonfinite";
    case FMK_ERR_NOMEM: return "fmmkit:nomem";
    case FMK_ERR_DEVICE_NOMEM: return "fmmkit:devicenomem";
    case FMK_ERR_DEVICE: return "fmmkit:device";
    case FMK_ERR_UNAVAILABLE: return "fmmkit:unavailable";
    case FMK_ERR_INTERNAL: return "fmmkit:internal";
    case FMK_ERR_INTERRUPTED: return "fmmkit:interrupted";
    case FMK_ERR_ACCURACY: return "fmmkit:accuracy";
    default: return "fmmkit:error";
    }
}

/* Raises the MATLAB error of a failed library call; plan (may be NULL) is destroyed first when
 * owned, after its message has been copied. */
static void fail_status(fmk_status st, fmk_plan *plan, int owned)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", fmk_plan_last_error(plan));
    if (!msg[0])
        snprintf(msg, sizeof msg, "%s", fmk_status_string(st));
    if (owned)
        fmk_plan_destroy(plan);
    mexErrMsgIdAndTxt(status_id(st), "%s", msg);
}

#define fail_arg(...) mexErrMsgIdAndTxt("fmmkit:arg", __VA_ARGS__)

static int mex_interrupted(void *user)
{
    (void)user;
#if defined(FMK_MEX_OCTAVE)
    return octave_signal_caught || octave_interrupt_state > 0;
#elif defined(FMK_MEX_MATLAB_UT)
    return utIsInterruptPending() ? 1 : 0;
#else
    return 0;
#endif
}

/* ---------------------------------------------------------------------------------------------
 * Arguments
 * ------------------------------------------------------------------------------------------ */

/* A char row as an mxMalloc'd C string (what names the argument in the error). */
static char *string_arg(const mxArray *a, const char *what)
{
    if (!mxIsChar(a) || (mxGetM(a) > 1))
        fail_arg("%s must be a string (a char row vector)", what);
    char *s = mxArrayToString(a);
    if (!s)
        fail_arg("%s could not be read as a string", what);
    for (char *c = s; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    return s;
}

/* A real finite numeric scalar. */
static double scalar_arg(const mxArray *a, const char *what)
{
    if (!(mxIsNumeric(a) || mxIsLogical(a)) || mxIsComplex(a) || mxIsSparse(a) ||
        mxGetNumberOfElements(a) != 1)
        fail_arg("%s must be a real numeric scalar", what);
    const double v = mxGetScalar(a);
    if (!isfinite(v))
        mexErrMsgIdAndTxt("fmmkit:nonfinite", "%s = %g is not finite", what, v);
    return v;
}

/* An integral scalar in [lo, hi]. */
static int64_t integer_arg(const mxArray *a, const char *what, double lo, double hi)
{
    const double v = scalar_arg(a, what);
    if (v != floor(v) || v < lo || v > hi)
        fail_arg("%s = %g must be an integer in %g..%g", what, v, lo, hi);
    return (int64_t)v;
}

/* A full double array (single and integer arrays are not converted: say so). */
static void check_double(const mxArray *a, const char *what)
{
    if (!mxIsDouble(a) || mxIsSparse(a))
        fail_arg("%s must be a full double array (it is %s%s): convert it with double(...)", what,
                 mxIsSparse(a) ? "sparse " : "", mxGetClassName(a));
}

static fmk_kernel kernel_arg(const mxArray *a)
{
    char *name = string_arg(a, "the kernel");
    fmk_kernel k;
    if (fmk_kernel_from_name(name, &k) != FMK_OK)
        fail_arg("unknown kernel '%s' (laplace, plummer, regularized, log2d, cauchy2d)", name);
    mxFree(name);
    return k;
}

/* What the name-value options of eval and plan_create give. */
struct mex_opts {
    fmk_opts opts;
    double eps;             /* 0: fmk_eps_default of the precision */
    const mxArray *targets; /* eval's 'targets', or NULL */
};

static void enum_option(const char *key, const mxArray *v, fmk_opts *o)
{
    char *s = string_arg(v, key);
    if (!strcmp(key, "method")) {
        if (fmk_method_from_name(s, &o->method) != FMK_OK)
            fail_arg("method '%s' is not one of auto, direct, tree, fmm", s);
    } else if (!strcmp(key, "backend")) {
        if (fmk_backend_from_name(s, &o->backend) != FMK_OK)
            fail_arg("backend '%s' is not one of auto, cpu, cuda", s);
    } else if (!strcmp(key, "precision")) {
        if (!strcmp(s, "fp64") || !strcmp(s, "double"))
            o->precision = FMK_PRECISION_FP64;
        else if (!strcmp(s, "fp32") || !strcmp(s, "single"))
            o->precision = FMK_PRECISION_FP32;
        else
            fail_arg("precision '%s' is not one of fp64 (double), fp32 (single)", s);
    } else { /* walk */
        if (!strcmp(s, "auto"))
            o->walk = FMK_WALK_AUTO;
        else if (!strcmp(s, "group"))
            o->walk = FMK_WALK_GROUP;
        else if (!strcmp(s, "stackless"))
            o->walk = FMK_WALK_STACKLESS;
        else
            fail_arg("walk '%s' is not one of auto, group, stackless", s);
    }
    mxFree(s);
}

/* Reads name-value pairs args[0..n); with_targets says whether 'targets' is an option. */
static void options_arg(int n, const mxArray *args[], int with_targets, struct mex_opts *mo)
{
    fmk_opts_default(&mo->opts);
    mo->eps = 0;
    mo->targets = NULL;
    if (n % 2)
        fail_arg("options come in name-value pairs; the last name has no value");
    for (int i = 0; i < n; i += 2) {
        char *key = string_arg(args[i], "an option name");
        const mxArray *v = args[i + 1];
        fmk_opts *o = &mo->opts;
        if (!strcmp(key, "eps")) {
            mo->eps = scalar_arg(v, "eps");
            if (!(mo->eps > 0 && mo->eps < 1))
                fail_arg("eps = %g must lie in (0, 1)", mo->eps);
        } else if (with_targets && !strcmp(key, "targets")) {
            mo->targets = v;
        } else if (!strcmp(key, "method") || !strcmp(key, "backend") || !strcmp(key, "precision") ||
                   !strcmp(key, "walk")) {
            enum_option(key, v, o);
        } else if (!strcmp(key, "softening")) {
            o->softening = scalar_arg(v, "softening");
        } else if (!strcmp(key, "theta")) {
            o->theta = scalar_arg(v, "theta");
        } else if (!strcmp(key, "order")) {
            o->order = (int32_t)integer_arg(v, "order", -1, 64);
        } else if (!strcmp(key, "leaf_size")) {
            o->leaf_size = integer_arg(v, "leaf_size", 0, 9007199254740992.0);
        } else if (!strcmp(key, "threads")) {
            o->threads = (int32_t)integer_arg(v, "threads", 0, FMK_THREADS_MAX);
        } else if (!strcmp(key, "device")) {
            o->device = (int32_t)integer_arg(v, "device", 0, 1 << 20);
        } else {
            fail_arg("unknown option '%s' (options: eps, %smethod, backend, precision, "
                     "softening, theta, order, leaf_size, threads, device, walk)",
                     key, with_targets ? "targets, " : "");
        }
        mxFree(key);
    }
    if (mo->eps == 0)
        mo->eps = fmk_eps_default(mo->opts.precision);
}

/* ---------------------------------------------------------------------------------------------
 * Points, charges and results: MATLAB's column-major arrays and fmmkit's interleaved ones
 * ------------------------------------------------------------------------------------------ */

/* How the caller held the points: the results follow it. */
enum layout {
    LAYOUT_ROWS, /* n x dim, a point per row (and n x 2 for 2D): results m x 1, m x dim */
    LAYOUT_COLS, /* dim x n, a point per column: results 1 x m, dim x m */
};

/* Interleaved (re, im) pairs of a complex (or real) double array of n values, mxMalloc'd unless
 * the interleaved API lets it be read in place. */
static const double *complex_read(const mxArray *a, size_t n)
{
    if (!mxIsComplex(a)) {
        const double *re = mxGetPr(a);
        double *z = mxMalloc(2 * n * sizeof *z + 1);
        for (size_t i = 0; i < n; i++)
            z[2 * i] = re[i], z[2 * i + 1] = 0;
        return z;
    }
#if MX_HAS_INTERLEAVED_COMPLEX
    return (const double *)mxGetComplexDoubles(a);
#else
    const double *re = mxGetPr(a), *im = mxGetPi(a);
    double *z = mxMalloc(2 * n * sizeof *z + 1);
    for (size_t i = 0; i < n; i++)
        z[2 * i] = re[i], z[2 * i + 1] = im[i];
    return z;
#endif
}

/* A complex rows x cols array holding the interleaved pairs z. */
static mxArray *complex_write(const double *z, size_t rows, size_t cols)
{
    mxArray *a = mxCreateDoubleMatrix(rows, cols, mxCOMPLEX);
    const size_t n = rows * cols;
#if MX_HAS_INTERLEAVED_COMPLEX
    memcpy(mxGetComplexDoubles(a), z, 2 * n * sizeof *z);
#else
    double *re = mxGetPr(a), *im = mxGetPi(a);
    for (size_t i = 0; i < n; i++)
        re[i] = z[2 * i], im[i] = z[2 * i + 1];
#endif
    return a;
}

/* Interleaved points x[dim*i + k] from a, which holds them as n x dim (a point per row), or
 * dim x n (a point per column), or for dim 2 as a complex vector (x + iy). n x dim wins when
 * both fit (n == dim). [] is no points. */
static const double *points_read(const mxArray *a, int dim, const char *what, int64_t *n,
                                 enum layout *layout)
{
    check_double(a, what);
    const size_t rows = mxGetM(a), cols = mxGetN(a);
    if (mxGetNumberOfDimensions(a) > 2)
        fail_arg("%s must be a matrix (n x %d or %d x n)", what, dim, dim);
    if (mxIsEmpty(a) && !(cols == (size_t)dim || rows == (size_t)dim)) {
        *n = 0, *layout = LAYOUT_ROWS;
        return NULL;
    }
    if (mxIsComplex(a)) {
        if (dim != 2 || (rows != 1 && cols != 1))
            fail_arg("%s: complex points are a vector x + iy, in 2D only", what);
        *n = (int64_t)(rows * cols);
        *layout = rows == 1 && cols != 1 ? LAYOUT_COLS : LAYOUT_ROWS;
        return complex_read(a, rows * cols);
    }
    if (cols == (size_t)dim) {
        *n = (int64_t)rows, *layout = LAYOUT_ROWS;
        const double *src = mxGetPr(a);
        double *x = mxMalloc((size_t)dim * rows * sizeof *x + 1);
        for (size_t k = 0; k < (size_t)dim; k++)
            for (size_t i = 0; i < rows; i++)
                x[dim * i + k] = src[i + rows * k];
        return x;
    }
    if (rows == (size_t)dim) { /* MATLAB's column-major dim x n is fmmkit's layout: no copy */
        *n = (int64_t)cols, *layout = LAYOUT_COLS;
        return mxGetPr(a);
    }
    fail_arg("%s is %d x %d; points are n x %d (a point per row) or %d x n (a point per column)",
             what, (int)rows, (int)cols, dim, dim);
    return NULL;
}

/* n charges (pairs (re, im) for complex kernels): a vector, real, or complex for cauchy2d. */
static const double *charges_read(const mxArray *a, fmk_kernel kernel, int64_t n)
{
    check_double(a, "charges");
    const size_t count = mxGetNumberOfElements(a);
    if (count != (size_t)n || (n > 0 && mxGetM(a) != 1 && mxGetN(a) != 1))
        fail_arg("charges must be a vector of %lld values, one per source (it is %d x %d)",
                 (long long)n, (int)mxGetM(a), (int)mxGetN(a));
    if (fmk_kernel_is_complex(kernel))
        return complex_read(a, count);
    if (mxIsComplex(a))
        fail_arg("charges are complex, but kernel %s takes real charges (cauchy2d takes complex)",
                 fmk_kernel_name(kernel));
    return mxGetPr(a);
}

/* Output buffers of an evaluation at m targets, and the arrays they become. */
struct results {
    double *pot, *grad; /* interleaved, as fmmkit writes them; grad NULL when not asked */
};

static void results_alloc(struct results *r, fmk_kernel kernel, int64_t m, int want_grad)
{
    const int c = fmk_kernel_is_complex(kernel) ? 2 : 1;
    const size_t gw = c == 2 ? 2 : (size_t)fmk_kernel_dim(kernel);
    r->pot = mxMalloc((size_t)m * c * sizeof *r->pot + 1);
    r->grad = want_grad ? mxMalloc((size_t)m * gw * sizeof *r->grad + 1) : NULL;
}

/* pot as m x 1 (rows) or 1 x m (cols); grad as m x dim or dim x m (real kernels) or like pot
 * (cauchy2d's complex derivative). */
static void results_write(const struct results *r, fmk_kernel kernel, int64_t m, enum layout layout,
                          int nlhs, mxArray *plhs[])
{
    const size_t mm = (size_t)m, dim = (size_t)fmk_kernel_dim(kernel);
    const int rows = layout == LAYOUT_ROWS;
    if (fmk_kernel_is_complex(kernel)) {
        plhs[0] = complex_write(r->pot, rows ? mm : 1, rows ? 1 : mm);
        if (nlhs > 1)
            plhs[1] = complex_write(r->grad, rows ? mm : 1, rows ? 1 : mm);
        return;
    }
    plhs[0] = mxCreateDoubleMatrix(rows ? mm : 1, rows ? 1 : mm, mxREAL);
    if (mm)
        memcpy(mxGetPr(plhs[0]), r->pot, mm * sizeof *r->pot);
    if (nlhs < 2)
        return;
    plhs[1] = mxCreateDoubleMatrix(rows ? mm : dim, rows ? dim : mm, mxREAL);
    double *g = mxGetPr(plhs[1]);
    if (rows) {
        for (size_t i = 0; i < mm; i++)
            for (size_t k = 0; k < dim; k++)
                g[i + mm * k] = r->grad[dim * i + k];
    } else if (mm) {
        memcpy(g, r->grad, mm * dim * sizeof *g);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The plan table
 * ------------------------------------------------------------------------------------------ */

struct plan_slot {
    double id; /* 0: free */
    fmk_plan *plan;
    fmk_kernel kernel;
    int has_points;     /* set_points succeeded (a failed one leaves it 0) */
    enum layout layout; /* how set_points' targets (or sources) were held: eval's results too */
};

/* The table, its size, and the next id. Ids start at a time-derived offset, so that a handle
 * kept across a reload of this MEX file does not name a new plan by accident. */
static struct plan_slot *plan_table;
static size_t plan_table_size;
static double plan_next_id;

static size_t plans_alive(void)
{
    size_t alive = 0;
    for (size_t i = 0; i < plan_table_size; i++)
        alive += plan_table[i].id != 0;
    return alive;
}

static void plans_free_all(void)
{
    for (size_t i = 0; i < plan_table_size; i++)
        fmk_plan_destroy(plan_table[i].plan);
    free(plan_table);
    plan_table = NULL;
    plan_table_size = 0;
}

static struct plan_slot *plan_find(const mxArray *a)
{
    const double id = scalar_arg(a, "the plan handle");
    for (size_t i = 0; id != 0 && i < plan_table_size; i++)
        if (plan_table[i].id == id)
            return &plan_table[i];
    mexErrMsgIdAndTxt("fmmkit:state", "the plan has been destroyed (or was never made)");
    return NULL;
}

/* Puts plan into a free slot; destroys it and raises fmmkit:nomem when the table cannot grow. */
static double plan_store(fmk_plan *plan, fmk_kernel kernel)
{
    size_t i = 0;
    while (i < plan_table_size && plan_table[i].id != 0)
        i++;
    if (i == plan_table_size) {
        const size_t size = plan_table_size ? 2 * plan_table_size : 16;
        struct plan_slot *t = realloc(plan_table, size * sizeof *t);
        if (!t) {
            fmk_plan_destroy(plan);
            mexErrMsgIdAndTxt("fmmkit:nomem", "no memory for the table of plans");
        }
        memset(t + plan_table_size, 0, (size - plan_table_size) * sizeof *t);
        plan_table = t;
        plan_table_size = size;
    }
    if (plan_next_id == 0) { /* 2^20 offsets of 2^32 numbers each: below 2^53, exact doubles */
        struct timespec ts = {0, 0};
        timespec_get(&ts, TIME_UTC);
        const uint64_t tick = (uint64_t)ts.tv_sec * 1000003u + (uint64_t)ts.tv_nsec / 1000u;
        plan_next_id = (double)(tick % 1048576u) * 4294967296.0 + 1;
    }
    plan_table[i] = (struct plan_slot){plan_next_id++, plan, kernel, 0, LAYOUT_ROWS};
    return plan_table[i].id;
}

/* ---------------------------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------------------------ */

static void need_args(int nrhs, int lo, int hi, const char *usage)
{
    if (nrhs < lo || nrhs > hi)
        fail_arg("wrong number of arguments; usage: %s", usage);
}

/* A plan of kernel with the options, its interrupt check set; raises the library's error. */
static fmk_plan *plan_make(fmk_kernel kernel, const struct mex_opts *mo)
{
    fmk_plan *plan = NULL;
    const fmk_status st =
        fmk_plan_create(&plan, fmk_kernel_dim(kernel), kernel, mo->eps, &mo->opts);
    if (st != FMK_OK)
        fail_status(st, NULL, 0);
    fmk_plan_set_interrupt(plan, mex_interrupted, NULL);
    return plan;
}

/* [pot, grad] = eval(kernel, sources, charges, name, value, ...) */
static void cmd_eval(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    if (nrhs < 3)
        fail_arg("usage: [pot, grad] = fmmkit_eval(kernel, sources, charges, name, value, ...)");
    const fmk_kernel kernel = kernel_arg(prhs[0]);
    const int dim = fmk_kernel_dim(kernel);
    struct mex_opts mo;
    options_arg(nrhs - 3, prhs + 3, 1, &mo);
    int64_t n, m = 0;
    enum layout layout, tlayout;
    const double *x = points_read(prhs[1], dim, "sources", &n, &layout);
    const double *q = charges_read(prhs[2], kernel, n);
    const double *y = NULL;
    if (mo.targets) {
        y = points_read(mo.targets, dim, "targets", &m, &tlayout);
        layout = tlayout;
        if (m == 0) /* no targets: the empty result, not the sources */
            y = NULL;
    }
    const int64_t mout = mo.targets ? m : n;
    struct results r;
    results_alloc(&r, kernel, mout, nlhs > 1);
    if (mout > 0) {
        fmk_plan *plan = plan_make(kernel, &mo);
        fmk_status st = fmk_plan_set_points(plan, n, x, m, y);
        if (st == FMK_OK)
            st = fmk_plan_eval(plan, q, r.pot, r.grad);
        if (st != FMK_OK)
            fail_status(st, plan, 1);
        fmk_plan_destroy(plan);
    }
    results_write(&r, kernel, mout, layout, nlhs, plhs);
}

/* id = plan_create(kernel, name, value, ...) */
static void cmd_plan_create(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    (void)nlhs;
    if (nrhs < 1)
        fail_arg("usage: p = fmmkit.Plan(kernel, name, value, ...)");
    const fmk_kernel kernel = kernel_arg(prhs[0]);
    struct mex_opts mo;
    options_arg(nrhs - 1, prhs + 1, 0, &mo);
    fmk_plan *plan = plan_make(kernel, &mo);
    plhs[0] = mxCreateDoubleScalar(plan_store(plan, kernel));
}

/* plan_set_points(id, sources[, targets]); the results of plan_eval will be held as the targets
 * were (or the sources, without targets). */
static void cmd_plan_set_points(int nrhs, const mxArray *prhs[])
{
    need_args(nrhs, 2, 3, "p.set_points(sources[, targets])");
    struct plan_slot *s = plan_find(prhs[0]);
    const int dim = fmk_kernel_dim(s->kernel);
    int64_t n, m = 0;
    enum layout layout;
    const double *x = points_read(prhs[1], dim, "sources", &n, &layout);
    const double *y = NULL;
    if (nrhs > 2 && !mxIsEmpty(prhs[2])) {
        y = points_read(prhs[2], dim, "targets", &m, &layout);
    } else if (nrhs > 2) {
        check_double(prhs[2], "targets");
    }
    s->has_points = 0;
    const fmk_status st = fmk_plan_set_points(s->plan, n, x, m, y);
    if (st != FMK_OK)
        fail_status(st, s->plan, 0);
    s->has_points = 1;
    s->layout = layout;
}

/* [pot, grad] = plan_eval(id, charges) */
static void cmd_plan_eval(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    need_args(nrhs, 2, 2, "[pot, grad] = p.eval(charges)");
    struct plan_slot *s = plan_find(prhs[0]);
    if (!s->has_points)
        mexErrMsgIdAndTxt("fmmkit:state", "the plan has no points: call set_points first");
    fmk_info info;
    fmk_plan_info(s->plan, &info);
    const double *q = charges_read(prhs[1], s->kernel, info.n_sources);
    const enum layout layout = s->layout;
    struct results r;
    results_alloc(&r, s->kernel, info.n_targets, nlhs > 1);
    const fmk_status st = fmk_plan_eval(s->plan, q, r.pot, r.grad);
    if (st != FMK_OK)
        fail_status(st, s->plan, 0);
    results_write(&r, s->kernel, info.n_targets, layout, nlhs, plhs);
}

/* info = plan_info(id): what the plan is and what its last calls cost. */
static void cmd_plan_info(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    (void)nlhs;
    need_args(nrhs, 1, 1, "info = p.info()");
    struct plan_slot *s = plan_find(prhs[0]);
    fmk_info in;
    fmk_plan_info(s->plan, &in);
    static const char *fields[] = {
        "kernel",     "dim",          "method",      "backend",    "precision", "order",
        "levels",     "leaf_size",    "n_sources",   "n_targets",  "eps",       "theta",
        "bytes_host", "bytes_device", "device_name", "setup_time", "eval_time"};
    const int nf = (int)(sizeof fields / sizeof fields[0]);
    mxArray *st = mxCreateStructMatrix(1, 1, nf, fields);
    double eval_time = 0;
    for (int p = FMK_PHASE_UPLOAD; p < FMK_PHASE_COUNT; p++)
        if (p != FMK_PHASE_TREE)
            eval_time += in.phase_time[p];
    mxSetField(st, 0, "kernel", mxCreateString(fmk_kernel_name(in.kernel)));
    mxSetField(st, 0, "dim", mxCreateDoubleScalar(in.dim));
    mxSetField(st, 0, "method", mxCreateString(fmk_method_name(in.method)));
    mxSetField(st, 0, "backend", mxCreateString(fmk_backend_name(in.backend)));
    mxSetField(st, 0, "precision",
               mxCreateString(in.precision == FMK_PRECISION_FP32 ? "fp32" : "fp64"));
    mxSetField(st, 0, "order", mxCreateDoubleScalar(in.order));
    mxSetField(st, 0, "levels", mxCreateDoubleScalar(in.levels));
    mxSetField(st, 0, "leaf_size", mxCreateDoubleScalar((double)in.leaf_size));
    mxSetField(st, 0, "n_sources", mxCreateDoubleScalar((double)in.n_sources));
    mxSetField(st, 0, "n_targets", mxCreateDoubleScalar((double)in.n_targets));
    mxSetField(st, 0, "eps", mxCreateDoubleScalar(in.eps));
    mxSetField(st, 0, "theta", mxCreateDoubleScalar(in.theta));
    mxSetField(st, 0, "bytes_host", mxCreateDoubleScalar((double)in.bytes_host));
    mxSetField(st, 0, "bytes_device", mxCreateDoubleScalar((double)in.bytes_device));
    mxSetField(st, 0, "device_name", mxCreateString(in.device_name));
    mxSetField(st, 0, "setup_time", mxCreateDoubleScalar(in.phase_time[FMK_PHASE_SETUP]));
    mxSetField(st, 0, "eval_time", mxCreateDoubleScalar(eval_time));
    plhs[0] = st;
}

/* plan_destroy(id): frees the plan; an id already destroyed (or 0) is a no-op. */
static void cmd_plan_destroy(int nrhs, const mxArray *prhs[])
{
    need_args(nrhs, 1, 1, "p.destroy()");
    const double id = scalar_arg(prhs[0], "the plan handle");
    for (size_t i = 0; id != 0 && i < plan_table_size; i++) {
        if (plan_table[i].id != id)
            continue;
        fmk_plan_destroy(plan_table[i].plan);
        plan_table[i] = (struct plan_slot){0, NULL, 0, 0, LAYOUT_ROWS};
        return;
    }
}

void mexFunction(int nlhs, mxArray *plhs[], int nrhs, const mxArray *prhs[])
{
    mexAtExit(plans_free_all);
    if (nrhs < 1)
        fail_arg("fmmkit_mex is fmmkit's gateway: call fmmkit_eval, fmmkit.Plan, ... instead");
    char *cmd = string_arg(prhs[0], "the command");
    nrhs--, prhs++;
    if (!strcmp(cmd, "version")) {
        plhs[0] = mxCreateString(fmk_version());
    } else if (!strcmp(cmd, "eval")) {
        cmd_eval(nlhs, plhs, nrhs, prhs);
    } else if (!strcmp(cmd, "plan_create")) {
        cmd_plan_create(nlhs, plhs, nrhs, prhs);
    } else if (!strcmp(cmd, "plan_set_points")) {
        cmd_plan_set_points(nrhs, prhs);
    } else if (!strcmp(cmd, "plan_eval")) {
        cmd_plan_eval(nlhs, plhs, nrhs, prhs);
    } else if (!strcmp(cmd, "plan_info")) {
        cmd_plan_info(nlhs, plhs, nrhs, prhs);
    } else if (!strcmp(cmd, "plan_destroy")) {
        cmd_plan_destroy(nrhs, prhs);
    } else if (!strcmp(cmd, "plans_alive")) { /* for the tests: plans not yet destroyed */
        plhs[0] = mxCreateDoubleScalar((double)plans_alive());
    } else {
        fail_arg("fmmkit_mex: unknown command '%s'", cmd);
    }
    mxFree(cmd);
}
