/* cli_mpi.h -- the fmmkit command under mpirun.
 *
 * Built with MPI (FMK_CLI_MPI: CMake found MPI, libfmmkit_mpi's objects are linked in), the
 * command initializes MPI when an MPI launcher started it (mpirun, mpiexec, srun: their
 * environment says so) and finalizes it at the end; started alone it never touches MPI. The
 * commands that run distributed (docs/distributed.md, "The command under mpirun") ask
 * cli_mpi_size() and create their plans with fmk_plan_create_mpi on MPI_COMM_WORLD.
 * Built without MPI, a launched run says on stderr that each process runs alone.
 */
#ifndef FMMKIT_CLI_MPI_H
#define FMMKIT_CLI_MPI_H

/* 1 when an MPI launcher started this process with more than one process in its job. */
int cli_mpi_launched(void);

/* Initializes MPI where the command was launched under MPI and built with it (CLI_OK), else
 * does nothing (CLI_OK). CLI_FAIL, with a message, when MPI_Init fails. */
int cli_mpi_begin(int *argc, char ***argv);

/* Finalizes MPI where cli_mpi_begin initialized it. */
void cli_mpi_end(void);

/* The processes of the job and this one's rank: 1 and 0 unless MPI is initialized. */
int cli_mpi_size(void);
int cli_mpi_rank(void);

/* Every rank's exit status combined (the largest) so that all ranks exit alike; the status
 * itself without MPI. Collective under MPI. */
int cli_mpi_exit_status(int status);

#endif /* FMMKIT_CLI_MPI_H */
