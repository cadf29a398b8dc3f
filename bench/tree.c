/* tree.c -- benchmark of the GPU treecode (method tree, backend cuda): data on the device, the
 * tree build included. Total = fmk_plan_set_points_device + fmk_plan_eval_device (wall clock,
 * both return with the work done), median over repeats after a warm-up; the phases (tree,
 * moments, walk) from fmk_info. Errors: relative l2 of the potential and of the acceleration
 * (gradient) at 1024 sample targets against the GPU direct sum in fp64. Prints tables, or JSON.
 *
 *   tree [--json] [--quick]     headline (2^20, 2^24), walks, leaf sizes, N scaling, crossover
 *   tree --theta-sweep [--json] the paper's Table V: N = 800k, theta 0.2 .. 1.0
 *   tree --max-log2 K           largest N = 2^K of the scaling table (default 27)
 *   tree --headline [--big]     only the headline rows: 2^20 cube and Plummer (fp32, default
 *                               walk), and with --big 2^24 too
 *   tree --profile              one 2^20 cube evaluation after a warm-up (for a profiler)
 *   tree --groups               N = 2^14 .. 2^20: the default groups, one group per node, and
 *                               siblings' points cut into full groups, at every N
 *   tree --crossover            N = 1024 .. 32768 in steps of 2^(1/2): the treecode (fp32,
 *                               defaults) against the GPU direct sum (fp32), cube and Plummer,
 *                               and the N where the treecode becomes the faster
 *   tree --one N [--plummer] [--direct] [--errors]   one configuration, 16 repeats (for a
 *                               profiler); --errors: with the sampled errors (a GPU direct sum
 *                               at 1024 targets before the runs)
 *   --no-small                  (with any of the above) the small-N paths off: one launch per
 *                               tree level and per moment level, no split walk
 *   --one-wait-off              (with any of the above) set_points_device and eval as before
 *                               the one-wait paths: the box reduced by CUB and read, the build
 *                               waiting for its level table, and the charge check, charges and
 *                               moments in six launches and copies
 *   --sort-tiles K              small trees of up to K x 8192 points sort their keys by one
 *                               block per tile (2048 points, 4096 above 16384) and merge them
 *                               (default 4, at most 8; 1: CUB's sort above 8192)
 *   --fused-max N               the one-launch tree up to N points (default 4096, at most 8192)
 *   --moments-small-max N       trees of at most N nodes (default 8192): charges and moments
 *                               in one launch (0: as larger trees)
 *   --moments-up-max N          larger trees of at most N nodes (default 262144): charges and
 *                               moments in one launch, each node by the last of its children
 *                               to be done (0: the packing, then one launch per level)
 *   --small-fold K              trees built without a wait: the group boxes in the packing's
 *                               launch, and the charge check of at most 32768 sources by one
 *                               block without a memset (1, default; 0: k_group_boxes, memset
 *                               and a grid of blocks)
 *   --frame-cluster K           the frame of small sets by a cluster of K blocks (default 8;
 *                               1: one block)
 *   --frame-grid 0|1            larger sets' frame by a grid of blocks, no wait for the box
 *                               (1, default), or CUB's box and a wait (0)
 *   --frame-small N, --prep-small N   the largest sets of the one-block frame and of the
 *                               one-block charges and moments (default 32768 and 4096)
 *   --split-sort-min N          trees of more than N points (default 65536) sort the keys' top
 *                               32 bits first; a huge N sorts all 63 bits
 *   --split-nodes K, --split-level L, --split-warps W   the split walk's knobs (defaults 8, 5, 24)
 *   --theta T                   theta of --headline and --one (default 0.6)
 *   --walk W                    the walk of --headline, --one and --theta-sweep: auto (default)
 *                               or stackless (the paper's walk, one target per thread)
 *   tree --headline --compare   the headline rows, then each with other acceptance tests
 *                               (--mac), theta +- 0.05 and leaf sizes
 *   --mac K                     the group walks' acceptance test (0 the group's box; 1 also
 *                               every target on its own; 2 as 1 for leaves only; default 1
 *                               from 32768 sources, 2 below)
 *   --leaf-theta T              with --mac 1 or 2: the theta of a leaf's per-target test
 *   tree --headline --local-sweep   the headline rows, then each with the cell-to-group step
 *                               off, of order 2 (K = 3, 4) and of order 3 (K = 1.5 .. 4)
 *   --local P                   the cell-to-group step's expansion order (2, 3 or 4, default;
 *                               0 off)
 *   --local-k K                 its distance test: |xc - c| > A r_open + K (0.6 / theta) R_g
 *                               (default 1.65 from 32768 sources, 2.25 below)
 *   --local-open A              the weight A of r_open in that test (default 0.5)
 *   --local-harmonic H          with order 4 and no softening, the M2L of the expansion's
 *                               harmonic coefficients only (1) or of all 35 (0)
 *   --super S                   super-groups of S groups (0 off, 2 default, at most 32): the
 *                               groups' far field and start lists found once per
 *                               super-group (from 2^18 targets, deep trees: --super-depth)
 *   --super-cap C               start-list entries per super-group (default 640, the most)
 *   --super-open K              a node the super-group's box opens is opened when every group
 *                               box opens it (0, default) or always (1)
 *   --super-k F                 the super-group's step takes nodes farther than
 *                               A r_open + F K (0.6 / theta) R from its centre (default 1.2)
 *   --super2 S2                 a second level: parents of S2 super-groups walked first,
 *                               whose start lists the super-groups walk from (0 off,
 *                               default 8; used when S * S2 <= 32)
 *   --tickets K                 the group walk's warps take their groups by tickets (1,
 *                               default), or one group per one-warp block (0)
 *   --super-depth D             super-groups only for trees of at least log8(N / leaf) + D
 *                               levels (default 4: the Plummer sphere, not the cube; -100:
 *                               every tree)
 *   tree --headline --super-sweep   the headline rows, then for the Plummer sphere rows with
 *                               S (+ S2) = 4, 4+4, 4+8, 8+4, 2+8, 2+16, 2, with
 *                               --super-k 1.15 .. 1.4
 *   tree --tune [--big]         leaf sizes and the step's (A, K) with order 3 (the first and
 *                               last rows: order 3's default, A = 0.75, K = 3.5)
 *   tree --tune-local [--big]   the step of order 4 with several (A, K), against the defaults
 *   --knob NAME VALUE           any tuning knob of the GPU treecode (core/tune.h: "treecode.*",
 *                               engine.cu lists them); the options above set these knobs
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "bench_util.h"
#include "core/tune.h"
#include "fmmkit.h"

/* The GPU treecode's tuning knobs (core/tune.h) that every plan of the benchmark gets, set by
 * the options: name and value, in the order given. */
