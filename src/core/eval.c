/* eval.c -- a plan's evaluations: fmk_plan_eval, fmk_plan_eval_many and their device forms.
 * The checks every method shares (the plan has points, the arrays, finite charges), the
 * engine's pass over one or several charge vectors, and for host arrays the staging: the
 * engine writes into the plan's buffers, and the caller's arrays get the results only when
 * every value is finite, so a failure leaves them untouched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "core/internal.h"

/* Loops over the caller's arrays use the plan's threads from this many values on. */
enum { PAR_MIN = 1 << 16 };

static fmk_status check_eval(fmk_plan *plan, const char *fn, const double *charges,
                             const double *pot, const double *grad)
{
    if (!plan)
        return fmk_error_set(NULL, FMK_ERR_NULL, "%s: plan is NULL", fn);
    fmk_plan_refresh_threads(plan);
    fmk_interrupt_begin(plan);
    if (!plan->has_points)
        return fmk_error_set(plan, FMK_ERR_STATE,
                             "%s: no points yet; call fmk_plan_set_points first", fn);
    if (!charges && plan->n_sources > 0)
        return fmk_error_set(plan, FMK_ERR_NULL, "%s: charges is NULL", fn);
    if (!pot && !grad)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "%s: pot and grad are both NULL; ask for at least one", fn);
    return FMK_OK;
}

static void copy_values(double *to, const double *from, int64_t n, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        to[i] = from[i];
}

/* The first non-finite value of the staged results of nd vectors (pot: pw values per target,
 * grad: gw), as FMK_ERR_NONFINITE with a message naming it, or FMK_OK. */
static fmk_status check_results(fmk_plan *plan, int64_t nd, const double *pot, int pw,
                                const double *grad, int gw)
{
    const int64_t nt = plan->n_targets;
    for (int out = 0; out < 2; out++) {
        const double *v = out ? grad : pot;
        const int w = out ? gw : pw;
        if (!v)
            continue;
        const int64_t bad = fmk_plan_first_nonfinite(v, nd * nt * w, plan->threads);
        if (bad >= 0) {
            char vec[48] = "";
            if (nd > 1)
                snprintf(vec, sizeof vec, " of charge vector %lld", (long long)(bad / (nt * w)));
            return fmk_error_set(
                plan, FMK_ERR_NONFINITE,
                "the %s at target %lld%s is %g although every point and charge is finite: the "
                "sum overflows the floating-point range (the results are linear in the charges: "
                "scale them down); nothing was written. If the values are moderate, this is a "
                "defect of fmmkit's method %s: please report it",
                out ? "gradient" : "potential", (long long)(bad % (nt * w) / w), vec, v[bad],
                fmk_method_name(plan->opts.method));
        }
    }
    return FMK_OK;
}

/* The first non-finite charge of nd vectors, as FMK_ERR_NONFINITE with a message, or FMK_OK. */
static fmk_status check_charges(fmk_plan *plan, int64_t nd, const double *charges)
{
    const int w = fmk_kernel_width(plan->kernel);
    const int64_t nc = plan->n_sources * w;
    for (int64_t v = 0; v < nd; v++) {
        const int64_t bad = fmk_plan_first_nonfinite(charges + v * nc, nc, plan->threads);
        if (bad < 0)
            continue;
        char vec[48] = "";
        if (nd > 1)
            snprintf(vec, sizeof vec, "charge vector %lld: ", (long long)v);
        return fmk_error_set(plan, FMK_ERR_NONFINITE,
                             "%scharges[%lld] is %g; charges must be finite", vec,
                             (long long)(bad / w), charges[v * nc + bad]);
    }
    return FMK_OK;
}

/* The engine's pass over nd vectors: in one pass where the engine has one, else vector by
 * vector, the phase times summed. */
