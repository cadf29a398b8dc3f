/* fmm3d_cpu.c -- the CPU engine of the adaptive 3D FMM for the Laplace kernel (method fmm), fp64.
 *
 * set_points builds everything geometric once: one octree over sources and targets together
 * (fmm3d.h says why one tree), the U, V, W, X lists (lists_cpu.c), the sources and targets in
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

#include "core/tune.h"
#include "fmm3d/fmm3d_cpu.h"
#include "tree/resolution.h"

static int order_of(const fmk_plan *plan)
{
    return plan->opts.order >= 0 ? plan->opts.order : fmk_fmm3d_order_from_eps(plan->eps);
}

/* The vectors a plan's buffers hold at first: opts.n_vectors, at most FMM_NV_MAX. */
static int vectors_of(const fmk_plan *plan)
{
    const int nv = plan->opts.n_vectors;
    return nv < 1 ? 1 : nv > FMM_NV_MAX ? FMM_NV_MAX : nv;
}

/* The leaf size: for nv vectors an expansion's work is nv times one's, a P2P pair's about
 * 1 + 0.3 (nv - 1) times (its 1/r is shared), which the cost model sees as a pair time of
 * t_pair (1 + 0.3 (nv - 1)) / nv. */
static int32_t leaf_size_of(const fmk_plan *plan, int order)
{
    const int nv = vectors_of(plan);
    const double t_pair = fmk_fmm3d_cpu_pair_time(plan) * (1 + 0.3 * (nv - 1)) / nv;
    int64_t ls =
        plan->opts.leaf_size > 0 ? plan->opts.leaf_size : fmk_fmm3d_leaf_size_model(order, t_pair);
    return ls > INT32_MAX ? INT32_MAX : (int32_t)ls;
}
static int64_t rot_doubles(int p)
{
    int64_t r = 2 * (int64_t)(p + 1);
    for (int n = 0; n <= p; n++)
        r += 4 * (int64_t)(n + 1) * (n + 1);
    return r;
}

/* Doubles of one thread's work array for nv vectors. */
static int64_t work_stride(const fmk_fmm3d_ops_ctx *ops, int nv)
{
    const int64_t a = fmk_fmm3d_work_size(ops), b = fmk_fmm3d_points_work_size(ops, nv);
    return a > b ? a : b;
}

/* nu: unique sources (coincident_cpu.c), ns when none coincide. */
static int64_t state_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t nu, int self,
                           int64_t nodes, int64_t n_dirs)
{
    const int p = order_of(plan);
    const int64_t np = self ? ns : ns + nt;
    const int64_t stride = (int64_t)(p + 1) * (p + 2);
    /* sizes of the order and the threads alone are small; what grows with the points and the
     * nodes saturates (fmk_bytes_plus) */
    int64_t b = (int64_t)sizeof(fmk_fmm3d_cpu);
    b += 8 * rot_doubles(p) * (n_dirs + 16);                    /* polar angles, M2M, L2L */
    b += 8 * 2 * (int64_t)(p + 1) * FMK_FMM3D_NDIR;             /* phases */
    b += 8 * 24 * (int64_t)(p + 1) * (p + 2) * (2 * p + 3) / 6; /* zmat */
    b += 8 * (int64_t)plan->threads * fmk_fmm3d_cpu_m2l_buf_size(p);
    b += 8 * (int64_t)plan->threads * (8 * stride + 64 * (p + 3)); /* work, generous */
    const fmk_fmm3d_ops_ctx order_only = {.order = p};
    b += 8 * (int64_t)plan->threads * fmk_fmm3d_points_work_size(&order_only, vectors_of(plan));
    b += 32 * (int64_t)plan->threads * leaf_size_of(plan, p); /* mutual P2P's scratch, about */
    b = fmk_bytes_add(b, fmk_tree3d_bytes_for(np, nodes));
    b = fmk_bytes_add(b, fmk_fmm3d_lists_bytes_for(nodes));
    const int nv = vectors_of(plan);
    b = fmk_bytes_plus(b, 32 + 16 * stride * nv, nodes);      /* counts, begins, M, L */
    b = fmk_bytes_plus(b, 4 * 8, ns);                         /* order, xyz */
    b = fmk_bytes_plus(b, 4 * 8 + (nv > 1 ? 8 * nv : 0), nu); /* soa, vectors' charges */
    b = fmk_bytes_plus(b, 32 * (nv - 1), nt);                 /* the vectors' results */
    if (nu < ns)                                              /* slots; self: the targets' xyz */
        b = fmk_bytes_plus(b, self ? 8 * 4 : 8, ns);
    b = fmk_bytes_plus(b, (self ? 0 : 8 * 4) + 32, nt); /* orders, xyz; result */
    b = fmk_bytes_plus(b, 12 * 189, nodes);             /* v_perm, v_target */
    b = fmk_bytes_plus(b, 17 + 4 * 64, nodes);          /* direct W and X flags and lists */
    b = fmk_bytes_plus(b, 8 * 14, nodes);               /* U pairs (mutual P2P) */
    if (plan->opts.precision == FMK_PRECISION_FP32)
        b = fmk_bytes_plus(b, 4 * 4, nu); /* src32 */
    return b;
}

