/* fmm3d.c -- the CPU engine of the adaptive 3D FMM for the Laplace kernel (method fmm), fp64.
 *
 * set_points builds everything geometric once: one octree over sources and targets together
 * (fmm3d.h says why one tree), the U, V, W, X lists (fmm3d_lists.c), the sources and targets in
 * key order, the rotations of the V-list directions that occur and of the 8 child-parent
 * directions (M2M, L2L), the expansions' storage and one work array per thread, so that eval
 * allocates nothing and cannot fail half way. eval runs the numerical passes: P2M at the leaves,
 * M2M upward level by level, M2L (V list) and P2L (X list) into every box with targets, L2L
 * downward, L2P and M2P (W list) at the leaves, P2P (U list), then writes the caller's arrays in
 * the caller's order. Expansions use the operators of fmm3d_ops.h about each box's cube centre
 * with the cube's side as scale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "fmm3d/fmm3d.h"
#include "fmm3d/fmm3d_ops.h"

/* The near field (P2P) uses the direct sum's inner loops, built for the widest vector unit of
 * the running CPU (FMK_TARGET_CLONES, internal.h). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#define REAL double
#define SQRT sqrt
#define LOG log
#define P2P(name) fmm_p2p64_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P
#define REAL float
#define SQRT sqrtf
#define LOG logf
#define P2P(name) fmm_p2p32_##name
#include "kernels/p2p_tile.h"
#undef REAL
#undef SQRT
#undef LOG
#undef P2P
#pragma GCC diagnostic pop

/* The laplace P2P of one target from the sources in n_ranges ranges [begin, begin + count), in
 * fp64 with AVX-512: 1/r from the 14-bit vrsqrt14pd estimate
 * and two Newton steps y <- y (3/2 - r^2 y^2 / 2) (error 2^-14 -> ~2^-28 -> below 2^-53 relative:
 * the results agree with the sqrt-and-divide loop of p2p_tile.h to rounding), about five times
 * faster per pair than vsqrtpd + vdivpd on the build machine. Lanes with r = 0 (the target
 * itself, coincident points) and past n contribute nothing, as in p2p_tile.h. Chosen at run time
 * when the CPU has AVX-512F (fmm_setup), else the tile's loop runs. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(FMK_NO_CLONES)
#include <immintrin.h>
#define FMM_P2P_AVX512 1
__attribute__((target("avx512f"))) static void p2p_laplace_avx512(
    const double *restrict sx, const double *restrict sy, const double *restrict sz,
    const double *restrict q, const int64_t *begin, const int64_t *count, int n_ranges,
    const double *yi, double out[4])
{
    const __m512d X = _mm512_set1_pd(yi[0]), Y = _mm512_set1_pd(yi[1]), Z = _mm512_set1_pd(yi[2]);
    const __m512d half = _mm512_set1_pd(0.5), three_halves = _mm512_set1_pd(1.5);
    __m512d P = _mm512_setzero_pd(), GX = P, GY = P, GZ = P;
    for (int r = 0; r < n_ranges; r++)
    for (int64_t j = begin[r], n = begin[r] + count[r]; j < n; j += 8) {
        const __mmask8 in = n - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - j)) - 1);
        const __m512d dx = _mm512_sub_pd(X, _mm512_maskz_loadu_pd(in, sx + j));
        const __m512d dy = _mm512_sub_pd(Y, _mm512_maskz_loadu_pd(in, sy + j));
        const __m512d dz = _mm512_sub_pd(Z, _mm512_maskz_loadu_pd(in, sz + j));
        const __m512d r2 = _mm512_fmadd_pd(dx, dx, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dz, dz)));
        const __mmask8 live = _mm512_mask_cmp_pd_mask(in, r2, _mm512_setzero_pd(), _CMP_GT_OQ);
        const __m512d hr2 = _mm512_mul_pd(half, r2);
        __m512d y = _mm512_maskz_rsqrt14_pd(live, r2);
        y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hr2, _mm512_mul_pd(y, y), three_halves));
        y = _mm512_mul_pd(y, _mm512_fnmadd_pd(hr2, _mm512_mul_pd(y, y), three_halves));
        const __m512d qr = _mm512_mul_pd(_mm512_maskz_loadu_pd(live, q + j), y);
        const __m512d qr3 = _mm512_mul_pd(qr, _mm512_mul_pd(y, y));
        P = _mm512_add_pd(P, qr);
        GX = _mm512_fnmadd_pd(qr3, dx, GX);
        GY = _mm512_fnmadd_pd(qr3, dy, GY);
        GZ = _mm512_fnmadd_pd(qr3, dz, GZ);
    }
    out[0] = _mm512_reduce_add_pd(P), out[1] = _mm512_reduce_add_pd(GX);
    out[2] = _mm512_reduce_add_pd(GY), out[3] = _mm512_reduce_add_pd(GZ);
}
#endif

/* M2L runs over blocks of this many consecutive nodes; within a block the V entries are sorted
 * by direction, and the entries of one direction go through fmk_fmm3d_m2l_block together. */
enum { M2L_NODES = 64 };