typedef struct knob_value {
    const char *name;
    double value;
} knob_value;
static knob_value knobs[64];
static int n_knobs;

static void knob(const char *name, double value)
{
    for (int k = 0; k < n_knobs; k++)
        if (strcmp(knobs[k].name, name) == 0) {
            knobs[k].value = value;
            return;
        }
    if (n_knobs >= (int)(sizeof knobs / sizeof knobs[0])) {
        fprintf(stderr, "tree: too many knobs\n");
        exit(2);
    }
    knobs[n_knobs].name = name, knobs[n_knobs].value = value;
    n_knobs++;
}

/* The value the plans get for a knob (dflt: its default, when no option set it). */
static double knob_get(const char *name, double dflt)
{
    for (int k = 0; k < n_knobs; k++)
        if (strcmp(knobs[k].name, name) == 0)
            return knobs[k].value;
    return dflt;
}

#define SAMPLES 1024

typedef struct row {
    const char *table, *dist;
    int64_t n;
    fmk_precision prec;
    double theta;
    int order, leaf, group;
    fmk_walk walk;
    double total, setup, eval, tree, moments, walk_t; /* seconds, medians */
    double err_pot, err_acc;                          /* -1: not measured */
    double bytes_per_point;
    double direct; /* direct-sum total, seconds (crossover) */
} row;

static row rows[256];
static int n_rows;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static void *xmalloc(size_t b)
{
    void *p = malloc(b);
    if (!p) {
        fprintf(stderr, "tree: out of host memory (%zu bytes)\n", b);
        exit(1);
    }
    return p;
}

#define CUDA(call)                                                            \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "tree: %s: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Uniform cube [0, 1]^3, or a Plummer sphere (scale radius 1, cut at 10). */
static void make_points(int plummer, int64_t n, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        if (!plummer) {
            x[3 * i] = urand(), x[3 * i + 1] = urand(), x[3 * i + 2] = urand();
            continue;
        }
        double r;
        do
            r = 1.0 / sqrt(pow(urand(), -2.0 / 3.0) - 1.0);
        while (r > 10);
        double z = 2 * urand() - 1, phi = 6.283185307179586 * urand(), s = sqrt(1 - z * z);
        x[3 * i] = r * s * cos(phi), x[3 * i + 1] = r * s * sin(phi), x[3 * i + 2] = r * z;
    }
}

typedef struct problem {
    int plummer;
    int64_t n;
    double *d_x, *d_q, *d_pot, *d_grad;
    double *ref_pot, *ref_grad; /* SAMPLES values at the sample targets */
    double *x;                  /* host points (for the references) */
    int64_t stride;             /* sample s is point s * stride */
} problem;

static void problem_free(problem *p)
{
    cudaFree(p->d_x), cudaFree(p->d_q), cudaFree(p->d_pot), cudaFree(p->d_grad);
    free(p->ref_pot), free(p->ref_grad), free(p->x);
    memset(p, 0, sizeof *p);
}

static void die(fmk_plan *plan, const char *what)
{
    fprintf(stderr, "tree: %s: %s\n", what, fmk_plan_last_error(plan));
    exit(1);
}

/* The direct sum (GPU, fp64) at the sample targets: laplace, so the coincident source (the
 * target itself) is left out as in the self evaluation. */
