/*
 * treecode.h -- method treecode of the Poisson solver: van Rees et al.'s multipole algorithm
 * (paper section 3-4; docs/poisson.md "The treecode"). What its files share:
 *
 *   treecode.c   entry points (the method's row in methods.c), p and theta from eps, the
 *                phases in order, the final scaling to the caller's units
 *   sources.c    the support of omega: filtered, Morton-sorted, structure of arrays
 *   tree.c       the octree of the sources (at most leaf_size per leaf) and its multipoles
 *   plans.c      destination bricks and their logical plans (direct ranges, far nodes)
 *   eval_cpu.c   the plans evaluated on the CPU (OpenMP over bricks, SIMD over points)
 *   cuda/eval.cu the plans' direct part (and, unless hybrid, the far part) on the GPU;
 *   cuda/far.cu  the far part for Psi alone, the order a template argument
 *
 * Units: the solver's grid units (poisson.h: lengths in h_min, points multiples of 1/2). The
 * sum computed is pot_a(y) = sum_j w_aj G_e(|y - x_j|) and u(y) = sum_j grad_y G_e(y - x_j) x w_j
 * with w_aj = omega_a(x_j) h_j^3 (grid units) and G_e fmmkit's regularized kernel of softening
 * e = s->e; treecode.c scales them to Psi = h_min^2/(4 pi) pot and u = h_min/(4 pi) u.
 */
#ifndef FMMKIT_POISSON_TREECODE_H
#define FMMKIT_POISSON_TREECODE_H

#include "fmm3d/fmm3d_ops.h"
#include "poisson/poisson.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sources: the grid points where some component of omega is nonzero, in Morton order. */
typedef struct fmk_tc_sources {
    int64_t n;
    int nc;            /* weight vectors: the components of omega (1 or 3) */
    double *x, *y, *z; /* n each, grid units */
    double *w;         /* nc * n: w[a * n + j] */
    int64_t *point;    /* n: the field index of each source */
    double *volume;    /* n: h^3 of each source's box (grid units): w = omega volume */
    uint64_t *key;     /* n: Morton keys, sorted (key_levels bits per axis) */
    int key_levels;    /* levels of the keys: the tree is at most this deep */
    double root_side;  /* the side of the keys' root cube, grid units */
    int64_t cap;       /* sources the arrays hold (x, y, z, point, volume, key), w: nc cap */
    int w_components;  /* components w holds room for */
} fmk_tc_sources;

/* The octree of the sources. Node 0 is the root; the children of a node are contiguous and
 * their sources are consecutive ranges of the node's (Morton order), so the sources of any set
 * of adjacent leaves form one range. */
typedef struct fmk_tc_tree {
    int64_t n_nodes;
    int64_t *begin, *end; /* sources [begin, end) */
    int32_t *child;       /* first child, -1 for a leaf */
    int8_t *n_child;
    double *center;       /* 3 per node: the expansion centre */
    double *radius;       /* a: the largest distance from the centre to a source of the node */
    double *scale;        /* the expansions' scale (fmm3d_ops.h): the node's cube side */
    int order;            /* p */
    int64_t coef;         /* doubles per expansion: (p + 1)(p + 2) */
    double *multipole;    /* n_nodes * nc * coef: node k, component a at (k nc + a) coef */
    int nc;               /* components of the multipoles */
    int32_t levels;       /* deepest level + 1 */
    int64_t *level_begin; /* levels + 1: nodes are numbered level by level (breadth first) */
    int64_t cap, multipole_cap; /* nodes and multipole doubles the arrays hold */
    fmk_fmm3d_ops_ctx ops;      /* the expansion operators of order p (fmm3d_ops.h) */
} fmk_tc_tree;

/* A destination brick: up to 8^3 points of one box on its lattice. */
typedef struct fmk_tc_brick {
    double corner[3];  /* grid units of its first point */
    double h;          /* spacing, grid units */
    int32_t n[3];      /* points per axis, 1..8 */
    int32_t box;       /* the solver's box */
    int64_t first;     /* field index of its first point */
    int64_t stride[2]; /* field index steps along y and z: the box's n[0] and n[0] n[1] */
} fmk_tc_brick;

/* The logical plans (CSR per brick). */
typedef struct fmk_tc_plans {
    int64_t n_bricks;
    fmk_tc_brick *bricks;
    int64_t *direct_start; /* n_bricks + 1 */
    int64_t *direct_range; /* 2 per entry: sources [begin, end), adjacent ranges merged */
    int64_t *far_start;    /* n_bricks + 1 */
    int32_t *far_node;     /* nodes taken by their multipoles */
    double direct_pairs;   /* point-source pairs of all bricks */
    double far_pairs;      /* point-node evaluations of all bricks */
} fmk_tc_plans;

