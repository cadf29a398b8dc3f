/* test_mpi_let.c -- the treecode's distributed sources (src/mpi/let.c) on the ranks mpirun
 * gives: 12,000 points of a Plummer sphere, of two clusters far apart, of a uniform cube with
 * a far outlier, and of a Plummer sphere with a coincident group of 1,500 points and clusters
 * nested 8 levels deep about it, shared unevenly (the last rank none); the treecode (laplace and plummer,
 * theta 0.6, fp64 and fp32) against the direct sum on all points, every rank with its own
 * sources as targets, with separate targets, and mixed (rank 0 its sources, the others
 * separate targets), with one and two charge vectors; the error within the treecode's own at
 * this theta and near the same plan with the sources replicated; every source kept by one
 * rank, the far cluster's sources replaced by pseudo-particles; targets that stay in place
 * (nothing moved); a NaN charge on one rank refused on every rank. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit_mpi.h"
#include "mpi_test.h"
#include "let_test.h"
#include "mpi/mpi_internal.h" /* fmk_mpi_set_let, fmk_mpi_let_counts */

/* The opening angle of the runs (main sweeps it for one case). */
static double theta = 0.6;

enum { SELF, SEPARATE, MIXED };
static const char *mode_name[] = {"self", "targets", "mixed"};

/* A distributed tree plan over my share; pot, grad: nd vectors at my targets. */
static fmk_status mpi_tree(fmk_kernel kernel, fmk_precision prec, int let, int mine_self,
                           int64_t ns, const double *xs, const double *q, int64_t nt,
                           const double *xt, int64_t nd, double *pot, double *grad, int64_t *own,
                           int64_t *local)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE, o.backend = test_backend(), o.theta = theta, o.precision = prec;
    o.softening = kernel == FMK_KERNEL_PLUMMER ? 0.01 : 0;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, kernel, 1e-2, &o);
    if (st != FMK_OK)
        return st;
    fmk_mpi_set_let(plan, let);
    st = fmk_plan_set_points(plan, ns, xs, mine_self ? 0 : nt, mine_self ? NULL : xt);
    if (st == FMK_OK)
        fmk_mpi_let_counts(plan, own, local);
    fmk_mpi_info mi;
    if (st == FMK_OK && fmk_plan_mpi_info(plan, &mi) == FMK_OK) /* what it says of this rank */
        CHECK(mi.ranks == size && mi.distributed_sources == (let && size > 1) &&
                  mi.local_sources == *local && (!let || size == 1 || mi.sources_kept == *own) &&
                  mi.seconds_partition >= 0 && mi.seconds_local_set_points > 0,
              "fmk_plan_mpi_info: ranks %d distributed %d kept %lld local %lld", mi.ranks,
              mi.distributed_sources, (long long)mi.sources_kept, (long long)mi.local_sources);
    if (st == FMK_OK)
        st = nd == 1 ? fmk_plan_eval(plan, q, pot, grad)
                     : fmk_plan_eval_many(plan, nd, q, pot, grad);
    fmk_plan_destroy(plan);
    return st;
}

