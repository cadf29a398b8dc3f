/* walk_model.c -- a host model of the GPU treecode's group walk (src/cuda/bh.cu, k_walk_bfs):
 * the interaction lists it makes, counted without a GPU, so that a change to the walk's
 * decisions can be weighed before it is built. Prints a table, or JSON with --json.
 *
 * The tree is the library's own (tree3d.c builds the same tree as the GPU, array for array),
 * of points mapped into the plan's frame (plan.c) with equal charges 1/N; the groups follow
 * fmk_cuda_tree3d_groups (the nodes of at most G points whose parent has more, or leaves; from
 * 2^19 points the points of consecutive such siblings cut into pieces of G across their
 * bounds, below that each such node cut on its own; `--cut T`, a variant: a group closed at a
 * sibling's bound once it holds T points). Each group walks from the root with the GPU's
 * decisions, in double:
 *   - the box test: a node is far when the group box's nearest point is farther than r_open
 *     from its centre xc; a far node of more than 3 points is accepted, a far one of at most 3
 *     and an unaccepted leaf are summed directly (P2P), other nodes are opened;
 *   - --mac 2 (default): a leaf the box opens is accepted when every target of the group is
 *     outside its opening sphere (the stackless walk's test at every target); --mac 1: inner
 *     nodes too; --mac 0: the box test alone;
 *   - the cell-to-group step: an accepted node whose centre is farther from the box's centre
 *     c than a r_open + k (0.6 / theta) R_g (R_g the box's half diagonal) goes into the
 *     group's expansion (M2L), the others are evaluated at each target (M2P).
 * The super-groups change where the far field's expansions are made, not these counts (they
 * take only nodes the step would take). Checked against the GPU's own counts (a
 * -DFMK_BH_COUNT build, bench/RESULTS.md), 2^20 points, defaults: Plummer sphere 1389.3 P2P and
 * 168.2 M2P a target here, 1377.5 and 168.0 there (groups 37,562 against 37,541); cube 1599.0
 * and 102.1 against 1597 and 101.6, and 420.5 nodes a group into the expansion against 420.1.
 *
 * Also counted: the pairs that the per-target test needs (the targets inside a directly summed
 * leaf's opening sphere), and per-half lists: lanes 0..15 and 16..31 each with their own P2P
 * list (a leaf in a half's list when a target of that half opens it, else that half takes it
 * by M2P), the walk's P2P loop then running max(half A, half B) entries.
 *
 * And the instructions of the warps' P2P and M2P lists, summed over the groups (a warp runs
 * its lists' full length): 20.4 a P2P entry (15.75 in the loop, 4.65 filling the list) and
 * 49.7 an M2P entry (46 + 3.7 packing), as Nsight Compute counted them (bench/RESULTS.md,
 * "Where the group walk's instructions go").
 *
 *   walk_model [--plummer] [--n N] [--leaf L] [--group G] [--theta T] [--mac K]
 *              [--local-k K] [--local-open A] [--cut T] [--threads T] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree3d.h"

static double urand(unsigned long long *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1p-53;
}

/* bench/tree.c's distributions (another draw): the unit cube, or a Plummer sphere cut at
 * r = 10 */
static void make_points(int plummer, int64_t n, double *x)
{
    unsigned long long s = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) {
        if (!plummer) {
            x[3 * i] = urand(&s), x[3 * i + 1] = urand(&s), x[3 * i + 2] = urand(&s);
            continue;
        }
        double r;
        do
            r = 1.0 / sqrt(pow(urand(&s), -2.0 / 3.0) - 1.0);
        while (r > 10);
        double z = 2 * urand(&s) - 1, phi = 6.283185307179586 * urand(&s), t = sqrt(1 - z * z);
        x[3 * i] = r * t * cos(phi), x[3 * i + 1] = r * t * sin(phi), x[3 * i + 2] = r * z;
    }
}

/* The plan's frame (plan.c): the box's centre to 1.5, its extent over the power of two at or
 * above it. */
static void map_points(int64_t n, double *x)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            lo[k] = fmin(lo[k], x[3 * i + k]), hi[k] = fmax(hi[k], x[3 * i + k]);
    double extent = 0, c[3];
    for (int k = 0; k < 3; k++)
        c[k] = 0.5 * lo[k] + 0.5 * hi[k], extent = fmax(extent, hi[k] - lo[k]);
    int ex;
    const double m = frexp(extent > 0 ? extent : 1, &ex);
    const double inv = 1.0 / ldexp(1.0, m == 0.5 ? ex - 1 : ex);
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = 1.5 + (x[3 * i + k] - c[k]) * inv;
}

typedef struct groups {
    int64_t n, cap, *begin, *end;
} groups;

