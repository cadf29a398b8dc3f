/* test_mpi.c -- distributed plans (include/fmmkit_mpi.h) on the ranks mpirun gives (1..4):
 * every rank with an uneven share of uniform, Plummer and two-cluster points (the last rank
 * with none when there are several), results against the one-rank plan on all the points:
 * bit for bit for the fp64 direct sum, within eps for fmm and the treecode's own error for
 * tree; a bad input on one rank only gives the same status on every rank, and the plan stays
 * usable. Each rank computes the one-rank reference itself (small N). The two-cluster cases
 * make their plan by fmk_plan_create_mpi_f (the bindings' entry) with MPI_Comm_c2f of
 * MPI_COMM_WORLD, to the same results. The partition of the targets (partition.c), forced,
 * with rank 0 holding 90% of the points: the same results, and even counts evaluated. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit_mpi.h"
#include "mpi_test.h"
#include "mpi/mpi_internal.h" /* fmk_mpi_set_balance, fmk_mpi_evaluated_targets */

enum { UNIFORM, PLUMMER, CLUSTERS, SETS };
static const char *set_name[SETS] = {"uniform", "plummer", "two-cluster"};

/* n points of a set in dim dimensions (the same on every rank: seeded by set and n). */
static void make_points(int set, int dim, int64_t n, uint64_t seed, double *x)
{
    rng_state = seed * 7919 + (uint64_t)set;
    for (int64_t i = 0; i < n; i++) {
        double p[3];
        if (set == PLUMMER) {
            plummer_point(p);
        } else {
            for (int k = 0; k < 3; k++)
                p[k] = uniform01();
            if (set == CLUSTERS) {
                const double shift = i % 2 ? 100.0 : 0.0;
                for (int k = 0; k < 3; k++)
                    p[k] = shift + 0.1 * p[k];
            }
        }
        for (int k = 0; k < dim; k++)
            x[dim * i + k] = p[k];
    }
}

/* The uneven share of n points of each rank: weights 1, 3, 2, 5, ... and, with several ranks,
 * none for the last. first[r]..first[r+1]. */
static void shares(int64_t n, int64_t *first)
{
    static const int weight[] = {1, 3, 2, 5, 4, 1, 2, 3};
    int64_t total = 0;
    for (int r = 0; r < size; r++)
        total += size > 1 && r == size - 1 ? 0 : weight[r % 8];
    int64_t acc = 0;
    first[0] = 0;
    for (int r = 0; r < size; r++) {
        acc += size > 1 && r == size - 1 ? 0 : weight[r % 8];
        first[r + 1] = n * acc / total;
    }
}

typedef struct tcase {
    int dim;
    fmk_kernel kernel;
    fmk_method method;
    double eps;
    double softening;
} tcase;

/* Global relative l2 distance of a (this rank's n values) from b, over every rank. */
static double rel_l2(const double *a, const double *b, int64_t n)
{
    double sums[2] = {0, 0};
    for (int64_t i = 0; i < n; i++)
        sums[0] += (a[i] - b[i]) * (a[i] - b[i]), sums[1] += b[i] * b[i];
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sqrt(sums[0]);
}

/* The one-rank plan's potential and gradient on all points (targets NULL: the sources). */
static fmk_status one_rank(const tcase *c, fmk_method method, int64_t ns, const double *xs,
                           const double *q, int64_t nt, const double *xt, double *pot, double *grad)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method;
    o.backend = FMK_BACKEND_CPU;
    o.softening = c->softening;
    o.leaf_size = method == FMK_METHOD_DIRECT ? 0 : 16; /* small leaves: a far field at n 1200 */
    return fmk_eval(c->dim, c->kernel, c->eps, &o, ns, xs, q, nt, xt, pot, grad);
}

static int all_ok(int ok)
{
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok;
}

