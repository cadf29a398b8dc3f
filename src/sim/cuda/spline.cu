/* spline.cu -- GADGET's spline correction on the GPU (spline.c on the CPU, with the same
 * formulas and cell list from spline.h):
 *   1. each particle's bucket (its cell of side h_max, hashed), and its index;
 *   2. CUB's radix sort of (bucket, index) pairs: stable, so a bucket lists its particles in
 *      index order, as the CPU's counting sort does;
 *   3. each bucket's range in the sorted order;
 *   4. the particles gathered in that order (position, charge, h), so that a bucket's
 *      particles are contiguous in memory;
 *   5. one thread per particle visits the buckets of its 27 neighbour cells (each once) and
 *      adds the correction of every pair closer than max(h_i, h_j) to its own acceleration and
 *      potential (pot NULL: the acceleration alone, for an evaluation that did not ask for the
 *      potential), testing 32 candidates at a time before the spline's arithmetic of those
 *      kept (k_correct), with 1/r by rsqrt and no divisions: no atomics, the same order every
 *      time, so the result is reproducible bit for bit (restarts need it). */
#include <cub/device/device_radix_sort.cuh>

#include "sim/cuda/sim_cuda.cuh"
#include "sim/spline.h"

using namespace fmk_sim_cuda_detail;

namespace {

__global__ void k_buckets(int64_t n, const double *pos, double inv_cell, uint64_t mask,
                          uint32_t *key, uint32_t *idx)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const double *x = pos + 3 * i;
        key[i] = fmk_sim_cell_bucket(fmk_sim_cell_coord(x[0], inv_cell),
                                     fmk_sim_cell_coord(x[1], inv_cell),
                                     fmk_sim_cell_coord(x[2], inv_cell), mask);
        idx[i] = (uint32_t)i;
    }
}

/* Bucket b holds sorted places [start[b], end[b]) (both 0 when empty: memset first). */
__global__ void k_ranges(int64_t n, const uint32_t *key, uint32_t *start, uint32_t *end)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x) {
        const uint32_t b = key[k];
        if (k == 0 || key[k - 1] != b)
            start[b] = (uint32_t)k;
        if (k == n - 1 || key[k + 1] != b)
            end[b] = (uint32_t)(k + 1);
    }
}

__global__ void k_gather(int64_t n, const uint32_t *idx, const double *pos, const double *charge,
                         const double *soft, double s, fmk_sim_cuda_body *body)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x) {
        const uint32_t i = idx[k];
        fmk_sim_cuda_body b;
        b.x = pos[3 * (int64_t)i], b.y = pos[3 * (int64_t)i + 1], b.z = pos[3 * (int64_t)i + 2];
        b.q = charge[i];
        b.h = FMK_SIM_SPLINE_H * (soft ? soft[i] : s);
        body[k] = b;
    }
}

/* GADGET's spline correction (spline.h's fmk_sim_spline_delta) for 0 <= r < h, without
 * divisions: hinv = 1 / h given, 1 / r by rsqrt (r = 0: phi_s(0), 0). */
__device__ __forceinline__ void spline_delta(double r2, double h, double hinv, double *dphi,
                                             double *dg)
{
    if (!(r2 > 0)) {
        *dphi = 2.8 * hinv;
        *dg = 0;
        return;
    }
    const double rinv = rsqrt(r2), r = r2 * rinv, u = r * hinv, h3inv = hinv * hinv * hinv;
    const double rinv3 = rinv * rinv * rinv;
    double phi, g;
    if (u < 0.5) {
        phi = -hinv * (-2.8 + u * u * (16.0 / 3.0 + u * u * (6.4 * u - 9.6)));
        g = h3inv * (32.0 / 3.0 + u * u * (32.0 * u - 38.4));
    } else {
        const double uinv = h * rinv; /* 1 / u */
        phi = -hinv * (-3.2 + (1.0 / 15.0) * uinv +
                       u * u * (32.0 / 3.0 + u * (-16.0 + u * (9.6 - 32.0 / 15.0 * u))));
        g = h3inv * (64.0 / 3.0 - 48.0 * u + 38.4 * u * u - 32.0 / 3.0 * u * u * u) -
            (1.0 / 15.0) * rinv3;
    }
    *dphi = phi - rinv;
    *dg = g - rinv3;
}

