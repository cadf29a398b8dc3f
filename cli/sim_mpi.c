/* sim_mpi.c -- `fmmkit sim` under mpirun (sim_mpi.h). */
#include "sim_mpi.h"

#include "cli_mpi.h"
#include "ranks.h"

#ifdef FMK_CLI_MPI
#include "fmmkit_mpi.h"
#endif

void cli_sim_share(int64_t n, int64_t *count, int64_t *first)
{
    ranks_share(n, cli_mpi_rank(), cli_mpi_size(), first, count);
}

fmk_status cli_sim_create(fmk_sim **sim, int64_t n, const double *mass, const double *pos,
                          const double *vel, const fmk_sim_opts *so)
{
#ifdef FMK_CLI_MPI
    if (cli_mpi_size() > 1) {
        int64_t count, first;
        cli_sim_share(n, &count, &first);
        return fmk_sim_create_mpi(sim, MPI_COMM_WORLD, count, mass + first, pos + 3 * first,
                                  vel + 3 * first, NULL, NULL, so);
    }
#endif
    return fmk_sim_create(sim, n, mass, pos, vel, NULL, NULL, so);
}

fmk_status cli_sim_create_from_file(fmk_sim **sim, const char *path, const fmk_sim_opts *so)
{
#ifdef FMK_CLI_MPI
    if (cli_mpi_size() > 1)
        return fmk_sim_create_from_file_mpi(sim, MPI_COMM_WORLD, path, so);
#endif
    return fmk_sim_create_from_file(sim, path, so);
}
