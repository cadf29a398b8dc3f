/* cli_mpi.c -- MPI for the fmmkit command when launched by mpirun (cli_mpi.h). */
#include "cli_mpi.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

#ifdef FMK_CLI_MPI
#include <mpi.h>
#endif

/* The job's size from the launcher's environment (Open MPI, MPICH/Hydra, PMIx, Slurm). */
static int launched_size(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                        "MPI_LOCALNRANKS", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    /* PMIx sets a rank but not always a size: a job of unknown size */
    return getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK") ? 2 : 0;
}

int cli_mpi_launched(void)
{
    return launched_size() > 1;
}

#ifdef FMK_CLI_MPI
int cli_mpi_begin(int *argc, char ***argv)
{
    if (!cli_mpi_launched())
        return CLI_OK;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        cli_error(NULL, "MPI_Init failed; run without mpirun for one process");
        return CLI_FAIL;
    }
    return CLI_OK;
}

void cli_mpi_end(void)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Finalize();
}

static int mpi_on(void)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

int cli_mpi_size(void)
{
    int size = 1;
    if (mpi_on())
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

int cli_mpi_rank(void)
{
    int rank = 0;
    if (mpi_on())
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int cli_mpi_exit_status(int status)
{
    if (!mpi_on())
        return status;
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return status;
}
#else
int cli_mpi_begin(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (cli_mpi_launched())
        cli_error(NULL, "this fmmkit was built without MPI (CMake did not find it): each of "
                        "the launched processes runs alone");
    return CLI_OK;
}

void cli_mpi_end(void) {}
int cli_mpi_size(void)
{
    return 1;
}
int cli_mpi_rank(void)
{
    return 0;
}
int cli_mpi_exit_status(int status)
{
    return status;
}
#endif
