/* memory.cu -- the GPU 3D FMM's device memory (fmm3d_cuda.h): the estimate before allocating,
 * a fresh plan's one allocation (the points, the operators, the tree's and the list builder's
 * arenas, the dense M2L matrices and eval's buffers, at the sizes of the node estimate), and the
 * buffers kept from one set_points to the next, grown where too small. */
#include <string.h>

#include "fmm3d/cuda/fmm3d_cuda.h"

/* p lies in the state's block (a fresh plan's one allocation) */
static int in_block(const fmk_fmm3d_cuda *s, const void *p)
{
    return p && s->d_block && (const char *)p >= (const char *)s->d_block &&
           (const char *)p < (const char *)s->d_block + s->cap_block;
}

/* Frees buffer *d of *cap bytes unless it lies in the block, and forgets it. */
static void drop(fmk_fmm3d_cuda *s, void **d, size_t *cap)
{
    if (*d && !in_block(s, *d)) {
        cudaFree(*d);
        s->bytes -= (int64_t)(*cap ? *cap : 1);
    }
    *d = NULL, *cap = 0;
}

void fmk_fmm3d_cuda_free_all(fmk_fmm3d_cuda *s)
{
    free(s->m2l_gemms), free(s->m2l_parts);
    s->m2l_gemms = NULL, s->m2l_parts = NULL;
    fmk_cuda_fmm3d_geo_free(&s->g);
    fmk_cuda_tree3d_free(&s->tree);
    fmk_cuda_fmm3d_rot_free(&s->rot);
    void *all[] = {s->d_ops, s->d_m2l, s->d_eval, s->d_host, s->d_pts, s->d_box};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && !in_block(s, all[i]))
            cudaFree(all[i]);
    if (s->d_block)
        cudaFree(s->d_block);
}

/* Device bytes for ns sources, nt targets (nt < 0: at the sources), before allocating. */
static int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t nodes,
                            int64_t n_dirs)
{
    const int self = nt < 0;
    if (self)
        nt = ns;
    const int p = fmk_fmm3d_cuda_order(plan);
    const int64_t S = (int64_t)(p + 1) * (p + 2), Sp = (int64_t)(p + 1) * (p + 1), Sx = m2l_pad(Sp);
    const int64_t np = self ? ns : ns + nt;
    const fmk_translate_cfg cfg = fmk_fmm3d_cuda_translate_config((int)S);
    int64_t b = fmk_cuda_tree3d_build_bytes(np) + nodes * FMK_CUDA_TREE_NODE_BYTES; /* tree */
    b += 24 * np;                                               /* points to the GPU */
    b += fmk_cuda_fmm3d_geo_bytes(np, ns, self, nodes, cfg.tb); /* boxes, lists, tiles */
    const int rot = p >= fmk_fmm3d_cuda_tune_of(plan)->m2l_rot_order;
    b += 8 * fmk_fmm3d_cuda_ops_layout(p, rot).total; /* tables, M2M, L2L matrices */
    if (!rot)                                         /* M2L matrices (at most) */
        b += 8 * M2L_DIRS * Sx * Sx;
    if (rot) /* or M2L's rotation tables */
        b += fmk_cuda_fmm3d_rot_bytes(p, (int)n_dirs);
    /* per charge vector of an eval_many pass (eval's buffers hold nv; eval_many copies the
     * vectors' charges into key order when nv > 1) */
    const int64_t nv = fmk_fmm3d_cuda_nv_of(plan);
    b += nv * 3 * nodes * S * 8 + 8 * 8 * n_dirs; /* M, L, the M2L's columns and tables */
    if (!rot)
        b += nv * 8 * Sx * nodes *
             fmk_fmm3d_cuda_m2l_batch(plan, Sx, nodes, (int)n_dirs); /* M2L products */
    b += nv * (2 * 4 * nt * 8 + ns * 8 + 4 * nt * 8); /* results, host eval buffers */
    if (nv > 1)
        b += nv * ns * 8 + 16 * nv; /* the charges in key order, the charge checks */
    return b;
}

