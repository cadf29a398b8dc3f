/*
 * device.h -- what every GPU engine shares (device.cu, frame.cu): errors, allocation (the one
 * place a device or pinned host allocation is made, with its message and its failure on
 * demand), interrupt checks, device selection, the shared knobs "cuda.*", the device frame;
 * and the GPU direct engine's state and launchers (direct/cuda).
 *
 * Device layout: every source is one 4-vector in the working precision (float or double),
 *     laplace, plummer, regularized: (x, y, z, q)
 *     log2d:                         (x, y, 0, q)
 *     cauchy2d:                      (x, y, Im Gamma, Re Gamma)
 * so one 16-byte (fp32) or 32-byte (fp64) load brings a whole source into shared memory. The
 * source array is padded to a multiple of FMK_CUDA_PAD with points at the origin (outside the
 * box frame's [1, 2] cube; in fp64's exact frame a point like any other) and zero charges, so
 * the kernels run without bounds checks (a zero charge adds nothing wherever it sits: no pair is
 * closer than the fast loops take, or the plan is careful); targets, when they are not the
 * sources, are padded the same way.
 */
#ifndef FMMKIT_CUDA_INTERNAL_H
#define FMMKIT_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp32 laplace works on coordinates scaled by 2^23 and charges scaled by a power of two that
 * brings the largest |q| into [1, 2) (p2p.cu says why); both are undone exactly at the end. */
#define FMK_CUDA_LAPLACE32_SCALE 8388608.0

static inline double fmk_cuda_coord_scale(int real, fmk_kernel kernel)
{
    return real == 4 && kernel == FMK_KERNEL_LAPLACE ? FMK_CUDA_LAPLACE32_SCALE : 1.0;
}

/* Padding of point arrays: a multiple of every tile and target block the kernels use. */
#define FMK_CUDA_PAD 1024

static inline int64_t fmk_cuda_padded(int64_t n)
{
    return (n + FMK_CUDA_PAD - 1) / FMK_CUDA_PAD * FMK_CUDA_PAD;
}

/* The direct sum's knobs (plan->tune, "direct.<field>"). */
typedef struct fmk_cuda_direct_tune {
    int64_t launch_pairs; /* pairs a launch of the sum computes at most, from sums of more than
                             this many (0: about 0.1 s of them, measured as it runs) */
    int splits;           /* source ranges summed apart (0: as many as fill the GPU in whole
                             waves; at most the sources' tiles) */
} fmk_cuda_direct_tune;

/* The sum is cut into launches from FMK_CUDA_LAUNCH_PAIRS pairs on (at first; then as many as
 * take FMK_CUDA_LAUNCH_SECONDS at the rate measured: fmk_cuda_launch_ranges). */
#define FMK_CUDA_LAUNCH_PAIRS 17179869184.0 /* 2^34 */

/* The engine's state (plan->state). */
typedef struct fmk_cuda_direct {
    int device;
    int real;                    /* bytes of the working type: 4 or 8 */
    int splits;                  /* source ranges summed by separate blocks (1: none) */
    int64_t n_pad, m_pad;        /* padded point counts */
    void *d_src;                 /* n_pad 4-vectors */
    void *d_trg;                 /* m_pad 4-vectors; NULL when the targets are the sources */
    double *d_charges;           /* host evaluations: the charges as uploaded */
    double *d_pot, *d_grad;      /* host evaluations: results before download */
    double *d_partial;           /* splits * n_targets * 4 partial sums (splits > 1) */
    unsigned long long *d_stats; /* fmk_cuda_charge_stats output (2 words) */
    int careful; /* fp64: points that can make pairs closer than FMK_EXACT_TINY (pair_exact.h) */
    void *d_temp;                /* set_points_device's bounding-box workspace */
    double *d_carry; /* one split: the totals between launches that cut the sources (a wave) */
    /* Bytes held by d_src, d_trg, d_charges, d_pot, d_grad, d_partial, d_temp and d_carry: the
     * state of a plan's previous points serves the next where they fit, and grows where they
     * do not. */
    size_t cap[8];
    size_t carry_targets; /* targets d_carry holds */
    double rate;          /* pairs per second of the last launches (0: none yet) */
    cudaEvent_t ev[6];    /* the sum's start and end; a launch's start and end, two in flight */
    int events;           /* ev[] were created */
} fmk_cuda_direct;

/* The knobs and counters that every GPU engine shares ("cuda.<field>": fmk_engine.shared_tune
 * and shared_counters, held per plan; core/tune.h): failures on demand, so that tests reach the
 * paths of a failed allocation and of an interrupt at every place they can happen, and when an
 * eval waits between its phases to check for an interrupt. */