static void run(int set, fmk_kernel kernel, fmk_precision prec, int mode, int64_t nd)
{
    const int64_t n = 12000, m = 3000;
    double *xs = malloc(sizeof(double) * 3 * n), *xt = malloc(sizeof(double) * 3 * m);
    double *q = malloc(sizeof(double) * n * nd);
    make_points(set, n, 11, xs);
    make_points(set, m, 12, xt);
    rng_state = 99;
    for (int64_t i = 0; i < n * nd; i++)
        q[i] = kernel == FMK_KERNEL_PLUMMER ? 1.0 / n : uniform01() - 0.5;
    int64_t sf[9], tf[9];
    shares(n, sf), shares(m, tf);
    const int mine_self = mode == SELF || (mode == MIXED && rank == 0);
    const int64_t my_s = sf[rank + 1] - sf[rank];
    const int64_t my_t = mine_self ? my_s : tf[rank + 1] - tf[rank];
    const double *mx = mine_self ? xs + 3 * sf[rank] : xt + 3 * tf[rank];
    double *mq = malloc(sizeof(double) * (size_t)(my_s > 0 ? my_s : 1) * nd);
    for (int64_t v = 0; v < nd; v++)
        memcpy(mq + v * my_s, q + v * n + sf[rank], sizeof(double) * my_s);
    const size_t rn = (size_t)(my_t > 0 ? my_t : 1) * nd;
    double *ref = malloc(sizeof(double) * rn * 3), *rg = malloc(sizeof(double) * rn * 9);
    double *pot = ref + rn, *rep = ref + 2 * rn;
    double *grad = rg + 3 * rn, *repg = rg + 6 * rn;
    /* the exact sum at my targets over all sources (the coincident pair: laplace 0; plummer,
     * for my own sources, removed below) */
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT, o.backend = FMK_BACKEND_CPU;
    o.softening = kernel == FMK_KERNEL_PLUMMER ? 0.01 : 0;
    fmk_status st = FMK_OK;
    for (int64_t v = 0; v < nd && st == FMK_OK; v++) {
        st = fmk_eval(3, kernel, 1e-6, &o, n, xs, q + v * n, my_t, mx, ref + v * my_t,
                      rg + 3 * v * my_t);
        if (mine_self && kernel == FMK_KERNEL_PLUMMER)
            for (int64_t i = 0; i < my_t; i++)
                ref[v * my_t + i] -= q[v * n + sf[rank] + i] / 0.01;
    }
    CHECK(st == FMK_OK, "direct reference: %s", fmk_plan_last_error(NULL));
    int64_t own = 0, local = 0, own0, local0;
    st = mpi_tree(kernel, prec, 1, mine_self, my_s, xs + 3 * sf[rank], mq, my_t, mx, nd, pot, grad,
                  &own, &local);
    CHECK(st == FMK_OK, "distributed tree: %s", fmk_plan_last_error(NULL));
    st = mpi_tree(kernel, prec, 0, mine_self, my_s, xs + 3 * sf[rank], mq, my_t, mx, nd, rep, repg,
                  &own0, &local0);
    CHECK(st == FMK_OK, "replicated tree: %s", fmk_plan_last_error(NULL));
    const double e = rel_l2(pot, ref, my_t * nd), g = rel_l2(grad, rg, 3 * my_t * nd);
    const double er = rel_l2(rep, ref, my_t * nd), gr = rel_l2(repg, rg, 3 * my_t * nd);
    int64_t span[2] = {local, -local};
    MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("  %s %s %s %s nd %lld: pot %.2e grad %.2e (replicated %.2e %.2e); local sources "
               "<= %lld of %lld\n",
               set_name[set], fmk_kernel_name(kernel), prec == FMK_PRECISION_FP32 ? "fp32" : "fp64",
               mode_name[mode], (long long)nd, e, g, er, gr, (long long)span[0], (long long)n);
    /* within the treecode's error at this theta (the GPU's at 0.9: 1.3e-2), and near the same
     * plan with the sources replicated (which differs from it
     * by the pseudo-particles and by where the octree's cells fall: the frame) */
    CHECK(e <= (theta > 0.8 ? 3e-2 : 1e-2) && e <= 2 * er + 1e-4 && g <= 2 * gr + 1e-3,
          "%s %s: error %.3e / %.3e, replicated %.3e / %.3e", set_name[set], mode_name[mode], e, g,
          er, gr);
    /* every source kept by exactly one rank; no local plan with more than all of them (the
     * pseudo-particles replace the far nodes: on 2 and 4 ranks, whose domains each hold one
     * of the two far clusters, the local plans have about half) */
    check_kept(set_name[set], n, own, span[0], set == CLUSTERS && size % 2 == 0 ? n * 3 / 5 : n);
    free(xs), free(xt), free(q), free(mq), free(ref), free(rg);
}

