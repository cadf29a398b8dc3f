/* fft_cuda.cu -- method fft on the GPU, the device part (fft_cuda.h): fft_cpu.c's computation with
 * cuFFT, array for array.
 *
 * The arrays are fft_cpu.c's in-place r2c layout: real dims (2nz, 2ny, 2nx) with rows padded to
 * 2 (nx + 1) doubles, the same memory as the (2nz, 2ny, nx + 1) complex half spectrum; one D2Z
 * and one Z2D plan (in place, cuFFT's work area allocated here, one for both) do every
 * transform. The padded kernel is sampled on the device with fft_cpu.c's kernel_at, its
 * expression rounded as the CPU rounds it (no fused multiply-add: __dmul_rn, __dadd_rn), so the
 * samples are the CPU's bit for bit and the two methods differ by their FFTs' rounding only;
 * its transform (Re, over N) is made at setup, the gradient kernels' (Im, over N) at the first
 * solve with u, as on the CPU. A solve: omega up (two pinned buffers of STAGE bytes in turn: the
 * host copies one while the other transfers), each component padded into a work array,
 * transformed, multiplied, transformed back and its octant written into the interleaved Psi or
 * u on the device; then down the same way. Every phase ends with a wait for the stream and the
 * solver's interrupt check (its caller's check runs at most every 10 ms).
 *
 * cuFFT is loaded at the first use (dlopen), as m2l_gemm.cu loads cuBLAS: libfmmkit then loads
 * on machines without libcufft, where this method says so (and auto takes the CPU's FFT). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cufft.h>

#include "poisson/fft_cuda.h"

namespace {

/* The cuFFT functions used, from the loaded library. */
struct cufft_api {
    decltype(&cufftCreate) create;
    decltype(&cufftDestroy) destroy;
    decltype(&cufftSetAutoAllocation) set_auto_allocation;
    decltype(&cufftMakePlanMany64) make_plan;
    decltype(&cufftSetWorkArea) set_work_area;
    decltype(&cufftSetStream) set_stream;
    decltype(&cufftExecD2Z) d2z;
    decltype(&cufftExecZ2D) z2d;
    int ok;
};

#define FMK_STR2(x) #x
#define FMK_STR(x) FMK_STR2(x)
#define FMK_CUFFT_SONAME "libcufft.so." FMK_STR(CUFFT_VER_MAJOR)

/* The library from the loader's path, then $CUDA_HOME/lib64, then /usr/local/cuda/lib64; loaded
 * once per process (a thread-safe static) and kept. */
