/*
 * tree3d.cu -- the octree of tree3d.h built on the GPU (tree3d_cuda.h): its arrays (grown as
 * needed, or cut from one allocation at a first build), and the build's phases in order:
 * Morton keys and their sort (keys_sort.cu), the nodes (build_small.cu, build_one_pass.cu,
 * build_levels.cu), redone in larger arrays when they did not fit or with a full sort when the
 * split sort's runs were out of order; the tree's download for comparisons.
 */
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_scan.cuh>

#include "tree/cuda/tree3d_internal.h"

namespace {

/* p lies in t's one allocation of a first build (fmk_cuda_tree3d_build) */
int in_arena(const fmk_cuda_tree *t, const void *p)
{
    return p && t->d_arena && (const char *)p >= (const char *)t->d_arena &&
           (const char *)p < (const char *)t->d_arena + t->arena_bytes;
}

/* Frees *p and allocates bytes for it (the old contents are not kept). */
fmk_status regrow(fmk_plan *plan, fmk_cuda_tree *t, void **p, size_t old_bytes, size_t bytes,
                  const char *what, long long total)
{
    if (!in_arena(t, *p)) /* (the arena's bytes stay held) */
        free_ptr(*p), t->bytes -= (int64_t)old_bytes;
    *p = NULL;
    fmk_status st = fmk_cuda_alloc(plan, p, bytes, what, total);
    if (st == FMK_OK)
        t->bytes += (int64_t)bytes;
    return st;
}

/* Node arrays (and the level workspace) of t for at least need nodes; contents not kept. */
fmk_status grow_nodes(fmk_plan *plan, fmk_cuda_tree *t, int64_t need, long long extra)
{
    if (need <= t->cap_nodes)
        return FMK_OK;
    const int64_t old = t->cap_nodes, cap = need;
    void **arr[9] = {(void **)&t->d_begin,  (void **)&t->d_end,        (void **)&t->d_more,
                     (void **)&t->d_next,   (void **)&t->d_n_children, (void **)&t->d_parent,
                     (void **)&t->d_counts, (void **)&t->d_offset,     (void **)&t->d_level};
    const long long total = extra + t->bytes + (long long)(cap - old) * FMK_CUDA_TREE_NODE_BYTES;
    fmk_status st = FMK_OK;
    t->cap_nodes = 0;
    for (int k = 0; k < 9 && st == FMK_OK; k++) {
        const size_t w = k < 8 ? 4 : 1, extra_slot = k == 6 || k == 7 ? 1 : 0;
        st = regrow(plan, t, arr[k], (size_t)(old > 0 ? old + (int64_t)extra_slot : 0) * w,
                    (size_t)(cap + (int64_t)extra_slot) * w, "the tree's nodes", total);
    }
    if (st == FMK_OK)
        t->cap_nodes = cap;
    return st;
}

/* Point arrays (keys, order and their sort twins) for n points; contents not kept. */
fmk_status grow_points(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, long long extra)
{
    if (n <= t->cap_points && t->d_keys)
        return FMK_OK;
    const int64_t old = t->cap_points, cap = n > 0 ? n : 1;
    const long long total = extra + t->bytes + (long long)(cap - old) * 24;
    void **arr[4] = {(void **)&t->d_keys, (void **)&t->d_keys_alt, (void **)&t->d_order,
                     (void **)&t->d_order_alt};
    fmk_status st = FMK_OK;
    t->cap_points = 0;
    for (int k = 0; k < 4 && st == FMK_OK; k++) {
        const size_t w = k < 2 ? 8 : 4;
        st = regrow(plan, t, arr[k], (size_t)old * w, (size_t)cap * w,
                    k < 2 ? "the Morton keys" : "the sort order", total);
    }
    if (st == FMK_OK)
        t->cap_points = cap;
    return st;
}

/* CUB's temporary storage in bytes for a sort of n pairs and scans of up to cap_nodes + 1 items. */
cudaError_t temp_need(int64_t n, int64_t cap_nodes, size_t *need)
{
    size_t sort_bytes = 0, scan_bytes = 0, scan2 = 0;
    cudaError_t err = fmk_cuda_tree_sort_bytes(n, &sort_bytes);
    if (err == cudaSuccess)
        err = cub::DeviceScan::InclusiveSum(NULL, scan_bytes, (int32_t *)NULL, (int32_t *)NULL,
                                            (int)(cap_nodes + 1));
    if (err == cudaSuccess)
        err = cub::DeviceScan::ExclusiveSum(NULL, scan2, (int32_t *)NULL, (int32_t *)NULL,
                                            (int)(cap_nodes + 1));
    *need = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    *need = *need > scan2 ? *need : scan2;
    return err;
}

/* CUB's temporary storage for a sort of n pairs and scans of up to cap_nodes + 1 items. */
fmk_status grow_temp(fmk_plan *plan, fmk_cuda_tree *t, int64_t n, long long extra)
{
    size_t need = 0;
    fmk_status st = check(plan, temp_need(n, t->cap_nodes, &need), "CUB (workspace query)");
    if (st != FMK_OK || need <= t->temp_bytes)
        return st;
    const size_t old = t->temp_bytes;
    t->temp_bytes = 0;
    st = regrow(plan, t, &t->d_temp, old, need, "the sort workspace",
                extra + t->bytes + (long long)(need - old));
    if (st == FMK_OK)
        t->temp_bytes = need;
    return st;
}

/* The level boundaries on the device and their host copy (once; pin_lb pins it where needed). */
fmk_status make_lb(fmk_plan *plan, fmk_cuda_tree *t, long long extra)
{
    if (t->d_lb)
        return FMK_OK;
    fmk_status st = fmk_cuda_alloc(plan, (void **)&t->d_lb, FMK_CUDA_TREE_LB * sizeof(int32_t),
                                   "the tree's level table", extra + t->bytes);
    if (st == FMK_OK)
        t->bytes += FMK_CUDA_TREE_LB * sizeof(int32_t);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, (void **)&t->d_cells, (size_t)(CELLS + 1) * sizeof(int32_t),
                            "the tree's cell table", extra + t->bytes + (CELLS + 1) * 4);
    if (st == FMK_OK)
        t->bytes += (CELLS + 1) * sizeof(int32_t);
    if (st == FMK_OK) /* the sort's flag is read after builds that do not write it (n = 0) */
        st = check(plan, cudaMemset(t->d_lb, 0, FMK_CUDA_TREE_LB * sizeof(int32_t)),
                   "cudaMemset (the tree's level table)");
    if (st == FMK_OK && !(t->h_lb = (int32_t *)calloc(FMK_CUDA_TREE_LB, sizeof(int32_t))))
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the tree's level table");
    return st;
}

