/* poisson_gpu.c -- the Poisson solver on the GPU (docs/poisson.md): the test problem of van Rees
 * et al. on the rings' two-level grid and on a uniform grid, every method and backend a user
 * would weigh against each other, side by side in one run.
 *
 *   bench_poisson_gpu [--json] [--resolution R] [--uniform N] [--repeat K] [--no-cpu]
 *
 * Table 1, the two-level grid at effective R^3 (default 256, refine 1e-4, b = 16), omega with 3
 * components, Psi only: treecode all on the GPU at eps 1e-4 and 1e-6 (host arrays, and device
 * arrays), hybrid (far part on the
 * CPU, direct part on the GPU) at eps 1e-4, the GPU FMM (regularized kernel) at eps 1e-4, and
 * the CPU treecode at eps 1e-4 (--no-cpu leaves it out). For each: the first solve (which builds
 * the tree and the plans) and the best of K solves with them kept (omega's support unchanged),
 * the phases (info fields), the errors against the analytic Psi and against the direct sum on a
 * sample of 2000 grid points (fmmkit's direct sum, fp64, on the CPU), and for the treecode the
 * direct part's rate: pairs per second of its kernel over the bound of the GPU's fp32 issue
 * rate (SMs x 128 lanes x clock / 13 instructions per pair: 12 fp32 and one rsqrt for three
 * components, treecode/cuda/eval.cu).
 *
 * Table 2, a uniform N^3 grid (default 256; 0 skips it): treecode on the GPU against the FFT on
 * the GPU (cuFFT) and on the CPU (FFTW), time and error against the analytic Psi.
 *
 * Times are wall seconds of fmk_poisson_solve (host arrays in and out), or of
 * fmk_poisson_solve_device for the rows marked "device" (omega and Psi CUDA device arrays). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"
#include "fmmkit_poisson.h"

#define SAMPLE 2000

typedef struct problem {
    fmk_grid *grid; /* NULL: uniform n^3 */
    int64_t n, np;
    double h;
    double *x, *omega, *psi; /* points, exact omega and Psi (3 per point) */
    int64_t sample[SAMPLE];
    double ref[3 * SAMPLE]; /* the direct sum's Psi at the sample */
} problem;

