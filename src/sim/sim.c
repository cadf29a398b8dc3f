/* sim.c -- the simulation's life cycle: options and their checks, create from host or device
 * arrays, destroy, get_state, info, messages and interrupts (sim_internal.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "sim/sim_internal.h"

/* Messages of failures that had no simulation to hold them (create, ICs, NULL sim). */
static _Thread_local char thread_error[FMK_SIM_ERROR_LEN];

fmk_status fmk_sim_fail(fmk_sim *sim, fmk_status status, const char *fmt, ...)
{
    char *buf = sim ? sim->error : thread_error;
    char tmp[FMK_SIM_ERROR_LEN]; /* fmt's arguments may be the buffer itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(buf, tmp, sizeof tmp);
    return status;
}

fmk_status fmk_sim_fail_plan(fmk_sim *sim, fmk_status status, const char *doing)
{
    return fmk_sim_fail(sim, status, "%s: %s", doing, fmk_plan_last_error(sim ? sim->plan : NULL));
}

double fmk_sim_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int fmk_sim_threads(const fmk_sim *sim)
{
    if (sim->threads > 0)
        return sim->threads;
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

double *fmk_sim_doubles(int64_t n)
{
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(double))
        return NULL;
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
}

fmk_sim *fmk_sim_alloc(void)
{
    fmk_sim *sim = calloc(1, sizeof *sim);
    if (!sim)
        return NULL;
    sim->snap_last_step = sim->diag_last_step = sim->restart_last_step = -1;
    sim->comm.size = 1;
    atomic_init(&sim->stop, 0);
    return sim;
}

void fmk_sim_opts_default(fmk_sim_opts *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    fmk_opts_default(&opts->plan);
    opts->eps = 0;
    opts->G = 1;
    opts->softening = FMK_SIM_SOFT_PLUMMER;
    opts->soft = 0;
    opts->stepping = FMK_SIM_STEP_FIXED;
    opts->dt = 0;
    opts->eta = 0.025;
    opts->dt_min = 0;
    opts->dt_max = 0;
    opts->verbose = 0;
    opts->comoving = 0;
    fmk_sim_cosmology_preset(&opts->cosmology, "wmap");
    opts->spacing = FMK_SIM_SPACING_TIME;
    opts->soft_mode = FMK_SIM_SOFT_COMOVING;
    opts->soft_max_comoving = 0;
    opts->a_start = 0;
    opts->radius = 0;
    opts->integrator = FMK_SIM_LEAPFROG;
}

fmk_status fmk_sim_check_opts(const fmk_sim_opts *o, int per_particle)
{
    const char *w = "fmk_sim options";
    if (!(isfinite(o->G) && o->G > 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: G = %g; it must be finite and > 0", w, o->G);
    if (o->softening != FMK_SIM_SOFT_PLUMMER && o->softening != FMK_SIM_SOFT_SPLINE)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: softening = %d; it must be FMK_SIM_SOFT_PLUMMER (0) or "
                            "FMK_SIM_SOFT_SPLINE (1)",
                            w, (int)o->softening);
    if (!(isfinite(o->soft) && o->soft >= 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: soft = %g; it must be finite and >= 0", w,
                            o->soft);
    if (o->plan.softening != 0)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: opts.plan.softening = %g; the driver sets the plan's softening "
                            "from opts.soft: leave it 0",
                            w, o->plan.softening);
    if (o->integrator != FMK_SIM_LEAPFROG && o->integrator != FMK_SIM_YOSHIDA4)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: integrator = %d; it must be FMK_SIM_LEAPFROG (0) or "
                            "FMK_SIM_YOSHIDA4 (1)",
                            w, (int)o->integrator);
    if (o->integrator == FMK_SIM_YOSHIDA4 && o->comoving)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: the fourth-order integrator (FMK_SIM_YOSHIDA4) is for "
                            "Newtonian runs; comoving runs take the leapfrog",
                            w);
    if (o->stepping != FMK_SIM_STEP_FIXED && o->stepping != FMK_SIM_STEP_ADAPTIVE)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: stepping = %d; it must be FMK_SIM_STEP_FIXED (0) or "
                            "FMK_SIM_STEP_ADAPTIVE (1)",
                            w, (int)o->stepping);
    if (!(isfinite(o->dt) && o->dt >= 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: dt = %g; it must be finite and > 0", w, o->dt);
    if (o->stepping == FMK_SIM_STEP_FIXED && !(o->dt > 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: dt = %g; a fixed step needs opts.dt > 0 (or use "
                            "FMK_SIM_STEP_ADAPTIVE)",
                            w, o->dt);
    if (!(isfinite(o->eta) && o->eta >= 0) ||
        (o->stepping == FMK_SIM_STEP_ADAPTIVE && !(o->eta > 0)))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: eta = %g; it must be finite and > 0", w,
                            o->eta);
    if (!(isfinite(o->dt_min) && o->dt_min >= 0) || isnan(o->dt_max) || o->dt_max < 0)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: dt_min = %g, dt_max = %g; they must be >= 0 (dt_max 0: none)", w,
                            o->dt_min, o->dt_max);
    if (o->dt_max > 0 && o->dt_min > o->dt_max)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: dt_min = %g is above dt_max = %g", w, o->dt_min,
                            o->dt_max);
    if (o->verbose != 0 && o->verbose != 1)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: verbose = %d; it must be 0 or 1", w,
                            (int)o->verbose);
    if (!(o->eps == 0 || (o->eps > 0 && o->eps < 1)))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: eps = %g; it must be 0 (the default) or in (0, 1)", w, o->eps);
    if (per_particle && o->softening != FMK_SIM_SOFT_SPLINE)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: softening lengths per particle need FMK_SIM_SOFT_SPLINE (the "
                            "plummer kernel takes one s for every particle)",
                            w);
    if (o->stepping == FMK_SIM_STEP_ADAPTIVE && !per_particle && !(o->soft > 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: the adaptive step eta sqrt(s / |a|) needs a softening length: "
                            "set opts.soft > 0",
                            w);
    return fmk_sim_check_comoving(o);
}

/* The first index whose value is not finite (or, positive = 1, not > 0); -1 when none. */
static int64_t first_bad(const double *x, int64_t count, int positive)
{
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i]) || (positive && !(x[i] > 0)))
            return i;
    return -1;
}

