/* cmd_bench.c -- `fmmkit bench`: times one configuration on generated points and checks its
 * accuracy against the fp64 direct sum; prints a table, or one JSON object with --json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_mpi.h"
#include "cli.h"
#include "cli_mpi.h"
#include "dist.h"
#include "measure.h"
#include "ranks.h"

static const char *const cmd = "bench";

static const char usage[] =
    "Usage: fmmkit bench [options]\n"
    "\n"
    "Generates points and charges, calls set_points once and eval R times after one warm-up,\n"
    "and prints the median time of each phase, the interaction rate and the relative l2 errors\n"
    "of potential and gradient against an fp64 direct sum on the CPU at a sample of targets.\n"
    "\n"
    "Options:\n"
    "  --kernel K          laplace (default), plummer, regularized, log2d, cauchy2d\n"
    "  --method M          auto (default), direct, tree, fmm\n"
    "  --backend B         auto (default), cpu, cuda\n"
    "  --precision P       fp64 (default) or fp32\n"
    "  --dist D            3D: uniform, plummer (default), sphere, clustered, corner;\n"
    "                      2D: uniform2d (default), normal2d, layer2d\n"
    "  --n N               sources (default 20000)\n"
    "  --m M               targets drawn from the same distribution (default: the sources)\n"
    "  --eps E             requested relative accuracy (default 1e-6; fp32: 1e-4)\n"
    "  --theta T           opening angle / separation ratio (default: the method's)\n"
    "  --order K           expansion order (default -1: the method's; tree: 0, 1 or 2)\n"
    "  --leaf-size N       points per leaf (default 0: the method's)\n"
    "  --walk W            tree walk: auto (default), group, stackless\n"
    "  --theta-sweep       method tree: one row per theta = 0.2, 0.3, ..., 1.0 with the times\n"
    "                      and the errors against the direct sum (like Nakasato's Table V)\n"
    "  --softening H       softening length (default 0.01 for plummer and regularized)\n"
    "  --threads N         CPU threads (default 0: OpenMP's default)\n"
    "  --repeats R         timed evaluations (default 3)\n"
    "  --sample S          targets checked against the direct sum (default 1000; 0: none)\n"
    "  --seed SEED         random seed (default 1)\n"
    "  --json              print one JSON object instead of the table\n"
    "  -h, --help          show this help\n"
    "\n"
    "Under mpirun -np K (fmmkit built with MPI) every rank generates the same points and gives\n"
    "its contiguous share to one distributed plan; each phase's time is the largest over the\n"
    "ranks (a barrier before each timed call), the check is against the direct sum over every\n"
    "source, and rank 0 prints, with the rank count (--json: \"ranks\": K) and the host bytes\n"
    "as the largest and the mean over the ranks (docs/distributed.md).\n";

static const char *precision_name(fmk_precision p)
{
    return p == FMK_PRECISION_FP32 ? "fp32" : "fp64";
}

static const char *walk_name(fmk_walk w)
{
    return w == FMK_WALK_GROUP ? "group" : w == FMK_WALK_STACKLESS ? "stackless" : "auto";
}

/* A JSON number, or null for NaN and infinities. */
static void json_number(const char *key, double v, int last)
{
    if (isfinite(v))
        printf("  \"%s\": %.6g%s\n", key, v, last ? "" : ",");
    else
        printf("  \"%s\": null%s\n", key, last ? "" : ",");
}

static void json_string(const char *key, const char *s, int last)
{
    printf("  \"%s\": \"", key);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    printf("\"%s\n", last ? "" : ",");
}

typedef struct report {
    fmk_info info;
    const char *dist;
    int self;
    int64_t n, m;
    double eps, softening;
    measure_times times;
    measure_errors errors;
    double rate;           /* N M / p2p time (direct method), NaN otherwise */
    double effective_rate; /* N M / eval time */
    uint64_t seed;
    int ranks;         /* MPI ranks (1: one process) */
    int64_t bytes_max; /* host bytes of a plan: the largest over the ranks */
    double bytes_mean; /* and the mean */
} report;