typedef struct fmm_cpu {
    fmk_tree3d tree;            /* over sources and targets together */
    fmk_fmm3d_lists lists;
    fmk_fmm3d_ops_ctx ops;
    int order;
    int32_t leaf_size;
    int64_t stride;             /* doubles per expansion */
    int64_t *n_src, *n_trg;     /* per node */
    int64_t *src_begin, *trg_begin; /* per node: first source / target in key order */
    int64_t *src_order;         /* ns: source position in key order -> caller index */
    int64_t *trg_order;         /* nt (== src_order when self) */
    double *src_xyz;            /* ns * 3 in key order */
    double *trg_xyz;            /* nt * 3 (== src_xyz when self) */
    double *src_soa;            /* 4 * ns: x | y | z | q, for P2P */
    double *q;                  /* ns charges in key order (points into src_soa) */
    int p2p_avx512;             /* laplace in fp64 on a CPU with AVX-512F: p2p_laplace_avx512 */
    float *src32;               /* fp32: 4 * ns, x | y | z | q for P2P in single precision, the
                                 * coordinates relative to the centre of the source's leaf */
    double *M, *L;              /* n_nodes * stride */
    double *rot_v;              /* rotations of the V directions' polar angles in use (61 at most
                                 * for the 316 directions: the matrices depend on the angle) */
    int32_t rot_slot[FMK_FMM3D_NDIR]; /* direction -> its polar angle's rotation, or -1 */
    double *phase_v;            /* FMK_FMM3D_NDIR * 2 (p + 1): each direction's e^{i m phi} */
    double *rot_updown;         /* 16 rotations: M2M (child -> parent) for octant o at o, L2L at 8 + o */
    int64_t *v_perm;            /* n_v: V entries, per block of M2L_NODES nodes by direction */
    int32_t *v_target;          /* n_v: the target node of each V entry */
    double *zmat;               /* coaxial M2L matrices, one per squared distance in use */
    int32_t z_slot[28];         /* squared distance (4..27, in sides^2) -> matrix, or -1 */
    double *m2l_buf;            /* threads * m2l_buf_size: X, Y, T of fmk_fmm3d_m2l_block */
    uint8_t *w_direct;          /* n_w: 1 when the W entry is summed directly (P2P), not by M2P */
    uint8_t *x_direct;          /* n_nodes: 1 when the node's X entries are summed directly */
    int64_t *d_begin;           /* n_nodes + 1: per leaf, the source leaves it sums directly */
    int32_t *d_leaf;            /* beyond its U list (from direct W and X entries) */
    double *work;               /* threads * work_size */
    double *result;             /* 4 * nt in key order: pot, grad */
    double tree_time;
} fmm_cpu;

/* Doubles of one thread's M2L block buffers. */
static int64_t m2l_buf_size(int p)
{
    return (int64_t)FMK_FMM3D_BLOCK * (2 * (int64_t)(p + 1) * (p + 2) + 2 * (p + 1));
}

static int order_of(const fmk_plan *plan)
{
    return plan->opts.order >= 0 ? plan->opts.order : fmk_fmm3d_order_from_eps(plan->eps);
}

/* Seconds per P2P pair and core of the loop the engine will run (docs/fmm3d.md section 4): the
 * AVX-512 laplace loop, or the direct sum's square root and division. */
static double p2p_pair_time(const fmk_plan *plan)
{
#ifdef FMM_P2P_AVX512
    if (plan->kernel == FMK_KERNEL_LAPLACE && plan->opts.precision == FMK_PRECISION_FP64 &&
        __builtin_cpu_supports("avx512f"))
        return 0.68e-9;
#endif
    (void)plan;
    return 1.60e-9;
}

static int32_t leaf_size_of(const fmk_plan *plan, int order)
{
    int64_t ls = plan->opts.leaf_size > 0 ? plan->opts.leaf_size
                                           : fmk_fmm3d_leaf_size_model(order, p2p_pair_time(plan));
    return ls > INT32_MAX ? INT32_MAX : (int32_t)ls;
}
static int64_t rot_doubles(int p)
{
    int64_t r = 2 * (int64_t)(p + 1);
    for (int n = 0; n <= p; n++)
        r += 4 * (int64_t)(n + 1) * (n + 1);
    return r;
}

static int64_t state_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int self, int64_t nodes,
                           int64_t n_dirs)
{
    const int p = order_of(plan);
    const int64_t np = self ? ns : ns + nt;
    const int64_t stride = (int64_t)(p + 1) * (p + 2);
    int64_t b = (int64_t)sizeof(fmm_cpu);
    b += fmk_tree3d_bytes_for(np, nodes) + fmk_fmm3d_lists_bytes_for(nodes);
    b += 32 * nodes + 16 * nodes * stride;                 /* counts, begins, M, L */
    b += 8 * ns * 8 + (self ? 0 : 8 * nt * 4);            /* orders, xyz, soa */
    b += 32 * nt;                                          /* result */
    b += 8 * rot_doubles(p) * (n_dirs + 16);               /* polar angles, M2M, L2L */
    b += 8 * 2 * (int64_t)(p + 1) * FMK_FMM3D_NDIR;        /* phases */
    b += 12 * 189 * nodes;                                 /* v_perm, v_target */
    b += 17 * nodes + 4 * 64 * nodes;                      /* direct W and X flags and lists */
    b += 8 * 24 * (int64_t)(p + 1) * (p + 2) * (2 * p + 3) / 6; /* zmat */
    b += 8 * (int64_t)plan->threads * m2l_buf_size(p);
    if (plan->opts.precision == FMK_PRECISION_FP32)
        b += 4 * 4 * ns;                                   /* src32 */
    b += 8 * (int64_t)plan->threads * (8 * stride + 64 * (p + 3)); /* work, generous */
    return b;
}

