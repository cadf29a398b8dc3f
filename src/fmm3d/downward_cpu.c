/* downward_cpu.c -- the CPU 3D FMM's downward pass: L2L level by level, then at the leaves
 * L2P and the W list's M2P. */
#include "fmm3d/fmm3d_cpu.h"

/* L2L, top down (levels 0 and 1 have no V or X lists, so their locals are zero). */
void fmk_fmm3d_cpu_l2l(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const fmk_fmm3d_ops_ctx *ops = &s->ops;
    const int64_t st = s->stride;
    const int th = plan->threads;
    const int64_t rs = fmk_fmm3d_rot_size(ops);
    for (int32_t lev = 3; lev < t->levels; lev++) {
        const int64_t a = t->level_begin[lev], e = t->level_begin[lev + 1];
#pragma omp parallel for schedule(dynamic, 8) num_threads(th)
        for (int64_t b = a; b < e; b++) {
            if (s->n_trg[b] == 0 || fmk_interrupt_team(plan))
                continue;
            const int64_t P = t->parent[b];
            for (int v = 0; v < s->nv; v++)
                fmk_fmm3d_l2l(ops, s->rot_updown + rs * (8 + fmk_fmm3d_cpu_octant(l, b, P)),
                              l->center + 3 * P, l->side[P], s->L + st * (s->nv * P + v),
                              l->center + 3 * b, l->side[b], s->L + st * (s->nv * b + v),
                              fmk_fmm3d_cpu_work(s));
        }
    }
}

/* L2P and the W list's M2P at the leaves, into the results (key order). */
void fmk_fmm3d_cpu_l2p(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const fmk_fmm3d_ops_ctx *ops = &s->ops;
    const int64_t k = t->n_nodes, st = s->stride;
    const int th = plan->threads;
    const int64_t rs = 4 * plan->n_targets; /* one vector's results */
    double *res_pot = s->result, *res_grad = s->result + plan->n_targets;
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        if (t->more[b] >= 0 || s->n_trg[b] == 0 || fmk_interrupt_team(plan))
            continue;
        double *work = fmk_fmm3d_cpu_work(s);
        const int64_t tb = s->trg_begin[b], n = s->n_trg[b];
        const double *y = s->trg_xyz + 3 * tb;
        if (t->level[b] >= 2)
            fmk_fmm3d_l2p_many(ops, l->center + 3 * b, l->side[b], s->nv, s->L + st * s->nv * b,
                               st, n, y, res_pot + tb, rs, res_grad + 3 * tb, rs, work);
        for (int64_t e = l->w_begin[b]; e < l->w_begin[b + 1]; e++) {
            if (s->w_direct[e]) /* summed in P2P */
                continue;
            const int32_t c = l->w[e];
            fmk_fmm3d_m2p_many(ops, l->center + 3 * c, l->side[c], s->nv, s->M + st * s->nv * c,
                               st, n, y, res_pot + tb, rs, res_grad + 3 * tb, rs, work);
        }
    }
}
