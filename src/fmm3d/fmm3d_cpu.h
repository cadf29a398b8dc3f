/* fmm3d_cpu.h -- the CPU 3D FMM engine's state and its phases, one file each (fmm3d_cpu.c
 * holds the engine: set_points, and eval calling the phases in order):
 *   upward_cpu.c    P2M at the leaves, M2M upward
 *   m2l_cpu.c       M2L (V list) and P2L (X list); the M2L schedule of set_points
 *   downward_cpu.c  L2L downward, L2P and M2P (W list) at the leaves
 *   p2p_cpu.c       P2P (U list and the W and X entries summed directly), and those entries
 *   coincident_cpu.c runs of coincident sources as one unique source each (issue 31)
 * Every phase reads the plan and the state, and adds into the expansions or results. */
#ifndef FMMKIT_FMM3D_CPU_H
#define FMMKIT_FMM3D_CPU_H

#include "fmm3d/fmm3d.h"
#include "fmm3d/fmm3d_ops.h"

/* M2L runs over blocks of m2l_nodes consecutive nodes (knob fmm3d.m2l_nodes); within a block
 * the V entries are sorted by direction, and the entries of one direction go through
 * fmk_fmm3d_m2l_block together. */

/* Charge vectors an evaluation carries through the passes together (more go in turns). */
enum { FMM_NV_MAX = 8 };

typedef struct fmk_fmm3d_cpu {
    fmk_tree3d tree; /* over sources and targets together */
    fmk_fmm3d_lists lists;
    fmk_fmm3d_ops_ctx ops;
    int order;
    int32_t leaf_size;
    int64_t stride;                 /* doubles per expansion */
    int64_t *n_src, *n_trg;         /* per node */
    int64_t *src_begin, *trg_begin; /* per node: first source / target in key order */
    int64_t *src_order;             /* ns: source position in key order -> caller index */
    int64_t *trg_order;             /* nt (== src_order when self) */
    int64_t n_unique;               /* nu: unique sources, a run of coincident ones being one
                                 * (coincident_cpu.c); nu == ns when none coincide */
    int64_t *src_slot;              /* ns: source position -> its unique source (NULL: nu == ns) */
    double *src_xyz;                /* nu * 3: the unique sources in key order */
    double *trg_xyz;                /* nt * 3 (== src_xyz when self and nu == ns) */
    double *src_soa;                /* 4 * nu: x | y | z | q, for P2P */
    double *q;                      /* nu charges (a run's sum) in key order (into src_soa) */
    int p2p_avx512;                 /* laplace in fp64 on a CPU with AVX-512F: p2p_laplace_avx512
                                 * with this many Newton steps (0: the tile's loop) */
    int p2p_targets;                /* 4: that loop takes four targets at once (one vector) */
    /* targets = sources, one vector (p2p_mutual_cpu.c): the U pairs of leaves (a, b), a < b,
     * by colour, colour c's at [mutual_begin[c], mutual_begin[c + 1]); n_colors 0: none */
    int n_colors;
    int64_t *mutual_begin;
    int32_t *mutual_pair;
    double *mutual_buf; /* threads * mutual_buf_size: a leaf's results */
    int64_t mutual_buf_size;
    float *src32; /* fp32: 4 * nu, x | y | z | q for P2P in single precision, the
                                 * coordinates relative to the centre of the source's leaf */
    /* nv charge vectors at a time (eval: 1; eval_many: up to nv_cap): node b's expansion of
     * vector v at M + stride (b nv + v), likewise L; vector v's unique charges at
     * qv + v n_unique (qv == q when nv_cap is 1), its results at result + 4 nt v */
    int nv, nv_cap;
    double *qv;
    double *M, *L; /* n_nodes * stride * nv_cap */
    double *rot_v; /* rotations of the V directions' polar angles in use (61 at most
                                 * for the 316 directions: the matrices depend on the angle) */
    int32_t rot_slot[FMK_FMM3D_NDIR]; /* direction -> its polar angle's rotation, or -1 */
    double *phase_v;                  /* FMK_FMM3D_NDIR * 2 (p + 1): each direction's e^{i m phi} */
    double *rot_updown;  /* 16 rotations: M2M (child -> parent) for octant o at o, L2L at 8 + o */
    int64_t m2l_nodes;   /* nodes per M2L block (the schedule's) */
    int64_t *v_perm;     /* n_v: V entries, per block of m2l_nodes nodes by direction */
    int32_t *v_target;   /* n_v: the target node of each V entry */
    double *zmat;        /* coaxial M2L matrices, one per squared distance in use */
    int32_t z_slot[28];  /* squared distance (4..27, in sides^2) -> matrix, or -1 */
    double *m2l_buf;     /* threads * m2l_buf_size: X, Y, T of fmk_fmm3d_m2l_block */
    uint8_t *w_direct;   /* n_w: 1 when the W entry is summed directly (P2P), not by M2P */
    uint8_t *x_direct;   /* n_nodes: 1 when the node's X entries are summed directly */
    int64_t *d_begin;    /* n_nodes + 1: per leaf, the source leaves it sums directly */
    int32_t *d_leaf;     /* beyond its U list (from direct W and X entries) */
    double *work;        /* threads * work_stride */
    int64_t work_stride; /* doubles of work per thread: the operators' for nv_cap vectors */
    double *result;      /* 4 * nt * nv_cap in key order: per vector pot, grad */
    double tree_time;
} fmk_fmm3d_cpu;