static void print_json(const report *r)
{
    printf("{\n");
    json_string("kernel", fmk_kernel_name(r->info.kernel), 0);
    json_string("method", fmk_method_name(r->info.method), 0);
    json_string("backend", fmk_backend_name(r->info.backend), 0);
    json_string("device", r->info.device_name, 0);
    json_string("precision", precision_name(r->info.precision), 0);
    json_string("dist", r->dist, 0);
    printf("  \"n_sources\": %lld,\n  \"n_targets\": %lld,\n", (long long)r->n, (long long)r->m);
    printf("  \"targets_are_sources\": %s,\n", r->self ? "true" : "false");
    if (r->ranks > 1)
        printf("  \"ranks\": %d,\n", r->ranks);
    json_number("eps", r->eps, 0);
    json_number("softening", r->softening, 0);
    printf("  \"seed\": %llu,\n  \"repeats\": %d,\n", (unsigned long long)r->seed,
           r->times.repeats);
    printf("  \"phase_time\": {");
    for (int p = 0, first = 1; p < FMK_PHASE_COUNT; p++) {
        const char *name = fmk_phase_name((fmk_phase)p);
        if (!name)
            continue;
        printf("%s\"%s\": %.6g", first ? "" : ", ", name, r->times.phase[p]);
        first = 0;
    }
    printf("},\n");
    json_number("eval_time", r->times.eval, 0);
    json_number("interactions_per_second", r->rate, 0);
    json_number("effective_interactions_per_second", r->effective_rate, 0);
    printf("  \"sample\": %lld,\n", (long long)r->errors.sample);
    if (r->info.method == FMK_METHOD_TREE) {
        json_number("theta", r->info.theta, 0);
        printf("  \"order\": %d,\n  \"levels\": %d,\n  \"leaf_size\": %lld,\n", (int)r->info.order,
               (int)r->info.levels, (long long)r->info.leaf_size);
        json_string("walk", walk_name(r->info.walk), 0);
    }
    printf("  \"bytes_host\": %lld,\n", (long long)r->bytes_max);
    if (r->ranks > 1)
        json_number("bytes_host_mean", r->bytes_mean, 0);
    json_number("error_pot", r->errors.pot, 0);
    json_number("error_grad", r->errors.grad, 1);
    printf("}\n");
}

static void print_table(const report *r)
{
    const fmk_info *in = &r->info;
    printf("fmmkit bench: kernel %s, %s distribution, N = %lld sources, M = %lld targets%s\n",
           fmk_kernel_name(in->kernel), r->dist, (long long)r->n, (long long)r->m,
           r->self ? " (the sources)" : "");
    if (r->ranks > 1)
        printf("  %-26s %d (MPI; times: the largest over the ranks)\n", "ranks", r->ranks);
    printf("  %-26s %s\n", "method", fmk_method_name(in->method));
    printf("  %-26s %s\n", "backend", fmk_backend_name(in->backend));
    printf("  %-26s %s\n", "device", in->device_name);
    printf("  %-26s %s\n", "precision", precision_name(in->precision));
    printf("  %-26s %g\n", "eps", r->eps);
    if (r->softening > 0)
        printf("  %-26s %g\n", "softening", r->softening);
    if (in->method == FMK_METHOD_TREE) {
        printf("  %-26s %g\n", "theta", in->theta);
        printf("  %-26s %d\n", "order", (int)in->order);
        printf("  %-26s %s\n", "walk", walk_name(in->walk));
        printf("  %-26s %lld\n", "leaf size", (long long)in->leaf_size);
        printf("  %-26s %d\n", "levels", (int)in->levels);
    }
    if (r->ranks > 1)
        printf("  %-26s %lld a rank at most, %.0f on average\n", "host bytes",
               (long long)r->bytes_max, r->bytes_mean);
    else
        printf("  %-26s %lld (%.1f per source)\n", "host bytes", (long long)r->bytes_max,
               r->n > 0 ? (double)r->bytes_max / (double)r->n : 0.0);
    printf("\n  %-26s %s\n", "phase", "time [s]");
    for (int p = 0; p < FMK_PHASE_COUNT; p++)
        if (fmk_phase_name((fmk_phase)p) && (p == FMK_PHASE_SETUP || r->times.phase[p] > 0))
            printf("  %-26s %.3e\n", fmk_phase_name((fmk_phase)p), r->times.phase[p]);
    printf("  %-26s %.3e  (median of %d, after 1 warm-up)\n", "eval total", r->times.eval,
           r->times.repeats);
    if (isfinite(r->rate))
        printf("  %-26s %.3e  (N M / p2p time)\n", "interactions/s", r->rate);
    if (isfinite(r->effective_rate))
        printf("  %-26s %.3e  (N M / eval time)\n", "effective interactions/s", r->effective_rate);
    if (r->errors.sample > 0) {
        printf("\n  relative l2 error at %lld sampled targets (vs fp64 direct sum on the CPU)\n",
               (long long)r->errors.sample);
        printf("  %-26s %.3e\n", "potential", r->errors.pot);
        printf("  %-26s %.3e\n", "gradient", r->errors.grad);
    }
}

