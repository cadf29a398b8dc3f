/* lists.cu -- the topological phase's directed lists on the GPU (fmm2d.h, Goude & Engblom
 * Sect. 2): level by level, a warp per box (count, CUB scan, fill), the running totals on the
 * device; the finest level's strong lists carry a kind per entry (P2P, M2P, P2L). */
#include <cub/cub.cuh>

#include "fmm2d/cuda/fmm2d.cuh"

namespace {

/* The lists of level l (fmm2d.h), a warp per box, a lane per candidate (the children of the
 * parent's strong list); pass 0 counts (weak << 32 | strong, one scan for both), pass 1 fills in
 * candidate order (ballots place them) and writes the level's list starts. The level's weak
 * lists start at base (host totals, ls NULL) or at ls[LS_BASE] (device totals; once
 * LS_OVERFLOW is set, counts of 0 and no lists). */
/* Box b (0 <= b <= 4^l; b = 4^l: the scan's last entry) of k_connect, by a full warp. */
__device__ void connect_box(int l, int L, int pass, int64_t b, int lane, const int *prev_begin,
                            const int *prev, const int64_t *src_start, const int64_t *trg_start,
                            const double *center, const double *radius, u64 *cnt, const u64 *off,
                            int *weak, int *strong, signed char *kind, int base, int *weak_begin,
                            int *strong_begin)
{
    const int64_t nb = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
    /* pass 1: the box's offsets, (weak << 32 | strong) from one scan, and its list starts */
    int off_weak = 0, off_strong = 0;
    if (pass) {
        off_weak = base + (int)(off[b] >> 32), off_strong = (int)(off[b] & 0xffffffffu);
        if (lane == 0)
            weak_begin[b] = off_weak, strong_begin[b] = off_strong;
    }
    if (b == nb) { /* the scan's last entry */
        if (!pass && lane == 0)
            cnt[nb] = 0;
        return;
    }
    int nw = 0, nsg = 0;
    if (count_in(trg_start, L, l, b) > 0) {
        const double cb[2] = {center[2 * (f + b)], center[2 * (f + b) + 1]};
        const double rb = radius[f + b];
        const int64_t P = b >> 2;
        const int e0 = prev_begin[P], total = 4 * (prev_begin[P + 1] - e0);
        const unsigned below = (1u << lane) - 1;
        for (int i0 = 0; i0 < total; i0 += 32) {
            const int i = i0 + lane;
            int64_t c = 0;
            int is_weak = 0, is_strong = 0;
            double rc = 0;
            const double *cc = cb;
            if (i < total) {
                c = 4 * (int64_t)prev[e0 + i / 4] + (i & 3);
                if (count_in(src_start, L, l, c) > 0) {
                    cc = center + 2 * (f + c);
                    rc = radius[f + c];
                    is_weak = fmk_fmm2d_separated(cb, rb, cc, rc, 0);
                    is_strong = !is_weak;
                }
            }
            const unsigned mw = __ballot_sync(FULL, is_weak), ms = __ballot_sync(FULL, is_strong);
            if (pass && is_weak)
                weak[off_weak + nw + __popc(mw & below)] = (int)(f + c);
            if (pass && is_strong) {
                const int o = off_strong + nsg + __popc(ms & below);
                strong[o] = (int)c;
                if (l == L) {
                    signed char k = 0;
                    if (c != b && fmk_fmm2d_separated(cb, rb, cc, rc, 1))
                        k = rc < rb ? 1 : 2;
                    kind[o] = k;
                }
            }
            nw += __popc(mw), nsg += __popc(ms);
        }
    }
    if (!pass && lane == 0)
        cnt[b] = (u64)nw << 32 | (u64)nsg;
}

__global__ void k_connect(int l, int L, int pass, const int *prev_begin, const int *prev,
                          const int64_t *src_start, const int64_t *trg_start, const double *center,
                          const double *radius, u64 *cnt, const u64 *off, int *weak, int *strong,
                          signed char *kind, const int *ls, int base, int *weak_begin,
                          int *strong_begin)
{
    const int64_t b = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (b > ((int64_t)1 << (2 * l)))
        return;
    if (ls && ls[LS_OVERFLOW]) { /* a coarser level did not fit: its lists are not there */
        if (!pass && lane == 0)
            cnt[b] = 0;
        return;
    }
    if (pass && ls)
        base = ls[LS_BASE];
    connect_box(l, L, pass, b, lane, prev_begin, prev, src_start, trg_start, center, radius, cnt,
                off, weak, strong, kind, base, weak_begin, strong_begin);
}

/* The two list totals of a level (the scan's last entry) into out[0], out[1] (one copy to the
 * host). */
__global__ void k_totals(const u64 *total, int *out)
{
    out[0] = (int)(*total >> 32), out[1] = (int)(*total & 0xffffffffu);
}

/* Level 0 of the lists: the root is strongly coupled to itself when root is 1. */
__global__ void k_lists_root(int root, int L, int *begin, int *strong, int *weak_begin,
                             signed char *kind, int *ls)
{
    begin[0] = 0, begin[1] = root, strong[0] = 0;
    weak_begin[0] = weak_begin[1] = 0;
    if (L == 0)
        kind[0] = 0;
    ls[LS_WEAK] = 0, ls[LS_STRONG] = root, ls[LS_OVERFLOW] = 0, ls[LS_BASE] = 0;
}

/* After the scans of a level: its totals (weak_total, strong_total) against the capacities; a
 * level that does not fit sets LS_OVERFLOW and the host builds the lists again, growing them. */
__global__ void k_level_totals(const u64 *total, int64_t weak_cap, int64_t strong_cap, int *ls)
{
    if (ls[LS_OVERFLOW])
        return;
    const int64_t w = (int64_t)ls[LS_WEAK] + (int64_t)(*total >> 32);
    const int64_t st = (int64_t)(*total & 0xffffffffu);
    if (w > weak_cap || st > strong_cap) {
        ls[LS_OVERFLOW] = 1;
        return;
    }
    ls[LS_BASE] = ls[LS_WEAK], ls[LS_WEAK] = (int)w, ls[LS_STRONG] = (int)st;
}

/* Small trees (L <= LISTS_SMALL_L): the root and every level's lists in one block (a warp per
 * box, a block scan per level, the same entries and order as the launches per level); the
 * totals into ls as k_level_totals leaves them, LS_OVERFLOW if a level does not fit. */
constexpr int LISTS_SMALL_L = 5, LISTS_THREADS = 512, LISTS_ITEMS = 3;
static_assert(LISTS_THREADS * LISTS_ITEMS >= (1 << (2 * LISTS_SMALL_L)) + 1, "one scan per level");

__global__ void __launch_bounds__(LISTS_THREADS)
    k_lists_small(int root, int L, int *begin_a, int *begin_b, int *strong_a, int *strong_b,
                  const int64_t *src_start, const int64_t *trg_start, const double *center,
                  const double *radius, u64 *cnt, u64 *off, int *weak, int *weak_begin,
                  signed char *kind, int64_t weak_cap, int64_t strong_cap, int *ls)
{
    typedef cub::BlockScan<u64, LISTS_THREADS> scan_t;
    __shared__ typename scan_t::TempStorage scan_tmp;
    __shared__ u64 total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = LISTS_THREADS / 32;
    if (threadIdx.x == 0) {
        begin_a[0] = 0, begin_a[1] = root, strong_a[0] = 0;
        weak_begin[0] = weak_begin[1] = 0;
        if (L == 0)
            kind[0] = 0;
    }
    __syncthreads();
    int *prev_begin = begin_a, *cur_begin = begin_b, *prev = strong_a, *cur = strong_b;
    int64_t n_weak = 0, n_strong = root;
    for (int l = 1; l <= L; l++) {
        const int64_t nbl = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
        for (int64_t b = warp; b <= nbl; b += nw)
            connect_box(l, L, 0, b, lane, prev_begin, prev, src_start, trg_start, center, radius,
                        cnt, NULL, NULL, NULL, NULL, 0, NULL, NULL);
        __syncthreads();
        u64 v[LISTS_ITEMS];
        for (int t = 0; t < LISTS_ITEMS; t++) {
            const int64_t b = threadIdx.x * LISTS_ITEMS + t;
            v[t] = b <= nbl ? cnt[b] : 0;
        }
        scan_t(scan_tmp).ExclusiveSum(v, v);
        for (int t = 0; t < LISTS_ITEMS; t++) {
            const int64_t b = threadIdx.x * LISTS_ITEMS + t;
            if (b <= nbl)
                off[b] = v[t];
            if (b == nbl)
                total = v[t];
        }
        __syncthreads();
        const int64_t w = n_weak + (int64_t)(total >> 32), st = (int64_t)(total & 0xffffffffu);
        if (w > weak_cap || st > strong_cap) { /* block-uniform: the host builds them again */
            if (threadIdx.x == 0)
                ls[LS_OVERFLOW] = 1;
            return;
        }
        for (int64_t b = warp; b <= nbl; b += nw)
            connect_box(l, L, 1, b, lane, prev_begin, prev, src_start, trg_start, center, radius,
                        NULL, off, weak, cur, kind, (int)n_weak, weak_begin + f, cur_begin);
        __syncthreads();
        n_weak = w, n_strong = st;
        int *tb = prev_begin;
        prev_begin = cur_begin, cur_begin = tb;
        int *ts = prev;
        prev = cur, cur = ts;
    }
    if (threadIdx.x == 0)
        ls[LS_WEAK] = (int)n_weak, ls[LS_STRONG] = (int)n_strong, ls[LS_OVERFLOW] = 0,
        ls[LS_BASE] = 0;
}

/* A growable device buffer of ints: it starts in the plan's block (owned = 0) and moves to an
 * allocation of its own (owned = 1) only if the lists outgrow the estimate. */
struct ibuf {
    int *d;
    int64_t cap;
    int owned;
};

fmk_status ibuf_reserve(fmk_plan *plan, ibuf *b, int64_t n, int64_t keep, const char *what)
{
    if (n <= b->cap)
        return FMK_OK;
    int64_t cap = n + n / 2 + 1024;
    int *d = NULL;
    fmk_status st = fmk_cuda_alloc(plan, (void **)&d, sizeof(int) * (size_t)cap, what,
                                   (long long)(sizeof(int) * cap));
    if (st != FMK_OK)
        return st;
    if (keep > 0) {
        cudaError_t err = cudaMemcpy(d, b->d, sizeof(int) * (size_t)keep, cudaMemcpyDeviceToDevice);
        if (err != cudaSuccess) {
            cudaFree(d);
            return fmk_cuda_fail(plan, err, "cudaMemcpy (growing a list)");
        }
    }
    if (b->d && b->owned)
        cudaFree(b->d);
    b->d = d, b->cap = cap, b->owned = 1;
    return FMK_OK;
}

} // namespace

