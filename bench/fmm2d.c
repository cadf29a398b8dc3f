/* bench/fmm2d.c -- the 2D adaptive FMM (method fmm, dim 2): the tables of Goude & Engblom.
 *
 *   bench_fmm2d [--json] [--quick] [--once [--n N] [--leaf N_d]] [--no-phases] [--no-grid]
 *               [--no-cpu]
 *
 * 1. Phases (their Table 1): N = 2^20, cauchy2d, eps 1e-6, evaluation at the sources, points,
 *    charges and results on the GPU; uniform, normal and layer distributions (their Fig. 10
 *    question); total = set_points_device + eval_device (wall clock, median of 5 after a
 *    warm-up), the phases from fmk_info (CUDA events); errors against the GPU direct sum at
 *    1000 sampled points: relative l2 and the maximum relative error (eq. 5.3).
 * 2. N_d against p (their Fig. 5): the total time over a grid of orders and leaf sizes.
 * 3. Break-even N against the GPU direct sum (method direct, backend cuda), same data path.
 * 4. The CPU backend (OpenMP, all cores) at N = 2^20, host arrays.
 * 3. also prints where the FMM is first faster.
 * GPU timings run on device 0; without a GPU only the CPU rows are printed. --once: one
 * set_points_device + eval_device of table 1's uniform case after a warm-up and its phases,
 * nothing else (for profilers); --n N: of N points, --leaf N_d: with leaf size N_d.
 * --no-phases, --no-grid, --no-cpu: leave out tables 1, 2, 4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The GPU tables need the CUDA runtime: with the CUDA backend (FMK_BENCH_CUDA, set by
 * bench/CMakeLists.txt) this program links cudart; without it, it prints the CPU table only. */
#ifdef FMK_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bench_util.h"
#include "fmmkit.h"

static int json, first_row = 1;

static uint64_t rng_state;
static double urand(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    uint64_t z = rng_state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}
static double nrand(void)
{
    double u = urand(), v = urand();
    return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

enum { UNIFORM, NORMAL, LAYER };

/* The paper's sets: uniform in the unit square; normal with variance 1/100; the layer (x
 * uniform, y normal with variance 1/100); rejected to the unit square. */
static void make_points(int d, int64_t n, uint64_t seed, double *x)
{
    rng_state = seed;
    for (int64_t i = 0; i < n; i++) {
        double px, py;
        do {
            px = d == NORMAL ? 0.5 + 0.1 * nrand() : urand();
            py = d == UNIFORM ? urand() : 0.5 + 0.1 * nrand();
        } while (px < 0 || px > 1 || py < 0 || py > 1);
        x[2 * i] = px, x[2 * i + 1] = py;
    }
}

static void make_charges(int64_t n, uint64_t seed, double *q)
{
    rng_state = seed;
    for (int64_t i = 0; i < 2 * n; i++)
        q[i] = 2 * urand() - 1;
}

static void die(const char *what, fmk_plan *p)
{
    fprintf(stderr, "bench_fmm2d: %s: %s\n", what, fmk_plan_last_error(p));
    exit(1);
}

static void row_begin(const char *table)
{
    if (json)
        printf("%s{\"table\": \"%s\"", first_row ? "[\n" : ",\n", table);
    first_row = 0;
}

#ifdef FMK_BENCH_CUDA
/* Device copies of points and charges, and room for the results. */
typedef struct dev_data {
    int64_t n;
    double *x, *q, *pot, *grad;
} dev_data;

static dev_data upload(int64_t n, const double *x, const double *q)
{
    dev_data d = {n, NULL, NULL, NULL, NULL};
    if (cudaMalloc((void **)&d.x, 16 * n) != cudaSuccess ||
        cudaMalloc((void **)&d.q, 16 * n) != cudaSuccess ||
        cudaMalloc((void **)&d.pot, 16 * n) != cudaSuccess ||
        cudaMalloc((void **)&d.grad, 16 * n) != cudaSuccess) {
        fprintf(stderr, "bench_fmm2d: cudaMalloc failed\n");
        exit(1);
    }
    cudaMemcpy(d.x, x, 16 * n, cudaMemcpyHostToDevice);
    cudaMemcpy(d.q, q, 16 * n, cudaMemcpyHostToDevice);
    return d;
}

static void release(dev_data *d)
{
    cudaFree(d->x), cudaFree(d->q), cudaFree(d->pot), cudaFree(d->grad);
}

/* Median wall time of set_points_device + eval_device (after one warm-up); info of the last. */
static double time_gpu(fmk_method method, double eps, int order, int64_t leaf, const dev_data *d,
                       int reps, fmk_info *info)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = method;
    o.backend = FMK_BACKEND_CUDA;
    o.order = order;
    o.leaf_size = leaf;
    fmk_plan *p = NULL;
    if (fmk_plan_create(&p, 2, FMK_KERNEL_CAUCHY2D, eps, &o) != FMK_OK)
        die("fmk_plan_create", NULL);
    double t[16];
    for (int r = 0; r <= reps; r++) {
        cudaDeviceSynchronize();
        const double t0 = bench_now();
        if (fmk_plan_set_points_device(p, d->n, d->x, 0, NULL) != FMK_OK)
            die("set_points_device", p);
        if (fmk_plan_eval_device(p, d->q, d->pot, d->grad) != FMK_OK)
            die("eval_device", p);
        cudaDeviceSynchronize();
        if (r > 0)
            t[r - 1] = bench_now() - t0;
    }
    if (info)
        fmk_plan_info(p, info);
    fmk_plan_destroy(p);
    return bench_median(t, reps);
}

