/*
 * fft_cuda.h -- method fft on the GPU (backend cuda): fft_cpu.c's Hockney-Eastwood convolution
 * by cuFFT, in double precision, with fft_cpu.c's definitions (the padded kernel, its transform
 * and the spectral curl), so that the two agree to rounding (docs/poisson.md, "Method fft").
 *
 *   fft_cuda.c   the method's entry points (its row in methods.c): what they need of the solver
 *                (whose struct CUDA files see opaque) handed to the device part
 *   fft_cuda.cu  the device part: cuFFT (loaded at run time, as the GPU FMM loads cuBLAS), the
 *                padded arrays, the kernel's transforms, the products, uploads and downloads
 *
 * All of a solve's work runs on the GPU: omega goes up (through two pinned buffers, so that the
 * host's copies overlap the transfers), Psi and u come down the same way into the solver's
 * staged arrays; a failure (out of device memory, a cuFFT or CUDA error, an interrupt between
 * the phases) returns a status with the solver's message and leaves the staged arrays to be
 * dropped (solver.c writes nothing to the caller then).
 */
#ifndef FMMKIT_POISSON_FFT_CUDA_H
#define FMMKIT_POISSON_FFT_CUDA_H

#include <stdint.h>

#include "poisson/poisson.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The method's row (poisson.h, fmk_poisson_method_ops). available: 1 in a CUDA build with a
 * device and cuFFT at hand. setup: the state into s->state (the previous one released first):
 * cuFFT's plans for the padded grid and the kernel's transform, made on the device. solve:
 * n_components of omega (host, the caller's layout) to Psi and/or u (host, staged). release:
 * frees everything (safe with no state). bytes_device, bytes_host: what the state holds. */
int fmk_fft_cuda_available(void);
fmk_status fmk_fft_cuda_setup(struct fmk_poisson *s);
fmk_status fmk_fft_cuda_solve(struct fmk_poisson *s, int n_components, const double *omega,
                              double *psi, double *velocity);
void fmk_fft_cuda_release(struct fmk_poisson *s);
int64_t fmk_fft_cuda_bytes_device(const struct fmk_poisson *s);
int64_t fmk_fft_cuda_bytes_host(const struct fmk_poisson *s);

#ifdef FMK_HAVE_CUDA
/* The device part (fft_cuda.cu). What it needs of the solver, filled by fft_cuda.c: */
typedef struct fmk_fft_cuda_grid {
    int device;       /* opts.device */
    int64_t n[3];     /* nx, ny, nz */
    double e;         /* the smoothing in grid units (fft_cpu.c's e) */
    double scale_psi; /* h^2 / (4 pi): grid units to the caller's (fft_cpu.c) */
    double scale_u;   /* h / (4 pi) */
} fmk_fft_cuda_grid;
struct fmk_fft_cuda;
/* 1 when cuFFT could be loaded (once per process). */
int fmk_fft_cuda_loaded(void);
/* A state for grid g in *out (NULL on failure, everything freed): plans, buffers, the kernel's
 * transform. Interrupts are checked between its phases. */
fmk_status fmk_fft_cuda_make(struct fmk_poisson *s, const fmk_fft_cuda_grid *g,
                             struct fmk_fft_cuda **out);
/* One solve (fmk_fft_cuda_solve's arguments); grows the state's buffers where it needs more
 * (the velocity's at its first solve with u). */
fmk_status fmk_fft_cuda_run(struct fmk_poisson *s, struct fmk_fft_cuda *f, int nc,
                            const double *omega, double *psi, double *u);
void fmk_fft_cuda_free(struct fmk_fft_cuda *f);
/* Bytes held on the device (host = 0) or on the host (host = 1: the state and the pinned
 * buffers). */
int64_t fmk_fft_cuda_held(const struct fmk_fft_cuda *f, int host);
#endif

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_POISSON_FFT_CUDA_H */