void fmk_fmm3d_cuda_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    if (fmk_bytes_gpu_uncounted(ns, nt)) { /* sizes no GPU holds: beyond what this counts */
        *h = *d = FMK_BYTES_OVERFLOW;
        return;
    }
    const int64_t np = nt < 0 ? ns : ns + nt;
    const int p = fmk_fmm3d_cuda_order(plan);
    const int64_t nodes = fmk_tree3d_estimate_nodes(np, fmk_fmm3d_cuda_leaf_size(plan, p));
    *d = device_bytes(plan, ns, nt, nodes, FMK_FMM3D_NDIR - 27);
    /* host: the operator tables to upload while set_points runs, and fmm3d_ops.c's */
    *h = (int64_t)sizeof(fmk_fmm3d_cuda) + 8 * fmk_fmm3d_cuda_ops_layout(p, 1).n_up +
         8 * (int64_t)(4 * p + 3) * (4 * p + 3);
    if (p >= fmk_fmm3d_cuda_tune_of(plan)
                 ->m2l_rot_order) /* the rotation tables, made on the host first */
        *h += fmk_cuda_fmm3d_rot_bytes(p, FMK_FMM3D_NDIR - 27);
}

/* cudaMalloc + copy of host data, with the plan's message on failure. */
fmk_status fmk_fmm3d_cuda_put(fmk_plan *plan, fmk_fmm3d_cuda *s, void **d, const void *h,
                              size_t bytes, const char *what, long long total)
{
    fmk_status st = fmk_cuda_alloc(plan, d, bytes, what, total);
    if (st != FMK_OK)
        return st;
    s->bytes += (int64_t)(bytes ? bytes : 1);
    if (h && bytes) {
        cudaError_t err = cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, what);
    }
    return FMK_OK;
}

/* A buffer kept from the previous points (*cap bytes) when it holds bytes, else allocated again
 * (put). */
fmk_status fmk_fmm3d_cuda_grow(fmk_plan *plan, fmk_fmm3d_cuda *s, void **d, size_t *cap,
                               size_t bytes, const char *what, long long total)
{
    if (*d && *cap >= bytes)
        return FMK_OK;
    drop(s, d, cap);
    const fmk_status st = fmk_fmm3d_cuda_put(plan, s, d, NULL, bytes, what, total);
    if (st == FMK_OK)
        *cap = bytes;
    return st;
}

/* Device bytes of the plan's points (plan->n_sources, n_targets, self), for messages. */
long long fmk_fmm3d_cuda_plan_bytes(const fmk_plan *plan)
{
    const int64_t ns = plan->n_sources, nt = plan->n_targets;
    const int64_t np = plan->self ? ns : ns + nt;
    return device_bytes(
        plan, ns, plan->self ? -1 : nt,
        fmk_tree3d_estimate_nodes(np, fmk_fmm3d_cuda_leaf_size(plan, fmk_fmm3d_cuda_order(plan))),
        FMK_FMM3D_NDIR - 27);
}

/* Where eval's buffers lie in d_eval for k nodes (S doubles an expansion; Sx packed), nn of them
 * from level 2 down, x_bytes of M2L products (one vector's), nt targets, n_xrow M2L table
 * entries, nv charge vectors and ns sources (off[9], 256-byte aligned): expansions M and L, the
 * products X, the M2L's columns Mp, the far and near field's results, the tables, the charge
 * checks, the charges in key order (nv > 1). Returns the bytes. */
static int64_t eval_layout(int64_t S, int64_t Sx, int64_t k, int64_t nn, int64_t x_bytes,
                           int64_t nt, int64_t n_xrow, int64_t nv, int64_t ns, int64_t off[9])
{
    const int64_t bytes[9] = {nv * 8 * S * k,   nv * 8 * S * k, nv * x_bytes,
                              nv * 8 * Sx * nn, nv * 32 * nt,   nv * 32 * nt,
                              8 * n_xrow,       16 * nv,        nv > 1 ? 8 * ns * nv : 0};
    int64_t need = 0;
    for (int i = 0; i < 9; i++)
        off[i] = need, need += (bytes[i] + 255) / 256 * 256;
    return need;
}

