/* sim_mpi.c -- distributed simulations: the MPI behind the simulation driver's communicator
 * hooks (src/sim/sim_hooks.h) and fmk_sim_create_mpi and its kin (include/fmmkit_mpi.h;
 * docs/distributed.md, "The simulation under MPI"). The driver itself (libfmmkit) does the
 * rest; this file is all the MPI it needs.
 *
 * The hooks that return nothing (the driver's contract, src/sim/sim_hooks.h) keep a failed MPI
 * call in the state's fault (comm.c): their outputs are then defined (this rank's own values, or
 * zeros), no MPI call is made on the communicator again, and the driver's next agreement
 * (hook_agree) returns the failure on this rank (docs/distributed.md, "MPI's own errors"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "fmmkit_mpi.h"
#include "mpi/mpi_internal.h"
#include "mpi/sim/halo.h"
#include "sim/sim_hooks.h"

typedef struct sim_mpi_state {
    MPI_Comm comm;       /* MPI_Comm_dup of the caller's, errors returned (fmk_mpi_open) */
    fmk_mpi_fault fault; /* an MPI call on comm failed */
    int rank, size;
    int *counts, *displs; /* size each: one gather's or scatter's */
    int *a2a;             /* 4 x size: an alltoallv's counts and displacements */
} sim_mpi_state;

static void hook_reduce(void *state, double *x, int count, fmk_sim_reduce_op op)
{
    sim_mpi_state *s = state;
    const MPI_Op mop = op == FMK_SIM_REDUCE_MIN   ? MPI_MIN
                       : op == FMK_SIM_REDUCE_MAX ? MPI_MAX
                                                  : MPI_SUM;
    /* failed: x keeps this rank's values (MPI_IN_PLACE) */
    FMK_MPI(NULL, &s->fault, MPI_Allreduce, (MPI_IN_PLACE, x, count, MPI_DOUBLE, mop, s->comm));
}

/* The outputs of a failed hook: bytes of zeros at out. */
static void zero_failed(fmk_status st, void *out, size_t bytes)
{
    if (st != FMK_OK && out && bytes > 0)
        memset(out, 0, bytes);
}

static void hook_allgather(void *state, int64_t value, int64_t *all)
{
    sim_mpi_state *s = state;
    const fmk_status st = FMK_MPI(NULL, &s->fault, MPI_Allgather,
                                  (&value, 1, MPI_INT64_T, all, 1, MPI_INT64_T, s->comm));
    zero_failed(st, all, (size_t)s->size * sizeof *all);
    if (st != FMK_OK)
        all[s->rank] = value;
}

/* The agreement of libfmmkit_mpi's plans (agree.c), through the thread's plan message. */
static fmk_status hook_agree(void *state, fmk_status status, char *message, size_t cap)
{
    sim_mpi_state *s = state;
    if (status != FMK_OK)
        fmk_plan_hook_error(NULL, status, message);
    status = fmk_mpi_agree(NULL, s->comm, s->rank, &s->fault, status);
    if (status != FMK_OK)
        snprintf(message, cap, "%s", fmk_plan_last_error(NULL));
    return status;
}

/* counts (words, each <= INT_MAX: the driver checks) as MPI's int counts and displacements;
 * returns their total. */
static size_t layout(sim_mpi_state *s, const int64_t *counts)
{
    int at = 0;
    for (int r = 0; r < s->size; r++) {
        s->counts[r] = (int)counts[r];
        s->displs[r] = at;
        at += (int)counts[r];
    }
    return (size_t)at;
}

static void hook_gather(void *state, const void *send, const int64_t *counts, void *recv)
{
    sim_mpi_state *s = state;
    const size_t words = layout(s, counts);
    const fmk_status st = FMK_MPI(NULL, &s->fault, MPI_Gatherv,
                                  (send, s->counts[s->rank], MPI_UINT64_T, recv, s->counts,
                                   s->displs, MPI_UINT64_T, 0, s->comm));
    zero_failed(st, s->rank == 0 ? recv : NULL, words * 8);
}

static void hook_scatter(void *state, const void *send, const int64_t *counts, void *recv)
{
    sim_mpi_state *s = state;
    layout(s, counts);
    const fmk_status st = FMK_MPI(NULL, &s->fault, MPI_Scatterv,
                                  (send, s->counts, s->displs, MPI_UINT64_T, recv,
                                   s->counts[s->rank], MPI_UINT64_T, 0, s->comm));
    zero_failed(st, recv, (size_t)s->counts[s->rank] * 8);
}