typedef struct fmk_cuda_tune {
    int64_t fail_alloc_at; /* the plan's k-th allocation (counter allocs) fails (0: none) */
    int64_t stop_at_check; /* the plan's k-th interrupt check (counter checks) says stop (0) */
    int64_t check_min;     /* evals of this many points (sources and targets) or more wait
                              between their phases to check (2^22; 0: every eval) */
} fmk_cuda_tune;

#define FMK_CUDA_TUNE_DEFAULTS {0, 0, 1ll << 22}

typedef struct fmk_cuda_counters {
    int64_t allocs;      /* device and pinned host allocations asked for (fmk_cuda_alloc_fails) */
    int64_t fail_bytes;  /* the bytes of the one fail_alloc_at made fail (its message names them) */
    int64_t checks;      /* interrupt checks made (fmk_cuda_stop) */
    double eval_seconds; /* the plan's last eval (fmk_cuda_eval): from 0.1 s on, evals wait
                            between their phases to check, whatever their size */
} fmk_cuda_counters;

extern const struct fmk_tune_table fmk_cuda_tune_table;    /* "cuda", fmk_cuda_tune */
extern const struct fmk_tune_table fmk_cuda_counter_table; /* "cuda", fmk_cuda_counters */

/* device.cu: error reporting and device selection. */
/* Records a failed CUDA call (named by call) on the plan and returns FMK_ERR_DEVICE (or
 * FMK_ERR_DEVICE_NOMEM for cudaErrorMemoryAllocation); clears the non-sticky error. */
fmk_status fmk_cuda_fail(fmk_plan *plan, cudaError_t err, const char *call);
/* Allocation: every device allocation of a GPU engine (cudaMalloc, CUB's and the tree's
 * workspaces included; cuBLAS's handle and workspace before cublasCreate) and every pinned
 * host one, of bytes (as its failure's message gives them), counts here as the plan's next
 * (the counter cuda.allocs); returns 1 when that one is to fail as if out of memory (the knob
 * cuda.fail_alloc_at; plan NULL: never). */
int fmk_cuda_alloc_fails(fmk_plan *plan, long long bytes);
/* cudaMalloc of bytes for what (*ptr NULL on failure), counted by fmk_cuda_alloc_fails, with
 * the message on failure: FMK_ERR_DEVICE_NOMEM naming what, its bytes, the bytes the whole
 * request needs (total) and the bytes free. */
fmk_status fmk_cuda_alloc(fmk_plan *plan, void **ptr, size_t bytes, const char *what,
                          long long total);
/* The same for pinned host memory (cudaMallocHost): FMK_ERR_NOMEM naming what and its bytes. */
fmk_status fmk_cuda_alloc_host(fmk_plan *plan, void **ptr, size_t bytes, const char *what);
/* Interrupts (core/interrupt.c) in GPU calls. The host sees a request only when it runs, so a
 * GPU engine checks where it waits for the GPU anyway (set_points' reads of its trees), between
 * the phases of a long eval (fmk_cuda_long: there it waits on purpose), and between the
 * launches of bounded work that a long launch is cut into (fmk_cuda_launch_ranges: the direct
 * sum, the tree walk, the M2L by rotations). An interrupted call waits for what it has queued
 * before it returns.
 * stop: one check, counted (the counter cuda.checks; the knob cuda.stop_at_check makes the
 *   k-th say stop); 1 when the call is to stop (plan NULL: never).
 * checkpoint: waits for ev (NULL: for nothing), then checks: FMK_OK, FMK_ERR_INTERRUPTED
 *   (recorded), or the failed wait's status (what: the work waited for).
 * long: whether an eval of np points (sources and targets) waits between its phases: np at
 *   least the knob cuda.check_min, or the plan's last eval took 0.1 s or more. */
int fmk_cuda_stop(fmk_plan *plan);
fmk_status fmk_cuda_checkpoint(fmk_plan *plan, cudaEvent_t ev, const char *what);
int fmk_cuda_long(const fmk_plan *plan, int64_t np);
/* A long launch cut into launches of bounded work: items [0, total) (each of item_work units
 * of work: pairs, walks, boxes) in ranges [lo, hi) queued by launch(ctx, lo, hi) on stream,
 * two at a time so that the GPU does not wait for the host. A range is a multiple of
 * quantum items (the last excepted) of about the work the measured rate (*rate, units per
 * second, updated after each launch; 0: none yet) does in FMK_CUDA_LAUNCH_SECONDS, or of
 * first units before the first measurement, or of fixed units (> 0: a knob's). After each
 * launch the host checks for an interrupt (fmk_cuda_checkpoint); an interrupted or failed
 * call waits for the launch still queued. ev: four events (the two launches' starts and ends).
 * what: the kernel, for messages. */
