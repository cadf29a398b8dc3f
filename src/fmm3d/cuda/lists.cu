/* lists.cu -- the GPU 3D FMM's geometry on the GPU: points in key order, node cubes,
 * U, V, W, X lists, work lists and translation tiles from the device octree (lists.h).
 *
 * The build's steps, in order, each a function here: points, boxes (with neighbour sets and the
 * M2L's columns), lists, direction slots, work lists (and the U split), tiles; their kernels live
 * in lists_boxes.cu, lists_uvwx.cu and lists_work.cu. Counts, then CUB exclusive scans, then
 * the same kernel fills; the host reads only totals (a few words per pass). Every array lives
 * in one of the geometry's blocks, kept from build to build (the builder below). */
#include <math.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "fmm3d/cuda/lists_common.cuh"

namespace {

using namespace fmk_cuda_lists;

/* The totals of up to 5 exclusive scans of n + 1 entries: tot[j] = out[j][n]. */
struct scan_outs {
    int32_t *p[5];
};
__global__ void k_totals(scan_outs o, int count, int64_t n, int32_t *tot)
{
    if ((int)threadIdx.x < count)
        tot[threadIdx.x] = o.p[threadIdx.x][n];
}

/* Scratch of one build, freed at the end. */
struct scratch {
    int32_t *flag, *pos, *cnt, *nbr;
    int8_t *n_nbr;
    int16_t *rank;
    uint8_t *okeys;
    int32_t *tot, *pos5;
    int32_t *ofirst, *oitems;
    unsigned *hist;
    int16_t *slot_of;
    uint32_t *keys[2];
    int32_t *items[2];
    int32_t *tab;
    int32_t *v_unsorted;
    int16_t *vd_unsorted;
    void *temp;
};

struct builder {
    fmk_plan *plan;
    long long extra;
    fmk_cuda_fmm3d_geo *g;
    scratch w;
    fmk_status st;

    int n_blocks; /* g's blocks taken so far */

