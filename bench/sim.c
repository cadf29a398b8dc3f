/* sim.c -- the simulation driver's Plummer sphere at the size of issue 34's bar (CPU): N = 16384
 * in Henon units (crossing time 2 sqrt(2)), Plummer softening 0.01, fixed dt = 1/128, 10
 * crossing times, with the treecode (theta 0.5), the FMM (eps 1e-6) and the direct sum side by
 * side. For each: |dE/E| at the end, the Lagrangian radii (10, 50, 90% of the mass) at every
 * crossing time against their initial values (the largest relative change of any), and the
 * time of a step (force and whole). tests/unit/test_sim_plummer.c runs a smaller case in CI.
 *
 *   bench_sim [--n N] [--crossings C] [--soft S] [--dt DT] [--methods tree,fmm,direct]
 *             [--seed SEED] [--json]
 *
 * The steps come in whole numbers per crossing time (round(2 sqrt(2) / dt)), so no step is
 * shortened to land on a time. Public API only. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit_sim.h"

#include "bench_util.h"

typedef struct result {
    fmk_method method;
    int ok;
    int64_t steps;
    double e0, e1, de;
    double r0[3], worst[3]; /* initial radii, largest relative change of each */
    double r_end[3];
    double seconds, force_per_step, step_per_step;
} result;

static const double fractions[3] = {0.1, 0.5, 0.9};

static int cmp(const void *a, const void *b)
{
    return bench_cmp_double(a, b);
}

static void lagrange(int64_t n, const double *m, const double *x, double *r)
{
    double c[3] = {0, 0, 0}, mt = 0;
    for (int64_t i = 0; i < n; i++) {
        mt += m[i];
        for (int k = 0; k < 3; k++)
            c[k] += m[i] * x[3 * i + k];
    }
    double *d = malloc((size_t)n * sizeof *d);
    if (!d)
        exit(2);
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < 3; k++)
            s += (x[3 * i + k] - c[k] / mt) * (x[3 * i + k] - c[k] / mt);
        d[i] = sqrt(s);
    }
    qsort(d, (size_t)n, sizeof *d, cmp);
    for (int j = 0; j < 3; j++)
        r[j] = d[(int64_t)(fractions[j] * (double)n)];
    free(d);
}

static result run(fmk_method method, int64_t n, int crossings, double soft, double dt,
                  uint64_t seed)
{
    result r;
    memset(&r, 0, sizeof r);
    r.method = method;
    double *m = malloc((size_t)n * sizeof *m), *x = malloc((size_t)n * 3 * sizeof *x),
           *v = malloc((size_t)n * 3 * sizeof *v);
    if (!m || !x || !v)
        exit(2);
    fmk_sim_ic_plummer(n, seed, m, x, v);
    lagrange(n, m, x, r.r0);
    fmk_sim_opts o;
    fmk_sim_opts_default(&o);
    o.plan.method = method;
    o.plan.backend = FMK_BACKEND_CPU;
    if (method == FMK_METHOD_TREE)
        o.plan.theta = 0.5;
    o.eps = 1e-6;
    o.soft = soft;
    o.dt = dt;
    fmk_sim *sim = NULL;
    if (fmk_sim_create(&sim, n, m, x, v, NULL, NULL, &o) != FMK_OK) {
        fprintf(stderr, "%s: %s\n", fmk_method_name(method), fmk_sim_last_error(NULL));
        free(m), free(x), free(v);
        return r;
    }
    fmk_sim_info info;
    fmk_sim_info_get(sim, &info);
    r.e0 = info.total;
    const int64_t per_crossing = (int64_t)llround(2 * sqrt(2.0) / dt);
    double force = 0, t0 = bench_now();
    r.ok = 1;
    for (int c = 1; c <= crossings && r.ok; c++) {
        for (int64_t k = 0; k < per_crossing; k++) {
            if (fmk_sim_step(sim) != FMK_OK) {
                fprintf(stderr, "%s: %s\n", fmk_method_name(method), fmk_sim_last_error(sim));
                r.ok = 0;
                break;
            }
            fmk_sim_info_get(sim, &info);
            force += info.seconds_force;
        }
        fmk_sim_get_state(sim, NULL, x, NULL, NULL, NULL);
        double rc[3];
        lagrange(n, m, x, rc);
        for (int j = 0; j < 3; j++) {
            r.worst[j] = fmax(r.worst[j], fabs(rc[j] / r.r0[j] - 1));
            r.r_end[j] = rc[j];
        }
        fprintf(stderr, "  %-6s crossing %2d: t = %7.3f, E = %.8f, radii %.4f %.4f %.4f\n",
                fmk_method_name(method), c, info.time, info.total, rc[0], rc[1], rc[2]);
    }
    r.seconds = bench_now() - t0;
    fmk_sim_info_get(sim, &info);
    r.steps = info.step;
    r.e1 = info.total;
    r.de = fabs(r.e1 / r.e0 - 1);
    r.force_per_step = r.steps ? force / (double)r.steps : 0;
    r.step_per_step = r.steps ? r.seconds / (double)r.steps : 0;
    fmk_sim_destroy(sim);
    free(m), free(x), free(v);
    return r;
}

