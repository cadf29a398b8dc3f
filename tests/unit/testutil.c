/* testutil.c -- see testutil.h. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

test_rng test_rng_seed(uint64_t seed)
{
    test_rng r = {seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull};
    return r;
}

static uint64_t next_u64(test_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double test_uniform(test_rng *r)
{
    return (double)(next_u64(r) >> 11) * 0x1p-53;
}

double test_normal(test_rng *r)
{
    /* Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
    double u = 1.0 - test_uniform(r), v = test_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

const char *test_dist_name(test_dist d)
{
    static const char *const names[TEST_DIST_COUNT] = {
        "uniform cube",   "plummer",   "clustered", "sphere surface",
        "uniform square", "normal 2d", "layer 2d"};
    return (int)d >= 0 && d < TEST_DIST_COUNT ? names[d] : "?";
}

int test_dist_dim(test_dist d)
{
    return d <= TEST_DIST_SPHERE ? 3 : 2;
}

/* A uniformly random direction. */
static void unit_vector(test_rng *r, double v[3])
{
    double z = 2.0 * test_uniform(r) - 1.0, phi = 6.283185307179586 * test_uniform(r);
    double rho = sqrt(1.0 - z * z);
    v[0] = rho * cos(phi), v[1] = rho * sin(phi), v[2] = z;
}

void test_points(test_dist dist, int64_t n, uint64_t seed, double *x)
{
    test_rng r = test_rng_seed(seed), fixed = test_rng_seed(8);
    double centers[8][3]; /* the same clusters for every seed */
    for (int c = 0; c < 8; c++)
        for (int k = 0; k < 3; k++)
            centers[c][k] = 0.15 + 0.7 * test_uniform(&fixed);
    for (int64_t i = 0; i < n; i++) {
        double *p = x + (int64_t)test_dist_dim(dist) * i, u[3];
        switch (dist) {
        case TEST_DIST_CUBE:
            for (int k = 0; k < 3; k++)
                p[k] = test_uniform(&r);
            break;
        case TEST_DIST_PLUMMER: {
            /* Cumulative mass M(<rad) = rad^3 / (1 + rad^2)^(3/2), inverted. */
            double rad;
            do {
                double m = test_uniform(&r);
                rad = m > 0 ? 1.0 / sqrt(pow(m, -2.0 / 3.0) - 1.0) : 0;
            } while (!(rad < 4.0));
            unit_vector(&r, u);
            for (int k = 0; k < 3; k++)
                p[k] = rad * u[k];
            break;
        }
        case TEST_DIST_CLUSTERED: {
            int c = (int)(8 * test_uniform(&r));
            for (int k = 0; k < 3; k++)
                p[k] = centers[c][k] + 0.03 * test_normal(&r);
            break;
        }
        case TEST_DIST_SPHERE:
            unit_vector(&r, u);
            for (int k = 0; k < 3; k++)
                p[k] = u[k];
            break;
        case TEST_DIST_SQUARE: p[0] = test_uniform(&r), p[1] = test_uniform(&r); break;
        case TEST_DIST_NORMAL2D: p[0] = test_normal(&r), p[1] = test_normal(&r); break;
        case TEST_DIST_LAYER:
            p[0] = test_uniform(&r);
            p[1] = 0.1 * sin(6.283185307179586 * p[0]) + 0.2 * test_uniform(&r);
            break;
        default: break;
        }
    }
}

/* Greedy thinning with a hashed grid of cells of side min_separation: a candidate is accepted
 * when no accepted point lies within min_separation, which only points in the 3^dim cells
 * around it can. */
typedef struct thin_grid {
    int dim;
    double cell;
    int64_t nbuckets;     /* a power of two */
    int64_t *head, *next; /* bucket -> first point, point -> next point in its bucket */
    const double *x;
} thin_grid;

