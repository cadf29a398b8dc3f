/*
 * tree3d.cu -- the octree of tree3d.h built on the GPU: Morton keys, a stable CUB radix sort,
 * nodes level by level (breadth-first, key order), next/more pointers, and the target groups
 * of the group walk. tree_internal.h describes the arrays.
 */
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "tree_internal.h"

namespace {

constexpr int BLOCK = 256;

inline unsigned blocks_for(int64_t n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }

/* Spreads the 21 low bits of v to every third bit (bit b -> bit 3b). */
__device__ __forceinline__ uint64_t spread3(uint64_t v)
{
    v &= 0x1fffffull;
    v = (v | v << 32) & 0x1f00000000ffffull;
    v = (v | v << 16) & 0x1f0000ff0000ffull;
    v = (v | v << 8) & 0x100f00f00f00f00full;
    v = (v | v << 4) & 0x10c30c30c30c30c3ull;
    v = (v | v << 2) & 0x1249249249249249ull;
    return v;
}

/* tree3d.h: c_k = min(floor((x'_k - 1) 2^21), 2^21 - 1), x highest. */
__device__ __forceinline__ uint64_t cell_of(double x)
{
    double c = floor(__dmul_rn(__dadd_rn(x, -1.0), 2097152.0));
    long long i = (long long)c;
    i = i < 0 ? 0 : i;
    return (uint64_t)(i > 2097151 ? 2097151 : i);
}

__global__ void k_keys(int64_t n, const double *__restrict__ x, uint64_t *__restrict__ keys,
                       int32_t *__restrict__ idx)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t cx = cell_of(x[3 * i]), cy = cell_of(x[3 * i + 1]), cz = cell_of(x[3 * i + 2]);
    keys[i] = spread3(cx) << 2 | spread3(cy) << 1 | spread3(cz);
    idx[i] = (int32_t)i;
}

__global__ void k_root(int64_t n, int32_t *begin, int32_t *end, int32_t *parent, int32_t *next,
                       int8_t *level)
{
    begin[0] = 0, end[0] = (int32_t)n, parent[0] = -1, next[0] = -1, level[0] = 0;
}

/* First position in [lo, hi) whose octant digit (at shift) is >= o (digits are sorted there). */
__device__ __forceinline__ int32_t octant_bound(const uint64_t *__restrict__ keys, int32_t lo,
                                               int32_t hi, int shift, unsigned o)
{
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if ((unsigned)(keys[mid] >> shift & 7) < o)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Octant boundaries of node [b, e) at level L (its children are at level L + 1). */
__device__ __forceinline__ void octants(const uint64_t *__restrict__ keys, int32_t b, int32_t e,
                                        int L, int32_t bound[9])
{
    const int shift = 3 * (FMK_TREE_KEY_BITS - 1 - L);
    bound[0] = b, bound[8] = e;
    for (unsigned o = 1; o < 8; o++)
        bound[o] = octant_bound(keys, bound[o - 1], e, shift, o);
}

/* Children per node of one level (0: a leaf); more = -1 for now. */
__global__ void k_count_children(int L, int32_t first, int32_t count, int leaf_size,
                                 const uint64_t *__restrict__ keys, const int32_t *__restrict__ begin,
                                 const int32_t *__restrict__ end, int32_t *__restrict__ n_children,
                                 int32_t *__restrict__ more)
{
    int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count)
        return;
    const int32_t i = first + k;
    const int32_t b = begin[i], e = end[i];
    int c = 0;
    if (e - b > leaf_size && L < FMK_TREE_MAX_LEVEL) {
        int32_t bound[9];
        octants(keys, b, e, L, bound);
        for (int o = 0; o < 8; o++)
            c += bound[o + 1] > bound[o];
    }
    n_children[i] = c;
    more[i] = -1;
}

/* Writes the children of one level: node first + k gets children first_child + offset[k] ... */
__global__ void k_write_children(int L, int32_t first, int32_t count, int32_t first_child,
                                 const uint64_t *__restrict__ keys,
                                 const int32_t *__restrict__ offset, int32_t *__restrict__ begin,
                                 int32_t *__restrict__ end, int32_t *__restrict__ n_children,
                                 int32_t *__restrict__ more, int32_t *__restrict__ next,
                                 int32_t *__restrict__ parent, int8_t *__restrict__ level)
{
    int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count)
        return;
    const int32_t i = first + k;
    const int nc = n_children[i];
    if (nc == 0)
        return;
    int32_t bound[9];
    octants(keys, begin[i], end[i], L, bound);
    int32_t c = first_child + offset[k];
    more[i] = c;
    int written = 0;
    for (int o = 0; o < 8; o++) {
        if (bound[o + 1] == bound[o])
            continue;
        begin[c] = bound[o], end[c] = bound[o + 1];
        parent[c] = i, level[c] = (int8_t)(L + 1);
        written++;
        next[c] = written < nc ? c + 1 : next[i]; /* Nakasato Fig. 5: sibling, else parent's */
        c++;
    }
}

