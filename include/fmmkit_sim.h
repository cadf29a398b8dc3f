/*
 * fmmkit_sim.h -- the N-body simulation driver (docs/simulation.md).
 *
 * Installed beside fmmkit.h, whose statuses, interrupt checks and conventions it shares. It
 * integrates N gravitating particles,
 *
 *     dx_i/dt = v_i,   dv_i/dt = a_i = -G sum_{j != i} m_j grad phi_s(x_i - x_j),
 *
 * with the forces of an fmmkit plan: any method and backend (method AUTO by default). The
 * potential (the energies' W) is evaluated only where it is read: by fmk_sim_run on the steps
 * that end in a diagnostics row or a restart file (every step in a comoving run), else once at
 * the current positions when a query asks for it (fmk_sim_info_get, fmk_sim_get_state with
 * pot, restart files); an evaluation without it is cheaper (docs/simulation.md, "When the
 * potential is computed"). The trajectory never depends on those queries. phi_s is the softened 1/r: Plummer's 1/sqrt(r^2 + s^2)
 * (fmmkit's plummer kernel, one s for every particle) or GADGET's cubic spline of softening
 * length s (exactly Newtonian beyond h = 2.8 s; one s or one per particle, a pair using the
 * larger of its two). The state (positions, velocities, masses) is fp64; the forces come in the
 * plan's precision.
 *
 * Comoving integration (opts.comoving; docs/cosmology.md): an isolated sphere in an expanding
 * background, comoving positions, momenta p = a^2 dx/dt, the scale factor a as the time, the
 * background's attraction taken out (the options' comment below has the equations).
 *
 * Life cycle (the one of fmk_plan):
 *     fmk_sim_opts o;  fmk_sim_opts_default(&o);
 *     fmk_sim *sim;
 *     if (fmk_sim_create(&sim, n, mass, pos, vel, &o) != FMK_OK)
 *         fprintf(stderr, "%s\n", fmk_sim_last_error(NULL));
 *     fmk_sim_run(sim, t_end, 0);                       // or fmk_sim_step, as often as you like
 *     fmk_sim_write_snapshot(sim, "snap.hdf5");
 *     fmk_sim_destroy(sim);
 *
 * Layout: positions and velocities are 3 doubles per particle (x, y, z interleaved), masses one
 * double per particle. The driver keeps its own copies; no caller pointer is kept.
 *
 * Files: snapshots in GADGET-4's HDF5 layout (/Header attributes NumPart_ThisFile,
 * NumPart_Total, MassTable, Time, Redshift, BoxSize, NumFilesPerSnapshot; /PartType1/
 * Coordinates, Velocities, ParticleIDs, Masses; comoving runs add Omega0, OmegaLambda,
 * HubbleParam and the units, with Velocities = p / a^(3/2) as GADGET writes them), restart files
 * (the whole state, continued bit for bit), diagnostics as CSV. A file is written under a temporary name and renamed when
 * complete: a failed write leaves no half-written file. Without HDF5 in the build the file
 * calls return FMK_ERR_UNAVAILABLE with a message that says so.
 *
 * Errors, threads: as in fmmkit.h. Every call that can fail returns an fmk_status, with a
 * sentence in fmk_sim_last_error; one thread at a time per simulation.
 */
#ifndef FMMKIT_SIM_H
#define FMMKIT_SIM_H

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softening of the pair potential. */
typedef enum fmk_sim_softening {
    FMK_SIM_SOFT_PLUMMER = 0, /* 1/sqrt(r^2 + s^2): fmmkit's plummer kernel (default) */
    FMK_SIM_SOFT_SPLINE = 1   /* GADGET-4's cubic spline, Newtonian for r >= 2.8 s */
} fmk_sim_softening;

/* Time steps. */
typedef enum fmk_sim_stepping {
    FMK_SIM_STEP_FIXED = 0,   /* dt = opts.dt every step (default) */
    FMK_SIM_STEP_ADAPTIVE = 1 /* one global dt = min_i eta sqrt(s / |a_i|), at most dt_max, at
                               * least dt_min (s: the softening; spline: 2.8 s) */
} fmk_sim_stepping;

