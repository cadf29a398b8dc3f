/*
 * fmmkit_poisson.h -- the free-space Poisson solver for vorticity on grids (docs/poisson.md).
 *
 * Installed beside fmmkit.h, whose statuses, interrupt checks and conventions it shares. Given
 * the vorticity omega on the points of a grid, it computes the streamfunction Psi of
 *
 *     laplacian Psi = -omega,   Psi -> 0 far away   (free space),
 *
 * and on request the velocity u = curl Psi, as the sums (van Rees et al., eqs. 2 and 7)
 *
 *     Psi(x_i) = (1/(4 pi)) sum_j h^3 omega_j G(|x_i - x_j|),
 *     u(x_i)   = (1/(4 pi)) sum_j h^3 grad G(x_i - x_j) x omega_j,
 *     G(r)     = (r^2 + 1.5 eps^2) / (r^2 + eps^2)^(3/2)     (fmmkit's regularized kernel),
 *
 * over every grid point j where omega is nonzero, at every grid point i, j = i included
 * (G(0) = 3/(2 eps)). eps is the smoothing length, h by default.
 *
 * Life cycle (the one of fmk_plan):
 *     fmk_poisson_opts o;  fmk_poisson_opts_default(&o);
 *     fmk_poisson *ps;
 *     if (fmk_poisson_create(&ps, 1e-6, &o) != FMK_OK)
 *         fprintf(stderr, "%s\n", fmk_poisson_last_error(NULL));
 *     fmk_poisson_set_grid(ps, nx, ny, nz, h, origin);
 *     fmk_poisson_solve(ps, 3, omega, psi, u);          // as many times as you like
 *     fmk_poisson_destroy(ps);
 *
 * Grid and layout: a uniform grid of nx * ny * nz points origin + h (i, j, k); point
 * p = i + nx (j + ny k) (x fastest). A field of c components is interleaved per point,
 * f[c p + a]: a C-ordered numpy array of shape (nz, ny, nx, c). omega and Psi have 1 or 3
 * components, u always 3.
 *
 * Errors, ownership, threads: as in fmmkit.h. Every call that can fail returns an fmk_status,
 * with a sentence in fmk_poisson_last_error; a failed call writes nothing; no caller pointer
 * is kept; one thread at a time per solver.
 */
#ifndef FMMKIT_POISSON_H
#define FMMKIT_POISSON_H

#include "fmmkit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the sum is evaluated. */
typedef enum fmk_poisson_method {
    FMK_POISSON_AUTO = 0,   /* chosen for each grid (default): on a uniform grid fft where
                             * the backend has it, else treecode; on a block grid treecode.
                             * The backend AUTO: the GPU where present and the method runs
                             * there, else the CPU */
    FMK_POISSON_DIRECT = 1, /* the direct sum over grid points (an fmmkit plan, method
                             * direct): the reference, exact to rounding, O(N_src N_grid) */
    FMK_POISSON_FMM = 2,    /* the same sum by the 3D FMM, relative l2 error within eps
                             * (1e-14 <= eps <= 1e-2) */
    FMK_POISSON_FFT = 3,    /* Hockney-Eastwood: the same sum as a convolution on the grid
                             * zero-padded to 2n per axis (FFTW on the CPU, cuFFT on the GPU);
                             * exact to rounding; uniform grids; FMK_ERR_UNAVAILABLE in a build
                             * without FFTW (CPU) */
    FMK_POISSON_TREECODE = 4 /* van Rees et al.'s multipole algorithm (docs/poisson.md): an
                              * octree of the sources (at most opts.leaf_size per leaf), the
                              * grid's points in destination bricks of up to 8^3 points sharing
                              * one interaction list ("logical plans": source ranges summed
                              * directly, tree nodes taken by their multipoles when a/r < theta),
                              * built once per grid and support; relative l2 error within eps
                              * (1e-10 <= eps <= 1e-2); any grid; CPU, GPU or hybrid */
} fmk_poisson_method;