/* The generated problem: every rank holds all of it (bench_mpi.h). */
typedef struct bench_points {
    fmk_kernel kernel;
    int dim, w, gw;
    int64_t n, m; /* sources and targets (m = n when the targets are the sources) */
    int self;     /* the targets are the sources */
    const double *sources, *charges, *targets; /* targets NULL when self */
} bench_points;

/* One plan on the points: created (distributed under mpirun), set_points once and timed
 * evaluations (measure_run_sync), its info, the host bytes over the ranks, and the results at
 * every target gathered into pot and grad on rank 0. Prints the library's message and returns
 * the exit status on failure (the same on every rank). */
static int bench_one(const bench_points *b, const fmk_opts *opts, double eps, int repeats,
                     double *pot, double *grad, measure_times *times, fmk_info *info,
                     int64_t *bytes_max, double *bytes_mean)
{
    const int rank = cli_mpi_rank(), ranks = cli_mpi_size();
    int64_t s_off, s_cnt, t_off, t_cnt;
    ranks_share(b->n, rank, ranks, &s_off, &s_cnt);
    ranks_share(b->m, rank, ranks, &t_off, &t_cnt);
    fmk_plan *plan = NULL;
    fmk_status st = bench_plan_create(&plan, b->dim, b->kernel, eps, opts);
    if (st != FMK_OK)
        return cli_library_error(cmd, NULL, st);
    st = measure_run_sync(plan, s_cnt, b->sources + b->dim * s_off, b->charges + b->w * s_off,
                          t_cnt, b->self ? NULL : b->targets + b->dim * t_off, 1, repeats,
                          pot + b->w * t_off, grad + b->gw * t_off, times, bench_sync());
    if (st != FMK_OK) {
        int rc = cli_library_error(cmd, plan, st);
        fmk_plan_destroy(plan);
        return rc;
    }
    fmk_plan_info(plan, info);
    fmk_plan_destroy(plan);
    bench_max_mean(info->bytes_host, bytes_max, bytes_mean);
    bench_gather(pot, b->m, b->w);
    bench_gather(grad, b->m, b->gw);
    return CLI_OK;
}

/* The errors at the sampled targets against the direct sum over every source, on rank 0 (the
 * others have nothing to check: their errors are NaN). The same exit status on every rank. */
static int bench_errors(const bench_points *b, double softening, int threads, const double *pot,
                        const double *grad, int64_t sample, dist_rng *rng, measure_errors *err)
{
    err->sample = 0;
    err->pot = err->grad = NAN;
    int rc = CLI_OK;
    if (cli_mpi_rank() == 0) {
        char msg[512];
        fmk_status st = measure_errors_direct(
            b->dim, b->kernel, softening, threads, b->n, b->sources, b->charges, b->self ? 0 : b->m,
            b->targets, pot, grad, sample, rng, err, msg, sizeof msg);
        if (st != FMK_OK) {
            cli_error(cmd, "reference sum: %s", msg);
            rc = cli_exit_status(st);
        }
    }
    return ranks_agree(rc);
}

/* --theta-sweep: one plan per theta = 0.2 ... 1.0, the same points, charges and sampled targets
 * for every row. */
