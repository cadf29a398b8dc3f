/* fmm2d.c -- the CPU engine of the 2D adaptive FMM (method fmm, dim 2; kernels log2d and
 * cauchy2d, fp64), after Goude & Engblom. set_points builds the pyramid and the directed lists
 * once (fmm2d_tree.c; definitions in fmm2d.h) and allocates everything eval needs, so eval
 * cannot fail half way. eval runs the numerical passes with OpenMP: P2M at the finest level,
 * M2M upward, M2L (weak lists, all levels) and P2L (finest level), L2L downward, L2P and M2P at
 * the finest level, P2P, and writes the caller's arrays in the caller's order.
 *
 * Coincident points (issue 31): m coincident points span about m / N_d finest boxes that no
 * criterion separates (their radius is 0, their distance 0): O((m / N_d)^2) list entries and
 * m^2 pairs. When more than N_d points coincide, the pyramid is therefore built over the
 * distinct sources (or targets) instead: coincident sources are one source that carries their
 * summed charge, coincident targets are evaluated once. Under both kernels a target gets
 * nothing from sources at its own position (docs/kernels.md), so this is the rule exactly; with
 * targets = sources it also leaves out the self term. */
#include <stdlib.h>
#include <string.h>

#include "fmm2d/fmm2d.h"
#include "fmm2d/fmm2d_ops.h"
#include "tree/resolution.h"
#include "tree/unique.h"

typedef struct fmm2d_cpu {
    fmk_fmm2d_tree tree;
    int order;
    int64_t leaf_size;
    fmk_cplx *q;     /* tree.n_sources charges in box order */
    fmk_cplx *M, *L; /* n_boxes * (order + 1) */
    fmk_cplx *res;   /* 2 * tree.n_targets: V, D in box order */
    double *q_zero;  /* tree.n_targets: charge at distance 0 (log2d) */
    /* coincident points: the box position of each caller source's (target's) distinct point,
     * NULL when none coincide (the tree's orders then map box positions to caller indices) */
    int64_t *src_at; /* n_sources */
    int64_t *trg_at; /* n_targets (== src_at when self) */
    double tree_time;
} fmm2d_cpu;

#define order_of fmk_fmm2d_plan_order
#define leaf_size_of fmk_fmm2d_plan_leaf_size

static int64_t state_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int self, int64_t n_weak,
                           int64_t n_near)
{
    const int p = order_of(plan);
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, leaf_size_of(plan));
    const int64_t boxes = fmk_fmm2d_first(L + 1);
    int64_t b = (int64_t)sizeof(fmm2d_cpu); /* saturating: sizes no machine holds */
    b = fmk_bytes_add(b, fmk_fmm2d_tree_bytes(ns, nt, self, L, n_weak, n_near));
    b = fmk_bytes_plus(b, 16, ns);
    b = fmk_bytes_plus(b, 2 * 16 * (int64_t)(p + 1), boxes);
    b = fmk_bytes_plus(b, 40, nt);
    return b;
}

static void fmm2d_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int64_t n = self ? ns : ns + nt;
    const int L = fmk_fmm2d_levels(n, leaf_size_of(plan));
    const int64_t boxes = fmk_fmm2d_first(L + 1), leaves = (int64_t)1 << (2 * L);
    /* lists: about 27 weak boxes per box and 9 near boxes per finest box (uniform points) */
    *h = state_bytes(plan, ns, nt, self, 32 * boxes, 12 * leaves);
    *d = 0;
}

static void fmm2d_release(fmk_plan *plan)
{
    fmm2d_cpu *s = plan->state;
    if (!s)
        return;
    fmk_fmm2d_tree_free(&s->tree);
    if (s->trg_at != s->src_at)
        free(s->trg_at);
    free(s->src_at);
    free(s->q), free(s->M), free(s->L), free(s->res), free(s->q_zero);
    free(s);
    plan->state = NULL;
}

/* The distinct points of x (n of them) into *out and each point's distinct point into slot,
 * when some point has more than n_d copies; else *out = x (n points returned): up to n_d copies
 * of a point cost no more than any box of n_d points, and the pyramid stays the one the GPU
 * engine builds. Returns the number of points in *out, or -1 when out of memory. */