fmk_status fmk_sim_check_particles(int64_t n, const double *mass, const double *pos,
                                   const double *vel, const double *soft, const fmk_sim_opts *o)
{
    if (n < 1 || n > ((int64_t)1 << 40))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "fmk_sim_create: n = %lld; it must be in 1..2^40",
                            (long long)n);
    return fmk_sim_check_share(n, mass, pos, vel, soft, o);
}

fmk_status fmk_sim_check_share(int64_t n, const double *mass, const double *pos, const double *vel,
                               const double *soft, const fmk_sim_opts *o)
{
    (void)o;
    if (n < 0 || n > ((int64_t)1 << 40))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "fmk_sim_create: n = %lld; it must be in 0..2^40",
                            (long long)n);
    if (n == 0)
        return FMK_OK;
    if (!mass || !pos || !vel)
        return fmk_sim_fail(NULL, FMK_ERR_NULL,
                            "fmk_sim_create: mass, pos and vel must be arrays of n, 3n and 3n "
                            "doubles");
    int64_t i;
    if ((i = first_bad(mass, n, 1)) >= 0)
        return fmk_sim_fail(NULL, isfinite(mass[i]) ? FMK_ERR_ARG : FMK_ERR_NONFINITE,
                            "fmk_sim_create: mass[%lld] = %g; masses must be finite and > 0",
                            (long long)i, mass[i]);
    if ((i = first_bad(pos, 3 * n, 0)) >= 0)
        return fmk_sim_fail(NULL, FMK_ERR_NONFINITE,
                            "fmk_sim_create: position %lld has coordinate %d = %g; positions "
                            "must be finite",
                            (long long)(i / 3), (int)(i % 3), pos[i]);
    if ((i = first_bad(vel, 3 * n, 0)) >= 0)
        return fmk_sim_fail(NULL, FMK_ERR_NONFINITE,
                            "fmk_sim_create: velocity %lld has component %d = %g; velocities "
                            "must be finite",
                            (long long)(i / 3), (int)(i % 3), vel[i]);
    if (soft && (i = first_bad(soft, n, 1)) >= 0)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "fmk_sim_create: soft_per_particle[%lld] = %g; softening lengths "
                            "must be finite and > 0",
                            (long long)i, soft[i]);
    return FMK_OK;
}

