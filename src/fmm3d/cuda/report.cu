/* report.cu -- a GPU 3D FMM plan's lists and counts, for the tests and the benchmark
 * (fmm3d/cuda/report.h; not API). */
#include <string.h>

#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/report.h"

extern "C" const fmk_engine fmk_engine_fmm_cuda;

/* For the benchmark: the M2L work of a plan's lists: V pairs, the box-direction products the
 * GEMMs compute (directions times boxes from level 2 down) in whole (Sp x Sp) products' worth
 * of flops (fewer with the far directions truncated), and the M2L's (packed) doubles per
 * expansion, Sp. */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_work(const fmk_plan *plan, int64_t *pairs,
                                              int64_t *tile_pairs, int *stride)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmk_fmm3d_cuda *s = (const fmk_fmm3d_cuda *)plan->state;
    *pairs = s->g.n_v;
    *tile_pairs = (int64_t)(s->m2l_flops / (2.0 * s->Sp * s->Sp) + 0.5);
    *stride = s->Sp;
    return FMK_OK;
}

/* For the benchmark and the tests: the M2L of a plan's last set_points: its GEMM columns
 * (boxes from level 2 down), GEMMs, and whether the operators are whole (1: the size rule, or
 * no truncation) or truncated (0). */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_shape(const fmk_plan *plan, int64_t *boxes, int *gemms,
                                               int *whole)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmk_fmm3d_cuda *s = (const fmk_fmm3d_cuda *)plan->state;
    *boxes = s->n_nodes - s->gemm_first;
    *gemms = s->n_m2l_gemms;
    *whole = s->m2l_whole;
    return FMK_OK;
}

/* For the benchmark: the P2P of leaf pairs of a plan's last set_points, counted on the host
 * (copies of the pairs and the leaves' counts): st[0] pairs, [1] leaves with targets, [2] the
 * largest leaf, [3] leaves of more points than a full pass holds, [4] the pass slots the
 * kernel runs (the held leaf's passes, tail passes of 32 included, times the partner's
 * points), [5] the pairs' interactions (n_b n_a), [6] the most pairs one leaf holds, [7] the
 * points a full pass holds. FMK_ERR_STATE when the plan has no pairs; FMK_ERR_NOMEM (host
 * copies) or FMK_ERR_DEVICE (a copy failed), st untouched. */
extern "C" fmk_status fmk_cuda_fmm3d_p2p_stats(const fmk_plan *plan, int64_t st[8])
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmk_fmm3d_cuda *s = (const fmk_fmm3d_cuda *)plan->state;
    const fmk_cuda_fmm3d_geo *g = &s->g;
    if (!g->d_pairs || g->n_pairs <= 0)
        return FMK_ERR_STATE;
    const int64_t np = g->n_pairs, nn = s->n_nodes;
    int32_t *pr = (int32_t *)malloc(8 * (size_t)np), *sn = (int32_t *)malloc(4 * (size_t)nn);
    int32_t *held = (int32_t *)calloc((size_t)nn, 4),
            *lv = (int32_t *)malloc(4 * (size_t)(g->n_leaves_trg + 1));
    fmk_status rc = !pr || !sn || !held || !lv ? FMK_ERR_NOMEM : FMK_OK;
    if (rc == FMK_OK &&
        (cudaMemcpy(pr, g->d_pairs, 8 * (size_t)np, cudaMemcpyDeviceToHost) != cudaSuccess ||
         cudaMemcpy(sn, g->d_sn, 4 * (size_t)nn, cudaMemcpyDeviceToHost) != cudaSuccess ||
         cudaMemcpy(lv, g->d_leaves_trg, 4 * (size_t)g->n_leaves_trg, cudaMemcpyDeviceToHost) !=
             cudaSuccess))
        rc = FMK_ERR_DEVICE;
    if (rc == FMK_OK) {
        const int cap = fmk_fmm3d_cuda_pairs_cap(s);
        memset(st, 0, 8 * sizeof st[0]);
        st[0] = np, st[1] = g->n_leaves_trg, st[7] = cap;
        for (int64_t i = 0; i < g->n_leaves_trg; i++) {
            const int n = sn[lv[i]];
            st[2] = n > st[2] ? n : st[2];
            st[3] += n > cap;
        }
        for (int64_t e = 0; e < np; e++) {
            const int b = pr[2 * e], a = pr[2 * e + 1];
            int slots = 0;
            for (int left = sn[b]; left > 0;) {
                const int pass = left <= 32 ? 32 : cap;
                slots += pass, left -= pass;
            }
            st[4] += (int64_t)slots * sn[a], st[5] += (int64_t)sn[b] * sn[a];
            held[b]++;
            st[6] = held[b] > st[6] ? held[b] : st[6];
        }
    }
    free(pr), free(sn), free(held), free(lv);
    return rc;
}

