/*
 * sim_io.h -- the simulation driver's files (src/sim/io/): GADGET-4 style HDF5 snapshots, the
 * restart file and PNG density projections. The driver's core (the .c files of src/sim/)
 * calls only these.
 *
 * Every function writes a sentence into msg (cap bytes, always terminated) when it fails and
 * returns FMK_OK, FMK_ERR_ARG (bad arguments, a file that is not what it should be: missing
 * datasets, wrong shapes, NaN), FMK_ERR_NOMEM, FMK_ERR_UNAVAILABLE (built without HDF5 or
 * libpng) or FMK_ERR_INTERNAL (an I/O failure: disk full, permissions; the message names the
 * file and the reason). Writers write to "path.tmp.<pid>" and rename it onto path only when the
 * file is complete; on failure the temporary file is removed and path is untouched.
 */
#ifndef FMMKIT_SIM_IO_H
#define FMMKIT_SIM_IO_H

#include <stddef.h>
#include <stdint.h>

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One snapshot's particles (host arrays of n, 3n for pos and vel). */
typedef struct fmk_sim_particles {
    int64_t n;
    double *pos, *vel; /* 3n, interleaved */
    double *mass;      /* n */
    uint64_t *id;      /* n */
    double *soft;      /* n per-particle softening lengths, or NULL (none stored) */
    double time;       /* /Header Time (the scale factor a in a cosmological run) */
    double redshift;   /* /Header Redshift (0 unless cosmological) */
    double box_size;   /* /Header BoxSize (0: vacuum boundaries) */
    double unit_length_cm, unit_mass_g, unit_velocity_cm_per_s; /* 0: not written */
    /* A comoving run's /Header Omega0, OmegaLambda, HubbleParam (written, with the units,
     * also into /Parameters with ComovingIntegrationOn = 1, as GADGET-4 does, when
     * hubble_param > 0; read from /Header or /Parameters, 0 when absent) */
    double omega0, omega_lambda, hubble_param;
} fmk_sim_particles;

/* Frees the arrays of p that a reader allocated and zeroes p. */
void fmk_sim_particles_free(fmk_sim_particles *p);

/* The snapshot layout: /Header attributes NumPart_ThisFile, NumPart_Total (6 entries, type 1
 * holds n), MassTable (6 doubles: all zero; masses in /PartType1/Masses), Time, Redshift,
 * BoxSize, NumFilesPerSnapshot = 1, and the units when given; /PartType1/Coordinates (n x 3),
 * Velocities (n x 3), ParticleIDs (n, uint64), Masses (n), and Softenings (n) when soft. */
fmk_status fmk_sim_io_write_snapshot(const char *path, const fmk_sim_particles *p, char *msg,
                                     size_t cap);

/* Reads a snapshot of that layout (PartType1 only; Masses, or MassTable[1] when Masses is
 * absent; ParticleIDs optional: 1..n). Allocates p's arrays (fmk_sim_particles_free). */
fmk_status fmk_sim_io_read_snapshot(const char *path, fmk_sim_particles *p, char *msg, size_t cap);

/* A restart file: the snapshot layout plus /Restart/Accelerations (n x 3), /Restart/Potential
 * (n) and /Restart/State (an opaque byte array: the driver's counters and options, bit
 * exact). Every double is stored as is (no conversion), so reading it back gives the same
 * bits. */
fmk_status fmk_sim_io_write_restart(const char *path, const fmk_sim_particles *p, const double *acc,
                                    const double *pot, const void *state, size_t state_bytes,
                                    char *msg, size_t cap);
/* Allocates p's arrays, *acc (3n), *pot (n) and *state (*state_bytes); free() the last three. */
fmk_status fmk_sim_io_read_restart(const char *path, fmk_sim_particles *p, double **acc,
                                   double **pot, void **state, size_t *state_bytes, char *msg,
                                   size_t cap);

/* 1 when path is a readable HDF5 file with a /Restart group, else 0. */
int fmk_sim_io_is_restart(const char *path);

/* A PNG of width x width pixels: the mass of the n particles projected along axis (0, 1, 2)
 * onto a square of side `extent` centred at centre (the 2 coordinates of the other axes, in
 * their order; NULL: the centre of mass), cloud-in-cell, log-scaled over 4 decades below the
 * maximum, with a perceptual colour map (no external data files). extent <= 0: the square that
 * holds 99% of the mass around the centre of mass. */
fmk_status fmk_sim_io_write_png(const char *path, int64_t n, const double *pos, const double *mass,
                                int axis, int width, double extent, const double centre[2],
                                char *msg, size_t cap);

/* Creates directory dir (and its parents) when missing. */
fmk_status fmk_sim_io_mkdir(const char *dir, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_SIM_IO_H */
