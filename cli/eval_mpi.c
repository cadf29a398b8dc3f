/* eval_mpi.c -- `fmmkit eval` under mpirun: one distributed plan over every rank
 * (docs/distributed.md, "The command under mpirun").
 *
 * By default rank 0 reads and checks the inputs, broadcasts how that went (so that a bad file
 * ends every rank at once, before any collective that depends on it), scatters contiguous
 * near-equal shares of the sources, charges and targets, and after the distributed evaluation
 * gathers the results and writes them: the files a one-process run writes. With --per-rank
 * every rank reads and writes its own files, and a failure of any rank's files ends every rank
 * before the plan is used. Each rank returns its own status (ranks_release in cmd_eval.c makes
 * the job's status and says the failing rank's message once). */
#include <limits.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_mpi.h"
#include "eval.h"
#include "ranks.h"

#ifdef FMK_CLI_MPI
#include <mpi.h>

#include "fmmkit_mpi.h"

static const char *const cmd = "eval";

/* A buffer of count rows of width doubles, never NULL for count 0 (a rank with an empty share
 * still passes an array). */
static double *rows(int64_t count, int width)
{
    return malloc(sizeof(double) * (size_t)(count > 0 ? count * width : 1));
}

/* The distributed plan on MPI_COMM_WORLD: set_points and one evaluation, collectively. Every
 * rank returns the same status (the plan agrees them) with the same message. */
static int distributed_eval(const eval_job *job, int64_t n, const double *src, const double *q,
                            int64_t m, const double *trg, double *pot, double *grad)
{
    fmk_plan *plan = NULL;
    fmk_status st =
        fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, job->dim, job->kernel, job->eps, &job->opts);
    if (st != FMK_OK)
        return cli_library_error(cmd, NULL, st);
    st = fmk_plan_set_points(plan, n, src, trg ? m : 0, trg);
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, q, job->pot ? pot : NULL, grad);
    int rc = st == FMK_OK ? CLI_OK : cli_library_error(cmd, plan, st);
    fmk_plan_destroy(plan);
    return rc;
}

/* The rows of every rank's share (ranks_share) as MPI counts and displacements. */
static void share_counts(int64_t total, int size, int *counts, int *displs)
{
    for (int r = 0; r < size; r++) {
        int64_t offset, count;
        ranks_share(total, r, size, &offset, &count);
        counts[r] = (int)count, displs[r] = (int)offset;
    }
}

/* Rank 0's all (rows of width doubles) to every rank's mine, in shares; rank 0's share stays
 * where it is (all + its displacement 0). */
static void scatter_rows(const double *all, double *mine, int width, const int *counts,
                         const int *displs, int rank)
{
    MPI_Datatype row;
    MPI_Type_contiguous(width, MPI_DOUBLE, &row);
    MPI_Type_commit(&row);
    MPI_Scatterv(all, counts, displs, row, rank == 0 ? MPI_IN_PLACE : mine, counts[rank], row, 0,
                 MPI_COMM_WORLD);
    MPI_Type_free(&row);
}

/* The reverse: every rank's mine into rank 0's all (rank 0's share already in place). */
static void gather_rows(const double *mine, double *all, int width, const int *counts,
                        const int *displs, int rank)
{
    MPI_Datatype row;
    MPI_Type_contiguous(width, MPI_DOUBLE, &row);
    MPI_Type_commit(&row);
    MPI_Gatherv(rank == 0 ? MPI_IN_PLACE : mine, counts[rank], row, all, counts, displs, row, 0,
                MPI_COMM_WORLD);
    MPI_Type_free(&row);
}

/* Rank 0 reads; its status, N and M go to every rank before anything else. */
static int root_read(const eval_job *job, int rank, out_file outs[2], eval_inputs *in, int64_t *n,
                     int64_t *m)
{
    int64_t head[3] = {CLI_OK, 0, 0};
    if (rank == 0) {
        int rc = eval_outputs_check(job, outs);
        if (rc == CLI_OK)
            rc = eval_read(job, in);
        if (rc == CLI_OK && (in->n > INT_MAX || in->m > INT_MAX))
            rc = cli_input_error(cmd,
                                 "%lld sources and %lld targets: rank 0 scatters at most 2^31 - "
                                 "1 of each; give each rank its own files (--per-rank)",
                                 (long long)in->n, (long long)in->m);
        head[0] = rc, head[1] = in->n, head[2] = in->m;
    }
    MPI_Bcast(head, 3, MPI_INT64_T, 0, MPI_COMM_WORLD);
    *n = head[1], *m = head[2];
    return (int)head[0];
}