/* For the benchmark: the leaves of a plan's last set_points that are not on the deepest level
 * or hold fewer than 32 points, each on a line to f (node, level, sources, pairs held and
 * partnered, its rest row's boxes and points, its Y row's boxes and points), then the lists'
 * totals. */
extern "C" fmk_status fmk_cuda_fmm3d_leaf_report(const fmk_plan *plan, FILE *f)
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state || !f)
        return FMK_ERR_STATE;
    const fmk_fmm3d_cuda *s = (const fmk_fmm3d_cuda *)plan->state;
    const fmk_cuda_fmm3d_geo *g = &s->g;
    const int64_t nn = s->n_nodes, nl = g->n_leaves_trg, np = g->d_pairs ? g->n_pairs : 0;
    int32_t *sn = (int32_t *)malloc(4 * (size_t)nn), *lv = (int32_t *)malloc(4 * (size_t)(nl + 1));
    int32_t *urb = (int32_t *)malloc(4 * (size_t)(nn + 1)),
            *ur = (int32_t *)malloc(4 * (size_t)(g->n_ur + 1));
    int32_t *yb = (int32_t *)malloc(4 * (size_t)(nn + 1)),
            *y = (int32_t *)malloc(4 * (size_t)(g->n_y + 1));
    int32_t *pr = (int32_t *)malloc(8 * (size_t)(np + 1)), *held = (int32_t *)calloc((size_t)nn, 4);
    int32_t *part = (int32_t *)calloc((size_t)nn, 4);
    int8_t *lev = (int8_t *)malloc((size_t)nn);
    fmk_status rc = !sn || !lv || !urb || !ur || !yb || !y || !pr || !held || !part || !lev
                        ? FMK_ERR_NOMEM
                        : FMK_OK;
    if (rc == FMK_OK &&
        (cudaMemcpy(sn, g->d_sn, 4 * (size_t)nn, cudaMemcpyDeviceToHost) != cudaSuccess ||
         cudaMemcpy(lv, g->d_leaves_trg, 4 * (size_t)nl, cudaMemcpyDeviceToHost) != cudaSuccess ||
         cudaMemcpy(lev, g->d_level, (size_t)nn, cudaMemcpyDeviceToHost) != cudaSuccess ||
         (g->d_ur_begin && cudaMemcpy(urb, g->d_ur_begin, 4 * (size_t)(nn + 1),
                                      cudaMemcpyDeviceToHost) != cudaSuccess) ||
         (g->d_ur && g->n_ur > 0 &&
          cudaMemcpy(ur, g->d_ur, 4 * (size_t)g->n_ur, cudaMemcpyDeviceToHost) != cudaSuccess) ||
         (g->d_y_begin && cudaMemcpy(yb, g->d_y_begin, 4 * (size_t)(nn + 1),
                                     cudaMemcpyDeviceToHost) != cudaSuccess) ||
         (g->d_y && g->n_y > 0 &&
          cudaMemcpy(y, g->d_y, 4 * (size_t)g->n_y, cudaMemcpyDeviceToHost) != cudaSuccess) ||
         (np > 0 &&
          cudaMemcpy(pr, g->d_pairs, 8 * (size_t)np, cudaMemcpyDeviceToHost) != cudaSuccess)))
        rc = FMK_ERR_DEVICE;
    if (rc == FMK_OK) {
        int deepest = 0;
        for (int64_t i = 0; i < nl; i++)
            deepest = lev[lv[i]] > deepest ? lev[lv[i]] : deepest;
        for (int64_t e = 0; e < np; e++)
            held[pr[2 * e]]++, part[pr[2 * e + 1]]++;
        for (int64_t i = 0; i < nl; i++) {
            const int b = lv[i];
            if (lev[b] == deepest && sn[b] >= 32)
                continue;
            int64_t rs = 0, ys = 0;
            const int64_t nr = g->d_ur_begin ? urb[b + 1] - urb[b] : 0,
                          ny = g->d_y_begin ? yb[b + 1] - yb[b] : 0;
            for (int64_t e = 0; e < nr; e++)
                rs += sn[ur[urb[b] + e]];
            for (int64_t e = 0; e < ny; e++)
                ys += sn[y[yb[b] + e]];
            fprintf(f,
                    "  leaf %d: level %d (deepest %d), %d points, pairs held %d partnered %d, rest "
                    "row %lld boxes "
                    "%lld points, Y row %lld boxes %lld points\n",
                    b, lev[b], deepest, sn[b], held[b], part[b], (long long)nr, (long long)rs,
                    (long long)ny, (long long)ys);
        }
        fprintf(f,
                "  totals: nodes %lld, leaves %lld, pairs %lld, rest entries %lld, W %lld, X %lld, "
                "Y %lld in %lld boxes\n",
                (long long)nn, (long long)nl, (long long)np, (long long)g->n_ur, (long long)g->n_w,
                (long long)g->n_x, (long long)g->n_y, (long long)g->n_ynodes);
    }
    free(sn), free(lv), free(urb), free(ur), free(yb), free(y), free(pr), free(held), free(part),
        free(lev);
    return rc;
}