static void fmm_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int p = order_of(plan);
    const int64_t nodes = fmk_tree3d_estimate_nodes(self ? ns : ns + nt, leaf_size_of(plan, p));
    *h = state_bytes(plan, ns, nt, self, nodes, 61);    /* the polar angles of 316 directions */
    *d = 0;
}

static void fmm_release(fmk_plan *plan)
{
    fmm_cpu *s = plan->state;
    if (!s)
        return;
    fmk_tree3d_free(&s->tree);
    fmk_fmm3d_lists_free(&s->lists);
    fmk_fmm3d_ops_destroy(&s->ops);
    if (s->trg_order != s->src_order)
        free(s->trg_order);
    if (s->trg_xyz != s->src_xyz)
        free(s->trg_xyz);
    free(s->src_order), free(s->src_xyz), free(s->src_soa);
    free(s->n_src), free(s->n_trg), free(s->src_begin), free(s->trg_begin);
    free(s->M), free(s->L), free(s->rot_v), free(s->rot_updown), free(s->work), free(s->result);
    free(s->phase_v);
    free(s->v_perm), free(s->v_target), free(s->zmat), free(s->m2l_buf);
    free(s->src32);
    free(s->w_direct), free(s->x_direct), free(s->d_begin), free(s->d_leaf);
    free(s);
    plan->state = NULL;
}

/* Splits the tree's sorted points into sources and targets (stable, so each node's sources
 * and targets stay contiguous in key order) and counts them per node. */
static void split_points(const fmk_plan *plan, fmm_cpu *s, int64_t *sources_before)
{
    const fmk_tree3d *t = &s->tree;
    const int64_t ns = plan->n_sources, np = t->n_points;
    int64_t is = 0, it = 0;
    for (int64_t p = 0; p < np; p++) {
        const int64_t c = t->order[p];
        sources_before[p] = is;
        if (plan->self || c < ns) {
            s->src_order[is] = c;
            for (int k = 0; k < 3; k++)
                s->src_xyz[3 * is + k] = t->points[3 * p + k];
            is++;
        } else {
            s->trg_order[it] = c - ns;
            for (int k = 0; k < 3; k++)
                s->trg_xyz[3 * it + k] = t->points[3 * p + k];
            it++;
        }
    }
    sources_before[np] = is;
    for (int64_t b = 0; b < t->n_nodes; b++) {
        const int64_t sb = sources_before[t->begin[b]], se = sources_before[t->end[b]];
        s->src_begin[b] = sb;
        s->n_src[b] = se - sb;
        if (plan->self) {
            s->trg_begin[b] = sb;
            s->n_trg[b] = se - sb;
        } else { /* targets before a position = the position - the sources before it */
            s->trg_begin[b] = t->begin[b] - sb;
            s->n_trg[b] = (t->end[b] - se) - (t->begin[b] - sb);
        }
    }
}

static double *thread_work(fmm_cpu *s)
{
    return s->work + fmk_fmm3d_work_size(&s->ops) * fmk_thread_num();
}

/* Octant of a child within its parent: bit 2 x, bit 1 y, bit 0 z (1: upper half). */
static int octant(const fmk_fmm3d_lists *l, int64_t child, int64_t parent)
{
    int o = 0;
    for (int k = 0; k < 3; k++)
        o |= (l->center[3 * child + k] > l->center[3 * parent + k]) << (2 - k);
    return o;
}

/* The leaves under node a (a included) that hold sources (want_src) or targets, into out (NULL:
 * only counted). Depth first with a stack: at most 7 pending siblings per level. */
static int64_t leaves_under(const fmm_cpu *s, int32_t a, int want_src, int32_t *out)
{
    int32_t stack[8 * 64];
    int top = 0;
    int64_t n = 0;
    stack[top++] = a;
    while (top > 0) {
        const int32_t v = stack[--top];
        if ((want_src ? s->n_src[v] : s->n_trg[v]) == 0)
            continue;
        if (s->tree.more[v] < 0) {
            if (out)
                out[n] = v;
            n++;
            continue;
        }
        for (int32_t c = s->tree.more[v]; c < s->tree.more[v] + s->tree.n_children[v]; c++)
            stack[top++] = c;
    }
    return n;
}

/* W and X entries that are cheaper summed directly. M2P of a W box c costs t_m2p ~ 6.2 (p+1)^2 ns
 * per target, P2P from its sources n_src(c) t_pair (t_pair ~ 2.45 ns with the square-root loop,
 * both on the H100 host; docs/fmm3d.md section 4), so c's sources are summed directly when
 * n_src(c) < 2.5 (p+1)^2; P2L of an X entry costs t_p2l ~ 2.1 (p+1)^2 ns per source against
 * n_trg(b) t_pair directly, so a box b with fewer than 0.9 (p+1)^2 targets (in its subtree) takes
 * its X entries directly. Both thresholds scale with 1.60 ns / t_pair of the P2P loop in use
 * (2.35x for the AVX-512 loop). Direct sums are exact, so this changes only the cost. The
 * direct entries become, per leaf, a list of source leaves that P2P sums after the U list (a W
 * box's leaves; an X leaf for every leaf under b). Returns 0, or -1 when out of memory. */