static int64_t distinct(int64_t n, const double *x, int64_t n_d, int64_t *slot, const double **out)
{
    const int64_t nu = fmk_unique_points(2, n, x, slot);
    *out = x;
    if (nu < 0 || nu == n)
        return nu;
    int64_t *copies = calloc((size_t)nu, sizeof(int64_t)), most = 0;
    if (!copies)
        return -1;
    for (int64_t i = 0; i < n; i++)
        most = ++copies[slot[i]] > most ? copies[slot[i]] : most;
    free(copies);
    if (most <= n_d)
        return n;
    double *u = malloc(sizeof(double) * 2 * (size_t)nu);
    if (!u)
        return -1;
    for (int64_t i = 0; i < n; i++)
        u[2 * slot[i]] = x[2 * i], u[2 * slot[i] + 1] = x[2 * i + 1];
    *out = u;
    return nu;
}

/* slot (n entries: a distinct point's number) into its box position, through the tree's order
 * of the nu distinct points. Returns 0, or -1 when out of memory. */
static int slot_to_position(int64_t n, int64_t nu, const int64_t *order, int64_t *slot)
{
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(nu > 0 ? nu : 1));
    if (!pos)
        return -1;
    for (int64_t i = 0; i < nu; i++)
        pos[order[i]] = i;
    for (int64_t i = 0; i < n; i++)
        slot[i] = pos[slot[i]];
    free(pos);
    return 0;
}

/* The pyramid over the distinct sources and targets (see the top of the file), or over the
 * points as given when none coincide. */
static fmk_status build_tree(fmk_plan *plan, fmm2d_cpu *s)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    int64_t *ss = malloc(sizeof(int64_t) * (size_t)(ns > 0 ? ns : 1));
    int64_t *ts = plan->self ? ss : malloc(sizeof(int64_t) * (size_t)(nt > 0 ? nt : 1));
    const double *us = plan->sources, *ut = plan->targets;
    int64_t nus = -1, nut = -1;
    if (ss && ts) {
        nus = distinct(ns, plan->sources, s->leaf_size, ss, &us);
        nut = plan->self ? nus : nus >= 0 ? distinct(nt, plan->targets, s->leaf_size, ts, &ut) : -1;
    }
    fmk_status st = FMK_ERR_NOMEM;
    if (nus >= 0 && nut >= 0)
        st = fmk_fmm2d_tree_build(&s->tree, nus, us, plan->self, nut, ut, s->leaf_size,
                                  plan->threads);
    if (st == FMK_OK && nus < ns) {
        if (slot_to_position(ns, nus, s->tree.src_order, ss) == 0)
            s->src_at = ss, ss = NULL;
        else
            st = FMK_ERR_NOMEM;
    }
    if (st == FMK_OK && plan->self)
        s->trg_at = s->src_at;
    else if (st == FMK_OK && nut < nt) {
        if (slot_to_position(nt, nut, s->tree.trg_order, ts) == 0)
            s->trg_at = ts, ts = NULL;
        else
            st = FMK_ERR_NOMEM;
    }
    if (us != plan->sources)
        free((double *)us);
    if (ut != plan->targets)
        free((double *)ut);
    if (!plan->self) /* taken (NULL) where they became trg_at, src_at */
        free(ts);
    free(ss);
    return st;
}

/* The interaction counts of fmk_info from tree t's lists: *p2p the pairs of P2P (per finest
 * box, its targets times the sources of its P2P list; distinct points, a target's own source
 * left out when self), *far the M2L, M2P and P2L entries. */
static void interactions_of(const fmk_fmm2d_tree *t, int64_t *p2p, int64_t *far)
{
    const int L = t->levels;
    const int64_t leaves = (int64_t)1 << (2 * L);
    int64_t pairs = 0;
    for (int64_t b = 0; b < leaves; b++) {
        const int64_t nt = t->trg_start[b + 1] - t->trg_start[b];
        for (int64_t e = t->p2p_begin[b]; nt > 0 && e < t->p2p_begin[b + 1]; e++) {
            const int64_t a = t->p2p[e];
            pairs += nt * (t->src_start[a + 1] - t->src_start[a]);
        }
    }
    *p2p = pairs - (t->self ? t->n_targets : 0);
    *far = t->weak_begin[t->n_boxes] + t->m2p_begin[leaves] + t->p2l_begin[leaves];
}