static int group_add(groups *g, int64_t b, int64_t e)
{
    if (g->n == g->cap) {
        const int64_t cap = g->cap ? 2 * g->cap : 4096;
        int64_t *nb = realloc(g->begin, (size_t)cap * sizeof(int64_t));
        if (!nb)
            return -1;
        g->begin = nb;
        int64_t *ne = realloc(g->end, (size_t)cap * sizeof(int64_t));
        if (!ne)
            return -1;
        g->end = ne, g->cap = cap;
    }
    g->begin[g->n] = b, g->end[g->n] = e, g->n++;
    return 0;
}

static int group_cut(groups *g, int64_t b, int64_t e, int gs)
{
    for (int64_t s = b; s < e; s += gs)
        if (group_add(g, s, s + gs < e ? s + gs : e))
            return -1;
    return 0;
}

/* --cut T (a variant, not the GPU's): the points of the small siblings first .. last taken
 * in order, a group closed at a sibling's bound when it holds at least T points and the next
 * sibling does not fit, else filled to gs points by cutting into that sibling. */
static int group_greedy(const fmk_tree3d *t, int32_t first, int32_t last, int gs, int cut,
                        groups *g)
{
    int64_t gb = t->begin[first], held = 0;
    for (int32_t c = first; c <= last; c++) {
        const int64_t se = t->end[c];
        int64_t pos = t->begin[c];
        if (held + (se - pos) <= gs) {
            held += se - pos;
            continue;
        }
        if (held >= cut && held > 0) {
            if (group_add(g, gb, gb + held))
                return -1;
            gb = pos, held = 0;
        }
        while (held + (se - pos) > gs) {
            pos += gs - held;
            if (group_add(g, gb, pos))
                return -1;
            gb = pos, held = 0;
        }
        held += se - pos;
    }
    return held > 0 ? group_add(g, gb, gb + held) : 0;
}

/* The groups below node i (depth first, so in Morton order); cut > 0: group_greedy. */
static int make_groups(const fmk_tree3d *t, int32_t i, int gs, int merge, int cut, groups *g)
{
    if (t->more[i] < 0 || t->end[i] - t->begin[i] <= gs) /* a small root */
        return group_cut(g, t->begin[i], t->end[i], gs);
    int64_t rb = -1, re = -1;
    int32_t first = -1; /* cut > 0: the run's first sibling */
    for (int32_t k = 0; k < t->n_children[i]; k++) {
        const int32_t c = t->more[i] + k;
        if (t->more[c] < 0 || t->end[c] - t->begin[c] <= gs) {
            if (merge && cut > 0) {
                if (first < 0)
                    first = c;
                continue;
            }
            if (!merge) {
                if (group_cut(g, t->begin[c], t->end[c], gs))
                    return -1;
                continue;
            }
            if (rb < 0)
                rb = t->begin[c];
            re = t->end[c];
            continue;
        }
        if (rb >= 0 && group_cut(g, rb, re, gs))
            return -1;
        if (first >= 0 && group_greedy(t, first, c - 1, gs, cut, g))
            return -1;
        rb = -1, first = -1;
        if (make_groups(t, c, gs, merge, cut, g))
            return -1;
    }
    if (first >= 0)
        return group_greedy(t, first, t->more[i] + t->n_children[i] - 1, gs, cut, g);
    return rb >= 0 ? group_cut(g, rb, re, gs) : 0;
}

typedef struct counts {
    double p2p, need, m2p, m2l, cand, half, half_m2p, opened[6], visited, lists;
} counts;