    /* *ptr (slot i of g: a block, or temp for i = FMK_CUDA_FMM3D_BLOCKS, *cap bytes) grown to
     * bytes: cut from the arena while it has room, else allocated apart; contents not kept */
    bool grow(int i, void **ptr, size_t *cap, size_t bytes, const char *what)
    {
        if (st != FMK_OK)
            return false;
        if (*cap >= bytes && *ptr)
            return true;
        if (*ptr && !g->in_arena[i])
            cudaFree(*ptr);
        *ptr = NULL, *cap = 0, g->in_arena[i] = 0;
        const size_t room = (bytes + 255) / 256 * 256;
        if (g->arena && g->arena_used + room <= g->arena_bytes) {
            *ptr = (char *)g->arena + g->arena_used;
            g->arena_used += room, g->in_arena[i] = 1;
        } else if ((st = fmk_cuda_alloc(plan, ptr, bytes, what, extra)) != FMK_OK) {
            return false;
        }
        *cap = bytes;
        return true;
    }
    /* *p = the build's next block of g, grown to n elements when smaller. */
    template <typename T> bool alloc(T **p, int64_t n, const char *what)
    {
        if (st != FMK_OK)
            return false;
        if (n_blocks >= FMK_CUDA_FMM3D_BLOCKS) {
            st = fmk_error_set(plan, FMK_ERR_DEVICE,
                               "the FMM's list builder needs more than %d arrays",
                               FMK_CUDA_FMM3D_BLOCKS);
            return false;
        }
        const int i = n_blocks++;
        if (!grow(i, &g->block[i], &g->block_bytes[i], sizeof(T) * (size_t)(n > 0 ? n : 1), what))
            return false;
        *p = (T *)g->block[i];
        return true;
    }
    bool ok(cudaError_t err, const char *what)
    {
        if (st == FMK_OK && err != cudaSuccess)
            st = fmk_cuda_fail(plan, err, what);
        return st == FMK_OK;
    }
    /* CUB's workspace (g->temp) grown to need bytes */
    bool temp(size_t need)
    {
        grow(FMK_CUDA_FMM3D_BLOCKS, &g->temp, &g->temp_bytes, need, "the list builder's workspace");
        w.temp = g->temp;
        return st == FMK_OK;
    }
    /* the end of stage i of the build on the default stream (an event: stage_time, for the
     * benchmark, from their times once the build is done; no wait here) */
    void mark(int i)
    {
        if (st == FMK_OK)
            ok(cudaEventRecord(g->stage_ev[i + 1], 0),
               "cudaEventRecord (the list builder's stages)");
    }
    /* count (<= 5) scans as scan() below, their totals read together (one wait, not count) */
    bool scans(const int32_t *const *in, int32_t *const *out, int64_t n, int count,
               int64_t *const *total)
    {
        if (st != FMK_OK)
            return false;
        size_t need = 0;
        if (!ok(cub::DeviceScan::ExclusiveSum(NULL, need, in[0], out[0], (int)(n + 1)),
                "cub::DeviceScan (query)") ||
            !temp(need) || !alloc(&w.tot, 5, "the list builder's workspace"))
            return false;
        scan_outs o;
        for (int j = 0; j < count; j++) {
            if (!ok(cub::DeviceScan::ExclusiveSum(w.temp, need, in[j], out[j], (int)(n + 1)),
                    "cub::DeviceScan"))
                return false;
            o.p[j] = out[j];
        }
        k_totals<<<1, 32>>>(o, count, n, w.tot);
        int32_t h[5];
        if (!ok(cudaMemcpy(h, w.tot, 4 * (size_t)count, cudaMemcpyDeviceToHost),
                "cudaMemcpy (list sizes)"))
            return false;
        for (int j = 0; j < count; j++)
            *total[j] = h[j];
        return true;
    }
    /* out[0..n] = exclusive sum of in[0..n] (in[n] is 0); *total = out[n] (a read; none when
     * total is NULL). */
    bool scan(const int32_t *in, int32_t *out, int64_t n, int64_t *total)
    {
        if (st != FMK_OK)
            return false;
        size_t need = 0;
        if (!ok(cub::DeviceScan::ExclusiveSum(NULL, need, in, out, (int)(n + 1)),
                "cub::DeviceScan (query)") ||
            !temp(need))
            return false;
        if (!ok(cub::DeviceScan::ExclusiveSum(w.temp, need, in, out, (int)(n + 1)),
                "cub::DeviceScan"))
            return false;
        int32_t h = 0;
        if (!total)
            return true;
        if (!ok(cudaMemcpy(&h, out + n, 4, cudaMemcpyDeviceToHost), "cudaMemcpy (a list size)"))
            return false;
        *total = h;
        return true;
    }
};

} // namespace

extern "C" void fmk_cuda_fmm3d_geo_free(fmk_cuda_fmm3d_geo *g)
{
    if (!g)
        return;
    for (int i = 0; i < FMK_CUDA_FMM3D_BLOCKS; i++) /* every array lives in a block */
        if (g->block[i] && !g->in_arena[i])
            cudaFree(g->block[i]);
    if (g->temp && !g->in_arena[FMK_CUDA_FMM3D_BLOCKS])
        cudaFree(g->temp);
    if (g->arena && !g->arena_lent)
        cudaFree(g->arena);
    for (int i = 0; i < g->n_stage_ev; i++)
        cudaEventDestroy(g->stage_ev[i]);
    memset(g, 0, sizeof *g);
}

extern "C" int64_t fmk_cuda_fmm3d_geo_bytes(int64_t np, int64_t ns, int self, int64_t k, int tb)
{
    const int64_t nt = self ? ns : np - ns;
    int64_t b = 36 * ns + (self ? 0 : 36 * nt);             /* points and orders */
    b += k * (32 + 1 + 4 * 4 + 6 * 4 + 5 * 4);              /* nodes, begins, work lists */
    b += k * (1 + 4 + 4 + 1 + 4) + 36;                      /* octants, the M2L's columns */
    b += k * (4 * 27 + 6 * 189 + 4 * 16);                   /* U, V, W, X entries */
    b += self ? k * (4 * 27 + 4) : 0;                       /* U as pairs and rest rows */
    b += k / tb * 4 * (tb + 2) + k * 4 * (tb + 1);          /* tiles */
    b += 8 * (np + 1) + k * (4 * NBR_MAX + 2 + 6 * 4 + 24); /* scratch */
    return b;
}

