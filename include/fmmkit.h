/*
 * fmmkit.h -- fast N-body summation on GPUs and CPUs.
 *
 * The only installed header of libfmmkit. It is the reference manual: every function is
 * documented right above its declaration, with units and defaults.
 *
 * What fmmkit computes
 * --------------------
 * For sources x_j with charges q_j (j < N) and targets y_i (i < M), the potential
 *
 *     phi(y_i) = sum_j q_j G(y_i, x_j)
 *
 * and, on request, its gradient with respect to the target, grad_y phi(y_i). The kernels G are
 * defined exactly in docs/kernels.md (no 4*pi factors; signs as written there):
 *
 *   FMK_KERNEL_LAPLACE      3D  G = 1 / r
 *   FMK_KERNEL_PLUMMER      3D  G = 1 / sqrt(r^2 + s^2)                  s = opts.softening
 *   FMK_KERNEL_REGULARIZED  3D  G = (r^2 + 1.5 s^2) / (r^2 + s^2)^(3/2)   s = opts.softening
 *   FMK_KERNEL_LOG2D        2D  G = log r
 *   FMK_KERNEL_CAUCHY2D     2D  phi(z) = sum_j Gamma_j / (z_j - z), complex Gamma_j; the
 *                               "gradient" output is dphi/dz = sum_j Gamma_j / (z_j - z)^2
 *
 * with r = |y - x|. When the targets are the sources, the term j = i is left out by index.
 * Coincident points: a source that sits exactly on a target (r = 0 after the points are mapped
 * to the working precision, see docs/kernels.md) contributes nothing for the singular kernels
 * (laplace, log2d, cauchy2d); the smooth kernels (plummer, regularized) take their finite value.
 *
 * Life cycle (the same for every method and backend)
 * ---------------------------------------------------
 *     fmk_opts opts;  fmk_opts_default(&opts);  opts.method = FMK_METHOD_DIRECT;
 *     fmk_plan *plan;
 *     if (fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &opts) != FMK_OK)
 *         fprintf(stderr, "%s\n", fmk_plan_last_error(NULL));
 *     fmk_plan_set_points(plan, n, sources, 0, NULL);     // targets = sources
 *     fmk_plan_eval(plan, charges, pot, grad);            // as many times as you like
 *     fmk_plan_destroy(plan);
 *
 * Data layout: points are interleaved, x[dim*i + k] (a C-ordered numpy (n, dim) array); the
 * gradient likewise (m, dim). Complex values (cauchy2d charges, potential and derivative) are
 * pairs (re, im), the layout of C99 double complex and numpy complex128. All inputs and outputs
 * are double; opts.precision chooses the arithmetic.
 *
 * Ownership: the caller owns every array it passes; no caller pointer is kept after a call
 * returns (set_points copies the points). The plan owns what it allocates.
 *
 * Errors: every call that can fail returns an fmk_status. The sentence that says what went
 * wrong is in fmk_plan_last_error(plan), or fmk_plan_last_error(NULL) for calls that had no
 * plan to hold it (create, the one-shot call, NULL plans). The library never prints, exits or
 * aborts. A failed call leaves its outputs untouched. A set_points call that fails validation
 * leaves the plan as it was; one that fails later (out of memory, FMK_ERR_ACCURACY) leaves it
 * without points.
 *
 * Threads: a plan may be used by one thread at a time; different plans are independent.
 *
 * Interrupting: a long set_points or eval can be stopped, from the calling thread through a
 * check the plan calls as it works (fmk_plan_set_interrupt), or from any other thread or a
 * signal handler (fmk_plan_interrupt). The call then returns FMK_ERR_INTERRUPTED within a
 * fraction of a second on the CPU, and about as soon on the GPU for the direct sum and the
 * treecode (docs/reliability.md, "Interrupts"), and the plan stays usable.
 */
#ifndef FMMKIT_H
#define FMMKIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared in this header is exported from the shared library; the rest is hidden. */
#if defined(_WIN32) && defined(FMK_BUILDING_LIBRARY)
#define FMK_API __declspec(dllexport)
#elif defined(__GNUC__)
#define FMK_API __attribute__((visibility("default")))
#else
#define FMK_API
#endif

