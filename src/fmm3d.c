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

#include "fmm3d.h"
#include "fmm3d_ops.h"

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
    double *trg_soa;            /* 3 * nt (== src_soa when self) */
    double *q;                  /* ns charges in key order (points into src_soa) */
    double *M, *L;              /* n_nodes * stride */
    double *rot_v;              /* rotations of the used V directions */
    int32_t rot_slot[FMK_FMM3D_NDIR];
    double *rot_updown;         /* 16 rotations: M2M (child -> parent) for octant o at o, L2L at 8 + o */
    double *work;               /* threads * work_size */
    double *result;             /* 4 * nt in key order: pot, grad */
    double tree_time;
} fmm_cpu;

static int order_of(const fmk_plan *plan)
{
    return plan->opts.order >= 0 ? plan->opts.order : fmk_fmm3d_order_from_eps(plan->eps);
}

static int32_t leaf_size_of(const fmk_plan *plan, int order)
{
    int64_t ls = plan->opts.leaf_size > 0 ? plan->opts.leaf_size : fmk_fmm3d_leaf_size_for(order);
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
    b += 8 * ns * 8 + (self ? 0 : 8 * nt * 7);            /* orders, xyz, soa */
    b += 32 * nt;                                          /* result */
    b += 8 * rot_doubles(p) * (n_dirs + 16);
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
    *h = state_bytes(plan, ns, nt, self, nodes, FMK_FMM3D_NDIR - 27);
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
    if (s->trg_soa != s->src_soa)
        free(s->trg_soa);
    free(s->src_order), free(s->src_xyz), free(s->src_soa);
    free(s->n_src), free(s->n_trg), free(s->src_begin), free(s->trg_begin);
    free(s->M), free(s->L), free(s->rot_v), free(s->rot_updown), free(s->work), free(s->result);
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
    double *w = s->work;
#ifdef _OPENMP
    w += fmk_fmm3d_work_size(&s->ops) * omp_get_thread_num();
#endif
    return w;
}

/* Octant of a child within its parent: bit 2 x, bit 1 y, bit 0 z (1: upper half). */
static int octant(const fmk_fmm3d_lists *l, int64_t child, int64_t parent)
{
    int o = 0;
    for (int k = 0; k < 3; k++)
        o |= (l->center[3 * child + k] > l->center[3 * parent + k]) << (2 - k);
    return o;
}

static fmk_status fmm_setup(fmk_plan *plan)
{
    const double t0 = fmk_time_now();
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
    s->trg_soa = plan->self ? s->src_soa : malloc(sizeof(double) * 3 * nt1);
    s->M = malloc(sizeof(double) * (size_t)s->stride * nk);
    s->L = malloc(sizeof(double) * (size_t)s->stride * nk);
    s->result = malloc(sizeof(double) * 4 * nt1);
    s->work = malloc(sizeof(double) * (size_t)fmk_fmm3d_work_size(&s->ops) * (size_t)plan->threads);
    s->rot_updown = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&s->ops) * 16);
    int bad = !s->n_src || !s->n_trg || !s->src_begin || !s->trg_begin || !s->src_order ||
              !s->src_xyz || !s->src_soa || !s->trg_order || !s->trg_xyz || !s->trg_soa || !s->M ||
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
    int n_dirs = 0;
    if (!bad) {
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            s->rot_slot[d] = s->lists.dir_used[d] ? n_dirs++ : -1;
        s->rot_v = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&s->ops) * (size_t)(n_dirs + 1));
        bad = !s->rot_v;
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
    if (!plan->self)
        for (int64_t i = 0; i < nt; i++)
            for (int c = 0; c < 3; c++)
                s->trg_soa[c * nt + i] = s->trg_xyz[3 * i + c];
    /* rotations: the V directions in use, and the child <-> parent directions */
    const int64_t rs = fmk_fmm3d_rot_size(&s->ops);
#pragma omp parallel for schedule(dynamic, 1) num_threads(plan->threads)
    for (int d = 0; d < FMK_FMM3D_NDIR + 16; d++) {
        double *work = thread_work(s);
        double dir[3];
        double *rot;
        if (d < FMK_FMM3D_NDIR) {
            if (s->rot_slot[d] < 0)
                continue;
            dir[0] = d / 49 - 3, dir[1] = (d / 7) % 7 - 3, dir[2] = d % 7 - 3;
            rot = s->rot_v + rs * s->rot_slot[d];
        } else {
            const int o = (d - FMK_FMM3D_NDIR) & 7, down = d - FMK_FMM3D_NDIR >= 8;
            for (int c = 0; c < 3; c++) { /* child - parent */
                double h = (o >> (2 - c)) & 1 ? 1 : -1;
                dir[c] = down ? h : -h;
            }
            rot = s->rot_updown + rs * (d - FMK_FMM3D_NDIR);
        }
        fmk_fmm3d_rot_init(&s->ops, dir, rot, work);
    }
    plan->state_bytes_host = state_bytes(plan, ns, nt, plan->self, k, n_dirs);
    plan->info.order = p;
    plan->info.levels = s->tree.levels;
    plan->info.leaf_size = ls;
    s->tree_time = t_tree - t0;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