namespace {

/* CUB's workspace of a first build (its largest need: the scans of n_flag items, the sorts of
 * the nn M2L columns, of at most V_MAX V entries per node and of at most 2 k tile items). */
cudaError_t first_temp(int64_t n_flag, int64_t k, int64_t nn, size_t *need)
{
    size_t q = 0;
    const int64_t n_v_max = k * V_MAX;
    *need = 0;
    cudaError_t err =
        cub::DeviceScan::ExclusiveSum(NULL, *need, (int32_t *)NULL, (int32_t *)NULL, (int)n_flag);
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, q, (const uint8_t *)NULL, (uint8_t *)NULL,
                                              (int32_t *)NULL, (int32_t *)NULL, (int)nn, 0, 3);
    *need = q > *need ? q : *need;
    if (err == cudaSuccess)
        err = cub::DeviceSegmentedSort::StableSortPairs(
            NULL, q, (int16_t *)NULL, (int16_t *)NULL, (int32_t *)NULL, (int32_t *)NULL,
            (int)(n_v_max < INT32_MAX ? n_v_max : INT32_MAX), (int)k, (int32_t *)NULL,
            (int32_t *)NULL);
    *need = q > *need ? q : *need;
    if (err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairs(NULL, q, (uint32_t *)NULL, (uint32_t *)NULL,
                                              (int32_t *)NULL, (int32_t *)NULL, (int)(2 * k + 1), 0,
                                              8);
    *need = q > *need ? q : *need;
    return err;
}

/* Items of the flags and their scan: sorted points, nodes, tiles (<= 2 k / tb + GROUPS). */
int64_t flag_items(int64_t np, int64_t k)
{
    return (np > 2 * k + GROUPS ? np : 2 * k + GROUPS) + 1;
}

} // namespace

extern "C" int64_t fmk_cuda_fmm3d_geo_arena_bytes(int64_t np, int64_t ns, int self, int64_t k,
                                                  int tb)
{
    size_t need = 0;
    if (first_temp(flag_items(np, k), k, k, &need) != cudaSuccess)
        (void)cudaGetLastError(), need = 8 * (size_t)flag_items(np, k) + (1 << 20);
    return fmk_cuda_fmm3d_geo_bytes(np, ns, self, k, tb) + (int64_t)need +
           256 * (FMK_CUDA_FMM3D_BLOCKS + 1);
}

namespace {

/* Everything of *g but the device memory of the previous build (and the caller's m2l_deg). */
void keep_blocks(fmk_cuda_fmm3d_geo *g)
{
    fmk_cuda_fmm3d_geo keep = *g;
    memset(g, 0, sizeof *g);
    memcpy(g->block, keep.block, sizeof g->block);
    memcpy(g->block_bytes, keep.block_bytes, sizeof g->block_bytes);
    memcpy(g->in_arena, keep.in_arena, sizeof g->in_arena);
    g->temp = keep.temp, g->temp_bytes = keep.temp_bytes;
    g->arena = keep.arena, g->arena_bytes = keep.arena_bytes, g->arena_used = keep.arena_used;
    g->arena_lent = keep.arena_lent;
    memcpy(g->stage_ev, keep.stage_ev, sizeof g->stage_ev);
    g->n_stage_ev = keep.n_stage_ev;
    memcpy(g->m2l_deg, keep.m2l_deg, sizeof g->m2l_deg);
}

/* The sizes the steps share. */
struct sizes {
    int64_t np, k, nt, n_flag, f2, nn;
    int levels;
};

/* Points in key order: sources and targets with their caller indices; w.pos keeps the sources
 * before each sorted point. */
void build_points(builder &B, const fmk_cuda_tree *t, const double *d_x, int64_t ns, int self,
                  const sizes &z)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    B.alloc(&w.flag, z.n_flag, "the list builder's workspace");
    B.alloc(&w.pos, z.n_flag, "the list builder's workspace");
    if (B.st == FMK_OK)
        B.ok(fmk_cuda_fmm3d_src_flags(z.np, ns, self, t->d_order, w.flag),
             "the list builder's kernels");
    B.scan(w.flag, w.pos, z.np, NULL); /* (its total is ns) */
    B.alloc(&g->d_src, ns, "the sources");
    B.alloc(&g->d_src_order, ns, "the source order");
    if (self) {
        g->d_trg = g->d_src, g->d_trg_order = g->d_src_order;
    } else {
        B.alloc(&g->d_trg, z.nt, "the targets");
        B.alloc(&g->d_trg_order, z.nt, "the target order");
    }
    if (B.st == FMK_OK && z.np > 0)
        B.ok(fmk_cuda_fmm3d_split(z.np, ns, self, t->d_order, w.pos, d_x, g->d_src, g->d_src_order,
                                  g->d_trg, g->d_trg_order),
             "the list builder's kernels");
}