cufft_api load_cufft()
{
    cufft_api a;
    memset(&a, 0, sizeof a);
    void *h = dlopen(FMK_CUFFT_SONAME, RTLD_NOW | RTLD_LOCAL);
    const char *home = getenv("CUDA_HOME");
    char path[1024];
    if (!h && home && strlen(home) < sizeof path - 40) {
        snprintf(path, sizeof path, "%s/lib64/" FMK_CUFFT_SONAME, home);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        h = dlopen("/usr/local/cuda/lib64/" FMK_CUFFT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return a;
#define FMK_SYM(field, name) a.field = (decltype(a.field))dlsym(h, name)
    FMK_SYM(create, "cufftCreate");
    FMK_SYM(destroy, "cufftDestroy");
    FMK_SYM(set_auto_allocation, "cufftSetAutoAllocation");
    FMK_SYM(make_plan, "cufftMakePlanMany64");
    FMK_SYM(set_work_area, "cufftSetWorkArea");
    FMK_SYM(set_stream, "cufftSetStream");
    FMK_SYM(d2z, "cufftExecD2Z");
    FMK_SYM(z2d, "cufftExecZ2D");
#undef FMK_SYM
    a.ok = a.create && a.destroy && a.set_auto_allocation && a.make_plan && a.set_work_area &&
           a.set_stream && a.d2z && a.z2d;
    return a;
}

const cufft_api *cufft()
{
    static const cufft_api api = load_cufft();
    return api.ok ? &api : NULL;
}

/* Bytes of each pinned staging buffer (two). */
const size_t STAGE = (size_t)4 << 20;

const int THREADS = 256;

unsigned blocks_for(int64_t n)
{
    const int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

} // namespace

struct fmk_fft_cuda {
    fmk_fft_cuda_grid g;
    int64_t dims[3];   /* padded sides, slowest first: 2nz, 2ny, 2nx */
    int64_t row;       /* complex values per row of the half spectrum: nx + 1 */
    int64_t n_complex; /* 2nz * 2ny * (nx + 1) */
    int64_t n_points;  /* nx ny nz */
    cudaStream_t stream;
    cudaEvent_t ev[2]; /* the staging buffers' last transfers */
    int events;
    cufftHandle fwd, inv; /* D2Z and Z2D, in place */
    int has_fwd, has_inv;
    double *d_plan_work; /* cuFFT's work area, both plans' */
    size_t plan_work;
    double *d_kernel;  /* Re DFT(K) / N: n_complex */
    double *d_grad[3]; /* Im DFT(dK/dm_a) / N: n_complex each, made at the first solve with u */
    int grad_ready;
    double *d_work[4]; /* padded arrays, 2 n_complex doubles; work[1..3] with u */
    double *d_io;      /* omega, then Psi, then u (interleaved, the caller's layout) */
    int64_t io_doubles;
    double *h_stage[2]; /* pinned, STAGE bytes each (NULL: transfers from pageable memory) */
};

namespace {

fmk_status cuda_fail(fmk_poisson *s, cudaError_t err, const char *what)
{
    (void)cudaGetLastError();
    return fmk_solver_fail(s,
                           err == cudaErrorMemoryAllocation ? FMK_ERR_DEVICE_NOMEM : FMK_ERR_DEVICE,
                           "method fft on the GPU: %s: %s", what, cudaGetErrorString(err));
}

const char *cufft_name(cufftResult r)
{
    switch (r) {
    case CUFFT_INVALID_PLAN: return "invalid plan";
    case CUFFT_ALLOC_FAILED: return "out of device memory";
    case CUFFT_INVALID_VALUE: return "invalid value";
    case CUFFT_INTERNAL_ERROR: return "internal error";
    case CUFFT_EXEC_FAILED: return "execution failed";
    case CUFFT_SETUP_FAILED: return "setup failed";
    case CUFFT_INVALID_SIZE: return "invalid size";
    case CUFFT_UNALIGNED_DATA: return "unaligned data";
    case CUFFT_INVALID_DEVICE: return "invalid device";
    case CUFFT_NO_WORKSPACE: return "no workspace";
    case CUFFT_NOT_SUPPORTED: return "not supported";
    default: return "error";
    }
}

fmk_status cufft_fail(fmk_poisson *s, const fmk_fft_cuda *f, cufftResult r, const char *what)
{
    (void)cudaGetLastError();
    if (r == CUFFT_ALLOC_FAILED)
        return fmk_solver_fail(s, FMK_ERR_DEVICE_NOMEM,
                               "method fft on the GPU: out of device memory in cuFFT (%s) for "
                               "the padded %lld x %lld x %lld grid (%lld bytes per array)",
                               what, (long long)f->dims[2], (long long)f->dims[1],
                               (long long)f->dims[0], (long long)(16 * f->n_complex));
    return fmk_solver_fail(s, FMK_ERR_DEVICE, "method fft on the GPU: cuFFT, %s: %s (%d)", what,
                           cufft_name(r), (int)r);
}

/* cudaMalloc of doubles for what, with the message on failure (*p NULL then). */
fmk_status dev_alloc(fmk_poisson *s, const fmk_fft_cuda *f, double **p, int64_t doubles,
                     const char *what)
{
    const size_t bytes = 8 * (size_t)(doubles > 0 ? doubles : 1);
    *p = NULL;
    const cudaError_t err = cudaMalloc((void **)p, bytes);
    if (err == cudaSuccess)
        return FMK_OK;
    *p = NULL;
    (void)cudaGetLastError();
    if (err != cudaErrorMemoryAllocation)
        return cuda_fail(s, err, "cudaMalloc");
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        (void)cudaGetLastError(), free_b = 0;
    return fmk_solver_fail(s, FMK_ERR_DEVICE_NOMEM,
                           "method fft on the GPU: out of device memory: %s needs %zu bytes and "
                           "%zu are free (the padded %lld x %lld x %lld grid takes %lld bytes per "
                           "array); use backend cpu or a smaller grid",
                           what, bytes, free_b, (long long)f->dims[2], (long long)f->dims[1],
                           (long long)f->dims[0], (long long)(16 * f->n_complex));
}

/* The caller's device made current for the life of the object. */
struct on_device {
    int prev;
    cudaError_t err;
    explicit on_device(int device) : prev(-1)
    {
        if (cudaGetDevice(&prev) != cudaSuccess)
            prev = -1;
        err = cudaSetDevice(device);
    }
    ~on_device()
    {
        if (prev >= 0)
            cudaSetDevice(prev);
    }
};

/* ----------------------------------------------------------------------------------------------
 * Kernels: fft_cpu.c's loops, a thread per value
 * -------------------------------------------------------------------------------------------- */

/* fft_cpu.c's kernel_at, rounded as the CPU rounds it: G at integer offset m (which = -1), or
 * dG/dm_which (0..2). */
__device__ double kernel_at(const int64_t m[3], double e2, int which)
{
    const double r2 = (double)(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
    const double d = __dadd_rn(r2, e2);
    const double rinv = __ddiv_rn(1.0, __dsqrt_rn(d));
    if (which < 0)
        return __ddiv_rn(__dmul_rn(__dadd_rn(r2, __dmul_rn(1.5, e2)), rinv), d);
    const double g = __dmul_rn(-(double)m[which], __dadd_rn(r2, __dmul_rn(2.5, e2)));
    return __ddiv_rn(__dmul_rn(g, rinv), __dmul_rn(d, d));
}

/* The padded kernel into w (fft_cpu.c, kernel_sample): index i < n of an axis is offset i, i > n
 * offset i - 2n, i = n (no pair of grid points) and the rows' padding zero. */
__global__ void k_sample(int which, int64_t nx, int64_t ny, int64_t nz, int64_t len, double e2,
                         double *__restrict__ w)
{
    const int64_t d1 = 2 * ny, total = 2 * nz * d1 * len;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t % len, r = t / len, j = r % d1, k = r / d1;
        double v = 0;
        if (i < 2 * nx && i != nx && j != ny && k != nz) {
            const int64_t m[3] = {i < nx ? i : i - 2 * nx, j < ny ? j : j - 2 * ny,
                                  k < nz ? k : k - 2 * nz};
            v = kernel_at(m, e2, which);
        }
        w[t] = v;
    }
}

/* out = part 0 (Re) or 1 (Im) of the spectrum in w, times scale. */
__global__ void k_take(int part, double scale, int64_t n_complex, const double *__restrict__ w,
                       double *__restrict__ out)
{
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < n_complex;
         c += (int64_t)gridDim.x * blockDim.x)
        out[c] = __dmul_rn(w[2 * c + part], scale);
}

/* Component a of omega (nc per point) into the octant of w, zeros elsewhere (fft_cpu.c, pad). */
__global__ void k_pad(int64_t nx, int64_t ny, int64_t nz, int64_t len, int nc, int a,
                      const double *__restrict__ omega, double *__restrict__ w)
{
    const int64_t d1 = 2 * ny, total = 2 * nz * d1 * len;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t % len, r = t / len, j = r % d1, k = r / d1;
        w[t] = i < nx && j < ny && k < nz ? omega[nc * (i + nx * (j + ny * k)) + a] : 0.0;
    }
}

/* out = kernel w (out may be w): a real spectrum times a complex one. */
__global__ void k_times_kernel(int64_t n_complex, const double *__restrict__ kernel,
                               const double *w, double *out)
{
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < n_complex;
         c += (int64_t)gridDim.x * blockDim.x) {
        const double k = kernel[c];
        out[2 * c] = __dmul_rn(k, w[2 * c]);
        out[2 * c + 1] = __dmul_rn(k, w[2 * c + 1]);
    }
}

