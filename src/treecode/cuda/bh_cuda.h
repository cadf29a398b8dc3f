/*
 * bh_cuda.h -- what the files of the GPU treecode (fmk_engine_tree_cuda) share (never
 * installed; CUDA C++, included by src/treecode/cuda/*.cu only).
 *
 * Barnes-Hut on the octree of tree3d.h, built on the GPU (tree/cuda/tree3d.cu), one file per
 * phase:
 *   frame.cu           the points' box, frame and mapping on the device, without a host wait
 *                      for the box (set_points_device), then the build and the host's check
 *   build.cu           the trees, the target groups, the packed points and links, the group
 *                      boxes, the split of the walk
 *   moments.cu         the charge check and the moments up the tree (P2M, M2M)
 *   walk_group.cu      the group walk (breadth-first, one warp per group), the split walk's sum
 *   walk_stackless.cu  the paper's walk (Nakasato Fig. 6), one thread per target
 *   super.cu           super-groups: the far field and start lists shared by groups
 *   engine.cu          state, memory, setup, set_points_device, eval, release, the engine row
 *
 * Device layout. Sources sorted in Morton order as 4-vectors (x, y, z, q) of the working
 * precision, mapped coordinates in [1, 2] (internal.h). Per node: int4 {more, next, begin, end}
 * and four 4-vectors (xc, r_open^2), (M, D), (Sxx, Sxy, Sxz, Syy), (Syz, Szz, A, 0) with A the
 * node's sum of |q| (tree3d.h: moments about the centre of |q|). Targets that are not the
 * sources are sorted the same way (their own tree, leaf size = the group size) and results
 * are written back to the caller's order.
 *
 * Moments (per evaluation): leaves from their points, then level by level upwards with the
 * shift formulas of tree3d.h; accumulated in double, stored in the working precision.
 *
 * Walks:
 *   group (FMK_WALK_GROUP, the default): one warp per group of up to 32 nearby sorted targets
 *     (one per lane), tested as a whole: a node is accepted when the group box's nearest point
 *     is farther than r_open from xc, which implies the test for every target in it. The walk
 *     is breadth-first (Bonsai style, k_walk_bfs): 32 nodes tested per step, one lane each,
 *     accepted nodes and leaf sources gathered in shared memory and evaluated 32 at a time.
 *     Groups (tree3d_cuda.h): from 2^19 targets the points of sibling nodes cut into full
 *     groups of 32 (fuller warps), below one group per node (smaller boxes: the longest warp
 *     sets the time there). Cell-to-group step (tune.local): an accepted node far from the
 *     whole group (|xc - c| > a r_open + k R_g, c and R_g the group box's centre and half
 *     diagonal) is translated once per group into a Taylor expansion about c (M2L of
 *     bh_local.h, one node per lane, the lanes' expansions added by a reduce-scatter), which
 *     each target evaluates once at the end (L2P); the other accepted nodes are evaluated at
 *     each target (M2P).
 *   stackless (FMK_WALK_STACKLESS): one thread per sorted target, the paper's walk verbatim
 *     (Nakasato Fig. 6: accept -> next, open -> more; no stack), the opening test against the
 *     target itself (fewer interactions, divergent warps).
 * An accepted node with very few points is summed directly (P2P is exact and no dearer).
 */
#ifndef FMMKIT_TREECODE_BH_CUDA_H
#define FMMKIT_TREECODE_BH_CUDA_H

#include <stdint.h>

#include "core/tune.h"
#include "tree/cuda/tree3d_cuda.h"
#include "treecode/treecode.h"

#ifndef FMK_TREE_THETA_CAP /* tree3d.h's cap of theta in the opening radius */
#define FMK_TREE_THETA_CAP 1.15
#endif

/* ---------------------------------------------------------------------------------------- */
/* Tuning knobs and counters (core/tune.h: "treecode.<field>")                               */

