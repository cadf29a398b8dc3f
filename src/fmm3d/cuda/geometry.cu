/* geometry.cu -- set_points of the GPU 3D FMM (fmm3d_cuda.h), all on the GPU: the order and leaf
 * size from eps, the octree over sources and targets together (tree/cuda/tree3d.cu, the
 * treecode's build; its root cube fitted to uniform points; cut at d_min for the smooth
 * kernels, as the CPU engine's), the lists (lists.cu: the U, V, W, X
 * lists of the CPU engine entry for entry, the work lists and the M2M/L2L tiles; the host reads
 * only sizes), the operators (operators.cu, on a stream of their own alongside), the rotation
 * tables or the M2L's GEMMs and eval's buffers. */
#include <math.h>
#include <string.h>

#include "fmm3d/cuda/fmm3d_cuda.h"
#include "tree/resolution.h"

namespace {

/* Order p and leaf size for eps on the GPU (docs/fmm3d_gpu.md, section 3). */
int gpu_order_from_eps(double eps)
{
    /* the smallest p whose measured relative l2 error, worst of the five test distributions
     * (N = 10^5, leaves of gpu_leaf_size_for(p), docs/fmm3d_gpu.md section 3), is at most eps / 3
     * for the potential and 10 eps / 3 for the gradient: a margin of 3 on what eps asks. Above
     * 1e-3, p = 6 still: p = 4 is slower (8.4 against 7.2 ms at 2^18 points, 47 against 24 ms
     * at 2^20, one-shot calls on an H200, 2026-11-28: tools/tree_vs_fmm.py). Below
     * 1e-13 no order meets that (the relative error of fp64 sums of charges of both signs
     * stays at 1e-14 .. 3e-14 up to p = 60): the engine's eps_min refuses such eps (docs) */
    static const struct {
        double eps;
        int p;
    } table[] = {{1e-3, 6},  {1e-4, 8},   {1e-5, 11},  {1e-6, 14},  {1e-7, 18}, {1e-8, 26},
                 {1e-9, 30}, {1e-10, 42}, {1e-11, 46}, {1e-12, 52}, {1e-13, 60}};
    const int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++)
        if (eps >= table[i].eps * (1 - 1e-9))
            return table[i].p;
    return table[n - 1].p;
}

int32_t gpu_leaf_size_for(int p)
{
    /* Paper 003's cost model, total = A N + B N / m + C N m for m points per leaf: B (M2M,
     * M2L, L2L per box) and C (P2P per pair) measured on an H100 for p = 4 .. 16
     * (docs/fmm3d_gpu.md, section 3: bench_fmm3d cost) give m_opt = sqrt(B / C) = 11 p .. 14 p
     * (B grows slower than S^2: the GEMMs run faster at larger S). A leaf size s gives leaves
     * of s / 8 .. s points (geometric mean s / 2.8), hence s = 2.8 m_opt ~ 38 p. */
    int s = 38 * p;
    if (s < 32)
        s = 32;
    if (s > 1024)
        s = 1024;
    return s;
}

} // namespace

int fmk_fmm3d_cuda_order(const fmk_plan *plan)
{
    return plan->opts.order >= 0 ? plan->opts.order : gpu_order_from_eps(plan->eps);
}

int32_t fmk_fmm3d_cuda_leaf_size(const fmk_plan *plan, int p)
{
    int64_t ls = plan->opts.leaf_size > 0 ? plan->opts.leaf_size : gpu_leaf_size_for(p);
    return ls > (1 << 30) ? (1 << 30) : (int32_t)ls;
}

