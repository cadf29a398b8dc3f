/*
 * build_one_pass.cu -- every level of a large tree with leaves of at most ONE_LEAF_MAX points
 * from one pass over the sorted points (k_tree_points, a CUB scan, k_tree_nodes): the same
 * tree as the level-by-level build (docs/tree.md).
 */
#include <cub/device/device_scan.cuh>

#include "tree/cuda/tree3d_internal.h"

namespace {

/* The whole tree in one pass over the points (k_tree_points, a scan, k_tree_nodes), for leaves
 * of at most ONE_LEAF_MAX points. With sorted keys a node is known from its first and last
 * points. Let cl(a, b) be the deepest level whose cell holds both keys (FMK_TREE_MAX_LEVEL for
 * equal keys), and L the leaf size:
 *   s(p) = cl(key[p - 1], key[p]) + 1, s(0) = 0: p begins a cell at every level >= s(p);
 *   d(p) = min(FMK_TREE_MAX_LEVEL, 1 + max cl(key[j], key[j + L]) over j in [p - L, p],
 *          0 <= j, j + L < n; 0 when there is none): the level of the leaf that holds p. The
 *          cell of level m that holds p has more than L points exactly when L + 1 consecutive
 *          keys around p (key[j] .. key[j + L], j <= p <= j + L) lie in it, so it splits
 *          exactly when m < d(p).
 * So a node of level l begins at p exactly when s(p) <= l <= d(p), and one ends at p - 1
 * exactly when s(p) <= l <= d(p - 1) (s(n) = 0 for the last point). Numbered level by level,
 * in key order within a level (tree3d.h), the node of level l that begins at p is lb[l] plus
 * the number of level-l beginnings before p: each tile of points counts its beginnings per
 * level (k_tree_points), one exclusive scan over [level][tile] gives lb[l] plus the tiles
 * before, and each point writes the nodes it begins (begin, level, parent, more) and those
 * that end just before it (end, next: the node of level s(p) that begins at p; the child
 * count: the level l + 1 beginnings in [begin, end), by two atomic adds). The tree is the one
 * the level kernels build (test_tree_gpu same_tree). */
constexpr int ONE_TILE = 1024, ONE_BLOCK = 256, ONE_WARPS = ONE_BLOCK / 32,
              ONE_PER = ONE_TILE / ONE_BLOCK, ONE_WORDS = ONE_TILE / 32,
              ONE_LEVELS = FMK_TREE_MAX_LEVEL + 1;

/* The deepest level whose cell holds both keys. */
__device__ __forceinline__ int common_level(uint64_t a, uint64_t b)
{
    return a == b ? FMK_TREE_MAX_LEVEL : (__clzll((long long)(a ^ b)) - 1) / 3;
}

/* Point u of the calling thread in its tile (u < ONE_PER): word w ONE_PER + u of the tile's
 * masks (w its warp), bit lane, so that a ballot over the warp is one word. */
__device__ __forceinline__ int one_point(int u)
{
    return ((threadIdx.x >> 5) * ONE_PER + u) * 32 + (threadIdx.x & 31);
}

/* Tile blockIdx.x of the points 0 .. n (n: the end, which begins nothing): s and d of each
 * point (sd[p]), and the tile's beginnings per level (cnt[l n_tiles + tile]; cnt[ONE_LEVELS
 * n_tiles] = 0 for the total). Clears n_children[0 .. cap) for k_tree_nodes' adds. */
__global__ void __launch_bounds__(ONE_BLOCK)
    k_tree_points(int64_t n, int leaf_size, int64_t cap, const uint64_t *__restrict__ keys,
                  uchar2 *__restrict__ sd, int32_t *__restrict__ cnt, int64_t n_tiles,
                  int32_t *__restrict__ n_children)
{
    __shared__ uint64_t s_key[ONE_TILE + 2 * ONE_LEAF_MAX];
    __shared__ signed char s_c[2][ONE_TILE + ONE_LEAF_MAX];
    __shared__ int32_t s_cnt[ONE_LEVELS];
    const int L = leaf_size;
    const int64_t t0 = (int64_t)blockIdx.x * ONE_TILE, k0 = t0 - L; /* s_key[i]: key[k0 + i] */
    for (int64_t i = blockIdx.x * (int64_t)ONE_BLOCK + threadIdx.x; i < cap;
         i += (int64_t)gridDim.x * ONE_BLOCK)
        n_children[i] = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cnt[ONE_LEVELS * n_tiles] = 0;
    if (threadIdx.x < ONE_LEVELS)
        s_cnt[threadIdx.x] = 0;
    for (int i = threadIdx.x; i < ONE_TILE + 2 * L; i += ONE_BLOCK) {
        const int64_t g = k0 + i;
        s_key[i] = g >= 0 && g < n ? keys[g] : 0;
    }
    __syncthreads();
    /* s_c[0][i]: cl(key[j], key[j + L]) for j = k0 + i, -1 where there is no such pair */
    const int nc = ONE_TILE + L;
    for (int i = threadIdx.x; i < nc; i += ONE_BLOCK) {
        const int64_t j = k0 + i;
        s_c[0][i] = (signed char)(j >= 0 && j + L < n ? common_level(s_key[i], s_key[i + L]) : -1);
    }
    __syncthreads();
    /* the maximum over L + 1 entries: of 2^K entries by doubling (2^K <= L + 1 < 2^(K + 1)),
     * then two overlapping runs of 2^K */
    const int K = 31 - __clz(L + 1), P = 1 << K;
    int cur = 0;
    for (int k = 0; k < K; k++) {
        const int h = 1 << k;
        for (int i = threadIdx.x; i < nc; i += ONE_BLOCK) {
            int v = s_c[cur][i];
            if (i + h < nc)
                v = max(v, (int)s_c[cur][i + h]);
            s_c[cur ^ 1][i] = (signed char)v;
        }
        cur ^= 1;
        __syncthreads();
    }
    int c[ONE_LEVELS]; /* this warp's beginnings per level (in every lane) */
#pragma unroll
    for (int l = 0; l < ONE_LEVELS; l++)
        c[l] = 0;
#pragma unroll
    for (int u = 0; u < ONE_PER; u++) {
        const int r = one_point(u); /* point t0 + r; window [r, r + L] of s_c */
        const int64_t p = t0 + r;
        int s = ONE_LEVELS, d = -1; /* past the last point: nothing */
        if (p < n) {
            const int m = max((int)s_c[cur][r], (int)s_c[cur][r + L + 1 - P]);
            d = min(FMK_TREE_MAX_LEVEL, m + 1);
            s = p == 0 ? 0 : common_level(s_key[r + L - 1], s_key[r + L]) + 1;
            sd[p] = make_uchar2((unsigned char)s, (unsigned char)d);
        }
#pragma unroll
        for (int l = 0; l < ONE_LEVELS; l++)
            c[l] += __popc(__ballot_sync(0xffffffffu, s <= l && l <= d));
    }
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int l = 0; l < ONE_LEVELS; l++)
            if (c[l])
                atomicAdd(&s_cnt[l], c[l]);
    __syncthreads();
    if (threadIdx.x < ONE_LEVELS)
        cnt[threadIdx.x * n_tiles + blockIdx.x] = s_cnt[threadIdx.x];
}

