/* bh.c -- the CPU treecode engine (method tree): Barnes-Hut with the octree of tree3d.h, moments
 * to quadrupole order about the centre of |q|, Nakasato's opening radius (l/theta + s)^2, and
 * two walks (bh_walk.h): a group walk with vectorized interaction lists and a cell-to-group
 * step (the default) and the stackless per-target walk of Nakasato Fig. 6.
 *
 * set_points builds the geometry once: the source tree (points in Morton order), and for
 * separate targets a target tree of the same leaf size whose leaves are the walk's groups (for
 * targets = sources the source tree's leaves are). eval gathers the charges into key order,
 * sweeps the moments upward, walks, and writes the results back in the caller's order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tune.h"
#include "tree/resolution.h"
#include "tree/tree3d.h"
#include "treecode/treecode.h" /* internal.h: FMK_TARGET_CLONES for the walk's inner loops */

/* Default points per leaf (opts.leaf_size = 0), measured on uniform and Plummer sets of 1e5 to
 * 1e6 points with the group walk at theta = 0.6, order 2 (docs/tree.md). */
enum { FMK_BH_LEAF_SIZE = 32 };
/* Most targets in one group (the buffers of a walk are sized for it). */
#define FMK_BH_GROUP_MAX 256

/* The engine's tuning knobs (core/tune.h: "treecode.<field>", set per plan by fmk_plan_tune).
 *
 * The group walk's cell-to-group step (docs/tree.md), as the GPU's: an accepted node whose
 * centre is farther from the group box's centre c than a r_open + k R_g (R_g the box's half
 * diagonal, a = local_open, k = local_k 0.6 / theta, at least 1) is not evaluated at each
 * target (M2P) but translated once per group into a Taylor expansion of order `local` (2, 3 or
 * 4) about c (M2L, bh_local.h), which each target evaluates at the end (L2P). 0: off (every
 * accepted node by M2P).
 *
 * Targets per group (read by set_points): a group is a largest subtree of the target tree with
 * fewer than group_leaves times the leaf size points (at most FMK_BH_GROUP_MAX), so a leaf
 * shares its walk with small siblings; 0 is 4 with the cell-to-group step, whose expansion pays
 * more the more targets share it, and 2 without it (bench/RESULTS.md, CPU treecode). */
typedef struct fmk_treecode_cpu_tune {
    int local;         /* order of the cell-to-group expansion: 0 (off), 2, 3, 4 (default 4) */
    double local_k;    /* k at theta 0.6 (default 2) */
    double local_open; /* a (default 1) */
    int group_leaves;  /* leaves' worth of points per group; 0: automatic (default 0) */
} fmk_treecode_cpu_tune;

static const fmk_treecode_cpu_tune tune_defaults = {4, 2.0, 1.0, 0};
static const fmk_tune_knob tune_knobs[] = {
    FMK_KNOB(fmk_treecode_cpu_tune, local, FMK_TUNE_INT, 0, 4,
             "cell-to-group expansion order (0 off, 2, 3, 4)"),
    FMK_KNOB(fmk_treecode_cpu_tune, local_k, FMK_TUNE_DOUBLE, 0, 1e9,
             "cell-to-group distance: k R_g at theta 0.6"),
    FMK_KNOB(fmk_treecode_cpu_tune, local_open, FMK_TUNE_DOUBLE, 0, 1e9,
             "cell-to-group distance: a r_open"),
    FMK_KNOB(fmk_treecode_cpu_tune, group_leaves, FMK_TUNE_INT, 0, 1e6,
             "leaves' worth of points per group (0: 4 with the step, else 2)"),
};
static const fmk_tune_table tune_table = {"treecode", sizeof(fmk_treecode_cpu_tune), &tune_defaults,
                                          FMK_TUNE_COUNT(tune_knobs), tune_knobs};

static const fmk_treecode_cpu_tune *tune_of(const fmk_plan *plan)
{
    return (const fmk_treecode_cpu_tune *)plan->tune;
}

/* The step's parameters for one walk: order 0 (off), 2, 3 or 4; k; a^2. */
typedef struct fmk_bh_local_step {
    int order;
    double k, a2;
} fmk_bh_local_step;

