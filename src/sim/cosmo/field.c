/* field.c -- cosmological initial conditions (fmk_sim_ic_cosmo*; docs/cosmology.md, "Initial
 * conditions"): the grid's size, the lattice and its sphere cut, the Zel'dovich and 2LPT
 * positions and momenta. The fields themselves are lpt.c's.
 *
 * The lattice: point (x, y, z), x, y, z in 0..g-1, sits at q = ((x, y, z) + 1/2 - g/2) d about
 * the box centre, so the centre is a lattice point only for odd g. A point is kept when
 * |q| < radius, tested on integers: (2x + 1 - g)^2 + ... < (2 radius / d)^2. Particles come in
 * lattice order (x slowest, z fastest). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cosmo/lpt.h"
#include "sim/sim_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define FOUR_PI_3 4.18879020478639098462 /* 4 pi / 3 */
#define GRID_MAX 2048

void fmk_sim_cosmo_ic_default(fmk_sim_cosmo_ic *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    fmk_sim_cosmology_preset(&p->cosmo, "wmap");
    p->radius = 45;
    p->n = 2874551;
    p->spacing = 0;
    p->z_start = 49;
    p->lpt_order = 1;
    p->seed = 1;
    p->threads = 0;
}

/* The smallest 2^a 3^b 5^c 7^d >= x (x <= GRID_MAX + 1 here, else GRID_MAX + 1). */
static int64_t fftw_size(double x)
{
    for (int64_t m = x > 1 ? (int64_t)ceil(x) : 1; m <= GRID_MAX; m++) {
        int64_t r = m;
        const int primes[4] = {2, 3, 5, 7};
        for (int i = 0; i < 4; i++)
            while (r % primes[i] == 0)
                r /= primes[i];
        if (r == 1)
            return m;
    }
    return GRID_MAX + 1;
}

typedef struct layout {
    double spacing, box, mass, a_start;
    int64_t g, n;
    double limit; /* (2 radius / spacing)^2 */
} layout;

/* Checks p and sizes its grid (the count of the sphere's points included). */
static fmk_status plan_layout(const fmk_sim_cosmo_ic *p, const char *w, layout *l)
{
    if (!p)
        return fmk_sim_fail(NULL, FMK_ERR_NULL, "%s: the parameters are NULL", w);
    char msg[256];
    fmk_status st = fmk_cosmo_check(&p->cosmo, msg, sizeof msg);
    if (st != FMK_OK)
        return fmk_sim_fail(NULL, st, "%s: %s", w, msg);
    if (!(isfinite(p->radius) && p->radius > 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: radius = %g; it must be finite and > 0 (Mpc)",
                            w, p->radius);
    if (!(isfinite(p->spacing) && p->spacing >= 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: spacing = %g; it must be finite and >= 0 (0: from n)", w,
                            p->spacing);
    if (p->spacing == 0 && p->n < 1)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: n = %lld; it must be >= 1 (or set spacing)", w,
                            (long long)p->n);
    if (!(isfinite(p->z_start) && p->z_start > 0))
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: z_start = %g; it must be finite and > 0", w,
                            p->z_start);
    if (p->lpt_order < 0 || p->lpt_order > 2)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: lpt_order = %d; it must be 1 (Zel'dovich), 2 (2LPT) or 0 (the "
                            "lattice alone)",
                            w, (int)p->lpt_order);
    if (p->threads < 0 || p->threads > FMK_THREADS_MAX)
        return fmk_sim_fail(NULL, FMK_ERR_ARG, "%s: threads = %d; it must be in 0..%d", w,
                            (int)p->threads, FMK_THREADS_MAX);
    l->spacing = p->spacing > 0
                     ? p->spacing
                     : cbrt(FOUR_PI_3 * p->radius * p->radius * p->radius / (double)p->n);
    const double need = 2 * p->radius / l->spacing + 4;
    l->g = fftw_size(need);
    if (!(need <= GRID_MAX) || l->g > GRID_MAX)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: the grid would need %.4g points per side (2 radius / spacing + "
                            "4) and the most is %d; raise spacing or lower n",
                            w, need, GRID_MAX);
    l->box = (double)l->g * l->spacing;
    l->mass = fmk_cosmo_rho_m(&p->cosmo) * l->spacing * l->spacing * l->spacing;
    l->a_start = 1 / (1 + p->z_start);
    const double two_r = 2 * p->radius / l->spacing;
    l->limit = two_r * two_r;
    int64_t n = 0;
    const int64_t g = l->g;
    for (int64_t x = 0; x < g; x++)
        for (int64_t y = 0; y < g; y++)
            for (int64_t z = 0; z < g; z++) {
                const int64_t i = 2 * x + 1 - g, j = 2 * y + 1 - g, k = 2 * z + 1 - g;
                n += (double)(i * i + j * j + k * k) < l->limit;
            }
    l->n = n;
    if (n < 1)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: no grid point lies within radius %g Mpc (spacing %g); lower "
                            "spacing",
                            w, p->radius, l->spacing);
    return FMK_OK;
}

