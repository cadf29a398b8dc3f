/* state.cu -- the simulation's device state (sim_cuda.h): its buffers, uploads, downloads,
 * device-to-device copies, and the charges G m made on the device. */
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "sim/cuda/sim_cuda.cuh"
#include "sim/spline.h"

using namespace fmk_sim_cuda_detail;

namespace {

__global__ void k_charge(int64_t n, const double *mass, double G, double *charge)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        charge[i] = G * mass[i];
}

/* cudaMalloc of count values of T into *p, counted in d->bytes. */
template <class T> cudaError_t grab(fmk_sim_cuda *d, T **p, int64_t count)
{
    const size_t bytes = (size_t)(count > 0 ? count : 1) * sizeof(T);
    cudaError_t err = cudaMalloc((void **)p, bytes);
    if (err == cudaSuccess)
        d->bytes += (int64_t)bytes;
    else
        *p = NULL;
    return err;
}

} // namespace

void fmk_sim_cuda_free(fmk_sim_cuda *d)
{
    if (!d)
        return;
    cudaSetDevice(d->device);
    void *p[] = {d->d_pos[0],  d->d_pos[1],     d->d_acc[0],   d->d_acc[1], d->d_pot[0],
                 d->d_pot[1],  d->d_vel,        d->d_mass,     d->d_charge, d->d_soft,
                 d->d_partial, d->d_flag,       d->d_key[0],   d->d_key[1], d->d_idx[0],
                 d->d_idx[1],  d->d_cell_start, d->d_cell_end, d->d_body,   d->d_sort_temp};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        cudaFree(p[k]);
    free(d);
}

int64_t fmk_sim_cuda_bytes(const fmk_sim_cuda *d)
{
    return d ? d->bytes : 0;
}

static fmk_status make_spline(fmk_sim_cuda *d, char *msg, size_t cap)
{
    const int64_t n = d->n;
    if (n >= ((int64_t)1 << 31)) { /* CUB's sort counts in int */
        snprintf(msg, cap,
                 "the spline correction on the GPU takes at most 2^31 - 1 particles "
                 "(%lld asked)",
                 (long long)n);
        return FMK_ERR_UNAVAILABLE;
    }
    d->table = fmk_sim_cell_table(n);
    cudaError_t err = cudaSuccess;
    for (int k = 0; k < 2 && err == cudaSuccess; k++) {
        err = grab(d, &d->d_key[k], n);
        if (err == cudaSuccess)
            err = grab(d, &d->d_idx[k], n);
    }
    if (err == cudaSuccess)
        err = grab(d, &d->d_cell_start, d->table);
    if (err == cudaSuccess)
        err = grab(d, &d->d_cell_end, d->table);
    if (err == cudaSuccess)
        err = grab(d, &d->d_body, n);
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, d->sort_temp_bytes, d->d_key[0], d->d_key[1],
                                              d->d_idx[0], d->d_idx[1], (int)n);
    char *temp = NULL;
    if (err == cudaSuccess)
        err = grab(d, &temp, (int64_t)d->sort_temp_bytes);
    d->d_sort_temp = temp;
    return err == cudaSuccess ? FMK_OK : fail(err, "the spline's cell list", msg, cap);
}

fmk_status fmk_sim_cuda_create(fmk_sim_cuda **out, int device, int64_t n, int per_particle,
                               int spline, char *msg, size_t cap)
{
    *out = NULL;
    fmk_sim_cuda *d = (fmk_sim_cuda *)calloc(1, sizeof *d);
    if (!d) {
        snprintf(msg, cap, "the simulation on the GPU: out of host memory");
        return FMK_ERR_NOMEM;
    }
    d->device = device, d->n = n, d->per_particle = per_particle, d->spline = spline;
    cudaError_t err = cudaSetDevice(device);
    for (int k = 0; k < 2 && err == cudaSuccess; k++) {
        if ((err = grab(d, &d->d_pos[k], 3 * n)) == cudaSuccess &&
            (err = grab(d, &d->d_acc[k], 3 * n)) == cudaSuccess)
            err = grab(d, &d->d_pot[k], n);
    }
    /* (steps that do not ask for the potential leave a buffer as it was: never unset) */
    for (int k = 0; k < 2 && err == cudaSuccess; k++)
        err = cudaMemset(d->d_pot[k], 0, (size_t)(n > 0 ? n : 1) * sizeof(double));
    if (err == cudaSuccess)
        err = grab(d, &d->d_vel, 3 * n);
    if (err == cudaSuccess)
        err = grab(d, &d->d_mass, n);
    if (err == cudaSuccess)
        err = grab(d, &d->d_charge, n);
    if (err == cudaSuccess && per_particle)
        err = grab(d, &d->d_soft, n);
    if (err == cudaSuccess)
        err = grab(d, &d->d_partial, (int64_t)REDUCE_BLOCKS * 8);
    if (err == cudaSuccess)
        err = grab(d, &d->d_flag, 4);
    fmk_status st = FMK_OK;
    if (err != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "the state of %lld particles (%.3g GB)", (long long)n,
                 (double)(18 * 8 * n) / 1e9);
        st = fail(err, what, msg, cap);
    } else if (spline) {
        st = make_spline(d, msg, cap);
    }
    if (st != FMK_OK) {
        fmk_sim_cuda_free(d);
        return st;
    }
    *out = d;
    return FMK_OK;
}