/* u_a's spectrum (fft_cpu.c, solve_velocity): i (dK_b^ w_c - dK_c^ w_b), with dK^ = i kb. */
__global__ void k_curl(int64_t n_complex, const double *__restrict__ kb,
                       const double *__restrict__ kc, const double *__restrict__ wb,
                       const double *__restrict__ wc, double *__restrict__ out)
{
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < n_complex;
         c += (int64_t)gridDim.x * blockDim.x) {
        const double re = __dadd_rn(__dmul_rn(kb[c], wc[2 * c]), -__dmul_rn(kc[c], wb[2 * c]));
        const double im =
            __dadd_rn(__dmul_rn(kb[c], wc[2 * c + 1]), -__dmul_rn(kc[c], wb[2 * c + 1]));
        out[2 * c] = -im; /* times i */
        out[2 * c + 1] = re;
    }
}

/* The octant of w, times scale, into component a of out (width values per point). */
__global__ void k_extract(int64_t nx, int64_t ny, int64_t nz, int64_t len, double scale, int width,
                          int a, const double *__restrict__ w, double *__restrict__ out)
{
    const int64_t total = nx * ny * nz, d1 = 2 * ny;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = t % nx, r = t / nx, j = r % ny, k = r / ny;
        out[width * t + a] = __dmul_rn(scale, w[(k * d1 + j) * len + i]);
    }
}