static void fmm_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int p = order_of(plan);
    const int64_t nodes = fmk_tree3d_estimate_nodes(self ? ns : ns + nt, leaf_size_of(plan, p));
    /* the polar angles of 316 directions; sources that do not coincide */
    *h = state_bytes(plan, ns, nt, ns, self, nodes, 61);
    *d = 0;
}

static void fmm_release(fmk_plan *plan)
{
    fmk_fmm3d_cpu *s = plan->state;
    if (!s)
        return;
    fmk_tree3d_free(&s->tree);
    fmk_fmm3d_lists_free(&s->lists);
    fmk_fmm3d_ops_destroy(&s->ops);
    if (s->trg_order != s->src_order)
        free(s->trg_order);
    if (s->trg_xyz != s->src_xyz)
        free(s->trg_xyz);
    free(s->src_order), free(s->src_xyz), free(s->src_soa), free(s->src_slot);
    free(s->n_src), free(s->n_trg), free(s->src_begin), free(s->trg_begin);
    if (s->qv != s->q)
        free(s->qv);
    free(s->M), free(s->L), free(s->rot_v), free(s->rot_updown), free(s->work), free(s->result);
    free(s->phase_v);
    free(s->v_perm), free(s->v_target), free(s->zmat), free(s->m2l_buf);
    free(s->src32);
    free(s->w_direct), free(s->x_direct), free(s->d_begin), free(s->d_leaf);
    fmk_fmm3d_cpu_mutual_free(s);
    free(s);
    plan->state = NULL;
}

/* Splits the tree's sorted points into sources and targets (stable, so each node's sources
 * and targets stay contiguous in key order) and counts them per node. */
static void split_points(const fmk_plan *plan, fmk_fmm3d_cpu *s, int64_t *sources_before)
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

/* The polar angles of the V directions in use (their count in *n_dirs, a direction of each in
 * rot_first) and each direction's slot, and the rotations' storage; returns 0 or -1 (memory). */
static int rotation_slots(fmk_fmm3d_cpu *s, int p, int *n_dirs, int *rot_first)
{
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        s->rot_slot[d] = -1;
    int32_t angle_slot[19 * 7]; /* (ox^2 + oy^2) * 7 + oz + 3 -> slot */
    for (int a = 0; a < 19 * 7; a++)
        angle_slot[a] = -1;
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        if (s->lists.dir_used[d]) {
            const int ox = d / 49 - 3, oy = (d / 7) % 7 - 3, oz = d % 7 - 3;
            const int a = (ox * ox + oy * oy) * 7 + oz + 3;
            if (angle_slot[a] < 0) {
                angle_slot[a] = (*n_dirs)++;
                rot_first[angle_slot[a]] = d;
            }
            s->rot_slot[d] = angle_slot[a];
        }
    s->rot_v = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&s->ops) * (size_t)(*n_dirs + 1));
    s->phase_v = malloc(sizeof(double) * 2 * (size_t)(p + 1) * FMK_FMM3D_NDIR);
    return !s->rot_v || !s->phase_v ? -1 : 0;
}

