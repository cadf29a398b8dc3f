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

#include "fmmkit.h"

typedef struct fmk_mpi_state {
    MPI_Comm comm; /* MPI_Comm_dup of the caller's */
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
} fmk_mpi_state;

/* agree.c: the agreement of every collective step. Each rank gives its own status; every rank
 * gets the most severe one (ties: the lowest rank's), and where it is not FMK_OK, the message
 * "rank R: <message>" on plan (NULL: the calling thread), R's message read from
 * fmk_plan_last_error(plan) on R. */
fmk_status fmk_mpi_agree(fmk_plan *plan, MPI_Comm comm, int rank, fmk_status status);

/* agree.c: FMK_ERR_ARG (on the calling thread) unless every rank passed the same dim, kernel,
 * eps and options that must match; collective. */
fmk_status fmk_mpi_same_arguments(MPI_Comm comm, int dim, fmk_kernel kernel, double eps,
                                  const fmk_opts *opts);

#endif /* FMMKIT_MPI_INTERNAL_H */
