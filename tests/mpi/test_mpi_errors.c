/* test_mpi_errors.c -- MPI's own errors in distributed plans and simulations
 * (docs/distributed.md, "MPI's own errors"), on 1..4 ranks:
 *   - MPI_COMM_NULL and an intercommunicator refused with FMK_ERR_ARG (plans and simulations),
 *     the caller's communicator keeping its error handler;
 *   - an MPI error in each collective call in turn: this program wraps the collectives that
 *     libfmmkit_mpi calls (MPI's profiling interface: each wrapper calls PMPI_*), and the k-th
 *     call after arming is made with an invalid datatype on every rank, so that MPI itself
 *     raises the error through the communicator's handler (MPI_ERRORS_RETURN on the library's
 *     duplicate; MPI's default would abort the job here). For k = 1, 2, ... until a whole
 *     create, set_points, eval (or a simulation's create and steps) passes without reaching it,
 *     the injected failure must come back as FMK_ERR_INTERNAL naming the MPI call, on every
 *     rank, without a hang, and the next call must be refused (FMK_ERR_STATE) without MPI;
 *   - fmk_plan_create_mpi after MPI_Finalize: FMK_ERR_STATE.
 * Nothing is sent when the error is injected (every rank's call fails its argument checks),
 * so no rank waits for another. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit.h"
#include "fmmkit_mpi.h"
#include "fmmkit_sim.h"
#include "mpi/mpi_internal.h" /* fmk_mpi_set_balance */
#include "mpi_test.h"

/* The fault: the countdown-th wrapped call from now fails (0: none); injected, once it has. */
static int countdown, injected;
static const char *injected_in; /* the wrapped call that failed */

static MPI_Datatype type_or_fault(MPI_Datatype type, const char *call)
{
    if (countdown > 0 && --countdown == 0) {
        injected = 1, injected_in = call;
        return MPI_DATATYPE_NULL; /* MPI_ERR_TYPE from MPI's argument checks */
    }
    return type;
}

int MPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    return PMPI_Allreduce(sb, rb, n, type_or_fault(t, "MPI_Allreduce"), op, c);
}

int MPI_Allgather(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt,
                  MPI_Comm c)
{
    st = type_or_fault(st, "MPI_Allgather");
    return PMPI_Allgather(sb, sn, st, rb, rn, st == MPI_DATATYPE_NULL ? st : rt, c);
}

int MPI_Allgatherv(const void *sb, int sn, MPI_Datatype st, void *rb, const int *rn, const int *rd,
                   MPI_Datatype rt, MPI_Comm c)
{
    st = type_or_fault(st, "MPI_Allgatherv");
    return PMPI_Allgatherv(sb, sn, st, rb, rn, rd, st == MPI_DATATYPE_NULL ? st : rt, c);
}

int MPI_Alltoall(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt,
                 MPI_Comm c)
{
    st = type_or_fault(st, "MPI_Alltoall");
    return PMPI_Alltoall(sb, sn, st, rb, rn, st == MPI_DATATYPE_NULL ? st : rt, c);
}

int MPI_Alltoallv(const void *sb, const int *sn, const int *sd, MPI_Datatype st, void *rb,
                  const int *rn, const int *rd, MPI_Datatype rt, MPI_Comm c)
{
    st = type_or_fault(st, "MPI_Alltoallv");
    return PMPI_Alltoallv(sb, sn, sd, st, rb, rn, rd, st == MPI_DATATYPE_NULL ? st : rt, c);
}

int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    return PMPI_Bcast(b, n, type_or_fault(t, "MPI_Bcast"), root, c);
}

int MPI_Gatherv(const void *sb, int sn, MPI_Datatype st, void *rb, const int *rn, const int *rd,
                MPI_Datatype rt, int root, MPI_Comm c)
{
    st = type_or_fault(st, "MPI_Gatherv");
    return PMPI_Gatherv(sb, sn, st, rb, rn, rd, st == MPI_DATATYPE_NULL ? st : rt, root, c);
}

int MPI_Scatterv(const void *sb, const int *sn, const int *sd, MPI_Datatype st, void *rb, int rn,
                 MPI_Datatype rt, int root, MPI_Comm c)
{
    st = type_or_fault(st, "MPI_Scatterv");
    return PMPI_Scatterv(sb, sn, sd, st, rb, rn, st == MPI_DATATYPE_NULL ? st : rt, root, c);
}

/* 1 when v is the same on every rank (not a wrapped call) */
static int same_everywhere(int v)
{
    int both[2] = {v, -v};
    PMPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return both[0] == -both[1];
}

/* MPI_COMM_WORLD still has MPI's default handler */
static int world_fatal(void)
{
    MPI_Errhandler h;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
    const int fatal = h == MPI_ERRORS_ARE_FATAL;
    MPI_Errhandler_free(&h);
    return fatal;
}

