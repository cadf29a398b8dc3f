/* sim_cuda.cuh -- what the simulation's .cu files share (sim_cuda.h has the launchers): the
 * device state and the helpers for errors and launch shapes. */
#ifndef FMMKIT_SIM_CUDA_CUH
#define FMMKIT_SIM_CUDA_CUH

#include <stdio.h>

#include <cuda_runtime.h>

#include "sim/cuda/sim_cuda.h"

/* The spline correction's sorted particles: position, charge G m and h = 2.8 s. */
struct fmk_sim_cuda_body {
    double x, y, z, q, h;
};

struct fmk_sim_cuda {
    int device;
    int64_t n;
    int per_particle, spline;
    int cur; /* which half of each double buffer is the state */
    double *d_pos[2], *d_acc[2], *d_pot[2];
    double *d_vel, *d_mass, *d_charge; /* 3n, n, n */
    double *d_soft;                    /* n, or NULL */
    double *d_partial;                 /* the reductions' block results */
    unsigned long long *d_flag;        /* the finite check's first bad index */
    /* the spline's cell list */
    int64_t table;
    uint32_t *d_key[2], *d_idx[2]; /* buckets and particles, unsorted and sorted */
    uint32_t *d_cell_start, *d_cell_end;
    fmk_sim_cuda_body *d_body;
    void *d_sort_temp;
    size_t sort_temp_bytes;
    int64_t bytes;
};

namespace fmk_sim_cuda_detail {

const int THREADS = 256;
/* Reductions run on at most this many blocks (their partial results then fit one block). */
const int REDUCE_BLOCKS = 1024;

inline unsigned blocks_for(int64_t n)
{
    const int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

inline fmk_status fail(cudaError_t err, const char *what, char *msg, size_t cap)
{
    (void)cudaGetLastError();
    snprintf(msg, cap, "the simulation on the GPU: %s: %s", what, cudaGetErrorString(err));
    return err == cudaErrorMemoryAllocation ? FMK_ERR_DEVICE_NOMEM : FMK_ERR_DEVICE;
}

/* The status of the launches just made (and, wait = 1, of their execution). */
inline fmk_status launched(const char *what, char *msg, size_t cap, int wait = 0)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess && wait)
        err = cudaDeviceSynchronize();
    return err == cudaSuccess ? FMK_OK : fail(err, what, msg, cap);
}

} // namespace fmk_sim_cuda_detail

/* reduce.cu, for state.cu: the first bad mass (not finite and > 0), position and velocity
 * (not finite) of device arrays, -1 where none. */
fmk_status fmk_sim_cuda_first_bad(fmk_sim_cuda *d, const double *d_mass, const double *d_pos,
                                  const double *d_vel, int64_t bad[3], char *msg, size_t cap);

#endif /* FMMKIT_SIM_CUDA_CUH */
