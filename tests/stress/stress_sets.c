/* stress_sets.c -- the suite's point sets and its reference sum (stress.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"
#include "testutil.h"

const char *stress_set_name(stress_set_id id)
{
    static const char *const names[STRESS_SET_COUNT] = {
        "uniform",     "plummer",      "coincident",   "coinc+targets", "nested-30", "outlier-1e6",
        "outlier-1e9", "outlier-1e12", "outlier-1e15", "plane",         "line",      "offset-1e8"};
    return (int)id >= 0 && id < STRESS_SET_COUNT ? names[id] : "?";
}

static void uniform_points(test_rng *r, int dim, int64_t n, double *x)
{
    for (int64_t i = 0; i < dim * n; i++)
        x[i] = test_uniform(r);
}

/* Plummer sphere (3D, scale radius 1, cut at radius 4) or standard normal (2D). */
static void plummer_points(test_rng *r, int dim, int64_t n, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        double *p = x + dim * i;
        if (dim == 2) {
            p[0] = test_normal(r), p[1] = test_normal(r);
            continue;
        }
        double rad;
        do { /* M(<rad) = rad^3 / (1 + rad^2)^(3/2), inverted */
            double m = test_uniform(r);
            rad = m > 0 ? 1.0 / sqrt(pow(m, -2.0 / 3.0) - 1.0) : 0;
        } while (!(rad < 4.0));
        double z = 2 * test_uniform(r) - 1, phi = 6.283185307179586 * test_uniform(r);
        double rho = sqrt(1 - z * z);
        p[0] = rad * rho * cos(phi), p[1] = rad * rho * sin(phi), p[2] = rad * z;
    }
}

/* Points on a plane z = 0.3 (3D) or the line y = 0.25 (2D); slanted: a slanted line. */
static void flat_points(test_rng *r, int dim, int64_t n, int slanted, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        double *p = x + dim * i, t = test_uniform(r);
        if (slanted) {
            p[0] = t, p[1] = 0.5 * t - 1;
            if (dim == 3)
                p[2] = 0.3 - 0.25 * t;
        } else {
            p[0] = t, p[1] = dim == 3 ? test_uniform(r) : 0.25;
            if (dim == 3)
                p[2] = 0.3;
        }
    }
}

/* 8 Gaussian clusters (sigma 0.03, the same centres for every seed) offset by 1e8. */
static void offset_points(test_rng *r, int dim, int64_t n, double *x)
{
    test_rng fixed = test_rng_seed(8);
    double centers[8][3];
    for (int c = 0; c < 8; c++)
        for (int k = 0; k < 3; k++)
            centers[c][k] = 0.15 + 0.7 * test_uniform(&fixed);
    for (int64_t i = 0; i < n; i++) {
        const int c = (int)(8 * test_uniform(r));
        for (int k = 0; k < dim; k++)
            x[dim * i + k] = 1e8 + centers[c][k] + 0.03 * test_normal(r);
    }
}

void stress_set_make(stress_set *s, stress_set_id id, int dim, int64_t n)
{
    test_rng r = test_rng_seed(1000 + 17 * (uint64_t)id + (uint64_t)dim);
    const int octaves = 31;
    if (id == STRESS_NESTED) /* a whole number of points per octave */
        n = (n / octaves > 0 ? n / octaves : 1) * octaves;
    memset(s, 0, sizeof *s);
    s->id = id, s->dim = dim, s->ns = n, s->nt = n;
    s->src = test_alloc(dim * n);
    s->q = test_alloc(n);
    s->qc = test_alloc(2 * n);
    test_charges(n, 0, 31 + (uint64_t)id, s->q);
    test_charges(n, 1, 37 + (uint64_t)id, s->qc);
    double *x = s->src;
    switch (id) {
    case STRESS_UNIFORM: uniform_points(&r, dim, n, x); break;
    case STRESS_PLUMMER: plummer_points(&r, dim, n, x); break;
    case STRESS_COINCIDENT:
    case STRESS_COINCIDENT_TRG: {
        /* a group of 2n/5 + 1 points: larger than any method's leaf at these sizes */
        const int64_t g = 2 * n / 5;
        uniform_points(&r, dim, n, x);
        for (int64_t i = 0; i < g; i++)
            for (int k = 0; k < dim; k++)
                x[dim * i + k] = x[dim * g + k];
        if (id == STRESS_COINCIDENT_TRG) {
            s->nt = n / 2;
            s->trg = test_alloc(dim * s->nt);
            uniform_points(&r, dim, s->nt, s->trg);
            for (int64_t i = 0; i < s->nt / 2; i++)
                for (int k = 0; k < dim; k++)
                    s->trg[dim * i + k] = x[dim * g + k];
        }
        break;
    }
    case STRESS_NESTED: {
        const double center[3] = {0.3, 0.6, 0.45};
        const int64_t per = n / octaves;
        for (int o = 0; o < octaves; o++)
            for (int64_t i = 0; i < per; i++)
                for (int k = 0; k < dim; k++)
                    x[dim * (o * per + i) + k] = center[k] + ldexp(test_uniform(&r) - 0.5, -o);
        break;
    }
    case STRESS_OUTLIER_1E6:
    case STRESS_OUTLIER_1E9:
    case STRESS_OUTLIER_1E12:
    case STRESS_OUTLIER_1E15: {
        const double far[4] = {1e6, 1e9, 1e12, 1e15};
        const double d = far[id - STRESS_OUTLIER_1E6];
        uniform_points(&r, dim, n, x);
        double *p = x + dim * (n / 2);
        p[0] = d, p[1] = -0.5 * d;
        if (dim == 3)
            p[2] = 0.25 * d;
        break;
    }
    case STRESS_PLANE: flat_points(&r, dim, n, 0, x); break;
    case STRESS_LINE: flat_points(&r, dim, n, 1, x); break;
    case STRESS_OFFSET: offset_points(&r, dim, n, x); break;
    default: break;
    }
}

