/* treecode.c -- method treecode of the Poisson solver (docs/poisson.md, "The treecode"): its
 * entry points (rows of methods.c), its parameters from eps, and a solve's phases in order:
 *
 *   support   the grid points where omega is nonzero (sources.c); when it is the support of
 *             the previous solve, the sources' order, the tree and the plans are kept
 *   tree      Morton order and the octree (sources.c, tree.c)
 *   plans     every brick's logical plans (plans.c)
 *   expand    the nodes' multipoles for this omega (tree.c)
 *   direct    the plans' direct ranges, far: their multipoles (eval_cpu.c; on the GPU with
 *             cuda/eval.cu, where the build has it)
 *   scale     grid units to the caller's: Psi = h_min^2/(4 pi) pot, u = h_min/(4 pi) u. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "poisson/treecode/treecode.h"
#ifdef FMK_HAVE_CUDA
#include "poisson/device.h"
#endif

typedef struct fmk_tc_state {
    fmk_tc_params params;
    fmk_tc_sources src;
    fmk_tc_tree tree;
    fmk_tc_plans plans; /* the bricks from setup, the lists from the last support */
    int64_t *support;   /* the sources' field indices, field order */
    int64_t n_support, support_cap;
    int has_plans;      /* src, tree and plans are those of support */
    int64_t targets_gen; /* the solver's choice of blocks the bricks were made for */
    int plans_velocity; /* the plans were made for a solve with the velocity (its distance) */
#ifdef FMK_HAVE_CUDA
    struct fmk_tc_gpu *gpu;
    int gpu_has_plans; /* the GPU holds the current plans (uploaded since they were made) */
    double *h_omega;   /* omega from the device, when its support changed */
    int64_t h_omega_cap;
#endif
} fmk_tc_state;

/* The accuracy the method takes. */
#define TC_EPS_MIN 1e-10
#define TC_EPS_MAX 1e-2

/* Sources per leaf by default (measured: docs/poisson.md, "The treecode"). */
#define TC_LEAF_SIZE 512

/* The order and opening parameter for eps: the first row with eps >= eps_min. Calibrated
 * against the exact sum on uniform and block grids (docs/poisson.md, "The treecode"): the
 * multipoles' relative l2 errors of Psi and u stay below eps_min / 4 on the calibration set,
 * and each row is the cheapest such pair (theta <= 0.6) by its measured cost on the rings'
 * block grid at 256. */
static const struct {
    double eps_min;
    int order;
    double theta;
} TC_TABLE[] = {
    {1e-2, 5, 0.6},  {1e-3, 8, 0.6},  {1e-4, 8, 0.5},  {1e-5, 8, 0.4}, {1e-6, 8, 0.3},
    {1e-7, 10, 0.3}, {1e-8, 12, 0.3}, {1e-9, 13, 0.3}, {0, 16, 0.3},
};

/* The kernel distance (plans.c): the regularized kernel is 1/r (1 - 3/8 t^2 + ...), its
 * gradient 1/r^2 (1 - 15/8 t^2 + ...), t = (e/d)^2, each difference bounded by its first term
 * (docs/fmm3d.md section 8.1); a source at distance d >= r_kernel from every point leaves
 * c (e/d)^4 <= eps / TC_KERNEL_FRACTION, c = 15/8 for a solve with the velocity and 3/8 for
 * Psi alone (whose plans then reach closer: 0.67 times the distance). */
#define TC_KERNEL_FRACTION 1.0

static double kernel_distance(double eps, double e, double c)
{
    return e * pow(c * TC_KERNEL_FRACTION / eps, 0.25);
}

/* A node of at most TC_DIRECT_FACTOR (p + 1)(p + 2)/2 sources is summed directly: one M2P at a
 * point costs about as many pair terms (measured, docs/poisson.md). */
#define TC_DIRECT_FACTOR 2.0

static void params_for(const fmk_poisson_opts *o, double eps, double e, fmk_tc_params *prm)
{
    int row = 0;
    while (TC_TABLE[row].eps_min > 0 && eps < TC_TABLE[row].eps_min)
        row++;
    prm->order = o->order > 0 ? o->order : TC_TABLE[row].order;
    prm->theta = o->theta > 0 ? o->theta : TC_TABLE[row].theta;
    prm->leaf_size = o->leaf_size > 0 ? o->leaf_size : TC_LEAF_SIZE;
    prm->r_kernel = kernel_distance(eps, e, 15.0 / 8.0); /* with u; Psi alone: r_kernel_psi */
    prm->r_kernel_psi = kernel_distance(eps, e, 3.0 / 8.0);
    prm->direct_max = (int64_t)(TC_DIRECT_FACTOR * (prm->order + 1) * (prm->order + 2) / 2);
}