/* Errors of the FMM's (device) potential at 1000 sampled sources against the GPU direct sum. */
static void errors(const double *x, const double *q, int64_t n, const dev_data *d, double *l2,
                   double *mx)
{
    enum { S = 1000 };
    static double ys[2 * S], ref[2 * S], fmm[2 * S];
    double *pot = malloc(16 * n);
    cudaMemcpy(pot, d->pot, 16 * n, cudaMemcpyDeviceToHost);
    const int64_t stride = n / S;
    for (int i = 0; i < S; i++) {
        ys[2 * i] = x[2 * i * stride], ys[2 * i + 1] = x[2 * i * stride + 1];
        fmm[2 * i] = pot[2 * i * stride], fmm[2 * i + 1] = pot[2 * i * stride + 1];
    }
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT;
    o.backend = FMK_BACKEND_CUDA;
    if (fmk_eval(2, FMK_KERNEL_CAUCHY2D, 1e-15, &o, n, x, q, S, ys, ref, NULL) != FMK_OK)
        die("direct reference", NULL);
    double num = 0, den = 0;
    *mx = 0;
    for (int i = 0; i < S; i++) {
        const double dr = fmm[2 * i] - ref[2 * i], di = fmm[2 * i + 1] - ref[2 * i + 1];
        const double e2 = dr * dr + di * di,
                     r2 = ref[2 * i] * ref[2 * i] + ref[2 * i + 1] * ref[2 * i + 1];
        num += e2, den += r2;
        if (r2 > 0 && sqrt(e2 / r2) > *mx)
            *mx = sqrt(e2 / r2);
    }
    *l2 = sqrt(num / den);
    free(pot);
}

/* --once: one set_points_device + eval_device of table 1's uniform case (N points, leaf size
 * leaf, 0: the default) after a warm-up, and its phases. */
static void gpu_once(int64_t N, int64_t once_leaf, double *x, const double *q)
{
    make_points(UNIFORM, N, 100, x);
    dev_data dd = upload(N, x, q);
    fmk_info in;
    const double t = time_gpu(FMK_METHOD_FMM, 1e-6, -1, once_leaf, &dd, 1, &in);
    const double *ph = in.phase_time;
    printf("uniform N = %lld, %d levels: %.3f ms (setup %.3f, tree %.3f; eval: upload %.3f, "
           "P2M %.3f, M2M %.3f, M2L %.3f, L2L %.3f, L2P %.3f, P2P %.3f ms)\n",
           (long long)N, in.levels, 1e3 * t, 1e3 * ph[FMK_PHASE_SETUP], 1e3 * ph[FMK_PHASE_TREE],
           1e3 * ph[FMK_PHASE_UPLOAD], 1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M],
           1e3 * ph[FMK_PHASE_M2L], 1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P],
           1e3 * ph[FMK_PHASE_P2P]);
    release(&dd);
}