/* Tile blockIdx.x of the points 0 .. n: the nodes that its points begin, and those that end
 * just before them, from sd and off (the exclusive scan of k_tree_points' cnt; off[ONE_LEVELS
 * n_tiles] is the node count). A point's rank among the tile's beginnings of a level is a
 * count of bits: the beginnings as one mask of the tile's points per level (a ballot a word)
 * and the words' exclusive sums. Block 0 writes the level table (lb[l], and the count past the
 * last level) and the overflow flag; nothing else is written when the nodes do not fit in
 * cap. */
__global__ void __launch_bounds__(ONE_BLOCK)
    k_tree_nodes(int64_t n, int64_t cap, const uchar2 *__restrict__ sd,
                 const int32_t *__restrict__ off, int64_t n_tiles, int32_t *__restrict__ lb,
                 int32_t *__restrict__ begin, int32_t *__restrict__ end,
                 int32_t *__restrict__ n_children, int32_t *__restrict__ more,
                 int32_t *__restrict__ next, int32_t *__restrict__ parent,
                 int8_t *__restrict__ level)
{
    __shared__ uint32_t s_mask[ONE_LEVELS][ONE_WORDS];
    __shared__ int32_t s_rank[ONE_LEVELS][ONE_WORDS]; /* node of the word's first beginning */
    __shared__ int32_t s_lb[ONE_LEVELS];
    __shared__ unsigned char s_s[ONE_TILE];     /* s of point t0 + r */
    __shared__ unsigned char s_d[ONE_TILE + 1]; /* s_d[r + 1]: d of point t0 + r (s_d[0]: t0 - 1) */
    const int64_t total = off[ONE_LEVELS * n_tiles];
    if (blockIdx.x == 0 && threadIdx.x <= FMK_TREE_MAX_LEVEL + 2)
        lb[threadIdx.x] = threadIdx.x < ONE_LEVELS ? off[threadIdx.x * n_tiles] : (int32_t)total;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        lb[FMK_CUDA_TREE_LB_FLAG] = total > cap;
        lb[FMK_CUDA_TREE_LB_GROUPS] = 0;
    }
    if (total > cap)
        return; /* the same for the whole grid */
    const int64_t t0 = (int64_t)blockIdx.x * ONE_TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x < ONE_LEVELS)
        s_lb[threadIdx.x] = off[threadIdx.x * n_tiles];
    if (threadIdx.x == 0) /* d of the point before the tile (-1 as 255: none) */
        s_d[0] = t0 > 0 && t0 <= n ? sd[t0 - 1].y : 255;
