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
 * never hangs the others. Errors of MPI itself never abort the job: the plan duplicates comm
 * with MPI_ERRORS_RETURN on the duplicate (comm keeps its own handler), and a failed MPI call
 * returns FMK_ERR_INTERNAL with the call's name and MPI's words on the rank where it failed,
 * without the agreement (the other ranks may see MPI's error too, or may wait: the communicator
 * may no longer work); the plan's later calls then return FMK_ERR_STATE without any MPI call,
 * and fmk_plan_destroy still frees it (docs/distributed.md, "MPI's own errors").
 *
 * fmk_plan_set_points_device and the *_device evaluations take a plan of backend cuda and each
 * rank's own device arrays: they are staged through host memory (a copy that fails on one rank
 * fails the call on every rank; after an agreed evaluation a failing copy back may leave the
 * other ranks' device outputs written). fmk_plan_memory answers for one rank's share of the work as if it
 * were an ordinary plan of the sizes given. The treecode and the 3D FMM (laplace, plummer,
 * regularized) keep each rank's sources on it and send the other ranks their locally essential
 * trees; the direct sum and 2D gather every rank's sources on every rank (memory O(N) per
 * rank): docs/distributed.md.
 */
#ifndef FMMKIT_MPI_H
#define FMMKIT_MPI_H

#include <mpi.h>

#include "fmmkit.h"
#include "fmmkit_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a distributed plan on communicator comm (an intracommunicator; MPI initialized),
 * collectively: every rank of comm calls it, with the same dim, kernel, eps and options
 * (method, backend, precision, order, leaf_size, softening, theta, walk; threads, device,
 * verbose and n_vectors may differ between ranks). Arguments as fmk_plan_create's. The plan
 * duplicates comm (MPI_Comm_dup), so its messages never meet the caller's; fmk_plan_destroy
 * frees it, and is then collective too. GPUs: with opts.device 0 (the default) each rank's
 * work goes to the GPU of its rank among its node's ranks, modulo the node's GPUs (one rank a
 * GPU under a plain mpirun); a nonzero opts.device is used as given. On failure *plan is NULL on every rank, every rank
 * returns the same status, and the message is in fmk_plan_last_error(NULL). Refused before any
 * collective call (on the rank that passed it): MPI not initialized or already finalized
 * (FMK_ERR_STATE), comm MPI_COMM_NULL or an intercommunicator (FMK_ERR_ARG). */
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
    int ranks;                 /* the communicator's size */
    int distributed_sources;   /* 1: each rank keeps its own sources and sends the others its
                              * locally essential tree (the treecode, the 3D FMM); 0:
                              * every rank holds every source (docs/distributed.md) */
    int64_t sources_kept;      /* the sources this rank keeps (distributed) or holds (all) */
    int64_t local_sources;     /* its local plan's sources: kept, particles and pseudo-particles
                              * received */
    int64_t targets_evaluated; /* the targets its local plan evaluates */
    double seconds_partition;  /* set_points: keys, splitters, moving the targets */
    double seconds_tree;       /* set_points: the sending tree and the walks for the others */
    double seconds_exchange_points;  /* set_points: moving sources, trees' positions, gathers */
    double seconds_local_set_points; /* set_points: the local plan's */
    double seconds_exchange_charges; /* eval: charges to their owners and the trees' charges */
    double seconds_moments;          /* eval: the sending tree's moments, pseudo-charges */
    double seconds_local_eval;       /* eval: the local plan's */
    double seconds_results_home;     /* eval: the results back to the targets' ranks */
    int64_t bytes_sent_points;       /* set_points: bytes this rank sent (points, keys' counts) */
    int64_t bytes_sent_eval;         /* eval: bytes this rank sent (charges, results) */
    int64_t targets_sent;            /* set_points: this rank's targets that another rank evaluates
                                * (0 on every rank: the targets stay, and the evaluations move
                                * none of them nor their results) */
} fmk_mpi_info;

/* FMK_ERR_NULL for NULL arguments, FMK_ERR_ARG for a plan that is not distributed. */
FMK_API fmk_status fmk_plan_mpi_info(const fmk_plan *plan, fmk_mpi_info *info);

