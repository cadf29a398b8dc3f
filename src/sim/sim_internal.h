/*
 * sim_internal.h -- what the files of the simulation driver share (never installed;
 * docs/simulation.md). The driver sees fmmkit only through include/fmmkit.h: its forces come
 * from an fmk_plan, never from src/core.
 *
 *   sim.c       life cycle: options and their checks, create (host and device arrays),
 *               destroy, get_state, info, messages, interrupt
 *   forces.c    one force evaluation: the plan's set_points + eval (host or device), the
 *               spline correction, checks and timers
 *   spline.c    GADGET's cubic spline softening on the CPU: the plan's 1/r result corrected
 *               pair by pair inside h (spline.h: the formulas and the hashed cell list)
 *   step.c      kick-drift-kick leapfrog, the adaptive global step, fmk_sim_step, fmk_sim_run
 *               with its output cadence and progress bar
 *   diag.c      energies, momentum, angular momentum; the diagnostics CSV
 *   restart.c   the state blob and checkpoints (restart in memory), restart and snapshot files
 *               through the file layer (sim_io.h), create_from_file, set_output
 *   ic.c        initial conditions and the driver's random stream (splitmix64)
 *   dist.c      distributed simulations (sim_hooks.h): agreed statuses, reductions, the
 *               particles gathered on rank 0 for the files, create over a communicator
 *   dist_file.c create_from_file over a communicator: rank 0 reads, the particles scattered
 *   migrate.c   distributed simulations: the particles moved after a step to the ranks that
 *               evaluated their forces; the snapshot's particles sorted by id on rank 0
 *   device.c    the bridge to the device-resident state (cuda/sim_cuda.h); FMK_ERR_UNAVAILABLE
 *               in a build without CUDA
 *   cuda/       kick and drift kernels, reductions, the spline correction on the GPU
 *   io/         the file layer (HDF5, PNG), behind sim_io.h
 *
 * The state is double-buffered: a step drifts the positions into pos_next, evaluates the
 * forces into acc_next and pot_next, and only when all of that succeeded kicks the velocities
 * and swaps the buffers. A step that fails (out of memory, an interrupt, FMK_ERR_ACCURACY, a
 * result that is not finite) therefore leaves the state exactly as it was before the step.
 */
#ifndef FMMKIT_SIM_INTERNAL_H
#define FMMKIT_SIM_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "fmmkit_sim.h"
#include "sim/sim_hooks.h"
#include "sim/sim_io.h"
#include "sim/spline.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FMK_SIM_ERROR_LEN 512

struct fmk_sim_cuda; /* cuda/sim_cuda.h: the device-resident state */

/* The CPU spline correction's hashed cell list (spline.c), kept between steps. */
typedef struct fmk_sim_cells {
    int64_t cap;      /* the particles (this rank's and the halo's) the arrays hold */
    int64_t table;    /* buckets: a power of two >= cap */
    int64_t *start;   /* table + 1: the first sorted index of each bucket */
    int64_t *order;   /* n: particle indices sorted by bucket (stable) */
    uint32_t *bucket; /* n: each particle's bucket */
} fmk_sim_cells;

struct fmk_sim {
    int64_t n;         /* this rank's particles (all of them unless distributed) */
    int64_t n_total;   /* every rank's */
    fmk_sim_comm comm; /* distributed (sim_hooks.h): hooks not NULL; else hooks NULL, size 1 */
    fmk_sim_opts opts; /* as checked; opts.eps resolved (never 0) */
    fmk_kernel kernel; /* plummer (s > 0, FMK_SIM_SOFT_PLUMMER) or laplace */
    int spline;        /* 1: the spline correction runs (FMK_SIM_SOFT_SPLINE with some s > 0) */
    double h_max;      /* spline: the largest h = 2.8 s (the cell size), else 0 */
    fmk_plan *plan;
    fmk_backend backend; /* the plan's resolved backend */
    int threads;         /* the driver's own OpenMP loops: opts.plan.threads or 0 (default) */