/* For the benchmark: set_points' parts in seconds: start (events, cuBLAS handle), tree (points
 * to the GPU and the octree), lists (lists.cu), operators (their host part and the wait
 * for them at the end), buffers; then the list build's stages (fmk_cuda_fmm3d_geo's
 * stage_time); then the GPU time of the M2L matrices' kernel when this set_points built them
 * (else 0). */
extern "C" fmk_status fmk_cuda_fmm3d_setup_times(const fmk_plan *plan, double t[12])
{
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmk_fmm3d_cuda *s = (const fmk_fmm3d_cuda *)plan->state;
    memcpy(t, s->setup_time, 5 * sizeof(double));
    memcpy(t + 5, s->g.stage_time, 6 * sizeof(double));
    t[11] = s->setup_time[5];
    return FMK_OK;
}

/* For the tests: the lists the plan built on the GPU, in the host's form (fmm3d.h; V entries
 * with their directions, X and the X entries done as P2P together, U with the W entries done as
 * P2P). Free with fmk_fmm3d_lists_free. */
extern "C" fmk_status fmk_cuda_fmm3d_lists(fmk_plan *plan, fmk_fmm3d_lists *l)
{
    memset(l, 0, sizeof *l);
    if (!plan || plan->engine != &fmk_engine_fmm_cuda || !plan->state)
        return FMK_ERR_STATE;
    const fmk_fmm3d_cuda *s = (const fmk_fmm3d_cuda *)plan->state;
    const fmk_cuda_fmm3d_geo *g = &s->g;
    const int64_t k = g->n_nodes;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    real4d *cube = hmalloc<real4d>((size_t)k);
    int32_t *beg = hmalloc<int32_t>(5 * (size_t)(k + 1));
    int32_t *u = hmalloc<int32_t>((size_t)g->n_u), *v = hmalloc<int32_t>((size_t)g->n_v);
    int32_t *w = hmalloc<int32_t>((size_t)g->n_w), *x = hmalloc<int32_t>((size_t)g->n_x);
    int32_t *y = hmalloc<int32_t>((size_t)g->n_y);
    int16_t *vs = hmalloc<int16_t>((size_t)g->n_v);
    l->n_nodes = k;
    l->center = hmalloc<double>(3 * (size_t)k), l->side = hmalloc<double>((size_t)k);
    l->u_begin = hmalloc<int64_t>((size_t)k + 1), l->v_begin = hmalloc<int64_t>((size_t)k + 1);
    l->w_begin = hmalloc<int64_t>((size_t)k + 1), l->x_begin = hmalloc<int64_t>((size_t)k + 1);
    l->u = hmalloc<int32_t>((size_t)g->n_u), l->v = hmalloc<int32_t>((size_t)g->n_v);
    l->v_dir = hmalloc<int16_t>((size_t)g->n_v), l->w = hmalloc<int32_t>((size_t)g->n_w);
    l->x = hmalloc<int32_t>((size_t)(g->n_x + g->n_y));
    if (!cube || !beg || !u || !v || !w || !x || !y || !vs || !l->center || !l->side ||
        !l->u_begin || !l->v_begin || !l->w_begin || !l->x_begin || !l->u || !l->v || !l->v_dir ||
        !l->w || !l->x) {
        st = fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the lists");
    } else {
        const struct {
            void *h;
            const void *d;
            size_t bytes;
        } cp[] = {{cube, g->d_cube, 32 * (size_t)k},
                  {beg, g->d_u_begin, 4 * (size_t)(k + 1)},
                  {beg + (k + 1), g->d_v_begin, 4 * (size_t)(k + 1)},
                  {beg + 2 * (k + 1), g->d_w_begin, 4 * (size_t)(k + 1)},
                  {beg + 3 * (k + 1), g->d_x_begin, 4 * (size_t)(k + 1)},
                  {beg + 4 * (k + 1), g->d_y_begin, 4 * (size_t)(k + 1)},
                  {u, g->d_u, 4 * (size_t)g->n_u},
                  {v, g->d_v, 4 * (size_t)g->n_v},
                  {vs, g->d_v_slot, 2 * (size_t)g->n_v},
                  {w, g->d_w, 4 * (size_t)g->n_w},
                  {x, g->d_x, 4 * (size_t)g->n_x},
                  {y, g->d_y, 4 * (size_t)g->n_y}};
        for (size_t i = 0; i < sizeof cp / sizeof cp[0] && st == FMK_OK; i++) {
            const cudaError_t err =
                cudaMemcpy(cp[i].h, cp[i].d, cp[i].bytes, cudaMemcpyDeviceToHost);
            if (err != cudaSuccess)
                st = fmk_cuda_fail(plan, err, "cudaMemcpy (the lists)");
        }
    }
    if (st == FMK_OK) {
        const int32_t *ub = beg, *vb = beg + (k + 1), *wb = beg + 2 * (k + 1),
                      *xb = beg + 3 * (k + 1);
        const int32_t *yb = beg + 4 * (k + 1);
        int64_t nx = 0;
        for (int64_t b = 0; b <= k; b++) {
            l->u_begin[b] = ub[b], l->v_begin[b] = vb[b], l->w_begin[b] = wb[b], l->x_begin[b] = nx;
            if (b == k)
                break;
            l->center[3 * b] = cube[b].x, l->center[3 * b + 1] = cube[b].y,
                          l->center[3 * b + 2] = cube[b].z;
            l->side[b] = cube[b].w;
            for (int32_t e = xb[b]; e < xb[b + 1]; e++)
                l->x[nx++] = x[e];
            for (int32_t e = yb[b]; e < yb[b + 1]; e++)
                l->x[nx++] = y[e];
        }
        memcpy(l->u, u, 4 * (size_t)g->n_u), memcpy(l->v, v, 4 * (size_t)g->n_v);
        memcpy(l->w, w, 4 * (size_t)g->n_w);
        for (int64_t e = 0; e < g->n_v; e++) {
            l->v_dir[e] = (int16_t)g->dir_of_slot[vs[e]];
            l->dir_used[l->v_dir[e]] = 1;
        }
        l->n_u = g->n_u, l->n_v = g->n_v, l->n_w = g->n_w, l->n_x = nx;
    }
    free(cube), free(beg), free(u), free(v), free(w), free(x), free(y), free(vs);
    if (st != FMK_OK)
        fmk_fmm3d_lists_free(l);
    fmk_cuda_leave(s->device, prev);
    return st;
}