/* Nodes: source and target ranges, levels, then cubes, octants and neighbour sets level by
 * level. */
void build_boxes(builder &B, const fmk_cuda_tree *t, int self, const sizes &z)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    const int64_t k = z.k;
    B.alloc(&g->d_cube, k, "the boxes");
    B.alloc(&g->d_level, k, "the boxes");
    B.alloc(&g->d_sb, k, "the boxes");
    B.alloc(&g->d_sn, k, "the boxes");
    B.alloc(&g->d_tb, k, "the boxes");
    B.alloc(&g->d_tn, k, "the boxes");
    B.alloc(&g->d_oct, k, "the boxes");
    if (B.st == FMK_OK) {
        B.ok(fmk_cuda_fmm3d_nodes(k, self, t->d_begin, t->d_end, w.pos, g->d_sb, g->d_sn, g->d_tb,
                                  g->d_tn),
             "the list builder's kernels");
        B.ok(cudaMemcpyAsync(g->d_level, t->d_level, (size_t)k, cudaMemcpyDeviceToDevice),
             "cudaMemcpy (levels)");
    }

    B.alloc(&w.nbr, NBR_MAX * k, "the neighbour sets");
    B.alloc(&w.n_nbr, k, "the neighbour sets");
    if (B.st == FMK_OK)
        B.ok(fmk_cuda_fmm3d_boxes(t, g->d_cube, g->d_oct, w.nbr, w.n_nbr),
             "the list builder's kernels");
}

/* The M2L's source columns (nodes from level 2 down) grouped by octant. */
void build_m2l_columns(builder &B, const sizes &z)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    const int64_t nn = z.nn, f2 = z.f2;
    B.alloc(&g->d_m2l_box, nn, "the boxes");
    B.alloc(&g->d_m2l_col, z.k, "the boxes");
    B.alloc(&w.okeys, nn, "the list builder's workspace");
    B.alloc(&w.oitems, nn, "the list builder's workspace");
    B.alloc(&w.ofirst, 9, "the list builder's workspace");
    for (int q = 0; q <= 8; q++)
        g->m2l_first[q] = 0;
    if (B.st == FMK_OK && nn > 0) {
        B.ok(fmk_cuda_fmm3d_iota(nn, (int32_t)f2, w.oitems), "the list builder's kernels");
        size_t need = 0;
        const uint8_t *okey_in = (const uint8_t *)(g->d_oct + f2);
        B.ok(cub::DeviceRadixSort::SortPairs(NULL, need, okey_in, w.okeys, w.oitems, g->d_m2l_box,
                                             (int)nn, 0, 3),
             "cub::DeviceRadixSort (query)");
        if (B.temp(need))
            B.ok(cub::DeviceRadixSort::SortPairs(w.temp, need, okey_in, w.okeys, w.oitems,
                                                 g->d_m2l_box, (int)nn, 0, 3),
                 "cub::DeviceRadixSort (M2L columns)");
        if (B.st == FMK_OK)
            B.ok(fmk_cuda_fmm3d_m2l_columns(nn, w.okeys, g->d_m2l_box, g->d_m2l_col, w.ofirst),
                 "the list builder's kernels");
        int32_t of[9];
        if (B.ok(cudaMemcpy(of, w.ofirst, sizeof of, cudaMemcpyDeviceToHost),
                 "cudaMemcpy (M2L columns)"))
            for (int q = 0; q <= 8; q++)
                g->m2l_first[q] = of[q];
    }
}

/* The lists: count, scan, fill; then each V row sorted by the source's octant, then the
 * direction's place in the M2L order (CUB). dir_of_rank: that order's directions. */