/* Node slots of a tree's first build of n points. */
int64_t first_nodes(int64_t n, int leaf_size)
{
    const int64_t ls = leaf_size > 0 ? leaf_size : 1;
    return 3 * n / ls + 64;
}

/* The arrays of a build of n points (kept from build to build when large enough); with_temp:
 * and CUB's workspace (the one-block paths of fmk_cuda_tree3d_build_async use none, and its
 * size queries cost host time at every build). */
fmk_status prepare(fmk_plan *plan, int64_t n, int leaf_size, long long extra, fmk_cuda_tree *t,
                   int with_temp)
{
    t->n_points = n;
    t->leaf_size = leaf_size;
    t->n_nodes = 0;
    t->levels = 0;
    t->pending = 0;
    t->groups_made = 0;
    /* Nodes: a uniform cube fills its leaves from 1/8 to 1 of leaf_size (levels of 8x), a
     * tree of about 1.14 n / (leaf_size / 2) nodes in the middle: start at 3 n / leaf_size. */
    const int64_t cap = first_nodes(n, leaf_size);
    fmk_status st = make_lb(plan, t, extra);
    if (st == FMK_OK)
        st = grow_points(plan, t, n, extra);
    if (st == FMK_OK)
        st = grow_nodes(plan, t, cap, extra);
    if (st == FMK_OK && with_temp)
        st = grow_temp(plan, t, n, extra);
    return st;
}

/* The first build of an empty tree: the arrays prepare() makes (the level and cell tables,
 * keys and order with their sort twins, the node arrays, CUB's workspace), at the sizes it
 * asks for, cut from one allocation: a first call of a fresh plan pays for every
 * cudaMalloc. prepare() then finds them large enough. first_layout: their bytes
 * (off[16], 256-byte aligned; *temp: CUB's part), the total returned. */
