/* upward_cpu.c -- the CPU 3D FMM's upward pass: P2M at the leaves, M2M level by level. */
#include "fmm3d/fmm3d_cpu.h"

/* P2M: the multipole expansions (of s->nv vectors) of every leaf with sources. */
void fmk_fmm3d_cpu_p2m(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const fmk_fmm3d_ops_ctx *ops = &s->ops;
    const int64_t k = t->n_nodes, st = s->stride;
    const int th = plan->threads;
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
    for (int64_t b = 0; b < k; b++) {
        if (fmk_interrupt_team(plan) || t->more[b] >= 0 || s->n_src[b] == 0)
            continue;
        int64_t j0, nj; /* the unique sources: a run of coincident ones is one */
        fmk_fmm3d_cpu_src_range(s, b, &j0, &nj);
        fmk_fmm3d_p2m_many(ops, l->center + 3 * b, l->side[b], nj, s->src_xyz + 3 * j0, s->nv,
                           s->qv + j0, s->n_unique, s->M + st * s->nv * b, st,
                           fmk_fmm3d_cpu_work(s));
    }
}

/* M2M, deepest level first; each parent gathers its children. */
void fmk_fmm3d_cpu_m2m(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const fmk_fmm3d_ops_ctx *ops = &s->ops;
    const int64_t st = s->stride;
    const int th = plan->threads;
    const int64_t rs = fmk_fmm3d_rot_size(ops);
    for (int32_t lev = t->levels - 2; lev >= 0; lev--) {
        const int64_t a = t->level_begin[lev], e = t->level_begin[lev + 1];
#pragma omp parallel for schedule(dynamic, 4) num_threads(th)
        for (int64_t b = a; b < e; b++) {
            if (t->more[b] < 0 || s->n_src[b] == 0 || fmk_interrupt_team(plan))
                continue;
            for (int32_t c = t->more[b]; c < t->more[b] + t->n_children[b]; c++)
                for (int v = 0; v < s->nv && s->n_src[c] > 0; v++)
                    fmk_fmm3d_m2m(ops, s->rot_updown + rs * fmk_fmm3d_cpu_octant(l, c, b),
                                  l->center + 3 * c, l->side[c], s->M + st * (s->nv * c + v),
                                  l->center + 3 * b, l->side[b], s->M + st * (s->nv * b + v),
                                  fmk_fmm3d_cpu_work(s));
        }
    }
}