/* The one place fmmkit's version is written: CMake and the Python package read it from here. */
#define FMK_VERSION_MAJOR 0
#define FMK_VERSION_MINOR 1
#define FMK_VERSION_PATCH 0

/* ---------------------------------------------------------------------------------------------
 * Status codes. Numbers are never reused; new codes are appended.
 * ------------------------------------------------------------------------------------------ */
typedef enum fmk_status {
    FMK_OK = 0,               /* success */
    FMK_ERR_NULL = 1,         /* a required pointer argument was NULL */
    FMK_ERR_ARG = 2,          /* an argument is out of range (dim, n, eps, softening, enum) */
    FMK_ERR_STATE = 3,        /* call out of order (e.g. eval before set_points) */
    FMK_ERR_NONFINITE = 4,    /* NaN or Inf in points or charges, or a result that is not
                                 * finite (a sum beyond the range of doubles): outputs untouched */
    FMK_ERR_NOMEM = 5,        /* host memory allocation failed */
    FMK_ERR_DEVICE_NOMEM = 6, /* GPU memory allocation failed (message says how much) */
    FMK_ERR_DEVICE = 7,       /* a CUDA call failed (message names it) */
    FMK_ERR_UNAVAILABLE = 8,  /* method or backend not in this build, or no GPU present */
    FMK_ERR_INTERNAL = 9,     /* a bug in fmmkit: please report it with the message */
    FMK_ERR_INTERRUPTED = 10, /* stopped on the caller's request (fmk_plan_set_interrupt) */
    FMK_ERR_ACCURACY = 11     /* the method cannot meet eps on these points in this precision
                                 * (they are closer than its coordinates resolve; the message
                                 * says why and what to do: fp64, method direct, or removing a
                                 * far outlier) */
} fmk_status;

/* Kernels; docs/kernels.md defines each one exactly. */
typedef enum fmk_kernel {
    FMK_KERNEL_LAPLACE = 1,     /* 3D, 1/r */
    FMK_KERNEL_PLUMMER = 2,     /* 3D, 1/sqrt(r^2 + s^2), softened gravity */
    FMK_KERNEL_REGULARIZED = 3, /* 3D, (r^2 + 1.5 s^2)/(r^2 + s^2)^(3/2), van Rees et al. eq. 7 */
    FMK_KERNEL_LOG2D = 4,       /* 2D, log r */
    FMK_KERNEL_CAUCHY2D = 5     /* 2D, complex Gamma/(z_j - z) */
} fmk_kernel;

/* Summation methods. */
typedef enum fmk_method {
    FMK_METHOD_AUTO = 0,   /* default; resolved to DIRECT, the one method that meets any
                                 * eps by construction: ask for TREE or FMM by name */
    FMK_METHOD_DIRECT = 1, /* O(N M) direct sum: the reference */
    FMK_METHOD_TREE = 2,   /* 3D Barnes-Hut treecode: laplace and plummer, theta, order */
    FMK_METHOD_FMM = 3     /* fast multipole method, 2D (log2d, cauchy2d) and 3D (laplace,
                                 * plummer, regularized), 1e-14 <= eps <= 1e-2 */
} fmk_method;

/* Where the work runs. */
typedef enum fmk_backend {
    FMK_BACKEND_AUTO = 0, /* CUDA if built and a GPU is present, else CPU (default); CPU
                                 * also where the GPU engine cannot take the kernel, precision
                                 * or eps asked for (fmk_info.backend says which) */
    FMK_BACKEND_CPU = 1,  /* OpenMP on the host */
    FMK_BACKEND_CUDA = 2  /* one NVIDIA GPU (opts.device) */
} fmk_backend;

/* Arithmetic precision; inputs and outputs are double either way. */
typedef enum fmk_precision {
    FMK_PRECISION_FP64 = 0, /* double (default) */
    FMK_PRECISION_FP32 = 1  /* single, faster on GPUs: points are rounded to 2^-24 of their
                                 * box, so the error grows as the closest pairs get closer: about
                                 * 1e-6..1e-4 relative for the potential, 10x that for the
                                 * gradient, on 1e4..1e6 random points. Method fmm (3D):
                                 * near-field sums in fp32, expansions in fp64, eps >= 1e-5
                                 * (fmk_plan_create refuses smaller eps); 2D fmm: fp64 only */
} fmk_precision;