fmk_status fmk_sim_cuda_upload(fmk_sim_cuda *d, const double *mass, const double *charge,
                               const double *soft, const double *pos, const double *vel,
                               const double *acc, const double *pot, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    const size_t n = (size_t)d->n, b = sizeof(double);
    cudaError_t err = cudaMemcpy(d->d_mass, mass, n * b, cudaMemcpyHostToDevice);
    if (err == cudaSuccess)
        err = cudaMemcpy(d->d_charge, charge, n * b, cudaMemcpyHostToDevice);
    if (err == cudaSuccess && soft && d->d_soft)
        err = cudaMemcpy(d->d_soft, soft, n * b, cudaMemcpyHostToDevice);
    for (int k = 0; k < 2 && err == cudaSuccess; k++)
        err = cudaMemcpy(d->d_pos[k], pos, 3 * n * b, cudaMemcpyHostToDevice);
    if (err == cudaSuccess)
        err = cudaMemcpy(d->d_vel, vel, 3 * n * b, cudaMemcpyHostToDevice);
    if (err == cudaSuccess && acc)
        err = cudaMemcpy(d->d_acc[d->cur], acc, 3 * n * b, cudaMemcpyHostToDevice);
    if (err == cudaSuccess && pot)
        err = cudaMemcpy(d->d_pot[d->cur], pot, n * b, cudaMemcpyHostToDevice);
    return err == cudaSuccess ? FMK_OK : fail(err, "uploading the state", msg, cap);
}

fmk_status fmk_sim_cuda_copy_in(fmk_sim_cuda *d, const double *d_mass, const double *d_pos,
                                const double *d_vel, double G, int64_t bad[3], char *msg,
                                size_t cap)
{
    cudaSetDevice(d->device);
    fmk_status st = fmk_sim_cuda_first_bad(d, d_mass, d_pos, d_vel, bad, msg, cap);
    if (st != FMK_OK || bad[0] >= 0 || bad[1] >= 0 || bad[2] >= 0)
        return st;
    const size_t n = (size_t)d->n, b = sizeof(double);
    cudaError_t err = cudaMemcpy(d->d_mass, d_mass, n * b, cudaMemcpyDeviceToDevice);
    for (int k = 0; k < 2 && err == cudaSuccess; k++)
        err = cudaMemcpy(d->d_pos[k], d_pos, 3 * n * b, cudaMemcpyDeviceToDevice);
    if (err == cudaSuccess)
        err = cudaMemcpy(d->d_vel, d_vel, 3 * n * b, cudaMemcpyDeviceToDevice);
    if (err != cudaSuccess)
        return fail(err, "copying the device arrays in", msg, cap);
    k_charge<<<blocks_for(d->n), THREADS>>>(d->n, d->d_mass, G, d->d_charge);
    return launched("the charges", msg, cap);
}

fmk_status fmk_sim_cuda_copy_out(const fmk_sim_cuda *d, int device, double *mass, double *pos,
                                 double *vel, double *acc, double *pot, char *msg, size_t cap)
{
    cudaSetDevice(d->device);
    const size_t n = (size_t)d->n, b = sizeof(double);
    const cudaMemcpyKind kind = device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
    struct {
        double *to;
        const double *from;
        size_t bytes;
    } const copies[5] = {{mass, d->d_mass, n * b},
                         {pos, d->d_pos[d->cur], 3 * n * b},
                         {vel, d->d_vel, 3 * n * b},
                         {acc, d->d_acc[d->cur], 3 * n * b},
                         {pot, d->d_pot[d->cur], n * b}};
    cudaError_t err = cudaSuccess;
    for (int k = 0; k < 5 && err == cudaSuccess; k++)
        if (copies[k].to)
            err = cudaMemcpy(copies[k].to, copies[k].from, copies[k].bytes, kind);
    return err == cudaSuccess ? FMK_OK : fail(err, "copying the state out", msg, cap);
}

void fmk_sim_cuda_next(fmk_sim_cuda *d, double **d_pos, double **d_acc, double **d_pot)
{
    *d_pos = d->d_pos[1 - d->cur];
    *d_acc = d->d_acc[1 - d->cur];
    *d_pot = d->d_pot[1 - d->cur];
}

void fmk_sim_cuda_current(fmk_sim_cuda *d, double **d_pos, double **d_acc, double **d_pot)
{
    *d_pos = d->d_pos[d->cur];
    *d_acc = d->d_acc[d->cur];
    *d_pot = d->d_pot[d->cur];
}

const double *fmk_sim_cuda_charge(const fmk_sim_cuda *d)
{
    return d->d_charge;
}

void fmk_sim_cuda_swap(fmk_sim_cuda *d)
{
    d->cur = 1 - d->cur;
}
