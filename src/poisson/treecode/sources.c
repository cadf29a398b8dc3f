/* sources.c -- the treecode's sources (paper section 4, "Source points"): the grid points where
 * some component of omega is nonzero (the union of the components' supports), with weight
 * vectors w_a = omega_a h^3 (grid units), in Morton order, as a structure of arrays.
 *
 * The support is found in field order by chunks (each thread counts its chunk's points, a
 * prefix sum places them) and compared with the previous one, so that a solve whose support is
 * unchanged keeps the sources' order, the tree and the plans and only gathers new weights.
 *
 * Keys. Grid points are multiples of 1/2 in grid units (poisson.h), so 2 (x - lo), lo the
 * sources' lower corner, is an exact integer per axis. Its bits, most significant first and
 * at most 21 per axis (larger offsets are shifted right: neighbours then share a key, which
 * only lets a deepest leaf hold more than leaf_size), interleaved x highest as tree3d.h's keys,
 * give the Morton key; tree3d's radix sort orders them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/treecode/treecode.h"
#include "tree/tree3d.h"

enum { KEY_BITS = 21 };

void fmk_tc_sources_free(fmk_tc_sources *src)
{
    free(src->x);
    free(src->y);
    free(src->z);
    free(src->w);
    free(src->point);
    free(src->volume);
    free(src->key);
    memset(src, 0, sizeof *src);
}

int64_t fmk_tc_sources_bytes(const fmk_tc_sources *src)
{
    return (int64_t)(6 * sizeof(double) + sizeof(int64_t)) * src->cap +
           (int64_t)sizeof(double) * src->w_components * src->cap;
}

static fmk_status out_of_memory(fmk_poisson *s, const char *what, int64_t bytes)
{
    return fmk_solver_fail(s, FMK_ERR_NOMEM,
                           "method treecode: out of host memory for %s (%lld "
                           "bytes)",
                           what, (long long)bytes);
}

/* Chunks of the field for the support's scan: a few per thread. */
static int64_t n_chunks(const fmk_poisson *s)
{
    const int64_t c = 4 * (int64_t)s->threads;
    return s->n_points < c ? (s->n_points > 0 ? s->n_points : 1) : c;
}

static inline int nonzero(const double *omega, int nc, int64_t p)
{
    int any = 0;
    for (int a = 0; a < nc; a++)
        any |= omega[(int64_t)nc * p + a] != 0;
    return any;
}

fmk_status fmk_tc_sources_support(fmk_poisson *s, int nc, const double *omega, int64_t **support,
                                  int64_t *n_support, int64_t *cap, int *changed)
{
    const int64_t np = s->n_points, nch = n_chunks(s);
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(nch + 1));
    if (!start)
        return out_of_memory(s, "the support's scan", (int64_t)sizeof(int64_t) * (nch + 1));
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t c = 0; c < nch; c++) {
        int64_t count = 0;
        for (int64_t p = np * c / nch, e = np * (c + 1) / nch; p < e; p++)
            count += nonzero(omega, nc, p);
        start[c + 1] = count;
    }
    start[0] = 0;
    for (int64_t c = 0; c < nch; c++)
        start[c + 1] += start[c];
    const int64_t total = start[nch];
    int differ = *changed || total != *n_support;
    if (!differ) {
        const int64_t *old = *support;
#pragma omp parallel for schedule(static) num_threads(s->threads) reduction(| : differ)
        for (int64_t c = 0; c < nch; c++) {
            int64_t k = start[c];
            for (int64_t p = np * c / nch, e = np * (c + 1) / nch; p < e && !differ; p++)
                if (nonzero(omega, nc, p))
                    differ |= old[k++] != p;
        }
    }
    *changed = differ;
    if (!differ) {
        free(start);
        return FMK_OK;
    }
    if (total > *cap) {
        free(*support);
        *cap = 0;
        *support = malloc(sizeof(int64_t) * (size_t)total);
        if (!*support) {
            free(start);
            *n_support = 0;
            return out_of_memory(s, "the support", (int64_t)sizeof(int64_t) * total);
        }
        *cap = total;
    }
    int64_t *out = *support;
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t c = 0; c < nch; c++) {
        int64_t k = start[c];
        for (int64_t p = np * c / nch, e = np * (c + 1) / nch; p < e; p++)
            if (nonzero(omega, nc, p))
                out[k++] = p;
    }
    *n_support = total;
    free(start);
    return FMK_OK;
}

/* The arrays for n sources (their contents need not survive). */
static int reserve(fmk_tc_sources *src, int64_t n)
{
    if (n <= src->cap && src->x)
        return 0;
    fmk_tc_sources_free(src);
    const size_t m = (size_t)(n > 0 ? n : 1);
    src->x = malloc(sizeof(double) * m);
    src->y = malloc(sizeof(double) * m);
    src->z = malloc(sizeof(double) * m);
    src->point = malloc(sizeof(int64_t) * m);
    src->volume = malloc(sizeof(double) * m);
    src->key = malloc(sizeof(uint64_t) * m);
    if (!src->x || !src->y || !src->z || !src->point || !src->volume || !src->key) {
        fmk_tc_sources_free(src);
        return -1;
    }
    src->cap = n;
    return 0;
}

