/* output.c -- what fmk_sim_run writes (fmk_sim_set_output) and the snapshot and PNG calls.
 *
 * After each step (and when a run starts) the outputs whose cadence divides the step are
 * written, in this order: the diagnostics row, the snapshot (and its PNG), the restart file;
 * each at most once per step, remembered by the step it was last written at (counters that
 * travel in restarts, so a continued run neither repeats nor skips a file and numbers its
 * snapshots on). The files go through the file layer (sim_io.h), the CSV through stdio.
 *
 * A distributed simulation gathers its particles on rank 0 (dist.c), which writes every file;
 * the statuses are agreed, so a file that fails on rank 0 fails the call on every rank. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/sim_internal.h"

/* dir/name into a new string (NULL when out of memory). */
static char *join(const char *dir, const char *name)
{
    const size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s", dir, name);
    return p;
}

/* Host views of the particles: the state's own arrays on the CPU, downloaded copies (to free
 * with the returned buffer) on the GPU. */
static fmk_status particles_view(fmk_sim *sim, fmk_sim_particles *p, double **buffer)
{
    memset(p, 0, sizeof *p);
    *buffer = NULL;
    p->n = sim->n;
    p->mass = sim->mass;
    p->id = sim->id;
    p->soft = sim->soft;
    p->time = sim->time;
    const int comoving = sim->opts.comoving;
    if (comoving) { /* GADGET's header and velocities p / a^(3/2) */
        const fmk_sim_cosmology *c = &sim->opts.cosmology;
        p->redshift = 1 / sim->time - 1;
        p->omega0 = c->omega_m, p->omega_lambda = c->omega_lambda, p->hubble_param = c->h;
        p->unit_length_cm = FMK_SIM_COSMO_UNIT_LENGTH_CM;
        p->unit_mass_g = FMK_SIM_COSMO_UNIT_MASS_G;
        p->unit_velocity_cm_per_s = FMK_SIM_COSMO_UNIT_VELOCITY_CM_S;
    }
    if (!sim->dev && !comoving) {
        p->pos = sim->pos;
        p->vel = sim->vel;
        return FMK_OK;
    }
    if (!(*buffer = fmk_sim_doubles(6 * sim->n)))
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "out of host memory for a copy of %lld particles",
                            (long long)sim->n);
    p->pos = *buffer;
    p->vel = *buffer + 3 * sim->n;
    fmk_status st = FMK_OK;
    if (sim->dev)
        st = fmk_sim_dev_download(sim, p->pos, p->vel, NULL, NULL);
    else {
        memcpy(p->pos, sim->pos, (size_t)(3 * sim->n) * sizeof(double));
        memcpy(p->vel, sim->vel, (size_t)(3 * sim->n) * sizeof(double));
    }
    if (st != FMK_OK) {
        free(*buffer);
        *buffer = NULL;
        return st;
    }
    if (comoving) {
        const double f = 1 / (sim->time * sqrt(sim->time));
        for (int64_t k = 0; k < 3 * sim->n; k++)
            p->vel[k] *= f;
    }
    return FMK_OK;
}

fmk_status fmk_sim_write_snapshot(fmk_sim *sim, const char *path)
{
    if (!sim || !path)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "fmk_sim_write_snapshot: %s is NULL",
                            sim ? "path" : "sim");
    fmk_sim_particles p, all;
    double *buffer;
    fmk_status st = fmk_sim_dist_agree(sim, particles_view(sim, &p, &buffer));
    if (st != FMK_OK)
        return st;
    /* (without hooks all is a view of p, whose arrays may be buffer's: freed after) */
    st = fmk_sim_dist_gather(sim, &p, NULL, NULL, &all, NULL, NULL);
    if (st != FMK_OK) {
        free(buffer);
        return st;
    }
    char msg[FMK_SIM_ERROR_LEN] = "";
    if (fmk_sim_is_root(sim) &&
        (st = fmk_sim_io_write_snapshot(path, &all, msg, sizeof msg)) != FMK_OK)
        fmk_sim_fail(sim, st, "%s", msg);
    fmk_sim_dist_free(sim, &all, NULL, NULL);
    free(buffer);
    return fmk_sim_dist_agree(sim, st);
}

static fmk_status png_write(fmk_sim *sim, const char *path, int axis, int width, double extent);

fmk_status fmk_sim_write_png(fmk_sim *sim, const char *path, int axis, int width)
{
    return png_write(sim, path, axis, width, 0);
}

