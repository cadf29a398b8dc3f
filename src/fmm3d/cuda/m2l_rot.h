/*
 * m2l_rot.h -- the rotation-based M2L of the GPU 3D FMM (m2l_rot.cu), for orders where one
 * dense matrix per V-list direction ((p + 1)^2 (p + 2)^2 doubles: 55 MB at p = 50) no longer
 * fits: point and shoot (fmm3d_ops.h), the source's multipole rotated so that the translation
 * lies along +z, translated along z, rotated back, O(p^3) per V entry. docs/fmm3d_gpu.md,
 * "High orders: rotation-based M2L".
 *
 * Tables (built on the host with fmm3d_ops.c, once per order and set of directions, kept with
 * the plan's state as the dense matrices are): per direction slot its phases cos(m phi),
 * sin(m phi); per polar angle in use the Wigner matrices of fmk_fmm3d_rot_init, each degree's
 * four blocks transposed so that the threads of an output coefficient's neighbours read
 * neighbouring doubles; per distance in use the coaxial M2L (fmk_fmm3d_m2l_zmat) as a
 * (p + 1) x ncoef matrix, row j the weights of input degree j in every output coefficient.
 */
#ifndef FMMKIT_CUDA_FMM3D_ROT_H
#define FMMKIT_CUDA_FMM3D_ROT_H

#include <stdint.h>

#include "fmm3d/fmm3d.h"
#include "fmm3d/fmm3d_ops.h"
#include "tree/cuda/tree3d_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fmk_cuda_fmm3d_rot {
    int order;
    int n_slots, n_angles, n_dist;
    int64_t wig_size, z_size; /* doubles of one polar angle's matrices, one distance's */
    double *d_tab;            /* phases (n_slots 2 (p + 1)) | Wigner | coaxial matrices */
    int32_t *d_slot;          /* per slot: its polar angle and distance (2 int32) */
    int64_t bytes;            /* device bytes held */
} fmk_cuda_fmm3d_rot;

/* Device bytes of the tables for order p and n_slots directions (an upper bound), before
 * allocating. */
int64_t fmk_cuda_fmm3d_rot_bytes(int order, int n_slots);

/* Builds the tables for the V directions dir_of_slot[0 .. n_slots) (fmm3d.h's direction index,
 * target - source in box sides) with the operators ops (order p) into *r, which must be zeroed
 * or freed. total: the plan's device bytes, for the out-of-memory message. On failure *r holds
 * nothing. */
fmk_status fmk_cuda_fmm3d_rot_build(fmk_plan *plan, const fmk_fmm3d_ops_ctx *ops,
                                    const int32_t *dir_of_slot, int n_slots, long long total,
                                    fmk_cuda_fmm3d_rot *r);

/* Frees the tables and zeroes *r; safe on a zeroed one. */
void fmk_cuda_fmm3d_rot_free(fmk_cuda_fmm3d_rot *r);

/* L[b] += the M2L of the multipoles M of b's V entries, scaled by 1 / side(b), for the n_vnodes
 * boxes vnodes (lists.h: V rows v_begin / v, slots v_slot; cube: centre and side), a
 * block per box, on stream st. M and L hold (p + 1)(p + 2) doubles per node. */
cudaError_t fmk_cuda_fmm3d_m2l_rot(const fmk_cuda_fmm3d_rot *r, int64_t n_vnodes,
                                   const int32_t *d_vnodes, const int32_t *d_v_begin,
                                   const int32_t *d_v, const int16_t *d_v_slot,
                                   const real4d *d_cube, const double *d_M, double *d_L,
                                   cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_CUDA_FMM3D_ROT_H */