/* Options. Fill with fmk_poisson_opts_default() first; a NULL pointer means all defaults. */
typedef struct fmk_poisson_opts {
    fmk_poisson_method method; /* FMK_POISSON_AUTO */
    fmk_backend backend;       /* FMK_BACKEND_AUTO (see FMK_POISSON_AUTO); FMK_BACKEND_CUDA:
                                * direct and fmm through a GPU plan, fft by cuFFT, treecode's
                                * sums on the GPU (with hybrid: its direct part) */
    double smoothing;          /* 0: eps = h, the grid spacing (the paper's choice); > 0: eps
                                * in the grid's length units, 2^-20 h .. 2^20 h */
    int32_t threads;           /* 0: OpenMP's default; at most FMK_THREADS_MAX */
    int32_t verbose;           /* 0: 1 lets fmmkit print diagnostics to stderr */
    /* Method treecode (0 everywhere: chosen from eps; an expert may set them): */
    int32_t order;     /* p, the multipoles' order, 0 or 1..30 */
    double theta;      /* the opening parameter, 0 or 0 < theta < 1: a node of radius a is
                        * taken by its multipole for a brick whose nearest point is at r > a /
                        * theta (and far enough for the smoothing, docs/poisson.md) */
    int32_t leaf_size; /* s_max, sources per leaf at most, 0 or 1..2^20 */
    int32_t hybrid;    /* 0; 1 with backend cuda: the multipoles on the CPU (OpenMP) while the
                        * GPU sums the direct part, overlapped (the paper's hybrid mode) */
    int32_t device;    /* CUDA device, 0 */
} fmk_poisson_opts;

/* What a solver is and what its last calls cost. */
typedef struct fmk_poisson_info {
    fmk_poisson_method method; /* the method used (AUTO until a grid resolves it) */
    fmk_backend backend;       /* the backend used (likewise) */
    double eps;                /* requested relative accuracy (method fmm) */
    double smoothing;          /* eps of the kernel in length units (0 before set_grid) */
    int64_t nx, ny, nz;        /* the grid (0 before set_grid) */
    double h;
    int32_t components; /* of the last solve (0 before any) */
    int64_t n_sources;  /* grid points with nonzero omega in the last solve */
    int64_t bytes_host; /* host memory the solver holds now */
    double setup_time;  /* seconds of the last set_grid */
    double solve_time;  /* seconds of the last solve */
    int32_t threads;    /* CPU threads used */
    /* Block grids (set_blocks) and method treecode: */
    int64_t n_points;     /* grid points (the destinations) */
    int64_t n_blocks;     /* blocks (1 for a uniform grid) */
    double h_min;         /* the finest spacing (h of a uniform grid) */
    int32_t order;        /* treecode: p used */
    double theta;         /* treecode: theta used */
    int32_t leaf_size;    /* treecode: s_max used */
    int64_t n_bricks;     /* treecode: destination bricks */
    int64_t n_nodes;      /* treecode: nodes of the source tree */
    double direct_pairs;  /* treecode: point-source pairs summed directly in the last solve */
    double far_pairs;     /* treecode: point-multipole evaluations in the last solve */
    double time_tree;     /* seconds of the last solve in: sorting and the tree, */
    double time_plans;    /*   the logical plans (0 when they were reused), */
    double time_expand;   /*   the multipoles, */
    double time_direct;   /*   the direct part (GPU: kernel time), */
    double time_far;      /*   the multipole evaluations */
    double time_cpu_part; /* hybrid: wall seconds of the CPU's part, and */
    double time_gpu_part; /*   of the GPU's (uploads, kernels, downloads) */
    int64_t bytes_device; /* device memory the solver holds now */
    int64_t n_targets;    /* blocks chosen by fmk_poisson_set_targets (0: every point) */
    int64_t n_target_points; /* points the results hold (n_points when no blocks are chosen) */
} fmk_poisson_info;