/* The parameters of one solver (treecode.c, from eps and opts). */
typedef struct fmk_tc_params {
    int order;          /* p */
    double theta;       /* opening parameter */
    int32_t leaf_size;  /* s_max */
    double r_kernel;    /* grid units: multipoles only for sources at least this far */
    double r_kernel_psi; /* the same for a solve of Psi alone (a smaller kernel error) */
    int64_t direct_max; /* a node of at most this many sources is summed directly */
} fmk_tc_params;

/* The deepest tree: 21 key levels below the root. */
#define FMK_TC_MAX_LEVELS 22

/* sources.c. support: the field indices where some of the nc components of omega is nonzero,
 * in field order, into *support (cap entries, grown as needed); *changed on entry: 1 forces a
 * new support (none yet), on return: 1 when it differs from the one given. build: the sources
 * of a support (positions, volumes, keys, Morton order). weights: w from omega for the
 * sources' points. All return FMK_OK or FMK_ERR_NOMEM (recorded on s). */
fmk_status fmk_tc_sources_support(struct fmk_poisson *s, int nc, const double *omega,
                                  int64_t **support, int64_t *n_support, int64_t *cap,
                                  int *changed);
fmk_status fmk_tc_sources_build(struct fmk_poisson *s, const int64_t *support, int64_t n,
                                fmk_tc_sources *src);
fmk_status fmk_tc_sources_weights(struct fmk_poisson *s, int nc, const double *omega,
                                  fmk_tc_sources *src);
void fmk_tc_sources_free(fmk_tc_sources *src);
int64_t fmk_tc_sources_bytes(const fmk_tc_sources *src);

/* tree.c. build: the tree's geometry for the sources (nodes, centres, radii, scales) and the
 * operators of order p; expand: every node's multipoles for the sources' weights (P2M at the
 * leaves, M2M upwards). FMK_OK, FMK_ERR_NOMEM or FMK_ERR_INTERRUPTED (recorded on s). */
fmk_status fmk_tc_tree_build(struct fmk_poisson *s, const fmk_tc_sources *src, int32_t leaf_size,
                             int order, fmk_tc_tree *tree);
fmk_status fmk_tc_tree_expand(struct fmk_poisson *s, const fmk_tc_sources *src, fmk_tc_tree *tree);
void fmk_tc_tree_free(fmk_tc_tree *tree);
int64_t fmk_tc_tree_bytes(const fmk_tc_tree *tree);

/* plans.c. bricks: the destination bricks of the solver's boxes (setup); build: every brick's
 * logical plans for the tree (direct ranges and far nodes, the opening rule of params).
 * FMK_OK, FMK_ERR_NOMEM or FMK_ERR_INTERRUPTED (recorded on s). */
fmk_status fmk_tc_bricks_make(struct fmk_poisson *s, fmk_tc_plans *plans);
fmk_status fmk_tc_plans_build(struct fmk_poisson *s, const fmk_tc_tree *tree,
                              const fmk_tc_params *params, fmk_tc_plans *plans);
void fmk_tc_plans_free(fmk_tc_plans *plans); /* the lists and the bricks */
int64_t fmk_tc_plans_bytes(const fmk_tc_plans *plans);

/* The method's entry points (its rows in methods.c). */
fmk_status fmk_treecode_check(const fmk_poisson_opts *opts, double eps);
fmk_status fmk_treecode_setup(struct fmk_poisson *s);
fmk_status fmk_treecode_solve(struct fmk_poisson *s, int nc, const double *omega, double *psi,
                              double *velocity);
void fmk_treecode_release(struct fmk_poisson *s);
int64_t fmk_treecode_bytes(const struct fmk_poisson *s);
int64_t fmk_treecode_bytes_device(const struct fmk_poisson *s);

/* eval_cpu.c: adds the plans' direct part (direct = 1) and/or far part (far = 1) of bricks
 * [b0, b1) into pot (nc per point, f[nc p + a], may be NULL) and u (3 per point, may be NULL),
 * indexed by field point, in grid units. Bricks own disjoint points: no two threads write the
 * same value. Returns FMK_OK or FMK_ERR_INTERRUPTED (polls the solver). */
fmk_status fmk_tc_eval_cpu(struct fmk_poisson *s, const fmk_tc_sources *src,
                           const fmk_tc_tree *tree, const fmk_tc_plans *plans, int direct, int far,
                           double *pot, double *u);

