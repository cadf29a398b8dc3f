/* fmm3d_cpu.c -- benchmark of the CPU 3D FMM (method fmm, backend cpu, laplace, fp64, potential
 * and gradient, every core unless OMP_NUM_THREADS says otherwise). set_points and eval are timed
 * separately, wall clock, the best of repeats; the phases from fmk_info. Errors: relative l2 of
 * the potential and of the gradient at 1000 sampled targets against the direct sum (method
 * direct, fp64, exact frame). Prints tables, or JSON with --json.
 *
 *   fmm3d_cpu bar [N]    N (default 10^6) uniform points, eps 1e-3, 1e-6, 1e-9: set_points +
 *                        eval, phases, errors, and the same with the P2P knobs changed (one
 *                        target at a time; two Newton steps; each leaf pair one-sided, not
 *                        both ways at once; M2L blocks of the other size), beside FMM3D's times on the
 *                        same kind of machine (the numbers of the bar, measured with FMM3D's
 *                        optimized build: 1.64, 2.52, 4.42 s on 16 cores)
 *   fmm3d_cpu nd [N]     N (default 2 10^5) uniform and Plummer points, eps 1e-3, 1e-6, 1e-9:
 *                        eval of nd = 1, 2, 4, 8 charge vectors (fmk_plan_eval_many) with the
 *                        plan tuned for one vector and for nd (opts.n_vectors), the time
 *                        against one vector's
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/tune.h"
#include "fmmkit.h"

static int json;
static int first_row = 1;

static void fail(const char *what, fmk_status st, fmk_plan *plan)
{
    fprintf(stderr, "fmm3d_cpu: %s: %s (%s)\n", what, fmk_status_string(st),
            fmk_plan_last_error(plan));
    exit(1);
}

static void points(int plummer, int64_t n, uint64_t seed, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        if (!plummer) {
            for (int k = 0; k < 3; k++)
                x[3 * i + k] = bench_urand(&seed);
            continue;
        }
        double r;
        do /* Plummer radius cut at 20 scale radii */
            r = 1 / sqrt(pow(bench_urand(&seed) * 0.999 + 1e-9, -2.0 / 3) - 1);
        while (!(r < 20));
        const double z = 2 * bench_urand(&seed) - 1, ph = 6.283185307179586 * bench_urand(&seed);
        const double s = sqrt(1 - z * z);
        x[3 * i] = r * s * cos(ph), x[3 * i + 1] = r * s * sin(ph), x[3 * i + 2] = r * z;
    }
}

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++)
        d += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
    return sqrt(d / r);
}

/* The direct sum at the sampled targets (sources: all points), and those targets' indices. */
static void reference(int64_t n, const double *x, const double *q, int m, int64_t *idx,
                      double *pot, double *grad)
{
    uint64_t seed = 77;
    double *y = malloc(sizeof(double) * 3 * (size_t)m);
    for (int i = 0; i < m; i++) {
        idx[i] = (int64_t)(bench_urand(&seed) * (double)n);
        memcpy(y + 3 * i, x + 3 * idx[i], 3 * sizeof(double));
    }
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT, o.backend = FMK_BACKEND_CPU;
    fmk_plan *p = NULL;
    fmk_status st = fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, 1e-6, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points(p, n, x, m, y);
    if (st == FMK_OK)
        st = fmk_plan_eval(p, q, pot, grad);
    if (st != FMK_OK)
        fail("reference", st, p);
    fmk_plan_destroy(p);
    /* the sampled target itself is a source at r = 0: the direct sum skips it as the FMM does */
    free(y);
}

typedef struct run {
    double setup, eval, err_pot, err_grad;
    int order, levels;
    int64_t leaf;
    double phase[FMK_PHASE_COUNT];
} run;