static fmk_status png_write(fmk_sim *sim, const char *path, int axis, int width, double extent)
{
    if (!sim || !path)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "fmk_sim_write_png: %s is NULL",
                            sim ? "path" : "sim");
    if (axis < 0 || axis > 2 || width < 8 || width > 16384)
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "fmk_sim_write_png: axis = %d, width = %d; the axis must be 0, 1 or 2 "
                            "and the width 8..16384 pixels",
                            axis, width);
    fmk_sim_particles local, p;
    double *buffer;
    fmk_status st = fmk_sim_dist_agree(sim, particles_view(sim, &local, &buffer));
    if (st != FMK_OK)
        return st;
    /* (without hooks p is a view of local, whose arrays may be buffer's: freed after) */
    st = fmk_sim_dist_gather(sim, &local, NULL, NULL, &p, NULL, NULL);
    if (st != FMK_OK || !fmk_sim_is_root(sim)) { /* rank 0 draws every rank's particles */
        free(buffer);
        if (st != FMK_OK)
            return st;
        fmk_sim_dist_free(sim, &p, NULL, NULL);
        return fmk_sim_dist_agree(sim, FMK_OK);
    }
    /* the picture's centre: the centre of mass, in the two axes it shows */
    double m = 0, c[3] = {0, 0, 0};
    for (int64_t i = 0; i < p.n; i++) {
        m += p.mass[i];
        for (int k = 0; k < 3; k++)
            c[k] += p.mass[i] * p.pos[3 * i + k];
    }
    const double centre[2] = {c[axis == 0 ? 1 : 0] / m, c[axis == 2 ? 1 : 2] / m};
    char msg[FMK_SIM_ERROR_LEN] = "";
    st = fmk_sim_io_write_png(path, p.n, p.pos, p.mass, axis, width, extent, centre, msg,
                              sizeof msg);
    fmk_sim_dist_free(sim, &p, NULL, NULL);
    free(buffer);
    if (st != FMK_OK)
        fmk_sim_fail(sim, st, "%s", msg);
    return fmk_sim_dist_agree(sim, st);
}

fmk_status fmk_sim_set_output(fmk_sim *sim, const char *dir, int64_t snap_every, int png,
                              int64_t diag_every, int64_t restart_every)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_set_output: sim is NULL");
    if (snap_every < 0 || diag_every < 0 || restart_every < 0 || (png != 0 && png != 1))
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "fmk_sim_set_output: snap_every = %lld, diag_every = %lld, "
                            "restart_every = %lld, png = %d; the cadences must be >= 0 (0: "
                            "none) and png 0 or 1",
                            (long long)snap_every, (long long)diag_every, (long long)restart_every,
                            png);
    const int any = snap_every > 0 || diag_every > 0 || restart_every > 0 || sim->n_out_times > 0;
    if (any && (!dir || !dir[0]))
        return fmk_sim_fail(sim, dir ? FMK_ERR_ARG : FMK_ERR_NULL,
                            "fmk_sim_set_output: the output needs a directory");
    char *copy = NULL;
    FILE *diag = NULL;
    if (any) {
        /* rank 0 of a distributed simulation makes the directory and writes the CSV */
        const int root = fmk_sim_is_root(sim);
        char msg[FMK_SIM_ERROR_LEN] = "";
        fmk_status st = root ? fmk_sim_io_mkdir(dir, msg, sizeof msg) : FMK_OK;
        struct stat sb;
        /* a build without the file layer still writes the CSV into a directory that exists */
        if (st == FMK_ERR_UNAVAILABLE && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
            st = FMK_OK;
        if (st != FMK_OK)
            fmk_sim_fail(sim, st, "fmk_sim_set_output: %s", msg);
        if (st == FMK_OK && !(copy = malloc(strlen(dir) + 1)))
            st = fmk_sim_fail(sim, FMK_ERR_NOMEM, "fmk_sim_set_output: out of host memory");
        if (st == FMK_OK)
            strcpy(copy, dir);
        if (st == FMK_OK && root && diag_every > 0)
            st = fmk_sim_diag_open(sim, dir, &diag);
        if ((st = fmk_sim_dist_agree(sim, st)) != FMK_OK) {
            free(copy);
            if (diag)
                fclose(diag);
            return st;
        }
    }
    if (sim->diag)
        fclose(sim->diag);
    free(sim->out_dir);
    sim->out_dir = copy;
    sim->diag = diag;
    sim->snap_every = snap_every, sim->png = png;
    sim->diag_every = diag_every, sim->restart_every = restart_every;
    sim->diag_wall = 0, sim->diag_steps = 0;
    return FMK_OK;
}

