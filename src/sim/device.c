/* device.c -- the bridge between the driver and its device-resident state (cuda/sim_cuda.h).
 *
 * On the CUDA backend a step never copies the state through the host: a kernel drifts the
 * positions into the next buffer, the plan takes them with fmk_plan_set_points_device and
 * writes the accelerations (and the potentials, on the steps that ask for them) with
 * fmk_plan_eval_device, the spline correction and the finite check run on the device, and a
 * kernel kicks. A query of the potential after steps without it evaluates it at the current
 * positions (fmk_sim_dev_potential), its accelerations into the next buffer. Only a 4-byte flag (the check) and,
 * with the adaptive step, one double come back each step. A build without CUDA has no such
 * state: every function here then says FMK_ERR_UNAVAILABLE (the plan would have refused the
 * backend first). */
#include <string.h>

#include "sim/sim_internal.h"

#ifdef FMK_HAVE_CUDA
#include "sim/cuda/sim_cuda.h"

#define MSG sim->error, sizeof sim->error
/* Const functions keep their message in the simulation as the others do. */
#define CMSG ((fmk_sim *)sim)->error, sizeof sim->error

fmk_status fmk_sim_dev_make(fmk_sim *sim)
{
    return fmk_sim_cuda_create(&sim->dev, sim->opts.plan.device, sim->n, sim->soft != NULL,
                               sim->spline, MSG);
}

void fmk_sim_dev_free(fmk_sim *sim)
{
    fmk_sim_cuda_free(sim->dev);
    sim->dev = NULL;
}

fmk_status fmk_sim_dev_upload(fmk_sim *sim, const double *pos, const double *vel, const double *acc,
                              const double *pot)
{
    return fmk_sim_cuda_upload(sim->dev, sim->mass, sim->charge, sim->soft, pos, vel, acc, pot,
                               MSG);
}

fmk_status fmk_sim_dev_copy_in(fmk_sim *sim, const double *d_mass, const double *d_pos,
                               const double *d_vel)
{
    int64_t bad[3];
    fmk_status st = fmk_sim_cuda_copy_in(sim->dev, d_mass, d_pos, d_vel, sim->opts.G, bad, MSG);
    if (st != FMK_OK)
        return st;
    if (bad[0] >= 0) /* the device's check does not say which of the two */
        return fmk_sim_fail(sim, FMK_ERR_NONFINITE,
                            "fmk_sim_create_device: mass[%lld] is not finite and > 0; masses "
                            "must be finite and > 0",
                            (long long)bad[0]);
    if (bad[1] >= 0 || bad[2] >= 0)
        return fmk_sim_fail(sim, FMK_ERR_NONFINITE, "fmk_sim_create_device: %s %lld is not finite",
                            bad[1] >= 0 ? "position" : "velocity",
                            (long long)((bad[1] >= 0 ? bad[1] : bad[2]) / 3));
    /* the host mirror of what never changes: masses and charges (for files and checkpoints) */
    if ((st = fmk_sim_cuda_copy_out(sim->dev, 0, sim->mass, NULL, NULL, NULL, NULL, MSG)) != FMK_OK)
        return st;
    for (int64_t i = 0; i < sim->n; i++)
        sim->charge[i] = sim->opts.G * sim->mass[i];
    return FMK_OK;
}

fmk_status fmk_sim_dev_download(const fmk_sim *sim, double *pos, double *vel, double *acc,
                                double *pot)
{
    return fmk_sim_cuda_copy_out(sim->dev, 0, NULL, pos, vel, acc, pot, CMSG);
}

fmk_status fmk_sim_dev_copy_out(const fmk_sim *sim, double *d_mass, double *d_pos, double *d_vel,
                                double *d_acc, double *d_pot)
{
    return fmk_sim_cuda_copy_out(sim->dev, 1, d_mass, d_pos, d_vel, d_acc, d_pot, CMSG);
}

fmk_status fmk_sim_dev_drift(fmk_sim *sim, double k1, double d)
{
    return fmk_sim_cuda_drift(sim->dev, k1, d, MSG);
}

fmk_status fmk_sim_dev_forces(fmk_sim *sim, int want_pot)
{
    double *d_pos, *d_acc, *d_pot;
    fmk_sim_cuda_next(sim->dev, &d_pos, &d_acc, &d_pot);
    if (!want_pot) /* the plan's evaluation without the potential is cheaper */
        d_pot = NULL;
    /* the drift (and the last kick) finish first, so that seconds_force holds the plan's two
     * calls alone; eval_device returns when its results are written */
    fmk_status st = fmk_sim_cuda_sync(sim->dev, MSG);
    if (st != FMK_OK)
        return st;
    const double t0 = fmk_sim_now();
    st = fmk_plan_set_points_device(sim->plan, sim->n, d_pos, 0, NULL);
    if (st == FMK_OK)
        st = fmk_plan_eval_device(sim->plan, fmk_sim_cuda_charge(sim->dev), d_pot, d_acc);
    sim->seconds_force = fmk_sim_now() - t0;
    if (st != FMK_OK)
        return fmk_sim_fail_plan(sim, st, "the forces on the GPU");
    if (sim->spline && (st = fmk_sim_cuda_spline(sim->dev, d_pos, d_acc, d_pot, sim->opts.soft,
                                                 sim->h_max, MSG)) != FMK_OK)
        return st;
    if (sim->opts.comoving && (st = fmk_sim_cuda_background(sim->dev, sim->cosmo_c, MSG)) != FMK_OK)
        return st;
    int64_t bad;
    if ((st = fmk_sim_cuda_check(sim->dev, d_acc, d_pot, &bad, MSG)) != FMK_OK)
        return st;
    if (bad >= 0)
        return fmk_sim_fail(sim, FMK_ERR_NONFINITE,
                            "the forces: particle %lld's acceleration or potential is not finite "
                            "(the sum overflows the range of doubles: particles too close for "
                            "their softening?)",
                            (long long)bad);
    return FMK_OK;
}