namespace {

/* The mapped points (in [1, 2]) into the low corner of the root cube, times 1 / c. */
__global__ void k_shrink(int64_t n, double inv_c, double top, double *__restrict__ x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = fmin(fma(x[i] - 1.0, inv_c, 1.0), top);
}

/* The tree of the np mapped points d_all, built with the plan's knobs (fmm3d.tree.*). */
fmk_status tree_build(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t np, double *d_all, long long total)
{
    s->tree.tune = s->tune->tree;
    return fmk_cuda_tree3d_build(plan, np, d_all, s->leaf_size, total, &s->tree);
}

/* The root cube fitted to evenly spread points (the knob root_fit). When the octree of the
 * points' bounding cube is complete down to a level F = full >= 3 (every box of every level to F
 * holds points) and ends at F or F + 1 (a uniform set, whose boxes of level F may split once), L
 * is the last level <= F whose boxes hold at least 1.25 m_t points on average, m_t = leaf size /
 * 2.8 (the cost model's best mean, docs/fmm3d_gpu.md section 3, "Leaf size"), and the points are
 * shrunk into the low corner of a root cube whose level L + 1 has k cells across them, k the even
 * number that brings n / k^3 nearest m_t, and the tree built again (docs/fmm3d_gpu.md, section
 * 3, "The root cube fitted"). fp64 with sources = targets only (the P2P of leaf pairs, whose
 * passes follow the leaves' mean, fmk_fmm3d_cuda_pairs_rt), and m_t from 128 to 224 (leaf sizes
 * 358 .. 627: orders 10 .. 16 at the default leaf size), where passes of 5 or 6 points per lane
 * fit the leaves. */
fmk_status root_fit(fmk_plan *plan, fmk_fmm3d_cuda *s, int full, int64_t np, double *d_all,
                    long long total)
{
    const double mt = s->leaf_size / 2.8;
    int L = full;
    while (L > 0 && (double)np < 1.25 * mt * (double)((int64_t)1 << (3 * L)))
        L--;
    if (!(mt >= 128 && mt <= 224 && (double)np >= 1.25 * mt * (double)((int64_t)1 << (3 * L))))
        return FMK_OK;
    const int cells = 2 << L; /* across the root at level L + 1 */
    int k = 2 * (int)llround(0.5 * cbrt((double)np / mt));
    k = k > cells ? cells : k <= cells / 2 ? cells / 2 + 2 : k;
    if (k >= cells)
        return FMK_OK;
    const int64_t blocks = (3 * np + 255) / 256;
    /* the points at the frame's top (mapped 2) would land on cell k, outside the k^3 cells:
     * each a lone leaf of level 2 whose rest row (W entries done as P2P) held tens of thousands
     * of sources; they are kept below it, one ulp (2^-52 of the frame) from where they were */
    k_shrink<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(
        3 * np, (double)k / cells, nextafter(1.0 + (double)k / cells, 1.0), d_all);
    s->root_side = (double)cells / k;
    s->fit_mean = (double)np / ((double)k * k * k);
    return tree_build(plan, s, np, d_all, total);
}

/* The octree of the points (the root cube the knob root_volume times theirs, or fitted to
 * uniform points), and whether it is complete (s->uniform). */
fmk_status build_tree(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t np, double *d_all, long long total)
{
    s->root_side = s->tune->root_volume > 1 ? cbrt(s->tune->root_volume) : 1.0;
    if (s->root_side > 1 && np > 0) {
        const int64_t blocks = (3 * np + 255) / 256;
        k_shrink<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(3 * np, 1.0 / s->root_side,
                                                                     2.0, d_all);
    }
    fmk_status st = tree_build(plan, s, np, d_all, total);
    const fmk_cuda_tree &tree = s->tree;
    s->fit_mean = 0, s->uniform = 0;
    int full = -1; /* the last level of which every box holds points */
    if (st == FMK_OK) {
        while (full + 1 < tree.levels && full < 20 &&
               tree.level_begin[full + 2] - tree.level_begin[full + 1] == (int64_t)1
                                                                              << (3 * (full + 1)))
            full++;
        /* a complete octree (every box of every level down to L >= 3 holds points) */
        s->uniform = full >= 3 && full == tree.levels - 1;
    }
    if (st == FMK_OK && full >= 3 && full + 2 >= tree.levels && s->root_side == 1 &&
        s->tune->root_fit && plan->self && !s->fp32)
        st = root_fit(plan, s, full, np, d_all, total);
    return st;
}

/* The rotation-based M2L's tables for the lists' directions; those of the previous points serve
 * when their directions are these (the order is the plan's). */
fmk_status rotation_tables(fmk_plan *plan, fmk_fmm3d_cuda *s, long long total)
{
    const int n_slots = s->g.n_slots, p = s->order;
    const int same = s->rot.d_tab && s->rot_slots == n_slots &&
                     memcmp(s->rot_dir, s->g.dir_of_slot, sizeof(int32_t) * (size_t)n_slots) == 0;
    if (same)
        return FMK_OK;
    s->bytes -= s->rot.bytes;
    fmk_cuda_fmm3d_rot_free(&s->rot);
    s->rot_slots = -1;
    fmk_fmm3d_ops_ctx ops;
    fmk_status st = fmk_fmm3d_ops_create(&ops, p);
    if (st != FMK_OK)
        return fmk_error_set(plan, st, "cannot create the FMM operators of order %d", p);
    st = fmk_cuda_fmm3d_rot_build(plan, &ops, s->g.dir_of_slot, n_slots, total, &s->rot);
    fmk_fmm3d_ops_destroy(&ops);
    if (st != FMK_OK)
        return st;
    s->bytes += s->rot.bytes;
    s->rot_slots = n_slots;
    memcpy(s->rot_dir, s->g.dir_of_slot, sizeof(int32_t) * (size_t)n_slots);
    return FMK_OK;
}

/* The M2L's GEMMs and parts for the tree's nn boxes from level 2 down (m2l_gemm.cu), the cuBLAS
 * handle (the knob blas_at 0), eval's buffers for nt targets and the parts' slot -> row tables. */
fmk_status m2l_tables(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t nn, int64_t nt, long long total)
{
    s->m2l_batch =
        s->use_rot ? 0
                   : fmk_fmm3d_cuda_m2l_batch(plan, s->Sx, nn, M2L_DIRS); /* no X with rotations */
    int64_t n_xrow = 0;
    fmk_status st = fmk_fmm3d_cuda_m2l_plan(plan, s, nn, &n_xrow);
    if (st == FMK_OK && s->n_m2l_parts > 0 && s->tune->blas_at == 0)
        st = fmk_fmm3d_cuda_ensure_blas(plan, s);
    if (st == FMK_OK)
        st = fmk_fmm3d_cuda_eval_buffers(plan, s, s->n_nodes, nn, nt, n_xrow, total);
    if (st == FMK_OK && n_xrow > 0) /* the parts' slot -> row tables */
        st = fmk_fmm3d_cuda_put_xrow(plan, s);
    return st;
}

} // namespace

