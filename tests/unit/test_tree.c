/* test_tree.c -- the treecode (method tree) on the CPU: the octree against its specification
 * (src/tree3d.h), accuracy against the direct sum for theta 0.3 / 0.6 / 0.9 and orders 0..2 on
 * uniform, Plummer and clustered points, the two walks against each other, separate targets,
 * mixed-sign charges, fp32, the group walk's cell-to-group step on and off, and degenerate
 * inputs (coincident points, a tiny cluster, a far point, a plane, a line, N = 1 and 2). Linked
 * against the static library to reach tree3d.c and bh.c's knobs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tune.h"
#include "tree/tree3d.h"
#include "check.h"
#include "testutil.h"
#include "tree_close.h"

/* The treecode's terms (bh_terms.h) and the group walks' cell-to-group terms (bh_local.h), in
 * double, for the operator test below. */
#define REAL double
#define RSQRT(t) (1.0 / sqrt(t))
#define BH(name) name##_d
#include "treecode/bh_terms.h"
#include "treecode/bh_local.h"
#undef REAL
#undef RSQRT
#undef BH

/* ---------------------------------------------------------------------------------------------
 * The tree against tree3d.h
 * ------------------------------------------------------------------------------------------ */

static void check_tree(const char *what, int64_t n, const double *x, int32_t leaf_size)
{
    check_context("tree: %s, n = %lld, leaf size %d", what, (long long)n, (int)leaf_size);
    fmk_tree3d t;
    CHECK_STATUS(fmk_tree3d_build(NULL, &t, n, x, leaf_size, 2), FMK_OK);
    int ok = 1;
    for (int64_t s = 0; s < n && ok; s++) {
        const double *p = x + 3 * t.order[s];
        ok = t.keys[s] == fmk_tree3d_key(p[0], p[1], p[2]) &&
             memcmp(p, t.points + 3 * s, 3 * sizeof(double)) == 0;
        if (s > 0)
            ok = ok && (t.keys[s - 1] < t.keys[s] ||
                        (t.keys[s - 1] == t.keys[s] && t.order[s - 1] < t.order[s]));
    }
    CHECK_MSG(ok, "points are not sorted by (key, index) or keys are wrong");
    CHECK(t.begin[0] == 0 && t.end[0] == n && t.parent[0] == -1 && t.next[0] == -1);
    CHECK(t.levels >= 1 && t.levels <= FMK_TREE_MAX_LEVEL + 1);
    ok = 1;
    for (int L = 0; L < t.levels; L++)
        for (int64_t i = t.level_begin[L]; i < t.level_begin[L + 1]; i++) {
            ok = ok && t.level[i] == L && t.end[i] > t.begin[i] - (n == 0);
            const int64_t count = t.end[i] - t.begin[i];
            if (t.more[i] < 0) {
                ok = ok && t.n_children[i] == 0 && (count <= leaf_size || L == FMK_TREE_MAX_LEVEL);
                continue;
            }
            ok = ok && count > leaf_size && L < FMK_TREE_MAX_LEVEL && t.n_children[i] >= 1 &&
                 t.n_children[i] <= 8;
            /* children: contiguous, on the next level, tiling the parent's range in key order */
            int64_t at = t.begin[i];
            const int shift = 3 * (FMK_TREE_MAX_LEVEL - 1 - L);
            for (int32_t c = 0; c < t.n_children[i]; c++) {
                int64_t j = t.more[i] + c;
                ok = ok && t.parent[j] == i && t.level[j] == L + 1 && t.begin[j] == at;
                for (int64_t s = t.begin[j]; s < t.end[j]; s++)
                    ok = ok && (t.keys[s] >> shift) == (t.keys[t.begin[j]] >> shift);
                at = t.end[j];
            }
            ok = ok && at == t.end[i];
        }
    CHECK_MSG(ok, "node arrays break the specification");
    CHECK(t.level_begin[t.levels] == t.n_nodes);
    /* next/more visit every node once, depth first, and the leaves tile [0, n) in order */
    int64_t visits = 0, covered = 0;
    ok = 1;
    for (int32_t i = 0; i >= 0 && visits <= t.n_nodes;) {
        visits++;
        if (t.more[i] >= 0) {
            i = t.more[i];
        } else {
            ok = ok && t.begin[i] == covered;
            covered = t.end[i];
            i = t.next[i];
        }
    }
    CHECK_MSG(visits == t.n_nodes && ok && covered == n,
              "next/more walk: %lld visits of %lld nodes", (long long)visits, (long long)t.n_nodes);
    fmk_tree3d_free(&t);
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

static void test_sort(void)
{
    check_context("radix sort");
    const int64_t n = 50000;
    uint64_t *k = malloc(sizeof(uint64_t) * n), *ref = malloc(2 * sizeof(uint64_t) * n);
    int64_t *v = malloc(sizeof(int64_t) * n);
    test_rng rng = test_rng_seed(3);
    for (int64_t i = 0; i < n; i++) {
        /* few distinct high digits and many ties exercise stability and skipped passes */
        k[i] = ((uint64_t)(test_uniform(&rng) * 8) << 60) | (uint64_t)(test_uniform(&rng) * 1000);
        v[i] = i;
        ref[2 * i] = k[i], ref[2 * i + 1] = (uint64_t)i;
    }
    qsort(ref, (size_t)n, 2 * sizeof(uint64_t), cmp_pair);
    CHECK(fmk_tree3d_sort(k, v, n, 2) == 0);
    int ok = 1;
    for (int64_t i = 0; i < n; i++)
        ok = ok && k[i] == ref[2 * i] && (uint64_t)v[i] == ref[2 * i + 1];
    CHECK_MSG(ok, "radix sort differs from qsort by (key, index)");
    free(k), free(v), free(ref);
}

/* Maps points to the frame's [1, 2] (as plan.c does) for the tree checks. */
static void to_frame(int64_t n, double *x)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            lo[k] = fmin(lo[k], x[3 * i + k]), hi[k] = fmax(hi[k], x[3 * i + k]);
    double w = 0;
    for (int k = 0; k < 3; k++)
        w = fmax(w, hi[k] - lo[k]);
    w = w > 0 ? exp2(ceil(log2(w))) : 1;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = 1.5 + (x[3 * i + k] - 0.5 * (lo[k] + hi[k])) / w;
}