#pragma unroll
    for (int u = 0; u < ONE_PER; u++) {
        const int r = one_point(u);
        const int64_t p = t0 + r;
        const uchar2 v = p < n ? sd[p] : make_uchar2(0, 255);
        const int s = p <= n ? v.x : ONE_LEVELS; /* the end (p = n) begins nothing */
        const int d = v.y == 255 ? -1 : v.y;
        s_s[r] = (unsigned char)s, s_d[r + 1] = v.y;
#pragma unroll
        for (int l = 0; l < ONE_LEVELS; l++) {
            const uint32_t b = __ballot_sync(0xffffffffu, s <= l && l <= d);
            if (lane == 0)
                s_mask[l][warp * ONE_PER + u] = b;
        }
    }
    __syncthreads();
    /* the words' exclusive sums per level, plus the level's tiles before (one warp a level) */
    for (int l = warp; l < ONE_LEVELS; l += ONE_WARPS) {
        const int v = __popc(s_mask[l][lane]);
        int x = v;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, x, o);
            x += lane >= o ? y : 0;
        }
        s_rank[l][lane] = off[l * n_tiles + blockIdx.x] + x - v;
    }
    __syncthreads();
    const uint32_t below = (1u << lane) - 1;
#pragma unroll 1
    for (int u = 0; u < ONE_PER; u++) {
        const int r = one_point(u), wd = r >> 5;
        const int64_t p = t0 + r;
        const int su = s_s[r], du = s_d[r + 1] == 255 ? -1 : s_d[r + 1];
        const int dp = s_d[r] == 255 ? -1 : s_d[r]; /* the leaf level of point p - 1 */
        const int hi = du > dp ? du : dp;
        if (p > n || su > hi)
            continue; /* begins no node and ends none */
                      /* node of level l that begins at p, or the first after p */
#define ONE_AT(l) (s_rank[l][wd] + __popc(s_mask[l][wd] & below))
        const int32_t after = p < n ? ONE_AT(su) : -1; /* next of the nodes ending at p - 1 */
        for (int l = su; l <= hi; l++) {
            const int32_t at = ONE_AT(l);
            const int32_t below_next = l + 1 < ONE_LEVELS ? ONE_AT(l + 1) : 0;
            if (l <= du) { /* the node of level l that begins at p */
                begin[at] = (int32_t)p, level[at] = (int8_t)l;
                parent[at] = l == 0 ? -1 : ONE_AT(l - 1) + (su <= l - 1 ? 1 : 0) - 1;
                int32_t first = -1;
                if (l < du) {
                    first = below_next;
                    atomicAdd(&n_children[at], -first);
                }
                more[at] = first;
            }
            if (l <= dp && at > s_lb[l]) { /* the node of level l that ends at p - 1 */
                const int32_t k = at - 1;
                end[k] = (int32_t)p, next[k] = after;
                if (l < dp)
                    atomicAdd(&n_children[k], below_next); /* one past its last child */
            }
        }
#undef ONE_AT
    }
}

} // namespace

fmk_status fmk_cuda_tree_build_one_pass(fmk_plan *plan, fmk_cuda_tree *t, int *overflow, int *taken)
{
    const int64_t n = t->n_points, n_tiles = (n + ONE_TILE) / ONE_TILE; /* points 0 .. n */
    const int64_t items = ONE_LEVELS * n_tiles + 1;
    int32_t *cnt, *off;
    *taken = 0;
    if (items <= t->cap_nodes + 1) /* the level workspace */
        cnt = t->d_counts, off = t->d_offset;
    else if (2 * items <= t->cap_points) /* the sort's second indices, free after it */
        cnt = t->d_order_alt, off = t->d_order_alt + items;
    else
        return FMK_OK;
    size_t need = 0;
    cudaError_t err = cub::DeviceScan::ExclusiveSum(NULL, need, cnt, off, (int)items);
    if (err != cudaSuccess || need > t->temp_bytes)
        return check(plan, err, "CUB (workspace query)");
    *taken = 1;
    k_tree_points<<<(unsigned)n_tiles, ONE_BLOCK>>>(n, t->leaf_size, t->cap_nodes, t->d_keys,
                                                    (uchar2 *)t->d_keys_alt, cnt, n_tiles,
                                                    t->d_n_children);
    size_t tb = t->temp_bytes;
    err = cub::DeviceScan::ExclusiveSum(t->d_temp, tb, cnt, off, (int)items);
    if (err == cudaSuccess)
        k_tree_nodes<<<(unsigned)n_tiles, ONE_BLOCK>>>(
            n, t->cap_nodes, (const uchar2 *)t->d_keys_alt, off, n_tiles, t->d_lb, t->d_begin,
            t->d_end, t->d_n_children, t->d_more, t->d_next, t->d_parent, t->d_level);
    if (err == cudaSuccess)
        err = cudaMemcpy(t->h_lb, t->d_lb, FMK_CUDA_TREE_LB * sizeof(int32_t),
                         cudaMemcpyDeviceToHost);
    if (err == cudaSuccess)
        err = cudaGetLastError();
    fmk_status st = check(plan, err, "the tree build kernels");
    if (st != FMK_OK)
        return st;
    *overflow = t->h_lb[FMK_CUDA_TREE_LB_FLAG] != 0;
    fmk_cuda_tree_read_levels(t, FMK_TREE_MAX_LEVEL + 1);
    return FMK_OK;
}
