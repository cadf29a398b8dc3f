/* cmd_demo.c -- `fmmkit demo`: a first run that shows what fmmkit does, where, how fast and how
 * accurately, on the best backend this machine has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist.h"
#include "measure.h"

static const char *const cmd = "demo";

/* What the demo accepts: the direct sum is exact to fp64 rounding; the method auto picks
 * (docs/choosing.md) meets eps in the potential and 10 eps in the gradient. */
static const double direct_tolerance = 1e-12;

static const double demo_eps = 1e-6;
static const int64_t demo_sample = 1000;

static const char usage[] =
    "Usage: fmmkit demo [--n N] [--backend auto|cpu|cuda] [--threads N]\n"
    "\n"
    "Computes the gravitational potential and its gradient in a Plummer sphere of N equal masses\n"
    "(the Laplace kernel), on the GPU when one is present, else on the CPU: first with the\n"
    "method auto picks for eps 1e-6 (the FMM at these sizes), then with the direct sum (on the\n"
    "GPU; on the CPU only where N is small enough to take seconds). Both are checked against the "
    "fp64 direct sum at\n"
    "1000 sampled points and a short report is printed. N defaults to 1,000,000 on a GPU and\n"
    "100,000 on a CPU. Exit status 0 when every error is within its bound.\n";

/* 1234567 -> "1,234,567" */
static const char *grouped(int64_t v, char *buf, size_t size)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)v);
    size_t o = 0;
    for (int i = 0; i < len && o + 1 < size; i++) {
        buf[o++] = digits[i];
        int left = len - 1 - i;
        if (left > 0 && left % 3 == 0 && digits[i] != '-' && o + 1 < size)
            buf[o++] = ',';
    }
    buf[o] = '\0';
    return buf;
}

