/* lists_work.cu -- the GPU 3D FMM's list build (lists.cu), its last kernels: the work lists
 * (nodes that have work in a pass), the U lists split into leaf pairs when the sources are the
 * targets, and the tiles of the M2M and L2L kernel (translate.cu) (lists.h). */
#include "fmm3d/cuda/lists_common.cuh"

namespace {

using namespace fmk_cuda_lists;

/* Work-list flags: 0 leaves with sources, 1 leaves with targets, 2 X, 3 Y, 4 V entries. */
__global__ void k_work_flags(int64_t k, int kind, const int32_t *__restrict__ more,
                             const int32_t *__restrict__ sn, const int32_t *__restrict__ tn,
                             const int32_t *__restrict__ begin, int32_t *flag)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b > k)
        return;
    int f = 0;
    if (b < k) {
        if (kind == 0)
            f = more[b] < 0 && sn[b] > 0;
        else if (kind == 1)
            f = more[b] < 0 && tn[b] > 0;
        else
            f = begin[b + 1] > begin[b];
    }
    flag[b] = f;
}

__global__ void k_compact(int64_t k, const int32_t *__restrict__ flag,
                          const int32_t *__restrict__ pos, int32_t *out)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b < k && flag[b])
        out[pos[b]] = (int32_t)b;
}

/* The symmetric split of the U lists (sources = targets): entry a of leaf b's row is a leaf
 * pair when a != b and the cubes touch (a true U entry; U is symmetric then, a in U(b) iff b in
 * U(a)), kept once as (b, a) by b when keeps_pair says so; the rest (b itself and the W entries
 * done directly) stays in b's rest row. Count pass (pairs in cnt[b], rest in cnt[k + 1 + b]),
 * fill pass at the scanned begins. keeps_pair: the pair is kept by the leaf whose points the P2P
 * of leaf pairs (p2p.cu, k_p2p_pairs) should hold in registers while the other's stream past:
 * the one with the fewer slots times partners, ceil(n_b / cap) cap n_a against ceil(n_a / cap)
 * cap n_b for passes of cap points, then the one with fewer sources, then the lower index. */
__device__ __forceinline__ bool keeps_pair(int64_t cap, const int32_t *__restrict__ sn, int32_t b,
                                           int32_t a)
{
    const int64_t nb = sn[b], na = sn[a];
    const int64_t cb = (nb + cap - 1) / cap * cap * na, ca = (na + cap - 1) / cap * cap * nb;
    return cb != ca ? cb < ca : nb != na ? nb < na : a > b;
}

template <bool FILL>
__global__ void k_sym_split(int64_t k, int cap, const int32_t *__restrict__ sn,
                            const int32_t *__restrict__ ub, const int32_t *__restrict__ u,
                            const real4d *__restrict__ cube, int32_t *cnt,
                            const int32_t *__restrict__ pb, const int32_t *__restrict__ rb,
                            int32_t *pair, int32_t *rest)
{
    const int64_t bb = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (bb == k && !FILL)
        cnt[k] = cnt[2 * k + 1] = 0;
    if (bb >= k)
        return;
    const int32_t b = (int32_t)bb;
    int np = 0, nr = 0;
    for (int32_t e = ub[b]; e < ub[b + 1]; e++) {
        const int32_t a = u[e];
        if (a != b && touches(cube, a, b)) {
            if (keeps_pair(cap, sn, b, a)) {
                if (FILL)
                    pair[2 * (pb[b] + np)] = b, pair[2 * (pb[b] + np) + 1] = a;
                np++;
            }
        } else {
            if (FILL)
                rest[rb[b] + nr] = a;
            nr++;
        }
    }
    if (!FILL)
        cnt[b] = np, cnt[k + 1 + b] = nr;
}

/* Tile items: a parent with sources (M2M, group = its level) and a box with targets at level
 * 3 or deeper (L2L, group = levels + 8 level + octant); cnt pass, then (key, node) pairs in node
 * order. */
__global__ void k_tile_items(int64_t k, int levels, const int32_t *__restrict__ more,
                             const int32_t *__restrict__ sn, const int32_t *__restrict__ tn,
                             const int8_t *__restrict__ level, const int8_t *__restrict__ oct,
                             const int32_t *__restrict__ pos, int32_t *cnt, uint32_t *keys,
                             int32_t *nodes)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b > k)
        return;
    if (b == k) {
        if (!pos)
            cnt[k] = 0;
        return;
    }
    const int L = level[b];
    const bool m2m = more[b] >= 0 && sn[b] > 0, l2l = L >= 3 && tn[b] > 0;
    if (!pos) {
        cnt[b] = (int)m2m + (int)l2l;
        return;
    }
    int32_t i = pos[b];
    if (m2m)
        keys[i] = (uint32_t)L, nodes[i++] = (int32_t)b;
    if (l2l)
        keys[i] = (uint32_t)(levels + 8 * L + oct[b]), nodes[i] = (int32_t)b;
}

__global__ void k_group_count(int64_t n, const uint32_t *__restrict__ keys, unsigned *count)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(&count[keys[i]], 1u);
}

/* tab[g]: first tile of group g; tab[GROUPS + g]: its first item. */
__global__ void k_tile_nodes(int64_t n, int tbw, const uint32_t *__restrict__ keys,
                             const int32_t *__restrict__ nodes, const int32_t *__restrict__ tab,
                             int32_t *tile_nodes)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint32_t g = keys[i];
    const int64_t p = i - tab[GROUPS + g];
    tile_nodes[(tab[g] + p / tbw) * tbw + p % tbw] = nodes[i];
}