void build_lists(builder &B, const fmk_cuda_tree *t, int64_t near_max, const sizes &z,
                 int16_t *dir_of_rank)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    const int64_t k = z.k;
    B.alloc(&w.cnt, 6 * (k + 1), "the list builder's workspace");
    fmk_cuda_fmm3d_lists_args la;
    memset(&la, 0, sizeof la);
    la.k = k, la.near_max = near_max;
    la.parent = t->d_parent, la.more = t->d_more, la.nch = t->d_n_children;
    la.sn = g->d_sn, la.tn = g->d_tn, la.nbr = w.nbr, la.n_nbr = w.n_nbr, la.cube = g->d_cube;
    la.cnt = w.cnt;
    la.oct = g->d_oct;
    B.alloc(&w.rank, FMK_FMM3D_NDIR, "the list builder's workspace");
    int16_t rank[FMK_FMM3D_NDIR];
    fmk_cuda_fmm3d_m2l_order(g->m2l_deg, rank, dir_of_rank);
    if (B.st == FMK_OK)
        B.ok(cudaMemcpy(w.rank, rank, sizeof rank, cudaMemcpyHostToDevice),
             "cudaMemcpy (directions)");
    la.rank = w.rank;
    if (B.st == FMK_OK)
        B.ok(fmk_cuda_fmm3d_uvwx(la, 0), "the list kernels");
    int32_t **begins[5] = {&g->d_u_begin, &g->d_v_begin, &g->d_w_begin, &g->d_x_begin,
                           &g->d_y_begin};
    int64_t *totals[5] = {&g->n_u, &g->n_v, &g->n_w, &g->n_x, &g->n_y};
    for (int j = 0; j < 5; j++)
        B.alloc(begins[j], k + 1, "the interaction lists");
    {
        const int32_t *in[5];
        int32_t *out[5];
        for (int j = 0; j < 5; j++)
            in[j] = w.cnt + j * (k + 1), out[j] = *begins[j];
        B.scans(in, out, k, 5, totals);
    }
    B.alloc(&g->d_u, g->n_u, "the U list");
    B.alloc(&g->d_v, g->n_v, "the V list");
    B.alloc(&g->d_v_slot, g->n_v, "the V list");
    B.alloc(&w.v_unsorted, g->n_v, "the V list");
    B.alloc(&w.vd_unsorted, g->n_v, "the V list");
    B.alloc(&g->d_w, g->n_w, "the W list");
    B.alloc(&g->d_x, g->n_x, "the X list");
    B.alloc(&g->d_y, g->n_y, "the X list");
    if (B.st == FMK_OK) {
        la.ub = g->d_u_begin, la.vb = g->d_v_begin, la.wb = g->d_w_begin, la.xb = g->d_x_begin;
        la.yb = g->d_y_begin;
        la.u = g->d_u, la.v = w.v_unsorted, la.vd = w.vd_unsorted, la.w = g->d_w, la.x = g->d_x,
        la.y = g->d_y;
        B.ok(fmk_cuda_fmm3d_uvwx(la, 1), "the list kernels");
        size_t need = 0;
        B.ok(cub::DeviceSegmentedSort::StableSortPairs(NULL, need, w.vd_unsorted, g->d_v_slot,
                                                       w.v_unsorted, g->d_v, (int)g->n_v, (int)k,
                                                       g->d_v_begin, g->d_v_begin + 1),
             "cub::DeviceSegmentedSort (query)");
        if (B.temp(need) && g->n_v > 0)
            B.ok(cub::DeviceSegmentedSort::StableSortPairs(w.temp, need, w.vd_unsorted, g->d_v_slot,
                                                           w.v_unsorted, g->d_v, (int)g->n_v,
                                                           (int)k, g->d_v_begin, g->d_v_begin + 1),
                 "cub::DeviceSegmentedSort (the V lists)");
    }
}

/* Direction slots: the directions that occur, in the M2L order. */
void build_slots(builder &B, const int16_t *dir_of_rank)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    B.alloc(&w.hist, RANK_MAX, "the list builder's workspace");
    B.alloc(&w.slot_of, RANK_MAX, "the list builder's workspace");
    if (B.st != FMK_OK)
        return;
    unsigned hist[RANK_MAX];
    int16_t slot_of[RANK_MAX];
    B.ok(cudaMemset(w.hist, 0, sizeof hist), "cudaMemset (directions)");
    if (g->n_v > 0)
        B.ok(fmk_cuda_fmm3d_dir_count(g->n_v, g->d_v_slot, w.hist), "the list kernels");
    if (B.ok(cudaMemcpy(hist, w.hist, sizeof hist, cudaMemcpyDeviceToHost),
             "cudaMemcpy (directions)")) {
        for (int r = 0; r < RANK_MAX; r++) { /* slots in the M2L order */
            slot_of[r] = (int16_t)(hist[r] ? g->n_slots : -1);
            if (hist[r])
                g->dir_of_slot[g->n_slots++] = dir_of_rank[r];
        }
        B.ok(cudaMemcpy(w.slot_of, slot_of, sizeof slot_of, cudaMemcpyHostToDevice),
             "cudaMemcpy (directions)");
        if (g->n_v > 0)
            B.ok(fmk_cuda_fmm3d_dir_to_slot(g->n_v, w.slot_of, g->d_v_slot), "the list kernels");
    }
}