static int theta_sweep(const bench_points *b, const fmk_opts *base, dist_kind dist, double *pot,
                       double *grad, double eps, double softening, int threads, int repeats,
                       int64_t sample, const dist_rng *rng0, int json)
{
    int first = 1;
    for (int k = 0; k <= 8; k++) {
        fmk_opts opts = *base;
        opts.theta = 0.2 + 0.1 * k;
        measure_times times;
        fmk_info info;
        int64_t bytes_max;
        double bytes_mean;
        int rc =
            bench_one(b, &opts, eps, repeats, pot, grad, &times, &info, &bytes_max, &bytes_mean);
        if (rc != CLI_OK)
            return rc;
        dist_rng rng = *rng0; /* the same sample for every theta */
        measure_errors err;
        if ((rc = bench_errors(b, softening, threads, pot, grad, sample, &rng, &err)) != CLI_OK)
            return rc;
        if (first && !json) {
            printf("fmmkit bench --theta-sweep: kernel %s, %s distribution, N = %lld, M = %lld%s\n",
                   fmk_kernel_name(b->kernel), dist_name(dist), (long long)b->n, (long long)b->m,
                   b->self ? " (the sources)" : "");
            if (cli_mpi_size() > 1)
                printf("  %d MPI ranks; times: the largest over the ranks\n", cli_mpi_size());
            printf("  backend %s (%s), %s, order %d, walk %s, leaf size %lld, levels %d\n",
                   fmk_backend_name(info.backend), info.device_name, precision_name(info.precision),
                   (int)info.order, walk_name(info.walk), (long long)info.leaf_size,
                   (int)info.levels);
            printf("  times: median of %d evaluations; errors: relative l2 at %lld sampled targets "
                   "vs the fp64 direct sum\n\n",
                   repeats, (long long)err.sample);
            printf("  %5s %10s %10s %10s %10s %11s %11s\n", "theta", "tree [s]", "moments", "walk",
                   "eval [s]", "err pot", "err grad");
        }
        if (json) {
            printf("%s{\"theta\": %.2f, \"tree\": %.6g, \"moments\": %.6g, \"walk\": %.6g, "
                   "\"eval\": %.6g, \"error_pot\": %.6g, \"error_grad\": %.6g}",
                   first ? "{\"theta_sweep\": [\n  " : ",\n  ", opts.theta,
                   times.phase[FMK_PHASE_TREE], times.phase[FMK_PHASE_MOMENTS],
                   times.phase[FMK_PHASE_WALK], times.eval, err.pot, err.grad);
        } else {
            printf("  %5.2f %10.3e %10.3e %10.3e %10.3e %11.3e %11.3e\n", opts.theta,
                   times.phase[FMK_PHASE_TREE], times.phase[FMK_PHASE_MOMENTS],
                   times.phase[FMK_PHASE_WALK], times.eval, err.pot, err.grad);
        }
        first = 0;
    }
    if (json) {
        printf("\n]");
        if (cli_mpi_size() > 1)
            printf(", \"ranks\": %d", cli_mpi_size());
        printf("}\n");
    }
    return CLI_OK;
}