/* Cosmology (docs/cosmology.md). Units of every cosmological quantity in fmmkit: length Mpc
 * (comoving unless said), mass 1e10 solar masses, velocity km/s, so time is Mpc/(km/s)
 * (977.8 Gyr), G = FMK_SIM_COSMO_G and H0 = 100 h. No h in the units (45 Mpc is 45 Mpc). */
#define FMK_SIM_COSMO_G 43.00917 /* G in Mpc (km/s)^2 / (1e10 Msun) */
#define FMK_SIM_COSMO_UNIT_LENGTH_CM 3.085678e24
#define FMK_SIM_COSMO_UNIT_MASS_G 1.98841e43
#define FMK_SIM_COSMO_UNIT_VELOCITY_CM_S 1e5

/* A Friedmann-Lemaitre background (matter, a cosmological constant, curvature 1 - omega_m -
 * omega_lambda; no radiation) and the linear power spectrum's parameters. */
typedef struct fmk_sim_cosmology {
    double omega_m;      /* matter (cold dark matter + baryons) today */
    double omega_lambda; /* cosmological constant today */
    double omega_b;      /* baryons today (the transfer function's wiggles and suppression) */
    double h;            /* H0 = 100 h km/s/Mpc */
    double n_s;          /* primordial spectral index */
    double sigma_8;      /* rms linear density contrast in spheres of 8/h Mpc today */
    double t_cmb;        /* CMB temperature today in K (Eisenstein & Hu 1998): 2.7255 */
} fmk_sim_cosmology;

/* Comoving integration (docs/cosmology.md, "Comoving integration"): the stepping variable of
 * the fixed steps. opts.dt is the step in that variable: cosmic time (Mpc/(km/s)), a, or ln a. */
typedef enum fmk_sim_spacing {
    FMK_SIM_SPACING_TIME = 0, /* uniform in cosmic time (Hamada et al. 2009) (default) */
    FMK_SIM_SPACING_A = 1,    /* uniform in the scale factor a */
    FMK_SIM_SPACING_LOGA = 2  /* uniform in ln a */
} fmk_sim_spacing;

/* Comoving integration: how the softening length follows the expansion. */
typedef enum fmk_sim_soft_mode {
    FMK_SIM_SOFT_COMOVING = 0, /* opts.soft is a comoving length, fixed (default) */
    FMK_SIM_SOFT_PHYSICAL = 1  /* opts.soft is a physical length: comoving s / a, at most
                                * opts.soft_max_comoving (GADGET's SofteningMaxPhys scheme);
                                * Plummer softening only (a new force plan when s changes) */
} fmk_sim_soft_mode;

/* The integrator of a step. */
typedef enum fmk_sim_integrator {
    FMK_SIM_LEAPFROG = 0, /* kick-drift-kick leapfrog, second order, one force evaluation a
                           * step (default) */
    FMK_SIM_YOSHIDA4 = 1  /* Yoshida's (1990) fourth-order symplectic composition of three
                           * leapfrog steps of w1 dt, w0 dt, w1 dt (w1 = 1 / (2 - 2^(1/3)),
                           * w0 = 1 - 2 w1 < 0): three force evaluations a step. Newtonian runs
                           * on the CPU backend only (FMK_ERR_ARG otherwise) */
} fmk_sim_integrator;