static int direct_lists(fmm_cpu *s, int order, double t_pair)
{
    const fmk_fmm3d_lists *l = &s->lists;
    const int64_t k = l->n_nodes;
    const double q2 = (double)(order + 1) * (order + 1) * (1.60e-9 / t_pair);
    const double w_max = 2.5 * q2, x_max = 0.9 * q2;
    s->w_direct = malloc((size_t)(l->n_w > 0 ? l->n_w : 1));
    s->x_direct = malloc((size_t)(k > 0 ? k : 1));
    s->d_begin = calloc((size_t)k + 1, sizeof(int64_t));
    if (!s->w_direct || !s->x_direct || !s->d_begin)
        return -1;
    for (int64_t e = 0; e < l->n_w; e++)
        s->w_direct[e] = s->n_src[l->w[e]] < w_max;
    for (int64_t b = 0; b < k; b++)
        s->x_direct[b] = s->n_trg[b] < x_max && l->x_begin[b + 1] > l->x_begin[b];
    /* counts (into d_begin[b + 1]), then offsets, then entries */
    for (int pass = 0; pass < 2; pass++) {
        int64_t *fill = s->d_begin;
        if (pass == 1) {
            for (int64_t b = 0; b < k; b++)
                s->d_begin[b + 1] += s->d_begin[b];
            s->d_leaf = malloc(sizeof(int32_t) * (size_t)(s->d_begin[k] > 0 ? s->d_begin[k] : 1));
            if (!s->d_leaf)
                return -1;
        }
        int64_t *at = NULL;
        if (pass == 1) {
            at = malloc(sizeof(int64_t) * (size_t)(k > 0 ? k : 1));
            if (!at)
                return -1;
            memcpy(at, s->d_begin, sizeof(int64_t) * (size_t)k);
        }
        for (int64_t b = 0; b < k; b++) {
            if (s->tree.more[b] < 0 && s->n_trg[b] > 0)
                for (int64_t e = l->w_begin[b]; e < l->w_begin[b + 1]; e++)
                    if (s->w_direct[e]) {
                        if (pass == 0)
                            fill[b + 1] += leaves_under(s, l->w[e], 1, NULL);
                        else
                            at[b] += leaves_under(s, l->w[e], 1, s->d_leaf + at[b]);
                    }
            if (!s->x_direct[b])
                continue;
            /* every target leaf under b sums b's X leaves directly */
            const int64_t n_under = leaves_under(s, (int32_t)b, 0, NULL);
            int32_t *under = malloc(sizeof(int32_t) * (size_t)(n_under > 0 ? n_under : 1));
            if (!under) {
                free(at);
                return -1;
            }
            const int64_t nd = leaves_under(s, (int32_t)b, 0, under);
            for (int64_t i = 0; i < nd; i++)
                for (int64_t e = l->x_begin[b]; e < l->x_begin[b + 1]; e++) {
                    if (pass == 0)
                        fill[under[i] + 1]++;
                    else
                        s->d_leaf[at[under[i]]++] = l->x[e];
                }
            free(under);
        }
        free(at);
    }
    return 0;
}

/* The M2L schedule: per block of M2L_NODES consecutive nodes, its V entries (contiguous in
 * the lists) sorted by direction, each with its target; and the coaxial matrices. */
static void m2l_schedule(fmm_cpu *s, int threads)
{
    const fmk_fmm3d_lists *l = &s->lists;
    const int64_t k = l->n_nodes, n_blocks = (k + M2L_NODES - 1) / M2L_NODES;
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
    for (int64_t blk = 0; blk < n_blocks; blk++) {
        const int64_t b0 = blk * M2L_NODES, b1 = b0 + M2L_NODES < k ? b0 + M2L_NODES : k;
        const int64_t e0 = l->v_begin[b0];
        int64_t count[FMK_FMM3D_NDIR + 1] = {0};
        for (int64_t e = e0; e < l->v_begin[b1]; e++)
            count[l->v_dir[e] + 1]++;
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            count[d + 1] += count[d];
        for (int64_t b = b0; b < b1; b++)
            for (int64_t e = l->v_begin[b]; e < l->v_begin[b + 1]; e++) {
                const int64_t at = e0 + count[l->v_dir[e]]++;
                s->v_perm[at] = e;
                s->v_target[at] = (int32_t)b;
            }
    }
    const int64_t zs = fmk_fmm3d_m2l_zmat_size(&s->ops);
    for (int q = 0; q < 28; q++)
        if (s->z_slot[q] >= 0)
            fmk_fmm3d_m2l_zmat(&s->ops, sqrt((double)q), s->zmat + zs * s->z_slot[q]);
}

