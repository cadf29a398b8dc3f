/*
 * fmmkit_mpi.h -- distributed plans over MPI (libfmmkit_mpi; docs/distributed.md).
 *
 * Built and installed when CMake finds MPI (option FMMKIT_MPI, on by default). Link
 * libfmmkit_mpi (CMake: fmmkit::fmmkit_mpi), which links libfmmkit and MPI; libfmmkit itself
 * does not depend on MPI.
 *
 * A distributed plan is an ordinary fmk_plan whose calls are collective over its communicator:
 * every rank makes the same sequence of fmk_plan_set_points, fmk_plan_eval,
 * fmk_plan_eval_many and fmk_plan_destroy calls (a NULL plan on one rank cannot take part).
 * Each rank gives its own sources and targets (any counts, zero included; targets = NULL with
 * n_targets = 0: that rank's targets are its own sources, each point's pair with itself left
 * out) and its own charges, and gets the results at its own targets, in its order. The sum is
 * over the sources of every rank: the one-rank plan on the concatenation of the ranks' sources
 * in rank order, bit for bit for the fp64 direct sum, within eps for tree and fmm.
 *
 * Statuses and messages: a call that fails on one rank (a NaN, a NULL array, out of memory)
 * returns the same status on every rank, and fmk_plan_last_error reads "rank R: ..." with the
 * failing rank's message (of several failing ranks, the most severe failure, then the lowest
 * rank). A failed set_points that failed validation leaves every rank's points as they were,
 * one that failed later leaves the plan without points on every rank; a failed evaluation
 * writes no output on any rank. No rank returns early from a collective step, so a failure
 * never hangs the others. Errors of MPI itself are handled by the communicator's error handler
 * (MPI's default: the job is aborted).
 *
 * Not yet (FMK_ERR_UNAVAILABLE on every rank alike): fmk_plan_set_points_device and the
 * *_device evaluations. fmk_plan_memory answers for one rank's share of the work as if it
 * were an ordinary plan of the sizes given. The treecode keeps each rank's sources on it and
 * sends the other ranks its locally essential tree; the other methods gather every rank's
 * sources on every rank (memory O(N) per rank): docs/distributed.md.
 */
#ifndef FMMKIT_MPI_H
#define FMMKIT_MPI_H

#include <mpi.h>

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a distributed plan on communicator comm (an intracommunicator; MPI initialized),
 * collectively: every rank of comm calls it, with the same dim, kernel, eps and options
 * (method, backend, precision, order, leaf_size, softening, theta, walk; threads, device,
 * verbose and n_vectors may differ between ranks). Arguments as fmk_plan_create's. The plan
 * duplicates comm (MPI_Comm_dup), so its messages never meet the caller's; fmk_plan_destroy
 * frees it, and is then collective too. On failure *plan is NULL on every rank, every rank
 * returns the same status, and the message is in fmk_plan_last_error(NULL). */
FMK_API fmk_status fmk_plan_create_mpi(fmk_plan **plan, MPI_Comm comm, int dim, fmk_kernel kernel,
                                       double eps, const fmk_opts *opts);

/* fmk_plan_create_mpi for bindings, which hold a communicator as its Fortran handle (an
 * MPI_Fint) rather than the C MPI_Comm, whose type differs between MPI libraries: Python's
 * mpi4py gives it as comm.py2f(), Fortran as the INTEGER communicator (MPI_Comm_c2f in C).
 * The handle is turned into the MPI_Comm by MPI_Comm_f2c; everything else is
 * fmk_plan_create_mpi's. */
FMK_API fmk_status fmk_plan_create_mpi_f(fmk_plan **plan, MPI_Fint comm, int dim, fmk_kernel kernel,
                                         double eps, const fmk_opts *opts);

/* 1 when plan is a distributed plan (made by fmk_plan_create_mpi or _f), else 0. */
FMK_API int fmk_plan_is_mpi(const fmk_plan *plan);

/* This rank's share of a distributed plan's work and where its time went (not collective):
 * the last set_points' phases and the last evaluation's. Communication phases are the time in
 * MPI calls on this rank, which includes waiting for slower ranks where the exchange is the
 * first call after unequal work (the partition's first gather waits for the ranks' arrival);
 * the wait after the local evaluation is in none of them. */
typedef struct fmk_mpi_info {
    int ranks;               /* the communicator's size */
    int distributed_sources; /* 1: each rank keeps its own sources and sends the others its
                              * locally essential tree (the treecode); 0: every rank holds
                              * every source (docs/distributed.md) */
    int64_t sources_kept;    /* the sources this rank keeps (distributed) or holds (all) */
    int64_t local_sources;   /* its local plan's sources: kept, particles and pseudo-particles
                              * received */
    int64_t targets_evaluated;     /* the targets its local plan evaluates */
    double seconds_partition;      /* set_points: keys, splitters, moving the targets */
    double seconds_tree;           /* set_points: the sending tree and the walks for the others */
    double seconds_exchange_points;  /* set_points: moving sources, trees' positions, gathers */
    double seconds_local_set_points; /* set_points: the local plan's */
    double seconds_exchange_charges; /* eval: charges to their owners and the trees' charges */
    double seconds_moments;          /* eval: the sending tree's moments, pseudo-charges */
    double seconds_local_eval;       /* eval: the local plan's */
    double seconds_results_home;     /* eval: the results back to the targets' ranks */
    int64_t bytes_sent_points; /* set_points: bytes this rank sent (points, keys' counts) */
    int64_t bytes_sent_eval;   /* eval: bytes this rank sent (charges, results) */
} fmk_mpi_info;

/* FMK_ERR_NULL for NULL arguments, FMK_ERR_ARG for a plan that is not distributed. */
FMK_API fmk_status fmk_plan_mpi_info(const fmk_plan *plan, fmk_mpi_info *info);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_MPI_H */