fmk_status fmk_treecode_check(const fmk_poisson_opts *opts, double eps)
{
    (void)opts; /* order, theta, leaf_size and hybrid are checked by solver.c */
    if (!(eps >= TC_EPS_MIN && eps <= TC_EPS_MAX))
        return fmk_solver_fail(NULL, FMK_ERR_ARG,
                               "method treecode takes 1e-10 <= eps <= 1e-2 (eps = %g); method "
                               "direct or fft gives the sum exactly, fmm down to 1e-14",
                               eps);
    return FMK_OK;
}

void fmk_treecode_release(fmk_poisson *s)
{
    fmk_tc_state *m = s->state;
    if (!m)
        return;
    fmk_tc_sources_free(&m->src);
    fmk_tc_tree_free(&m->tree);
    fmk_tc_plans_free(&m->plans);
    free(m->support);
#ifdef FMK_HAVE_CUDA
    fmk_tc_gpu_release(m->gpu);
    free(m->h_omega);
#endif
    free(m);
    s->state = NULL;
}

int64_t fmk_treecode_bytes(const fmk_poisson *s)
{
    const fmk_tc_state *m = s->state;
    if (!m)
        return 0;
    int64_t b = (int64_t)sizeof *m + fmk_tc_sources_bytes(&m->src) + fmk_tc_tree_bytes(&m->tree) +
                fmk_tc_plans_bytes(&m->plans) + (int64_t)sizeof(int64_t) * m->support_cap;
#ifdef FMK_HAVE_CUDA
    b += (int64_t)sizeof(double) * m->h_omega_cap;
#endif
    return b;
}

int64_t fmk_treecode_bytes_device(const fmk_poisson *s)
{
#ifdef FMK_HAVE_CUDA
    const fmk_tc_state *m = s->state;
    return m ? fmk_tc_gpu_bytes(m->gpu) : 0;
#else
    (void)s;
    return 0;
#endif
}

fmk_status fmk_treecode_setup(fmk_poisson *s)
{
    fmk_treecode_release(s);
    fmk_tc_state *m = calloc(1, sizeof *m);
    if (!m)
        return fmk_solver_fail(s, FMK_ERR_NOMEM, "method treecode: out of host memory");
    s->state = m;
    params_for(&s->opts, s->eps, s->e, &m->params);
    fmk_status st = fmk_tc_bricks_make(s, &m->plans);
    if (st != FMK_OK)
        return st;
    m->targets_gen = s->targets_gen;
#ifdef FMK_HAVE_CUDA
    if (s->info.backend == FMK_BACKEND_CUDA) {
        const fmk_tc_gpu_args args = {s->opts.device, s->eps, s->e, s->n_points, s->threads};
        if ((st = fmk_tc_gpu_create(s, &args, &m->gpu)) != FMK_OK)
            return st;
    }
#endif
    s->info.order = m->params.order;
    s->info.theta = m->params.theta;
    s->info.leaf_size = m->params.leaf_size;
    s->info.n_bricks = m->plans.n_bricks;
    s->info.n_nodes = 0;
    return FMK_OK;
}

static void clear_times(fmk_poisson_info *in)
{
    in->time_tree = in->time_plans = in->time_expand = 0;
    in->time_direct = in->time_far = in->time_cpu_part = in->time_gpu_part = 0;
    in->direct_pairs = in->far_pairs = 0;
}

/* The support of omega, and when it changed the sources, the tree and the plans. *changed: 1
 * when they were made again. */
