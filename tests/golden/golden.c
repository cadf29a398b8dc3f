/* golden.c -- runs a fixed set of evaluations through the public API and writes every output
 * as a hash on stdout and to DIR/<case>.bin (every value up to 40,000 points, a sample above), so that two builds of fmmkit (before and after a change that must not change
 * behaviour) can be compared bit for bit with tools/same-results.py.
 *
 *   golden DIR [--cpu] [--gpu] [--quick]
 *
 * Uses include/fmmkit.h only; with FMK_GOLDEN_CUDA it also passes device pointers
 * (fmk_plan_set_points_device, fmk_plan_eval_device). Each case line printed on stdout names the
 * case, its status and the file written. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit.h"

#ifdef FMK_GOLDEN_CUDA
#include <cuda_runtime.h>
#endif

/* splitmix64: the same points on every machine */
static uint64_t rng_state;
static double urand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

enum { DIST_UNIFORM, DIST_PLUMMER, DIST_NESTED, DIST_COUNT };
static const char *dist_name[] = {"uniform", "plummer", "nested"};

static void make_points(int dist, int dim, int64_t n, uint64_t seed, double *x)
{
    rng_state = seed;
    for (int64_t i = 0; i < n; i++) {
        double p[3] = {0, 0, 0};
        if (dist == DIST_UNIFORM) {
            for (int k = 0; k < dim; k++)
                p[k] = urand();
        } else if (dist == DIST_PLUMMER) {
            double r = 1.0 / sqrt(pow(urand() * 0.999 + 1e-6, -2.0 / 3.0) - 1.0);
            double u = 2 * urand() - 1, phi = 6.283185307179586 * urand();
            double s = sqrt(1 - u * u);
            p[0] = r * s * cos(phi);
            p[1] = r * s * sin(phi);
            p[2] = dim == 3 ? r * u : 0;
            if (dim == 2)
                p[0] = r * cos(phi), p[1] = r * sin(phi);
        } else {
            /* clusters nested over 20 octaves around (0.3, 0.3, 0.3), plus a coincident group */
            int level = (int)(urand() * 20);
            double w = ldexp(1.0, -level);
            for (int k = 0; k < dim; k++)
                p[k] = 0.3 + w * (urand() - 0.5);
            if (i % 97 == 0)
                for (int k = 0; k < dim; k++)
                    p[k] = 0.7;
        }
        for (int k = 0; k < dim; k++)
            x[dim * i + k] = p[k];
    }
}

typedef struct golden_case {
    fmk_method method;
    fmk_backend backend;
    fmk_kernel kernel;
    fmk_precision precision;
    double eps;
    double theta;
    int order;
    fmk_walk walk;
    int dist;
    int64_t n, m; /* m = 0: targets are the sources */
    int device;   /* points and charges as device pointers */
} golden_case;

static int write_file(const char *path, const double *a, int64_t count, const double *b,
                      int64_t count_b)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t ok = fwrite(a, sizeof *a, (size_t)count, f) == (size_t)count;
    if (b)
        ok = ok && fwrite(b, sizeof *b, (size_t)count_b, f) == (size_t)count_b;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void case_name(const golden_case *c, char *name, size_t size)
{
    snprintf(name, size, "%s_%s_%s_%s_eps%g_th%g_o%d_w%d_%s_n%lld_m%lld%s",
             fmk_method_name(c->method), fmk_backend_name(c->backend), fmk_kernel_name(c->kernel),
             c->precision == FMK_PRECISION_FP32 ? "fp32" : "fp64", c->eps, c->theta, c->order,
             (int)c->walk, dist_name[c->dist], (long long)c->n, (long long)c->m,
             c->device ? "_dev" : "");
}

