/* lists_boxes.cu -- the GPU 3D FMM's list build (lists.cu), its first kernels: the points in key
 * order, the nodes' source and target ranges, their cubes and octants, the neighbour sets N(b)
 * level by level (fmm3d_lists.c's rule: from the parent's) and the M2L's source columns grouped
 * by octant (lists.h). */
#include "fmm3d/cuda/lists_common.cuh"

namespace {

using namespace fmk_cuda_lists;

/* flag[q] = 1 when sorted point q is a source (flag[np] = 0, for the scan's total). */
__global__ void k_src_flags(int64_t np, int64_t ns, int self, const int32_t *__restrict__ order,
                            int32_t *flag)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q < np)
        flag[q] = self || order[q] < ns;
    else if (q == np)
        flag[q] = 0;
}

/* Sources and targets in key order; before[q] = sources among sorted points [0, q). */
__global__ void k_split(int64_t np, int64_t ns, int self, const int32_t *__restrict__ order,
                        const int32_t *__restrict__ before, const double *__restrict__ x,
                        real4d *src, int32_t *src_order, real4d *trg, int32_t *trg_order)
{
    const int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= np)
        return;
    const int32_t c = order[q];
    const real4d p = {x[3 * (int64_t)c], x[3 * (int64_t)c + 1], x[3 * (int64_t)c + 2], 0.0};
    if (self || c < ns) {
        src[before[q]] = p;
        src_order[before[q]] = c;
    } else {
        const int64_t i = q - before[q];
        trg[i] = p;
        trg_order[i] = (int32_t)(c - ns);
    }
}

/* Per node: source and target ranges. */
__global__ void k_nodes(int64_t k, int self, const int32_t *__restrict__ begin,
                        const int32_t *__restrict__ end, const int32_t *__restrict__ before,
                        int32_t *sb, int32_t *sn, int32_t *tb, int32_t *tn)
{
    const int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= k)
        return;
    const int32_t s0 = before[begin[b]], s1 = before[end[b]];
    sb[b] = s0, sn[b] = s1 - s0;
    tb[b] = self ? s0 : begin[b] - s0;
    tn[b] = self ? s1 - s0 : (end[b] - begin[b]) - (s1 - s0);
}

/* Cubes and octants of the nodes [first, last) of one level from their parents': the octant
 * (bit 2 x, 1 y, 0 z) is the key's three bits of the level, the child's centre the parent's
 * plus or minus a quarter of its side (exact: dyadic), which is fmk_tree3d_node_cube's. */
__global__ void k_cubes(int64_t first, int64_t last, int64_t np, const uint64_t *__restrict__ keys,
                        const int32_t *__restrict__ begin, const int32_t *__restrict__ parent,
                        const int8_t *__restrict__ level, real4d *cube, int8_t *oct)
{
    const int64_t b = first + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= last)
        return;
    const int32_t P = parent[b];
    if (P < 0) {
        cube[b] = real4d{1.5, 1.5, 1.5, 1.0};
        oct[b] = 0;
        return;
    }
    const int L = level[b];
    const uint64_t key = np > 0 ? keys[begin[b]] : 0;
    const int o = (int)((key >> (3 * (FMK_TREE_KEY_BITS - L))) & 7);
    const real4d c = cube[P];
    const double q = 0.25 * c.w;
    cube[b] = real4d{c.x + ((o & 4) ? q : -q), c.y + ((o & 2) ? q : -q), c.z + ((o & 1) ? q : -q),
                     0.5 * c.w};
    oct[b] = (int8_t)o;
}

