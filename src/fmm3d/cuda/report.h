/*
 * report.h -- what the tests and the benchmark read of a GPU 3D FMM plan (method fmm, backend
 * cuda; report.cu, m2l_gemm.cu): not API, C-callable. Each returns FMK_ERR_STATE for a plan of
 * another engine or without points. The plan's knobs are set and read through core/tune.h
 * ("fmm3d.*").
 */
#ifndef FMMKIT_CUDA_FMM3D_REPORT_H
#define FMMKIT_CUDA_FMM3D_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "core/internal.h"
#include "fmm3d/fmm3d.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The M2L work of a plan's lists: V pairs, the box-direction products the GEMMs compute in
 * whole (Sp x Sp) products' worth of flops (fewer with the far directions truncated), and the
 * M2L's (packed) doubles per expansion, Sp. */
fmk_status fmk_cuda_fmm3d_m2l_work(const fmk_plan *plan, int64_t *pairs, int64_t *tile_pairs,
                                   int *stride);

/* The M2L of a plan's last set_points: its GEMM columns (boxes from level 2 down), GEMMs, and
 * whether the operators are whole (1: the size rule, or no truncation) or truncated (0). */
fmk_status fmk_cuda_fmm3d_m2l_shape(const fmk_plan *plan, int64_t *boxes, int *gemms, int *whole);

/* The P2P of leaf pairs of a plan's last set_points, counted on the host: st[0] pairs, [1]
 * leaves with targets, [2] the largest leaf, [3] leaves of more points than a full pass holds,
 * [4] the pass slots the kernel runs times the partner's points, [5] the pairs' interactions,
 * [6] the most pairs one leaf holds, [7] the points a full pass holds. */
fmk_status fmk_cuda_fmm3d_p2p_stats(const fmk_plan *plan, int64_t st[8]);

/* The leaves of a plan's last set_points that are not on the deepest level or hold fewer than
 * 32 points, each on a line to f, then the lists' totals. */
fmk_status fmk_cuda_fmm3d_leaf_report(const fmk_plan *plan, FILE *f);

/* At order p with truncation factor trunc and at most classes degree classes, the dense M2L's
 * degrees of the 189 directions one octant's sources reach: count[q] truncated, count_cls[q] in
 * classes (p + 1 entries each), and their GEMM flops over the whole operators' (flops[0]:
 * truncated, flops[1]: classes). FMK_ERR_ARG for p out of range. */
fmk_status fmk_cuda_fmm3d_m2l_degrees(int p, double trunc, int classes, int *count, int *count_cls,
                                      double flops[2]);

/* set_points' parts in seconds: start, tree, lists, operators, buffers; the list build's six
 * stages; the GPU time of the M2L matrices' kernel when this set_points built them (else 0). */
fmk_status fmk_cuda_fmm3d_setup_times(const fmk_plan *plan, double t[12]);

/* The lists the plan built on the GPU, in the host's form (fmm3d.h). Free with
 * fmk_fmm3d_lists_free. */
fmk_status fmk_cuda_fmm3d_lists(fmk_plan *plan, fmk_fmm3d_lists *l);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_CUDA_FMM3D_REPORT_H */