/* Tree walks of the treecode (method tree). */
typedef enum fmk_walk {
    FMK_WALK_AUTO = 0,     /* the fastest walk of the backend (default) */
    FMK_WALK_GROUP = 1,    /* a group of nearby targets shares one walk (Bonsai style) */
    FMK_WALK_STACKLESS = 2 /* each target walks alone with next/more pointers (Nakasato) */
} fmk_walk;

/* Phases timed in fmk_info.phase_time; fmk_phase_name() gives their names. */
typedef enum fmk_phase {
    FMK_PHASE_SETUP = 0,  /* set_points: validation, copies, uploads, trees, lists */
    FMK_PHASE_UPLOAD = 1, /* eval: charges to the working layout (and to the GPU) */
    FMK_PHASE_P2M = 2,
    FMK_PHASE_M2M = 3,
    FMK_PHASE_M2L = 4,
    FMK_PHASE_L2L = 5,
    FMK_PHASE_L2P = 6,
    FMK_PHASE_P2P = 7,      /* direct interactions (the whole of the direct method) */
    FMK_PHASE_DOWNLOAD = 8, /* eval: results back to the caller's order and layout */
    FMK_PHASE_TREE = 9,     /* set_points: keys, sort and tree (also in setup's total) */
    FMK_PHASE_MOMENTS = 10, /* eval: multipole moments of the tree's nodes (treecode) */
    FMK_PHASE_WALK = 11,    /* eval: tree walk with its P2P and M2P work (treecode) */
    FMK_PHASE_COUNT = 16    /* size of the phase_time array; unused slots are 0 */
} fmk_phase;

/* The most CPU threads a plan uses (opts.threads, OMP_NUM_THREADS). OpenMP runtimes fail
 * (exit the process, or crash) when asked for tens of thousands of threads; 4096 is above the
 * hardware threads of any single machine fmmkit targets. */
#define FMK_THREADS_MAX 4096

/* Options. Fill with fmk_opts_default() first, then change fields; a NULL opts pointer means
 * all defaults. Every default is written beside its field. */
typedef struct fmk_opts {
    fmk_method method;       /* FMK_METHOD_AUTO */
    fmk_backend backend;     /* FMK_BACKEND_AUTO */
    fmk_precision precision; /* FMK_PRECISION_FP64 */
    int32_t threads;         /* 0: OpenMP's default (OMP_NUM_THREADS or all cores);
                                 * at most FMK_THREADS_MAX (more is FMK_ERR_ARG at
                                 * fmk_plan_create; a larger OMP_NUM_THREADS is clamped).
                                 * In a child made by fork() after the library was used,
                                 * plans run with one thread: OpenMP's thread pool does
                                 * not survive a fork, and using it there would hang */
    int32_t device;          /* 0: CUDA device ordinal */
    int32_t order;           /* -1: expansion order from eps (fmm) or 2, quadrupole (tree);
                                 * tree takes 0 (monopole), 1 (+ dipole) or 2 (+ quadrupole) */
    int64_t leaf_size;       /* 0: points per leaf chosen by the method (expert override) */
    double softening;        /* 0: softening length s; must be > 0 for plummer, regularized */
    double theta;            /* 0: opening angle / separation ratio, method default
                                 * (tree: 0.6) */
    int32_t verbose;         /* 0: 1 lets fmmkit print diagnostics to stderr */
    fmk_walk walk;           /* FMK_WALK_AUTO: tree walk (method tree only) */
    int32_t n_vectors;       /* 1 (0 means 1): the charge vectors an evaluation mostly carries
                                 * (fmk_plan_eval_many's n_vectors; 1..FMK_VECTORS_MAX). A
                                 * hint: the FMMs choose their leaves for it (an expansion's
                                 * work grows with the vectors, a pair's far less); any count
                                 * may be evaluated with any plan */
} fmk_opts;

/* The most charge vectors opts.n_vectors names (a hint; fmk_plan_eval_many takes any count). */
#define FMK_VECTORS_MAX 1024

