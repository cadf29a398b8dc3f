/* test_poisson_device_gpu.c -- fmk_poisson_solve_device: omega and the results as CUDA device
 * pointers. Method treecode (its own device path) gives the host solve's results bit for bit:
 * the rings' two-level grid at effective 64^3, eps 1e-4 (fp32 sums) and 1e-6 (fp64), 3
 * components with and without u and 1 component, a second omega of the same support (the
 * support checked on the GPU, plans kept) and one of another support (plans made again), omega
 * zero everywhere. Methods without a device path (direct, fft, fmm, the treecode's hybrid mode)
 * staged through the host: the host's results again. Refusals: NaN in omega, a host pointer, a
 * CPU solver; nothing written then. Exit 77 without a GPU. --quick: a smaller grid and eps 1e-4
 * alone, for compute-sanitizer's racecheck. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit_poisson.h"

#include "gpu_check.h"

static double max_diff(const double *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - b[i]);
        m = d > m ? d : m;
    }
    return m;
}

static fmk_poisson *make(const fmk_grid *blocks, int64_t nu, fmk_poisson_method method,
                         fmk_backend backend, int hybrid, double eps)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = method, o.backend = backend, o.hybrid = hybrid;
    fmk_poisson *ps = NULL;
    fmk_status st = fmk_poisson_create(&ps, eps, &o);
    if (st == FMK_OK)
        st = blocks ? fmk_poisson_set_blocks(ps, blocks)
                    : fmk_poisson_set_grid(ps, nu, nu, nu, 1.0 / nu, NULL);
    CHECK(st == FMK_OK, "create/grid (%s): %s", fmk_poisson_method_name(method),
          fmk_poisson_last_error(ps));
    if (st != FMK_OK) {
        fmk_poisson_destroy(ps);
        return NULL;
    }
    return ps;
}

typedef struct dev {
    double *om, *psi, *u;
    int64_t np;
} dev;

/* The host solve and the device solve of the same omega by the same solver: equal results
 * (tol 0: bit for bit). */
static double max_abs(const double *a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m > 0 ? m : 1;
}

static void same_as_host(const char *name, fmk_poisson *ps, dev *d, int nc, const double *omega,
                         int with_u, double tol, int device_first)
{
    const int64_t np = d->np;
    double *hp = malloc(sizeof(double) * 3 * np), *hu = malloc(sizeof(double) * 3 * np),
           *dp = malloc(sizeof(double) * 3 * np), *du = malloc(sizeof(double) * 3 * np);
    for (int k = 0; k < 2; k++) {
        if (k == device_first) {
            CHECK(fmk_poisson_solve(ps, nc, omega, hp, with_u ? hu : NULL) == FMK_OK,
                  "%s host: %s", name, fmk_poisson_last_error(ps));
            continue;
        }
        CUDA_OK(cudaMemcpy(d->om, omega, sizeof(double) * nc * np, cudaMemcpyHostToDevice));
        const fmk_status st = fmk_poisson_solve_device(ps, nc, d->om, d->psi, with_u ? d->u : NULL);
        CHECK(st == FMK_OK, "%s device: %s", name, fmk_poisson_last_error(ps));
    }
    CUDA_OK(cudaMemcpy(dp, d->psi, sizeof(double) * nc * np, cudaMemcpyDeviceToHost));
    const double ep = max_diff(dp, hp, nc * np) / max_abs(hp, nc * np);
    double eu = 0;
    if (with_u) {
        CUDA_OK(cudaMemcpy(du, d->u, sizeof(double) * 3 * np, cudaMemcpyDeviceToHost));
        eu = max_diff(du, hu, 3 * np) / max_abs(hu, 3 * np);
    }
    fmk_poisson_info in;
    fmk_poisson_get_info(ps, &in);
    printf("  %-30s %d comp%s, %s first: device - host: Psi %.1e, u %.1e (%.3f s, plans %.3f "
           "s)\n",
           name, nc, with_u ? " + u" : "", device_first ? "device" : "host", ep, eu,
           in.solve_time, in.time_plans);
    CHECK(ep <= tol && eu <= tol, "%s: device and host solves differ (Psi %.3g, u %.3g)", name,
          ep, eu);
    free(hp), free(hu), free(dp), free(du);
}