static fmk_status geometry(fmk_poisson *s, fmk_tc_state *m, int nc, const double *omega,
                           int velocity, int *changed)
{
    double t0 = fmk_time_now();
    if (m->targets_gen != s->targets_gen) { /* other blocks chosen: their bricks, new plans */
        fmk_status st = fmk_tc_bricks_make(s, &m->plans);
        if (st != FMK_OK)
            return st;
        m->targets_gen = s->targets_gen;
        m->has_plans = 0;
        s->info.n_bricks = m->plans.n_bricks;
    }
    *changed = !m->has_plans;
    fmk_status st =
        fmk_tc_sources_support(s, nc, omega, &m->support, &m->n_support, &m->support_cap, changed);
    if (st != FMK_OK || m->n_support == 0) {
        s->info.time_tree = fmk_time_now() - t0;
        if (*changed)
            m->has_plans = 0;
        return st;
    }
    if (*changed) {
        m->has_plans = 0;
        st = fmk_tc_sources_build(s, m->support, m->n_support, &m->src);
        if (st == FMK_OK)
            st = fmk_tc_tree_build(s, &m->src, m->params.leaf_size, m->params.order, &m->tree);
        if (st == FMK_OK && fmk_solver_poll(s))
            st = fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    }
    s->info.time_tree = fmk_time_now() - t0;
    if (st != FMK_OK)
        return st;
    /* the plans: again when the support changed, or when a solve with the velocity follows one
     * of Psi alone or the other way round (their kernel distances differ) */
    fmk_tc_params prm = m->params;
    prm.r_kernel = velocity ? m->params.r_kernel : m->params.r_kernel_psi;
    if (m->has_plans && m->plans_velocity == velocity)
        return FMK_OK;
    *changed = 1;
    m->has_plans = 0;
    t0 = fmk_time_now();
    st = fmk_tc_plans_build(s, &m->tree, &prm, &m->plans);
    s->info.time_plans = fmk_time_now() - t0;
    if (st == FMK_OK) {
        m->has_plans = 1;
        m->plans_velocity = velocity;
    }
    return st;
}

/* The plans' sums into pot and u (grid units, zeroed): on the CPU, or on the GPU (the direct
 * part, and the far part unless hybrid, when the CPU evaluates it meanwhile). */
static fmk_status evaluate(fmk_poisson *s, fmk_tc_state *m, double *pot, double *u)
{
    double t0 = fmk_time_now();
    fmk_status st = fmk_tc_tree_expand(s, &m->src, &m->tree);
    s->info.time_expand = fmk_time_now() - t0;
    if (st == FMK_OK && fmk_solver_poll(s))
        st = fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    if (st != FMK_OK)
        return st;
    t0 = fmk_time_now();
    st = fmk_tc_eval_cpu(s, &m->src, &m->tree, &m->plans, 1, 0, pot, u);
    s->info.time_direct = fmk_time_now() - t0;
    if (st != FMK_OK)
        return st;
    t0 = fmk_time_now();
    st = fmk_tc_eval_cpu(s, &m->src, &m->tree, &m->plans, 0, 1, pot, u);
    s->info.time_far = fmk_time_now() - t0;
    return st;
}

#ifdef FMK_HAVE_CUDA
/* The same with the GPU (the paper's Fig. 2): the sources go up and the direct part starts,
 * the CPU computes the multipoles meanwhile, then either the GPU takes the far part too (its
 * multipoles' upload overlapping the direct part) or, hybrid, the CPU evaluates it while the
 * GPU sums the direct part. time_direct and time_far are the GPU kernels' seconds (time_far the
 * CPU's wall time when hybrid); time_cpu_part is the CPU's wall time from the start of the
 * GPU's part to the end of its own work, time_gpu_part the GPU's span from the sources' upload
 * to the results' download (events). */
static fmk_status evaluate_gpu(fmk_poisson *s, fmk_tc_state *m, int changed, double *pot,
                               double *u)
{
    const int hybrid = s->opts.hybrid;
    const double t0 = fmk_time_now();
    if (changed)
        m->gpu_has_plans = 0;
    fmk_status st = fmk_tc_gpu_upload(s, m->gpu, &m->src, &m->tree, &m->plans, !m->gpu_has_plans);
    m->gpu_has_plans = st == FMK_OK;
    if (st == FMK_OK)
        st = fmk_tc_gpu_launch(s, m->gpu, pot != NULL, u != NULL);
    if (st != FMK_OK)
        return st;
    fmk_status cpu = FMK_OK;
    if (!hybrid && fmk_tc_gpu_moments_order_ok(m->tree.order)) {
        cpu = fmk_tc_gpu_moments_launch(s, m->gpu, 0); /* the multipoles on the GPU */
        if (cpu == FMK_OK)
            cpu = fmk_tc_gpu_far(s, m->gpu, &m->tree);
    } else {
        const double c0 = fmk_time_now();
        cpu = fmk_tc_tree_expand(s, &m->src, &m->tree);
        s->info.time_expand = fmk_time_now() - c0;
        if (cpu == FMK_OK && fmk_solver_poll(s))
            cpu = fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
        if (cpu == FMK_OK && hybrid) {
            const double f0 = fmk_time_now();
            cpu = fmk_tc_eval_cpu(s, &m->src, &m->tree, &m->plans, 0, 1, pot, u);
            s->info.time_far = fmk_time_now() - f0;
        } else if (cpu == FMK_OK)
            cpu = fmk_tc_gpu_far(s, m->gpu, &m->tree);
    }
    s->info.time_cpu_part = fmk_time_now() - t0;
    double kernel_s[4] = {0, 0, 0, 0};
    st = fmk_tc_gpu_collect(s, m->gpu, NULL, NULL, kernel_s); /* waits even if cpu failed;
                                                                 * solve adds the results */
    s->info.time_direct = kernel_s[0];
    if (!hybrid)
        s->info.time_far = kernel_s[1];
    s->info.time_gpu_part = kernel_s[2];
    if (kernel_s[3] > 0)
        s->info.time_expand = kernel_s[3];
    return cpu != FMK_OK ? cpu : st;
}
#endif