/* A tile's entries: the slots (octants) that occur among its boxes' pairs, in order of first
 * occurrence, each with the box's source or -1 (translate.cu's tiles: M2M pairs are the children
 * with sources, L2L the parent). FILL false: counts into cnt. */
template <bool FILL>
__global__ void k_tile_entries(int64_t n_tiles, int64_t m2m_tiles, int tbw,
                               const int32_t *__restrict__ tile_nodes,
                               const int32_t *__restrict__ more, const int32_t *__restrict__ nch,
                               const int32_t *__restrict__ sn, const int32_t *__restrict__ parent,
                               const int8_t *__restrict__ oct, int32_t *cnt,
                               const int32_t *__restrict__ tile_begin, int32_t *slot, int32_t *src)
{
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t > n_tiles)
        return;
    if (t == n_tiles) {
        if (!FILL)
            cnt[t] = 0;
        return;
    }
    const int32_t *nodes = tile_nodes + t * tbw;
    const int64_t e0 = FILL ? tile_begin[t] : 0;
    int pos[8];
    for (int o = 0; o < 8; o++)
        pos[o] = -1;
    int e = 0;
    for (int i = 0; i < tbw; i++) {
        const int32_t b = nodes[i];
        if (b < 0)
            continue;
        const bool m2m = t < m2m_tiles;
        const int32_t d0 = m2m ? more[b] : b, d1 = m2m ? more[b] + nch[b] : b + 1;
        for (int32_t d = d0; d < d1; d++) {
            if (m2m && sn[d] == 0)
                continue;
            const int o = oct[d];
            if (pos[o] < 0) {
                pos[o] = e;
                if (FILL) {
                    slot[e0 + e] = o;
                    for (int j = 0; j < tbw; j++)
                        src[(e0 + e) * tbw + j] = -1;
                }
                e++;
            }
            if (FILL)
                src[(e0 + pos[o]) * tbw + i] = m2m ? d : parent[b];
        }
    }
    if (!FILL)
        cnt[t] = e;
}

} // namespace

extern "C" cudaError_t fmk_cuda_fmm3d_work_flags(int64_t k, int kind, const int32_t *more,
                                                 const int32_t *sn, const int32_t *tn,
                                                 const int32_t *begin, int32_t *flag)
{
    k_work_flags<<<blocks_for(k + 1), BLOCK>>>(k, kind, more, sn, tn, begin, flag);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_compact(int64_t k, const int32_t *flag, const int32_t *pos,
                                              int32_t *out)
{
    k_compact<<<blocks_for(k), BLOCK>>>(k, flag, pos, out);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_sym_split(int64_t k, int cap, const int32_t *sn,
                                                const int32_t *ub, const int32_t *u,
                                                const real4d *cube, int32_t *cnt, const int32_t *pb,
                                                const int32_t *rb, int32_t *pair, int32_t *rest,
                                                int fill)
{
    if (fill)
        k_sym_split<true>
            <<<blocks_for(k), BLOCK>>>(k, cap, sn, ub, u, cube, cnt, pb, rb, pair, rest);
    else
        k_sym_split<false>
            <<<blocks_for(k + 1), BLOCK>>>(k, cap, sn, ub, u, cube, cnt, pb, rb, pair, rest);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_tile_items(int64_t k, int levels, const int32_t *more,
                                                 const int32_t *sn, const int32_t *tn,
                                                 const int8_t *level, const int8_t *oct,
                                                 const int32_t *pos, int32_t *cnt, uint32_t *keys,
                                                 int32_t *nodes)
{
    k_tile_items<<<blocks_for(k + 1), BLOCK>>>(k, levels, more, sn, tn, level, oct, pos, cnt, keys,
                                               nodes);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_group_count(int64_t n, const uint32_t *keys, unsigned *count)
{
    k_group_count<<<n / BLOCK + 1 < 256 ? (unsigned)(n / BLOCK + 1) : 256, BLOCK>>>(n, keys, count);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_tile_nodes(int64_t n, int tbw, const uint32_t *keys,
                                                 const int32_t *nodes, const int32_t *tab,
                                                 int32_t *tile_nodes)
{
    k_tile_nodes<<<blocks_for(n), BLOCK>>>(n, tbw, keys, nodes, tab, tile_nodes);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_tile_entries(int64_t n_tiles, int64_t m2m_tiles, int tbw,
                                                   const int32_t *tile_nodes, const int32_t *more,
                                                   const int32_t *nch, const int32_t *sn,
                                                   const int32_t *parent, const int8_t *oct,
                                                   int32_t *cnt, const int32_t *tile_begin,
                                                   int32_t *slot, int32_t *src, int fill)
{
    if (fill)
        k_tile_entries<true><<<blocks_for(n_tiles + 1), BLOCK>>>(n_tiles, m2m_tiles, tbw,
                                                                 tile_nodes, more, nch, sn, parent,
                                                                 oct, cnt, tile_begin, slot, src);
    else
        k_tile_entries<false><<<blocks_for(n_tiles + 1), BLOCK>>>(n_tiles, m2m_tiles, tbw,
                                                                  tile_nodes, more, nch, sn, parent,
                                                                  oct, cnt, tile_begin, slot, src);
    return cudaGetLastError();
}
