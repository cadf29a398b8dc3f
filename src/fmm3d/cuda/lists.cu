/* lists.cu -- the GPU 3D FMM's geometry on the GPU: points in key order, node cubes,
 * U, V, W, X lists, work lists and translation tiles from the device octree (lists.h).
 *
 * The lists follow fmm3d_lists.c rule for rule (neighbour sets from the parent's, then a
 * thread per node classifies the children of its parent's neighbours into V and X and, for a
 * leaf, descends into its non-leaf neighbours for U and W); cubes are dyadic, so the adjacency
 * test is exact and the lists are the host's. Counts, then CUB exclusive scans, then the same
 * kernel fills; the host reads only totals (a few words per pass). */
#include <math.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "fmm3d/cuda/lists.h"

namespace {

const int BLOCK = 256;
const int NBR_MAX = 27;   /* a neighbour set tiles the 3 x 3 x 3 block of its box's level */
const int V_MAX = 189;    /* V entries of a box: its parent's neighbours' children (216) less its own neighbours */
const int STACK_MAX = 256; /* the U/W descent: 7 pending siblings per level plus 8 children */
const int GROUPS = 256;
const int RANK_MAX = 512; /* > FMK_FMM3D_NDIR: V sort keys are octant * RANK_MAX + place */   /* tile groups: levels (M2M) + 8 levels (L2L) <= 22 + 176 */

inline unsigned blocks_for(int64_t n) { return (unsigned)((n + BLOCK - 1) / BLOCK > 0 ? (n + BLOCK - 1) / BLOCK : 1); }

/* The closed cubes of a and b touch (exact: dyadic centres and sides). */
__device__ inline bool touches(const real4d *__restrict__ cube, int32_t a, int32_t b)
{
    const real4d p = cube[a], q = cube[b];
    const double h = 0.5 * (p.w + q.w);
    return fabs(p.x - q.x) <= h && fabs(p.y - q.y) <= h && fabs(p.z - q.z) <= h;
}

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
    cube[b] = real4d{c.x + ((o & 4) ? q : -q), c.y + ((o & 2) ? q : -q), c.z + ((o & 1) ? q : -q), 0.5 * c.w};
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

/* Count pass (FILL false): cnt[j * (k + 1) + b] for j = 0 U + small W, 1 V, 2 W, 3 X, 4 Y,
 * 5 U alone (row ends zeroed, for the scans). Fill pass: the entries at the scanned begins
 * (the caller sorts each V row by direction). */
struct lists_args {
    int64_t k, near_max;
    const int32_t *parent, *more, *nch, *sn, *tn, *nbr;
    const int8_t *n_nbr;
    const real4d *cube;
    int32_t *cnt;
    const int32_t *ub, *vb, *wb, *xb, *yb;
    int32_t *u, *v, *w, *x, *y;
    int16_t *vd;
    const int8_t *oct;
    const int16_t *rank;              /* FMK_FMM3D_DIR -> its place in fmk_fmm3d_m2l_order */
};

template <bool FILL> __global__ void k_lists(lists_args a)
{
    const int64_t bb = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t k = a.k, k1 = a.k + 1;
    if (bb == k && !FILL)
        for (int j = 0; j < 6; j++)
            a.cnt[j * k1 + k] = 0;
    if (bb >= k)
        return;
    const int32_t b = (int32_t)bb;
    int nu = 0, nws = 0, nv = 0, nw = 0, nx = 0, ny = 0;
    int32_t *u = NULL, *ws = NULL, *v = NULL, *w = NULL, *x = NULL, *y = NULL;
    int16_t *vd = NULL;
    if (FILL) {
        u = a.u + a.ub[b], ws = u + a.cnt[5 * k1 + b], v = a.v + a.vb[b], vd = a.vd + a.vb[b];
        w = a.w + a.wb[b], x = a.x + a.xb[b], y = a.y + a.yb[b];
    }
    if (a.tn[b] > 0) {
        const int32_t P = a.parent[b];
        const bool y_box = a.tn[b] <= a.near_max;
        const real4d cb = a.cube[b];
        if (P >= 0)
            for (int i = 0; i < a.n_nbr[P]; i++) {
                const int32_t c = a.nbr[NBR_MAX * (int64_t)P + i];
                if (a.more[c] < 0) {
                    if (!touches(a.cube, c, b) && a.sn[c] > 0) { /* X */
                        if (y_box) {
                            if (FILL)
                                y[ny] = c;
                            ny++;
                        } else {
                            if (FILL)
                                x[nx] = c;
                            nx++;
                        }
                    }
                    continue;
                }
                for (int32_t d = a.more[c]; d < a.more[c] + a.nch[c]; d++) {
                    if (a.sn[d] == 0 || touches(a.cube, d, b))
                        continue;
                    if (FILL) { /* V */
                        const real4d cd = a.cube[d];
                        const int ox = (int)lround((cb.x - cd.x) / cb.w);
                        const int oy = (int)lround((cb.y - cd.y) / cb.w);
                        const int oz = (int)lround((cb.z - cd.z) / cb.w);
                        v[nv] = d;
                        /* sorted by the source's octant, then the direction's place in the M2L
                         * order (m2l_gemm.cu's GEMMs group the sources by octant) */
                        vd[nv] = (int16_t)(a.oct[d] * RANK_MAX + a.rank[FMK_FMM3D_DIR(ox, oy, oz)]);
                    }
                    nv++;
                }
            }
        if (a.more[b] < 0) { /* leaf: U and W */
            int32_t stack[STACK_MAX];
            int top = 0;
            for (int i = 0; i < a.n_nbr[b]; i++) {
                const int32_t c = a.nbr[NBR_MAX * (int64_t)b + i];
                if (a.more[c] < 0) {
                    if (a.sn[c] > 0) {
                        if (FILL)
                            u[nu] = c;
                        nu++;
                    }
                    continue;
                }
                stack[top++] = c;
                while (top > 0) {
                    const int32_t e = stack[--top];
                    for (int32_t d = a.more[e]; d < a.more[e] + a.nch[e]; d++) {
                        if (a.sn[d] == 0)
                            continue;
                        if (!touches(a.cube, d, b)) { /* W */
                            if (a.sn[d] <= a.near_max) {
                                if (FILL)
                                    ws[nws] = d;
                                nws++;
                            } else {
                                if (FILL)
                                    w[nw] = d;
                                nw++;
                            }
                        } else if (a.more[d] < 0) {
                            if (FILL)
                                u[nu] = d;
                            nu++;
                        } else {
                            stack[top++] = d;
                        }
                    }
                }
            }
        }
    }
    if (!FILL) {
        a.cnt[b] = nu + nws, a.cnt[k1 + b] = nv, a.cnt[2 * k1 + b] = nw;
        a.cnt[3 * k1 + b] = nx, a.cnt[4 * k1 + b] = ny, a.cnt[5 * k1 + b] = nu;
    }
}

/* Histogram of the V directions by their place in the M2L order (shared-memory counts per
 * block; vd: octant * RANK_MAX + place). */
__global__ void k_dir_count(int64_t n, const int16_t *__restrict__ vd, unsigned *count)
{
    __shared__ unsigned c[RANK_MAX];
    for (int i = threadIdx.x; i < RANK_MAX; i += blockDim.x)
        c[i] = 0;
    __syncthreads();
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(&c[vd[e] % RANK_MAX], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < RANK_MAX; i += blockDim.x)
        if (c[i])
            atomicAdd(&count[i], c[i]);
}

__global__ void k_dir_to_slot(int64_t n, const int16_t *__restrict__ slot_of, int16_t *vd)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x)
        vd[e] = slot_of[vd[e] % RANK_MAX];
}

