/* unique.c -- the distinct points of a set (unique.h): open addressing with linear probing
 * over a table of at least twice as many entries as points, each the index of a distinct
 * point's first copy. Coordinates are compared as doubles (mapped points are finite and lie
 * in [1, 2], so bit equality and == agree). */
#include <stdlib.h>
#include <string.h>

#include "tree/unique.h"

/* splitmix64's finalizer: every input bit moves every output bit */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_point(int dim, const double *p)
{
    uint64_t h = 0;
    for (int k = 0; k < dim; k++) {
        uint64_t b;
        memcpy(&b, p + k, sizeof b);
        h = mix(h ^ b);
    }
    return h;
}

static int same(int dim, const double *a, const double *b)
{
    for (int k = 0; k < dim; k++)
        if (a[k] != b[k])
            return 0;
    return 1;
}

int64_t fmk_unique_points(int dim, int64_t n, const double *x, int64_t *slot)
{
    if (n <= 0)
        return 0;
    uint64_t size = 2;
    while (size < 2 * (uint64_t)n)
        size *= 2;
    /* a distinct point's index + 1 (0: empty); 32 bits while they fit, for a smaller table */
    const int wide = n >= UINT32_MAX;
    uint32_t *first32 = wide ? NULL : calloc(size, sizeof(uint32_t));
    int64_t *first64 = wide ? calloc(size, sizeof(int64_t)) : NULL;
    if (!first32 && !first64)
        return -1;
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *p = x + (int64_t)dim * i;
        uint64_t h = hash_point(dim, p) & (size - 1);
        int64_t f;
        while ((f = wide ? first64[h] : (int64_t)first32[h]) != 0 &&
               !same(dim, x + (int64_t)dim * (f - 1), p))
            h = (h + 1) & (size - 1);
        if (f == 0) {
            if (wide)
                first64[h] = i + 1;
            else
                first32[h] = (uint32_t)(i + 1);
            slot[i] = count++;
        } else {
            slot[i] = slot[f - 1];
        }
    }
    free(first32), free(first64);
    return count;
}