static void hook_bcast(void *state, void *buf, int64_t words)
{
    sim_mpi_state *s = state;
    const fmk_status st =
        FMK_MPI(NULL, &s->fault, MPI_Bcast, (buf, (int)words, MPI_UINT64_T, 0, s->comm));
    zero_failed(st, s->rank != 0 ? buf : NULL, (size_t)words * 8);
}

static void hook_alltoall(void *state, const int64_t *send, int64_t *recv)
{
    sim_mpi_state *s = state;
    const fmk_status st = FMK_MPI(NULL, &s->fault, MPI_Alltoall,
                                  (send, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, s->comm));
    zero_failed(st, recv, (size_t)s->size * sizeof *recv);
}

/* counts (rows, each side's total <= INT_MAX: the driver checks) as MPI's, in rows of width
 * words. */
static void hook_alltoallv(void *state, const void *send, const int64_t *send_counts, void *recv,
                           const int64_t *recv_counts, int width)
{
    sim_mpi_state *s = state;
    int *sc = s->a2a, *sd = sc + s->size, *rc = sc + 2 * s->size, *rd = sc + 3 * s->size;
    int so = 0, ro = 0;
    for (int r = 0; r < s->size; r++) {
        sc[r] = (int)send_counts[r], sd[r] = so, so += sc[r];
        rc[r] = (int)recv_counts[r], rd[r] = ro, ro += rc[r];
    }
    const fmk_status st = fmk_mpi_alltoallv_rows(NULL, &s->fault, s->comm, send, sc, sd, recv, rc,
                                                 rd, width, MPI_UINT64_T);
    zero_failed(st, recv, (size_t)ro * (size_t)width * 8);
}

static fmk_status hook_owners(void *state, const fmk_plan *plan, int64_t n, int *owner,
                              int *distributed)
{
    (void)state;
    return fmk_mpi_plan_owners(plan, n, owner, distributed);
}

static void hook_owners_here(void *state, fmk_plan *plan, int64_t n)
{
    (void)state;
    fmk_mpi_plan_owners_here(plan, n);
}

static fmk_status hook_halo(void *state, int64_t n, int width, const double *rows_here,
                            double radius, double **rows, int64_t *n_rows)
{
    sim_mpi_state *s = state;
    return fmk_mpi_sim_halo(s->comm, &s->fault, n, width, rows_here, radius, rows, n_rows);
}

static fmk_status hook_plan_create(void *state, fmk_plan **plan, int dim, fmk_kernel kernel,
                                   double eps, const fmk_opts *opts)
{
    sim_mpi_state *s = state;
    if (s->fault.failed) { /* (no MPI call) */
        *plan = NULL;
        return fmk_mpi_refuse_failed(NULL, &s->fault, "fmk_plan_create_mpi");
    }
    return fmk_plan_create_mpi(plan, s->comm, dim, kernel, eps, opts);
}

static void hook_release(void *state)
{
    sim_mpi_state *s = state;
    if (!s)
        return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* (its errors are returned, and ignored: destroy cannot fail) */
    if (!finalized && s->comm != MPI_COMM_NULL)
        MPI_Comm_free(&s->comm);
    free(s->counts), free(s->displs), free(s->a2a), free(s);
}

static const fmk_sim_hooks sim_mpi_hooks = {
    .name = "mpi",
    .reduce = hook_reduce,
    .allgather = hook_allgather,
    .agree = hook_agree,
    .gather = hook_gather,
    .scatter = hook_scatter,
    .bcast = hook_bcast,
    .plan_create = hook_plan_create,
    .alltoall = hook_alltoall,
    .alltoallv = hook_alltoallv,
    .owners = hook_owners,
    .owners_here = hook_owners_here,
    .halo = hook_halo,
    .release = hook_release,
};

/* The communicator's hooks for a new simulation: MPI's checks as fmk_plan_create_mpi's, the
 * communicator duplicated (collective). Agreed status; message on the thread. */