static fmk_status fmm_setup(fmk_plan *plan)
{
    const double t0 = fmk_time_now();
    if (plan->opts.precision == FMK_PRECISION_FP32 && plan->eps < 1e-5)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "method fmm in fp32 takes eps >= 1e-5 (eps = %g); use precision fp64",
                             plan->eps);
    const int p = order_of(plan);
    const int32_t ls = leaf_size_of(plan, p);
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    fmm_cpu *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    s->order = p;
    s->leaf_size = ls;
    fmk_status st = fmk_fmm3d_ops_create(&s->ops, p);
    if (st != FMK_OK) {
        fmm_release(plan);
        return fmk_error_set(plan, st, "cannot create the FMM operators of order %d", p);
    }
    s->stride = 2 * s->ops.n_coef;
    if (plan->self) {
        st = fmk_tree3d_build(plan, &s->tree, ns, plan->sources, ls, plan->threads);
    } else {
        double *all = malloc(sizeof(double) * 3 * (size_t)(np > 0 ? np : 1));
        if (!all) {
            fmm_release(plan);
            return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's points");
        }
        memcpy(all, plan->sources, sizeof(double) * 3 * (size_t)ns);
        memcpy(all + 3 * ns, plan->targets, sizeof(double) * 3 * (size_t)nt);
        st = fmk_tree3d_build(plan, &s->tree, np, all, ls, plan->threads);
        free(all);
    }
    if (st != FMK_OK) {
        fmm_release(plan);
        return st;
    }
    const double t_tree = fmk_time_now();
    const int64_t k = s->tree.n_nodes;
    const size_t nk = (size_t)(k > 0 ? k : 1), ns1 = (size_t)(ns > 0 ? ns : 1),
                 nt1 = (size_t)(nt > 0 ? nt : 1);
    s->n_src = malloc(sizeof(int64_t) * nk);
    s->n_trg = malloc(sizeof(int64_t) * nk);
    s->src_begin = malloc(sizeof(int64_t) * nk);
    s->trg_begin = malloc(sizeof(int64_t) * nk);
    s->src_order = malloc(sizeof(int64_t) * ns1);
    s->src_xyz = malloc(sizeof(double) * 3 * ns1);
    s->src_soa = malloc(sizeof(double) * 4 * ns1);
    s->trg_order = plan->self ? s->src_order : malloc(sizeof(int64_t) * nt1);
    s->trg_xyz = plan->self ? s->src_xyz : malloc(sizeof(double) * 3 * nt1);
    s->M = malloc(sizeof(double) * (size_t)s->stride * nk);
    s->L = malloc(sizeof(double) * (size_t)s->stride * nk);
    s->result = malloc(sizeof(double) * 4 * nt1);
    s->work = malloc(sizeof(double) * (size_t)fmk_fmm3d_work_size(&s->ops) * (size_t)plan->threads);
    s->rot_updown = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&s->ops) * 16);
    int bad = !s->n_src || !s->n_trg || !s->src_begin || !s->trg_begin || !s->src_order ||
              !s->src_xyz || !s->src_soa || !s->trg_order || !s->trg_xyz || !s->M ||
              !s->L || !s->result || !s->work || !s->rot_updown;
    if (!bad) {
        int64_t *before = malloc(sizeof(int64_t) * (size_t)(np + 1));
        bad = !before;
        if (before)
            split_points(plan, s, before);
        free(before);
    }
    if (!bad) {
        bad = fmk_fmm3d_lists_build(&s->tree, s->n_src, s->n_trg, &s->lists, plan->threads) != 0;
    }
    if (!bad)
        bad = direct_lists(s, p, p2p_pair_time(plan)) != 0;
    int n_dirs = 0, rot_first[FMK_FMM3D_NDIR]; /* polar angles in use; a direction of each */
    if (!bad) {
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            s->rot_slot[d] = -1;
        int32_t angle_slot[19 * 7];          /* (ox^2 + oy^2) * 7 + oz + 3 -> slot */
        for (int a = 0; a < 19 * 7; a++)
            angle_slot[a] = -1;
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            if (s->lists.dir_used[d]) {
                const int ox = d / 49 - 3, oy = (d / 7) % 7 - 3, oz = d % 7 - 3;
                const int a = (ox * ox + oy * oy) * 7 + oz + 3;
                if (angle_slot[a] < 0) {
                    angle_slot[a] = n_dirs++;
                    rot_first[angle_slot[a]] = d;
                }
                s->rot_slot[d] = angle_slot[a];
            }
        s->rot_v = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&s->ops) * (size_t)(n_dirs + 1));
        s->phase_v = malloc(sizeof(double) * 2 * (size_t)(p + 1) * FMK_FMM3D_NDIR);
        bad = !s->rot_v || !s->phase_v;
    }
    int n_z = 0;
    if (!bad) {
        for (int q = 0; q < 28; q++)
            s->z_slot[q] = -1;
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            if (s->lists.dir_used[d]) {
                const int ox = d / 49 - 3, oy = (d / 7) % 7 - 3, oz = d % 7 - 3;
                const int q = ox * ox + oy * oy + oz * oz;
                if (s->z_slot[q] < 0)
                    s->z_slot[q] = n_z++;
            }
        const size_t nv1 = (size_t)(s->lists.n_v > 0 ? s->lists.n_v : 1);
        s->v_perm = malloc(sizeof(int64_t) * nv1);
        s->v_target = malloc(sizeof(int32_t) * nv1);
        s->zmat = malloc(sizeof(double) * (size_t)fmk_fmm3d_m2l_zmat_size(&s->ops) *
                         (size_t)(n_z > 0 ? n_z : 1));
        s->m2l_buf = malloc(sizeof(double) * (size_t)m2l_buf_size(p) * (size_t)plan->threads);
        bad = !s->v_perm || !s->v_target || !s->zmat || !s->m2l_buf;
    }
    const int fp32 = plan->opts.precision == FMK_PRECISION_FP32;
    if (!bad && fp32) {
        s->src32 = malloc(sizeof(float) * 4 * ns1);
        bad = !s->src32;
    }
    if (bad) {
        int64_t h, d;
        fmm_memory(plan, ns, plan->self ? -1 : nt, &h, &d);
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM (about %lld bytes)",
                             (long long)h);
    }
    /* sources' and targets' coordinates as structures of arrays for P2P */
    for (int64_t i = 0; i < ns; i++)
        for (int c = 0; c < 3; c++)
            s->src_soa[c * ns + i] = s->src_xyz[3 * i + c];
    s->q = s->src_soa + 3 * ns;
    if (fp32) /* relative to the leaf's centre: fp32 then rounds to 2^-24 of a leaf, not of the
               * frame, which keeps close pairs accurate */
        for (int64_t b = 0; b < k; b++)
            if (s->tree.more[b] < 0)
                for (int64_t i = s->src_begin[b]; i < s->src_begin[b] + s->n_src[b]; i++)
                    for (int c = 0; c < 3; c++)
                        s->src32[c * ns + i] = (float)(s->src_xyz[3 * i + c] -
                                                       s->lists.center[3 * b + c]);
    /* rotations: one direction of each polar angle of the V directions in use (the phases of
     * every direction separately), and the child <-> parent directions */
    const int64_t rs = fmk_fmm3d_rot_size(&s->ops);
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        if (s->rot_slot[d] >= 0) {
            const double dir[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
            fmk_fmm3d_rot_phase(&s->ops, dir, s->phase_v + 2 * (p + 1) * d);
        }
#pragma omp parallel for schedule(dynamic, 1) num_threads(plan->threads)
    for (int i = 0; i < n_dirs + 16; i++) {
        double *work = thread_work(s);
        double dir[3];
        double *rot;
        if (i < n_dirs) {
            const int d = rot_first[i];
            dir[0] = d / 49 - 3, dir[1] = (d / 7) % 7 - 3, dir[2] = d % 7 - 3;
            rot = s->rot_v + rs * i;
        } else {
            const int d = i - n_dirs + FMK_FMM3D_NDIR;
            const int o = (d - FMK_FMM3D_NDIR) & 7, down = d - FMK_FMM3D_NDIR >= 8;
            for (int c = 0; c < 3; c++) { /* child - parent */
                double h = (o >> (2 - c)) & 1 ? 1 : -1;
                dir[c] = down ? h : -h;
            }
            rot = s->rot_updown + rs * (d - FMK_FMM3D_NDIR);
        }
        fmk_fmm3d_rot_init(&s->ops, dir, rot, work);
    }
    m2l_schedule(s, plan->threads);
    plan->state_bytes_host = state_bytes(plan, ns, nt, plan->self, k, n_dirs);
#ifdef FMM_P2P_AVX512
    s->p2p_avx512 = plan->kernel == FMK_KERNEL_LAPLACE && !fp32 && __builtin_cpu_supports("avx512f");
#endif
    plan->info.order = p;
    plan->info.levels = s->tree.levels;
    plan->info.leaf_size = ls;
    s->tree_time = t_tree - t0;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

static fmk_status fmm_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                           int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    fmm_cpu *s = plan->state;
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const fmk_fmm3d_ops_ctx *ops = &s->ops;
    const int64_t ns = plan->n_sources, nt = plan->n_targets, k = t->n_nodes, st = s->stride;
    const int64_t rs = fmk_fmm3d_rot_size(ops);
    const int th = plan->threads;
    double *res_pot = s->result, *res_grad = s->result + nt;
    const double t0 = fmk_time_now();
    for (int64_t i = 0; i < ns; i++)
        s->q[i] = charges[s->src_order[i]];
    if (s->src32)
        for (int64_t i = 0; i < ns; i++)
            s->src32[3 * ns + i] = (float)s->q[i];
    memset(s->M, 0, sizeof(double) * (size_t)(st * k));
    memset(s->L, 0, sizeof(double) * (size_t)(st * k));
    memset(s->result, 0, sizeof(double) * 4 * (size_t)nt);
    const double t1 = fmk_time_now();

    /* P2M at the leaves */
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
    for (int64_t b = 0; b < k; b++)
        if (t->more[b] < 0 && s->n_src[b] > 0)
            fmk_fmm3d_p2m(ops, l->center + 3 * b, l->side[b], s->n_src[b],
                          s->src_xyz + 3 * s->src_begin[b], s->q + s->src_begin[b], s->M + st * b,
                          thread_work(s));
    const double t2 = fmk_time_now();

    /* M2M, deepest level first; each parent gathers its children */
    for (int32_t lev = t->levels - 2; lev >= 0; lev--) {
        const int64_t a = t->level_begin[lev], e = t->level_begin[lev + 1];
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
        for (int64_t b = a; b < e; b++) {
            if (t->more[b] < 0 || s->n_src[b] == 0)
                continue;
            for (int32_t c = t->more[b]; c < t->more[b] + t->n_children[b]; c++)
                if (s->n_src[c] > 0)
                    fmk_fmm3d_m2m(ops, s->rot_updown + rs * octant(l, c, b), l->center + 3 * c,
                                  l->side[c], s->M + st * c, l->center + 3 * b, l->side[b],
                                  s->M + st * b, thread_work(s));
        }
    }
    const double t3 = fmk_time_now();

    /* M2L from the V list, a direction's entries of a block of nodes at a time (each target
     * occurs once per direction, so a block's columns go to distinct boxes), then P2L from the
     * X list */
    const int64_t n_blocks = (k + M2L_NODES - 1) / M2L_NODES, zs = fmk_fmm3d_m2l_zmat_size(ops);
    const int64_t nc2 = 2 * ops->n_coef;
#pragma omp parallel for schedule(dynamic, 1) num_threads(th)
    for (int64_t blk = 0; blk < n_blocks; blk++) {
        enum { LD = FMK_FMM3D_BLOCK };
        double *X = s->m2l_buf + m2l_buf_size(s->order) * fmk_thread_num();
        double *Y = X + LD * nc2, *T = Y + LD * nc2;
        const int64_t b0 = blk * M2L_NODES, b1 = b0 + M2L_NODES < k ? b0 + M2L_NODES : k;
        const int64_t e1 = l->v_begin[b1];
        for (int64_t e = l->v_begin[b0]; e < e1;) {
            const int dir = l->v_dir[s->v_perm[e]];
            int64_t r = e;
            while (r < e1 && l->v_dir[s->v_perm[r]] == dir)
                r++;
            const int ox = dir / 49 - 3, oy = (dir / 7) % 7 - 3, oz = dir % 7 - 3;
            const double *phase = s->phase_v + 2 * (s->order + 1) * dir;
            const double *wigner = s->rot_v + rs * s->rot_slot[dir] + 2 * (s->order + 1);
            const double *Z = s->zmat + zs * s->z_slot[ox * ox + oy * oy + oz * oz];
            /* the run [e, r) in chunks of nearly equal width <= LD */
            const int64_t n_run = r - e, n_chunks = (n_run + LD - 1) / LD;
            for (int64_t ch = 0; ch < n_chunks; ch++) {
                const int64_t c0 = e + n_run * ch / n_chunks, c1 = e + n_run * (ch + 1) / n_chunks;
                const int w = (int)(c1 - c0), w8 = (w + 7) & ~7;
                for (int c = 0; c < w; c++) {
                    const double *Mc = s->M + st * l->v[s->v_perm[c0 + c]];
                    for (int64_t i = 0; i < nc2; i++)
                        X[i * LD + c] = Mc[i];
                }
                for (int64_t i = 0; i < nc2; i++)
                    for (int c = w; c < w8; c++)
                        X[i * LD + c] = 0;
                fmk_fmm3d_m2l_block(ops, phase, wigner, Z, w, X, Y, T);
                for (int c = 0; c < w; c++) {
                    const int32_t b = s->v_target[c0 + c];
                    const double inv_s = 1 / l->side[b];
                    double *Lb = s->L + st * b;
                    for (int64_t i = 0; i < nc2; i++)
                        Lb[i] += Y[i * LD + c] * inv_s;
                }
            }
            e = r;
        }
        double *work = thread_work(s);
        for (int64_t b = b0; b < b1; b++)
            for (int64_t e = l->x_begin[b]; e < l->x_begin[b + 1] && !s->x_direct[b]; e++) {
                const int32_t c = l->x[e];
                fmk_fmm3d_p2l(ops, l->center + 3 * b, l->side[b], s->n_src[c],
                              s->src_xyz + 3 * s->src_begin[c], s->q + s->src_begin[c],
                              s->L + st * b, work);
            }
    }
    const double t4 = fmk_time_now();

    /* L2L, top down (levels 0 and 1 have no V or X lists, so their locals are zero) */
    for (int32_t lev = 3; lev < t->levels; lev++) {
        const int64_t a = t->level_begin[lev], e = t->level_begin[lev + 1];
#pragma omp parallel for schedule(dynamic, 8) num_threads(th)
        for (int64_t b = a; b < e; b++) {
            if (s->n_trg[b] == 0)
                continue;
            const int64_t P = t->parent[b];
            fmk_fmm3d_l2l(ops, s->rot_updown + rs * (8 + octant(l, b, P)), l->center + 3 * P,
                          l->side[P], s->L + st * P, l->center + 3 * b, l->side[b], s->L + st * b,
                          thread_work(s));
        }
    }
    const double t5 = fmk_time_now();

    /* L2P and the W list's M2P at the leaves */
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        if (t->more[b] >= 0 || s->n_trg[b] == 0)
            continue;
        double *work = thread_work(s);
        const int64_t tb = s->trg_begin[b], n = s->n_trg[b];
        const double *y = s->trg_xyz + 3 * tb;
        if (t->level[b] >= 2)
            fmk_fmm3d_l2p(ops, l->center + 3 * b, l->side[b], s->L + st * b, n, y, res_pot + tb,
                          res_grad + 3 * tb, work);
        for (int64_t e = l->w_begin[b]; e < l->w_begin[b + 1]; e++) {
            if (s->w_direct[e]) /* summed in P2P */
                continue;
            const int32_t c = l->w[e];
            fmk_fmm3d_m2p(ops, l->center + 3 * c, l->side[c], s->M + st * c, n, y, res_pot + tb,
                          res_grad + 3 * tb, work);
        }
    }
    const double t6 = fmk_time_now();

    /* P2P from the U list: per target leaf, one source leaf at a time (it stays in cache)
     * through the direct sum's vectorized loop for the plan's kernel (plummer and regularized:
     * the exact smooth kernel in the near field), in fp64 or, for precision fp32, in fp32 */
    const double *sx = s->src_soa, *sy = sx + ns, *sz = sy + ns, *sq = s->q;
    const float *fx = s->src32, *fy = fx + ns, *fz = fy + ns, *fq = fz + ns;
    const fmm_p2p64_tile_fn p2p = fmm_p2p64_pick(plan->kernel);
    const fmm_p2p32_tile_fn p2p32 = fmm_p2p32_pick(plan->kernel);
    const double eps2 = plan->frame.softening * plan->frame.softening;
