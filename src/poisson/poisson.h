/*
 * poisson.h -- what the files of the Poisson solver share (never installed; docs/poisson.md).
 *
 * solver.c owns the life cycle and every check of the caller's input; the methods trust it:
 *   fft_cpu.c   Hockney-Eastwood FFT convolution (FFTW), uniform grids
 *   sum_cpu.c   the sum over grid points through an fmmkit plan (methods direct and fmm)
 *   rings.c     the test problem of van Rees et al. (section 5.1)
 * A method writes its results into the solver's staging buffer (same layout as the caller's
 * arrays); solver.c copies them out only when every value is finite.
 */
#ifndef FMMKIT_POISSON_INTERNAL_H
#define FMMKIT_POISSON_INTERNAL_H


#include "core/internal.h"
#include "fmmkit_poisson.h"

/* 1/(4 pi): the factor of the Laplace Green's function (paper eq. 3) that fmmkit's kernels
 * leave out. */
#define FMK_INV_4PI 0.0795774715459476678844418816862571

struct fmk_fft_cpu;
struct fmk_sum_cpu;

struct fmk_poisson {
    fmk_poisson_opts opts; /* as given, method and backend resolved */
    double eps;
    int threads; /* OpenMP threads (>= 1), resolved again at every call */

    int has_grid;
    int64_t n[3];     /* nx, ny, nz */
    int64_t n_points; /* nx * ny * nz */
    double h, origin[3];
    double smoothing; /* eps of the kernel in length units */
    double e;         /* the same in grid units: smoothing / h */

    struct fmk_fft_cpu *fft; /* method fft's state, or NULL */
    struct fmk_sum_cpu *sum; /* methods direct and fmm, or NULL */
    int64_t bytes;           /* what fft and sum hold */

    double *staged; /* results before they go to the caller (owned) */
    int64_t staged_len;

    struct fmk_interrupt interrupt; /* the stop flag and the caller's check (core) */

    fmk_poisson_info info;
    char error[FMK_ERROR_LEN];
};

/* solver.c: records a message on the solver (NULL: on the calling thread, as
 * fmk_error_set(NULL, ...)) and returns status. */
fmk_status fmk_solver_fail(struct fmk_poisson *s, fmk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* solver.c: 1 when the running call is to stop: the stop flag, or the caller's check (run
 * from the calling thread, at most every 10 ms), which sets the flag when it says stop. */
int fmk_solver_poll(struct fmk_poisson *s);
/* solver.c: fmk_solver_poll as an fmk_interrupt_fn (user = the solver), for the plans the
 * solver makes, so that a stop request reaches the plan's running call. */
int fmk_solver_check(void *solver);

/* fft_cpu.c (method fft). setup: the kernel's transform and the FFTW plans for the solver's
 * grid (the previous state released first). solve: n_components of omega to Psi (psi, may be
 * NULL) and u (velocity, may be NULL; then n_components = 3), both in the caller's layout.
 * release: frees everything (safe on NULL state). bytes: what the state holds. available: 1
 * in a build with FFTW. All return FMK_OK or a status recorded on the solver. */
int fmk_fft_cpu_available(void);
fmk_status fmk_fft_cpu_setup(struct fmk_poisson *s);
fmk_status fmk_fft_cpu_solve(struct fmk_poisson *s, int n_components, const double *omega,
                             double *psi, double *velocity);
void fmk_fft_cpu_release(struct fmk_poisson *s);
int64_t fmk_fft_cpu_bytes(const struct fmk_poisson *s);

/* sum_cpu.c (methods direct and fmm): the same four. check_eps: the plan's own checks of eps
 * for the method, at fmk_poisson_create (message on the calling thread). */
fmk_status fmk_sum_cpu_check_eps(fmk_poisson_method method, double eps, int32_t threads);
fmk_status fmk_sum_cpu_setup(struct fmk_poisson *s);
fmk_status fmk_sum_cpu_solve(struct fmk_poisson *s, int n_components, const double *omega,
                             double *psi, double *velocity);
void fmk_sum_cpu_release(struct fmk_poisson *s);
int64_t fmk_sum_cpu_bytes(const struct fmk_poisson *s);

#endif /* FMMKIT_POISSON_INTERNAL_H */