static fmk_status snapshot_due(fmk_sim *sim)
{
    char name[64];
    snprintf(name, sizeof name, "snapshot_%03lld.hdf5", (long long)sim->snap_count);
    char *path = join(sim->out_dir, name);
    if (!path)
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "out of host memory");
    fmk_status st = fmk_sim_write_snapshot(sim, path);
    if (st == FMK_OK && sim->png) {
        strcpy(path + strlen(path) - strlen("hdf5"), "png");
        st = png_write(sim, path, sim->png_axis, sim->png_width, sim->png_extent);
    }
    free(path);
    if (st != FMK_OK)
        return st;
    sim->snap_count++;
    sim->snap_last_step = sim->step;
    return FMK_OK;
}

static fmk_status restart_due(fmk_sim *sim)
{
    char *path = join(sim->out_dir, "restart.h5");
    if (!path)
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "out of host memory");
    /* the file records that it was written, so that its continuation does not write it again */
    const int64_t before = sim->restart_last_step;
    sim->restart_last_step = sim->step;
    fmk_status st = fmk_sim_write_restart(sim, path);
    if (st != FMK_OK)
        sim->restart_last_step = before;
    free(path);
    return st;
}

fmk_status fmk_sim_set_output_times(fmk_sim *sim, int64_t n, const double *times)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_set_output_times: sim is NULL");
    if (n < 0 || n > ((int64_t)1 << 32) || (n > 0 && !times))
        return fmk_sim_fail(sim, n > 0 && !times ? FMK_ERR_NULL : FMK_ERR_ARG,
                            "fmk_sim_set_output_times: n = %lld, times %s; n must be in 0..2^32 "
                            "with an array of n times",
                            (long long)n, times ? "given" : "NULL");
    for (int64_t k = 0; k < n; k++)
        if (!isfinite(times[k]) || (k > 0 && !(times[k] > times[k - 1])) ||
            (sim->opts.comoving && !(times[k] > 0)))
            return fmk_sim_fail(sim, FMK_ERR_ARG,
                                "fmk_sim_set_output_times: times[%lld] = %g; the times must be "
                                "finite and increasing%s",
                                (long long)k, times[k],
                                sim->opts.comoving ? " scale factors > 0" : "");
    double *copy = NULL;
    if (n > 0 && !(copy = fmk_sim_doubles(n)))
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "fmk_sim_set_output_times: out of host memory");
    if (n > 0)
        memcpy(copy, times, (size_t)n * sizeof(double));
    free(sim->out_times);
    sim->out_times = copy;
    sim->n_out_times = n;
    return FMK_OK;
}

fmk_status fmk_sim_set_png(fmk_sim *sim, int axis, int width, double extent)
{
    if (!sim)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "fmk_sim_set_png: sim is NULL");
    if (axis < 0 || axis > 2 || width < 8 || width > 16384 || !isfinite(extent) || extent < 0)
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "fmk_sim_set_png: axis = %d, width = %d, extent = %g; the axis must "
                            "be 0, 1 or 2, the width 8..16384 pixels and the extent >= 0 (0: "
                            "fitted to the particles)",
                            axis, width, extent);
    sim->png_axis = axis, sim->png_width = width, sim->png_extent = extent;
    return FMK_OK;
}

/* 1 when the time is one of the listed output times. */
static int at_listed_time(const fmk_sim *sim)
{
    for (int64_t k = 0; k < sim->n_out_times; k++)
        if (sim->out_times[k] == sim->time)
            return 1;
    return 0;
}

int fmk_sim_output_reads_pot(const fmk_sim *sim)
{
    /* a diagnostics row (W) and a restart file (it stores the potential) read it; snapshots
     * and PNGs do not */
    const int64_t s = sim->step + 1;
    return sim->out_dir && ((sim->diag_every > 0 && s % sim->diag_every == 0) ||
                            (sim->restart_every > 0 && s % sim->restart_every == 0));
}

fmk_status fmk_sim_output_due(fmk_sim *sim)
{
    if (!sim->out_dir)
        return FMK_OK;
    const int64_t s = sim->step;
    fmk_status st = FMK_OK;
    if (sim->diag_every > 0 && s % sim->diag_every == 0 && sim->diag_last_step != s)
        st = fmk_sim_diag_row(sim);
    const int snap = (sim->snap_every > 0 && s % sim->snap_every == 0) || at_listed_time(sim);
    if (st == FMK_OK && snap && sim->snap_last_step != s)
        st = snapshot_due(sim);
    if (st == FMK_OK && sim->restart_every > 0 && s > 0 && s % sim->restart_every == 0 &&
        sim->restart_last_step != s)
        st = restart_due(sim);
    return st;
}