static uint64_t cell_hash(const int64_t c[3])
{
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < 3; k++)
        h = (h ^ (uint64_t)c[k]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int thin_accepts(const thin_grid *g, const double *p)
{
    int64_t c[3] = {0, 0, 0}, nb[3] = {0, 0, 0};
    for (int k = 0; k < g->dim; k++)
        c[k] = (int64_t)floor(p[k] / g->cell);
    for (int a = -1; a <= 1; a++)
        for (int b = -1; b <= 1; b++)
            for (int e = (g->dim == 3 ? -1 : 0); e <= (g->dim == 3 ? 1 : 0); e++) {
                nb[0] = c[0] + a, nb[1] = c[1] + b, nb[2] = c[2] + e;
                for (int64_t j = g->head[cell_hash(nb) & (g->nbuckets - 1)]; j >= 0;
                     j = g->next[j]) {
                    double r2 = 0;
                    for (int k = 0; k < g->dim; k++) {
                        double d = p[k] - g->x[g->dim * j + k];
                        r2 += d * d;
                    }
                    if (r2 < g->cell * g->cell)
                        return 0;
                }
            }
    return 1;
}

static void thin_insert(thin_grid *g, int64_t i)
{
    int64_t c[3] = {0, 0, 0};
    for (int k = 0; k < g->dim; k++)
        c[k] = (int64_t)floor(g->x[g->dim * i + k] / g->cell);
    uint64_t b = cell_hash(c) & (g->nbuckets - 1);
    g->next[i] = g->head[b];
    g->head[b] = i;
}

void test_points_separated(test_dist dist, int64_t n, uint64_t seed, double min_separation,
                           double *x)
{
    const int dim = test_dist_dim(dist);
    thin_grid g = {dim, min_separation, 1, NULL, NULL, x};
    while (g.nbuckets < 4 * n)
        g.nbuckets *= 2;
    g.head = malloc(sizeof(int64_t) * g.nbuckets);
    g.next = malloc(sizeof(int64_t) * (n > 0 ? n : 1));
    const int64_t chunk = 256;
    double *pool = test_alloc(chunk * dim);
    if (!g.head || !g.next) {
        fprintf(stderr, "test_points_separated: out of memory\n");
        exit(2);
    }
    for (int64_t b = 0; b < g.nbuckets; b++)
        g.head[b] = -1;
    int64_t accepted = 0;
    for (uint64_t round = 0; accepted < n; round++) {
        if (round > (uint64_t)(1000 + 100 * n / chunk)) {
            fprintf(stderr, "test_points_separated: %s cannot hold %lld points %g apart\n",
                    test_dist_name(dist), (long long)n, min_separation);
            exit(2);
        }
        test_points(dist, chunk, seed + 7919 * round, pool);
        for (int64_t c = 0; c < chunk && accepted < n; c++)
            if (thin_accepts(&g, pool + dim * c)) {
                for (int k = 0; k < dim; k++)
                    x[dim * accepted + k] = pool[dim * c + k];
                thin_insert(&g, accepted++);
            }
    }
    free(pool), free(g.head), free(g.next);
}

const char *test_set2d_name(test_set2d set)
{
    static const char *names[] = {"uniform", "normal", "layer", "duplicates", "outlier"};
    return set >= 0 && set < TEST_SET2D_COUNT ? names[set] : "?";
}

void test_points_set2d(test_set2d set, int64_t n, uint64_t seed, const double outlier[2],
                       int outlier_bits, double *x)
{
    test_rng r = test_rng_seed(seed);
    for (int64_t i = 0; i < n; i++) {
        double px, py;
        do {
            px = test_uniform(&r), py = test_uniform(&r);
            if (set == TEST_SET2D_NORMAL)
                px = 0.5 + 0.1 * test_normal(&r);
            if (set == TEST_SET2D_NORMAL || set == TEST_SET2D_LAYER)
                py = 0.5 + 0.1 * test_normal(&r);
        } while (px < 0 || px > 1 || py < 0 || py > 1);
        x[2 * i] = px, x[2 * i + 1] = py;
    }
    if (set == TEST_SET2D_DUPLICATES)
        for (int64_t i = 3; i < n; i += 4)
            x[2 * i] = x[2 * i - 2], x[2 * i + 1] = x[2 * i - 1];
    if (set == TEST_SET2D_OUTLIER && n > 1)
        x[2 * (n / 2)] = outlier[0], x[2 * (n / 2) + 1] = outlier[1];
    const int bits = set == TEST_SET2D_OUTLIER ? outlier_bits : 40;
    for (int64_t i = 0; i < 2 * n; i++)
        x[i] = ldexp(nearbyint(ldexp(x[i], bits)), -bits);
}

void test_charges(int64_t n, int complex_charges, uint64_t seed, double *q)
{
    test_rng r = test_rng_seed(seed ^ 0xC4A59E5ull);
    for (int64_t i = 0; i < n * (complex_charges ? 2 : 1); i++)
        q[i] = 2.0 * test_uniform(&r) - 1.0;
}

/* Neumaier's compensated sum in long double. */
typedef struct csum {
    long double s, c;
} csum;

static void csum_add(csum *a, long double v)
{
    long double t = a->s + v;
    if (fabsl(a->s) >= fabsl(v))
        a->c += (a->s - t) + v;
    else
        a->c += (v - t) + a->s;
    a->s = t;
}

static double csum_value(const csum *a)
{
    return (double)(a->s + a->c);
}

int test_pot_width(fmk_kernel k)
{
    return k == FMK_KERNEL_CAUCHY2D ? 2 : 1;
}
int test_grad_width(fmk_kernel k)
{
    return k == FMK_KERNEL_CAUCHY2D ? 2 : fmk_kernel_dim(k);
}

/* The kernels as functions of the separation d = y - x (d has dim components).
 * Real kernels: *g = G(r), dg[k] = dG/dy_k = G'(r) d_k / r, with G'(r)/r written out:
 *   laplace      G = 1/r                               G'/r = -1/r^3
 *   plummer      G = D^(-1/2), D = r^2 + s^2            G'/r = -D^(-3/2)
 *   regularized  G = (r^2 + 3/2 s^2) D^(-3/2)           G'/r = 2 D^(-3/2) - 3 (r^2 + 3/2 s^2) D^(-5/2)
 *                                                            = -(r^2 + 5/2 s^2) D^(-5/2)
 *   log2d        G = log r                             G'/r = 1/r^2
 * cauchy2d (w = z_j - z = -(d_0 + i d_1)): g = 1/w, dg = 1/w^2 as (re, im) pairs.
 * Returns 0 when the pair is left out (r = 0 for a singular kernel). */
static int pair(fmk_kernel kernel, long double s2, const long double d[3], long double *g,
                long double dg[3])
{
    long double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    long double radial; /* G'(r) / r */
    switch (kernel) {
    case FMK_KERNEL_LAPLACE: {
        if (r2 == 0)
            return 0;
        long double r = sqrtl(r2);
        *g = 1 / r;
        radial = -1 / (r2 * r);
        break;
    }
    case FMK_KERNEL_PLUMMER: {
        long double D = r2 + s2, sD = sqrtl(D);
        *g = 1 / sD;
        radial = -1 / (D * sD);
        break;
    }
    case FMK_KERNEL_REGULARIZED: {
        long double D = r2 + s2, sD = sqrtl(D), D32 = D * sD;
        *g = (r2 + 1.5L * s2) / D32;
        radial = 2 / D32 - 3 * (r2 + 1.5L * s2) / (D32 * D);
        break;
    }
    case FMK_KERNEL_LOG2D:
        if (r2 == 0)
            return 0;
        *g = 0.5L * logl(r2);
        radial = 1 / r2;
        break;
    case FMK_KERNEL_CAUCHY2D: {
        if (r2 == 0)
            return 0;
        long double a = -d[0], b = -d[1];      /* w = a + ib */
        long double ur = a / r2, ui = -b / r2; /* 1/w = conj(w)/|w|^2 */
        g[0] = ur, g[1] = ui;
        dg[0] = ur * ur - ui * ui, dg[1] = 2 * ur * ui; /* (1/w)^2 */
        return 1;
    }
    default: return 0;
    }
    for (int k = 0; k < 3; k++)
        dg[k] = radial * d[k];
    return 1;
}

void test_reference(fmk_kernel kernel, double softening, int64_t ns, const double *src,
                    const double *q, int64_t nt, const double *trg, double *pot, double *grad)
{
    const int dim = fmk_kernel_dim(kernel), cplx = kernel == FMK_KERNEL_CAUCHY2D;
    const int self = trg == NULL;
    const long double s2 = (long double)softening * softening;
    if (self)
        trg = src, nt = ns;
    for (int64_t i = 0; i < nt; i++) {
        csum p[2] = {{0, 0}, {0, 0}}, gsum[3] = {{0, 0}, {0, 0}, {0, 0}};
        for (int64_t j = 0; j < ns; j++) {
            if (self && j == i)
                continue;
            long double d[3] = {0, 0, 0}, g[2] = {0, 0}, dg[3];
            for (int k = 0; k < dim; k++)
                d[k] = (long double)trg[dim * i + k] - (long double)src[dim * j + k];
            if (!pair(kernel, s2, d, g, dg))
                continue;
            if (cplx) {
                long double qr = q[2 * j], qi = q[2 * j + 1];
                csum_add(&p[0], qr * g[0] - qi * g[1]);
                csum_add(&p[1], qr * g[1] + qi * g[0]);
                csum_add(&gsum[0], qr * dg[0] - qi * dg[1]);
                csum_add(&gsum[1], qr * dg[1] + qi * dg[0]);
            } else {
                csum_add(&p[0], q[j] * g[0]);
                for (int k = 0; k < dim; k++)
                    csum_add(&gsum[k], q[j] * dg[k]);
            }
        }
        const int pw = cplx ? 2 : 1, gw = cplx ? 2 : dim;
        if (pot)
            for (int c = 0; c < pw; c++)
                pot[pw * i + c] = csum_value(&p[c]);
        if (grad)
            for (int k = 0; k < gw; k++)
                grad[gw * i + k] = csum_value(&gsum[k]);
    }
}

double test_rel_l2(const double *a, const double *b, int64_t n)
{
    long double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        long double e = (long double)a[i] - b[i];
        num += e * e;
        den += (long double)b[i] * b[i];
    }
    if (num != num)
        return NAN;
    return den > 0 ? (double)sqrtl(num / den) : (double)sqrtl(num);
}