const int FIRST_ARRAYS = 16;
int64_t first_layout(int64_t n, int leaf_size, size_t off[FIRST_ARRAYS], size_t *temp,
                     cudaError_t *err)
{
    const int64_t pts = n > 0 ? n : 1, nodes = first_nodes(n, leaf_size);
    *err = temp_need(n, nodes, temp);
    /* lb, cells, keys, keys_alt, order, order_alt, begin .. parent (6), counts, offset, level, temp */
    const size_t bytes[FIRST_ARRAYS] = {
        FMK_CUDA_TREE_LB * 4,    (size_t)(CELLS + 1) * 4, 8 * (size_t)pts,   8 * (size_t)pts,
        4 * (size_t)pts,         4 * (size_t)pts,         4 * (size_t)nodes, 4 * (size_t)nodes,
        4 * (size_t)nodes,       4 * (size_t)nodes,       4 * (size_t)nodes, 4 * (size_t)nodes,
        4 * (size_t)(nodes + 1), 4 * (size_t)(nodes + 1), (size_t)nodes,     *temp};
    size_t total = 0;
    for (int k = 0; k < FIRST_ARRAYS; k++)
        off[k] = total, total += (bytes[k] + 255) / 256 * 256;
    return (int64_t)total;
}

fmk_status alloc_once(fmk_plan *plan, int64_t n, int leaf_size, long long extra, fmk_cuda_tree *t)
{
    size_t off[FIRST_ARRAYS], temp = 0;
    cudaError_t err;
    const size_t total = (size_t)first_layout(n, leaf_size, off, &temp, &err);
    fmk_status st = check(plan, err, "CUB (workspace query)");
    if (st != FMK_OK)
        return st;
    if (!t->d_arena || !t->arena_lent || t->arena_bytes < total) { /* none lent, or too small */
        t->d_arena = NULL, t->arena_lent = 0;
        if ((st = fmk_cuda_alloc(plan, &t->d_arena, total, "the tree", extra + (long long)total)) !=
            FMK_OK)
            return st;
        t->arena_bytes = total, t->bytes = (int64_t)total;
    }
    char *a = (char *)t->d_arena;
    void **arr[FIRST_ARRAYS] = {(void **)&t->d_lb,         (void **)&t->d_cells,
                                (void **)&t->d_keys,       (void **)&t->d_keys_alt,
                                (void **)&t->d_order,      (void **)&t->d_order_alt,
                                (void **)&t->d_begin,      (void **)&t->d_end,
                                (void **)&t->d_more,       (void **)&t->d_next,
                                (void **)&t->d_n_children, (void **)&t->d_parent,
                                (void **)&t->d_counts,     (void **)&t->d_offset,
                                (void **)&t->d_level,      &t->d_temp};
    for (int k = 0; k < FIRST_ARRAYS; k++)
        *arr[k] = a + off[k];
    t->cap_points = n > 0 ? n : 1, t->cap_nodes = first_nodes(n, leaf_size), t->temp_bytes = temp;
    /* the rest of make_lb: the sort's flag is read after builds that do not write it (n = 0) */
    st = check(plan, cudaMemsetAsync(t->d_lb, 0, FMK_CUDA_TREE_LB * sizeof(int32_t)),
               "cudaMemset (the tree's level table)");
    if (st == FMK_OK && !(t->h_lb = (int32_t *)calloc(FMK_CUDA_TREE_LB, sizeof(int32_t))))
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the tree's level table");
    return st;
}

} // namespace

/* The host copy of the level table pinned and mapped, for the kernels that write it there
 * (the build without host waits, the small trees' groups) and the group count's asynchronous
 * copy. Only the treecode needs it: the 3D FMM's build (with waits) reads the table with
 * cudaMemcpy, and a pinned allocation costs most of the time of a fresh FMM plan's first tree
 * build. */
fmk_status fmk_cuda_tree_pin_lb(fmk_plan *plan, fmk_cuda_tree *t)
{
    if (t->dh_lb)
        return FMK_OK;
    int32_t *h = NULL;
    fmk_status st = fmk_cuda_alloc_host(plan, (void **)&h, FMK_CUDA_TREE_LB * sizeof(int32_t),
                                        "the tree's level table");
    if (st != FMK_OK)
        return st;
    int32_t *dh = NULL; /* where the kernels write it (the same address with unified addressing) */
    st = check(plan, cudaHostGetDevicePointer((void **)&dh, h, 0),
               "cudaHostGetDevicePointer (the tree's level table)");
    if (st != FMK_OK) {
        if (cudaFreeHost(h) != cudaSuccess)
            (void)cudaGetLastError();
        return st;
    }
    memcpy(h, t->h_lb, FMK_CUDA_TREE_LB * sizeof(int32_t));
    free(t->h_lb);
    t->h_lb = h, t->dh_lb = dh;
    return FMK_OK;
}