/* a[i] = v for i < n, on the solver's threads */
static void fill(double *a, int64_t n, double v, int threads)
{
    (void)threads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++)
        a[i] = v;
}

/* a[i] = scale (a[i] + b[i]) (b may be NULL: scale a alone; add = 0: scale b alone) */
static void combine(double *a, const double *b, int add, int64_t n, double scale, int threads)
{
    (void)threads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++)
        a[i] = scale * (!b ? a[i] : add ? a[i] + b[i] : b[i]);
}

fmk_status fmk_treecode_solve(fmk_poisson *s, int nc, const double *omega, double *psi,
                              double *velocity)
{
    fmk_tc_state *m = s->state;
    const int64_t n = s->n_points;
    clear_times(&s->info);
    int changed = 0;
    fmk_status st = geometry(s, m, nc, omega, velocity != NULL, &changed);
    if (st != FMK_OK)
        return st;
    s->info.n_sources = m->n_support;
    s->info.n_nodes = m->n_support ? m->tree.n_nodes : 0;
    /* the outputs start at zero where the CPU adds into them (the CPU's parts; no vorticity:
     * no flow); all on the GPU, its results are written over them below */
    const int gpu = s->info.backend == FMK_BACKEND_CUDA && m->n_support > 0;
    const int hybrid = gpu && s->opts.hybrid;
    if (!gpu || hybrid) {
        if (psi)
            fill(psi, n * nc, 0, s->threads);
        if (velocity)
            fill(velocity, n * 3, 0, s->threads);
    }
    if (m->n_support == 0)
        return FMK_OK;
    st = fmk_tc_sources_weights(s, nc, omega, &m->src);
    if (st == FMK_OK) {
#ifdef FMK_HAVE_CUDA
        st = gpu ? evaluate_gpu(s, m, changed, psi, velocity) : evaluate(s, m, psi, velocity);
#else
        (void)changed;
        st = evaluate(s, m, psi, velocity);
#endif
    }
    if (st != FMK_OK)
        return st;
    s->info.direct_pairs = m->plans.direct_pairs;
    s->info.far_pairs = m->plans.far_pairs;
    /* grid units back to the caller's: G_eps(h r) h^3 = h^2 G_e(r), the gradient one h less;
     * the GPU's results (pinned host copies) added in the same pass */
    const double scale_psi = s->h * s->h * FMK_INV_4PI, scale_u = s->h * FMK_INV_4PI;
    const double *gp = NULL, *gu = NULL;
#ifdef FMK_HAVE_CUDA
    if (gpu)
        fmk_tc_gpu_results(m->gpu, &gp, &gu);
#endif
    if (psi)
        combine(psi, gp, hybrid, n * nc, scale_psi, s->threads);
    if (velocity)
        combine(velocity, gu, hybrid, n * 3, scale_u, s->threads);
    return FMK_OK;
}

#ifdef FMK_HAVE_CUDA
/* omega (device) to the host, for a support that changed */
static fmk_status omega_to_host(fmk_poisson *s, fmk_tc_state *m, int nc, const double *d_omega)
{
    const int64_t len = s->n_points * nc;
    if (len > m->h_omega_cap) {
        free(m->h_omega);
        m->h_omega_cap = 0;
        m->h_omega = malloc(sizeof(double) * (size_t)len);
        if (!m->h_omega)
            return fmk_solver_fail(s, FMK_ERR_NOMEM,
                                   "method treecode: out of host memory (%lld bytes for omega)",
                                   (long long)(sizeof(double) * (size_t)len));
        m->h_omega_cap = len;
    }
    return fmk_poisson_dev_copy(s, s->opts.device, m->h_omega, d_omega,
                                (int64_t)sizeof(double) * len, FMK_POISSON_D2H,
                                "omega's download");
}

