/* fft_cpu.c -- method fft: the grid sum of docs/poisson.md as a Hockney-Eastwood convolution.
 *
 * On a uniform grid Psi = K * omega (a linear convolution over integer offsets m, |m_a| < n_a)
 * with K(m) = G(|m|) in grid units (e = eps/h) and Psi scaled by h^2/(4 pi) afterwards. A cyclic
 * convolution of period 2n per axis equals it on the grid's own octant when omega is padded with
 * zeros and K holds offset -m at index 2n - m (Hockney & Eastwood, "Computer simulation using
 * particles": the doubled mesh of isolated systems). Index n, which no offset between two grid
 * points reaches, holds 0, so the padded K is even on every axis and its DFT is real; dK/dm_a
 * is odd on axis a, even on the others, and its DFT is imaginary. Each is kept as one real
 * array of the half spectrum, 1/N of the inverse transform folded in.
 *
 * Arrays are FFTW's in-place r2c layout: real dims (2nz, 2ny, 2nx) with rows padded to
 * 2 (nx + 1) doubles, the same memory as the (2nz, 2ny, nx + 1) complex half spectrum.
 *
 * The 3D transforms are three passes of 1D transforms (x, y, z), for three reasons measured on
 * 2 cores: (1) pruning: a padded omega is zero outside one octant and only one octant of a
 * result is wanted, so the x pass runs on a quarter of the rows and the y pass on half of the
 * planes; (2) FFTW_ESTIMATE's plan for the z direction (a stride of a whole plane, a multiple
 * of 4 KB) ran 10 to 25 times slower than FFTW_MEASURE's (0.29 s against 0.011 s for one pass
 * of a 256^3 array), and FFTW_MEASURE takes 2 s (one thread) to 40 s (two) to plan; so the z
 * pass gathers blocks of Z_BLOCK columns into a contiguous buffer, transforms them there and
 * scatters them back (0.018 s); (3) FFTW_ESTIMATE plans only: planning costs nothing, leaves
 * the arrays alone, and the results do not depend on timings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/poisson.h"

#ifdef FMK_HAVE_FFTW
#include <fftw3.h>

#include "core/fftw_lock.h"

/* Columns per block of the z pass: a block of 2nz x 8 complex values (64 KB at 2nz = 512)
 * stays in L2 (at 2nz = 256, 4 and 16 columns took 40% longer, 32 twice as long). */
#define Z_BLOCK 8

struct fmk_fft_cpu {
    int dims[3];            /* padded sides, slowest first: 2nz, 2ny, 2nx */
    int64_t row;            /* complex values per row of the half spectrum: nx + 1 */
    int64_t n_complex;      /* 2nz * 2ny * (nx + 1) */
    double *kernel;         /* Re DFT(K) / N, n_complex values */
    double *grad_kernel[3]; /* Im DFT(dK/dm_a) / N, made at the first solve with u */
    int grad_ready;
    double *work[4]; /* in-place r2c arrays, 2 n_complex doubles; work[1..3] with u */
    /* The passes (top of the file): x_forward and y_forward on the octant's rows and planes
     * ([0]) or on all of them ([1], the kernels); z on a buffer of Z_BLOCK columns; the inverse
     * passes end on the octant. */
    fftw_plan x_forward[2], y_forward[2], z_forward, z_inverse, y_inverse, x_inverse;
    double *z_buffers; /* plan_threads buffers of 2nz * Z_BLOCK complex values */
    int plan_threads;
};