/* Options. Fill with fmk_sim_opts_default() first; NULL means all defaults. */
typedef struct fmk_sim_opts {
    fmk_opts plan;               /* the force plan's options (method, backend, precision,
                                   * theta, threads, device...): fmk_opts_default() */
    double eps;                  /* the force plan's eps: 1e-6 (fp64), fmk_eps_default
                                   * (fp32) when 0 */
    double G;                    /* gravitational constant: 1 */
    fmk_sim_softening softening; /* FMK_SIM_SOFT_PLUMMER */
    double soft;                 /* s, length units: 0 (none; then plain 1/r) */
    fmk_sim_stepping stepping;   /* FMK_SIM_STEP_FIXED */
    double dt;                   /* the fixed step, or the first adaptive step's cap: 0 means
                                   * unset (an error for FMK_SIM_STEP_FIXED) */
    double eta;                  /* adaptive: 0.025 */
    double dt_min, dt_max;       /* adaptive: 0 and +inf when 0 */
    int32_t verbose;             /* 0; 1: progress bar on stderr when it is a terminal */

    /* Comoving integration (all ignored unless comoving = 1). Positions are comoving Mpc x,
     * velocities the momenta p = a^2 dx/dt (km/s), masses 1e10 Msun, and the time is the
     * scale factor a (fmk_sim_run's t_end is a_end). The equations are dx/dt = p / a^2,
     * dp/dt = g / a with g = -G sum_j m_j grad phi_s(x - x_j) + c x, c = H0^2 omega_m / 2 (the
     * background's attraction taken out: an isolated sphere at the mean density in vacuum,
     * as GADGET-2 does without periodic boundaries); the step is kick-drift-kick with the
     * factors fmk_cosmo_kick over [a0, am] and [am, a1] and fmk_cosmo_drift over [a0, a1], am
     * the midpoint in the stepping variable. G is FMK_SIM_COSMO_G (opts.G must be left at 1
     * or be that value). Fixed steps only: FMK_SIM_STEP_ADAPTIVE is refused. */
    int32_t comoving;              /* 0: Newtonian (default); 1: comoving */
    fmk_sim_cosmology cosmology;   /* fmk_sim_cosmology_preset "wmap" */
    fmk_sim_spacing spacing;       /* FMK_SIM_SPACING_TIME */
    fmk_sim_soft_mode soft_mode;   /* FMK_SIM_SOFT_COMOVING */
    double soft_max_comoving;      /* FMK_SIM_SOFT_PHYSICAL: the cap on the comoving s (> 0) */
    double a_start;                /* the initial scale factor of fmk_sim_create (> 0; a
                                   * snapshot file's Time serves create_from_file) */
    double radius;                 /* the sphere's comoving radius R for the diagnostics'
                                   * reference energy (0: from the total mass M at the mean
                                   * density, R = (3 M / (4 pi rho_m))^(1/3)) */
    fmk_sim_integrator integrator; /* FMK_SIM_LEAPFROG */
} fmk_sim_opts;

/* What the simulation is and what it cost (fmk_sim_info). */
typedef struct fmk_sim_info {
    int64_t n;                        /* particles (of every rank, when distributed) */
    int64_t step;                     /* steps taken since the initial conditions */
    double time;                      /* simulation time */
    double dt;                        /* the last step's dt */
    double kinetic, potential, total; /* energies at the current time (potential: from the
                                       * last step's evaluation when it computed the potential,
                                       * else evaluated now at the current positions;
                                       * -G sum_{i<j} m_i m_j phi_s = -1/2 sum_i m_i pot_i,
                                       * negative; total = kinetic + potential) */
    double momentum[3], angular_momentum[3];
    double seconds_force; /* the last step's wall time in set_points + eval */
    double seconds_step;  /* the last step's whole wall time */
    int64_t interactions; /* the last evaluation's interactions: the plan's
                           * interactions_p2p + interactions_far (fmk_info; n (n - 1) for
                           * the direct sum; 0 where the method does not count them) */
    fmk_info plan;        /* the force plan's fmk_info */
    /* (added after plan: the fields above keep their offsets) */
    int64_t interactions_total; /* the sum of interactions over the evaluations so far (the
                                 * first one included) */
    /* Comoving runs (else 0): time is a; kinetic and potential are the peculiar energies
     * K = sum m |p|^2 / (2 a^2) and W = (U - U_ref) / a, U = -1/2 sum m pot - (c/2) sum m |x|^2,
     * U_ref the uniform sphere's -(3/5) G M^2 / R - (c/2) (3/5) M R^2. */
    double redshift;            /* 1/a - 1 */
    double layzer_irvine;       /* C(a) = a (K + W) + int_{a_start}^{a} K da (trapezoid, every
                                 * step); constant for exact integration */
    double layzer_irvine_error; /* (C - C_start) / max |a W| over the steps so far */
    /* A distributed simulation (fmmkit_mpi.h: fmk_sim_create_mpi): n above is every rank's
     * particles, the energies and momenta are sums over the ranks; else n_local = n, rank 0
     * of ranks 1. */
    int64_t n_local; /* this rank's particles now (fmk_sim_get_state's arrays hold these; they
                      * migrate to the ranks that evaluate their forces: fmk_sim_get_ids) */
    int32_t rank, ranks;
} fmk_sim_info;