/* The fields of sim that follow from the options: eps, kernel, spline, h_max. */
static void derive(fmk_sim *sim)
{
    fmk_sim_opts *o = &sim->opts;
    if (o->eps == 0)
        o->eps = fmk_eps_default(o->plan.precision);
    double s_max = o->soft;
    if (sim->soft)
        for (int64_t i = 0; i < sim->n; i++)
            s_max = sim->soft[i] > s_max ? sim->soft[i] : s_max;
    /* distributed: every rank's (the spline's cells and its halo reach the largest h) */
    fmk_sim_dist_reduce(sim, &s_max, 1, FMK_SIM_REDUCE_MAX);
    sim->spline = o->softening == FMK_SIM_SOFT_SPLINE && s_max > 0;
    sim->h_max = sim->spline ? FMK_SIM_SPLINE_H * s_max : 0;
    sim->kernel = o->softening == FMK_SIM_SOFT_PLUMMER && o->soft > 0 ? FMK_KERNEL_PLUMMER
                                                                      : FMK_KERNEL_LAPLACE;
    sim->threads = o->plan.threads > 0 ? o->plan.threads : 0;
    sim->soft_now = fmk_sim_comoving_soft_at(o, sim->time);
    sim->cosmo_c = fmk_sim_comoving_c(o);
}