#pragma omp parallel for schedule(dynamic, 1) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        if (t->more[b] >= 0 || s->n_trg[b] == 0)
            continue;
        const int64_t tb = s->trg_begin[b], te = tb + s->n_trg[b];
        const int64_t nu = l->u_begin[b + 1] - l->u_begin[b];
        const int64_t nd = s->d_begin[b + 1] - s->d_begin[b];
#ifdef FMM_P2P_AVX512
        if (s->p2p_avx512) { /* all source leaves at once per target, 64 at a time */
            for (int64_t e0 = 0; e0 < nu + nd; e0 += 64) {
                int64_t jb[64], jn[64];
                int cnt = 0;
                for (int64_t e = e0; e < nu + nd && e < e0 + 64; e++, cnt++) {
                    const int32_t c = e < nu ? l->u[l->u_begin[b] + e]
                                             : s->d_leaf[s->d_begin[b] + e - nu];
                    jb[cnt] = s->src_begin[c], jn[cnt] = s->n_src[c];
                }
                for (int64_t i = tb; i < te; i++) {
                    double out[4];
                    p2p_laplace_avx512(sx, sy, sz, sq, jb, jn, cnt, s->trg_xyz + 3 * i, out);
                    res_pot[i] += out[0];
                    for (int d = 0; d < 3; d++)
                        res_grad[3 * i + d] += out[1 + d];
                }
            }
            continue;
        }
