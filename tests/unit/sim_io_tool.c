/* sim_io_tool.c -- the simulation driver's file layer from the command line, for
 * tests/python/test_sim_io.py (h5py checks what it writes and writes what it reads):
 *
 *   sim_io_tool write PATH   the snapshot PATH and the restart file PATH.restart, of the
 *                            particles below (exact binary fractions: Python computes the same)
 *   sim_io_tool read PATH    what fmk_sim_io_read_snapshot reads, one key=value a line
 *
 * Exit status 0, 1 on a refused file (the message on stderr), 77 without HDF5 (skip). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_io.h"

#ifdef FMK_HAVE_HDF5
enum { N = 100, STATE_BYTES = 256 };

static int write_files(const char *path)
{
    static double pos[3 * N], vel[3 * N], mass[N], soft[N], acc[3 * N], pot[N];
    static uint64_t id[N];
    static unsigned char state[STATE_BYTES];
    for (int j = 0; j < 3 * N; j++) {
        pos[j] = j / 8.0 - 20;
        vel[j] = 1 - j / 16.0;
        acc[j] = j / 32.0;
    }
    for (int i = 0; i < N; i++) {
        mass[i] = (i + 1) / 64.0;
        soft[i] = (i % 4 + 1) / 128.0;
        id[i] = 1000 + (uint64_t)i;
        pot[i] = -i / 4.0;
    }
    for (int k = 0; k < STATE_BYTES; k++)
        state[k] = (unsigned char)k;
    fmk_sim_particles p = {N,   pos,         vel,      mass, id, soft, 1.5, 0.0,
                           0.0, 3.085678e21, 1.989e43, 1e5,  0,  0,    0};
    char msg[512], restart[4096];
    snprintf(restart, sizeof restart, "%s.restart", path);
    if (fmk_sim_io_write_snapshot(path, &p, msg, sizeof msg) != FMK_OK ||
        fmk_sim_io_write_restart(restart, &p, acc, pot, state, STATE_BYTES, msg, sizeof msg) !=
            FMK_OK) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    return 0;
}

static int read_file(const char *path)
{
    fmk_sim_particles p;
    char msg[512];
    if (fmk_sim_io_read_snapshot(path, &p, msg, sizeof msg) != FMK_OK) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    int64_t last = p.n - 1;
    printf("n=%lld\ntime=%.17g\nredshift=%.17g\nbox_size=%.17g\n", (long long)p.n, p.time,
           p.redshift, p.box_size);
    printf("unit_length_cm=%.17g\nunit_mass_g=%.17g\nunit_velocity_cm_per_s=%.17g\n",
           p.unit_length_cm, p.unit_mass_g, p.unit_velocity_cm_per_s);
    printf("pos_first=%.17g,%.17g,%.17g\npos_last=%.17g,%.17g,%.17g\n", p.pos[0], p.pos[1],
           p.pos[2], p.pos[3 * last], p.pos[3 * last + 1], p.pos[3 * last + 2]);
    printf("vel_first=%.17g,%.17g,%.17g\n", p.vel[0], p.vel[1], p.vel[2]);
    printf("mass_first=%.17g\nmass_last=%.17g\n", p.mass[0], p.mass[last]);
    printf("id_first=%llu\nid_last=%llu\nsoft=%s\n", (unsigned long long)p.id[0],
           (unsigned long long)p.id[last], p.soft ? "yes" : "no");
    fmk_sim_particles_free(&p);
    return 0;
}

#endif /* FMK_HAVE_HDF5 */

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: sim_io_tool write|read PATH\n");
        return 2;
    }
#ifndef FMK_HAVE_HDF5
    fprintf(stderr, "built without HDF5\n");
    return 77;
#else
    return strcmp(argv[1], "write") == 0 ? write_files(argv[2]) : read_file(argv[2]);
#endif
}
