/* bench_mpi.h -- `fmmkit bench` under mpirun (docs/distributed.md, "The command under mpirun").
 *
 * Every rank generates the whole point set a one-process run generates (the generator is
 * sequential: a rank cannot draw its slice alone) and gives its contiguous share (ranks_share)
 * to a distributed plan; the results are gathered on rank 0, which checks them against the
 * direct sum over every source exactly as one process does. On one rank (no launcher, or built
 * without MPI) each function is the one-process one.
 */
#ifndef FMMKIT_CLI_BENCH_MPI_H
#define FMMKIT_CLI_BENCH_MPI_H

#include <stdint.h>

#include "fmmkit.h"
#include "measure.h"

/* fmk_plan_create, or fmk_plan_create_mpi on MPI_COMM_WORLD under mpirun (collective). */
fmk_status bench_plan_create(fmk_plan **plan, int dim, fmk_kernel kernel, double eps,
                             const fmk_opts *opts);

/* The barrier and max of the ranks for measure_run_sync; NULL on one rank. */
const measure_sync *bench_sync(void);

/* all holds total rows of width doubles, each rank's share (ranks_share) filled in place;
 * collectively, rank 0 gets every share. Nothing on one rank. */
void bench_gather(double *all, int64_t total, int width);

/* The largest and the mean over the ranks of value (collective; value itself on one rank). */
void bench_max_mean(int64_t value, int64_t *max, double *mean);

#endif /* FMMKIT_CLI_BENCH_MPI_H */