static double *alloc_doubles(int64_t n)
{
    size_t bytes = sizeof(double) * (size_t)n;
    bytes = (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
    return aligned_alloc(64, bytes);
}

int fmk_fft_cpu_available(void)
{
    return 1;
}

static void destroy_plans(struct fmk_fft_cpu *f)
{
    fftw_plan *all[8] = {&f->x_forward[0], &f->x_forward[1], &f->y_forward[0], &f->y_forward[1],
                         &f->z_forward,    &f->z_inverse,    &f->y_inverse,    &f->x_inverse};
    fmk_fftw_lock();
    for (int i = 0; i < 8; i++) {
        if (*all[i])
            fftw_destroy_plan(*all[i]);
        *all[i] = NULL;
    }
    fmk_fftw_unlock();
    free(f->z_buffers);
    f->z_buffers = NULL;
}

/* The passes' plans, on work[0] and z_buffers (executed on every work array and every
 * thread's buffer: same alignment, in place). Strides count doubles for real data and complex
 * values for complex data: a row is P = 2R doubles or R = nx + 1 complex values, a plane d1
 * rows. Called with the planner lock held. */
static void plan_passes(const fmk_poisson *s, struct fmk_fft_cpu *f)
{
    double *w = f->work[0];
    fftw_complex *c = (fftw_complex *)w, *zb = (fftw_complex *)f->z_buffers;
    const ptrdiff_t nz = s->n[2], ny = s->n[1], d0 = f->dims[0], d1 = f->dims[1];
    const ptrdiff_t d2 = f->dims[2], r = f->row, p = 2 * f->row;
    const unsigned flags = FFTW_ESTIMATE;
    const fftw_iodim64 x = {d2, 1, 1}, y = {d1, r, r};
    for (int all = 0; all < 2; all++) {
        const ptrdiff_t planes = all ? d0 : nz, rows = all ? d1 : ny;
        const fftw_iodim64 x_rows[2] = {{planes, d1 * p, d1 * r}, {rows, p, r}};
        const fftw_iodim64 y_planes[2] = {{planes, d1 * r, d1 * r}, {r, 1, 1}};
        f->x_forward[all] = fftw_plan_guru64_dft_r2c(1, &x, 2, x_rows, w, c, flags);
        f->y_forward[all] = fftw_plan_guru64_dft(1, &y, 2, y_planes, c, c, FFTW_FORWARD, flags);
    }
    const fftw_iodim64 x_rows[2] = {{nz, d1 * r, d1 * p}, {ny, r, p}};
    const fftw_iodim64 y_planes[2] = {{nz, d1 * r, d1 * r}, {r, 1, 1}};
    f->y_inverse = fftw_plan_guru64_dft(1, &y, 2, y_planes, c, c, FFTW_BACKWARD, flags);
    f->x_inverse = fftw_plan_guru64_dft_c2r(1, &x, 2, x_rows, c, w, flags);
    /* The z pass runs inside the solver's own parallel loop: one thread per plan. */
#ifdef FMK_HAVE_FFTW_OMP
    fftw_plan_with_nthreads(1);
#endif
    const fftw_iodim64 z = {d0, 1, 1}, columns[1] = {{Z_BLOCK, d0, d0}};
    f->z_forward = fftw_plan_guru64_dft(1, &z, 1, columns, zb, zb, FFTW_FORWARD, flags);
    f->z_inverse = fftw_plan_guru64_dft(1, &z, 1, columns, zb, zb, FFTW_BACKWARD, flags);
}

static fmk_status make_plans(fmk_poisson *s, struct fmk_fft_cpu *f)
{
    destroy_plans(f);
    f->z_buffers = alloc_doubles(2 * (int64_t)f->dims[0] * Z_BLOCK * s->threads);
    if (!f->z_buffers)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method fft: out of host memory");
    fmk_fftw_lock();
#ifdef FMK_HAVE_FFTW_OMP
    fftw_plan_with_nthreads(s->threads);
#endif
    plan_passes(s, f);
    fmk_fftw_unlock();
    f->plan_threads = s->threads;
    int made = f->z_forward && f->z_inverse && f->y_inverse && f->x_inverse;
    for (int i = 0; i < 2; i++)
        made &= f->x_forward[i] && f->y_forward[i];
    if (!made)
        return fmk_solver_fail(s, FMK_ERR_INTERNAL,
                               "FFTW could not plan the transforms of a %d x %d x %d grid",
                               f->dims[0], f->dims[1], f->dims[2]);
    return FMK_OK;
}

/* The z pass: blocks of Z_BLOCK columns (consecutive complex values of one plane; a column is
 * 2nz values a plane apart) gathered into a thread's buffer, one column after the other,
 * transformed there by plan (z_forward or z_inverse), scattered back. */
static void z_pass(const fmk_poisson *s, const struct fmk_fft_cpu *f, fftw_plan plan, double *w)
{
    const int64_t d0 = f->dims[0], plane = 2 * (int64_t)f->dims[1] * f->row; /* doubles */
    const int64_t n_columns = plane / 2, n_blocks = (n_columns + Z_BLOCK - 1) / Z_BLOCK;
    (void)s; /* only the thread count is read, and only with OpenMP */
#pragma omp parallel num_threads(s->threads)
    {
        double *buf = f->z_buffers + 2 * d0 * Z_BLOCK * fmk_thread_num();
#pragma omp for schedule(static)
        for (int64_t b = 0; b < n_blocks; b++) {
            const int64_t first = b * Z_BLOCK;
            const int m = (int)(n_columns - first < Z_BLOCK ? n_columns - first : Z_BLOCK);
            if (m < Z_BLOCK) /* the last block: its unused columns transform zeros */
                memset(buf, 0, sizeof(double) * 2 * (size_t)(d0 * Z_BLOCK));
            for (int64_t i = 0; i < d0; i++) {
                const double *src = w + i * plane + 2 * first;
                for (int q = 0; q < m; q++) {
                    buf[2 * (q * d0 + i)] = src[2 * q];
                    buf[2 * (q * d0 + i) + 1] = src[2 * q + 1];
                }
            }
            fftw_execute_dft(plan, (fftw_complex *)buf, (fftw_complex *)buf);
            for (int64_t i = 0; i < d0; i++) {
                double *dst = w + i * plane + 2 * first;
                for (int q = 0; q < m; q++) {
                    dst[2 * q] = buf[2 * (q * d0 + i)];
                    dst[2 * q + 1] = buf[2 * (q * d0 + i) + 1];
                }
            }
        }
    }
}

/* Work array w to its spectrum: a padded omega (all = 0: nonzero in the octant only) or a
 * padded kernel (all = 1). */
static void transform_forward(const fmk_poisson *s, const struct fmk_fft_cpu *f, double *w, int all)
{
    fftw_execute_dft_r2c(f->x_forward[all], w, (fftw_complex *)w);
    fftw_execute_dft(f->y_forward[all], (fftw_complex *)w, (fftw_complex *)w);
    z_pass(s, f, f->z_forward, w);
}

/* A spectrum in w to the octant of its inverse transform (the rest of w is left undefined). */
static void transform_inverse(const fmk_poisson *s, const struct fmk_fft_cpu *f, double *w)
{
    z_pass(s, f, f->z_inverse, w);
    fftw_execute_dft(f->y_inverse, (fftw_complex *)w, (fftw_complex *)w);
    fftw_execute_dft_c2r(f->x_inverse, (fftw_complex *)w, w);
}

/* The sampled kernel at integer offset m (grid units, e = eps/h): which = -1 for G (paper
 * eq. 7 without 1/(4 pi): docs/kernels.md, regularized), 0..2 for dG/dm_which. */
static double kernel_at(const int64_t m[3], double e2, int which)
{
    const double r2 = (double)(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
    const double d = r2 + e2;
    const double rinv = 1 / sqrt(d);
    if (which < 0)
        return (r2 + 1.5 * e2) * rinv / d;
    return -(double)m[which] * (r2 + 2.5 * e2) * rinv / (d * d);
}

/* The padded kernel in w. Every kernel is even or odd on each axis (odd on axis `which` for
 * a gradient), so one octant of offsets is evaluated, each row's negative offsets copied from
 * its positive ones and the rows of negative y or z offsets copied from their mirror rows:
 * an eighth of the evaluations (the 512^3 arrays of a 256^3 grid have 1.3e8 values). */
static void kernel_sample(const fmk_poisson *s, const struct fmk_fft_cpu *f, int which, double *w)
{
    const int64_t nx = s->n[0], ny = s->n[1], nz = s->n[2];
    const int64_t d0 = f->dims[0], d1 = f->dims[1], len = 2 * f->row;
    const double e2 = s->e * s->e, sign_x = which == 0 ? -1 : 1;
#pragma omp parallel for collapse(2) schedule(static) num_threads(s->threads)
    for (int64_t k = 0; k < nz; k++)
        for (int64_t j = 0; j < ny; j++) {
            double *r = w + (k * d1 + j) * len;
            int64_t m[3] = {0, j, k};
            for (int64_t i = 0; i < nx; i++) {
                m[0] = i;
                r[i] = kernel_at(m, e2, which);
            }
            r[nx] = 0; /* offset n: no pair of grid points */
            for (int64_t i = 1; i < nx; i++)
                r[2 * nx - i] = sign_x * r[i];
            for (int64_t i = 2 * nx; i < len; i++)
                r[i] = 0; /* the row's padding */
        }
#pragma omp parallel for collapse(2) schedule(static) num_threads(s->threads)
    for (int64_t k = 0; k < d0; k++)
        for (int64_t j = 0; j < d1; j++) {
            if (k < nz && j < ny)
                continue; /* evaluated above */
            double *r = w + (k * d1 + j) * len;
            if (k == nz || j == ny) {
                memset(r, 0, sizeof(double) * (size_t)len);
                continue;
            }
            const int64_t km = k < nz ? k : d0 - k, jm = j < ny ? j : d1 - j;
            const double sign = (which == 2 && k > nz ? -1 : 1) * (which == 1 && j > ny ? -1 : 1);
            const double *src = w + (km * d1 + jm) * len;
            for (int64_t i = 0; i < len; i++)
                r[i] = sign * src[i];
        }
}

/* out = Re (which = -1) or Im (which = 0..2) of the DFT of the padded kernel, over N. */
static void kernel_transform(fmk_poisson *s, struct fmk_fft_cpu *f, int which, double *out)
{
    double *w = f->work[0];
    kernel_sample(s, f, which, w);
    transform_forward(s, f, w, 1);
    const double scale = 1 / ((double)f->dims[0] * (double)f->dims[1] * (double)f->dims[2]);
    const int part = which < 0 ? 0 : 1;
    const int64_t nc = f->n_complex;
#pragma omp parallel for schedule(static) num_threads(s->threads)
    for (int64_t c = 0; c < nc; c++)
        out[c] = w[2 * c + part] * scale;
}

/* Component a of omega (nc per point) into the octant of work array w, zeros elsewhere. */
static void pad(const fmk_poisson *s, const struct fmk_fft_cpu *f, const double *omega, int nc,
                int a, double *w)
{
    const int64_t nx = s->n[0], ny = s->n[1], nz = s->n[2];
    const int64_t d0 = f->dims[0], d1 = f->dims[1], len = 2 * f->row;
#pragma omp parallel for collapse(2) schedule(static) num_threads(s->threads)
    for (int64_t k = 0; k < d0; k++)
        for (int64_t j = 0; j < d1; j++) {
            double *r = w + (k * d1 + j) * len;
            if (k >= nz || j >= ny) {
                memset(r, 0, sizeof(double) * (size_t)len);
                continue;
            }
            const double *src = omega + nc * nx * (j + ny * k) + a;
            for (int64_t i = 0; i < nx; i++)
                r[i] = src[nc * i];
            memset(r + nx, 0, sizeof(double) * (size_t)(len - nx));
        }
}

/* The octant of w, times scale, into component a of out (width values per point). */
static void extract(const fmk_poisson *s, const struct fmk_fft_cpu *f, const double *w,
                    double scale, int width, int a, double *out)
{
    const int64_t nx = s->n[0], ny = s->n[1], nz = s->n[2];
    const int64_t d1 = f->dims[1], len = 2 * f->row;
#pragma omp parallel for collapse(2) schedule(static) num_threads(s->threads)
    for (int64_t k = 0; k < nz; k++)
        for (int64_t j = 0; j < ny; j++) {
            const double *r = w + (k * d1 + j) * len;
            double *dst = out + width * nx * (j + ny * k) + a;
            for (int64_t i = 0; i < nx; i++)
                dst[width * i] = scale * r[i];
        }
}

void fmk_fft_cpu_release(fmk_poisson *s)
{
    struct fmk_fft_cpu *f = s->state;
    if (!f)
        return;
    destroy_plans(f);
    free(f->kernel);
    for (int a = 0; a < 3; a++)
        free(f->grad_kernel[a]);
    for (int a = 0; a < 4; a++)
        free(f->work[a]);
    free(f);
    s->state = NULL;
}

int64_t fmk_fft_cpu_bytes(const fmk_poisson *s)
{
    const struct fmk_fft_cpu *f = s->state;
    if (!f)
        return 0;
    int64_t b = (int64_t)sizeof *f;
    const int64_t half = (int64_t)sizeof(double) * f->n_complex;
    b += f->kernel ? half : 0;
    for (int a = 0; a < 3; a++)
        b += f->grad_kernel[a] ? half : 0;
    for (int a = 0; a < 4; a++)
        b += f->work[a] ? 2 * half : 0;
    if (f->z_buffers)
        b += (int64_t)sizeof(double) * 2 * f->dims[0] * Z_BLOCK * f->plan_threads;
    return b;
}

static fmk_status interrupted(fmk_poisson *s)
{
    return fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
}

static fmk_status out_of_memory(fmk_poisson *s, const char *what, int64_t doubles)
{
    return fmk_solver_fail(s, FMK_ERR_NOMEM,
                           "method fft: out of host memory (%lld bytes for %s; the padded "
                           "grid is %lld values)",
                           (long long)(sizeof(double) * (size_t)doubles), what,
                           (long long)(2 * ((struct fmk_fft_cpu *)s->state)->n_complex));
}

fmk_status fmk_fft_cpu_setup(fmk_poisson *s)
{
    fmk_fft_cpu_release(s);
    struct fmk_fft_cpu *f = calloc(1, sizeof *f);
    if (!f)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method fft: out of host memory");
    s->state = f;
    for (int a = 0; a < 3; a++)
        f->dims[a] = (int)(2 * s->n[2 - a]);
    f->row = s->n[0] + 1;
    f->n_complex = (int64_t)f->dims[0] * f->dims[1] * f->row;
    f->work[0] = alloc_doubles(2 * f->n_complex);
    if (!f->work[0])
        return out_of_memory(s, "a work array", 2 * f->n_complex);
    f->kernel = alloc_doubles(f->n_complex);
    if (!f->kernel)
        return out_of_memory(s, "the kernel's transform", f->n_complex);
    fmk_status st = make_plans(s, f);
    if (st != FMK_OK)
        return st;
    if (fmk_solver_poll(s))
        return interrupted(s);
    kernel_transform(s, f, -1, f->kernel);
    return fmk_solver_poll(s) ? interrupted(s) : FMK_OK;
}

/* What a solve with u needs beyond the setup: three more work arrays and the three gradient
 * kernels' transforms (made once, at the first such solve). */
static fmk_status velocity_setup(fmk_poisson *s, struct fmk_fft_cpu *f)
{
    for (int a = 1; a < 4; a++)
        if (!f->work[a] && !(f->work[a] = alloc_doubles(2 * f->n_complex)))
            return out_of_memory(s, "a work array", 2 * f->n_complex);
    for (int a = 0; a < 3; a++)
        if (!f->grad_kernel[a] && !(f->grad_kernel[a] = alloc_doubles(f->n_complex)))
            return out_of_memory(s, "a gradient kernel's transform", f->n_complex);
    for (int a = 0; a < 3 && !f->grad_ready; a++) {
        if (fmk_solver_poll(s))
            return interrupted(s);
        kernel_transform(s, f, a, f->grad_kernel[a]);
    }
    f->grad_ready = 1;
    return FMK_OK;
}

/* Psi only: per component, pad -> r2c -> times DFT(K) -> c2r -> extract, in work[0]. */
static fmk_status solve_psi(fmk_poisson *s, struct fmk_fft_cpu *f, int nc, const double *omega,
                            double scale, double *psi)
{
    double *w = f->work[0];
    const double *kernel = f->kernel;
    const int64_t n_complex = f->n_complex;
    for (int a = 0; a < nc; a++) {
        if (fmk_solver_poll(s))
            return interrupted(s);
        pad(s, f, omega, nc, a, w);
        transform_forward(s, f, w, 0);
#pragma omp parallel for schedule(static) num_threads(s->threads)
        for (int64_t c = 0; c < n_complex; c++) {
            w[2 * c] *= kernel[c];
            w[2 * c + 1] *= kernel[c];
        }
        if (fmk_solver_poll(s))
            return interrupted(s);
        transform_inverse(s, f, w);
        extract(s, f, w, scale, nc, a, psi);
    }
    return FMK_OK;
}

/* With u: the three transforms of omega kept in work[0..2]; each output formed in work[3]
 * from them and c2r'd: Psi_a = K^ w_a, u_a = i (dK_b^ w_c - dK_c^ w_b), (a, b, c) cyclic,
 * dK^ = i grad_kernel (its DFT is imaginary). */
static fmk_status solve_velocity(fmk_poisson *s, struct fmk_fft_cpu *f, const double *omega,
                                 double scale_psi, double scale_u, double *psi, double *u)
{
    fmk_status st = velocity_setup(s, f);
    if (st != FMK_OK)
        return st;
    const int64_t n_complex = f->n_complex;
    for (int a = 0; a < 3; a++) {
        if (fmk_solver_poll(s))
            return interrupted(s);
        pad(s, f, omega, 3, a, f->work[a]);
        transform_forward(s, f, f->work[a], 0);
    }
    double *out = f->work[3];
    for (int a = 0; a < 3 && psi; a++) {
        const double *w = f->work[a], *kernel = f->kernel;
#pragma omp parallel for schedule(static) num_threads(s->threads)
        for (int64_t c = 0; c < n_complex; c++) {
            out[2 * c] = kernel[c] * w[2 * c];
            out[2 * c + 1] = kernel[c] * w[2 * c + 1];
        }
        if (fmk_solver_poll(s))
            return interrupted(s);
        transform_inverse(s, f, out);
        extract(s, f, out, scale_psi, 3, a, psi);
    }
    for (int a = 0; a < 3 && u; a++) {
        const int b = (a + 1) % 3, c3 = (a + 2) % 3;
        const double *wb = f->work[b], *wc = f->work[c3];
        const double *kb = f->grad_kernel[b], *kc = f->grad_kernel[c3];
#pragma omp parallel for schedule(static) num_threads(s->threads)
        for (int64_t c = 0; c < n_complex; c++) {
            const double re = kb[c] * wc[2 * c] - kc[c] * wb[2 * c];
            const double im = kb[c] * wc[2 * c + 1] - kc[c] * wb[2 * c + 1];
            out[2 * c] = -im; /* times i */
            out[2 * c + 1] = re;
        }
        if (fmk_solver_poll(s))
            return interrupted(s);
        transform_inverse(s, f, out);
        extract(s, f, out, scale_u, 3, a, u);
    }
    return FMK_OK;
}

fmk_status fmk_fft_cpu_solve(fmk_poisson *s, int nc, const double *omega, double *psi,
                             double *velocity)
{
    struct fmk_fft_cpu *f = s->state;
    if (f->plan_threads != s->threads) { /* fewer threads now (a forked child): plan again */
        fmk_status st = make_plans(s, f);
        if (st != FMK_OK)
            return st;
    }
    /* Grid units back to the caller's: G_eps(h m) h^3 = h^2 G_e(m), grad by one h less. */
    const double scale_psi = s->h * s->h * FMK_INV_4PI, scale_u = s->h * FMK_INV_4PI;
    s->info.n_sources = 0;
    for (int64_t i = 0; i < s->n_points * nc; i += nc) {
        int nonzero = 0;
        for (int a = 0; a < nc; a++)
            nonzero |= omega[i + a] != 0;
        s->info.n_sources += nonzero;
    }
    if (!velocity)
        return solve_psi(s, f, nc, omega, scale_psi, psi);
    return solve_velocity(s, f, omega, scale_psi, scale_u, psi, velocity);
}

#else /* no FFTW in this build: method fft is refused at fmk_poisson_create */

int fmk_fft_cpu_available(void)
{
    return 0;
}
fmk_status fmk_fft_cpu_setup(fmk_poisson *s)
{
    return fmk_solver_fail(s, FMK_ERR_UNAVAILABLE, "method fft: this build has no FFTW");
}
fmk_status fmk_fft_cpu_solve(fmk_poisson *s, int nc, const double *omega, double *psi,
                             double *velocity)
{
    (void)nc, (void)omega, (void)psi, (void)velocity;
    return fmk_fft_cpu_setup(s);
}
void fmk_fft_cpu_release(fmk_poisson *s)
{
    (void)s;
}
int64_t fmk_fft_cpu_bytes(const fmk_poisson *s)
{
    (void)s;
    return 0;
}

#endif