static void test_trees(void)
{
    const int64_t n = 5000;
    double *x = test_alloc(3 * n);
    const test_dist dists[3] = {TEST_DIST_CUBE, TEST_DIST_PLUMMER, TEST_DIST_CLUSTERED};
    for (int d = 0; d < 3; d++) {
        test_points(dists[d], n, 7 + d, x);
        to_frame(n, x);
        check_tree(test_dist_name(dists[d]), n, x, 8);
        check_tree(test_dist_name(dists[d]), n, x, 1);
    }
    for (int64_t i = 0; i < n; i++) /* identical points: one leaf at the depth cap */
        x[3 * i] = x[3 * i + 1] = x[3 * i + 2] = 1.25;
    check_tree("identical", n, x, 8);
    check_tree("n = 1", 1, x, 8);
    check_tree("n = 0", 0, x, 8);
    free(x);
}

/* ---------------------------------------------------------------------------------------------
 * Evaluations against the direct sum
 * ------------------------------------------------------------------------------------------ */

typedef struct tree_case {
    fmk_kernel kernel;
    double softening;
    double theta;
    int order;
    fmk_walk walk;
    int64_t leaf_size;
    fmk_precision precision;
} tree_case;

/* Runs the treecode; targets = NULL: at the sources. Returns 0 on success. */
/* Runs case c; local >= 0 sets the knob treecode.local (0: the cell-to-group step off). */
static int run_tree_local(const tree_case *c, int local, int64_t n, const double *x,
                          const double *q, int64_t m, const double *y, double *pot, double *grad,
                          fmk_info *info)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE;
    test_tree_theta(&o);
    o.backend = FMK_BACKEND_CPU;
    o.theta = c->theta;
    o.order = c->order;
    o.walk = c->walk;
    o.leaf_size = c->leaf_size;
    o.precision = c->precision;
    o.softening = c->softening;
    o.threads = 2;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, 3, c->kernel, 1e-6, &o);
    if (st == FMK_OK && local >= 0)
        st = fmk_plan_tune(plan, "treecode.local", local);
    if (st == FMK_OK)
        st = fmk_plan_set_points(plan, n, x, y ? m : 0, y);
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, q, pot, grad);
    if (st != FMK_OK)
        printf("tree: %s\n", plan ? fmk_plan_last_error(plan) : fmk_plan_last_error(NULL));
    if (plan && info)
        fmk_plan_info(plan, info);
    fmk_plan_destroy(plan);
    return st != FMK_OK;
}

static int run_tree(const tree_case *c, int64_t n, const double *x, const double *q, int64_t m,
                    const double *y, double *pot, double *grad, fmk_info *info)
{
    return run_tree_local(c, -1, n, x, q, m, y, pot, grad, info);
}

static void run_direct(fmk_kernel kernel, double softening, int64_t n, const double *x,
                       const double *q, int64_t m, const double *y, double *pot, double *grad)
{
    CHECK_STATUS(
        test_run(kernel, FMK_PRECISION_FP64, 2, softening, n, x, q, y ? m : 0, y, pot, grad),
        FMK_OK);
}

typedef struct errs {
    double pot, grad;
} errs;

static errs tree_errors(const tree_case *c, int64_t n, const double *x, const double *q, int64_t m,
                        const double *y, const double *ref_pot, const double *ref_grad)
{
    const int64_t nt = y ? m : n;
    double *pot = test_alloc(nt), *grad = test_alloc(3 * nt);
    errs e = {INFINITY, INFINITY};
    if (CHECK(run_tree(c, n, x, q, m, y, pot, grad, NULL) == 0)) {
        e.pot = test_rel_l2(pot, ref_pot, nt);
        e.grad = test_rel_l2(grad, ref_grad, 3 * nt);
    }
    free(pot), free(grad);
    return e;
}

/* Accuracy for theta 0.3 / 0.6 / 0.9 and orders 0..2: bounded, falling with theta and with
 * order; the group walk at least as accurate as the stackless one. */