/* Opaque solver. */
typedef struct fmk_poisson fmk_poisson;

/* ---------------------------------------------------------------------------------------------
 * Block-structured grids (docs/poisson.md, "The grid"): non-overlapping cubic blocks of b^3
 * points, b even, 4 <= b <= 64. A block of level l (0 <= l <= FMK_GRID_MAX_LEVEL) has spacing
 * h_l = h0 / 2^l and covers the cube  anchor + b h_l (B + [0, 1)^3)  for an integer block index
 * B >= 0 (per axis); its points are the cells' centres, point (i, j, m) at
 *     anchor + h_l (b B + (i, j, m) + 1/2),        0 <= i, j, m < b.
 * Blocks of any levels may sit side by side (no balance rule). Fields on a block grid are
 * block after block in the order the blocks were added, x fastest inside a block: point
 * p = k b^3 + i + b (j + b m) of block k, components interleaved (f[c p + a]).
 * ------------------------------------------------------------------------------------------ */

#define FMK_GRID_MAX_LEVEL 16
/* Block indices per axis at the finest level present: below 2^20 (B 2^(L - l) < 2^20). */
#define FMK_GRID_INDEX_MAX ((int64_t)1 << 20)

typedef struct fmk_grid fmk_grid;

/* Creates an empty grid of blocks of b^3 points, level-0 spacing h0 (> 0, finite) and block
 * lattice anchored at anchor[3] (finite; NULL: 0). Failures: message in
 * fmk_poisson_last_error(NULL). */
FMK_API fmk_status fmk_grid_create(fmk_grid **grid, int32_t block_size, double h0,
                                   const double anchor[3]);

/* Adds n blocks (n >= 1): block k has level levels[k] and its lower corner at
 * corners[3 k .. 3 k + 2]; each corner must be anchor + b h_l B for an integer B >= 0
 * (within 1e-6 of a block's side), and the new blocks must overlap neither each other nor
 * the grid's blocks (FMK_ERR_ARG naming the first offending block). All or nothing. */
FMK_API fmk_status fmk_grid_add_blocks(fmk_grid *grid, int64_t n, const int32_t *levels,
                                       const double *corners);

/* The same with integer block indices (3 per block) instead of corners. */
FMK_API fmk_status fmk_grid_add_blocks_index(fmk_grid *grid, int64_t n, const int32_t *levels,
                                             const int64_t *index);

/* What a grid holds: blocks, points (n_blocks b^3), b, h0, the anchor, the finest level used.
 * Any output may be NULL. */
FMK_API fmk_status fmk_grid_get(const fmk_grid *grid, int64_t *n_blocks, int64_t *n_points,
                                int32_t *block_size, double *h0, double anchor[3],
                                int32_t *finest_level);

/* Block k's level and index (3), and all the grid's points (n_points x 3, in the field layout),
 * and each point's spacing h (n_points). Outputs may be NULL. */
FMK_API fmk_status fmk_grid_block(const fmk_grid *grid, int64_t k, int32_t *level,
                                  int64_t index[3]);
FMK_API fmk_status fmk_grid_points(const fmk_grid *grid, double *points, double *spacing);

/* Frees the grid. NULL is a no-op. */
FMK_API void fmk_grid_destroy(fmk_grid *grid);

/* The two-level grid of the test problem (fmk_poisson_rings, docs/poisson.md): the unit cube
 * at effective resolution n (a multiple of 2b up to 2^14), anchor 0, h0 = 2/n, cut into regions
 * of (2b)^3 fine cells (spacing 1/n), each one block of level 0 (spacing 2/n) or, where refined,
 * 8 blocks of level 1, in the regions' order (x fastest; the 8 in the same order). The criterion
 * is the detail of the coarse level (the paper's interpolating wavelets): omega at a fine cell
 * centre minus its prediction by cubic interpolation (4 points per axis, one-sided at the
 * cube's edge) from omega at the coarse cell centres; a region is refined where its largest
 * detail |omega_fine - I(omega_coarse)| (Euclidean norm) exceeds refine * max |omega| (over the
 * fine points). 0 <= refine < 1; 0: wherever omega or its detail is nonzero. 1e-4, the paper's
 * compression threshold, makes every point with nonzero omega a fine one at 256 (3.9e6 points);
 * the command line uses it. */