typedef struct fmk_sim fmk_sim;

FMK_API void fmk_sim_opts_default(fmk_sim_opts *opts);

/* The fixed step that takes `steps` (>= 1) equal steps of the stepping variable from a0 to a1
 * (0 < a0 < a1; cosmology as fmk_sim_cosmology_preset gives or checked like it): the value for
 * opts.dt. */
FMK_API fmk_status fmk_sim_comoving_dt(const fmk_sim_cosmology *c, fmk_sim_spacing spacing,
                                       double a0, double a1, int64_t steps, double *dt);

/* Creates a simulation of n >= 1 particles with masses (n, > 0 and finite), positions and
 * velocities (3n each, finite). soft_per_particle: NULL (opts.soft for every particle) or n
 * softening lengths (> 0; FMK_SIM_SOFT_SPLINE only). ids: NULL (1..n) or n particle ids.
 * Computes the initial forces. On failure *sim is NULL and the message is in
 * fmk_sim_last_error(NULL). */
FMK_API fmk_status fmk_sim_create(fmk_sim **sim, int64_t n, const double *mass, const double *pos,
                                  const double *vel, const double *soft_per_particle,
                                  const uint64_t *ids, const fmk_sim_opts *opts);

/* Creates a simulation from a GADGET-4 style HDF5 snapshot (PartType1; Masses or MassTable;
 * Time as the start time; with opts->comoving, Time is the start's a and the Velocities
 * p / a^(3/2) become the momenta p) or from a restart file (fmk_sim_write_restart: then opts NULL
 * continues with the options stored in it, bit for bit). */
FMK_API fmk_status fmk_sim_create_from_file(fmk_sim **sim, const char *path,
                                            const fmk_sim_opts *opts);

/* Initial conditions in model units (G = 1), into caller arrays of n masses and 3n positions
 * and velocities; seed picks the random stream (same seed, same particles). Centre of mass at
 * rest at the origin.
 *   plummer: total mass 1, Plummer radius a = 3 pi / 16 (Henon units: E = -1/4), sampled
 *            as Aarseth, Henon & Wielen (1974) with their cut of the outermost radii
 *            (docs/simulation.md states it).
 *   cold:    total mass 1, uniform sphere of radius 1, at rest.
 *   kepler:  n = 2, masses m1 = m2 = 0.5, semi-major axis 1, eccentricity e (0 <= e < 1),
 *            at apocentre. */
FMK_API fmk_status fmk_sim_ic_plummer(int64_t n, uint64_t seed, double *mass, double *pos,
                                      double *vel);
FMK_API fmk_status fmk_sim_ic_cold(int64_t n, uint64_t seed, double *mass, double *pos,
                                   double *vel);
FMK_API fmk_status fmk_sim_ic_kepler(double e, double *mass, double *pos, double *vel);

/* Named parameter sets. "wmap" (the default; the era of Hamada et al. 2009): omega_m 0.3,
 * omega_lambda 0.7, omega_b 0.04, h 0.7, n_s 1, sigma_8 0.9; "planck18" (Planck 2018,
 * TT,TE,EE+lowE+lensing+BAO): omega_m 0.3111, omega_lambda 0.6889, omega_b 0.04897, h 0.6766,
 * n_s 0.9665, sigma_8 0.8102. NULL or "" is "wmap"; an unknown name is FMK_ERR_ARG. */
FMK_API fmk_status fmk_sim_cosmology_preset(fmk_sim_cosmology *c, const char *name);

