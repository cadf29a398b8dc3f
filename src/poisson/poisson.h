/*
 * poisson.h -- what the files of the Poisson solver share (never installed; docs/poisson.md).
 *
 * solver.c owns the life cycle and every check of the caller's input; the methods trust it:
 *   methods.c   the table of methods and backends (every method rule solver.c needs)
 *   status.c    messages and interrupt polls, for all of them
 *   grid.c      block-structured grids (fmk_grid) and their layout as the solver's boxes
 *   fft_cpu.c   Hockney-Eastwood FFT convolution (FFTW), uniform grids; fft_cuda.cu (cuFFT)
 *   sum.c       the sum over grid points through an fmmkit plan (methods direct and fmm)
 *   treecode/   van Rees et al.'s multipole algorithm (bricks and logical plans)
 *   rings.c     the test problem of van Rees et al. (section 5.1)
 *   rings_grid.c  its two-level block grid (refined on the coarse level's detail)
 * A method writes its results into the solver's staging buffer (same layout as the caller's
 * arrays); solver.c copies them out only when every value is finite.
 */
#ifndef FMMKIT_POISSON_INTERNAL_H
#define FMMKIT_POISSON_INTERNAL_H


#include "core/internal.h"
#include "fmmkit_poisson.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1/(4 pi): the factor of the Laplace Green's function (paper eq. 3) that fmmkit's kernels
 * leave out. */
#define FMK_INV_4PI 0.0795774715459476678844418816862571

/* A lattice of grid points: the whole of a uniform grid, or one block of a block grid. In
 * grid units: lengths in h_min (the finest spacing) from the solver's origin, so that the
 * finest level's points are integers and every point is a multiple of 1/2, exact in any
 * precision the methods use. Point (i, j, k) of the box is at corner + h (i, j, k) and is
 * field point offset + i + n[0] (j + n[1] k) of the caller's arrays. */
struct fmk_poisson_box {
    double corner[3]; /* grid units */
    double h;         /* spacing in grid units: 2^(finest level - level), 1 on a uniform grid */
    int32_t n[3];     /* points per axis */
    int32_t level;    /* the block's level (0 on a uniform grid) */
    int64_t offset;   /* field index of point (0, 0, 0) */
};

/* One method on one backend: what solver.c calls (methods.c holds the table). The method's
 * state lives in s->state. setup: the work that depends on the grid alone (s->boxes are set);
 * solve: n_components of omega to Psi (psi, may be NULL) and u (velocity, may be NULL; then
 * n_components = 3), both staged in the caller's layout; release: frees s->state and sets it
 * NULL (safe when NULL); bytes: what the state holds. setup and solve return FMK_OK or a
 * status recorded on the solver. */
typedef struct fmk_poisson_method_ops {
    fmk_poisson_method method;
    fmk_backend backend;
    int uniform_only; /* 1: block grids are FMK_ERR_UNAVAILABLE */
    int (*available)(void);
    /* The method's checks of eps and opts at fmk_poisson_create (message on the calling
     * thread), or NULL: none. */
    fmk_status (*check)(const fmk_poisson_opts *opts, double eps);
    fmk_status (*setup)(struct fmk_poisson *s);
    fmk_status (*solve)(struct fmk_poisson *s, int n_components, const double *omega,
                        double *psi, double *velocity);
    /* The same with omega on the GPU (a device pointer, checked finite), or NULL: the method
     * has no such path (solve_device.c stages through the host). The results stay on the GPU
     * in the caller's layout and units, in the method's own arrays, valid until its next call:
     * *d_psi where want_psi, *d_velocity where want_u. */
    fmk_status (*solve_device)(struct fmk_poisson *s, int n_components, const double *d_omega,
                               int want_psi, int want_u, const double **d_psi,
                               const double **d_velocity);
    void (*release)(struct fmk_poisson *s);
    int64_t (*bytes_host)(const struct fmk_poisson *s);
    int64_t (*bytes_device)(const struct fmk_poisson *s); /* may be NULL: none */
} fmk_poisson_method_ops;

/* methods.c: the method for (method, backend), both resolved (not AUTO), or NULL when this
 * build has none; and how AUTO resolves (opts is changed in place). */
const fmk_poisson_method_ops *fmk_poisson_ops_find(fmk_poisson_method method, fmk_backend backend);
void fmk_poisson_resolve_auto(fmk_poisson_opts *opts, int uniform);
/* methods.c: the row for opts (method resolved; backend AUTO tried on the GPU, then the CPU),
 * or NULL with the reason on the calling thread (fmk_poisson_last_error(NULL)). */
const fmk_poisson_method_ops *fmk_poisson_ops_for(fmk_poisson_opts *opts);

#ifndef __cplusplus /* core's interrupt state is C11 (atomics): CUDA files see the solver opaque */
struct fmk_poisson {
    fmk_poisson_opts opts; /* as given, backend resolved */
    double eps;
    int threads; /* OpenMP threads (>= 1), resolved again at every call */