static fmk_bh_local_step fmk_bh_local_step_of(const fmk_plan *plan)
{
    const fmk_treecode_cpu_tune *tune = tune_of(plan);
    fmk_bh_local_step st = {0, 1, 0};
    st.order = tune->local >= 2 && tune->local <= 4 ? tune->local : 0;
    /* the group's radius scaled like a node's size in r_open (l / theta): k at theta 0.6, so
     * that the expansion's truncation falls with theta as the M2P's does; at least 1 (every
     * target of the group then outside the node's opening sphere) */
    const double th = plan->opts.theta < FMK_TREE_THETA_CAP ? plan->opts.theta : FMK_TREE_THETA_CAP;
    const double k = tune->local_k * 0.6 / th;
    st.k = k > 1 ? k : 1;
    const double a = tune->local_open > 0 ? tune->local_open : 0;
    st.a2 = a * a;
    return st;
}

typedef struct tree_cpu {
    fmk_tree3d src; /* source tree: Morton order, nodes, next/more */
    fmk_tree3d trg; /* target tree (separate targets only) */
    int64_t n_groups;
    int64_t *group_begin;   /* n_groups + 1: groups are consecutive sorted targets */
    double *group_box;      /* n_groups * 6: lo[3], hi[3] of the group's targets */
    fmk_tree3d_moments mom; /* per eval */
    double *abs_charge;     /* n_nodes: scratch of the upward pass */
    int8_t *coincident;     /* n_nodes: 1 for a leaf of two or more identical points */
    double *q_sorted;       /* n_sources charges in key order (double, for the moments) */
    void *src_soa;          /* 4 * n_sources REAL: x | y | z | q in key order */
    void *trg_soa;          /* 3 * n_targets REAL (separate targets only) */
    void *node_pack;        /* n_nodes * (3 + FMK_BH_MOMENTS) REAL */
    double *result;         /* 4 * n_targets: the group walk's results in key order, copied
                                 * to the caller only once every group has succeeded */
    size_t real;            /* sizeof REAL */
    fmk_walk walk;
    double tree_time; /* seconds of the last build, reported with every eval */
} tree_cpu;

#define REAL double
#define RSQRT(x) (1.0 / sqrt(x))
#define BH(name) bh64_##name
#include "treecode/bh_walk.h"
#undef REAL
#undef RSQRT
#undef BH

#define REAL float
#define RSQRT(x) (1.0f / sqrtf(x))
#define BH(name) bh32_##name
#include "treecode/bh_walk.h"
#undef REAL
#undef RSQRT
#undef BH

static int32_t leaf_size_of(const fmk_plan *plan)
{
    int64_t ls = plan->opts.leaf_size > 0 ? plan->opts.leaf_size : FMK_BH_LEAF_SIZE;
    return ls > INT32_MAX ? INT32_MAX : (int32_t)ls;
}

static fmk_walk walk_of(const fmk_plan *plan)
{
    return plan->opts.walk == FMK_WALK_STACKLESS ? FMK_WALK_STACKLESS : FMK_WALK_GROUP;
}

static size_t real_size(const fmk_plan *plan)
{
    return plan->opts.precision == FMK_PRECISION_FP32 ? sizeof(float) : sizeof(double);
}

/* Targets per group (tuning knob group_leaves); leaf size 1 gives one target per group (the
 * group walk then opens exactly the nodes the stackless walk opens). */
static int64_t group_size_of(const fmk_plan *plan, int32_t leaf_size)
{
    const fmk_treecode_cpu_tune *tune = tune_of(plan);
    if (leaf_size <= 1)
        return 1;
    int64_t f = tune->group_leaves > 0 ? tune->group_leaves : tune->local ? 4 : 2;
    int64_t g = f * (int64_t)leaf_size - 1;
    return g < FMK_BH_GROUP_MAX ? g : FMK_BH_GROUP_MAX;
}

/* Visits the groups of tree t for group size gs, in key order, with the next/more pointers;
 * begin (NULL: only count) gets the first sorted target of each. Returns the count. */
