/* resolution.c -- the resolution guard of the fast methods (resolution.h). */
#include "tree/resolution.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tree/morton.h"
#include "tree/tree3d.h"

/* A mapped coordinate (in [1, 2]) as the integer (x - 1) 2^52, exact: the finest dyadic grid
 * of the frame. */
static uint64_t grid(double x)
{
    double t = (x - 1.0) * 0x1p52;
    t = t < 0 ? 0 : t > 0x1p52 - 1 ? 0x1p52 - 1 : t;
    return (uint64_t)t;
}

/* Bits per axis of the sort keys: 21 in 3D (the octree's keys), 31 in 2D. */
static int key_bits(int dim)
{
    return dim == 3 ? FMK_TREE_KEY_BITS : 31;
}

static uint64_t key_of(int dim, const double *x)
{
    if (dim == 3)
        return fmk_tree3d_key(x[0], x[1], x[2]);
    return fmk_spread2(grid(x[0]) >> 21) << 1 | fmk_spread2(grid(x[1]) >> 21);
}

static int bit_length(uint64_t v)
{
#if defined(__GNUC__)
    return v ? 64 - __builtin_clzll(v) : 0;
#else
    int b = 0;
    while (v >> b)
        b++;
    return b;
#endif
}

/* The points in Morton order as grid coordinates, 3 per point (the third 0 in 2D). */
typedef struct sorted_set {
    int dim;
    int64_t n;
    uint64_t *c;
} sorted_set;

/* The side (mapped units) of the smallest dyadic box that holds sorted points i and j,
 * 2^(bits - 52) for the bits in which they differ (built from its exponent: no ldexp in the
 * inner loop); 0 when they coincide. */
static double box_side(const sorted_set *ss, int64_t i, int64_t j)
{
    const uint64_t *a = ss->c + 3 * i, *b = ss->c + 3 * j;
    const uint64_t diff = (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]);
    if (!diff)
        return 0;
    const uint64_t bits = (uint64_t)(1023 - 52 + bit_length(diff)) << 52;
    double side;
    memcpy(&side, &bits, sizeof side);
    return side;
}