/* The M2L's source columns: the nodes [first, k) grouped by octant (keys and items sorted by
 * CUB), col[b] = b's place within its octant's group, ofirst[o] = the group's first column
 * (ofirst[8] = n = k - first; an empty group gets the next one's first). */
__global__ void k_m2l_columns(int64_t n, const uint8_t *__restrict__ key,
                              const int32_t *__restrict__ box, int32_t *col, int32_t *ofirst)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int o = key[i];
        if (i == 0 || key[i - 1] != o)
            for (int q = i == 0 ? 0 : key[i - 1] + 1; q <= o; q++)
                ofirst[q] = (int32_t)i;
        if (i == n - 1)
            for (int q = o + 1; q <= 8; q++)
                ofirst[q] = (int32_t)n;
    }
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
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

} // namespace

/* The M2L order of the 316 V directions: by the M2L's degree of the direction, largest first
 * (m2l_gemm.cu truncates the far directions' operators, optionally to a few degree classes; one
 * degree for all without), then by class
 * triple (per axis: -3, -2..2, 3; x, then y, then z), then by FMK_FMM3D_DIR. The sources of octant o (bit 2 x, 1 y, 0 z; 1: the upper
 * half) reach the directions with d_i in [-2 - o_i, 3 - o_i] on each axis (d = target - source
 * in sides: the parents touch), 189 of them: in this order they lie in 4 runs (2 x classes times
 * 2 y classes, each over 2 z classes), which m2l_gemm.cu's per-octant GEMMs cover with a few
 * directions more (a run and the next merged across a gap of a few directions); per degree
 * likewise within that degree's directions. */
extern "C" void fmk_cuda_fmm3d_m2l_order(const int8_t *deg, int16_t rank[FMK_FMM3D_NDIR], int16_t dir_of_rank[512])
{
    /* a counting sort of the V directions by (degree, largest first; class (cx, cy, cz)),
     * stable in d */
    enum { KEYS = 128 * 27 };
    int first[KEYS + 1]; /* 14 kB */
    int key[FMK_FMM3D_NDIR];
    for (int i = 0; i < 512; i++)
        dir_of_rank[i] = -1;
    memset(first, 0, sizeof first);
    for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
        const int o[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
        const int v = abs(o[0]) > 1 || abs(o[1]) > 1 || abs(o[2]) > 1; /* a V direction */
        int c = 0;
        for (int a = 0; a < 3; a++)
            c = 3 * c + (o[a] == -3 ? 0 : o[a] == 3 ? 2 : 1);
        key[d] = v ? (127 - (deg ? deg[d] : 0)) * 27 + c : -1;
        if (v)
            first[key[d] + 1]++;
    }
    for (int c = 0; c < KEYS; c++)
        first[c + 1] += first[c];
    for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
        rank[d] = (int16_t)(key[d] < 0 ? -1 : first[key[d]]++);
        if (key[d] >= 0)
            dir_of_rank[rank[d]] = (int16_t)d;
    }
}

