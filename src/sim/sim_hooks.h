/*
 * sim_hooks.h -- the contract between the simulation driver (libfmmkit) and libfmmkit_mpi for
 * distributed simulations (docs/distributed.md, "The simulation under MPI"). Never installed;
 * the functions declared here are exported from libfmmkit (FMK_API) so that libfmmkit_mpi can
 * call them, as src/core/hooks.h does for plans.
 *
 * A distributed simulation holds a communicator through this table: what the driver needs
 * from it (reductions of a few doubles, the agreement of statuses, the gathering of particles
 * on rank 0 for its files, their scattering from rank 0, and a distributed force plan). The
 * table's state (an MPI communicator in libfmmkit_mpi) is the hooks' own; the driver never
 * reads it, so libfmmkit needs no MPI type. Every hook is collective over the communicator.
 * Data move as 64-bit words (doubles and uint64 ids alike, bit for bit).
 */
#ifndef FMMKIT_SIM_HOOKS_H
#define FMMKIT_SIM_HOOKS_H

#include "fmmkit_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fmk_sim_reduce_op {
    FMK_SIM_REDUCE_SUM = 0,
    FMK_SIM_REDUCE_MIN = 1,
    FMK_SIM_REDUCE_MAX = 2
} fmk_sim_reduce_op;

typedef struct fmk_sim_hooks {
    const char *name; /* for messages: "mpi" */
    /* x[0..count) reduced over the ranks, in place, on every rank */
    void (*reduce)(void *state, double *x, int count, fmk_sim_reduce_op op);
    /* every rank's value, in rank order, into all[size] on every rank */
    void (*allgather)(void *state, int64_t value, int64_t *all);
    /* the most severe of the ranks' statuses on every rank (ties: the lowest rank's); where it
     * is not FMK_OK, message (cap bytes; in: this rank's message) becomes "rank R: <R's
     * message>" on every rank */
    fmk_status (*agree)(void *state, fmk_status status, char *message, size_t cap);
    /* rank 0 receives counts[r] words of each rank r into recv, in rank order (recv unused
     * elsewhere); counts (every rank's, from allgather) each at most INT_MAX */
    void (*gather)(void *state, const void *send, const int64_t *counts, void *recv);
    /* the inverse: rank r receives counts[r] words of rank 0's send into recv */
    void (*scatter)(void *state, const void *send, const int64_t *counts, void *recv);
    /* words from rank 0 to every rank (at most INT_MAX) */
    void (*bcast)(void *state, void *buf, int64_t words);
    /* the force plan: a distributed plan over the communicator (arguments as fmk_plan_create;
     * message in fmk_plan_last_error(NULL) on failure, agreed) */
    fmk_status (*plan_create)(void *state, fmk_plan **plan, int dim, fmk_kernel kernel, double eps,
                              const fmk_opts *opts);
    /* this rank's value to each rank: send[r] goes to rank r, which finds it in its recv[this
     * rank] (size values each) */
    void (*alltoall)(void *state, const int64_t *send, int64_t *recv);
    /* rows of width words: send_counts[r] rows of send (in rank order) to each rank r, and
     * recv_counts[r] rows from each rank r into recv, in rank order; each side's rows at most
     * INT_MAX in all */
    void (*alltoallv)(void *state, const void *send, const int64_t *send_counts, void *recv,
                      const int64_t *recv_counts, int width);
    /* The rank that evaluated each of this rank's n targets at the last set_points of plan
     * (the force plan, from plan_create), into owner[n], and whether the plan's sources were
     * distributed then (1; 0: every rank summed all of them, gathered in rank order);
     * FMK_ERR_STATE when the plan does not know (no points, or another count of targets
     * then). Local. */
    fmk_status (*owners)(void *state, const fmk_plan *plan, int64_t n, int *owner,
                         int *distributed);
    /* This rank's targets are now n particles that all belong here (they migrated to the
     * ranks that evaluated them): what the plan knows of the last partition follows. Local. */
    void (*owners_here)(void *state, fmk_plan *plan, int64_t n);
    /* The rows (width doubles each, a position first) of the other ranks' particles closer
     * than radius to the boxes that hold this rank's n rows (every pair of particles of two
     * ranks closer than radius is in them): malloc'ed into *rows (NULL on failure), *n_rows of
     * them. Collective; the status (FMK_OK or FMK_ERR_NOMEM) the same on every rank, its
     * message in fmk_plan_last_error(NULL). */
    fmk_status (*halo)(void *state, int64_t n, int width, const double *rows_here, double radius,
                       double **rows, int64_t *n_rows);
    /* frees the state (collective: fmk_sim_destroy is) */
    void (*release)(void *state);
} fmk_sim_hooks;

/* A communicator as the driver holds it: the table, its state, this rank and the ranks. */
typedef struct fmk_sim_comm {
    const fmk_sim_hooks *hooks;
    void *state;
    int rank, size;
} fmk_sim_comm;

/* fmk_sim_create over comm: each rank gives its own n >= 0 particles (the arrays may be NULL
 * when n = 0); ids NULL: the global index + 1 in rank order. Collective; the simulation owns
 * comm->state from the call on (released on failure too). */
FMK_API fmk_status fmk_sim_create_comm(fmk_sim **sim, const fmk_sim_comm *comm, int64_t n,
                                       const double *mass, const double *pos, const double *vel,
                                       const double *soft_per_particle, const uint64_t *ids,
                                       const fmk_sim_opts *opts);

/* The same with every particle given on rank 0 (n, arrays; ignored on the other ranks),
 * scattered in equal shares in their order (rank r: n / size, one more when r < n % size). */
FMK_API fmk_status fmk_sim_create_root_comm(fmk_sim **sim, const fmk_sim_comm *comm, int64_t n,
                                            const double *mass, const double *pos,
                                            const double *vel, const fmk_sim_opts *opts);

/* fmk_sim_create_from_file over comm: rank 0 reads path (path may be NULL elsewhere); a
 * snapshot's particles are scattered in equal shares; a restart's go back to the ranks that
 * wrote them when it was written on as many ranks, else in equal shares. */
FMK_API fmk_status fmk_sim_create_from_file_comm(fmk_sim **sim, const fmk_sim_comm *comm,
                                                 const char *path, const fmk_sim_opts *opts);

/* Records message as the calling thread's fmk_sim_last_error(NULL) and returns status. */
FMK_API fmk_status fmk_sim_hook_error(fmk_status status, const char *message);

/* 1 when sim is distributed with these hooks. */
FMK_API int fmk_sim_has_hooks(const fmk_sim *sim, const fmk_sim_hooks *hooks);

/* Migration (migrate.c; docs/distributed.md, "The simulation under MPI"), for tests: the
 * counts of this rank, and the switch (on by default; off: the particles stay where they were
 * given, as before migration existed). */
typedef struct fmk_sim_migration {
    int64_t elsewhere;       /* this rank's particles the last step's forces evaluated elsewhere */
    int64_t elsewhere_total; /* the same summed over the ranks */
    int64_t sent;            /* the particles this rank sent to others in migrations, so far */
    int64_t migrations;      /* the migrations so far (the same on every rank) */
} fmk_sim_migration;
FMK_API void fmk_sim_migration_get(const fmk_sim *sim, fmk_sim_migration *m);
FMK_API void fmk_sim_set_migrate(fmk_sim *sim, int on);
/* The force plan (for tests: fmk_plan_mpi_info, the test knobs of src/mpi/mpi_internal.h). */
FMK_API fmk_plan *fmk_sim_force_plan(fmk_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_SIM_HOOKS_H */