/* Cosmological initial conditions: a Gaussian random field with the Eisenstein & Hu (1998)
 * linear power spectrum on a periodic grid (FFTW), particles displaced from the grid by the
 * Zel'dovich approximation (lpt_order 1) or second-order Lagrangian perturbation theory (2),
 * then the particles whose grid (Lagrangian) points lie within radius of the box centre kept:
 * a sphere evolved with vacuum boundaries. Positions are comoving Mpc about the sphere's
 * centre; velocities are the driver's comoving momenta p = a^2 dx/dt in km/s (GADGET's
 * snapshot velocities are p / a^(3/2)); every particle has the mass rho_m * spacing^3. */
typedef struct fmk_sim_cosmo_ic {
    fmk_sim_cosmology cosmo;
    double radius;     /* comoving Mpc: the sphere (> 0) */
    int64_t n;         /* about this many particles in the sphere: picks the grid spacing
                         * (4 pi radius^3 / (3 n))^(1/3); ignored when spacing > 0 */
    double spacing;    /* comoving Mpc between grid points, or 0 (from n) */
    double z_start;    /* the initial redshift (> 0) */
    int32_t lpt_order; /* 1 (Zel'dovich) or 2 (2LPT); 0: the particles at their lattice
                        * points, at rest (the unperturbed state, for
                        * fmk_sim_set_energy_reference) */
    uint64_t seed;     /* the white noise's random stream */
    int32_t threads;   /* 0: OpenMP's default */
} fmk_sim_cosmo_ic;

/* Defaults: fmk_sim_cosmology_preset "wmap", radius 45, n 2874551, spacing 0, z_start 49,
 * lpt_order 1, seed 1, threads 0. */
FMK_API void fmk_sim_cosmo_ic_default(fmk_sim_cosmo_ic *p);

/* What fmk_sim_ic_cosmo will make, without making it: the particle count, each particle's
 * mass, the grid points per side and the periodic box's side (comoving Mpc). Any output may
 * be NULL. */
FMK_API fmk_status fmk_sim_ic_cosmo_size(const fmk_sim_cosmo_ic *p, int64_t *n, double *mass,
                                         int64_t *grid, double *box);

/* Makes the particles into caller arrays of n masses and 3n positions and velocities, n as
 * fmk_sim_ic_cosmo_size says (another n is FMK_ERR_ARG). Same parameters, same particles. */
FMK_API fmk_status fmk_sim_ic_cosmo(const fmk_sim_cosmo_ic *p, int64_t n, double *mass, double *pos,
                                    double *vel);

/* Takes one step (kick-drift-kick leapfrog). A step that fails leaves the state as it was. Its
 * evaluation computes the accelerations alone (not in a comoving run): a query of the potential
 * after it evaluates the potential once more (a caller that reads the energy after every step
 * gets it within the steps with fmk_sim_run and a diagnostics row every step). */
FMK_API fmk_status fmk_sim_step(fmk_sim *sim);

/* Steps until the time reaches t_end (the last step shortened to land on it) or, when
 * t_end <= current time, takes n_steps (>= 0) steps. Interruptible (fmk_sim_interrupt): the run
 * then stops at the end of a whole step with FMK_ERR_INTERRUPTED, the state consistent (a step
 * whose forces were interrupted is dropped). */
FMK_API fmk_status fmk_sim_run(fmk_sim *sim, double t_end, int64_t n_steps);

/* Output during fmk_sim_run: a snapshot every snap_every steps (0: none) to
 * dir/snapshot_NNN.hdf5 (NNN from 000), a PNG density projection of each snapshot when png,
 * a row of dir/diagnostics.csv every diag_every steps (0: none), a restart file dir/restart.h5
 * every restart_every steps (0: none). dir is created if missing. */
FMK_API fmk_status fmk_sim_set_output(fmk_sim *sim, const char *dir, int64_t snap_every, int png,
                                      int64_t diag_every, int64_t restart_every);