extern "C" int64_t fmk_cuda_tree3d_node_bound(int64_t n, int64_t leaf_size)
{
    if (n <= 0)
        return 1;
    const int64_t splits_max = n / (leaf_size + 1);
    int64_t nodes = 1, width = 1, splits = splits_max < 1 ? 0 : 1; /* level 0 */
    for (int L = 1; L <= FMK_TREE_MAX_LEVEL && splits > 0; L++) {
        int64_t w = width * 8;
        w = w < n ? w : n;
        w = w < 8 * splits ? w : 8 * splits;
        nodes += w;
        width = w;
        splits = w < splits_max ? w : splits_max;
    }
    return nodes;
}

extern "C" int64_t fmk_cuda_tree3d_build_bytes(int64_t n)
{
    size_t sort_bytes = 0;
    if (fmk_cuda_tree_sort_bytes(n, &sort_bytes) != cudaSuccess)
        (void)cudaGetLastError(), sort_bytes = (size_t)n * 4 + (1 << 20);
    /* keys and indices twice (the sort's buffers) and the sort's workspace, all kept; the
     * level table and the cell table */
    return 2 * n * (8 + 4) + (int64_t)sort_bytes + FMK_CUDA_TREE_LB * 4 + (CELLS + 1) * 4;
}

extern "C" void fmk_cuda_tree3d_free(fmk_cuda_tree *t)
{
    void *p[] = {t->d_keys,       t->d_order,  t->d_begin, t->d_end,      t->d_more,      t->d_next,
                 t->d_n_children, t->d_parent, t->d_level, t->d_keys_alt, t->d_order_alt, t->d_temp,
                 t->d_counts,     t->d_offset, t->d_lb,    t->d_cells};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        if (!in_arena(t, p[k]))
            free_ptr(p[k]);
    if (!t->arena_lent)
        free_ptr(t->d_arena);
    if (!t->dh_lb)
        free(t->h_lb);
    else if (cudaFreeHost(t->h_lb) != cudaSuccess)
        (void)cudaGetLastError();
    const fmk_cuda_tree_tune tune = t->tune; /* the knobs stay with the tree */
    memset(t, 0, sizeof *t);
    t->tune = tune;
}

extern "C" int64_t fmk_cuda_tree3d_first_bytes(int64_t n, int leaf_size)
{
    size_t off[FIRST_ARRAYS], temp = 0;
    cudaError_t err;
    const int64_t total = first_layout(n, leaf_size, off, &temp, &err);
    return err == cudaSuccess ? total : total + (1 << 20); /* (a query that failed: a margin) */
}

extern "C" fmk_status fmk_cuda_tree3d_build(fmk_plan *plan, int64_t n, const double *d_x,
                                            int leaf_size, long long extra, fmk_cuda_tree *t)
{
    fmk_status st =
        t->d_lb || t->d_keys || t->d_begin ? FMK_OK : alloc_once(plan, n, leaf_size, extra, t);
    /* (on failure the tree is freed below: its own arena with it, a lent one left to the caller) */
    if (st == FMK_OK)
        st = prepare(plan, n, leaf_size, extra, t, 1);
    int64_t cap = t->cap_nodes;
    int split = n > t->tune.split_sort_min;
    if (st == FMK_OK)
        st = fmk_cuda_tree_sort(plan, t, n, d_x, split);
    for (int tries = 0; st == FMK_OK; tries++) {
        int overflow = 0;
        st = fmk_cuda_tree_build_levels(plan, t, &overflow);
        if (st == FMK_OK && split && t->h_lb[FMK_CUDA_TREE_LB_SORT]) {
            /* a run of equal top bits too long for one block: all 63 bits, and again */
            split = 0;
            st = fmk_cuda_tree_sort(plan, t, n, d_x, 0);
            continue;
        }
        if (st == FMK_OK && fmk_cuda_stop(plan)) /* the levels were read: an interrupt check */
            st = fmk_interrupt_status(plan);
        if (st != FMK_OK || !overflow)
            break;
        /* the node arrays were too small: larger ones, and the scan's workspace with them */
        cap = t->cap_nodes * 2;
        st = grow_nodes(plan, t, cap, extra);
        if (st == FMK_OK)
            st = grow_temp(plan, t, n, extra);
    }
    if (st != FMK_OK)
        fmk_cuda_tree3d_free(t);
    return st;
}