static void test_accuracy(test_dist dist, int mixed)
{
    const int64_t n = 4000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    double *rp = test_alloc(n), *rg = test_alloc(3 * n);
    test_points(dist, n, 11, x);
    test_charges(n, 0, 12, q);
    if (!mixed)
        for (int64_t i = 0; i < n; i++)
            q[i] = 0.5 + 0.5 * fabs(q[i]);
    run_direct(FMK_KERNEL_LAPLACE, 0, n, x, q, 0, NULL, rp, rg);
    const double thetas[3] = {0.3, 0.6, 0.9};
    /* order 2 bounds for one-sign charges; mixed signs cancel in the potential, so its relative
     * error is larger (the cells' moments do not cancel as their fields do) */
    const double bound_pot[3] = {2e-4, 2e-3, 1e-2}, bound_grad[3] = {1e-3, 1e-2, 4e-2};
    errs e[3][3];
    for (int a = 0; a < 3; a++)
        for (int order = 0; order <= 2; order++) {
            tree_case c = {FMK_KERNEL_LAPLACE, 0, thetas[a],         order,
                           FMK_WALK_GROUP,     0, FMK_PRECISION_FP64};
            check_context("accuracy: %s, %s charges, theta %.1f, order %d", test_dist_name(dist),
                          mixed ? "mixed" : "positive", thetas[a], order);
            e[a][order] = tree_errors(&c, n, x, q, 0, NULL, rp, rg);
            printf("  %-10s %-8s theta %.1f order %d: pot %.2e grad %.2e\n", test_dist_name(dist),
                   mixed ? "mixed" : "positive", thetas[a], order, e[a][order].pot,
                   e[a][order].grad);
            if (order == 2) {
                double f = mixed ? 30 : 1;
                CHECK_MSG(e[a][2].pot < f * bound_pot[a] &&
                              e[a][2].grad < bound_grad[a] * (mixed ? 3 : 1),
                          "errors %.3g (pot), %.3g (grad)", e[a][2].pot, e[a][2].grad);
                c.walk = FMK_WALK_STACKLESS;
                errs s = tree_errors(&c, n, x, q, 0, NULL, rp, rg);
                CHECK_MSG(e[a][2].pot <= 1.05 * s.pot && e[a][2].grad <= 1.05 * s.grad,
                          "group walk %.3g / %.3g, stackless %.3g / %.3g", e[a][2].pot,
                          e[a][2].grad, s.pot, s.grad);
            }
        }
    for (int order = 0; order <= 2; order++) {
        check_context("accuracy falls with theta: %s, order %d", test_dist_name(dist), order);
        CHECK(e[0][order].pot < e[1][order].pot && e[1][order].pot < e[2][order].pot);
        CHECK(e[0][order].grad < e[1][order].grad && e[1][order].grad < e[2][order].grad);
    }
    for (int a = 0; a < 3; a++) {
        check_context("accuracy rises with order: %s, theta %.1f", test_dist_name(dist), thetas[a]);
        CHECK(e[a][2].pot < e[a][0].pot && e[a][2].grad < e[a][0].grad);
        if (mixed) /* the dipole about the centre of |q| is not zero */
            CHECK(e[a][1].pot < e[a][0].pot && e[a][2].pot < e[a][1].pot);
        else /* one sign: the dipole about the centre of mass vanishes */
            CHECK(fabs(e[a][1].pot - e[a][0].pot) <= 1e-6 * e[a][0].pot);
    }
    free(x), free(q), free(rp), free(rg);
}

/* With leaf size 1 every group is one target, so the walks open the same nodes and agree to
 * rounding; fp32 stays within its rounding of fp64. Plummer kernel: self term left out. */
static void test_walks_agree(fmk_kernel kernel, double softening)
{
    const int64_t n = 3000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    double *p1 = test_alloc(n), *g1 = test_alloc(3 * n), *p2 = test_alloc(n),
           *g2 = test_alloc(3 * n);
    double *rp = test_alloc(n), *rg = test_alloc(3 * n);
    test_points(TEST_DIST_PLUMMER, n, 21, x);
    test_charges(n, 0, 22, q);
    check_context("walks agree: %s", fmk_kernel_name(kernel));
    tree_case c = {kernel, softening, 0.6, 2, FMK_WALK_GROUP, 1, FMK_PRECISION_FP64};
    fmk_info info;
    CHECK(run_tree(&c, n, x, q, 0, NULL, p1, g1, &info) == 0);
    CHECK(info.walk == FMK_WALK_GROUP && info.leaf_size == 1 && info.order == 2 &&
          info.theta == 0.6 && info.levels > 1 && info.method == FMK_METHOD_TREE);
    c.walk = FMK_WALK_STACKLESS;
    CHECK(run_tree(&c, n, x, q, 0, NULL, p2, g2, &info) == 0);
    CHECK(info.walk == FMK_WALK_STACKLESS);
    CHECK_MSG(test_rel_l2(p1, p2, n) < 1e-13 && test_rel_l2(g1, g2, 3 * n) < 1e-13,
              "group vs stackless with one target a group: %.3g, %.3g", test_rel_l2(p1, p2, n),
              test_rel_l2(g1, g2, 3 * n));
    /* against direct, and fp32 against fp64 */
    run_direct(kernel, softening, n, x, q, 0, NULL, rp, rg);
    c.walk = FMK_WALK_AUTO, c.leaf_size = 0;
    CHECK(run_tree(&c, n, x, q, 0, NULL, p1, g1, NULL) == 0);
    CHECK_MSG(test_rel_l2(p1, rp, n) < 2e-2 && test_rel_l2(g1, rg, 3 * n) < 1e-2,
              "vs direct: %.3g, %.3g", test_rel_l2(p1, rp, n), test_rel_l2(g1, rg, 3 * n));
    c.precision = FMK_PRECISION_FP32;
    CHECK(run_tree(&c, n, x, q, 0, NULL, p2, g2, NULL) == 0);
    CHECK_MSG(test_rel_l2(p2, p1, n) < 1e-4 && test_rel_l2(g2, g1, 3 * n) < 1e-3,
              "fp32 vs fp64: %.3g, %.3g", test_rel_l2(p2, p1, n), test_rel_l2(g2, g1, 3 * n));
    free(x), free(q), free(p1), free(g1), free(p2), free(g2), free(rp), free(rg);
}

