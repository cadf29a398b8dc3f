/*
 * mpi_internal.h -- definitions shared by the files of libfmmkit_mpi (never installed).
 *
 * A distributed plan is an fmk_plan with hooks (core/hooks.h) whose state is an fmk_mpi_state:
 * the plan's own communicator and the local plan that does this rank's work. The first
 * implementation replicates the sources (docs/distributed.md, "replicated sources").
 */
#ifndef FMMKIT_MPI_INTERNAL_H
#define FMMKIT_MPI_INTERNAL_H

#include <mpi.h>

#include "fmmkit_mpi.h"

/* The work buffers a distributed plan keeps from call to call (scratch.c), one a slot: two
 * buffers alive at once never share a slot. */
typedef enum fmk_mpi_slot {
    FMK_MPI_STAGED = 0, /* eval: the local plan's results */
    FMK_MPI_OUT,        /* eval: the results' rows to send home (several vectors) */
    FMK_MPI_BACK,       /* eval: the rows come home */
    FMK_MPI_BACK2,      /* eval: the gradients come home (one vector) */
    FMK_MPI_CHARGES,    /* eval: the local plan's charges */
    FMK_MPI_OWN_Q,      /* eval: the kept sources' charges (rows) */
    FMK_MPI_TARGET_Q,   /* eval: the moved targets' own charges (rows) */
    FMK_MPI_TARGET_QV,  /* eval: the same, vector after vector */
    FMK_MPI_SEND,       /* eval: the rows to send */
    FMK_MPI_ROWS,       /* eval: the rows received */
    FMK_MPI_SLOTS
} fmk_mpi_slot;

typedef struct fmk_mpi_buffer {
    void *p;
    size_t cap;
} fmk_mpi_buffer;

/* comm.c: the first failed MPI call on one of the library's communicators (docs/distributed.md,
 * "MPI's own errors"). Once failed, no MPI call is made on that communicator again. */
typedef struct fmk_mpi_fault {
    int failed;
    char message[512]; /* "<call> failed: <MPI's words> ..." */
} fmk_mpi_fault;

typedef struct fmk_mpi_state {
    MPI_Comm comm;       /* MPI_Comm_dup of the caller's, errors returned (fmk_mpi_open) */
    fmk_mpi_fault fault; /* an MPI call on comm failed */
    int rank, size;
    fmk_plan *local; /* every rank's sources, this rank's targets */
    int dim;
    fmk_kernel kernel;
    double softening;             /* opts.softening */
    int charge_width;             /* doubles a charge (and a potential): 2 for cauchy2d, else 1 */
    int grad_width;               /* doubles a gradient */
    int64_t n_sources, n_targets; /* this rank's, as given (n_targets = n_sources for self) */
    int64_t n_all;                /* the sources of every rank */
    int has_points;               /* the last set_points succeeded (on every rank) */
    int *counts, *displs;         /* per rank: its sources and its first in the global order */
    /* self term to remove: this rank's targets are its sources and the local plan's engine
     * keeps the coincident pair of a smooth kernel, q_i * self_value (0: nothing to remove) */
    double self_value;
    fmk_method method; /* opts.method */
    /* The partition of the targets (partition.c; docs/distributed.md, "Partition"): where the
     * targets' weight is uneven (max rank / mean over balance, default 1.05; 0: always), each
     * rank's local plan evaluates a run of the space-filling curve instead of its own. */
    double balance;
    double imbalance;    /* max rank weight / mean at the last set_points */
    int moved;           /* the targets moved: the local plan has n_local targets of any rank */
    int64_t n_local;     /* the targets this rank evaluates */
    int *part_counts;    /* 4 x size: send counts, send displs, recv counts, recv displs */
    int64_t *order;      /* n_targets: the caller's index of the k-th target sent */
    int64_t *local_src;  /* n_local: each evaluated target's global source index, -1 none */
    uint64_t *split_key; /* size - 1: the partition's splitters' keys (where moved) */
    /* The partition's weights (partition.c): each rank's cost a target, the mean of the last
     * evaluation's measurement (seconds of its local plan's evaluation / its targets) and the
     * estimate before it (0: not measured; then size more doubles of work), and the rank
     * that evaluated each of this rank's targets at the last set_points (owner_n of them). */
    double *cost;
    int *owner;
    int64_t owner_n;
    int self; /* this rank's targets are its sources (targets NULL) */
    /* The distributed sources of the treecode and the laplace FMM (let.c): where let_on
     * (default 1) and the method is tree, or fmm with kernel laplace, in 3D on several ranks,
     * the sources stay on their run's rank and the other ranks get their locally essential
     * trees; NULL: the replicated sources. */
    int let_on;
    double theta; /* opts.theta (0: the method's default) */
    struct fmk_mpi_let *let;
    fmk_mpi_info stats; /* fmk_plan_mpi_info's */
    fmk_mpi_buffer scratch[FMK_MPI_SLOTS];
} fmk_mpi_state;