/* Bits needed for the integer v >= 0 (0 for 0). */
static int bits_of(uint64_t v)
{
    int b = 0;
    while (v)
        b++, v >>= 1;
    return b;
}

/* Interleaves the low `levels` bits of c[0..2], x highest (tree3d.h's order). */
static uint64_t interleave(const uint64_t c[3], int levels)
{
    uint64_t key = 0;
    for (int b = levels - 1; b >= 0; b--)
        key = key << 3 | (c[0] >> b & 1) << 2 | (c[1] >> b & 1) << 1 | (c[2] >> b & 1);
    return key;
}

fmk_status fmk_tc_sources_build(fmk_poisson *s, const int64_t *support, int64_t n,
                                fmk_tc_sources *src)
{
    src->n = 0;
    if (reserve(src, n))
        return out_of_memory(s, "the sources", (int64_t)(6 * sizeof(double) + 8) * n);
    double *pos = malloc(sizeof(double) * 4 * (size_t)(n > 0 ? n : 1));
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!pos || !order) {
        free(pos), free(order);
        return out_of_memory(s, "sorting the sources", (int64_t)sizeof(double) * 5 * n);
    }
    double lx = INFINITY, ly = INFINITY, lz = INFINITY;
#pragma omp parallel for schedule(static) num_threads(s->threads) reduction(min : lx, ly, lz)
    for (int64_t j = 0; j < n; j++) {
        const struct fmk_poisson_box *b = &s->boxes[fmk_poisson_box_of(s, support[j])];
        const int64_t q = support[j] - b->offset;
        double *x = pos + 4 * j;
        x[0] = b->corner[0] + b->h * (double)(q % b->n[0]);
        x[1] = b->corner[1] + b->h * (double)(q / b->n[0] % b->n[1]);
        x[2] = b->corner[2] + b->h * (double)(q / ((int64_t)b->n[0] * b->n[1]));
        x[3] = b->h * b->h * b->h;
        lx = x[0] < lx ? x[0] : lx, ly = x[1] < ly ? x[1] : ly, lz = x[2] < lz ? x[2] : lz;
    }
    const double lo[3] = {lx, ly, lz};
    uint64_t top = 0; /* the largest offset, in half grid units */
#pragma omp parallel for schedule(static) num_threads(s->threads) reduction(max : top)
    for (int64_t j = 0; j < n; j++)
        for (int k = 0; k < 3; k++) {
            const uint64_t d = (uint64_t)(2 * (pos[4 * j + k] - lo[k]));
            top = d > top ? d : top;
        }
    const int bits = bits_of(top);
    const int shift = bits > KEY_BITS ? bits - KEY_BITS : 0;
    const int levels = bits - shift;
    src->key_levels = levels;
    src->root_side = ldexp(0.5, bits); /* 2^bits half units */
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t j = 0; j < n; j++) {
        uint64_t c[3];
        for (int k = 0; k < 3; k++)
            c[k] = (uint64_t)(2 * (pos[4 * j + k] - lo[k])) >> shift;
        src->key[j] = interleave(c, levels);
        order[j] = j;
    }
    if (levels > 0 && fmk_tree3d_sort_bits(src->key, order, n, s->threads, 3 * levels) != 0) {
        free(pos), free(order);
        return out_of_memory(s, "sorting the sources", (int64_t)sizeof(int64_t) * 2 * n);
    }
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t j = 0; j < n; j++) {
        const double *x = pos + 4 * order[j];
        src->x[j] = x[0], src->y[j] = x[1], src->z[j] = x[2], src->volume[j] = x[3];
        src->point[j] = support[order[j]];
    }
    free(pos), free(order);
    src->n = n;
    return FMK_OK;
}

fmk_status fmk_tc_sources_weights(fmk_poisson *s, int nc, const double *omega, fmk_tc_sources *src)
{
    const int64_t n = src->n;
    if (!src->w || nc > src->w_components) { /* reserve() frees w with the other arrays */
        free(src->w);
        src->w_components = 0;
        src->w = malloc(sizeof(double) * (size_t)nc * (size_t)(src->cap > 0 ? src->cap : 1));
        if (!src->w)
            return out_of_memory(s, "the weights", (int64_t)sizeof(double) * nc * src->cap);
        src->w_components = nc;
    }
    src->nc = nc;
    double *w = src->w;
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t j = 0; j < n; j++) {
        const double *om = omega + (int64_t)nc * src->point[j];
        for (int a = 0; a < nc; a++)
            w[a * n + j] = om[a] * src->volume[j];
    }
    return FMK_OK;
}