/* Work lists; then, sources = targets, the U lists split into leaf pairs (each once) and the
 * rest. */
void build_work(builder &B, const fmk_cuda_tree *t, int self, int pair_cap, const sizes &z)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    const int64_t k = z.k;
    int32_t **outs[5] = {&g->d_leaves_src, &g->d_leaves_trg, &g->d_xnodes, &g->d_ynodes,
                         &g->d_vnodes};
    int64_t *counts[5] = {&g->n_leaves_src, &g->n_leaves_trg, &g->n_xnodes, &g->n_ynodes,
                          &g->n_vnodes};
    const int32_t *lbeg[5] = {NULL, NULL, g->d_x_begin, g->d_y_begin, g->d_v_begin};
    /* flags in w.cnt (free until the U split below), their scans in w.pos5, sizes read once */
    B.alloc(&w.pos5, 5 * (k + 1), "the list builder's workspace");
    {
        const int32_t *in[5];
        int32_t *out[5];
        for (int j = 0; j < 5; j++) {
            in[j] = w.cnt + j * (k + 1), out[j] = w.pos5 + j * (k + 1);
            if (B.st == FMK_OK)
                B.ok(fmk_cuda_fmm3d_work_flags(k, j, t->d_more, g->d_sn, g->d_tn, lbeg[j],
                                               w.cnt + j * (k + 1)),
                     "the list builder's kernels");
        }
        B.scans(in, out, k, 5, counts);
        for (int j = 0; j < 5; j++)
            if (B.alloc(outs[j], *counts[j], "the work lists") && k > 0)
                B.ok(fmk_cuda_fmm3d_compact(k, w.cnt + j * (k + 1), w.pos5 + j * (k + 1), *outs[j]),
                     "the list builder's kernels");
    }

    if (self && B.st == FMK_OK) {
        const int cap = pair_cap > 0 ? pair_cap : 1;
        B.ok(fmk_cuda_fmm3d_sym_split(k, cap, g->d_sn, g->d_u_begin, g->d_u, g->d_cube, w.cnt, NULL,
                                      NULL, NULL, NULL, 0),
             "the list kernels");
        if (B.alloc(&g->d_ur_begin, k + 1, "the U list")) {
            const int32_t *in[2] = {w.cnt, w.cnt + k + 1};
            int32_t *out[2] = {w.pos, g->d_ur_begin};
            int64_t *totals[2] = {&g->n_pairs, &g->n_ur};
            B.scans(in, out, k, 2, totals);
        }
        B.alloc(&g->d_pairs, 2 * g->n_pairs, "the U list");
        B.alloc(&g->d_ur, g->n_ur, "the U list");
        if (B.st == FMK_OK && k > 0)
            B.ok(fmk_cuda_fmm3d_sym_split(k, cap, g->d_sn, g->d_u_begin, g->d_u, g->d_cube, NULL,
                                          w.pos, g->d_ur_begin, g->d_pairs, g->d_ur, 1),
                 "the list kernels");
    }
}

/* The tiles' items sorted by group (their number returned), and the groups' first tiles
 * (first_tile, GROUPS + 1). */