static int run_case(const char *dir, const golden_case *c)
{
    char name[256], path[1024];
    case_name(c, name, sizeof name);
    int dim = fmk_kernel_dim(c->kernel);
    int cw = fmk_kernel_is_complex(c->kernel) ? 2 : 1;
    int gw = cw == 2 ? 2 : dim;
    int64_t m = c->m ? c->m : c->n;
    double *xs = malloc(sizeof(double) * dim * c->n);
    double *xt = c->m ? malloc(sizeof(double) * dim * c->m) : NULL;
    double *q = malloc(sizeof(double) * cw * c->n * 2);
    double *pot = calloc((size_t)(cw * m * 2), sizeof(double));
    double *grad = calloc((size_t)(gw * m * 2), sizeof(double));
    if (!xs || (c->m && !xt) || !q || !pot || !grad) {
        printf("%s: out of host memory\n", name);
        return 1;
    }
    make_points(c->dist, dim, c->n, 1234 + c->n, xs);
    if (xt)
        make_points(c->dist == DIST_NESTED ? DIST_UNIFORM : c->dist, dim, c->m, 99 + c->m, xt);
    rng_state = 777;
    for (int64_t i = 0; i < cw * c->n * 2; i++)
        q[i] = urand() - 0.3;

    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method;
    o.backend = c->backend;
    o.precision = c->precision;
    o.theta = c->theta;
    o.order = c->order;
    o.walk = c->walk;
    if (c->kernel == FMK_KERNEL_PLUMMER || c->kernel == FMK_KERNEL_REGULARIZED)
        o.softening = 1e-3;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, dim, c->kernel, c->eps, &o);
    int rc = 0;
    if (st != FMK_OK) {
        printf("%s: create %s: %s\n", name, fmk_status_string(st), fmk_plan_last_error(NULL));
        goto done;
    }
    /* two evaluations with different charges on one set of points: the second reuses state */
    if (!c->device) {
        st = fmk_plan_set_points(plan, c->n, xs, c->m, xt);
        for (int e = 0; e < 2 && st == FMK_OK; e++)
            st = fmk_plan_eval(plan, q + e * cw * c->n, pot + e * cw * m, grad + e * gw * m);
    } else {
#ifdef FMK_GOLDEN_CUDA
        double *d_xs = NULL, *d_xt = NULL, *d_q = NULL, *d_pot = NULL, *d_grad = NULL;
        size_t bs = sizeof(double) * dim * c->n, bt = sizeof(double) * dim * c->m;
        cudaMalloc((void **)&d_xs, bs ? bs : 8);
        cudaMalloc((void **)&d_xt, bt ? bt : 8);
        cudaMalloc((void **)&d_q, sizeof(double) * cw * c->n * 2);
        cudaMalloc((void **)&d_pot, sizeof(double) * cw * m * 2);
        cudaMalloc((void **)&d_grad, sizeof(double) * gw * m * 2);
        cudaMemcpy(d_xs, xs, bs, cudaMemcpyHostToDevice);
        if (xt)
            cudaMemcpy(d_xt, xt, bt, cudaMemcpyHostToDevice);
        cudaMemcpy(d_q, q, sizeof(double) * cw * c->n * 2, cudaMemcpyHostToDevice);
        st = fmk_plan_set_points_device(plan, c->n, d_xs, c->m, xt ? d_xt : NULL);
        for (int e = 0; e < 2 && st == FMK_OK; e++)
            st = fmk_plan_eval_device(plan, d_q + e * cw * c->n, d_pot + e * cw * m,
                                      d_grad + e * gw * m);
        cudaMemcpy(pot, d_pot, sizeof(double) * cw * m * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(grad, d_grad, sizeof(double) * gw * m * 2, cudaMemcpyDeviceToHost);
        cudaFree(d_xs);
        cudaFree(d_xt);
        cudaFree(d_q);
        cudaFree(d_pot);
        cudaFree(d_grad);
#else
        st = FMK_ERR_UNAVAILABLE;
#endif
    }
    if (st != FMK_OK) {
        printf("%s: %s: %s\n", name, fmk_status_string(st), fmk_plan_last_error(plan));
        goto done;
    }
    /* every case: a hash of the output bytes; small cases: the outputs themselves, so that a
     * difference can be measured */
    uint64_t hash = 1469598103934665603ULL;
    const unsigned char *bytes[2] = {(const unsigned char *)pot, (const unsigned char *)grad};
    size_t lens[2] = {sizeof(double) * cw * m * 2, sizeof(double) * gw * m * 2};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < lens[a]; i++)
            hash = (hash ^ bytes[a][i]) * 1099511628211ULL;
    /* up to 40,000 points every value; above, every 61st (enough to measure a difference) */
    int64_t stride = c->n <= 40000 ? 1 : 61, n_pot = cw * m * 2, n_grad = gw * m * 2;
    if (stride > 1) {
        int64_t k = 0;
        for (int64_t i = 0; i < n_pot + n_grad; i += stride, k++)
            pot[k] = i < n_pot ? pot[i] : grad[i - n_pot];
        n_pot = k, n_grad = 0;
    }
    {
        snprintf(path, sizeof path, "%s/%s.bin", dir, name);
        if (write_file(path, pot, n_pot, n_grad ? grad : NULL, n_grad) != 0) {
            printf("%s: cannot write %s\n", name, path);
            rc = 1;
            goto done;
        }
    }
    printf("%s: ok %016llx\n", name, (unsigned long long)hash);