/* The GPU treecode's knobs, read from plan->tune. Defaults in engine.cu (fmk_bh_tune_defaults). */
typedef struct fmk_treecode_cuda_tune {
    fmk_cuda_tree_tune tree; /* the tree build's ("treecode.tree.*", tree3d_cuda.h) */
    /* Groups: 2 cuts the siblings' points into full groups of 32 across their bounds, 1 packs
     * sibling groups whole, 0 one group per node; fewer targets than group_merge_min (2^19)
     * get one group per node (merged groups have larger boxes; when the warps do not fill
     * the GPU the walk's time is that of its longest warp). */
    int group_merge;         /* 2 */
    int64_t group_merge_min; /* 2^19 */
    /* Trees of at most moments_small_max nodes (8192) get their charges packed and every
     * moment in one launch (k_moments_small); larger ones of at most moments_up_max nodes
     * (2^18) in one launch up the tree (k_moments_up, arrival counters); larger ones (0.6..1.4
     * M nodes at 2^24 points) one launch per level, which fills the GPU there. */
    int64_t moments_small_max; /* 8192 */
    int64_t moments_up_max;    /* 2^18 */
    /* The group walk is split in parts (walk_args) until it has about split_warps warps per
     * SM (0: never split), with at least split_nodes nodes per part at the split level, no
     * deeper than split_level_max. */
    int split_warps;     /* 24 */
    int split_nodes;     /* 8 */
    int split_level_max; /* 5 */
    /* The group walk's acceptance test. 0: a node is accepted when the group's box is outside
     * its opening sphere. 1: a node of more than p2p_cut points that the box test opens is
     * accepted too when every target of the group is outside the sphere on its own (the
     * stackless walk's test, made by all of them). 2: as 1 for leaves only. -1: 1 for trees of
     * at least auto_min sources, 2 below (at 3000 and 4000 points mac 1 with local_k 1.65
     * broke the accuracy rule of docs/tree.md and test_tree_gpu's bound of the step). */
    int mac; /* -1 */
    /* With mac, the per-target test of a leaf uses the opening radius of this theta,
     * f (l / theta + s) with f = theta / leaf_theta (0: theta itself, f = 1); f is kept above
     * sqrt(3) / (1 / theta + sqrt(3) / 2) (with 1% to spare), so that a target inside the
     * leaf's cell never accepts it. */
    double leaf_theta; /* 0 */
    /* The cell-to-group step: a node the group accepts whose centre is farther from the group
     * box's centre c than a r_open + k R_g (a = local_open, k = local_k 0.6 / theta, at least
     * 1) is translated once per group into a Taylor expansion of order local (2, 3 or 4)
     * about c, which each target evaluates at the end (L2P). 0: off. Order 4 truncates the
     * monopole's field one power of |y - c| / |xc - c| later than order 3, so a smaller a and
     * k keep the error. The term a r_open keeps out nodes accepted close to their opening
     * radius, whose quadrupole's dropped terms are the largest (bh_local.py). */
    int local;         /* 4 */
    double local_k;    /* -1: 1.65 from auto_min sources, 2.25 below */
    int64_t auto_min;  /* 32768: the source count of mac's and local_k's defaults */
    double local_open; /* 0.5 */
    /* With order 4 and eps2 = 0 the expansion is a harmonic polynomial: the M2L computes only
     * its 25 coefficients with bz <= 1 and the other 10 are found once per group before L2P
     * (bh_local.h's m2l4_harm, local4_from_harm; the same sums to rounding). 0: the full M2L
     * (the softened kernel's, always). */
    int local_harmonic; /* 1 */
    /* Super-groups: the group walk's far field found once for `super` consecutive groups (in
     * Morton order; 0 or 1: off, at most 32) by a first walk (k_walk_super) against their
     * union box; nodes far from the whole super-group go into its expansion, nodes that every
     * group box opens are opened, every other node goes to its start list, from which each
     * group walks instead of the root. Only with the step of order 4, an unsplit walk, at
     * least super_min targets and a sources' tree of at least log8(n / leaf_size) +
     * super_depth levels (a concentrated distribution, whose groups walk far more steps; a
     * large negative value: any depth). super_cap: start-list entries per super-group (at
     * most 640); a list that does not fit leaves its groups walking from the root. super_open
     * 1 opens every node the super box opens, 0 only those that every group box opens.
     * super_k: the step takes nodes farther than a r_open + k' R_B, k' = super_k times the
     * group's k (>= 1): the super-group's expansion is evaluated up to R_B from its centre.
     * super2: a second level, parents of super2 consecutive super-groups walked first (used
     * when super * super2 <= 32), whose start lists (super2_cap entries) the super-groups walk
     * from. */
    int super;          /* 2 */
    int super_cap;      /* 640 */
    int super2;         /* 8 */
    int super2_cap;     /* 640 */
    int super_open;     /* 0 */
    int64_t super_min;  /* 2^18 */
    double super_k;     /* 1.2 */
    double super_depth; /* 4 */
    /* The group walk's warps take their groups by tickets (1) from a grid that the GPU holds
     * at once, so that no warp slot waits for the block scheduler, or one group per one-warp
     * block (0). K > 1: tickets, and a grid of at most K blocks (the tests: warps that walk
     * many groups each). */
    int tickets; /* 1 */
    /* The fixed cost of small N. set_points_device of at most frame_small_max points finds
     * the box, the frame and the mapped points in one launch (k_frame_small, a cluster of
     * frame_cluster blocks, 1 .. 8); larger sets by a grid of blocks (frame_grid 1;
     * 0: CUB's reduction of the box, a wait, the mapping with the host's frame); neither waits
     * for the box (the host checks the frame after the build's one wait). async: trees of at
     * most tree.small_max points are built without a host wait (0: the build waits for its
     * level table). Evaluations of at most prep_small_max sources in trees of at most
     * moments_small_max nodes check and pack the charges and compute every moment in one block
     * (k_prep_small). pack_boxes: the group boxes of a tree built without a wait are computed
     * in the packing launch (0: k_group_boxes after it). Evaluations of at most
     * charge_block_max sources check their charges in one block that writes the check's words
     * itself (0: a grid of blocks after a memset). */
    int64_t frame_small_max;  /* 2^15 */
    int frame_cluster;        /* 8 */
    int frame_grid;           /* 1 */
    int async;                /* 1 */
    int64_t prep_small_max;   /* 4096 */
    int pack_boxes;           /* 1 */
    int64_t charge_block_max; /* 2^15 */
} fmk_treecode_cuda_tune;

