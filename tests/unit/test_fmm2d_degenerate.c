/* test_fmm2d_degenerate.c -- the 2D FMM (CPU) on degenerate point sets, against the direct sum
 * of the points as the FMM's frame holds them (box_frame_points: the same coincident points; the
 * direct sum itself works on the caller's points exactly, so against it the FMM is bounded by its
 * frame's resolution, as docs/reliability.md says under "Far outliers"): a group of
 * coincident points larger than a finest box with one other point (the user's repro) or with
 * uniform points; one far outlier (1e6, 1e12, 1e15 away); clusters nested over 30 octaves;
 * points on a line; separate targets on a coincident group. For log2d and cauchy2d at eps 1e-6
 * and 1e-10: status FMK_OK, every value finite, relative l2 errors of potential and gradient
 * <= eps. The points are first moved onto the grid that the frame maps exactly (snap_to_frame),
 * so that the resolution guard takes them; off that grid it refuses the far outliers. (Boxes of coincident points once had radius 0, and a shortcut pair (P2L, M2P) whose
 * discs touched expanded about a point that was a source: NaN.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fmm2d/fmm2d.h"
#include "testutil.h"

/* The points as the box frame of core/internal.h holds them (x' = 1.5 + (x - c) / w, rounded),
 * mapped back: x_s = c + (x' - 1.5) w, where x' - 1.5 and the product are exact. Points that
 * coincide in the frame come out equal. The box is that of src and trg together. */
static void box_frame_points(int64_t ns, const double *src, int64_t nt, const double *trg,
                             double *src_s, double *trg_s)
{
    double c[2], size = 0;
    for (int k = 0; k < 2; k++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < ns + nt; i++) {
            const double v = i < ns ? src[2 * i + k] : trg[2 * (i - ns) + k];
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
        c[k] = 0.5 * lo + 0.5 * hi;
        size = fmax(size, hi - lo);
    }
    int ex;
    const double m = frexp(size > 0 ? size : 1, &ex);
    const double w = ldexp(1.0, m == 0.5 ? ex - 1 : ex), inv = 1 / w;
    for (int64_t i = 0; i < ns + nt; i++)
        for (int k = 0; k < 2; k++) {
            const double v = i < ns ? src[2 * i + k] : trg[2 * (i - ns) + k];
            const double mapped = 1.5 + (v - c[k]) * inv;
            *(i < ns ? &src_s[2 * i + k] : &trg_s[2 * (i - ns) + k]) = c[k] + (mapped - 1.5) * w;
        }
}

/* The FMM (N_d = leaf, 0: the default) and the direct sum of the same input as the FMM's frame
 * holds it; checks finiteness and the errors against tol. */
static void compare(const char *what, fmk_kernel k, double eps, double tol, int64_t leaf,
                    int64_t ns, const double *src, const double *q, int64_t nt, const double *trg)
{
    const int64_t m = trg ? nt : ns;
    const int w = k == FMK_KERNEL_CAUCHY2D ? 2 : 1;
    double *pot = test_alloc(w * m), *grad = test_alloc(2 * m);
    double *rp = test_alloc(w * m), *rg = test_alloc(2 * m);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    o.threads = 2;
    o.leaf_size = leaf;
    check_context("%s, %s, eps %g, N_d %lld", what, fmk_kernel_name(k), eps, (long long)leaf);
    CHECK_STATUS(test_run_opts(k, eps, &o, ns, src, q, nt, trg, pot, grad, NULL), FMK_OK);
    double *src_s = test_alloc(2 * ns), *trg_s = test_alloc(2 * (trg ? nt : 1));
    box_frame_points(ns, src, trg ? nt : 0, trg, src_s, trg_s);
    CHECK_STATUS(
        test_run(k, FMK_PRECISION_FP64, 2, 0, ns, src_s, q, nt, trg ? trg_s : NULL, rp, rg),
        FMK_OK);
    free(src_s), free(trg_s);
    int64_t bad = 0;
    for (int64_t i = 0; i < w * m; i++)
        bad += !isfinite(pot[i]) || !isfinite(rp[i]);
    for (int64_t i = 0; i < 2 * m; i++)
        bad += !isfinite(grad[i]) || !isfinite(rg[i]);
    const double ep = test_rel_l2(pot, rp, w * m), eg = test_rel_l2(grad, rg, 2 * m);
    printf("%-26s %-8s eps %-6.0e N_d %2lld pot %9.2e grad %9.2e\n", what, fmk_kernel_name(k), eps,
           (long long)leaf, ep, eg);
    CHECK_MSG(bad == 0, "%lld values not finite", (long long)bad);
    CHECK_MSG(ep <= tol, "potential error %.3e > %.0e", ep, tol);
    CHECK_MSG(eg <= tol, "gradient error %.3e > %.0e", eg, tol);
    free(pot), free(grad), free(rp), free(rg);
}

