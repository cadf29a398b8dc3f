/* mpi_test.h -- what the distributed tests share: each is a program of its own, so the state
 * below is that program's (its rank, its communicator's size, its failures). */
#ifndef FMMKIT_TESTS_MPI_TEST_H
#define FMMKIT_TESTS_MPI_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static int rank, size, failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

static uint64_t rng_state;
static inline double uniform01(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* A point of a Plummer sphere of unit scale (Aarseth, Henon & Wielen), radius capped at 20. */
static inline void plummer_point(double p[3])
{
    double r = 1.0 / sqrt(pow(0.01 + 0.98 * uniform01(), -2.0 / 3.0) - 1.0);
    r = r > 20 ? 20 : r;
    const double c = 2 * uniform01() - 1, phi = 6.283185307179586 * uniform01(),
                 sn = sqrt(1 - c * c);
    p[0] = r * sn * cos(phi), p[1] = r * sn * sin(phi), p[2] = r * c;
}

#endif /* FMMKIT_TESTS_MPI_TEST_H */
