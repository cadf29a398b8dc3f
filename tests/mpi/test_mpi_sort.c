/* test_mpi_sort.c -- the radix sort of the distributed plans' keys (src/mpi/sort.c): random
 * keys of 63 and 64 bits, keys sharing most digits, many equal keys (the sort must be stable:
 * equal keys keep their order), n = 0, 1 and across the size where it goes parallel; against
 * qsort by (key, index). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"

static uint64_t state = 12345;
static uint64_t next(void) /* splitmix64 */
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp(const void *pa, const void *pb)
{
    const fmk_mpi_keyed *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

int main(void)
{
    static const int64_t sizes[] = {0, 1, 2, 7, 1000, 65535, 65536, 200001};
    int failures = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int kind = 0; kind < 4; kind++) {
            const int64_t n = sizes[si];
            fmk_mpi_keyed *a = malloc((size_t)(n + 1) * sizeof *a);
            fmk_mpi_keyed *b = malloc((size_t)(n + 1) * sizeof *b);
            for (int64_t i = 0; i < n; i++) {
                uint64_t k = next();
                if (kind == 0)
                    k >>= 1; /* 63 bits */
                else if (kind == 1)
                    k = 0x7123456700000000ull | (k & 0xfff); /* shared high digits */
                else if (kind == 2)
                    k %= 17; /* many equal keys */
                a[i].key = k, a[i].index = i;
            }
            memcpy(b, a, (size_t)n * sizeof *a);
            const int bits = kind == 0 ? 63 : 64;
            if (fmk_mpi_sort(a, n, bits) != 0) {
                fprintf(stderr, "FAIL: out of memory at n %lld\n", (long long)n);
                failures++;
            }
            qsort(b, (size_t)n, sizeof *b, cmp);
            if (n > 0 && memcmp(a, b, (size_t)n * sizeof *a) != 0) {
                fprintf(stderr, "FAIL: n %lld kind %d differs from qsort\n", (long long)n, kind);
                failures++;
            }
            free(a), free(b);
        }
    printf("test_mpi_sort: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
