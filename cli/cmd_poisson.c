/* cmd_poisson.c -- `fmmkit poisson`: the grid Poisson solver (include/fmmkit_poisson.h) on the
 * test problem of van Rees et al., two vortex rings (docs/poisson.md): solves on a uniform grid,
 * or with --multires on the rings' two-level block grid (fmk_poisson_rings_grid), and prints the
 * grid's counts (next to the paper's), the errors against the analytic streamfunction (and
 * velocity) and the time of each phase; a table, or one JSON object with --json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmmkit_poisson.h"

static const char *const cmd = "poisson";

static const char usage[] =
    "Usage: fmmkit poisson [options]\n"
    "\n"
    "Solves lap Psi = -omega in free space for the test problem of van Rees et al. (two vortex\n"
    "rings in the unit cube, docs/poisson.md) on R^3 cell centres, or with --multires on the\n"
    "two-level block grid of effective resolution R, and prints the grid's counts, the relative\n"
    "l2 and max errors of Psi (and u = curl Psi) against the analytic solution, and the time of\n"
    "set_grid and of two solves (and of the treecode's phases).\n"
    "\n"
    "Options:\n"
    "  --case C            vortex-rings (the only case so far)\n"
    "  --resolution R      grid points per side, effective with --multires (default 64)\n"
    "  --multires          the rings' two-level grid (fmk_poisson_rings_grid): blocks of spacing\n"
    "                      1/R where the coarse level's interpolation detail exceeds --refine\n"
    "                      times max |omega|, 2/R elsewhere; R a multiple of 2 --block-size\n"
    "  --refine T          the refinement threshold (default 1e-4, the paper's compression\n"
    "                      threshold: every point of nonzero omega is a fine one)\n"
    "  --block-size B      points per block side, even, 4..64 (default 16, as the paper)\n"
    "  --method M          auto (default: fft on a uniform grid where built with FFTW, else\n"
    "                      treecode), fft, fmm, direct, treecode\n"
    "  --eps E             relative accuracy of methods fmm and treecode (default 1e-6)\n"
    "  --backend B         auto (default), cpu, cuda\n"
    "  --order P           treecode: the multipoles' order, 1..30 (default 0: from eps)\n"
    "  --theta T           treecode: the opening parameter, 0 < T < 1 (default 0: from eps)\n"
    "  --leaf-size S       treecode: sources per leaf at most (default 0: chosen)\n"
    "  --hybrid            treecode with backend cuda: multipoles on the CPU, direct on the GPU\n"
    "  --velocity          also u = curl Psi\n"
    "  --threads N         CPU threads (default 0: OpenMP's default)\n"
    "  --json              print one JSON object instead of the table\n"
    "  -h, --help          show this help\n";

/* The paper's counts for its two-level grid of the rings at effective 256^3 (section 5.1,
 * thresholds 1e-4 and 1e-2): destinations, and sources of the y-component. */
#define PAPER_POINTS 3.6e6
#define PAPER_SOURCES_Y 8.7e5

typedef struct {
    const char *case_name, *method_name, *backend_name;
    int64_t res, threads, block_size, order, leaf_size;
    double eps, refine, theta;
    int velocity, json, multires, hybrid;
} poisson_args;

/* The grid's points and what the run measured. */
typedef struct {
    int64_t n, blocks;
    int64_t sources[3]; /* points where omega's component a is nonzero */
    double grid_s, set_s, solve_s, again_s;
    double ep2, epm, eu2, eum;
    fmk_poisson_info info;
} poisson_run;

static int poisson_error(fmk_poisson *s, fmk_status st)
{
    cli_error(cmd, "%s", fmk_poisson_last_error(s));
    return cli_exit_status(st);
}

/* Relative l2 and max (over the max of the reference) errors of n values. */
static void errors(const double *a, const double *ref, int64_t n, double *l2, double *mx)
{
    double d2 = 0, r2 = 0, dm = 0, rm = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - ref[i]), r = fabs(ref[i]);
        d2 += d * d, r2 += r * r;
        dm = d > dm ? d : dm, rm = r > rm ? r : rm;
    }
    *l2 = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    *mx = rm > 0 ? dm / rm : dm;
}