static void bad_communicators(void)
{
    fmk_plan *plan = (fmk_plan *)&plan;
    fmk_status st = fmk_plan_create_mpi(&plan, MPI_COMM_NULL, 3, FMK_KERNEL_LAPLACE, 1e-6, NULL);
    CHECK(st == FMK_ERR_ARG && !plan && strstr(fmk_plan_last_error(NULL), "MPI_COMM_NULL"),
          "plan on MPI_COMM_NULL: %d %s", (int)st, fmk_plan_last_error(NULL));
    fmk_sim *sim = (fmk_sim *)&sim;
    const double m = 1, x[3] = {0, 0, 0}, v[3] = {0, 0, 0};
    st = fmk_sim_create_mpi(&sim, MPI_COMM_NULL, 1, &m, x, v, NULL, NULL, NULL);
    CHECK(st == FMK_ERR_ARG && !sim && strstr(fmk_sim_last_error(NULL), "MPI_COMM_NULL"),
          "simulation on MPI_COMM_NULL: %d %s", (int)st, fmk_sim_last_error(NULL));
    if (size > 1) { /* the two halves of the ranks, joined by an intercommunicator */
        MPI_Comm half, inter;
        const int color = rank < size / 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? size / 2 : 0, 7, &inter);
        st = fmk_plan_create_mpi(&plan, inter, 3, FMK_KERNEL_LAPLACE, 1e-6, NULL);
        CHECK(st == FMK_ERR_ARG && !plan && strstr(fmk_plan_last_error(NULL), "intercommunicator"),
              "plan on an intercommunicator: %d %s", (int)st, fmk_plan_last_error(NULL));
        st = fmk_sim_create_mpi(&sim, inter, 1, &m, x, v, NULL, NULL, NULL);
        CHECK(st == FMK_ERR_ARG && !sim, "simulation on an intercommunicator: %d", (int)st);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    CHECK(fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-6, NULL) == FMK_OK,
          "plan: %s", fmk_plan_last_error(NULL));
    CHECK(world_fatal(), "the caller's communicator lost its error handler");
    fmk_plan_destroy(plan);
}

/* A failure's message names the MPI call that failed and says it is MPI's. */
static int names_mpi(const char *message)
{
    return strstr(message, "MPI_") && strstr(message, " failed: ") &&
           strstr(message, "an error of MPI itself");
}

typedef struct plan_case {
    const char *name;
    fmk_method method;
    int self;      /* targets are the sources */
    int rebalance; /* moved targets (balance 0) */
} plan_case;

enum { NP = 120 };

/* One armed run: create, set_points, eval with the k-th collective failing. Returns whether
 * the fault was reached (the same on every rank: checked). */
static int plan_once(const plan_case *c, int k, const double *x, const double *q, double *pot)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method, o.backend = FMK_BACKEND_CPU, o.threads = 1;
    fmk_plan *plan = NULL;
    countdown = k, injected = 0;
    fmk_status st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-3, &o);
    const char *where = "create";
    if (st == FMK_OK) {
        if (c->rebalance)
            fmk_mpi_set_balance(plan, 0);
        where = "set_points";
        st = fmk_plan_set_points(plan, NP, x, c->self ? 0 : NP / 2, c->self ? NULL : x + NP);
    }
    if (st == FMK_OK) {
        where = "eval";
        st = fmk_plan_eval(plan, q, pot, NULL);
    }
    const int hit = injected;
    countdown = 0;
    CHECK(same_everywhere(hit), "%s k=%d: the fault on some ranks only", c->name, k);
    if (!hit) {
        CHECK(st == FMK_OK, "%s k=%d: %s", c->name, k, fmk_plan_last_error(plan));
    } else {
        const char *msg = fmk_plan_last_error(plan);
        CHECK(st == FMK_ERR_INTERNAL && names_mpi(msg), "%s k=%d, %s: status %d, \"%s\"", c->name,
              k, where, (int)st, msg);
        if (rank == 0 && k == 1 && c->method == FMK_METHOD_DIRECT && !c->rebalance)
            printf("  e.g. %s\n", msg);
        if (plan) { /* refused at once, with the first failure's message */
            st = fmk_plan_eval(plan, q, pot, NULL);
            CHECK(st == FMK_ERR_STATE && names_mpi(fmk_plan_last_error(plan)),
                  "%s k=%d: eval after the failure: %d %s", c->name, k, (int)st,
                  fmk_plan_last_error(plan));
            st = fmk_plan_set_points(plan, NP, x, 0, NULL);
            CHECK(st == FMK_ERR_STATE, "%s k=%d: set_points after the failure: %d", c->name, k,
                  (int)st);
        }
    }
    fmk_plan_destroy(plan);
    return hit;
}