static fmk_status fmm2d_setup(fmk_plan *plan)
{
    const double t0 = fmk_time_now();
    const int p = order_of(plan);
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    /* the resolution guard (tree/resolution.h): the frame's fp64 coordinates */
    const fmk_resolution_opts guard = {plan->eps, FMK_RESOLUTION_FP64, 0, 0, 0};
    fmk_status st = fmk_resolution_check(plan, "fmm", &guard);
    if (st != FMK_OK)
        return st;
    fmm2d_cpu *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    s->order = p;
    s->leaf_size = leaf_size_of(plan);
    st = build_tree(plan, s);
    const double t1 = fmk_time_now();
    const int64_t nus = s->tree.n_sources, nut = s->tree.n_targets; /* distinct points */
    if (st == FMK_OK) {
        const size_t nb = (size_t)s->tree.n_boxes * (size_t)(p + 1);
        s->q = malloc(sizeof(fmk_cplx) * (size_t)(nus > 0 ? nus : 1));
        s->M = malloc(sizeof(fmk_cplx) * nb);
        s->L = malloc(sizeof(fmk_cplx) * nb);
        s->res = malloc(sizeof(fmk_cplx) * 2 * (size_t)(nut > 0 ? nut : 1));
        s->q_zero = malloc(sizeof(double) * (size_t)(nut > 0 ? nut : 1));
        if (!s->q || !s->M || !s->L || !s->res || !s->q_zero)
            st = FMK_ERR_NOMEM;
    }
    if (st != FMK_OK) {
        int64_t h, d;
        fmm2d_memory(plan, ns, plan->self ? -1 : nt, &h, &d);
        fmm2d_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM,
                             "out of host memory for the 2D FMM (about %lld bytes)", (long long)h);
    }
    const fmk_fmm2d_tree *t = &s->tree;
    const int64_t leaves = (int64_t)1 << (2 * t->levels);
    plan->state_bytes_host =
        state_bytes(plan, nus, nut, plan->self, t->weak_begin[t->n_boxes],
                    t->p2p_begin[leaves] + t->m2p_begin[leaves] + t->p2l_begin[leaves]);
    if (s->src_at) /* the maps of coincident points */
        plan->state_bytes_host += 8 * ns;
    if (s->trg_at && s->trg_at != s->src_at)
        plan->state_bytes_host += 8 * nt;
    interactions_of(t, &plan->interactions_p2p, &plan->interactions_far);
    plan->info.order = p;
    plan->info.levels = t->levels + 1;
    plan->info.leaf_size = s->leaf_size;
    plan->info.theta = FMK_FMM2D_THETA;
    s->tree_time = t1 - t0;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

static fmk_cplx center_of(const fmk_fmm2d_tree *t, int64_t g)
{
    return fmk_c(t->center[2 * g], t->center[2 * g + 1]);
}

static double scale_of(const fmk_fmm2d_tree *t, int64_t g)
{
    return fmk_fmm2d_scale(t->radius[g]);
}

/* The charges into box order, coincident sources' summed in caller order (src_at); returns the
 * sum of their real parts. */
static double gather_charges(const fmk_plan *plan, fmm2d_cpu *s, const double *charges, int is_log)
{
    const fmk_fmm2d_tree *t = &s->tree;
    double q_total = 0;
    if (s->src_at) {
        memset(s->q, 0, sizeof(fmk_cplx) * (size_t)t->n_sources);
        for (int64_t c = 0; c < plan->n_sources; c++) {
            fmk_cplx *q = s->q + s->src_at[c];
            q->re += is_log ? charges[c] : charges[2 * c];
            q->im += is_log ? 0 : charges[2 * c + 1];
        }
    }
    for (int64_t i = 0; i < t->n_sources; i++) {
        const int64_t c = t->src_order[i];
        if (!s->src_at)
            s->q[i] = is_log ? fmk_c(charges[c], 0) : fmk_c(charges[2 * c], charges[2 * c + 1]);
        q_total += s->q[i].re;
    }
    return q_total;
}