fmk_status fmk_cuda_fmm2d_lists(fmk_plan *plan, fmk_fmm2d_gpu *s, const fmk_fmm2d_ws *w)
{
    fmk_status st = FMK_OK;
    const int64_t ns = s->ns, L = s->levels, leaves = s->leaves;
    const long long total = (long long)plan->state_bytes_device;
    int *cnt = w->cnt, *off = w->off;
    int *prev_begin = w->begin_a, *cur_begin = w->begin_b;
    ibuf weak = {w->weak, w->weak_cap, 0};
    ibuf strong[2] = {{w->strong[0], w->strong_cap, 0}, {w->strong[1], w->strong_cap, 0}};
    signed char *kind = w->kind;
    int *lstat = w->lstat;
    int kind_owned = 0;
    void *temp = w->temp;
    const size_t temp_bytes = w->temp_bytes;
    size_t tb = 0;
    int64_t n_weak = 0;
    int prev_n = 0;

    /* the lists, level by level: first with the capacities the block holds and the totals
     * kept on the device (no host round trip per level); if a level does not fit, again with a
     * copy of each level's totals to the host and lists that grow */
    for (int fast = 1; fast >= 0; fast--) {
        const int root = ns > 0 && s->nt > 0 ? 1 : 0;
        if (fast && L <= LISTS_SMALL_L) { /* every level in one launch */
            k_lists_small<<<1, LISTS_THREADS>>>(
                root, (int)L, prev_begin, cur_begin, strong[0].d, strong[1].d, s->d_src_start,
                s->d_trg_start, s->d_center, s->d_radius, reinterpret_cast<u64 *>(cnt),
                reinterpret_cast<u64 *>(off), weak.d, s->d_weak_begin, kind, weak.cap,
                strong[1].cap, lstat);
            CK(cudaGetLastError(), "the connectivity kernel");
            if (L % 2) { /* where the levels' swaps leave the finest level's lists */
                ibuf tmp = strong[0];
                strong[0] = strong[1], strong[1] = tmp;
                int *tp = prev_begin;
                prev_begin = cur_begin, cur_begin = tp;
            }
        }
        if (!fast || L > LISTS_SMALL_L) {
            k_lists_root<<<1, 1>>>(root, (int)L, prev_begin, strong[0].d, s->d_weak_begin, kind,
                                   lstat);
            CK(cudaGetLastError(), "the connectivity kernel");
            n_weak = 0, prev_n = root;
            for (int l = 1; l <= L; l++) {
                const int64_t nbl = (int64_t)1 << (2 * l), f = fmk_fmm2d_first(l);
                u64 *c64 = reinterpret_cast<u64 *>(cnt), *o64 = reinterpret_cast<u64 *>(off);
                int64_t level_base = 0; /* where this level's weak lists start (host totals) */
                k_connect<<<grid_of(32 * (nbl + 1), 128), 128>>>(
                    l, (int)L, 0, prev_begin, strong[0].d, s->d_src_start, s->d_trg_start,
                    s->d_center, s->d_radius, c64, NULL, NULL, NULL, NULL, fast ? lstat : NULL, 0,
                    NULL, NULL);
                CK(cudaGetLastError(), "the connectivity kernel");
                tb = temp_bytes;
                CK(cub::DeviceScan::ExclusiveSum(temp, tb, c64, o64, (int)(nbl + 1)),
                   "cub::DeviceScan (lists)");
                if (fast) {
                    k_level_totals<<<1, 1>>>(o64 + nbl, weak.cap, strong[1].cap, lstat);
                } else {
                    int tot[2];
                    k_totals<<<1, 1>>>(o64 + nbl, cnt);
                    CK(cudaMemcpy(tot, cnt, sizeof tot, cudaMemcpyDeviceToHost),
                       "cudaMemcpy (lists)");
                    if (n_weak + tot[0] > INT32_MAX || tot[1] < 0) {
                        st = fmk_error_set(plan, FMK_ERR_ARG,
                                           "the 2D FMM's lists exceed 2^31 entries");
                        goto done;
                    }
                    CS(ibuf_reserve(plan, &weak, n_weak + tot[0], n_weak, "the weak lists"));
                    CS(ibuf_reserve(plan, &strong[1], tot[1] > 0 ? tot[1] : 1, 0,
                                    "the strong lists"));
                    if (l == L && tot[1] > w->strong_cap) {
                        CS(fmk_cuda_alloc(plan, (void **)&kind, (size_t)tot[1], "the lists",
                                          total));
                        kind_owned = 1;
                    }
                    level_base = n_weak;
                    n_weak += tot[0];
                    prev_n = tot[1];
                }
                k_connect<<<grid_of(32 * (nbl + 1), 128), 128>>>(
                    l, (int)L, 1, prev_begin, strong[0].d, s->d_src_start, s->d_trg_start,
                    s->d_center, s->d_radius, NULL, o64, weak.d, strong[1].d, kind,
                    fast ? lstat : NULL, (int)level_base, s->d_weak_begin + f, cur_begin);
                CK(cudaGetLastError(), "the connectivity kernel");
                ibuf tmp = strong[0];
                strong[0] = strong[1], strong[1] = tmp;
                int *tp = prev_begin;
                prev_begin = cur_begin, cur_begin = tp;
            }
        }
        /* keep the finest level's list starts (the lists themselves stay where they are: in
         * the block unless they outgrew it); the end of the topological phase is then ev[1] */
        CK(cudaMemcpyAsync(s->d_near_begin, prev_begin, 4 * (size_t)(leaves + 1),
                           cudaMemcpyDeviceToDevice),
           "cudaMemcpy (lists)");
        CK(cudaEventRecord(s->ev[1], 0), "cudaEventRecord");
        if (fast) { /* the one wait of the phase: the totals, and whether they fit */
            int *ls = s->h_read;
            CK(cudaMemcpyAsync(ls, lstat, sizeof(int) * LS_COUNT, cudaMemcpyDeviceToHost, 0),
               "the lists");
            CK(cudaStreamSynchronize(0), "the topological phase");
            if (!ls[LS_OVERFLOW]) {
                n_weak = ls[LS_WEAK], prev_n = ls[LS_STRONG];
                break;
            }
        } else {
            CK(cudaEventSynchronize(s->ev[1]), "the topological phase");
        }
    }
    s->d_near = strong[0].d, s->near_owned = strong[0].owned, strong[0].owned = 0;
    s->d_kind = kind, s->kind_owned = kind_owned, kind_owned = 0;
    s->d_weak = weak.d, s->weak_owned = weak.owned, weak.owned = 0;
    s->n_weak = n_weak, s->n_near = prev_n;
done:
    {
        void *bufs[] = {weak.owned ? weak.d : NULL, strong[0].owned ? strong[0].d : NULL,
                        strong[1].owned ? strong[1].d : NULL, kind_owned ? kind : NULL};
        for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
            if (bufs[k] && cudaFree(bufs[k]) != cudaSuccess && st == FMK_OK)
                st = fmk_cuda_fail(plan, cudaGetLastError(), "cudaFree");
    }
    return st;
}
