/*
 * fmm2d.h -- the 2D adaptive FMM of Goude & Engblom (kernels log2d and cauchy2d), shared by
 * the CPU engine (fmm2d.c, fmm2d_tree.c, fmm2d_ops.c) and the GPU engine (cuda/fmm2d.cu).
 *
 * The tree ("pyramid"). Points are in the plan's frame (internal.h, mapped into [1, 2]^2): the
 * sources, or the sources and the targets together when they differ (n points). Level l has
 * exactly 4^l boxes; box b of level l has the children 4b .. 4b+3. The points are permuted into
 * box order and every box is an index range of them, fixed in advance: after s splits
 * (s = 0 .. 2L) the 2^s segments are
 *     segment g = positions [floor(g n / 2^s), floor((g + 1) n / 2^s)),
 * so each split cuts a segment at (within one point) its median, and level l's boxes are the
 * segments after 2l splits. A split orders the segment's points along the longer side of their
 * bounding box (the box's eccentricity, Goude & Engblom Sect. 2) by the key
 *     q = min(floor((c - lo) / (hi - lo) * 2^32), 2^32 - 1) >> (32 - b),  b = min(16, 32 - s)
 * (0 when hi == lo; b bits, so that segment and key fit 32 bits), ties kept in their
 * current order (a stable sort; CUB's radix sort on the GPU), so the CPU and the GPU build the
 * same tree, array for array. The number of levels is eq. 5.2,
 *     L = ceil(0.5 log2(5/8 n / N_d)),  clamped to 0 <= L and 4^L <= n and L <= FMK_FMM2D_MAX_LEVEL.
 *
 * Box geometry: the centre is the centre of the bounding box of the box's points (sources and
 * targets) and the radius half its diagonal (fmk_fmm2d_box(): the distance from the rounded
 * centre to the farthest corner, enlarged by 2^-40 relative, so that the criterion below holds
 * for the points themselves and boxes that pass it hold no coincident points). Expansions are
 * about that centre and scaled by the radius (fmk_fmm2d_scale(): tiny for a box of coincident
 * points).
 *
 * Connectivity (Sect. 2): boxes b and c are well separated when R + theta r <= theta d, d > 0
 * (eq. 2.1, theta = 1/2, R and r the larger and smaller radius, d the distance of the centres).
 * Lists are directed, from source boxes to target boxes. The strong list of the root is the
 * root; at level l >= 1 a box with targets looks at the children with sources of its parent's
 * strong list: the well-separated ones become its weak list (M2L), the others its strong list.
 * At the finest level a strong pair b != c is tested again with r and R interchanged
 * (r + theta R <= theta d): if it passes, the larger box's side is shortcut: c's sources go into
 * b's local expansion (P2L, c larger) or c's multipole is evaluated at b's targets (M2P, c
 * smaller). The remaining strong pairs are the direct interactions (P2P).
 *
 * Expansions (eq. 2.2, with scaled coefficients). Both kernels use one analytic function per
 * box: for log2d F(z) = sum q_j log(z - z_j) (potential Re F, gradient (Re F', -Im F')), for
 * cauchy2d f(z) = sum G_j / (z - z_j) (potential -f, derivative -f'). About a centre c with
 * scale r the multipole is F = a_0 log(z - c) + sum_k a_k r^k (z - c)^-k and the local
 * expansion F = sum_l b_l ((z - c) / r)^l, with a_0 = 0 for cauchy2d (the paper's Sect. 5).
 */
#ifndef FMMKIT_FMM2D_H
#define FMMKIT_FMM2D_H

#include <math.h>
#include <stdint.h>

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define FMK2D_FN static inline __host__ __device__
#else
#define FMK2D_FN static inline
#endif

#define FMK_FMM2D_THETA 0.5
#define FMK_FMM2D_MAX_LEVEL 13
#define FMK_FMM2D_MAX_ORDER 60

/* Boxes of levels 0 .. l-1 together: the global index of box b of level l is first(l) + b. */
FMK2D_FN int64_t fmk_fmm2d_first(int l)
{
    return ((((int64_t)1) << (2 * l)) - 1) / 3;
}

/* Segment g after s splits of n points: [begin(s, g), begin(s, g + 1)). */
FMK2D_FN int64_t fmk_fmm2d_seg_begin(int64_t n, int s, int64_t g)
{
    return (g * n) >> s;
}

/* The segment after s splits that holds position i (0 <= i < n). */
FMK2D_FN int64_t fmk_fmm2d_seg_of(int64_t n, int s, int64_t i)
{
    return ((((i + 1) << s)) - 1) / n;
}

