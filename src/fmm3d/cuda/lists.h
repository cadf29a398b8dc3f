/*
 * lists.h -- the geometry of the GPU 3D FMM (fmm3d_cuda.h), built on the GPU from the GPU
 * octree (tree3d.cu) with no host round trip but a few reads of sizes (lists.cu: the build's
 * steps; its kernels in lists_boxes.cu, lists_uvwx.cu and lists_work.cu).
 *
 * From the device tree: the sources and targets in key order (a CUB scan of the "is a source"
 * flags of the sorted points), per node its cube (from its first key and level, as
 * fmk_tree3d_node_cube), octant and source/target ranges; the neighbour sets N(b) level by level
 * and the U, V, W, X lists of fmm3d.h (a thread per node, the rules of fmm3d_lists.c: a count
 * pass, CUB scans, a fill pass), so the lists are the host's entry for entry; the work lists
 * (nodes that have work in a pass) by scan and compaction; and the tiles of the M2M and L2L
 * kernel (the same tiles the host code built: per level the parents with sources, per level and
 * octant the boxes with targets, TB to a tile, a CUB radix sort by group); and the M2L's
 * columns, the nodes from level 2 down grouped by octant (a CUB radix sort), with each V row
 * sorted by its source's octant, then by the direction's place in the M2L order.
 *
 * Near-field substitutes (near_max >= 0): a W entry with at most near_max sources goes to the
 * leaf's U list (after its U entries) and the X entries of a box with at most near_max targets go
 * to its Y list (P2P into the box's targets instead of P2L). near_max < 0 keeps the lists of
 * fmm3d.h as they are.
 *
 * When the sources are the targets, the U lists are also split into leaf pairs, each unordered
 * pair of touching leaves once, and rest rows (p2p.cu evaluates a pair in both directions).
 */
#ifndef FMMKIT_CUDA_FMM3D_LISTS_H
#define FMMKIT_CUDA_FMM3D_LISTS_H

#include <stdint.h>

#include "fmm3d/fmm3d.h"
#include "tree/cuda/tree3d_cuda.h"

/* Arrays one geometry build allocates, at most (about 50). */
#define FMK_CUDA_FMM3D_BLOCKS 64

typedef struct fmk_cuda_fmm3d_geo {
    int64_t n_nodes;
    /* points in key order; d_trg == d_src and d_trg_order == d_src_order when self */
    real4d *d_src, *d_trg;              /* (x, y, z, 0) */
    int32_t *d_src_order, *d_trg_order; /* key position -> caller index */
    /* nodes */
    real4d *d_cube; /* centre, side */
    int8_t *d_oct;  /* octant in the parent (bit 2 x, 1 y, 0 z) */
    int8_t *d_level;
    int32_t *d_sb, *d_sn, *d_tb, *d_tn; /* first source and count, first target and count */
    /* lists, compressed rows over nodes (begins n_nodes + 1) */
    int32_t *d_u_begin, *d_u, *d_w_begin, *d_w, *d_x_begin, *d_x, *d_y_begin, *d_y;
    int32_t *d_v_begin, *d_v;
    /* sources = targets only (else NULL, 0): the U entries between two distinct touching leaves
     * once each, as pairs (b, a) with b < a (P2P both ways), and per node the rest of its U row
     * (itself and the W entries done as P2P), compressed rows like d_u */
    int32_t *d_pairs, *d_ur_begin, *d_ur;
    int64_t n_pairs, n_ur;
    int16_t *d_v_slot; /* direction slot of each V entry; rows sorted by the
                                     * source's octant, then slot */
    int64_t n_u, n_v, n_w, n_x, n_y;
    /* the M2L's degree per direction (FMK_FMM3D_DIR; set by the caller before a build and kept
     * by it, all zero: the M2L order by class alone) */
    int8_t m2l_deg[FMK_FMM3D_NDIR];
    /* V directions that occur, in the M2L order (fmk_cuda_fmm3d_m2l_order of m2l_deg) */
    int n_slots;
    int32_t dir_of_slot[FMK_FMM3D_NDIR];
    /* the M2L's source columns: the nodes from level 2 down grouped by octant, the group of
     * octant o columns [m2l_first[o], m2l_first[o + 1]) (d_m2l_box: column -> node, in increasing
     * node order within a group; d_m2l_col: node -> its column's place within its group) */
    int32_t *d_m2l_box, *d_m2l_col;
    int64_t m2l_first[9];
    /* work lists: leaves with sources, leaves with targets, boxes with X, Y, V entries */
    int32_t *d_leaves_src, *d_leaves_trg, *d_xnodes, *d_ynodes, *d_vnodes;
    int64_t n_leaves_src, n_leaves_trg, n_xnodes, n_ynodes, n_vnodes;
    /* tiles of the translation kernel (translate.cu's k_translate): M2M tiles of level L are
     * [m2m_first[L], m2m_first[L + 1]), L2L tiles likewise */
    int tb;
    int64_t n_tiles, n_entries;
    int32_t *d_tile_nodes, *d_tile_begin, *d_tile_slot, *d_tile_src;
    int64_t m2m_first[FMK_TREE_MAX_LEVEL + 2], l2l_first[FMK_TREE_MAX_LEVEL + 2];
    int64_t bytes; /* device bytes held */
    /* Device memory kept from build to build (grow-only): the i-th array a build allocates
     * (above, or the build's scratch) lives in block i, CUB's workspace in temp; so a plan
     * given new points of a similar size allocates nothing here. The first build takes one
     * arena of fmk_cuda_fmm3d_geo_bytes and cuts the blocks and temp from it while it lasts
     * (one cudaMalloc instead of ~50); a block that outgrows its place is allocated apart. */
    void *block[FMK_CUDA_FMM3D_BLOCKS];
    size_t block_bytes[FMK_CUDA_FMM3D_BLOCKS];
    unsigned char in_arena[FMK_CUDA_FMM3D_BLOCKS + 1]; /* block i (temp: the last) is the arena's */
    void *temp;
    size_t temp_bytes;
    void *arena;
    size_t arena_bytes, arena_used;
    int arena_lent;       /* the arena is the caller's (set before the first build:
                                     * arena, arena_bytes; fmk_cuda_fmm3d_geo_free leaves it) */
    double stage_time[6]; /* seconds: points, boxes + neighbours, lists, directions,
                                     * work lists, tiles (for the benchmark: GPU times between
                                     * events on the default stream, host waits included) */
    cudaEvent_t stage_ev[7];
    int n_stage_ev;
} fmk_cuda_fmm3d_geo;