namespace {

__global__ void k_iota(int64_t n, int32_t first, int32_t *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = first + (int32_t)i;
}

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

/* The totals of up to 5 exclusive scans of n + 1 entries: tot[j] = out[j][n]. */
struct scan_outs {
    int32_t *p[5];
};
__global__ void k_totals(scan_outs o, int count, int64_t n, int32_t *tot)
{
    if ((int)threadIdx.x < count)
        tot[threadIdx.x] = o.p[threadIdx.x][n];
}

__global__ void k_compact(int64_t k, const int32_t *__restrict__ flag, const int32_t *__restrict__ pos,
                          int32_t *out)
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
__device__ __forceinline__ bool keeps_pair(int64_t cap, const int32_t *__restrict__ sn, int32_t b, int32_t a)
{
    const int64_t nb = sn[b], na = sn[a];
    const int64_t cb = (nb + cap - 1) / cap * cap * na, ca = (na + cap - 1) / cap * cap * nb;
    return cb != ca ? cb < ca : nb != na ? nb < na : a > b;
}

template <bool FILL>
__global__ void k_sym_split(int64_t k, int cap, const int32_t *__restrict__ sn, const int32_t *__restrict__ ub,
                            const int32_t *__restrict__ u, const real4d *__restrict__ cube, int32_t *cnt,
                            const int32_t *__restrict__ pb, const int32_t *__restrict__ rb, int32_t *pair,
                            int32_t *rest)
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
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
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
                               const int32_t *__restrict__ tile_nodes, const int32_t *__restrict__ more,
                               const int32_t *__restrict__ nch, const int32_t *__restrict__ sn,
                               const int32_t *__restrict__ parent, const int8_t *__restrict__ oct,
                               int32_t *cnt, const int32_t *__restrict__ tile_begin, int32_t *slot,
                               int32_t *src)
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

/* Scratch of one build, freed at the end. */
struct scratch {
    int32_t *flag, *pos, *cnt, *nbr;
    int8_t *n_nbr;
    int16_t *rank;
    uint8_t *okeys;
    int32_t *tot, *pos5;
    int32_t *ofirst, *oitems;
    unsigned *hist;
    int16_t *slot_of;
    uint32_t *keys[2];
    int32_t *items[2];
    int32_t *tab;
    int32_t *v_unsorted;
    int16_t *vd_unsorted;
    void *temp;
};

struct builder {
    fmk_plan *plan;
    long long extra;
    fmk_cuda_fmm3d_geo *g;
    scratch w;
    fmk_status st;

    int n_blocks; /* g's blocks taken so far */

    /* *ptr (slot i of g: a block, or temp for i = FMK_CUDA_FMM3D_BLOCKS, *cap bytes) grown to
     * bytes: cut from the arena while it has room, else allocated apart; contents not kept */
    bool grow(int i, void **ptr, size_t *cap, size_t bytes, const char *what)
    {
        if (st != FMK_OK)
            return false;
        if (*cap >= bytes && *ptr)
            return true;
        if (*ptr && !g->in_arena[i])
            cudaFree(*ptr);
        *ptr = NULL, *cap = 0, g->in_arena[i] = 0;
        const size_t room = (bytes + 255) / 256 * 256;
        if (g->arena && g->arena_used + room <= g->arena_bytes) {
            *ptr = (char *)g->arena + g->arena_used;
            g->arena_used += room, g->in_arena[i] = 1;
        } else if ((st = fmk_cuda_alloc(plan, ptr, bytes, what, extra)) != FMK_OK) {
            return false;
        }
        *cap = bytes;
        return true;
    }
    /* *p = the build's next block of g, grown to n elements when smaller. */
    template <typename T> bool alloc(T **p, int64_t n, const char *what)
    {
        if (st != FMK_OK)
            return false;
        if (n_blocks >= FMK_CUDA_FMM3D_BLOCKS) {
            st = fmk_error_set(plan, FMK_ERR_DEVICE, "the FMM's list builder needs more than %d arrays",
                               FMK_CUDA_FMM3D_BLOCKS);
            return false;
        }
        const int i = n_blocks++;
        if (!grow(i, &g->block[i], &g->block_bytes[i], sizeof(T) * (size_t)(n > 0 ? n : 1), what))
            return false;
        *p = (T *)g->block[i];
        return true;
    }
    bool ok(cudaError_t err, const char *what)
    {
        if (st == FMK_OK && err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, what);
        return st == FMK_OK;
    }
    /* CUB's workspace (g->temp) grown to need bytes */
    bool temp(size_t need)
    {
        grow(FMK_CUDA_FMM3D_BLOCKS, &g->temp, &g->temp_bytes, need, "the list builder's workspace");
        w.temp = g->temp;
        return st == FMK_OK;
    }
    /* the end of stage i of the build on the default stream (an event: stage_time, for the
     * benchmark, from their times once the build is done; no wait here) */
    void mark(int i)
    {
        if (st == FMK_OK)
            ok(cudaEventRecord(g->stage_ev[i + 1], 0), "cudaEventRecord (the list builder's stages)");
    }
    /* count (<= 5) scans as scan() below, their totals read together (one wait, not count) */
    bool scans(const int32_t *const *in, int32_t *const *out, int64_t n, int count, int64_t *const *total)
    {
        if (st != FMK_OK)
            return false;
        size_t need = 0;
        if (!ok(cub::DeviceScan::ExclusiveSum(NULL, need, in[0], out[0], (int)(n + 1)), "cub::DeviceScan (query)") ||
            !temp(need) || !alloc(&w.tot, 5, "the list builder's workspace"))
            return false;
        scan_outs o;
        for (int j = 0; j < count; j++) {
            if (!ok(cub::DeviceScan::ExclusiveSum(w.temp, need, in[j], out[j], (int)(n + 1)), "cub::DeviceScan"))
                return false;
            o.p[j] = out[j];
        }
        k_totals<<<1, 32>>>(o, count, n, w.tot);
        int32_t h[5];
        if (!ok(cudaMemcpy(h, w.tot, 4 * (size_t)count, cudaMemcpyDeviceToHost), "cudaMemcpy (list sizes)"))
            return false;
        for (int j = 0; j < count; j++)
            *total[j] = h[j];
        return true;
    }
    /* out[0..n] = exclusive sum of in[0..n] (in[n] is 0); *total = out[n] (a read; none when
     * total is NULL). */
    bool scan(const int32_t *in, int32_t *out, int64_t n, int64_t *total)
    {
        if (st != FMK_OK)
            return false;
        size_t need = 0;
        if (!ok(cub::DeviceScan::ExclusiveSum(NULL, need, in, out, (int)(n + 1)), "cub::DeviceScan (query)") ||
            !temp(need))
            return false;
        if (!ok(cub::DeviceScan::ExclusiveSum(w.temp, need, in, out, (int)(n + 1)), "cub::DeviceScan"))
            return false;
        int32_t h = 0;
        if (!total)
            return true;
        if (!ok(cudaMemcpy(&h, out + n, 4, cudaMemcpyDeviceToHost), "cudaMemcpy (a list size)"))
            return false;
        *total = h;
        return true;
    }
};

} // namespace

