/* output.c -- what fmk_sim_run writes (fmk_sim_set_output) and the snapshot and PNG calls.
 *
 * After each step (and when a run starts) the outputs whose cadence divides the step are
 * written, in this order: the diagnostics row, the snapshot (and its PNG), the restart file;
 * each at most once per step, remembered by the step it was last written at (counters that
 * travel in restarts, so a continued run neither repeats nor skips a file and numbers its
 * snapshots on). The files go through the file layer (sim_io.h), the CSV through stdio. */
#define _POSIX_C_SOURCE 200809L
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
    if (!sim->dev) {
        p->pos = sim->pos;
        p->vel = sim->vel;
        return FMK_OK;
    }
    if (!(*buffer = fmk_sim_doubles(6 * sim->n)))
        return fmk_sim_fail(sim, FMK_ERR_NOMEM, "out of host memory for a copy of %lld particles",
                            (long long)sim->n);
    p->pos = *buffer;
    p->vel = *buffer + 3 * sim->n;
    fmk_status st = fmk_sim_dev_download(sim, p->pos, p->vel, NULL, NULL);
    if (st != FMK_OK) {
        free(*buffer);
        *buffer = NULL;
    }
    return st;
}

fmk_status fmk_sim_write_snapshot(fmk_sim *sim, const char *path)
{
    if (!sim || !path)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "fmk_sim_write_snapshot: %s is NULL",
                            sim ? "path" : "sim");
    fmk_sim_particles p;
    double *buffer;
    fmk_status st = particles_view(sim, &p, &buffer);
    if (st != FMK_OK)
        return st;
    char msg[FMK_SIM_ERROR_LEN] = "";
    st = fmk_sim_io_write_snapshot(path, &p, msg, sizeof msg);
    free(buffer);
    return st == FMK_OK ? FMK_OK : fmk_sim_fail(sim, st, "%s", msg);
}

fmk_status fmk_sim_write_png(fmk_sim *sim, const char *path, int axis, int width)
{
    if (!sim || !path)
        return fmk_sim_fail(sim, FMK_ERR_NULL, "fmk_sim_write_png: %s is NULL",
                            sim ? "path" : "sim");
    if (axis < 0 || axis > 2 || width < 8 || width > 16384)
        return fmk_sim_fail(sim, FMK_ERR_ARG,
                            "fmk_sim_write_png: axis = %d, width = %d; the axis must be 0, 1 or 2 "
                            "and the width 8..16384 pixels",
                            axis, width);
    fmk_sim_particles p;
    double *buffer;
    fmk_status st = particles_view(sim, &p, &buffer);
    if (st != FMK_OK)
        return st;
    /* the picture's centre: the centre of mass, in the two axes it shows */
    double m = 0, c[3] = {0, 0, 0};
    for (int64_t i = 0; i < sim->n; i++) {
        m += p.mass[i];
        for (int k = 0; k < 3; k++)
            c[k] += p.mass[i] * p.pos[3 * i + k];
    }
    const double centre[2] = {c[axis == 0 ? 1 : 0] / m, c[axis == 2 ? 1 : 2] / m};
    char msg[FMK_SIM_ERROR_LEN] = "";
    st = fmk_sim_io_write_png(path, sim->n, p.pos, p.mass, axis, width, 0, centre, msg, sizeof msg);
    free(buffer);
    return st == FMK_OK ? FMK_OK : fmk_sim_fail(sim, st, "%s", msg);
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
    const int any = snap_every > 0 || diag_every > 0 || restart_every > 0;
    if (any && (!dir || !dir[0]))
        return fmk_sim_fail(sim, dir ? FMK_ERR_ARG : FMK_ERR_NULL,
                            "fmk_sim_set_output: the output needs a directory");
    char *copy = NULL;
    FILE *diag = NULL;
    if (any) {
        char msg[FMK_SIM_ERROR_LEN] = "";
        fmk_status st = fmk_sim_io_mkdir(dir, msg, sizeof msg);
        struct stat sb;
        /* a build without the file layer still writes the CSV into a directory that exists */
        if (st == FMK_ERR_UNAVAILABLE && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
            st = FMK_OK;
        if (st != FMK_OK)
            return fmk_sim_fail(sim, st, "fmk_sim_set_output: %s", msg);
        if (!(copy = malloc(strlen(dir) + 1)))
            return fmk_sim_fail(sim, FMK_ERR_NOMEM, "fmk_sim_set_output: out of host memory");
        strcpy(copy, dir);
        if (diag_every > 0 && (st = fmk_sim_diag_open(sim, dir, &diag)) != FMK_OK) {
            free(copy);
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
        st = fmk_sim_write_png(sim, path, 2, 512);
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

fmk_status fmk_sim_output_due(fmk_sim *sim)
{
    if (!sim->out_dir)
        return FMK_OK;
    const int64_t s = sim->step;
    fmk_status st = FMK_OK;
    if (sim->diag_every > 0 && s % sim->diag_every == 0 && sim->diag_last_step != s)
        st = fmk_sim_diag_row(sim);
    if (st == FMK_OK && sim->snap_every > 0 && s % sim->snap_every == 0 && sim->snap_last_step != s)
        st = snapshot_due(sim);
    if (st == FMK_OK && sim->restart_every > 0 && s > 0 && s % sim->restart_every == 0 &&
        sim->restart_last_step != s)
        st = restart_due(sim);
    return st;
}