/* Targets in place: rank r holds the r-th of size clusters far apart along x, all of the same
 * count, so the partition keeps every target where it is: targets_sent is 0 on every rank (no
 * target and no result moves) and the results, with one and two charge vectors, are the
 * direct sum's within the treecode's error. */
static void in_place(void)
{
    const int64_t per = 1500, n = per * size, nd = 2;
    double *x = malloc(sizeof(double) * 3 * (size_t)n),
           *q = malloc(sizeof(double) * (size_t)n * nd);
    double *ref = malloc(sizeof(double) * (size_t)per * 4 * nd);
    double *rg = ref + per * nd, *pot = malloc(sizeof(double) * (size_t)per * 4 * nd);
    double *grad = pot + per * nd;
    rng_state = 4242;
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = 0.5 * uniform01();
        x[3 * i] += 100.0 * (double)(i / per);
    }
    for (int64_t i = 0; i < n * nd; i++)
        q[i] = uniform01() - 0.5;
    double *mq = malloc(sizeof(double) * (size_t)per * nd);
    for (int64_t v = 0; v < nd; v++)
        memcpy(mq + v * per, q + v * n + per * rank, sizeof(double) * per);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT, o.backend = FMK_BACKEND_CPU;
    fmk_status st = FMK_OK;
    for (int64_t v = 0; v < nd && st == FMK_OK; v++)
        st = fmk_eval(3, FMK_KERNEL_LAPLACE, 1e-6, &o, n, x, q + v * n, per, x + 3 * per * rank,
                      ref + v * per, rg + 3 * v * per);
    CHECK(st == FMK_OK, "in place: direct reference: %s", fmk_plan_last_error(NULL));
    o.method = FMK_METHOD_TREE, o.backend = test_backend(), o.theta = 0.6;
    fmk_plan *plan = NULL;
    st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-2, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(plan, per, x + 3 * per * rank, 0, NULL);
    fmk_mpi_info mi;
    memset(&mi, 0, sizeof mi);
    if (st == FMK_OK)
        st = fmk_plan_mpi_info(plan, &mi);
    int64_t sent = mi.targets_sent;
    MPI_Allreduce(MPI_IN_PLACE, &sent, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    CHECK(st == FMK_OK && sent == 0, "in place: %s, %lld targets sent", fmk_status_string(st),
          (long long)sent);
    for (int pass = 0; pass < 2 && st == FMK_OK; pass++) { /* one vector, then two */
        st =
            pass ? fmk_plan_eval_many(plan, nd, mq, pot, grad) : fmk_plan_eval(plan, mq, pot, grad);
        const int64_t m = pass ? nd : 1;
        const double e = rel_l2(pot, ref, per * m), g = rel_l2(grad, rg, 3 * per * m);
        if (rank == 0)
            printf("  in place, %lld vector(s): pot %.2e grad %.2e\n", (long long)m, e, g);
        CHECK(st == FMK_OK && e <= 1e-2 && g <= 1e-2, "in place: %s, error %.3e / %.3e",
              fmk_status_string(st), e, g);
    }
    fmk_plan_destroy(plan);
    free(x), free(q), free(ref), free(pot), free(mq);
}

/* A NaN charge on the last rank (which has no sources: the first then) is refused everywhere,
 * and the plan evaluates afterwards. */