static int bench_command(int argc, char **argv)
{
    const char *kernel_name = "laplace", *method_name = "auto", *backend_name = "auto";
    const char *precision_str = "fp64", *dist_str = NULL, *walk_str = "auto";
    double eps = NAN, theta = 0, softening = 0; /* NAN: not given */
    int64_t n = 20000, m = 0, threads = 0, repeats = 3, sample = 1000, seed = 1;
    int64_t order = -1, leaf_size = 0;
    int json = 0, sweep = 0;
    args_opt table[] = {
        {"kernel", ARGS_STRING, &kernel_name, 0, 0},
        {"method", ARGS_STRING, &method_name, 0, 0},
        {"backend", ARGS_STRING, &backend_name, 0, 0},
        {"precision", ARGS_STRING, &precision_str, 0, 0},
        {"dist", ARGS_STRING, &dist_str, 0, 0},
        {"n", ARGS_INT, &n, 1, 0},
        {"m", ARGS_INT, &m, 1, 0},
        {"eps", ARGS_DOUBLE, &eps, 0, 0},
        {"theta", ARGS_DOUBLE, &theta, 0, 0},
        {"order", ARGS_INT, &order, -1, 0},
        {"leaf-size", ARGS_INT, &leaf_size, 0, 0},
        {"walk", ARGS_STRING, &walk_str, 0, 0},
        {"theta-sweep", ARGS_FLAG, &sweep, 0, 0},
        {"softening", ARGS_DOUBLE, &softening, 0, 0},
        {"threads", ARGS_INT, &threads, 0, 0},
        {"repeats", ARGS_INT, &repeats, 1, 0},
        {"sample", ARGS_INT, &sample, 0, 0},
        {"seed", ARGS_INT, &seed, 0, 0},
        {"json", ARGS_FLAG, &json, 0, 0},
    };
    const int n_table = (int)(sizeof table / sizeof table[0]);
    int done, rc = args_parse(cmd, argc, argv, table, n_table, usage, &done);
    if (rc != CLI_OK || done)
        return rc;

    fmk_kernel kernel;
    fmk_opts opts;
    const args_method_names names = {kernel_name, method_name, backend_name, precision_str,
                                     walk_str,    order,       leaf_size};
    if ((rc = args_method_opts(cmd, &names, &kernel, &opts)) != CLI_OK)
        return rc;
    if (sweep && opts.method != FMK_METHOD_TREE)
        return cli_usage(cmd, "--theta-sweep needs --method tree");
    if (sweep && args_find(table, n_table, "theta")->given)
        return cli_usage(cmd, "--theta-sweep and --theta exclude each other");
    const int dim = fmk_kernel_dim(kernel);
    dist_kind dist = dim == 3 ? DIST_PLUMMER : DIST_UNIFORM2D;
    if (dist_str && dist_from_name(dist_str, &dist) != 0)
        return cli_usage(cmd, "--dist: unknown distribution '%s' (%s)", dist_str, dist_names());
    if (dist_dim(dist) != dim)
        return cli_usage(cmd, "--dist %s is %dD but kernel %s is %dD", dist_name(dist),
                         dist_dim(dist), fmk_kernel_name(kernel), dim);
    const int64_t max_points = INT64_MAX / 64;
    if (n > max_points || m > max_points)
        return cli_usage(cmd, "--n / --m: too many points");
    if (repeats > 1000000 || threads > INT32_MAX)
        return cli_usage(cmd, "--repeats or --threads is out of range");
    const int smooth = kernel == FMK_KERNEL_PLUMMER || kernel == FMK_KERNEL_REGULARIZED;
    if (smooth && !args_find(table, n_table, "softening")->given)
        softening = 0.01;
    opts.theta = theta;
    opts.softening = softening;
    opts.threads = (int32_t)threads;

    const int self = !args_find(table, n_table, "m")->given;
    if (self)
        m = n;
    if (cli_mpi_size() > 1 && (n > INT32_MAX || m > INT32_MAX))
        return cli_usage(cmd, "--n / --m: at most 2^31 - 1 points under mpirun");
    const int w = fmk_kernel_is_complex(kernel) ? 2 : 1;
    const int gw = fmk_kernel_is_complex(kernel) ? 2 : dim;
    double *sources = malloc(sizeof(double) * (size_t)(n * dim));
    double *targets = self ? NULL : malloc(sizeof(double) * (size_t)(m * dim));
    double *charges = malloc(sizeof(double) * (size_t)(n * w));
    double *pot = malloc(sizeof(double) * (size_t)(m * w));
    double *grad = malloc(sizeof(double) * (size_t)(m * gw));
    const int missing = !sources || (!self && !targets) || !charges || !pot || !grad;
    if (missing)
        cli_error(cmd, "out of memory for %lld sources and %lld targets", (long long)n,
                  (long long)m);
    if ((rc = ranks_agree(missing ? CLI_FAIL : CLI_OK)) != CLI_OK) {
        rc = missing ? rc : CLI_OK; /* the ranks that ran out say so */
        goto done;
    }
    /* the whole problem on every rank, as one process draws it (bench_mpi.h) */
    dist_rng rng;
    dist_rng_seed(&rng, (uint64_t)seed);
    dist_fill(dist, &rng, n, sources);
    if (!self)
        dist_fill(dist, &rng, m, targets);
    dist_charges(&rng, n, w == 2, charges);
    const bench_points b = {kernel, dim, w, gw, n, m, self, sources, charges, targets};

    if (isnan(eps))
        eps = fmk_eps_default(opts.precision);
    if (sweep) {
        rc = theta_sweep(&b, &opts, dist, pot, grad, eps, softening, (int)threads, (int)repeats,
                         sample, &rng, json);
        goto done;
    }

    report r;
    memset(&r, 0, sizeof r);
    if ((rc = bench_one(&b, &opts, eps, (int)repeats, pot, grad, &r.times, &r.info, &r.bytes_max,
                        &r.bytes_mean)) != CLI_OK ||
        (rc = bench_errors(&b, softening, (int)threads, pot, grad, sample, &rng, &r.errors)) !=
            CLI_OK)
        goto done;
    const double pairs = (double)n * (double)m;
    const double p2p = r.times.phase[FMK_PHASE_P2P];
    r.dist = dist_name(dist);
    r.self = self;
    r.n = n, r.m = m;
    r.eps = eps;
    r.softening = softening;
    r.seed = (uint64_t)seed;
    r.ranks = cli_mpi_size();
    r.rate = r.info.method == FMK_METHOD_DIRECT && p2p > 0 ? pairs / p2p : NAN;
    r.effective_rate = r.times.eval > 0 ? pairs / r.times.eval : NAN;
    if (json)
        print_json(&r);
    else
        print_table(&r);
    rc = CLI_OK;

done:
    free(sources);
    free(targets);
    free(charges);
    free(pot);
    free(grad);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    /* under mpirun: one message for the job, the table from rank 0 (ranks.h) */
    ranks_held held;
    ranks_hold(&held);
    return ranks_release(&held, bench_command(argc, argv));
}
