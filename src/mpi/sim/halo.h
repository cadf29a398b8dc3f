/* halo.h -- the simulation's halo of particles from the other ranks (halo.c). */
#ifndef FMMKIT_MPI_SIM_HALO_H
#define FMMKIT_MPI_SIM_HALO_H

#include "mpi/mpi_internal.h"

/* Collective over comm: the rows (width doubles each, a position first) of the other ranks'
 * particles that lie closer than radius to the boxes that hold this rank's n rows: malloc'ed
 * into *out (NULL on failure), *n_out of them. FMK_OK or FMK_ERR_NOMEM, the same on every rank
 * (its message on the calling thread); or where an MPI call on comm fails (fault), this rank's
 * FMK_ERR_INTERNAL (comm.c). */
fmk_status fmk_mpi_sim_halo(MPI_Comm comm, fmk_mpi_fault *fault, int64_t n, int width,
                            const double *rows, double radius, double **out, int64_t *n_out);

#endif /* FMMKIT_MPI_SIM_HALO_H */