typedef struct config {
    const char *name;
    fmk_poisson_method method;
    fmk_backend backend;
    int hybrid;
    double eps;
    int device; /* 1: omega and Psi CUDA device arrays (fmk_poisson_solve_device) */
} config;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int make_problem(problem *pb, int blocks, int64_t n)
{
    memset(pb, 0, sizeof *pb);
    pb->n = n;
    if (blocks) {
        if (fmk_poisson_rings_grid(&pb->grid, (int32_t)n, 16, 1e-4) != FMK_OK)
            return fprintf(stderr, "rings grid: %s\n", fmk_poisson_last_error(NULL)), 1;
        fmk_grid_get(pb->grid, NULL, &pb->np, NULL, NULL, NULL, NULL);
        pb->h = 1.0 / n;
    } else {
        pb->np = n * n * n;
        pb->h = 1.0 / n;
    }
    pb->x = malloc(sizeof(double) * 3 * pb->np);
    pb->omega = malloc(sizeof(double) * 3 * pb->np);
    pb->psi = malloc(sizeof(double) * 3 * pb->np);
    if (!pb->x || !pb->omega || !pb->psi)
        return fprintf(stderr, "out of memory\n"), 1;
    if (blocks)
        fmk_grid_points(pb->grid, pb->x, NULL);
    else
        for (int64_t p = 0; p < pb->np; p++) {
            pb->x[3 * p] = pb->h * (p % n + 0.5);
            pb->x[3 * p + 1] = pb->h * (p / n % n + 0.5);
            pb->x[3 * p + 2] = pb->h * (p / (n * n) + 0.5);
        }
    if (fmk_poisson_rings(pb->np, pb->x, pb->omega, pb->psi, NULL) != FMK_OK)
        return fprintf(stderr, "rings: %s\n", fmk_poisson_last_error(NULL)), 1;
    /* the direct sum at a sample of points: sources where omega != 0, weight h_j^3 */
    int64_t ns = 0;
    for (int64_t p = 0; p < pb->np; p++)
        ns += pb->omega[3 * p] != 0 || pb->omega[3 * p + 1] != 0 || pb->omega[3 * p + 2] != 0;
    double *sx = malloc(sizeof(double) * 3 * ns), *q = malloc(sizeof(double) * 3 * ns);
    double *sp = malloc(sizeof(double) * 3 * pb->np > 0 ? sizeof(double) * 3 * pb->np : 8);
    if (blocks)
        fmk_grid_points(pb->grid, NULL, sp);
    else
        for (int64_t p = 0; p < pb->np; p++)
            sp[p] = pb->h;
    int64_t j = 0;
    double hmin = pb->h;
    for (int64_t p = 0; p < pb->np; p++)
        if (pb->omega[3 * p] != 0 || pb->omega[3 * p + 1] != 0 || pb->omega[3 * p + 2] != 0) {
            memcpy(sx + 3 * j, pb->x + 3 * p, sizeof(double) * 3);
            const double v = sp[p] * sp[p] * sp[p] / (4 * 3.14159265358979323846);
            for (int a = 0; a < 3; a++)
                q[a * ns + j] = v * pb->omega[3 * p + a];
            j++;
        }
    uint64_t r = 88172645463325252ull;
    double xt[3 * SAMPLE];
    for (int k = 0; k < SAMPLE; k++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        pb->sample[k] = (int64_t)(r % (uint64_t)pb->np);
        memcpy(xt + 3 * k, pb->x + 3 * pb->sample[k], sizeof(double) * 3);
    }
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = FMK_BACKEND_CPU;
    o.softening = hmin;
    fmk_plan *plan = NULL;
    double pot[3 * SAMPLE];
    int bad = fmk_plan_create(&plan, 3, FMK_KERNEL_REGULARIZED, 1e-12, &o) != FMK_OK ||
              fmk_plan_set_points(plan, ns, sx, SAMPLE, xt) != FMK_OK ||
              fmk_plan_eval_many(plan, 3, q, pot, NULL) != FMK_OK;
    if (bad)
        fprintf(stderr, "reference: %s\n", fmk_plan_last_error(plan));
    for (int k = 0; k < SAMPLE; k++)
        for (int a = 0; a < 3; a++)
            pb->ref[3 * k + a] = pot[a * SAMPLE + k];
    fmk_plan_destroy(plan);
    free(sx), free(q), free(sp);
    return bad;
}

static double err_l2(const double *a, const double *b, int64_t n, double *max_rel)
{
    double num = 0, den = 0, mx = 0, top = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
        mx = fmax(mx, fabs(a[i] - b[i]));
        top = fmax(top, fabs(b[i]));
    }
    if (max_rel)
        *max_rel = mx / (top > 0 ? top : 1);
    return sqrt(num / (den > 0 ? den : 1));
}

/* pairs per second the fp32 issue rate allows for 3 components (treecode/cuda/eval.cu: 13 instructions) */
static double direct_bound(void)
{
    int sms = 0, khz = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    return (double)sms * 128.0 * khz * 1e3 / 13.0;
}

