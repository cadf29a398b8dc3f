/* fmm2d.c -- the CPU engine of the 2D adaptive FMM (method fmm, dim 2; kernels log2d and
 * cauchy2d, fp64), after Goude & Engblom. set_points builds the pyramid and the directed lists
 * once (fmm2d_tree.c; definitions in fmm2d.h) and allocates everything eval needs, so eval
 * cannot fail half way. eval runs the numerical passes with OpenMP: P2M at the finest level,
 * M2M upward, M2L (weak lists, all levels) and P2L (finest level), L2L downward, L2P and M2P at
 * the finest level, P2P, and writes the caller's arrays in the caller's order. */
#include <stdlib.h>
#include <string.h>

#include "fmm2d/fmm2d.h"
#include "fmm2d/fmm2d_ops.h"

typedef struct fmm2d_cpu {
    fmk_fmm2d_tree tree;
    int order;
    int64_t leaf_size;
    fmk_cplx *q;     /* n_sources charges in box order */
    fmk_cplx *M, *L; /* n_boxes * (order + 1) */
    fmk_cplx *res;   /* 2 * n_targets: V, D in box order */
    double *q_zero;  /* n_targets: charge at distance 0 (log2d) */
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
    free(s->q), free(s->M), free(s->L), free(s->res), free(s->q_zero);
    free(s);
    plan->state = NULL;
}

static fmk_status fmm2d_setup(fmk_plan *plan)
{
    const double t0 = fmk_time_now();
    const int p = order_of(plan);
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    fmm2d_cpu *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    s->order = p;
    s->leaf_size = leaf_size_of(plan);
    fmk_status st = fmk_fmm2d_tree_build(&s->tree, ns, plan->sources, plan->self, nt, plan->targets,
                                         s->leaf_size, plan->threads);
    const double t1 = fmk_time_now();
    if (st == FMK_OK) {
        const size_t nb = (size_t)s->tree.n_boxes * (size_t)(p + 1);
        s->q = malloc(sizeof(fmk_cplx) * (size_t)(ns > 0 ? ns : 1));
        s->M = malloc(sizeof(fmk_cplx) * nb);
        s->L = malloc(sizeof(fmk_cplx) * nb);
        s->res = malloc(sizeof(fmk_cplx) * 2 * (size_t)(nt > 0 ? nt : 1));
        s->q_zero = malloc(sizeof(double) * (size_t)(nt > 0 ? nt : 1));
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
        state_bytes(plan, ns, nt, plan->self, t->weak_begin[t->n_boxes],
                    t->p2p_begin[leaves] + t->m2p_begin[leaves] + t->p2l_begin[leaves]);
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

static fmk_status fmm2d_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                             int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    fmm2d_cpu *s = plan->state;
    const fmk_fmm2d_tree *t = &s->tree;
    const int p = s->order, L = t->levels, th = plan->threads;
    const int is_log = plan->kernel == FMK_KERNEL_LOG2D;
    const int64_t ns = plan->n_sources, nt = plan->n_targets, nc = p + 1;
    const int64_t leaves = (int64_t)1 << (2 * L), fl = fmk_fmm2d_first(L);
    (void)th;
    const double t0 = fmk_time_now();
    double q_total = 0;
    for (int64_t i = 0; i < ns; i++) {
        const int64_t c = t->src_order[i];
        s->q[i] = is_log ? fmk_c(charges[c], 0) : fmk_c(charges[2 * c], charges[2 * c + 1]);
        q_total += s->q[i].re;
    }
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

    /* results to the caller's order and units (fmm2d.h: F for log2d, f for cauchy2d) */
    const double ps = plan->frame.pot_scale, lw = plan->frame.log_width;
#pragma omp parallel for schedule(static) num_threads(th) if (nt > 4096)
    for (int64_t i = 0; i < nt; i++) {
        const int64_t c = t->trg_order[i];
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