static fmk_status eval_vectors(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                               double *grad, int on_device)
{
    if (nd == 1)
        return plan->engine->eval(plan, charges, pot, grad, on_device);
    if (plan->engine->eval_many)
        return plan->engine->eval_many(plan, nd, charges, pot, grad, on_device);
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int w = fmk_kernel_width(plan->kernel);
    const int gw = fmk_kernel_grad_width(plan->kernel, plan->dim);
    double sum[FMK_PHASE_COUNT] = {0};
    for (int64_t v = 0; v < nd; v++) {
        if (fmk_interrupt_poll(plan))
            return fmk_interrupt_status(plan);
        fmk_status st =
            plan->engine->eval(plan, charges + v * ns * w, pot ? pot + v * nt * w : NULL,
                               grad ? grad + v * nt * gw : NULL, on_device);
        if (st != FMK_OK)
            return st;
        for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT; k++)
            sum[k] += plan->info.phase_time[k];
    }
    for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT; k++)
        plan->info.phase_time[k] = sum[k];
    return FMK_OK;
}

/* The interaction counts of one evaluation (fmmkit.h, fmk_info) where no walk counts them:
 * the direct sum's from the sizes, the FMMs' from their lists (plan->interactions_*, set by
 * their setup). The treecode's eval overwrites them with what its walk counted. */
static void interactions_of_geometry(fmk_plan *plan)
{
    fmk_info *in = &plan->info;
    if (plan->opts.method == FMK_METHOD_DIRECT) {
        const int64_t ns = plan->n_sources, nt = plan->n_targets;
        in->interactions_p2p = nt * ns - (plan->self || plan->self_slice ? nt : 0);
        in->interactions_far = 0;
    } else {
        in->interactions_p2p = plan->interactions_p2p;
        in->interactions_far = plan->interactions_far;
    }
}

/* The engine's evaluation of nd vectors (staged layout of fmk_engine.eval_many): in one pass
 * where the engine has one, else vector by vector, the phase times summed. The interaction
 * counts are those of one vector (the same for every vector); 0 when it fails. */
static fmk_status eval_engine(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                              double *grad, int on_device)
{
    interactions_of_geometry(plan);
    const fmk_status st = eval_vectors(plan, nd, charges, pot, grad, on_device);
    if (st != FMK_OK)
        plan->info.interactions_p2p = plan->info.interactions_far = 0;
    return st;
}

/* A host evaluation of nd vectors of already-checked arguments. The engine writes into staged
 * buffers (the plan's own for one vector); the caller's arrays get the results only when every
 * value is finite, so a failure (overflow, out of memory, an interrupt) leaves them untouched. */
static fmk_status eval_host(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                            double *grad)
{
    fmk_status st = check_charges(plan, nd, charges);
    if (st != FMK_OK)
        return st;
    for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT; k++)
        plan->info.phase_time[k] = 0;
    plan->info.interactions_p2p = plan->info.interactions_far = 0;
    if (plan->n_targets == 0 || nd == 0)
        return FMK_OK;
    const int pw = fmk_kernel_width(plan->kernel);
    const int gw = fmk_kernel_grad_width(plan->kernel, plan->dim);
    const int64_t nt = plan->n_targets;
    if (plan->n_sources == 0) {
        if (pot)
            memset(pot, 0, (size_t)(nd * nt * pw) * sizeof(double));
        if (grad)
            memset(grad, 0, (size_t)(nd * nt * gw) * sizeof(double));
        return FMK_OK;
    }
    if (!plan->staged) { /* points from the device: staged at the first host evaluation */
        const size_t rbytes = fmk_plan_staged_bytes(plan, nt);
        plan->staged = malloc(rbytes);
        if (!plan->staged)
            return fmk_error_set(plan, FMK_ERR_NOMEM,
                                 "out of host memory for the results (%zu bytes)", rbytes);
        plan->info.bytes_host += (int64_t)rbytes;
    }
    double *buf = plan->staged;
    if (nd > 1) { /* the vectors' results, held for this call only */
        const size_t per = fmk_plan_staged_bytes(plan, nt);
        buf = (size_t)nd <= SIZE_MAX / per ? malloc((size_t)nd * per) : NULL;
        if (!buf)
            return fmk_error_set(plan, FMK_ERR_NOMEM,
                                 "out of host memory for the results of %lld charge vectors "
                                 "(%lld bytes each): evaluate fewer vectors per call",
                                 (long long)nd, (long long)per);
    }
    double *sp = pot ? buf : NULL;
    double *sg = grad ? buf + nd * nt * pw : NULL;
    st = eval_engine(plan, nd, charges, sp, sg, 0);
    if (st == FMK_OK && (st = check_results(plan, nd, sp, pw, sg, gw)) != FMK_OK)
        plan->info.interactions_p2p = plan->info.interactions_far = 0;
    if (st == FMK_OK) {
        if (pot)
            copy_values(pot, sp, nd * nt * pw, plan->threads);
        if (grad)
            copy_values(grad, sg, nd * nt * gw, plan->threads);
    }
    if (buf != plan->staged)
        free(buf);
    return st;
}