/* What the engine counts (plan->counters, "treecode.<field>"): set_points_device calls whose
 * frame found without a wait was not the host's (a softening wider than the points), builds
 * without a wait done again (the tree did not fit), and split walks redone unsplit (their
 * stack overflowed above the split level). */
typedef struct fmk_treecode_cuda_counters {
    int64_t frame_redos, build_redos, split_redos;
} fmk_treecode_cuda_counters;

static inline const fmk_treecode_cuda_tune *fmk_bh_tune(const fmk_plan *plan)
{
    return (const fmk_treecode_cuda_tune *)plan->tune;
}

static inline fmk_treecode_cuda_counters *fmk_bh_counters(fmk_plan *plan)
{
    return (fmk_treecode_cuda_counters *)plan->counters;
}

/* ---------------------------------------------------------------------------------------- */
/* Shared sizes and types                                                                   */

constexpr int FMK_BH_BLOCK = 256;    /* threads of the simple kernels */
constexpr int FMK_BH_STATS = 7;      /* words of fmk_bh_state.d_stats and h_stats */
constexpr int FMK_BH_GROUP = 32;     /* targets per group walk (a warp) */
constexpr int FMK_BH_MAX_PARTS = 16; /* parts of a split walk */
/* The most start-list entries of a super-group (tune.super_cap at most this): a group walk
 * puts its list on its stack at once (896 slots), leaving room for the nodes it opens. */
constexpr int FMK_BH_SUPER_LIST_MAX = 640;

static inline unsigned fmk_bh_blocks(int64_t n, int b = FMK_BH_BLOCK)
{
    return (unsigned)((n + b - 1) / b);
}

/* fp32 works on mapped coordinates times 2^12 (exact): the quadrupole term's t^-7/2 reaches
 * (2^21 / theta)^7 for the deepest nodes of the frame, beyond float's range; scaled, the
 * powers of t stay within 2^-100 .. 2^70 for every distance the frame allows. */
static inline double fmk_bh_coord_scale(int real)
{
    return real == 4 ? 4096.0 : 1.0;
}

/* What the frame kernels found (pinned host memory, read after set_points' one wait): the box
 * of the finite points, the first non-finite point (-1: none; ns + j for target j), and the
 * frame it mapped the points with. */
typedef struct fmk_bh_frame_out {
    double lo[3], hi[3], center[3], width;
    long long bad;
} fmk_bh_frame_out;

