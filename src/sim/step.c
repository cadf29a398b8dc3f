/* step.c -- kick-drift-kick leapfrog, the adaptive global step, fmk_sim_step and fmk_sim_run
 * (output cadence, interrupts, the progress bar).
 *
 * One step of dt from the state (x, v, a) at time t:
 *     x' = x + (v + a dt/2) dt                  drift, into the next buffer
 *     a' = a(x')                                the forces (forces.c)
 *     v' = (v + a dt/2) + a' dt/2               both kicks, once the forces are known
 * which is the usual KDK sequence v_half = v + a dt/2, x' = x + v_half dt, v' = v_half + a' dt/2
 * operation for operation, with the first kick recomputed rather than stored so that a step
 * that fails leaves (x, v, a) untouched (sim_internal.h).
 *
 * The arithmetic takes three factors, x' = x + (v + a k1) d and v' = (v + a k1) + a' k2:
 * Newtonian k1 = k2 = dt/2 and d = dt (the lines above, bit for bit); comoving (v the momentum
 * p = a^2 dx/dt, a the peculiar g of forces.c) k1 = fmk_cosmo_kick(a0, am),
 * d = fmk_cosmo_drift(a0, a1), k2 = fmk_cosmo_kick(am, a1), with am the midpoint of the step
 * in the stepping variable u (opts.spacing): a0 = a(u0), am = a(u0 + dt/2), a1 = a(u0 + dt). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim/cosmo/cosmo.h"
#include "sim/sim_internal.h"

fmk_status fmk_sim_next_dt(fmk_sim *sim, double *dt)
{
    const fmk_sim_opts *o = &sim->opts;
    if (o->stepping == FMK_SIM_STEP_FIXED || o->comoving) {
        *dt = o->dt;
        return FMK_OK;
    }
    /* max_i |a_i|^2 / l_i^2, l_i the softening length (spline: h = 2.8 s) */
    double value = 0;
    if (sim->dev) {
        fmk_status st = fmk_sim_dev_max_acc(sim, &value);
        if (st != FMK_OK)
            return st;
    } else {
        const double scale = sim->spline ? FMK_SIM_SPLINE_H : 1;
        for (int64_t i = 0; i < sim->n; i++) {
            const double *a = sim->acc + 3 * i;
            const double l = scale * (sim->soft ? sim->soft[i] : o->soft);
            const double v = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]) / (l * l);
            value = v > value ? v : value;
        }
    }
    /* one global step: the largest over the ranks */
    fmk_sim_dist_reduce(sim, &value, 1, FMK_SIM_REDUCE_MAX);
    /* eta sqrt(l / |a|) = eta (l^2 / |a|^2)^(1/4) */
    double step = value > 0 ? o->eta / sqrt(sqrt(value)) : INFINITY;
    if (o->dt_max > 0 && step > o->dt_max)
        step = o->dt_max;
    if (sim->step == 0 && o->dt > 0 && step > o->dt)
        step = o->dt;
    if (step < o->dt_min)
        step = o->dt_min;
    if (!(step > 0 && isfinite(step)))
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "the adaptive step is %g (largest |a|^2 / s^2 = %g): set opts.dt_max "
                            "(or opts.dt_min) to bound it",
                            step, value);
    *dt = step;
    return FMK_OK;
}

static void swap_ptr(double **a, double **b)
{
    double *t = *a;
    *a = *b, *b = t;
}

/* The step's factors (the file's comment). */
typedef struct step_factors {
    double k1, d, k2;
} step_factors;

static fmk_status host_step(fmk_sim *sim, step_factors f, int pot)
{
    const int64_t m = 3 * sim->n;
    const double k1 = f.k1, d = f.d, k2 = f.k2;
    double *x = sim->pos, *v = sim->vel, *a = sim->acc, *x1 = sim->pos_next;
    const int threads = fmk_sim_threads(sim);
#pragma omp parallel for schedule(static) num_threads(threads) if (m > 98304)
    for (int64_t k = 0; k < m; k++)
        x1[k] = x[k] + (v[k] + a[k] * k1) * d;
    fmk_status st = fmk_sim_forces(sim, pot);
    if (st != FMK_OK)
        return st;
    const double *a1 = sim->acc_next;
#pragma omp parallel for schedule(static) num_threads(threads) if (m > 98304)
    for (int64_t k = 0; k < m; k++)
        v[k] = (v[k] + a[k] * k1) + a1[k] * k2;
    swap_ptr(&sim->pos, &sim->pos_next);
    swap_ptr(&sim->acc, &sim->acc_next);
    swap_ptr(&sim->pot, &sim->pot_next);
    sim->pot_ok = pot, sim->plan_here = 1;
    return FMK_OK;
}

/* Yoshida's (1990) fourth-order step: three leapfrog steps of w1 dt, w0 dt, w1 dt (the last
 * one's evaluation alone asks for the potential, when pot). The state before it is saved so
 * that a sub-step that fails (an interrupt, a force evaluation that fails) leaves the state as
 * it was before the whole step. */