/* ----------------------------------------------------------------------------------------------
 * Host side
 * -------------------------------------------------------------------------------------------- */

int64_t padded_len(const fmk_fft_cuda *f)
{
    return f->dims[0] * f->dims[1] * 2 * f->row; /* doubles of a padded array */
}

/* A phase's end: its launches' errors, a wait for the stream, then the interrupt check. */
fmk_status phase_end(fmk_poisson *s, fmk_fft_cuda *f, const char *what)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(f->stream);
    if (err != cudaSuccess)
        return cuda_fail(s, err, what);
    if (fmk_solver_poll(s))
        return fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    return FMK_OK;
}

fmk_status forward(fmk_poisson *s, fmk_fft_cuda *f, double *w)
{
    const cufftResult r = cufft()->d2z(f->fwd, w, (cufftDoubleComplex *)w);
    return r == CUFFT_SUCCESS ? FMK_OK : cufft_fail(s, f, r, "a forward transform");
}

fmk_status inverse(fmk_poisson *s, fmk_fft_cuda *f, double *w)
{
    const cufftResult r = cufft()->z2d(f->inv, (cufftDoubleComplex *)w, w);
    return r == CUFFT_SUCCESS ? FMK_OK : cufft_fail(s, f, r, "an inverse transform");
}

/* out = Re (which = -1) or Im (which = 0..2) of the DFT of the padded kernel, over N; in
 * work[0]. */
fmk_status kernel_transform(fmk_poisson *s, fmk_fft_cuda *f, int which, double *out)
{
    const fmk_fft_cuda_grid *g = &f->g;
    double *w = f->d_work[0];
    k_sample<<<blocks_for(padded_len(f)), THREADS, 0, f->stream>>>(which, g->n[0], g->n[1], g->n[2],
                                                                   2 * f->row, g->e * g->e, w);
    fmk_status st = forward(s, f, w);
    if (st != FMK_OK)
        return st;
    const double scale = 1 / ((double)f->dims[0] * (double)f->dims[1] * (double)f->dims[2]);
    k_take<<<blocks_for(f->n_complex), THREADS, 0, f->stream>>>(which < 0 ? 0 : 1, scale,
                                                                f->n_complex, w, out);
    return phase_end(s, f, "the kernel's transform");
}