/* One case on one set: targets = sources (self) or separate targets. */
static void run_case(const tcase *c, int set, int self)
{
    const int dim = c->dim, cw = fmk_kernel_is_complex(c->kernel) ? 2 : 1;
    const int gw = cw == 2 ? 2 : dim;
    const int64_t n = 1200, m = self ? 0 : 500;
    double *xs = malloc(sizeof(double) * dim * n), *q = malloc(sizeof(double) * cw * n);
    double *xt = malloc(sizeof(double) * dim * (m + 1));
    make_points(set, dim, n, 1, xs);
    make_points(set, dim, m, 2, xt);
    rng_state = 99;
    for (int64_t i = 0; i < cw * n; i++)
        q[i] = uniform01() - 0.3;
    const int64_t nr = self ? n : m; /* reference targets */
    double *ref_p = malloc(sizeof(double) * cw * nr), *ref_g = malloc(sizeof(double) * gw * nr);
    double *dir_p = malloc(sizeof(double) * cw * nr), *dir_g = malloc(sizeof(double) * gw * nr);
    fmk_status st = one_rank(c, c->method, n, xs, q, m, self ? NULL : xt, ref_p, ref_g);
    CHECK(st == FMK_OK, "reference: %s", fmk_plan_last_error(NULL));
    st = one_rank(c, FMK_METHOD_DIRECT, n, xs, q, m, self ? NULL : xt, dir_p, dir_g);
    CHECK(st == FMK_OK, "direct reference: %s", fmk_plan_last_error(NULL));

    int64_t sf[9], tf[9];
    shares(n, sf);
    shares(m, tf);
    const int64_t my_s = sf[rank + 1] - sf[rank];
    const int64_t my_t0 = self ? sf[rank] : tf[rank], my_t = self ? my_s : tf[rank + 1] - tf[rank];
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method;
    o.backend = FMK_BACKEND_CPU;
    o.softening = c->softening;
    o.leaf_size = c->method == FMK_METHOD_DIRECT ? 0 : 16;
    fmk_plan *plan = NULL;
    /* the two-cluster set through the bindings' entry (the Fortran handle of the same
     * communicator): the same results */
    if (set == CLUSTERS)
        st = fmk_plan_create_mpi_f(&plan, MPI_Comm_c2f(MPI_COMM_WORLD), dim, c->kernel, c->eps, &o);
    else
        st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, dim, c->kernel, c->eps, &o);
    CHECK(st == FMK_OK && fmk_plan_is_mpi(plan), "create: %s", fmk_plan_last_error(NULL));
    if (st != FMK_OK)
        goto out;
    st = fmk_plan_set_points(plan, my_s, xs + dim * sf[rank], self ? 0 : my_t,
                             self ? NULL : xt + dim * my_t0);
    CHECK(st == FMK_OK, "set_points: %s", fmk_plan_last_error(plan));
    double *pot = malloc(sizeof(double) * cw * (my_t + 1) * 2);
    double *grad = malloc(sizeof(double) * gw * (my_t + 1) * 2);
    st = fmk_plan_eval(plan, q + cw * sf[rank], pot, grad);
    CHECK(st == FMK_OK, "eval: %s", fmk_plan_last_error(plan));
    const double *rp = ref_p + cw * my_t0, *rg = ref_g + gw * my_t0;
    const double *dp = dir_p + cw * my_t0, *dg = dir_g + gw * my_t0;
    const char *what = fmk_method_name(c->method);
    if (c->method == FMK_METHOD_DIRECT) {
        const int same = !memcmp(pot, rp, sizeof(double) * cw * my_t) &&
                         !memcmp(grad, rg, sizeof(double) * gw * my_t);
        CHECK(all_ok(same), "%s %s %s: not bit for bit the one-rank direct sum", what,
              fmk_kernel_name(c->kernel), set_name[set]);
        /* two charge vectors at once: each bit for bit the one-rank sum of its charges */
        double *q2 = malloc(sizeof(double) * cw * (my_s + 1) * 2);
        for (int64_t i = 0; i < cw * my_s; i++)
            q2[i] = q[cw * sf[rank] + i], q2[cw * my_s + i] = 2 * q[cw * sf[rank] + i];
        st = fmk_plan_eval_many(plan, 2, q2, pot, NULL);
        int same2 = st == FMK_OK && !memcmp(pot, rp, sizeof(double) * cw * my_t);
        for (int64_t i = 0; same2 && i < cw * my_t; i++)
            same2 = pot[cw * my_t + i] == 2 * rp[i];
        CHECK(all_ok(same2), "eval_many: %s", fmk_plan_last_error(plan));
        free(q2);
    } else {
        const double e_mpi = rel_l2(pot, dp, cw * my_t), e_one = rel_l2(rp, dp, cw * my_t);
        const double g_mpi = rel_l2(grad, dg, gw * my_t), g_one = rel_l2(rg, dg, gw * my_t);
        /* the treecode's error depends on where its octree's cells fall (the frame, which the
         * distributed sources' pseudo-particles may widen) by a few times at a given theta:
         * its own accuracy at theta 0.6, 1e-3 theta^3 (treecode.h), is the floor */
        const double floor = c->method == FMK_METHOD_FMM    ? c->eps
                             : c->method == FMK_METHOD_TREE ? 2.2e-4
                                                            : 1e-6;
        if (rank == 0)
            printf("  %s %s %s %s: pot err %.2e (one rank %.2e), grad err %.2e (%.2e)\n", what,
                   fmk_kernel_name(c->kernel), set_name[set], self ? "self" : "targets", e_mpi,
                   e_one, g_mpi, g_one);
        CHECK(e_mpi <= 2 * e_one + floor && g_mpi <= 2 * g_one + 10 * floor,
              "%s %s: error %.3e / %.3e against the one-rank %.3e / %.3e", what, set_name[set],
              e_mpi, g_mpi, e_one, g_one);
    }
    free(pot);
    free(grad);
    fmk_plan_destroy(plan);