/* The default: rank 0's files, scattered; the results gathered and written by rank 0. */
static int eval_root(const eval_job *job, int rank, int size)
{
    out_file outs[2] = {{0}, {0}};
    eval_inputs in = {0};
    int64_t n, m;
    int rc = root_read(job, rank, outs, &in, &n, &m);
    const int self = !job->targets, dim = job->dim, w = job->w, gw = job->gw;
    /* per rank: its sources and the first, its targets and the first */
    int *counts = malloc(sizeof(int) * 4 * (size_t)size), *displs = NULL;
    int *t_counts = NULL, *t_displs = NULL;
    if (counts)
        displs = counts + size, t_counts = counts + 2 * size, t_displs = counts + 3 * size;
    double *src = NULL, *q = NULL, *trg = NULL, *pot = NULL, *grad = NULL;
    double *all_pot = NULL, *all_grad = NULL;
    if (rc != CLI_OK)
        goto done;
    int bad = !counts;
    if (counts) {
        share_counts(n, size, counts, displs);
        share_counts(m, size, t_counts, t_displs);
        const int ns = counts[rank], mt = t_counts[rank];
        if (rank == 0) {
            src = in.src.data, q = in.q.data, trg = in.trg.data;
            pot = all_pot = rows(m, w);
            grad = all_grad = job->grad ? rows(m, gw) : NULL;
            bad = !all_pot || (job->grad && !all_grad);
        } else {
            src = rows(ns, dim), q = rows(ns, w), trg = self ? NULL : rows(mt, dim);
            pot = rows(mt, w), grad = job->grad ? rows(mt, gw) : NULL;
            bad = !src || !q || (!self && !trg) || !pot || (job->grad && !grad);
        }
    }
    if (bad)
        cli_error(cmd, "rank %d: out of memory for its share of %lld sources and %lld targets",
                  rank, (long long)n, (long long)m);
    if ((rc = ranks_agree(bad ? CLI_FAIL : CLI_OK)) != CLI_OK) {
        rc = bad ? rc : CLI_OK; /* the rank that ran out says so */
        goto done;
    }
    scatter_rows(in.src.data, src, dim, counts, displs, rank);
    scatter_rows(in.q.data, q, w, counts, displs, rank);
    if (!self)
        scatter_rows(in.trg.data, trg, dim, t_counts, t_displs, rank);
    rc = distributed_eval(job, counts[rank], src, q, t_counts[rank], trg, pot, grad);
    if (rc != CLI_OK)
        goto done;
    if (job->pot)
        gather_rows(pot, all_pot, w, t_counts, t_displs, rank);
    if (job->grad)
        gather_rows(grad, all_grad, gw, t_counts, t_displs, rank);
    if (rank == 0 &&
        (rc = eval_check_results(job, job->pot ? all_pot : NULL, all_grad, m)) == CLI_OK)
        rc = eval_write(job, outs, all_pot, all_grad, m);

done:
    if (rank != 0) {
        free(src), free(q), free(trg), free(pot), free(grad);
    } else {
        free(all_pot), free(all_grad);
    }
    free(counts);
    outputs_free(outs, 2);
    eval_inputs_free(&in);
    return rc;
}

/* --per-rank: every rank's own files. */
static int eval_own(const eval_job *job)
{
    out_file outs[2] = {{0}, {0}};
    eval_inputs in = {0};
    double *pot = NULL, *grad = NULL;
    int rc = eval_outputs_check(job, outs);
    if (rc == CLI_OK)
        rc = eval_read(job, &in);
    if (rc == CLI_OK) {
        pot = rows(in.m, job->w);
        grad = job->grad ? rows(in.m, job->gw) : NULL;
        if (!pot || (job->grad && !grad)) {
            cli_error(cmd, "out of memory for the results of %lld targets", (long long)in.m);
            rc = CLI_FAIL;
        }
    }
    /* a rank whose files failed ends every rank here, before the collective plan */
    if (ranks_agree(rc) != CLI_OK)
        goto done;
    rc = distributed_eval(job, in.n, in.src.data, in.q.data, in.m,
                          job->targets ? in.trg.data : NULL, pot, grad);
    if (rc != CLI_OK)
        goto done;
    /* results that overflowed on one rank: no rank writes */
    rc = eval_check_results(job, job->pot ? pot : NULL, grad, in.m);
    if (ranks_agree(rc) == CLI_OK)
        rc = eval_write(job, outs, pot, grad, in.m);

done:
    outputs_free(outs, 2);
    eval_inputs_free(&in);
    free(pot);
    free(grad);
    return rc;
}

int eval_mpi(const eval_job *job, int per_rank)
{
    return per_rank ? eval_own(job) : eval_root(job, cli_mpi_rank(), cli_mpi_size());
}
#else
int eval_mpi(const eval_job *job, int per_rank)
{
    (void)job, (void)per_rank;
    cli_error("eval", "this fmmkit was built without MPI");
    return CLI_FAIL;
}
#endif