/* One plan (D2Z or Z2D, in place on the padded layout), its work size into *work. */
fmk_status make_plan(fmk_poisson *s, fmk_fft_cuda *f, cufftHandle *h, int *made, int d2z,
                     size_t *work)
{
    const cufft_api *api = cufft();
    cufftResult r = api->create(h);
    if (r != CUFFT_SUCCESS)
        return cufft_fail(s, f, r, "cufftCreate");
    *made = 1;
    long long n[3] = {f->dims[0], f->dims[1], f->dims[2]};
    long long real[3] = {f->dims[0], f->dims[1], 2 * f->row};
    long long cplx[3] = {f->dims[0], f->dims[1], f->row};
    const long long real_dist = padded_len(f), cplx_dist = f->n_complex;
    r = api->set_auto_allocation(*h, 0);
    if (r == CUFFT_SUCCESS)
        r = d2z ? api->make_plan(*h, 3, n, real, 1, real_dist, cplx, 1, cplx_dist, CUFFT_D2Z, 1,
                                 work)
                : api->make_plan(*h, 3, n, cplx, 1, cplx_dist, real, 1, real_dist, CUFFT_Z2D, 1,
                                 work);
    if (r == CUFFT_SUCCESS)
        r = api->set_stream(*h, f->stream);
    return r == CUFFT_SUCCESS ? FMK_OK : cufft_fail(s, f, r, "a plan of the padded grid");
}

/* The state's stream, events, pinned buffers (none: transfers from pageable memory), plans with
 * their work area, the kernel's transform and the first work array. */
fmk_status start(fmk_poisson *s, fmk_fft_cuda *f)
{
    cudaError_t err = cudaStreamCreateWithFlags(&f->stream, cudaStreamNonBlocking);
    for (; err == cudaSuccess && f->events < 2; f->events++)
        err = cudaEventCreateWithFlags(&f->ev[f->events], cudaEventDisableTiming);
    if (err != cudaSuccess)
        return cuda_fail(s, err, "a stream or an event");
    for (int b = 0; b < 2; b++)
        if (cudaMallocHost((void **)&f->h_stage[b], STAGE) != cudaSuccess) {
            (void)cudaGetLastError();
            cudaFreeHost(f->h_stage[0]);
            f->h_stage[0] = f->h_stage[1] = NULL;
            break;
        }
    size_t work_fwd = 0, work_inv = 0;
    fmk_status st = make_plan(s, f, &f->fwd, &f->has_fwd, 1, &work_fwd);
    if (st == FMK_OK)
        st = make_plan(s, f, &f->inv, &f->has_inv, 0, &work_inv);
    f->plan_work = work_fwd > work_inv ? work_fwd : work_inv;
    if (st == FMK_OK)
        st = dev_alloc(s, f, &f->d_plan_work, (int64_t)((f->plan_work + 7) / 8),
                       "cuFFT's work area");
    if (st == FMK_OK) {
        cufftResult r = cufft()->set_work_area(f->fwd, f->d_plan_work);
        if (r == CUFFT_SUCCESS)
            r = cufft()->set_work_area(f->inv, f->d_plan_work);
        if (r != CUFFT_SUCCESS)
            st = cufft_fail(s, f, r, "cufftSetWorkArea");
    }
    if (st == FMK_OK)
        st = dev_alloc(s, f, &f->d_work[0], padded_len(f), "a work array");
    if (st == FMK_OK)
        st = dev_alloc(s, f, &f->d_kernel, f->n_complex, "the kernel's transform");
    if (st == FMK_OK && fmk_solver_poll(s))
        st = fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    if (st == FMK_OK)
        st = kernel_transform(s, f, -1, f->d_kernel);
    return st;
}

/* The three more work arrays and gradient kernels a solve with u needs (their transforms made
 * once); on a failed allocation the ones this call made are freed again. */
fmk_status velocity_room(fmk_poisson *s, fmk_fft_cuda *f)
{
    double **want[6] = {&f->d_work[1], &f->d_work[2], &f->d_work[3],
                        &f->d_grad[0], &f->d_grad[1], &f->d_grad[2]};
    int made[6] = {0};
    fmk_status st = FMK_OK;
    for (int k = 0; k < 6 && st == FMK_OK; k++)
        if (!*want[k]) {
            st = dev_alloc(s, f, want[k], k < 3 ? padded_len(f) : f->n_complex,
                           k < 3 ? "a work array" : "a gradient kernel's transform");
            made[k] = st == FMK_OK;
        }
    if (st != FMK_OK) {
        for (int k = 0; k < 6; k++)
            if (made[k])
                cudaFree(*want[k]), *want[k] = NULL;
        f->grad_ready = 0;
        return st;
    }
    for (int a = 0; a < 3 && !f->grad_ready && st == FMK_OK; a++)
        st = kernel_transform(s, f, a, f->d_grad[a]);
    if (st == FMK_OK)
        f->grad_ready = 1;
    return st;
}