/* N(b) for the nodes [first, last) of one level, from their parents' (fmm3d_lists.c). */
__global__ void k_neighbours(int64_t first, int64_t last, const int32_t *__restrict__ parent,
                             const int32_t *__restrict__ more, const int32_t *__restrict__ nch,
                             const real4d *__restrict__ cube, int32_t *nbr, int8_t *n_nbr)
{
    const int64_t b = first + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= last)
        return;
    int32_t *out = nbr + NBR_MAX * b;
    const int32_t P = parent[b];
    if (P < 0) {
        out[0] = (int32_t)b;
        n_nbr[b] = 1;
        return;
    }
    int n = 0;
    for (int i = 0; i < n_nbr[P]; i++) {
        const int32_t c = nbr[NBR_MAX * (int64_t)P + i];
        if (more[c] < 0) {
            if (touches(cube, c, (int32_t)b))
                out[n++] = c;
            continue;
        }
        for (int32_t d = more[c]; d < more[c] + nch[c]; d++)
            if (touches(cube, d, (int32_t)b))
                out[n++] = d;
    }
    n_nbr[b] = (int8_t)n;
}

/* The M2L's source columns: the nodes [first, k) grouped by octant (keys and items sorted by
 * CUB), col[b] = b's place within its octant's group, ofirst[o] = the group's first column
 * (ofirst[8] = n = k - first; an empty group gets the next one's first). */
__global__ void k_m2l_columns(int64_t n, const uint8_t *__restrict__ key,
                              const int32_t *__restrict__ box, int32_t *col, int32_t *ofirst)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int o = key[i];
        if (i == 0 || key[i - 1] != o)
            for (int q = i == 0 ? 0 : key[i - 1] + 1; q <= o; q++)
                ofirst[q] = (int32_t)i;
        if (i == n - 1)
            for (int q = o + 1; q <= 8; q++)
                ofirst[q] = (int32_t)n;
    }
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        /* the group's first column: a binary search of the sorted keys */
        int64_t lo = 0, hi = i;
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (key[mid] < key[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        col[box[i]] = (int32_t)(i - lo);
    }
}

__global__ void k_iota(int64_t n, int32_t first, int32_t *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = first + (int32_t)i;
}

} // namespace

extern "C" cudaError_t fmk_cuda_fmm3d_src_flags(int64_t np, int64_t ns, int self,
                                                const int32_t *order, int32_t *flag)
{
    k_src_flags<<<blocks_for(np + 1), BLOCK>>>(np, ns, self, order, flag);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_split(int64_t np, int64_t ns, int self, const int32_t *order,
                                            const int32_t *before, const double *x, real4d *src,
                                            int32_t *src_order, real4d *trg, int32_t *trg_order)
{
    k_split<<<blocks_for(np), BLOCK>>>(np, ns, self, order, before, x, src, src_order, trg,
                                       trg_order);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_nodes(int64_t k, int self, const int32_t *begin,
                                            const int32_t *end, const int32_t *before, int32_t *sb,
                                            int32_t *sn, int32_t *tb, int32_t *tn)
{
    k_nodes<<<blocks_for(k), BLOCK>>>(k, self, begin, end, before, sb, sn, tb, tn);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_boxes(const fmk_cuda_tree *t, real4d *cube, int8_t *oct,
                                            int32_t *nbr, int8_t *n_nbr)
{
    for (int L = 0; L < t->levels; L++) {
        const int64_t a = t->level_begin[L], e = t->level_begin[L + 1];
        if (e > a)
            k_cubes<<<blocks_for(e - a), BLOCK>>>(a, e, t->n_points, t->d_keys, t->d_begin,
                                                  t->d_parent, t->d_level, cube, oct);
        if (e > a)
            k_neighbours<<<blocks_for(e - a), BLOCK>>>(a, e, t->d_parent, t->d_more,
                                                       t->d_n_children, cube, nbr, n_nbr);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_iota(int64_t n, int32_t first, int32_t *out)
{
    k_iota<<<blocks_for(n), BLOCK>>>(n, first, out);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_m2l_columns(int64_t n, const uint8_t *key, const int32_t *box,
                                                  int32_t *col, int32_t *ofirst)
{
    k_m2l_columns<<<blocks_for(n), BLOCK>>>(n, key, box, col, ofirst);
    return cudaGetLastError();
}