done:
    fflush(stdout);
    fmk_plan_destroy(plan);
    free(xs);
    free(xt);
    free(q);
    free(pot);
    free(grad);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: golden DIR [--cpu] [--gpu] [--quick]\n");
        return 2;
    }
    const char *dir = argv[1];
    int cpu = 0, gpu = 0, quick = 0;
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "--cpu"))
            cpu = 1;
        else if (!strcmp(argv[a], "--gpu"))
            gpu = 1;
        else if (!strcmp(argv[a], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "golden: unknown option %s\n", argv[a]);
            return 2;
        }
    }
    if (!cpu && !gpu)
        cpu = gpu = 1;
    int rc = 0;
    const int64_t sizes_gpu[] = {1500, 40000, 300000, 1 << 20};
    const int64_t sizes_cpu[] = {1500, 20000};
    for (int b = 0; b < 2; b++) {
        fmk_backend backend = b ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
        if ((backend == FMK_BACKEND_CPU && !cpu) || (backend == FMK_BACKEND_CUDA && !gpu))
            continue;
        const int64_t *sizes = b ? sizes_gpu : sizes_cpu;
        int n_sizes = b ? (quick ? 2 : 4) : (quick ? 1 : 2);
        for (int si = 0; si < n_sizes; si++) {
            int64_t n = sizes[si];
            for (int dist = 0; dist < DIST_COUNT; dist++) {
                for (int targets = 0; targets < 2; targets++) {
                    int64_t m = targets ? n / 2 + 7 : 0;
                    for (int prec = 0; prec < 2; prec++) {
                        fmk_precision pr = prec ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
                        int dev = b == 1 && targets == 0 && si == 1; /* some device-pointer cases */
                        /* direct: every kernel */
                        const fmk_kernel kernels[] = {FMK_KERNEL_LAPLACE, FMK_KERNEL_PLUMMER,
                                                      FMK_KERNEL_REGULARIZED, FMK_KERNEL_LOG2D,
                                                      FMK_KERNEL_CAUCHY2D};
                        if (n <= 300000)
                            for (int k = 0; k < 5; k++) {
                                golden_case c = {
                                    FMK_METHOD_DIRECT, backend, kernels[k], pr, 1e-6, 0, -1,
                                    FMK_WALK_AUTO,     dist,    n,          m,  dev};
                                rc |= run_case(dir, &c);
                            }
                        /* tree: laplace and plummer, both walks, orders */
                        for (int k = 0; k < 2; k++)
                            for (int w = 0; w < 3; w++) {
                                golden_case c = {FMK_METHOD_TREE,
                                                 backend,
                                                 kernels[k],
                                                 pr,
                                                 1e-3,
                                                 w == 2 ? 0.4 : 0,
                                                 w == 1 ? 1 : -1,
                                                 (fmk_walk)w,
                                                 dist,
                                                 n,
                                                 m,
                                                 dev};
                                rc |= run_case(dir, &c);
                            }
                        /* fmm 3D */
                        const double eps3[] = {1e-3, 1e-6, 1e-10};
                        for (int k = 0; k < 3; k++)
                            for (int e = 0; e < 3; e++) {
                                if (pr == FMK_PRECISION_FP32 && e > 0)
                                    continue;
                                if (k > 0 && e != 1)
                                    continue;
                                golden_case c = {FMK_METHOD_FMM, backend, kernels[k], pr,
                                                 eps3[e],        0,       -1,         FMK_WALK_AUTO,
                                                 dist,           n,       m,          dev};
                                rc |= run_case(dir, &c);
                            }
                        /* fmm 2D (fp64) */
                        if (pr == FMK_PRECISION_FP64)
                            for (int k = 3; k < 5; k++)
                                for (int e = 0; e < 2; e++) {
                                    golden_case c = {FMK_METHOD_FMM,
                                                     backend,
                                                     kernels[k],
                                                     pr,
                                                     e ? 1e-10 : 1e-4,
                                                     0,
                                                     -1,
                                                     FMK_WALK_AUTO,
                                                     dist,
                                                     n,
                                                     m,
                                                     dev};
                                    rc |= run_case(dir, &c);
                                }
                    }
                }
            }
        }
    }
    return rc;
}