/* ---------------------------------------------------------------------------------------------
 * Distributed simulations (fmmkit_sim.h; docs/distributed.md, "The simulation under MPI").
 *
 * A simulation made by one of the calls below is an ordinary fmk_sim whose calls are collective
 * over its communicator: every rank makes the same sequence of fmk_sim_step, fmk_sim_run,
 * fmk_sim_set_output, fmk_sim_set_output_times, fmk_sim_set_png, fmk_sim_info_get,
 * fmk_sim_write_snapshot, fmk_sim_write_png, fmk_sim_write_restart,
 * fmk_sim_set_energy_reference and fmk_sim_destroy calls with the same arguments. Each rank
 * holds its own particles (any count, zero included) on the host, whatever backend the force
 * plan's local work runs on (distributed plans take host arrays; fmk_sim_create_device and
 * fmk_sim_get_state_device are not for them); fmk_sim_get_state gives this rank's particles
 * (fmk_sim_info.n_local of them). The force plan is a distributed plan (fmk_plan_create_mpi)
 * on the simulation's communicator, so the forces are those of every rank's particles.
 *
 * The energies, momenta, angular momenta and interaction counts of fmk_sim_info and of the
 * diagnostics are sums over the ranks (fmk_sim_info.n is the global count); the adaptive step
 * is the least over the ranks, so every rank takes the same steps. Rank 0 gathers the
 * particles and writes every file: GADGET-4 snapshots with the global NumPart_Total and the
 * particles' own ParticleIDs (an id stays with its particle), the PNGs, the diagnostics CSV
 * and the restart files. A restart file continues bit for bit on as many ranks as wrote it
 * (each rank gets its particles back); on another number of ranks, or by one process
 * (fmk_sim_create_from_file), the particles keep their global order in equal shares. An
 * interrupt on one rank (fmk_sim_interrupt) stops every rank at the end of the same step.
 *
 * Statuses as the distributed plans': a call that fails on one rank (a NaN mass, a file that
 * cannot be written) returns the same status on every rank with "rank R: ..." in
 * fmk_sim_last_error; no rank returns early from a collective step. Every rank must pass the
 * same options (FMK_ERR_ARG otherwise). The spline softening (FMK_SIM_SOFT_SPLINE) takes the
 * other ranks' particles near this rank's into its correction. Not yet (FMK_ERR_UNAVAILABLE on
 * every rank): per-particle softening lengths. The simulation duplicates comm (MPI_Comm_dup),
 * and its MPI errors come back as the plans' do (FMK_ERR_INTERNAL on the failing rank, then
 * every call refused; MPI_COMM_NULL or an intercommunicator: FMK_ERR_ARG).
 * --------------------------------------------------------------------------------------------- */

/* fmk_sim_create with each rank's own n_local >= 0 particles (the arrays may be NULL when
 * n_local = 0; at least one particle in all). ids NULL: the particles' global index + 1, the
 * index counting the ranks' particles in rank order (so that the same particles split in
 * another way have the same ids). soft_per_particle: NULL (one length, opts.soft).
 * On failure *sim is NULL on every rank, every rank returns the same status, and the message
 * is in fmk_sim_last_error(NULL). */
FMK_API fmk_status fmk_sim_create_mpi(fmk_sim **sim, MPI_Comm comm, int64_t n_local,
                                      const double *mass, const double *pos, const double *vel,
                                      const double *soft_per_particle, const uint64_t *ids,
                                      const fmk_sim_opts *opts);

/* The same with all n particles given on rank 0 (n and the arrays are ignored on the other
 * ranks), scattered in equal shares in their order: rank r gets n / size of them, one more
 * when r < n % size. Ids 1..n. */
FMK_API fmk_status fmk_sim_create_root_mpi(fmk_sim **sim, MPI_Comm comm, int64_t n,
                                           const double *mass, const double *pos, const double *vel,
                                           const fmk_sim_opts *opts);

/* fmk_sim_create_from_file over comm: rank 0 reads path (the other ranks' path is not read).
 * A snapshot's particles are scattered in equal shares; a restart file's go back to the ranks
 * that wrote it when it was written on as many ranks (bit for bit), else in equal shares. */
FMK_API fmk_status fmk_sim_create_from_file_mpi(fmk_sim **sim, MPI_Comm comm, const char *path,
                                                const fmk_sim_opts *opts);

/* The two for bindings, with the communicator's Fortran handle (as fmk_plan_create_mpi_f). */
FMK_API fmk_status fmk_sim_create_mpi_f(fmk_sim **sim, MPI_Fint comm, int64_t n_local,
                                        const double *mass, const double *pos, const double *vel,
                                        const double *soft_per_particle, const uint64_t *ids,
                                        const fmk_sim_opts *opts);
FMK_API fmk_status fmk_sim_create_from_file_mpi_f(fmk_sim **sim, MPI_Fint comm, const char *path,
                                                  const fmk_sim_opts *opts);

/* 1 when sim is a distributed simulation (made by the calls above), else 0. */
FMK_API int fmk_sim_is_mpi(const fmk_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_MPI_H */