/* The rotations: one direction of each polar angle of the V directions in use (the phases of
 * every direction separately), and the child <-> parent directions. */
static void init_rotations(const fmk_plan *plan, fmk_fmm3d_cpu *s, int n_dirs, const int *rot_first)
{
    const int p = s->order;
    const int64_t rs = fmk_fmm3d_rot_size(&s->ops);
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        if (s->rot_slot[d] >= 0) {
            const double dir[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
            fmk_fmm3d_rot_phase(&s->ops, dir, s->phase_v + 2 * (p + 1) * d);
        }
#pragma omp parallel for schedule(dynamic, 1) num_threads(plan->threads)
    for (int i = 0; i < n_dirs + 16; i++) {
        double *work = fmk_fmm3d_cpu_work(s);
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
    fmk_fmm3d_cpu *s = calloc(1, sizeof *s);
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
    if (st == FMK_OK) {
        /* the resolution guard (tree/resolution.h), on the tree of all points: the frame's
         * fp64 coordinates; in fp32, P2P also rounds positions relative to the source leaf's
         * centre */
        fmk_resolution_opts guard = {plan->eps, FMK_RESOLUTION_FP64, 0, 0, 0};
        if (plan->opts.precision == FMK_PRECISION_FP32)
            guard.local_unit = FMK_RESOLUTION_FP32_LOCAL, guard.local_points = ls;
        st = fmk_resolution_check_tree(plan, "fmm", &guard, &s->tree);
    }
    if (st != FMK_OK) {
        fmm_release(plan);
        return st;
    }
    /* plummer and regularized: no box narrower than d_min (fmm3d.h, fmk_fmm3d_max_level) */
    fmk_tree3d_truncate(&s->tree,
                        fmk_fmm3d_max_level(plan->kernel, plan->frame.softening, plan->eps));
    if (fmk_fmm3d_cpu_group_runs(plan, &s->tree) != 0) { /* coincident sources side by side */
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's points");
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
    s->trg_order = plan->self ? s->src_order : malloc(sizeof(int64_t) * nt1);
    s->trg_xyz = plan->self ? s->src_xyz : malloc(sizeof(double) * 3 * nt1);
    const int nv = vectors_of(plan);
    s->nv = 1, s->nv_cap = nv;
    s->M = malloc(sizeof(double) * (size_t)s->stride * nk * (size_t)nv);
    s->L = malloc(sizeof(double) * (size_t)s->stride * nk * (size_t)nv);
    s->result = malloc(sizeof(double) * 4 * nt1 * (size_t)nv);
    s->work_stride = work_stride(&s->ops, nv);
    s->work = malloc(sizeof(double) * (size_t)s->work_stride * (size_t)plan->threads);
    s->rot_updown = malloc(sizeof(double) * (size_t)fmk_fmm3d_rot_size(&s->ops) * 16);
    int bad = !s->n_src || !s->n_trg || !s->src_begin || !s->trg_begin || !s->src_order ||
              !s->src_xyz || !s->trg_order || !s->trg_xyz || !s->M || !s->L || !s->result ||
              !s->work || !s->rot_updown;
    if (!bad) {
        int64_t *before = malloc(sizeof(int64_t) * (size_t)(np + 1));
        bad = !before;
        if (before)
            split_points(plan, s, before);
        free(before);
    }
    if (!bad) /* a run of coincident sources becomes one unique source */
        bad = fmk_fmm3d_cpu_unique_sources(plan, s) != 0;
    const int64_t nu = s->n_unique;
    const size_t nu1 = (size_t)(nu > 0 ? nu : 1);
    if (!bad) {
        s->src_soa = malloc(sizeof(double) * 4 * nu1);
        bad = !s->src_soa;
    }
    if (!bad) {
        bad = fmk_fmm3d_lists_build(&s->tree, s->n_src, s->n_trg, &s->lists, plan->threads) != 0;
    }
    if (!bad)
        bad =
            fmk_fmm3d_cpu_direct_lists(s, p, fmk_fmm3d_cpu_pair_time(plan),
                                       ((const fmk_fmm3d_cpu_tune *)plan->tune)->direct_near) != 0;
    int n_dirs = 0, rot_first[FMK_FMM3D_NDIR]; /* polar angles in use; a direction of each */
    if (!bad)
        bad = rotation_slots(s, p, &n_dirs, rot_first) != 0;
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
        s->m2l_buf =
            malloc(sizeof(double) * (size_t)fmk_fmm3d_cpu_m2l_buf_size(p) * (size_t)plan->threads);
        bad = !s->v_perm || !s->v_target || !s->zmat || !s->m2l_buf;
    }
    const int fp32 = plan->opts.precision == FMK_PRECISION_FP32;
    if (!bad && fp32) {
        s->src32 = malloc(sizeof(float) * 4 * nu1);
        bad = !s->src32;
    }
    if (bad) {
        int64_t h, d;
        fmm_memory(plan, ns, plan->self ? -1 : nt, &h, &d);
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM,
                             "out of host memory for the FMM (about %lld bytes)", (long long)h);
    }
    /* the unique sources' coordinates as structures of arrays for P2P */
    for (int64_t i = 0; i < nu; i++)
        for (int c = 0; c < 3; c++)
            s->src_soa[c * nu + i] = s->src_xyz[3 * i + c];
    s->q = s->src_soa + 3 * nu;
    if (nv == 1)
        s->qv = s->q;
    else if (!(s->qv = malloc(sizeof(double) * nu1 * (size_t)nv))) {
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's charges");
    }
    if (fp32) /* relative to the leaf's centre: fp32 then rounds to 2^-24 of a leaf, not of the
               * frame, which keeps close pairs accurate */
        for (int64_t b = 0; b < k; b++) {
            int64_t j0, nj;
            fmk_fmm3d_cpu_src_range(s, b, &j0, &nj);
            if (s->tree.more[b] < 0)
                for (int64_t i = j0; i < j0 + nj; i++)
                    for (int c = 0; c < 3; c++)
                        s->src32[c * nu + i] =
                            (float)(s->src_xyz[3 * i + c] - s->lists.center[3 * b + c]);
        }
    init_rotations(plan, s, n_dirs, rot_first);
    s->m2l_nodes = ((const fmk_fmm3d_cpu_tune *)plan->tune)->m2l_nodes;
    if (s->m2l_nodes < 8)
        s->m2l_nodes = p >= 20 ? 64 : 32;
    fmk_fmm3d_cpu_m2l_schedule(s, plan->threads);
    plan->state_bytes_host = state_bytes(plan, ns, nt, nu, plan->self, k, n_dirs);
    s->p2p_avx512 = fmk_fmm3d_cpu_p2p_avx512(plan);
    const fmk_fmm3d_cpu_tune *knobs = plan->tune;
    if (s->p2p_avx512 && knobs->newton > 0)
        s->p2p_avx512 = knobs->newton;
    s->p2p_targets = knobs->p2p_targets >= 4 ? 4 : 1;
    if (knobs->mutual && fmk_fmm3d_cpu_mutual_pairs(plan, s) != 0) {
        fmm_release(plan);
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the FMM's leaf pairs");
    }
    fmk_fmm3d_cpu_interactions(s, plan->self, nt, &plan->interactions_p2p, &plan->interactions_far);
    plan->info.order = p;
    plan->info.levels = s->tree.levels;
    plan->info.leaf_size = ls;
    s->tree_time = t_tree - t0;
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    return FMK_OK;
}

/* Room for nv vectors (at most FMM_NV_MAX) in the expansions, charges, results and work
 * arrays: grown when the plan holds fewer. Returns FMK_OK or FMK_ERR_NOMEM (the state is then
 * as it was, for as many vectors as before). */
static fmk_status vectors_room(fmk_plan *plan, fmk_fmm3d_cpu *s, int nv)
{
    if (nv <= s->nv_cap)
        return FMK_OK;
    const size_t nk = (size_t)(s->tree.n_nodes > 0 ? s->tree.n_nodes : 1);
    const size_t nt1 = (size_t)(plan->n_targets > 0 ? plan->n_targets : 1);
    const size_t nu1 = (size_t)(s->n_unique > 0 ? s->n_unique : 1);
    const int64_t ws = work_stride(&s->ops, nv);
    const size_t sizes[5] = {(size_t)s->stride * nk * (size_t)nv,
                             (size_t)s->stride * nk * (size_t)nv, 4 * nt1 * (size_t)nv,
                             nu1 * (size_t)nv, (size_t)ws * (size_t)plan->threads};
    double *got[5];
    int bad = 0;
    for (int i = 0; i < 5; i++)
        bad |= !(got[i] = malloc(sizeof(double) * sizes[i]));
    if (bad) {
        for (int i = 0; i < 5; i++)
            free(got[i]);
        return fmk_error_set(
            plan, FMK_ERR_NOMEM,
            "out of host memory for the FMM's expansions of %d charge vectors "
            "(%zu bytes): evaluate fewer vectors per call",
            nv, sizeof(double) * (sizes[0] + sizes[1] + sizes[2] + sizes[3] + sizes[4]));
    }
    const int64_t before =
        (int64_t)(sizeof(double) *
                  ((size_t)s->stride * nk * 2 * (size_t)s->nv_cap + 4 * nt1 * (size_t)s->nv_cap +
                   (s->nv_cap > 1 ? nu1 * (size_t)s->nv_cap : 0) +
                   (size_t)s->work_stride * (size_t)plan->threads));
    free(s->M), free(s->L), free(s->result), free(s->work);
    if (s->qv != s->q)
        free(s->qv);
    s->M = got[0], s->L = got[1], s->result = got[2], s->qv = got[3], s->work = got[4];
    s->nv_cap = nv, s->work_stride = ws;
    int64_t after = 0;
    for (int i = 0; i < 5; i++)
        after += (int64_t)(sizeof(double) * sizes[i]);
    plan->state_bytes_host += after - before;
    plan->info.bytes_host += after - before;
    return FMK_OK;
}

/* The charges of s->nv vectors (n_sources apart) into key order, a run of coincident sources
 * summed into its unique source in caller order; expansions and results zeroed. */
static void gather_charges(const fmk_plan *plan, fmk_fmm3d_cpu *s, const double *charges)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets, k = s->tree.n_nodes, st = s->stride;
    const int64_t nu = s->n_unique;
    for (int v = 0; v < s->nv; v++) {
        double *q = s->qv + v * nu;
        const double *c = charges + v * ns;
        if (s->src_slot) {
            memset(q, 0, sizeof(double) * (size_t)nu);
            for (int64_t i = 0; i < ns; i++)
                q[s->src_slot[i]] += c[s->src_order[i]];
        } else {
            for (int64_t i = 0; i < ns; i++)
                q[i] = c[s->src_order[i]];
        }
    }
    memset(s->M, 0, sizeof(double) * (size_t)(st * k * s->nv));
    memset(s->L, 0, sizeof(double) * (size_t)(st * k * s->nv));
    memset(s->result, 0, sizeof(double) * 4 * (size_t)(nt * s->nv));
}