/* What a plan is and what its last evaluation cost. */
typedef struct fmk_info {
    int32_t dim; /* 2 or 3 */
    fmk_kernel kernel;
    fmk_method method;   /* the method actually used (never AUTO) */
    fmk_backend backend; /* the backend actually used (never AUTO) */
    fmk_precision precision;
    int32_t order;     /* expansion order, 0 for direct */
    int32_t levels;    /* tree levels, 0 for direct */
    fmk_walk walk;     /* the walk actually used (tree), else FMK_WALK_AUTO */
    int64_t leaf_size; /* points per leaf, 0 for direct */
    int64_t n_sources;
    int64_t n_targets;
    int64_t bytes_host;                 /* host memory the plan holds now */
    int64_t bytes_device;               /* GPU memory the plan holds now */
    double eps;                         /* requested relative accuracy */
    double theta;                       /* 0 for direct */
    double phase_time[FMK_PHASE_COUNT]; /* seconds, setup: last set_points; others: last eval */
    char device_name[96];               /* "cpu (N threads)" or the GPU's name */
    /* The work of the last evaluation as interaction counts, per charge vector (an
     * fmk_plan_eval_many of n vectors does n times this work), the way treecode papers count
     * "interactions per step"; 0 before the first evaluation after set_points, and after a
     * failed one.
     * interactions_p2p: target-source pairs summed directly, the pair of a target with its own
     *   source (targets = sources) left out.
     *     direct: n_targets * n_sources, less n for targets = sources (computed, not counted).
     *     tree: the sources of every leaf a target's walk opens (the group walk: every target
     *       of a group counts the group's whole list); a leaf of identical points, which the
     *       CPU walks sum as one source, counts 1.
     *     fmm (3D): per leaf with targets, its targets times the sources of its U list and of
     *       the W and X entries summed directly, less n for targets = sources (from the lists
     *       at set_points); fmm (2D): per finest box, its distinct targets times the distinct
     *       sources of its P2P list, less the distinct targets for targets = sources.
     * interactions_far: the far field's terms.
     *     direct: 0.
     *     tree: per target, the nodes its walk accepts (M2P), those folded into its group's
     *       expansion (the cell-to-group step, and the GPU's super-groups) counted alike, per
     *       target, as the terms they stand for.
     *     fmm: list entries (box pairs), not per point: M2L translations (V list), plus the P2L
     *       (X list) and M2P (W list) entries evaluated by expansions (3D); M2L, M2P and P2L
     *       entries (2D).
     * Not counted yet (both 0): the GPU engines of method fmm (3D and 2D), whose lists live on
     * the device. Not counted: the Poisson solver (fmmkit_poisson.h), whose treecode does not
     * go through a plan's walk. Both backends of direct and tree count alike (the group walks
     * differ in their groups: 32 targets on the GPU). */
    int64_t interactions_p2p;
    int64_t interactions_far;
} fmk_info;

/* Opaque plan. */
typedef struct fmk_plan fmk_plan;

/* ---------------------------------------------------------------------------------------------
 * Library information
 * ------------------------------------------------------------------------------------------ */

/* The library version as "major.minor.patch". */
FMK_API const char *fmk_version(void);

/* A short constant description of a status code ("invalid argument", ...). */
FMK_API const char *fmk_status_string(fmk_status status);

/* The name of a kernel ("laplace", "plummer", "regularized", "log2d", "cauchy2d"), or NULL. */
FMK_API const char *fmk_kernel_name(fmk_kernel kernel);

/* The name of a method ("auto", "direct", "tree", "fmm"), or NULL. */
FMK_API const char *fmk_method_name(fmk_method method);

/* The name of a backend ("auto", "cpu", "cuda"), or NULL. */
FMK_API const char *fmk_backend_name(fmk_backend backend);

/* The name of a phase ("setup", "upload", "p2m", ... "p2p", "download"), or NULL. */
FMK_API const char *fmk_phase_name(fmk_phase phase);

/* Looks a name up (the names above); returns FMK_ERR_ARG for an unknown name. */
FMK_API fmk_status fmk_kernel_from_name(const char *name, fmk_kernel *kernel);
FMK_API fmk_status fmk_method_from_name(const char *name, fmk_method *method);
FMK_API fmk_status fmk_backend_from_name(const char *name, fmk_backend *backend);

/* The dimension a kernel works in (2 or 3), or 0 for an unknown kernel. */
FMK_API int fmk_kernel_dim(fmk_kernel kernel);

