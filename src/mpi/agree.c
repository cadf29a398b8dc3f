/* agree.c -- a distributed plan's collective statuses: every rank returns the same status and
 * message (docs/distributed.md, "API"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/hooks.h"
#include "mpi/mpi_internal.h"

enum { MESSAGE_LEN = 512 };

/* The order in which failures win: defects and resources above the caller's input, any failure
 * above success. */
static int severity(fmk_status st)
{
    switch (st) {
    case FMK_OK: return 0;
    case FMK_ERR_INTERRUPTED: return 1;
    case FMK_ERR_UNAVAILABLE: return 2;
    case FMK_ERR_STATE: return 3;
    case FMK_ERR_NULL: return 4;
    case FMK_ERR_ARG: return 5;
    case FMK_ERR_NONFINITE: return 6;
    case FMK_ERR_ACCURACY: return 7;
    case FMK_ERR_NOMEM: return 8;
    case FMK_ERR_DEVICE_NOMEM: return 9;
    case FMK_ERR_DEVICE: return 10;
    case FMK_ERR_INTERNAL: return 11;
    }
    return 11;
}

fmk_status fmk_mpi_agree(fmk_plan *plan, MPI_Comm comm, int rank, fmk_mpi_fault *fault,
                         fmk_status status)
{
    /* after a failed MPI call the other ranks may never come (comm.c): this rank's own */
    if (fault->failed)
        return fmk_mpi_failed_before(plan, fault);
    int mine[2] = {severity(status), rank}, worst[2];
    fmk_status st =
        FMK_MPI(plan, fault, MPI_Allreduce, (mine, worst, 1, MPI_2INT, MPI_MAXLOC, comm));
    if (st != FMK_OK)
        return st;
    if (worst[0] == 0)
        return FMK_OK;
    struct {
        int status;
        char message[MESSAGE_LEN];
    } failure;
    memset(&failure, 0, sizeof failure);
    if (rank == worst[1]) {
        failure.status = (int)status;
        snprintf(failure.message, sizeof failure.message, "%s", fmk_plan_last_error(plan));
    }
    if ((st = FMK_MPI(plan, fault, MPI_Bcast,
                      (&failure, (int)sizeof failure, MPI_BYTE, worst[1], comm))) != FMK_OK)
        return st;
    char text[MESSAGE_LEN + 32];
    snprintf(text, sizeof text, "rank %d: %s", worst[1], failure.message);
    return fmk_plan_hook_error(plan, (fmk_status)failure.status, text);
}

fmk_status fmk_mpi_same_arguments(MPI_Comm comm, fmk_mpi_fault *fault, int dim, fmk_kernel kernel,
                                  double eps, const fmk_opts *opts)
{
    fmk_opts o;
    if (opts)
        o = *opts;
    else
        fmk_opts_default(&o);
    static const char *const names[] = {"dim",         "kernel",         "eps",
                                        "opts.method", "opts.backend",   "opts.precision",
                                        "opts.order",  "opts.leaf_size", "opts.softening",
                                        "opts.theta",  "opts.walk"};
    enum { N = sizeof names / sizeof names[0] };
    const double v[N] = {dim,
                         (double)kernel,
                         eps,
                         (double)o.method,
                         (double)o.backend,
                         (double)o.precision,
                         o.order,
                         (double)o.leaf_size,
                         o.softening,
                         o.theta,
                         (double)o.walk};
    /* the least and (negated) the largest of each value over the ranks, in one reduction; a
     * NaN is made a value no rank can match */
    double both[2 * N];
    for (int k = 0; k < N; k++) {
        both[k] = isnan(v[k]) ? -INFINITY : v[k];
        both[N + k] = isnan(v[k]) ? -INFINITY : -v[k];
    }
    const fmk_status st =
        FMK_MPI(NULL, fault, MPI_Allreduce, (MPI_IN_PLACE, both, 2 * N, MPI_DOUBLE, MPI_MIN, comm));
    if (st != FMK_OK)
        return st;
    for (int k = 0; k < N; k++)
        if (both[k] != -both[N + k]) {
            char text[160];
            snprintf(text, sizeof text,
                     "fmk_plan_create_mpi: the ranks passed different values of %s (%g .. %g); "
                     "every rank must pass the same",
                     names[k], both[k], -both[N + k]);
            return fmk_plan_hook_error(NULL, FMK_ERR_ARG, text);
        }
    return FMK_OK;
}