typedef struct fmk_mpi_let fmk_mpi_let;

/* plan_mpi.c: a distributed plan's host calls (the hooks set_points and eval_many). */
fmk_status fmk_mpi_set_points_host(fmk_plan *plan, int64_t ns, const double *sources, int64_t nt,
                                   const double *targets);
fmk_status fmk_mpi_eval_host(fmk_plan *plan, int is_many, int64_t nd, const double *charges,
                             double *pot, double *grad);
/* device.c: the hooks of the *_device calls (core/hooks.h): the device arrays staged through
 * host memory (every rank agrees on the copies' statuses), then the host calls. */
fmk_status fmk_mpi_set_points_device(fmk_plan *plan, int64_t ns, const double *d_sources,
                                     int64_t nt, const double *d_targets);
fmk_status fmk_mpi_eval_many_device(fmk_plan *plan, int is_many, int64_t nd,
                                    const double *d_charges, double *d_pot, double *d_grad);

/* scratch.c: the slot's buffer with at least bytes (its contents undefined), NULL when out of
 * memory; freed by fmk_mpi_scratch_free. bytes: what the slots hold now. */
void *fmk_mpi_scratch(fmk_mpi_state *s, fmk_mpi_slot slot, size_t bytes);
/* scratch.c: malloc for the large arrays of the host's O(n) steps (freed by free): from 2 MiB
 * up, 2 MiB aligned and advised as huge pages, a page fault a 2 MiB instead of a 4 KiB where
 * the system has them; *cap (if not NULL): the bytes had. */
void *fmk_mpi_alloc(size_t bytes, size_t *cap);
void fmk_mpi_scratch_free(fmk_mpi_state *s);
int64_t fmk_mpi_scratch_bytes(const fmk_mpi_state *s);

/* comm.c: the status of an MPI call's return code rc: FMK_OK for MPI_SUCCESS, else the fault
 * recorded (the first one's message kept) and FMK_ERR_INTERNAL with "<call> failed: <MPI's
 * words>" on plan (NULL: the calling thread). */
fmk_status fmk_mpi_check(fmk_plan *plan, fmk_mpi_fault *fault, int rc, const char *call);
/* comm.c: FMK_ERR_INTERNAL with the fault's message on plan (an MPI call failed before). */
fmk_status fmk_mpi_failed_before(fmk_plan *plan, const fmk_mpi_fault *fault);
/* comm.c: FMK_ERR_STATE for the entry point fn of a plan or simulation whose communicator
 * failed in an earlier call (no MPI call is made). */
fmk_status fmk_mpi_refuse_failed(fmk_plan *plan, const fmk_mpi_fault *fault, const char *fn);
/* The status of the MPI function fn called with args (in parentheses) on a communicator of
 * fault: every MPI call on the library's communicators goes through it. Where the
 * communicator failed before, fn is not called (fmk_mpi_failed_before). */