    /* Host state. On the CPU backend: pos, vel, acc, pot are the state (and the _next arrays
     * the other half of the double buffer). On the CUDA backend those live on the device
     * (dev) and these host arrays are NULL, except the ones that never change. */
    double *mass, *charge; /* n: masses and the plan's charges G m */
    double *soft;          /* n per-particle softening lengths, or NULL (opts.soft for all) */
    uint64_t *id;          /* n */
    double *pos, *vel, *acc, *pot;
    double *pos_next, *acc_next, *pot_next;
    double *saved; /* FMK_SIM_YOSHIDA4: pos, vel, acc, pot before a step (10n), else NULL */
    fmk_sim_cells cells;
    struct fmk_sim_cuda *dev; /* CUDA backend: the device state, else NULL */

    /* Where the simulation is. */
    int64_t step;
    double time; /* comoving: the scale factor a */
    double dt_last;
    int64_t interactions_total; /* the plan's work estimates summed (0: unknown) */

    /* The potential is evaluated only where it is read (docs/simulation.md, "When the
     * potential is computed"): pot_ok 1 when pot (device: the device's) holds the potential at
     * the current positions; plan_here 1 when the plan's points are the current positions in
     * their order (the last set_points: a step's, or fmk_sim_potential's), so that the
     * potential alone needs no set_points. Both are the same on every rank. */
    int pot_ok, plan_here;

    /* Comoving runs (opts.comoving; else all 0): the stepping variable u (cosmic time, a or
     * ln a, opts.spacing) that the fixed steps advance (time = a(u), exactly the landing a
     * on a landing), the background's c = H0^2 omega_m / 2, the reference energy U_ref, and
     * the Layzer-Irvine bookkeeping: K at the current a, int K da so far (trapezoid), C at the
     * start and max |a W| so far. They travel in restarts. */
    double u;
    double cosmo_c, u_ref;
    int u_ref_set;   /* 1: U_ref from fmk_sim_set_energy_reference, else the uniform sphere's */
    double soft_now; /* the force plan's softening now (FMK_SIM_SOFT_PHYSICAL changes it) */
    double li_kinetic, li_integral, li_start, li_max_aw;
    int li_started; /* li_start and li_max_aw hold the start's values */

    /* Output at listed times (fmk_sim_set_output_times): increasing; not in restarts. */
    double *out_times;
    int64_t n_out_times;
    int png_axis, png_width;
    double png_extent;

    /* Output (fmk_sim_set_output); the counters travel in restarts. */
    char *out_dir;
    int64_t snap_every, diag_every, restart_every;
    int png;
    int64_t snap_count;        /* the next snapshot's number */
    int64_t snap_last_step;    /* the step of the last snapshot written (-1: none) */
    int64_t diag_last_step;    /* the step of the last diagnostics row (-1: none) */
    int64_t restart_last_step; /* the step of the last restart file (-1: none) */
    int from_restart;          /* created from a restart: diagnostics.csv is appended to */
    FILE *diag;                /* dir/diagnostics.csv, open while output is set */
    double diag_wall;          /* wall seconds of the steps since the last row */
    int64_t diag_steps;        /* and their number */

    double seconds_force, seconds_step;
    /* Migration (migrate.c): off (1) keeps the particles where they were given (a test's
     * reference); the counts of fmk_sim_migration_get. */
    int migrate_off;
    fmk_sim_migration migration;
    atomic_int stop; /* fmk_sim_interrupt */
    char error[FMK_SIM_ERROR_LEN];
};