out:
    free(xs), free(q), free(xt), free(ref_p), free(ref_g), free(dir_p), free(dir_g);
}

/* The partition forced on a very uneven share (rank 0: 90% of the points, the last rank none):
 * the results as the one-rank plan's (bit for bit for direct fp64, targets = sources and
 * separate), and the targets evaluated per rank within 10% of each other. */
static void uneven_case(const tcase *c, int self)
{
    const int dim = c->dim;
    const int64_t n = 2000, m = self ? 0 : 1500, nr = self ? n : m;
    double *xs = malloc(sizeof(double) * dim * n), *q = malloc(sizeof(double) * n);
    double *xt = malloc(sizeof(double) * dim * (m + 1));
    make_points(PLUMMER, dim, n, 3, xs);
    make_points(PLUMMER, dim, m, 4, xt);
    rng_state = 7;
    for (int64_t i = 0; i < n; i++)
        q[i] = uniform01() - 0.3;
    double *ref_p = malloc(sizeof(double) * nr), *ref_g = malloc(sizeof(double) * dim * nr);
    double *dir_p = malloc(sizeof(double) * nr), *dir_g = malloc(sizeof(double) * dim * nr);
    CHECK(one_rank(c, c->method, n, xs, q, m, self ? NULL : xt, ref_p, ref_g) == FMK_OK &&
              one_rank(c, FMK_METHOD_DIRECT, n, xs, q, m, self ? NULL : xt, dir_p, dir_g) == FMK_OK,
          "reference: %s", fmk_plan_last_error(NULL));
    /* rank 0: 90%; the others share the rest, the last none (with 3 ranks or more) */
    int64_t sf[9], tf[9];
    for (int pass = 0; pass < 2; pass++) {
        const int64_t k = pass ? m : n;
        int64_t *f = pass ? tf : sf;
        const int rest = size > 2 ? size - 2 : size - 1;
        f[0] = 0;
        f[1] = size > 1 ? k * 9 / 10 : k;
        for (int r = 1; r < size; r++)
            f[r + 1] = r > rest ? k : f[1] + (k - f[1]) * r / rest;
    }
    const int64_t my_s = sf[rank + 1] - sf[rank];
    const int64_t my_t0 = self ? sf[rank] : tf[rank], my_t = self ? my_s : tf[rank + 1] - tf[rank];
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method;
    o.backend = FMK_BACKEND_CPU;
    o.softening = c->softening;
    o.leaf_size = c->method == FMK_METHOD_DIRECT ? 0 : 16;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, dim, c->kernel, c->eps, &o);
    CHECK(st == FMK_OK, "create: %s", fmk_plan_last_error(NULL));
    if (st != FMK_OK)
        goto out;
    fmk_mpi_set_balance(plan, 0); /* always move */
    st = fmk_plan_set_points(plan, my_s, xs + dim * sf[rank], self ? 0 : my_t,
                             self ? NULL : xt + dim * my_t0);
    CHECK(st == FMK_OK, "set_points: %s", fmk_plan_last_error(plan));
    fmk_info info;
    fmk_plan_info(plan, &info);
    CHECK(info.n_targets == my_t && info.n_sources == my_s, "info: %lld targets, %lld sources",
          (long long)info.n_targets, (long long)info.n_sources);
    int64_t here = fmk_mpi_evaluated_targets(plan), lo = here, hi = here;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("  partition %s %s %s: rank 0 held %lld of %lld targets; evaluated per rank %lld "
               ".. %lld\n",
               fmk_method_name(c->method), fmk_kernel_name(c->kernel), self ? "self" : "targets",
               (long long)(self ? sf[1] : tf[1]), (long long)nr, (long long)lo, (long long)hi);
    CHECK(hi <= 1.1 * lo, "evaluated targets per rank %lld .. %lld: not within 10%%", (long long)lo,
          (long long)hi);
    double *pot = malloc(sizeof(double) * 2 * (my_t + 1)),
           *grad = malloc(sizeof(double) * dim * 2 * (my_t + 1));
    double *q2 = malloc(sizeof(double) * 2 * (my_s + 1));
    for (int64_t i = 0; i < my_s; i++)
        q2[i] = q[sf[rank] + i], q2[my_s + i] = 2 * q[sf[rank] + i];
    st = fmk_plan_eval(plan, q2, pot, grad);
    CHECK(st == FMK_OK, "eval: %s", fmk_plan_last_error(plan));
    const double *rp = ref_p + my_t0, *rg = ref_g + dim * my_t0;
    if (c->method == FMK_METHOD_DIRECT) {
        const int same = !memcmp(pot, rp, sizeof(double) * my_t) &&
                         !memcmp(grad, rg, sizeof(double) * dim * my_t);
        CHECK(all_ok(same), "partitioned direct %s: not bit for bit", fmk_kernel_name(c->kernel));
        st = fmk_plan_eval_many(plan, 2, q2, pot, grad);
        int same2 = st == FMK_OK && !memcmp(pot, rp, sizeof(double) * my_t) &&
                    !memcmp(grad, rg, sizeof(double) * dim * my_t);
        for (int64_t i = 0; same2 && i < my_t; i++)
            same2 = pot[my_t + i] == 2 * rp[i];
        CHECK(all_ok(same2), "partitioned eval_many: %s", fmk_plan_last_error(plan));
    } else {
        const double *dp = dir_p + my_t0, *dg = dir_g + dim * my_t0;
        const double e_mpi = rel_l2(pot, dp, my_t), e_one = rel_l2(rp, dp, my_t);
        const double g_mpi = rel_l2(grad, dg, dim * my_t), g_one = rel_l2(rg, dg, dim * my_t);
        /* the treecode's error depends on where its octree's cells fall (the frame, which the
         * distributed sources' pseudo-particles may widen) by a few times at a given theta:
         * its own accuracy at theta 0.6, 1e-3 theta^3 (treecode.h), is the floor */
        const double floor = c->method == FMK_METHOD_FMM    ? c->eps
                             : c->method == FMK_METHOD_TREE ? 2.2e-4
                                                            : 1e-6;
        if (rank == 0)
            printf("    pot err %.2e (one rank %.2e), grad err %.2e (%.2e)\n", e_mpi, e_one, g_mpi,
                   g_one);
        CHECK(e_mpi <= 2 * e_one + floor && g_mpi <= 2 * g_one + 10 * floor,
              "partitioned %s: error %.3e / %.3e against the one-rank %.3e / %.3e",
              fmk_method_name(c->method), e_mpi, g_mpi, e_one, g_one);
    }
    free(pot), free(grad), free(q2);
    fmk_plan_destroy(plan);