/* Group candidates: chunks of group_size for a node that is a group (tree_internal.h). */
__global__ void k_group_count(int32_t n_nodes, int group_size, const int32_t *__restrict__ begin,
                              const int32_t *__restrict__ end, const int32_t *__restrict__ more,
                              const int32_t *__restrict__ parent, int32_t *__restrict__ chunks)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_nodes)
        return;
    const int32_t c = end[i] - begin[i];
    const int32_t p = parent[i];
    const int is_group = (c <= group_size || more[i] < 0) &&
                         (p < 0 || end[p] - begin[p] > group_size);
    chunks[i] = is_group ? (c + group_size - 1) / group_size : 0;
}

__global__ void k_group_write(int32_t n_nodes, int group_size, const int32_t *__restrict__ begin,
                              const int32_t *__restrict__ end, const int32_t *__restrict__ offset,
                              const int32_t *__restrict__ chunks, int2 *__restrict__ groups)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_nodes)
        return;
    int32_t g = offset[i];
    for (int32_t k = 0, b = begin[i]; k < chunks[i]; k++, b += group_size)
        groups[g + k] = make_int2(b, min(b + group_size, end[i]));
}

void free_ptr(void *p)
{
    if (p && cudaFree(p) != cudaSuccess)
        (void)cudaGetLastError();
}

fmk_status check(fmk_plan *plan, cudaError_t err, const char *what)
{
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, what);
}

/* Node arrays of t grown to hold at least need nodes (the first t->n_nodes are kept). */
fmk_status grow_nodes(fmk_plan *plan, fmk_cuda_tree *t, int64_t need, long long extra)
{
    if (need <= t->cap_nodes)
        return FMK_OK;
    int64_t cap = t->cap_nodes * 2 > need ? t->cap_nodes * 2 : need;
    int32_t **arr32[6] = {&t->d_begin, &t->d_end, &t->d_more, &t->d_next, &t->d_n_children,
                          &t->d_parent};
    void *fresh[7] = {NULL};
    const long long total = extra + t->bytes + (long long)cap * FMK_CUDA_TREE_NODE_BYTES;
    fmk_status st = FMK_OK;
    for (int k = 0; k < 7 && st == FMK_OK; k++)
        st = fmk_cuda_alloc(plan, &fresh[k], (size_t)cap * (k < 6 ? 4 : 1), "the tree's nodes",
                            total);
    for (int k = 0; k < 7 && st == FMK_OK; k++) {
        void *old = k < 6 ? (void *)*arr32[k] : (void *)t->d_level;
        if (old && t->n_nodes > 0)
            st = check(plan, cudaMemcpy(fresh[k], old, (size_t)t->n_nodes * (k < 6 ? 4 : 1),
                                        cudaMemcpyDeviceToDevice),
                       "cudaMemcpy (growing the tree)");
    }
    if (st != FMK_OK) {
        for (int k = 0; k < 7; k++)
            free_ptr(fresh[k]);
        return st;
    }
    for (int k = 0; k < 6; k++)
        free_ptr(*arr32[k]), *arr32[k] = (int32_t *)fresh[k];
    free_ptr(t->d_level), t->d_level = (int8_t *)fresh[6];
    t->bytes += (cap - t->cap_nodes) * (int64_t)FMK_CUDA_TREE_NODE_BYTES;
    t->cap_nodes = cap;
    return FMK_OK;
}