/* A box of finite points and the first non-finite one (the frame kernels). */
struct fmk_bh_frame_box {
    double lo[3], hi[3];
    long long bad;
};

/* k_frame_grid's workspace: the blocks' boxes, the frame, the blocks done. */
constexpr int FMK_BH_GRID_FRAME_MAX = 1024;
struct fmk_bh_frame_grid_ws {
    fmk_bh_frame_box part[FMK_BH_GRID_FRAME_MAX];
    double frame[4];
    unsigned count;
};

/* A device buffer kept from one set_points_device to the next (grow-only). */
typedef struct fmk_bh_buf {
    void *p;
    size_t cap;
} fmk_bh_buf;

typedef struct fmk_bh_state {
    int device;
    int real;                      /* 4 or 8 */
    fmk_cuda_tree tree;            /* the sources' tree */
    fmk_cuda_tree ttree;           /* the targets' tree, when they are not the sources */
    fmk_bh_buf x;                  /* mapped points (ns + nt) * 3 doubles, during set_points */
    fmk_bh_buf bbox;               /* the bounding box's workspace */
    fmk_bh_buf src;                /* n sorted 4-vectors (x, y, z, q) */
    fmk_bh_buf trg;                /* m sorted 4-vectors; unused when self */
    fmk_bh_buf src_lo, trg_lo;     /* fp32: the coordinates' rest (k_pack_points), as src, trg */
    fmk_bh_buf links;              /* n_nodes int4 */
    fmk_bh_buf node;               /* n_nodes * 4 4-vectors */
    fmk_bh_buf box;                /* groups * 2 4-vectors */
    fmk_bh_buf charges, pot, grad; /* host evaluations */
    fmk_bh_buf part;  /* a split walk's sums per part (walk_args), parts * m * 4 doubles */
    fmk_bh_buf super; /* super-groups (super.cu) */
    int parts;        /* 1: the walk is not split */
    int32_t split_begin, split_end;
    int2 *d_groups; /* cap_groups slots, n_groups used */
    int64_t cap_groups, n_groups;
    unsigned long long *d_stats; /* FMK_BH_STATS words: charge check (2), split walk overflow
                                   * (1), the blocks of k_moments_small done (1), the group
                                   * walk's tickets (1), the walk's interaction counts (2:
                                   * P2P pairs, far terms; fmk_info); each evaluation clears
                                   * them before its walk */
    unsigned long long *h_stats; /* pinned: d_stats after the walk (read with one copy) */
    fmk_bh_frame_out *h_frame,
        *dh_frame;     /* pinned: the frame kernels' results (host, device view) */
    cudaEvent_t ev[8]; /* the build's start and end; eval's upload, moments and walk ends; a
                          cut walk's two launches' starts and ends (fmk_cuda_launch_ranges) */
    int events;
    double walk_rate; /* walks (stackless: targets) per second of a cut walk (0: none yet) */
    int64_t bytes;    /* device bytes held (fmk_bh_held) */
    double tree_time; /* seconds of the last build (FMK_PHASE_TREE) */
} fmk_bh_state;