/* set_points + eval of one plan (the best of reps), knobs by name (NULL: defaults). */
static run time_fmm(int64_t n, const double *x, int nd, const double *q, double eps, int hint,
                    const char *knob, double value, int reps)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM, o.backend = FMK_BACKEND_CPU, o.n_vectors = hint;
    double *pot = malloc(sizeof(double) * (size_t)(n * nd));
    double *grad = malloc(sizeof(double) * 3 * (size_t)(n * nd));
    run r = {1e30, 1e30, 0, 0, 0, 0, 0, {0}};
    for (int rep = 0; rep < reps; rep++) {
        fmk_plan *p = NULL;
        fmk_status st = fmk_plan_create(&p, 3, FMK_KERNEL_LAPLACE, eps, &o);
        if (st == FMK_OK && knob)
            st = fmk_plan_tune(p, knob, value);
        const double t0 = bench_now();
        if (st == FMK_OK)
            st = fmk_plan_set_points(p, n, x, 0, NULL);
        const double t1 = bench_now();
        if (st == FMK_OK)
            st = fmk_plan_eval_many(p, nd, q, pot, grad);
        const double t2 = bench_now();
        if (st != FMK_OK)
            fail("fmm", st, p);
        fmk_info info;
        fmk_plan_info(p, &info);
        if (t2 - t1 < r.eval) {
            r.eval = t2 - t1;
            memcpy(r.phase, info.phase_time, sizeof r.phase);
        }
        if (t1 - t0 < r.setup)
            r.setup = t1 - t0;
        r.order = info.order, r.levels = info.levels, r.leaf = info.leaf_size;
        fmk_plan_destroy(p);
    }
    enum { M = 1000 };
    static int64_t idx[M];
    static double rp[M], rg[3 * M], fp[M], fg[3 * M];
    reference(n, x, q, M, idx, rp, rg);
    for (int i = 0; i < M; i++) {
        fp[i] = pot[idx[i]];
        memcpy(fg + 3 * i, grad + 3 * idx[i], 3 * sizeof(double));
    }
    r.err_pot = rel_l2(fp, rp, M), r.err_grad = rel_l2(fg, rg, 3 * M);
    free(pot), free(grad);
    return r;
}

static void print_run(const char *mode, const char *dist, int64_t n, double eps, const char *variant,
                      int nd, int hint, const run *r, double base, double peer)
{
    static const struct {
        fmk_phase k;
        const char *name;
    } ph[] = {{FMK_PHASE_P2M, "p2m"}, {FMK_PHASE_M2L, "m2l"}, {FMK_PHASE_L2P, "l2p"},
              {FMK_PHASE_P2P, "p2p"}};
    if (json) {
        printf("%s{\"mode\": \"%s\", \"dist\": \"%s\", \"n\": %lld, \"eps\": %g, \"variant\": "
               "\"%s\", \"nd\": %d, \"n_vectors\": %d, \"order\": %d, \"leaf\": %lld, "
               "\"setup_s\": %.5f, \"eval_s\": %.5f, \"err_pot\": %.3e, \"err_grad\": %.3e",
               first_row ? "" : ",\n", mode, dist, (long long)n, eps, variant, nd, hint, r->order,
               (long long)r->leaf, r->setup, r->eval, r->err_pot, r->err_grad);
        for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++)
            printf(", \"%s_s\": %.5f", ph[i].name, r->phase[ph[i].k]);
        if (base > 0)
            printf(", \"ratio\": %.3f", r->eval / base);
        if (peer > 0)
            printf(", \"fmm3d_s\": %.3f", peer);
        printf("}");
        first_row = 0;
        return;
    }
    printf("%-8s %8lld %6.0e %-14s %2d %2d %3d %5lld %8.3f %8.3f", dist, (long long)n, eps, variant,
           nd, hint, r->order, (long long)r->leaf, r->setup, r->eval);
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++)
        printf(" %7.3f", r->phase[ph[i].k]);
    printf("  %.1e %.1e", r->err_pot, r->err_grad);
    if (base > 0)
        printf("  x%.2f", r->eval / base);
    if (peer > 0)
        printf("  FMM3D %.2f s: %.2fx", peer, peer / (r->setup + r->eval));
    printf("\n");
}

static void header(void)
{
    if (!json)
        printf("dist            n    eps variant        nd nv   p  leaf  setup_s   eval_s     p2m "
               "    m2l     l2p     p2p  err_pot err_grad\n");
}