FMK_API fmk_status fmk_poisson_rings_grid(fmk_grid **grid, int32_t resolution,
                                          int32_t block_size, double refine);

/* Fills *opts with the defaults written in fmk_poisson_opts. */
FMK_API void fmk_poisson_opts_default(fmk_poisson_opts *opts);

/* The name of a method ("auto", "direct", "fmm", "fft", "treecode"), or NULL. */
FMK_API const char *fmk_poisson_method_name(fmk_poisson_method method);

/* 1 if the method can run in this build (fft needs FFTW at build time), else 0. */
FMK_API int fmk_poisson_method_available(fmk_poisson_method method);

/* Creates a solver. eps, 0 < eps < 1, is the relative accuracy of methods fmm (which takes
 * 1e-14 .. 1e-2) and treecode (1e-10 .. 1e-2); direct and fft are exact to rounding and only
 * check it. opts may be NULL for defaults. On success *solver is a new solver; on failure
 * *solver is NULL and the message is in fmk_poisson_last_error(NULL). A method given is checked
 * here with its backend (AUTO resolved); method AUTO is resolved by each set_grid or
 * set_blocks. */
FMK_API fmk_status fmk_poisson_create(fmk_poisson **solver, double eps,
                                      const fmk_poisson_opts *opts);

/* Gives the solver a uniform grid of nx * ny * nz points origin[k] + h * (i, j, k) (each size
 * 1 .. 2^20, at most 2^40 points; h > 0 and finite; origin finite, NULL meaning 0), replacing
 * any earlier grid. This is where the work that depends on the grid alone happens: method fft
 * samples and transforms the kernel and makes its FFTW plans; direct and fmm lay out the grid's
 * points (their plan is made at the first solve, for its number of components, and given new
 * sources only when the support of omega changes). The smoothing, opts.smoothing or h, must
 * lie within 2^-20 h .. 2^20 h (FMK_ERR_ARG).
 * A call that fails validation leaves the solver as it was; one that fails later (out of
 * memory, interrupted) leaves it without a grid. */
FMK_API fmk_status fmk_poisson_set_grid(fmk_poisson *solver, int64_t nx, int64_t ny, int64_t nz,
                                        double h, const double origin[3]);

/* Gives the solver a block grid (copied: the grid may be destroyed afterwards), replacing any
 * earlier grid: as set_grid, with the smoothing h_min (the finest spacing) by default. Method
 * fft takes uniform grids only (FMK_ERR_UNAVAILABLE). An empty grid is FMK_ERR_ARG. */
FMK_API fmk_status fmk_poisson_set_blocks(fmk_poisson *solver, const fmk_grid *grid);

/* Results at chosen blocks only (a block grid): from here on, the solves write Psi and u at the
 * points of the n_blocks blocks listed (block numbers as fmk_grid_block's, each at most once,
 * in any order), block after block in the order listed, x fastest inside a block: result
 * arrays of n_blocks b^3 points (fmk_poisson_info.n_target_points). omega is still given at
 * every grid point, all of which are sources. Method treecode evaluates only the chosen blocks'
 * bricks (its plans are made again for them at the next solve); the other methods compute every
 * point and return the chosen ones. n_blocks = 0 (blocks may be NULL) chooses every point
 * again. A new grid clears the choice. FMK_ERR_ARG for a uniform grid, a block number out of
 * range or repeated; FMK_ERR_STATE before a grid. */