/* The walks' arguments (walk_group.cu, walk_stackless.cu, super.cu). */
template <typename R> struct fmk_bh_walk_args {
    const int4 *links;
    const int32_t *n_children;
    const typename vec4<R>::type *node, *src, *trg; /* trg == src when self */
    const real4f *src_lo, *trg_lo; /* fp32: the coordinates' rest (k_pack_points); else NULL */
    const int32_t *trg_order;
    const int2 *groups;
    const typename vec4<R>::type *box;
    int64_t m, n_groups;
    R eps2;
    double pot_scale, grad_scale, grad_scale2;
    double *pot, *grad;
    /* The breadth-first walk split in parts (when there are too few groups to fill the GPU):
     * part p of a group handles the nodes of level split_level (nodes [split_begin,
     * split_end)) with index = p mod parts and everything below them, and of the nodes above
     * that level, those with index = p mod parts that it accepts or sums directly (every part
     * opens the same nodes there). Every interaction of the unsplit walk is made once; part p
     * writes its sums at pot + p m, grad + 3 p m (k_sum_parts adds them up). */
    int parts;
    int32_t split_begin, split_end;
    unsigned long long *overflow; /* set when a split walk's stack overflowed above the split */
    int mac;                      /* tune.mac resolved (0, 1, 2) */
    R leaf_r2;    /* f^2 of tune.leaf_theta: a leaf's squared radius in the per-target test */
    R inner_r2;   /* an inner node's, with mac = 1: 1 (its own opening radius) */
    int local;    /* tune.local: 0, or the order of the group's expansion (2, 3, 4) */
    R local_k;    /* tune.local_k resolved and scaled with theta */
    R local_a2;   /* tune.local_open squared */
    int harmonic; /* tune.local_harmonic, with local = 4 and eps2 = 0 */
    const unsigned long long *stats; /* the charge check (charge_scale, charges_bad) */
    /* The interaction counts (fmk_info): count[0] P2P pairs, count[1] far terms (nodes per
     * target, M2P and expansions alike), one atomicAdd each per group walk (per warp of the
     * stackless walk, per group for its super-groups' expansions); d_stats + 5. */
    unsigned long long *count;
    /* The breadth-first walk's warps by tickets (tune.tickets): NULL, walk w is block
     * w / WARPS's; else a zeroed counter, and the grid only as large as the GPU holds at once:
     * each warp takes walk after walk from it, so that no slot waits for the block scheduler
     * (k_walk_bfs). */
    unsigned long long *ticket;
    /* Super-groups (tune.super; k_walk_super): super = 0, the group walk starts at the root.
     * Else group walk w takes group super_order[w] (Morton order; NULL: the groups are in
     * Morton order already, group w) and belongs to super-group w / super, whose start list
     * (super_cap entries at super_list + super_cap sg, super_count[sg] of them, -1 after an
     * overflow: from the root) replaces the root, and whose expansion (FMK_BH_LOCAL4
     * coefficients at super_local, about super_centre[sg], used when its w != 0) it adds at
     * its targets. */
    int super, super_open, super_cap;
    R super_k; /* the super-group step's k (tune.super_k times local_k) */
    const int32_t *super_order;
    int32_t *super_count, *super_list;
    typename vec4<R>::type *super_centre;
    R *super_local;
    /* A second level (tune.super2): super_up = 0, none. Else parents of super_up groups
     * (S * S2), walked first (their start lists at up_list, up_count; expansions at up_local
     * about up_centre): super-group s walks from the list of parent s super / super_up
     * instead of the root when that list did not overflow, and then the group walks add the
     * parent's expansion as well. */
    int super_up, up_cap; /* up_cap: the parents' list entries (as super_cap) */
    int32_t *up_count, *up_list;
    typename vec4<R>::type *up_centre;
    R *up_local;
    /* The launch's walks (the walk cut into launches of bounded work: engine.cu's
     * walk_launches sets them): group walks [walk0, walk1) of the n_groups * parts (the
     * stackless walk: targets of the m); with tickets, the counter starts at walk0. (Last in
     * the struct: placed before eps2 they cost the walk registers, and spills.) */
    int64_t walk0, walk1;
};

/* ---------------------------------------------------------------------------------------- */
/* Host functions, by file                                                                  */

/* engine.cu: the state's buffers. */
int fmk_bh_real(const fmk_plan *plan);          /* 4 (fp32) or 8 */
int64_t fmk_bh_leaf_size(const fmk_plan *plan); /* the sources' leaf size */
int64_t fmk_bh_held(const fmk_bh_state *s);     /* device bytes held */
/* *b holds at least bytes (its contents are not kept when it grows). */
fmk_status fmk_bh_need(fmk_plan *plan, fmk_bh_state *s, fmk_bh_buf *b, size_t bytes,
                       const char *what);
fmk_status fmk_bh_ok(fmk_plan *plan, cudaError_t err, const char *what);

/* frame.cu: the points' frame on the device, their mapping and the trees (fmk_bh_build);
 * fills plan's frame, n_sources, n_targets, self, has_points. */
fmk_status fmk_bh_points_device(fmk_plan *plan, fmk_bh_state *s, int64_t ns, const double *d_s,
                                int64_t nt, const double *d_t);

/* build.cu: everything geometric from mapped points on the device (d_xs, and d_xt unless
 * self): the trees, groups, packed points, links, group boxes and the walk's split; with one
 * host wait (async: trees of at most tune.tree.small_max points built without one before it;
 * such a tree built again with a wait when it did not fit). */
