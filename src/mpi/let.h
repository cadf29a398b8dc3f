/*
 * let.h -- what the two files of the treecode's distributed sources share (never installed):
 * let.c exchanges (routing, positions, charges), let_tree.c is the sending tree (its build, the
 * walks that choose what each other rank gets, the moments and pseudo-charges).
 * docs/distributed.md, "Treecode: locally essential trees".
 */
#ifndef FMMKIT_MPI_LET_H
#define FMMKIT_MPI_LET_H

#include "mpi/mpi_internal.h"

enum {
    LET_LEAF = 32,        /* sources per leaf of the sending tree */
    LET_PP = 12,          /* pseudo-particles a node */
    LET_BOXES = 1024,     /* most boxes describing one rank's domain */
    LET_BOXES_SPLIT = 128 /* a box holds at most 1 / LET_BOXES_SPLIT of the rank's targets */
};

typedef struct let_node {
    int64_t begin, end; /* own sources [begin, end) in key order */
    int32_t child, n_child;
    double c[3], a; /* the centre of its points' box and its half diagonal */
} let_node;

struct fmk_mpi_let {
    int64_t n_own;       /* sources kept here */
    double *own;         /* n_own * 3: their coordinates (routed order) */
    int64_t *perm;       /* n_own: routed index of the k-th in key order */
    double *xs;          /* n_own * 3: the coordinates in key order */
    fmk_mpi_keyed *keys; /* n_own: their keys, sorted (freed once the boxes are made) */
    let_node *node;      /* the sending tree: children after their parent */
    int32_t n_node;
    int64_t *pidx; /* particles sent (routed indices), concatenated over destinations */
    int32_t *nidx; /* nodes sent as pseudo-particles, concatenated over destinations */
    int *pcount, *ncount;
    int *scount, *sdispl, *rcount, *rdispl; /* items: particles + LET_PP a node */
    int64_t n_send, n_recv;
    /* the own sources' routing where the targets are not every rank's sources (4 x size
     * counts as partition.c's, and the caller's index of each source sent) */
    int *route;
    int64_t *route_order;
    int64_t n_route;
    fmk_plan *sorter; /* the plan whose GPU sorts the keys (fmk_mpi_sort_on), or NULL */
};

/* The unit icosahedron's vertices: the pseudo-particles' directions. */
void fmk_let_icosahedron(double u[LET_PP][3]);

/* The sending tree of l's own sources in the box lo, hi: perm, xs, node (0, or -1 when out of
 * memory). */
int fmk_let_build_tree(fmk_mpi_let *l, const double lo[3], const double hi[3]);

/* The boxes of nt targets (at most LET_BOXES, 6 doubles each: lo, hi); the count, -1 when out
 * of memory. Where t is l's own sources (l may be NULL), the sending tree's sort serves. */
int fmk_let_domain_boxes(const fmk_mpi_let *l, const double *t, int64_t nt, const double lo[3],
                         const double hi[3], double *box);

/* Every destination's lists (pidx, nidx, pcount, ncount, scount) from the allgathered boxes
 * (nbox[r] of rank r, consecutive): 0, or -1 when out of memory or past MPI's counts. */
int fmk_let_lists(fmk_mpi_let *l, const fmk_mpi_state *s, const int *nbox, const double *boxes,
                  double theta);

/* The rows to send for nd vectors (row per item, nd doubles): the particles' charges and the
 * nodes' pseudo-charges. q: the own sources' charges, row per source (routed order). 0, or -1
 * when out of memory. */
int fmk_let_rows(const fmk_mpi_let *l, int P, int64_t nd, const double *q, double *send);

#endif /* FMMKIT_MPI_LET_H */