#ifdef __cplusplus
extern "C" {
#endif

/* Builds *g from the device tree t of the np mapped points d_x (sources, then targets unless
 * self: ns sources), in the device memory *g holds from a previous build (zeroed, or a previous
 * build's: everything else in it is replaced). Tiles of tb boxes; pair_cap: the points a pass of
 * the P2P of leaf pairs holds (self), which orients the pairs. extra: the plan's device bytes,
 * for messages. On failure *g holds nothing. */
fmk_status fmk_cuda_fmm3d_geometry(fmk_plan *plan, const fmk_cuda_tree *t, const double *d_x,
                                   int64_t ns, int self, int64_t near_max, int tb, int pair_cap,
                                   long long extra, fmk_cuda_fmm3d_geo *g);

/* The order of the V directions in the M2L's stacked matrices (lists_uvwx.cu): by degree
 * deg[d] (largest first; deg NULL: all equal), then by class, then by d. rank[d] the place of
 * FMK_FMM3D_DIR d (-1 for the near ones), dir_of_rank its inverse. */
void fmk_cuda_fmm3d_m2l_order(const int8_t *deg, int16_t rank[FMK_FMM3D_NDIR],
                              int16_t dir_of_rank[512]);

/* The kernels of the build, each launched on the default stream with the configuration the
 * build has always used; each returns cudaGetLastError(). Arrays are device arrays. */

/* lists_boxes.cu: points in key order, boxes, neighbour sets, the M2L's columns. */
/* flag[q] = 1 when sorted point q (order: key position -> caller index) is a source, for
 * q < np; flag[np] = 0. */
cudaError_t fmk_cuda_fmm3d_src_flags(int64_t np, int64_t ns, int self, const int32_t *order,
                                     int32_t *flag);
/* The sources and targets in key order (before[q]: sources among sorted points [0, q)). */
cudaError_t fmk_cuda_fmm3d_split(int64_t np, int64_t ns, int self, const int32_t *order,
                                 const int32_t *before, const double *x, real4d *src,
                                 int32_t *src_order, real4d *trg, int32_t *trg_order);
/* Per node of k: first source and count, first target and count. */
cudaError_t fmk_cuda_fmm3d_nodes(int64_t k, int self, const int32_t *begin, const int32_t *end,
                                 const int32_t *before, int32_t *sb, int32_t *sn, int32_t *tb,
                                 int32_t *tn);
/* Level by level of t: the cubes and octants of the nodes, then their neighbour sets (nbr:
 * NBR_MAX a node, n_nbr their counts). */
cudaError_t fmk_cuda_fmm3d_boxes(const fmk_cuda_tree *t, real4d *cube, int8_t *oct, int32_t *nbr,
                                 int8_t *n_nbr);
/* out[i] = first + i for i < n. */
cudaError_t fmk_cuda_fmm3d_iota(int64_t n, int32_t first, int32_t *out);
/* The M2L's columns from the n octant-sorted keys and their nodes box: col (node -> place in its
 * group) and ofirst (the groups' first columns, 9 entries). */
cudaError_t fmk_cuda_fmm3d_m2l_columns(int64_t n, const uint8_t *key, const int32_t *box,
                                       int32_t *col, int32_t *ofirst);

/* lists_uvwx.cu: the U, V, W, X (and Y) lists and the V directions. Count pass (fill 0):
 * cnt[j * (k + 1) + b] for j = 0 U + small W, 1 V, 2 W, 3 X, 4 Y, 5 U alone (row ends zeroed,
 * for the scans). Fill pass (fill 1): the entries at the scanned begins (the caller sorts each
 * V row by direction). */
typedef struct fmk_cuda_fmm3d_lists_args {
    int64_t k, near_max;
    const int32_t *parent, *more, *nch, *sn, *tn, *nbr;
    const int8_t *n_nbr;
    const real4d *cube;
    int32_t *cnt;
    const int32_t *ub, *vb, *wb, *xb, *yb;
    int32_t *u, *v, *w, *x, *y;
    int16_t *vd;
    const int8_t *oct;
    const int16_t *rank; /* FMK_FMM3D_DIR -> its place in fmk_fmm3d_m2l_order */
} fmk_cuda_fmm3d_lists_args;
cudaError_t fmk_cuda_fmm3d_uvwx(fmk_cuda_fmm3d_lists_args a, int fill);
/* count[r] += the V entries of the n in vd (octant * RANK_MAX + place) at place r. */
cudaError_t fmk_cuda_fmm3d_dir_count(int64_t n, const int16_t *vd, unsigned *count);
/* vd[e] = slot_of[its place], for the n entries. */
cudaError_t fmk_cuda_fmm3d_dir_to_slot(int64_t n, const int16_t *slot_of, int16_t *vd);

/* lists_work.cu: work lists, the U lists split into leaf pairs (self), the translation tiles. */
/* Work-list flags of kind 0 leaves with sources, 1 leaves with targets, 2 X, 3 Y, 4 V entries
 * (begin: that list's row begins), k + 1 of them (flag[k] = 0). */
cudaError_t fmk_cuda_fmm3d_work_flags(int64_t k, int kind, const int32_t *more, const int32_t *sn,
                                      const int32_t *tn, const int32_t *begin, int32_t *flag);
/* out[pos[b]] = b for the b < k flagged. */
cudaError_t fmk_cuda_fmm3d_compact(int64_t k, const int32_t *flag, const int32_t *pos,
                                   int32_t *out);
/* The symmetric split of the U lists (ub, u) into leaf pairs and rest rows for passes of cap
 * points: count pass (fill 0; pairs in cnt[b], rest in cnt[k + 1 + b]), fill pass (fill 1; at the
 * scanned begins pb, rb). */
cudaError_t fmk_cuda_fmm3d_sym_split(int64_t k, int cap, const int32_t *sn, const int32_t *ub,
                                     const int32_t *u, const real4d *cube, int32_t *cnt,
                                     const int32_t *pb, const int32_t *rb, int32_t *pair,
                                     int32_t *rest, int fill);
/* Tile items: a parent with sources (M2M) and a box with targets at level 3 or deeper (L2L); pos
 * NULL: their counts into cnt (k + 1), else (group key, node) pairs at pos. */
cudaError_t fmk_cuda_fmm3d_tile_items(int64_t k, int levels, const int32_t *more, const int32_t *sn,
                                      const int32_t *tn, const int8_t *level, const int8_t *oct,
                                      const int32_t *pos, int32_t *cnt, uint32_t *keys,
                                      int32_t *nodes);
/* count[g] += the items of the n keys in group g. */
cudaError_t fmk_cuda_fmm3d_group_count(int64_t n, const uint32_t *keys, unsigned *count);
/* The n sorted items' nodes into their tiles of tbw (tab: the groups' first tiles, then first
 * items). */
cudaError_t fmk_cuda_fmm3d_tile_nodes(int64_t n, int tbw, const uint32_t *keys,
                                      const int32_t *nodes, const int32_t *tab,
                                      int32_t *tile_nodes);
/* A tile's entries (slots and sources), count pass (fill 0: into cnt, n_tiles + 1) or fill pass
 * (fill 1: at tile_begin); tiles before m2m_tiles are M2M's. */
cudaError_t fmk_cuda_fmm3d_tile_entries(int64_t n_tiles, int64_t m2m_tiles, int tbw,
                                        const int32_t *tile_nodes, const int32_t *more,
                                        const int32_t *nch, const int32_t *sn,
                                        const int32_t *parent, const int8_t *oct, int32_t *cnt,
                                        const int32_t *tile_begin, int32_t *slot, int32_t *src,
                                        int fill);

/* Frees what *g holds and zeroes it (safe on a zeroed one). */
void fmk_cuda_fmm3d_geo_free(fmk_cuda_fmm3d_geo *g);

/* Device bytes of the geometry and of the build's scratch for np points and n_nodes nodes
 * (a planning estimate: a uniform tree's list lengths). */
int64_t fmk_cuda_fmm3d_geo_bytes(int64_t np, int64_t ns, int self, int64_t n_nodes, int tb);
/* The first build's arena for a tree of n_nodes nodes: fmk_cuda_fmm3d_geo_bytes, CUB's
 * workspace and the blocks' alignment (what a caller lends it; blocks that do not fit are
 * allocated apart). */
int64_t fmk_cuda_fmm3d_geo_arena_bytes(int64_t np, int64_t ns, int self, int64_t n_nodes, int tb);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_CUDA_FMM3D_LISTS_H */