static int same_point(const sorted_set *ss, int64_t i, int64_t j)
{
    const uint64_t *a = ss->c + 3 * i, *b = ss->c + 3 * j;
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

static double distance2(const sorted_set *ss, int64_t i, int64_t j)
{
    const uint64_t *a = ss->c + 3 * i, *b = ss->c + 3 * j;
    double r2 = 0;
    for (int k = 0; k < 3; k++) {
        const double d = ((double)a[k] - (double)b[k]) * 0x1p-52; /* exact below 2^53 */
        r2 += d * d;
    }
    return r2;
}

/* ---------------------------------------------------------------------------------------------
 * Points that share a key (the keys' finest cell), in Morton order at the grid's resolution
 * ------------------------------------------------------------------------------------------ */

/* Morton order of grid coordinates (x highest at each bit): the axis whose difference has the
 * highest bit decides (Chan's comparison of most significant bits); equal points keep their
 * order (qsort is not stable, but they are equal). */
static int fine_compare(const void *pa, const void *pb)
{
    return fmk_resolution_fine_compare((const uint64_t *)pa, (const uint64_t *)pb);
}

/* The end of the run of sorted points from a on that share a key (the keys' finest cell). */
static int64_t key_run_end(const sorted_set *ss, int64_t a)
{
    const int shift = 52 - key_bits(ss->dim);
    const uint64_t *ca = ss->c + 3 * a;
    int64_t b = a + 1;
    for (; b < ss->n; b++) {
        const uint64_t *cb = ss->c + 3 * b;
        if ((ca[0] ^ cb[0]) >> shift || (ca[1] ^ cb[1]) >> shift || (ca[2] ^ cb[2]) >> shift)
            break;
    }
    return b;
}

/* The caller's coordinates of point i of the plan's index space (sources, then targets). */
static const double *raw_point(const fmk_plan *plan, int64_t i)
{
    const int64_t ns = plan->n_sources;
    return i < ns ? plan->raw_sources + plan->dim * i : plan->raw_targets + plan->dim * (i - ns);
}

static int raw_equal(const fmk_plan *plan, int64_t i, int64_t j)
{
    const double *a = raw_point(plan, i), *b = raw_point(plan, j);
    for (int k = 0; k < plan->dim; k++)
        if (a[k] != b[k])
            return 0;
    return 1;
}

static int record_compare(const void *pa, const void *pb)
{
    return fmk_resolution_fine_compare((const uint64_t *)pa, (const uint64_t *)pb);
}

/* 1 when two points the caller gave apart map to one grid point: the frame cannot tell them
 * apart, so a fast method would drop their pair (coincident points add nothing) where the
 * exact sum has a large term. ss: grid coordinates in key order (runs not yet sorted), idx:
 * each sorted point's index (sources, then targets). Needs the caller's points (set_points
 * from the host); 0 without them. Returns -1 when out of memory. */
static int collapsed(const fmk_plan *plan, const sorted_set *ss, const int64_t *idx)
{
    if (!plan->raw_sources || (!plan->self && !plan->raw_targets))
        return 0;
    for (int64_t a = 0, b; a < ss->n; a = b) {
        b = key_run_end(ss, a);
        if (b - a < 2)
            continue;
        /* the run's points by grid coordinates, each with its index */
        uint64_t *r = malloc(sizeof(uint64_t) * 4 * (size_t)(b - a));
        if (!r)
            return -1;
        for (int64_t p = a; p < b; p++) {
            memcpy(r + 4 * (p - a), ss->c + 3 * p, 3 * sizeof(uint64_t));
            r[4 * (p - a) + 3] = (uint64_t)idx[p];
        }
        qsort(r, (size_t)(b - a), 4 * sizeof(uint64_t), record_compare);
        int found = 0;
        for (int64_t p = 1; p < b - a && !found; p++)
            found = memcmp(r + 4 * p, r + 4 * (p - 1), 3 * sizeof(uint64_t)) == 0 &&
                    !raw_equal(plan, (int64_t)r[4 * p + 3], (int64_t)r[4 * (p - 1) + 3]);
        free(r);
        if (found)
            return 1;
    }
    return 0;
}

/* Sorts each run of points that share a key (3 or more: their order was the caller's). */
static void sort_runs(sorted_set *ss)
{
    for (int64_t a = 0, b; a < ss->n; a = b) {
        b = key_run_end(ss, a);
        if (b - a >= 3)
            qsort(ss->c + 3 * a, (size_t)(b - a), 3 * sizeof(uint64_t), fine_compare);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The estimate
 * ------------------------------------------------------------------------------------------ */

/* The side of the box of the window of w points around sorted position p. */
static double window_side(const sorted_set *ss, int64_t p, int64_t w)
{
    int64_t lo = p - w / 2;
    lo = lo < 0 ? 0 : lo;
    int64_t hi = lo + w - 1;
    if (hi > ss->n - 1)
        hi = ss->n - 1, lo = hi - w + 1 < 0 ? 0 : hi - w + 1;
    return box_side(ss, lo, hi);
}

/* The side of the box of the engine's local group around p: the tighter of the windows of w
 * points that end and start at p (a window across a boundary of the octree's first levels has
 * a box far larger than any leaf). */
static double local_side(const sorted_set *ss, int64_t p, int64_t w)
{
    const int64_t lo = p - w + 1 < 0 ? 0 : p - w + 1;
    const int64_t hi = p + w - 1 > ss->n - 1 ? ss->n - 1 : p + w - 1;
    const double a = box_side(ss, lo, p), b = box_side(ss, p, hi);
    return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

/* The windows' terms are summed at every SAMPLE_STRIDE-th point of large sets (weighted by the
 * stride): they are smooth averages over many points. The nearest neighbours' terms, which
 * carry the closest pairs, are summed at every point. */
enum { MAX_WINDOWS = 40, SAMPLE_ALL = 1 << 14 };

/* The sums of resolution.h over the sorted points, split into runs of coincident points: a run
 * [a, b) shares its nearest distinct neighbours (a - 2, a - 1, b, b + 1). sums[0..3] with
 * the point's full unit, sums[4..7] with the frame's unit alone. */
static void sum_terms(const sorted_set *ss, const fmk_resolution_opts *o, double s2, int threads,
                      double sums[8], double *closest)
{
    const int64_t n = ss->n;
    const int64_t step = (int64_t)1 << ss->dim;
    double w[MAX_WINDOWS];
    int nw = 0;
    for (int64_t m = step; m < n && nw < MAX_WINDOWS - 1; m *= step)
        w[nw++] = (double)m;
    w[nw++] = (double)n;
    const int local = o->local_unit > 0 && o->local_points > 1;
    const int64_t stride = n > SAMPLE_ALL ? n / SAMPLE_ALL : 1;
    double s0 = 0, s1 = 0, s2_ = 0, s3 = 0, f0 = 0, f2 = 0, rmin = INFINITY;
    /* chunks of the sorted positions, each starting at a run's first point */
    const int64_t chunks = threads > 1 && n > 4096 ? 8 * (int64_t)threads : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (chunks > 1) \
    reduction(+ : s0, s1, s2_, s3, f0, f2) reduction(min : rmin)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t a = n * c / chunks, end = n * (c + 1) / chunks;
        while (a > 0 && a < n && same_point(ss, a - 1, a))
            a++; /* the run belongs to the chunk that holds its start */
        while (end < n && end > 0 && same_point(ss, end - 1, end))
            end++;
        for (int64_t b; a < end; a = b) {
            for (b = a + 1; b < n && same_point(ss, b, a); b++)
                ;
            double r2 = INFINITY;
            const int64_t near[4] = {a - 2, a - 1, b, b + 1};
            for (int t = 0; t < 4; t++)
                if (near[t] >= 0 && near[t] < n) {
                    const double d2 = distance2(ss, a, near[t]);
                    r2 = d2 < r2 ? d2 : r2;
                }
            const double r = sqrt(r2);
            rmin = r < rmin ? r : rmin;
            for (int64_t p = a; p < b; p++) {
                double h[MAX_WINDOWS], t[6] = {0, 0, 0, 0, 0, 0};
                /* the local unit serves pairs within twice the local box (a near field) */
                const double near_side = local ? 2 * local_side(ss, p, o->local_points) : 0;
                fmk_resolution_point(ss->dim, r, s2, near_side, w, h, 0, t);
                if (p % stride == 0) {
                    double tw[6] = {0, 0, 0, 0, 0, 0};
                    for (int k = 0; k < nw; k++)
                        h[k] = window_side(ss, p, (int64_t)w[k]);
                    fmk_resolution_point(ss->dim, INFINITY, s2, near_side, w, h, nw, tw);
                    for (int k = 0; k < 6; k++)
                        t[k] += (double)stride * tw[k];
                }
                const double dn = o->frame_unit + o->local_unit * near_side / 2;
                const double dn2 = dn * dn, df2 = o->frame_unit * o->frame_unit;
                s0 += dn2 * t[0] + df2 * t[1], s1 += t[4];
                s2_ += dn2 * t[2] + df2 * t[3], s3 += t[5];
                f0 += df2 * (t[0] + t[1]), f2 += df2 * (t[2] + t[3]);
            }
        }
    }
    sums[0] = s0, sums[1] = s1, sums[2] = s2_, sums[3] = s3;
    sums[4] = f0, sums[5] = s1, sums[6] = f2, sums[7] = s3;
    *closest = rmin;
}

/* The frame's unit as the estimate takes it (0 where every point mapped exactly). */
static double frame_unit_of(const fmk_plan *plan, const fmk_resolution_opts *o)
{
    return plan->frame.exact && !o->rounds_anyway ? 0 : o->frame_unit;
}

/* The estimate from the points in Morton order (ss->c; runs not yet sorted), idx their indices
 * (NULL: the collapse test is skipped). Returns 0, or -1 when out of memory. */
static int estimate_sorted(fmk_plan *plan, const fmk_resolution_opts *o, sorted_set *ss,
                           const int64_t *idx, fmk_resolution_est *est)
{
    const int c = idx ? collapsed(plan, ss, idx) : 0;
    if (c < 0)
        return -1;
    if (c && !(plan->frame.softening > 0)) { /* a singular pair dropped: no bound holds */
        est->pot = est->grad = INFINITY, est->closest = 0, est->local_part = 0;
        return 0;
    }
    sort_runs(ss);
    const double s = plan->frame.softening;
    fmk_resolution_opts eo = *o;
    eo.frame_unit = frame_unit_of(plan, o); /* points on a grid the frame holds: mapping them
                                             * rounded nothing */
    double sums[8];
    sum_terms(ss, &eo, s * s, plan->threads, sums, &est->closest);
    fmk_resolution_finish(sums, &est->pot, &est->grad);
    double fp, fg;
    fmk_resolution_finish(sums + 4, &fp, &fg);
    const double total = est->pot + est->grad, frame = fp + fg;
    est->local_part = total > 0 ? 1 - frame / total : 0;
    return 0;
}

static fmk_status no_memory(fmk_plan *plan, int64_t n)
{
    return fmk_error_set(plan, FMK_ERR_NOMEM,
                         "out of host memory checking the resolution of %lld points", (long long)n);
}

fmk_status fmk_resolution_estimate(fmk_plan *plan, const fmk_resolution_opts *o,
                                   fmk_resolution_est *est)
{
    return fmk_resolution_estimate_points(plan, o, plan->sources, plan->n_sources,
                                          plan->self ? NULL : plan->targets,
                                          plan->self ? 0 : plan->n_targets, est);
}

fmk_status fmk_resolution_estimate_points(fmk_plan *plan, const fmk_resolution_opts *o,
                                          const double *xs, int64_t ns, const double *xt,
                                          int64_t nt, fmk_resolution_est *est)
{
    const int dim = plan->dim;
    const int64_t n = ns + (xt ? nt : 0);
    memset(est, 0, sizeof *est);
    est->closest = INFINITY;
    if (n < 2)
        return FMK_OK;
    sorted_set ss = {dim, n, malloc(sizeof(uint64_t) * 3 * (size_t)n)};
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)n);
    int64_t *index = malloc(sizeof(int64_t) * (size_t)n);
    int bad = !ss.c || !keys || !index;
    if (!bad) {
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (n > 65536)
        for (int64_t i = 0; i < n; i++) {
            const double *x = i < ns ? xs + dim * i : xt + dim * (i - ns);
            keys[i] = key_of(dim, x), index[i] = i;
        }
        bad = fmk_tree3d_sort_bits(keys, index, n, plan->threads, dim * key_bits(dim));
    }
    if (!bad) {
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (n > 65536)
        for (int64_t p = 0; p < n; p++) {
            const int64_t i = index[p];
            const double *x = i < ns ? xs + dim * i : xt + dim * (i - ns);
            for (int k = 0; k < 3; k++)
                ss.c[3 * p + k] = k < dim ? grid(x[k]) : 0;
        }
    }
    free(keys);
    bad = bad || estimate_sorted(plan, o, &ss, index, est) != 0;
    free(index), free(ss.c);
    return bad ? no_memory(plan, n) : FMK_OK;
}

fmk_status fmk_resolution_estimate_tree(fmk_plan *plan, const fmk_resolution_opts *o,
                                        const fmk_tree3d *tree, fmk_resolution_est *est)
{
    const int64_t n = tree->n_points;
    memset(est, 0, sizeof *est);
    est->closest = INFINITY;
    if (n < 2)
        return FMK_OK;
    sorted_set ss = {3, n, malloc(sizeof(uint64_t) * 3 * (size_t)n)};
    if (!ss.c)
        return no_memory(plan, n);
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (n > 65536)
    for (int64_t i = 0; i < 3 * n; i++)
        ss.c[i] = grid(tree->points[i]);
    const int bad = estimate_sorted(plan, o, &ss, tree->order, est) != 0;
    free(ss.c);
    return bad ? no_memory(plan, n) : FMK_OK;
}

fmk_status fmk_resolution_check(fmk_plan *plan, const char *method, const fmk_resolution_opts *o)
{
    if (fmk_resolution_softened_meets(plan->kernel, o, plan->frame.softening,
                                      frame_unit_of(plan, o), 1.0))
        return FMK_OK;
    fmk_resolution_est e;
    fmk_status st = fmk_resolution_estimate(plan, o, &e);
    return st != FMK_OK ? st : fmk_resolution_verdict(plan, method, o, &e);
}

fmk_status fmk_resolution_check_tree(fmk_plan *plan, const char *method,
                                     const fmk_resolution_opts *o, const fmk_tree3d *tree)
{
    if (fmk_resolution_softened_meets(plan->kernel, o, plan->frame.softening,
                                      frame_unit_of(plan, o), 1.0))
        return FMK_OK;
    fmk_resolution_est e;
    fmk_status st = fmk_resolution_estimate_tree(plan, o, tree, &e);
    return st != FMK_OK ? st : fmk_resolution_verdict(plan, method, o, &e);
}

fmk_status fmk_resolution_verdict(fmk_plan *plan, const char *method, const fmk_resolution_opts *o,
                                  const fmk_resolution_est *ep)
{
    const fmk_resolution_est e = *ep;
    if (fmk_resolution_meets(plan->kernel, e.pot, e.grad, o->tol))
        return FMK_OK;
    const double w = plan->frame.width;
    const char *prec = plan->opts.precision == FMK_PRECISION_FP32 ? "fp32" : "fp64";
    if (e.closest == 0 && isinf(e.pot)) /* collapsed(): distinct points on one grid point */
        return fmk_error_set(plan, FMK_ERR_ACCURACY,
                             "method %s (%s) cannot reach a relative accuracy of %g on these "
                             "points: two points given apart map to one point of the frame, which "
                             "is %g wide and keeps coordinates to about %.2g, so their pair "
                             "(large for this kernel at that distance) would be left out. Remove "
                             "far outliers (they widen the frame), merge points that close, or "
                             "use method direct in fp64 (exact for any finite input)",
                             method, prec, o->tol, w, 0x1p-52 * w);
    if (strcmp(method, "direct") == 0) /* only its fp32 sum is guarded: the fp64 one is exact */
        return fmk_error_set(plan, FMK_ERR_ACCURACY,
                             "the fp32 direct sum cannot reach a relative accuracy of %g on these "
                             "points: the frame that holds them all is %g wide and its fp32 "
                             "coordinates keep about %.2g of it, while points lie as close as "
                             "%.2g; rounding alone would give relative errors of about %.2g "
                             "(potential) and %.2g (gradient). Use precision fp64 (the fp64 "
                             "direct sum is exact to rounding for any finite input) or a larger "
                             "eps",
                             o->tol, w, o->frame_unit * w, e.closest * w, e.pot, e.grad);
    if (e.local_part > 0.5) /* the engine's fp32 positions */
        return fmk_error_set(plan, FMK_ERR_ACCURACY,
                             "method %s (%s) cannot reach a relative accuracy of %g on these "
                             "points: its fp32 positions keep about 1e-8 of the size of a leaf, "
                             "while points lie as close as %.2g (%.2g of the frame's width), so "
                             "rounding alone would give relative errors of about %.2g "
                             "(potential) and %.2g (gradient); use precision fp64, or method "
                             "direct",
                             method, prec, o->tol, e.closest * w, e.closest, e.pot, e.grad);
    return fmk_error_set(plan, FMK_ERR_ACCURACY,
                         "method %s (%s) cannot reach a relative accuracy of %g on these points: "
                         "the frame that holds them all is %g wide, so each coordinate is kept "
                         "to about %.2g, while points lie as close as %.2g; rounding alone would "
                         "give relative errors of about %.2g (potential) and %.2g (gradient). "
                         "Remove far outliers (they widen the frame), evaluate tight clusters "
                         "apart from the rest, ask for a larger eps, or use method direct",
                         method, prec, o->tol, w, o->frame_unit * w, e.closest * w, e.pot, e.grad);
}
