/* methods.c -- the Poisson solver's methods, one row per method and backend (poisson.h,
 * fmk_poisson_method_ops), and how AUTO resolves. solver.c calls a method only through its row,
 * so the method rules live here and in the methods' own files. */
#include <stddef.h>

#include "poisson/fft_cuda.h"
#include "poisson/poisson.h"
#include "poisson/treecode/treecode.h"

const char *fmk_poisson_method_name(fmk_poisson_method method)
{
    switch (method) {
    case FMK_POISSON_AUTO: return "auto";
    case FMK_POISSON_DIRECT: return "direct";
    case FMK_POISSON_FMM: return "fmm";
    case FMK_POISSON_FFT: return "fft";
    case FMK_POISSON_TREECODE: return "treecode";
    }
    return NULL;
}

int fmk_poisson_method_available(fmk_poisson_method method)
{
    switch (method) {
    case FMK_POISSON_AUTO: return 1;
    case FMK_POISSON_DIRECT:
    case FMK_POISSON_FMM:
    case FMK_POISSON_FFT:
    case FMK_POISSON_TREECODE:
        return fmk_poisson_ops_find(method, FMK_BACKEND_CPU) ||
               fmk_poisson_ops_find(method, FMK_BACKEND_CUDA);
    }
    return 0;
}

static int always(void)
{
    return 1;
}

#ifdef FMK_HAVE_CUDA
static int have_gpu(void)
{
    return fmk_cuda_device_count() > 0;
}
#endif

#define SUM_ROW(m, b, avail)                                                                  \
    {m, b, 0, avail, fmk_sum_check, fmk_sum_setup, fmk_sum_solve, NULL, fmk_sum_release,     \
     fmk_sum_bytes, NULL}

static const fmk_poisson_method_ops rows[] = {
    SUM_ROW(FMK_POISSON_DIRECT, FMK_BACKEND_CPU, always),
    SUM_ROW(FMK_POISSON_FMM, FMK_BACKEND_CPU, always),
    {FMK_POISSON_FFT, FMK_BACKEND_CPU, 1, fmk_fft_cpu_available, NULL, fmk_fft_cpu_setup,
     fmk_fft_cpu_solve, NULL, fmk_fft_cpu_release, fmk_fft_cpu_bytes, NULL},
    {FMK_POISSON_TREECODE, FMK_BACKEND_CPU, 0, always, fmk_treecode_check, fmk_treecode_setup,
     fmk_treecode_solve, NULL, fmk_treecode_release, fmk_treecode_bytes, fmk_treecode_bytes_device},
#ifdef FMK_HAVE_CUDA
    SUM_ROW(FMK_POISSON_DIRECT, FMK_BACKEND_CUDA, have_gpu),
    SUM_ROW(FMK_POISSON_FMM, FMK_BACKEND_CUDA, have_gpu),
    {FMK_POISSON_FFT, FMK_BACKEND_CUDA, 1, fmk_fft_cuda_available, NULL, fmk_fft_cuda_setup,
     fmk_fft_cuda_solve, NULL, fmk_fft_cuda_release, fmk_fft_cuda_bytes_host, fmk_fft_cuda_bytes_device},
    {FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, have_gpu, fmk_treecode_check, fmk_treecode_setup,
     fmk_treecode_solve, fmk_treecode_solve_device,
     fmk_treecode_release, fmk_treecode_bytes, fmk_treecode_bytes_device},
#endif
};

const fmk_poisson_method_ops *fmk_poisson_ops_find(fmk_poisson_method method, fmk_backend backend)
{
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        if (rows[k].method == method && rows[k].backend == backend)
            return rows[k].available() ? &rows[k] : NULL;
    return NULL;
}

const fmk_poisson_method_ops *fmk_poisson_ops_for(fmk_poisson_opts *o)
{
    const fmk_poisson_method_ops *ops = NULL;
    if (o->backend == FMK_BACKEND_AUTO) {
        ops = fmk_poisson_ops_find(o->method, FMK_BACKEND_CUDA);
        if (!ops)
            ops = fmk_poisson_ops_find(o->method, FMK_BACKEND_CPU);
    } else
        ops = fmk_poisson_ops_find(o->method, o->backend);
    if (ops)
        return ops;
    if (o->method == FMK_POISSON_FFT && o->backend != FMK_BACKEND_CUDA &&
        !fmk_fft_cpu_available())
        fmk_solver_fail(NULL, FMK_ERR_UNAVAILABLE,
                        "method fft needs FFTW, which this build of fmmkit did not find "
                        "(Debian: apt-get install libfftw3-dev, then configure again); "
                        "methods direct, fmm and treecode compute the same sum");
    else
        fmk_solver_fail(NULL, FMK_ERR_UNAVAILABLE,
                        "method %s on backend %s is not available in this build%s",
                        fmk_poisson_method_name(o->method), fmk_backend_name(o->backend),
                        o->backend == FMK_BACKEND_CUDA && fmk_cuda_device_count() <= 0
                            ? " (no CUDA device)"
                            : "");
    return NULL;
}

/* AUTO: on a uniform grid the FFT (exact, O(M log M)) where the backend has it, else the
 * treecode; on a block grid the treecode. The backend: the GPU where present and the method
 * runs there, else the CPU. */
void fmk_poisson_resolve_auto(fmk_poisson_opts *o, int uniform)
{
    const fmk_backend asked = o->backend;
    if (o->method == FMK_POISSON_AUTO) {
        const fmk_backend b = asked == FMK_BACKEND_AUTO ? FMK_BACKEND_CUDA : asked;
        const int fft = fmk_poisson_ops_find(FMK_POISSON_FFT, b) ||
                        (asked == FMK_BACKEND_AUTO && fmk_poisson_ops_find(FMK_POISSON_FFT,
                                                                           FMK_BACKEND_CPU));
        o->method = uniform && fft ? FMK_POISSON_FFT : FMK_POISSON_TREECODE;
    }
    if (asked == FMK_BACKEND_AUTO)
        o->backend = fmk_poisson_ops_find(o->method, FMK_BACKEND_CUDA) ? FMK_BACKEND_CUDA
                                                                          : FMK_BACKEND_CPU;
}
