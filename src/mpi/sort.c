/* sort.c -- the sort of the partition and of the sending trees (mpi_internal.h): (key, index)
 * pairs by key, stable, as a least-significant-digit radix sort of 11-bit digits with one
 * histogram per thread (OpenMP), the digits that every key shares skipped. O(n) a pass, at
 * most 6 passes for 63-bit keys: the Morton keys of tens of millions of points sort in a
 * fraction of a second, where qsort took seconds. */
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "mpi/mpi_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    DIGIT = 11,
    BINS = 1 << DIGIT,
    SERIAL_BELOW = 1 << 16,
    MAX_THREADS = 64,
    GPU_FROM = 1 << 20 /* pairs from which a plan's GPU sorts them (with the copies) */
};

int fmk_mpi_sort(fmk_mpi_keyed *a, int64_t n, int key_bits)
{
    if (n < 2)
        return 0;
    fmk_mpi_keyed *tmp = fmk_mpi_alloc((size_t)n * sizeof *tmp, NULL);
    int threads = 1;
#ifdef _OPENMP
    if (n >= SERIAL_BELOW)
        threads = omp_get_max_threads();
#endif
    threads = threads > MAX_THREADS ? MAX_THREADS : threads < 1 ? 1 : threads;
    int64_t *hist = malloc((size_t)threads * BINS * sizeof *hist);
    if (!tmp || !hist)
        return free(tmp), free(hist), -1;
    fmk_mpi_keyed *src = a, *dst = tmp;
    for (int shift = 0; shift < key_bits; shift += DIGIT) {
        memset(hist, 0, (size_t)threads * BINS * sizeof *hist);
        int shared = 1; /* every key has the same digit: the pass changes nothing */
#pragma omp parallel num_threads(threads)
        {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#endif
            const int64_t b = n * t / threads, e = n * (t + 1) / threads;
            int64_t *h = hist + (size_t)t * BINS;
            for (int64_t i = b; i < e; i++)
                h[(src[i].key >> shift) & (BINS - 1)]++;
#pragma omp barrier
#pragma omp single
            {
                /* offsets: digit by digit, thread by thread (stable) */
                int64_t sum = 0;
                int used = 0;
                for (int d = 0; d < BINS; d++) {
                    int64_t dsum = 0;
                    for (int u = 0; u < threads; u++) {
                        const int64_t c = hist[(size_t)u * BINS + d];
                        hist[(size_t)u * BINS + d] = sum;
                        sum += c, dsum += c;
                    }
                    used += dsum > 0;
                }
                shared = used <= 1;
            }
            if (!shared)
                for (int64_t i = b; i < e; i++)
                    dst[h[(src[i].key >> shift) & (BINS - 1)]++] = src[i];
        }
        if (!shared) {
            fmk_mpi_keyed *swap = src;
            src = dst, dst = swap;
        }
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
    free(tmp), free(hist);
    return 0;
}

int fmk_mpi_sort_on(fmk_plan *gpu, fmk_mpi_keyed *a, int64_t n, int key_bits)
{
    if (gpu && n >= GPU_FROM && fmk_plan_hook_sort_pairs(gpu, n, a, key_bits) == FMK_OK)
        return 0;
    return fmk_mpi_sort(a, n, key_bits);
}
