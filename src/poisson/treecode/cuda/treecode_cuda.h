/* treecode_cuda.h -- what the treecode's CUDA files share (C++ only): the brick kernels' shape,
 * the GPU part's state, and the far part for Psi alone with the order a template argument (cuda/far.cu). */
#ifndef FMMKIT_POISSON_TREECODE_CUDA_H
#define FMMKIT_POISSON_TREECODE_CUDA_H

#include "cuda/device.h"
#include "fmm3d/cuda/fmm3d_cuda.h" /* tabs, real4d */
#include "poisson/treecode/treecode.h"

#define TC_THREADS 128 /* threads per brick */
#define TC_PTS 4       /* points per thread: 4 x 128 = 512 = 8^3 */
#define TC_FAST_ORDER_MAX 16
/* The direct part: points per thread (a brick's 512 over 512 / TC_DIRECT_PTS threads, which
 * also load one source each per tile and one range each per chunk of the range list). */
#ifndef TC_DIRECT_PTS
#define TC_DIRECT_PTS 4
#endif
#define TC_DIRECT_THREADS (512 / TC_DIRECT_PTS)
/* The direct kernel's launch bounds: blocks per SM it is compiled for (1: registers free). */
#ifndef TC_DIRECT_MIN_BLOCKS
#define TC_DIRECT_MIN_BLOCKS 1
#endif
#define TC_ORDER_MAX 20 /* the general far kernel's highest order */

/* The GPU's part of a treecode solve (treecode.h): made in eval.cu, which holds the plans,
 * sources and results; resident.cu adds the solve whose omega and results stay on the GPU. */
struct fmk_tc_gpu {
    fmk_tc_gpu_args args;
    int device, nc, fp32;
    cudaStream_t stream, stream2; /* the direct part; the multipoles' upload and the far part */
    cudaEvent_t ev[8]; /* direct start, direct end, far end, far start (hybrid: downloads
                        * start), upload start, all done, multipoles start, multipoles end */
    int64_t n_points;
    /* sources */
    int64_t n_src, cap32, cap64;
    float4 *f_xyzw; /* x, y, z, w0 (fp32) */
    float2 *f_w12;
    real4d *d_xyzw; /* fp64 */
    double2 *d_w12;
    double *h_src, *d_stage; /* pinned staging and its device copy: x, y, z, w0, w1, w2 */
    int64_t h_src_cap, stage_cap;
    /* plans and tree */
    int64_t n_bricks, n_direct, n_far, n_nodes;
    fmk_tc_brick *bricks;
    int64_t *direct_start, *direct_range, *far_start;
    int32_t *far_node;
    real4d *node; /* centre, scale */
    double *multipole;
    int64_t multipole_len;
    int order;
    double *tabs_mem;
    tabs tb;
    double *sq;
    /* outputs */
    double *pot, *u;
    double *h_out; /* pinned: nc + 3 per point */
    int want_pot, want_u, far; /* far: the far part was launched */
    /* the solve with omega on the device (resident.cu) */
    int64_t *d_point;   /* n_src: each source's field index (Morton order) */
    double *d_volume;   /* n_src: h^3 of each source's box */
    double *d_w;        /* nc * n_src: the weights, w[a n + j] */
    double *h_w;        /* pinned: the same on the host, for the CPU's multipoles */
    int64_t resident_cap; /* sources d_w and h_w hold room for */
    unsigned long long *d_count; /* 2 counters of the support's check */
    /* the multipoles on the GPU (moments.cu) */
    int64_t n_items;        /* work items: a node's sources in chunks */
    int32_t *item_node;     /* n_items */
    int64_t *item_range;    /* 2 per item: sources [begin, end) */
    int64_t *item_first;    /* n_nodes + 1: node k's items */
    double *partial;        /* n_items expansions (all components) */
    int64_t partial_len;
    int moments_ready;      /* this solve's multipoles are on the GPU (fmk_tc_gpu_far uses them) */
    int64_t bytes;
};

/* moments.cu: the work items of the tree's multipoles (at the plans' upload: needs g->node), and
 * every node's multipoles from the sources on the GPU (order <= TC_FAST_ORDER_MAX), launched on
 * stream2 after the direct part's start event (the weights are in place by then): positions in
 * g->d_stage, weights w (w[a n_src + j]; NULL: those uploaded in g->d_stage). */
fmk_status fmk_tc_gpu_moment_items(fmk_poisson *s, struct fmk_tc_gpu *g, const fmk_tc_tree *t);
fmk_status fmk_tc_gpu_moments(fmk_poisson *s, struct fmk_tc_gpu *g, const double *w);

/* The far part of bricks b0 .. b0 + nb for Psi alone (pot += , nc per point) at an order
 * 0 .. TC_FAST_ORDER_MAX, in fp32 (fp32 = 1) or fp64, launched on st; cudaErrorInvalidValue for
 * another order. */
cudaError_t fmk_tc_far_psi(cudaStream_t st, int order, int nc, int fp32, int64_t b0, unsigned nb,
                           const fmk_tc_brick *bricks, const int64_t *fstart, const int32_t *fnode,
                           const real4d *node, const double *multipole, double *pot);

/* eval.cu: the solver's message for a failed CUDA call (FMK_ERR_DEVICE_NOMEM for an
 * allocation, else FMK_ERR_DEVICE), and TRY, which returns it from a function with s in scope. */
fmk_status fmk_tc_cuda_fail(fmk_poisson *s, cudaError_t err, const char *what);
#define TRY(call, what)                                                                       \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            return fmk_tc_cuda_fail(s, e_, what);                                             \
    } while (0)

/* upload.cu: device array *p freed and made again at bytes (counted in g->bytes). */
cudaError_t fmk_tc_dev_array(struct fmk_tc_gpu *g, void **p, size_t bytes);

/* eval.cu: waits for the GPU's part to end on streams last and g->stream, polling the solver's
 * stop request (FMK_ERR_INTERRUPTED once the queued work is done); the kernels' seconds of the
 * solve just waited for (fmk_tc_gpu_collect's kernel_seconds, 4 values). */
fmk_status fmk_tc_gpu_wait(fmk_poisson *s, struct fmk_tc_gpu *g, cudaStream_t last);
void fmk_tc_gpu_times(const struct fmk_tc_gpu *g, double kernel_seconds[4]);

#endif /* FMMKIT_POISSON_TREECODE_CUDA_H */