static fmk_status host_step_yoshida(fmk_sim *sim, double dt, int pot)
{
    const int64_t n = sim->n;
    const double w1 = 1 / (2 - cbrt(2.0)), w[3] = {w1, 1 - 2 * w1, w1};
    if (!sim->saved && !(sim->saved = fmk_sim_doubles(10 * n)))
        return fmk_sim_fail(sim, FMK_ERR_NOMEM,
                            "the fourth-order step: out of host memory for a copy of the "
                            "state (%lld doubles)",
                            (long long)(10 * n));
    double *save[4] = {sim->saved, sim->saved + 3 * n, sim->saved + 6 * n, sim->saved + 9 * n};
    double **state[4] = {&sim->pos, &sim->vel, &sim->acc, &sim->pot};
    const int64_t len[4] = {3 * n, 3 * n, 3 * n, n};
    for (int k = 0; k < 4; k++)
        memcpy(save[k], *state[k], sizeof(double) * (size_t)len[k]);
    const int pot_ok = sim->pot_ok;
    for (int s = 0; s < 3; s++) {
        const step_factors f = {0.5 * w[s] * dt, w[s] * dt, 0.5 * w[s] * dt};
        const fmk_status st = host_step(sim, f, pot && s == 2);
        if (st != FMK_OK) {
            for (int k = 0; k < 4; k++)
                memcpy(*state[k], save[k], sizeof(double) * (size_t)len[k]);
            sim->pot_ok = pot_ok, sim->plan_here = 0;
            return st;
        }
    }
    return FMK_OK;
}

static fmk_status device_step(fmk_sim *sim, step_factors f, int pot)
{
    fmk_status st = fmk_sim_dev_drift(sim, f.k1, f.d);
    if (st == FMK_OK)
        st = fmk_sim_forces(sim, pot);
    if (st == FMK_OK)
        st = fmk_sim_dev_kick_swap(sim, f.k1, f.k2);
    if (st == FMK_OK)
        sim->pot_ok = pot, sim->plan_here = 1;
    return st;
}

/* A comoving step of dt in u (or to a = land when land > 0): its factors, the new u and a. */
static fmk_status comoving_factors(fmk_sim *sim, double dt, double land, step_factors *f,
                                   double *u1, double *a1)
{
    const fmk_sim_cosmology *c = &sim->opts.cosmology;
    const double a0 = sim->time, u0 = sim->u;
    *u1 = land > 0 ? fmk_sim_u_of_a(sim, land) : u0 + dt;
    *a1 = land > 0 ? land : fmk_sim_a_of_u(sim, *u1);
    const double am = fmk_sim_a_of_u(sim, u0 + 0.5 * (*u1 - u0));
    if (!(*a1 > a0 && am > a0 && am < *a1 && isfinite(*a1)))
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "the comoving step from a = %.17g (dt %g in the stepping variable) "
                            "ends at a = %.17g: the step is too small or too large",
                            a0, dt, *a1);
    f->k1 = fmk_cosmo_kick(c, a0, am);
    f->d = fmk_cosmo_drift(c, a0, *a1);
    f->k2 = fmk_cosmo_kick(c, am, *a1);
    return FMK_OK;
}

fmk_status fmk_sim_step_once(fmk_sim *sim, double dt, double land, int pot)
{
    pot = pot || sim->opts.comoving; /* comoving_after_step reads W after every step */
    const double t0 = fmk_sim_now();
    step_factors f = {0.5 * dt, dt, 0.5 * dt};
    double u1 = 0, a1 = 0;
    fmk_status st = FMK_OK;
    if (sim->opts.comoving) {
        if ((st = comoving_factors(sim, dt, land, &f, &u1, &a1)) == FMK_OK)
            st = fmk_sim_comoving_soft(sim, a1);
        if (st != FMK_OK)
            return st;
    }
    if (sim->dev)
        st = device_step(sim, f, pot);
    else if (sim->opts.integrator == FMK_SIM_YOSHIDA4)
        st = host_step_yoshida(sim, dt, pot);
    else
        st = host_step(sim, f, pot);
    if (st != FMK_OK)
        return st;
    sim->step++;
    sim->dt_last = dt;
    if (sim->opts.comoving) {
        const double a0 = sim->time;
        if (land > 0)
            sim->dt_last = u1 - sim->u; /* the landing's shortened step */
        sim->u = u1;
        sim->time = a1;
        if ((st = fmk_sim_comoving_after_step(sim, a0)) != FMK_OK)
            return st;
    } else {
        sim->time += dt;
    }
    fmk_sim_dist_migrate(sim); /* distributed: the particles to where their forces were */
    sim->seconds_step = fmk_sim_now() - t0;
    return FMK_OK;
}

fmk_status fmk_sim_step(fmk_sim *sim)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_step: sim is NULL");
    atomic_store(&sim->stop, 0);
    double dt = 0;
    fmk_status st = fmk_sim_next_dt(sim, &dt);
    /* no potential: a query after the step computes it (fmk_sim_potential) */
    return st == FMK_OK ? fmk_sim_step_once(sim, dt, 0, 0) : st;
}

/* The progress bar: on stderr when opts.verbose and stderr is a terminal, at most 5 times a
 * second, erased by the final line. */