/* Room for the solve's omega, Psi and u on the device (doubles). */
fmk_status io_room(fmk_poisson *s, fmk_fft_cuda *f, int64_t doubles)
{
    if (f->io_doubles >= doubles)
        return FMK_OK;
    cudaFree(f->d_io);
    f->d_io = NULL, f->io_doubles = 0;
    const fmk_status st = dev_alloc(s, f, &f->d_io, doubles, "omega and the results");
    if (st == FMK_OK)
        f->io_doubles = doubles;
    return st;
}

/* count doubles from host src to device dst: through the pinned buffers in turn (the host
 * fills one while the other transfers), or directly from pageable memory. */
fmk_status upload(fmk_poisson *s, fmk_fft_cuda *f, double *dst, const double *src, int64_t count)
{
    const size_t bytes = 8 * (size_t)count;
    cudaError_t err = cudaSuccess;
    if (!f->h_stage[0])
        err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, f->stream);
    for (size_t off = 0, k = 0; f->h_stage[0] && off < bytes && err == cudaSuccess;
         off += STAGE, k++) {
        const int b = (int)(k & 1);
        const size_t len = bytes - off < STAGE ? bytes - off : STAGE;
        err = cudaEventSynchronize(f->ev[b]); /* its previous transfer is done */
        if (err != cudaSuccess)
            break;
        memcpy(f->h_stage[b], (const char *)src + off, len);
        err = cudaMemcpyAsync((char *)dst + off, f->h_stage[b], len, cudaMemcpyHostToDevice,
                              f->stream);
        if (err == cudaSuccess)
            err = cudaEventRecord(f->ev[b], f->stream);
    }
    return err == cudaSuccess ? phase_end(s, f, "the upload of omega")
                              : cuda_fail(s, err, "the upload of omega");
}

/* count doubles from device src to host dst, the pinned buffers in turn: chunk k transfers
 * into buffer k mod 2 while the host copies chunk k - 1 out of the other. */
fmk_status download(fmk_poisson *s, fmk_fft_cuda *f, double *dst, const double *src, int64_t count)
{
    const size_t bytes = 8 * (size_t)count;
    cudaError_t err = cudaSuccess;
    if (!f->h_stage[0]) {
        err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, f->stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(f->stream);
    }
    const size_t chunks = f->h_stage[0] ? (bytes + STAGE - 1) / STAGE : 0;
    for (size_t k = 0; k < chunks + 1 && err == cudaSuccess; k++) {
        if (k < chunks) {
            const size_t off = k * STAGE, len = bytes - off < STAGE ? bytes - off : STAGE;
            err = cudaEventSynchronize(f->ev[k & 1]); /* the host has copied it out */
            if (err == cudaSuccess)
                err = cudaMemcpyAsync(f->h_stage[k & 1], (const char *)src + off, len,
                                      cudaMemcpyDeviceToHost, f->stream);
            if (err == cudaSuccess)
                err = cudaEventRecord(f->ev[k & 1], f->stream);
        }
        if (k >= 1 && err == cudaSuccess) { /* chunk k - 1 out */
            const size_t off = (k - 1) * STAGE, len = bytes - off < STAGE ? bytes - off : STAGE;
            err = cudaEventSynchronize(f->ev[(k - 1) & 1]);
            if (err == cudaSuccess)
                memcpy((char *)dst + off, f->h_stage[(k - 1) & 1], len);
        }
    }
    return err == cudaSuccess ? FMK_OK : cuda_fail(s, err, "the download of the results");
}

