/* test_poisson_treecode_gpu.c -- method treecode of the Poisson solver on the GPU (all on the
 * GPU, and hybrid) against method direct on the CPU, through the public API: the rings'
 * two-level grid at effective 64^3 and a uniform 40 x 36 x 44 grid, 1 and 3 components, Psi
 * alone and with u, eps 1e-2 .. 1e-8 (fp32 direct part from 1e-4 on, fp64 below); the plans
 * kept for a second omega of the same support and made again for another support. Relative l2
 * errors of Psi and u each within eps. Exit 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit_poisson.h"

#include "gpu_check.h"

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

typedef struct grid {
    fmk_grid *blocks; /* NULL: uniform */
    int64_t n[3], np;
    double h;
} grid;

static fmk_poisson *make(const grid *g, fmk_poisson_method method, fmk_backend backend,
                         int hybrid, double eps)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method;
    o.backend = backend;
    o.hybrid = hybrid;
    fmk_poisson *ps = NULL;
    fmk_status st = fmk_poisson_create(&ps, eps, &o);
    if (st == FMK_OK)
        st = g->blocks ? fmk_poisson_set_blocks(ps, g->blocks)
                       : fmk_poisson_set_grid(ps, g->n[0], g->n[1], g->n[2], g->h, NULL);
    CHECK(st == FMK_OK, "create/grid (%s, backend %d, hybrid %d): %s",
          fmk_poisson_method_name(method), (int)backend, hybrid,
          fmk_poisson_last_error(ps ? ps : NULL));
    if (st != FMK_OK) {
        fmk_poisson_destroy(ps);
        return NULL;
    }
    return ps;
}

static void run(const char *name, const grid *g, const double *omega3)
{
    const int64_t np = g->np;
    double *omega1 = malloc(sizeof(double) * np), *ref_p = malloc(sizeof(double) * 3 * np),
           *ref_u = malloc(sizeof(double) * 3 * np), *p = malloc(sizeof(double) * 3 * np),
           *u = malloc(sizeof(double) * 3 * np), *ref1 = malloc(sizeof(double) * np);
    for (int64_t i = 0; i < np; i++)
        omega1[i] = omega3[3 * i + 1];
    fmk_poisson *direct = make(g, FMK_POISSON_DIRECT, FMK_BACKEND_CPU, 0, 1e-6);
    if (!direct)
        return;
    CHECK(fmk_poisson_solve(direct, 3, omega3, ref_p, ref_u) == FMK_OK, "direct: %s",
          fmk_poisson_last_error(direct));
    CHECK(fmk_poisson_solve(direct, 1, omega1, ref1, NULL) == FMK_OK, "direct: %s",
          fmk_poisson_last_error(direct));
    const double eps_list[4] = {1e-2, 1e-4, 1e-6, 1e-8};
    for (int hybrid = 0; hybrid < 2; hybrid++)
        for (int e = 0; e < 4; e++) {
            const double eps = eps_list[e];
            fmk_poisson *tc = make(g, FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, hybrid, eps);
            if (!tc)
                continue;
            /* Psi alone (the far part's fast kernel), then Psi and u, then one component */
            CHECK(fmk_poisson_solve(tc, 3, omega3, p, NULL) == FMK_OK, "%s", fmk_poisson_last_error(tc));
            const double e1 = rel_l2(p, ref_p, 3 * np);
            CHECK(fmk_poisson_solve(tc, 3, omega3, p, u) == FMK_OK, "%s", fmk_poisson_last_error(tc));
            const double e2 = rel_l2(p, ref_p, 3 * np), e3 = rel_l2(u, ref_u, 3 * np);
            /* the same kind of solve again (Psi and u): the plans are kept (a solve of Psi
             * alone, above, has its own, whose kernel distance is shorter) */
            CHECK(fmk_poisson_solve(tc, 3, omega3, p, u) == FMK_OK, "%s", fmk_poisson_last_error(tc));
            fmk_poisson_info in;
            fmk_poisson_get_info(tc, &in);
            CHECK(in.time_plans == 0, "%s eps %g: the plans were made again for the same support",
                  name, eps);
            CHECK(rel_l2(p, ref_p, 3 * np) == e2, "%s eps %g: kept plans, another result", name,
                  eps);
            CHECK(fmk_poisson_solve(tc, 1, omega1, p, NULL) == FMK_OK, "%s", fmk_poisson_last_error(tc));
            const double e4 = rel_l2(p, ref1, np);
            printf("  %-10s %-6s eps %.0e: Psi %.2e, with u: Psi %.2e u %.2e, one component %.2e "
                   "(p %d theta %.2f, %.3g direct pairs, %.3g far)\n",
                   name, hybrid ? "hybrid" : "gpu", eps, e1, e2, e3, e4, in.order, in.theta,
                   in.direct_pairs, in.far_pairs);
            CHECK(e1 <= eps && e2 <= eps && e3 <= eps && e4 <= eps,
                  "%s %s eps %g: errors %.2e %.2e %.2e %.2e above eps", name,
                  hybrid ? "hybrid" : "gpu", eps, e1, e2, e3, e4);
            fmk_poisson_destroy(tc);
        }
    fmk_poisson_destroy(direct);
    free(omega1), free(ref_p), free(ref_u), free(p), free(u), free(ref1);
}

int main(void)
{
    (void)urand; /* gpu_check.h's generator: not needed here */
    if (fmk_cuda_device_count() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    printf("treecode on the GPU against direct on the CPU (relative l2, bound eps)\n");
    grid g = {0};
    if (fmk_poisson_rings_grid(&g.blocks, 64, 8, 1e-4) != FMK_OK)
        return fprintf(stderr, "%s\n", fmk_poisson_last_error(NULL)), 2;
    fmk_grid_get(g.blocks, NULL, &g.np, NULL, NULL, NULL, NULL);
    double *x = malloc(sizeof(double) * 3 * g.np), *w = malloc(sizeof(double) * 3 * g.np);
    fmk_grid_points(g.blocks, x, NULL);
    fmk_poisson_rings(g.np, x, w, NULL, NULL);
    run("two-level", &g, w);
    fmk_grid_destroy(g.blocks);
    free(x), free(w);

    grid u = {NULL, {40, 36, 44}, 40 * 36 * 44, 1.0 / 40};
    x = malloc(sizeof(double) * 3 * u.np), w = malloc(sizeof(double) * 3 * u.np);
    for (int64_t i = 0; i < u.np; i++) {
        x[3 * i] = u.h * (i % 40), x[3 * i + 1] = u.h * (i / 40 % 36),
        x[3 * i + 2] = u.h * (i / (40 * 36));
    }
    fmk_poisson_rings(u.np, x, w, NULL, NULL);
    run("uniform", &u, w);
    free(x), free(w);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