/* 1 if a kernel takes complex charges and gives complex results (cauchy2d), else 0. */
FMK_API int fmk_kernel_is_complex(fmk_kernel kernel);

/* Number of CUDA devices usable by this build (0 in a CPU-only build or without a GPU).
 * Never fails; a driver problem reads as 0 devices. */
FMK_API int fmk_cuda_device_count(void);

/* 1 if a method is implemented for this dimension and backend in this build, else 0. */
FMK_API int fmk_method_available(fmk_method method, int dim, fmk_backend backend);

/* ---------------------------------------------------------------------------------------------
 * Plans
 * ------------------------------------------------------------------------------------------ */

/* Fills *opts with the defaults written in fmk_opts. */
FMK_API void fmk_opts_default(fmk_opts *opts);

/* The accuracy the command line and the Python module ask for when none is given: 1e-6 in fp64,
 * 1e-4 in fp32 (whose coordinates keep 6e-8 of the frame: about 1e-6 on well-spread points,
 * which fp32 plans refuse, FMK_ERR_ACCURACY, where they cannot meet it). */
FMK_API double fmk_eps_default(fmk_precision precision);

/* Creates a plan for kernel in dimension dim (2 or 3, matching the kernel) at relative accuracy
 * eps, 0 < eps < 1 (the direct method is exact to rounding and only checks eps). opts may be
 * NULL for defaults. On success *plan is a new plan; on failure *plan is NULL and the message is
 * in fmk_plan_last_error(NULL). AUTO method and backend are resolved here. */
FMK_API fmk_status fmk_plan_create(fmk_plan **plan, int dim, fmk_kernel kernel, double eps,
                                   const fmk_opts *opts);

/* Gives the sources (n_sources points) and targets (n_targets points) to the plan, replacing any
 * earlier points; both arrays are copied. Pass targets = NULL and n_targets = 0 to evaluate at
 * the sources (then the self term j = i is left out). n_sources = 0 or n_targets = 0 is valid
 * (results are then zero or empty). Points must be finite. This is where trees, lists and GPU
 * uploads happen, so repeated evaluations with new charges cost only the numerical passes.
 * Methods tree and fmm refuse points that their arithmetic cannot resolve to eps
 * (a far outlier, clusters nested many octaves deep, close pairs in fp32) with
 * FMK_ERR_ACCURACY and a message that says what to do (docs/reliability.md, "Resolution");
 * the plan then has no points. */
FMK_API fmk_status fmk_plan_set_points(fmk_plan *plan, int64_t n_sources, const double *sources,
                                       int64_t n_targets, const double *targets);

/* Evaluates with charges (n_sources values; pairs (re, im) for cauchy2d) and writes the
 * potential (n_targets values, or pairs) and/or the gradient (n_targets * dim values; pairs for
 * cauchy2d). Either output may be NULL to skip it; not both. Charges must be finite. A result
 * that is not finite (the sum overflows the doubles) is FMK_ERR_NONFINITE with the outputs
 * untouched: success means every value written is finite. */
FMK_API fmk_status fmk_plan_eval(fmk_plan *plan, const double *charges, double *pot, double *grad);

/* Evaluates n_vectors charge vectors in one call: charge vector v starts at
 * charges + v * n_sources * c (c = 2 for cauchy2d, else 1); its outputs at pot + v * n_targets * c
 * and grad + v * n_targets * dim (n_targets * 2 for cauchy2d). n_vectors >= 0. The geometric
 * work (trees, lists, pair distances, expansion harmonics) is done once for all vectors where
 * the method allows (docs/choosing.md, "Several charge vectors"), so k vectors cost far less
 * than k calls. Every vector is checked before anything is computed; the outputs are written
 * only when every value of every vector is finite (FMK_ERR_NONFINITE otherwise, nothing
 * written). The results are the same as n_vectors calls of fmk_plan_eval up to rounding. */
FMK_API fmk_status fmk_plan_eval_many(fmk_plan *plan, int64_t n_vectors, const double *charges,
                                      double *pot, double *grad);

/* Like fmk_plan_set_points, but both arrays are CUDA device pointers (same layout, targets =
 * NULL with n_targets = 0 meaning the sources); the plan's backend must be FMK_BACKEND_CUDA.
 * The points never visit the host. */