static void reference(problem *p, const double *q)
{
    const int64_t m = p->n < SAMPLES ? p->n : SAMPLES;
    double *y = xmalloc(m * 24);
    p->stride = p->n / m;
    for (int64_t s = 0; s < m; s++)
        memcpy(y + 3 * s, p->x + 3 * s * p->stride, 24);
    p->ref_pot = xmalloc(m * 8), p->ref_grad = xmalloc(m * 24);
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT, o.backend = FMK_BACKEND_CUDA;
    fmk_plan *plan;
    if (fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &o) != FMK_OK)
        die(NULL, "create (direct)");
    if (fmk_plan_set_points(plan, p->n, p->x, m, y) != FMK_OK ||
        fmk_plan_eval(plan, q, p->ref_pot, p->ref_grad) != FMK_OK)
        die(plan, "direct reference");
    fmk_plan_destroy(plan);
    free(y);
}

static void problem_make(problem *p, int plummer, int64_t n, int with_reference)
{
    memset(p, 0, sizeof *p);
    p->plummer = plummer, p->n = n;
    p->x = xmalloc(n * 24);
    double *q = xmalloc(n * 8);
    make_points(plummer, n, p->x);
    for (int64_t i = 0; i < n; i++)
        q[i] = 1.0 / n; /* equal masses */
    CUDA(cudaMalloc((void **)&p->d_x, n * 24));
    CUDA(cudaMalloc((void **)&p->d_q, n * 8));
    CUDA(cudaMalloc((void **)&p->d_pot, n * 8));
    CUDA(cudaMalloc((void **)&p->d_grad, n * 24));
    CUDA(cudaMemcpy(p->d_x, p->x, n * 24, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(p->d_q, q, n * 8, cudaMemcpyHostToDevice));
    if (with_reference)
        reference(p, q);
    free(q);
}

static double rel_l2_sampled(const double *d_out, int w, const problem *p, const double *ref)
{
    const int64_t m = p->n < SAMPLES ? p->n : SAMPLES;
    double num = 0, den = 0, v[3];
    for (int64_t s = 0; s < m; s++) {
        CUDA(cudaMemcpy(v, d_out + w * s * p->stride, w * 8, cudaMemcpyDeviceToHost));
        for (int k = 0; k < w; k++) {
            double d = v[k] - ref[w * s + k];
            num += d * d, den += ref[w * s + k] * ref[w * s + k];
        }
    }
    return sqrt(num / den);
}

static fmk_walk walk_opt = FMK_WALK_AUTO; /* --walk: of the headline, --one and --theta-sweep */

/* Runs one configuration reps times; fills a row. */
static row measure(const char *table, problem *p, fmk_precision prec, double theta, int order,
                   int leaf, fmk_walk walk, int reps)
{
    row r;
    memset(&r, 0, sizeof r);
    r.table = table, r.dist = p->plummer ? "plummer" : "cube", r.n = p->n, r.prec = prec;
    r.theta = theta, r.order = order, r.leaf = leaf, r.group = 32, r.walk = walk;
    r.err_pot = r.err_acc = -1;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE, o.backend = FMK_BACKEND_CUDA, o.precision = prec;
    o.theta = theta, o.order = order, o.leaf_size = leaf, o.walk = walk;
    fmk_plan *plan;
    if (fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-3, &o) != FMK_OK)
        die(NULL, "create");
    for (int k = 0; k < n_knobs; k++)
        if (fmk_plan_tune(plan, knobs[k].name, knobs[k].value) != FMK_OK)
            die(plan, "knob");
    double ts[16], te[16], tt[16], tm[16], tw[16], tot[16];
    fmk_info info;
    for (int k = -1; k < reps; k++) {
        CUDA(cudaDeviceSynchronize());
        double t0 = bench_now();
        if (fmk_plan_set_points_device(plan, p->n, p->d_x, 0, NULL) != FMK_OK)
            die(plan, "set_points_device");
        double t1 = bench_now();
        if (fmk_plan_eval_device(plan, p->d_q, p->d_pot, p->d_grad) != FMK_OK)
            die(plan, "eval_device");
        double t2 = bench_now();
        fmk_plan_info(plan, &info);
        if (k < 0)
            continue;
        ts[k] = t1 - t0, te[k] = t2 - t1, tot[k] = t2 - t0;
        tt[k] = info.phase_time[FMK_PHASE_TREE], tm[k] = info.phase_time[FMK_PHASE_MOMENTS];
        tw[k] = info.phase_time[FMK_PHASE_WALK];
    }
    r.total = bench_median(tot, reps), r.setup = bench_median(ts, reps),
    r.eval = bench_median(te, reps);
    r.tree = bench_median(tt, reps), r.moments = bench_median(tm, reps),
    r.walk_t = bench_median(tw, reps);
    r.bytes_per_point = (double)info.bytes_device / p->n;
    if (p->ref_pot) {
        r.err_pot = rel_l2_sampled(p->d_pot, 1, p, p->ref_pot);
        r.err_acc = rel_l2_sampled(p->d_grad, 3, p, p->ref_grad);
    }
    fmk_plan_destroy(plan);
    return r;
}