/* Doubles of one thread's M2L block buffers. */
static inline int64_t fmk_fmm3d_cpu_m2l_buf_size(int p)
{
    return (int64_t)FMK_FMM3D_BLOCK * (2 * (int64_t)(p + 1) * (p + 2) + 2 * (p + 1));
}

/* This thread's work array. */
static inline double *fmk_fmm3d_cpu_work(const fmk_fmm3d_cpu *s)
{
    return s->work + s->work_stride * fmk_thread_num();
}

/* The unique sources of node b: [*j0, *j0 + *nj). */
static inline void fmk_fmm3d_cpu_src_range(const fmk_fmm3d_cpu *s, int64_t b, int64_t *j0,
                                           int64_t *nj)
{
    const int64_t a = s->src_begin[b], e = a + s->n_src[b];
    if (!s->src_slot || e == a) {
        *j0 = a, *nj = e - a;
        return;
    }
    *j0 = s->src_slot[a];
    *nj = s->src_slot[e - 1] + 1 - *j0;
}

/* The unique source of the source at position i in key order. */
static inline int64_t fmk_fmm3d_cpu_slot(const fmk_fmm3d_cpu *s, int64_t i)
{
    return s->src_slot ? s->src_slot[i] : i;
}

/* Octant of a child within its parent: bit 2 x, bit 1 y, bit 0 z (1: upper half). */
static inline int fmk_fmm3d_cpu_octant(const fmk_fmm3d_lists *l, int64_t child, int64_t parent)
{
    int o = 0;
    for (int k = 0; k < 3; k++)
        o |= (l->center[3 * child + k] > l->center[3 * parent + k]) << (2 - k);
    return o;
}

/* upward_cpu.c */
void fmk_fmm3d_cpu_p2m(const fmk_plan *plan, fmk_fmm3d_cpu *s);
void fmk_fmm3d_cpu_m2m(const fmk_plan *plan, fmk_fmm3d_cpu *s);
/* m2l_cpu.c */
void fmk_fmm3d_cpu_m2l_schedule(fmk_fmm3d_cpu *s, int threads);
void fmk_fmm3d_cpu_m2l(const fmk_plan *plan, fmk_fmm3d_cpu *s);
/* downward_cpu.c */
void fmk_fmm3d_cpu_l2l(const fmk_plan *plan, fmk_fmm3d_cpu *s);
void fmk_fmm3d_cpu_l2p(const fmk_plan *plan, fmk_fmm3d_cpu *s);
/* p2p_cpu.c */
/* Seconds per P2P pair and core of the loop the engine will run (docs/fmm3d.md section 4). */
double fmk_fmm3d_cpu_pair_time(const fmk_plan *plan);
/* The Newton steps of P2P's AVX-512 laplace loop (laplace in fp64 on a CPU with AVX-512F: 1
 * for eps >= 1e-5, else 2), or 0 when the direct sum's tile loop runs. */
