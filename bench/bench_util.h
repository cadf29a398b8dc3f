/* bench_util.h -- small host helpers shared by the benchmark programs: a monotonic clock, the
 * median of repeated timings and a uniform random number (splitmix64). */
#ifndef FMMKIT_BENCH_UTIL_H
#define FMMKIT_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A uniform number in [0, 1) from the generator state *s (splitmix64). */
static inline double bench_urand(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

#endif /* FMMKIT_BENCH_UTIL_H */
