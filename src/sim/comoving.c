/* comoving.c -- the comoving integration's bookkeeping (docs/cosmology.md, "Comoving
 * integration"): the stepping variable, the checks of the options, the background term c,
 * the reference energy U_ref, the Layzer-Irvine integral and the physical softening.
 *
 * The equations (fmmkit_sim.h): dx/dt = p / a^2, dp/dt = g / a, g = -G sum m grad phi_s + c x,
 * c = H0^2 omega_m / 2. With K = sum m |p|^2 / (2 a^2) and U = -1/2 sum m pot - (c/2) sum m |x|^2
 * (so that g_i = -grad_i U / m_i), dK/dt = sum m p.g / a^3 - 2 H K and
 * d(U/a)/dt = -sum m p.g / a^3 - H U / a: the Layzer-Irvine equation
 * d(K + W)/dt + H (2K + W) = 0 holds exactly for W = (U - U_ref) / a (U_ref a constant), and
 * in a: d[a (K + W)]/da = -K, so C(a) = a (K + W) + int_{a_start}^{a} K da is constant. The
 * integral is a trapezoid over the steps (K after every step: one reduction), so C's drift
 * measures the integration's error plus the trapezoid's (second order in the step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cosmo/cosmo.h"
#include "sim/sim_internal.h"

double fmk_sim_u_of_a(const fmk_sim *sim, double a)
{
    switch (sim->opts.spacing) {
    case FMK_SIM_SPACING_A: return a;
    case FMK_SIM_SPACING_LOGA: return log(a);
    default: return fmk_cosmo_time(&sim->opts.cosmology, a);
    }
}

double fmk_sim_a_of_u(const fmk_sim *sim, double u)
{
    switch (sim->opts.spacing) {
    case FMK_SIM_SPACING_A: return u;
    case FMK_SIM_SPACING_LOGA: return exp(u);
    default: return fmk_cosmo_a_of_time(&sim->opts.cosmology, u);
    }
}

fmk_status fmk_sim_check_comoving(const fmk_sim_opts *o)
{
    const char *w = "fmk_sim options";
    if (o->comoving != 0 && o->comoving != 1)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: comoving = %d; it must be 0 or 1", w,
                            (int)o->comoving);
    if (!o->comoving)
        return FMK_OK;
    char msg[256] = "";
    if (fmk_cosmo_check(&o->cosmology, msg, sizeof msg) != FMK_OK)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: the cosmology: %s", w, msg);
    if (o->spacing != FMK_SIM_SPACING_TIME && o->spacing != FMK_SIM_SPACING_A &&
        o->spacing != FMK_SIM_SPACING_LOGA)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: spacing = %d; it must be FMK_SIM_SPACING_TIME (0), _A (1) or "
                            "_LOGA (2)",
                            w, (int)o->spacing);
    if (o->stepping != FMK_SIM_STEP_FIXED)
        return fmk_sim_fail(
            NULL, FMK_ERR_ARG,
            "%s: comoving integration takes fixed steps (opts.dt in the stepping "
            "variable); the adaptive step (FMK_SIM_STEP_ADAPTIVE) is not implemented for it",
            w);
    if (o->G != 1 && o->G != FMK_SIM_COSMO_G)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: G = %g; comoving integration uses G = FMK_SIM_COSMO_G (%.7g) in "
                            "its units: leave opts.G at 1",
                            w, o->G, FMK_SIM_COSMO_G);
    if (!(isfinite(o->radius) && o->radius >= 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: radius = %g; it must be finite and >= 0 (0: from the mass)", w,
                            o->radius);
    if (o->soft_mode != FMK_SIM_SOFT_COMOVING && o->soft_mode != FMK_SIM_SOFT_PHYSICAL)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: soft_mode = %d; it must be FMK_SIM_SOFT_COMOVING (0) or "
                            "FMK_SIM_SOFT_PHYSICAL (1)",
                            w, (int)o->soft_mode);
    if (o->soft_mode == FMK_SIM_SOFT_PHYSICAL &&
        (o->softening != FMK_SIM_SOFT_PLUMMER || !(o->soft > 0) ||
         !(isfinite(o->soft_max_comoving) && o->soft_max_comoving > 0)))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: physical softening needs Plummer softening (the spline is not "
                            "implemented for it), soft > 0 and soft_max_comoving > 0 (soft %g, "
                            "soft_max_comoving %g)",
                            w, o->soft, o->soft_max_comoving);
    if (!(isfinite(o->a_start) && o->a_start >= 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: a_start = %g; it must be finite and > 0", w,
                            o->a_start);
    return FMK_OK;
}

double fmk_sim_comoving_soft_at(const fmk_sim_opts *o, double a)
{
    if (!o->comoving || o->soft_mode != FMK_SIM_SOFT_PHYSICAL)
        return o->soft;
    const double s = o->soft / a;
    return s < o->soft_max_comoving ? s : o->soft_max_comoving;
}

fmk_status fmk_sim_comoving_soft(fmk_sim *sim, double a)
{
    const double s = fmk_sim_comoving_soft_at(&sim->opts, a);
    if (s == sim->soft_now)
        return FMK_OK;
    /* a new plan with the new softening; the old one stays when that fails */
    fmk_plan *old = sim->plan;
    const double old_s = sim->soft_now;
    sim->plan = NULL;
    sim->soft_now = s;
    fmk_status st = fmk_sim_plan_make(sim);
    if (st != FMK_OK) {
        sim->plan = old;
        sim->soft_now = old_s;
        return st;
    }
    fmk_plan_destroy(old);
    sim->plan_here = 0; /* the new plan has no points */
    return FMK_OK;
}

