/* halo.c -- the other ranks' particles near this rank's, for the simulation's spline
 * correction (the hook halo of src/sim/sim_hooks.h; docs/distributed.md, "The simulation under
 * MPI"). Each rank describes where its particles are by up to LET_BOXES boxes (the leaves of
 * their octree, fmk_let_domain_boxes), allgathered; every rank then sends each other rank the
 * rows of its particles closer than radius to one of that rank's boxes. Every particle of a
 * rank lies in one of its boxes, so every pair closer than radius across two ranks is found
 * (a superset of rows travels: those near a box, not only near a particle). The candidates
 * are found through a 32^3 bitmap a rank of the cells its boxes, grown by radius, touch. */
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "mpi/let.h"
#include "mpi/sim/halo.h"

enum { GRID = 32, GRID_BITS = GRID * GRID * GRID };

static int cell_of(double x, double lo, double inv)
{
    const double t = (x - lo) * inv;
    return !(t > 0) ? 0 : t >= GRID - 1 ? GRID - 1 : (int)t; /* (NaN: 0) */
}

/* Rank r's bitmap: the cells that its boxes grown by radius touch. */
static void mark(uint64_t *bits, const double *boxes, int nb, double radius, const double lo[3],
                 double inv)
{
    for (int b = 0; b < nb; b++) {
        const double *x = boxes + 6 * b;
        int c0[3], c1[3];
        for (int d = 0; d < 3; d++)
            c0[d] = cell_of(x[d] - radius, lo[d], inv),
            c1[d] = cell_of(x[3 + d] + radius, lo[d], inv);
        for (int i = c0[0]; i <= c1[0]; i++)
            for (int j = c0[1]; j <= c1[1]; j++)
                for (int k = c0[2]; k <= c1[2]; k++) {
                    const int c = (i * GRID + j) * GRID + k;
                    bits[c / 64] |= 1ull << (c % 64);
                }
    }
}

static fmk_status nomem(void)
{
    return fmk_plan_hook_error(NULL, FMK_ERR_NOMEM,
                               "the spline correction: out of host memory for the particles "
                               "near the other ranks'");
}

/* The rows of this rank near rank r's boxes rb[nb] appended to *send (*sn rows, *cap), near
 * flags in work: 0, or -1 when out of memory. */
static int rows_for(const double *xyz, int64_t n, int width, const double *rows, const double *rb,
                    int nb, double radius, const double lo[3], double inv, uint64_t *bits,
                    unsigned char *near, double **send, int64_t *sn, int64_t *cap)
{
    memset(bits, 0, GRID_BITS / 8);
    mark(bits, rb, nb, radius, lo, inv);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        const double *x = xyz + 3 * i;
        const int c = (cell_of(x[0], lo[0], inv) * GRID + cell_of(x[1], lo[1], inv)) * GRID +
                      cell_of(x[2], lo[2], inv);
        int hit = 0;
        if (bits[c / 64] >> (c % 64) & 1)
            for (int b = 0; b < nb && !hit; b++)
                hit = fmk_let_box_distance(x, rb + 6 * b) < radius;
        near[i] = (unsigned char)hit;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!near[i])
            continue;
        if (*sn == *cap) {
            const int64_t grown = *cap > 0 ? 2 * *cap : 1024;
            double *g = realloc(*send, (size_t)grown * (size_t)width * sizeof *g);
            if (!g)
                return -1;
            *send = g, *cap = grown;
        }
        memcpy(*send + (size_t)(*sn)++ * width, rows + (size_t)i * width,
               (size_t)width * sizeof(double));
    }
    return 0;
}