fmk_status fmk_sim_dev_potential(fmk_sim *sim, int points)
{
    double *d_pos, *d_acc, *d_pot, *scratch, *unused;
    fmk_sim_cuda_current(sim->dev, &d_pos, &d_acc, &d_pot);
    /* the next buffers are free between steps: the accelerations go there, thrown away, so
     * that the state's are never overwritten (two evaluations may differ in the last bits) */
    fmk_sim_cuda_next(sim->dev, &unused, &scratch, &unused);
    fmk_status st = fmk_sim_cuda_sync(sim->dev, MSG);
    if (st != FMK_OK)
        return st;
    if (points)
        st = fmk_plan_set_points_device(sim->plan, sim->n, d_pos, 0, NULL);
    if (st == FMK_OK)
        st = fmk_plan_eval_device(sim->plan, fmk_sim_cuda_charge(sim->dev), d_pot, scratch);
    if (st != FMK_OK)
        return fmk_sim_fail_plan(sim, st, "the potential on the GPU");
    if (sim->spline && (st = fmk_sim_cuda_spline(sim->dev, d_pos, scratch, d_pot, sim->opts.soft,
                                                 sim->h_max, MSG)) != FMK_OK)
        return st;
    int64_t bad;
    if ((st = fmk_sim_cuda_check(sim->dev, NULL, d_pot, &bad, MSG)) != FMK_OK)
        return st;
    if (bad >= 0)
        return fmk_sim_fail(sim, FMK_ERR_NONFINITE,
                            "the potential: particle %lld's potential is not finite",
                            (long long)bad);
    return FMK_OK;
}

fmk_status fmk_sim_dev_kick_swap(fmk_sim *sim, double k1, double k2)
{
    return fmk_sim_cuda_kick_swap(sim->dev, k1, k2, MSG);
}

void fmk_sim_dev_swap(fmk_sim *sim)
{
    fmk_sim_cuda_swap(sim->dev);
}

fmk_status fmk_sim_dev_max_acc(fmk_sim *sim, double *value)
{
    return fmk_sim_cuda_max_acc(sim->dev, sim->spline ? FMK_SIM_SPLINE_H : 1, sim->opts.soft, value,
                                MSG);
}

fmk_status fmk_sim_dev_comoving_sums(const fmk_sim *sim, double sums[3])
{
    return fmk_sim_cuda_comoving_sums(sim->dev, sums, CMSG);
}

fmk_status fmk_sim_dev_diagnostics(const fmk_sim *sim, fmk_sim_diag *d)
{
    double v[8];
    fmk_status st = fmk_sim_cuda_diagnostics(sim->dev, v, CMSG);
    if (st != FMK_OK)
        return st;
    d->kinetic = v[0], d->potential = v[1];
    for (int k = 0; k < 3; k++)
        d->momentum[k] = v[2 + k], d->angular_momentum[k] = v[5 + k];
    return FMK_OK;
}

#else /* no CUDA in this build */

static fmk_status no_cuda(const fmk_sim *sim)
{
    return fmk_sim_fail((fmk_sim *)sim, FMK_ERR_UNAVAILABLE,
                        "this fmmkit was built without CUDA: the simulation's state cannot live "
                        "on a GPU");
}

fmk_status fmk_sim_dev_make(fmk_sim *sim)
{
    return no_cuda(sim);
}
void fmk_sim_dev_free(fmk_sim *sim)
{
    sim->dev = NULL;
}
fmk_status fmk_sim_dev_upload(fmk_sim *sim, const double *pos, const double *vel, const double *acc,
                              const double *pot)
{
    (void)pos, (void)vel, (void)acc, (void)pot;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_copy_in(fmk_sim *sim, const double *d_mass, const double *d_pos,
                               const double *d_vel)
{
    (void)d_mass, (void)d_pos, (void)d_vel;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_download(const fmk_sim *sim, double *pos, double *vel, double *acc,
                                double *pot)
{
    (void)pos, (void)vel, (void)acc, (void)pot;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_copy_out(const fmk_sim *sim, double *d_mass, double *d_pos, double *d_vel,
                                double *d_acc, double *d_pot)
{
    (void)d_mass, (void)d_pos, (void)d_vel, (void)d_acc, (void)d_pot;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_drift(fmk_sim *sim, double k1, double d)
{
    (void)k1, (void)d;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_forces(fmk_sim *sim, int pot)
{
    (void)pot;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_potential(fmk_sim *sim, int points)
{
    (void)points;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_kick_swap(fmk_sim *sim, double k1, double k2)
{
    (void)k1, (void)k2;
    return no_cuda(sim);
}
void fmk_sim_dev_swap(fmk_sim *sim)
{
    (void)sim;
}
fmk_status fmk_sim_dev_max_acc(fmk_sim *sim, double *value)
{
    (void)value;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_comoving_sums(const fmk_sim *sim, double sums[3])
{
    (void)sums;
    return no_cuda(sim);
}
fmk_status fmk_sim_dev_diagnostics(const fmk_sim *sim, fmk_sim_diag *d)
{
    (void)d;
    return no_cuda(sim);
}

#endif