#define FMK_MPI(plan, fault, fn, args)                        \
    ((fault)->failed ? fmk_mpi_failed_before((plan), (fault)) \
                     : fmk_mpi_check((plan), (fault), fn args, #fn))
/* comm.c: MPI_Alltoallv (and MPI_Allgatherv) of rows of width values of base (doubles),
 * through a contiguous type made and freed here; counts and displacements in rows. */
fmk_status fmk_mpi_alltoallv_rows(fmk_plan *plan, fmk_mpi_fault *fault, MPI_Comm comm,
                                  const void *send, const int *sc, const int *sd, void *recv,
                                  const int *rc, const int *rd, int width, MPI_Datatype base);
fmk_status fmk_mpi_allgatherv_rows(fmk_plan *plan, fmk_mpi_fault *fault, MPI_Comm comm,
                                   const void *send, int n, void *recv, const int *counts,
                                   const int *displs, int width);
/* comm.c: the caller's comm checked (MPI initialized and not finalized: FMK_ERR_STATE;
 * MPI_COMM_NULL or an intercommunicator: FMK_ERR_ARG) and duplicated into *dup with
 * MPI_ERRORS_RETURN (the caller's keeps its handler); fn names the entry point in the message,
 * on the calling thread. Collective where the checks pass; the status is this rank's. */
fmk_status fmk_mpi_open(MPI_Comm comm, const char *fn, MPI_Comm *dup);

/* agree.c: the agreement of every collective step. Each rank gives its own status; every rank
 * gets the most severe one (ties: the lowest rank's), and where it is not FMK_OK, the message
 * "rank R: <message>" on plan (NULL: the calling thread), R's message read from
 * fmk_plan_last_error(plan) on R. Where an MPI call on comm failed (fault, before or in the
 * agreement itself), no agreement: this rank's FMK_ERR_INTERNAL and the fault's message. */
fmk_status fmk_mpi_agree(fmk_plan *plan, MPI_Comm comm, int rank, fmk_mpi_fault *fault,
                         fmk_status status);

/* agree.c: FMK_ERR_ARG (on the calling thread) unless every rank passed the same dim, kernel,
 * eps and options that must match; collective. */
fmk_status fmk_mpi_same_arguments(MPI_Comm comm, fmk_mpi_fault *fault, int dim, fmk_kernel kernel,
                                  double eps, const fmk_opts *opts);

/* partition.c: collective. Frees the last partition, then, where the targets' weight is
 * uneven (or always, with balance 0), moves them to the owners of equal-weight runs of the curve
 * and sets *local_targets (malloc'ed, n_local points) to this rank's new targets; otherwise
 * leaves s->moved 0. x: this rank's n_targets targets; src_offset: the global source index of
 * target 0 where the targets are the sources, else -1; by_index: keys are those indices (every
 * rank's targets are its sources) instead of Morton keys in the box lo, hi. Agreed status. */
fmk_status fmk_mpi_partition(fmk_plan *plan, fmk_mpi_state *s, int64_t n_targets, const double *x,
                             int64_t src_offset, int by_index, int force, const double lo[3],
                             const double hi[3], double **local_targets);
/* sort.c: a (key, index) pair, and the stable sort of n of them by the key's low key_bits bits
 * (0, or -1 when out of memory). */
typedef struct fmk_mpi_keyed {
    uint64_t key;
    int64_t index;
} fmk_mpi_keyed;
int fmk_mpi_sort(fmk_mpi_keyed *a, int64_t n, int key_bits);
/* sort.c: the same sort on the GPU of plan gpu (an ordinary plan of backend cuda: the local
 * plan) from 2^20 pairs on, where it can (fmk_plan_hook_sort_pairs), else on the host. */
int fmk_mpi_sort_on(fmk_plan *gpu, fmk_mpi_keyed *a, int64_t n, int key_bits);

/* partition.c: Morton keys in the global box (21 bits an axis in 3D, 16 in 2D) */
double fmk_mpi_morton_scale(int dim, const double lo[3], const double hi[3]);
uint64_t fmk_mpi_morton(const double *x, int dim, const double lo[3], double scale);
/* whether a source of this key belongs to rank j + 1 or later (the last partition's splitters) */
int fmk_mpi_at_or_after_split(const fmk_mpi_state *s, int j, uint64_t key);
void fmk_mpi_partition_free(fmk_mpi_state *s);
/* The first global source index of moved targets that are a slice of the sources, else -1. */
int64_t fmk_mpi_moved_slice(const fmk_mpi_state *s);
/* Subtracts q G(0) (s->self_value) from each moved target that is a source. */
void fmk_mpi_remove_self_moved(const fmk_mpi_state *s, int64_t nd, const double *all_q,
                               double *pot);
/* collective: the moved targets' results (lpot, lgrad: nd vectors of n_local; NULL: not
 * asked) back to their ranks, into pot, grad in the caller's order. Agreed status; the outputs
 * are written only on success. */
fmk_status fmk_mpi_send_home(fmk_plan *plan, fmk_mpi_state *s, int64_t nd, const double *lpot,
                             const double *lgrad, double *pot, double *grad);

/* let.c: the treecode's distributed sources (docs/distributed.md, "Treecode: locally
 * essential trees"). applies: the plan takes this path. setup (collective, after the targets'
 * partition, *moved: the nt targets moved here): keeps this rank's sources of its run (all_self:
 * they are the targets moved here, and the array *moved is taken, *moved set to NULL; else routed
 * by the splitters), builds their tree, exchanges
 * the locally essential trees' positions and returns the local plan's sources (the own ones
 * first, then what the other ranks sent; malloc'ed). charges (collective, each evaluation):
 * the local plan's charges (nd vectors of n_let_sources, malloc'ed) and the moved targets' own
 * charges (their coincident source's, for the self term; nd vectors of n_local). Statuses
 * agreed. */
int fmk_mpi_let_applies(const fmk_mpi_state *s);
fmk_status fmk_mpi_let_setup(fmk_plan *plan, fmk_mpi_state *s, int64_t ns, const double *sources,
                             int all_self, double **moved, int64_t nt, const double lo[3],
                             const double hi[3], double theta, double **let_sources,
                             int64_t *n_let_sources);
fmk_status fmk_mpi_let_charges(fmk_plan *plan, fmk_mpi_state *s, int64_t nd, const double *charges,
                               int self, double **local_q, double **target_q);
int64_t fmk_mpi_let_own(const fmk_mpi_state *s);
void fmk_mpi_let_free(fmk_mpi_state *s);

/* plan_mpi.c: a distributed plan's state (NULL: another plan, or NULL). */
fmk_mpi_state *fmk_mpi_plan_state(const fmk_plan *plan);

/* owners.c: the partition's owners for the simulation's particles (src/sim/migrate.c).
 * fmk_mpi_plan_owners: the rank that evaluated each of this rank's n targets at the last
 * set_points, into owner[n], and whether the sources were distributed (the treecode's locally
 * essential trees) then (FMK_ERR_STATE: no points, or not n targets then).
 * fmk_mpi_plan_owners_here: this rank's targets are now n that all belong here (they moved to
 * their owners), so that the next partition weighs them with this rank's measured cost. */
fmk_status fmk_mpi_plan_owners(const fmk_plan *plan, int64_t n, int *owner, int *distributed);
void fmk_mpi_plan_owners_here(fmk_plan *plan, int64_t n);

/* For tests (exported, not in the public header): the imbalance above which a distributed plan
 * moves its targets at the next set_points (0: always), and the count of targets this rank
 * evaluated at the last set_points (its own, or those moved to it). */
FMK_API void fmk_mpi_set_balance(fmk_plan *plan, double balance);
FMK_API int64_t fmk_mpi_evaluated_targets(const fmk_plan *plan);
/* For tests: the distributed sources of the treecode and the laplace FMM on (1, the default)
 * or off (0: replicated), from the next set_points; the sources this rank keeps and the local
 * plan's sources. */
FMK_API void fmk_mpi_set_let(fmk_plan *plan, int on);
/* For tests: every rank's cost a target (size values), as if the last evaluation measured them. */
FMK_API void fmk_mpi_set_costs(fmk_plan *plan, const double *cost);
FMK_API void fmk_mpi_let_counts(const fmk_plan *plan, int64_t *own, int64_t *local_sources);

#endif /* FMMKIT_MPI_INTERNAL_H */