/* The results of s->nv vectors (key order, working units) to the caller's order and units. */
static void write_results(const fmk_plan *plan, const fmk_fmm3d_cpu *s, double *pot, double *grad)
{
    const int64_t nt = plan->n_targets;
    const double ps = plan->frame.pot_scale;
    for (int v = 0; v < s->nv; v++) {
        const double *res_pot = s->result + 4 * nt * v, *res_grad = res_pot + nt;
        double *pv = pot ? pot + nt * v : NULL, *gv = grad ? grad + 3 * nt * v : NULL;
#pragma omp parallel for schedule(static) num_threads(plan->threads) if (nt > 4096)
        for (int64_t i = 0; i < nt; i++) {
            const int64_t c = s->trg_order[i];
            if (pv)
                pv[c] = res_pot[i] * ps;
            if (gv) /* scaled twice by 1/width: 1/width^2 may overflow */
                for (int d = 0; d < 3; d++)
                    gv[3 * c + d] = res_grad[3 * i + d] * ps * ps;
        }
    }
}

/* The passes of the FMM (exafmm-t's order), each in its file (fmm3d_cpu.h), for s->nv
 * vectors; their phase times added to *stamps' intervals. */
static void run_passes(fmk_plan *plan, fmk_fmm3d_cpu *s, const double *charges, double sum[7])
{
    const int64_t nu = s->n_unique;
    double t[8];
    t[0] = fmk_time_now();
    gather_charges(plan, s, charges);
    t[1] = fmk_time_now();
    fmk_fmm3d_cpu_p2m(plan, s);
    t[2] = fmk_time_now();
    fmk_fmm3d_cpu_m2m(plan, s);
    t[3] = fmk_time_now();
    fmk_fmm3d_cpu_m2l(plan, s);
    t[4] = fmk_time_now();
    fmk_fmm3d_cpu_l2l(plan, s);
    t[5] = fmk_time_now();
    fmk_fmm3d_cpu_l2p(plan, s);
    t[6] = fmk_time_now();
    if (s->src32) { /* fp32 P2P: one vector at a time, its charges beside the fp32 points */
        for (int v = 0; v < s->nv; v++) {
            for (int64_t i = 0; i < nu; i++)
                s->src32[3 * nu + i] = (float)s->qv[v * nu + i];
            fmk_fmm3d_cpu_p2p(plan, s, v, 1);
        }
    } else {
        fmk_fmm3d_cpu_p2p(plan, s, 0, s->nv);
    }
    fmk_fmm3d_cpu_p2p_runs(plan, s, charges);
    t[7] = fmk_time_now();
    for (int i = 0; i < 7; i++)
        sum[i] += t[i + 1] - t[i];
}