/* K, U and a W at the current state. */
static fmk_status energies(const fmk_sim *sim, double *k, double *u, double *aw)
{
    double s[3];
    fmk_status st = fmk_sim_comoving_sums(sim, s);
    if (st != FMK_OK)
        return st;
    const double a = sim->time;
    *k = s[0] / (a * a);
    *u = s[1] - 0.5 * sim->cosmo_c * s[2];
    *aw = *u - sim->u_ref;
    return FMK_OK;
}

double fmk_sim_comoving_c(const fmk_sim_opts *o)
{
    if (!o->comoving)
        return 0;
    const double h0 = fmk_cosmo_h0(&o->cosmology);
    return 0.5 * h0 * h0 * o->cosmology.omega_m;
}

fmk_status fmk_sim_comoving_init(fmk_sim *sim, int start)
{
    if (!sim->opts.comoving)
        return FMK_OK;
    const fmk_sim_cosmology *c = &sim->opts.cosmology;
    double m = 0;
    for (int64_t i = 0; i < sim->n; i++)
        m += sim->mass[i];
    fmk_sim_dist_reduce(sim, &m, 1, FMK_SIM_REDUCE_SUM);
    const double pi = 3.14159265358979323846;
    const double r =
        sim->opts.radius > 0 ? sim->opts.radius : cbrt(3 * m / (4 * pi * fmk_cosmo_rho_m(c)));
    if (!sim->u_ref_set)
        sim->u_ref = -0.6 * sim->opts.G * m * m / r - 0.5 * sim->cosmo_c * 0.6 * m * r * r;
    if (!start)
        return FMK_OK;
    sim->u = fmk_sim_u_of_a(sim, sim->time);
    double k, u, aw;
    fmk_status st = energies(sim, &k, &u, &aw);
    if (st != FMK_OK)
        return st;
    sim->li_kinetic = k;
    sim->li_integral = 0;
    sim->li_start = sim->time * k + aw;
    sim->li_max_aw = fabs(aw);
    sim->li_started = 1;
    return FMK_OK;
}

fmk_status fmk_sim_comoving_after_step(fmk_sim *sim, double a0)
{
    double k, u, aw;
    fmk_status st = energies(sim, &k, &u, &aw);
    if (st != FMK_OK)
        return st;
    sim->li_integral += 0.5 * (sim->li_kinetic + k) * (sim->time - a0);
    sim->li_kinetic = k;
    sim->li_max_aw = fabs(aw) > sim->li_max_aw ? fabs(aw) : sim->li_max_aw;
    return FMK_OK;
}

fmk_status fmk_sim_comoving_diag(const fmk_sim *sim, fmk_sim_cdiag *d)
{
    double k, u, aw;
    fmk_status st = energies(sim, &k, &u, &aw);
    if (st != FMK_OK)
        return st;
    const double a = sim->time;
    d->kinetic = k;
    d->potential = aw / a;
    d->u = u;
    d->c_li = a * k + aw + sim->li_integral;
    d->li_error = sim->li_max_aw > 0 ? (d->c_li - sim->li_start) / sim->li_max_aw : 0;
    return FMK_OK;
}

fmk_status fmk_sim_comoving_dt(const fmk_sim_cosmology *c, fmk_sim_spacing spacing, double a0,
                               double a1, int64_t steps, double *dt)
{
    if (!c || !dt)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_comoving_dt: %s is NULL",
                            c ? "dt" : "the cosmology");
    char msg[256] = "";
    if (fmk_cosmo_check(c, msg, sizeof msg) != FMK_OK)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "fmk_sim_comoving_dt: the cosmology: %s", msg);
    if (!(a0 > 0 && a1 > a0 && isfinite(a1)) || steps < 1)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "fmk_sim_comoving_dt: a0 = %g, a1 = %g, steps = %lld; it needs "
                            "0 < a0 < a1 and steps >= 1",
                            a0, a1, (long long)steps);
    double u0, u1;
    switch (spacing) {
    case FMK_SIM_SPACING_A: u0 = a0, u1 = a1; break;
    case FMK_SIM_SPACING_LOGA: u0 = log(a0), u1 = log(a1); break;
    case FMK_SIM_SPACING_TIME: u0 = fmk_cosmo_time(c, a0), u1 = fmk_cosmo_time(c, a1); break;
    default:
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "fmk_sim_comoving_dt: spacing = %d is unknown",
                            (int)spacing);
    }
    *dt = (u1 - u0) / (double)steps;
    return FMK_OK;
}