#ifdef FMK_HAVE_CUDA
/* cuda/eval.cu: the GPU's part (the paper's Fig. 2), on two streams. upload: the sources
 * (every solve), and the plans, bricks and the tree's geometry when plans_changed. launch: the
 * results zeroed and the direct part's kernels started at once (it needs no multipoles).
 * far: the multipoles (made on the GPU by fmk_tc_gpu_moments_launch, or the CPU's for this
 * omega, which go up while the direct part runs), and the far part's kernels beside the direct
 * part's, each adding to the results; a hybrid solve does not call it and evaluates the far
 * part on the CPU instead. collect: the results come
 * down; it waits (polling the solver's interrupt), adds them into pot and u where given (host,
 * layout of fmk_tc_eval_cpu; NULL: leave them in fmk_tc_gpu_results), and gives the seconds
 * of the direct and the far part's kernels and of the GPU's whole part (from the sources'
 * upload to the results' download, by events). All return FMK_OK or a status recorded on
 * the solver; release frees everything (NULL is a no-op). */
struct fmk_tc_gpu;
typedef struct fmk_tc_gpu_args { /* what the GPU's part needs of the solver (made at setup) */
    int device;
    double eps;       /* the accuracy asked (fp32 for eps >= 1e-4) */
    double e;         /* the smoothing in grid units */
    int64_t n_points; /* the grid's points */
    int threads;      /* the CPU threads adding the GPU's results */
} fmk_tc_gpu_args;
fmk_status fmk_tc_gpu_create(struct fmk_poisson *s, const fmk_tc_gpu_args *args,
                             struct fmk_tc_gpu **gpu);
fmk_status fmk_tc_gpu_upload(struct fmk_poisson *s, struct fmk_tc_gpu *gpu,
                             const fmk_tc_sources *src, const fmk_tc_tree *tree,
                             const fmk_tc_plans *plans, int plans_changed);
fmk_status fmk_tc_gpu_launch(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, int want_pot,
                             int want_u);
fmk_status fmk_tc_gpu_far(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, const fmk_tc_tree *tree);
fmk_status fmk_tc_gpu_collect(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, double *pot,
                              double *u, double kernel_seconds[4]);
/* The multipoles made on the GPU instead of the CPU (orders up to 16; 0 otherwise): launched
 * after fmk_tc_gpu_launch, beside the direct part, for fmk_tc_gpu_far; w: the weights on the
 * GPU (fmk_tc_gpu_weights'), NULL: those fmk_tc_gpu_upload sent. */
int fmk_tc_gpu_moments_order_ok(int order);
fmk_status fmk_tc_gpu_moments_launch(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, int resident);
/* The GPU's results after collect, in pinned host memory (grid units, the layout of
 * fmk_tc_eval_cpu; NULL where not asked for), valid until the next solve. */
void fmk_tc_gpu_results(const struct fmk_tc_gpu *gpu, const double **pot, const double **u);
int64_t fmk_tc_gpu_bytes(const struct fmk_tc_gpu *gpu);

/* cuda/resident.cu: the solve whose omega and results stay on the GPU (fmk_poisson_solve_device),
 * after a solve that uploaded the plans and the sources. support_same: *same = 1 when the points
 * where some of the nc components of omega (device, the caller's layout) is nonzero are
 * exactly the uploaded sources. weights: the sources' weights from that omega into the direct
 * part's arrays (before fmk_tc_gpu_launch); host_weights (after it): the same weights on the
 * host (pinned, w[a n + j] as fmk_tc_sources.w), waiting for their copy, which overlaps the
 * direct part. finish (after fmk_tc_gpu_far): the results scaled in place on the GPU (Psi by
 * scale_psi, u by scale_u: the caller's units), waits as collect, the kernels' seconds, and the
 * device arrays of the results (the caller's layout; valid until the next solve). zero: results
 * that are all zero (omega zero everywhere). All return FMK_OK or a status on the solver. */
fmk_status fmk_tc_gpu_support_same(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, int nc,
                                   const double *d_omega, int *same);
fmk_status fmk_tc_gpu_weights(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, int nc,
                              const double *d_omega);
fmk_status fmk_tc_gpu_host_weights(struct fmk_poisson *s, struct fmk_tc_gpu *gpu,
                                   const double **w);
fmk_status fmk_tc_gpu_finish(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, double scale_psi,
                             double scale_u, double kernel_seconds[4], const double **d_psi,
                             const double **d_u);
fmk_status fmk_tc_gpu_zero(struct fmk_poisson *s, struct fmk_tc_gpu *gpu, int nc, int want_psi,
                           int want_u, const double **d_psi, const double **d_u);
fmk_status fmk_treecode_solve_device(struct fmk_poisson *s, int nc, const double *d_omega,
                                     int want_psi, int want_u, const double **d_psi,
                                     const double **d_u);
void fmk_tc_gpu_release(struct fmk_tc_gpu *gpu);
#endif

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_POISSON_TREECODE_H */
