/* bench/coincident.c -- the CPU FMMs (3D and 2D) on sets of coincident points: time of
 * set_points and eval, and the error at sampled targets against the direct sum.
 *
 *   bench_coincident                       every case below, each in a child process
 *   bench_coincident KERNEL SET N [sep]    one case (for /usr/bin/time -v: peak memory)
 *
 * SET: "one": N coincident points plus 10 others spread over the unit box; "groups": N / 10
 * groups of 10 coincident points at uniform random places; "uniform": N distinct points.
 * sep: separate targets (the sources again, passed as targets) instead of targets = sources.
 * Kernels laplace, plummer, regularized (softening 1e-3), log2d, cauchy2d; eps 1e-6, fp64,
 * method fmm, backend cpu, all cores. The error is the largest error of the potential at 16
 * sampled targets against method direct (the self term removed by hand for the smooth kernels
 * with targets = sources), relative to the largest potential there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "fmmkit.h"

static uint64_t rng_state = 12345;
static double urand(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    uint64_t z = rng_state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static const double softening = 1e-3;

/* The points of a set (n of them: see the header). */
static int64_t make_set(const char *set, int dim, int64_t n, double **out)
{
    const int one = !strcmp(set, "one"), groups = !strcmp(set, "groups");
    const int64_t total = one ? n + 10 : n;
    double *x = malloc(sizeof(double) * dim * (size_t)total);
    if (!x)
        return -1;
    for (int64_t i = 0; i < total; i++) {
        const int64_t from = one ? (i < n ? 0 : -1) : groups ? i - i % 10 : -1;
        for (int k = 0; k < dim; k++)
            x[dim * i + k] = from >= 0 && from < i ? x[dim * from + k]
                             : one && i < n        ? 0.25
                                                   : urand();
    }
    *out = x;
    return total;
}

static int run_case(const char *kname, const char *set, int64_t n, int sep)
{
    fmk_kernel kernel;
    if (fmk_kernel_from_name(kname, &kernel) != FMK_OK)
        return fprintf(stderr, "unknown kernel %s\n", kname), 2;
    const int dim = kernel == FMK_KERNEL_LOG2D || kernel == FMK_KERNEL_CAUCHY2D ? 2 : 3;
    const int w = kernel == FMK_KERNEL_CAUCHY2D ? 2 : 1;
    const int smooth = kernel == FMK_KERNEL_PLUMMER || kernel == FMK_KERNEL_REGULARIZED;
    double *x;
    const int64_t np = make_set(set, dim, n, &x);
    double *q = malloc(sizeof(double) * w * (size_t)np), *pot = malloc(sizeof(double) * w * np);
    if (np < 0 || !q || !pot)
        return fprintf(stderr, "out of memory\n"), 1;
    for (int64_t i = 0; i < w * np; i++)
        q[i] = urand() - 0.5;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_FMM, o.backend = FMK_BACKEND_CPU;
    o.softening = smooth ? softening : 0;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, dim, kernel, 1e-6, &o);
    const double t0 = bench_now();
    if (st == FMK_OK)
        st = fmk_plan_set_points(plan, np, x, sep ? np : 0, sep ? x : NULL);
    const double t1 = bench_now();
    if (st == FMK_OK)
        st = fmk_plan_eval(plan, q, pot, NULL);
    const double t2 = bench_now();
    if (st != FMK_OK)
        return fprintf(stderr, "%s\n", fmk_plan_last_error(plan)), 1;
    /* the reference at 16 targets: the last 10 (the others of set "one") and 6 more */
    enum { NS = 16 };
    double ys[NS * 3], ref[NS * 2],
        g0 = kernel == FMK_KERNEL_PLUMMER       ? 1 / softening
             : kernel == FMK_KERNEL_REGULARIZED ? 1.5 / softening
                                                : 0;
    int64_t at[NS];
    for (int s = 0; s < NS; s++) {
        at[s] = s < 10 ? np - 1 - s : (int64_t)(urand() * (double)np);
        for (int k = 0; k < dim; k++)
            ys[dim * s + k] = x[dim * at[s] + k];
    }
    fmk_plan *direct = NULL;
    o.method = FMK_METHOD_DIRECT;
    if (fmk_plan_create(&direct, dim, kernel, 1e-6, &o) != FMK_OK ||
        fmk_plan_set_points(direct, np, x, NS, ys) != FMK_OK ||
        fmk_plan_eval(direct, q, ref, NULL) != FMK_OK)
        return fprintf(stderr, "direct: %s\n", fmk_plan_last_error(direct)), 1;
    double err = 0, big = 1e-300;
    for (int s = 0; s < NS; s++)
        for (int c = 0; c < w; c++) {
            /* targets = sources: the self term of a smooth kernel is left out */
            const double r = ref[w * s + c] - (sep ? 0 : g0 * q[w * at[s] + c]);
            err = fmax(err, fabs(pot[w * at[s] + c] - r)), big = fmax(big, fabs(r));
        }
    err /= big;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%-12s %-8s %8lld %-4s %10.3f %10.3f %10.1f %10.1e\n", kname, set, (long long)np,
           sep ? "sep" : "self", t1 - t0, t2 - t1, ru.ru_maxrss / 1024.0, err);
    fmk_plan_destroy(plan), fmk_plan_destroy(direct);
    free(x), free(q), free(pot);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4)
        return run_case(argv[1], argv[2], atoll(argv[3]), argc > 4 && !strcmp(argv[4], "sep"));
    static const char *const cases[][4] = {
        {"laplace", "one", "100000", ""},     {"laplace", "one", "100000", "sep"},
        {"plummer", "one", "100000", ""},     {"regularized", "one", "100000", ""},
        {"log2d", "one", "100000", ""},       {"log2d", "one", "100000", "sep"},
        {"cauchy2d", "one", "100000", ""},    {"laplace", "groups", "100000", ""},
        {"log2d", "groups", "100000", ""},    {"cauchy2d", "groups", "100000", ""},
        {"laplace", "uniform", "100000", ""}, {"log2d", "uniform", "100000", ""},
    };
    printf("%-12s %-8s %8s %-4s %10s %10s %10s %10s\n", "kernel", "set", "points", "trg", "setup_s",
           "eval_s", "peak_MB", "max_err");
    fflush(stdout);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const pid_t pid = fork(); /* a child per case: its own peak memory */
        if (pid == 0) {
            const int rc = run_case(cases[c][0], cases[c][1], atoll(cases[c][2]), cases[c][3][0]);
            fflush(stdout);
            _exit(rc);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            printf("%s %s: failed\n", cases[c][0], cases[c][1]);
        fflush(stdout);
    }
    return 0;
}