static void bad_charge(void)
{
    const int64_t n = 3000;
    double *x = malloc(sizeof(double) * 3 * n), *q = malloc(sizeof(double) * n);
    double *pot = malloc(sizeof(double) * n);
    make_points(PLUMMER, n, 5, x);
    for (int64_t i = 0; i < n; i++)
        q[i] = 1.0;
    int64_t sf[9];
    shares(n, sf);
    const int64_t my = sf[rank + 1] - sf[rank];
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE, o.backend = test_backend(), o.theta = 0.6;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-2, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(plan, my, x + 3 * sf[rank], 0, NULL);
    CHECK(st == FMK_OK, "set_points: %s", fmk_plan_last_error(plan));
    if (rank == 0 && my > 0)
        q[sf[rank] + my / 2] = NAN;
    st = fmk_plan_eval(plan, q + sf[rank], pot, NULL);
    CHECK(st == FMK_ERR_NONFINITE && strstr(fmk_plan_last_error(plan), "rank 0"),
          "a NaN charge on rank 0: %d %s", (int)st, fmk_plan_last_error(plan));
    if (my > 0)
        q[sf[rank] + my / 2] = 1.0;
    st = fmk_plan_eval(plan, q + sf[rank], pot, NULL);
    CHECK(st == FMK_OK, "after the NaN: %s", fmk_plan_last_error(plan));
    fmk_mpi_info mi;
    CHECK(fmk_plan_mpi_info(plan, NULL) == FMK_ERR_NULL, "fmk_plan_mpi_info(plan, NULL)");
    CHECK(fmk_plan_mpi_info(plan, &mi) == FMK_OK && mi.targets_evaluated >= 0 &&
              mi.seconds_local_eval > 0,
          "fmk_plan_mpi_info after an evaluation");
    fmk_plan_destroy(plan);
    fmk_plan *one = NULL; /* not a distributed plan */
    fmk_plan_create(&one, 3, FMK_KERNEL_LAPLACE, 1e-3, &o);
    CHECK(fmk_plan_mpi_info(one, &mi) == FMK_ERR_ARG, "fmk_plan_mpi_info of an ordinary plan");
    fmk_plan_destroy(one);
    free(x), free(q), free(pot);
}

/* n Plummer points of unit total charge, every rank its equal share [*b, *e), and a plan of
 * method m made on every rank (theta 0.6 for the treecode, one thread) with the share set. */
typedef struct share {
    int64_t n, b, e;
    double *x, *q, *pot;
    fmk_plan *plan;
} share;

static fmk_status share_make(share *sh, int64_t n, uint64_t seed, fmk_method m)
{
    sh->n = n, sh->b = n * rank / size, sh->e = n * (rank + 1) / size;
    sh->x = malloc(sizeof(double) * 3 * n), sh->q = malloc(sizeof(double) * n);
    sh->pot = malloc(sizeof(double) * n), sh->plan = NULL;
    make_points(PLUMMER, n, seed, sh->x);
    for (int64_t i = 0; i < n; i++)
        sh->q[i] = 1.0 / n;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = m, o.backend = test_backend(), o.theta = m == FMK_METHOD_TREE ? 0.6 : 0;
    o.threads = 1;
    const double eps = m == FMK_METHOD_TREE ? 1e-2 : 1e-6;
    fmk_status st = fmk_plan_create_mpi(&sh->plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, eps, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(sh->plan, sh->e - sh->b, sh->x + 3 * sh->b, 0, NULL);
    return st;
}

static void share_free(share *sh)
{
    fmk_plan_destroy(sh->plan);
    free(sh->x), free(sh->q), free(sh->pot);
}

/* The partition's weights: after an evaluation that found rank 0's targets 4 times as costly
 * as the others', the next set_points of the same points gives rank 0 a quarter of the
 * weight's share of targets: n (P + 3) / (4 P^2) of them. */
static void rebalance(void)
{
    share sh;
    fmk_status st = share_make(&sh, 8000, 7, FMK_METHOD_TREE);
    const int64_t n = sh.n, b = sh.b, e = sh.e;
    double *x = sh.x, *q = sh.q, *pot = sh.pot, *cost = malloc(sizeof(double) * size);
    fmk_plan *plan = sh.plan;
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, q + b, pot, NULL);
    const int64_t before = fmk_mpi_evaluated_targets(plan);
    for (int r = 0; r < size; r++)
        cost[r] = r == 0 ? 4e-6 : 1e-6;
    fmk_mpi_set_costs(plan, cost);
    if (st == FMK_OK)
        st = fmk_plan_set_points(plan, e - b, x + 3 * b, 0, NULL);
    CHECK(st == FMK_OK, "rebalance: %s", fmk_plan_last_error(plan));
    const int64_t after = fmk_mpi_evaluated_targets(plan);
    const double want = (double)n * (size + 3) / (4.0 * size * size);
    if (rank == 0)
        printf("  rebalance: rank 0 evaluates %lld targets, then %lld with 4x their cost (want "
               "%.0f)\n",
               (long long)before, (long long)after, want);
    if (rank == 0 && size > 1)
        CHECK(fabs((double)after - want) < 0.02 * n, "rebalance: %lld targets, want %.0f",
              (long long)after, want);
    share_free(&sh);
    free(cost);
}