/* One group's walk; per-group sums (the P2P and M2P list lengths are per target). */
static void walk_group(const fmk_tree3d *t, const fmk_tree3d_moments *mo, int64_t b, int64_t e,
                       int mac, double loc_k, double loc_a, int32_t *stack, counts *s)
{
    const double *p = t->points;
    const int64_t mid = e - b > 16 ? b + 16 : b + (e - b + 1) / 2;
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = b; i < e; i++)
        for (int k = 0; k < 3; k++)
            lo[k] = fmin(lo[k], p[3 * i + k]), hi[k] = fmax(hi[k], p[3 * i + k]);
    double c[3], h[3];
    for (int k = 0; k < 3; k++)
        c[k] = 0.5 * (lo[k] + hi[k]), h[k] = 0.5 * (hi[k] - lo[k]);
    const double loc_r = loc_k * sqrt(h[0] * h[0] + h[1] * h[1] + h[2] * h[2]);
    double p2p = 0, pa = 0, pb = 0, m2p = 0, ma = 0, mb = 0;
    int64_t sp = 0;
    stack[sp++] = 0;
    while (sp > 0) {
        const int32_t i = stack[--sp];
        s->visited++;
        const double *xc = mo->center + 3 * i, r2 = mo->r_open2[i];
        double d2 = 0;
        for (int k = 0; k < 3; k++) {
            const double d = fmax(fabs(xc[k] - c[k]) - h[k], 0);
            d2 += d * d;
        }
        int far = d2 > r2;
        const int64_t cnt = t->end[i] - t->begin[i];
        const int leaf = t->more[i] < 0;
        int open_a = 0, open_b = 0, opening = 0;
        const int tested = !far && cnt > 3 && (mac == 1 || (mac == 2 && leaf));
        if (!far && cnt > 3 && (tested || leaf)) { /* the targets inside the sphere */
            for (int64_t j = b; j < e; j++) {
                double r = 0;
                for (int k = 0; k < 3; k++)
                    r += (p[3 * j + k] - xc[k]) * (p[3 * j + k] - xc[k]);
                if (r <= r2)
                    opening++, open_a += j < mid, open_b += j >= mid;
            }
        }
        if (tested) { /* every target on its own */
            s->cand++;
            far = opening == 0;
        }
        if (far && cnt > 3) { /* accepted: the group's expansion or M2P */
            double ex = 0;
            for (int k = 0; k < 3; k++)
                ex += (xc[k] - c[k]) * (xc[k] - c[k]);
            const double dd = sqrt(ex) - loc_r;
            if (loc_k > 0 && dd > 0 && dd * dd > loc_a * loc_a * r2)
                s->m2l++;
            else
                m2p++, ma++, mb++;
        } else if (far || leaf) { /* directly summed */
            p2p += (double)cnt;
            if (leaf && cnt > 3 && !far) { /* a leaf the box opens (and the test kept) */
                s->need += (double)opening * (double)cnt;
                const int bin = opening <= 1    ? 0
                                : opening <= 4  ? 1
                                : opening <= 8  ? 2
                                : opening <= 16 ? 3
                                : opening <= 24 ? 4
                                                : 5;
                s->opened[bin] += (double)cnt;
                if (open_a || !mac)
                    pa += (double)cnt;
                else
                    ma++;
                if (open_b || !mac)
                    pb += (double)cnt;
                else
                    mb++;
            } else {
                s->need += (double)cnt * (double)(e - b);
                pa += (double)cnt, pb += (double)cnt;
            }
        } else {
            for (int32_t k = 0; k < t->n_children[i]; k++)
                stack[sp++] = t->more[i] + k;
        }
    }
    const double nt = (double)(e - b);
    s->lists += 20.4 * p2p + 49.7 * m2p; /* the warp's list instructions */
    s->p2p += p2p * nt, s->m2p += m2p * nt;
    s->half += (pa > pb ? pa : pb) * nt;
    s->half_m2p += ((ma > mb ? ma : mb) - m2p) * nt;
}

