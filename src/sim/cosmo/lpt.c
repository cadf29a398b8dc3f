/* lpt.c -- the Gaussian random field and the Lagrangian perturbation theory's fields on the
 * periodic grid, through FFTW (lpt.h; docs/cosmology.md, "Initial conditions"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/cosmo/lpt.h"

#define TWO_PI 6.28318530717958647692

#ifdef FMK_HAVE_FFTW
#include <fftw3.h>
#include <pthread.h>

/* FFTW's planner is not thread-safe: plans are made and destroyed under this lock (the
 * Poisson solver's FFT method keeps its own, so the two should not plan at the same moment
 * on two threads; docs/cosmology.md). */
static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;
#ifdef FMK_HAVE_FFTW_OMP
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static void threads_init(void)
{
    fftw_init_threads();
}
#endif

fmk_status fmk_cosmo_grid_create(fmk_cosmo_grid *grid, int64_t g, double spacing, int n_fields,
                                 int threads, char *msg, size_t cap)
{
    memset(grid, 0, sizeof *grid);
    grid->g = g;
    grid->row = 2 * (g / 2 + 1);
    grid->spacing = spacing;
    grid->box = (double)g * spacing;
    grid->threads = threads;
    const size_t bytes = (size_t)g * (size_t)g * (size_t)grid->row * sizeof(double);
    for (int i = 0; i < n_fields; i++) {
        grid->field[i] = fftw_malloc(bytes);
        if (!grid->field[i]) {
            fmk_cosmo_grid_destroy(grid);
            snprintf(msg, cap,
                     "fmk_sim_ic_cosmo: out of host memory for the %lld^3 grid (%d fields of "
                     "%.3g GB); lower n or raise spacing",
                     (long long)g, n_fields, (double)bytes * 1e-9);
            return FMK_ERR_NOMEM;
        }
        memset(grid->field[i], 0, bytes);
    }
    pthread_mutex_lock(&planner_lock);
#ifdef FMK_HAVE_FFTW_OMP
    pthread_once(&threads_once, threads_init);
    fftw_plan_with_nthreads(threads);
#endif
    double *f = grid->field[0];
    const int n = (int)g;
    grid->forward = fftw_plan_dft_r2c_3d(n, n, n, f, (fftw_complex *)f, FFTW_ESTIMATE);
    grid->inverse = fftw_plan_dft_c2r_3d(n, n, n, (fftw_complex *)f, f, FFTW_ESTIMATE);
    pthread_mutex_unlock(&planner_lock);
    if (!grid->forward || !grid->inverse) {
        fmk_cosmo_grid_destroy(grid);
        snprintf(msg, cap, "fmk_sim_ic_cosmo: FFTW could not plan the %lld^3 transforms",
                 (long long)g);
        return FMK_ERR_INTERNAL;
    }
    return FMK_OK;
}

void fmk_cosmo_grid_destroy(fmk_cosmo_grid *grid)
{
    pthread_mutex_lock(&planner_lock);
    if (grid->forward)
        fftw_destroy_plan(grid->forward);
    if (grid->inverse)
        fftw_destroy_plan(grid->inverse);
    pthread_mutex_unlock(&planner_lock);
    for (int i = 0; i < FMK_COSMO_FIELDS; i++)
        fftw_free(grid->field[i]);
    memset(grid, 0, sizeof *grid);
}

static void forward(fmk_cosmo_grid *grid, int i)
{
    fftw_execute_dft_r2c(grid->forward, grid->field[i], (fftw_complex *)grid->field[i]);
}

static void inverse(fmk_cosmo_grid *grid, int i)
{
    fftw_execute_dft_c2r(grid->inverse, (fftw_complex *)grid->field[i], grid->field[i]);
}

#else /* no FFTW */

fmk_status fmk_cosmo_grid_create(fmk_cosmo_grid *grid, int64_t g, double spacing, int n_fields,
                                 int threads, char *msg, size_t cap)
{
    (void)g, (void)spacing, (void)n_fields, (void)threads;
    memset(grid, 0, sizeof *grid);
    snprintf(msg, cap,
             "fmk_sim_ic_cosmo: this fmmkit was built without FFTW3 (Debian: apt-get install "
             "libfftw3-dev, then rebuild with FMMKIT_FFTW=ON)");
    return FMK_ERR_UNAVAILABLE;
}

void fmk_cosmo_grid_destroy(fmk_cosmo_grid *grid)
{
    memset(grid, 0, sizeof *grid);
}

static void forward(fmk_cosmo_grid *grid, int i)
{
    (void)grid, (void)i;
}

static void inverse(fmk_cosmo_grid *grid, int i)
{
    (void)grid, (void)i;
}
#endif

/* splitmix64 (Steele, Lea & Flood 2014) as a counter: the m-th number of the stream that
 * starts at state seed, so any cell can be drawn alone and the loop runs in parallel. */
