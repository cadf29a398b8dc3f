/* lists_uvwx.cu -- the GPU 3D FMM's U, V, W, X lists (lists.h; built by lists.cu). A thread per
 * node follows fmm3d_lists.c rule for rule: it classifies the children of its parent's
 * neighbours into V and X and, for a leaf, descends into its non-leaf neighbours for U and W;
 * cubes are dyadic, so the adjacency test is exact and the lists are the host's. A count pass,
 * then (in lists.cu) CUB exclusive scans, then the same kernel fills. Also the order of the V
 * directions in the M2L and the V entries' direction slots. */
#include <string.h>

#include "fmm3d/cuda/lists_common.cuh"

namespace {

using namespace fmk_cuda_lists;

template <bool FILL> __global__ void k_lists(fmk_cuda_fmm3d_lists_args a)
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
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(&c[vd[e] % RANK_MAX], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < RANK_MAX; i += blockDim.x)
        if (c[i])
            atomicAdd(&count[i], c[i]);
}

__global__ void k_dir_to_slot(int64_t n, const int16_t *__restrict__ slot_of, int16_t *vd)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        vd[e] = slot_of[vd[e] % RANK_MAX];
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
extern "C" void fmk_cuda_fmm3d_m2l_order(const int8_t *deg, int16_t rank[FMK_FMM3D_NDIR],
                                         int16_t dir_of_rank[512])
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

extern "C" cudaError_t fmk_cuda_fmm3d_uvwx(fmk_cuda_fmm3d_lists_args a, int fill)
{
    if (fill)
        k_lists<true><<<blocks_for(a.k), BLOCK>>>(a);
    else
        k_lists<false><<<blocks_for(a.k + 1), BLOCK>>>(a);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_dir_count(int64_t n, const int16_t *vd, unsigned *count)
{
    k_dir_count<<<n / BLOCK + 1 < 1024 ? (unsigned)(n / BLOCK + 1) : 1024, BLOCK>>>(n, vd, count);
    return cudaGetLastError();
}

extern "C" cudaError_t fmk_cuda_fmm3d_dir_to_slot(int64_t n, const int16_t *slot_of, int16_t *vd)
{
    k_dir_to_slot<<<n / BLOCK + 1 < 1024 ? (unsigned)(n / BLOCK + 1) : 1024, BLOCK>>>(n, slot_of,
                                                                                      vd);
    return cudaGetLastError();
}
