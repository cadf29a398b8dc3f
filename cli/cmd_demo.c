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

/* Accepted errors relative to eps: a gradient from an expansion converges one order later than
 * the potential. The direct sum is exact to rounding either way. */
static const double pot_tolerance = 10.0, grad_tolerance = 100.0;

static const double demo_eps = 1e-6;
static const int64_t demo_sample = 1000;

static const char usage[] =
    "Usage: fmmkit demo [--n N] [--backend auto|cpu|cuda] [--threads N]\n"
    "\n"
    "Evaluates the Laplace potential and gradient of a Plummer sphere of N points with random\n"
    "charges on itself, on the GPU when one is present, else on the CPU, checks a sample of\n"
    "1000 points against the fp64 direct sum and prints a short report. N defaults to 200000\n"
    "where a fast method or a GPU is available, else to what the CPU sums in a few seconds.\n"
    "Exit status 0 when the errors are within 10 eps (potential) and 100 eps (gradient).\n";

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
    int help, rc = args_parse(cmd, argc, argv, table, n_table, &help);
    if (rc != CLI_OK)
        return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    fmk_opts opts;
    fmk_opts_default(&opts);
    if ((rc = args_backend(cmd, backend_str, &opts.backend)) != CLI_OK)
        return rc;
    if (threads > INT32_MAX || n > INT64_MAX / 64)
        return cli_usage(cmd, "--n or --threads is out of range");
    opts.threads = (int32_t)threads;
    if (opts.backend == FMK_BACKEND_AUTO)
        opts.backend = fmk_cuda_device_count() > 0 ? FMK_BACKEND_CUDA : FMK_BACKEND_CPU;
    /* 200k points take the GPU or a fast method well under a second; the CPU's direct sum
     * (~1e9 interactions/s on two cores) gets a size it finishes in a few seconds. */
    const int fast = opts.backend == FMK_BACKEND_CUDA ||
                     fmk_method_available(FMK_METHOD_FMM, 3, opts.backend) ||
                     fmk_method_available(FMK_METHOD_TREE, 3, opts.backend);
    if (!args_find(table, n_table, "n")->given)
        n = fast ? 200000 : 50000;

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
    dist_charges(&rng, n, 0, q);

    fmk_status st = fmk_plan_create(&plan, 3, kernel, demo_eps, &opts);
    if (st != FMK_OK) {
        rc = cli_library_error(cmd, NULL, st);
        goto done;
    }
    /* A warm-up on a GPU keeps one-time driver work out of the time shown. */
    measure_times times;
    st = measure_run(plan, n, x, q, 0, NULL, opts.backend == FMK_BACKEND_CUDA, 1, pot, grad, &times);
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

    char nbuf[32];
    const double pairs = (double)n * (double)(n - 1);
    printf("fmmkit %s demo\n", fmk_version());
    printf("  computed  the Laplace potential phi(x_i) = sum_{j != i} q_j / |x_i - x_j| and its\n"
           "            gradient at all %s points of a Plummer sphere, random charges in [-1, 1]\n",
           grouped(n, nbuf, sizeof nbuf));
    printf("  where     %s: method %s, backend %s, %s arithmetic, eps %g\n", info.device_name,
           fmk_method_name(info.method), fmk_backend_name(info.backend),
           info.precision == FMK_PRECISION_FP32 ? "fp32" : "fp64", demo_eps);
    printf("  time      set-up %.3f s, evaluation %.3f s\n", times.setup, times.eval);
    printf("  speed     %.3g interactions/s (%.3g pairs / evaluation time)\n",
           times.eval > 0 ? pairs / times.eval : 0.0, pairs);
    printf("  accuracy  relative l2 error at %lld sampled points vs the fp64 direct sum:\n"
           "            potential %.2e, gradient %.2e\n",
           (long long)err.sample, err.pot, err.grad);
    const int ok = err.pot <= pot_tolerance * demo_eps && err.grad <= grad_tolerance * demo_eps;
    if (ok) {
        printf("OK\n");
        rc = CLI_OK;
    } else {
        printf("FAILED: the errors exceed %g eps (potential) or %g eps (gradient)\n",
               pot_tolerance, grad_tolerance);
        rc = CLI_FAIL;
    }

done:
    fmk_plan_destroy(plan);
    free(x);
    free(q);
    free(pot);
    free(grad);
    return rc;
}
