/* p2p_many.h -- the GPU direct sum of several charge vectors in one pass (p2p_many.cu), for the
 * engine's eval_many (engine.cu). */
#ifndef FMMKIT_DIRECT_CUDA_P2P_MANY_H
#define FMMKIT_DIRECT_CUDA_P2P_MANY_H

#include "cuda/device.h"

/* Vectors one launch carries at most. */
#define FMK_CUDA_MANY_MAX 4

/* One launch of the sum of nv (2 or FMK_CUDA_MANY_MAX) vectors of a 3D radial kernel (laplace,
 * plummer, regularized). */
typedef struct fmk_cuda_many_args {
    int real; /* 4 or 8 */
    fmk_kernel kernel;
    int self, nv, splits;
    int64_t n_pad, m, m_pad;
    const void *d_src, *d_trg; /* the packed points (their charges unused); d_trg NULL: self */
    const void *d_q;           /* nv * n_pad charges in the working precision (vector-major) */
    double *d_pot, *d_grad;    /* vector v's at d_pot + v m, d_grad + 3 v m; either NULL */
    double *d_partial;         /* splits > 1: splits * nv * m * 4 doubles */
    double eps2;
    int pot_exp[FMK_CUDA_MANY_MAX], grad_exp[FMK_CUDA_MANY_MAX]; /* as fmk_cuda_p2p_args' */
    int64_t block0, block1; /* this launch's target blocks (block1 past the last: all) */
    int finish;             /* instead: the splits' partial sums added up into the outputs */
} fmk_cuda_many_args;

#ifdef __cplusplus
extern "C" {
#endif

/* Targets of a block and sources of a tile of the kernel. */
int fmk_cuda_many_block_targets(int real);
int fmk_cuda_many_tile(int real);
/* Source ranges summed apart so that the grid fills the device in whole waves (partial sums of
 * at most 64 MiB, or 4 ranges), for nv vectors; *wave: the target blocks the GPU runs at once. */
int fmk_cuda_many_splits(int real, fmk_kernel kernel, int nv, int64_t n_pad, int64_t m_pad,
                         int device, int64_t *wave);
/* The sum (a's share), or a->finish; on the default stream. */
cudaError_t fmk_cuda_p2p_many(const fmk_cuda_many_args *a);
/* n charges times 2^-exp (exactly) in the working precision into out (n_pad values, zeros past
 * n). */
cudaError_t fmk_cuda_pack_many(int real, int64_t n, int64_t n_pad, const double *d_q, int exp,
                               void *d_out);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_DIRECT_CUDA_P2P_MANY_H */