void stress_set_free(stress_set *s)
{
    free(s->src), free(s->trg), free(s->q), free(s->qc);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------------------------------
 * The reference
 * ------------------------------------------------------------------------------------------ */

/* The plan's frame as docs/kernels.md defines it: centre of the bounding box of sources and
 * targets, width the power of two at or above the box's largest side (and the softening). */
typedef struct ref_frame {
    double center[3], inv;
} ref_frame;

static ref_frame frame_of(const stress_set *s, double softening)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int pass = 0; pass < 2; pass++) {
        const double *x = pass ? s->trg : s->src;
        const int64_t n = pass ? (s->trg ? s->nt : 0) : s->ns;
        for (int64_t i = 0; i < n; i++)
            for (int k = 0; k < s->dim; k++) {
                lo[k] = fmin(lo[k], x[s->dim * i + k]);
                hi[k] = fmax(hi[k], x[s->dim * i + k]);
            }
    }
    ref_frame f;
    double size = softening;
    for (int k = 0; k < s->dim; k++) {
        f.center[k] = 0.5 * lo[k] + 0.5 * hi[k];
        size = fmax(size, hi[k] - lo[k]);
    }
    double w = 1;
    while (w < size)
        w *= 2;
    while (w / 2 >= size && size > 0)
        w /= 2;
    f.inv = 1 / w;
    return f;
}

/* Neumaier's compensated sum in long double. */
typedef struct csum {
    long double s, c;
} csum;

static void csum_add(csum *a, long double v)
{
    long double t = a->s + v;
    a->c += fabsl(a->s) >= fabsl(v) ? (a->s - t) + v : (v - t) + a->s;
    a->s = t;
}

/* One pair in long double from d = y - x (docs/kernels.md): g (2 values for cauchy2d) and dg
 * (dim values, or 2 for cauchy2d). coincident: the pair is at r = 0 by the frame's rule.
 * Returns 0 when the pair adds nothing. */
static int pair(fmk_kernel kernel, long double s2, const long double d[3], int coincident,
                long double g[2], long double dg[3])
{
    const long double r2 = coincident ? 0 : d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    long double radial; /* G'(r) / r */
    switch (kernel) {
    case FMK_KERNEL_LAPLACE:
        if (coincident)
            return 0;
        g[0] = 1 / sqrtl(r2), radial = -g[0] / r2;
        break;
    case FMK_KERNEL_PLUMMER: {
        const long double D = r2 + s2, sD = sqrtl(D);
        g[0] = 1 / sD, radial = -1 / (D * sD);
        break;
    }
    case FMK_KERNEL_REGULARIZED: {
        const long double D = r2 + s2, D32 = D * sqrtl(D);
        g[0] = (r2 + 1.5L * s2) / D32, radial = -(r2 + 2.5L * s2) / (D32 * D);
        break;
    }
    case FMK_KERNEL_LOG2D:
        if (coincident)
            return 0;
        g[0] = 0.5L * logl(r2), radial = 1 / r2;
        break;
    case FMK_KERNEL_CAUCHY2D: {
        if (coincident)
            return 0;
        const long double a = -d[0], b = -d[1]; /* w = z_j - z = a + ib; 1/w = conj(w)/|w|^2 */
        const long double ur = a / r2, ui = -b / r2;
        g[0] = ur, g[1] = ui;
        dg[0] = ur * ur - ui * ui, dg[1] = 2 * ur * ui;
        return 1;
    }
    default: return 0;
    }
    for (int k = 0; k < 3; k++)
        dg[k] = coincident ? 0 : radial * d[k];
    return 1;
}

