/* resolution.cu -- the resolution guard (tree/resolution.h) on the GPU: the estimate's sums
 * over a device octree's points in Morton order, one thread a point, with the terms of
 * fmk_resolution_point (shared with the CPU), reduced per warp into a few atomics.
 *
 * The octree orders points by 21-bit keys; points that share a key keep their index order.
 * A first pass counts the neighbours along that order that are out of Morton order at the
 * full fp64 resolution, and the coincident ones. Only when there are any (clusters far below
 * the key's cell, repeated points) does the guard pay for more: a stable merge sort of a copy
 * of the order at full resolution (CUB), and the runs of coincident points, found by a scan,
 * so that a run shares its nearest distinct neighbours as on the CPU. */
#include <math.h>
#include <string.h>

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda/device.h"
#include "tree/resolution.h"

namespace {

enum { MAX_WINDOWS = 40, SAMPLE_ALL = 1 << 14, SUMS = 6 };

/* What every thread reads. */
struct res_args {
    int64_t n;
    const int32_t *order;
    const int32_t *run_lo,
        *run_hi; /* NULL: no coincident points; else p's run [lo[p], hi[lo[p]]) */
    const double *x;
    double scale, s2;
    double frame_unit, local_unit;
    int64_t local_points, stride;
    int nw;
    double w[MAX_WINDOWS];
};

/* A mapped coordinate as the integer (x - 1) 2^52 (resolution.c's grid). */
__device__ uint64_t grid_of(double x)
{
    double t = (x - 1.0) * 0x1p52;
    t = t < 0 ? 0 : t > 0x1p52 - 1 ? 0x1p52 - 1 : t;
    return (uint64_t)t;
}

__device__ void load(const res_args &a, int64_t p, uint64_t c[3])
{
    const double *x = a.x + 3 * (int64_t)a.order[p];
    for (int k = 0; k < 3; k++)
        c[k] = grid_of(x[k]);
}

/* Morton order at the grid's resolution, x highest at each bit (resolution.c's fine_compare):
 * the axis whose difference has the highest bit decides. */
__device__ int fine_compare(const double *x, int32_t i, int32_t j)
{
    uint64_t a[3], b[3];
    for (int k = 0; k < 3; k++)
        a[k] = grid_of(x[3 * (int64_t)i + k]), b[k] = grid_of(x[3 * (int64_t)j + k]);
    return fmk_resolution_fine_compare(a, b);
}

struct fine_less {
    const double *x;
    __device__ bool operator()(int32_t i, int32_t j) const { return fine_compare(x, i, j) < 0; }
};

/* counts[0]: neighbours out of fine order; counts[1]: coincident neighbours. */
__global__ void k_survey(int64_t n, const int32_t *order, const double *x,
                         unsigned long long *counts)
{
    unsigned long long bad = 0, same = 0;
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p + 1 < n;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int c = fine_compare(x, order[p], order[p + 1]);
        bad += c > 0, same += c == 0;
    }
    for (int off = 16; off > 0; off /= 2) {
        bad += __shfl_down_sync(0xffffffffu, bad, off);
        same += __shfl_down_sync(0xffffffffu, same, off);
    }
    if ((threadIdx.x & 31) == 0 && (bad || same)) {
        atomicAdd(counts, bad);
        atomicAdd(counts + 1, same);
    }
}

/* lo[p] = p where a run of coincident points starts, else 0 (a max-scan fills it in). */
__global__ void k_run_starts(int64_t n, const int32_t *order, const double *x, int32_t *lo)
{
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n;
         p += (int64_t)gridDim.x * blockDim.x)
        lo[p] = p == 0 || fine_compare(x, order[p - 1], order[p]) != 0 ? (int32_t)p : 0;
}

/* hi[a] = the end of the run that starts at a. */
__global__ void k_run_ends(int64_t n, const int32_t *lo, int32_t *hi)
{
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n;
         p += (int64_t)gridDim.x * blockDim.x)
        if (p == n - 1 || lo[p + 1] != lo[p])
            hi[lo[p]] = (int32_t)(p + 1);
}