fmk_status fmk_sim_ic_cosmo_size(const fmk_sim_cosmo_ic *p, int64_t *n, double *mass, int64_t *grid,
                                 double *box)
{
    layout l;
    fmk_status st = plan_layout(p, "fmk_sim_ic_cosmo_size", &l);
    if (st != FMK_OK)
        return st;
    if (n)
        *n = l.n;
    if (mass)
        *mass = l.mass;
    if (grid)
        *grid = l.g;
    if (box)
        *box = l.box;
    return FMK_OK;
}

static int threads_of(const fmk_sim_cosmo_ic *p)
{
    if (p->threads > 0)
        return p->threads;
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The first particle of each lattice row (x, y) among the kept ones; rows[g^2] = n. */
static void row_offsets(const layout *l, int64_t *rows)
{
    const int64_t g = l->g;
    int64_t n = 0;
    for (int64_t xy = 0; xy < g * g; xy++) {
        rows[xy] = n;
        const int64_t i = 2 * (xy / g) + 1 - g, j = 2 * (xy % g) + 1 - g;
        for (int64_t z = 0; z < g; z++) {
            const int64_t k = 2 * z + 1 - g;
            n += (double)(i * i + j * j + k * k) < l->limit;
        }
    }
    rows[g * g] = n;
}

/* pos[3 i + c] += fp f(q_i) and vel[3 i + c] += fv f(q_i) for the kept particles i, f the
 * real field[f] of the grid. */
static void gather(const layout *l, const fmk_cosmo_grid *grid, const int64_t *rows, int f, int c,
                   double fp, double fv, double *pos, double *vel)
{
    const int64_t g = l->g, row = grid->row;
    const double *field = grid->field[f];
#pragma omp parallel for schedule(static) num_threads(grid->threads)
    for (int64_t xy = 0; xy < g * g; xy++) {
        const int64_t i = 2 * (xy / g) + 1 - g, j = 2 * (xy % g) + 1 - g;
        int64_t p = rows[xy];
        for (int64_t z = 0; z < g; z++) {
            const int64_t k = 2 * z + 1 - g;
            if ((double)(i * i + j * j + k * k) < l->limit) {
                const double v = field[xy * row + z];
                pos[3 * p + c] += fp * v;
                vel[3 * p + c] += fv * v;
                p++;
            }
        }
    }
}

/* The lattice points q (positions) and zero velocities of the kept particles. */
static void lattice(const layout *l, const int64_t *rows, double *pos, double *vel, int threads)
{
    const int64_t g = l->g;
    const double half = 0.5 * l->spacing;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t xy = 0; xy < g * g; xy++) {
        const int64_t i = 2 * (xy / g) + 1 - g, j = 2 * (xy % g) + 1 - g;
        int64_t p = rows[xy];
        for (int64_t z = 0; z < g; z++) {
            const int64_t k = 2 * z + 1 - g;
            if ((double)(i * i + j * j + k * k) < l->limit) {
                pos[3 * p] = half * (double)i;
                pos[3 * p + 1] = half * (double)j;
                pos[3 * p + 2] = half * (double)k;
                vel[3 * p] = vel[3 * p + 1] = vel[3 * p + 2] = 0;
                p++;
            }
        }
    }
}

