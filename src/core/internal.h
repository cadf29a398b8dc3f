/*
 * internal.h -- definitions shared inside libfmmkit (never installed).
 *
 * A plan holds the caller's options, the points mapped into the plan's frame (below) and the
 * state of one engine: the pair (method, backend) that does the numerical work. plan.c owns
 * the life cycle and all validation; engines trust their inputs.
 *
 * The frame. Every point is mapped, in double, into the frame of the plan's engine
 * (fmk_engine.frame, one kind per precision; fmk_plan_frame_from_box makes it, for host and
 * device points alike). Both kinds share the width w, the power of two at or above the largest
 * side of the bounding box of sources and targets (and, for the smooth kernels, the softening),
 * so scaling by a power of two is exact, and the kernels scale back exactly:
 *     phi = phi' / w, grad = grad' / w^2  (laplace, plummer, regularized, cauchy2d),
 *     log2d adds log(w) per contributing source.
 *
 * FMK_FRAME_BOX (every fast method, and the fp32 direct sum):
 *     x' = 1.5 + (x - center) / w,
 * center the centre of the box. Mapped coordinates lie in [1, 2], where floating-point spacing is
 * uniform (2^-52 of the box in fp64, 2^-23 in fp32). That gives the guarantees the fast methods
 * and fp32 rely on:
 *   - results do not depend on where the box sits (an offset of 1e8 costs no accuracy in fp32);
 *   - two mapped points that differ at all are at least 2^-23 (fp32) apart in some coordinate, so
 *     r'^2 >= 2^-46 can neither underflow nor overflow 1/r'^3: "r' == 0" is an exact test of
 *     coincidence, and coincident means equal after rounding to the working precision.
 * The price: every coordinate is rounded to 2^-53 of the box, so one far outlier coarsens every
 * other point (unit cube plus a point at 1e14: coordinates kept to 1e-2).
 *
 * FMK_FRAME_EXACT (the fp64 direct sum, the reference):
 *     x' = (x - center) / w, exactly,
 * center[k] 0, or a value within a factor 2 of every coordinate on axis k (then x - center is
 * exact, Sterbenz's lemma); division by w is exact too (barring results below 2^-1022, that is
 * coordinates below 2^-1022 of the box). Mapped coordinates lie in (-2, 2) and are the caller's
 * coordinates scaled: nothing is lost, coincident means equal inputs, and a mapped offset y' - x'
 * is the caller's offset rounded once. Distinct mapped points can then be arbitrarily close:
 * the engine handles pairs closer than its fast loop takes (direct/p2p_cpu.c, pair_exact.h).
 */
#ifndef FMMKIT_INTERNAL_H
#define FMMKIT_INTERNAL_H

#include "fmmkit.h"
#include "kernels/kernels.h"

#ifndef __cplusplus
#include <stdatomic.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FMK_ERROR_LEN 512

/* The calling thread's number in its OpenMP team, and the team's size (0 and 1 without
 * OpenMP). */