/* GPU direct sum, fp32, pot + grad, data on the device: set_points_device + eval_device. */
static double direct_time(problem *p, int reps)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_DIRECT, o.backend = FMK_BACKEND_CUDA, o.precision = FMK_PRECISION_FP32;
    fmk_plan *plan;
    if (fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-3, &o) != FMK_OK)
        die(NULL, "create (direct)");
    double t[16];
    for (int k = -1; k < reps; k++) {
        CUDA(cudaDeviceSynchronize());
        double t0 = bench_now();
        if (fmk_plan_set_points_device(plan, p->n, p->d_x, 0, NULL) != FMK_OK ||
            fmk_plan_eval_device(plan, p->d_q, p->d_pot, p->d_grad) != FMK_OK)
            die(plan, "direct");
        if (k >= 0)
            t[k] = bench_now() - t0;
    }
    fmk_plan_destroy(plan);
    return bench_median(t, reps);
}

static void add(row r, int json)
{
    if (n_rows < (int)(sizeof rows / sizeof rows[0]))
        rows[n_rows++] = r;
    if (json)
        return;
    const char *wn = r.walk == FMK_WALK_STACKLESS ? "stackless" : "group";
    char err[64] = "";
    if (r.err_acc >= 0)
        snprintf(err, sizeof err, "%.2e | %.2e", r.err_pot, r.err_acc);
    else
        snprintf(err, sizeof err, " | ");
    char dir[32] = "";
    if (r.direct > 0)
        snprintf(dir, sizeof dir, "%.3f", r.direct * 1e3);
    printf("| %s | %s | %lld | %s | %.2f | %d | %s%s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s "
           "| %.1f | %s |\n",
           r.table, r.dist, (long long)r.n, r.prec == FMK_PRECISION_FP32 ? "fp32" : "fp64", r.theta,
           r.order, wn, r.walk == FMK_WALK_STACKLESS ? "" : " 32", r.leaf, r.total * 1e3,
           r.tree * 1e3, r.moments * 1e3, r.walk_t * 1e3, (r.setup - r.tree) * 1e3, err,
           r.bytes_per_point, dir);
    fflush(stdout);
}

static void header(int json)
{
    if (json)
        return;
    printf("| table | points | N | prec | theta | order | walk | leaf | total ms | tree ms | "
           "moments ms | walk ms | other setup ms | err pot | err acc | bytes/pt | direct ms |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
           "--- | --- | --- |\n");
}

static void print_json(void)
{
    printf("[\n");
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        printf(
            "  {\"table\": \"%s\", \"points\": \"%s\", \"n\": %lld, \"precision\": \"%s\", "
            "\"theta\": %.2f, \"order\": %d, \"walk\": \"%s\", \"group\": %d, \"leaf_size\": %d, "
            "\"total_s\": %.6e, \"set_points_s\": %.6e, \"eval_s\": %.6e, \"tree_s\": %.6e, "
            "\"moments_s\": %.6e, \"walk_s\": %.6e, \"err_pot\": %.4e, \"err_acc\": %.4e, "
            "\"bytes_per_point\": %.1f, \"direct_s\": %.6e}%s\n",
            r->table, r->dist, (long long)r->n, r->prec == FMK_PRECISION_FP32 ? "fp32" : "fp64",
            r->theta, r->order, r->walk == FMK_WALK_STACKLESS ? "stackless" : "group", r->group,
            r->leaf, r->total, r->setup, r->eval, r->tree, r->moments, r->walk_t, r->err_pot,
            r->err_acc, r->bytes_per_point, r->direct, i + 1 < n_rows ? "," : "");
    }
    printf("]\n");
}