static uint64_t stream(uint64_t seed, uint64_t m)
{
    uint64_t z = seed + (m + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The wavenumber of index i on an axis (the fundamental 2 pi / box), and whether i is the
 * Nyquist index. */
static double wavenumber(const fmk_cosmo_grid *grid, int64_t i)
{
    return TWO_PI / grid->box * (double)(i <= grid->g / 2 ? i : i - grid->g);
}

static int nyquist(const fmk_cosmo_grid *grid, int64_t i)
{
    return grid->g % 2 == 0 && i == grid->g / 2;
}

void fmk_cosmo_grid_delta(fmk_cosmo_grid *grid, const fmk_cosmo_spectrum *s, uint64_t seed)
{
    const int64_t g = grid->g, row = grid->row;
    double *f = grid->field[0];
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t xy = 0; xy < g * g; xy++)
        for (int64_t z = 0; z < g; z++) {
            /* Box-Muller on the pair (2 floor(m/2), 2 floor(m/2) + 1); u1 in (0, 1) */
            const uint64_t m = (uint64_t)(xy * g + z), pair = m / 2;
            const double u1 = ((double)(stream(seed, 2 * pair) >> 11) + 0.5) * 0x1p-53;
            const double u2 = (double)(stream(seed, 2 * pair + 1) >> 11) * 0x1p-53;
            const double r = sqrt(-2 * log(u1));
            f[xy * row + z] = r * (m % 2 == 0 ? cos(TWO_PI * u2) : sin(TWO_PI * u2));
        }
    forward(grid, 0);
    const int64_t nk = g / 2 + 1;
    const double norm = 1 / (sqrt(grid->spacing * grid->spacing * grid->spacing) * (double)g *
                             (double)g * (double)g);
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t xy = 0; xy < g * g; xy++) {
        const int64_t x = xy / g, y = xy % g;
        const double kx = wavenumber(grid, x), ky = wavenumber(grid, y);
        for (int64_t z = 0; z < nk; z++) {
            double *c = f + 2 * (xy * nk + z);
            if ((x == 0 && y == 0 && z == 0) || nyquist(grid, x) || nyquist(grid, y) ||
                nyquist(grid, z)) {
                c[0] = c[1] = 0;
                continue;
            }
            const double kz = wavenumber(grid, z);
            const double amp = sqrt(fmk_cosmo_spectrum_power(s, sqrt(kx * kx + ky * ky + kz * kz)));
            c[0] *= amp * norm;
            c[1] *= amp * norm;
        }
    }
}

void fmk_cosmo_grid_derive(fmk_cosmo_grid *grid, int src, int dst, int a, int b, double scale)
{
    const int64_t g = grid->g, nk = g / 2 + 1;
    const double *from = grid->field[src];
    double *to = grid->field[dst];
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t xy = 0; xy < g * g; xy++) {
        const int64_t idx[2] = {xy / g, xy % g};
        for (int64_t z = 0; z < nk; z++) {
            const int64_t i[3] = {idx[0], idx[1], z};
            const int64_t at = 2 * (xy * nk + z);
            const double k[3] = {wavenumber(grid, i[0]), wavenumber(grid, i[1]),
                                 wavenumber(grid, z)};
            const double k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
            /* the odd derivative's Nyquist modes have no real counterpart: zero them all */
            if (k2 == 0 || nyquist(grid, i[0]) || nyquist(grid, i[1]) || nyquist(grid, z)) {
                to[at] = to[at + 1] = 0;
                continue;
            }
            if (a < 0) { /* the field itself */
                to[at] = scale * from[at];
                to[at + 1] = scale * from[at + 1];
            } else if (b < 0) { /* i k_a / k^2 */
                const double m = scale * k[a] / k2;
                to[at] = -m * from[at + 1];
                to[at + 1] = m * from[at];
            } else { /* k_a k_b / k^2 */
                const double m = scale * k[a] * k[b] / k2;
                to[at] = m * from[at];
                to[at + 1] = m * from[at + 1];
            }
        }
    }
    inverse(grid, dst);
}

/* field[to] op= field[p] * field[q] over the real points (op: 0 set, 1 add, -1 subtract) */
static void accumulate(fmk_cosmo_grid *grid, int to, int p, int q, int op)
{
    const int64_t g = grid->g, row = grid->row;
    double *t = grid->field[to];
    const double *u = grid->field[p], *v = grid->field[q];
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t xy = 0; xy < g * g; xy++)
        for (int64_t z = 0; z < g; z++) {
            const int64_t at = xy * row + z;
            const double w = u[at] * v[at];
            t[at] = op == 0 ? w : op > 0 ? t[at] + w : t[at] - w;
        }
}

void fmk_cosmo_grid_source2(fmk_cosmo_grid *grid)
{
    const int64_t g = grid->g, row = grid->row;
    /* phi_11 phi_22 + (phi_11 + phi_22) phi_33 - phi_12^2 - phi_13^2 - phi_23^2 */
    fmk_cosmo_grid_derive(grid, 0, 1, 0, 0, 1);
    fmk_cosmo_grid_derive(grid, 0, 2, 1, 1, 1);
    accumulate(grid, 3, 1, 2, 0);
    double *f1 = grid->field[1];
    const double *f2 = grid->field[2];
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t xy = 0; xy < g * g; xy++)
        for (int64_t z = 0; z < g; z++)
            f1[xy * row + z] += f2[xy * row + z];
    fmk_cosmo_grid_derive(grid, 0, 2, 2, 2, 1);
    accumulate(grid, 3, 1, 2, 1);
    const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
    for (int i = 0; i < 3; i++) {
        fmk_cosmo_grid_derive(grid, 0, 1, pairs[i][0], pairs[i][1], 1);
        accumulate(grid, 3, 1, 1, -1);
    }
    forward(grid, 3);
    const double norm = 1 / ((double)g * (double)g * (double)g);
    double *s = grid->field[3];
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t i = 0; i < g * g * row; i++)
        s[i] *= norm;
}