typedef struct progress {
    int on;
    double t0, shown;
    int64_t step0;
    double time0;
} progress;

static void progress_show(progress *p, const fmk_sim *sim, double fraction, int last)
{
    const double now = fmk_sim_now();
    if (!p->on || (!last && now - p->shown < 0.2))
        return;
    p->shown = now;
    const double elapsed = now - p->t0;
    const double rate = elapsed > 0 ? (double)(sim->step - p->step0) / elapsed : 0;
    const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
    char bar[31];
    const int filled = (int)(30 * (fraction < 0 ? 0 : fraction > 1 ? 1 : fraction));
    for (int k = 0; k < 30; k++)
        bar[k] = k < filled ? '#' : '-';
    bar[30] = '\0';
    fprintf(stderr, "\r[%s] %3.0f%%  step %lld  t = %-10.4g %8.1f steps/s  ETA %lld:%02lld  ", bar,
            100 * fraction, (long long)sim->step, sim->time, rate, (long long)(eta / 60),
            (long long)eta % 60);
    if (last)
        fputc('\n', stderr);
    fflush(stderr);
}

/* Ends the bar's line when a run stops early. */
static void progress_end(progress *p)
{
    if (p->on && p->shown > 0) {
        fputc('\n', stderr);
        fflush(stderr);
    }
}

/* The next listed output time after the current time (fmk_sim_set_output_times), or +inf. */
static double next_out_time(const fmk_sim *sim)
{
    for (int64_t k = 0; k < sim->n_out_times; k++)
        if (sim->out_times[k] > sim->time)
            return sim->out_times[k];
    return INFINITY;
}

/* The step towards target (> time): dt, or a landing on target when the remainder is within
 * 1e-9 dt of dt (rounding in the sums of the steps never leaves a sliver of a step). Newtonian:
 * dt becomes the remainder; comoving: *land = target (the remainder is in u). */
static int landing(const fmk_sim *sim, double target, double *dt, double *land)
{
    if (!isfinite(target))
        return 0;
    const double rest =
        sim->opts.comoving ? fmk_sim_u_of_a(sim, target) - sim->u : target - sim->time;
    if (!(rest <= *dt * (1 + 1e-9)))
        return 0;
    if (sim->opts.comoving)
        *land = target;
    else
        *dt = rest;
    return 1;
}

fmk_status fmk_sim_run(fmk_sim *sim, double t_end, int64_t n_steps)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_run: sim is NULL");
    if (isnan(t_end) || t_end == INFINITY)
        return fmk_sim_fail(sim, FMK_ERR_ARG, "fmk_sim_run: t_end = %g; it must be finite", t_end);
    const int by_time = t_end > sim->time;
    if (!by_time && n_steps < 0)
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "fmk_sim_run: n_steps = %lld; it must be >= 0 (t_end %g is not after "
                            "the current time %g)",
                            (long long)n_steps, t_end, sim->time);
    if (sim->n_out_times > 0 && !sim->out_dir)
        return fmk_sim_fail(sim, FMK_ERR_STATE,
                            "fmk_sim_run: snapshots are listed at %lld times but there is no "
                            "output directory: call fmk_sim_set_output after "
                            "fmk_sim_set_output_times (it keeps the directory then)",
                            (long long)sim->n_out_times);
    atomic_store(&sim->stop, 0);
    fmk_status st = fmk_sim_output_due(sim);
    if (st != FMK_OK)
        return st;
    progress bar = {sim->opts.verbose && fmk_sim_is_root(sim) && isatty(fileno(stderr)),
                    fmk_sim_now(), 0, sim->step, sim->time};
    for (int64_t k = 0;; k++) {
        if (by_time ? sim->time >= t_end : k >= n_steps)
            break;
        if (fmk_sim_dist_stopped(sim)) {
            progress_end(&bar);
            return fmk_sim_fail(sim, FMK_ERR_INTERRUPTED,
                                "interrupted: stopped after step %lld (time %.17g), a whole step",
                                (long long)sim->step, sim->time);
        }
        double dt;
        if ((st = fmk_sim_next_dt(sim, &dt)) != FMK_OK) {
            progress_end(&bar);
            return st;
        }
        /* the step lands on the next listed output time or on t_end, whichever comes first */
        const double out = next_out_time(sim);
        const double target = by_time && t_end < out ? t_end : out;
        double land = 0;
        const int lands = landing(sim, target, &dt, &land);
        if ((st = fmk_sim_step_once(sim, dt, land, fmk_sim_output_reads_pot(sim))) != FMK_OK) {
            progress_end(&bar);
            return st;
        }
        if (lands)
            sim->time = target;
        sim->diag_wall += sim->seconds_step;
        sim->diag_steps++;
        if ((st = fmk_sim_output_due(sim)) != FMK_OK) {
            progress_end(&bar);
            return st;
        }
        const double fraction = by_time ? (sim->time - bar.time0) / (t_end - bar.time0)
                                        : (double)(k + 1) / (double)n_steps;
        progress_show(&bar, sim, fraction, 0);
    }
    if (bar.on && sim->step > bar.step0)
        progress_show(&bar, sim, 1, 1);
    return FMK_OK;
}
