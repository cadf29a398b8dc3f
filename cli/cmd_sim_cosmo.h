/* cmd_sim_cosmo.h -- `fmmkit sim`'s comoving options (cmd_sim_cosmo.c): the cosmology, the
 * step spacing, the redshifts, the cosmological initial conditions (--ic cosmo) and the
 * snapshots at listed times. */
#ifndef FMMKIT_CLI_CMD_SIM_COSMO_H
#define FMMKIT_CLI_CMD_SIM_COSMO_H

#include "cli.h"
#include "fmmkit_sim.h"

typedef struct sim_cosmo_args {
    const char *cosmology, *spacing, *snap_times, *snap_z, *soft_mode;
    double omega_m, omega_l, omega_b, hubble, sigma_8, n_s;
    double z_start, z_end, radius, png_extent, soft_max;
    int64_t lpt, png_pixels;
    int comoving;
    double a_end; /* from --z-end (0: none) */
} sim_cosmo_args;

#define SIM_COSMO_N_OPTS 19

/* Defaults, and the option table's entries (SIM_COSMO_N_OPTS of them) into out. */
void sim_cosmo_init(sim_cosmo_args *c, args_opt *out);

/* After args_parse: the checks, then the options into so (comoving, cosmology, spacing, dt
 * from steps and the redshifts when --dt is absent). ic: the --ic value (NULL for --restart). */
int sim_cosmo_apply(const char *cmd, sim_cosmo_args *c, args_opt *opts, int n_opts, const char *ic,
                    int64_t steps, fmk_sim_opts *so);

/* --ic cosmo: the particles of fmk_sim_ic_cosmo (about n of them, seed, threads) and the
 * simulation. CLI_OK or the exit status after a message. */
int sim_cosmo_make(const char *cmd, const sim_cosmo_args *c, int64_t n, uint64_t seed,
                   const fmk_sim_opts *so, fmk_sim **sim);

/* The listed snapshot times (--snap-times, --snap-z) and the PNG view, before the run. */
int sim_cosmo_output(const char *cmd, const sim_cosmo_args *c, fmk_sim *sim);

#endif