static fmk_status fmm2d_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                             int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    fmm2d_cpu *s = plan->state;
    const fmk_fmm2d_tree *t = &s->tree;
    const int p = s->order, L = t->levels, th = plan->threads;
    const int is_log = plan->kernel == FMK_KERNEL_LOG2D;
    const int64_t nt = t->n_targets, nc = p + 1; /* the tree's targets: the distinct ones */
    const int64_t leaves = (int64_t)1 << (2 * L), fl = fmk_fmm2d_first(L);
    (void)th;
    const double t0 = fmk_time_now();
    const double q_total = gather_charges(plan, s, charges, is_log);
    memset(s->M, 0, sizeof(fmk_cplx) * (size_t)(t->n_boxes * nc));
    memset(s->L, 0, sizeof(fmk_cplx) * (size_t)(t->n_boxes * nc));
    memset(s->res, 0, sizeof(fmk_cplx) * 2 * (size_t)nt);
    memset(s->q_zero, 0, sizeof(double) * (size_t)nt);
    const double t1 = fmk_time_now();

    /* P2M at the finest level */
#pragma omp parallel for schedule(dynamic, 16) num_threads(th)
    for (int64_t b = 0; b < leaves; b++) {
        const int64_t a = t->src_start[b], e = t->src_start[b + 1];
        if (e > a && !fmk_interrupt_team(plan))
            fmk_fmm2d_p2m(is_log, p, center_of(t, fl + b), scale_of(t, fl + b), e - a,
                          t->src_xy + 2 * a, s->q + a, s->M + nc * (fl + b));
    }
    const double t2 = fmk_time_now();

    /* M2M up to level 1 (the root's multipole is never used) */
    for (int l = L - 1; l >= 1; l--) {
        const int64_t f = fmk_fmm2d_first(l), fc = fmk_fmm2d_first(l + 1);
#pragma omp parallel for schedule(dynamic, 16) num_threads(th)
        for (int64_t b = 0; b < ((int64_t)1 << (2 * l)); b++)
            for (int64_t c = 4 * b; c < 4 * b + 4; c++) {
                int64_t a, e;
                fmk_fmm2d_range(t->src_start, L, l + 1, c, &a, &e);
                if (e > a && !fmk_interrupt_team(plan))
                    fmk_fmm2d_m2m(p, center_of(t, fc + c), scale_of(t, fc + c),
                                  s->M + nc * (fc + c), center_of(t, f + b), scale_of(t, f + b),
                                  s->M + nc * (f + b));
            }
    }
    const double t3 = fmk_time_now();

    /* M2L from the weak lists of every level; P2L at the finest level */
#pragma omp parallel for schedule(dynamic, 16) num_threads(th)
    for (int64_t g = 1; g < t->n_boxes; g++) {
        if (fmk_interrupt_team(plan)) /* the caller asked to stop: skip the remaining boxes */
            continue;
        for (int64_t e = t->weak_begin[g]; e < t->weak_begin[g + 1]; e++) {
            const int64_t c = t->weak[e];
            fmk_fmm2d_m2l(p, center_of(t, c), scale_of(t, c), s->M + nc * c, center_of(t, g),
                          scale_of(t, g), s->L + nc * g);
        }
        if (g >= fl)
            for (int64_t e = t->p2l_begin[g - fl]; e < t->p2l_begin[g - fl + 1]; e++) {
                const int64_t c = t->p2l[e], a = t->src_start[c];
                fmk_fmm2d_p2l(is_log, p, center_of(t, g), scale_of(t, g), t->src_start[c + 1] - a,
                              t->src_xy + 2 * a, s->q + a, s->L + nc * g);
            }
    }
    const double t4 = fmk_time_now();

    /* L2L from level 1 down */
    for (int l = 2; l <= L; l++) {
        const int64_t f = fmk_fmm2d_first(l), fp = fmk_fmm2d_first(l - 1);
#pragma omp parallel for schedule(dynamic, 16) num_threads(th)
        for (int64_t b = 0; b < ((int64_t)1 << (2 * l)); b++) {
            int64_t a, e;
            fmk_fmm2d_range(t->trg_start, L, l, b, &a, &e);
            if (e > a && !fmk_interrupt_team(plan))
                fmk_fmm2d_l2l(p, center_of(t, fp + b / 4), scale_of(t, fp + b / 4),
                              s->L + nc * (fp + b / 4), center_of(t, f + b), scale_of(t, f + b),
                              s->L + nc * (f + b));
        }
    }
    const double t5 = fmk_time_now();

    /* L2P and M2P at the finest level */