struct max_op {
    __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

/* The side of the smallest dyadic box holding sorted points i and j (frame units), 0 when
 * they coincide. */
__device__ double side_of(const res_args &a, int64_t i, int64_t j)
{
    uint64_t ci[3], cj[3];
    load(a, i, ci), load(a, j, cj);
    const uint64_t diff = (ci[0] ^ cj[0]) | (ci[1] ^ cj[1]) | (ci[2] ^ cj[2]);
    if (!diff)
        return 0;
    const int bits = 64 - __clzll((long long)diff);
    return a.scale * __longlong_as_double((long long)(1023 - 52 + bits) << 52);
}

__device__ double window_side(const res_args &a, int64_t p, int64_t w)
{
    int64_t lo = p - w / 2;
    lo = lo < 0 ? 0 : lo;
    int64_t hi = lo + w - 1;
    if (hi > a.n - 1)
        hi = a.n - 1, lo = hi - w + 1 < 0 ? 0 : hi - w + 1;
    return side_of(a, lo, hi);
}

__device__ double local_side(const res_args &a, int64_t p, int64_t w)
{
    const int64_t lo = p - w + 1 < 0 ? 0 : p - w + 1;
    const int64_t hi = p + w - 1 > a.n - 1 ? a.n - 1 : p + w - 1;
    const double s0 = side_of(a, lo, p), s1 = side_of(a, p, hi);
    return s0 == 0 ? s1 : s1 == 0 ? s0 : fmin(s0, s1);
}

/* sums: E (full unit), P, G (full unit), Q, E and G with the frame's unit alone; closest: the
 * smallest neighbour distance as the bits of a non-negative double (ordered as integers). */
__global__ void k_resolution(const res_args a, double *sums, unsigned long long *closest)
{
    double v[SUMS] = {0, 0, 0, 0, 0, 0}, rmin = INFINITY;
    const int local = a.local_unit > 0 && a.local_points > 1;
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < a.n;
         p += (int64_t)gridDim.x * blockDim.x) {
        uint64_t cp[3];
        load(a, p, cp);
        double r2 = INFINITY;
        /* the run of coincident points [lo, hi) shares its nearest distinct neighbours */
        const int64_t lo = a.run_lo ? a.run_lo[p] : p, hi = a.run_lo ? a.run_hi[lo] : p + 1;
        const int64_t near4[4] = {lo - 2, lo - 1, hi, hi + 1};
        for (int t = 0; t < 4; t++) {
            const int64_t q = near4[t];
            if (q < 0 || q >= a.n)
                continue;
            uint64_t cq[3];
            load(a, q, cq);
            double d2 = 0;
            for (int k = 0; k < 3; k++) {
                const double d = ((double)cp[k] - (double)cq[k]) * 0x1p-52;
                d2 += d * d;
            }
            if (d2 < r2)
                r2 = d2;
        }
        const double r = a.scale * sqrt(r2);
        rmin = fmin(rmin, r);
        const double near = local ? 2 * local_side(a, p, a.local_points) : 0;
        double t[6] = {0, 0, 0, 0, 0, 0}, h[MAX_WINDOWS];
        fmk_resolution_point(3, r, a.s2, near, a.w, h, 0, t);
        if (p % a.stride == 0) {
            double tw[6] = {0, 0, 0, 0, 0, 0};
            for (int k = 0; k < a.nw; k++)
                h[k] = window_side(a, p, (int64_t)a.w[k]);
            fmk_resolution_point(3, INFINITY, a.s2, near, a.w, h, a.nw, tw);
            for (int k = 0; k < 6; k++)
                t[k] += (double)a.stride * tw[k];
        }
        const double dn = a.frame_unit + a.local_unit * near / 2;
        const double dn2 = dn * dn, df2 = a.frame_unit * a.frame_unit;
        v[0] += dn2 * t[0] + df2 * t[1], v[1] += t[4];
        v[2] += dn2 * t[2] + df2 * t[3], v[3] += t[5];
        v[4] += df2 * (t[0] + t[1]), v[5] += df2 * (t[2] + t[3]);
    }
    for (int off = 16; off > 0; off /= 2) {
        for (int k = 0; k < SUMS; k++)
            v[k] += __shfl_down_sync(0xffffffffu, v[k], off);
        rmin = fmin(rmin, __shfl_down_sync(0xffffffffu, rmin, off));
    }
    if ((threadIdx.x & 31) == 0) {
        for (int k = 0; k < SUMS; k++)
            atomicAdd(sums + k, v[k]);
        atomicMin(closest, (unsigned long long)__double_as_longlong(rmin));
    }
}

} // namespace

/* The fine order and the runs of coincident points, in one allocation (ws): the order, lo, hi
 * and CUB's temporary storage. Sets a->order, a->run_lo, a->run_hi. */
static cudaError_t fine_order(fmk_plan *plan, res_args *a, int resort, int runs, void **ws,
                              fmk_status *st)
{
    const int64_t n = a->n;
    int32_t *ord = NULL, *lo = NULL, *hi = NULL;
    size_t sort_bytes = 0, scan_bytes = 0;
    cudaError_t err = cudaSuccess;
    if (resort)
        err = cub::DeviceMergeSort::StableSortKeys(NULL, sort_bytes, ord, n, fine_less{a->x});
    if (err == cudaSuccess && runs)
        err = cub::DeviceScan::InclusiveScan(NULL, scan_bytes, lo, lo, max_op{}, n);
    if (err != cudaSuccess)
        return err;
    const size_t nb = ((size_t)n * sizeof(int32_t) + 255) / 256 * 256;
    const size_t temp = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    const size_t bytes = (resort ? nb : 0) + (runs ? 2 * nb : 0) + temp;
    *st = fmk_cuda_alloc(plan, ws, bytes, "the resolution check's fine order", (long long)bytes);
    if (*st != FMK_OK)
        return cudaSuccess;
    char *w = (char *)*ws;
    const int64_t blocks = (n + 255) / 256;
    const unsigned grid = (unsigned)(blocks < 4096 ? blocks : 4096);
    if (resort) {
        ord = (int32_t *)w, w += nb;
        err = cudaMemcpy(ord, a->order, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToDevice);
        if (err == cudaSuccess)
            err = cub::DeviceMergeSort::StableSortKeys(w + (runs ? 2 * nb : 0), sort_bytes, ord, n,
                                                       fine_less{a->x});
        if (err != cudaSuccess)
            return err;
        a->order = ord;
    }
    if (runs) {
        lo = (int32_t *)w, hi = (int32_t *)(w + nb), w += 2 * nb;
        k_run_starts<<<grid, 256>>>(n, a->order, a->x, lo);
        err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cub::DeviceScan::InclusiveScan(w, scan_bytes, lo, lo, max_op{}, n);
        if (err == cudaSuccess) {
            k_run_ends<<<grid, 256>>>(n, lo, hi);
            err = cudaGetLastError();
        }
        a->run_lo = lo, a->run_hi = hi;
    }
    return err;
}

