/* forces.c -- one force evaluation: the plan's set_points + eval on the state's next buffers
 * (timed: fmk_sim_info.seconds_force), then the spline correction and the checks.
 *
 * The plan sums phi_i = sum_{j != i} q_j G(x_i, x_j) and its gradient with charges q_j = G m_j,
 * so that its gradient is the acceleration itself (grad_y 1/|y - x| = (x - y)/|y - x|^3) and
 * its potential psi_i = G sum_j m_j phi_s(|x_i - x_j|) is what the driver keeps as pot (the
 * gravitational potential is -psi_i; the potential energy -1/2 sum_i m_i psi_i).
 *
 * Comoving runs add the background's c x to the acceleration (acc holds the peculiar
 * g = -G sum_j m_j grad phi_s + c x, fmmkit_sim.h), on the host and on the device alike;
 * the potential stays the plan's. */
#include <math.h>

#include "sim/sim_internal.h"

fmk_status fmk_sim_plan_make(fmk_sim *sim)
{
    fmk_opts po = sim->opts.plan;
    po.softening = sim->kernel == FMK_KERNEL_PLUMMER ? sim->soft_now : 0;
    /* a distributed simulation's plan is distributed over its communicator */
    const fmk_sim_hooks *h = sim->comm.hooks;
    fmk_status st =
        h ? h->plan_create(sim->comm.state, &sim->plan, 3, sim->kernel, sim->opts.eps, &po)
          : fmk_plan_create(&sim->plan, 3, sim->kernel, sim->opts.eps, &po);
    if (st != FMK_OK) {
        sim->plan = NULL;
        return fmk_sim_fail(sim, st, "fmk_sim_create: the force plan (%s kernel): %s",
                            fmk_kernel_name(sim->kernel), fmk_plan_last_error(NULL));
    }
    fmk_info info;
    if ((st = fmk_plan_info(sim->plan, &info)) != FMK_OK)
        return fmk_sim_fail_plan(sim, st, "fmk_sim_create: the force plan's info");
    sim->backend = info.backend;
    return FMK_OK;
}

/* The first particle whose acceleration or potential (either may be NULL) is not finite, or
 * -1. */
static int64_t first_nonfinite(const fmk_sim *sim, const double *acc, const double *pot)
{
    for (int64_t i = 0; i < sim->n; i++)
        if ((pot && !isfinite(pot[i])) ||
            (acc &&
             (!isfinite(acc[3 * i]) || !isfinite(acc[3 * i + 1]) || !isfinite(acc[3 * i + 2]))))
            return i;
    return -1;
}

static fmk_status host_forces(fmk_sim *sim, int want_pot)
{
    double *pot = want_pot ? sim->pot_next : NULL;
    const double t0 = fmk_sim_now();
    fmk_status st = fmk_plan_set_points(sim->plan, sim->n, sim->pos_next, 0, NULL);
    if (st == FMK_OK)
        st = fmk_plan_eval(sim->plan, sim->charge, pot, sim->acc_next);
    sim->seconds_force = fmk_sim_now() - t0;
    if (st != FMK_OK)
        return fmk_sim_fail_plan(sim, st, "the forces");
    if (sim->spline && (st = fmk_sim_spline_cpu(sim, sim->pos_next, sim->acc_next, pot)) != FMK_OK)
        return st;
    if (sim->opts.comoving) {
        const int64_t m = 3 * sim->n;
        const double c = sim->cosmo_c, *x = sim->pos_next;
        double *a = sim->acc_next;
        const int threads = fmk_sim_threads(sim);
#pragma omp parallel for schedule(static) num_threads(threads) if (m > 98304)
        for (int64_t k = 0; k < m; k++)
            a[k] = a[k] + c * x[k];
    }
    const int64_t bad =
        sim->spline || sim->opts.comoving ? first_nonfinite(sim, sim->acc_next, pot) : -1;
    if (bad >= 0)
        return fmk_sim_fail(sim, FMK_ERR_NONFINITE,
                            "the forces: particle %lld's acceleration or potential is not finite "
                            "after the spline correction (softening lengths too small for the "
                            "range of doubles?)",
                            (long long)bad);
    return FMK_OK;
}

/* The potential at the current positions on the host: the plan's points set again unless they
 * are these, the accelerations into acc_next (scratch), then the spline's correction. */
static fmk_status host_potential(fmk_sim *sim)
{
    fmk_status st = FMK_OK;
    if (!sim->plan_here)
        st = fmk_plan_set_points(sim->plan, sim->n, sim->pos, 0, NULL);
    if (st == FMK_OK)
        sim->plan_here = 1;
    if (st == FMK_OK)
        st = fmk_plan_eval(sim->plan, sim->charge, sim->pot, sim->acc_next);
    if (st != FMK_OK)
        return fmk_sim_fail_plan(sim, st, "the potential");
    if (sim->spline && (st = fmk_sim_spline_cpu(sim, sim->pos, sim->acc_next, sim->pot)) != FMK_OK)
        return st;
    const int64_t bad = sim->spline ? first_nonfinite(sim, NULL, sim->pot) : -1;
    if (bad >= 0)
        return fmk_sim_fail(sim, FMK_ERR_NONFINITE,
                            "the potential: particle %lld's potential is not finite after the "
                            "spline correction",
                            (long long)bad);
    return FMK_OK;
}

fmk_status fmk_sim_potential(const fmk_sim *csim)
{
    /* the potential is a cache of the state: a query (const) may fill it */
    fmk_sim *sim = (fmk_sim *)csim;
    if (sim->pot_ok) /* the same on every rank */
        return FMK_OK;
    fmk_status st;
    if (sim->dev) {
        st = fmk_sim_dev_potential(sim, !sim->plan_here);
        if (st == FMK_OK)
            sim->plan_here = 1;
    } else {
        st = host_potential(sim);
    }
    st = fmk_sim_dist_agree(sim, st);
    if (st == FMK_OK)
        sim->pot_ok = 1;
    else /* (where set_points ran but the evaluation failed: set them again next time) */
        sim->plan_here = 0;
    return st;
}

/* The interactions of the plan's last evaluation (fmk_info: pairs summed directly plus far
 * terms; 0 where a method does not count them, the GPU FMMs); summed over the ranks of a
 * distributed simulation (exact below 2^53). */
int64_t fmk_sim_interactions(const fmk_sim *sim)
{
    fmk_info info;
    int64_t count = 0;
    if (sim->plan && fmk_plan_info(sim->plan, &info) == FMK_OK)
        count = info.interactions_p2p + info.interactions_far;
    if (sim->comm.hooks) {
        double c = (double)count;
        fmk_sim_dist_reduce(sim, &c, 1, FMK_SIM_REDUCE_SUM);
        count = (int64_t)c;
    }
    return count;
}

fmk_status fmk_sim_forces(fmk_sim *sim, int pot)
{
    /* the plan takes pos_next: its points are the state's again once the step succeeds */
    sim->plan_here = 0;
    fmk_status st = sim->dev ? fmk_sim_dev_forces(sim, pot) : host_forces(sim, pot);
    st = fmk_sim_dist_agree(sim, st); /* the checks after the plan's calls are local */
    if (st == FMK_OK)
        sim->interactions_total += fmk_sim_interactions(sim);
    if (st == FMK_ERR_INTERRUPTED)
        return fmk_sim_fail(sim, st,
                            "interrupted during step %lld's forces; the state is the one at "
                            "the end of step %lld (time %.17g)",
                            (long long)(sim->step + 1), (long long)sim->step, sim->time);
    return st;
}