int64_t build_tile_groups(builder &B, const fmk_cuda_tree *t, int tbw, const sizes &z,
                          int64_t *first_tile)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    const int64_t k = z.k;
    const int levels = z.levels;
    int64_t n_items = 0;
    if (B.st == FMK_OK) {
        B.ok(fmk_cuda_fmm3d_tile_items(k, levels, t->d_more, g->d_sn, g->d_tn, t->d_level, g->d_oct,
                                       NULL, w.flag, NULL, NULL),
             "the list builder's kernels");
        B.scan(w.flag, w.pos, k, &n_items);
    }
    B.alloc(&w.keys[0], n_items, "the tiles");
    B.alloc(&w.keys[1], n_items, "the tiles");
    B.alloc(&w.items[0], n_items, "the tiles");
    B.alloc(&w.items[1], n_items, "the tiles");
    B.alloc(&w.tab, 2 * GROUPS, "the tiles");
    if (B.st != FMK_OK)
        return n_items;
    B.ok(fmk_cuda_fmm3d_tile_items(k, levels, t->d_more, g->d_sn, g->d_tn, t->d_level, g->d_oct,
                                   w.pos, NULL, w.keys[0], w.items[0]),
         "the list builder's kernels");
    size_t need = 0;
    B.ok(cub::DeviceRadixSort::SortPairs(NULL, need, w.keys[0], w.keys[1], w.items[0], w.items[1],
                                         (int)n_items, 0, 8),
         "cub::DeviceRadixSort (query)");
    if (B.temp(need) && n_items > 0)
        B.ok(cub::DeviceRadixSort::SortPairs(w.temp, need, w.keys[0], w.keys[1], w.items[0],
                                             w.items[1], (int)n_items, 0, 8),
             "cub::DeviceRadixSort (tiles)");
    unsigned hist[GROUPS];
    B.ok(cudaMemset(w.tab, 0, 4 * GROUPS), "cudaMemset (tiles)");
    if (B.st == FMK_OK && n_items > 0)
        B.ok(fmk_cuda_fmm3d_group_count(n_items, w.keys[1], (unsigned *)w.tab),
             "the list builder's kernels");
    if (B.ok(cudaMemcpy(hist, w.tab, sizeof hist, cudaMemcpyDeviceToHost), "cudaMemcpy (tiles)")) {
        int32_t tab[2 * GROUPS];
        int64_t tiles = 0, items = 0;
        for (int q = 0; q < GROUPS; q++) {
            first_tile[q] = tiles;
            tab[q] = (int32_t)tiles, tab[GROUPS + q] = (int32_t)items;
            tiles += (hist[q] + tbw - 1) / tbw;
            items += hist[q];
        }
        first_tile[GROUPS] = tiles;
        g->n_tiles = tiles;
        for (int L = 0; L <= levels; L++) {
            g->m2m_first[L] = first_tile[L];
            g->l2l_first[L] = first_tile[levels + 8 * L];
        }
        B.ok(cudaMemcpy(w.tab, tab, sizeof tab, cudaMemcpyHostToDevice), "cudaMemcpy (tiles)");
    }
    return n_items;
}

/* The tiles: their boxes, then their entries (count, scan, fill). */
void build_tiles(builder &B, const fmk_cuda_tree *t, int tbw, const sizes &z)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    scratch &w = B.w;
    const int levels = z.levels;
    int64_t first_tile[GROUPS + 1];
    const int64_t n_items = build_tile_groups(B, t, tbw, z, first_tile);
    B.alloc(&g->d_tile_nodes, g->n_tiles * tbw, "the tiles");
    B.alloc(&g->d_tile_begin, g->n_tiles + 1, "the tiles");
    if (B.st == FMK_OK) {
        B.ok(cudaMemset(g->d_tile_nodes, 0xff, 4 * (size_t)(g->n_tiles * tbw)),
             "cudaMemset (tiles)");
        if (n_items > 0)
            B.ok(fmk_cuda_fmm3d_tile_nodes(n_items, tbw, w.keys[1], w.items[1], w.tab,
                                           g->d_tile_nodes),
                 "the list builder's kernels");
        B.ok(fmk_cuda_fmm3d_tile_entries(g->n_tiles, first_tile[levels], tbw, g->d_tile_nodes,
                                         t->d_more, t->d_n_children, g->d_sn, t->d_parent, g->d_oct,
                                         w.flag, NULL, NULL, NULL, 0),
             "the list builder's kernels");
        B.scan(w.flag, g->d_tile_begin, g->n_tiles, &g->n_entries);
    }
    B.alloc(&g->d_tile_slot, g->n_entries, "the tiles");
    B.alloc(&g->d_tile_src, g->n_entries * tbw, "the tiles");
    if (B.st == FMK_OK && g->n_tiles > 0)
        B.ok(fmk_cuda_fmm3d_tile_entries(g->n_tiles, first_tile[levels], tbw, g->d_tile_nodes,
                                         t->d_more, t->d_n_children, g->d_sn, t->d_parent, g->d_oct,
                                         NULL, g->d_tile_begin, g->d_tile_slot, g->d_tile_src, 1),
             "the list builder's kernels");
    B.ok(cudaGetLastError(), "the list builder's kernels");
}