static inline int fmk_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static inline int fmk_thread_count(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Inner loops built for the widest vector unit the running CPU has (GCC dispatches at load
 * time), so the installed library is portable yet uses AVX2 / AVX-512 where they exist.
 * FMK_NO_CLONES (the sanitizer build) turns the clones off. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(FMK_NO_CLONES)
#define FMK_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FMK_TARGET_CLONES
#endif

/* The kinds of frame (see above); an engine names the one it works in per precision
 * (fmk_engine.frame). */
typedef enum fmk_frame_kind {
    FMK_FRAME_BOX = 0,  /* x' = 1.5 + (x - center) / w: uniform spacing in [1, 2] */
    FMK_FRAME_EXACT = 1 /* x' = (x - center) / w exactly */
} fmk_frame_kind;

/* The mapping from caller coordinates to the plan's working coordinates (see above). */
typedef struct fmk_frame {
    fmk_frame_kind kind;
    double offset; /* 1.5 (FMK_FRAME_BOX) or 0 (FMK_FRAME_EXACT): x' = offset + (x - c) / w */
    double center[3];
    double width; /* a power of two, 2^width_exp */
    int width_exp;
    double softening;  /* mapped softening, opts.softening / width (0 for singular kernels) */
    double pot_scale;  /* 1 / width */
    double grad_scale; /* 1 / width^2 */
    double log_width;  /* log(width), log2d only */
    int exact;         /* 1: every point was mapped without rounding (points on a grid the
                        * frame holds: x - center and the sum are exact), so that rounding the
                        * coordinates cost nothing (set_points on the host; 0 otherwise) */
} fmk_frame;

/* Coordinate x of axis k mapped into frame f. No fused multiply-add may change this expression
 * (the GPU's packing kernels spell it out with __dsub_rn, __dmul_rn, __dadd_rn). */
static inline double fmk_frame_map(const fmk_frame *f, int k, double x)
{
    return f->offset + (x - f->center[k]) * f->pot_scale;
}

struct fmk_plan;
struct fmk_tune_table;
/* core/interrupt.c: a long call's stop state, a plan's or a Poisson solver's: the flag that
 * says stop (set by fmk_plan_interrupt from any thread or a signal handler, or by the check)
 * and the caller's check with when it last ran. */
#ifndef __cplusplus /* the CUDA sources see it opaque (C11 atomics are not C++) */
struct fmk_interrupt {
    atomic_int stop;        /* 1: the running call is to stop (lock-free: signal-safe) */
    fmk_interrupt_fn check; /* the caller's check, or NULL */
    void *user;
    double last; /* when the check last ran, or the call began (fmk_time_now) */
};
#else
struct fmk_interrupt;
#endif

/* One engine: a method on a backend, a row of the engine table (core/engines.c). Engines get
 * validated input and mapped points. */
typedef struct fmk_engine {
    const char *name;
    /* Points were (re)set: build whatever is geometric (uploads, trees, lists). */
    fmk_status (*setup)(struct fmk_plan *plan);
    /* One charge vector -> outputs in caller units. on_device: all three are device pointers. */
    fmk_status (*eval)(struct fmk_plan *plan, const double *charges, double *pot, double *grad,
                       int on_device);
    /* Bytes this engine would hold for these sizes, before allocating anything. */
    void (*memory)(const struct fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                   int64_t *bytes_host, int64_t *bytes_device);
    /* Points given as device pointers (NULL where the engine has no GPU): validate them (finite),
     * compute the frame with fmk_plan_frame_from_box, fill n_sources, n_targets, self, frame,
     * has_points; plan->sources and plan->targets stay NULL. On failure the plan has no points. */
    fmk_status (*set_points_device)(struct fmk_plan *plan, int64_t n_sources,
                                    const double *d_sources, int64_t n_targets,
                                    const double *d_targets);
    /* Frees engine state; safe to call twice and on a plan with no state. */
    void (*release)(struct fmk_plan *plan);
    /* Optional (NULL: nothing more to check): the engine's own rules for the options, the
     * kernel, the dimension and eps, called at plan creation with method and backend resolved
     * (core/plan.c has checked only what holds for every method). May resolve fields of *o
     * (order -1, theta 0) and fill what it resolved into *info (order, theta). No plan exists
     * yet: messages go to the calling thread (fmk_error_set(NULL, ...)). A kernel, precision
     * or accuracy the engine cannot do is FMK_ERR_UNAVAILABLE (backend auto then tries the
     * CPU); a value out of range is FMK_ERR_ARG. */
    fmk_status (*check_opts)(fmk_opts *o, fmk_kernel kernel, int dim, double eps, fmk_info *info);
    /* The smallest eps the engine meets when it chooses the order from eps (0: every eps the
     * method takes). Below it a plan is refused, or with backend auto made on the CPU. */
    double eps_min;
    /* Nonzero: setup takes over the state of the plan's previous points when plan->state is
     * not NULL (its buffers serve again), so fmk_plan_set_points keeps the state through its
     * drop of the old points; on any failure the state is released as usual. */
    int reuses_state;
    /* The engine's tuning knobs (core/tune.h; NULL: none): a struct of documented defaults,
     * copied into each plan (plan->tune) and changed there by fmk_plan_tune. */
    const struct fmk_tune_table *tune;
    /* The engine's counters (core/tune.h; NULL: none): a struct the plan holds zeroed
     * (plan->counters), which the engine fills as it works and fmk_plan_counter reads. */
    const struct fmk_tune_table *counters;
    /* Knobs and counters that every engine of a backend shares (NULL: none), held per plan
     * beside the engine's own (plan->shared_tune, plan->shared_counters) and named by their
     * table's prefix: the GPU engines' "cuda.*" (cuda/device.h). */
    const struct fmk_tune_table *shared_tune;
    const struct fmk_tune_table *shared_counters;
    /* The frame the engine works in, per opts.precision (indexed by fmk_precision; zero, the
     * default: FMK_FRAME_BOX). fmk_plan_frame_from_box makes it, for host and device points. */
    fmk_frame_kind frame[2];
    /* Optional (NULL: plan.c calls eval once per vector): nd >= 1 charge vectors in one pass,
     * the geometric work shared; vector v's charges at charges + v * n_sources * width, its
     * outputs at pot + v * n_targets * width and grad + v * n_targets * grad_width (either
     * output NULL: skipped for every vector). Same units and conditions as eval. */
    fmk_status (*eval_many)(struct fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                            double *grad, int on_device);
    /* Nonzero: the engine honours plan->self_slice (leaves out target i's pair with source
     * plan->self_base + i, exactly as for targets = sources); core/hooks.h. */
    int takes_self_slice;
} fmk_engine;

struct fmk_plan {
    int dim;
    fmk_kernel kernel;
    double eps;
    fmk_opts opts; /* as given, AUTO fields resolved */
    int threads;   /* OpenMP threads to use (>= 1) */
    const fmk_engine *engine;
    int method_auto; /* opts.method was AUTO: set_points picks the engine (core/choose.c) */

    int has_points;
    int self; /* targets are the sources: skip j == i */
    /* Targets that are the sources [self_base, self_base + n_targets) of separate targets:
     * skip j == self_base + i (only where engine->takes_self_slice; core/hooks.h). */
    int self_slice;
    int64_t self_base;
    /* A plan whose calls go to hooks (core/hooks.h: a distributed plan), and their state;
     * NULL for ordinary plans. */
    const struct fmk_plan_hooks *hooks;
    void *hook_state;
    int64_t n_sources, n_targets;
    fmk_frame frame;
    double *sources; /* n_sources * dim mapped coordinates (owned) */
    double *targets; /* n_targets * dim, == sources when self (owned unless self) */
    /* The caller's points as given, during a host set_points's engine setup only (NULL
     * otherwise, and for device points; raw_targets NULL when self): the resolution guard
     * compares them where two points map to one (tree/resolution.c). */
    const double *raw_sources, *raw_targets;
    /* n_targets * (width + grad width) doubles (owned): host evaluations write here, and the
     * caller's arrays get the results only once they are all finite (plan.c, eval_host) */
    double *staged;

    void *state;           /* the engine's own state */
    void *tune;            /* the engine's tuning struct (engine->tune), or NULL */
    void *counters;        /* the engine's counters struct (engine->counters), or NULL */
    void *shared_tune;     /* the backend's shared knobs (engine->shared_tune), or NULL */
    void *shared_counters; /* and counters (engine->shared_counters), or NULL */
    /* The interaction counts an evaluation reports (fmk_info.interactions_*) where the
     * geometry fixes them: set by the engine's setup (the FMMs, from their lists), 0 after
     * set_points until then. eval.c copies them into info before the engine's eval; an engine
     * that counts as it walks (the treecode) overwrites info's. The direct sum's are computed
     * by eval.c. */
    int64_t interactions_p2p, interactions_far;
    int64_t state_bytes_host; /* what the engine's state holds, for fmk_info */
    int64_t state_bytes_device;

    struct fmk_interrupt *interrupt; /* owned; see the interrupt functions below */

    fmk_info info;
    char error[FMK_ERROR_LEN];
};

/* error.c: records a message on the plan (or, for plan == NULL, on the calling thread) and
 * returns status, so a failure is one line: return fmk_error_set(plan, FMK_ERR_ARG, "...", ...). */
fmk_status fmk_error_set(struct fmk_plan *plan, fmk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void fmk_error_clear(struct fmk_plan *plan);

/* interrupt.c: stopping a long call (fmk_plan_set_interrupt, fmk_plan_interrupt).
 * alloc (0, or -1 when out of memory) and free: the plan's interrupt state, at create and destroy.
 * begin: at the start of each set_points and eval call, clears the stop flag.
 * poll: 1 when the call is to stop; runs the caller's check (at most every 10 ms). Only the
 *   calling thread may poll: serial code of a call, never an OpenMP worker.
 * team: the same inside a parallel region of the library: thread 0 of the team (the calling
 *   thread) polls, the others read the flag, so every thread stops at its next chunk of work;
 *   a loop skips (continue) its remaining iterations once it returns 1.
 * stopped: reads the flag only (any thread).
 * status: records "interrupted" on the plan and returns FMK_ERR_INTERRUPTED.
 * A plan without interrupt state (NULL) never stops. */
/* The state alone (init: no check, not stopped; start: at the start of a call, clears the
 * flag; poll_state: 1 when the call is to stop, running the check at most every 10 ms;
 * set_check; request: asks the running call to stop, signal-safe). The plan functions below
 * are these on plan->interrupt. */
void fmk_interrupt_init(struct fmk_interrupt *in);
void fmk_interrupt_start(struct fmk_interrupt *in);
int fmk_interrupt_poll_state(struct fmk_interrupt *in);
void fmk_interrupt_set_check(struct fmk_interrupt *in, fmk_interrupt_fn check, void *user);
void fmk_interrupt_request(struct fmk_interrupt *in);
int fmk_interrupt_alloc(struct fmk_plan *plan);
void fmk_interrupt_free(struct fmk_plan *plan);
void fmk_interrupt_begin(struct fmk_plan *plan);
int fmk_interrupt_poll(const struct fmk_plan *plan);
int fmk_interrupt_team(const struct fmk_plan *plan);
int fmk_interrupt_stopped(const struct fmk_plan *plan);
fmk_status fmk_interrupt_status(struct fmk_plan *plan);

/* plan.c: the frame of a bounding box (lo > hi on an axis: no points), with the softening
 * check; and dropping a plan's points and engine state (has_points = 0). */
fmk_status fmk_plan_frame_from_box(struct fmk_plan *plan, const double lo[3], const double hi[3],
                                   fmk_frame *frame);
void fmk_plan_drop_points(struct fmk_plan *plan);
/* plan.c: the interaction counts (the plan's and info's) to 0: no evaluation of these points. */
void fmk_plan_clear_interactions(struct fmk_plan *plan);
/* plan.c, for eval.c: the thread count brought down to what the process allows now; the first
 * non-finite value of count doubles (-1: none); the bytes of the staged results of one vector
 * (plan->staged). */
void fmk_plan_refresh_threads(struct fmk_plan *plan);
int64_t fmk_plan_first_nonfinite(const double *x, int64_t count, int threads);
size_t fmk_plan_staged_bytes(const struct fmk_plan *plan, int64_t n_targets);
/* plan.c: the engine's own checks of opts (it exists, its eps range, check_opts), as at
 * fmk_plan_create; messages go to the calling thread. */
fmk_status fmk_plan_engine_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                fmk_info *info);

/* choose.c: method auto. fmk_choose_method: the method the crossover tables pick for n_sources
 * sources and n_targets targets (-1: the sources) on the plan's backend, dimension, precision
 * and eps, and for the smooth kernels the points' extent width (the largest side of their
 * bounding box; -1: not known, points on the device). fmk_choose_engine: makes the plan's engine the one for those sizes (the picked
 * method, or the direct sum where the picked engine refuses the plan's kernel, precision or
 * eps), dropping the points and state of the engine it replaces; nothing for plans whose
 * method was given. fmk_choose_memory: the engine's memory() of the engine a plan would use
 * for those sizes (with that engine's default knobs where it is not the plan's engine). */
fmk_method fmk_choose_method(const struct fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                             double width);
fmk_status fmk_choose_engine(struct fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                             double width);
void fmk_choose_memory(const struct fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                       int64_t *bytes_host, int64_t *bytes_device);

/* opts.c: the expert options of fmk_opts that a method takes (FMK_TAKES_* bits); the others,
 * when set, are an error (FMK_ERR_ARG) naming the option and the method. Each engine's
 * check_opts calls it first. */
enum { FMK_TAKES_ORDER = 1, FMK_TAKES_THETA = 2, FMK_TAKES_LEAF = 4, FMK_TAKES_WALK = 8 };
fmk_status fmk_opts_only(const fmk_opts *o, const char *method, unsigned takes);

/* opts.c: the thread count of a plan, from opts.threads (0: OpenMP's default), at most
 * FMK_THREADS_MAX, and 1 in a process forked after fmmkit first ran (fmk_opts_forked_child:
 * OpenMP's thread pool does not survive fork). Called at fmk_plan_create and again at every
 * set_points and eval, which only ever lowers plan->threads (buffers sized for it stay valid). */
int fmk_opts_resolve_threads(int requested);
int fmk_opts_forked_child(void);
double fmk_time_now(void); /* monotonic seconds */
/* An FMM eval's phase times into *in from its clock readings t[0..7] (before the upload, then
 * after upload, P2M, M2M, M2L (+P2L), L2L, L2P (+M2P), P2P; the download runs to now) and the
 * tree time of its set_points. */
void fmk_info_fmm_phases(fmk_info *in, const double t[8], double tree_time);

/* Values per point of a kernel's charges and potential (kernels/kernels.h): 2 for cauchy2d,
 * else 1. */
static inline int fmk_kernel_width(fmk_kernel k)
{
    return fmk_kernel_desc_of(k)->width;
}
/* Values per point of a kernel's gradient output: 2 for cauchy2d (complex dphi/dz), else dim
 * (the kernel's own, which a plan's dim matches). */
static inline int fmk_kernel_grad_width(fmk_kernel k, int dim)
{
    (void)dim;
    return fmk_kernel_desc_of(k)->grad_width;
}

/* Byte counts of memory estimates (fmk_engine.memory, fmk_plan_memory): sums and products of
 * non-negative int64 values that stop at FMK_BYTES_OVERFLOW instead of wrapping, so sizes no
 * machine could hold come out as FMK_BYTES_OVERFLOW (which fmk_plan_memory refuses), never as
 * a small or negative number. */
#define FMK_BYTES_OVERFLOW INT64_MAX
static inline int64_t fmk_bytes_add(int64_t a, int64_t b)
{
    return a > FMK_BYTES_OVERFLOW - b ? FMK_BYTES_OVERFLOW : a + b;
}
static inline int64_t fmk_bytes_mul(int64_t a, int64_t b)
{
    return b != 0 && a > FMK_BYTES_OVERFLOW / b ? FMK_BYTES_OVERFLOW : a * b;
}
/* b + per * n, saturating: one term of an estimate, per bytes for each of n things. */
static inline int64_t fmk_bytes_plus(int64_t b, int64_t per, int64_t n)
{
    return fmk_bytes_add(b, fmk_bytes_mul(per, n));
}
/* The GPU engines' estimates count at most 2^36 points (sources plus targets, nt < 0: none
 * apart): their coordinates alone (1.6 TB) are ten times any GPU's memory, and up to there
 * their arithmetic (linear in the points, under 10^8 bytes a point) stays inside int64.
 * Beyond it they report FMK_BYTES_OVERFLOW. */
static inline int fmk_bytes_gpu_uncounted(int64_t ns, int64_t nt)
{
    return ns + (nt > 0 ? nt : 0) > ((int64_t)1 << 36);
}

/* engines.c: the engine table. The engine of (method, dim, backend), NULL where none exists
 * (a method not built for that dimension, or the CUDA backend in a CPU-only build). */
const fmk_engine *fmk_engines_find(fmk_method method, int dim, fmk_backend backend);
/* The number of CUDA devices (-1 in a build without the CUDA backend). */
int fmk_cuda_count_devices(void);
/* Fills name (size bytes) with the device's name; returns FMK_OK or a status with a message. */
fmk_status fmk_cuda_device_name(struct fmk_plan *plan, int device, char *name, size_t size);
/* The largest side of the bounding box of device points (ns sources, nt targets; nt = 0: the
 * sources alone) into *width, for method auto (cuda/frame.cu; its own workspace, freed before
 * it returns); FMK_OK, or a status with a message (a non-finite point is left to the engine:
 * *width is then -1). */
fmk_status fmk_cuda_points_extent(struct fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                  const double *d_t, double *width);
/* n host pairs (a 64-bit key, then a 64-bit value, each pair 16 bytes) sorted by the key's low
 * key_bits bits on the plan's GPU, stably (cuda/sort_pairs.cu); FMK_OK, or a status with a
 * message (the pairs then unchanged: the caller sorts them on the host). */
fmk_status fmk_cuda_sort_pairs(struct fmk_plan *plan, int64_t n, void *pairs, int key_bits);
/* cudaMemcpy of bytes, the kind inferred from the pointers (cuda/device.cu); FMK_OK or the
 * failure with a message naming what. */
fmk_status fmk_cuda_copy(struct fmk_plan *plan, void *dst, const void *src, size_t bytes,
                         const char *what);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_INTERNAL_H */