/* Bits of the split key after s splits: 16, or fewer where the segment's s bits leave less of
 * 32, so that (segment, key) fits 32 bits and the radix sort handles only s + 16 bits. */
FMK2D_FN int fmk_fmm2d_key_bits(int s)
{
    return s <= 16 ? 16 : 32 - s;
}

/* The split key, after s splits, of coordinate c in a segment whose points span [lo, hi] along
 * the axis: its position in the span on fmk_fmm2d_key_bits(s) bits. */
FMK2D_FN uint32_t fmk_fmm2d_key(double c, double lo, double hi, int s)
{
    if (!(hi > lo))
        return 0;
    double t = (c - lo) / (hi - lo) * 4294967296.0;
    uint32_t q = !(t < 4294967295.0) ? 4294967295u : t > 0 ? (uint32_t)t : 0;
    return q >> (32 - fmk_fmm2d_key_bits(s));
}

/* The split axis of a bounding box (lo, hi): 0 (x) when it is at least as wide as high. */
FMK2D_FN int fmk_fmm2d_axis(const double lo[2], const double hi[2])
{
    return hi[0] - lo[0] >= hi[1] - lo[1] ? 0 : 1;
}

/* A box's geometry from its points' bounding box [lx, hx] x [ly, hy] (fmm2d.h: "Box
 * geometry"): the centre c = the bounding box's centre, rounded, into (*cx, *cy), and the
 * radius returned: the distance from c to the farthest corner (the differences are exact in
 * the frame's square), enlarged by 2^-40 relative to cover its own rounding. So the radius
 * covers the box's points although c was rounded (half the bounding box's diagonal may not: a
 * box a few ulps wide), every rounding in the theta-criterion is relative and far below the
 * enlargement, and two boxes that pass the criterion, the interchanged one included, hold no
 * coincident points (a box of coincident points has radius 0; without the enlargement a
 * larger box whose disc reaches exactly to its point would pass the interchanged test, and P2L
 * or M2P would expand about a point that is a source: log 0, 1 / 0). Shared by the CPU and the
 * GPU pyramid, which build the same trees. */
FMK2D_FN double fmk_fmm2d_box(double lx, double ly, double hx, double hy, double *cx, double *cy)
{
    const double x = 0.5 * (lx + hx), y = 0.5 * (ly + hy);
    const double dx = hx - x > x - lx ? hx - x : x - lx, dy = hy - y > y - ly ? hy - y : y - ly;
    *cx = x, *cy = y;
    return sqrt(dx * dx + dy * dy) * (1 + 0x1p-40);
}

/* The scale of a box's expansions: its radius, or 2^-64 for a box of one point or coincident
 * points (whose expansions are then exact: all higher terms vanish), so that the ratio of a
 * child's scale to its parent's stays at most 1. */
FMK2D_FN double fmk_fmm2d_scale(double radius)
{
    return radius > 0 ? radius : 0x1p-64;
}

/* The theta-criterion, eq. 2.1 (swap = 1: with r and R interchanged, for the finest level). */
FMK2D_FN int fmk_fmm2d_separated(const double *cb, double rb, const double *cc, double rc, int swap)
{
    const double dx = cb[0] - cc[0], dy = cb[1] - cc[1];
    const double d = sqrt(dx * dx + dy * dy);
    double R = rb > rc ? rb : rc, r = rb > rc ? rc : rb;
    if (swap) {
        double t = R;
        R = r, r = t;
    }
    return d > 0 && R + FMK_FMM2D_THETA * r <= FMK_FMM2D_THETA * d;
}

/* A double complex value usable in C and CUDA alike (the (re, im) layout of charges). */
typedef struct fmk_cplx {
    double re, im;
} fmk_cplx;