/* Psi only: per component, pad -> D2Z -> times DFT(K) -> Z2D -> octant, in work[0]. */
fmk_status solve_psi(fmk_poisson *s, fmk_fft_cuda *f, int nc, const double *d_omega, double *d_psi)
{
    const fmk_fft_cuda_grid *g = &f->g;
    const int64_t len = 2 * f->row, np = padded_len(f);
    double *w = f->d_work[0];
    fmk_status st = FMK_OK;
    for (int a = 0; a < nc && st == FMK_OK; a++) {
        k_pad<<<blocks_for(np), THREADS, 0, f->stream>>>(g->n[0], g->n[1], g->n[2], len, nc, a,
                                                         d_omega, w);
        st = forward(s, f, w);
        if (st != FMK_OK)
            break;
        k_times_kernel<<<blocks_for(f->n_complex), THREADS, 0, f->stream>>>(f->n_complex,
                                                                            f->d_kernel, w, w);
        st = phase_end(s, f, "a forward pass");
        if (st == FMK_OK)
            st = inverse(s, f, w);
        if (st != FMK_OK)
            break;
        k_extract<<<blocks_for(f->n_points), THREADS, 0, f->stream>>>(
            g->n[0], g->n[1], g->n[2], len, g->scale_psi, nc, a, w, d_psi);
        st = phase_end(s, f, "an inverse pass");
    }
    return st;
}

/* With u: the three transforms of omega kept in work[0..2]; each output formed in work[3] from
 * them and Z2D'd (fft_cpu.c, solve_velocity). */
fmk_status solve_velocity(fmk_poisson *s, fmk_fft_cuda *f, const double *d_omega, double *d_psi,
                          double *d_u)
{
    const fmk_fft_cuda_grid *g = &f->g;
    const int64_t len = 2 * f->row, np = padded_len(f), nc = f->n_complex;
    fmk_status st = FMK_OK;
    for (int a = 0; a < 3 && st == FMK_OK; a++) {
        k_pad<<<blocks_for(np), THREADS, 0, f->stream>>>(g->n[0], g->n[1], g->n[2], len, 3, a,
                                                         d_omega, f->d_work[a]);
        st = forward(s, f, f->d_work[a]);
        if (st == FMK_OK)
            st = phase_end(s, f, "a forward pass");
    }
    double *out = f->d_work[3];
    for (int a = 0; a < 3 && d_psi && st == FMK_OK; a++) {
        k_times_kernel<<<blocks_for(nc), THREADS, 0, f->stream>>>(nc, f->d_kernel, f->d_work[a],
                                                                  out);
        st = inverse(s, f, out);
        if (st != FMK_OK)
            break;
        k_extract<<<blocks_for(f->n_points), THREADS, 0, f->stream>>>(
            g->n[0], g->n[1], g->n[2], len, g->scale_psi, 3, a, out, d_psi);
        st = phase_end(s, f, "an inverse pass");
    }
    for (int a = 0; a < 3 && st == FMK_OK; a++) {
        const int b = (a + 1) % 3, c = (a + 2) % 3;
        k_curl<<<blocks_for(nc), THREADS, 0, f->stream>>>(nc, f->d_grad[b], f->d_grad[c],
                                                          f->d_work[b], f->d_work[c], out);
        st = inverse(s, f, out);
        if (st != FMK_OK)
            break;
        k_extract<<<blocks_for(f->n_points), THREADS, 0, f->stream>>>(
            g->n[0], g->n[1], g->n[2], len, g->scale_u, 3, a, out, d_u);
        st = phase_end(s, f, "an inverse pass");
    }
    return st;
}

/* The solve's phases in order (fmk_fft_cuda_run). */
fmk_status run_phases(fmk_poisson *s, fmk_fft_cuda *f, int nc, const double *omega, double *psi,
                      double *u)
{
    const int64_t np = f->n_points;
    fmk_status st = io_room(s, f, np * (nc + (psi ? nc : 0) + (u ? 3 : 0)));
    if (st == FMK_OK && u)
        st = velocity_room(s, f);
    double *d_omega = f->d_io, *d_psi = d_omega + nc * np, *d_u = d_psi + (psi ? nc * np : 0);
    if (st == FMK_OK)
        st = upload(s, f, d_omega, omega, nc * np);
    if (st == FMK_OK)
        st = u ? solve_velocity(s, f, d_omega, psi ? d_psi : NULL, d_u)
               : solve_psi(s, f, nc, d_omega, d_psi);
    if (st == FMK_OK && psi)
        st = download(s, f, psi, d_psi, nc * np);
    if (st == FMK_OK && u)
        st = download(s, f, u, d_u, 3 * np);
    return st;
}

} // namespace