/* fp32 and very close pairs in a wide frame (tree_close.h): the gradient at each pair point
 * within 1e-5 of the reference, both walks, outliers 1e3 and 1e4 core sizes away. */
static void test_close_pairs(void)
{
    const int64_t n_core = SANITIZED ? 6000 : 20000;
    const int64_t cap = n_core + 2 * TREE_CLOSE_PAIRS + TREE_CLOSE_OUTLIERS;
    double *x = test_alloc(3 * cap), *q = test_alloc(cap), *g = test_alloc(3 * cap);
    double y[3 * 2 * TREE_CLOSE_PAIRS], ref[3 * 2 * TREE_CLOSE_PAIRS];
    const double sep[TREE_CLOSE_PAIRS] = {1e-2, 1.5e-2, 2e-2, 3e-2};
    int64_t pair[2 * TREE_CLOSE_PAIRS];
    for (int f = 0; f < 2; f++) {
        const double far = f ? 1e4 : 1e3;
        const int64_t n = tree_close_set(n_core, far, sep, 81 + f, x, q, pair);
        for (int p = 0; p < 2 * TREE_CLOSE_PAIRS; p++)
            memcpy(y + 3 * p, x + 3 * pair[p], 3 * sizeof(double));
        test_reference(FMK_KERNEL_LAPLACE, 0, n, x, q, 2 * TREE_CLOSE_PAIRS, y, NULL, ref);
        const double w = tree_close_width(n, x);
        for (int run = 0; run < 3; run++) {
            const fmk_walk walk = run == 1 ? FMK_WALK_STACKLESS : FMK_WALK_GROUP;
            const fmk_precision prec = run == 2 ? FMK_PRECISION_FP64 : FMK_PRECISION_FP32;
            check_context("close pairs: frame %.3g, pairs %.2g..%.2g of it, %s, %s", w, sep[0] / w,
                          sep[TREE_CLOSE_PAIRS - 1] / w,
                          walk == FMK_WALK_STACKLESS ? "stackless" : "group",
                          prec == FMK_PRECISION_FP32 ? "fp32" : "fp64");
            tree_case c = {FMK_KERNEL_LAPLACE, 0, 0.6, 2, walk, 0, prec};
            if (!CHECK(run_tree(&c, n, x, q, 0, NULL, NULL, g, NULL) == 0))
                continue;
            const double e = tree_close_error(g, ref, pair);
            printf("close pairs: frame %.3g, %s %s: largest gradient error %.3g\n", w,
                   walk == FMK_WALK_STACKLESS ? "stackless" : "group",
                   prec == FMK_PRECISION_FP32 ? "fp32" : "fp64", e);
            CHECK_MSG(e < 1e-5, "gradient error at the pair points %.3g", e);
        }
    }
    free(x), free(q), free(g);
}

/* Separate targets (some of them on sources) against direct, both walks. */
static void test_targets(void)
{
    const int64_t n = 3000, m = 2000;
    double *x = test_alloc(3 * n), *y = test_alloc(3 * m), *q = test_alloc(n);
    double *p = test_alloc(m), *g = test_alloc(3 * m), *rp = test_alloc(m), *rg = test_alloc(3 * m);
    test_points(TEST_DIST_CLUSTERED, n, 31, x);
    test_points(TEST_DIST_CUBE, m, 32, y);
    for (int64_t i = 0; i < 100; i++) /* targets on sources contribute nothing there (laplace) */
        memcpy(y + 3 * i, x + 3 * (7 * i), 3 * sizeof(double));
    test_charges(n, 0, 33, q);
    for (int k = 0; k < 2; k++) {
        fmk_kernel kernel = k ? FMK_KERNEL_PLUMMER : FMK_KERNEL_LAPLACE;
        double soft = k ? 0.01 : 0;
        run_direct(kernel, soft, n, x, q, m, y, rp, rg);
        for (int w = 1; w <= 2; w++) {
            check_context("separate targets: %s, walk %d", fmk_kernel_name(kernel), w);
            tree_case c = {kernel, soft, 0.5, 2, (fmk_walk)w, 0, FMK_PRECISION_FP64};
            CHECK(run_tree(&c, n, x, q, m, y, p, g, NULL) == 0);
            int finite = 1;
            for (int64_t i = 0; i < m; i++)
                finite = finite && isfinite(p[i]) && isfinite(g[3 * i]);
            CHECK(finite);
            CHECK_MSG(test_rel_l2(p, rp, m) < 1e-2 && test_rel_l2(g, rg, 3 * m) < 1e-2,
                      "vs direct: %.3g, %.3g", test_rel_l2(p, rp, m), test_rel_l2(g, rg, 3 * m));
        }
    }
    free(x), free(y), free(q), free(p), free(g), free(rp), free(rg);
}