/* 1. Phases per distribution (their Table 1). */
static void table_phases(int64_t N, double *x, const double *q)
{
    static const char *dist_names[] = {"uniform", "normal", "layer"};
    if (!json)
        printf("\nPhases, N = %lld, eps 1e-6, evaluation at the sources, data on the GPU (ms)\n"
               "%-8s %3s %5s %4s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %9s %9s\n",
               (long long)N, "dist", "p", "N_d", "lev", "tree", "setup", "upload", "P2M", "M2M",
               "M2L", "L2L", "L2P", "P2P", "total", "rel l2", "max rel");
    for (int d = 0; d < 3; d++) {
        make_points(d, N, 100 + d, x);
        dev_data dd = upload(N, x, q);
        fmk_info in;
        const double t = time_gpu(FMK_METHOD_FMM, 1e-6, -1, 0, &dd, 5, &in);
        if (d == 0 && !json)
            printf("device: %s\n", in.device_name);
        double l2, mx;
        errors(x, q, N, &dd, &l2, &mx);
        const double *ph = in.phase_time;
        if (json) {
            row_begin("phases");
            printf(", \"dist\": \"%s\", \"n\": %lld, \"order\": %d, \"leaf_size\": %lld, "
                   "\"levels\": %d, \"tree_ms\": %.4f, \"setup_ms\": %.4f, "
                   "\"upload_ms\": %.4f, \"p2m_ms\": %.4f, \"m2m_ms\": %.4f, \"m2l_ms\": %.4f, "
                   "\"l2l_ms\": %.4f, \"l2p_ms\": %.4f, "
                   "\"p2p_ms\": %.4f, \"total_ms\": %.4f, \"rel_l2\": %.3e, \"max_rel\": %.3e}",
                   dist_names[d], (long long)N, in.order, (long long)in.leaf_size, in.levels,
                   1e3 * ph[FMK_PHASE_TREE], 1e3 * ph[FMK_PHASE_SETUP], 1e3 * ph[FMK_PHASE_UPLOAD],
                   1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M], 1e3 * ph[FMK_PHASE_M2L],
                   1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P], 1e3 * ph[FMK_PHASE_P2P],
                   1e3 * t, l2, mx);
        } else {
            printf("%-8s %3d %5lld %4d %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f "
                   "%8.3f %9.2e %9.2e\n",
                   dist_names[d], in.order, (long long)in.leaf_size, in.levels,
                   1e3 * ph[FMK_PHASE_TREE], 1e3 * ph[FMK_PHASE_SETUP], 1e3 * ph[FMK_PHASE_UPLOAD],
                   1e3 * ph[FMK_PHASE_P2M], 1e3 * ph[FMK_PHASE_M2M], 1e3 * ph[FMK_PHASE_M2L],
                   1e3 * ph[FMK_PHASE_L2L], 1e3 * ph[FMK_PHASE_L2P], 1e3 * ph[FMK_PHASE_P2P],
                   1e3 * t, l2, mx);
        }
        release(&dd);
    }
}

/* 2. N_d against p (their Fig. 5). */
static void table_grid(int64_t N, double *x, const double *q)
{
    make_points(UNIFORM, N, 100, x);
    dev_data dd = upload(N, x, q);
    const int orders[] = {6, 10, 14, 18, 22, 26, 30};
    const int64_t leaves[] = {16, 24, 32, 48, 64, 96, 128, 192};
    if (!json)
        printf("\nTotal time (ms) against N_d and p, N = %lld uniform\n%4s", (long long)N, "p");
    if (!json) {
        for (int j = 0; j < 8; j++)
            printf(" %7lld", (long long)leaves[j]);
        printf("   best N_d\n");
    }
    for (int i = 0; i < 7; i++) {
        double best = 1e30;
        int64_t best_leaf = 0;
        if (!json)
            printf("%4d", orders[i]);
        for (int j = 0; j < 8; j++) {
            const double t = time_gpu(FMK_METHOD_FMM, 1e-6, orders[i], leaves[j], &dd, 3, NULL);
            if (t < best)
                best = t, best_leaf = leaves[j];
            if (json) {
                row_begin("nd_vs_p");
                printf(", \"order\": %d, \"leaf_size\": %lld, \"total_ms\": %.4f}", orders[i],
                       (long long)leaves[j], 1e3 * t);
            } else {
                printf(" %7.3f", 1e3 * t);
            }
        }
        if (!json)
            printf("   %lld\n", (long long)best_leaf);
    }
    release(&dd);
}

/* 3. Break-even N against the GPU direct sum; also prints where the FMM is first faster. */
static void table_break_even(double *x, const double *q)
{
    if (!json)
        printf("\nBreak-even against the GPU direct sum (cauchy2d, eps 1e-6, ms)\n%9s %9s %9s\n",
               "N", "fmm", "direct");
    int64_t even = 0;
    const int64_t sizes[] = {256,  512,  1024, 1536, 2048,  2560,  3072,  3584,
                             4096, 5120, 6144, 8192, 12288, 16384, 32768, 65536};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        make_points(UNIFORM, n, 300, x);
        dev_data d2 = upload(n, x, q);
        const double tf = time_gpu(FMK_METHOD_FMM, 1e-6, -1, 0, &d2, 5, NULL);
        const double td = time_gpu(FMK_METHOD_DIRECT, 1e-6, -1, 0, &d2, 5, NULL);
        if (!even && tf < td)
            even = n;
        if (json) {
            row_begin("break_even");
            printf(", \"n\": %lld, \"fmm_ms\": %.4f, \"direct_ms\": %.4f}", (long long)n, 1e3 * tf,
                   1e3 * td);
        } else {
            printf("%9lld %9.3f %9.3f\n", (long long)n, 1e3 * tf, 1e3 * td);
        }
        release(&d2);
    }
    if (!json)
        printf("break-even: first N of the table where the FMM is faster: %lld\n", (long long)even);
}
#endif /* FMK_BENCH_CUDA */