int fmk_fmm3d_cpu_p2p_avx512(const fmk_plan *plan);
/* The W and X entries summed directly (see p2p_cpu.c); returns 0, or -1 when out of memory. */
int fmk_fmm3d_cpu_direct_lists(fmk_fmm3d_cpu *s, int order, double t_pair, int direct_near);
/* The interaction counts of fmk_info from the lists (after fmk_fmm3d_cpu_direct_lists): *p2p
 * the target-source pairs of P2P (per leaf with targets, its targets times the sources of its
 * U list and direct entries; n_targets less for targets = sources), *far the M2L (V), P2L (X)
 * and M2P (W) entries evaluated by expansions. */
void fmk_fmm3d_cpu_interactions(const fmk_fmm3d_cpu *s, int self, int64_t n_targets, int64_t *p2p,
                                int64_t *far);
/* P2P at every leaf with targets, from its U list and direct entries, over unique sources,
 * for vectors [v_first, v_first + nv) of the s->nv (precision fp32: one vector, whose charges
 * the caller put in src32). */
void fmk_fmm3d_cpu_p2p(const fmk_plan *plan, fmk_fmm3d_cpu *s, int v_first, int nv);
/* With targets = sources and coincident sources, for plummer and regularized: adds to each
 * target the rest of its own run, which P2P left out, for the s->nv vectors of charges (caller
 * order, n_sources apart). */
void fmk_fmm3d_cpu_p2p_runs(const fmk_plan *plan, fmk_fmm3d_cpu *s, const double *charges);
/* p2p_mutual_cpu.c: the leaf pairs of the U lists, coloured (set_points; nothing when the
 * plan does not qualify: targets apart, no AVX-512, coincident sources, fp32); 0, or -1 when
 * out of memory. p2p_mutual: both directions of every pair (one vector); free: the pairs. */
int fmk_fmm3d_cpu_mutual_pairs(const fmk_plan *plan, fmk_fmm3d_cpu *s);
void fmk_fmm3d_cpu_p2p_mutual(const fmk_plan *plan, fmk_fmm3d_cpu *s);
void fmk_fmm3d_cpu_mutual_free(fmk_fmm3d_cpu *s);
/* coincident_cpu.c */
/* Sorts each group of equal keys of the tree that holds coincident sources by (coordinates,
 * position), so that coincident sources are contiguous; other groups keep their order. Returns
 * 0, or -1 when out of memory. */
int fmk_fmm3d_cpu_group_runs(const fmk_plan *plan, fmk_tree3d *t);
/* After split_points: numbers the runs of coincident sources (n_unique, src_slot) and keeps one
 * coordinate triple per run in src_xyz (self: trg_xyz becomes a copy of all points first).
 * Returns 0, or -1 when out of memory. */
int fmk_fmm3d_cpu_unique_sources(const fmk_plan *plan, fmk_fmm3d_cpu *s);

/* The engine's knobs (core/tune.h, prefix "fmm3d"). */
typedef struct fmk_fmm3d_cpu_tune {
    int direct_near; /* 1: W and X entries cheaper summed directly are (default);
                                 * 0: every entry on its operator */
    int p2p_targets; /* targets the AVX-512 laplace P2P takes at once for one vector: 4
                                 * (default: each source load serves four) or 1 */
    int newton;      /* Newton steps of that P2P's 1/r: 0 (default: 1 for eps >= 1e-5,
                                 * else 2), 1 or 2 */
    int mutual;      /* 1: with targets = sources, each pair of leaves once, both ways
                                 * (default); 0: every leaf from its neighbours one-sided */
    int m2l_nodes;   /* nodes per block of the M2L; 0 (default): 32 below order 20 (twice
                                 * the tasks of 64 for many threads, each direction's entries
                                 * still filling a block operator), 64 from order 20 (16 cores,
                                 * 10^6 points: M2L 0.47 against 0.59 s at p = 31) */
} fmk_fmm3d_cpu_tune;

#endif /* FMMKIT_FMM3D_CPU_H */