static fmk_status open_comm(MPI_Comm comm, const char *fn, fmk_sim_comm *out)
{
    MPI_Comm dup = MPI_COMM_NULL;
    fmk_status st = fmk_mpi_open(comm, fn, &dup);
    if (st != FMK_OK)
        return fmk_sim_hook_error(st, fmk_plan_last_error(NULL));
    sim_mpi_state *s = calloc(1, sizeof *s);
    fmk_mpi_fault spare = {0}, *fault = s ? &s->fault : &spare;
    int rank = 0, size = 1;
    st = FMK_MPI(NULL, fault, MPI_Comm_rank, (dup, &rank));
    if (st == FMK_OK)
        st = FMK_MPI(NULL, fault, MPI_Comm_size, (dup, &size));
    if (s) {
        s->comm = dup;
        s->rank = rank, s->size = size;
        s->counts = calloc((size_t)size, sizeof *s->counts);
        s->displs = calloc((size_t)size, sizeof *s->displs);
        s->a2a = calloc(4 * (size_t)size, sizeof *s->a2a);
    }
    if (st == FMK_OK && (!s || !s->counts || !s->displs || !s->a2a)) {
        char text[160];
        snprintf(text, sizeof text, "%s: out of host memory", fn);
        st = fmk_plan_hook_error(NULL, FMK_ERR_NOMEM, text);
    }
    st = fmk_mpi_agree(NULL, dup, rank, fault, st);
    if (st != FMK_OK) {
        fmk_sim_hook_error(st, fmk_plan_last_error(NULL));
        if (s)
            hook_release(s);
        else
            MPI_Comm_free(&dup);
        return st;
    }
    out->hooks = &sim_mpi_hooks;
    out->state = s;
    out->rank = s->rank;
    out->size = s->size;
    return FMK_OK;
}

fmk_status fmk_sim_create_mpi(fmk_sim **sim, MPI_Comm comm, int64_t n_local, const double *mass,
                              const double *pos, const double *vel, const double *soft_per_particle,
                              const uint64_t *ids, const fmk_sim_opts *opts)
{
    if (sim)
        *sim = NULL;
    fmk_sim_comm c;
    fmk_status st = open_comm(comm, "fmk_sim_create_mpi", &c);
    if (st != FMK_OK)
        return st;
    return fmk_sim_create_comm(sim, &c, n_local, mass, pos, vel, soft_per_particle, ids, opts);
}

fmk_status fmk_sim_create_root_mpi(fmk_sim **sim, MPI_Comm comm, int64_t n, const double *mass,
                                   const double *pos, const double *vel, const fmk_sim_opts *opts)
{
    if (sim)
        *sim = NULL;
    fmk_sim_comm c;
    fmk_status st = open_comm(comm, "fmk_sim_create_root_mpi", &c);
    if (st != FMK_OK)
        return st;
    return fmk_sim_create_root_comm(sim, &c, n, mass, pos, vel, opts);
}

fmk_status fmk_sim_create_from_file_mpi(fmk_sim **sim, MPI_Comm comm, const char *path,
                                        const fmk_sim_opts *opts)
{
    if (sim)
        *sim = NULL;
    fmk_sim_comm c;
    fmk_status st = open_comm(comm, "fmk_sim_create_from_file_mpi", &c);
    if (st != FMK_OK)
        return st;
    return fmk_sim_create_from_file_comm(sim, &c, path, opts);
}

/* MPI_Comm_f2c needs MPI: without it the C calls say why. */
static MPI_Comm from_fortran(MPI_Fint comm)
{
    int initialized = 0, finalized = 0;
    if (MPI_Initialized(&initialized) != MPI_SUCCESS || MPI_Finalized(&finalized) != MPI_SUCCESS)
        return MPI_COMM_NULL;
    return initialized && !finalized ? MPI_Comm_f2c(comm) : MPI_COMM_NULL;
}

fmk_status fmk_sim_create_mpi_f(fmk_sim **sim, MPI_Fint comm, int64_t n_local, const double *mass,
                                const double *pos, const double *vel,
                                const double *soft_per_particle, const uint64_t *ids,
                                const fmk_sim_opts *opts)
{
    return fmk_sim_create_mpi(sim, from_fortran(comm), n_local, mass, pos, vel, soft_per_particle,
                              ids, opts);
}

fmk_status fmk_sim_create_from_file_mpi_f(fmk_sim **sim, MPI_Fint comm, const char *path,
                                          const fmk_sim_opts *opts)
{
    return fmk_sim_create_from_file_mpi(sim, from_fortran(comm), path, opts);
}

int fmk_sim_is_mpi(const fmk_sim *sim)
{
    return fmk_sim_has_hooks(sim, &sim_mpi_hooks);
}