static int run(const problem *pb, const config *c, int repeat, int json, int *first)
{
    fmk_poisson_opts o;
    fmk_poisson_opts_default(&o);
    o.method = c->method;
    o.backend = c->backend;
    o.hybrid = c->hybrid;
    o.smoothing = pb->h;
    fmk_poisson *ps = NULL;
    double *psi = malloc(sizeof(double) * 3 * pb->np);
    fmk_status st = fmk_poisson_create(&ps, c->eps, &o);
    if (st == FMK_OK)
        st = pb->grid ? fmk_poisson_set_blocks(ps, pb->grid)
                      : fmk_poisson_set_grid(ps, pb->n, pb->n, pb->n, pb->h,
                                             (const double[3]){pb->h / 2, pb->h / 2, pb->h / 2});
    double t_first = 0, t_best = INFINITY;
    fmk_poisson_info in;
    memset(&in, 0, sizeof in);
    double *d_om = NULL, *d_psi = NULL;
    if (st == FMK_OK && c->device) {
        const size_t bytes = sizeof(double) * 3 * (size_t)pb->np;
        if (cudaMalloc((void **)&d_om, bytes) != cudaSuccess ||
            cudaMalloc((void **)&d_psi, bytes) != cudaSuccess ||
            cudaMemcpy(d_om, pb->omega, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
            st = FMK_ERR_DEVICE_NOMEM;
    }
    for (int k = 0; st == FMK_OK && k <= repeat; k++) {
        const double t0 = now();
        st = c->device ? fmk_poisson_solve_device(ps, 3, d_om, d_psi, NULL)
                       : fmk_poisson_solve(ps, 3, pb->omega, psi, NULL);
        const double t = now() - t0;
        if (k == 0)
            t_first = t;
        else if (t < t_best) {
            t_best = t;
            fmk_poisson_get_info(ps, &in);
        }
    }
    if (st == FMK_OK && c->device &&
        cudaMemcpy(psi, d_psi, sizeof(double) * 3 * (size_t)pb->np, cudaMemcpyDeviceToHost) !=
            cudaSuccess)
        st = FMK_ERR_DEVICE;
    cudaFree(d_om);
    cudaFree(d_psi);
    if (st != FMK_OK) {
        fprintf(stderr, "%s: %s\n", c->name, fmk_poisson_last_error(ps ? ps : NULL));
        fmk_poisson_destroy(ps);
        free(psi);
        return 1;
    }
    if (repeat == 0)
        fmk_poisson_get_info(ps, &in), t_best = t_first;
    double mx, e_sample[3 * SAMPLE];
    const double e_an = err_l2(psi, pb->psi, 3 * pb->np, &mx);
    for (int k = 0; k < SAMPLE; k++)
        memcpy(e_sample + 3 * k, psi + 3 * pb->sample[k], sizeof(double) * 3);
    const double e_dir = err_l2(e_sample, pb->ref, 3 * SAMPLE, NULL);
    const int tc = c->method == FMK_POISSON_TREECODE;
    const double rate = tc && in.time_direct > 0 ? in.direct_pairs / in.time_direct : 0;
    const double bound = direct_bound();
    if (json)
        printf("%s  {\"grid\": \"%s\", \"n\": %lld, \"points\": %lld, \"sources\": %lld, "
               "\"config\": \"%s\", \"eps\": %g, \"first_s\": %.6f, \"solve_s\": %.6f, "
               "\"tree_s\": %.6f, \"plans_s\": %.6f, \"expand_s\": %.6f, \"direct_s\": %.6f, "
               "\"far_s\": %.6f, \"cpu_part_s\": %.6f, \"gpu_part_s\": %.6f, \"direct_pairs\": "
               "%.6g, \"far_pairs\": %.6g, \"order\": %d, \"theta\": %g, \"rate\": %.6g, "
               "\"rate_bound\": %.6g, \"err_analytic\": %.4g, \"err_analytic_max\": %.4g, "
               "\"err_direct\": %.4g}",
               *first ? "" : ",\n", pb->grid ? "two-level" : "uniform", (long long)pb->n,
               (long long)pb->np, (long long)in.n_sources, c->name, c->eps, t_first, t_best,
               in.time_tree, in.time_plans, in.time_expand, in.time_direct, in.time_far,
               in.time_cpu_part, in.time_gpu_part, in.direct_pairs, in.far_pairs, in.order,
               in.theta, rate, bound, e_an, mx, e_dir);
    else {
        printf("%-22s %7.0e %9.4f %9.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f", c->name, c->eps,
               t_first, t_best, in.time_tree, in.time_expand, in.time_direct, in.time_far,
               in.time_cpu_part, in.time_gpu_part);
        printf(" %9.3g %9.3g %8.2e %8.2e %8.2e", in.direct_pairs, in.far_pairs, e_an, mx, e_dir);
        if (rate > 0)
            printf("  %.3g pairs/s = %.1f%% of %.3g", rate, 100 * rate / bound, bound);
        printf("\n");
    }
    *first = 0;
    fmk_poisson_destroy(ps);
    free(psi);
    return 0;
}

static void header(const problem *pb, int json)
{
    if (json)
        return;
    printf("\n%s grid, effective %lld^3: %lld points (destinations)\n",
           pb->grid ? "two-level" : "uniform", (long long)pb->n, (long long)pb->np);
    printf("%-22s %7s %9s %9s %8s %8s %8s %8s %8s %8s %9s %9s %8s %8s %8s\n", "config", "eps",
           "first s", "solve s", "support", "expand", "direct", "far", "cpu part", "gpu part",
           "dir pairs", "far evals", "err l2", "err max", "vs dir");
}

int main(int argc, char **argv)
{
    int json = 0, repeat = 3, cpu = 1;
    int64_t res = 256, uni = 256;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--no-cpu"))
            cpu = 0;
        else if (!strcmp(argv[i], "--resolution") && i + 1 < argc)
            res = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--uniform") && i + 1 < argc)
            uni = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else
            return fprintf(stderr, "usage: bench_poisson_gpu [--json] [--resolution R] "
                                   "[--uniform N] [--repeat K] [--no-cpu]\n"),
                   2;
    }
    if (fmk_cuda_device_count() < 1)
        return fprintf(stderr, "bench_poisson_gpu: no CUDA device\n"), 77;
    int first = 1, bad = 0;
    if (json)
        printf("[\n");
    problem pb;
    if (make_problem(&pb, 1, res))
        return 1;
    header(&pb, json);
    const config table1[] = {
        {"treecode gpu", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, 1e-4, 0},
        {"treecode gpu", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, 1e-6, 0},
        {"treecode gpu, device", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, 1e-4, 1},
        {"treecode gpu, device", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, 1e-6, 1},
        {"treecode hybrid", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 1, 1e-4, 0},
        {"treecode hybrid", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 1, 1e-6, 0},
        {"fmm gpu (regularized)", FMK_POISSON_FMM, FMK_BACKEND_CUDA, 0, 1e-4, 0},
        {"treecode cpu", FMK_POISSON_TREECODE, FMK_BACKEND_CPU, 0, 1e-4, 0},
    };
    for (size_t k = 0; k < sizeof table1 / sizeof table1[0]; k++)
        if (cpu || table1[k].backend != FMK_BACKEND_CPU)
            bad |= run(&pb, &table1[k], repeat, json, &first);
    if (uni > 0) {
        problem pu;
        if (make_problem(&pu, 0, uni))
            return 1;
        header(&pu, json);
        const config table2[] = {
            {"treecode gpu", FMK_POISSON_TREECODE, FMK_BACKEND_CUDA, 0, 1e-4, 0},
            {"fft gpu (cuFFT)", FMK_POISSON_FFT, FMK_BACKEND_CUDA, 0, 1e-4, 0},
            {"fft cpu (FFTW)", FMK_POISSON_FFT, FMK_BACKEND_CPU, 0, 1e-4, 0},
        };
        for (size_t k = 0; k < sizeof table2 / sizeof table2[0]; k++)
            bad |= run(&pu, &table2[k], repeat, json, &first);
    }
    if (json)
        printf("\n]\n");
    return bad;
}
