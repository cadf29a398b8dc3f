/* fft_cuda.c -- method fft on the GPU: the entry points of its row in methods.c (fft_cuda.h).
 * The solver's struct holds core's C11 interrupt state, which CUDA files cannot see, so this file
 * reads what the device part (fft_cuda.cu) needs of the solver and keeps its state in s->state. */
#include <stdlib.h>

#include "poisson/fft_cuda.h"

#ifdef FMK_HAVE_CUDA

int fmk_fft_cuda_available(void)
{
    return fmk_cuda_device_count() > 0 && fmk_fft_cuda_loaded();
}

void fmk_fft_cuda_release(fmk_poisson *s)
{
    fmk_fft_cuda_free(s->state);
    s->state = NULL;
}

fmk_status fmk_fft_cuda_setup(fmk_poisson *s)
{
    fmk_fft_cuda_release(s);
    /* Grid units back to the caller's (fft_cpu.c): G_eps(h m) h^3 = h^2 G_e(m), grad by one h
     * less. */
    const fmk_fft_cuda_grid g = {s->opts.device,
                                 {s->n[0], s->n[1], s->n[2]},
                                 s->e,
                                 s->h * s->h * FMK_INV_4PI,
                                 s->h * FMK_INV_4PI};
    struct fmk_fft_cuda *f = NULL;
    const fmk_status st = fmk_fft_cuda_make(s, &g, &f);
    s->state = f;
    return st;
}

fmk_status fmk_fft_cuda_solve(fmk_poisson *s, int nc, const double *omega, double *psi,
                              double *velocity)
{
    const int64_t len = s->n_points * nc;
    int64_t sources = 0;
#pragma omp parallel for reduction(+ : sources) schedule(static) \
    num_threads(s->threads) if (len > 65536)
    for (int64_t i = 0; i < len; i += nc) {
        int nonzero = 0;
        for (int a = 0; a < nc; a++)
            nonzero |= omega[i + a] != 0;
        sources += nonzero;
    }
    s->info.n_sources = sources;
    return fmk_fft_cuda_run(s, s->state, nc, omega, psi, velocity);
}

int64_t fmk_fft_cuda_bytes_device(const fmk_poisson *s)
{
    return fmk_fft_cuda_held(s->state, 0);
}

int64_t fmk_fft_cuda_bytes_host(const fmk_poisson *s)
{
    return fmk_fft_cuda_held(s->state, 1);
}

#else /* a build without CUDA: no row in methods.c uses these */

int fmk_fft_cuda_available(void)
{
    return 0;
}
fmk_status fmk_fft_cuda_setup(fmk_poisson *s)
{
    return fmk_solver_fail(s, FMK_ERR_UNAVAILABLE, "method fft on the GPU: a build without CUDA");
}
fmk_status fmk_fft_cuda_solve(fmk_poisson *s, int nc, const double *omega, double *psi,
                              double *velocity)
{
    (void)nc, (void)omega, (void)psi, (void)velocity;
    return fmk_fft_cuda_setup(s);
}
void fmk_fft_cuda_release(fmk_poisson *s)
{
    (void)s;
}
int64_t fmk_fft_cuda_bytes_device(const fmk_poisson *s)
{
    (void)s;
    return 0;
}
int64_t fmk_fft_cuda_bytes_host(const fmk_poisson *s)
{
    (void)s;
    return 0;
}

#endif