/* Moves the points (and targets) onto the grid of 2^-51 of the power of two at or above their
 * box, which the frame maps exactly: the FMM and the direct sum then see the points as given,
 * and the resolution guard, knowing that rounding cost nothing, takes every eps (the outliers
 * at 1e12 and 1e15 then leave lattices of coincident groups, as the frame's rounding did). */
static void snap_to_frame(int64_t ns, double *src, int64_t nt, double *trg)
{
    for (int pass = 0; pass < 2; pass++) { /* again, should the box have shrunk past a power */
        double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY}, extent = 0;
        for (int64_t i = 0; i < ns + nt; i++)
            for (int k = 0; k < 2; k++) {
                const double v = i < ns ? src[2 * i + k] : trg[2 * (i - ns) + k];
                lo[k] = fmin(lo[k], v), hi[k] = fmax(hi[k], v);
            }
        for (int k = 0; k < 2; k++)
            extent = fmax(extent, hi[k] - lo[k]);
        int e = 0;
        while (ldexp(1.0, e) < extent)
            e++;
        while (e > -60 && ldexp(1.0, e - 1) >= extent)
            e--;
        for (int64_t i = 0; i < ns + nt; i++)
            for (int k = 0; k < 2; k++) {
                double *v = i < ns ? src + 2 * i + k : trg + 2 * (i - ns) + k;
                *v = ldexp(nearbyint(ldexp(*v, 51 - e)), e - 51);
            }
    }
}

/* Every case for both kernels and both eps, charges 1 (the repro) or random: with the default
 * N_d, errors <= eps; with N_d = 8 (deeper trees, more boxes of coincident points), finite and
 * errors <= 10 eps: the order from eps keeps a margin of a tenth of the terms measured on random
 * points (fmm2d.h), which sets whose boxes have points on their corners use up at small N_d
 * (a 40 x 40 lattice, N_d 8, cauchy2d, eps 1e-6: gradient error 6.6e-7; the outlier at 1e15
 * leaves a 5 x 5 lattice of coincident groups in the frame: 1.05e-6). */
static void both(const char *what, int64_t ns, const double *src_in, int unit_charges, int64_t nt,
                 const double *trg_in)
{
    const double epss[2] = {1e-6, 1e-10};
    double *q = test_alloc(2 * ns), *src = test_alloc(2 * ns), *trg = NULL;
    memcpy(src, src_in, sizeof(double) * 2 * (size_t)ns);
    if (trg_in) {
        trg = test_alloc(2 * nt);
        memcpy(trg, trg_in, sizeof(double) * 2 * (size_t)nt);
    }
    snap_to_frame(ns, src, trg ? nt : 0, trg);
    for (int kk = 0; kk < 2; kk++) {
        const fmk_kernel k = kk ? FMK_KERNEL_CAUCHY2D : FMK_KERNEL_LOG2D;
        test_charges(ns, kk, 17, q);
        if (unit_charges)
            for (int64_t i = 0; i < ns; i++) {
                if (kk)
                    q[2 * i] = 1, q[2 * i + 1] = 0;
                else
                    q[i] = 1;
            }
        for (int e = 0; e < 4; e++)
            compare(what, k, epss[e % 2], (e < 2 ? 1 : 10) * epss[e % 2], e < 2 ? 0 : 8, ns, src, q,
                    nt, trg);
    }
    free(q), free(src), free(trg);
}

static void uniform(int64_t n, uint64_t seed, double *x)
{
    test_rng r = test_rng_seed(seed);
    for (int64_t i = 0; i < 2 * n; i++)
        x[i] = test_uniform(&r);
}

/* x = zeros((100, 2)); x[-1] = 1 (99 NaN before the fix). */
static void repro(void)
{
    double x[200] = {0};
    x[198] = x[199] = 1;
    both("99 coincident + 1", 100, x, 1, 0, NULL);
}