static int64_t list_groups(const fmk_tree3d *t, int64_t gs, int64_t *begin)
{
    int64_t g = 0;
    for (int32_t i = 0; i >= 0;) {
        const int64_t b = t->begin[i], e = t->end[i];
        if (e - b > gs && t->more[i] >= 0) {
            i = t->more[i];
            continue;
        }
        for (int64_t p = b; p < e; p += gs) /* a leaf over gs (the depth cap) is cut */
            if (begin)
                begin[g++] = p;
            else
                g++;
        i = t->next[i];
    }
    return g;
}

/* Bytes of the state for given tree sizes (nodes and groups counted or estimated). */
static int64_t state_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int self,
                           int64_t src_nodes, int64_t trg_nodes, int64_t groups)
{
    const int64_t r = (int64_t)real_size(plan);
    int64_t b = (int64_t)sizeof(tree_cpu) + 8; /* saturating: sizes no machine holds */
    b = fmk_bytes_add(b, fmk_tree3d_bytes_for(ns, src_nodes));
    b = fmk_bytes_add(b, fmk_tree3d_moments_bytes(src_nodes));
    b = fmk_bytes_plus(b, 9 + (3 + FMK_BH_MOMENTS) * r, src_nodes);
    b = fmk_bytes_plus(b, 8 + 4 * r, ns);
    if (!self) {
        b = fmk_bytes_add(b, fmk_tree3d_bytes_for(nt, trg_nodes));
        b = fmk_bytes_plus(b, 3 * r, nt);
    }
    b = fmk_bytes_plus(b, 8 + 48, groups);
    b = fmk_bytes_plus(b, 32, nt); /* result */
    return b;
}

static void tree_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int self = nt < 0;
    const int32_t ls = leaf_size_of(plan);
    if (self)
        nt = ns;
    int64_t ks = fmk_tree3d_estimate_nodes(ns, ls);
    int64_t kt = self ? 0 : fmk_tree3d_estimate_nodes(nt, ls);
    *h = state_bytes(plan, ns, nt, self, ks, kt, self ? ks : kt);
    *d = 0;
}

static void tree_release(fmk_plan *plan)
{
    tree_cpu *s = plan->state;
    if (!s)
        return;
    fmk_tree3d_free(&s->src);
    fmk_tree3d_free(&s->trg);
    fmk_tree3d_moments_free(&s->mom);
    free(s->group_begin), free(s->group_box), free(s->abs_charge), free(s->q_sorted);
    free(s->coincident);
    free(s->src_soa), free(s->trg_soa), free(s->node_pack), free(s->result);
    free(s);
    plan->state = NULL;
}

/* Coordinates of a tree's sorted points into a REAL structure of arrays x | y | z. */
static void store_soa(const fmk_tree3d *t, size_t real, void *soa, int threads)
{
    const int64_t n = t->n_points;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 4096)
    for (int64_t s = 0; s < n; s++)
        for (int k = 0; k < 3; k++) {
            double v = t->points[3 * s + k];
            if (real == sizeof(float))
                ((float *)soa)[k * n + s] = (float)v;
            else
                ((double *)soa)[k * n + s] = v;
        }
}

/* Leaves whose points are all identical (only at the depth cap can a leaf hold more than
 * leaf_size points, and identical points always end there): the walks treat each as one source,
 * which keeps 1e5 coincident points from costing 1e10 pair terms. */
static void mark_coincident(const fmk_tree3d *t, int8_t *flag, int threads)
{
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads) if (t->n_nodes > 4096)
    for (int64_t i = 0; i < t->n_nodes; i++) {
        int same = t->more[i] < 0 && t->end[i] - t->begin[i] >= 2;
        const double *x0 = t->points + 3 * t->begin[i];
        for (int64_t p = t->begin[i] + 1; same && p < t->end[i]; p++) {
            const double *x = t->points + 3 * p;
            same = x[0] == x0[0] && x[1] == x0[1] && x[2] == x0[2];
        }
        flag[i] = (int8_t)same;
    }
}