int cmd_demo(int argc, char **argv)
{
    const char *backend_str = "auto";
    int64_t n = 0, threads = 0;
    args_opt table[] = {
        {"n", ARGS_INT, &n, 2, 0},
        {"backend", ARGS_STRING, &backend_str, 0, 0},
        {"threads", ARGS_INT, &threads, 0, 0},
    };
    const int n_table = (int)(sizeof table / sizeof table[0]);
    int done, rc = args_parse(cmd, argc, argv, table, n_table, usage, &done);
    if (rc != CLI_OK || done)
        return rc;
    fmk_opts opts;
    fmk_opts_default(&opts);
    if ((rc = args_backend(cmd, backend_str, &opts.backend)) != CLI_OK)
        return rc;
    if (threads > INT32_MAX || n > INT64_MAX / 64)
        return cli_usage(cmd, "--n or --threads is out of range");
    opts.threads = (int32_t)threads;
    if (opts.backend == FMK_BACKEND_AUTO)
        opts.backend = fmk_cuda_device_count() > 0 ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
    const int gpu = opts.backend == FMK_BACKEND_CUDA;
    if (!args_find(table, n_table, "n")->given)
        n = gpu ? 1000000 : 100000;
    /* The full direct sum where it takes seconds: always on a GPU (~1e12 pairs/s), on the CPU
     * (~1e9 pairs/s on two cores) up to 100,000 points. */
    const int run_direct = gpu || n <= 100000;

    const fmk_kernel kernel = FMK_KERNEL_LAPLACE;
    double *x = malloc(sizeof(double) * 3 * (size_t)n);
    double *q = malloc(sizeof(double) * (size_t)n);
    double *pot = malloc(sizeof(double) * (size_t)n);
    double *grad = malloc(sizeof(double) * 3 * (size_t)n);
    fmk_plan *plan = NULL;
    if (!x || !q || !pot || !grad) {
        cli_error(cmd, "out of memory for %lld points", (long long)n);
        rc = CLI_FAIL;
        goto done;
    }
    dist_rng rng;
    dist_rng_seed(&rng, 2024);
    dist_fill(DIST_PLUMMER, &rng, n, x);
    for (int64_t i = 0; i < n; i++)
        q[i] = 1.0 / (double)n; /* equal masses, total 1 */

    char nbuf[32];
    printf("fmmkit %s demo\n", fmk_version());
    printf("  computing the gravitational potential phi(x_i) = sum_{j != i} m_j / |x_i - x_j| and\n"
           "  its gradient at all %s points of a Plummer sphere of equal masses\n",
           grouped(n, nbuf, sizeof nbuf));
    int ok = 1;
    const fmk_method methods[2] = {FMK_METHOD_AUTO, FMK_METHOD_DIRECT};
    double fast_eval = 0;
    fmk_method fast_method = FMK_METHOD_DIRECT;
    for (int r = 0; r < 2; r++) {
        if (methods[r] == FMK_METHOD_DIRECT && !run_direct) {
            printf(
                "\n  direct sum: skipped at this N on the CPU (N^2 = %.2g pairs); the check above\n"
                "  used it at %lld sampled points. Try --n 100000, or a GPU.\n",
                (double)n * (double)n, (long long)demo_sample);
            continue;
        }
        opts.method = methods[r];
        fmk_status st = fmk_plan_create(&plan, 3, kernel, demo_eps, &opts);
        if (st != FMK_OK) {
            rc = cli_library_error(cmd, NULL, st);
            goto done;
        }
        /* A warm-up on a GPU keeps one-time driver work out of the time shown. */
        measure_times times;
        st = measure_run(plan, n, x, q, 0, NULL, gpu, 1, pot, grad, &times);
        if (st != FMK_OK) {
            rc = cli_library_error(cmd, plan, st);
            goto done;
        }
        fmk_info info;
        fmk_plan_info(plan, &info);
        measure_errors err;
        char msg[512];
        st = measure_errors_direct(3, kernel, 0, opts.threads, n, x, q, 0, NULL, pot, grad,
                                   demo_sample, &rng, &err, msg, sizeof msg);
        if (st != FMK_OK) {
            cli_error(cmd, "reference sum: %s", msg);
            rc = cli_exit_status(st);
            goto done;
        }
        const int fast = methods[r] == FMK_METHOD_AUTO && info.method != FMK_METHOD_DIRECT;
        const double pairs = (double)n * (double)(n - 1);
        const double pot_bound = fast ? demo_eps : direct_tolerance;
        const double grad_bound = fast ? 10 * demo_eps : direct_tolerance;
        const int good = err.pot <= pot_bound && err.grad <= grad_bound;
        ok = ok && good;
        if (methods[r] == FMK_METHOD_AUTO)
            printf("\n  method auto, eps %.0e: picked %s, fp64, on %s\n", demo_eps,
                   fmk_method_name(info.method), info.device_name);
        else
            printf("\n  direct sum, fp64, on %s\n", info.device_name);
        if (fast)
            printf("    settings  order %d, leaf size %lld, %d levels\n", (int)info.order,
                   (long long)info.leaf_size, (int)info.levels);
        printf("    time      set-up%s %.3f s, evaluation %.3f s\n", fast ? " (tree build)" : "",
               times.setup, times.eval);
        if (fast) {
            fast_eval = times.eval, fast_method = info.method;
        } else {
            printf("    speed     %.3g pair interactions/s\n",
                   times.eval > 0 ? pairs / times.eval : 0.0);
            if (fast_eval > 0 && times.eval > 0)
                printf("    the %s's evaluation was %.0fx faster\n", fmk_method_name(fast_method),
                       times.eval / fast_eval);
        }
        printf("    accuracy  relative l2 error vs the fp64 direct sum at %lld sampled points:\n"
               "              potential %.2e, gradient %.2e (bound %.0e, %.0e)%s\n",
               (long long)err.sample, err.pot, err.grad, pot_bound, grad_bound,
               good ? "" : "  <-- exceeded");
        fmk_plan_destroy(plan);
        plan = NULL;
    }
    printf("\n%s\n", ok ? "OK" : "FAILED: an error exceeds its bound");
    rc = ok ? CLI_OK : CLI_FAIL;

done:
    fmk_plan_destroy(plan);
    free(x);
    free(q);
    free(pot);
    free(grad);
    return rc;
}