extern "C" int fmk_fft_cuda_loaded(void)
{
    return cufft() != NULL;
}

extern "C" void fmk_fft_cuda_free(fmk_fft_cuda *f)
{
    if (!f)
        return;
    on_device dev(f->g.device);
    if (f->stream)
        cudaStreamSynchronize(f->stream);
    if (f->has_fwd)
        cufft()->destroy(f->fwd);
    if (f->has_inv)
        cufft()->destroy(f->inv);
    double *dev_arrays[] = {f->d_plan_work, f->d_kernel,  f->d_grad[0], f->d_grad[1], f->d_grad[2],
                            f->d_work[0],   f->d_work[1], f->d_work[2], f->d_work[3], f->d_io};
    for (size_t k = 0; k < sizeof dev_arrays / sizeof dev_arrays[0]; k++)
        cudaFree(dev_arrays[k]);
    for (int b = 0; b < 2; b++)
        cudaFreeHost(f->h_stage[b]);
    for (int e = 0; e < f->events; e++)
        cudaEventDestroy(f->ev[e]);
    if (f->stream)
        cudaStreamDestroy(f->stream);
    (void)cudaGetLastError();
    free(f);
}

extern "C" fmk_status fmk_fft_cuda_make(fmk_poisson *s, const fmk_fft_cuda_grid *g,
                                        fmk_fft_cuda **out)
{
    *out = NULL;
    if (!cufft())
        return fmk_solver_fail(s, FMK_ERR_UNAVAILABLE,
                               "method fft on the GPU needs cuFFT (" FMK_CUFFT_SONAME
                               "), which could not be loaded (set LD_LIBRARY_PATH or CUDA_HOME); "
                               "backend cpu has method fft");
    fmk_fft_cuda *f = (fmk_fft_cuda *)calloc(1, sizeof *f);
    if (!f)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method fft on the GPU: out of host memory");
    f->g = *g;
    for (int a = 0; a < 3; a++)
        f->dims[a] = 2 * g->n[2 - a];
    f->row = g->n[0] + 1;
    f->n_complex = f->dims[0] * f->dims[1] * f->row;
    f->n_points = g->n[0] * g->n[1] * g->n[2];
    fmk_status st = FMK_OK;
    {
        on_device dev(g->device);
        st = dev.err == cudaSuccess ? start(s, f) : cuda_fail(s, dev.err, "cudaSetDevice");
    }
    if (st != FMK_OK) {
        fmk_fft_cuda_free(f);
        return st;
    }
    *out = f;
    return FMK_OK;
}

extern "C" fmk_status fmk_fft_cuda_run(fmk_poisson *s, fmk_fft_cuda *f, int nc, const double *omega,
                                       double *psi, double *u)
{
    on_device dev(f->g.device);
    if (dev.err != cudaSuccess)
        return cuda_fail(s, dev.err, "cudaSetDevice");
    const fmk_status st = run_phases(s, f, nc, omega, psi, u);
    if (st != FMK_OK) { /* nothing of this call runs on after it returns */
        cudaStreamSynchronize(f->stream);
        (void)cudaGetLastError();
    }
    return st;
}

extern "C" int64_t fmk_fft_cuda_held(const fmk_fft_cuda *f, int host)
{
    if (!f)
        return 0;
    if (host)
        return (int64_t)sizeof *f + (f->h_stage[0] ? 2 * (int64_t)STAGE : 0);
    const int64_t padded = 8 * padded_len(f), half = 8 * f->n_complex;
    int64_t b = f->d_plan_work ? (int64_t)f->plan_work : 0;
    b += f->d_kernel ? half : 0;
    for (int a = 0; a < 3; a++)
        b += f->d_grad[a] ? half : 0;
    for (int a = 0; a < 4; a++)
        b += f->d_work[a] ? padded : 0;
    return b + 8 * f->io_doubles;
}