#define FMK_CUDA_LAUNCH_SECONDS 0.1
typedef cudaError_t (*fmk_cuda_range_fn)(void *ctx, int64_t lo, int64_t hi);
typedef struct fmk_cuda_ranges {
    int64_t total, quantum;
    double item_work, first, fixed;
    double *rate;
    cudaEvent_t *ev;
    cudaStream_t stream;
    fmk_cuda_range_fn launch;
    void *ctx;
    const char *what;
} fmk_cuda_ranges;
fmk_status fmk_cuda_launch_ranges(fmk_plan *plan, const fmk_cuda_ranges *r);
/* Makes device current; *prev receives the caller's device, for fmk_cuda_leave. */
fmk_status fmk_cuda_enter(fmk_plan *plan, int device, int *prev);
void fmk_cuda_leave(int device, int prev);
/* The number of multiprocessors of a device (>= 1). */
int fmk_cuda_sm_count(int device);
/* An engine's set_points_device around its own points(): the plan's points dropped first and
 * again on failure (the engine contract), points() run with the plan's device current. An
 * engine with reuses_state finds the previous points' state in plan->state (NULL if none). */
typedef fmk_status (*fmk_cuda_points_fn)(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                         const double *d_t);
fmk_status fmk_cuda_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                      const double *d_t, fmk_cuda_points_fn points);
/* An engine's eval around its own run(): the plan's state checked, run() called with the plan's
 * device current and the caller's device made current again after it; its time kept (the
 * counter cuda.eval_seconds, for fmk_cuda_long). */
typedef fmk_status (*fmk_cuda_eval_fn)(fmk_plan *plan, const double *charges, double *pot,
                                       double *grad, int on_device);
fmk_status fmk_cuda_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                         int on_device, fmk_cuda_eval_fn run);

/* p2p.cu: launchers. real is 4 or 8 throughout; all run on the default stream. */
typedef struct fmk_cuda_p2p_args {
    int real;
    fmk_kernel kernel;
    int self;
    int splits;
    int64_t n_pad, m, m_pad;
    const void *d_src, *d_trg; /* d_trg NULL when self */
    double *d_pot, *d_grad;    /* caller layout; either may be NULL */
    double *d_partial;
    double eps2, log_width;
    int pot_exp, grad_exp; /* potential = ldexp(sum, pot_exp), gradient = ldexp(sum, grad_exp) */
    /* fp64, a singular kernel, points that can make pairs closer than FMK_EXACT_TINY: every
     * pair through fmk_exact_pair's rule (k_p2p_careful, all of it in the first launch of the
     * sum: the launches after it have nothing to do); charge_exp and width_exp: the exponents of
     * the charges' scale and of the frame's width (kernels/pair_exact.h) */
    int careful, charge_exp, width_exp;
    /* One launch's share (fmk_cuda_p2p_geometry): target blocks [block0, block1) and, of each
     * split's source tiles, [tile0, tile1) counted from the split's first (block1, tile1 past
     * the last: up to the last); all of them (0, INT64_MAX, 0, INT64_MAX) in one launch. A
     * launch that stops short of a split's last tile leaves its totals for the next: in
     * d_partial (splits > 1) or d_carry (one split: room for the launch's targets,
     * (block1 - block0) * block_targets * 4 doubles). finish: instead, the splits' partial sums
     * added up into the outputs, once every tile is done. */
    int64_t block0, block1, tile0, tile1;
    double *d_carry;
    int finish;
} fmk_cuda_p2p_args;

/* The launch geometry of the direct sum: target blocks of block_targets targets, each split's
 * tiles of tile_sources sources (the longest split's count), and the target blocks of one split
 * that the GPU runs at once (a wave). */
typedef struct fmk_cuda_p2p_geometry {
    int64_t blocks, block_targets, tiles, tile_sources, wave_blocks;
} fmk_cuda_p2p_geometry;

/* Source ranges to split the sum into so that the grid fills the device in whole waves. */
int fmk_cuda_p2p_splits(int real, fmk_kernel kernel, int64_t n_pad, int64_t m_pad, int device);
/* Sources per tile (fmk_cuda_p2p_geometry.tile_sources), and the whole geometry (its wave from
 * the kernel's occupancy: a query that costs host time). */