static void mode_bar(int64_t n)
{
    static const double eps[3] = {1e-3, 1e-6, 1e-9}, fmm3d[3] = {1.64, 2.52, 4.42};
    double *x = malloc(sizeof(double) * 3 * (size_t)n), *q = malloc(sizeof(double) * (size_t)n);
    points(0, n, 1, x);
    uint64_t seed = 2;
    for (int64_t i = 0; i < n; i++)
        q[i] = 2 * bench_urand(&seed) - 1;
    header();
    for (int e = 0; e < 3; e++) {
        const run r = time_fmm(n, x, 1, q, eps[e], 1, NULL, 0, 3);
        print_run("bar", "uniform", n, eps[e], "default", 1, 1, &r, 0, n == 1000000 ? fmm3d[e] : 0);
        const run a = time_fmm(n, x, 1, q, eps[e], 1, "fmm3d.p2p_targets", 1, 2);
        print_run("bar", "uniform", n, eps[e], "p2p_targets=1", 1, 1, &a, 0, 0);
        const run b = time_fmm(n, x, 1, q, eps[e], 1, "fmm3d.newton", 2, 2);
        print_run("bar", "uniform", n, eps[e], "newton=2", 1, 1, &b, 0, 0);
        const run c = time_fmm(n, x, 1, q, eps[e], 1, "fmm3d.mutual", 0, 2);
        print_run("bar", "uniform", n, eps[e], "mutual=0", 1, 1, &c, 0, 0);
        const int other = eps[e] < 1e-7 ? 32 : 64; /* the default: 64 from order 20 */
        const run d = time_fmm(n, x, 1, q, eps[e], 1, "fmm3d.m2l_nodes", other, 2);
        print_run("bar", "uniform", n, eps[e], other == 32 ? "m2l_nodes=32" : "m2l_nodes=64", 1, 1,
                  &d, 0, 0);
    }
    free(x), free(q);
}

static void mode_nd(int64_t n)
{
    static const double eps[3] = {1e-3, 1e-6, 1e-9};
    static const int nds[4] = {1, 2, 4, 8};
    double *x = malloc(sizeof(double) * 3 * (size_t)n), *q = malloc(sizeof(double) * 8 * (size_t)n);
    uint64_t seed = 2;
    for (int64_t i = 0; i < 8 * n; i++)
        q[i] = 2 * bench_urand(&seed) - 1;
    header();
    for (int pl = 0; pl < 2; pl++) {
        points(pl, n, 1 + (uint64_t)pl, x);
        for (int e = 0; e < 3; e++) {
            const run one = time_fmm(n, x, 1, q, eps[e], 1, NULL, 0, 2);
            print_run("nd", pl ? "plummer" : "uniform", n, eps[e], "default", 1, 1, &one, 0, 0);
            for (int k = 1; k < 4; k++)
                for (int tuned = 0; tuned < 2; tuned++) {
                    const int hint = tuned ? nds[k] : 1;
                    const run r = time_fmm(n, x, nds[k], q, eps[e], hint, NULL, 0, 2);
                    print_run("nd", pl ? "plummer" : "uniform", n, eps[e], "default", nds[k], hint,
                              &r, one.eval, 0);
                }
        }
    }
    free(x), free(q);
}

int main(int argc, char **argv)
{
    const char *mode = "bar";
    int64_t n = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--json"))
            json = 1;
        else if (argv[a][0] >= '0' && argv[a][0] <= '9')
            n = (int64_t)atof(argv[a]);
        else
            mode = argv[a];
    }
    if (json)
        printf("[\n");
    if (!strcmp(mode, "bar"))
        mode_bar(n > 0 ? n : 1000000);
    else if (!strcmp(mode, "nd"))
        mode_nd(n > 0 ? n : 200000);
    else {
        fprintf(stderr, "fmm3d_cpu: unknown mode %s (bar, nd)\n", mode);
        return 2;
    }
    if (json)
        printf("\n]\n");
    return 0;
}