/* An interrupt check set on rank 0's distributed plan stops rank 0's local work; every rank
 * returns FMK_ERR_INTERRUPTED (the others after their own share), and the plan evaluates once
 * the check is cleared. The direct sum of 16,000 points: long enough for the check to run. */
static int stop_now(void *user)
{
    (void)user;
    return 1;
}

static void interrupt_case(void)
{
    if (test_backend() == FMK_BACKEND_CUDA) /* a GPU sum this short checks no interrupt: */
        return;                             /* tests/gpu/test_interrupt_gpu.c covers them */
    share sh;
    fmk_status st = share_make(&sh, 16000, 9, FMK_METHOD_DIRECT);
    const int64_t b = sh.b;
    double *q = sh.q, *pot = sh.pot;
    fmk_plan *plan = sh.plan;
    CHECK(st == FMK_OK, "interrupt: set_points %s", fmk_plan_last_error(plan));
    if (rank == 0)
        fmk_plan_set_interrupt(plan, stop_now, NULL);
    st = fmk_plan_eval(plan, q + b, pot, NULL);
    CHECK(st == FMK_ERR_INTERRUPTED && strstr(fmk_plan_last_error(plan), "interrupted"),
          "interrupt: eval gave %d (%s)", (int)st, fmk_plan_last_error(plan));
    if (rank == 0)
        fmk_plan_set_interrupt(plan, NULL, NULL);
    fmk_plan_interrupt(plan); /* asked before the call: cleared when it begins, as always */
    st = fmk_plan_eval(plan, q + b, pot, NULL);
    CHECK(st == FMK_OK, "interrupt: eval after %s", fmk_plan_last_error(plan));
    share_free(&sh);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 8) {
        MPI_Finalize();
        return 1;
    }
    for (int set = 0; set < SETS; set++)
        for (int mode = SELF; mode <= MIXED; mode++)
            run(set, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, mode, 1);
    run(PLUMMER, FMK_KERNEL_PLUMMER, FMK_PRECISION_FP64, SELF, 1);
    run(PLUMMER, FMK_KERNEL_PLUMMER, FMK_PRECISION_FP64, MIXED, 1);
    run(PLUMMER, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP32, SELF, 1);
    run(CLUSTERS, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, SEPARATE, 2);
    /* the opening test of the locally essential trees follows theta: the error with them
     * stays the treecode's own at a tighter and a looser angle */
    for (int k = 0; k < 2; k++) {
        theta = k ? 0.9 : 0.3;
        if (rank == 0)
            printf("  theta %.1f:\n", theta);
        run(PLUMMER, FMK_KERNEL_LAPLACE, FMK_PRECISION_FP64, SELF, 1);
    }
    theta = 0.6;
    in_place();
    bad_charge();
    rebalance();
    interrupt_case();
    int total = failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi_let on %d rank%s: %s (%d failure%s)\n", size, size == 1 ? "" : "s",
               total ? "FAILED" : "ok", total, total == 1 ? "" : "s");
    MPI_Finalize();
    return total ? 1 : 0;
}