namespace {

/* The nodes [a, b) become leaves (fmk_cuda_tree3d_truncate). */
__global__ void k_make_leaves(int64_t a, int64_t b, int32_t *__restrict__ more,
                              int32_t *__restrict__ n_children)
{
    for (int64_t i = a + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < b;
         i += (int64_t)gridDim.x * blockDim.x)
        more[i] = -1, n_children[i] = 0;
}

} // namespace

extern "C" fmk_status fmk_cuda_tree3d_truncate(fmk_plan *plan, fmk_cuda_tree *t, int max_level)
{
    if (max_level < 0 || t->levels - 1 <= max_level)
        return FMK_OK;
    const int64_t a = t->level_begin[max_level], n = t->level_begin[max_level + 1];
    const int64_t blocks = (n - a + 255) / 256;
    k_make_leaves<<<(unsigned)(blocks < 1024 ? blocks : 1024), 256>>>(a, n, t->d_more,
                                                                      t->d_n_children);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the tree's truncation kernel");
    for (int L = max_level + 2; L <= FMK_TREE_MAX_LEVEL + 1; L++)
        t->level_begin[L] = n;
    t->n_nodes = n;
    t->levels = max_level + 1;
    return FMK_OK;
}

extern "C" fmk_status fmk_cuda_tree3d_build_async(fmk_plan *plan, int64_t n, const double *d_x,
                                                  int leaf_size, long long extra,
                                                  const fmk_cuda_groups_want *want,
                                                  fmk_cuda_tree *t)
{
    if (n > t->tune.small_max)
        return fmk_cuda_tree3d_build(plan, n, d_x, leaf_size, extra, t);
    const int fused = fmk_cuda_tree_small_fused_takes(t, n);
    const int staged = !fused && fmk_cuda_tree_small_staged_takes(t, n);
    fmk_status st = prepare(plan, n, leaf_size, extra, t, !fused && !staged);
    if (st == FMK_OK)
        st = fmk_cuda_tree_pin_lb(plan, t);
    fmk_cuda_groups_out g = {0, 0, NULL};
    if (st == FMK_OK && want) {
        /* fmk_cuda_tree3d_groups_bound of the pending tree */
        const int gs = want->group_size > 0 ? want->group_size : 1;
        st = fmk_cuda_tree_grow_groups(plan, t->cap_nodes + n / gs + 1, extra, want->d_groups,
                                       want->cap_groups);
        if (st == FMK_OK)
            g = fmk_cuda_groups_out{want->group_size, want->merge, *want->d_groups};
    }
    if (st == FMK_OK && fused) {
        st = check(plan, fmk_cuda_tree_small_fused(n, d_x, t, t->dh_lb, g),
                   "the one-block keys, sort and tree build");
    } else if (st == FMK_OK && staged) {
        st = check(plan, fmk_cuda_tree_small_staged(n, d_x, t, t->dh_lb, g),
                   "the tiles' sort, merge and build");
    } else {
        if (st == FMK_OK) /* a split sort's flag is looked at by finish */
            st = fmk_cuda_tree_sort(plan, t, n, d_x, n > t->tune.split_sort_min);
        if (st == FMK_OK)
            st = check(plan, fmk_cuda_tree_build_small(t, t->dh_lb, g), "the one-block tree build");
    }
    if (st == FMK_OK) {
        t->pending = 1;
        t->groups_made = g.groups != NULL;
        t->groups_size = g.group_size, t->groups_merge = g.merge;
        t->groups_at = g.groups;
    } else {
        fmk_cuda_tree3d_free(t);
    }
    return st;
}