FMK_API fmk_status fmk_plan_set_points_device(fmk_plan *plan, int64_t n_sources,
                                              const double *d_sources, int64_t n_targets,
                                              const double *d_targets);

/* Like fmk_plan_eval, but charges, pot and grad are CUDA device pointers (same layouts); the
 * plan's backend must be FMK_BACKEND_CUDA. Runs on the default stream and returns when the
 * results are written; charges are checked for NaN/Inf on the GPU. The plan's points may have
 * come from either set_points call. The results are not checked for overflow here (as
 * fmk_plan_eval does): a sum beyond the range of doubles comes back as Inf or NaN. */
FMK_API fmk_status fmk_plan_eval_device(fmk_plan *plan, const double *d_charges, double *d_pot,
                                        double *d_grad);

/* fmk_plan_eval_many with CUDA device pointers (the layout of fmk_plan_eval_many, the
 * conditions of fmk_plan_eval_device). */
FMK_API fmk_status fmk_plan_eval_many_device(fmk_plan *plan, int64_t n_vectors,
                                             const double *d_charges, double *d_pot,
                                             double *d_grad);

/* Host and device bytes the plan would hold for n_sources sources and n_targets targets
 * (n_targets = -1: targets are the sources), computed before anything is allocated. */
FMK_API fmk_status fmk_plan_memory(const fmk_plan *plan, int64_t n_sources, int64_t n_targets,
                                   int64_t *bytes_host, int64_t *bytes_device);

/* Fills *info with what the plan is and what its last calls cost. */
FMK_API fmk_status fmk_plan_info(const fmk_plan *plan, fmk_info *info);

/* The message of the plan's last failed call ("" if none). With plan = NULL: the calling
 * thread's last failure that had no plan to hold it (fmk_plan_create, fmk_eval, NULL plan).
 * The string lives until the next failing call on the same plan (or thread). */
FMK_API const char *fmk_plan_last_error(const fmk_plan *plan);

/* The caller's check of fmk_plan_set_interrupt: nonzero means stop. */
typedef int (*fmk_interrupt_fn)(void *user);

/* Gives the plan a check to call while it works: set_points and the eval calls run check(user)
 * from the calling thread (never from the plan's OpenMP threads) every 10 ms or so of work,
 * between blocks of targets, groups of a tree walk, phases and chunks of a phase. On the GPU
 * the host checks between the launches it waits for: after set_points' tree builds, between
 * the phases of a long eval, and between the launches of about 0.1 s that a long direct sum,
 * tree walk or M2L by rotations is cut into (a single launch runs to its end first). When check
 * returns nonzero, the call stops as soon as it can and returns FMK_ERR_INTERRUPTED with the
 * message "interrupted". Its outputs are then unspecified (partly written; the GPU's work
 * for the call has ended when it returns), but the plan stays usable: an interrupted eval keeps
 * the points; an interrupted set_points leaves the plan without points, as any set_points that
 * fails after validation. check = NULL (the default) removes the check. The plan keeps check
 * and user, not what user points to. */
FMK_API fmk_status fmk_plan_set_interrupt(fmk_plan *plan, fmk_interrupt_fn check, void *user);

/* Asks the plan's running call to stop, as a check that returned nonzero: safe from any thread
 * and from a signal handler (it only sets an atomic flag in the plan). Each set_points and eval
 * call clears the flag when it starts, so a request made while no call runs is dropped. A NULL
 * plan is FMK_ERR_NULL (with no message). */
FMK_API fmk_status fmk_plan_interrupt(fmk_plan *plan);

/* Frees the plan and everything it holds. NULL is a no-op. */
FMK_API void fmk_plan_destroy(fmk_plan *plan);

/* ---------------------------------------------------------------------------------------------
 * One-shot
 * ------------------------------------------------------------------------------------------ */

/* create + set_points + eval + destroy in one call; arguments as in those functions. The
 * message of a failure is in fmk_plan_last_error(NULL). */
FMK_API fmk_status fmk_eval(int dim, fmk_kernel kernel, double eps, const fmk_opts *opts,
                            int64_t n_sources, const double *sources, const double *charges,
                            int64_t n_targets, const double *targets, double *pot, double *grad);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_H */