int main(int argc, char **argv)
{
    int64_t n = 1 << 20;
    int plummer = 0, leaf = 48, gs = 32, mac = 2, json = 0, threads = 0, cut = 0;
    double theta = 0.6, loc_k = 2.25, loc_a = 0.5;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--plummer") == 0)
            plummer = 1;
        else if (strcmp(argv[a], "--json") == 0)
            json = 1;
        else if (strcmp(argv[a], "--n") == 0 && a + 1 < argc)
            n = atoll(argv[++a]);
        else if (strcmp(argv[a], "--leaf") == 0 && a + 1 < argc)
            leaf = atoi(argv[++a]);
        else if (strcmp(argv[a], "--group") == 0 && a + 1 < argc)
            gs = atoi(argv[++a]);
        else if (strcmp(argv[a], "--theta") == 0 && a + 1 < argc)
            theta = atof(argv[++a]);
        else if (strcmp(argv[a], "--mac") == 0 && a + 1 < argc)
            mac = atoi(argv[++a]);
        else if (strcmp(argv[a], "--local-k") == 0 && a + 1 < argc)
            loc_k = atof(argv[++a]);
        else if (strcmp(argv[a], "--local-open") == 0 && a + 1 < argc)
            loc_a = atof(argv[++a]);
        else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc)
            threads = atoi(argv[++a]);
        else if (strcmp(argv[a], "--cut") == 0 && a + 1 < argc)
            cut = atoi(argv[++a]);
        else {
            fprintf(stderr, "usage: walk_model [--plummer] [--n N] [--leaf L] [--group G] "
                            "[--theta T] [--mac K] [--local-k K] [--local-open A] [--cut T] "
                            "[--threads T] [--json]\n");
            return 2;
        }
    }
    if (n < 1 || leaf < 1 || gs < 1 || gs > 64 || !(theta > 0 && theta <= 1.15) || mac < 0 ||
        mac > 2 || loc_k < 0 || loc_a < 0 || cut < 0) {
        fprintf(stderr, "walk_model: an argument is out of range\n");
        return 2;
    }
    /* the GPU's step factor: k (0.6 / theta), at least 1; 0 turns the step off */
    const double k_eff = loc_k > 0 ? fmax(loc_k * 0.6 / theta, 1) : 0;
    double *x = malloc((size_t)n * 24), *q = malloc((size_t)n * 8);
    if (!x || !q) {
        fprintf(stderr, "walk_model: out of host memory\n");
        return 1;
    }
    threads = fmk_opts_resolve_threads(threads); /* 0: OpenMP's default */
    make_points(plummer, n, x);
    map_points(n, x);
    fmk_tree3d t;
    fmk_tree3d_moments mo;
    memset(&mo, 0, sizeof mo);
    if (fmk_tree3d_build(NULL, &t, n, x, leaf, threads) != FMK_OK) {
        fprintf(stderr, "walk_model: the tree: %s\n", fmk_plan_last_error(NULL));
        return 1;
    }
    double *absq = malloc((size_t)t.n_nodes * 8);
    /* depth first: at most 7 siblings waiting per level, and the children of the last */
    int32_t *stack = malloc((size_t)(7 * FMK_TREE_MAX_LEVEL + 8) * sizeof(int32_t));
    groups g = {0, 0, NULL, NULL};
    if (!absq || !stack || fmk_tree3d_moments_alloc(&mo, t.n_nodes) ||
        make_groups(&t, 0, gs, n >= (1 << 19), cut, &g)) {
        fprintf(stderr, "walk_model: out of host memory\n");
        return 1;
    }
    for (int64_t i = 0; i < n; i++)
        q[i] = 1.0 / (double)n;
    fmk_tree3d_moments_compute(&t, q, 2, theta, absq, &mo, threads);
    counts s;
    memset(&s, 0, sizeof s);
    for (int64_t k = 0; k < g.n; k++)
        walk_group(&t, &mo, g.begin[k], g.end[k], mac, k_eff, loc_a, stack, &s);
    const double nt = (double)n, ng = (double)g.n;
    double opened = 0;
    for (int k = 0; k < 6; k++)
        opened += s.opened[k];
    if (json) {
        printf("{\"dist\": \"%s\", \"n\": %lld, \"leaf\": %d, \"group\": %d, \"theta\": %g, "
               "\"mac\": %d, \"local_k\": %g, \"local_open\": %g, \"cut\": %d, \"nodes\": %lld, "
               "\"groups\": %lld, \"p2p\": %.2f, \"p2p_needed\": %.2f, \"m2p\": %.2f, "
               "\"m2l_per_group\": %.2f, \"per_target_tests_per_group\": %.2f, \"half_p2p\": %.2f, "
               "\"half_extra_m2p\": %.2f, \"nodes_tested_per_group\": %.2f, "
               "\"list_instructions\": %.4g}\n",
               plummer ? "plummer" : "cube", (long long)n, leaf, gs, theta, mac, loc_k, loc_a, cut,
               (long long)t.n_nodes, (long long)g.n, s.p2p / nt, s.need / nt, s.m2p / nt,
               s.m2l / ng, s.cand / ng, s.half / nt, s.half_m2p / nt, s.visited / ng, s.lists);
    } else {
        printf(
            "walk_model: %s, N = %lld, leaf %d, groups of %d, theta %g, mac %d, step a %g k %g\n",
            plummer ? "Plummer sphere" : "cube", (long long)n, leaf, gs, theta, mac, loc_a, loc_k);
        printf("  nodes %lld, groups %lld (%.1f targets)\n", (long long)t.n_nodes, (long long)g.n,
               nt / ng);
        printf("  per target: P2P %.1f (pairs the per-target test needs: %.1f), M2P %.1f\n",
               s.p2p / nt, s.need / nt, s.m2p / nt);
        printf("  per group: nodes tested %.1f, M2L %.1f, nodes tested at every target %.1f\n",
               s.visited / ng, s.m2l / ng, s.cand / ng);
        printf("  the warps' P2P and M2P list instructions, all groups: %.4g\n", s.lists);
        printf("  per-half lists: P2P loop %.1f a target (%.1f%% of the group's), extra M2P %.1f\n",
               s.half / nt, 100 * s.half / (s.p2p > 0 ? s.p2p : 1), s.half_m2p / nt);
        printf("  points of the leaves the box opens summed directly, by the targets inside the "
               "sphere "
               "(0-1, 2-4, 5-8, 9-16, 17-24, 25-32):");
        for (int k = 0; k < 6; k++)
            printf(" %.1f%%", 100 * s.opened[k] / (opened > 0 ? opened : 1));
        printf("\n");
    }
    fmk_tree3d_free(&t);
    fmk_tree3d_moments_free(&mo);
    free(x), free(q), free(absq), free(stack), free(g.begin), free(g.end);
    return 0;
}