/* 4. The CPU backend (OpenMP, all cores), host arrays. */
static void table_cpu(int64_t N, double *x, const double *q)
{
    make_points(UNIFORM, N, 100, x);
    double *pot = malloc(16 * N), *grad = malloc(16 * N);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM;
    o.backend = FMK_BACKEND_CPU;
    fmk_plan *p = NULL;
    if (fmk_plan_create(&p, 2, FMK_KERNEL_CAUCHY2D, 1e-6, &o) != FMK_OK)
        die("fmk_plan_create", NULL);
    double t[3];
    fmk_info in;
    for (int r = 0; r < 3; r++) {
        const double t0 = bench_now();
        if (fmk_plan_set_points(p, N, x, 0, NULL) != FMK_OK)
            die("set_points", p);
        if (fmk_plan_eval(p, q, pot, grad) != FMK_OK)
            die("eval", p);
        t[r] = bench_now() - t0;
    }
    fmk_plan_info(p, &in);
    const double tm = bench_median(t, 3);
    const double *ph = in.phase_time;
    if (json) {
        row_begin("cpu");
        printf(", \"n\": %lld, \"threads\": \"%s\", \"tree_ms\": %.3f, \"m2l_ms\": %.3f, "
               "\"p2p_ms\": %.3f, \"total_ms\": %.3f}",
               (long long)N, in.device_name, 1e3 * ph[FMK_PHASE_TREE], 1e3 * ph[FMK_PHASE_M2L],
               1e3 * ph[FMK_PHASE_P2P], 1e3 * tm);
    } else {
        printf("\nCPU backend, N = %lld uniform, eps 1e-6, %s (ms)\n"
               "tree %.1f  P2M %.1f  M2M %.1f  M2L %.1f  L2L %.1f  L2P %.1f  P2P %.1f  "
               "total (set_points + eval) %.1f\n",
               (long long)N, in.device_name, 1e3 * ph[FMK_PHASE_TREE], 1e3 * ph[FMK_PHASE_P2M],
               1e3 * ph[FMK_PHASE_M2M], 1e3 * ph[FMK_PHASE_M2L], 1e3 * ph[FMK_PHASE_L2L],
               1e3 * ph[FMK_PHASE_L2P], 1e3 * ph[FMK_PHASE_P2P], 1e3 * tm);
    }
    fmk_plan_destroy(p);
    free(pot), free(grad);
}

int main(int argc, char **argv)
{
    int quick = 0, once = 0, phases = 1, grid = 1, cpu = 1;
    int64_t once_n = 0, once_leaf = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--json") == 0)
            json = 1;
        else if (strcmp(argv[a], "--once") == 0)
            once = 1;
        else if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[a], "--n") == 0 && a + 1 < argc)
            once_n = atoll(argv[++a]);
        else if (strcmp(argv[a], "--leaf") == 0 && a + 1 < argc)
            once_leaf = atoll(argv[++a]);
        else if (strcmp(argv[a], "--no-phases") == 0)
            phases = 0;
        else if (strcmp(argv[a], "--no-grid") == 0)
            grid = 0;
        else if (strcmp(argv[a], "--no-cpu") == 0)
            cpu = 0;
        else {
            fprintf(stderr, "usage: bench_fmm2d [--json] [--quick] [--once] [--n N] [--leaf N_d] "
                            "[--no-phases] [--no-grid] [--no-cpu]\n");
            return 2;
        }
    }
    const int64_t N = once && once_n > 0 ? once_n : quick ? (1 << 16) : (1 << 20);
    double *x = malloc(16 * N), *q = malloc(16 * N);
    make_charges(N, 7, q);
    if (!json)
        printf("2D FMM (cauchy2d, fp64, theta 1/2)\n");
#ifdef FMK_BENCH_CUDA
    if (fmk_cuda_device_count() > 0) {
        if (once) {
            gpu_once(N, once_leaf, x, q);
            free(x), free(q);
            return 0;
        }
        if (phases)
            table_phases(N, x, q);
        if (grid)
            table_grid(N, x, q);
        table_break_even(x, q);
    }
#else
    (void)once, (void)once_leaf, (void)phases, (void)grid;
#endif
    if (cpu)
        table_cpu(N, x, q);
    if (json)
        printf("\n]\n");
    free(x), free(q);
    return 0;
}