    int has_grid;
    int uniform;              /* 1: set_grid (one box), 0: set_blocks */
    int64_t n[3];             /* nx, ny, nz of a uniform grid (0 for blocks) */
    int64_t n_points;         /* all boxes' points */
    struct fmk_poisson_box *boxes; /* n_boxes (owned) */
    int64_t n_boxes;
    int32_t block_size;       /* b of a block grid (0 for uniform) */
    double h;                 /* h_min: the grid unit, in the caller's length units */
    double origin[3];         /* the position of grid units (0, 0, 0) */
    double smoothing;         /* eps of the kernel in length units */
    double e;                 /* the same in grid units: smoothing / h */

    const fmk_poisson_method_ops *ops; /* the method of opts.method on opts.backend */
    void *state;                       /* the method's, or NULL */
    int64_t bytes;                     /* what the state holds on the host */

    /* Results at chosen blocks (fmk_poisson_set_targets): the boxes the caller wants, in its
     * order (NULL: every point). A method may evaluate only their points; it must then leave
     * the staged arrays' other points at 0. targets_gen counts the choices made, so that a
     * method's state made for another choice is made again. */
    int64_t *targets;
    int64_t n_targets, n_target_points;
    int64_t targets_gen;

    double *staged; /* results before they go to the caller (owned) */
    int64_t staged_len;

    struct fmk_interrupt interrupt; /* the stop flag and the caller's check (core) */

    fmk_poisson_info info;
    char error[FMK_ERROR_LEN];
};
#endif

/* The box holding field index p (0 <= p < n_points), and the point in grid units. */
int64_t fmk_poisson_box_of(const struct fmk_poisson *s, int64_t p);
void fmk_poisson_point(const struct fmk_poisson *s, int64_t p, double x[3]);

/* grid.c: a block grid as the solver's boxes (one per block, in field order; *boxes is
 * malloc'ed, the caller frees it), the finest spacing h_min (the grid unit), the position
 * of grid units (0, 0, 0) and b. FMK_ERR_ARG for an empty grid, FMK_ERR_NOMEM; messages on the
 * solver. */
fmk_status fmk_grid_layout(struct fmk_poisson *s, const fmk_grid *grid,
                           struct fmk_poisson_box **boxes, int64_t *n_boxes, double *h_min,
                           double origin[3], int32_t *block_size);

/* solver.c, shared with solve_device.c. solve_begin: the start of a solve and the checks of
 * its arguments (fn names the call); omega_nonfinite, results_nonfinite: the message for the
 * value at index i of omega or of a result (width values per point); stage: the host staging
 * array of len doubles; check_staged: staged results all finite (else the message); solve_end:
 * the info of a solve that succeeded (t0: its start). */
fmk_status fmk_poisson_solve_begin(struct fmk_poisson *s, int nc, const void *omega,
                                   const void *psi, const void *velocity, const char *fn);
fmk_status fmk_poisson_omega_nonfinite(struct fmk_poisson *s, int nc, int64_t i, double value);
fmk_status fmk_poisson_results_nonfinite(struct fmk_poisson *s, const char *what, int64_t i,
                                         int width);
fmk_status fmk_poisson_stage(struct fmk_poisson *s, int64_t len, double **staged);
fmk_status fmk_poisson_check_staged(struct fmk_poisson *s, int nc, const double *psi,
                                    const double *u);
void fmk_poisson_solve_end(struct fmk_poisson *s, int nc, double t0);
/* The points the results hold (the chosen blocks', or every point), and the caller's results
 * from the staged ones (width values per point): the chosen blocks in order, or all. */
int64_t fmk_poisson_result_points(const struct fmk_poisson *s);
void fmk_poisson_extract(const struct fmk_poisson *s, double *dst, const double *src, int width);

/* status.c: records a message on the solver (NULL: on the calling thread, as
 * fmk_error_set(NULL, ...)) and returns status. */
fmk_status fmk_solver_fail(struct fmk_poisson *s, fmk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* status.c: 1 when the running call is to stop: the stop flag, or the caller's check (run
 * from the calling thread, at most every 10 ms), which sets the flag when it says stop. */
int fmk_solver_poll(struct fmk_poisson *s);
/* status.c: fmk_solver_poll as an fmk_interrupt_fn (user = the solver), for the plans the
 * solver makes, so that a stop request reaches the plan's running call. */
int fmk_solver_check(void *solver);

/* The methods' entry points (the table in methods.c), in the form of fmk_poisson_method_ops. */
int fmk_fft_cpu_available(void);
fmk_status fmk_fft_cpu_setup(struct fmk_poisson *s);
fmk_status fmk_fft_cpu_solve(struct fmk_poisson *s, int n_components, const double *omega,
                             double *psi, double *velocity);
void fmk_fft_cpu_release(struct fmk_poisson *s);
int64_t fmk_fft_cpu_bytes(const struct fmk_poisson *s);

/* sum.c (methods direct and fmm through an fmmkit plan, on the CPU; on the GPU as the build
 * allows). check: the plan's own checks of eps for the method and backend. */
fmk_status fmk_sum_check(const fmk_poisson_opts *opts, double eps);
fmk_status fmk_sum_setup(struct fmk_poisson *s);
fmk_status fmk_sum_solve(struct fmk_poisson *s, int n_components, const double *omega,
                         double *psi, double *velocity);
void fmk_sum_release(struct fmk_poisson *s);
int64_t fmk_sum_bytes(const struct fmk_poisson *s);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_POISSON_INTERNAL_H */
