/* io_stub.c -- a stand-in for the simulation's file layer (sim_io.h) until src/sim/io/ holds
 * the real one: every file call says FMK_ERR_UNAVAILABLE, so that the driver links and its
 * tests that need files skip. Delete this file when the file layer is merged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_io.h"

static fmk_status unavailable(const char *what, const char *path, char *msg, size_t cap)
{
    if (msg && cap > 0)
        snprintf(msg, cap,
                 "%s %s: this fmmkit was built without the simulation's file layer "
                 "(HDF5 snapshots and restarts, PNG pictures)",
                 what, path ? path : "(null)");
    return FMK_ERR_UNAVAILABLE;
}

void fmk_sim_particles_free(fmk_sim_particles *p)
{
    if (!p)
        return;
    free(p->pos), free(p->vel), free(p->mass), free(p->id), free(p->soft);
    memset(p, 0, sizeof *p);
}

fmk_status fmk_sim_io_write_snapshot(const char *path, const fmk_sim_particles *p, char *msg,
                                     size_t cap)
{
    (void)p;
    return unavailable("writing the snapshot", path, msg, cap);
}

fmk_status fmk_sim_io_read_snapshot(const char *path, fmk_sim_particles *p, char *msg, size_t cap)
{
    (void)p;
    return unavailable("reading the snapshot", path, msg, cap);
}

fmk_status fmk_sim_io_write_restart(const char *path, const fmk_sim_particles *p, const double *acc,
                                    const double *pot, const void *state, size_t state_bytes,
                                    char *msg, size_t cap)
{
    (void)p, (void)acc, (void)pot, (void)state, (void)state_bytes;
    return unavailable("writing the restart file", path, msg, cap);
}

fmk_status fmk_sim_io_read_restart(const char *path, fmk_sim_particles *p, double **acc,
                                   double **pot, void **state, size_t *state_bytes, char *msg,
                                   size_t cap)
{
    (void)p, (void)acc, (void)pot, (void)state, (void)state_bytes;
    return unavailable("reading the restart file", path, msg, cap);
}

int fmk_sim_io_is_restart(const char *path)
{
    (void)path;
    return 0;
}

fmk_status fmk_sim_io_write_png(const char *path, int64_t n, const double *pos, const double *mass,
                                int axis, int width, double extent, const double centre[2],
                                char *msg, size_t cap)
{
    (void)n, (void)pos, (void)mass, (void)axis, (void)width, (void)extent, (void)centre;
    return unavailable("writing the picture", path, msg, cap);
}

fmk_status fmk_sim_io_mkdir(const char *dir, char *msg, size_t cap)
{
    return unavailable("creating the directory", dir, msg, cap);
}