fmk_status fmk_plan_eval(fmk_plan *plan, const double *charges, double *pot, double *grad)
{
    if (plan && plan->hooks)
        return plan->hooks->eval_many(plan, 0, 1, charges, pot, grad);
    fmk_status st = check_eval(plan, "fmk_plan_eval", charges, pot, grad);
    if (st == FMK_OK)
        st = eval_host(plan, 1, charges, pot, grad);
    if (st == FMK_OK)
        fmk_error_clear(plan);
    return st;
}

fmk_status fmk_plan_eval_many(fmk_plan *plan, int64_t n_vectors, const double *charges, double *pot,
                              double *grad)
{
    if (plan && plan->hooks)
        return plan->hooks->eval_many(plan, 1, n_vectors, charges, pot, grad);
    fmk_status st = check_eval(plan, "fmk_plan_eval_many", charges, pot, grad);
    if (st == FMK_OK && n_vectors < 0)
        st = fmk_error_set(plan, FMK_ERR_ARG, "n_vectors = %lld is negative", (long long)n_vectors);
    if (st == FMK_OK)
        st = eval_host(plan, n_vectors, charges, pot, grad);
    if (st == FMK_OK)
        fmk_error_clear(plan);
    return st;
}

/* Device evaluations: nd vectors of device pointers. */
static fmk_status eval_device(fmk_plan *plan, const char *fn, int is_many, int64_t nd,
                              const double *d_charges, double *d_pot, double *d_grad)
{
    if (plan && plan->hooks) {
        if (plan->hooks->eval_many_device)
            return plan->hooks->eval_many_device(plan, is_many, nd, d_charges, d_pot, d_grad);
        return fmk_error_set(plan, FMK_ERR_UNAVAILABLE,
                             "%s does not take %s plans; use the host calls", fn,
                             plan->hooks->name);
    }
    fmk_status st = check_eval(plan, fn, d_charges, d_pot, d_grad);
    if (st != FMK_OK)
        return st;
    if (nd < 0)
        return fmk_error_set(plan, FMK_ERR_ARG, "n_vectors = %lld is negative", (long long)nd);
    if (plan->opts.backend != FMK_BACKEND_CUDA)
        return fmk_error_set(plan, FMK_ERR_STATE,
                             "%s needs a plan with backend cuda (this one is %s)", fn,
                             fmk_backend_name(plan->opts.backend));
    for (int k = FMK_PHASE_UPLOAD; k < FMK_PHASE_COUNT; k++)
        plan->info.phase_time[k] = 0;
    plan->info.interactions_p2p = plan->info.interactions_far = 0;
    if (plan->n_targets == 0 || nd == 0)
        return FMK_OK;
    st = eval_engine(plan, nd, d_charges, d_pot, d_grad, 1);
    if (st == FMK_OK)
        fmk_error_clear(plan);
    return st;
}

fmk_status fmk_plan_eval_device(fmk_plan *plan, const double *d_charges, double *d_pot,
                                double *d_grad)
{
    return eval_device(plan, "fmk_plan_eval_device", 0, 1, d_charges, d_pot, d_grad);
}

fmk_status fmk_plan_eval_many_device(fmk_plan *plan, int64_t n_vectors, const double *d_charges,
                                     double *d_pot, double *d_grad)
{
    return eval_device(plan, "fmk_plan_eval_many_device", 1, n_vectors, d_charges, d_pot, d_grad);
}
