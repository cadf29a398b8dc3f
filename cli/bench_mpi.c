/* bench_mpi.c -- the collective pieces of `fmmkit bench` under mpirun (bench_mpi.h). */
#include "bench_mpi.h"

#include <math.h>
#include <stdlib.h>

#include "cli_mpi.h"
#include "ranks.h"

#ifdef FMK_CLI_MPI
#include <mpi.h>

#include "fmmkit_mpi.h"

fmk_status bench_plan_create(fmk_plan **plan, int dim, fmk_kernel kernel, double eps,
                             const fmk_opts *opts)
{
    if (cli_mpi_size() > 1)
        return fmk_plan_create_mpi(plan, MPI_COMM_WORLD, dim, kernel, eps, opts);
    return fmk_plan_create(plan, dim, kernel, eps, opts);
}

static void world_barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

static void world_max(double *values, int n)
{
    MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

const measure_sync *bench_sync(void)
{
    static const measure_sync world = {world_barrier, world_max};
    return cli_mpi_size() > 1 ? &world : NULL;
}

void bench_gather(double *all, int64_t total, int width)
{
    const int size = cli_mpi_size(), rank = cli_mpi_rank();
    if (size <= 1)
        return;
    /* total <= INT_MAX: cmd_bench refuses more points under mpirun */
    int *counts = malloc(sizeof(int) * 2 * (size_t)size);
    int ok = counts != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) { /* every rank gives up alike; rank 0's errors are then NaN, not wrong */
        free(counts);
        if (rank == 0)
            for (int64_t i = 0; i < total * width; i++)
                all[i] = NAN;
        return;
    }
    int *displs = counts + size;
    for (int r = 0; r < size; r++) {
        int64_t offset, count;
        ranks_share(total, r, size, &offset, &count);
        counts[r] = (int)count, displs[r] = (int)offset;
    }
    MPI_Datatype row;
    MPI_Type_contiguous(width, MPI_DOUBLE, &row);
    MPI_Type_commit(&row);
    const double *mine = all + (int64_t)width * displs[rank];
    MPI_Gatherv(rank == 0 ? MPI_IN_PLACE : mine, counts[rank], row, all, counts, displs, row, 0,
                MPI_COMM_WORLD);
    MPI_Type_free(&row);
    free(counts);
}

void bench_max_mean(int64_t value, int64_t *max, double *mean)
{
    const int size = cli_mpi_size();
    *max = value, *mean = (double)value;
    if (size <= 1)
        return;
    double sum = (double)value;
    MPI_Allreduce(&value, max, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *mean = sum / size;
}
#else
fmk_status bench_plan_create(fmk_plan **plan, int dim, fmk_kernel kernel, double eps,
                             const fmk_opts *opts)
{
    return fmk_plan_create(plan, dim, kernel, eps, opts);
}

const measure_sync *bench_sync(void)
{
    return NULL;
}

void bench_gather(double *all, int64_t total, int width)
{
    (void)all, (void)total, (void)width;
}

void bench_max_mean(int64_t value, int64_t *max, double *mean)
{
    *max = value, *mean = (double)value;
}
#endif