/* The group walk's cell-to-group step (the knob treecode.local, not API): with it on (the default) and
 * off, against the direct sum, for theta 0.3 / 0.6 / 0.9, fp64 and fp32, the softened kernel and
 * separate targets. The step may cost a little accuracy; it must stay close to the walk without
 * it and fall with theta. */
static errs step_errors(int on, const tree_case *c, int64_t n, const double *x, const double *q,
                        int64_t m, const double *y, const double *rp, const double *rg, double *pot)
{
    const int64_t nt = y ? m : n;
    double *grad = test_alloc(3 * nt);
    errs e = {INFINITY, INFINITY};
    if (CHECK(run_tree_local(c, on ? -1 : 0, n, x, q, m, y, pot, grad, NULL) == 0)) {
        e.pot = test_rel_l2(pot, rp, nt);
        e.grad = test_rel_l2(grad, rg, 3 * nt);
    }
    free(grad);
    return e;
}

/* The knobs' documented defaults, read from a plan. */
static void check_tree_defaults(void)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE;
    test_tree_theta(&o);
    o.backend = FMK_BACKEND_CPU;
    fmk_plan *plan = NULL;
    if (!CHECK(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o) == FMK_OK))
        return;
    double local = -1, group = -1, k = -1, a = -1;
    CHECK(fmk_plan_tuned(plan, "treecode.local", &local) == FMK_OK);
    CHECK(fmk_plan_tuned(plan, "treecode.group_leaves", &group) == FMK_OK);
    CHECK(fmk_plan_tuned(plan, "treecode.local_k", &k) == FMK_OK);
    CHECK(fmk_plan_tuned(plan, "treecode.local_open", &a) == FMK_OK);
    CHECK(local == 4 && group == 0 && k > 1 && a > 0);
    fmk_plan_destroy(plan);
}

static void test_local_step(void)
{
    check_tree_defaults();
    const int64_t n = 6000, m = 2500;
    double *x = test_alloc(3 * n), *q = test_alloc(n), *y = test_alloc(3 * m);
    double *rp = test_alloc(n), *rg = test_alloc(3 * n), *p_on = test_alloc(n),
           *p_off = test_alloc(n);
    test_points(TEST_DIST_PLUMMER, n, 71, x);
    test_charges(n, 0, 72, q);
    for (int64_t i = 0; i < n; i++)
        q[i] = 0.5 + 0.5 * fabs(q[i]);
    const double thetas[3] = {0.3, 0.6, 0.9};
    for (int k = 0; k < 2; k++) { /* laplace, then plummer (softened) */
        const fmk_kernel kernel = k ? FMK_KERNEL_PLUMMER : FMK_KERNEL_LAPLACE;
        const double soft = k ? 0.01 : 0;
        run_direct(kernel, soft, n, x, q, 0, NULL, rp, rg);
        errs on[3];
        for (int a = 0; a < 3; a++)
            for (int fp32 = 0; fp32 < 2; fp32++) {
                tree_case c = {kernel,
                               soft,
                               thetas[a],
                               2,
                               FMK_WALK_GROUP,
                               0,
                               fp32 ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64};
                check_context("cell-to-group step: %s, theta %.1f, %s", fmk_kernel_name(kernel),
                              thetas[a], fp32 ? "fp32" : "fp64");
                errs e1 = step_errors(1, &c, n, x, q, 0, NULL, rp, rg, p_on);
                errs e0 = step_errors(0, &c, n, x, q, 0, NULL, rp, rg, p_off);
                printf("  step %-8s theta %.1f %s: on pot %.3e grad %.3e, off pot %.3e grad %.3e\n",
                       fmk_kernel_name(kernel), thetas[a], fp32 ? "fp32" : "fp64", e1.pot, e1.grad,
                       e0.pot, e0.grad);
                /* the step changes the result (it was taken) and keeps the error close */
                CHECK_MSG(test_rel_l2(p_on, p_off, n) > 1e-12, "the step was not taken");
                CHECK_MSG(e1.pot < 1.1 * e0.pot + 2e-7 && e1.grad < 1.1 * e0.grad + 2e-6,
                          "step on %.3g / %.3g, off %.3g / %.3g", e1.pot, e1.grad, e0.pot, e0.grad);
                if (!fp32)
                    on[a] = e1;
            }
        check_context("cell-to-group step: %s, errors fall with theta", fmk_kernel_name(kernel));
        CHECK(on[0].pot < on[1].pot && on[1].pot < on[2].pot);
        CHECK(on[0].grad < on[1].grad && on[1].grad < on[2].grad);
    }
    /* separate targets (some on sources), softened kernel, both precisions */
    test_points(TEST_DIST_CUBE, m, 73, y);
    for (int64_t i = 0; i < 100; i++)
        memcpy(y + 3 * i, x + 3 * (13 * i), 3 * sizeof(double));
    run_direct(FMK_KERNEL_PLUMMER, 0.01, n, x, q, m, y, rp, rg);
    for (int fp32 = 0; fp32 < 2; fp32++) {
        check_context("cell-to-group step: separate targets, %s", fp32 ? "fp32" : "fp64");
        tree_case c = {FMK_KERNEL_PLUMMER,
                       0.01,
                       0.6,
                       2,
                       FMK_WALK_GROUP,
                       0,
                       fp32 ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64};
        errs e1 = step_errors(1, &c, n, x, q, m, y, rp, rg, p_on);
        errs e0 = step_errors(0, &c, n, x, q, m, y, rp, rg, p_off);
        printf("  step separate targets %s: on pot %.3e grad %.3e, off pot %.3e grad %.3e\n",
               fp32 ? "fp32" : "fp64", e1.pot, e1.grad, e0.pot, e0.grad);
        CHECK_MSG(test_rel_l2(p_on, p_off, m) > 1e-12, "the step was not taken");
        CHECK_MSG(e1.pot < 1.1 * e0.pot + 2e-7 && e1.grad < 1.1 * e0.grad + 2e-6,
                  "step on %.3g / %.3g, off %.3g / %.3g", e1.pot, e1.grad, e0.pot, e0.grad);
    }
    free(x), free(q), free(y), free(rp), free(rg), free(p_on), free(p_off);
}