/* The geometry and the operators from the mapped points d_all (sources, then targets unless
 * self: np * 3 doubles on the device), which the state keeps (d_pts) from here on. The
 * operators (once per plan) build on stream 2 alongside the tree and the lists. */
fmk_status fmk_fmm3d_cuda_setup(fmk_plan *plan, fmk_fmm3d_cuda *s, double *d_all)
{
    const double t0 = fmk_time_now();
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    const int p = s->order;
    const long long total = fmk_fmm3d_cuda_plan_bytes(plan);
    fmk_status st = FMK_OK;
    fmk_cuda_tree &tree = s->tree;
    s->setup_time[5] = 0;
    /* the operators first (a plan's first call); the dense M2L matrices after the lists when
     * they have V entries, or (the knob ops_at = 1) here too when the tree will have a level 2 */
    const int early_m2l = !s->use_rot && np > 8 * (int64_t)s->leaf_size && s->tune->ops_at == 1;
    if (!s->tb.rec_a) /* not started yet */
        st = fmk_fmm3d_cuda_start_ops(plan, s, total);
    if (st == FMK_OK && early_m2l && !s->m2l_built)
        st = fmk_fmm3d_cuda_start_m2l(plan, s, total);
    const double t_ops = fmk_time_now() - t0;
    const double t0t = fmk_time_now();
    if (st == FMK_OK)
        st = build_tree(plan, s, np, d_all, total);
    if (st == FMK_OK) {
        /* the resolution guard (tree/resolution.h), as the CPU engine's: the frame's fp64
         * coordinates (here shrunk by the root's side); in fp32, P2P's offsets from the leaf's
         * centre */
        fmk_resolution_opts guard = {plan->eps, FMK_RESOLUTION_FP64, 0, 0, 0};
        if (plan->opts.precision == FMK_PRECISION_FP32)
            guard.local_unit = FMK_RESOLUTION_FP32_LOCAL, guard.local_points = s->leaf_size;
        st = fmk_cuda_resolution_check(plan, "fmm", &guard, np, tree.d_order, d_all,
                                       s->root_side > 1 ? s->root_side : 1.0);
    }
    if (st == FMK_OK) {
        /* plummer and regularized: no box narrower than d_min (fmm3d.h), the softening in the
         * tree's units (the root cube's side is 1: the frame's shrunk by root_side) */
        s->softening = plan->frame.softening / s->root_side;
        const int max_level = fmk_fmm3d_max_level(plan->kernel, s->softening, plan->eps);
        s->leaf_points = tree.levels - 1 > max_level ? np : s->leaf_size;
        st = fmk_cuda_tree3d_truncate(plan, &tree, max_level);
    }
    s->tree_time = fmk_time_now() - t0t;
    if (st == FMK_OK) {
        /* Near-field substitutes: a W entry with few sources is cheaper as P2P (appended to the
         * leaf's U list) than M2P at each target, and an X entry into a box with few targets is
         * cheaper as P2P into the box's targets than P2L (a separate list); both exact. */
        s->near_max =
            s->tune->direct_near > 0 ? (int64_t)s->tune->direct_near * (p + 1) * (p + 1) / 2 : -1;
        /* the size rule on this tree's M2L columns: the degrees and with them the M2L order */
        st = fmk_fmm3d_cuda_m2l_reselect(plan, s,
                                         tree.levels > 2 ? tree.n_nodes - tree.level_begin[2] : 0);
    }
    if (st == FMK_OK) {
        memcpy(s->g.m2l_deg, s->m2l_deg, sizeof s->m2l_deg); /* the V rows in the M2L order */
        st = fmk_cuda_fmm3d_geometry(plan, &tree, d_all, ns, plan->self, s->near_max, s->cfg.tb,
                                     fmk_fmm3d_cuda_pairs_cap(s), total, &s->g);
    }
    if (st == FMK_OK) /* the lists' sizes were read: an interrupt check (the tree's build made
                         its own) */
        st = fmk_cuda_checkpoint(plan, NULL, NULL);
    const double t1 = fmk_time_now();
    s->setup_time[1] = s->tree_time, s->setup_time[2] = t1 - t0t - s->tree_time;
    const int64_t k = tree.n_nodes;
    s->n_nodes = k;
    s->levels = tree.levels;
    s->gemm_first = tree.levels > 2 ? tree.level_begin[2] : k;
    if (st != FMK_OK)
        return st;
    if (!s->use_rot && !s->m2l_built && s->g.n_slots > 0)
        st = fmk_fmm3d_cuda_start_m2l(plan, s, total);
    if (st == FMK_OK && s->use_rot && (st = rotation_tables(plan, s, total)) != FMK_OK)
        return st;
    const double t2 = fmk_time_now();
    if (st == FMK_OK)
        st = m2l_tables(plan, s, k - s->gemm_first, nt, total);
    const double t3 = fmk_time_now();
    /* operators: their host part (a plan's first call; eval waits for their kernels) */
    s->setup_time[3] = t_ops + (t2 - t1);
    s->setup_time[4] = t3 - t2;
    return st;
}