/* Output at listed times during fmk_sim_run: a snapshot (dir/snapshot_NNN.hdf5, numbered
 * with the others, a PNG with it when set_output's png) when the time reaches each of the n
 * times (a values in a comoving run; increasing, finite; n = 0 clears the list). The run
 * lands on each exactly: the step that would pass one is shortened to end on it (the steps
 * after it keep opts.dt). The files go into fmk_sim_set_output's directory: call that after
 * this call (it then keeps the directory even with every cadence 0); fmk_sim_run with listed
 * times and no directory is FMK_ERR_STATE (the snapshots are never dropped silently). A time
 * at or before the current one is written only when it equals it (at the start of a run). */
FMK_API fmk_status fmk_sim_set_output_times(fmk_sim *sim, int64_t n, const double *times);

/* The PNGs of the run's snapshots: projected along axis (0, 1, 2; default 2), width x width
 * pixels (default 512), a square of side extent length units about the centre of mass
 * (comoving Mpc in a comoving run; 0, the default: the square holding 99% of the mass). */
FMK_API fmk_status fmk_sim_set_png(fmk_sim *sim, int axis, int width, double extent);

/* Comoving runs: the reference energy of W = (U - U_ref) / a becomes U at these n (the
 * simulation's n) host positions with the simulation's masses and softening, e.g. the
 * unperturbed lattice of the initial conditions (fmk_sim_ic_cosmo with lpt_order 0), so that
 * W is the peculiar potential energy and the Layzer-Irvine error is relative to it (by
 * default U_ref is that of a uniform sphere of radius opts.radius, which differs from the
 * lattice's by the discreteness and edge energy). Before the first step only (FMK_ERR_STATE
 * after); one force evaluation; kept in restarts. */
FMK_API fmk_status fmk_sim_set_energy_reference(fmk_sim *sim, int64_t n, const double *pos);

/* The state now: any of mass (n), pos, vel, acc (3n each) and pot (n; the softened potential
 * G sum_{j != i} m_j phi_s at each particle, positive as fmmkit's potential: the gravitational
 * potential is -pot) may be NULL. pot after steps that did not compute it: one evaluation at
 * the current positions now (the accelerations stay the step's). On a distributed simulation
 * that evaluation is collective: a call with pot must then be made on every rank with pot
 * non-NULL on each (or after fmk_sim_info_get, which makes it current on every rank). */
FMK_API fmk_status fmk_sim_get_state(const fmk_sim *sim, double *mass, double *pos, double *vel,
                                     double *acc, double *pot);

/* The particles' ids (n), in fmk_sim_get_state's order. A distributed simulation's ranks hold
 * the particles that the force partition gives them, which change from step to step
 * (docs/distributed.md, "The simulation under MPI"): the ids say which these are. */
FMK_API fmk_status fmk_sim_get_ids(const fmk_sim *sim, uint64_t *ids);

/* The same with CUDA device pointers (a simulation on FMK_BACKEND_CUDA; else
 * FMK_ERR_ARG): the state is copied on the device, never through the host (create checks the
 * arrays on the device and keeps a host copy of the masses, which never change). */
FMK_API fmk_status fmk_sim_create_device(fmk_sim **sim, int64_t n, const double *d_mass,
                                         const double *d_pos, const double *d_vel,
                                         const fmk_sim_opts *opts);
FMK_API fmk_status fmk_sim_get_state_device(const fmk_sim *sim, double *d_mass, double *d_pos,
                                            double *d_vel, double *d_acc, double *d_pot);

/* Energies, momenta and counts now (the potential evaluated first where the last step did not
 * compute it). Collective on a distributed simulation (its sums are reduced over the ranks). */
FMK_API fmk_status fmk_sim_info_get(const fmk_sim *sim, fmk_sim_info *info);

FMK_API fmk_status fmk_sim_write_snapshot(fmk_sim *sim, const char *path);
FMK_API fmk_status fmk_sim_write_restart(fmk_sim *sim, const char *path);
FMK_API fmk_status fmk_sim_write_png(fmk_sim *sim, const char *path, int axis, int width);

/* As fmk_plan_interrupt: safe from any thread or a signal handler. */
FMK_API fmk_status fmk_sim_interrupt(fmk_sim *sim);

FMK_API const char *fmk_sim_last_error(const fmk_sim *sim);

FMK_API void fmk_sim_destroy(fmk_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_SIM_H */