/* Each particle (one thread, in bucket order: a warp's threads mostly share a cell and so
 * their candidates) takes its 27 neighbour cells' buckets (each once) in chunks of 32
 * candidates: first the distance test of each, into a mask, then the pairs within h in
 * increasing order, so that a warp runs the spline's arithmetic as often as its busiest
 * thread has such pairs rather than once for every candidate that any thread keeps. */
__global__ void k_correct(int64_t n, const fmk_sim_cuda_body *body, const uint32_t *idx,
                          const uint32_t *start, const uint32_t *end, uint64_t mask,
                          double inv_cell, double *acc, double *pot)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * blockDim.x) {
        const fmk_sim_cuda_body me = body[k];
        const double me_hinv = 1 / me.h;
        const int64_t cx = fmk_sim_cell_coord(me.x, inv_cell),
                      cy = fmk_sim_cell_coord(me.y, inv_cell),
                      cz = fmk_sim_cell_coord(me.z, inv_cell);
        uint32_t seen[27];
        int n_seen = 0;
        double dp = 0, ax = 0, ay = 0, az = 0;
        for (int o = 0; o < 27; o++) {
            const uint32_t b =
                fmk_sim_cell_bucket(cx + o % 3 - 1, cy + (o / 3) % 3 - 1, cz + o / 9 - 1, mask);
            bool repeat = false;
            for (int r = 0; r < n_seen; r++)
                repeat |= seen[r] == b;
            if (repeat)
                continue;
            seen[n_seen++] = b;
            const uint32_t last = end[b];
            for (uint32_t base = start[b]; base < last; base += 32) {
                const uint32_t m = last - base < 32u ? last - base : 32u;
                unsigned keep = 0;
                for (uint32_t j = 0; j < m; j++) {
                    const fmk_sim_cuda_body o = body[base + j];
                    const double dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
                    const double r2 = dx * dx + dy * dy + dz * dz;
                    const double h = me.h > o.h ? me.h : o.h;
                    if (r2 < h * h && base + j != (uint64_t)k)
                        keep |= 1u << j;
                }
                while (keep) {
                    const uint32_t j = (uint32_t)(__ffs((int)keep) - 1);
                    keep &= keep - 1;
                    const fmk_sim_cuda_body o = body[base + j];
                    const double dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
                    const double r2 = dx * dx + dy * dy + dz * dz;
                    const double h = me.h > o.h ? me.h : o.h;
                    double dphi, dg;
                    spline_delta(r2, h, h == me.h ? me_hinv : 1 / h, &dphi, &dg);
                    dp += o.q * dphi;
                    ax += o.q * dg * dx, ay += o.q * dg * dy, az += o.q * dg * dz;
                }
            }
        }
        const int64_t i = idx[k];
        if (pot)
            pot[i] += dp;
        acc[3 * i] += ax, acc[3 * i + 1] += ay, acc[3 * i + 2] += az;
    }
}

} // namespace

fmk_status fmk_sim_cuda_spline(fmk_sim_cuda *d, const double *pos, double *acc, double *pot,
                               double soft, double h_max, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    const int64_t n = d->n;
    const uint64_t mask = (uint64_t)d->table - 1;
    const double inv_cell = 1 / h_max;
    int bits = 0;
    while (((int64_t)1 << bits) < d->table)
        bits++;
    k_buckets<<<blocks_for(n), THREADS>>>(n, pos, inv_cell, mask, d->d_key[0], d->d_idx[0]);
    cudaError_t err = cudaGetLastError();
    size_t temp = d->sort_temp_bytes;
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(d->d_sort_temp, temp, d->d_key[0], d->d_key[1],
                                              d->d_idx[0], d->d_idx[1], (int)n, 0, bits);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(d->d_cell_start, 0, (size_t)d->table * sizeof(uint32_t));
    if (err == cudaSuccess)
        err = cudaMemsetAsync(d->d_cell_end, 0, (size_t)d->table * sizeof(uint32_t));
    if (err != cudaSuccess)
        return fail(err, "the spline's cell list", msg, cap);
    k_ranges<<<blocks_for(n), THREADS>>>(n, d->d_key[1], d->d_cell_start, d->d_cell_end);
    k_gather<<<blocks_for(n), THREADS>>>(n, d->d_idx[1], pos, d->d_charge, d->d_soft, soft,
                                         d->d_body);
    k_correct<<<blocks_for(n), THREADS>>>(n, d->d_body, d->d_idx[1], d->d_cell_start, d->d_cell_end,
                                          mask, inv_cell, acc, pot);
    return launched("the spline correction", msg, cap);
}