int main(int argc, char **argv)
{
    int json = 0, quick = 0, sweep = 0, max_log2 = 27, leaf = 0, headline = 0, big = 0;
    int profile = 0, groups = 0, crossover = 0, plummer = 0, with_direct = 0;
    int with_errors = 0;
    int64_t one = 0;
    double theta = 0.6;
    int compare = 0, local_sweep = 0, tune = 0, tune_local = 0, super_sweep = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--json") == 0)
            json = 1;
        else if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[a], "--theta-sweep") == 0)
            sweep = 1;
        else if (strcmp(argv[a], "--headline") == 0)
            headline = 1;
        else if (strcmp(argv[a], "--big") == 0)
            big = 1;
        else if (strcmp(argv[a], "--profile") == 0)
            profile = 1;
        else if (strcmp(argv[a], "--compare") == 0)
            compare = 1;
        else if (strcmp(argv[a], "--local-sweep") == 0)
            local_sweep = 1;
        else if (strcmp(argv[a], "--groups") == 0)
            groups = 1;
        else if (strcmp(argv[a], "--crossover") == 0)
            crossover = 1;
        else if (strcmp(argv[a], "--plummer") == 0)
            plummer = 1;
        else if (strcmp(argv[a], "--errors") == 0)
            with_errors = 1;
        else if (strcmp(argv[a], "--direct") == 0)
            with_direct = 1;
        else if (strcmp(argv[a], "--no-small") == 0)
            knob("treecode.tree.small_max", 0), knob("treecode.moments_small_max", 0),
                knob("treecode.moments_up_max", 0), knob("treecode.split_warps", 0);
        else if (strcmp(argv[a], "--one-wait-off") == 0)
            knob("treecode.frame_small_max", 0), knob("treecode.async", 0),
                knob("treecode.prep_small_max", 0);
        else if (strcmp(argv[a], "--frame-cluster") == 0 && a + 1 < argc)
            knob("treecode.frame_cluster", atoi(argv[++a]));
        else if (strcmp(argv[a], "--frame-grid") == 0 && a + 1 < argc)
            knob("treecode.frame_grid", atoi(argv[++a]));
        else if (strcmp(argv[a], "--fused-max") == 0 && a + 1 < argc)
            knob("treecode.tree.fused_max", atoi(argv[++a]));
        else if (strcmp(argv[a], "--moments-small-max") == 0 && a + 1 < argc)
            knob("treecode.moments_small_max", atof(argv[++a]));
        else if (strcmp(argv[a], "--moments-up-max") == 0 && a + 1 < argc)
            knob("treecode.moments_up_max", atoll(argv[++a]));
        else if (strcmp(argv[a], "--small-fold") == 0 && a + 1 < argc) {
            const int k = atoi(argv[++a]);
            knob("treecode.pack_boxes", k);
            knob("treecode.charge_block_max", k ? 32768 : 0);
        } else if (strcmp(argv[a], "--sort-tiles") == 0 && a + 1 < argc)
            knob("treecode.tree.sort_tiles", atoi(argv[++a]));
        else if (strcmp(argv[a], "--frame-small") == 0 && a + 1 < argc)
            knob("treecode.frame_small_max", atoll(argv[++a]));
        else if (strcmp(argv[a], "--prep-small") == 0 && a + 1 < argc)
            knob("treecode.prep_small_max", atoll(argv[++a]));
        else if (strcmp(argv[a], "--split-sort-min") == 0 && a + 1 < argc)
            knob("treecode.tree.split_sort_min", atoll(argv[++a]));
        else if (strcmp(argv[a], "--split-nodes") == 0 && a + 1 < argc)
            knob("treecode.split_nodes", atoi(argv[++a]));
        else if (strcmp(argv[a], "--split-level") == 0 && a + 1 < argc)
            knob("treecode.split_level_max", atoi(argv[++a]));
        else if (strcmp(argv[a], "--split-warps") == 0 && a + 1 < argc)
            knob("treecode.split_warps", atoi(argv[++a]));
        else if (strcmp(argv[a], "--one") == 0 && a + 1 < argc)
            one = atoll(argv[++a]);
        else if (strcmp(argv[a], "--max-log2") == 0 && a + 1 < argc)
            max_log2 = atoi(argv[++a]);
        else if (strcmp(argv[a], "--walk") == 0 && a + 1 < argc) {
            const char *w = argv[++a];
            if (strcmp(w, "auto") && strcmp(w, "stackless")) {
                fprintf(stderr, "tree: --walk %s: auto or stackless\n", w);
                return 2;
            }
            walk_opt = strcmp(w, "stackless") == 0 ? FMK_WALK_STACKLESS : FMK_WALK_AUTO;
        } else if (strcmp(argv[a], "--leaf") == 0 && a + 1 < argc)
            leaf = atoi(argv[++a]);
        else if (strcmp(argv[a], "--theta") == 0 && a + 1 < argc)
            theta = atof(argv[++a]);
        else if (strcmp(argv[a], "--leaf-theta") == 0 && a + 1 < argc)
            knob("treecode.leaf_theta", atof(argv[++a]));
        else if (strcmp(argv[a], "--mac") == 0 && a + 1 < argc)
            knob("treecode.mac", atoi(argv[++a]));
        else if (strcmp(argv[a], "--local") == 0 && a + 1 < argc)
            knob("treecode.local", atoi(argv[++a]));
        else if (strcmp(argv[a], "--local-k") == 0 && a + 1 < argc)
            knob("treecode.local_k", atof(argv[++a]));
        else if (strcmp(argv[a], "--local-open") == 0 && a + 1 < argc)
            knob("treecode.local_open", atof(argv[++a]));
        else if (strcmp(argv[a], "--local-harmonic") == 0 && a + 1 < argc)
            knob("treecode.local_harmonic", atoi(argv[++a]));
        else if (strcmp(argv[a], "--super") == 0 && a + 1 < argc)
            knob("treecode.super", atoi(argv[++a]));
        else if (strcmp(argv[a], "--super-cap") == 0 && a + 1 < argc)
            knob("treecode.super_cap", atoi(argv[++a]));
        else if (strcmp(argv[a], "--tickets") == 0 && a + 1 < argc)
            knob("treecode.tickets", atoi(argv[++a]));
        else if (strcmp(argv[a], "--super-open") == 0 && a + 1 < argc)
            knob("treecode.super_open", atoi(argv[++a]));
        else if (strcmp(argv[a], "--super-k") == 0 && a + 1 < argc)
            knob("treecode.super_k", atof(argv[++a]));
        else if (strcmp(argv[a], "--super2") == 0 && a + 1 < argc)
            knob("treecode.super2", atoi(argv[++a]));
        else if (strcmp(argv[a], "--super-depth") == 0 && a + 1 < argc)
            knob("treecode.super_depth", atof(argv[++a]));
        else if (strcmp(argv[a], "--super-sweep") == 0)
            super_sweep = 1;
        else if (strcmp(argv[a], "--tune") == 0)
            tune = 1;
        else if (strcmp(argv[a], "--tune-local") == 0)
            tune = 1, tune_local = 1;
        else if (strcmp(argv[a], "--knob") == 0 && a + 2 < argc) {
            knob(argv[a + 1], atof(argv[a + 2]));
            a += 2;
        } else {
            fprintf(
                stderr,
                "usage: tree [--json] [--quick] [--theta-sweep] [--max-log2 K] [--leaf L] "
                "[--headline [--big]] [--profile] [--groups] [--crossover] "
                "[--one N [--plummer] [--direct] [--errors]] [--no-small] [--one-wait-off] "
                "[--sort-tiles K] [--fused-max N] "
                "[--moments-small-max N] [--moments-up-max N] [--small-fold K] [--frame-cluster K] "
                "[--frame-grid K] [--frame-small N] [--prep-small N] [--split-sort-min N] "
                "[--split-nodes K] "
                "[--split-level L] [--split-warps W] [--theta T] [--walk auto|stackless] [--mac K] "
                "[--leaf-theta T] "
                "[--local P] [--local-k K] [--local-open A] [--local-harmonic H] [--local-sweep] "
                "[--tickets K] [--super S] [--super-cap C] [--super-open K] [--super-k F] "
                "[--super2 S2] [--super-depth D] [--super-sweep] "
                "[--tune [--big]] [--tune-local [--big]]\n");
            return 2;
        }
    }
    if (fmk_cuda_device_count() <= 0) {
        fprintf(stderr, "tree: no CUDA device\n");
        return 1;
    }
    const fmk_precision f32 = FMK_PRECISION_FP32;
    const int reps = quick ? 3 : 7;
    header(json);
    problem p;
    if (sweep) { /* Nakasato Table V: N = 800k, theta 0.2 .. 1.0 */
        for (int d = 0; d < 2; d++) {
            problem_make(&p, d, quick ? 100000 : 819200, 1);
            for (int k = 2; k <= 10; k++)
                for (int prec = 0; prec < 2; prec++)
                    add(measure("theta", &p, prec ? f32 : FMK_PRECISION_FP64, 0.1 * k, 2, leaf,
                                walk_opt, reps),
                        json);
            problem_free(&p);
        }
        if (json)
            print_json();
        return 0;
    }
    if (profile) {
        problem_make(&p, 0, (int64_t)1 << 20, 0);
        add(measure("profile", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, 1), json);
        problem_free(&p);
        return 0;
    }
    if (one > 0) {
        problem_make(&p, plummer, one, with_errors);
        row r = measure("one", &p, f32, theta, 2, leaf, walk_opt, 16);
        if (with_direct)
            r.direct = direct_time(&p, 16);
        add(r, json);
        problem_free(&p);
        if (json)
            print_json();
        return 0;
    }
    if (crossover) {
        for (int d = 0; d < 2; d++) {
            double prev_n = 0, prev_gap = 0; /* gap = tree - direct, seconds */
            double found = 0;
            for (int h = 20; h <= 30; h++) {
                const int64_t n = (int64_t)llround(pow(2.0, 0.5 * h));
                problem_make(&p, d, n, 0);
                row r = measure("crossover", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, 15);
                r.direct = direct_time(&p, 15);
                add(r, json);
                /* found: the N from which the treecode was the faster at every N measured
                 * (a crossing back makes it look again), interpolated in log N */
                const double gap = r.total - r.direct;
                if (gap > 0)
                    found = 0;
                else if (!found && prev_n > 0 && prev_gap > 0)
                    found = exp(log(prev_n) +
                                (log((double)n) - log(prev_n)) * prev_gap / (prev_gap - gap));
                else if (!found)
                    found = (double)n; /* faster already at the smallest N */
                prev_n = (double)n, prev_gap = gap;
                problem_free(&p);
            }
            if (!json) {
                if (found > 0)
                    printf("crossover (%s): the treecode is faster at every N from ~ %.0f\n",
                           d ? "plummer" : "cube", found);
                else
                    printf("crossover (%s): not reached below N = 32768\n", d ? "plummer" : "cube");
            }
        }
        if (json)
            print_json();
        return 0;
    }
    if (groups) {
        for (int d = 0; d < 2; d++)
            for (int k = 14; k <= 20; k++) {
                problem_make(&p, d, (int64_t)1 << k, 0);
                add(measure("groups: default", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, reps), json);
                knob("treecode.group_merge_min", 0);
                knob("treecode.group_merge", 0);
                add(measure("groups: one per node", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, reps),
                    json);
                knob("treecode.group_merge", 2);
                add(measure("groups: cut", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, reps), json);
                knob("treecode.group_merge_min", 1 << 19);
                problem_free(&p);
            }
        if (json)
            print_json();
        return 0;
    }
    if (tune) { /* leaf size and the cell-to-group test (a r_open + k R_g) with the step on */
        static const double cfg_leaf[][4] = {
            /* leaf, a, k, order; first, last: order 3's default */
            {48, 0.75, 3.5, 3}, {48, 1, 3, 3},     {40, 0.75, 3.5, 3}, {56, 0.75, 3.5, 3},
            {64, 0.75, 3.5, 3}, {48, 0.5, 4, 3},   {48, 0.25, 4, 3},   {48, 0.25, 4.5, 3},
            {48, 0.5, 3.5, 3},  {48, 0.5, 4.5, 3}, {48, 0.75, 3, 3},   {48, 0, 5, 3},
            {48, 0, 6, 3},      {48, 0.75, 3.5, 3}};
        static const double cfg_local[][4] = {
            /* --tune-local: order 4 (default a 0.5, k 2.25) */
            {48, 0.75, 3.5, 3}, {48, 0.75, 3.5, 4}, {48, 0.75, 2.5, 4}, {48, 0.75, 2, 4},
            {48, 0.5, 2.5, 4},  {48, 0.5, 2, 4},    {48, 0.25, 2.5, 4}, {48, 0.25, 2.25, 4},
            {48, 0.25, 2, 4},   {48, 0, 3, 4},      {48, 0, 2.75, 4},   {48, 0, 2.5, 4},
            {48, 0.75, 3.5, 3}};
        const double (*cfg)[4] = tune_local ? cfg_local : cfg_leaf;
        const int ncfg = tune_local ? (int)(sizeof cfg_local / sizeof cfg_local[0])
                                    : (int)(sizeof cfg_leaf / sizeof cfg_leaf[0]);
        const double a0 = knob_get("treecode.local_open", 0.5);
        const double k0 = knob_get("treecode.local_k", -1), l0 = knob_get("treecode.local", 4);
        for (int k = 20; k <= (big ? 24 : 20); k += 4)
            for (int d = 0; d < 2; d++) {
                problem_make(&p, d, (int64_t)1 << k, 1);
                for (int c = 0; c < ncfg; c++) {
                    if (k >= 24 && cfg[c][0] != 48)
                        continue;              /* 2^24: leaves of 48 only */
                    static char names[32][40]; /* rows keep the pointer */
                    char *name = names[c];
                    snprintf(name, sizeof names[c], "tune P %d a %.2g k %.2g", (int)cfg[c][3],
                             cfg[c][1], cfg[c][2]);
                    knob("treecode.local_open", cfg[c][1]), knob("treecode.local_k", cfg[c][2]);
                    knob("treecode.local", cfg[c][3]);
                    add(measure(c == ncfg - 1 ? "tune default again" : name, &p, f32, theta, 2,
                                (int)cfg[c][0], FMK_WALK_AUTO, k >= 24 ? 3 : reps),
                        json);
                }
                knob("treecode.local_open", a0), knob("treecode.local_k", k0);
                knob("treecode.local", l0);
                problem_free(&p);
            }
        if (json)
            print_json();
        return 0;
    }
    if (headline) {
        for (int k = 20; k <= (big ? 24 : 20); k += 4)
            for (int d = 0; d < 2; d++) {
                problem_make(&p, d, (int64_t)1 << k, 1);
                static const char *heads[3] = {"headline mac 0", "headline mac 1", "headline"};
                const int mac = (int)knob_get("treecode.mac", -1);
                add(measure(heads[mac == 0 || mac == 1 ? mac : 2], &p, f32, theta, 2, leaf,
                            walk_opt, k >= 24 ? 3 : reps),
                    json);
                if (compare) { /* mac, theta - dtheta, leaf, group, leaf theta (hundredths) */
                    static const char *names[3][4] = {
                        {"compare mac 0", "", "", ""},
                        {"compare mac 1", "mac 1 leaf theta 0.7", "", ""},
                        {"compare mac 2", "mac 2 leaf theta 0.7", "mac 2 leaf theta 0.8",
                         "mac 2 leaf theta 0.85"}};
                    const double lt0 = knob_get("treecode.leaf_theta", 0);
                    const int cfg[][5] = {
                        {0, 0, 64, 32, 0},  {1, 0, 48, 32, 0},  {2, 0, 48, 32, 70},
                        {2, 0, 48, 32, 80}, {2, 0, 48, 32, 85}, {1, 0, 48, 32, 70},
                        {2, -5, 48, 32, 0}, {2, 5, 48, 32, 80}, {2, 5, 48, 32, 0}};
                    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                        knob("treecode.mac", cfg[c][0]);
                        knob("treecode.leaf_theta", 0.01 * cfg[c][4]);
                        const int nm = cfg[c][4] == 0    ? 0
                                       : cfg[c][4] == 70 ? 1
                                       : cfg[c][4] == 80 ? 2
                                                         : 3;
                        add(measure(names[cfg[c][0]][nm], &p, f32, theta - 0.01 * cfg[c][1], 2,
                                    cfg[c][2], FMK_WALK_AUTO, k >= 24 ? 3 : reps),
                            json);
                    }
                    knob("treecode.mac", mac), knob("treecode.leaf_theta", lt0);
                }
                if (local_sweep) { /* the cell-to-group step off, and its order and distance test */
                    static const char *names[7] = {"local off",     "local 2 k 3", "local 2 k 4",
                                                   "local 3 k 1.5", "local 3 k 2", "local 3 k 3",
                                                   "local 3 k 4"};
                    static const double cfg[7][2] = {{0, 0}, {2, 3}, {2, 4}, {3, 1.5},
                                                     {3, 2}, {3, 3}, {3, 4}};
                    const double l0 = knob_get("treecode.local", 4);
                    const double k0 = knob_get("treecode.local_k", -1);
                    for (int c = 0; c < 7; c++) {
                        knob("treecode.local", cfg[c][0]);
                        knob("treecode.local_k", c == 0 ? k0 : cfg[c][1]);
                        add(measure(names[c], &p, f32, theta, 2, leaf, FMK_WALK_AUTO,
                                    k >= 24 ? 3 : reps),
                            json);
                    }
                    knob("treecode.local", l0), knob("treecode.local_k", k0);
                }
                if (super_sweep && d == 1) { /* Plummer: S, a second level S2, k' (x 100) */
                    static const char *names[] = {
                        "super 4 k 1.3",    "super 4+4 k 1.3",  "super 4+8 k 1.3",
                        "super 8+4 k 1.3",  "super 2+8 k 1.3",  "super 2 k 1.3",
                        "super 4+4 k 1.15", "super 4+8 k 1.15", "super 4+4 k 1.2",
                        "super 4+4 k 1.4",  "super 4+8 k 1.2",  "super 2+8 k 1.2",
                        "super 2+16 k 1.3", "super 4+4 k 1.25", "super 4 k 1.2"};
                    static const int cfg[][3] = {
                        {4, 0, 130}, {4, 4, 130}, {4, 8, 130},  {8, 4, 130}, {2, 8, 130},
                        {2, 0, 130}, {4, 4, 115}, {4, 8, 115},  {4, 4, 120}, {4, 4, 140},
                        {4, 8, 120}, {2, 8, 120}, {2, 16, 130}, {4, 4, 125}, {4, 0, 120}};
                    const double s0 = knob_get("treecode.super", 2);
                    const double s20 = knob_get("treecode.super2", 8);
                    const double k0 = knob_get("treecode.super_k", 1.2);
                    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                        knob("treecode.super", cfg[c][0]), knob("treecode.super2", cfg[c][1]);
                        knob("treecode.super_k", 0.01 * cfg[c][2]);
                        add(measure(names[c], &p, f32, theta, 2, leaf, FMK_WALK_AUTO,
                                    k >= 24 ? 3 : reps),
                            json);
                    }
                    knob("treecode.super", s0), knob("treecode.super2", s20);
                    knob("treecode.super_k", k0);
                }
                problem_free(&p);
            }
        if (json)
            print_json();
        return 0;
    }
    /* headline: 2^20 cube and Plummer, theta 0.6, quadrupole, fp32; walks; leaf sizes */
    for (int d = 0; d < 2; d++) {
        problem_make(&p, d, (int64_t)1 << (quick ? 17 : 20), 1);
        add(measure("headline", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, reps), json);
        add(measure("walks", &p, f32, 0.6, 2, leaf, FMK_WALK_STACKLESS, reps), json);
        add(measure("walks", &p, FMK_PRECISION_FP64, 0.6, 2, leaf, FMK_WALK_AUTO, reps), json);
        for (int l = 8; l <= 128; l *= 2)
            add(measure("leaf", &p, f32, 0.6, 2, l, FMK_WALK_GROUP, reps), json);
        problem_free(&p);
    }
    /* scaling: 2^10 .. 2^max, cube and Plummer, with the direct sum up to 2^18 (crossover) */
    for (int d = 0; d < 2; d++)
        for (int k = 10; k <= (quick ? 20 : max_log2); k++) {
            if (k < 20 && k % 2 && !quick && k > 14)
                continue;
            size_t free_b = 0, total_b = 0;
            CUDA(cudaMemGetInfo(&free_b, &total_b));
            if ((double)free_b < 110.0 * ((int64_t)1 << k)) {
                fprintf(stderr, "tree: 2^%d points do not fit in %zu free bytes; stopping\n", k,
                        free_b);
                break;
            }
            problem_make(&p, d, (int64_t)1 << k, k >= 14);
            row r = measure("scaling", &p, f32, 0.6, 2, leaf, FMK_WALK_AUTO, k >= 25 ? 3 : reps);
            if (k <= 18)
                r.direct = direct_time(&p, reps);
            add(r, json);
            problem_free(&p);
        }
    if (json)
        print_json();
    return 0;
}