fmk_status fmk_cuda_resolution_check(fmk_plan *plan, const char *method,
                                     const fmk_resolution_opts *o, int64_t n,
                                     const int32_t *d_order, const double *d_x, double scale)
{
    if (n < 2)
        return FMK_OK;
    res_args a;
    memset(&a, 0, sizeof a);
    a.n = n, a.order = d_order, a.x = d_x, a.scale = scale;
    a.s2 = plan->frame.softening * plan->frame.softening;
    /* points on a grid the frame holds mapped exactly; the shrunk root rounds once more */
    a.frame_unit = (plan->frame.exact ? 0 : o->frame_unit) + (scale > 1 ? 0x1p-53 * scale : 0);
    /* a softened kernel whose softening bounds the estimate below tol: nothing to survey (local
     * boxes are at most scale wide: side_of) */
    if (fmk_resolution_softened_meets(plan->kernel, o, plan->frame.softening, a.frame_unit,
                                      scale > 1 ? scale : 1))
        return FMK_OK;
    a.local_unit = o->local_unit, a.local_points = o->local_points;
    a.stride = n > SAMPLE_ALL ? n / SAMPLE_ALL : 1;
    for (int64_t m = 8; m < n && a.nw < MAX_WINDOWS - 1; m *= 8)
        a.w[a.nw++] = (double)m;
    a.w[a.nw++] = (double)n;
    void *d_out = NULL, *d_ws = NULL;
    const size_t bytes = SUMS * sizeof(double) + 3 * sizeof(unsigned long long);
    fmk_status st = fmk_cuda_alloc(plan, &d_out, bytes, "the resolution check", (long long)bytes);
    if (st != FMK_OK)
        return st;
    double *d_sums = (double *)d_out;
    unsigned long long *d_closest = (unsigned long long *)(d_sums + SUMS),
                       *d_counts = d_closest + 1;
    double h_sums[SUMS];
    unsigned long long h_closest = 0, h_counts[2] = {0, 0};
    const int64_t blocks = (n + 255) / 256;
    const unsigned grid = (unsigned)(blocks < 4096 ? blocks : 4096);
    cudaError_t err = cudaMemset(d_sums, 0, SUMS * sizeof(double));
    const double inf = INFINITY;
    if (err == cudaSuccess)
        err = cudaMemcpy(d_closest, &inf, sizeof inf, cudaMemcpyHostToDevice);
    if (err == cudaSuccess)
        err = cudaMemset(d_counts, 0, 2 * sizeof(unsigned long long));
    if (err == cudaSuccess) {
        k_survey<<<grid, 256>>>(n, d_order, d_x, d_counts);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpy(h_counts, d_counts, sizeof h_counts, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess && (h_counts[0] || h_counts[1]))
        err = fine_order(plan, &a, h_counts[0] > 0, h_counts[1] > 0, &d_ws, &st);
    if (err == cudaSuccess && st == FMK_OK) {
        k_resolution<<<grid, 256>>>(a, d_sums, d_closest);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess && st == FMK_OK)
        err = cudaMemcpy(h_sums, d_sums, sizeof h_sums, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess && st == FMK_OK)
        err = cudaMemcpy(&h_closest, d_closest, sizeof h_closest, cudaMemcpyDeviceToHost);
    cudaFree(d_ws);
    cudaFree(d_out);
    if (st != FMK_OK)
        return st;
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the resolution check");
    fmk_resolution_est e;
    const double full[4] = {h_sums[0], h_sums[1], h_sums[2], h_sums[3]};
    const double frame[4] = {h_sums[4], h_sums[1], h_sums[5], h_sums[3]};
    fmk_resolution_finish(full, &e.pot, &e.grad);
    double fp, fg;
    fmk_resolution_finish(frame, &fp, &fg);
    const double total = e.pot + e.grad;
    e.local_part = total > 0 ? 1 - (fp + fg) / total : 0;
    memcpy(&e.closest, &h_closest, sizeof e.closest);
    return fmk_resolution_verdict(plan, method, o, &e);
}