/* U at host positions pos (n = sim->n) with the simulation's plan, masses and softening. */
static fmk_status energy_at(fmk_sim *sim, const double *pos, double *u)
{
    const int64_t n = sim->n;
    double *pot = fmk_sim_doubles(n), *acc = sim->spline ? fmk_sim_doubles(3 * n) : NULL;
    fmk_status st = FMK_OK;
    if (!pot || (sim->spline && !acc))
        st = fmk_sim_fail(sim, FMK_ERR_NOMEM,
                          "fmk_sim_set_energy_reference: out of host memory for %lld "
                          "potentials",
                          (long long)n);
    sim->plan_here = 0; /* the plan takes the given positions */
    if (st == FMK_OK && (st = fmk_plan_set_points(sim->plan, n, pos, 0, NULL)) == FMK_OK)
        st = fmk_plan_eval(sim->plan, sim->charge, pot, acc);
    if (st != FMK_OK && st != FMK_ERR_NOMEM)
        st = fmk_sim_fail_plan(sim, st, "fmk_sim_set_energy_reference: the potential");
    if (st == FMK_OK && sim->spline)
        st = fmk_sim_spline_cpu(sim, pos, acc, pot);
    double pair = 0, r2 = 0;
    for (int64_t i = 0; st == FMK_OK && i < n; i++) {
        const double *x = pos + 3 * i;
        pair += sim->mass[i] * pot[i];
        r2 += sim->mass[i] * (x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    }
    double sums[2] = {pair, r2};
    fmk_sim_dist_reduce(sim, sums, 2, FMK_SIM_REDUCE_SUM);
    pair = sums[0], r2 = sums[1];
    st = fmk_sim_dist_agree(sim, st);
    if (st == FMK_OK && !isfinite(pair))
        st = fmk_sim_fail(sim, FMK_ERR_NONFINITE,
                          "fmk_sim_set_energy_reference: the potential energy at the given "
                          "positions is not finite (coincident points without softening?)");
    *u = -0.5 * pair - 0.5 * sim->cosmo_c * r2;
    free(pot), free(acc);
    return st;
}

fmk_status fmk_sim_set_energy_reference(fmk_sim *sim, int64_t n, const double *pos)
{
    const char *w = "fmk_sim_set_energy_reference";
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "%s: sim is NULL", w);
    if (!pos && !sim->comm.hooks)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "%s: pos is NULL", w);
    if (!sim->opts.comoving)
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "%s: only a comoving run (opts.comoving = 1) has a reference energy",
                            w);
    if (sim->step != 0)
        return fmk_sim_fail(sim, FMK_ERR_STATE,
                            "%s: the simulation has taken %lld steps; the reference is set "
                            "before the first, where the Layzer-Irvine integral starts",
                            w, (long long)sim->step);
    /* (a distributed simulation: this rank's n positions, checked on every rank) */
    fmk_status st = !pos && n > 0 ? fmk_sim_fail(sim, FMK_ERR_NULL, "%s: pos is NULL", w) : FMK_OK;
    if (st == FMK_OK && n != sim->n)
        st = fmk_sim_fail(sim, FMK_ERR_ARG, "%s: n = %lld; the simulation has %lld particles%s", w,
                          (long long)n, (long long)sim->n, sim->comm.hooks ? " on this rank" : "");
    for (int64_t i = 0; st == FMK_OK && i < 3 * n; i++)
        if (!isfinite(pos[i]))
            st = fmk_sim_fail(sim, FMK_ERR_NONFINITE, "%s: pos[%lld] = %g is not finite", w,
                              (long long)i, pos[i]);
    if ((st = fmk_sim_dist_agree(sim, st)) != FMK_OK)
        return st;
    double u;
    st = energy_at(sim, pos, &u);
    if (st != FMK_OK)
        return st;
    const double old = sim->u_ref;
    const int old_set = sim->u_ref_set;
    sim->u_ref = u, sim->u_ref_set = 1;
    if ((st = fmk_sim_comoving_init(sim, 1)) != FMK_OK) /* C and max |a W| anew */
        sim->u_ref = old, sim->u_ref_set = old_set;
    return st;
}