/* The levels below the root, into t (keys sorted, root written). */
fmk_status build_levels(fmk_plan *plan, fmk_cuda_tree *t, long long extra)
{
    const int64_t n = t->n_points;
    int32_t *d_offset = NULL;
    void *d_temp = NULL;
    size_t temp_bytes = 0;
    cudaError_t err = cub::DeviceScan::InclusiveSum(NULL, temp_bytes, (int32_t *)NULL,
                                                    (int32_t *)NULL, (int)(n + 1));
    fmk_status st = check(plan, err, "cub::DeviceScan::InclusiveSum (workspace query)");
    const long long need = extra + t->bytes + (long long)(n + 1) * 4 + (long long)temp_bytes;
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, (void **)&d_offset, (size_t)(n + 2) * 4, "the tree's scan", need);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, &d_temp, temp_bytes, "the tree's scan workspace", need);
    int32_t first = 0, count = 1;
    int L = 0;
    t->level_begin[0] = 0;
    while (st == FMK_OK) {
        k_count_children<<<blocks_for(count), BLOCK>>>(L, first, count, t->leaf_size, t->d_keys,
                                                       t->d_begin, t->d_end, t->d_n_children,
                                                       t->d_more);
        int32_t total = 0;
        if (L < FMK_TREE_MAX_LEVEL) {
            err = cudaMemsetAsync(d_offset, 0, sizeof(int32_t));
            if (err == cudaSuccess)
                err = cub::DeviceScan::InclusiveSum(d_temp, temp_bytes, t->d_n_children + first,
                                                    d_offset + 1, count);
            if (err == cudaSuccess)
                err = cudaMemcpy(&total, d_offset + count, sizeof total, cudaMemcpyDeviceToHost);
            st = check(plan, err, "the tree build (child counts)");
        }
        t->level_begin[L + 1] = first + count;
        if (st != FMK_OK || total == 0)
            break;
        const int32_t first_child = first + count;
        st = grow_nodes(plan, t, (int64_t)first_child + total, extra);
        if (st != FMK_OK)
            break;
        k_write_children<<<blocks_for(count), BLOCK>>>(L, first, count, first_child, t->d_keys,
                                                       d_offset, t->d_begin, t->d_end,
                                                       t->d_n_children, t->d_more, t->d_next,
                                                       t->d_parent, t->d_level);
        t->n_nodes = (int64_t)first_child + total;
        first = first_child, count = total;
        L++;
    }
    t->levels = L + 1;
    if (st == FMK_OK)
        st = check(plan, cudaGetLastError(), "the tree build kernels");
    free_ptr(d_offset);
    free_ptr(d_temp);
    return st;
}

} // namespace

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
    size_t sort_bytes = 0, scan_bytes = 0;
    cub::DoubleBuffer<uint64_t> k(NULL, NULL);
    cub::DoubleBuffer<int32_t> v(NULL, NULL);
    if (cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, k, v, (int)(n > 0 ? n : 1), 0, 63) !=
        cudaSuccess)
        (void)cudaGetLastError(), sort_bytes = (size_t)n * 4 + (1 << 20);
    if (cub::DeviceScan::InclusiveSum(NULL, scan_bytes, (int32_t *)NULL, (int32_t *)NULL,
                                      (int)(n + 1)) != cudaSuccess)
        (void)cudaGetLastError(), scan_bytes = 1 << 20;
    /* keys and indices twice (sort), the sort's workspace; later the scan's */
    int64_t sort = 2 * n * (8 + 4) + (int64_t)sort_bytes;
    int64_t build = n * (8 + 4) + (n + 2) * 4 + (int64_t)scan_bytes;
    return sort > build ? sort : build;
}

extern "C" void fmk_cuda_tree3d_free(fmk_cuda_tree *t)
{
    void *p[] = {t->d_keys, t->d_order, t->d_begin, t->d_end, t->d_more,
                 t->d_next, t->d_n_children, t->d_parent, t->d_level};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        free_ptr(p[k]);
    memset(t, 0, sizeof *t);
}