int main(int argc, char **argv)
{
    /* --quick: a 32^3 grid and eps 1e-4 alone (for compute-sanitizer's racecheck) */
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    (void)urand;
    if (fmk_cuda_device_count() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    fmk_grid *g = NULL;
    if (fmk_poisson_rings_grid(&g, quick ? 32 : 64, 8, 1e-4) != FMK_OK)
        return fprintf(stderr, "%s\n", fmk_poisson_last_error(NULL)), 2;
    int64_t np = 0;
    fmk_grid_get(g, NULL, &np, NULL, NULL, NULL, NULL);
    double *x = malloc(sizeof(double) * 3 * np), *w = malloc(sizeof(double) * 3 * np),
           *w2 = malloc(sizeof(double) * 3 * np), *w1 = malloc(sizeof(double) * np),
           *zero = calloc(3 * (size_t)np, sizeof(double)), *h = malloc(sizeof(double) * 3 * np);
    fmk_grid_points(g, x, NULL);
    fmk_poisson_rings(np, x, w, NULL, NULL);
    for (int64_t i = 0; i < 3 * np; i++) /* another omega: the same support, or half of it */
        w2[i] = x[i - i % 3] < 0.5 ? 0 : -2 * w[i];
    for (int64_t i = 0; i < np; i++)
        w1[i] = w[3 * i + 2];
    dev d = {NULL, NULL, NULL, np};
    CUDA_OK(cudaMalloc((void **)&d.om, sizeof(double) * 3 * np));
    CUDA_OK(cudaMalloc((void **)&d.psi, sizeof(double) * 3 * np));
    CUDA_OK(cudaMalloc((void **)&d.u, sizeof(double) * 3 * np));

    printf("treecode's device path against its host path (max |diff| / max |Psi|)\n");
    const double eps_list[2] = {1e-4, 1e-6};
    for (int e = 0; e < (quick ? 1 : 2); e++) {
        fmk_poisson *tc = make(g, 0, FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, eps_list[e]);
        if (!tc)
            continue;
        char name[64];
        snprintf(name, sizeof name, "eps %.0e, rings", eps_list[e]);
        same_as_host(name, tc, &d, 3, w, 0, 0, 0);
        /* a device solve first, then the host's: same omega again (support kept) */
        for (int64_t i = 0; i < 3 * np; i++)
            h[i] = 0.5 * w[i];
        snprintf(name, sizeof name, "eps %.0e, same support", eps_list[e]);
        same_as_host(name, tc, &d, 3, h, 0, 0, 1);
        snprintf(name, sizeof name, "eps %.0e, with u", eps_list[e]);
        same_as_host(name, tc, &d, 3, w, 1, 0, 1);
        snprintf(name, sizeof name, "eps %.0e, another support", eps_list[e]);
        same_as_host(name, tc, &d, 3, w2, 0, 0, 1);
        snprintf(name, sizeof name, "eps %.0e, one component", eps_list[e]);
        same_as_host(name, tc, &d, 1, w1, 0, 0, 1);
        snprintf(name, sizeof name, "eps %.0e, zero omega", eps_list[e]);
        same_as_host(name, tc, &d, 3, zero, 1, 0, 1);
        fmk_poisson_destroy(tc);
    }

    printf("results at chosen blocks (device and host against the full solve)\n");
    int64_t n_blocks = 0;
    fmk_grid_get(g, &n_blocks, NULL, NULL, NULL, NULL, NULL);
    const int64_t b3 = np / n_blocks;
    int64_t chosen[7];
    for (int k = 0; k < 7; k++)
        chosen[k] = (n_blocks - 1 - 37 * k + 7 * n_blocks) % n_blocks;
    const fmk_poisson_method tmethods[2] = {FMK_POISSON_TREECODE, FMK_POISSON_DIRECT};
    for (int k = 0; k < 2; k++) {
        fmk_poisson *ps = make(g, 0, tmethods[k], FMK_BACKEND_CUDA, 0, 1e-4);
        if (!ps)
            continue;
        double *full = malloc(sizeof(double) * 3 * np), *fu = malloc(sizeof(double) * 3 * np);
        double *part = malloc(sizeof(double) * 3 * 7 * b3), *pu = malloc(sizeof(double) * 3 * 7 * b3);
        CHECK(fmk_poisson_solve(ps, 3, w, full, fu) == FMK_OK, "%s", fmk_poisson_last_error(ps));
        CHECK(fmk_poisson_set_targets(ps, 7, chosen) == FMK_OK, "%s", fmk_poisson_last_error(ps));
        for (int dev_first = 0; dev_first < 2; dev_first++) {
            int same = 1;
            if (dev_first) {
                CUDA_OK(cudaMemcpy(d.om, w, sizeof(double) * 3 * np, cudaMemcpyHostToDevice));
                CHECK(fmk_poisson_solve_device(ps, 3, d.om, d.psi, d.u) == FMK_OK, "%s",
                      fmk_poisson_last_error(ps));
                CUDA_OK(cudaMemcpy(part, d.psi, sizeof(double) * 3 * 7 * b3, cudaMemcpyDeviceToHost));
                CUDA_OK(cudaMemcpy(pu, d.u, sizeof(double) * 3 * 7 * b3, cudaMemcpyDeviceToHost));
            } else
                CHECK(fmk_poisson_solve(ps, 3, w, part, pu) == FMK_OK, "%s",
                      fmk_poisson_last_error(ps));
            for (int t = 0; t < 7; t++)
                same &= !memcmp(part + 3 * b3 * t, full + 3 * b3 * chosen[t],
                                sizeof(double) * 3 * (size_t)b3) &&
                        !memcmp(pu + 3 * b3 * t, fu + 3 * b3 * chosen[t],
                                sizeof(double) * 3 * (size_t)b3);
            fmk_poisson_info in;
            fmk_poisson_get_info(ps, &in);
            printf("  %-10s %s: 7 of %lld blocks, %lld bricks: %s\n",
                   fmk_poisson_method_name(tmethods[k]), dev_first ? "device" : "host",
                   (long long)n_blocks, (long long)in.n_bricks, same ? "the same bits" : "DIFFERENT");
            CHECK(same, "%s: chosen blocks differ from the full solve",
                  fmk_poisson_method_name(tmethods[k]));
        }
        fmk_poisson_destroy(ps);
        free(full), free(fu), free(part), free(pu);
    }

    printf("staged through the host\n");
    fmk_poisson *hy = make(g, 0, FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 1, 1e-4);
    if (hy)
        same_as_host("treecode, hybrid", hy, &d, 3, w, 1, 0, 1);
    fmk_poisson_destroy(hy);
    fmk_grid_destroy(g);
    /* a small uniform grid for direct, fmm and fft */
    const int64_t nu = 24, nu3 = nu * nu * nu;
    double *xu = malloc(sizeof(double) * 3 * nu3), *wu = malloc(sizeof(double) * 3 * nu3);
    for (int64_t i = 0; i < nu3; i++)
        xu[3 * i] = (i % nu) / (double)nu, xu[3 * i + 1] = (i / nu % nu) / (double)nu,
                xu[3 * i + 2] = (i / (nu * nu)) / (double)nu;
    fmk_poisson_rings(nu3, xu, wu, NULL, NULL);
    d.np = nu3;
    const fmk_poisson_method staged[3] = {FMK_POISSON_DIRECT, FMK_POISSON_FMM, FMK_POISSON_FFT};
    for (int k = 0; k < 3; k++) {
        if (!fmk_poisson_method_available(staged[k]))
            continue;
        fmk_poisson *ps = make(NULL, nu, staged[k], FMK_BACKEND_CUDA, 0, 1e-6);
        if (ps)
            same_as_host(fmk_poisson_method_name(staged[k]), ps, &d, 3, wu, 1, 1e-12, 1);
        fmk_poisson_destroy(ps);
    }

    printf("refusals\n");
    fmk_poisson *tc = make(NULL, nu, FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, 1e-4);
    double *sentinel = malloc(sizeof(double) * 3 * nu3), *back = malloc(sizeof(double) * 3 * nu3);
    for (int64_t i = 0; i < 3 * nu3; i++)
        sentinel[i] = 12345.0;
    if (tc) {
        CUDA_OK(cudaMemcpy(d.psi, sentinel, sizeof(double) * 3 * nu3, cudaMemcpyHostToDevice));
        wu[3 * 777 + 1] = NAN;
        CUDA_OK(cudaMemcpy(d.om, wu, sizeof(double) * 3 * nu3, cudaMemcpyHostToDevice));
        fmk_status st = fmk_poisson_solve_device(tc, 3, d.om, d.psi, NULL);
        CHECK(st == FMK_ERR_NONFINITE && strstr(fmk_poisson_last_error(tc), "omega[2332]"),
              "NaN in omega: status %d, %s", (int)st, fmk_poisson_last_error(tc));
        CUDA_OK(cudaMemcpy(back, d.psi, sizeof(double) * 3 * nu3, cudaMemcpyDeviceToHost));
        CHECK(max_diff(back, sentinel, 3 * nu3) == 0, "NaN in omega: psi was written");
        st = fmk_poisson_solve_device(tc, 3, wu, d.psi, NULL);
        CHECK(st == FMK_ERR_ARG, "a host omega: status %d, %s", (int)st,
              fmk_poisson_last_error(tc));
        st = fmk_poisson_solve_device(tc, 3, d.om, sentinel, NULL);
        CHECK(st == FMK_ERR_ARG, "a host psi: status %d, %s", (int)st, fmk_poisson_last_error(tc));
        printf("  %s\n", fmk_poisson_last_error(tc));
        fmk_poisson_destroy(tc);
    }
    fmk_poisson *cpu = make(NULL, nu, FMK_POISSON_TREECODE, FMK_BACKEND_CPU, 0, 1e-4);
    if (cpu) {
        const fmk_status st = fmk_poisson_solve_device(cpu, 3, d.om, d.psi, NULL);
        CHECK(st == FMK_ERR_ARG, "a CPU solver: status %d", (int)st);
        printf("  %s\n", fmk_poisson_last_error(cpu));
        fmk_poisson_destroy(cpu);
    }
    cudaFree(d.om), cudaFree(d.psi), cudaFree(d.u);
    free(x), free(w), free(w2), free(w1), free(zero), free(h), free(xu), free(wu), free(sentinel),
        free(back);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