fmk_status fmk_sim_ic_cosmo(const fmk_sim_cosmo_ic *p, int64_t n, double *mass, double *pos,
                            double *vel)
{
    const char *w = "fmk_sim_ic_cosmo";
    layout l;
    fmk_status st = plan_layout(p, w, &l);
    if (st != FMK_OK)
        return st;
    if (!mass || !pos || !vel)
        return fmk_sim_fail(NULL, FMK_ERR_NULL,
                            "%s: mass, pos and vel must be arrays of n, 3n and 3n doubles", w);
    if (n != l.n)
        return fmk_sim_fail(NULL, FMK_ERR_ARG,
                            "%s: n = %lld but these parameters make %lld particles "
                            "(fmk_sim_ic_cosmo_size)",
                            w, (long long)n, (long long)l.n);
    const int threads = threads_of(p);
    int64_t *rows = malloc((size_t)(l.g * l.g + 1) * sizeof *rows);
    if (!rows)
        return fmk_sim_fail(NULL, FMK_ERR_NOMEM, "%s: out of host memory", w);
    if (p->lpt_order == 0) { /* the unperturbed lattice: no field, no FFT */
        row_offsets(&l, rows);
        lattice(&l, rows, pos, vel, threads);
        free(rows);
        for (int64_t i = 0; i < n; i++)
            mass[i] = l.mass;
        return FMK_OK;
    }
    fmk_cosmo_grid grid;
    char msg[256];
    st = fmk_cosmo_grid_create(&grid, l.g, l.spacing, p->lpt_order == 2 ? 4 : 2, threads, msg,
                               sizeof msg);
    if (st != FMK_OK) {
        free(rows);
        return fmk_sim_fail(NULL, st, "%s", msg);
    }
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, &p->cosmo);
    const fmk_sim_cosmology *c = &p->cosmo;
    const double a = l.a_start, d1 = fmk_cosmo_growth(c, a), f1 = fmk_cosmo_growth_rate(c, a);
    const double a2h = a * a * fmk_cosmo_hubble(c, a);
    row_offsets(&l, rows);
    lattice(&l, rows, pos, vel, threads);
    fmk_cosmo_grid_delta(&grid, &s, p->seed);
    /* first order: x = q + D1 Psi1, p = a^2 H f1 D1 Psi1 */
    for (int k = 0; k < 3; k++) {
        fmk_cosmo_grid_derive(&grid, 0, 1, k, -1, 1);
        gather(&l, &grid, rows, 1, k, d1, a2h * f1 * d1, pos, vel);
    }
    if (p->lpt_order == 2) {
        /* second order (Crocce, Pueblas & Scoccimarro 2006 eqs. 5-7 and their fits):
         * x += D2 Psi2, p += a^2 H f2 D2 Psi2, Psi2 = grad phi2, del^2 phi2 = source, with
         * D2 = -3/7 D1^2 Omega_m(a)^(-1/143) and f2 = 2 Omega_m(a)^(6/11) */
        const double e = fmk_cosmo_hubble(c, a) / fmk_cosmo_h0(c);
        const double om_a = c->omega_m / (a * a * a * e * e);
        const double d2 = -3.0 / 7.0 * d1 * d1 * pow(om_a, -1.0 / 143.0);
        const double f2 = 2 * pow(om_a, 6.0 / 11.0);
        fmk_cosmo_grid_source2(&grid);
        for (int k = 0; k < 3; k++) {
            /* grad phi2 = -(i k / k^2) source */
            fmk_cosmo_grid_derive(&grid, 3, 1, k, -1, -1);
            gather(&l, &grid, rows, 1, k, d2, a2h * f2 * d2, pos, vel);
        }
    }
    fmk_cosmo_grid_destroy(&grid);
    free(rows);
    for (int64_t i = 0; i < n; i++)
        mass[i] = l.mass;
    return FMK_OK;
}

fmk_status fmk_cosmo_ic_linear(const fmk_sim_cosmo_ic *p, double *delta, double *psi)
{
    layout l;
    fmk_status st = plan_layout(p, "fmk_cosmo_ic_linear", &l);
    if (st != FMK_OK)
        return st;
    fmk_cosmo_grid grid;
    char msg[256];
    st = fmk_cosmo_grid_create(&grid, l.g, l.spacing, 2, threads_of(p), msg, sizeof msg);
    if (st != FMK_OK)
        return fmk_sim_fail(NULL, st, "%s", msg);
    fmk_cosmo_spectrum s;
    fmk_cosmo_spectrum_init(&s, &p->cosmo);
    const double d1 = fmk_cosmo_growth(&p->cosmo, l.a_start);
    const int64_t g = l.g, g3 = g * g * g;
    fmk_cosmo_grid_delta(&grid, &s, p->seed);
    for (int k = -1; k < 3; k++) {
        double *out = k < 0 ? delta : psi ? psi + k * g3 : NULL;
        if (!out)
            continue;
        /* a < 0: delta(x) itself, else Psi1's component k */
        fmk_cosmo_grid_derive(&grid, 0, 1, k, -1, 1);
        for (int64_t xy = 0; xy < g * g; xy++)
            for (int64_t z = 0; z < g; z++)
                out[xy * g + z] = d1 * grid.field[1][xy * grid.row + z];
    }
    fmk_cosmo_grid_destroy(&grid);
    return FMK_OK;
}
