/* let_test.h -- what the tests of the distributed sources (test_mpi_let.c, test_mpi_let_fmm.c)
 * share: their point sets, the uneven shares, the relative l2 error over every rank, the
 * sources kept, and the local plans' backend. Include after mpi_test.h and fmmkit_mpi.h. */
#ifndef FMMKIT_TESTS_LET_TEST_H
#define FMMKIT_TESTS_LET_TEST_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PLUMMER, CLUSTERS, OUTLIER, COINCIDENT, SETS };
static const char *set_name[SETS] = {"plummer", "two-cluster", "cube+outlier",
                                     "plummer+coincident+nested"};

static void make_points(int set, int64_t n, uint64_t seed, double *x)
{
    rng_state = seed * 7919 + (uint64_t)set;
    for (int64_t i = 0; i < n; i++) {
        double *p = x + 3 * i;
        if (set == PLUMMER || set == COINCIDENT) {
            plummer_point(p);
            /* every 8th point in one coincident group (more than a leaf, split among ranks by
             * the curve), the next of every 8 in clusters about it nested over 8 levels of 8x
             * (radius 1e-2 down to 5e-9) */
            static const double c[3] = {0.3, -0.2, 0.1};
            const double scale = 1e-2 * ldexp(1.0, -3 * (int)((i / 8) % 8));
            for (int k = 0; set == COINCIDENT && i % 8 < 2 && k < 3; k++)
                p[k] = c[k] + (i % 8 == 0 ? 0 : scale * p[k]);
        } else {
            for (int k = 0; k < 3; k++)
                p[k] = uniform01();
            if (set == CLUSTERS)
                for (int k = 0; k < 3; k++)
                    p[k] = (i % 2 ? 100.0 : 0.0) + 0.1 * p[k];
            if (set == OUTLIER && i == n / 3)
                p[0] = p[1] = p[2] = 1e4;
        }
    }
}

/* first[r]..first[r+1]: weights 3, 1, 2, 5, ... and none for the last rank of several */
static void shares(int64_t n, int64_t *first)
{
    static const int weight[] = {3, 1, 2, 5, 4, 1, 2, 3};
    int64_t total = 0, acc = 0;
    for (int r = 0; r < size; r++)
        total += size > 1 && r == size - 1 ? 0 : weight[r % 8];
    first[0] = 0;
    for (int r = 0; r < size; r++) {
        acc += size > 1 && r == size - 1 ? 0 : weight[r % 8];
        first[r + 1] = n * acc / total;
    }
}

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double s[2] = {0, 0};
    for (int64_t i = 0; i < n; i++)
        s[0] += (a[i] - b[i]) * (a[i] - b[i]), s[1] += b[i] * b[i];
    MPI_Allreduce(MPI_IN_PLACE, s, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return s[1] > 0 ? sqrt(s[0] / s[1]) : sqrt(s[0]);
}

/* Every source kept by exactly one rank, and no local plan with more than `most` sources
 * (span_max: the largest local plan's). */
static void check_kept(const char *what, int64_t n, int64_t own, int64_t span_max, int64_t most)
{
    int64_t kept = own;
    MPI_Allreduce(MPI_IN_PLACE, &kept, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(size == 1 || kept == n, "%s: the ranks keep %lld of %lld sources", what, (long long)kept,
          (long long)n);
    CHECK(span_max <= most, "%s: a local plan has %lld of %lld sources", what, (long long)span_max,
          (long long)n);
}

/* The local plans' backend: the CPU, or the GPU with FMK_TEST_BACKEND=gpu (make gpu-test's
 * run under mpirun; the reference stays the CPU's direct sum). */
static fmk_backend test_backend(void)
{
    const char *b = getenv("FMK_TEST_BACKEND");
    return b && strcmp(b, "gpu") == 0 ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
}

#endif /* FMMKIT_TESTS_LET_TEST_H */