extern "C" void fmk_cuda_fmm3d_geo_free(fmk_cuda_fmm3d_geo *g)
{
    if (!g)
        return;
    for (int i = 0; i < FMK_CUDA_FMM3D_BLOCKS; i++) /* every array lives in a block */
        if (g->block[i] && !g->in_arena[i])
            cudaFree(g->block[i]);
    if (g->temp && !g->in_arena[FMK_CUDA_FMM3D_BLOCKS])
        cudaFree(g->temp);
    if (g->arena && !g->arena_lent)
        cudaFree(g->arena);
    for (int i = 0; i < g->n_stage_ev; i++)
        cudaEventDestroy(g->stage_ev[i]);
    memset(g, 0, sizeof *g);
}

extern "C" int64_t fmk_cuda_fmm3d_geo_bytes(int64_t np, int64_t ns, int self, int64_t k, int tb)
{
    const int64_t nt = self ? ns : np - ns;
    int64_t b = 36 * ns + (self ? 0 : 36 * nt);             /* points and orders */
    b += k * (32 + 1 + 4 * 4 + 6 * 4 + 5 * 4);                /* nodes, begins, work lists */
    b += k * (1 + 4 + 4 + 1 + 4) + 36;                        /* octants, the M2L's columns */
    b += k * (4 * 27 + 6 * 189 + 4 * 16);                     /* U, V, W, X entries */
    b += self ? k * (4 * 27 + 4) : 0;                         /* U as pairs and rest rows */
    b += k / tb * 4 * (tb + 2) + k * 4 * (tb + 1);            /* tiles */
    b += 8 * (np + 1) + k * (4 * NBR_MAX + 2 + 6 * 4 + 24);  /* scratch */
    return b;
}

namespace {

/* CUB's workspace of a first build (its largest need: the scans of n_flag items, the sorts of
 * the nn M2L columns, of at most V_MAX V entries per node and of at most 2 k tile items). */
cudaError_t first_temp(int64_t n_flag, int64_t k, int64_t nn, size_t *need)
{
    size_t q = 0;
    const int64_t n_v_max = k * V_MAX;
    *need = 0;
    cudaError_t err = cub::DeviceScan::ExclusiveSum(NULL, *need, (int32_t *)NULL, (int32_t *)NULL, (int)n_flag);
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, q, (const uint8_t *)NULL, (uint8_t *)NULL, (int32_t *)NULL,
                                              (int32_t *)NULL, (int)nn, 0, 3);
    *need = q > *need ? q : *need;
    if (err == cudaSuccess)
        err = cub::DeviceSegmentedSort::StableSortPairs(NULL, q, (int16_t *)NULL, (int16_t *)NULL, (int32_t *)NULL,
                                                        (int32_t *)NULL,
                                                        (int)(n_v_max < INT32_MAX ? n_v_max : INT32_MAX), (int)k,
                                                        (int32_t *)NULL, (int32_t *)NULL);
    *need = q > *need ? q : *need;
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, q, (uint32_t *)NULL, (uint32_t *)NULL, (int32_t *)NULL,
                                              (int32_t *)NULL, (int)(2 * k + 1), 0, 8);
    *need = q > *need ? q : *need;
    return err;
}

/* Items of the flags and their scan: sorted points, nodes, tiles (<= 2 k / tb + GROUPS). */
int64_t flag_items(int64_t np, int64_t k) { return (np > 2 * k + GROUPS ? np : 2 * k + GROUPS) + 1; }

} // namespace

extern "C" int64_t fmk_cuda_fmm3d_geo_arena_bytes(int64_t np, int64_t ns, int self, int64_t k, int tb)
{
    size_t need = 0;
    if (first_temp(flag_items(np, k), k, k, &need) != cudaSuccess)
        (void)cudaGetLastError(), need = 8 * (size_t)flag_items(np, k) + (1 << 20);
    return fmk_cuda_fmm3d_geo_bytes(np, ns, self, k, tb) + (int64_t)need + 256 * (FMK_CUDA_FMM3D_BLOCKS + 1);
}

