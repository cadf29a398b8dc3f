/* coincident_cpu.c -- coincident sources in the CPU 3D FMM: each run of sources with equal
 * mapped coordinates becomes one unique source that carries the run's summed charge, so a leaf
 * of m coincident points costs O(m) instead of the m^2 pairs of P2P (issue 31).
 *
 * Coincident points have equal keys, so after the tree's sort by (key, index) they lie in one
 * group of equal keys, but not necessarily next to each other: distinct points can share a key
 * (its cells are 2^-21 of the box). set_points therefore sorts each group of equal keys that
 * holds coincident sources by (coordinates, position), which makes every run contiguous and
 * keeps the runs' members in caller order; groups without coincident sources keep their order,
 * so a set without them is evaluated exactly as before. Then the sources in key order are
 * numbered by run (src_slot), and src_xyz, src_soa and src32 hold one entry per run. Every node's
 * unique sources are then a contiguous range (fmk_fmm3d_cpu_src_range).
 *
 * The rule of docs/kernels.md stays exact: a target gets nothing from its own position under
 * laplace (r = 0, in P2P as before), the finite value q G(0) under plummer and regularized; with
 * targets = sources, target i leaves out its own run in P2P, and fmk_fmm3d_cpu_p2p_runs adds
 * the rest of the run, (Q_run - q_i) G(0), so only the term j = i is left out. */
#include <stdlib.h>
#include <string.h>

#include "fmm3d/fmm3d_cpu.h"

typedef struct point_at {
    double x[3];
    int64_t pos; /* position in the tree's order */
    int64_t caller;
} point_at;

static int cmp_point(const void *pa, const void *pb)
{
    const point_at *a = pa, *b = pb;
    for (int k = 0; k < 3; k++)
        if (a->x[k] != b->x[k])
            return a->x[k] < b->x[k] ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static int same_point(const double *a, const double *b)
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

/* Sorts the group [gb, ge) of equal keys by (coordinates, position) when two of its sources
 * coincide. buf holds ge - gb entries. */
static void group_runs(const fmk_plan *plan, fmk_tree3d *t, int64_t gb, int64_t ge, point_at *buf)
{
    const int64_t n = ge - gb;
    for (int64_t i = 0; i < n; i++) {
        memcpy(buf[i].x, t->points + 3 * (gb + i), sizeof buf[i].x);
        buf[i].pos = gb + i;
        buf[i].caller = t->order[gb + i];
    }
    qsort(buf, (size_t)n, sizeof *buf, cmp_point);
    int need = 0; /* two sources in one block of equal coordinates */
    for (int64_t a = 0, e; a < n && !need; a = e) {
        int sources = 0;
        for (e = a; e < n && same_point(buf[e].x, buf[a].x); e++)
            sources += plan->self || buf[e].caller < plan->n_sources;
        need = sources >= 2;
    }
    if (!need)
        return;
    for (int64_t i = 0; i < n; i++) {
        memcpy(t->points + 3 * (gb + i), buf[i].x, sizeof buf[i].x);
        t->order[gb + i] = buf[i].caller;
    }
}

int fmk_fmm3d_cpu_group_runs(const fmk_plan *plan, fmk_tree3d *t)
{
    const int64_t np = t->n_points;
    int64_t largest = 1;
    for (int64_t a = 0, e; a < np; a = e) {
        for (e = a + 1; e < np && t->keys[e] == t->keys[a];)
            e++;
        largest = e - a > largest ? e - a : largest;
    }
    if (largest < 2)
        return 0;
    point_at *buf = malloc(sizeof *buf * (size_t)largest);
    if (!buf)
        return -1;
    for (int64_t a = 0, e; a < np; a = e) {
        for (e = a + 1; e < np && t->keys[e] == t->keys[a];)
            e++;
        if (e - a >= 2)
            group_runs(plan, t, a, e, buf);
    }
    free(buf);
    return 0;
}

int fmk_fmm3d_cpu_unique_sources(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const int64_t ns = plan->n_sources;
    int64_t nu = ns > 0;
    for (int64_t i = 1; i < ns; i++)
        nu += !same_point(s->src_xyz + 3 * i, s->src_xyz + 3 * (i - 1));
    s->n_unique = nu;
    if (nu == ns)
        return 0; /* no coincident sources: src_slot stays NULL */
    s->src_slot = malloc(sizeof(int64_t) * (size_t)ns);
    if (!s->src_slot)
        return -1;
    if (plan->self) { /* the targets keep every point */
        s->trg_xyz = malloc(sizeof(double) * 3 * (size_t)ns);
        if (!s->trg_xyz) {
            s->trg_xyz = s->src_xyz;
            return -1;
        }
        memcpy(s->trg_xyz, s->src_xyz, sizeof(double) * 3 * (size_t)ns);
    }
    int64_t u = -1;
    for (int64_t i = 0; i < ns; i++) { /* in place: u <= i */
        if (u < 0 || !same_point(s->src_xyz + 3 * i, s->src_xyz + 3 * u)) {
            u++;
            memmove(s->src_xyz + 3 * u, s->src_xyz + 3 * i, sizeof(double) * 3);
        }
        s->src_slot[i] = u;
    }
    return 0;
}