int fmk_cuda_p2p_tile(int real);
void fmk_cuda_p2p_shape(int real, fmk_kernel kernel, int64_t n_pad, int64_t m_pad, int splits,
                        int device, fmk_cuda_p2p_geometry *g);
/* The direct sum, the share of a's ranges (or a->finish: the splits added up); writes pot
 * and/or grad (scaled, caller layout) where it completes a target's sum. */
cudaError_t fmk_cuda_p2p(const fmk_cuda_p2p_args *a);
/* Maps n points (dim doubles each) into 4-vectors of the working precision:
 * x' = (offset + (x - center) * inv_width) * scale (map = 1: the plan's frame, fmk_frame_map) or
 * x' = x * scale (map = 0), with scale an exact power of two (fmk_cuda_coord_scale); pads
 * [n, n_pad) with zeros. Charges (component 3, and 2 for cauchy2d) are set to zero. */
cudaError_t fmk_cuda_pack_points(int real, int dim, int64_t n, int64_t n_pad, const double *d_x,
                                 int map, const double center[3], double offset, double inv_width,
                                 double scale, void *d_out);
/* d_flag[0] = 1 if a coordinate of the n_pad packed fp64 points (dim of their components) can
 * make a pair closer than FMK_EXACT_TINY (fmk_exact_coord_is_tiny), else unchanged. */
cudaError_t fmk_cuda_tiny_coords(int dim, int64_t n_pad, const void *d_pts,
                                 unsigned long long *d_flag);
/* d_stats[0] = smallest index of a non-finite charge (ULLONG_MAX: none), d_stats[1] = bits of
 * the largest finite |charge| (cw = 1 or 2 values per source). Resets d_stats first. */
cudaError_t fmk_cuda_charge_stats(int cw, int64_t n, const double *d_charges,
                                  unsigned long long *d_stats);
/* Writes charges times 2^-exp (exactly) into the source 4-vectors. */
cudaError_t fmk_cuda_pack_charges(int real, int cw, int64_t n, const double *d_charges, int exp,
                                  void *d_src);
/* frame.cu: the device frame, one path for every GPU engine. */
/* Bounding box and finiteness of ns sources and nt targets (device doubles), by CUB:
 * lo/hi per axis (dim axes; the rest 0) and the first non-finite point index in *bad
 * (-1: all finite; index >= ns means target bad - ns). d_temp/temp_bytes: query with
 * d_temp = NULL first (CUB's two-phase convention). d_box: device scratch of
 * fmk_cuda_box_bytes(). Synchronous on return when d_temp is not NULL. */
size_t fmk_cuda_box_bytes(void);
cudaError_t fmk_cuda_bounding_box(int dim, int64_t ns, const double *d_s, int64_t nt,
                                  const double *d_t, void *d_temp, size_t *temp_bytes, void *d_box,
                                  double lo[3], double hi[3], int64_t *bad);
/* The message (FMK_ERR_NONFINITE) for point index bad (>= ns: target bad - ns) of device
 * points: which array, which point and coordinate, and its value. */
fmk_status fmk_cuda_bad_point(fmk_plan *plan, int64_t bad, int64_t ns, const double *d_s,
                              const double *d_t);
/* The workspace fmk_cuda_frame needs for these points (bytes into *temp_bytes). */
fmk_status fmk_cuda_frame_query(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                const double *d_t, size_t *temp_bytes);
/* The frame of device points (plan->dim coordinates each; nt = 0 when the targets are the
 * sources): their box into lo/hi, a status with the first non-finite point, and the frame
 * (fmk_plan_frame_from_box; frame NULL: the box only). d_temp: temp_bytes of workspace
 * (fmk_cuda_frame_query); d_box: fmk_cuda_box_bytes() of device scratch. */
fmk_status fmk_cuda_frame(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                          const double *d_t, void *d_temp, size_t temp_bytes, void *d_box,
                          double lo[3], double hi[3], fmk_frame *frame);

#ifdef __cplusplus
}

/* A point with its charge in the working precision (the device layout above); vec4<R>::type
 * names it for R = float or double. */
struct __align__(16) real4f {
    float x, y, z, w;
};
struct __align__(32) real4d {
    double x, y, z, w;
};
template <typename R> struct vec4;
template <> struct vec4<float> {
    typedef real4f type;
};
template <> struct vec4<double> {
    typedef real4d type;
};
#endif

#endif /* FMMKIT_CUDA_INTERNAL_H */