/* The solve with omega and the results on the GPU: while the support is the last solve's, the
 * check, the weights and the sums stay there (the weights come to the host for the CPU's
 * multipoles, overlapping the direct part); when it changed, omega comes to the host for the
 * support, the tree and the plans, as in fmk_treecode_solve. A hybrid solve takes the host's
 * path (solve_device.c stages it). */
fmk_status fmk_treecode_solve_device(fmk_poisson *s, int nc, const double *d_omega, int want_psi,
                                     int want_u, const double **d_psi, const double **d_u)
{
    fmk_tc_state *m = s->state;
    *d_psi = *d_u = NULL;
    if (s->opts.hybrid)
        return FMK_OK; /* both NULL: staged through the host */
    clear_times(&s->info);
    const double t0 = fmk_time_now();
    int same = 0, changed = 0;
    fmk_status st = FMK_OK;
    if (m->has_plans && m->gpu_has_plans && m->plans_velocity == want_u && m->n_support > 0 &&
        m->src.nc == nc && m->targets_gen == s->targets_gen)
        st = fmk_tc_gpu_support_same(s, m->gpu, nc, d_omega, &same);
    if (st == FMK_OK && !same) {
        st = omega_to_host(s, m, nc, d_omega);
        if (st == FMK_OK)
            st = geometry(s, m, nc, m->h_omega, want_u, &changed);
        if (st == FMK_OK && m->n_support > 0)
            st = fmk_tc_sources_weights(s, nc, m->h_omega, &m->src);
    } else
        s->info.time_tree = fmk_time_now() - t0;
    if (st != FMK_OK)
        return st;
    s->info.n_sources = m->n_support;
    s->info.n_nodes = m->n_support ? m->tree.n_nodes : 0;
    if (m->n_support == 0)
        return fmk_tc_gpu_zero(s, m->gpu, nc, want_psi, want_u, d_psi, d_u);
    const double g0 = fmk_time_now();
    fmk_tc_sources view = m->src; /* the sources with this solve's weights */
    if (same) {
        st = fmk_tc_gpu_weights(s, m->gpu, nc, d_omega);
    } else {
        if (changed)
            m->gpu_has_plans = 0;
        st = fmk_tc_gpu_upload(s, m->gpu, &m->src, &m->tree, &m->plans, !m->gpu_has_plans);
        m->gpu_has_plans = st == FMK_OK;
    }
    if (st == FMK_OK)
        st = fmk_tc_gpu_launch(s, m->gpu, want_psi, want_u);
    fmk_status cpu = st;
    if (st == FMK_OK && fmk_tc_gpu_moments_order_ok(m->tree.order)) {
        cpu = fmk_tc_gpu_moments_launch(s, m->gpu, same); /* the multipoles on the GPU */
    } else if (st == FMK_OK) { /* on the CPU, from the weights on the host */
        const double *w = NULL;
        if (same) {
            cpu = fmk_tc_gpu_host_weights(s, m->gpu, &w);
            view.w = (double *)w;
        }
        const double c0 = fmk_time_now();
        if (cpu == FMK_OK)
            cpu = fmk_tc_tree_expand(s, &view, &m->tree);
        s->info.time_expand = fmk_time_now() - c0;
        if (cpu == FMK_OK && fmk_solver_poll(s))
            cpu = fmk_solver_fail(s, FMK_ERR_INTERRUPTED, "interrupted");
    }
    if (cpu == FMK_OK)
        cpu = fmk_tc_gpu_far(s, m->gpu, &m->tree);
    s->info.time_cpu_part = fmk_time_now() - g0;
    double kernel_s[4] = {0, 0, 0, 0};
    if (st == FMK_OK) /* waits even when the CPU's part failed */
        st = fmk_tc_gpu_finish(s, m->gpu, s->h * s->h * FMK_INV_4PI, s->h * FMK_INV_4PI,
                               kernel_s, d_psi, d_u);
    s->info.time_direct = kernel_s[0];
    s->info.time_far = kernel_s[1];
    s->info.time_gpu_part = kernel_s[2];
    if (kernel_s[3] > 0)
        s->info.time_expand = kernel_s[3];
    s->info.direct_pairs = m->plans.direct_pairs;
    s->info.far_pairs = m->plans.far_pairs;
    if (cpu != FMK_OK || st != FMK_OK) {
        *d_psi = *d_u = NULL;
        return cpu != FMK_OK ? cpu : st;
    }
    return FMK_OK;
}
#endif