/* P2P: the potential and gradient at one target of sources [j0, j1) (structure of arrays).
 * Pairs at distance 0 (the target itself when targets are the sources, and coincident points)
 * contribute nothing. */
static inline void p2p_one(const double *restrict sx, const double *restrict sy,
                           const double *restrict sz, const double *restrict sq, int64_t j0,
                           int64_t j1, double tx, double ty, double tz, double acc[4])
{
    double p = 0, gx = 0, gy = 0, gz = 0;
#pragma omp simd reduction(+ : p, gx, gy, gz)
    for (int64_t j = j0; j < j1; j++) {
        const double dx = tx - sx[j], dy = ty - sy[j], dz = tz - sz[j];
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double inv = r2 > 0 ? 1.0 / sqrt(r2) : 0.0;
        const double qi = sq[j] * inv, qi3 = qi * inv * inv;
        p += qi;
        gx -= dx * qi3;
        gy -= dy * qi3;
        gz -= dz * qi3;
    }
    acc[0] += p, acc[1] += gx, acc[2] += gy, acc[3] += gz;
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

    /* M2L from the V list, P2L from the X list */
#pragma omp parallel for schedule(dynamic, 2) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        double *work = thread_work(s);
        for (int64_t e = l->v_begin[b]; e < l->v_begin[b + 1]; e++) {
            const int32_t c = l->v[e];
            fmk_fmm3d_m2l(ops, s->rot_v + rs * s->rot_slot[l->v_dir[e]], l->center + 3 * c,
                          l->side[c], s->M + st * c, l->center + 3 * b, l->side[b], s->L + st * b,
                          work);
        }
        for (int64_t e = l->x_begin[b]; e < l->x_begin[b + 1]; e++) {
            const int32_t c = l->x[e];
            fmk_fmm3d_p2l(ops, l->center + 3 * b, l->side[b], s->n_src[c],
                          s->src_xyz + 3 * s->src_begin[c], s->q + s->src_begin[c], s->L + st * b,
                          work);
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
            const int32_t c = l->w[e];
            fmk_fmm3d_m2p(ops, l->center + 3 * c, l->side[c], s->M + st * c, n, y, res_pot + tb,
                          res_grad + 3 * tb, work);
        }
    }
    const double t6 = fmk_time_now();

    /* P2P from the U list */
    const double *sx = s->src_soa, *sy = sx + ns, *sz = sy + ns, *sq = s->q;
    const double *tx = s->trg_soa, *ty = tx + nt, *tz = ty + nt;
#pragma omp parallel for schedule(dynamic, 1) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        if (t->more[b] >= 0 || s->n_trg[b] == 0)
            continue;
        const int64_t tb = s->trg_begin[b], te = tb + s->n_trg[b];
        for (int64_t i = tb; i < te; i++) {
            double acc[4] = {0, 0, 0, 0};
            for (int64_t e = l->u_begin[b]; e < l->u_begin[b + 1]; e++) {
                const int32_t c = l->u[e];
                p2p_one(sx, sy, sz, sq, s->src_begin[c], s->src_begin[c] + s->n_src[c], tx[i],
                        ty[i], tz[i], acc);
            }
            res_pot[i] += acc[0];
            for (int c = 0; c < 3; c++)
                res_grad[3 * i + c] += acc[1 + c];
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
    fmk_info *in = &plan->info;
    in->phase_time[FMK_PHASE_UPLOAD] = t1 - t0;
    in->phase_time[FMK_PHASE_P2M] = t2 - t1;
    in->phase_time[FMK_PHASE_M2M] = t3 - t2;
    in->phase_time[FMK_PHASE_M2L] = t4 - t3;
    in->phase_time[FMK_PHASE_L2L] = t5 - t4;
    in->phase_time[FMK_PHASE_L2P] = t6 - t5;
    in->phase_time[FMK_PHASE_P2P] = t7 - t6;
    in->phase_time[FMK_PHASE_DOWNLOAD] = fmk_time_now() - t7;
    in->phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

static fmk_status fmm_check_opts(fmk_opts *o, fmk_kernel kernel)
{
    if (kernel != FMK_KERNEL_LAPLACE)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm is not available yet for kernel %s (only laplace)",
                             fmk_kernel_name(kernel));
    if (o->precision != FMK_PRECISION_FP64)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm is not available yet in fp32; use precision fp64");
    return FMK_OK;
}

const fmk_engine fmk_engine_fmm_cpu = {
    "fmm/cpu", fmm_setup, fmm_eval, fmm_memory, NULL, fmm_release, fmm_check_opts,
};