/* A coincident group of 5 finest boxes (the largest N_d of the two eps) among uniform points,
 * at one of them and at a corner of their square; and the group as separate targets. */
static void coincident_group(void)
{
    const int64_t nd = fmk_fmm2d_leaf_size_for(fmk_fmm2d_order_from_eps(1e-10));
    const int64_t ng = 5 * nd, nu = 1500, n = ng + nu;
    double *x = test_alloc(2 * n);
    uniform(nu, 3, x + 2 * ng);
    for (int64_t i = 0; i < ng; i++)
        x[2 * i] = x[2 * ng], x[2 * i + 1] = x[2 * ng + 1];
    both("group at a uniform point", n, x, 0, 0, NULL);
    for (int64_t i = 0; i < ng; i++)
        x[2 * i] = 0, x[2 * i + 1] = 0;
    both("group at a corner", n, x, 0, 0, NULL);
    /* targets: the group again and the uniform points shifted */
    double *y = test_alloc(2 * n);
    memcpy(y, x, sizeof(double) * 2 * (size_t)n);
    for (int64_t i = 2 * ng; i < 2 * n; i++)
        y[i] += 1e-3;
    both("group, separate targets", n, x, 0, n, y);
    free(x), free(y);
}

/* Uniform points and one outlier at distance 1e6, 1e12, 1e15; and the points as drawn (off
 * the frame's grid), which the resolution guard refuses at eps 1e-6 when the outlier is 1e12
 * away (the unit square's points are then kept to 1e-4 of the frame). */
static void outliers(void)
{
    const int64_t n = 1200;
    double *x = test_alloc(2 * n), *q = test_alloc(n), *pot = test_alloc(n);
    const double far[3] = {1e6, 1e12, 1e15};
    for (int c = 0; c < 3; c++) {
        char what[64];
        uniform(n, 5 + c, x);
        x[2 * (n / 2)] = far[c], x[2 * (n / 2) + 1] = -0.5 * far[c];
        snprintf(what, sizeof what, "outlier at %.0e", far[c]);
        both(what, n, x, 0, 0, NULL);
    }
    uniform(n, 6, x);
    x[2 * (n / 2)] = 1e12, x[2 * (n / 2) + 1] = -0.5e12;
    test_charges(n, 0, 17, q);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    fmk_plan *plan = NULL;
    check_context("outlier at 1e12 off the grid, eps 1e-6");
    CHECK_STATUS(fmk_plan_create(&plan, 2, FMK_KERNEL_LOG2D, 1e-6, &o), FMK_OK);
    CHECK(fmk_plan_set_points(plan, n, x, 0, NULL) == FMK_ERR_ACCURACY);
    CHECK(strstr(fmk_plan_last_error(plan), "outliers") != NULL);
    CHECK(fmk_plan_eval(plan, q, pot, NULL) == FMK_ERR_STATE); /* no points */
    fmk_plan_destroy(plan);
    free(x), free(q), free(pot);
}

/* Clusters nested over 30 octaves: 100 points uniform in the square of side 2^-k about
 * (0.3, 0.6), k = 0 .. 30. */
static void nested(void)
{
    const int per = 100, octaves = 31;
    const int64_t n = (int64_t)per * octaves;
    double *x = test_alloc(2 * n);
    test_rng r = test_rng_seed(11);
    for (int k = 0; k < octaves; k++)
        for (int i = 0; i < per; i++) {
            double *p = x + 2 * ((int64_t)k * per + i);
            p[0] = 0.3 + ldexp(test_uniform(&r) - 0.5, -k);
            p[1] = 0.6 + ldexp(test_uniform(&r) - 0.5, -k);
        }
    both("nested over 30 octaves", n, x, 0, 0, NULL);
    free(x);
}

/* Points on a horizontal and on a diagonal line. */
static void lines(void)
{
    const int64_t n = 1500;
    double *x = test_alloc(2 * n);
    test_rng r = test_rng_seed(13);
    for (int64_t i = 0; i < n; i++)
        x[2 * i] = test_uniform(&r), x[2 * i + 1] = 0.25;
    both("horizontal line", n, x, 0, 0, NULL);
    for (int64_t i = 0; i < n; i++)
        x[2 * i + 1] = 0.5 * x[2 * i] - 1;
    both("diagonal line", n, x, 0, 0, NULL);
    free(x);
}

int main(void)
{
    repro();
    coincident_group();
    outliers();
    nested();
    lines();
    return check_summary();
}