fmk_status fmk_mpi_sim_halo(MPI_Comm comm, fmk_mpi_fault *fault, int64_t n, int width,
                            const double *rows, double radius, double **out, int64_t *n_out)
{
    int rank = 0, P = 1;
    *out = NULL, *n_out = 0;
    fmk_status st = FMK_MPI(NULL, fault, MPI_Comm_rank, (comm, &rank));
    if (st == FMK_OK)
        st = FMK_MPI(NULL, fault, MPI_Comm_size, (comm, &P));
    if (st != FMK_OK)
        return st;
    double lo[3], hi[3], box[6];
    for (int d = 0; d < 6; d++)
        box[d] = INFINITY; /* min of lo, min of -hi */
    for (int64_t i = 0; i < n; i++)
        for (int d = 0; d < 3; d++) {
            const double v = rows[(size_t)i * width + d];
            box[d] = v < box[d] ? v : box[d];
            box[3 + d] = -v < box[3 + d] ? -v : box[3 + d];
        }
    st = FMK_MPI(NULL, fault, MPI_Allreduce, (MPI_IN_PLACE, box, 6, MPI_DOUBLE, MPI_MIN, comm));
    if (st != FMK_OK)
        return st;
    double w = 0;
    for (int d = 0; d < 3; d++) {
        lo[d] = box[d], hi[d] = -box[3 + d];
        w = hi[d] - lo[d] > w ? hi[d] - lo[d] : w;
    }
    const double inv = w > 0 ? GRID / w : 0;
    double *xyz = malloc((size_t)(n > 0 ? n : 1) * 3 * sizeof *xyz);
    double *mine = malloc(6 * LET_BOXES * sizeof *mine);
    int *cnt = malloc((size_t)P * 6 * sizeof *cnt); /* box counts, displacements; MPI's 4 x P */
    int64_t *scount = calloc((size_t)P * 2, sizeof *scount), *rcount = scount + P;
    int nb = -1;
    if (xyz && mine) {
        for (int64_t i = 0; i < n; i++)
            memcpy(xyz + 3 * i, rows + (size_t)i * width, 3 * sizeof(double));
        nb = fmk_let_domain_boxes(NULL, xyz, n, lo, hi, mine);
    }
    st = nb >= 0 && cnt && scount ? FMK_OK : nomem();
    if ((st = fmk_mpi_agree(NULL, comm, rank, fault, st)) != FMK_OK) {
        free(xyz), free(mine), free(cnt), free(scount);
        return st;
    }
    int *nbox = cnt + 4 * P, *bdisp = cnt + 5 * P, total = 0;
    st = FMK_MPI(NULL, fault, MPI_Allgather, (&nb, 1, MPI_INT, nbox, 1, MPI_INT, comm));
    if (st != FMK_OK) {
        free(xyz), free(mine), free(cnt), free(scount);
        return st;
    }
    for (int r = 0; r < P; r++)
        bdisp[r] = 6 * total, total += nbox[r], cnt[r] = 6 * nbox[r];
    double *boxes = malloc((size_t)(total > 0 ? total : 1) * 6 * sizeof *boxes);
    uint64_t *bits = calloc(GRID_BITS / 64, sizeof *bits);
    unsigned char *near = malloc((size_t)(n > 0 ? n : 1));
    double *send = NULL;
    int64_t sn = 0, cap = 0;
    st = boxes && bits && near ? FMK_OK : nomem();
    if ((st = fmk_mpi_agree(NULL, comm, rank, fault, st)) == FMK_OK)
        st = FMK_MPI(NULL, fault, MPI_Allgatherv,
                     (mine, 6 * nb, MPI_DOUBLE, boxes, cnt, bdisp, MPI_DOUBLE, comm));
    if (st == FMK_OK) {
        int ok = 1;
        for (int r = 0; r < P && ok; r++) { /* rank after rank: the send layout */
            const int64_t before = sn;
            if (r != rank && nbox[r] > 0)
                ok = rows_for(xyz, n, width, rows, boxes + bdisp[r], nbox[r], radius, lo, inv, bits,
                              near, &send, &sn, &cap) == 0;
            scount[r] = sn - before;
        }
        st = ok && sn <= INT_MAX ? FMK_OK : nomem();
        st = fmk_mpi_agree(NULL, comm, rank, fault, st);
    }
    free(boxes), free(bits), free(near), free(mine), free(xyz);
    double *recv = NULL;
    int64_t ro = 0;
    if (st == FMK_OK)
        st = FMK_MPI(NULL, fault, MPI_Alltoall,
                     (scount, 1, MPI_INT64_T, rcount, 1, MPI_INT64_T, comm));
    if (st == FMK_OK) {
        for (int r = 0; r < P; r++)
            ro += rcount[r];
        recv = ro <= INT_MAX ? malloc((size_t)(ro > 0 ? ro : 1) * (size_t)width * 8) : NULL;
        st = fmk_mpi_agree(NULL, comm, rank, fault, recv ? FMK_OK : nomem());
    }
    if (st == FMK_OK) {
        int *sc = cnt, *sd = cnt + P, *rc = cnt + 2 * P, *rd = cnt + 3 * P;
        int64_t so = 0, rs = 0;
        for (int r = 0; r < P; r++) {
            sc[r] = (int)scount[r], sd[r] = (int)so, so += scount[r];
            rc[r] = (int)rcount[r], rd[r] = (int)rs, rs += rcount[r];
        }
        st = fmk_mpi_alltoallv_rows(NULL, fault, comm, send ? send : rows, sc, sd, recv, rc, rd,
                                    width, MPI_DOUBLE);
    }
    if (st == FMK_OK) {
        *out = recv, *n_out = ro;
    } else {
        free(recv);
    }
    free(send), free(cnt), free(scount);
    return st;
}