static fmk_status host_arrays(fmk_sim *sim, const fmk_sim_init *in)
{
    const int64_t n = sim->n;
    sim->mass = fmk_sim_doubles(n);
    sim->charge = fmk_sim_doubles(n);
    sim->id = malloc((size_t)n * sizeof *sim->id);
    if (in->soft)
        sim->soft = fmk_sim_doubles(n);
    if (!sim->mass || !sim->charge || !sim->id || (in->soft && !sim->soft))
        return fmk_sim_fail(sim, FMK_ERR_NOMEM,
                            "fmk_sim_create: out of host memory for %lld "
                            "particles",
                            (long long)n);
    if (!in->on_device && n > 0) {
        memcpy(sim->mass, in->mass, (size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++)
            sim->charge[i] = sim->opts.G * sim->mass[i];
    }
    if (in->soft && n > 0)
        memcpy(sim->soft, in->soft, (size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        sim->id[i] = in->ids ? in->ids[i] : (uint64_t)(i + 1);
    return FMK_OK;
}

static void swap_ptr(double **a, double **b)
{
    double *t = *a;
    *a = *b, *b = t;
}

/* The CPU backend's state: the double buffers, and the forces at the start. */
static fmk_status host_state(fmk_sim *sim, const fmk_sim_init *in)
{
    const int64_t n = sim->n;
    double **a3[] = {&sim->pos, &sim->vel, &sim->acc, &sim->pos_next, &sim->acc_next};
    for (int k = 0; k < 5; k++)
        if (!(*a3[k] = fmk_sim_doubles(3 * n)))
            return fmk_sim_fail(sim, FMK_ERR_NOMEM,
                                "fmk_sim_create: out of host memory for %lld particles",
                                (long long)n);
    if (!(sim->pot = fmk_sim_doubles(n)) || !(sim->pot_next = fmk_sim_doubles(n)))
        return fmk_sim_fail(sim, FMK_ERR_NOMEM,
                            "fmk_sim_create: out of host memory for %lld particles", (long long)n);
    if (n > 0) {
        memcpy(sim->pos, in->pos, (size_t)(3 * n) * sizeof(double));
        memcpy(sim->vel, in->vel, (size_t)(3 * n) * sizeof(double));
        /* (steps that do not ask for the potential leave a buffer as it was: never unset) */
        memset(sim->pot_next, 0, (size_t)n * sizeof(double));
    }
    sim->pot_ok = 1; /* the stored potential, or the first evaluation's */
    if (in->acc) {
        if (n > 0) {
            memcpy(sim->acc, in->acc, (size_t)(3 * n) * sizeof(double));
            memcpy(sim->pot, in->pot, (size_t)n * sizeof(double));
        }
        return FMK_OK;
    }
    if (n > 0)
        memcpy(sim->pos_next, in->pos, (size_t)(3 * n) * sizeof(double));
    fmk_status st = fmk_sim_forces(sim, 1);
    if (st != FMK_OK)
        return st;
    swap_ptr(&sim->acc, &sim->acc_next);
    swap_ptr(&sim->pot, &sim->pot_next);
    sim->plan_here = 1;
    return FMK_OK;
}

/* Device state: the device's buffers, filled from host or device arrays, and the forces. */
static fmk_status device_state(fmk_sim *sim, const fmk_sim_init *in)
{
    fmk_status st = fmk_sim_dev_make(sim);
    if (st != FMK_OK)
        return st;
    if (in->on_device)
        st = fmk_sim_dev_copy_in(sim, in->mass, in->pos, in->vel);
    else
        st = fmk_sim_dev_upload(sim, in->pos, in->vel, in->acc, in->pot);
    sim->pot_ok = 1; /* the stored potential, or the first evaluation's */
    if (st != FMK_OK || in->acc)
        return st;
    if ((st = fmk_sim_forces(sim, 1)) != FMK_OK)
        return st;
    fmk_sim_dev_swap(sim);
    sim->plan_here = 1;
    return FMK_OK;
}

fmk_status fmk_sim_build(fmk_sim **out, const fmk_sim_init *in, const fmk_sim_opts *opts)
{
    fmk_sim *sim = fmk_sim_alloc();
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NOMEM, "fmk_sim_create: out of host memory");
    sim->n = sim->n_total = in->n;
    if (in->comm) { /* from here on destroy releases the communicator */
        sim->comm = *in->comm;
        double total = (double)in->n;
        fmk_sim_dist_reduce(sim, &total, 1, FMK_SIM_REDUCE_SUM);
        sim->n_total = (int64_t)total;
    }
    sim->opts = *opts;
    if (opts->comoving) /* before the charges G m */
        sim->opts.G = FMK_SIM_COSMO_G;
    sim->step = in->step;
    sim->time = in->time;
    sim->dt_last = in->dt_last;
    sim->png_axis = 2, sim->png_width = 512;
    sim->interactions_total = in->interactions_total;
    sim->u_ref_set = in->u_ref_set, sim->u_ref = in->u_ref;
    if (in->resume) {
        sim->u = in->u, sim->li_kinetic = in->li_kinetic, sim->li_integral = in->li_integral;
        sim->li_start = in->li_start, sim->li_max_aw = in->li_max_aw, sim->li_started = 1;
    }
    if (opts->comoving && !(in->time > 0 && isfinite(in->time))) {
        fmk_sim_destroy(sim);
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "fmk_sim_create: a comoving run starts at a scale factor a > 0 "
                            "(opts.a_start, or a snapshot's Time); it is %g",
                            in->time);
    }
    fmk_status st = fmk_sim_dist_agree(sim, host_arrays(sim, in));
    if (st == FMK_OK) {
        derive(sim);
        st = fmk_sim_plan_make(sim);
    }
    /* a distributed simulation keeps its state on the host (distributed plans take host
     * arrays), whatever backend the plan's local work runs on */
    const int on_host = sim->comm.hooks != NULL;
    if (st == FMK_OK && on_host)
        st = fmk_sim_dist_agree(sim, host_state(sim, in));
    else if (st == FMK_OK && sim->backend == FMK_BACKEND_CUDA &&
             opts->integrator == FMK_SIM_YOSHIDA4)
        st = fmk_sim_fail(sim, FMK_ERR_ARG,
                          "fmk_sim_create: the fourth-order integrator (FMK_SIM_YOSHIDA4) runs "
                          "on the CPU backend; the force plan runs on CUDA (set "
                          "opts.plan.backend = FMK_BACKEND_CPU, or take the leapfrog)");
    else if (st == FMK_OK && sim->backend == FMK_BACKEND_CUDA)
        st = device_state(sim, in);
    else if (st == FMK_OK && in->on_device)
        st = fmk_sim_fail(sim, FMK_ERR_ARG,
                          "fmk_sim_create_device: the force plan runs on the %s backend; "
                          "device arrays need opts.plan.backend = FMK_BACKEND_CUDA (or auto "
                          "with a GPU present)",
                          fmk_backend_name(sim->backend));
    else if (st == FMK_OK)
        st = host_state(sim, in);
    if (st == FMK_OK)
        st = fmk_sim_comoving_init(sim, !in->resume);
    if (st != FMK_OK) {
        fmk_sim_fail(NULL, st, "%s", sim->error);
        fmk_sim_destroy(sim);
        return st;
    }
    *out = sim;
    return FMK_OK;
}

fmk_status fmk_sim_create(fmk_sim **sim, int64_t n, const double *mass, const double *pos,
                          const double *vel, const double *soft_per_particle, const uint64_t *ids,
                          const fmk_sim_opts *opts)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create: sim is NULL");
    *sim = NULL;
    fmk_sim_opts o;
    if (opts)
        o = *opts;
    else
        fmk_sim_opts_default(&o);
    fmk_status st = fmk_sim_check_opts(&o, soft_per_particle != NULL);
    if (st == FMK_OK)
        st = fmk_sim_check_particles(n, mass, pos, vel, soft_per_particle, &o);
    if (st != FMK_OK)
        return st;
    const fmk_sim_init in = {.n = n,
                             .mass = mass,
                             .pos = pos,
                             .vel = vel,
                             .soft = soft_per_particle,
                             .ids = ids,
                             .time = o.comoving ? o.a_start : 0};
    return fmk_sim_build(sim, &in, &o);
}