out:
    free(xs), free(q), free(xt), free(ref_p), free(ref_g), free(dir_p), free(dir_g);
}

/* A NaN on the last rank only: the same status on every rank, the message names the rank, and
 * the plan keeps working. */
static void bad_input(void)
{
    const int64_t n = 300;
    double *xs = malloc(sizeof(double) * 3 * n), *q = malloc(sizeof(double) * n);
    double *ref = malloc(sizeof(double) * n), *pot = malloc(sizeof(double) * n);
    make_points(UNIFORM, 3, n, 5, xs);
    for (int64_t i = 0; i < n; i++)
        q[i] = 1.0 + (double)(i % 7);
    tcase c = {3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, 1e-6, 0};
    CHECK(one_rank(&c, FMK_METHOD_DIRECT, n, xs, q, 0, NULL, ref, NULL) == FMK_OK, "reference");
    int64_t sf[9];
    shares(n, sf);
    /* the bad rank: the last one with points */
    int bad = size > 1 ? size - 2 : 0;
    const int64_t my = sf[rank + 1] - sf[rank];
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = FMK_BACKEND_CPU;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-6, &o);
    CHECK(st == FMK_OK, "create: %s", fmk_plan_last_error(NULL));
    st = fmk_plan_eval(plan, q, pot, NULL);
    CHECK(st == FMK_ERR_STATE, "eval before set_points: %d", (int)st);
    CHECK(fmk_plan_set_points(plan, my, xs + 3 * sf[rank], 0, NULL) == FMK_OK, "set_points: %s",
          fmk_plan_last_error(plan));
    double *mq = malloc(sizeof(double) * (my + 1));
    memcpy(mq, q + sf[rank], sizeof(double) * my);
    const double keep = my > 0 ? mq[my / 2] : 0;
    if (rank == bad)
        mq[my / 2] = NAN;
    for (int64_t i = 0; i < my; i++)
        pot[i] = -7;
    st = fmk_plan_eval(plan, mq, pot, NULL);
    CHECK(st == FMK_ERR_NONFINITE, "NaN charge on rank %d: status %d", bad, (int)st);
    char want[32];
    snprintf(want, sizeof want, "rank %d:", bad);
    CHECK(strstr(fmk_plan_last_error(plan), want) != NULL, "message '%s' lacks '%s'",
          fmk_plan_last_error(plan), want);
    int untouched = 1;
    for (int64_t i = 0; i < my; i++)
        untouched &= pot[i] == -7;
    CHECK(untouched, "a failed eval wrote output");
    if (rank == bad)
        mq[my / 2] = keep;
    st = fmk_plan_eval(plan, mq, pot, NULL);
    CHECK(st == FMK_OK && !memcmp(pot, ref + sf[rank], sizeof(double) * my),
          "eval after the failure: %s", fmk_plan_last_error(plan));
    /* a NaN coordinate on one rank: every rank fails, and keeps its points */
    double *mx = malloc(sizeof(double) * 3 * (my + 1));
    memcpy(mx, xs + 3 * sf[rank], sizeof(double) * 3 * my);
    if (rank == bad)
        mx[3 * (my / 2) + 1] = NAN;
    st = fmk_plan_set_points(plan, my, mx, 0, NULL);
    CHECK(st == FMK_ERR_NONFINITE, "NaN point on rank %d: status %d", bad, (int)st);
    st = fmk_plan_eval(plan, mq, pot, NULL);
    CHECK(st == FMK_OK && !memcmp(pot, ref + sf[rank], sizeof(double) * my),
          "eval after a failed set_points: %s", fmk_plan_last_error(plan));
    /* different n_vectors on the ranks; a device call on this plan of backend cpu (refused on
     * every rank) */
    st = fmk_plan_eval_many(plan, rank == 0 ? 1 : 2, mq, pot, NULL);
    CHECK(size == 1 ? st == FMK_OK : st == FMK_ERR_ARG, "n_vectors differing: %d", (int)st);
    st = fmk_plan_eval_device(plan, mq, pot, NULL);
    CHECK(st == FMK_ERR_STATE, "eval_device: %d", (int)st);
    fmk_plan_destroy(plan);
    /* different eps on the ranks: refused on every rank */
    st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, rank ? 1e-5 : 1e-6, &o);
    CHECK(size == 1 ? st == FMK_OK : st == FMK_ERR_ARG && !plan, "eps differing: %d", (int)st);
    fmk_plan_destroy(plan);
    /* the bindings' entry with the null communicator's handle */
    st = fmk_plan_create_mpi_f(&plan, MPI_Comm_c2f(MPI_COMM_NULL), 3, FMK_KERNEL_LAPLACE, 1e-6, &o);
    CHECK(st == FMK_ERR_ARG && !plan, "create_mpi_f on MPI_COMM_NULL: %d", (int)st);
    /* an invalid eps on one rank only */
    st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, rank == bad ? 2.0 : 1e-6,
                             &o);
    CHECK(st == FMK_ERR_ARG && !plan, "bad eps on rank %d: %d", bad, (int)st);
    free(xs), free(q), free(ref), free(pot), free(mq), free(mx);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 8) {
        if (rank == 0)
            fprintf(stderr, "test_mpi runs on 1..8 ranks\n");
        MPI_Finalize();
        return 1;
    }
    const tcase cases[] = {
        {3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, 1e-6, 0},
        {3, FMK_KERNEL_PLUMMER, FMK_METHOD_DIRECT, 1e-6, 0.05},
        {2, FMK_KERNEL_LOG2D, FMK_METHOD_DIRECT, 1e-6, 0},
        {2, FMK_KERNEL_CAUCHY2D, FMK_METHOD_DIRECT, 1e-6, 0},
        {3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 1e-5, 0},
        {3, FMK_KERNEL_PLUMMER, FMK_METHOD_FMM, 1e-5, 0.05},
        {3, FMK_KERNEL_LAPLACE, FMK_METHOD_TREE, 1e-2, 0},
        {3, FMK_KERNEL_PLUMMER, FMK_METHOD_TREE, 1e-2, 0.05},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int set = 0; set < SETS; set++)
            for (int self = 1; self >= 0; self--)
                run_case(&cases[k], set, self);
    const tcase uneven[] = {
        {3, FMK_KERNEL_LAPLACE, FMK_METHOD_DIRECT, 1e-6, 0},
        {3, FMK_KERNEL_PLUMMER, FMK_METHOD_DIRECT, 1e-6, 0.05},
        {2, FMK_KERNEL_LOG2D, FMK_METHOD_DIRECT, 1e-6, 0},
        {3, FMK_KERNEL_LAPLACE, FMK_METHOD_FMM, 1e-5, 0},
        {3, FMK_KERNEL_PLUMMER, FMK_METHOD_TREE, 1e-2, 0.05},
    };
    for (size_t k = 0; k < sizeof uneven / sizeof uneven[0]; k++)
        for (int self = 1; self >= 0; self--)
            uneven_case(&uneven[k], self);
    bad_input();
    int total = failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi on %d rank%s: %s (%d failure%s)\n", size, size == 1 ? "" : "s",
               total ? "FAILED" : "ok", total, total == 1 ? "" : "s");
    MPI_Finalize();
    return total ? 1 : 0;
}
