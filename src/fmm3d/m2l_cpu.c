/* m2l_cpu.c -- the CPU 3D FMM's M2L (V list, by blocks of nodes and directions through
 * fmk_fmm3d_m2l_block) and P2L (X list), and the M2L schedule that set_points prepares. */
#include <math.h>

#include "fmm3d/fmm3d_cpu.h"

/* The M2L schedule: per block of m2l_nodes consecutive nodes, its V entries (contiguous in
 * the lists) sorted by direction, each with its target; and the coaxial matrices. */
void fmk_fmm3d_cpu_m2l_schedule(fmk_fmm3d_cpu *s, int threads)
{
    const fmk_fmm3d_lists *l = &s->lists;
    const int64_t k = l->n_nodes, n_blocks = (k + s->m2l_nodes - 1) / s->m2l_nodes;
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
    for (int64_t blk = 0; blk < n_blocks; blk++) {
        const int64_t b0 = blk * s->m2l_nodes, b1 = b0 + s->m2l_nodes < k ? b0 + s->m2l_nodes : k;
        const int64_t e0 = l->v_begin[b0];
        int64_t count[FMK_FMM3D_NDIR + 1] = {0};
        for (int64_t e = e0; e < l->v_begin[b1]; e++)
            count[l->v_dir[e] + 1]++;
        for (int d = 0; d < FMK_FMM3D_NDIR; d++)
            count[d + 1] += count[d];
        for (int64_t b = b0; b < b1; b++)
            for (int64_t e = l->v_begin[b]; e < l->v_begin[b + 1]; e++) {
                const int64_t at = e0 + count[l->v_dir[e]]++;
                s->v_perm[at] = e;
                s->v_target[at] = (int32_t)b;
            }
    }
    const int64_t zs = fmk_fmm3d_m2l_zmat_size(&s->ops);
    for (int q = 0; q < 28; q++)
        if (s->z_slot[q] >= 0)
            fmk_fmm3d_m2l_zmat(&s->ops, sqrt((double)q), s->zmat + zs * s->z_slot[q]);
}

/* M2L into every box with targets, then P2L. */
void fmk_fmm3d_cpu_m2l(const fmk_plan *plan, fmk_fmm3d_cpu *s)
{
    const fmk_tree3d *t = &s->tree;
    const fmk_fmm3d_lists *l = &s->lists;
    const fmk_fmm3d_ops_ctx *ops = &s->ops;
    const int64_t k = t->n_nodes, st = s->stride;
    const int th = plan->threads;
    const int64_t rs = fmk_fmm3d_rot_size(ops);
    /* M2L from the V list, a direction's entries of a block of nodes at a time (each target
     * occurs once per direction, so a block's columns go to distinct boxes), then P2L from the
     * X list */
    const int64_t n_blocks = (k + s->m2l_nodes - 1) / s->m2l_nodes, zs = fmk_fmm3d_m2l_zmat_size(ops);
    const int64_t nc2 = 2 * ops->n_coef;
#pragma omp parallel for schedule(dynamic, 1) num_threads(th)
    for (int64_t blk = 0; blk < n_blocks; blk++) {
        if (fmk_interrupt_team(plan)) /* the caller asked to stop: skip the remaining blocks */
            continue;
        enum { LD = FMK_FMM3D_BLOCK };
        double *X = s->m2l_buf + fmk_fmm3d_cpu_m2l_buf_size(s->order) * fmk_thread_num();
        double *Y = X + LD * nc2, *T = Y + LD * nc2;
        const int64_t b0 = blk * s->m2l_nodes, b1 = b0 + s->m2l_nodes < k ? b0 + s->m2l_nodes : k;
        const int64_t e1 = l->v_begin[b1];
        for (int64_t e = l->v_begin[b0]; e < e1;) {
            const int dir = l->v_dir[s->v_perm[e]];
            int64_t r = e;
            while (r < e1 && l->v_dir[s->v_perm[r]] == dir)
                r++;
            const int ox = dir / 49 - 3, oy = (dir / 7) % 7 - 3, oz = dir % 7 - 3;
            const double *phase = s->phase_v + 2 * (s->order + 1) * dir;
            const double *wigner = s->rot_v + rs * s->rot_slot[dir] + 2 * (s->order + 1);
            const double *Z = s->zmat + zs * s->z_slot[ox * ox + oy * oy + oz * oz];
            /* the run [e, r) of entries, each with nv vectors: columns (entry, vector), in
             * chunks of nearly equal width <= LD */
            const int nv = s->nv;
            const int64_t n_run = (r - e) * nv, n_chunks = (n_run + LD - 1) / LD;
            for (int64_t ch = 0; ch < n_chunks; ch++) {
                const int64_t c0 = n_run * ch / n_chunks, c1 = n_run * (ch + 1) / n_chunks;
                const int w = (int)(c1 - c0), w8 = (w + 7) & ~7;
                for (int c = 0; c < w; c++) {
                    const int64_t col = c0 + c, ent = e + col / nv;
                    const double *Mc = s->M + st * (nv * (int64_t)l->v[s->v_perm[ent]] + col % nv);
                    for (int64_t i = 0; i < nc2; i++)
                        X[i * LD + c] = Mc[i];
                }
                for (int64_t i = 0; i < nc2; i++)
                    for (int c = w; c < w8; c++)
                        X[i * LD + c] = 0;
                fmk_fmm3d_m2l_block(ops, phase, wigner, Z, w, X, Y, T);
                for (int c = 0; c < w; c++) {
                    const int64_t col = c0 + c, ent = e + col / nv;
                    const int32_t b = s->v_target[ent];
                    const double inv_s = 1 / l->side[b];
                    double *Lb = s->L + st * (nv * (int64_t)b + col % nv);
                    for (int64_t i = 0; i < nc2; i++)
                        Lb[i] += Y[i * LD + c] * inv_s;
                }
            }
            e = r;
        }
        double *work = fmk_fmm3d_cpu_work(s);
        for (int64_t b = b0; b < b1; b++)
            for (int64_t e = l->x_begin[b]; e < l->x_begin[b + 1] && !s->x_direct[b]; e++) {
                int64_t j0, nj; /* unique sources */
                fmk_fmm3d_cpu_src_range(s, l->x[e], &j0, &nj);
                fmk_fmm3d_p2l_many(ops, l->center + 3 * b, l->side[b], nj, s->src_xyz + 3 * j0,
                                   s->nv, s->qv + j0, s->n_unique, s->L + st * s->nv * b, st,
                                   work);
            }
    }
}