static int parse(int argc, char **argv, poisson_args *a, fmk_poisson_opts *po, int *done)
{
    *a = (poisson_args){"vortex-rings", "auto", "auto", 64, 0, 16, 0, 0, 1e-6, 1e-4, 0, 0, 0, 0, 0};
    args_opt opts[] = {
        {"case", ARGS_STRING, &a->case_name, 0, 0},
        {"resolution", ARGS_INT, &a->res, 2, 0},
        {"method", ARGS_STRING, &a->method_name, 0, 0},
        {"eps", ARGS_DOUBLE, &a->eps, 0, 0},
        {"velocity", ARGS_FLAG, &a->velocity, 0, 0},
        {"threads", ARGS_INT, &a->threads, 0, 0},
        {"json", ARGS_FLAG, &a->json, 0, 0},
        {"multires", ARGS_FLAG, &a->multires, 0, 0},
        {"refine", ARGS_DOUBLE, &a->refine, 0, 0},
        {"block-size", ARGS_INT, &a->block_size, 4, 0},
        {"backend", ARGS_STRING, &a->backend_name, 0, 0},
        {"order", ARGS_INT, &a->order, 0, 0},
        {"theta", ARGS_DOUBLE, &a->theta, 0, 0},
        {"leaf-size", ARGS_INT, &a->leaf_size, 0, 0},
        {"hybrid", ARGS_FLAG, &a->hybrid, 0, 0},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = args_parse(cmd, argc, argv, opts, n_opts, usage, done);
    if (rc != CLI_OK || *done)
        return rc;
    if (strcmp(a->case_name, "vortex-rings") != 0)
        return cli_usage(cmd, "unknown case '%s' (vortex-rings)", a->case_name);
    if (a->res > 1024)
        return cli_usage(cmd, "--resolution %lld is above 1024", (long long)a->res);
    if (!a->multires &&
        (args_find(opts, n_opts, "refine")->given || args_find(opts, n_opts, "block-size")->given))
        return cli_usage(cmd, "--refine and --block-size describe the --multires grid");
    if (a->block_size > 64 || a->order > 30 || a->leaf_size > (1 << 20))
        return cli_usage(cmd, "--block-size is at most 64, --order 30, --leaf-size 2^20");
    fmk_poisson_opts_default(po);
    po->threads = (int32_t)a->threads;
    po->order = (int32_t)a->order;
    po->theta = a->theta;
    po->leaf_size = (int32_t)a->leaf_size;
    po->hybrid = a->hybrid;
    int found = 0;
    for (int m = 0; m <= FMK_POISSON_TREECODE; m++)
        if (strcmp(a->method_name, fmk_poisson_method_name((fmk_poisson_method)m)) == 0)
            po->method = (fmk_poisson_method)m, found = 1;
    if (!found)
        return cli_usage(cmd, "unknown method '%s' (auto, fft, fmm, direct, treecode)",
                         a->method_name);
    return args_backend(cmd, a->backend_name, &po->backend);
}

/* The grid: its points (*x, 3 n, malloc'ed) and, with --multires, the block grid. CLI_OK, or
 * the exit status after the message. */
static int make_grid(const poisson_args *a, fmk_grid **grid, double **x, poisson_run *r)
{
    *grid = NULL;
    *x = NULL;
    const double t0 = cli_now();
    if (a->multires) {
        fmk_status st =
            fmk_poisson_rings_grid(grid, (int32_t)a->res, (int32_t)a->block_size, a->refine);
        if (st != FMK_OK)
            return poisson_error(NULL, st);
        fmk_grid_get(*grid, &r->blocks, &r->n, NULL, NULL, NULL, NULL);
    } else
        r->n = a->res * a->res * a->res, r->blocks = 1;
    r->grid_s = cli_now() - t0;
    *x = malloc(sizeof(double) * 3 * (size_t)r->n);
    if (!*x) {
        cli_error(cmd, "out of host memory for %lld points", (long long)r->n);
        return CLI_FAIL;
    }
    if (*grid) {
        fmk_grid_points(*grid, *x, NULL);
        return CLI_OK;
    }
    const double h = 1.0 / (double)a->res;
    for (int64_t k = 0, p = 0; k < a->res; k++) /* the solver's layout: x fastest */
        for (int64_t j = 0; j < a->res; j++)
            for (int64_t i = 0; i < a->res; i++, p++) {
                (*x)[3 * p] = h * ((double)i + 0.5);
                (*x)[3 * p + 1] = h * ((double)j + 0.5);
                (*x)[3 * p + 2] = h * ((double)k + 0.5);
            }
    return CLI_OK;
}

static void print_json(const poisson_args *a, const poisson_run *r)
{
    const fmk_poisson_info *in = &r->info;
    printf("{\n  \"case\": \"vortex-rings\",\n  \"resolution\": %lld,\n  \"grid\": \"%s\",\n",
           (long long)a->res, a->multires ? "multires" : "uniform");
    if (a->multires)
        printf("  \"refine\": %g,\n  \"block_size\": %lld,\n", a->refine, (long long)a->block_size);
    else
        printf("  \"refine\": null,\n  \"block_size\": null,\n");
    printf("  \"method\": \"%s\",\n  \"backend\": \"%s\",\n  \"eps\": %g,\n  \"points\": %lld,\n"
           "  \"blocks\": %lld,\n  \"h_min\": %.17g,\n  \"sources\": %lld,\n"
           "  \"sources_x\": %lld,\n  \"sources_y\": %lld,\n  \"sources_z\": %lld,\n"
           "  \"paper_points\": %g,\n  \"paper_sources_y\": %g,\n  \"threads\": %d,\n",
           fmk_poisson_method_name(in->method), fmk_backend_name(in->backend), a->eps,
           (long long)r->n, (long long)r->blocks, in->h_min, (long long)in->n_sources,
           (long long)r->sources[0], (long long)r->sources[1], (long long)r->sources[2],
           PAPER_POINTS, PAPER_SOURCES_Y, (int)in->threads);
    printf("  \"grid_s\": %.6g,\n  \"set_grid_s\": %.6g,\n  \"solve_s\": %.6g,\n"
           "  \"solve_again_s\": %.6g,\n  \"psi_l2\": %.6g,\n  \"psi_max\": %.6g,\n",
           r->grid_s, r->set_s, r->solve_s, r->again_s, r->ep2, r->epm);
    if (a->velocity)
        printf("  \"u_l2\": %.6g,\n  \"u_max\": %.6g,\n", r->eu2, r->eum);
    else
        printf("  \"u_l2\": null,\n  \"u_max\": null,\n");
    printf("  \"order\": %d,\n  \"theta\": %g,\n  \"leaf_size\": %d,\n  \"bricks\": %lld,\n"
           "  \"nodes\": %lld,\n  \"direct_pairs\": %.6g,\n  \"far_pairs\": %.6g,\n"
           "  \"time_tree\": %.6g,\n  \"time_plans\": %.6g,\n  \"time_expand\": %.6g,\n"
           "  \"time_direct\": %.6g,\n  \"time_far\": %.6g,\n  \"time_cpu_part\": %.6g,\n"
           "  \"time_gpu_part\": %.6g,\n  \"bytes_host\": %lld,\n  \"bytes_device\": %lld\n}\n",
           (int)in->order, in->theta, (int)in->leaf_size, (long long)in->n_bricks,
           (long long)in->n_nodes, in->direct_pairs, in->far_pairs, in->time_tree, in->time_plans,
           in->time_expand, in->time_direct, in->time_far, in->time_cpu_part, in->time_gpu_part,
           (long long)in->bytes_host, (long long)in->bytes_device);
}

static void print_table(const poisson_args *a, const poisson_run *r)
{
    const fmk_poisson_info *in = &r->info;
    const char *mname = fmk_poisson_method_name(in->method);
    if (a->multires)
        printf("vortex rings on the two-level grid of effective resolution %lld^3 (h = 1/%lld "
               "and 2/%lld, blocks of %lld^3, refine %g), method %s on %s, %d threads\n",
               (long long)a->res, (long long)a->res, (long long)a->res, (long long)a->block_size,
               a->refine, mname, fmk_backend_name(in->backend), (int)in->threads);
    else
        printf("vortex rings on %lld^3 points (h = 1/%lld), method %s on %s%s, %d threads\n",
               (long long)a->res, (long long)a->res, mname, fmk_backend_name(in->backend),
               in->method == FMK_POISSON_FMM ? " (eps as given)" : "", (int)in->threads);
    printf("  blocks                   %lld\n", (long long)r->blocks);
    printf("  destinations (points)    %lld%s\n", (long long)r->n,
           a->multires ? "   (paper, effective 256^3: 3.6e6)" : "");
    printf("  sources (nonzero omega)  %lld of any component; x %lld, y %lld, z %lld%s\n",
           (long long)in->n_sources, (long long)r->sources[0], (long long)r->sources[1],
           (long long)r->sources[2], a->multires ? "   (paper: y 8.7e5)" : "");
    if (a->multires)
        printf("  grid (rings_grid)        %.4f s\n", r->grid_s);
    printf("  set_grid                 %.4f s\n", r->set_s);
    printf("  solve (first, again)     %.4f s, %.4f s\n", r->solve_s, r->again_s);
    if (in->method == FMK_POISSON_TREECODE) {
        printf("  treecode: p %d, theta %g, leaf %d; %lld bricks, %lld nodes; %.3g direct and "
               "%.3g far pairs\n",
               (int)in->order, in->theta, (int)in->leaf_size, (long long)in->n_bricks,
               (long long)in->n_nodes, in->direct_pairs, in->far_pairs);
        printf("  phases (last solve)      tree %.4f, plans %.4f, expand %.4f, direct %.4f, "
               "far %.4f s\n",
               in->time_tree, in->time_plans, in->time_expand, in->time_direct, in->time_far);
        if (in->time_cpu_part > 0 || in->time_gpu_part > 0)
            printf("  hybrid                   CPU part %.4f s, GPU part %.4f s\n",
                   in->time_cpu_part, in->time_gpu_part);
    }
    printf("  Psi against the analytic solution: relative l2 %.3e, max %.3e\n", r->ep2, r->epm);
    if (a->velocity)
        printf("  u   against the analytic solution: relative l2 %.3e, max %.3e\n", r->eu2, r->eum);
    printf("  (the smoothing length is h_min: the errors fall as h^2 once the rings' cores are "
           "resolved, docs/poisson.md)\n");
}

int cmd_poisson(int argc, char **argv)
{
    poisson_args a;
    fmk_poisson_opts po;
    int done = 0;
    int rc = parse(argc, argv, &a, &po, &done);
    if (rc != CLI_OK || done)
        return rc;
    poisson_run r;
    memset(&r, 0, sizeof r);
    fmk_grid *grid = NULL;
    double *x = NULL, *omega = NULL, *psi_ref = NULL, *u_ref = NULL, *psi = NULL, *u = NULL;
    fmk_poisson *s = NULL;
    fmk_status st = FMK_OK;
    if ((rc = make_grid(&a, &grid, &x, &r)) != CLI_OK)
        goto done;
    const size_t bytes = sizeof(double) * 3 * (size_t)r.n;
    omega = malloc(bytes), psi_ref = malloc(bytes), u_ref = malloc(bytes), psi = malloc(bytes);
    u = a.velocity ? malloc(bytes) : NULL;
    if (!omega || !psi_ref || !u_ref || !psi || (a.velocity && !u)) {
        cli_error(cmd, "out of host memory for %lld points", (long long)r.n);
        rc = CLI_FAIL;
        goto done;
    }
    if ((st = fmk_poisson_rings(r.n, x, omega, psi_ref, u_ref)) != FMK_OK ||
        (st = fmk_poisson_create(&s, a.eps, &po)) != FMK_OK) {
        rc = poisson_error(NULL, st);
        goto done;
    }
    for (int64_t p = 0; p < r.n; p++)
        for (int c = 0; c < 3; c++)
            r.sources[c] += omega[3 * p + c] != 0;
    const double t0 = cli_now();
    st = grid ? fmk_poisson_set_blocks(s, grid)
              : fmk_poisson_set_grid(s, a.res, a.res, a.res, 1.0 / (double)a.res,
                                     (const double[3]){0.5 / (double)a.res, 0.5 / (double)a.res,
                                                       0.5 / (double)a.res});
    const double t1 = cli_now();
    if (st == FMK_OK)
        st = fmk_poisson_solve(s, 3, omega, psi, u);
    const double t2 = cli_now();
    if (st == FMK_OK)
        st = fmk_poisson_solve(s, 3, omega, psi, u);
    const double t3 = cli_now();
    if (st != FMK_OK) {
        rc = poisson_error(s, st);
        goto done;
    }
    r.set_s = t1 - t0, r.solve_s = t2 - t1, r.again_s = t3 - t2;
    fmk_poisson_get_info(s, &r.info);
    errors(psi, psi_ref, 3 * r.n, &r.ep2, &r.epm);
    r.eu2 = r.eum = NAN;
    if (u)
        errors(u, u_ref, 3 * r.n, &r.eu2, &r.eum);
    if (a.json)
        print_json(&a, &r);
    else
        print_table(&a, &r);
done:
    fmk_poisson_destroy(s);
    fmk_grid_destroy(grid);
    free(x), free(omega), free(psi_ref), free(u_ref), free(psi), free(u);
    return rc;
}