/* Messages: on sim, or (sim NULL) on the calling thread; returns status. */
fmk_status fmk_sim_fail(fmk_sim *sim, fmk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The plan's message after a failed plan call, prefixed with what the driver was doing. */
fmk_status fmk_sim_fail_plan(fmk_sim *sim, fmk_status status, const char *doing);
double fmk_sim_now(void);
/* A sim that holds nothing: every pointer NULL, counters at their start. NULL when out of
 * memory. */
fmk_sim *fmk_sim_alloc(void);
/* The thread count of the driver's own OpenMP loops (opts.plan.threads, or OpenMP's). */
int fmk_sim_threads(const fmk_sim *sim);
/* n doubles (at least one), or NULL. */
double *fmk_sim_doubles(int64_t n);

/* sim.c: the checks of fmk_sim_create (they leave messages on the calling thread). */
fmk_status fmk_sim_check_opts(const fmk_sim_opts *o, int per_particle);
/* Builds a simulation from host arrays (already checked), with the state at (step, time)
 * and, when acc and pot are given, those forces instead of a first evaluation. */
typedef struct fmk_sim_init {
    int64_t n;
    const double *mass, *pos, *vel, *soft;
    const uint64_t *ids;
    const fmk_sim_comm *comm; /* distributed (the sim owns comm->state from then on), or NULL */
    const double *acc, *pot;  /* both or neither */
    int on_device;            /* 1: mass, pos and vel are device pointers (soft, ids NULL) */
    int64_t step;
    double time, dt_last;
    /* a restart's comoving state and work count (resume = 1), else a fresh start */
    int resume;
    double u, li_kinetic, li_integral, li_start, li_max_aw;
    int64_t interactions_total;
    int u_ref_set; /* 1: U_ref was set (fmk_sim_set_energy_reference) and is u_ref */
    double u_ref;
} fmk_sim_init;
fmk_status fmk_sim_build(fmk_sim **out, const fmk_sim_init *init, const fmk_sim_opts *opts);
fmk_status fmk_sim_check_particles(int64_t n, const double *mass, const double *pos,
                                   const double *vel, const double *soft, const fmk_sim_opts *o);

/* forces.c */
fmk_status fmk_sim_plan_make(fmk_sim *sim);
/* The forces at pos_next into acc_next and, when pot is 1, the potential into pot_next (device:
 * the device's next buffers); pot 0 passes NULL to the plan (cheaper) and leaves pot_next as it
 * was. */
fmk_status fmk_sim_forces(fmk_sim *sim, int pot);
/* Makes the potential current (pot_ok): nothing when it is; else one evaluation at the current
 * positions (set_points again unless plan_here) writing the potential into the state's pot and
 * the accelerations into a scratch buffer (acc_next: free between steps), so that the state's
 * accelerations, and with them the trajectory, never depend on whether the potential was
 * asked for. Not counted in interactions_total nor seconds_force. Collective on a distributed
 * simulation (every rank calls it: it is called where the caller already is collective).
 * Takes a const sim as the queries do (fmk_sim_info_get): the potential is a cache. */
fmk_status fmk_sim_potential(const fmk_sim *sim);
/* The plan's work estimate of one evaluation (0: unknown). */
int64_t fmk_sim_interactions(const fmk_sim *sim);

/* spline.c: adds the spline correction at pos into acc and pot (pot NULL: acc only; CPU);
 * interruptible. */
fmk_status fmk_sim_spline_cpu(fmk_sim *sim, const double *pos, double *acc, double *pot);
void fmk_sim_cells_free(fmk_sim_cells *c);

/* step.c. One step of dt in the stepping variable (time; comoving: opts.spacing's u); land
 * > 0 (comoving) ends it exactly at a = land instead; pot 1: its evaluation computes the
 * potential too (comoving runs always do: the Layzer-Irvine bookkeeping reads it). */
fmk_status fmk_sim_step_once(fmk_sim *sim, double dt, double land, int pot);
/* The step's dt before landing on an end time: fixed, or the adaptive criterion. */
fmk_status fmk_sim_next_dt(fmk_sim *sim, double *dt);

/* comoving.c: the comoving bookkeeping. */
/* The stepping variable u of a (opts.spacing) and its inverse. */
double fmk_sim_u_of_a(const fmk_sim *sim, double a);
double fmk_sim_a_of_u(const fmk_sim *sim, double u);
/* The checks of the comoving options (messages on the calling thread). */
fmk_status fmk_sim_check_comoving(const fmk_sim_opts *o);
/* c = H0^2 omega_m / 2 (0 when not comoving). */
double fmk_sim_comoving_c(const fmk_sim_opts *o);
/* After create: U_ref, u, and (start = 1) the Layzer-Irvine start values. */
fmk_status fmk_sim_comoving_init(fmk_sim *sim, int start);
/* After a step from a0 to the current a: the trapezoid of K, max |a W|. */
fmk_status fmk_sim_comoving_after_step(fmk_sim *sim, double a0);
/* The softening the plan needs at scale factor a (FMK_SIM_SOFT_PHYSICAL), remade when it
 * differs from soft_now. */
fmk_status fmk_sim_comoving_soft(fmk_sim *sim, double a);
double fmk_sim_comoving_soft_at(const fmk_sim_opts *o, double a);
/* The peculiar energies: K, W, U (comoving.c) from the sums of diag.c. */
typedef struct fmk_sim_cdiag {
    double kinetic, potential, u, c_li, li_error;
} fmk_sim_cdiag;
fmk_status fmk_sim_comoving_diag(const fmk_sim *sim, fmk_sim_cdiag *d);

/* diag.c */
typedef struct fmk_sim_diag {
    double kinetic, potential, momentum[3], angular_momentum[3];
} fmk_sim_diag;
/* Comoving sums at the current state: 1/2 sum m |p|^2, -1/2 sum m pot, sum m |x|^2. */
fmk_status fmk_sim_comoving_sums(const fmk_sim *sim, double sums[3]);
fmk_status fmk_sim_diagnostics(const fmk_sim *sim, fmk_sim_diag *d);
/* Opens dir/diagnostics.csv (truncated, or appended to after a restart; the header row when
 * empty) into *out. */
fmk_status fmk_sim_diag_open(fmk_sim *sim, const char *dir, FILE **out);
fmk_status fmk_sim_diag_row(fmk_sim *sim);

/* restart.c: the state in memory. A checkpoint holds host copies of everything a restart
 * needs; fmk_sim_create_from_checkpoint with opts NULL continues bit for bit. */
typedef struct fmk_sim_checkpoint {
    fmk_sim_particles p; /* pos, vel, mass, id, soft (NULL when none), time */
    double *acc, *pot;   /* 3n, n */
    void *state;         /* the blob: step, time, dt, options, output counters */
    size_t state_bytes;
} fmk_sim_checkpoint;
fmk_status fmk_sim_checkpoint_take(fmk_sim *sim, fmk_sim_checkpoint *cp);
void fmk_sim_checkpoint_free(fmk_sim_checkpoint *cp);
fmk_status fmk_sim_create_from_checkpoint(fmk_sim **sim, const fmk_sim_checkpoint *cp,
                                          const fmk_sim_opts *opts);
/* The output files due after a step (or at the start of a run). */
fmk_status fmk_sim_output_due(fmk_sim *sim);
/* 1 when the outputs due after the next step read the potential (a diagnostics row, a
 * restart file): fmk_sim_run asks that step's evaluation for it (output.c). */
int fmk_sim_output_reads_pot(const fmk_sim *sim);

/* ic.c: the driver's random stream. */
typedef struct fmk_sim_rng {
    uint64_t state;
} fmk_sim_rng;
double fmk_sim_rng_uniform(fmk_sim_rng *r); /* [0, 1), 53 bits */

/* dist.c: distributed simulations. Each is what its name says on a simulation that is not
 * distributed (no hooks), and collective on one that is. */
/* The status agreed over the ranks, the message of the failing rank in sim->error (sim NULL:
 * the thread's); st unchanged without hooks. */
fmk_status fmk_sim_dist_agree(fmk_sim *sim, fmk_status st);
fmk_status fmk_sim_comm_agree(const fmk_sim_comm *comm, fmk_sim *sim, fmk_status st);
/* x[0..count) summed (or op) over the ranks. */
void fmk_sim_dist_reduce(const fmk_sim *sim, double *x, int count, fmk_sim_reduce_op op);
/* 1 when fmk_sim_interrupt was called on any rank. */
int fmk_sim_dist_stopped(fmk_sim *sim);
int fmk_sim_is_root(const fmk_sim *sim);
/* Every rank's particles on rank 0 (into *all, with acc and pot when asked: restart), in rank
 * order (a restart's: the ranks' layout), or, without acc and pot (snapshots, PNGs), by id
 * (fmk_sim_dist_sort_ids); the other ranks get nothing (all->n 0). *all's arrays are to free with
 * fmk_sim_dist_free; without hooks *all is a copy of local. Agreed status. */
fmk_status fmk_sim_dist_gather(fmk_sim *sim, const fmk_sim_particles *local, const double *acc,
                               const double *pot, fmk_sim_particles *all, double **acc_all,
                               double **pot_all);
void fmk_sim_dist_free(const fmk_sim *sim, fmk_sim_particles *all, double *acc_all,
                       double *pot_all);
/* Creates over comm from this rank's share (n >= 0) at time (the snapshot's, or the options'
 * start): the checks agreed, ids NULL: the global index + 1. Owns comm->state. */
fmk_status fmk_sim_dist_create(fmk_sim **out, const fmk_sim_comm *comm, int64_t n,
                               const double *mass, const double *pos, const double *vel,
                               const double *soft, const uint64_t *ids, const double *time,
                               const fmk_sim_opts *opts);
/* migrate.c: after a step of a distributed simulation, every particle to the rank that
 * evaluated its forces, where enough of them were evaluated elsewhere (the file's comment).
 * Collective; never fails (a migration that cannot be made is left out: the state stays). */
void fmk_sim_dist_migrate(fmk_sim *sim);
/* Rank 0's gathered particles (pos, vel, mass, id; soft NULL) sorted by id, stably; agreed
 * status (FMK_ERR_NOMEM). */
fmk_status fmk_sim_dist_sort_ids(fmk_sim *sim, fmk_sim_particles *all);
/* rank r's share of n in equal shares: its count and first index. */
void fmk_sim_dist_share(int64_t n, int rank, int size, int64_t *count, int64_t *first);
/* restart.c: a distributed restart's blob: the global n and the ranks' counts appended
 * (rank 0, after the gather); *out malloc'ed. */
fmk_status fmk_sim_blob_distributed(const void *blob, size_t bytes, int64_t n_total, int ranks,
                                    const int64_t *counts, void **out, size_t *out_bytes);
/* The counts a blob's extension holds (ranks and counts malloc'ed, NULL when none) and n. */
fmk_status fmk_sim_blob_layout(const void *blob, size_t bytes, int64_t *n, int *has_soft,
                               int *ranks, int64_t **counts);
/* create_from_checkpoint over comm (NULL: one process): cp holds this rank's particles and
 * the blob of all of them. */
fmk_status fmk_sim_checkpoint_build(fmk_sim **out, const fmk_sim_checkpoint *cp,
                                    const fmk_sim_opts *opts, const fmk_sim_comm *comm);
/* The sim checks that hold for a local share (n >= 0; arrays may be NULL when n = 0). */
fmk_status fmk_sim_check_share(int64_t n, const double *mass, const double *pos, const double *vel,
                               const double *soft, const fmk_sim_opts *o);
/* The options that every rank of a distributed simulation must share (FMK_ERR_ARG, agreed). */
fmk_status fmk_sim_comm_same_opts(const fmk_sim_comm *comm, const fmk_sim_opts *o);

/* device.c: the device-resident state (CUDA backend). Each returns FMK_ERR_UNAVAILABLE in a
 * build without CUDA. Host arrays may be NULL where a call says so. */
fmk_status fmk_sim_dev_make(fmk_sim *sim);
/* Host arrays up (pos, vel, and acc + pot or NULL); pos goes into both halves of the double
 * buffer, so that the first evaluation can run on the next one. */
fmk_status fmk_sim_dev_upload(fmk_sim *sim, const double *pos, const double *vel, const double *acc,
                              const double *pot);
/* Device arrays in (copied on the device, checked there); mass to the host mirror too. */
fmk_status fmk_sim_dev_copy_in(fmk_sim *sim, const double *d_mass, const double *d_pos,
                               const double *d_vel);
fmk_status fmk_sim_dev_download(const fmk_sim *sim, double *pos, double *vel, double *acc,
                                double *pot);
fmk_status fmk_sim_dev_copy_out(const fmk_sim *sim, double *d_mass, double *d_pos, double *d_vel,
                                double *d_acc, double *d_pot);
/* The leapfrog's factors: pos_next = pos + (vel + acc k1) d; vel = (vel + acc k1) + acc_next k2
 * (Newtonian: k1 = k2 = dt / 2, d = dt). */
fmk_status fmk_sim_dev_drift(fmk_sim *sim, double k1, double d);
fmk_status fmk_sim_dev_forces(fmk_sim *sim, int pot);
/* The potential at the current positions into the state's device pot, the accelerations into
 * the next buffer (scratch between steps); set_points again when points is 1. */
fmk_status fmk_sim_dev_potential(fmk_sim *sim, int points);
fmk_status fmk_sim_dev_kick_swap(fmk_sim *sim, double k1, double k2);
void fmk_sim_dev_swap(fmk_sim *sim); /* the next buffers become the state (no kick) */
fmk_status fmk_sim_dev_max_acc(fmk_sim *sim, double *value);
fmk_status fmk_sim_dev_comoving_sums(const fmk_sim *sim, double sums[3]);
fmk_status fmk_sim_dev_diagnostics(const fmk_sim *sim, fmk_sim_diag *d);
void fmk_sim_dev_free(fmk_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_SIM_INTERNAL_H */