extern "C" fmk_status fmk_cuda_fmm3d_geometry(fmk_plan *plan, const fmk_cuda_tree *t, const double *d_x,
                                              int64_t ns, int self, int64_t near_max, int tbw, int pair_cap,
                                              long long extra, fmk_cuda_fmm3d_geo *g)
{
    { /* everything but the device memory of the previous build */
        fmk_cuda_fmm3d_geo keep = *g;
        memset(g, 0, sizeof *g);
        memcpy(g->block, keep.block, sizeof g->block);
        memcpy(g->block_bytes, keep.block_bytes, sizeof g->block_bytes);
        memcpy(g->in_arena, keep.in_arena, sizeof g->in_arena);
        g->temp = keep.temp, g->temp_bytes = keep.temp_bytes;
        g->arena = keep.arena, g->arena_bytes = keep.arena_bytes, g->arena_used = keep.arena_used;
        g->arena_lent = keep.arena_lent;
        memcpy(g->stage_ev, keep.stage_ev, sizeof g->stage_ev);
        g->n_stage_ev = keep.n_stage_ev;
        memcpy(g->m2l_deg, keep.m2l_deg, sizeof g->m2l_deg);
    }
    builder B;
    memset(&B.w, 0, sizeof B.w);
    B.plan = plan, B.extra = extra, B.g = g, B.st = FMK_OK, B.n_blocks = 0;
    for (; g->n_stage_ev < 7 && B.st == FMK_OK; g->n_stage_ev++)
        B.ok(cudaEventCreate(&g->stage_ev[g->n_stage_ev]), "cudaEventCreate (the list builder's stages)");
    if (B.st == FMK_OK)
        B.ok(cudaEventRecord(g->stage_ev[0], 0), "cudaEventRecord (the list builder's stages)");
    scratch &w = B.w;
    const int64_t np = t->n_points, k = t->n_nodes;
    const int64_t nt = self ? ns : np - ns;
    const int levels = t->levels;
    g->n_nodes = k;
    g->tb = tbw;

    const int64_t n_flag = flag_items(np, k);
    const int64_t f2 = levels > 2 ? t->level_begin[2] : k, nn = k - f2;
    /* the first build: one arena for the arrays and CUB's workspace (lent by the caller, or
     * allocated here), so that the build allocates once */
    if (!g->block[0] && !g->temp) {
        size_t need = 0;
        B.ok(first_temp(n_flag, k, nn, &need), "CUB (workspace query)");
        const size_t bytes = (size_t)fmk_cuda_fmm3d_geo_bytes(np, ns, self, k, tbw) + need +
                             256 * (FMK_CUDA_FMM3D_BLOCKS + 1);
        if (B.st == FMK_OK && !g->arena &&
            (B.st = fmk_cuda_alloc(plan, &g->arena, bytes, "the lists", extra)) == FMK_OK)
            g->arena_bytes = bytes, g->arena_used = 0, g->arena_lent = 0;
        B.temp(need);
    }

    /* points in key order */
    B.alloc(&w.flag, n_flag, "the list builder's workspace");
    B.alloc(&w.pos, n_flag, "the list builder's workspace");
    if (B.st == FMK_OK) {
        k_src_flags<<<blocks_for(np + 1), BLOCK>>>(np, ns, self, t->d_order, w.flag);
        B.ok(cudaGetLastError(), "the list builder's kernels");
    }
    B.scan(w.flag, w.pos, np, NULL); /* (its total is ns) */
    B.alloc(&g->d_src, ns, "the sources");
    B.alloc(&g->d_src_order, ns, "the source order");
    if (self) {
        g->d_trg = g->d_src, g->d_trg_order = g->d_src_order;
    } else {
        B.alloc(&g->d_trg, nt, "the targets");
        B.alloc(&g->d_trg_order, nt, "the target order");
    }
    if (B.st == FMK_OK && np > 0)
        k_split<<<blocks_for(np), BLOCK>>>(np, ns, self, t->d_order, w.pos, d_x, g->d_src, g->d_src_order,
                                           g->d_trg, g->d_trg_order);

    B.mark(0);

    /* nodes */
    B.alloc(&g->d_cube, k, "the boxes");
    B.alloc(&g->d_level, k, "the boxes");
    B.alloc(&g->d_sb, k, "the boxes");
    B.alloc(&g->d_sn, k, "the boxes");
    B.alloc(&g->d_tb, k, "the boxes");
    B.alloc(&g->d_tn, k, "the boxes");
    B.alloc(&g->d_oct, k, "the boxes");
    if (B.st == FMK_OK) {
        k_nodes<<<blocks_for(k), BLOCK>>>(k, self, t->d_begin, t->d_end, w.pos, g->d_sb, g->d_sn, g->d_tb,
                                          g->d_tn);
        B.ok(cudaMemcpyAsync(g->d_level, t->d_level, (size_t)k, cudaMemcpyDeviceToDevice), "cudaMemcpy (levels)");
    }

    /* cubes and neighbour sets, level by level */
    B.alloc(&w.nbr, NBR_MAX * k, "the neighbour sets");
    B.alloc(&w.n_nbr, k, "the neighbour sets");
    for (int L = 0; L < levels && B.st == FMK_OK; L++) {
        const int64_t a = t->level_begin[L], e = t->level_begin[L + 1];
        if (e > a)
            k_cubes<<<blocks_for(e - a), BLOCK>>>(a, e, np, t->d_keys, t->d_begin, t->d_parent, t->d_level,
                                                  g->d_cube, g->d_oct);
        if (e > a)
            k_neighbours<<<blocks_for(e - a), BLOCK>>>(a, e, t->d_parent, t->d_more, t->d_n_children, g->d_cube,
                                                       w.nbr, w.n_nbr);
    }

    /* the M2L's source columns (nodes from level 2 down) grouped by octant */
    B.alloc(&g->d_m2l_box, nn, "the boxes");
    B.alloc(&g->d_m2l_col, k, "the boxes");
    B.alloc(&w.okeys, nn, "the list builder's workspace");
    B.alloc(&w.oitems, nn, "the list builder's workspace");
    B.alloc(&w.ofirst, 9, "the list builder's workspace");
    for (int q = 0; q <= 8; q++)
        g->m2l_first[q] = 0;
    if (B.st == FMK_OK && nn > 0) {
        k_iota<<<blocks_for(nn), BLOCK>>>(nn, (int32_t)f2, w.oitems);
        size_t need = 0;
        const uint8_t *okey_in = (const uint8_t *)(g->d_oct + f2);
        B.ok(cub::DeviceRadixSort::SortPairs(NULL, need, okey_in, w.okeys, w.oitems, g->d_m2l_box, (int)nn, 0, 3),
             "cub::DeviceRadixSort (query)");
        if (B.temp(need))
            B.ok(cub::DeviceRadixSort::SortPairs(w.temp, need, okey_in, w.okeys, w.oitems, g->d_m2l_box, (int)nn,
                                                 0, 3),
                 "cub::DeviceRadixSort (M2L columns)");
        if (B.st == FMK_OK)
            k_m2l_columns<<<blocks_for(nn), BLOCK>>>(nn, w.okeys, g->d_m2l_box, g->d_m2l_col, w.ofirst);
        int32_t of[9];
        if (B.ok(cudaMemcpy(of, w.ofirst, sizeof of, cudaMemcpyDeviceToHost), "cudaMemcpy (M2L columns)"))
            for (int q = 0; q <= 8; q++)
                g->m2l_first[q] = of[q];
    }

    B.mark(1);

    /* the lists: count, scan, fill; then each V row sorted by the source's octant, then the
     * direction's place in the M2L order (CUB) */
    B.alloc(&w.cnt, 6 * (k + 1), "the list builder's workspace");
    lists_args la;
    memset(&la, 0, sizeof la);
    la.k = k, la.near_max = near_max;
    la.parent = t->d_parent, la.more = t->d_more, la.nch = t->d_n_children;
    la.sn = g->d_sn, la.tn = g->d_tn, la.nbr = w.nbr, la.n_nbr = w.n_nbr, la.cube = g->d_cube;
    la.cnt = w.cnt;
    la.oct = g->d_oct;
    B.alloc(&w.rank, FMK_FMM3D_NDIR, "the list builder's workspace");
    int16_t rank[FMK_FMM3D_NDIR], dir_of_rank[RANK_MAX];
    fmk_cuda_fmm3d_m2l_order(g->m2l_deg, rank, dir_of_rank);
    if (B.st == FMK_OK)
        B.ok(cudaMemcpy(w.rank, rank, sizeof rank, cudaMemcpyHostToDevice), "cudaMemcpy (directions)");
    la.rank = w.rank;
    if (B.st == FMK_OK) {
        k_lists<false><<<blocks_for(k + 1), BLOCK>>>(la);
        B.ok(cudaGetLastError(), "the list kernels");
    }
    int32_t **begins[5] = {&g->d_u_begin, &g->d_v_begin, &g->d_w_begin, &g->d_x_begin, &g->d_y_begin};
    int64_t *totals[5] = {&g->n_u, &g->n_v, &g->n_w, &g->n_x, &g->n_y};
    for (int j = 0; j < 5; j++)
        B.alloc(begins[j], k + 1, "the interaction lists");
    {
        const int32_t *in[5];
        int32_t *out[5];
        for (int j = 0; j < 5; j++)
            in[j] = w.cnt + j * (k + 1), out[j] = *begins[j];
        B.scans(in, out, k, 5, totals);
    }
    B.alloc(&g->d_u, g->n_u, "the U list");
    B.alloc(&g->d_v, g->n_v, "the V list");
    B.alloc(&g->d_v_slot, g->n_v, "the V list");
    B.alloc(&w.v_unsorted, g->n_v, "the V list");
    B.alloc(&w.vd_unsorted, g->n_v, "the V list");
    B.alloc(&g->d_w, g->n_w, "the W list");
    B.alloc(&g->d_x, g->n_x, "the X list");
    B.alloc(&g->d_y, g->n_y, "the X list");
    if (B.st == FMK_OK) {
        la.ub = g->d_u_begin, la.vb = g->d_v_begin, la.wb = g->d_w_begin, la.xb = g->d_x_begin;
        la.yb = g->d_y_begin;
        la.u = g->d_u, la.v = w.v_unsorted, la.vd = w.vd_unsorted, la.w = g->d_w, la.x = g->d_x, la.y = g->d_y;
        k_lists<true><<<blocks_for(k), BLOCK>>>(la);
        B.ok(cudaGetLastError(), "the list kernels");
        size_t need = 0;
        B.ok(cub::DeviceSegmentedSort::StableSortPairs(NULL, need, w.vd_unsorted, g->d_v_slot, w.v_unsorted,
                                                       g->d_v, (int)g->n_v, (int)k, g->d_v_begin,
                                                       g->d_v_begin + 1),
             "cub::DeviceSegmentedSort (query)");
        if (B.temp(need) && g->n_v > 0)
            B.ok(cub::DeviceSegmentedSort::StableSortPairs(w.temp, need, w.vd_unsorted, g->d_v_slot,
                                                           w.v_unsorted, g->d_v, (int)g->n_v, (int)k,
                                                           g->d_v_begin, g->d_v_begin + 1),
                 "cub::DeviceSegmentedSort (the V lists)");
    }
    B.mark(2);

    /* direction slots: the directions that occur, in increasing order */
    B.alloc(&w.hist, RANK_MAX, "the list builder's workspace");
    B.alloc(&w.slot_of, RANK_MAX, "the list builder's workspace");
    if (B.st == FMK_OK) {
        unsigned hist[RANK_MAX];
        int16_t slot_of[RANK_MAX];
        B.ok(cudaMemset(w.hist, 0, sizeof hist), "cudaMemset (directions)");
        if (g->n_v > 0)
            k_dir_count<<<g->n_v / BLOCK + 1 < 1024 ? (unsigned)(g->n_v / BLOCK + 1) : 1024, BLOCK>>>(
                g->n_v, g->d_v_slot, w.hist);
        if (B.ok(cudaMemcpy(hist, w.hist, sizeof hist, cudaMemcpyDeviceToHost), "cudaMemcpy (directions)")) {
            for (int r = 0; r < RANK_MAX; r++) { /* slots in the M2L order */
                slot_of[r] = (int16_t)(hist[r] ? g->n_slots : -1);
                if (hist[r])
                    g->dir_of_slot[g->n_slots++] = dir_of_rank[r];
            }
            B.ok(cudaMemcpy(w.slot_of, slot_of, sizeof slot_of, cudaMemcpyHostToDevice), "cudaMemcpy (directions)");
            if (g->n_v > 0)
                k_dir_to_slot<<<g->n_v / BLOCK + 1 < 1024 ? (unsigned)(g->n_v / BLOCK + 1) : 1024, BLOCK>>>(
                    g->n_v, w.slot_of, g->d_v_slot);
        }
    }

    B.mark(3);

    /* work lists */
    int32_t **outs[5] = {&g->d_leaves_src, &g->d_leaves_trg, &g->d_xnodes, &g->d_ynodes, &g->d_vnodes};
    int64_t *counts[5] = {&g->n_leaves_src, &g->n_leaves_trg, &g->n_xnodes, &g->n_ynodes, &g->n_vnodes};
    const int32_t *lbeg[5] = {NULL, NULL, g->d_x_begin, g->d_y_begin, g->d_v_begin};
    /* flags in w.cnt (free until the U split below), their scans in w.pos5, sizes read once */
    B.alloc(&w.pos5, 5 * (k + 1), "the list builder's workspace");
    {
        const int32_t *in[5];
        int32_t *out[5];
        for (int j = 0; j < 5; j++) {
            in[j] = w.cnt + j * (k + 1), out[j] = w.pos5 + j * (k + 1);
            if (B.st == FMK_OK)
                k_work_flags<<<blocks_for(k + 1), BLOCK>>>(k, j, t->d_more, g->d_sn, g->d_tn, lbeg[j], w.cnt + j * (k + 1));
        }
        B.scans(in, out, k, 5, counts);
        for (int j = 0; j < 5; j++)
            if (B.alloc(outs[j], *counts[j], "the work lists") && k > 0)
                k_compact<<<blocks_for(k), BLOCK>>>(k, w.cnt + j * (k + 1), w.pos5 + j * (k + 1), *outs[j]);
    }

    /* sources = targets: the U lists split into leaf pairs (each once) and the rest */
    if (self && B.st == FMK_OK) {
        const int cap = pair_cap > 0 ? pair_cap : 1;
        k_sym_split<false><<<blocks_for(k + 1), BLOCK>>>(k, cap, g->d_sn, g->d_u_begin, g->d_u, g->d_cube, w.cnt,
                                                        NULL, NULL, NULL, NULL);
        B.ok(cudaGetLastError(), "the list kernels");
        if (B.alloc(&g->d_ur_begin, k + 1, "the U list")) {
            const int32_t *in[2] = {w.cnt, w.cnt + k + 1};
            int32_t *out[2] = {w.pos, g->d_ur_begin};
            int64_t *totals[2] = {&g->n_pairs, &g->n_ur};
            B.scans(in, out, k, 2, totals);
        }
        B.alloc(&g->d_pairs, 2 * g->n_pairs, "the U list");
        B.alloc(&g->d_ur, g->n_ur, "the U list");
        if (B.st == FMK_OK && k > 0) {
            k_sym_split<true><<<blocks_for(k), BLOCK>>>(k, cap, g->d_sn, g->d_u_begin, g->d_u, g->d_cube, NULL,
                                                       w.pos, g->d_ur_begin, g->d_pairs, g->d_ur);
            B.ok(cudaGetLastError(), "the list kernels");
        }
    }

    B.mark(4);

    /* tiles */
    int64_t n_items = 0;
    if (B.st == FMK_OK) {
        k_tile_items<<<blocks_for(k + 1), BLOCK>>>(k, levels, t->d_more, g->d_sn, g->d_tn, t->d_level, g->d_oct,
                                                  NULL, w.flag, NULL, NULL);
        B.scan(w.flag, w.pos, k, &n_items);
    }
    B.alloc(&w.keys[0], n_items, "the tiles");
    B.alloc(&w.keys[1], n_items, "the tiles");
    B.alloc(&w.items[0], n_items, "the tiles");
    B.alloc(&w.items[1], n_items, "the tiles");
    B.alloc(&w.tab, 2 * GROUPS, "the tiles");
    int64_t first_tile[GROUPS + 1];
    if (B.st == FMK_OK) {
        k_tile_items<<<blocks_for(k + 1), BLOCK>>>(k, levels, t->d_more, g->d_sn, g->d_tn, t->d_level, g->d_oct,
                                                  w.pos, NULL, w.keys[0], w.items[0]);
        size_t need = 0;
        B.ok(cub::DeviceRadixSort::SortPairs(NULL, need, w.keys[0], w.keys[1], w.items[0], w.items[1],
                                             (int)n_items, 0, 8),
             "cub::DeviceRadixSort (query)");
        if (B.temp(need) && n_items > 0)
            B.ok(cub::DeviceRadixSort::SortPairs(w.temp, need, w.keys[0], w.keys[1], w.items[0], w.items[1],
                                                 (int)n_items, 0, 8),
                 "cub::DeviceRadixSort (tiles)");
        unsigned hist[GROUPS];
        B.ok(cudaMemset(w.tab, 0, 4 * GROUPS), "cudaMemset (tiles)");
        if (B.st == FMK_OK && n_items > 0)
            k_group_count<<<n_items / BLOCK + 1 < 256 ? (unsigned)(n_items / BLOCK + 1) : 256, BLOCK>>>(
                n_items, w.keys[1], (unsigned *)w.tab);
        if (B.ok(cudaMemcpy(hist, w.tab, sizeof hist, cudaMemcpyDeviceToHost), "cudaMemcpy (tiles)")) {
            int32_t tab[2 * GROUPS];
            int64_t tiles = 0, items = 0;
            for (int q = 0; q < GROUPS; q++) {
                first_tile[q] = tiles;
                tab[q] = (int32_t)tiles, tab[GROUPS + q] = (int32_t)items;
                tiles += (hist[q] + tbw - 1) / tbw;
                items += hist[q];
            }
            first_tile[GROUPS] = tiles;
            g->n_tiles = tiles;
            for (int L = 0; L <= levels; L++) {
                g->m2m_first[L] = first_tile[L];
                g->l2l_first[L] = first_tile[levels + 8 * L];
            }
            B.ok(cudaMemcpy(w.tab, tab, sizeof tab, cudaMemcpyHostToDevice), "cudaMemcpy (tiles)");
        }
    }
    B.alloc(&g->d_tile_nodes, g->n_tiles * tbw, "the tiles");
    B.alloc(&g->d_tile_begin, g->n_tiles + 1, "the tiles");
    if (B.st == FMK_OK) {
        B.ok(cudaMemset(g->d_tile_nodes, 0xff, 4 * (size_t)(g->n_tiles * tbw)), "cudaMemset (tiles)");
        if (n_items > 0)
            k_tile_nodes<<<blocks_for(n_items), BLOCK>>>(n_items, tbw, w.keys[1], w.items[1], w.tab, g->d_tile_nodes);
        k_tile_entries<false><<<blocks_for(g->n_tiles + 1), BLOCK>>>(
            g->n_tiles, first_tile[levels], tbw, g->d_tile_nodes, t->d_more, t->d_n_children, g->d_sn,
            t->d_parent, g->d_oct, w.flag, NULL, NULL, NULL);
        B.scan(w.flag, g->d_tile_begin, g->n_tiles, &g->n_entries);
    }
    B.alloc(&g->d_tile_slot, g->n_entries, "the tiles");
    B.alloc(&g->d_tile_src, g->n_entries * tbw, "the tiles");
    if (B.st == FMK_OK && g->n_tiles > 0)
        k_tile_entries<true><<<blocks_for(g->n_tiles + 1), BLOCK>>>(
            g->n_tiles, first_tile[levels], tbw, g->d_tile_nodes, t->d_more, t->d_n_children, g->d_sn,
            t->d_parent, g->d_oct, NULL, g->d_tile_begin, g->d_tile_slot, g->d_tile_src);
    B.ok(cudaGetLastError(), "the list builder's kernels");
    B.mark(5);

    /* one wait for the whole build, then the stages' times */
    if (B.ok(cudaEventSynchronize(g->stage_ev[6]), "the list builder's kernels"))
        for (int i = 0; i < 6; i++) {
            float ms = 0;
            B.ok(cudaEventElapsedTime(&ms, g->stage_ev[i], g->stage_ev[i + 1]), "cudaEventElapsedTime");
            g->stage_time[i] = 1e-3 * ms;
        }
    if (B.st != FMK_OK) {
        fmk_cuda_fmm3d_geo_free(g);
        return B.st;
    }
    /* the arena and the blocks, the scratch's included, stay for the next build */
    g->bytes = (g->arena_lent ? 0 : (int64_t)g->arena_bytes) +
               (g->in_arena[FMK_CUDA_FMM3D_BLOCKS] ? 0 : (int64_t)g->temp_bytes);
    for (int i = 0; i < FMK_CUDA_FMM3D_BLOCKS; i++)
        g->bytes += g->in_arena[i] ? 0 : (int64_t)g->block_bytes[i];
    return B.st;
}