/* The walk's groups (group_size_of), each with the bounding box of its targets. */
static int make_groups(const fmk_plan *plan, tree_cpu *s, const fmk_tree3d *t)
{
    const int64_t gs = group_size_of(plan, t->leaf_size);
    s->n_groups = t->n_points > 0 ? list_groups(t, gs, NULL) : 0;
    s->group_begin = malloc(sizeof(int64_t) * (size_t)(s->n_groups + 1));
    s->group_box = malloc(sizeof(double) * 6 * (size_t)(s->n_groups > 0 ? s->n_groups : 1));
    if (!s->group_begin || !s->group_box)
        return -1;
    if (s->n_groups > 0)
        list_groups(t, gs, s->group_begin);
    s->group_begin[s->n_groups] = t->n_points;
    for (int64_t k = 0; k < s->n_groups; k++) {
        double *box = s->group_box + 6 * k;
        for (int c = 0; c < 3; c++)
            box[c] = INFINITY, box[3 + c] = -INFINITY;
        for (int64_t p = s->group_begin[k]; p < s->group_begin[k + 1]; p++)
            for (int c = 0; c < 3; c++) {
                double v = t->points[3 * p + c];
                box[c] = v < box[c] ? v : box[c];
                box[3 + c] = v > box[3 + c] ? v : box[3 + c];
            }
    }
    return 0;
}

/* The resolution guard (tree/resolution.h): coordinates are the frame's in fp64; in fp32 the
 * group walk also rounds positions relative to the centre of the target group's box (the
 * stackless walk: relative to the target, which costs nothing at close range). */
static fmk_status check_resolution(fmk_plan *plan, int32_t leaf_size, const fmk_tree3d *all)
{
    fmk_resolution_opts o = {fmk_treecode_accuracy(plan), FMK_RESOLUTION_FP64, 0, 0, 0};
    if (plan->opts.precision == FMK_PRECISION_FP32 && walk_of(plan) == FMK_WALK_GROUP)
        o.local_unit = FMK_RESOLUTION_FP32_LOCAL, o.local_points = group_size_of(plan, leaf_size);
    return all ? fmk_resolution_check_tree(plan, "tree", &o, all)
               : fmk_resolution_check(plan, "tree", &o);
}

static fmk_status tree_setup(fmk_plan *plan)
{
    const double t0 = fmk_time_now();
    const int32_t ls = leaf_size_of(plan);
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    /* separate targets: the guard sorts sources and targets together, before the trees */
    fmk_status st = plan->self ? FMK_OK : check_resolution(plan, ls, NULL);
    if (st != FMK_OK)
        return st;
    tree_cpu *s = calloc(1, sizeof *s);
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory");
    plan->state = s;
    s->real = real_size(plan);
    s->walk = walk_of(plan);
    st = fmk_tree3d_build(plan, &s->src, ns, plan->sources, ls, plan->threads);
    if (st == FMK_OK && plan->self) /* targets = sources: the guard reads the source tree */
        st = check_resolution(plan, ls, &s->src);
    if (st == FMK_OK && !plan->self)
        st = fmk_interrupt_poll(plan)
                 ? fmk_interrupt_status(plan)
                 : fmk_tree3d_build(plan, &s->trg, nt, plan->targets, ls, plan->threads);
    if (st != FMK_OK) {
        tree_release(plan);
        return st;
    }
    const fmk_tree3d *trg = plan->self ? &s->src : &s->trg;
    const int64_t k = s->src.n_nodes;
    s->abs_charge = malloc(sizeof(double) * (size_t)k);
    s->coincident = malloc((size_t)k);
    s->q_sorted = malloc(sizeof(double) * (size_t)(ns > 0 ? ns : 1));
    s->src_soa = malloc(s->real * 4 * (size_t)(ns > 0 ? ns : 1));
    s->trg_soa = plan->self ? NULL : malloc(s->real * 3 * (size_t)(nt > 0 ? nt : 1));
    s->node_pack = malloc(s->real * (3 + FMK_BH_MOMENTS) * (size_t)k);
    s->result = malloc(sizeof(double) * 4 * (size_t)(nt > 0 ? nt : 1));
    if (!s->abs_charge || !s->coincident || !s->q_sorted || !s->src_soa ||
        (!plan->self && !s->trg_soa) || !s->node_pack || !s->result ||
        fmk_tree3d_moments_alloc(&s->mom, k) || make_groups(plan, s, trg)) {
        int64_t h, d;
        tree_memory(plan, ns, plan->self ? -1 : nt, &h, &d);
        tree_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM,
                             "out of host memory for the treecode (about %lld bytes)",
                             (long long)h);
    }
    store_soa(&s->src, s->real, s->src_soa, plan->threads);
    mark_coincident(&s->src, s->coincident, plan->threads);
    if (!plan->self)
        store_soa(&s->trg, s->real, s->trg_soa, plan->threads);
    plan->state_bytes_host = state_bytes(plan, ns, nt, plan->self, k, s->trg.n_nodes, s->n_groups);
    plan->info.levels = s->src.levels;
    plan->info.leaf_size = ls;
    plan->info.walk = s->walk;
    s->tree_time = fmk_time_now() - t0;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