/* nd vectors (eval: 1), FMM_NV_MAX or as many as the plan has room for at a time. */
static fmk_status fmm_eval_many(fmk_plan *plan, int64_t nd, const double *charges, double *pot,
                                double *grad, int on_device)
{
    if (on_device)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the CPU engine got device pointers");
    fmk_fmm3d_cpu *s = plan->state;
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    /* without room for more vectors, in turns of what there is: slower, never wrong */
    (void)vectors_room(plan, s, nd < FMM_NV_MAX ? (int)nd : FMM_NV_MAX);
    const double t0 = fmk_time_now();
    double sum[7] = {0};
    for (int64_t v0 = 0; v0 < nd; v0 += s->nv) {
        s->nv = nd - v0 < s->nv_cap ? (int)(nd - v0) : s->nv_cap;
        run_passes(plan, s, charges + v0 * ns, sum);
        if (fmk_interrupt_stopped(plan)) { /* each pass skips its remaining work once asked */
            s->nv = 1;
            return fmk_interrupt_status(plan);
        }
        write_results(plan, s, pot ? pot + v0 * nt : NULL, grad ? grad + 3 * v0 * nt : NULL);
    }
    s->nv = 1;
    fmk_error_clear(plan); /* a failed growth above is no failure of the call */
    double stamps[8] = {t0};
    for (int i = 0; i < 7; i++)
        stamps[i + 1] = stamps[i] + sum[i];
    fmk_info_fmm_phases(&plan->info, stamps, s->tree_time);
    return FMK_OK;
}