fmk_status fmk_sim_create_device(fmk_sim **sim, int64_t n, const double *d_mass,
                                 const double *d_pos, const double *d_vel, const fmk_sim_opts *opts)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_create_device: sim is NULL");
    *sim = NULL;
    fmk_sim_opts o;
    if (opts)
        o = *opts;
    else
        fmk_sim_opts_default(&o);
    fmk_status st = fmk_sim_check_opts(&o, 0);
    if (st != FMK_OK)
        return st;
    if (n < 1 || n > ((int64_t)1 << 40))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "fmk_sim_create_device: n = %lld; it must be in 1..2^40", (long long)n);
    if (!d_mass || !d_pos || !d_vel)
        return fmk_sim_fail(NULL, FMK_ERR_NULL,
                            "fmk_sim_create_device: d_mass, d_pos and d_vel must be device "
                            "arrays of n, 3n and 3n doubles");
    const fmk_sim_init in = {.n = n,
                             .mass = d_mass,
                             .pos = d_pos,
                             .vel = d_vel,
                             .on_device = 1,
                             .time = o.comoving ? o.a_start : 0};
    return fmk_sim_build(sim, &in, &o);
}

void fmk_sim_destroy(fmk_sim *sim)
{
    if (!sim)
        return;
    fmk_plan_destroy(sim->plan);
    fmk_sim_dev_free(sim);
    double *arrays[] = {sim->mass, sim->charge, sim->soft,     sim->pos,      sim->vel,
                        sim->acc,  sim->pot,    sim->pos_next, sim->acc_next, sim->pot_next};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++)
        free(arrays[k]);
    free(sim->id);
    fmk_sim_cells_free(&sim->cells);
    if (sim->diag)
        fclose(sim->diag);
    free(sim->out_dir);
    free(sim->out_times);
    free(sim->saved);
    if (sim->comm.hooks && sim->comm.hooks->release)
        sim->comm.hooks->release(sim->comm.state);
    free(sim);
}