fmk_status fmk_bh_build(fmk_plan *plan, fmk_bh_state *s, int64_t ns, const double *d_xs, int64_t nt,
                        const double *d_xt, int async);
/* build.cu: the resolution guard on the built trees of the mapped points d_xs (and d_xt unless
 * self), once the plan's frame is the points' (tree/resolution.h): FMK_OK or
 * FMK_ERR_ACCURACY with its message (or a CUDA failure). */
fmk_status fmk_bh_check_resolution(fmk_plan *plan, const fmk_bh_state *s, int64_t ns,
                                   const double *d_xs, int64_t nt, const double *d_xt);
/* The most bytes a split walk's part sums take for m targets. */
int64_t fmk_bh_split_bytes_bound(const fmk_plan *plan, int64_t m);

/* moments.cu: the charge check of n charges (queued; read by the walks on the device, by the
 * host after the evaluation's wait), unless fmk_bh_prep_small (then the moments' one block
 * checks them); then the charges' packing and every node's moments. */
int fmk_bh_prep_small(const fmk_plan *plan, const fmk_bh_state *s);
cudaError_t fmk_cuda_bh_charges(const fmk_plan *plan, const fmk_bh_state *s, const double *d_q);
cudaError_t fmk_cuda_bh_moments(const fmk_plan *plan, fmk_bh_state *s, const double *d_q);

/* walk_group.cu: the group walk (groups of 32; a.parts > 1: split, into the part sums) for
 * expansion order `order`; mode 0: separate targets, 1: targets are the sources, 2: the
 * gradient alone (a.pot NULL; targets = sources take their self pair in: its gradient term is
 * exactly 0, and fmk_info's count then holds it); the super-groups' walks first when a.super.
 * tickets: tune.tickets. */
cudaError_t fmk_cuda_bh_walk_group(const fmk_bh_walk_args<float> &a, int order, int mode,
                                   int tickets);
cudaError_t fmk_cuda_bh_walk_group(const fmk_bh_walk_args<double> &a, int order, int mode,
                                   int tickets);
/* split.cu: the parts of a split walk added up in part order into pot, grad (the same sums
 * each run). */
cudaError_t fmk_cuda_bh_sum_parts(int64_t m, int parts, const double *part_pot,
                                  const double *part_grad, const unsigned long long *stats,
                                  double *pot, double *grad);
/* Diagnostic builds (-DFMK_BH_COUNT, -DFMK_BH_TRACE): the walks' counters cleared before the
 * walks, printed (stderr) or appended to the trace file after them. */
void fmk_bh_walk_diag_begin(void);
void fmk_bh_walk_diag_end(void);

/* walk_stackless.cu: the paper's walk, one thread per target. */
cudaError_t fmk_cuda_bh_walk_stackless(const fmk_bh_walk_args<float> &a, int order, int self);
cudaError_t fmk_cuda_bh_walk_stackless(const fmk_bh_walk_args<double> &a, int order, int self);

/* super.cu: whether the walk of m targets uses super-groups (tune, an unsplit walk and a deep
 * tree also needed), the bytes of their buffer for g groups, and their setup for the walk a
 * (the buffer, the groups in Morton order queued, a's fields). */
int fmk_bh_super_wanted(const fmk_plan *plan, int64_t m);
int fmk_bh_super_deep(const fmk_plan *plan, const fmk_bh_state *s);
int64_t fmk_bh_super_bytes(const fmk_plan *plan, int64_t g, int64_t m, int real);
fmk_status fmk_bh_super_setup(fmk_plan *plan, fmk_bh_state *s, fmk_bh_walk_args<float> *a);
fmk_status fmk_bh_super_setup(fmk_plan *plan, fmk_bh_state *s, fmk_bh_walk_args<double> *a);
/* The super-groups' walks of a (the parents' first with a second level), queued; loc: the
 * group walk's step (4, or 5 for the harmonic M2L). */
cudaError_t fmk_cuda_bh_super_walks(const fmk_bh_walk_args<float> &a, int order, int loc);
cudaError_t fmk_cuda_bh_super_walks(const fmk_bh_walk_args<double> &a, int order, int loc);
void fmk_bh_super_diag_begin(void);
void fmk_bh_super_diag_end(int super, int super_up);

#endif /* FMMKIT_TREECODE_BH_CUDA_H */