static fmk_status fmm_eval(fmk_plan *plan, const double *charges, double *pot, double *grad,
                           int on_device)
{
    return fmm_eval_many(plan, 1, charges, pot, grad, on_device);
}

/* Kernels: laplace, and plummer and regularized with the exact smooth kernel in the near field
 * (P2P over the U list) and laplace multipoles in the far field (docs/fmm3d.md section 8.1:
 * boxes are kept at least s / sqrt(eps) wide, s / eps^(1/4) for regularized, so that the far
 * field's laplace approximation of the kernel meets eps; see fmk_fmm3d_max_level). Precision fp32 (P2P
 * in fp32, expansions in fp64) needs eps >= 1e-5, which fmm_setup checks (eps is not known
 * here). */
fmk_status fmk_fmm3d_check_eps(const fmk_opts *o, double eps)
{
    if (o->precision == FMK_PRECISION_FP32 && eps < 1e-5)
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "method fmm in fp32 takes eps >= 1e-5 (eps = %g); use precision fp64",
                             eps);
    if (!(eps >= 1e-14 && eps <= 1e-2))
        return fmk_error_set(NULL, FMK_ERR_ARG,
                             "eps = %g; method fmm takes 1e-14 <= eps <= 1e-2 (use method direct "
                             "for tighter, tree for looser accuracy)",
                             eps);
    return FMK_OK;
}