fmk_status fmk_sim_get_state(const fmk_sim *sim, double *mass, double *pos, double *vel,
                             double *acc, double *pot)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_get_state: sim is NULL");
    /* the potential of steps that did not ask for it: computed now (collective when
     * distributed: every rank, those with no particles too) */
    fmk_status st = pot ? fmk_sim_potential(sim) : FMK_OK;
    const size_t n = (size_t)sim->n;
    if (st != FMK_OK || n == 0)
        return st;
    if (mass)
        memcpy(mass, sim->mass, n * sizeof(double));
    if (sim->dev)
        return fmk_sim_dev_download(sim, pos, vel, acc, pot);
    if (pos)
        memcpy(pos, sim->pos, 3 * n * sizeof(double));
    if (vel)
        memcpy(vel, sim->vel, 3 * n * sizeof(double));
    if (acc)
        memcpy(acc, sim->acc, 3 * n * sizeof(double));
    if (pot)
        memcpy(pot, sim->pot, n * sizeof(double));
    return FMK_OK;
}

fmk_status fmk_sim_get_ids(const fmk_sim *sim, uint64_t *ids)
{
    if (!sim || !ids)
        return fmk_sim_fail((fmk_sim *)sim, FMK_ERR_NULL, "fmk_sim_get_ids: %s is NULL",
                            sim ? "ids" : "sim");
    if (sim->n > 0)
        memcpy(ids, sim->id, (size_t)sim->n * sizeof *ids);
    return FMK_OK;
}

fmk_status fmk_sim_get_state_device(const fmk_sim *sim, double *d_mass, double *d_pos,
                                    double *d_vel, double *d_acc, double *d_pot)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_get_state_device: sim is NULL");
    if (!sim->dev)
        return fmk_sim_fail((fmk_sim *)sim, FMK_ERR_ARG,
                            "fmk_sim_get_state_device: the simulation runs on the %s backend; "
                            "use fmk_sim_get_state",
                            fmk_backend_name(sim->backend));
    fmk_status st = d_pot ? fmk_sim_potential(sim) : FMK_OK;
    return st == FMK_OK ? fmk_sim_dev_copy_out(sim, d_mass, d_pos, d_vel, d_acc, d_pot) : st;
}

fmk_status fmk_sim_info_get(const fmk_sim *sim, fmk_sim_info *info)
{
    if (!sim || !info)
        return fmk_sim_fail((fmk_sim *)sim, FMK_ERR_NULL, "fmk_sim_info_get: %s is NULL",
                            sim ? "info" : "sim");
    fmk_sim_diag d;
    fmk_status st = fmk_sim_diagnostics(sim, &d);
    if (st != FMK_OK)
        return st;
    fmk_sim_info r;
    memset(&r, 0, sizeof r);
    r.n = sim->n_total;
    r.n_local = sim->n;
    r.rank = sim->comm.rank;
    r.ranks = sim->comm.size;
    r.step = sim->step;
    r.time = sim->time;
    r.dt = sim->dt_last;
    r.kinetic = d.kinetic;
    r.potential = d.potential;
    if (sim->opts.comoving) {
        fmk_sim_cdiag cd;
        if ((st = fmk_sim_comoving_diag(sim, &cd)) != FMK_OK)
            return st;
        r.kinetic = cd.kinetic;
        r.potential = cd.potential;
        r.redshift = 1 / sim->time - 1;
        r.layzer_irvine = cd.c_li;
        r.layzer_irvine_error = cd.li_error;
    }
    r.total = r.kinetic + r.potential;
    for (int k = 0; k < 3; k++) {
        r.momentum[k] = d.momentum[k];
        r.angular_momentum[k] = d.angular_momentum[k];
    }
    r.seconds_force = sim->seconds_force;
    r.seconds_step = sim->seconds_step;
    if ((st = fmk_plan_info(sim->plan, &r.plan)) != FMK_OK)
        return fmk_sim_fail_plan((fmk_sim *)sim, st, "fmk_sim_info_get");
    /* n (n - 1) for the direct sum, while it fits (n <= 3e9) */
    r.interactions = fmk_sim_interactions(sim);
    r.interactions_total = sim->interactions_total;
    *info = r;
    return FMK_OK;
}

fmk_status fmk_sim_interrupt(fmk_sim *sim)
{
    if (!sim)
        return FMK_ERR_NULL;
    atomic_store(&sim->stop, 1);
    if (sim->plan)
        fmk_plan_interrupt(sim->plan);
    return FMK_OK;
}

const char *fmk_sim_last_error(const fmk_sim *sim)
{
    return sim ? sim->error : thread_error;
}