fmk_status test_run_opts(fmk_kernel kernel, double eps, const fmk_opts *opts, int64_t ns,
                         const double *src, const double *q, int64_t nt, const double *trg,
                         double *pot, double *grad, fmk_info *info)
{
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, fmk_kernel_dim(kernel), kernel, eps, opts);
    if (st != FMK_OK) {
        printf("test_run: fmk_plan_create: %s\n", fmk_plan_last_error(NULL));
        return st;
    }
    st = fmk_plan_set_points(plan, ns, src, trg ? nt : 0, trg);
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, q, pot, grad);
    if (st == FMK_OK && info)
        fmk_plan_info(plan, info);
    if (st != FMK_OK)
        printf("test_run: %s\n", fmk_plan_last_error(plan));
    fmk_plan_destroy(plan);
    return st;
}

fmk_status test_run(fmk_kernel kernel, fmk_precision precision, int threads, double softening,
                    int64_t ns, const double *src, const double *q, int64_t nt, const double *trg,
                    double *pot, double *grad)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = FMK_BACKEND_CPU;
    o.precision = precision;
    o.threads = threads;
    o.softening = softening;
    return test_run_opts(kernel, precision == FMK_PRECISION_FP32 ? TEST_EPS_FP32 : 1e-6, &o, ns,
                         src, q, nt, trg, pot, grad, NULL);
}

double *test_alloc(int64_t count)
{
    double *p = malloc((size_t)(count > 0 ? count : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "test_alloc: out of memory (%lld doubles)\n", (long long)count);
        exit(2);
    }
    return p;
}