static void plan_faults(void)
{
    static const plan_case cases[] = {
        {"direct", FMK_METHOD_DIRECT, 1, 0},
        {"direct, moved targets", FMK_METHOD_DIRECT, 0, 1},
        {"tree (distributed sources)", FMK_METHOD_TREE, 0, 1},
    };
    double *x = malloc(sizeof(double) * 3 * (NP + NP / 2)), *q = malloc(sizeof(double) * NP),
           *pot = malloc(sizeof(double) * NP);
    rng_state = 1000 + (uint64_t)rank;
    for (int i = 0; i < 3 * (NP + NP / 2); i++)
        x[i] = uniform01() + 0.3 * rank; /* overlapping slabs: every rank has neighbours */
    for (int i = 0; i < NP; i++)
        q[i] = uniform01() - 0.5;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int k = 1;
        while (plan_once(&cases[c], k, x, q, pot) && k < 500)
            k++;
        CHECK(k > 3 && k < 500, "%s: %d collective calls", cases[c].name, k - 1);
        if (rank == 0)
            printf("  %s: an error in each of its %d collective calls\n", cases[c].name, k - 1);
    }
    free(x), free(q), free(pot);
}

enum { NS = 64 };

static int deferred; /* failures that came back at the next call, not the one they hit */

/* One armed run of a simulation: create and two steps. */
static int sim_once(int k, const double *m, const double *x, const double *v)
{
    fmk_sim_opts o;
    fmk_sim_opts_default(&o);
    o.plan.method = FMK_METHOD_TREE, o.plan.backend = FMK_BACKEND_CPU, o.plan.threads = 1;
    o.eps = 1e-3;
    o.soft = 0.05, o.dt = 1e-3;
    fmk_sim *sim = NULL;
    countdown = k, injected = 0;
    fmk_status st = fmk_sim_create_mpi(&sim, MPI_COMM_WORLD, NS, m, x, v, NULL, NULL, &o);
    if (st == FMK_OK)
        st = fmk_sim_run(sim, 0, 2);
    const int hit = injected;
    countdown = 0;
    CHECK(same_everywhere(hit), "simulation k=%d: the fault on some ranks only", k);
    const char *msg = fmk_sim_last_error(sim);
    if (!hit)
        CHECK(st == FMK_OK, "simulation k=%d: %s", k, msg);
    else if (st == FMK_OK) { /* a hook that returns nothing: the failure comes at the next call */
        st = fmk_sim_run(sim, 0, 1), msg = fmk_sim_last_error(sim), deferred++;
        if (rank == 0)
            printf("  simulation k=%d: %s's failure returned by the next call\n", k, injected_in);
    }
    if (hit) {
        CHECK(st != FMK_OK && strstr(msg, "MPI_") && strstr(msg, "failed: "),
              "simulation k=%d: status %d, \"%s\"", k, (int)st, msg);
        if (sim)
            CHECK(fmk_sim_run(sim, 0, 1) != FMK_OK, "simulation k=%d: a step after the failure", k);
    }
    fmk_sim_destroy(sim);
    return hit;
}

static void sim_faults(void)
{
    double *m = malloc(sizeof(double) * NS), *x = malloc(sizeof(double) * 3 * NS),
           *v = calloc(3 * NS, sizeof(double));
    fmk_sim_ic_plummer(NS, 11 + (uint64_t)rank, m, x, v);
    for (int i = 0; i < NS; i++)
        x[3 * i] += 0.5 * rank;
    int k = 1;
    while (sim_once(k, m, x, v) && k < 2000)
        k++;
    CHECK(k > 3 && k < 2000, "simulation: %d collective calls", k - 1);
    if (rank == 0)
        printf("  simulation: an error in each of its %d collective calls (%d returned by the "
               "next call)\n",
               k - 1, deferred);
    free(m), free(x), free(v);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* the injection needs MPI's argument checks (Open MPI: mpi_param_check, on by default) */
    MPI_Comm probe;
    MPI_Comm_dup(MPI_COMM_WORLD, &probe);
    MPI_Comm_set_errhandler(probe, MPI_ERRORS_RETURN);
    int word = 0;
    const int checks = PMPI_Bcast(&word, 1, MPI_DATATYPE_NULL, 0, probe) != MPI_SUCCESS;
    MPI_Comm_free(&probe);
    bad_communicators();
    if (checks) {
        plan_faults();
        sim_faults();
    } else if (rank == 0) {
        printf("  MPI does not check arguments here: no injected errors\n");
    }
    int total = failures;
    PMPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi_errors on %d rank%s: %s (%d failure%s)\n", size, size == 1 ? "" : "s",
               total ? "FAILED" : "ok", total, total == 1 ? "" : "s");
    MPI_Finalize();
    /* after MPI_Finalize: refused, no MPI call (each rank's own exit status) */
    fmk_plan *plan = NULL;
    const fmk_status st =
        fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-6, NULL);
    if (st != FMK_ERR_STATE || plan || !strstr(fmk_plan_last_error(NULL), "finalized")) {
        fprintf(stderr, "rank %d: FAIL create after MPI_Finalize: %d %s\n", rank, (int)st,
                fmk_plan_last_error(NULL));
        total++;
    }
    return total ? 1 : 0;
}