int fmk_fmm3d_cuda_nv_of(const fmk_plan *plan)
{
    const int nv = plan->opts.n_vectors;
    return nv < 1 ? 1 : nv > FMM_NV_MAX ? FMM_NV_MAX : nv;
}

/* eval's pointers into d_eval (eval_layout's offsets) */
static void eval_pointers(fmk_fmm3d_cuda *s, const int64_t off[9], int64_t n_xrow)
{
    char *e = (char *)s->d_eval;
    s->d_M = (double *)(e + off[0]), s->d_L = (double *)(e + off[1]);
    s->d_X = (double *)(e + off[2]), s->d_Mp = (double *)(e + off[3]);
    s->d_res = (double *)(e + off[4]), s->d_near = (double *)(e + off[5]);
    s->d_xrow = (int32_t *)(e + off[6]), s->d_stats = (unsigned long long *)(e + off[7]);
    s->d_qk = s->nv_cap > 1 ? (double *)(e + off[8]) : NULL;
    s->n_xrow = n_xrow;
}

/* Eval's buffers (fmk_fmm3d_cuda: d_eval) for k nodes, nn of them from level 2 down, nt targets and
 * n_xrow M2L table entries: kept from the previous points (or the block's place) when large
 * enough, else one new allocation. */
fmk_status fmk_fmm3d_cuda_eval_buffers(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t k, int64_t nn,
                                       int64_t nt, int64_t n_xrow, long long total)
{
    int64_t off[9];
    const int64_t need = eval_layout(s->S, s->Sx, k, nn, 8 * s->Sx * nn * s->m2l_batch, nt, n_xrow,
                                     s->nv_cap, plan->n_sources, off);
    const fmk_status st =
        fmk_fmm3d_cuda_grow(plan, s, &s->d_eval, &s->cap_eval, (size_t)need,
                            "the expansions, the M2L's products and the results", total);
    if (st != FMK_OK)
        return st;
    eval_pointers(s, off, n_xrow);
    return FMK_OK;
}

/* Eval's buffers for nv charge vectors (eval_many), where the points' buffers (set_points made
 * them for nv_cap) hold fewer: the new allocation first, so that a failure leaves the plan as it
 * was; then the M2L's tables again. The next points' buffers are made for nv too. */
fmk_status fmk_fmm3d_cuda_vectors(fmk_plan *plan, fmk_fmm3d_cuda *s, int nv)
{
    if (nv <= s->nv_cap)
        return FMK_OK;
    const int64_t nn = s->n_nodes - s->gemm_first;
    int64_t off[9];
    const int64_t need = eval_layout(s->S, s->Sx, s->n_nodes, nn, 8 * s->Sx * nn * s->m2l_batch,
                                     plan->n_targets, s->n_xrow, nv, plan->n_sources, off);
    void *d = NULL;
    fmk_status st = fmk_fmm3d_cuda_put(plan, s, &d, NULL, (size_t)need,
                                       "the expansions and results of several charge vectors",
                                       fmk_fmm3d_cuda_plan_bytes(plan) + (long long)need);
    if (st != FMK_OK)
        return st;
    drop(s, &s->d_eval, &s->cap_eval);
    s->d_eval = d, s->cap_eval = (size_t)need, s->nv_cap = nv;
    eval_pointers(s, off, s->n_xrow);
    if (s->n_xrow > 0)
        st = fmk_fmm3d_cuda_put_xrow(plan, s);
    plan->state_bytes_device = s->bytes + s->g.bytes + s->tree.bytes;
    plan->info.bytes_device = plan->state_bytes_device;
    return st;
}