static fmk_status tree_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                            int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    tree_cpu *s = plan->state;
    const int64_t ns = plan->n_sources;
    const int fp32 = s->real == sizeof(float);
    const double t0 = fmk_time_now();
    /* charges into key order: double for the moments, REAL for the P2P lists */
    double *qd = s->q_sorted;
    void *qr = (char *)s->src_soa + s->real * 3 * (size_t)ns;
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (ns > 4096)
    for (int64_t i = 0; i < ns; i++) {
        double q = charges[s->src.order[i]];
        qd[i] = q;
        if (fp32)
            ((float *)qr)[i] = (float)q;
        else
            ((double *)qr)[i] = q;
    }
    const double t1 = fmk_time_now();
    fmk_tree3d_moments_compute(&s->src, qd, plan->opts.order, plan->opts.theta, s->abs_charge,
                               &s->mom, plan->threads);
    if (fp32)
        bh32_pack(&s->mom, s->src.n_nodes, s->node_pack, plan->threads);
    else
        bh64_pack(&s->mom, s->src.n_nodes, s->node_pack, plan->threads);
    if (fmk_interrupt_poll(plan))
        return fmk_interrupt_status(plan);
    const double t2 = fmk_time_now();
    int bad = 0;
    int64_t count[2] = {0, 0}; /* the walk's interactions (fmk_info) */
    if (s->walk == FMK_WALK_STACKLESS) {
        if (fp32)
            bh32_walk_stackless(plan, s, pot, grad, count);
        else
            bh64_walk_stackless(plan, s, pot, grad, count);
    } else {
        bad = fp32 ? bh32_walk_group(plan, s, count) : bh64_walk_group(plan, s, count);
    }
    if (bad)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the interaction lists");
    if (fmk_interrupt_stopped(plan)) /* groups were skipped */
        return fmk_interrupt_status(plan);
    if (s->walk != FMK_WALK_STACKLESS) { /* every group succeeded: now write the caller's arrays */
        const fmk_tree3d *trg = plan->self ? &s->src : &s->trg;
        const double ps = plan->frame.pot_scale;
        const int64_t nt = trg->n_points;
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (nt > 4096)
        for (int64_t t = 0; t < nt; t++) {
            const double *o = s->result + 4 * t;
            const int64_t c = trg->order[t];
            if (pot)
                pot[c] = o[0] * ps;
            if (grad) /* scaled twice by 1/width: 1/width^2 may overflow */
                for (int k = 0; k < 3; k++)
                    grad[3 * c + k] = o[1 + k] * ps * ps;
        }
    }
    fmk_info *in = &plan->info;
    in->interactions_p2p = count[0];
    in->interactions_far = count[1];
    in->phase_time[FMK_PHASE_UPLOAD] = t1 - t0;
    in->phase_time[FMK_PHASE_MOMENTS] = t2 - t1;
    in->phase_time[FMK_PHASE_WALK] = fmk_time_now() - t2;
    in->phase_time[FMK_PHASE_TREE] = s->tree_time; /* set_points' build, kept with each eval */
    return FMK_OK;
}

const fmk_engine fmk_engine_tree_cpu = {
    .name = "tree/cpu",
    .setup = tree_setup,
    .eval = tree_eval,
    .memory = tree_memory,
    .release = tree_release,
    .check_opts = fmk_treecode_check_opts,
    .tune = &tune_table,
};
