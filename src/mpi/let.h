/*
 * let.h -- what the files of the distributed sources of the treecode and the laplace FMM share
 * (never installed): let.c exchanges (routing, positions, charges), let_tree.c is the sending
 * tree (its build, the walks that choose what each other rank gets, the treecode's moments and
 * pseudo-charges), let_pseudo.c the FMM's pseudo-particles of order p. docs/distributed.md,
 * "Treecode: locally essential trees" and "FMM: locally essential trees".
 */
#ifndef FMMKIT_MPI_LET_H
#define FMMKIT_MPI_LET_H

#include <complex.h>

#include "mpi/mpi_internal.h"

enum {
    LET_LEAF = 32,         /* sources per leaf of the sending tree */
    LET_PP = 12,           /* pseudo-particles a node of the treecode (order 0) */
    LET_ORDER_MAX = 24,    /* the highest order of the FMM's pseudo-particles */
    LET_BOXES = 1024,      /* most boxes describing one rank's domain */
    LET_BOXES_SPLIT = 128, /* a box holds at most 1 / LET_BOXES_SPLIT of the rank's targets */
    LET_LEVELS = 23        /* most levels of the sending tree (21 bits an axis, and the root) */
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
    let_node *node;      /* the sending tree: children after their parent, level by level */
    int32_t n_node;
    int n_levels;                        /* levels of nodes: level L is node[level_start[L] ..   */
    int32_t level_start[LET_LEVELS + 1]; /* level_start[L + 1]) */
    int64_t *pidx; /* particles sent (routed indices), concatenated over destinations */
    int32_t *nidx; /* nodes sent as pseudo-particles, concatenated over destinations */
    int *pcount, *ncount;
    int *scount, *sdispl, *rcount, *rdispl; /* items: particles + n_pp a node */
    /* the pseudo-particles: order 0 the treecode's icosahedron, else the FMM's of order p
     * (let_pseudo.c); n_pp a node, pp_u their unit directions (3 each), pp_w the weights */
    int order, n_pp;
    double *pp_u, *pp_w;
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

/* The distance from point x to the box b (lo, hi: 6 doubles); 0 inside. */
double fmk_let_box_distance(const double *x, const double *b);

/* The boxes of nt targets (at most LET_BOXES, 6 doubles each: lo, hi); the count, -1 when out
 * of memory. Where t is l's own sources (l may be NULL), the sending tree's sort serves. */
int fmk_let_domain_boxes(const fmk_mpi_let *l, const double *t, int64_t nt, const double lo[3],
                         const double hi[3], double *box);

/* Every destination's lists (pidx, nidx, pcount, ncount, scount) from the allgathered boxes
 * (nbox[r] of rank r, consecutive): 0, or -1 when out of memory or past MPI's counts. near
 * (0: none): a node goes as pseudo-particles only where its whole sphere is at least that far
 * from every box of the receiver (the smooth kernels' FMM: fmk_let_smooth_near). */
int fmk_let_lists(fmk_mpi_let *l, const fmk_mpi_state *s, const int *nbox, const double *boxes,
                  double theta, double near);

/* The distance beyond which the FMM's smooth kernels are laplace's to eps (fmm3d.h's d_min:
 * softening / sqrt(eps) for plummer, softening / eps^(1/4) for regularized; 0 for laplace),
 * in the caller's units: the pseudo-particles, which keep the node's harmonic moments only,
 * stand for its sources there. */
double fmk_let_smooth_near(fmk_kernel kernel, double softening, double eps);

/* The rows to send for nd vectors (row per item, nd doubles): the particles' charges and the
 * nodes' pseudo-charges. q: the own sources' charges, row per source (routed order). 0, or -1
 * when out of memory. */
int fmk_let_rows(const fmk_mpi_let *l, int P, int64_t nd, const double *q, double *send);

/* let_pseudo.c: the FMM's pseudo-particles of order p (docs/distributed.md, "FMM: locally
 * essential trees"). Moments and harmonics are complex, (p+1)(p+2)/2 terms (n, m >= 0) in the
 * order of n(n+1)/2 + m; work: room for fmk_let_pseudo_work(order) of them. */
int fmk_let_pseudo_count(int order); /* pseudo-particles a node: (p+1)(2p+1); LET_PP at 0 */
int fmk_let_pseudo_terms(int order); /* (p+1)(p+2)/2 */
int fmk_let_pseudo_work(int order);  /* the room a work array needs: terms + 2 (p+1)^2 */
/* The order and the opening ratio theta for the plan's eps (the MAC: a node's centre farther
 * than a (1 + 1/theta) from every box of the receiver). */
void fmk_let_pseudo_choose(double eps, int *order, double *theta);
/* The (p+1)(2p+1) unit directions u (3 each) and weights w (sum 4 pi) of the product rule. */
void fmk_let_sphere(int order, double *u, double *w);
/* The regular solid harmonics R_n^m(x) = r^n P_n^m(cos theta) e^(i m phi) / (n+m)!. */
void fmk_let_regular(int order, const double x[3], double complex *R);
/* Adds to mom (nd vectors of terms) the moments about c of n points x with charges q (row of
 * nd a point), lengths in units of unit (the M2M's t and the pseudo-charges' a likewise). */
void fmk_let_p2m(int order, const double c[3], double unit, int64_t n, const double *x, int64_t nd,
                 const double *q, double complex *mom, double complex *work);
/* Adds to parent the moments child, moved by t = the child's centre - the parent's. */
void fmk_let_m2m(int order, const double t[3], const double complex *child, double complex *parent,
                 double complex *work);
/* The table B (K x terms) of the directions u and weights w, and from it the pseudo-charges
 * of a node of radius a and moments mom (qk[k * stride], k < K). */
void fmk_let_pseudo_table(int order, int K, const double *u, const double *w, double complex *B,
                          double complex *work);
void fmk_let_pseudo_charges(int order, int K, const double complex *B, double a,
                            const double complex *mom, double *qk, int64_t stride);
/* l's order, n_pp, pp_u and pp_w (order 0: the icosahedron); 0, or -1 when out of memory. */
int fmk_let_pseudo_setup(fmk_mpi_let *l, int order);
/* fmk_let_rows at order > 0; qs: the charges in key order (row per source). */
int fmk_let_pseudo_rows(const fmk_mpi_let *l, int P, int64_t nd, const double *q, const double *qs,
                        double *send);

#endif /* FMMKIT_MPI_LET_H */