#endif
        for (int64_t e = 0; e < nu + nd; e++) { /* the U list, then the direct W and X leaves */
            const int32_t c = e < nu ? l->u[l->u_begin[b] + e] : s->d_leaf[s->d_begin[b] + e - nu];
            const int64_t j0 = s->src_begin[c], nj = s->n_src[c];
            for (int64_t i = tb; i < te; i++) {
                double out[4];
                /* the target itself, when targets are the sources (smooth kernels) */
                const int64_t skip = plan->self && c == b ? i - j0 : -1;
                if (fx) {
                    float o32[4], y32[3];
                    for (int d = 0; d < 3; d++)
                        y32[d] = (float)(s->trg_xyz[3 * i + d] - l->center[3 * c + d]);
                    p2p32(fx + j0, fy + j0, fz + j0, fq + j0, nj, y32, skip, (float)eps2, 0, o32);
                    for (int d = 0; d < 4; d++)
                        out[d] = o32[d];
                } else {
                    p2p(sx + j0, sy + j0, sz + j0, sq + j0, nj, s->trg_xyz + 3 * i, skip, eps2,
                        0, out);
                }
                res_pot[i] += out[0];
                for (int d = 0; d < 3; d++)
                    res_grad[3 * i + d] += out[1 + d];
            }
        }
    }
    const double t7 = fmk_time_now();

    /* every pass succeeded: results to the caller's order and units */
    const double ps = plan->frame.pot_scale;