/* One wait for the whole build, then the stages' times; on success the bytes held (the arena
 * and the blocks, the scratch's included, stay for the next build). */
fmk_status finish(builder &B)
{
    fmk_cuda_fmm3d_geo *g = B.g;
    if (B.ok(cudaEventSynchronize(g->stage_ev[6]), "the list builder's kernels"))
        for (int i = 0; i < 6; i++) {
            float ms = 0;
            B.ok(cudaEventElapsedTime(&ms, g->stage_ev[i], g->stage_ev[i + 1]),
                 "cudaEventElapsedTime");
            g->stage_time[i] = 1e-3 * ms;
        }
    if (B.st != FMK_OK) {
        fmk_cuda_fmm3d_geo_free(g);
        return B.st;
    }
    g->bytes = (g->arena_lent ? 0 : (int64_t)g->arena_bytes) +
               (g->in_arena[FMK_CUDA_FMM3D_BLOCKS] ? 0 : (int64_t)g->temp_bytes);
    for (int i = 0; i < FMK_CUDA_FMM3D_BLOCKS; i++)
        g->bytes += g->in_arena[i] ? 0 : (int64_t)g->block_bytes[i];
    return B.st;
}

} // namespace

extern "C" fmk_status fmk_cuda_fmm3d_geometry(fmk_plan *plan, const fmk_cuda_tree *t,
                                              const double *d_x, int64_t ns, int self,
                                              int64_t near_max, int tbw, int pair_cap,
                                              long long extra, fmk_cuda_fmm3d_geo *g)
{
    keep_blocks(g);
    builder B;
    memset(&B.w, 0, sizeof B.w);
    B.plan = plan, B.extra = extra, B.g = g, B.st = FMK_OK, B.n_blocks = 0;
    for (; g->n_stage_ev < 7 && B.st == FMK_OK; g->n_stage_ev++)
        B.ok(cudaEventCreate(&g->stage_ev[g->n_stage_ev]),
             "cudaEventCreate (the list builder's stages)");
    if (B.st == FMK_OK)
        B.ok(cudaEventRecord(g->stage_ev[0], 0), "cudaEventRecord (the list builder's stages)");
    sizes z;
    z.np = t->n_points, z.k = t->n_nodes;
    z.nt = self ? ns : z.np - ns;
    z.levels = t->levels;
    g->n_nodes = z.k;
    g->tb = tbw;
    z.n_flag = flag_items(z.np, z.k);
    z.f2 = z.levels > 2 ? t->level_begin[2] : z.k, z.nn = z.k - z.f2;

    /* the first build: one arena for the arrays and CUB's workspace (lent by the caller, or
     * allocated here), so that the build allocates once */
    if (!g->block[0] && !g->temp) {
        size_t need = 0;
        B.ok(first_temp(z.n_flag, z.k, z.nn, &need), "CUB (workspace query)");
        const size_t bytes = (size_t)fmk_cuda_fmm3d_geo_bytes(z.np, ns, self, z.k, tbw) + need +
                             256 * (FMK_CUDA_FMM3D_BLOCKS + 1);
        if (B.st == FMK_OK && !g->arena &&
            (B.st = fmk_cuda_alloc(plan, &g->arena, bytes, "the lists", extra)) == FMK_OK)
            g->arena_bytes = bytes, g->arena_used = 0, g->arena_lent = 0;
        B.temp(need);
    }

    int16_t dir_of_rank[RANK_MAX];
    build_points(B, t, d_x, ns, self, z);
    B.mark(0);
    build_boxes(B, t, self, z);
    build_m2l_columns(B, z);
    B.mark(1);
    build_lists(B, t, near_max, z, dir_of_rank);
    B.mark(2);
    build_slots(B, dir_of_rank);
    B.mark(3);
    build_work(B, t, self, pair_cap, z);
    B.mark(4);
    build_tiles(B, t, tbw, z);
    B.mark(5);
    return finish(B);
}