/* ---------------------------------------------------------------------------------------------
 * Degenerate inputs: each must finish quickly, with a bounded tree, and match the direct sum
 * ------------------------------------------------------------------------------------------ */

static void degenerate(const char *what, int64_t n, const double *x, const double *q, double tol)
{
    double *p = test_alloc(n), *g = test_alloc(3 * n), *rp = test_alloc(n), *rg = test_alloc(3 * n);
    for (int k = 0; k < 2; k++) {
        fmk_kernel kernel = k ? FMK_KERNEL_PLUMMER : FMK_KERNEL_LAPLACE;
        double soft = k ? 1e-3 : 0;
        run_direct(kernel, soft, n, x, q, 0, NULL, rp, rg);
        for (int w = 1; w <= 2; w++) {
            check_context("degenerate: %s, %s, walk %d", what, fmk_kernel_name(kernel), w);
            tree_case c = {kernel, soft, 0.6, 2, (fmk_walk)w, 0, FMK_PRECISION_FP64};
            fmk_info info;
            if (!CHECK(run_tree(&c, n, x, q, 0, NULL, p, g, &info) == 0))
                continue;
            CHECK(info.levels >= 1 && info.levels <= FMK_TREE_MAX_LEVEL + 1);
            CHECK_MSG(info.bytes_host < 4096 + 2000 * n, "%lld bytes for %lld points",
                      (long long)info.bytes_host, (long long)n);
            double ep = test_rel_l2(p, rp, n), eg = test_rel_l2(g, rg, 3 * n);
            CHECK_MSG(ep < tol && eg < tol, "vs direct: %.3g, %.3g", ep, eg);
        }
    }
    free(p), free(g), free(rp), free(rg);
}

