/* sim_mpi.h -- `fmmkit sim` under mpirun (docs/distributed.md, "The simulation under MPI").
 *
 * With more than one process (cli_mpi_size() > 1) the simulation is distributed over
 * MPI_COMM_WORLD (fmk_sim_create_mpi): every rank makes the whole set of initial conditions
 * from the seed, as one process does, and keeps its equal share in their order (so the ids
 * and the particles are those of a one-process run); a file is read by rank 0 and scattered.
 * Alone, or built without MPI, these are fmk_sim_create and fmk_sim_create_from_file. */
#ifndef FMMKIT_CLI_SIM_MPI_H
#define FMMKIT_CLI_SIM_MPI_H

#include "fmmkit_sim.h"

/* This process's equal share of n particles: its count and first index (n and 0 alone). */
void cli_sim_share(int64_t n, int64_t *count, int64_t *first);

/* The simulation of the n particles given (every rank gives all of them): this rank's share. */
fmk_status cli_sim_create(fmk_sim **sim, int64_t n, const double *mass, const double *pos,
                          const double *vel, const fmk_sim_opts *so);

fmk_status cli_sim_create_from_file(fmk_sim **sim, const char *path, const fmk_sim_opts *so);

#endif /* FMMKIT_CLI_SIM_MPI_H */