extern "C" void fmk_cuda_tree3d_finish(fmk_cuda_tree *t, int *redo)
{
    *redo = 0;
    if (!t->pending)
        return;
    t->pending = 0;
    const int32_t *h = t->h_lb;
    if (h[FMK_CUDA_TREE_LB_FLAG] || h[FMK_CUDA_TREE_LB_SORT]) {
        *redo = 1;
        return;
    }
    fmk_cuda_tree_read_levels(t, FMK_TREE_MAX_LEVEL + 1);
}

extern "C" void fmk_cuda_tree3d_host_free(fmk_tree3d *tree)
{
    free(tree->keys), free(tree->order), free(tree->points), free(tree->begin), free(tree->end);
    free(tree->more), free(tree->next), free(tree->n_children), free(tree->parent);
    free(tree->level), free(tree->level_begin);
    memset(tree, 0, sizeof *tree);
}

extern "C" fmk_status fmk_cuda_tree3d_download(fmk_plan *plan, const fmk_cuda_tree *t,
                                               const double *d_x, fmk_tree3d *tree)
{
    memset(tree, 0, sizeof *tree);
    const int64_t n = t->n_points, nn = t->n_nodes;
    const size_t np = (size_t)(n > 0 ? n : 1), nq = (size_t)(nn > 0 ? nn : 1);
    tree->n_points = n, tree->n_nodes = nn, tree->levels = t->levels,
    tree->leaf_size = t->leaf_size;
    tree->keys = (uint64_t *)malloc(np * 8);
    tree->order = (int64_t *)malloc(np * 8);
    tree->points = d_x ? (double *)malloc(np * 24) : NULL;
    tree->begin = (int64_t *)malloc(nq * 8);
    tree->end = (int64_t *)malloc(nq * 8);
    tree->more = (int32_t *)malloc(nq * 4);
    tree->next = (int32_t *)malloc(nq * 4);
    tree->n_children = (int32_t *)malloc(nq * 4);
    tree->parent = (int32_t *)malloc(nq * 4);
    tree->level = (int8_t *)malloc(nq);
    tree->level_begin = (int64_t *)malloc((size_t)(t->levels + 1) * 8);
    int32_t *tmp = (int32_t *)malloc((np > 2 * nq ? np : 2 * nq) * 4);
    double *x = d_x ? (double *)malloc(np * 24) : NULL;
    if (!tree->keys || !tree->order || (d_x && (!tree->points || !x)) || !tree->begin ||
        !tree->end || !tree->more || !tree->next || !tree->n_children || !tree->parent ||
        !tree->level || !tree->level_begin || !tmp) {
        free(tmp), free(x);
        fmk_cuda_tree3d_host_free(tree);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory copying the tree");
    }
    cudaError_t err = cudaSuccess;
#define FMK_GET(dst, src, bytes)           \
    if (err == cudaSuccess && (bytes) > 0) \
    err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)
    FMK_GET(tree->keys, t->d_keys, (size_t)n * 8);
    FMK_GET(tmp, t->d_order, (size_t)n * 4);
    if (err == cudaSuccess)
        for (int64_t i = 0; i < n; i++)
            tree->order[i] = tmp[i];
    if (d_x) {
        FMK_GET(x, d_x, (size_t)n * 24);
        if (err == cudaSuccess)
            for (int64_t i = 0; i < n; i++)
                memcpy(tree->points + 3 * i, x + 3 * tree->order[i], 24);
    }
    FMK_GET(tmp, t->d_begin, (size_t)nn * 4);
    FMK_GET(tmp + nn, t->d_end, (size_t)nn * 4);
    if (err == cudaSuccess)
        for (int64_t i = 0; i < nn; i++)
            tree->begin[i] = tmp[i], tree->end[i] = tmp[nn + i];
    FMK_GET(tree->more, t->d_more, (size_t)nn * 4);
    FMK_GET(tree->next, t->d_next, (size_t)nn * 4);
    FMK_GET(tree->n_children, t->d_n_children, (size_t)nn * 4);
    FMK_GET(tree->parent, t->d_parent, (size_t)nn * 4);
    FMK_GET(tree->level, t->d_level, (size_t)nn);
#undef FMK_GET
    memcpy(tree->level_begin, t->level_begin, (size_t)(t->levels + 1) * 8);
    free(tmp), free(x);
    if (err != cudaSuccess) {
        fmk_cuda_tree3d_host_free(tree);
        return fmk_cuda_fail(plan, err, "cudaMemcpy (the tree from the GPU)");
    }
    return FMK_OK;
}