static void test_degenerate(void)
{
    const int64_t n = 6000;
    double *x = test_alloc(3 * n), *q = test_alloc(n);
    test_charges(n, 0, 41, q);
    test_rng rng = test_rng_seed(42);

    for (int64_t i = 0; i < n; i++) /* 99% in a box 1e-6 wide, the rest in the unit cube */
        for (int k = 0; k < 3; k++)
            x[3 * i + k] = i % 100 ? 0.3 + 1e-6 * test_uniform(&rng) : test_uniform(&rng);
    degenerate("99% in a box 1e-6 wide", n, x, q, 1e-2);

    test_points(TEST_DIST_CUBE, n, 43, x); /* one point 1e6 away */
    x[0] = x[1] = x[2] = 1e6;
    degenerate("one point 1e6 away", n, x, q, 1e-2);

    test_points(TEST_DIST_CUBE, n, 44, x); /* a plane */
    for (int64_t i = 0; i < n; i++)
        x[3 * i + 2] = 0.5;
    degenerate("a plane", n, x, q, 1e-2);

    test_points(TEST_DIST_CUBE, n, 45, x); /* a line */
    for (int64_t i = 0; i < n; i++)
        x[3 * i + 1] = x[3 * i + 2] = 0.25;
    degenerate("a line", n, x, q, 1e-2);

    test_points(TEST_DIST_CUBE, 2, 46, x);
    degenerate("n = 1", 1, x, q, 1e-14);
    degenerate("n = 2", 2, x, q, 1e-14);
    x[3] = x[0], x[4] = x[1], x[5] = x[2];
    degenerate("n = 2, coincident", 2, x, q, 1e-14);
    free(x), free(q);

    /* 1e5 identical points: laplace gives 0 everywhere (coincident sources are left out);
     * plummer gives (Q - q_i) / s and no gradient */
    const int64_t big = 100000;
    double *xb = test_alloc(3 * big), *qb = test_alloc(big), *p = test_alloc(big),
           *g = test_alloc(3 * big);
    double total = 0;
    test_charges(big, 0, 47, qb);
    for (int64_t i = 0; i < big; i++) {
        xb[3 * i] = 0.1, xb[3 * i + 1] = -2, xb[3 * i + 2] = 3;
        total += qb[i];
    }
    for (int k = 0; k < 2; k++)
        for (int w = 1; w <= 2; w++) {
            check_context("1e5 identical points, %s, walk %d", k ? "plummer" : "laplace", w);
            tree_case c = {k ? FMK_KERNEL_PLUMMER : FMK_KERNEL_LAPLACE,
                           k ? 0.5 : 0,
                           0.6,
                           2,
                           (fmk_walk)w,
                           0,
                           FMK_PRECISION_FP64};
            fmk_info info;
            if (!CHECK(run_tree(&c, big, xb, qb, 0, NULL, p, g, &info) == 0))
                continue;
            CHECK(info.levels == FMK_TREE_MAX_LEVEL + 1);
            double worst = 0;
            for (int64_t i = 0; i < big; i++) {
                double want = k ? (total - qb[i]) / 0.5 : 0;
                worst = fmax(worst, fabs(p[i] - want) / (fabs(total) / 0.5 + 1));
                worst = fmax(worst, fabs(g[3 * i]) + fabs(g[3 * i + 1]) + fabs(g[3 * i + 2]));
            }
            CHECK_MSG(worst < 1e-12, "worst deviation %.3g", worst);
        }
    free(xb), free(qb), free(p), free(g);
}

static void test_memory(void)
{
    check_context("memory");
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE;
    test_tree_theta(&o);
    o.backend = FMK_BACKEND_CPU;
    fmk_plan *plan = NULL;
    CHECK_STATUS(fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o), FMK_OK);
    const int64_t n = 20000;
    int64_t h = 0, d = -1;
    CHECK_STATUS(fmk_plan_memory(plan, n, -1, &h, &d), FMK_OK);
    CHECK(h > 0 && d == 0);
    double *x = test_alloc(3 * n);
    test_points(TEST_DIST_CUBE, n, 51, x);
    CHECK_STATUS(fmk_plan_set_points(plan, n, x, 0, NULL), FMK_OK);
    fmk_info info;
    fmk_plan_info(plan, &info);
    printf("  memory: predicted %lld bytes, holds %lld (%.1f per point)\n", (long long)h,
           (long long)info.bytes_host, (double)info.bytes_host / n);
    CHECK_MSG(info.bytes_host <= h && info.bytes_host > h / 2,
              "holds %lld bytes, fmk_plan_memory predicted %lld", (long long)info.bytes_host,
              (long long)h);
    CHECK(info.phase_time[FMK_PHASE_SETUP] > 0);
    fmk_plan_destroy(plan);
    free(x);
}

/* bh_local.h: a node's field (order 0, 1, 2; laplace and softened) translated into a Taylor
 * expansion of order 2, 3 or 4 about c (M2L) and evaluated at c + delta (L2P) equals the node's
 * M2P at c + delta up to the expansion's truncation: halving |delta| divides the error of the
 * potential by about 2^(P+1) and that of the gradient by 2^P (moments of a node of size 0.3 at
 * distance ~5, so that the dropped |a| + |b| > P + 1 terms are smaller still). Order 4 keeps
 * |a| + |b| <= 4, so its dropped terms fall as delta^4 with a dipole (order 1) and as delta^3
 * with a quadrupole (order 2; the terms order 3 drops too, which dominate at these sizes). */