FMK_API fmk_status fmk_poisson_set_targets(fmk_poisson *solver, int64_t n_blocks,
                                           const int64_t *blocks);

/* Solves for the vorticity omega of n_components (1 or 3) components per grid point (layout
 * above) and writes Psi (same layout) and/or u = curl Psi (3 per point; needs 3 components), at
 * every grid point or at the blocks chosen by fmk_poisson_set_targets.
 * Either output may be NULL, not both. omega must be finite. Success means every value
 * written is finite; any failure (NaN or Inf in omega, a result beyond the range of doubles,
 * out of memory, interrupted) writes nothing. */
FMK_API fmk_status fmk_poisson_solve(fmk_poisson *solver, int32_t n_components, const double *omega,
                                     double *psi, double *velocity);

/* fmk_poisson_solve with omega, psi and velocity CUDA device pointers (the same layouts, on the
 * solver's device, opts.device); the solver's backend must be FMK_BACKEND_CUDA (FMK_ERR_ARG
 * otherwise, and for a pointer the GPU does not hold). The same guarantees: omega is checked
 * for NaN and Inf on the GPU, the results for overflow before any is written, and a failure
 * writes nothing. Method treecode keeps the solve on the GPU while the support of omega is
 * the previous solve's (its sources' weights come to the host for the multipoles, the whole
 * of omega only when the support changed); fft, direct and fmm stage omega and the results
 * through host memory. omega is read after the work queued before the call on the default
 * (legacy) stream; work on the caller's other streams must be done first. Returns when the
 * results are written. */
FMK_API fmk_status fmk_poisson_solve_device(fmk_poisson *solver, int32_t n_components,
                                            const double *d_omega, double *d_psi,
                                            double *d_velocity);

/* Fills *info with what the solver is and what its last calls cost. */
FMK_API fmk_status fmk_poisson_get_info(const fmk_poisson *solver, fmk_poisson_info *info);

/* The message of the solver's last failed call ("" if none). With solver = NULL: the calling
 * thread's last failure that had no solver to hold it (fmk_poisson_create, a NULL solver,
 * fmk_poisson_rings). Lives until the next failing call on the same solver (or thread). */
FMK_API const char *fmk_poisson_last_error(const fmk_poisson *solver);

/* A check the solver calls while it works (set_grid and solve), as fmk_plan_set_interrupt: from
 * the calling thread, between phases (one FFT is not cut) and every 10 ms or so inside the
 * sums of methods direct and fmm. When it returns nonzero the call stops with
 * FMK_ERR_INTERRUPTED, writes nothing, and the solver stays usable (an interrupted set_grid
 * leaves it without a grid). check = NULL removes it. */
FMK_API fmk_status fmk_poisson_set_interrupt(fmk_poisson *solver, fmk_interrupt_fn check,
                                             void *user);

/* Asks the solver's running call to stop, as fmk_plan_interrupt: safe from any thread and from
 * a signal handler; a request made while no call runs is dropped. NULL is FMK_ERR_NULL. */
FMK_API fmk_status fmk_poisson_interrupt(fmk_poisson *solver);

/* Frees the solver and everything it holds. NULL is a no-op. */
FMK_API void fmk_poisson_destroy(fmk_poisson *solver);

/* The test problem of van Rees et al. (section 5.1, docs/poisson.md): two vortex rings of
 * radius 0.125 (c1 = 227, c2 = 20) at (0.25, 0.25, 0.25), axis z, and at (0.75, 0.75, 0.75),
 * axis -y (rotated by pi/2 about x), in the unit cube. At n points (interleaved, (n, 3)) writes
 * the exact omega = curl curl Psi, Psi and u = curl Psi (3 values per point each); any output
 * may be NULL. Points must be finite. */
FMK_API fmk_status fmk_poisson_rings(int64_t n, const double *points, double *omega, double *psi,
                                     double *velocity);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_POISSON_H */