/* A fresh state's one allocation for np points (box_bytes: set_points_device's bounding-box
 * workspace, or 0): the points, the workspace, the operators, the tree's and the list builder's
 * arenas (lent to them), the dense M2L matrices (when the tree will have a level 2) and eval's
 * buffers, at the sizes the node estimate of fmk_plan_memory gives. What turns out larger than
 * its place is allocated apart later. A plan's first call pays per cudaMalloc (~0.05 to 0.3 ms
 * each on an H100, more for the larger), not in proportion to the bytes. With a level 2 ahead
 * (M2L GEMMs) the cuBLAS handle too (the knob blas_at 0). */
fmk_status fmk_fmm3d_cuda_state_block(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t np,
                                      size_t box_bytes)
{
    const double t0 = fmk_time_now();
    const int64_t ns = plan->n_sources, nt = plan->n_targets, S = s->S, Sx = s->Sx;
    const int64_t k = fmk_tree3d_estimate_nodes(np, s->leaf_size);
    const int v_lists = np > 8 * (int64_t)s->leaf_size; /* a level 2: V entries, M2L's GEMMs */
    const int dense = !s->use_rot && v_lists;
    const ops_layout o = fmk_fmm3d_cuda_ops_layout(s->order, s->use_rot);
    /* the M2L's products: at most the knob m2l_bytes or one direction (m2l_batch_for),
     * at most all directions, for at most k boxes from level 2 down */
    int64_t x_bytes = 8 * Sx * k > s->tune->m2l_bytes ? 8 * Sx * k : s->tune->m2l_bytes;
    if (x_bytes > 8 * Sx * k * M2L_DIRS)
        x_bytes = 8 * Sx * k * M2L_DIRS;
    int64_t eval_off[9];
    /* the dense M2L matrices: as the degrees are, or whole where the size rule may pick them
     * (the knob m2l_trunc_min: the degrees follow the tree's size) */
    const int64_t m2l_rows =
        s->m2l_min > 0 && s->m2l_f > 0 ? (int64_t)M2L_DIRS * Sx : s->m2l_roff[M2L_DIRS];
    const int64_t bytes[7] = {24 * (np > 0 ? np : 1),
                              (int64_t)box_bytes,
                              8 * o.total,
                              fmk_cuda_tree3d_first_bytes(np, s->leaf_size),
                              fmk_cuda_fmm3d_geo_arena_bytes(np, ns, plan->self, k, s->cfg.tb),
                              dense ? 8 * align32(m2l_rows * Sx) : 0,
                              eval_layout(S, Sx, k, k, dense ? x_bytes : 0, nt,
                                          8 * (int64_t)M2L_DIRS, s->nv_cap, ns, eval_off)};
    int64_t off[7], total = 0;
    for (int i = 0; i < 7; i++)
        off[i] = total, total += (bytes[i] + 255) / 256 * 256;
    fmk_status st = fmk_fmm3d_cuda_put(plan, s, &s->d_block, NULL, (size_t)total,
                                       "the FMM's points, operators and buffers",
                                       fmk_fmm3d_cuda_plan_bytes(plan));
    if (st != FMK_OK)
        return st;
    char *b = (char *)s->d_block;
    s->cap_block = (size_t)total;
    s->d_pts = (double *)(b + off[0]), s->cap_pts = (size_t)bytes[0];
    if (box_bytes)
        s->d_box = b + off[1], s->cap_box = box_bytes;
    s->d_ops = (double *)(b + off[2]);
    s->tree.d_arena = b + off[3], s->tree.arena_bytes = (size_t)bytes[3], s->tree.arena_lent = 1;
    s->g.arena = b + off[4], s->g.arena_bytes = (size_t)bytes[4], s->g.arena_used = 0,
    s->g.arena_lent = 1;
    if (dense)
        s->d_m2l = (double *)(b + off[5]), s->cap_m2l = (size_t)bytes[5];
    s->d_eval = b + off[6], s->cap_eval = (size_t)bytes[6];
    if (dense && s->tune->blas_at == 0)
        st = fmk_fmm3d_cuda_ensure_blas(plan, s);
    s->setup_time[0] += fmk_time_now() - t0;
    return st;
}