int main(int argc, char **argv)
{
    int64_t n = 16384;
    int crossings = 10, json = 0;
    double soft = 0.01, dt = 1.0 / 128;
    uint64_t seed = 2024;
    const char *methods = "tree,fmm,direct";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--crossings") && i + 1 < argc)
            crossings = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--soft") && i + 1 < argc)
            soft = atof(argv[++i]);
        else if (!strcmp(argv[i], "--dt") && i + 1 < argc)
            dt = atof(argv[++i]);
        else if (!strcmp(argv[i], "--methods") && i + 1 < argc)
            methods = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = (uint64_t)atoll(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--n N] [--crossings C] [--soft S] [--dt DT] [--methods "
                    "tree,fmm,direct] [--seed SEED] [--json]\n",
                    argv[0]);
            return 2;
        }
    }
    result res[3];
    int count = 0;
    const fmk_method all[3] = {FMK_METHOD_TREE, FMK_METHOD_FMM, FMK_METHOD_DIRECT};
    for (int k = 0; k < 3; k++)
        if (strstr(methods, fmk_method_name(all[k])))
            res[count++] = run(all[k], n, crossings, soft, dt, seed);
    if (json) {
        printf("{\"n\": %lld, \"crossings\": %d, \"soft\": %g, \"dt\": %g, \"results\": [",
               (long long)n, crossings, soft, dt);
        for (int k = 0; k < count; k++) {
            const result *r = &res[k];
            printf("%s{\"method\": \"%s\", \"ok\": %d, \"steps\": %lld, \"dE_over_E\": %.3e, "
                   "\"lagrange_r0\": [%.5f, %.5f, %.5f], \"lagrange_end\": [%.5f, %.5f, %.5f], "
                   "\"lagrange_worst_change\": [%.4f, %.4f, %.4f], \"seconds\": %.2f, "
                   "\"force_s_per_step\": %.5f, \"step_s_per_step\": %.5f}",
                   k ? ", " : "", fmk_method_name(r->method), r->ok, (long long)r->steps, r->de,
                   r->r0[0], r->r0[1], r->r0[2], r->r_end[0], r->r_end[1], r->r_end[2], r->worst[0],
                   r->worst[1], r->worst[2], r->seconds, r->force_per_step, r->step_per_step);
        }
        printf("]}\n");
        return 0;
    }
    printf("Plummer sphere, N = %lld, Henon units, Plummer softening %g, dt = %g, %d crossing "
           "times\n",
           (long long)n, soft, dt, crossings);
    printf("%-7s %6s %10s %24s %24s %9s %9s %8s\n", "method", "steps", "|dE/E|",
           "r10/r50/r90 at start", "largest change (%)", "force ms", "step ms", "total s");
    for (int k = 0; k < count; k++) {
        const result *r = &res[k];
        printf("%-7s %6lld %10.2e %8.4f %7.4f %7.4f %8.2f %7.2f %7.2f %9.2f %9.2f %8.1f%s\n",
               fmk_method_name(r->method), (long long)r->steps, r->de, r->r0[0], r->r0[1], r->r0[2],
               100 * r->worst[0], 100 * r->worst[1], 100 * r->worst[2], 1e3 * r->force_per_step,
               1e3 * r->step_per_step, r->seconds, r->ok ? "" : "  (failed)");
    }
    return 0;
}