extern "C" fmk_status fmk_cuda_tree3d_build(fmk_plan *plan, int64_t n, const double *d_x,
                                            int leaf_size, long long extra, fmk_cuda_tree *t)
{
    memset(t, 0, sizeof *t);
    t->n_points = n;
    t->leaf_size = leaf_size;
    const long long need = extra + fmk_cuda_tree3d_build_bytes(n);
    uint64_t *keys[2] = {NULL, NULL};
    int32_t *idx[2] = {NULL, NULL};
    void *d_temp = NULL;
    fmk_status st = FMK_OK;
    const size_t nb = (size_t)(n > 0 ? n : 1);
    for (int k = 0; k < 2 && st == FMK_OK; k++) {
        st = fmk_cuda_alloc(plan, (void **)&keys[k], nb * 8, "the Morton keys", need);
        if (st == FMK_OK)
            st = fmk_cuda_alloc(plan, (void **)&idx[k], nb * 4, "the sort order", need);
    }
    cub::DoubleBuffer<uint64_t> dk(keys[0], keys[1]);
    cub::DoubleBuffer<int32_t> dv(idx[0], idx[1]);
    size_t temp_bytes = 0;
    if (st == FMK_OK && n > 0) {
        k_keys<<<blocks_for(n), BLOCK>>>(n, d_x, keys[0], idx[0]);
        /* (key, index) pairs: LSD radix sort is stable, so ties keep the caller's order */
        st = check(plan, cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, dk, dv, (int)n, 0, 63),
                   "cub::DeviceRadixSort::SortPairs (workspace query)");
        if (st == FMK_OK)
            st = fmk_cuda_alloc(plan, &d_temp, temp_bytes, "the sort workspace", need);
        if (st == FMK_OK)
            st = check(plan, cub::DeviceRadixSort::SortPairs(d_temp, temp_bytes, dk, dv, (int)n, 0, 63),
                       "cub::DeviceRadixSort::SortPairs");
    }
    free_ptr(d_temp);
    if (st != FMK_OK) {
        for (int k = 0; k < 2; k++)
            free_ptr(keys[k]), free_ptr(idx[k]);
        memset(t, 0, sizeof *t);
        return st;
    }
    t->d_keys = dk.Current();
    t->d_order = dv.Current();
    free_ptr(dk.Alternate());
    free_ptr(dv.Alternate());
    t->bytes = (int64_t)nb * 12;

    /* Nodes: start at about 2 n / leaf_size (uniform points fill leaves about half) and grow. */
    int64_t cap = 2 * n / (leaf_size > 0 ? leaf_size : 1) + 64;
    st = grow_nodes(plan, t, cap, extra);
    if (st == FMK_OK) {
        k_root<<<1, 1>>>(n, t->d_begin, t->d_end, t->d_parent, t->d_next, t->d_level);
        t->n_nodes = 1;
        st = build_levels(plan, t, extra);
    }
    if (st != FMK_OK)
        fmk_cuda_tree3d_free(t);
    return st;
}

extern "C" fmk_status fmk_cuda_tree3d_groups(fmk_plan *plan, const fmk_cuda_tree *t,
                                             int group_size, long long extra, int2 **d_groups,
                                             int64_t *n_groups)
{
    *d_groups = NULL;
    *n_groups = 0;
    const int32_t nn = (int32_t)t->n_nodes;
    int32_t *d_chunks = NULL;
    void *d_temp = NULL;
    size_t temp_bytes = 0;
    fmk_status st = check(plan, cub::DeviceScan::ExclusiveSum(NULL, temp_bytes, (int32_t *)NULL,
                                                              (int32_t *)NULL, nn + 1),
                          "cub::DeviceScan::ExclusiveSum (workspace query)");
    const long long need = extra + (long long)(nn + 1) * 8 + (long long)temp_bytes;
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, (void **)&d_chunks, (size_t)(nn + 1) * 8, "the groups", need);
    if (st == FMK_OK)
        st = fmk_cuda_alloc(plan, &d_temp, temp_bytes, "the groups' scan", need);
    int32_t total = 0;
    if (st == FMK_OK) {
        int32_t *d_offset = d_chunks + nn + 1;
        k_group_count<<<blocks_for(nn), BLOCK>>>(nn, group_size, t->d_begin, t->d_end, t->d_more,
                                                 t->d_parent, d_chunks);
        cudaError_t err = cudaMemsetAsync(d_chunks + nn, 0, sizeof(int32_t));
        if (err == cudaSuccess)
            err = cub::DeviceScan::ExclusiveSum(d_temp, temp_bytes, d_chunks, d_offset, nn + 1);
        if (err == cudaSuccess)
            err = cudaMemcpy(&total, d_offset + nn, sizeof total, cudaMemcpyDeviceToHost);
        st = check(plan, err, "the group scan");
        if (st == FMK_OK)
            st = fmk_cuda_alloc(plan, (void **)d_groups, (size_t)(total > 0 ? total : 1) * sizeof(int2),
                                "the groups", need + (long long)total * 8);
        if (st == FMK_OK) {
            k_group_write<<<blocks_for(nn), BLOCK>>>(nn, group_size, t->d_begin, t->d_end, d_offset,
                                                     d_chunks, *d_groups);
            st = check(plan, cudaGetLastError(), "the group kernels");
        }
    }
    free_ptr(d_chunks);
    free_ptr(d_temp);
    if (st != FMK_OK) {
        free_ptr(*d_groups);
        *d_groups = NULL;
        return st;
    }
    *n_groups = total;
    return FMK_OK;
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
    tree->n_points = n, tree->n_nodes = nn, tree->levels = t->levels, tree->leaf_size = t->leaf_size;
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
#define FMK_GET(dst, src, bytes)                                                                \
    if (err == cudaSuccess && (bytes) > 0)                                                     \
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