FMK2D_FN fmk_cplx fmk_c(double re, double im)
{
    fmk_cplx z;
    z.re = re, z.im = im;
    return z;
}
FMK2D_FN fmk_cplx fmk_cadd(fmk_cplx a, fmk_cplx b)
{
    return fmk_c(a.re + b.re, a.im + b.im);
}
FMK2D_FN fmk_cplx fmk_csub(fmk_cplx a, fmk_cplx b)
{
    return fmk_c(a.re - b.re, a.im - b.im);
}
FMK2D_FN fmk_cplx fmk_cscale(fmk_cplx a, double s)
{
    return fmk_c(a.re * s, a.im * s);
}
FMK2D_FN fmk_cplx fmk_cmul(fmk_cplx a, fmk_cplx b)
{
    return fmk_c(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
/* a += b * c */
FMK2D_FN void fmk_cfma(fmk_cplx *a, fmk_cplx b, fmk_cplx c)
{
    a->re += b.re * c.re - b.im * c.im;
    a->im += b.re * c.im + b.im * c.re;
}
FMK2D_FN fmk_cplx fmk_cinv(fmk_cplx a)
{
    const double s = 1.0 / (a.re * a.re + a.im * a.im);
    return fmk_c(a.re * s, -a.im * s);
}
FMK2D_FN fmk_cplx fmk_cdiv(fmk_cplx a, fmk_cplx b)
{
    return fmk_cmul(a, fmk_cinv(b));
}
/* The principal logarithm. */
FMK2D_FN fmk_cplx fmk_clog(fmk_cplx a)
{
    return fmk_c(0.5 * log(a.re * a.re + a.im * a.im), atan2(a.im, a.re));
}

/* L2P: V and D (fmm2d.h's F or f and its derivative) of the local expansion (c, r, b) at z,
 * added into v[0], v[1] (Horner). Shared by the CPU operators and the GPU kernels. */
FMK2D_FN void fmk_fmm2d_l2p_at(int p, fmk_cplx c, double r, const fmk_cplx *b, fmk_cplx z,
                               fmk_cplx v[2])
{
    const fmk_cplx w = fmk_cscale(fmk_csub(z, c), 1.0 / r);
    fmk_cplx V = b[p], D = fmk_cscale(b[p], p);
    for (int l = p - 1; l >= 0; l--) {
        V = fmk_cadd(fmk_cmul(V, w), b[l]);
        if (l >= 1)
            D = fmk_cadd(fmk_cmul(D, w), fmk_cscale(b[l], l));
    }
    v[0] = fmk_cadd(v[0], V);
    if (p >= 1)
        v[1] = fmk_cadd(v[1], fmk_cscale(D, 1.0 / r));
}

/* M2P: the same for the multipole (c, r, a): V = a_0 log u + sum a_k t^k,
 * D = a_0 / u - sum k a_k t^k / u, u = z - c, t = r / u. */
FMK2D_FN void fmk_fmm2d_m2p_at(int p, fmk_cplx c, double r, const fmk_cplx *a, fmk_cplx z,
                               fmk_cplx v[2])
{
    const fmk_cplx u = fmk_csub(z, c), iu = fmk_cinv(u), t = fmk_cscale(iu, r);
    fmk_cplx V = a[p], D = fmk_cscale(a[p], p);
    for (int k = p - 1; k >= 1; k--) {
        V = fmk_cadd(fmk_cmul(V, t), a[k]);
        D = fmk_cadd(fmk_cmul(D, t), fmk_cscale(a[k], k));
    }
    V = fmk_cmul(V, t), D = fmk_cmul(D, t);
    D = fmk_cmul(fmk_csub(a[0], D), iu);
    if (a[0].re != 0 || a[0].im != 0)
        V = fmk_cadd(V, fmk_cmul(a[0], fmk_clog(u)));
    v[0] = fmk_cadd(v[0], V);
    v[1] = fmk_cadd(v[1], D);
}

/* Expansion order from eps (docs/fmm2d.md, "Order from eps"). The relative l2 errors of the
 * potential and the gradient, worst over log2d and cauchy2d on five sets (uniform, normal,
 * corner cluster, nested squares over 10 octaves, a circle; 10^5 points, mixed charges, 1000
 * sampled targets; CPU, 2026-11-28), fall as 1.75e-3 x 0.403^(p - 4) from p = 4 to 16. The
 * order is the smallest p that keeps that curve within eps / 6 (at eps / 3 the GPU's pyramid
 * with leaves of 8 beside a large coincident group reached 1.18 eps), and one more below eps
 * 1e-7, where the sets' own floor (3e-8, the corner cluster's rounding) hides the curve: p = 7
 * at 1e-3, 15 at 1e-6, 23 at 1e-9. */
static inline int fmk_fmm2d_order_from_eps(double eps)
{
    int p = (int)ceil(4 + log(eps / 1.05e-2) / log(0.403) - 1e-9) + (eps < 1e-7 ? 1 : 0);
    if (p < 4)
        p = 4;
    return p > FMK_FMM2D_MAX_ORDER ? FMK_FMM2D_MAX_ORDER : p;
}

/* The order from eps calibrated on the largest pointwise relative error (paper 000's eq. 5.3;
 * a tenth fewer terms than log TOL / log theta): about two orders more than
 * fmk_fmm2d_order_from_eps. The GPU engine's (its pyramid differs from the CPU's beside large
 * coincident groups, and the l2 table has been checked on the CPU only), and any plan's with an
 * expert leaf size (docs/fmm2d.md). */
static inline int fmk_fmm2d_order_from_eps_pointwise(double eps)
{
    int p = (int)ceil(0.9 * log(eps) / log(FMK_FMM2D_THETA));
    if (p < 4)
        p = 4;
    return p > FMK_FMM2D_MAX_ORDER ? FMK_FMM2D_MAX_ORDER : p;
}

/* The default points per finest-level box N_d for order p (tuned on an H100, docs/fmm2d.md). */
static inline int64_t fmk_fmm2d_leaf_size_for(int p)
{
    return 20 + 2 * (int64_t)p;
}

/* A plan's order (opts.order, or from eps) and N_d (opts.leaf_size, or from the order). */
static inline int fmk_fmm2d_plan_order(const struct fmk_plan *plan)
{
    if (plan->opts.order >= 0)
        return plan->opts.order;
    /* the l2 table holds for the CPU's default leaves; an expert leaf size (leaves of 8 beside
     * a coincident group of 160 points erred 3.8 eps with it) and the GPU take the pointwise
     * rule */
    if (plan->opts.backend == FMK_BACKEND_CUDA || plan->opts.leaf_size > 0)
        return fmk_fmm2d_order_from_eps_pointwise(plan->eps);
    return fmk_fmm2d_order_from_eps(plan->eps);
}
static inline int64_t fmk_fmm2d_plan_leaf_size(const struct fmk_plan *plan)
{
    return plan->opts.leaf_size > 0 ? plan->opts.leaf_size
                                    : fmk_fmm2d_leaf_size_for(fmk_fmm2d_plan_order(plan));
}

/* Levels for n points with N_d per finest box (eq. 5.2, clamped as above). */
static inline int fmk_fmm2d_levels(int64_t n, int64_t n_d)
{
    if (n <= 1 || n_d <= 0)
        return 0;
    double x = 0.5 * log2(0.625 * (double)n / (double)n_d);
    int L = x > 0 ? (int)ceil(x) : 0;
    while (L > 0 && (((int64_t)1) << (2 * L)) > n)
        L--;
    return L > FMK_FMM2D_MAX_LEVEL ? FMK_FMM2D_MAX_LEVEL : L;
}

/* The options both engines take (fmk_engine.check_opts): kernels log2d and cauchy2d in fp64,
 * order -1 (resolved from eps at set_points) or 2 .. FMK_FMM2D_MAX_ORDER. fmm2d.c. */
fmk_status fmk_fmm2d_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                fmk_info *info);

/* The tree and lists, host arrays (the GPU keeps the same arrays on the device). */
typedef struct fmk_fmm2d_tree {
    int levels; /* L: the finest level (0: the root is the only box) */
    int64_t n_points, n_sources, n_targets, n_boxes;
    int self;
    int64_t *src_start; /* 4^L + 1: sources of finest box b are [src_start[b], [b+1]) */
    int64_t *trg_start; /* 4^L + 1 (== src_start when self) */
    int64_t *src_order; /* n_sources: box-order position -> caller index */
    int64_t *trg_order; /* n_targets (== src_order when self) */
    double *src_xy;     /* n_sources * 2 in box order */
    double *trg_xy;     /* n_targets * 2 (== src_xy when self) */
    double *center;     /* n_boxes * 2 */
    double *radius;     /* n_boxes */
    /* directed lists (source boxes of each target box, global indices) */
    int64_t *weak_begin;                        /* n_boxes + 1 */
    int32_t *weak;                              /* M2L */
    int64_t *p2p_begin, *m2p_begin, *p2l_begin; /* 4^L + 1 each, finest boxes */
    int32_t *p2p, *m2p, *p2l;                   /* finest-level boxes, local indices */
} fmk_fmm2d_tree;

/* The sources (or targets) of box b of level l: [*a, *e). */
static inline void fmk_fmm2d_range(const int64_t *start, int L, int l, int64_t b, int64_t *a,
                                   int64_t *e)
{
    const int sh = 2 * (L - l);
    *a = start[b << sh];
    *e = start[(b + 1) << sh];
}

/* fmm2d_tree.c: builds tree and lists from n_sources mapped sources and (self == 0) n_targets
 * mapped targets with n_d points per finest box; threads OpenMP threads. Returns FMK_OK or
 * FMK_ERR_NOMEM (with nothing allocated). */
fmk_status fmk_fmm2d_tree_build(fmk_fmm2d_tree *t, int64_t n_sources, const double *sources,
                                int self, int64_t n_targets, const double *targets, int64_t n_d,
                                int threads);
void fmk_fmm2d_tree_free(fmk_fmm2d_tree *t);
/* Host bytes of a tree of n points with these list lengths. */
int64_t fmk_fmm2d_tree_bytes(int64_t ns, int64_t nt, int self, int levels, int64_t n_weak,
                             int64_t n_near);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_FMM2D_H */