#pragma omp parallel for schedule(static) num_threads(th) if (nt > 4096)
    for (int64_t i = 0; i < nt; i++) {
        const int64_t c = s->trg_order[i];
        if (pot)
            pot[c] = res_pot[i] * ps;
        if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
            for (int d = 0; d < 3; d++)
                grad[3 * c + d] = res_grad[3 * i + d] * ps * ps;
    }
    const double stamps[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    fmk_info_fmm_phases(&plan->info, stamps, s->tree_time);
    return FMK_OK;
}

/* Kernels: laplace, and plummer and regularized with the exact smooth kernel in the near field
 * (P2P over the U list) and laplace multipoles in the far field (docs/fmm3d.md section 10: the
 * far field then errs by O((s/d)^2) relative, s the softening, d the side of the smallest
 * separated boxes). Precision fp32 (P2P in fp32, expansions in fp64) needs eps >= 1e-5, which
 * fmm_setup checks (eps is not known here). */
fmk_status fmk_fmm3d_check_eps(const fmk_opts *o, double eps)
{
    if (o->precision == FMK_PRECISION_FP32 && eps < 1e-5)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "method fmm in fp32 takes eps >= 1e-5 (eps = %g); use precision fp64",
                             eps);
    if (!(eps >= 1e-14 && eps <= 1e-2))
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "eps = %g; method fmm takes 1e-14 <= eps <= 1e-2 (use method direct "
                             "for tighter, tree for looser accuracy)", eps);
    return FMK_OK;
}

static fmk_status fmm_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                 fmk_info *info)
{
    (void)dim, (void)info;
    fmk_status st = fmk_fmm3d_check_eps(o, eps);
    if (st != FMK_OK)
        return st;
    if (kernel != FMK_KERNEL_LAPLACE && kernel != FMK_KERNEL_PLUMMER &&
        kernel != FMK_KERNEL_REGULARIZED)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm is not available for kernel %s (laplace, plummer, "
                             "regularized)", fmk_kernel_name(kernel));
    return FMK_OK;
}

const fmk_engine fmk_engine_fmm_cpu = {
    .name = "fmm/cpu",
    .setup = fmm_setup,
    .eval = fmm_eval,
    .memory = fmm_memory,
    .release = fmm_release,
    .check_opts = fmm_check_opts,
};
