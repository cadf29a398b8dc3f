/* comm.c -- the library's own communicators and the return codes of its MPI calls
 * (docs/distributed.md, "MPI's own errors").
 *
 * fmk_plan_create_mpi and fmk_sim_create_mpi duplicate the caller's communicator and set
 * MPI_ERRORS_RETURN on the duplicate (the caller's keeps its own handler), so that an MPI error
 * in the library's calls comes back as a return code instead of aborting the job. Every MPI call
 * on a duplicate goes through FMK_MPI (mpi_internal.h): a failed call becomes FMK_ERR_INTERNAL
 * with MPI's own words and the call's name, and marks the communicator failed (fmk_mpi_fault),
 * after which no MPI call is made on it again: the statuses of the call that failed are then
 * returned on each rank without the usual agreement, which could wait forever on a communicator
 * that no longer works. */
#include <stdio.h>
#include <string.h>

#include "core/hooks.h"
#include "mpi/mpi_internal.h"

/* MPI's sentence for the error code rc. */
static void error_words(int rc, char words[MPI_MAX_ERROR_STRING])
{
    int len = 0;
    if (MPI_Error_string(rc, words, &len) != MPI_SUCCESS || len <= 0)
        snprintf(words, MPI_MAX_ERROR_STRING, "error code %d", rc);
}

fmk_status fmk_mpi_check(fmk_plan *plan, fmk_mpi_fault *fault, int rc, const char *call)
{
    if (rc == MPI_SUCCESS)
        return FMK_OK;
    char words[MPI_MAX_ERROR_STRING];
    error_words(rc, words);
    if (!fault->failed) {
        fault->failed = 1;
        snprintf(fault->message, sizeof fault->message,
                 "%s failed: %s (an error of MPI itself; the communicator may no longer work: "
                 "destroy the plan or simulation)",
                 call, words);
    }
    return fmk_plan_hook_error(plan, FMK_ERR_INTERNAL, fault->message);
}

fmk_status fmk_mpi_failed_before(fmk_plan *plan, const fmk_mpi_fault *fault)
{
    return fmk_plan_hook_error(plan, FMK_ERR_INTERNAL, fault->message);
}

fmk_status fmk_mpi_refuse_failed(fmk_plan *plan, const fmk_mpi_fault *fault, const char *fn)
{
    char text[sizeof fault->message + 96];
    snprintf(text, sizeof text, "%s: an earlier call's %s", fn, fault->message);
    return fmk_plan_hook_error(plan, FMK_ERR_STATE, text);
}

/* A contiguous type of width values of base, committed (*type MPI_DATATYPE_NULL on failure). */
static fmk_status row_type(fmk_plan *plan, fmk_mpi_fault *fault, int width, MPI_Datatype base,
                           MPI_Datatype *type)
{
    *type = MPI_DATATYPE_NULL;
    fmk_status st = FMK_MPI(plan, fault, MPI_Type_contiguous, (width, base, type));
    if (st == FMK_OK && (st = FMK_MPI(plan, fault, MPI_Type_commit, (type))) != FMK_OK)
        MPI_Type_free(type);
    return st;
}

/* The type freed; a failure reported where the call it served succeeded. */
static fmk_status free_type(fmk_plan *plan, fmk_mpi_fault *fault, MPI_Datatype *type, fmk_status st)
{
    const int rc = MPI_Type_free(type);
    return st == FMK_OK ? fmk_mpi_check(plan, fault, rc, "MPI_Type_free") : st;
}

fmk_status fmk_mpi_alltoallv_rows(fmk_plan *plan, fmk_mpi_fault *fault, MPI_Comm comm,
                                  const void *send, const int *sc, const int *sd, void *recv,
                                  const int *rc, const int *rd, int width, MPI_Datatype base)
{
    MPI_Datatype row;
    fmk_status st = row_type(plan, fault, width, base, &row);
    if (st != FMK_OK)
        return st;
    st = FMK_MPI(plan, fault, MPI_Alltoallv, (send, sc, sd, row, recv, rc, rd, row, comm));
    return free_type(plan, fault, &row, st);
}

fmk_status fmk_mpi_allgatherv_rows(fmk_plan *plan, fmk_mpi_fault *fault, MPI_Comm comm,
                                   const void *send, int n, void *recv, const int *counts,
                                   const int *displs, int width)
{
    MPI_Datatype row;
    fmk_status st = row_type(plan, fault, width, MPI_DOUBLE, &row);
    if (st != FMK_OK)
        return st;
    st = FMK_MPI(plan, fault, MPI_Allgatherv, (send, n, row, recv, counts, displs, row, comm));
    return free_type(plan, fault, &row, st);
}

fmk_status fmk_mpi_open(MPI_Comm comm, const char *fn, MPI_Comm *dup)
{
    char text[MPI_MAX_ERROR_STRING + 160];
    *dup = MPI_COMM_NULL;
    int initialized = 0, finalized = 0, inter = 0;
    /* (the two calls MPI allows before MPI_Init and after MPI_Finalize) */
    if (MPI_Initialized(&initialized) != MPI_SUCCESS || MPI_Finalized(&finalized) != MPI_SUCCESS ||
        !initialized || finalized) {
        snprintf(text, sizeof text, "%s: MPI is %s; call it between MPI_Init and MPI_Finalize", fn,
                 finalized ? "finalized" : "not initialized");
        return fmk_plan_hook_error(NULL, FMK_ERR_STATE, text);
    }
    if (comm == MPI_COMM_NULL) {
        snprintf(text, sizeof text, "%s: comm is MPI_COMM_NULL; pass an intracommunicator", fn);
        return fmk_plan_hook_error(NULL, FMK_ERR_ARG, text);
    }
    /* (errors of these two calls go to comm's own handler: the caller's choice) */
    int rc = MPI_Comm_test_inter(comm, &inter);
    if (rc == MPI_SUCCESS && inter) {
        snprintf(text, sizeof text,
                 "%s: comm is an intercommunicator; pass an intracommunicator (MPI_COMM_WORLD or "
                 "one made by MPI_Comm_split)",
                 fn);
        return fmk_plan_hook_error(NULL, FMK_ERR_ARG, text);
    }
    const char *call = "MPI_Comm_test_inter";
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_dup(comm, dup); /* collective: every rank gets here */
        call = "MPI_Comm_dup";
    }
    if (rc == MPI_SUCCESS) {
        rc = MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
        call = "MPI_Comm_set_errhandler";
        if (rc != MPI_SUCCESS)
            MPI_Comm_free(dup);
    }
    if (rc == MPI_SUCCESS)
        return FMK_OK;
    *dup = MPI_COMM_NULL;
    char words[MPI_MAX_ERROR_STRING];
    error_words(rc, words);
    snprintf(text, sizeof text, "%s: %s failed: %s (an error of MPI itself)", fn, call, words);
    return fmk_plan_hook_error(NULL, FMK_ERR_INTERNAL, text);
}