static void test_local_ops(void)
{
    test_rng rng = test_rng_seed(61);
    for (int P = 2; P <= 4; P++)
        for (int order = 0; order <= 2; order++)
            for (int soft = 0; soft < 2; soft++) {
                const double eps2 = soft ? 0.3 : 0, xc[3] = {0.1, -0.2, 0.3}, c[3] = {3, 2, -4};
                double m[FMK_BH_MOMENTS];
                m[0] = 2;
                for (int k = 1; k < 4; k++)
                    m[k] = 0.3 * (2 * test_uniform(&rng) - 1);
                for (int k = 4; k < FMK_BH_MOMENTS; k++)
                    m[k] = 0.09 * (2 * test_uniform(&rng) - 1);
                double L[FMK_BH_LOCAL4] = {0}, ep[2] = {0, 0}, eg[2] = {0, 0};
                if (P == 2)
                    m2l2_d(order, c[0] - xc[0], c[1] - xc[1], c[2] - xc[2], eps2, m, L);
                else if (P == 3)
                    m2l3_d(order, c[0] - xc[0], c[1] - xc[1], c[2] - xc[2], eps2, m, L);
                else
                    m2l4_d(order, c[0] - xc[0], c[1] - xc[1], c[2] - xc[2], eps2, m, L);
                for (int t = 0; t < 20; t++) {
                    double u[3];
                    for (int k = 0; k < 3; k++)
                        u[k] = 2 * test_uniform(&rng) - 1;
                    for (int h = 0; h < 2; h++) { /* the same offset, halved */
                        const double s = h ? 0.05 : 0.1;
                        double d[3], p0 = 0, g0[3] = {0, 0, 0}, p1 = 0, g1[3] = {0, 0, 0};
                        for (int k = 0; k < 3; k++)
                            d[k] = s * u[k];
                        m2p_d(order, c[0] + d[0] - xc[0], c[1] + d[1] - xc[1], c[2] + d[2] - xc[2],
                              eps2, m, &p0, g0);
                        if (P == 2)
                            l2p2_d(L, d[0], d[1], d[2], &p1, g1);
                        else if (P == 3)
                            l2p3_d(L, d[0], d[1], d[2], &p1, g1);
                        else
                            l2p4_d(L, d[0], d[1], d[2], &p1, g1);
                        const double e = fabs(p1 - p0) / fabs(p0);
                        const double g = sqrt((g1[0] - g0[0]) * (g1[0] - g0[0]) +
                                              (g1[1] - g0[1]) * (g1[1] - g0[1]) +
                                              (g1[2] - g0[2]) * (g1[2] - g0[2])) /
                                         sqrt(g0[0] * g0[0] + g0[1] * g0[1] + g0[2] * g0[2]);
                        ep[h] = e > ep[h] ? e : ep[h];
                        eg[h] = g > eg[h] ? g : eg[h];
                    }
                }
                check_context("local P %d order %d soft %d", P, order, soft);
                const int pp = P < 4 ? P + 1 : 5 - order; /* the potential's O(delta^pp) */
                CHECK_LE(ep[0], P == 2 ? 1e-4 : P == 3 ? 1e-5 : 1e-6, "M2L + L2P against M2P, pot");
                CHECK_LE(eg[0],
                         P == 2   ? 3e-3
                         : P == 3 ? 3e-4
                                  : 3e-5,
                         "M2L + L2P against M2P, grad");
                CHECK_MSG(ep[1] < ep[0] / (1 << (pp - 1)),
                          "pot error %.2e -> %.2e: not O(delta^%d)", ep[0], ep[1], pp);
                CHECK_MSG(eg[1] < eg[0] / (1 << (pp - 2)),
                          "grad error %.2e -> %.2e: not O(delta^%d)", eg[0], eg[1], pp - 1);
            }
}

/* bh_local.h for eps2 = 0: the order-4 M2L that computes only the coefficients with bz <= 1
 * (the A_k with kz >= 2 from Laplace's equation), completed by local4_from_harm, equals the
 * full M2L (moment orders 0..2) to rounding. */
static void test_local_harmonic(void)
{
    test_rng rng = test_rng_seed(67);
    for (int order = 0; order <= 2; order++)
        for (int trial = 0; trial < 4; trial++) {
            double m[FMK_BH_MOMENTS], r[3];
            for (int k = 0; k < FMK_BH_MOMENTS; k++)
                m[k] = (k == 0 ? 2 : k < 4 ? 0.3 : 0.09) * (2 * test_uniform(&rng) - 1);
            for (int k = 0; k < 3; k++)
                r[k] = 4 * (2 * test_uniform(&rng) - 1);
            r[trial % 3] += 5;
            double L[FMK_BH_LOCAL4] = {0}, H[FMK_BH_HARM4] = {0}, Lh[FMK_BH_LOCAL4];
            m2l4_d(order, r[0], r[1], r[2], 0, m, L);
            m2l4_harm_d(order, r[0], r[1], r[2], m, H);
            local4_from_harm_d(H, Lh);
            double e = 0, nrm = 0;
            for (int k = 0; k < FMK_BH_LOCAL4; k++)
                e = fmax(e, fabs(Lh[k] - L[k])), nrm = fmax(nrm, fabs(L[k]));
            check_context("harmonic order %d trial %d", order, trial);
            CHECK_LE(e / nrm, 1e-13, "harmonic M2L against the full M2L");
        }
}

int main(void)
{
    test_sort();
    test_local_ops();
    test_local_harmonic();
    test_trees();
    test_accuracy(TEST_DIST_CUBE, 0);
    test_accuracy(TEST_DIST_PLUMMER, 0);
    test_accuracy(TEST_DIST_CLUSTERED, 0);
    test_accuracy(TEST_DIST_CUBE, 1);
    test_walks_agree(FMK_KERNEL_LAPLACE, 0);
    test_walks_agree(FMK_KERNEL_PLUMMER, 0.01);
    test_targets();
    test_close_pairs();
    test_local_step();
    test_degenerate();
    test_memory();
    return check_summary();
}