#pragma omp parallel for schedule(dynamic, 16) num_threads(th)
    for (int64_t b = 0; b < leaves; b++) {
        const int64_t g = fl + b;
        if (fmk_interrupt_team(plan))
            continue;
        for (int64_t i = t->trg_start[b]; i < t->trg_start[b + 1]; i++) {
            const fmk_cplx z = fmk_c(t->trg_xy[2 * i], t->trg_xy[2 * i + 1]);
            if (L >= 1)
                fmk_fmm2d_l2p(p, center_of(t, g), scale_of(t, g), s->L + nc * g, z, s->res + 2 * i);
            for (int64_t e = t->m2p_begin[b]; e < t->m2p_begin[b + 1]; e++) {
                const int64_t c = fl + t->m2p[e];
                fmk_fmm2d_m2p(p, center_of(t, c), scale_of(t, c), s->M + nc * c, z, s->res + 2 * i);
            }
        }
    }
    const double t6 = fmk_time_now();

    /* P2P */
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
    for (int64_t b = 0; b < leaves; b++) {
        if (fmk_interrupt_team(plan))
            continue;
        for (int64_t i = t->trg_start[b]; i < t->trg_start[b + 1]; i++) {
            const fmk_cplx z = fmk_c(t->trg_xy[2 * i], t->trg_xy[2 * i + 1]);
            for (int64_t e = t->p2p_begin[b]; e < t->p2p_begin[b + 1]; e++) {
                const int64_t c = t->p2p[e], a = t->src_start[c];
                fmk_fmm2d_p2p(is_log, t->src_start[c + 1] - a, t->src_xy + 2 * a, s->q + a, z,
                              s->res + 2 * i, s->q_zero + i);
            }
        }
    }
    const double t7 = fmk_time_now();
    if (fmk_interrupt_stopped(plan)) /* each pass skips its remaining work once asked to stop */
        return fmk_interrupt_status(plan);

    /* results to the caller's order and units (fmm2d.h: F for log2d, f for cauchy2d); with
     * coincident targets (trg_at), k runs over the caller's targets, else over box positions */
    const double ps = plan->frame.pot_scale, lw = plan->frame.log_width;
    const int64_t n_out = plan->n_targets;
#pragma omp parallel for schedule(static) num_threads(th) if (n_out > 4096)
    for (int64_t k = 0; k < n_out; k++) {
        const int64_t c = s->trg_at ? k : t->trg_order[k], i = s->trg_at ? s->trg_at[k] : k;
        const fmk_cplx V = s->res[2 * i], D = s->res[2 * i + 1];
        if (is_log) {
            if (pot)
                pot[c] = V.re + lw * (q_total - s->q_zero[i]);
            if (grad)
                grad[2 * c] = D.re * ps, grad[2 * c + 1] = -D.im * ps;
        } else {
            if (pot)
                pot[2 * c] = -V.re * ps, pot[2 * c + 1] = -V.im * ps;
            if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
                grad[2 * c] = -D.re * ps * ps, grad[2 * c + 1] = -D.im * ps * ps;
        }
    }
    const double stamps[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    fmk_info_fmm_phases(&plan->info, stamps, s->tree_time);
    return FMK_OK;
}

fmk_status fmk_fmm2d_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps, fmk_info *info)
{
    (void)dim, (void)info;
    const fmk_status taken = fmk_opts_only(o, "fmm", FMK_TAKES_ORDER | FMK_TAKES_LEAF);
    if (taken != FMK_OK)
        return taken;
    if (kernel != FMK_KERNEL_LOG2D && kernel != FMK_KERNEL_CAUCHY2D)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "the 2D FMM takes kernels log2d and cauchy2d, not %s",
                             fmk_kernel_name(kernel));
    if (o->precision != FMK_PRECISION_FP64)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "the 2D FMM works in fp64 only; use precision fp64");
    if (o->order >= 0 && o->order < 2)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "opts.order = %d; the 2D FMM takes -1 (from eps) or 2..%d",
                             (int)o->order, FMK_FMM2D_MAX_ORDER);
    if (!(eps >= 1e-14 && eps <= 1e-2))
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "eps = %g; method fmm takes 1e-14 <= eps <= 1e-2 (use method direct "
                             "for tighter, tree for looser accuracy)",
                             eps);
    return FMK_OK;
}

const fmk_engine fmk_engine_fmm2d_cpu = {
    .name = "fmm2d/cpu",
    .setup = fmm2d_setup,
    .eval = fmm2d_eval,
    .memory = fmm2d_memory,
    .release = fmm2d_release,
    .check_opts = fmk_fmm2d_check_opts,
};