/* A point's mapped coordinates, rounded to the precision. */
static void mapped(const ref_frame *f, int dim, const double *x, fmk_precision p, double out[3])
{
    out[2] = 0;
    for (int k = 0; k < dim; k++) {
        const double m = 1.5 + (x[k] - f->center[k]) * f->inv;
        out[k] = p == FMK_PRECISION_FP32 ? (double)(float)m : m;
    }
}

/* Adds q G and q dG of one pair (g, dg from pair()) to the sums p (potential) and gs. */
static void add_term(int cplx, int dim, const stress_set *s, int64_t j, const long double g[2],
                     const long double dg[3], csum p[2], csum gs[3])
{
    if (cplx) {
        const long double qr = s->qc[2 * j], qi = s->qc[2 * j + 1];
        csum_add(&p[0], qr * g[0] - qi * g[1]);
        csum_add(&p[1], qr * g[1] + qi * g[0]);
        csum_add(&gs[0], qr * dg[0] - qi * dg[1]);
        csum_add(&gs[1], qr * dg[1] + qi * dg[0]);
    } else {
        const long double q = s->q[j];
        csum_add(&p[0], q * g[0]);
        for (int k = 0; k < dim; k++)
            csum_add(&gs[k], q * dg[k]);
    }
}

void stress_reference(const stress_set *s, fmk_kernel kernel, double softening, double *pot64,
                      double *grad64, double *pot32, double *grad32)
{
    const int dim = s->dim, cplx = kernel == FMK_KERNEL_CAUCHY2D, self = s->trg == NULL;
    const int pw = cplx ? 2 : 1, gw = cplx ? 2 : dim;
    const int smooth = kernel == FMK_KERNEL_PLUMMER || kernel == FMK_KERNEL_REGULARIZED;
    const ref_frame f = frame_of(s, smooth ? softening : 0);
    const long double s2 = (long double)softening * softening;
    const double *trg = self ? s->src : s->trg;
    double *ms = test_alloc(6 * s->ns); /* mapped sources: fp64, then rounded to fp32 */
    for (int64_t j = 0; j < s->ns; j++) {
        mapped(&f, dim, s->src + dim * j, FMK_PRECISION_FP64, ms + 3 * j);
        mapped(&f, dim, s->src + dim * j, FMK_PRECISION_FP32, ms + 3 * (s->ns + j));
    }
#pragma omp parallel for schedule(dynamic, 8)
    for (int64_t i = 0; i < s->nt; i++) {
        double mt[2][3];
        mapped(&f, dim, trg + dim * i, FMK_PRECISION_FP64, mt[0]);
        mapped(&f, dim, trg + dim * i, FMK_PRECISION_FP32, mt[1]);
        /* the fp64 rule; the fp32 rule's sum again only where it sees some pair at r = 0
         * that the fp64 rule does not (a subtraction of those terms could cancel) */
        int differs = 0;
        for (int rule = 0; rule < 1 + differs; rule++) {
            csum p[2], gs[3];
            memset(p, 0, sizeof p), memset(gs, 0, sizeof gs);
            for (int64_t j = 0; j < s->ns; j++) {
                if (self && j == i)
                    continue;
                /* fp64: equal inputs (the direct sum's exact frame; the fast methods' frame
                 * merges more only where their guard refuses); fp32: equal in the fp32 frame */
                int coincident[2] = {1, 0};
                for (int k = 0; k < dim; k++)
                    coincident[0] &= trg[dim * i + k] == s->src[dim * j + k];
                {
                    const double *mj = ms + 3 * (s->ns + j), *m = mt[1];
                    coincident[1] = m[0] == mj[0] && m[1] == mj[1] && m[2] == mj[2];
                }
                differs |= coincident[1] != coincident[0];
                long double d[3] = {0, 0, 0}, g[2] = {0, 0}, dg[3] = {0, 0, 0};
                for (int k = 0; k < dim; k++)
                    d[k] = (long double)trg[dim * i + k] - (long double)s->src[dim * j + k];
                if (pair(kernel, s2, d, coincident[rule], g, dg))
                    add_term(cplx, dim, s, j, g, dg, p, gs);
            }
            for (int c = 0; c < pw; c++) {
                const double v = (double)(p[c].s + p[c].c);
                pot64[pw * i + c] = rule ? pot64[pw * i + c] : v;
                pot32[pw * i + c] = v;
            }
            for (int k = 0; k < gw; k++) {
                const double v = (double)(gs[k].s + gs[k].c);
                grad64[gw * i + k] = rule ? grad64[gw * i + k] : v;
                grad32[gw * i + k] = v;
            }
        }
    }
    free(ms);
}