static fmk_status fmm_check_opts(fmk_opts *o, fmk_kernel kernel, int dim, double eps,
                                 fmk_info *info)
{
    (void)dim, (void)info;
    fmk_status st = fmk_opts_only(o, "fmm", FMK_TAKES_ORDER | FMK_TAKES_LEAF);
    if (st == FMK_OK)
        st = fmk_fmm3d_check_eps(o, eps);
    if (st != FMK_OK)
        return st;
    if (kernel != FMK_KERNEL_LAPLACE && kernel != FMK_KERNEL_PLUMMER &&
        kernel != FMK_KERNEL_REGULARIZED)
        return fmk_error_set(NULL, FMK_ERR_UNAVAILABLE,
                             "method fmm is not available for kernel %s (laplace, plummer, "
                             "regularized)",
                             fmk_kernel_name(kernel));
    return FMK_OK;
}

static const fmk_fmm3d_cpu_tune tune_defaults = {
    .direct_near = 1, .p2p_targets = 4, .newton = 0, .mutual = 1, .m2l_nodes = 0};
static const fmk_tune_knob tune_knobs[] = {
    FMK_KNOB(fmk_fmm3d_cpu_tune, direct_near, FMK_TUNE_INT, 0, 1,
             "W and X entries cheaper summed directly are (1) or all on operators (0)"),
    FMK_KNOB(fmk_fmm3d_cpu_tune, p2p_targets, FMK_TUNE_INT, 1, 4,
             "targets the AVX-512 laplace P2P takes at once for one vector (1 or 4)"),
    FMK_KNOB(fmk_fmm3d_cpu_tune, newton, FMK_TUNE_INT, 0, 2,
             "Newton steps of the AVX-512 P2P's 1/r (0: from eps, 1, 2)"),
    FMK_KNOB(fmk_fmm3d_cpu_tune, mutual, FMK_TUNE_INT, 0, 1,
             "targets = sources: each pair of leaves once, both ways (1) or one-sided (0)"),
    FMK_KNOB(fmk_fmm3d_cpu_tune, m2l_nodes, FMK_TUNE_INT, 0, 1024,
             "nodes per block of the M2L, the unit of its parallel work (0: 32 below order 20, "
             "else 64)"),
};
static const fmk_tune_table tune_table = {"fmm3d", sizeof(fmk_fmm3d_cpu_tune), &tune_defaults,
                                          FMK_TUNE_COUNT(tune_knobs), tune_knobs};

const fmk_engine fmk_engine_fmm_cpu = {
    .name = "fmm/cpu",
    .tune = &tune_table,
    .setup = fmm_setup,
    .eval = fmm_eval,
    .eval_many = fmm_eval_many,
    .memory = fmm_memory,
    .release = fmm_release,
    .check_opts = fmm_check_opts,
};
