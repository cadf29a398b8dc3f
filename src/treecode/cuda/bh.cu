/*
 * bh.cu -- the GPU treecode engine (fmk_engine_tree_cuda): Barnes-Hut on the octree of
 * tree3d.h, built on the GPU (tree3d.cu), moments per evaluation, and two walks.
 *
 * Device layout. Sources sorted in Morton order as 4-vectors (x, y, z, q) of the working
 * precision, mapped coordinates in [1, 2] (internal.h). Per node: int4 {more, next, begin, end}
 * and four 4-vectors (xc, r_open^2), (M, D), (Sxx, Sxy, Sxz, Syy), (Syz, Szz, A, 0) with A the
 * node's sum of |q| (tree3d.h: moments about the centre of |q|). Targets that are not the
 * sources are sorted the same way (their own tree, leaf size = the group size) and results
 * are written back to the caller's order.
 *
 * Moments (per evaluation): leaves from their points, then level by level upwards with the
 * shift formulas of tree3d.h; accumulated in double, stored in the working precision.
 *
 * Walks:
 *   group (FMK_WALK_GROUP, the default): one warp per group of up to 32 nearby sorted targets
 *     (one per lane, or 64 with two per lane), tested as a whole: a node is accepted when the
 *     group box's nearest point is farther than r_open from xc, which implies the test for
 *     every target in it. The default kernel walks breadth-first (Bonsai style, k_walk_bfs):
 *     32 nodes tested per step, one lane each, accepted nodes and leaf sources gathered in
 *     shared memory and evaluated 32 at a time. The kernel it replaced, the warp-synchronous
 *     next/more walk of one node per step (k_walk_group), stays behind the tuning knob
 *     fmk_cuda_bh_group_walk = 1; both make the same interactions. Groups (tree_internal.h):
 *     from 2^19 targets the points of sibling nodes cut into full groups of 32 (fuller warps),
 *     below one group per node (smaller boxes: the longest warp sets the time there).
 *     Cell-to-group step (fmk_cuda_bh_local, breadth-first walk with groups of 32): an
 *     accepted node far from the whole group (|xc - c| > a r_open + k R_g, c and R_g the group
 *     box's centre and half diagonal) is translated once per group into a Taylor expansion
 *     about c (M2L of bh_local.h, one node per lane, the lanes' expansions added by a
 *     reduce-scatter), which each target evaluates once at the end (L2P); the other accepted
 *     nodes are evaluated at each target (M2P) as before.
 *   stackless (FMK_WALK_STACKLESS): one thread per sorted target, the paper's walk verbatim
 *     (Nakasato Fig. 6: accept -> next, open -> more; no stack), the opening test against the
 *     target itself (fewer interactions, divergent warps).
 * An accepted node with very few points is summed directly (P2P is exact and no dearer).
 */
#include <math.h>
#ifdef FMK_BH_COUNT
#include <stdio.h>
#endif
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda/atomic>
#include <cuda/functional>
#include <cuda_pipeline.h>

#include "tree/cuda/tree3d_cuda.h"
#include "treecode/treecode.h"

extern "C" const fmk_engine fmk_engine_tree_cuda; /* defined at the end of this file */

#ifndef FMK_TREE_THETA_CAP /* tree3d.h's cap of theta in the opening radius */
#define FMK_TREE_THETA_CAP 1.15
#endif

#define REAL float
#define RSQRT rsqrtf
#define BH(name) name##_f
#include "treecode/bh_terms.h"
#include "treecode/bh_local.h"
#undef REAL
#undef RSQRT
#undef BH
#define REAL double
#define RSQRT rsqrt
#define BH(name) name##_d
#include "treecode/bh_terms.h"
#include "treecode/bh_local.h"
#undef REAL
#undef RSQRT
#undef BH

/* Tuning knob for the benchmark (not API): targets per group walk, 32 or 64. */
extern "C" int fmk_cuda_bh_group_size;
int fmk_cuda_bh_group_size = 32;
/* Tuning knob for the benchmark and the tests (not API): the group walk's kernel, 0 the
 * breadth-first walk (default), 1 the warp-synchronous next/more walk it replaced. */
extern "C" int fmk_cuda_bh_group_walk;
int fmk_cuda_bh_group_walk = 0;
/* Tuning knob for the benchmark and the tests (not API): 1 packs sibling groups of the
 * targets' tree into fuller groups, 2 cuts the siblings' points into full groups across their
 * bounds, 0 one group per node (tree_internal.h). */
extern "C" int fmk_cuda_bh_group_merge;
int fmk_cuda_bh_group_merge = 2;
/* Tuning knob for the benchmark and the tests (not API): fewer targets than this get one group
 * per node (merged groups have larger boxes; when the warps do not fill the GPU the walk's time
 * is that of its longest warp). */
extern "C" long long fmk_cuda_bh_group_merge_min;
long long fmk_cuda_bh_group_merge_min = 1ll << 19;

/* Tuning knob for the benchmark and the tests (not API): trees of at most this many nodes get
 * their moments in two launches (k_moments_leaves, k_moments_inner), larger ones one launch per
 * level. */
extern "C" long long fmk_cuda_bh_moments_small_max;
long long fmk_cuda_bh_moments_small_max = 8192;
/* Tuning knob for the benchmark and the tests (not API): such trees, when k_prep_small does not
 * take them, get their charges packed and every moment in one launch (k_moments_small: 1), or
 * in three (k_pack_charges, k_moments_leaves, k_moments_inner: 0). */
extern "C" int fmk_cuda_bh_moments_fused;
int fmk_cuda_bh_moments_fused = 1;
/* Tuning knob for the benchmark and the tests (not API): larger trees of at most
 * fmk_cuda_bh_moments_up_max nodes get their charges packed and every moment in one launch
 * (k_moments_up, arrival counters: 1), or in one launch per level after the packing (0; and
 * trees of more nodes: at 2^24 points, 0.6..1.4 M nodes, the one launch measured 0.24..0.32 ms
 * slower, bench/RESULTS.md). */
extern "C" int fmk_cuda_bh_moments_up;
int fmk_cuda_bh_moments_up = 1;
extern "C" long long fmk_cuda_bh_moments_up_max;
long long fmk_cuda_bh_moments_up_max = 1ll << 18;
/* Tuning knob (not API): k_moments_up's arrivals as acquire-release atomics (1), or as
 * __threadfence, atomicAdd, __threadfence (0). */
extern "C" int fmk_cuda_bh_moments_acq;
int fmk_cuda_bh_moments_acq = 1;
/* Tuning knob for the benchmark and the tests (not API): the breadth-first walk is split in
 * parts (walk_args) until it has about this many warps per SM (0: never split). */
extern "C" int fmk_cuda_bh_split_warps;
int fmk_cuda_bh_split_warps = 24;
/* Tuning knobs (not API): nodes per part at the split level, and its deepest level. */
extern "C" int fmk_cuda_bh_split_nodes;
int fmk_cuda_bh_split_nodes = 8;
extern "C" int fmk_cuda_bh_split_level_max;
int fmk_cuda_bh_split_level_max = 5;
/* Tuning knob (not API): of the levels that allow the most parts, the split takes the
 * shallowest (0: the least walk repeated by every part above it) or the deepest (1: finer
 * pieces of a dense core). */
extern "C" int fmk_cuda_bh_split_deepest;
int fmk_cuda_bh_split_deepest = 0;
/* Tuning knob for the benchmark and the tests (not API): the group walks' acceptance test.
 * 0: a node is accepted when the group's box is outside its opening sphere (every target is
 * then farther than the radius, with a margin for most). 1: a node of more than p2p_cut points
 * that the box test opens is accepted too when every target of the group is outside the
 * sphere on its own (the stackless walk's test, made by all of them: fewer interactions, each
 * target's list as in the stackless walk or finer). 2: as 1 for leaves only. */
extern "C" int fmk_cuda_bh_mac;
/* -1 (default): 1 for trees of at least fmk_cuda_bh_auto_min sources, 2 below. With inner
 * nodes too and local_k 1.65 the 2^20 Plummer walk is 12% faster than with leaves only and
 * local_k 2.25, within the accuracy rule of docs/tree.md from 30,000 points up; at 3000 and
 * 4000 points that pair broke the rule and test_tree_gpu's bound of the cell-to-group step
 * (bench/RESULTS.md), so smaller trees keep leaves only and 2.25. */
int fmk_cuda_bh_mac = -1;
/* Tuning knob (not API): with fmk_cuda_bh_mac, the per-target test of a leaf uses the opening
 * radius of this theta, f (l / theta + s) with f = theta / leaf_theta (0: theta itself, f = 1).
 * f is kept above sqrt(3) / (1 / theta + sqrt(3) / 2) (with 1% to spare), so that a target
 * inside the leaf's cell (at most sqrt(3)/2 l + s from its centre, s <= sqrt(3)/2 l) never
 * accepts it. */
extern "C" double fmk_cuda_bh_leaf_theta;
double fmk_cuda_bh_leaf_theta = 0;
/* Tuning knob (not API): with fmk_cuda_bh_mac = 1, an inner node's per-target test uses its
 * opening radius times this factor (>= 1: stricter than the stackless walk's test). */
extern "C" double fmk_cuda_bh_mac_inner;
double fmk_cuda_bh_mac_inner = 1;
/* Tuning knob for the benchmark and the tests (not API): the breadth-first walk's cell-to-group
 * step. A node the group accepts whose centre is farther from the group box's centre c than
 * a r_open + k R_g, k = fmk_cuda_bh_local_k 0.6 / theta (at least 1; R_g the box's half
 * diagonal), is not evaluated at each target (M2P) but translated once per group into a Taylor
 * expansion of order fmk_cuda_bh_local (2, 3 or 4) about c (M2L, bh_local.h), which each target
 * evaluates at the end (L2P). 0: off (every accepted node by M2P, as the next/more walk).
 * Order 4 (35 coefficients, the same A_k as order 3) truncates the monopole's field one power
 * of |y - c| / |xc - c| later, so a smaller a and k keep the error: a = 0.5, k = 2.25 with
 * order 4 against a = 0.75, k = 3.5 with order 3 (the default until then): 2^20 walk -10%
 * cube, -5% Plummer, acceleration error +0.3%, -2%; test_tree_gpu's Plummer sphere +3%
 * (bench/RESULTS.md). */
extern "C" int fmk_cuda_bh_local;
int fmk_cuda_bh_local = 4;
extern "C" double fmk_cuda_bh_local_k;
double fmk_cuda_bh_local_k = -1; /* negative: 1.65 from fmk_cuda_bh_auto_min sources, 2.25 below */
/* Tuning knob (not API): the source count from which the defaults of fmk_cuda_bh_mac and
 * fmk_cuda_bh_local_k are 1 and 1.65 (below: 2 and 2.25). */
extern "C" long long fmk_cuda_bh_auto_min;
long long fmk_cuda_bh_auto_min = 32768;
/* Tuning knob (not API): the weight a of r_open in the step's distance test, |xc - c| >
 * a r_open + k R_g (a >= 0). Any a keeps |y - c| / |xc - c| < 1 / k; the node is accepted by
 * the walk's own test in any case, so every target is outside its opening sphere. The term
 * keeps out nodes accepted close to their opening radius, whose quadrupole's dropped terms
 * ((s / |r0|)^2 (|y - c| / |r0|)^3, bh_local.py) are the largest. */
extern "C" double fmk_cuda_bh_local_open;
double fmk_cuda_bh_local_open = 0.5;
/* Tuning knob (not API): with the step of order 4 and eps2 = 0 (laplace, no softening), the
 * expansion is a harmonic polynomial: the M2L computes only its 25 coefficients with bz <= 1
 * (and the A_k with kz >= 2 from Laplace's equation, not the recurrence), and the other 10 are
 * found once per group before L2P (bh_local.h's m2l4_harm, local4_from_harm; the same sums to
 * rounding). 25 coefficients fit the 32 lanes (no butterflies for 3 more) and the kernel
 * spills 48 / 52 B (16 / 24 without FMK_BH_DEFER) instead of 124 / 140: 2^20 walk -6% (cube),
 * -11% (Plummer) (bench/RESULTS.md). 0: the full M2L (the softened kernel's, always). */
extern "C" int fmk_cuda_bh_local_harmonic;
int fmk_cuda_bh_local_harmonic = 1;
/* Tuning knobs for the benchmark and the tests (not API): super-groups, the breadth-first
 * walk's far field found once for fmk_cuda_bh_super consecutive groups (in Morton order; 0 or
 * 1: off, at most 32). A first walk (k_walk_super, one warp per super-group) tests the nodes
 * against the super-group's box (the union of its groups' boxes) with the group walk's tests:
 * a node that passes them far from the whole super-group goes into the super-group's
 * expansion (M2L of order 4 about its centre, added at each target by L2P), a node that every
 * group box opens is opened, and every other node goes to the super-group's start list, from
 * which each group walks instead of the root. The super box contains the group's, so whatever
 * the first walk accepts, the group walk would accept too. Only with the cell-to-group step of
 * order 4 (fmk_cuda_bh_local = 4), groups of 32, an unsplit walk and at least
 * fmk_cuda_bh_super_min targets and a deep tree (fmk_cuda_bh_super_depth). fmk_cuda_bh_super_cap: start-list entries per super-group
 * (at most 640, 4 bytes each); a super-group whose list does not fit walks its groups from the
 * root as without super-groups (correct, slower). fmk_cuda_bh_super_open = 1 opens every node
 * the super box opens (finer start lists), 0 only those that every group box opens. */
extern "C" int fmk_cuda_bh_super;
int fmk_cuda_bh_super = 2;
extern "C" int fmk_cuda_bh_super_cap;
int fmk_cuda_bh_super_cap = 640;
/* Tuning knob (not API): a second level of super-groups, fmk_cuda_bh_super2 consecutive
 * super-groups (0 or 1: off; used when S * S2 <= 32). k_walk_super runs first for these
 * parents from the root, then for each super-group from its parent's start list (the parent's
 * box, the union of its groups' boxes, contains the child's; the parent's rule checks all its
 * groups, so whatever it takes the child and each group would take); the group walks add the
 * parent's expansion at their targets too (when the parent's list did not overflow: then the
 * child walked from the root). A parent whose list overflows leaves its children as with one
 * level; a child whose list overflows leaves its groups walking from the root without either
 * expansion. fmk_cuda_bh_super2_cap: the parents' start-list entries (at most 640).
 * Measured (H100, 2^24 Plummer, one sweep, k' 1.3): total 51.3 ms with one level, 49.6
 * with S2 = 4, 49.3 with 8; then S = 4 + S2 = 4, k' 1.2 was the default (49.2 in both runs
 * alternated with one level at k' 1.3: 51.1; bench/RESULTS.md). With the walk's later
 * defaults (mac 1, k 1.65 from 32,768 sources), S = 2 + S2 = 8 (16 groups a parent, as 4 + 4)
 * at k' 1.2: 2^20 Plummer walk 2.42 ms against 2.46..2.47, acceleration error 4.21e-4 against
 * 4.41e-4; 2^24 Plummer 39.14 ms against 39.55 (3.47e-4, 3.49e-4); 153 device bytes a point
 * against 129 (the super-groups' start lists, twice as many). */
extern "C" int fmk_cuda_bh_super2;
int fmk_cuda_bh_super2 = 8;
extern "C" int fmk_cuda_bh_super2_cap;
int fmk_cuda_bh_super2_cap = 640;
extern "C" int fmk_cuda_bh_super_open;
int fmk_cuda_bh_super_open = 0;
extern "C" long long fmk_cuda_bh_super_min;
long long fmk_cuda_bh_super_min = 1ll << 18;
/* Tuning knob (not API): the breadth-first group walk's warps take their groups by tickets
 * (1, walk_args.ticket) from a grid that the GPU holds at once, or one group per one-warp
 * block (0). With one-warp blocks an SM whose warps' registers fill its four schedulers (96
 * registers, 5 warps each: the walk with super-groups) refilled a finished warp's slot only
 * once several had finished: 18.2 of its 20 warps were active on average (2^20 Plummer
 * sphere; the cube's walk at 80 registers, 19.7). K > 1: tickets, and a grid of at most K
 * blocks (the tests: warps that walk many groups each). */
extern "C" int fmk_cuda_bh_tickets;
int fmk_cuda_bh_tickets = 1;
/* Tuning knob (not API): the super-group's step takes nodes farther than a r_open + k' R_B
 * from its centre, k' = fmk_cuda_bh_super_k times the group's k (>= 1). Its expansion about
 * the super box's centre is evaluated up to R_B away, so at k' = k its truncation reaches
 * that of the group's step for more of its nodes: 2^20 Plummer acceleration error +4.9%
 * (S = 4), +0.9% at 1.3 for 2% more walk (bench/RESULTS.md). With a second level (whose
 * parents use the same k'): 1.2 (acceleration error +1.8% at 2^20 Plummer against one
 * level at 1.3, +2% at 2^24; 1.15: +4%). */
extern "C" double fmk_cuda_bh_super_k;
double fmk_cuda_bh_super_k = 1.2;
/* Tuning knob (not API): super-groups only for a sources' tree of at least log8(n / leaf_size)
 * + fmk_cuda_bh_super_depth levels (a uniform tree of n points has ~2 more than the log): a
 * concentrated distribution, whose groups walk far more steps. Measured with them on
 * everywhere (bench/RESULTS.md): 2^20 walk +6% (cube), -13% (Plummer); 2^24 -2%, -20%. Tree
 * levels (leaves of 48): cube 6, 7, 8 and Plummer sphere 10, 11, 12 at 2^18, 2^20, 2^24 (log
 * 4.1, 4.8, 6.1). A large negative value: whatever the depth. */
extern "C" double fmk_cuda_bh_super_depth;
double fmk_cuda_bh_super_depth = 4;
/* Tuning knobs for the benchmark and the tests (not API), the fixed cost of small N:
 * - fmk_cuda_bh_frame_small_max: set_points_device of at most this many points (sources and
 *   targets) finds the bounding box, the frame and the mapped points in one block
 *   (k_frame_small) and does not wait for the box (the host checks the frame after the
 *   build's one wait); larger sets, or 0, take fmk_cuda_bh_frame_grid's path.
 * - fmk_cuda_bh_async: trees of at most fmk_cuda_tree_small_max points are built without a
 *   host wait (fmk_cuda_tree3d_build_async), so set_points waits once (0: the build waits for
 *   its level table, then the packing and the groups follow).
 * - fmk_cuda_bh_prep_small_max: evaluations of at most this many sources, in trees of at most
 *   fmk_cuda_bh_moments_small_max nodes, check and pack the charges and compute every moment
 *   in one block (k_prep_small: one launch instead of two copies, three kernels and the
 *   moments' two). */
extern "C" long long fmk_cuda_bh_frame_small_max;
long long fmk_cuda_bh_frame_small_max = 1ll << 15;
/* Tuning knob (not API): the blocks of k_frame_small, a thread-block cluster (1 .. 8). */
extern "C" int fmk_cuda_bh_frame_cluster;
int fmk_cuda_bh_frame_cluster = 8;
/* Tuning knob (not API): larger sets than fmk_cuda_bh_frame_small_max find their box and
 * frame by a grid of blocks (k_frame_grid) and are mapped and built without waiting for them,
 * the host checking the frame after the build's wait as for small sets (0: CUB's reduction of
 * the box, a wait, the mapping with the host's frame). */
extern "C" int fmk_cuda_bh_frame_grid;
int fmk_cuda_bh_frame_grid = 1;
extern "C" int fmk_cuda_bh_async;
int fmk_cuda_bh_async = 1;
extern "C" long long fmk_cuda_bh_prep_small_max;
long long fmk_cuda_bh_prep_small_max = 4096;
/* Tuning knobs (not API): the group boxes of a tree built without a wait are computed in the
 * packing launch of the points they bound (1: one launch less; 0: k_group_boxes after it);
 * evaluations of at most fmk_cuda_bh_charge_block_max sources (and more than
 * fmk_cuda_bh_prep_small_max) check their charges in one block that writes the check's words
 * itself (no memset before it; 0: a grid of blocks after a memset). */
extern "C" int fmk_cuda_bh_pack_boxes;
int fmk_cuda_bh_pack_boxes = 1;
extern "C" long long fmk_cuda_bh_charge_block_max;
long long fmk_cuda_bh_charge_block_max = 1ll << 15;
/* For the tests: set_points_device calls whose one-block frame was not the host's (a softening
 * wider than the points), and builds without a wait done again (the tree did not fit). */
extern "C" long long fmk_cuda_bh_frame_redos, fmk_cuda_bh_build_redos;
long long fmk_cuda_bh_frame_redos = 0, fmk_cuda_bh_build_redos = 0;
/* For the tests: split walks redone unsplit (their stack overflowed above the split level). */
extern "C" long long fmk_cuda_bh_split_redos;
long long fmk_cuda_bh_split_redos = 0;

#ifdef FMK_BH_COUNT
/* Walk statistics (a build with -DFMK_BH_COUNT only): per breadth-first walk, the sums over
 * warps of targets, M2P entries x targets, P2P entries x targets, steps, stack overflows and
 * warps, and the deepest stack; and clock64 cycles per warp in the M2P, P2P, M2L and L2P
 * parts, in all, and the longest warp's; the points of the leaves that the per-target test
 * leaves opened, by how many targets open them (24..30); printed to stderr after each walk. */
__device__ unsigned long long fmk_bh_counts[32];
/* Super-groups' walk: super-groups, start-list entries, nodes into their expansions, steps,
 * overflows (start lists that did not fit), the longest list. */
__device__ unsigned long long fmk_bh_super_counts[12]; /* 6..11: a second level's parents */
#endif
#ifdef FMK_BH_TRACE
/* Warp timelines (a build with -DFMK_BH_TRACE only): each walk warp's start and end
 * (%globaltimer, ns), its SM and its walk (0 groups, 1 super-groups, 2 their parents),
 * appended after each evaluation to the file named by the environment variable FMK_BH_TRACE
 * (records of 32 bytes; an evaluation ends with a record of walk 99). */
struct bh_trace_rec {
    unsigned long long t0, t1;
    unsigned sm, kind;
    float aux; /* groups: the box's half diagonal; super-groups: start-list entries */
    unsigned id; /* the group or super-group */
};
constexpr int BH_TRACE_MAX = 1 << 18;
__device__ bh_trace_rec fmk_bh_trace[BH_TRACE_MAX];
__device__ unsigned fmk_bh_trace_n;
__device__ __forceinline__ unsigned long long trace_clock()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void trace_put(unsigned long long t0, unsigned kind, float aux,
                                          unsigned id)
{
    if ((threadIdx.x & 31) != 0)
        return;
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const unsigned k = atomicAdd(&fmk_bh_trace_n, 1u);
    if (k < BH_TRACE_MAX)
        fmk_bh_trace[k] = {t0, trace_clock(), sm, kind, aux, id};
}
#endif

namespace {


__device__ __forceinline__ void m2p(int order, float rx, float ry, float rz, float eps2,
                                    const float *m, float *phi, float *g)
{
    m2p_f(order, rx, ry, rz, eps2, m, phi, g);
}
__device__ __forceinline__ void m2p(int order, double rx, double ry, double rz, double eps2,
                                    const double *m, double *phi, double *g)
{
    m2p_d(order, rx, ry, rz, eps2, m, phi, g);
}
__device__ __forceinline__ void p2p(float dx, float dy, float dz, float q, float eps2, float *phi,
                                    float *g)
{
    p2p_f(dx, dy, dz, q, eps2, phi, g);
}
__device__ __forceinline__ void p2p(double dx, double dy, double dz, double q, double eps2,
                                    double *phi, double *g)
{
    p2p_d(dx, dy, dz, q, eps2, phi, g);
}

__device__ __forceinline__ float rsqrt_(float t) { return rsqrtf(t); }
__device__ __forceinline__ double rsqrt_(double t) { return rsqrt(t); }

constexpr int BLOCK = 256;
constexpr int WALK_BLOCK = 128;
inline unsigned blocks_for(int64_t n, int b = BLOCK) { return (unsigned)((n + b - 1) / b); }

/* fp32 works on mapped coordinates times 2^12 (exact): the quadrupole term's t^-7/2 reaches
 * (2^21 / theta)^7 for the deepest nodes of the frame, beyond float's range; scaled, the
 * powers of t stay within 2^-100 .. 2^70 for every distance the frame allows. */
static inline double coord_scale(int real) { return real == 4 ? 4096.0 : 1.0; }

/* Accepted nodes of at most this many points are summed directly. */
template <int ORDER> struct p2p_cut {
    static constexpr int value = ORDER == 2 ? 3 : ORDER == 1 ? 2 : 1;
};

/* ---------------------------------------------------------------------------------------- */
/* Packing                                                                                  */

/* Caller points -> mapped doubles: x' = 1.5 + (x - center) * inv, as plan.c maps host points
 * (inv is a power of two, so the product is exact and the two agree bit for bit). */
__device__ __forceinline__ double map_coord(double x, double c, double inv)
{
    return __dadd_rn(1.5, __dmul_rn(__dadd_rn(x, -c), inv));
}

__global__ void k_map(int64_t n, const double *__restrict__ x, double cx, double cy, double cz,
                      double inv, double *__restrict__ out)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    out[3 * i] = map_coord(x[3 * i], cx, inv);
    out[3 * i + 1] = map_coord(x[3 * i + 1], cy, inv);
    out[3 * i + 2] = map_coord(x[3 * i + 2], cz, inv);
}

/* What k_frame_small found (pinned host memory, read after set_points' one wait): the box of
 * the finite points, the first non-finite point (-1: none; ns + j for target j), and the
 * frame it mapped the points with. */
typedef struct frame_out {
    double lo[3], hi[3], center[3], width;
    long long bad;
} frame_out;

/* Bounding box, frame and mapping of a small set (ns sources, nt targets; at most a few tens
 * of thousands) in one launch, without the host: the box of the finite points as
 * fmk_cuda_bounding_box reduces it, the frame as fmk_plan_frame_from_box makes it from the
 * box but without the softening (width: the power of two at least the largest extent, 1 for
 * a single point), and the points mapped as k_map does. The host computes the frame from the
 * same box after its wait and redoes the mapping if the softening made it wider. With a
 * non-finite point the mapped values are meaningless (the tree is built from them all the same,
 * boundedly) and the host reports the point. The launch is a thread-block cluster of
 * fmk_cuda_bh_frame_cluster blocks (one block alone is latency-bound: ~20 us for 8192
 * points): each block reduces its share of the points, reads the others' boxes from their
 * shared memory (the union is the same in every block: min, max and the first bad index do
 * not depend on the order), and maps its share. */
constexpr int FRAME_BLOCK = 1024, FRAME_ILP = 4, FRAME_CLUSTER_MAX = 8;

/* A box of finite points and the first non-finite one, and their union (k_frame_small). */
struct frame_box {
    double lo[3], hi[3];
    long long bad;
};

struct frame_box_union {
    __device__ frame_box operator()(const frame_box &a, const frame_box &b) const
    {
        frame_box r;
        for (int k = 0; k < 3; k++)
            r.lo[k] = fmin(a.lo[k], b.lo[k]), r.hi[k] = fmax(a.hi[k], b.hi[k]);
        r.bad = a.bad < b.bad ? a.bad : b.bad;
        return r;
    }
};

/* Points i0 + u stride (u < FRAME_ILP) of the sources then the targets into p (zeros past
 * the last), all loads issued before any is used. */
__device__ __forceinline__ void frame_points(int64_t ns, const double *__restrict__ s, int64_t nt,
                                             const double *__restrict__ t, int64_t i0,
                                             int64_t stride, double (&p)[FRAME_ILP][3])
{
#pragma unroll
    for (int u = 0; u < FRAME_ILP; u++) {
        const int64_t i = i0 + u * stride;
        for (int k = 0; k < 3; k++)
            p[u][k] = 0.0;
        if (i < ns)
            p[u][0] = s[3 * i], p[u][1] = s[3 * i + 1], p[u][2] = s[3 * i + 2];
        else if (i < ns + nt)
            p[u][0] = t[3 * (i - ns)], p[u][1] = t[3 * (i - ns) + 1], p[u][2] = t[3 * (i - ns) + 2];
    }
}

/* The box of points first, first + stride, ... of the sources then the targets (the set's
 * points first + u stride, FRAME_ILP of them in flight per thread: few warps hide the loads). */
__device__ frame_box frame_share(int64_t ns, const double *__restrict__ s, int64_t nt,
                                 const double *__restrict__ t, int64_t first, int64_t stride)
{
    const int64_t n = ns + nt;
    frame_box b;
    for (int k = 0; k < 3; k++)
        b.lo[k] = INFINITY, b.hi[k] = -INFINITY;
    b.bad = LLONG_MAX;
    for (int64_t i0 = first; i0 < n; i0 += stride * FRAME_ILP) {
        double p[FRAME_ILP][3];
        frame_points(ns, s, nt, t, i0, stride, p);
#pragma unroll
        for (int u = 0; u < FRAME_ILP; u++) {
            const int64_t i = i0 + u * stride;
            if (i >= n)
                continue;
            if (isfinite(p[u][0]) && isfinite(p[u][1]) && isfinite(p[u][2])) {
                for (int k = 0; k < 3; k++)
                    b.lo[k] = fmin(b.lo[k], p[u][k]), b.hi[k] = fmax(b.hi[k], p[u][k]);
            } else {
                b.bad = b.bad < i ? b.bad : i;
            }
        }
    }
    return b;
}

/* The frame of the set's box b as fmk_plan_frame_from_box makes it without the softening:
 * f = (centre, 1 / width), width the power of two at least the largest extent (1 for a single
 * point or none); h (when not NULL): the box, the frame and the first non-finite point. */
__device__ void frame_of_box(const frame_box &b, double f[4], frame_out *h)
{
    double extent = 0;
    for (int k = 0; k < 3; k++) {
        double l = b.lo[k], u = b.hi[k];
        if (h)
            h->lo[k] = l, h->hi[k] = u;
        if (l > u) /* no finite point */
            l = u = 0;
        f[k] = 0.5 * l + 0.5 * u;
        if (h)
            h->center[k] = f[k];
        extent = fmax(extent, u - l);
    }
    const double size = extent > 0 ? extent : 1;
    int ex;
    const double m = frexp(size, &ex); /* size = m 2^ex, m in [0.5, 1) */
    const double width = ldexp(1.0, m == 0.5 ? ex - 1 : ex);
    f[3] = 1.0 / width;
    if (h)
        h->width = width, h->bad = b.bad == LLONG_MAX ? -1 : b.bad;
}

__global__ void __launch_bounds__(FRAME_BLOCK)
    k_frame_small(int64_t ns, const double *__restrict__ s, int64_t nt,
                  const double *__restrict__ t, double *__restrict__ out, frame_out *h)
{
    typedef cub::BlockReduce<frame_box, FRAME_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage temp;
    __shared__ frame_box s_box;
    __shared__ double s_frame[4];
#if __CUDA_ARCH__ >= 900
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const unsigned blocks = cluster.num_blocks(), rank = cluster.block_rank();
#define FRAME_SYNC() cluster.sync()
#define FRAME_BOX(r) (*cluster.map_shared_rank(&s_box, r))
#else /* no clusters: one block (frame_launch) */
    const unsigned blocks = 1, rank = 0;
#define FRAME_SYNC() __syncthreads()
#define FRAME_BOX(r) s_box
#endif
    const int64_t n = ns + nt, stride = (int64_t)blocks * FRAME_BLOCK;
    const int64_t first = (int64_t)rank * FRAME_BLOCK + threadIdx.x;
    frame_box b = frame_share(ns, s, nt, t, first, stride);
    b = reduce_t(temp).Reduce(b, frame_box_union());
    if (threadIdx.x == 0)
        s_box = b;
    FRAME_SYNC(); /* every block's box is in its shared memory */
    if (threadIdx.x == 0) {
        b = FRAME_BOX(0);
        for (unsigned r = 1; r < blocks; r++)
            b = frame_box_union()(b, FRAME_BOX(r));
        frame_of_box(b, s_frame, rank == 0 ? h : NULL);
    }
    FRAME_SYNC(); /* the boxes are read (a block's shared memory ends with it), the frame set */
#undef FRAME_SYNC
#undef FRAME_BOX
    const double cx = s_frame[0], cy = s_frame[1], cz = s_frame[2], inv = s_frame[3];
    for (int64_t i0 = first; i0 < n; i0 += stride * FRAME_ILP) {
        double p[FRAME_ILP][3];
        frame_points(ns, s, nt, t, i0, stride, p);
#pragma unroll
        for (int u = 0; u < FRAME_ILP; u++) {
            const int64_t i = i0 + u * stride;
            if (i < n) {
                out[3 * i] = map_coord(p[u][0], cx, inv);
                out[3 * i + 1] = map_coord(p[u][1], cy, inv);
                out[3 * i + 2] = map_coord(p[u][2], cz, inv);
            }
        }
    }
}

/* Launches k_frame_small as a cluster of fmk_cuda_bh_frame_cluster blocks (one block on GPUs
 * without clusters, before compute capability 9.0). */
cudaError_t frame_launch(int device, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t, double *d_x, frame_out *h)
{
    int blocks = fmk_cuda_bh_frame_cluster, major = 0;
    blocks = blocks < 1 ? 1 : blocks > FRAME_CLUSTER_MAX ? FRAME_CLUSTER_MAX : blocks;
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (err != cudaSuccess)
        return err;
    if (major < 9 || blocks == 1) {
        k_frame_small<<<1, FRAME_BLOCK>>>(ns, d_s, nt, d_t, d_x, h);
        return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)blocks;
    attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)blocks), cfg.blockDim = dim3(FRAME_BLOCK);
    cfg.attrs = attr, cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, k_frame_small, ns, d_s, nt, d_t, d_x, h);
}

/* The frame of larger sets without a host wait: k_frame_grid's blocks each reduce their share
 * of the points and store its box in part[block]; the last block to finish (by the counter,
 * which it sets back to 0) takes the union of the parts, makes the frame as k_frame_small
 * does, and writes it to ws->frame (centre, 1 / width) and to the pinned frame_out. The union
 * of boxes and the first bad index do not depend on the order, so the box is CUB's
 * reduction's (fmk_cuda_bounding_box) bit for bit. k_map_frame then maps the points with
 * ws->frame. */
constexpr int GRID_FRAME_BLOCK = 256, GRID_FRAME_MAX = 1024;

struct frame_grid_ws {
    frame_box part[GRID_FRAME_MAX];
    double frame[4];
    unsigned count;
};

__global__ void __launch_bounds__(GRID_FRAME_BLOCK)
    k_frame_grid(int64_t ns, const double *__restrict__ s, int64_t nt,
                 const double *__restrict__ t, frame_grid_ws *ws, frame_out *h)
{
    typedef cub::BlockReduce<frame_box, GRID_FRAME_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage temp;
    __shared__ bool last;
    const int64_t stride = (int64_t)gridDim.x * GRID_FRAME_BLOCK;
    frame_box b = frame_share(ns, s, nt, t, (int64_t)blockIdx.x * GRID_FRAME_BLOCK + threadIdx.x,
                              stride);
    b = reduce_t(temp).Reduce(b, frame_box_union());
    if (threadIdx.x == 0) {
        ws->part[blockIdx.x] = b;
        __threadfence(); /* the part before the count */
        last = atomicAdd(&ws->count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    frame_box u;
    for (int k = 0; k < 3; k++)
        u.lo[k] = INFINITY, u.hi[k] = -INFINITY;
    u.bad = LLONG_MAX;
    for (unsigned j = threadIdx.x; j < gridDim.x; j += GRID_FRAME_BLOCK) {
        const frame_box *q = &ws->part[j];
        frame_box v; /* from L2: the other blocks' stores */
        for (int k = 0; k < 3; k++)
            v.lo[k] = __ldcg(&q->lo[k]), v.hi[k] = __ldcg(&q->hi[k]);
        v.bad = __ldcg(&q->bad);
        u = frame_box_union()(u, v);
    }
    __syncthreads(); /* temp is reused */
    u = reduce_t(temp).Reduce(u, frame_box_union());
    if (threadIdx.x == 0) {
        double f[4];
        frame_of_box(u, f, h);
        for (int k = 0; k < 4; k++)
            ws->frame[k] = f[k];
        ws->count = 0;
    }
}

__global__ void k_map_frame(int64_t ns, const double *__restrict__ s, int64_t nt,
                            const double *__restrict__ t, const double *__restrict__ f,
                            double *__restrict__ out)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= ns + nt)
        return;
    const double *x = i < ns ? s + 3 * i : t + 3 * (i - ns);
    const double cx = __ldg(f), cy = __ldg(f + 1), cz = __ldg(f + 2), inv = __ldg(f + 3);
    out[3 * i] = map_coord(x[0], cx, inv);
    out[3 * i + 1] = map_coord(x[1], cy, inv);
    out[3 * i + 2] = map_coord(x[2], cz, inv);
}

/* Queues the frame of ns + nt points by k_frame_grid (its counter cleared first) and their
 * mapping. */
cudaError_t frame_grid_launch(int64_t ns, const double *d_s, int64_t nt, const double *d_t,
                              double *d_x, frame_grid_ws *ws, frame_out *h)
{
    const int64_t n = ns + nt, per = (int64_t)GRID_FRAME_BLOCK * FRAME_ILP;
    const int64_t want = (n + per - 1) / per;
    const unsigned blocks = (unsigned)(want < GRID_FRAME_MAX ? (want > 0 ? want : 1) : GRID_FRAME_MAX);
    cudaError_t err = cudaMemsetAsync(&ws->count, 0, sizeof ws->count);
    if (err != cudaSuccess)
        return err;
    k_frame_grid<<<blocks, GRID_FRAME_BLOCK>>>(ns, d_s, nt, d_t, ws, h);
    if (n > 0)
        k_map_frame<<<blocks_for(n), BLOCK>>>(ns, d_s, nt, d_t, ws->frame, d_x);
    return cudaGetLastError();
}

/* The tree's links of node i: n_nodes, or (a tree built without a wait) at most n_nodes and
 * the count on the device. */
struct links_in {
    int32_t n_nodes;
    const int32_t *count, *more, *next, *begin, *end;
    int4 *links;
};

/* The charge check's words (k_charge_stats): stats[0] the complement of the first non-finite
 * charge's index (0: none; so that one memset clears every word), stats[1] the bits of the
 * largest |q|. The charges go to the walk times charge_scale:
 * in fp32 the power of two that brings the largest |q| into [1, 2) (exact, so the moments
 * neither under- nor overflow), else 1. Read on the device, so eval does not wait for the
 * check: with a bad charge the walks write nothing and the host reports it after the wait. */
template <typename R>
__device__ __forceinline__ double charge_scale(const unsigned long long *__restrict__ stats)
{
    if (sizeof(R) != 4 || stats[1] == 0)
        return 1.0;
    return ldexp(1.0, -ilogb(__longlong_as_double((long long)stats[1])));
}

__device__ __forceinline__ bool charges_bad(const unsigned long long *__restrict__ stats)
{
    return stats[0] != 0;
}

/* The next walk of the warp's (walk_args.ticket): one atomic by lane 0, all lanes calling. */
__device__ __forceinline__ int64_t take_ticket(unsigned long long *ticket)
{
    unsigned long long k = 0;
    if ((threadIdx.x & 31) == 0)
        k = atomicAdd(ticket, 1ull);
    return (int64_t)__shfl_sync(0xffffffffu, k, 0);
}

template <typename R>
__global__ void k_pack_charges(int64_t n, const int32_t *__restrict__ order,
                               const double *__restrict__ q,
                               const unsigned long long *__restrict__ stats,
                               typename vec4<R>::type *__restrict__ src)
{
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (s >= n)
        return;
    src[s].w = (R)(q[order[s]] * charge_scale<R>(stats));
}

/* Charge check: the first non-finite charge (stats[0], the max of its complement) and the
 * largest |q| as bits (stats[1], max), reduced per block before one atomic each (one atomic
 * per thread on one address cost ~0.8 ms at 2^20). stats must hold zeros before, unless the
 * grid is one block (direct): that block writes the words itself, the walk's overflow flag,
 * the moments' block count and the walk's tickets (stats[2], stats[3], stats[4]) cleared with
 * them, so no memset comes first.
 * CHARGE_ILP charges in flight per thread (one block has few warps to hide the loads). */
constexpr int CHARGE_ILP = 4, CHARGE_BLOCK = 1024;

__global__ void k_charge_stats(int64_t n, const double *__restrict__ q,
                               unsigned long long *__restrict__ stats, int direct)
{
    unsigned long long big = 0, bad = ~0ull;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i0 < n;
         i0 += stride * CHARGE_ILP) {
        double a[CHARGE_ILP];
#pragma unroll
        for (int u = 0; u < CHARGE_ILP; u++)
            a[u] = i0 + u * stride < n ? fabs(q[i0 + u * stride]) : 0.0;
#pragma unroll
        for (int u = 0; u < CHARGE_ILP; u++) {
            const int64_t i = i0 + u * stride;
            if (!isfinite(a[u]))
                bad = (unsigned long long)i < bad ? (unsigned long long)i : bad;
            else
                big = (unsigned long long)__double_as_longlong(a[u]) > big
                          ? (unsigned long long)__double_as_longlong(a[u]) : big;
        }
    }
    for (int d = 16; d > 0; d >>= 1) {
        const unsigned long long b2 = __shfl_xor_sync(0xffffffffu, big, d);
        const unsigned long long x2 = __shfl_xor_sync(0xffffffffu, bad, d);
        big = b2 > big ? b2 : big, bad = x2 < bad ? x2 : bad;
    }
    __shared__ unsigned long long s_big[32], s_bad[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0)
        s_big[wid] = big, s_bad[wid] = bad;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); k++)
            big = s_big[k] > big ? s_big[k] : big, bad = s_bad[k] < bad ? s_bad[k] : bad;
        if (direct) {
            stats[0] = bad != ~0ull ? ~bad : 0, stats[1] = big, stats[2] = 0, stats[3] = 0;
            stats[4] = 0;
            return;
        }
        if (bad != ~0ull)
            atomicMax(&stats[0], ~bad);
        if (big)
            atomicMax(&stats[1], big);
    }
}

/* Bounding box of group g of sorted targets (centre and half sides into box[2 g], box[2 g + 1])
 * by LANES threads (lane: this one's; a warp's lanes take the same group): each lane takes
 * every LANES-th target and the lanes reduce min and max, which are exact in any order, so the
 * boxes are those of one thread per group. at(j): sorted target j in the working precision. */
template <typename R, int LANES, typename At>
__device__ __forceinline__ void group_box(int64_t g, int lane, const int2 *__restrict__ groups,
                                          const At &at, typename vec4<R>::type *__restrict__ box)
{
    const int2 r = groups[g];
    R lo[3] = {(R)1e30, (R)1e30, (R)1e30}, hi[3] = {(R)-1e30, (R)-1e30, (R)-1e30};
    for (int32_t j = r.x + lane; j < r.y; j += LANES) {
        const typename vec4<R>::type p = at(j);
        lo[0] = p.x < lo[0] ? p.x : lo[0], hi[0] = p.x > hi[0] ? p.x : hi[0];
        lo[1] = p.y < lo[1] ? p.y : lo[1], hi[1] = p.y > hi[1] ? p.y : hi[1];
        lo[2] = p.z < lo[2] ? p.z : lo[2], hi[2] = p.z > hi[2] ? p.z : hi[2];
    }
    for (int d = LANES / 2; d > 0; d >>= 1)
        for (int k = 0; k < 3; k++) {
            const R l2 = __shfl_xor_sync(0xffffffffu, lo[k], d);
            const R h2 = __shfl_xor_sync(0xffffffffu, hi[k], d);
            lo[k] = l2 < lo[k] ? l2 : lo[k], hi[k] = h2 > hi[k] ? h2 : hi[k];
        }
    if (lane != 0)
        return;
    typename vec4<R>::type c, h;
    c.x = (R)0.5 * (lo[0] + hi[0]), c.y = (R)0.5 * (lo[1] + hi[1]), c.z = (R)0.5 * (lo[2] + hi[2]);
    /* half sides rounded up so the box holds every target; in fp32 the targets lie within
     * half an ulp (2^-12 of the working coordinates) of their fp32 coordinates, and the walks
     * use the exact positions (rel_point) */
    const R ulp2 = sizeof(R) == 4 ? (R)0x1p-12 : (R)0;
    h.x = (R)0.5 * (hi[0] - lo[0]) * (R)(1 + 1e-6) + ulp2;
    h.y = (R)0.5 * (hi[1] - lo[1]) * (R)(1 + 1e-6) + ulp2;
    h.z = (R)0.5 * (hi[2] - lo[2]) * (R)(1 + 1e-6) + ulp2;
    c.w = 0, h.w = 0;
    box[2 * g] = c, box[2 * g + 1] = h;
}

/* Sorted target j as k_pack_points packs it: from the packed array, or from the mapped points
 * through the order (the same conversion, so the same values). */
template <typename R> struct packed_at {
    const typename vec4<R>::type *trg;
    __device__ __forceinline__ typename vec4<R>::type operator()(int32_t j) const { return trg[j]; }
};
template <typename R> struct mapped_at {
    const int32_t *order;
    const double *x;
    double scale;
    __device__ __forceinline__ typename vec4<R>::type operator()(int32_t j) const
    {
        const int64_t i = order[j];
        typename vec4<R>::type p;
        p.x = (R)(x[3 * i] * scale), p.y = (R)(x[3 * i + 1] * scale), p.z = (R)(x[3 * i + 2] * scale);
        p.w = 0;
        return p;
    }
};

/* The group boxes of the groups of at most bound (the count is on the device: the grid covers
 * the bound), LANES threads per group (small trees: a warp; one thread per group loops over
 * its targets as a chain of loads, 8 us at 8192 points, Nsight Compute at base clocks; large
 * trees keep one thread, as a grid of 32 threads per group of the bound costs more than the
 * loop). */
template <typename R, int LANES>
__global__ void k_group_boxes(int64_t bound, const int32_t *__restrict__ n_groups,
                              const int2 *__restrict__ groups,
                              const typename vec4<R>::type *__restrict__ trg,
                              typename vec4<R>::type *__restrict__ box)
{
    const int64_t g = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / LANES;
    if (g >= bound || g >= *n_groups) /* the same for the group's lanes */
        return;
    group_box<R, LANES>(g, (int)(threadIdx.x % LANES), groups, packed_at<R>{trg}, box);
}

/* The group boxes asked of k_pack_points (box NULL: none): of the groups of at most bound, the
 * count on the device, a warp each. */
template <typename R> struct boxes_in {
    int64_t bound;
    const int32_t *n_groups;
    const int2 *groups;
    typename vec4<R>::type *box;
};

/* The sorted points in the working precision; in fp32 also the rest of each coordinate,
 * lo = x - (float)x (the offset of the point from its fp32 rounding, ~2^-24 of the frame),
 * from which the walks form the offsets of close pairs (walk_args). The sources' launch also
 * gathers the tree's links (li.n_nodes > 0; one launch instead of two), and the launch of the
 * points the groups come from, for a tree built without a wait, their boxes (bx.box; the
 * points from x through the order, converted as here: one launch instead of two). */
template <typename R>
__global__ void k_pack_points(int64_t n, const int32_t *__restrict__ order,
                              const double *__restrict__ x, double scale,
                              typename vec4<R>::type *__restrict__ out, real4f *__restrict__ lo,
                              links_in li, boxes_in<R> bx)
{
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (bx.box) {
        const int64_t g = s / 32; /* the same for the warp */
        if (g < bx.bound && g < *bx.n_groups)
            group_box<R, 32>(g, (int)(threadIdx.x % 32), bx.groups, mapped_at<R>{order, x, scale},
                             bx.box);
    }
    if (s < li.n_nodes && (!li.count || s < *li.count))
        li.links[s] = make_int4(li.more[s], li.next[s], li.begin[s], li.end[s]);
    if (s >= n)
        return;
    const int64_t i = order[s];
    const double v[3] = {x[3 * i] * scale, x[3 * i + 1] * scale, x[3 * i + 2] * scale};
    typename vec4<R>::type p;
    p.x = (R)v[0], p.y = (R)v[1], p.z = (R)v[2];
    p.w = 0;
    out[s] = p;
    if (lo) {
        real4f r;
        r.x = (float)(v[0] - (double)p.x), r.y = (float)(v[1] - (double)p.y);
        r.z = (float)(v[2] - (double)p.z), r.w = 0;
        lo[s] = r;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Moments (tree3d.h)                                                                       */

__device__ __forceinline__ uint64_t compact3(uint64_t v)
{
    v &= 0x1249249249249249ull;
    v = (v ^ (v >> 2)) & 0x10c30c30c30c30c3ull;
    v = (v ^ (v >> 4)) & 0x100f00f00f00f00full;
    v = (v ^ (v >> 8)) & 0x1f0000ff0000ffull;
    v = (v ^ (v >> 16)) & 0x1f00000000ffffull;
    v = (v ^ (v >> 32)) & 0x1fffffull;
    return v;
}

/* A node's record read through L2 (ld.global.cg) when l2: k_moments_up reads records that
 * other blocks of its launch wrote, which the SM's L1 may hold stale. */
__device__ __forceinline__ real4f ld_record(const real4f *p)
{
    const float4 v = __ldcg((const float4 *)p);
    return real4f{v.x, v.y, v.z, v.w};
}
__device__ __forceinline__ real4d ld_record(const real4d *p)
{
    const double2 a = __ldcg((const double2 *)p), b = __ldcg((const double2 *)p + 1);
    return real4d{a.x, a.y, b.x, b.y};
}

template <typename V> __device__ __forceinline__ V rec(const V *p, bool l2)
{
    return l2 ? ld_record(p) : *p;
}

/* The geometric centre of the cube of a node of level L whose first point has the given key
 * (its key prefix), and the cube's side, in the working coordinates. */
__device__ __forceinline__ double node_cube(uint64_t key, int L, double scale, double gc[3])
{
    const double side = ldexp(scale, -L);
    const int sh = FMK_TREE_KEY_BITS - L;
    gc[0] = scale + ((double)(compact3(key >> 2) >> sh) + 0.5) * side;
    gc[1] = scale + ((double)(compact3(key >> 1) >> sh) + 0.5) * side;
    gc[2] = scale + ((double)(compact3(key) >> sh) + 0.5) * side;
    return side;
}

/* Node i's record from its sums: centre of |q| xc, opening radius (eq. 2, 3), M, D, S, A. */
template <typename R>
__device__ __forceinline__ void node_store(int32_t i, double side, const double gc[3],
                                           const double xc[3], double A, double M,
                                           const double D[3], const double S[6], double inv_theta,
                                           typename vec4<R>::type *__restrict__ node)
{
    typedef typename vec4<R>::type V;
    const double sx = xc[0] - gc[0], sy = xc[1] - gc[1], sz = xc[2] - gc[2];
    const double r_open = side * inv_theta + sqrt(sx * sx + sy * sy + sz * sz); /* eq. 2, 3 */
    V o0, o1, o2, o3;
    o0.x = (R)xc[0], o0.y = (R)xc[1], o0.z = (R)xc[2], o0.w = (R)(r_open * r_open);
    o1.x = (R)M, o1.y = (R)D[0], o1.z = (R)D[1], o1.w = (R)D[2];
    o2.x = (R)S[0], o2.y = (R)S[1], o2.z = (R)S[2], o2.w = (R)S[3];
    o3.x = (R)S[4], o3.y = (R)S[5], o3.z = (R)A, o3.w = 0;
    node[4 * i] = o0, node[4 * i + 1] = o1, node[4 * i + 2] = o2, node[4 * i + 3] = o3;
}

/* FMK_MOMENTS_LANES (1, 2, 4, 8, 16 or 32): lanes per leaf in the leaves' moments. 2: each lane
 * sums every other point of its leaf (H100, bench_tree --headline --big, moments phase against
 * a thread per leaf: 2^20 cube 0.101 -> 0.086 ms, Plummer 0.13 -> 0.124, 2^24 cube 1.17 ->
 * 1.16, Plummer 1.38 -> 1.19; 4 lanes: 0.093, 0.13, 1.29, 1.19; 8 lanes at 2^24: 1.54, 1.34;
 * a warp per leaf, butterflies of 5 steps: 0.14, 0.26, 3.3, 2.3, the shuffles' cost). */
#ifndef FMK_MOMENTS_LANES
#define FMK_MOMENTS_LANES 2
#endif
constexpr int MOMENTS_LANES = FMK_MOMENTS_LANES;
static_assert(MOMENTS_LANES >= 1 && MOMENTS_LANES <= 32 &&
                  (MOMENTS_LANES & (MOMENTS_LANES - 1)) == 0,
              "FMK_MOMENTS_LANES: a power of two from 1 to 32");

/* The sums of v over the G lanes of a segment of the warp (lanes G s .. G s + G - 1) by a
 * butterfly (xor G/2, ..., 1): every lane of the segment gets the same bits (the two operands
 * of each addition are the same pair). All 32 lanes call. */
template <int G, int N> __device__ __forceinline__ void segment_sums(double (&v)[N])
{
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1)
#pragma unroll
        for (int k = 0; k < N; k++)
            v[k] += __shfl_xor_sync(0xffffffffu, v[k], d);
}

/* Leaf i (links l, level L) by a segment of MOMENTS_LANES lanes of the warp, all 32 lanes
 * calling (active: this segment has a leaf; the others add zeros): lane k of the segment sums
 * the leaf's points k, k + G, ... in order (U of them loaded at once), the segment adds its
 * lanes' sums (segment_sums), and its lane 0 writes the record. Every GPU path takes a leaf's
 * moments here, so they agree bit for bit (U changes the loads, not the sums). One pass over
 * the points: with d = x - gc, the offset from the cube's centre, the sums A = sum |q|,
 * M = sum q, sum |q| d, D = sum q d and S = sum q d d^T (fp64); then the centre of |q|
 * xc = gc + sum |q| d / A, and D, S moved to it (h = xc - gc: D - M h, S - D h^T - h D^T +
 * M h h^T; every term is of the cube's size, so nothing cancels beyond fp64's rounding of it).
 * q != NULL: the charges are packed on the way, q[order[j]] cs into src_w[j].w (src_w is
 * src). In fp32 (lo: the sources' k_pack_points rest) a leaf's points are taken whole, x + lo,
 * and xc is rounded to fp32 before the moments are moved to it: the node's stored centre is
 * then exact, and M2P and M2L offsets from it are as good as the target's (the walks form them
 * relative to the group, walk_args), however wide the frame. (Before: three passes, the
 * charges, then xc, then the moments about it.) */
template <typename R, int U = 1>
__device__ __forceinline__ void leaf_moments_coop(bool active, int32_t i, int4 l, int L,
                                                 double inv_theta, double scale,
                                                 const uint64_t *__restrict__ keys,
                                                 const typename vec4<R>::type *src,
                                                 typename vec4<R>::type *src_w,
                                                 const real4f *__restrict__ lo,
                                                 const int32_t *__restrict__ order,
                                                 const double *__restrict__ q, double cs,
                                                 typename vec4<R>::type *__restrict__ node)
{
    typedef typename vec4<R>::type V;
    constexpr int G = MOMENTS_LANES;
    const int sub = threadIdx.x & (G - 1);
    const int32_t b = active ? l.z : 0, e = active ? l.w : 0;
    double gc[3];
    const double side = node_cube(active ? keys[l.z] : 0, L, scale, gc);
    double s[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* A, M, |q| d, D, S */
    for (int32_t j0 = b + sub; j0 < e; j0 += U * G) {
        V p[U];
        real4f r[U];
        double w[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int32_t j = j0 + u * G;
            const bool in = j < e;
            p[u] = in ? src[j] : V{0, 0, 0, 0};
            r[u] = in && lo ? lo[j] : real4f{0, 0, 0, 0};
            w[u] = in && q ? q[order[j]] * cs : 0.0;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int32_t j = j0 + u * G;
            if (j >= e)
                break;
            if (q) /* the charge packed, as the walks read it */
                src_w[j].w = (R)w[u];
            const double wq = q ? (double)(R)w[u] : (double)p[u].w, a = fabs(wq);
            const double dx = ((double)p[u].x + r[u].x) - gc[0],
                         dy = ((double)p[u].y + r[u].y) - gc[1],
                         dz = ((double)p[u].z + r[u].z) - gc[2];
            s[0] += a, s[1] += wq;
            s[2] += a * dx, s[3] += a * dy, s[4] += a * dz;
            s[5] += wq * dx, s[6] += wq * dy, s[7] += wq * dz;
            s[8] += wq * dx * dx, s[9] += wq * dx * dy, s[10] += wq * dx * dz;
            s[11] += wq * dy * dy, s[12] += wq * dy * dz, s[13] += wq * dz * dz;
        }
    }
    segment_sums<G>(s);
    const double A = s[0], M = s[1];
    double xc[3], h[3];
    for (int d = 0; d < 3; d++) {
        xc[d] = (double)(R)(A > 0 ? gc[d] + s[2 + d] / A : gc[d]);
        h[d] = xc[d] - gc[d];
    }
    double D[3], S[6];
    for (int d = 0; d < 3; d++)
        D[d] = s[5 + d] - M * h[d];
    const int ia[6] = {0, 0, 0, 1, 1, 2}, ib[6] = {0, 1, 2, 1, 2, 2};
    for (int k = 0; k < 6; k++) {
        const int a_ = ia[k], b_ = ib[k];
        S[k] = s[8 + k] - s[5 + a_] * h[b_] - h[a_] * s[5 + b_] + M * h[a_] * h[b_];
    }
    if (active && sub == 0)
        node_store<R>(i, side, gc, xc, A, M, D, S, inv_theta, node);
}

/* An inner node i (level L, links l, nc children, its first point's key) from its children's
 * records (leaves: leaf_moments_coop). */
template <typename R, bool L2 = false>
__device__ __forceinline__ void moments_node_of(int32_t i, int L, int4 l, int32_t nc, uint64_t key,
                                                double inv_theta, double scale,
                                                typename vec4<R>::type *__restrict__ node)
{
    /* L2: the children's records read through L2 (ld_record; k_moments_up), with the loops
     * over the children unrolled (predicated: the same sums in the same order), so that their
     * loads are in flight together (a node on a chain up the tree: one latency, not nc) */
    typedef typename vec4<R>::type V;
    double gc[3];
    const double side = node_cube(key, L, scale, gc);
    double A = 0, M = 0, xc[3] = {0, 0, 0}, D[3] = {0, 0, 0}, S[6] = {0, 0, 0, 0, 0, 0};
    const int32_t c0 = l.x;
#pragma unroll(L2 ? 8 : 1)
    for (int32_t k = 0; k < (L2 ? 8 : nc); k++) {
        if (L2 && k >= nc)
            continue;
        const int32_t c = c0 + k;
        const V a = rec(node + 4 * c, L2), m = rec(node + 4 * c + 1, L2),
                s3 = rec(node + 4 * c + 3, L2);
        const double ac = (double)s3.z;
        A += ac, M += (double)m.x;
        xc[0] += ac * (double)a.x, xc[1] += ac * (double)a.y, xc[2] += ac * (double)a.z;
    }
    for (int d = 0; d < 3; d++)
        xc[d] = (double)(R)(A > 0 ? xc[d] / A : gc[d]);
#pragma unroll(L2 ? 8 : 1)
    for (int32_t k = 0; k < (L2 ? 8 : nc); k++) {
        if (L2 && k >= nc)
            continue;
        const int32_t c = c0 + k;
        const V a = rec(node + 4 * c, L2), m = rec(node + 4 * c + 1, L2),
                s2 = rec(node + 4 * c + 2, L2), s3 = rec(node + 4 * c + 3, L2);
        const double h[3] = {(double)a.x - xc[0], (double)a.y - xc[1], (double)a.z - xc[2]};
        const double Mc = (double)m.x;
        const double Dc[3] = {(double)m.y, (double)m.z, (double)m.w};
        const double Sc[6] = {(double)s2.x, (double)s2.y, (double)s2.z,
                              (double)s2.w, (double)s3.x, (double)s3.y};
        /* D += D_c + M_c h;  S += S_c + D_c h^T + h D_c^T + M_c h h^T */
        for (int d = 0; d < 3; d++)
            D[d] += Dc[d] + Mc * h[d];
        const int ia[6] = {0, 0, 0, 1, 1, 2}, ib[6] = {0, 1, 2, 1, 2, 2};
        for (int e = 0; e < 6; e++) {
            const int a_ = ia[e], b_ = ib[e];
            S[e] += Sc[e] + Dc[a_] * h[b_] + h[a_] * Dc[b_] + Mc * h[a_] * h[b_];
        }
    }
    node_store<R>(i, side, gc, xc, A, M, D, S, inv_theta, node);
}

template <typename R>
__device__ __forceinline__ void moments_node(int32_t i, int L, double inv_theta, double scale,
                                             const uint64_t *__restrict__ keys,
                                             const int4 *__restrict__ links,
                                             const int32_t *__restrict__ n_children,
                                             typename vec4<R>::type *__restrict__ node)
{
    const int4 l = links[i];
    moments_node_of<R>(i, L, l, n_children[i], keys[l.z], inv_theta, scale, node);
}

/* Node i of either kind (valid: i is a node) by a segment of MOMENTS_LANES lanes, all 32 lanes
 * calling: a leaf by leaf_moments_coop (its charges already packed), an inner node by the
 * segment's lane 0. */
template <typename R>
__device__ __forceinline__ void moments_node_seg(bool valid, int32_t i, int L, double inv_theta,
                                                 double scale, const uint64_t *__restrict__ keys,
                                                 const int4 *__restrict__ links,
                                                 const int32_t *__restrict__ n_children,
                                                 const typename vec4<R>::type *src,
                                                 const real4f *__restrict__ lo,
                                                 typename vec4<R>::type *__restrict__ node)
{
    const int4 l = valid ? links[i] : make_int4(0, 0, 0, 0);
    leaf_moments_coop<R>(valid && l.x < 0, i, l, L, inv_theta, scale, keys, src, NULL, lo, NULL,
                         NULL, 0, node);
    if (valid && l.x >= 0 && (threadIdx.x & (MOMENTS_LANES - 1)) == 0)
        moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
}

template <typename R>
__global__ void k_moments(int32_t first, int32_t count, int L, double inv_theta, double scale,
                          const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                          const int32_t *__restrict__ n_children,
                          const typename vec4<R>::type *__restrict__ src,
                          const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    /* a segment of MOMENTS_LANES lanes per node (the whole warp calls) */
    const int64_t k = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / MOMENTS_LANES;
    moments_node_seg<R>(k < count, first + (int32_t)(k < count ? k : 0), L, inv_theta, scale, keys,
                        links, n_children, src, lo, node);
}

/* The level boundaries of a small tree, for k_moments_inner. */
struct level_table {
    int32_t begin[FMK_TREE_MAX_LEVEL + 2];
};

/* The moments of a small tree in two launches instead of one per level (for small trees the
 * launches cost more than the work): every leaf at once (k_moments_leaves, any level: a leaf
 * needs only its points), then the inner nodes level by level, deepest first, in one block. */
constexpr int MOMENTS_SMALL_BLOCK = 256;

template <typename R>
__global__ void k_moments_leaves(int32_t n_nodes, const int8_t *__restrict__ level,
                                 double inv_theta, double scale, const uint64_t *__restrict__ keys,
                                 const int4 *__restrict__ links, const int32_t *__restrict__ n_children,
                                 const typename vec4<R>::type *__restrict__ src,
                                 const real4f *__restrict__ lo,
                                 typename vec4<R>::type *__restrict__ node)
{
    /* a segment of MOMENTS_LANES lanes per node (the whole warp calls) */
    const int64_t k = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / MOMENTS_LANES;
    const int32_t i = (int32_t)(k < n_nodes ? k : 0);
    const int4 l = links[i];
    leaf_moments_coop<R>(k < n_nodes && l.x < 0, i, l, level[i], inv_theta, scale, keys, src, NULL,
                         lo, NULL, NULL, 0, node);
}

template <typename R>
__global__ void __launch_bounds__(MOMENTS_SMALL_BLOCK)
    k_moments_inner(int levels, level_table lt, double inv_theta, double scale,
                    const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                    const int32_t *__restrict__ n_children,
                    const typename vec4<R>::type *__restrict__ src,
                    typename vec4<R>::type *__restrict__ node)
{
    for (int L = levels - 2; L >= 0; L--) { /* the deepest level holds only leaves */
        for (int32_t i = lt.begin[L] + threadIdx.x; i < lt.begin[L + 1]; i += MOMENTS_SMALL_BLOCK)
            if (links[i].x >= 0)
                moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
        __syncthreads(); /* the parents read these */
    }
}

/* The charge check, the charges' packing and every moment of a small tree in one block (the
 * kernels of run_eval and run_eval_t from the charge check to the moments, which for small N
 * cost more in launches and copies than in work): the check's words written, not reduced
 * into (stats[2], the split walk's overflow flag, and stats[4], the walk's tickets, cleared),
 * the charges times charge_scale into src, the leaves, then the inner nodes level by level as
 * k_moments_inner. */
constexpr int PREP_BLOCK = 512, PREP_ILP = 8;

template <typename R>
__global__ void __launch_bounds__(PREP_BLOCK)
    k_prep_small(int64_t n, const int32_t *__restrict__ order, const double *__restrict__ q,
                 unsigned long long *__restrict__ stats, int32_t n_nodes, int levels,
                 level_table lt, const int8_t *__restrict__ level, double inv_theta, double scale,
                 const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                 const int32_t *__restrict__ n_children, typename vec4<R>::type *__restrict__ src,
                 const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    typedef cub::BlockReduce<unsigned long long, PREP_BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage temp;
    /* PREP_ILP loads in flight per thread: one block has few warps to hide their latency */
    unsigned long long big = 0, bad = ~0ull;
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += PREP_BLOCK * PREP_ILP) {
        double a[PREP_ILP];
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++) {
            const int64_t i = i0 + u * PREP_BLOCK;
            a[u] = i < n ? fabs(q[i]) : 0.0;
        }
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++) {
            const unsigned long long i = (unsigned long long)(i0 + u * PREP_BLOCK);
            const unsigned long long bits = (unsigned long long)__double_as_longlong(a[u]);
            if (!isfinite(a[u]))
                bad = i < bad ? i : bad;
            else
                big = bits > big ? bits : big;
        }
    }
    __shared__ double s_scale;
    big = reduce_t(temp).Reduce(big, cuda::maximum<>{});
    __syncthreads();
    bad = reduce_t(temp).Reduce(bad, cuda::minimum<>{});
    if (threadIdx.x == 0) {
        const unsigned long long w[2] = {bad, big};
        stats[0] = ~bad, stats[1] = big, stats[2] = 0, stats[4] = 0;
        s_scale = charge_scale<R>(w);
    }
    __syncthreads();
    const double cs = s_scale;
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += PREP_BLOCK * PREP_ILP) {
        int32_t o[PREP_ILP];
        double c[PREP_ILP];
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++)
            o[u] = i0 + u * PREP_BLOCK < n ? order[i0 + u * PREP_BLOCK] : 0;
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++)
            c[u] = q[o[u]];
#pragma unroll
        for (int u = 0; u < PREP_ILP; u++)
            if (i0 + u * PREP_BLOCK < n)
                src[i0 + u * PREP_BLOCK].w = (R)(c[u] * cs);
    }
    __syncthreads();
    /* the leaves, a segment of MOMENTS_LANES lanes each (a warp's bound is the same in its lanes) */
    for (int32_t b = (threadIdx.x & ~31) / MOMENTS_LANES; b < n_nodes; b += PREP_BLOCK / MOMENTS_LANES) {
        const int32_t i = b + (threadIdx.x & 31) / MOMENTS_LANES;
        const int4 l = links[i < n_nodes ? i : 0];
        leaf_moments_coop<R>(i < n_nodes && l.x < 0, i, l, level[i < n_nodes ? i : 0], inv_theta,
                             scale, keys, src, NULL, lo, NULL, NULL, 0, node);
    }
    __syncthreads();
    for (int L = levels - 2; L >= 0; L--) { /* the deepest level holds only leaves */
        for (int32_t i = lt.begin[L] + threadIdx.x; i < lt.begin[L + 1]; i += PREP_BLOCK)
            if (links[i].x >= 0)
                moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
        __syncthreads();
    }
}

/* The charges' packing and every moment of a small tree in one launch (for more sources than
 * k_prep_small takes; the charge check is done before, by k_charge_stats): one warp per leaf
 * packs its points' charges (times charge_scale, as k_pack_charges) and takes the leaf's
 * moments (leaf_moments_coop). The last block to finish (a counter, stats[3], cleared by
 * run_eval's memset or the one-block charge check) then takes the inner nodes level by level, deepest first, as
 * k_moments_inner does. Three launches in one. (The
 * children of each level's nodes staged in shared memory too, by 8 threads per node, 32 nodes
 * at a time, cost more than they saved: the Plummer sphere's wide levels took many rounds.) */
constexpr int MOMENTS_FUSED_BLOCK = 256;

template <typename R>
__global__ void __launch_bounds__(MOMENTS_FUSED_BLOCK)
    k_moments_small(int32_t n_nodes, int levels, level_table lt, const int8_t *__restrict__ level,
                    double inv_theta, double scale, const uint64_t *__restrict__ keys,
                    const int4 *__restrict__ links, const int32_t *__restrict__ n_children,
                    const int32_t *__restrict__ order, const double *__restrict__ q,
                    unsigned long long *__restrict__ stats, typename vec4<R>::type *src,
                    const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node)
{
    constexpr int WARPS = MOMENTS_FUSED_BLOCK / 32;
    __shared__ bool s_last;
    constexpr int PER_WARP = 32 / MOMENTS_LANES; /* leaves a warp takes at once */
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const double cs = charge_scale<R>(stats);
    for (int32_t b = (blockIdx.x * WARPS + w) * PER_WARP; b < n_nodes;
         b += gridDim.x * WARPS * PER_WARP) {
        const int32_t i = b + lane / MOMENTS_LANES, ic = i < n_nodes ? i : 0;
        const int4 l = links[ic];
        leaf_moments_coop<R>(i < n_nodes && l.x < 0, i, l, level[ic], inv_theta, scale, keys, src,
                             src, lo, order, q, cs, node);
    }
    /* the last block takes the inner nodes */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        s_last = atomicAdd(&stats[3], 1ull) == gridDim.x - 1;
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    for (int L = levels - 2; L >= 0; L--) { /* the deepest level holds only leaves */
        for (int32_t i = lt.begin[L] + threadIdx.x; i < lt.begin[L + 1]; i += MOMENTS_FUSED_BLOCK)
            if (links[i].x >= 0)
                moments_node<R>(i, L, inv_theta, scale, keys, links, n_children, node);
        __syncthreads(); /* the parents read these */
    }
}

/* The charges' packing and every moment of a large tree in one launch (fmk_cuda_bh_moments_up;
 * before: k_pack_charges, then k_moments once per level, 10 launches for the 2^20 Plummer
 * sphere): a warp per leaf packs its charges and takes its moments (leaf_moments_coop), then
 * its lane 0 goes up the tree: the last child of a node to be done (a counter per node, arrive,
 * zero before the launch) takes the node as k_moments does (the same sums in the same order:
 * the same moments bit for bit; its children's records read through L2), and so on up to the
 * root or to a node whose other children are not done yet. (A warp per leaf with its points
 * staged in shared memory, lane 0 summing, took 0.36 ms at 2^20 against the per-level kernels'
 * 0.20: one lane's sums in fp64 per leaf; a thread per leaf, 0.13..0.14.) */
constexpr int MOMENTS_UP_BLOCK = 128;
/* k_moments_up's leaves: 4 of a lane's points loaded at once (leaf_moments_coop's U; 2^20
 * Plummer sphere, Nsight Compute: 122 us with the points one by one, 110 with 2, 105 with 4,
 * at 72, 80 and 96 registers). */
constexpr int MOMENTS_UP_ILP = 4;

template <typename R>
__global__ void __launch_bounds__(MOMENTS_UP_BLOCK)
    k_moments_up(int32_t n_nodes, const int8_t *__restrict__ level, double inv_theta,
                 double scale, const uint64_t *__restrict__ keys, const int4 *__restrict__ links,
                 const int32_t *__restrict__ n_children, const int32_t *__restrict__ parent,
                 const int32_t *__restrict__ order, const double *__restrict__ q,
                 const unsigned long long *__restrict__ stats, typename vec4<R>::type *src,
                 const real4f *__restrict__ lo, typename vec4<R>::type *__restrict__ node,
                 int32_t *__restrict__ arrive, int acq)
{
    /* a segment of MOMENTS_LANES lanes per leaf (the whole warp calls) */
    const int64_t k = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / MOMENTS_LANES;
    const int32_t i = (int32_t)(k < n_nodes ? k : 0);
    const int4 l = links[i];
    const bool leaf = k < n_nodes && l.x < 0;
    leaf_moments_coop<R, MOMENTS_UP_ILP>(leaf, i, l, level[i], inv_theta, scale, keys, src, src,
                                         lo, order, q, charge_scale<R>(stats), node);
    if (!leaf || (threadIdx.x & (MOMENTS_LANES - 1)) != 0) /* lane 0 of the segment wrote the
                                                             * record and goes up the tree */
        return;
    for (int32_t p = parent[i]; p >= 0;) { /* a child of p is done */
        /* what the parent's step reads of the tree (not written by this launch), and the next
         * parent, loaded before the arrival so that their latency overlaps it */
        const int4 lp = links[p];
        const int32_t ncp = n_children[p], pp = parent[p];
        const int Lp = level[p];
        const uint64_t kp = keys[lp.z];
        if (acq) {
            /* the arrival releases this child's record and acquires the other children's */
            cuda::atomic_ref<int32_t, cuda::thread_scope_device> a(arrive[p]);
            if (a.fetch_add(1, cuda::memory_order_acq_rel) != ncp - 1)
                break;
        } else {
            __threadfence(); /* its record before its arrival */
            if (atomicAdd(&arrive[p], 1) != ncp - 1)
                break;
            __threadfence(); /* the other children's records after their arrivals */
        }
        moments_node_of<R, true>(p, Lp, lp, ncp, kp, inv_theta, scale, node);
        p = pp;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Walks                                                                                    */

template <typename R> struct walk_args {
    const int4 *links;
    const int32_t *n_children;
    const typename vec4<R>::type *node, *src, *trg; /* trg == src when self */
    const real4f *src_lo, *trg_lo; /* fp32: the coordinates' rest (k_pack_points); else NULL */
    const int32_t *trg_order;
    const int2 *groups;
    const typename vec4<R>::type *box;
    int64_t m, n_groups;
    R eps2;
    double pot_scale, grad_scale, grad_scale2;
    double *pot, *grad;
    /* The breadth-first walk split in parts (when there are too few groups to fill the GPU):
     * part p of a group handles the nodes of level split_level (nodes [split_begin,
     * split_end)) with index = p mod parts and everything below them, and of the nodes above
     * that level, those with index = p mod parts that it accepts or sums directly (every part
     * opens the same nodes there). Every interaction of the unsplit walk is made once; part p
     * writes its sums at pot + p m, grad + 3 p m (k_sum_parts adds them up). */
    int parts;
    int32_t split_begin, split_end;
    unsigned long long *overflow; /* set when a split walk's stack overflowed above the split */
    int mac;    /* fmk_cuda_bh_mac */
    R leaf_r2;  /* f^2 of fmk_cuda_bh_leaf_theta: a leaf's squared radius in the per-target test */
    R inner_r2; /* fmk_cuda_bh_mac_inner^2: an inner node's, with mac = 1 */
    int local;  /* fmk_cuda_bh_local: 0, or the order of the group's expansion (2, 3, 4) */
    R local_k;  /* fmk_cuda_bh_local_k */
    R local_a2; /* fmk_cuda_bh_local_open squared */
    int harmonic;   /* fmk_cuda_bh_local_harmonic, with local = 4 and eps2 = 0 */
    const unsigned long long *stats; /* the charge check (charge_scale, charges_bad) */
    /* The breadth-first walk's warps by tickets (fmk_cuda_bh_tickets): NULL, walk w is block
     * w / WARPS's; else a zeroed counter, and the grid only as large as the GPU holds at once:
     * each warp takes walk after walk from it, so that no slot waits for the block scheduler
     * (k_walk_bfs). */
    unsigned long long *ticket;
    /* Super-groups (fmk_cuda_bh_super; k_walk_super): super = 0, the group walk starts at
     * the root. Else group walk w takes group super_order[w] (Morton order; NULL: the groups
     * are in Morton order already, group w) and belongs to
     * super-group w / super, whose start list (super_cap entries at super_list + super_cap sg,
     * super_count[sg] of them, -1 after an overflow: from the root) replaces the root, and
     * whose expansion (FMK_BH_LOCAL4 coefficients at super_local, about super_centre[sg], used
     * when its w != 0) it adds at its targets. */
    int super, super_open, super_cap;
    R super_k; /* the super-group step's k (fmk_cuda_bh_super_k times local_k) */
    const int32_t *super_order;
    int32_t *super_count, *super_list;
    typename vec4<R>::type *super_centre;
    R *super_local;
    /* A second level (fmk_cuda_bh_super2): super_up = 0, none. Else parents of super_up
     * groups (S * S2), walked first (their start lists at up_list, up_count; expansions at
     * up_local about up_centre): super-group s walks from the list of parent s super /
     * super_up instead of the root when that list did not overflow, and then the group walks
     * add the parent's expansion as well. */
    int super_up, up_cap; /* up_cap: the parents' list entries (as super_cap) */
    int32_t *up_count, *up_list;
    typename vec4<R>::type *up_centre;
    R *up_local;
};

/* u: 1 / charge_scale. */
template <typename R>
__device__ __forceinline__ void store(const walk_args<R> &a, int32_t t, R phi, const R *g,
                                      double u, int64_t part = 0)
{
    const int64_t o = a.trg_order[t] + part * a.m;
    if (a.pot)
        a.pot[o] = (double)phi * a.pot_scale * u;
    if (a.grad) {
        const double gs = a.grad_scale * u;
        a.grad[3 * o] = (double)g[0] * gs * a.grad_scale2;
        a.grad[3 * o + 1] = (double)g[1] * gs * a.grad_scale2;
        a.grad[3 * o + 2] = (double)g[2] * gs * a.grad_scale2;
    }
}

/* The per-target test of fmk_cuda_bh_mac, for this lane's targets (T per lane) against a node
 * with centre (nx, ny, nz) and squared opening radius r2: true when each target lies outside
 * (padding lanes, t >= end, do not count). Written with explicit fma so that both group walks
 * decide alike. */
template <typename R, int T>
__device__ __forceinline__ bool targets_far(const int32_t (&t)[T], int32_t end, const R (&y)[T][3],
                                            R nx, R ny, R nz, R r2)
{
    bool ok = true;
#pragma unroll
    for (int k = 0; k < T; k++) {
        const R rx = y[k][0] - nx, ry = y[k][1] - ny, rz = y[k][2] - nz;
        ok = ok && (t[k] >= end || fma(rx, rx, fma(ry, ry, rz * rz)) > r2);
    }
    return ok;
}

__device__ __forceinline__ void ld_moments(const real4f *node, int32_t i, float m[10])
{
    const real4f a = node[4 * i + 1], b = node[4 * i + 2], c = node[4 * i + 3];
    m[0] = a.x, m[1] = a.y, m[2] = a.z, m[3] = a.w;
    m[4] = b.x, m[5] = b.y, m[6] = b.z, m[7] = b.w, m[8] = c.x, m[9] = c.y;
}
__device__ __forceinline__ void ld_moments(const real4d *node, int32_t i, double m[10])
{
    const real4d a = node[4 * i + 1], b = node[4 * i + 2], c = node[4 * i + 3];
    m[0] = a.x, m[1] = a.y, m[2] = a.z, m[3] = a.w;
    m[4] = b.x, m[5] = b.y, m[6] = b.z, m[7] = b.w, m[8] = c.x, m[9] = c.y;
}

/* Positions in the group walks. In fp32 the frame's coordinates resolve 2^-24 of the frame, so
 * the offset y - x of two points d apart would err by 2^-24 frame / d. The group walks take
 * every position relative to an origin o, the centre of the group's box (an fp32 number of
 * the frame): a point is (x - o) + lo, x its fp32 coordinate and lo the rest (k_pack_points);
 * x - o is exact (two fp32 numbers of [1, 2] x 2^12: Sterbenz), so the sum rounds once, to
 * 2^-24 of |x - o|. A pair in or near the group then errs by ~2^-24 (|y - o| + |x - o|), the
 * size of the group's cells, and the per-pair work is unchanged (targets once per walk,
 * sources once per group, as they enter the P2P list). Node centres are fp32 numbers of the
 * frame (moments_node rounds them before taking the moments about them), so x - o is exact
 * and M2P keeps its accuracy too. fp64: o = 0, the frame's coordinates as before. */
template <typename R>
__device__ __forceinline__ typename vec4<R>::type walk_origin(const typename vec4<R>::type &c)
{
    typename vec4<R>::type o = c;
    if (sizeof(R) != 4)
        o.x = o.y = o.z = 0;
    o.w = 0;
    return o;
}

/* Point j of p (rest lo, fp32) relative to o, its w (the charge) kept. */
template <typename R>
__device__ __forceinline__ typename vec4<R>::type rel_point(const typename vec4<R>::type *p,
                                                            const real4f *lo, int32_t j,
                                                            const typename vec4<R>::type &o)
{
    typename vec4<R>::type v = p[j];
    if (sizeof(R) == 4) {
        const real4f r = lo[j];
        v.x = (v.x - o.x) + (R)r.x, v.y = (v.y - o.y) + (R)r.y, v.z = (v.z - o.z) + (R)r.z;
    }
    return v;
}

/* One warp per group; T targets per lane. */
template <typename R, int ORDER, bool SELF, int T>
__global__ void __launch_bounds__(WALK_BLOCK) k_walk_group(walk_args<R> a)
{
    typedef typename vec4<R>::type V;
    const int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= a.n_groups || charges_bad(a.stats))
        return;
    const int2 grp = a.groups[w];
    const V c = a.box[2 * w], h = a.box[2 * w + 1];
    const V o = walk_origin<R>(c); /* positions relative to o (rel_point) */
    int32_t t[T];
    R y[T][3], phi[T], g[T][3];
#pragma unroll
    for (int k = 0; k < T; k++) {
        t[k] = grp.x + lane + 32 * k;
        const V p = rel_point<R>(a.trg, a.trg_lo, t[k] < grp.y ? t[k] : grp.x, o);
        y[k][0] = p.x, y[k][1] = p.y, y[k][2] = p.z;
        phi[k] = 0, g[k][0] = g[k][1] = g[k][2] = 0;
    }
    /* (Fetching both possible next nodes before the current node's work measured slower:
     * 6.1 vs 5.0 ms on 2^20 uniform points, more registers and twice the loads.) */
    int32_t i = 0;
    while (i >= 0) {
        const int4 l = __ldg(&a.links[i]);
        const V x = a.node[4 * i];
        const R dx = fmax(fabs(x.x - c.x) - h.x, (R)0);
        const R dy = fmax(fabs(x.y - c.y) - h.y, (R)0);
        const R dz = fmax(fabs(x.z - c.z) - h.z, (R)0);
        bool far = dx * dx + dy * dy + dz * dz > x.w;
        const R nx = x.x - o.x, ny = x.y - o.y, nz = x.z - o.z;
        const R r2 = x.w * (l.x < 0 ? a.leaf_r2 : a.inner_r2); /* the per-target test's */
        if (!far && a.mac && l.w - l.z > p2p_cut<ORDER>::value && (a.mac == 1 || l.x < 0))
            far = __all_sync(0xffffffffu, targets_far<R, T>(t, grp.y, y, nx, ny, nz, r2));
        if (far && l.w - l.z > p2p_cut<ORDER>::value) {
            R m[10];
            ld_moments(a.node, i, m);
#pragma unroll
            for (int k = 0; k < T; k++)
                m2p(ORDER, y[k][0] - nx, y[k][1] - ny, y[k][2] - nz, a.eps2, m, &phi[k], g[k]);
            i = l.y;
        } else if (far || l.x < 0) {
#pragma unroll 4
            for (int32_t j = l.z; j < l.w; j++) {
                const V s = rel_point<R>(a.src, a.src_lo, j, o);
#pragma unroll
                for (int k = 0; k < T; k++) {
                    const R q = SELF && j == t[k] ? (R)0 : s.w; /* the self term, by index */
                    p2p(y[k][0] - s.x, y[k][1] - s.y, y[k][2] - s.z, q, a.eps2, &phi[k], g[k]);
                }
            }
            i = l.y;
        } else {
            i = l.x;
        }
    }
#pragma unroll
    for (int k = 0; k < T; k++)
        if (t[k] < grp.y)
            store(a, t[k], phi[k], g[k], 1.0 / charge_scale<R>(a.stats));
}

/* One thread per sorted target (Nakasato Fig. 6). */
template <typename R, int ORDER, bool SELF>
__global__ void __launch_bounds__(WALK_BLOCK) k_walk_stackless(walk_args<R> a)
{
    typedef typename vec4<R>::type V;
    const int64_t tt = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (tt >= a.m || charges_bad(a.stats))
        return;
    const int32_t t = (int32_t)tt;
    const V p = a.trg[t];
    /* offsets from the target's fp32 coordinate p (rel_point): p - s and p - xc exact (node
     * centres are fp32 numbers), then the rests */
    const real4f pr = sizeof(R) == 4 ? a.trg_lo[t] : real4f{0, 0, 0, 0};
    R phi = 0, g[3] = {0, 0, 0};
    int32_t i = 0;
    while (i >= 0) {
        const int4 l = __ldg(&a.links[i]);
        const V x = a.node[4 * i];
        const R rx = (p.x - x.x) + (R)pr.x, ry = (p.y - x.y) + (R)pr.y, rz = (p.z - x.z) + (R)pr.z;
        const bool far = rx * rx + ry * ry + rz * rz > x.w;
        if (far && l.w - l.z > p2p_cut<ORDER>::value) {
            R m[10];
            ld_moments(a.node, i, m);
            m2p(ORDER, rx, ry, rz, a.eps2, m, &phi, g);
            i = l.y;
        } else if (far || l.x < 0) {
            for (int32_t j = l.z; j < l.w; j++) {
                const V s = a.src[j];
                const R q = SELF && j == t ? (R)0 : s.w;
                if (sizeof(R) == 4) {
                    const real4f sr = a.src_lo[j];
                    p2p((p.x - s.x) + ((R)pr.x - (R)sr.x), (p.y - s.y) + ((R)pr.y - (R)sr.y),
                        (p.z - s.z) + ((R)pr.z - (R)sr.z), q, a.eps2, &phi, g);
                } else {
                    p2p(p.x - s.x, p.y - s.y, p.z - s.z, q, a.eps2, &phi, g);
                }
            }
            i = l.y;
        } else {
            i = l.x;
        }
    }
    store(a, t, phi, g, 1.0 / charge_scale<R>(a.stats));
}

/* Breadth-first group walk (Bonsai style), one warp per group of targets. The warp takes the
 * nodes still to test 32 at a time from a per-warp stack in shared memory: each lane tests one
 * node against the group's box (the test of the group walk), so a level of the tree costs one
 * memory latency for 32 nodes instead of one per node. Accepted nodes (centre and moments) and
 * the sources of opened leaves are appended (ballot + popc, a warp scan for source counts) to
 * shared-memory lists; the children of opened nodes (contiguous: more, more + n_children) are
 * pushed on the stack. A list that holds 32 entries is evaluated by all lanes at once, each
 * lane for its target(s), reading the entries from shared memory (broadcast). The interactions
 * are those of the group walk; only the order of the sums differs. A stack that would overflow
 * (seen only with leaves of 128 on a Plummer sphere) makes the node's opening a direct sum over
 * its points (exact). */
/* Warps per block of the fp32 group walk: 1, so that a warp's slot is free as soon as its group
 * is done (with 4, the groups' unequal work held each block until its slowest warp ended:
 * 2^20 walk -1..2%, bench/RESULTS.md). */
#ifndef FMK_BFS_WARPS
#define FMK_BFS_WARPS 1
#endif
/* The group walk's hot loop is larger than the SM's instruction caches hold: Nsight Compute
 * found its warps stalled 0.55 cycles per issued instruction waiting for instructions (2^20
 * Plummer sphere), and code added to the loop, even code that does not run, made it slower
 * (bench/RESULTS.md, "The group walk's code size"). So each list is evaluated at one place in
 * the loop: the P2P list's full chunk before a P2P batch's copies only (FMK_P2P_AT_START = 0;
 * 1 also at the step's start, while the node loads are in flight, as before: a second copy
 * of the P2P code in the loop; 0: stalls 0.20, walk -3.5%). FMK_P2P_UNROLL and
 * FMK_M2P_UNROLL: the lists' unrolling (2 and 8 for P2P measured slower for the Plummer
 * sphere, M2P 1 the same as 2). */
#ifndef FMK_P2P_UNROLL
#define FMK_P2P_UNROLL 4
#endif
#ifndef FMK_P2P_AT_START
#define FMK_P2P_AT_START 0
#endif
#ifndef FMK_M2P_UNROLL
#define FMK_M2P_UNROLL 2
#endif

template <typename R> struct bfs_cfg {
    static constexpr int WARPS = sizeof(R) == 4 ? FMK_BFS_WARPS : 2; /* warps per block */
    /* blocks per SM for the launch bounds, from warps per SM (what shared memory allows) */
    static constexpr int blocks(int warps_per_sm) { return warps_per_sm / WARPS; }
    static constexpr int MIN_BLOCKS = sizeof(R) == 4 ? 24 / WARPS : 1;
};

/* M2P list entries are packed for evaluation when a node is accepted (4 4-vectors):
 *   (xc, M), (D, Q_yz), (Q_xx, Q_xy, Q_xz, Q_yy), (Q_zz, E, 0, 0)
 * with Q = 3/2 (S - tr(S)/3 I) (traceless) and E = tr(S) eps2 / 2. With r = y - xc,
 * t = |r|^2 + eps2, u = t^-1/2 and w = r.Q.r - E, the terms of bh_terms.h become
 *   phi  = M u + (D.r) u^3 + w u^5
 *   grad = D u^3 + 2 Q r u^5 - r (M u^3 + 3 (D.r) u^5 + 5 w u^7)
 * (tr(S) enters only through eps2: for eps2 = 0 the traceless quadrupole is the same field). */
template <typename R, int ORDER>
__device__ __forceinline__ void bfs_pack(const typename vec4<R>::type &x,
                                         const typename vec4<R>::type &m1,
                                         const typename vec4<R>::type &m2,
                                         const typename vec4<R>::type &m3, R eps2,
                                         typename vec4<R>::type *e)
{
    typedef typename vec4<R>::type V;
    V a, b, c, d;
    a.x = x.x, a.y = x.y, a.z = x.z, a.w = m1.x;
    b.x = m1.y, b.y = m1.z, b.z = m1.w;
    const R tr = m2.x + m2.w + m3.y, third = tr * (R)(1.0 / 3.0);
    b.w = (R)1.5 * m3.x;                                                     /* Q_yz */
    c.x = (R)1.5 * (m2.x - third), c.y = (R)1.5 * m2.y, c.z = (R)1.5 * m2.z; /* Q_xx Q_xy Q_xz */
    c.w = (R)1.5 * (m2.w - third);                                           /* Q_yy */
    d.x = (R)1.5 * (m3.y - third), d.y = (R)0.5 * tr * eps2, d.z = 0, d.w = 0; /* Q_zz, E */
    if (ORDER < 2)
        b.w = c.x = c.y = c.z = c.w = d.x = d.y = 0;
    e[0] = a, e[1] = b, e[2] = c, e[3] = d;
}

template <typename R, int ORDER, int T>
__device__ __forceinline__ void bfs_m2p(const typename vec4<R>::type (*list)[4], int count,
                                        const R (&y)[T][3], R eps2, R (&phi)[T], R (&g)[T][3])
{
    typedef typename vec4<R>::type V;
    constexpr int U = FMK_M2P_UNROLL;
#pragma unroll U
    for (int e = 0; e < count; e++) {
        const V a = list[e][0];
#pragma unroll
        for (int k = 0; k < T; k++) {
            const R rx = y[k][0] - a.x, ry = y[k][1] - a.y, rz = y[k][2] - a.z;
            const R t = fma(rx, rx, fma(ry, ry, fma(rz, rz, eps2)));
            const R u1 = rsqrt_(t), u2 = u1 * u1, u3 = u1 * u2;
            phi[k] = fma(a.w, u1, phi[k]);
            R cc = a.w * u3; /* coefficient of -r in the gradient */
            if (ORDER >= 1) {
                const V b = list[e][1];
                const R dr = fma(b.x, rx, fma(b.y, ry, b.z * rz));
                const R u5 = u3 * u2;
                phi[k] = fma(dr, u3, phi[k]);
                g[k][0] = fma(b.x, u3, g[k][0]);
                g[k][1] = fma(b.y, u3, g[k][1]);
                g[k][2] = fma(b.z, u3, g[k][2]);
                if (ORDER >= 2) {
                    const V c = list[e][2], d = list[e][3];
                    const R qx = fma(c.x, rx, fma(c.y, ry, c.z * rz));
                    const R qy = fma(c.y, rx, fma(c.w, ry, b.w * rz));
                    const R qz = fma(c.z, rx, fma(b.w, ry, d.x * rz));
                    const R w = fma(rx, qx, fma(ry, qy, fma(rz, qz, -d.y)));
                    const R u7 = u5 * u2, u52 = u5 + u5;
                    phi[k] = fma(w, u5, phi[k]);
                    cc = fma((R)5 * w, u7, fma((R)3 * dr, u5, cc));
                    g[k][0] = fma(qx, u52, g[k][0]);
                    g[k][1] = fma(qy, u52, g[k][1]);
                    g[k][2] = fma(qz, u52, g[k][2]);
                } else {
                    cc = fma((R)3 * dr, u5, cc);
                }
            }
            g[k][0] = fma(-cc, rx, g[k][0]);
            g[k][1] = fma(-cc, ry, g[k][1]);
            g[k][2] = fma(-cc, rz, g[k][2]);
        }
    }
}

/* The cell-to-group step (fmk_cuda_bh_local). Each lane translates one node of the warp's list
 * into the group's expansion about c (M2L, bh_local.h; padding lanes give zeros), and the 32
 * lanes' expansions are added up so that lane k holds coefficient k of the sum (a reduce-scatter
 * by shuffles: 31 for 32 slots, in a fixed order), accumulated in acc. */
template <int LOC>
__device__ __forceinline__ void m2l_order(int local, int order, float rx, float ry, float rz,
                                          float eps2, const float *m, float *L)
{
    if (LOC == 5) /* eps2 = 0: the coefficients bz <= 1 */
        m2l4_harm_f(order, rx, ry, rz, m, L);
    else if (LOC == 4)
        m2l4_f(order, rx, ry, rz, eps2, m, L);
    else if (local == 2)
        m2l2_f(order, rx, ry, rz, eps2, m, L);
    else
        m2l3_f(order, rx, ry, rz, eps2, m, L);
}
template <int LOC>
__device__ __forceinline__ void m2l_order(int local, int order, double rx, double ry, double rz,
                                          double eps2, const double *m, double *L)
{
    if (LOC == 5)
        m2l4_harm_d(order, rx, ry, rz, m, L);
    else if (LOC == 4)
        m2l4_d(order, rx, ry, rz, eps2, m, L);
    else if (local == 2)
        m2l2_d(order, rx, ry, rz, eps2, m, L);
    else
        m2l3_d(order, rx, ry, rz, eps2, m, L);
}
__device__ __forceinline__ void local4_from_harm(const float *H, float *L) { local4_from_harm_f(H, L); }
__device__ __forceinline__ void local4_from_harm(const double *H, double *L) { local4_from_harm_d(H, L); }
template <int LOC>
__device__ __forceinline__ void l2p_order(int local, const float *L, float dx, float dy, float dz,
                                          float *phi, float *g)
{
    if (LOC == 4)
        l2p4_f(L, dx, dy, dz, phi, g);
    else if (local == 2)
        l2p2_f(L, dx, dy, dz, phi, g);
    else
        l2p3_f(L, dx, dy, dz, phi, g);
}
template <int LOC>
__device__ __forceinline__ void l2p_order(int local, const double *L, double dx, double dy,
                                          double dz, double *phi, double *g)
{
    if (LOC == 4)
        l2p4_d(L, dx, dy, dz, phi, g);
    else if (local == 2)
        l2p2_d(L, dx, dy, dz, phi, g);
    else
        l2p3_d(L, dx, dy, dz, phi, g);
}

/* One step of the reduce-scatter over slots 0..31 of v: lanes with bit H keep slots [H, 2H),
 * the others [0, H), and each adds its partner's (lane ^ H) copy of the slots it keeps
 * (constant indices: registers). */
template <int H, typename R, int N> __device__ __forceinline__ void reduce_step(R (&v)[N], int lane)
{
    const bool up = lane & H;
#pragma unroll
    for (int k = 0; k < H; k++) {
        const R send = up ? v[k] : v[k + H];
        const R keep = up ? v[k + H] : v[k];
        v[k] = keep + __shfl_xor_sync(0xffffffffu, send, H);
    }
}

#ifndef FMK_LOCAL_MINB
#define FMK_LOCAL_MINB 6
#endif
/* FMK_LOCAL_MINB: the fp32 group walk with the cell-to-group step is bounded for 4 x that many
 * warps per SM (80 registers; its loop spills 8 / 12 bytes). Its shared memory, 10.4 KB a warp
 * and the 1 KB the driver keeps per block, holds 20 one-warp blocks on an SM. With super-groups
 * (SUPER) 4 warps fewer: 96 registers, no spills. At 80 registers that walk's loop spilled 102 /
 * 132 bytes (before the P2P list's asynchronous copies; the stack's first length is no longer
 * 1) and the same interactions (a start list of one entry: the root) took 11% (cube) and 14%
 * (Plummer) more walk time at 2^20. */
#ifndef FMK_SUPER_MINB_LESS
#define FMK_SUPER_MINB_LESS 1
#endif
/* The breadth-first walk loads a node's moments only when it goes into the M2P list (1), or
 * with its centre for every node tested (0). */
#ifndef FMK_BH_LATE_MOMENTS
#define FMK_BH_LATE_MOMENTS 1
#endif
/* The breadth-first walk evaluates the M2P and P2P lists' full chunks of 32 while loads are in
 * flight (1): the M2P list's over a step's node loads, the P2P list's over the previous P2P
 * batch's copies (and with FMK_P2P_AT_START over the node loads too); those lists hold up to 63
 * entries. 0: as soon as a list holds 32 entries. (The expansion's list is evaluated as soon
 * as it is full either way: its chunk, held over the loads, spills more.) */
#ifndef FMK_BH_DEFER
#define FMK_BH_DEFER 1
#endif
/* The P2P list's sources: copied into shared memory asynchronously (cp.async) and made
 * relative to the walk's origin when their chunk is evaluated (1), or loaded and converted by
 * the lanes that add them (0). */
#ifndef FMK_BH_ASYNC_FILL
#define FMK_BH_ASYNC_FILL 1
#endif
/* The per-target tests of the leaves the group's box opens: two leaves at a time (1), so that
 * their shuffles and votes overlap, or one (0). */
#ifndef FMK_BH_MAC_PAIRS
#define FMK_BH_MAC_PAIRS 1
#endif
#ifndef FMK_LOCAL_INL
#define FMK_LOCAL_INL __forceinline__
#endif
/* The group's expansion held by the warp: lane k holds coefficient k < 32 in c[0]; LOC = 4
 * (35 coefficients) adds coefficients 32..34 in c[1..3], the same in every lane. LOC = 3 is
 * the kernel for orders 2 and 3 (a.local picks one at run time); LOC = 5 is order 4 for
 * eps2 = 0, the 25 coefficients with bz <= 1 (fmk_cuda_bh_local_harmonic). */
template <typename R, int LOC> struct local_acc {
    static constexpr int NC = LOC == 5   ? FMK_BH_HARM4
                              : LOC == 4 ? FMK_BH_LOCAL4
                                         : FMK_BH_LOCAL3; /* coefficients */
    static constexpr int EXTRA = NC > 32 ? NC - 32 : 0;
    R c[1 + EXTRA];
};

template <typename R, int ORDER, int LOC>
__device__ FMK_LOCAL_INL void bfs_m2l(const typename vec4<R>::type *__restrict__ node,
                                        const int32_t *list, int count, int local,
                                        const typename vec4<R>::type &c, R eps2,
                                        local_acc<R, LOC> &acc)
{
    typedef typename vec4<R>::type V;
    constexpr int EXTRA = local_acc<R, LOC>::EXTRA;
    const int lane = threadIdx.x & 31;
    R v[32 + EXTRA];
#pragma unroll
    for (int k = 0; k < 32 + EXTRA; k++)
        v[k] = 0;
    if (lane < count) {
        const int32_t i = list[lane];
        const V x = node[4 * i], m1 = node[4 * i + 1], m2 = node[4 * i + 2], m3 = node[4 * i + 3];
        const R m[FMK_BH_MOMENTS] = {m1.x, m1.y, m1.z, m1.w, m2.x, m2.y, m2.z, m2.w, m3.x, m3.y};
        m2l_order<LOC>(local, ORDER, c.x - x.x, c.y - x.y, c.z - x.z, eps2, m, v);
    }
    /* coefficients past the 32 lanes: summed over the warp by butterflies (all lanes) */
#pragma unroll
    for (int k = 0; k < EXTRA; k++) {
        R e = v[32 + k];
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            e += __shfl_xor_sync(0xffffffffu, e, d);
        acc.c[1 + k] += e;
    }
    reduce_step<16>(v, lane), reduce_step<8>(v, lane), reduce_step<4>(v, lane);
    reduce_step<2>(v, lane), reduce_step<1>(v, lane);
    acc.c[0] += v[0];
}

/* P2P over a list of sources. SOFT (eps2 > 0): t > 0 always, and the self term is left out
 * by index. Laplace (eps2 = 0): a coincident pair (the self term among them) adds nothing
 * (bh_terms.h's rule), so no index is needed, and GUARD = false skips that test for a list in
 * which no source lies in the group's box (no source there can coincide with a target). */
template <typename R, bool SELF, bool SOFT, bool GUARD, int T>
__device__ __forceinline__ void bfs_p2p(const typename vec4<R>::type *src, const int32_t *idx,
                                        int count, const int32_t (&t)[T], const R (&y)[T][3],
                                        R eps2, R (&phi)[T], R (&g)[T][3])
{
    typedef typename vec4<R>::type V;
    constexpr int U = FMK_P2P_UNROLL;
#pragma unroll U
    for (int e = 0; e < count; e++) {
        const V s = src[e];
        const int32_t j = SELF && SOFT ? idx[e] : 0;
#pragma unroll
        for (int k = 0; k < T; k++) {
            const R q = SELF && SOFT && j == t[k] ? (R)0 : s.w; /* the self term, by index */
            const R dx = s.x - y[k][0], dy = s.y - y[k][1], dz = s.z - y[k][2];
            const R r2 = SOFT ? fma(dx, dx, fma(dy, dy, fma(dz, dz, eps2)))
                              : fma(dx, dx, fma(dy, dy, dz * dz));
            R u = rsqrt_(r2);
            if (!SOFT && GUARD)
                u = r2 > 0 ? u : (R)0;
            const R qu = q * u, qu3 = qu * u * u;
            phi[k] += qu;
            g[k][0] = fma(qu3, dx, g[k][0]);
            g[k][1] = fma(qu3, dy, g[k][1]);
            g[k][2] = fma(qu3, dz, g[k][2]);
        }
    }
}

/* count <= 32 entries; any_in: some source lies in the group's box. */
template <typename R, bool SELF, int T>
__device__ __forceinline__ void bfs_p2p_any(const typename vec4<R>::type *src, const int32_t *idx,
                                            bool any_in, int count, const int32_t (&t)[T],
                                            const R (&y)[T][3], R eps2, R (&phi)[T], R (&g)[T][3])
{
    if (eps2 > 0)
        bfs_p2p<R, SELF, true, true, T>(src, idx, count, t, y, eps2, phi, g);
    else if (any_in)
        bfs_p2p<R, SELF, false, true, T>(src, idx, count, t, y, eps2, phi, g);
    else
        bfs_p2p<R, SELF, false, false, T>(src, idx, count, t, y, eps2, phi, g);
}

/* The most start-list entries (fmk_cuda_bh_super_cap at most this): a group walk puts its
 * list on its stack at once (896 slots), leaving room for the nodes it opens. */
constexpr int SUPER_LIST_MAX = 640;

/* The start of group walk wp with super-groups (k_walk_bfs, walk_args): its group (*w), its
 * super-group's start list on the stack, and the super-group's expansion at its T targets per
 * lane (L2P; init: T potentials, then 3 T gradient components, zeros when there is none).
 * Returns the list's length, -1 after an overflow (from the root: *w and init as well). Not
 * inlined: its registers stay out of the walk's (inlined, the walk's loop spilled more and
 * ran 11..14% slower on the same interactions: FMK_SUPER_MINB_LESS). */
template <typename R, int T>
__device__ __noinline__ int super_start(const int32_t *super_order, const int32_t *super_count,
                                        const int32_t *super_list, int super_cap, int super,
                                        const typename vec4<R>::type *super_centre,
                                        const R *super_local, int super_up,
                                        const int32_t *up_count,
                                        const typename vec4<R>::type *up_centre,
                                        const R *up_local, const int2 *groups,
                                        const typename vec4<R>::type *box,
                                        const typename vec4<R>::type *trg, const real4f *trg_lo,
                                        int64_t wp, int32_t *stack, int64_t *w, R *init)
{
    typedef typename vec4<R>::type V;
    const int lane = threadIdx.x & 31;
    const int64_t sg = wp / super;
    *w = super_order ? super_order[wp] : wp;
    const int32_t n = super_count[sg];
#pragma unroll
    for (int k = 0; k < 4 * T; k++)
        init[k] = 0;
    if (n < 0)
        return n;
    const int32_t *list = super_list + sg * super_cap;
    for (int e = lane; e < n; e += 32)
        stack[e] = list[e];
    /* the super-group's expansion, then its parent's (when the list came from the parent's) */
    const int64_t up = super_up ? wp / super_up : 0;
    const int levels = super_up && up_count[up] >= 0 ? 2 : 1;
    for (int lv = 0; lv < levels; lv++) {
        const int64_t s = lv ? up : sg;
        const R *local = lv ? up_local : super_local;
        const V cs = lv ? up_centre[s] : super_centre[sg];
        if (cs.w == 0)
            continue;
        R L[FMK_BH_LOCAL4];
#pragma unroll
        for (int k = 0; k < FMK_BH_LOCAL4; k++)
            L[k] = local[s * FMK_BH_LOCAL4 + k];
        const int2 grp = groups[*w];
        /* y - cs = (y - o) + (o - cs), o the walk's origin; fp32: o - cs exact (two numbers
         * of one binade) */
        const V o = walk_origin<R>(box[2 * *w]);
        const R sx = o.x - cs.x, sy = o.y - cs.y, sz = o.z - cs.z;
#pragma unroll
        for (int k = 0; k < T; k++) {
            const int32_t t = grp.x + lane + 32 * k;
            const V p = rel_point<R>(trg, trg_lo, t < grp.y ? t : grp.x, o);
            l2p_order<4>(4, L, p.x + sx, p.y + sy, p.z + sz, &init[k], &init[T + 3 * k]);
        }
    }
    return n;
}

/* LOC: 0 no cell-to-group step; 3 the step of order a.local (2 or 3); 4 the step of order 4;
 * 5 that of order 4 for eps2 = 0 (its harmonic coefficients). SUPER (LOC 4 and 5): the walk
 * starts from its super-group's start list (a.super, k_walk_super). */
template <typename R, int ORDER, bool SELF, int T, int LOC, bool SUPER = false>
__global__ void __launch_bounds__(bfs_cfg<R>::WARPS * 32,
                                  LOC && sizeof(R) == 4
                                      ? bfs_cfg<R>::blocks(
                                            4 * (FMK_LOCAL_MINB - (SUPER ? FMK_SUPER_MINB_LESS : 0)))
                                      : bfs_cfg<R>::MIN_BLOCKS)
    k_walk_bfs(walk_args<R> a)
{
    typedef typename vec4<R>::type V;
    constexpr bool LOCAL = LOC != 0;
    /* STACK: nodes waiting per warp (the deepest seen at 2^20 was 408 (cube) and 620 (Plummer,
     * with super-groups); a stack of 480 lets 24 warps of the walk without super-groups fit an
     * SM: cube walk -2%, but a deeper walk would sum more nodes directly) */
    constexpr int WARPS = bfs_cfg<R>::WARPS, STACK = LOCAL ? 896 : 960;
    constexpr unsigned FULL = 0xffffffffu;
    __shared__ V s_node[WARPS][64][4]; /* accepted nodes, packed by bfs_pack */
    __shared__ V s_src[WARPS][64];     /* sources of opened leaves (copied, then relative to o) */
#if FMK_BH_ASYNC_FILL
    __shared__ real4f s_lo[WARPS][sizeof(R) == 4 ? 64 : 1]; /* fp32: their rests (copied) */
#else
    __shared__ unsigned char s_inbox[WARPS][64]; /* P2P source in the group's box */
#endif
    __shared__ int32_t s_idx[WARPS][SELF ? 64 : 1];
    __shared__ int32_t s_first[WARPS][32]; /* a P2P batch's source ranges by first position */
    __shared__ int32_t s_stack[WARPS][STACK];
    __shared__ int32_t s_loc[WARPS][LOCAL ? 64 : 1]; /* nodes for the group's expansion */
    const int wb = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (charges_bad(a.stats))
        return;
    /* the walks of this warp: one (a.ticket NULL), or one after another by tickets */
    int64_t wp = a.ticket ? take_ticket(a.ticket) : blockIdx.x * (int64_t)WARPS + wb;
    while (wp < a.n_groups * a.parts) {
#ifdef FMK_BH_TRACE
        const unsigned long long tr0 = trace_clock();
#endif
#ifdef FMK_BH_COUNT
        long long k_m2p = 0, k_p2p = 0, k_loc = 0, k_l2p = 0;
        const long long k_start = clock64();
#define BH_CLOCK(var, stmt)                                                                     \
        do {                                                                                    \
            const long long t0_ = clock64();                                                    \
            stmt;                                                                               \
            var += clock64() - t0_;                                                             \
        } while (0)
#else
#define BH_CLOCK(var, stmt) stmt
#endif
        int64_t w = wp / a.parts; /* the group */
        const int part = (int)(wp % a.parts);
        /* super-groups (walk_args): the start list replaces the root, unless it overflowed */
        int32_t n_start = -1; /* start-list entries; -1: from the root */
        R init[4 * T];        /* the super-group's expansion at the targets */
        if (SUPER)
            n_start = super_start<R, T>(a.super_order, a.super_count, a.super_list, a.super_cap,
                                        a.super, a.super_centre, a.super_local, a.super_up,
                                        a.up_count, a.up_centre, a.up_local, a.groups, a.box,
                                        a.trg, a.trg_lo, wp, s_stack[wb], &w, init);
        V(*node_list)[4] = s_node[wb];
        V *src_list = s_src[wb];
        int32_t *idx_list = s_idx[wb];
#if FMK_BH_ASYNC_FILL
        real4f *lo_list = s_lo[wb];
#else
        unsigned char *inbox_list = s_inbox[wb];
#endif
        int32_t *first_at = s_first[wb];
        int32_t *stack = s_stack[wb];
        int32_t *loc_list = s_loc[wb];
        const unsigned lt = (1u << lane) - 1;

        const int2 grp = a.groups[w];
        const V c = a.box[2 * w], h = a.box[2 * w + 1];
        /* positions relative to o (rel_point): the targets here, the P2P list's sources as they
         * enter it, node centres as they are tested or packed; cr = c - o */
        const V o = walk_origin<R>(c);
        const R crx = sizeof(R) == 4 ? (R)0 : c.x, cry = sizeof(R) == 4 ? (R)0 : c.y,
                crz = sizeof(R) == 4 ? (R)0 : c.z;
        int32_t t[T];
        R y[T][3], phi[T], g[T][3];
#pragma unroll
        for (int k = 0; k < T; k++) {
            t[k] = grp.x + lane + 32 * k;
            const V p = rel_point<R>(a.trg, a.trg_lo, t[k] < grp.y ? t[k] : grp.x, o);
            y[k][0] = p.x, y[k][1] = p.y, y[k][2] = p.z;
            phi[k] = 0, g[k][0] = g[k][1] = g[k][2] = 0;
        }
        int sp = 1; /* warp-uniform */
        if (SUPER && n_start >= 0) {
            sp = n_start;
#pragma unroll
            for (int k = 0; k < T; k++)
                phi[k] = init[k], g[k][0] = init[T + 3 * k], g[k][1] = init[T + 3 * k + 1],
                g[k][2] = init[T + 3 * k + 2];
        } else if (lane == 0) {
            stack[0] = 0; /* the root */
        }
        /* The lists are rings of 64 entries: the n entries waiting start at head (0 or 32), so a
         * full chunk of 32 is contiguous and is evaluated in place (no copying). With FMK_BH_DEFER
         * the M2P and P2P lists are evaluated before entries are added when they hold 32 or more
         * (then at most 31 + 32 = 63 entries), so that the chunk's work overlaps the loads of what
         * is added. */
        int n_m2p = 0, n_p2p = 0, h_m2p = 0, h_p2p = 0; /* warp-uniform */
        /* The cell-to-group step: an accepted node goes into the group's expansion about c when its
         * centre is farther than a r_open + local_k R_g from c (a = fmk_cuda_bh_local_open); every
         * target of the group (within R_g of c) is outside its opening sphere (it was
         * accepted), and |y - c| / |xc - c| < 1 / local_k. Lane k holds coefficient k of the
         * expansion. */
        const R loc_r = a.local_k * sqrt(h.x * h.x + h.y * h.y + h.z * h.z);
        int n_loc = 0, h_loc = 0;
        bool any_loc = false;
        local_acc<R, LOC ? LOC : 3> loc = {};
        /* A source that can coincide with a target lies in the group's box (which holds them up
         * to the rounding of its centre: a margin of 2^-20 of the coordinates, 2^-10 of the
         * box). */
        const R mx = fabs(c.x) * (R)0x1p-20 + h.x * (R)(1 + 0x1p-10);
        const R my = fabs(c.y) * (R)0x1p-20 + h.y * (R)(1 + 0x1p-10);
        const R mz = fabs(c.z) * (R)0x1p-20 + h.z * (R)(1 + 0x1p-10);
        auto in_box = [&](const V &p) -> unsigned char { /* p relative to o */
            return fabs(p.x - crx) <= mx && fabs(p.y - cry) <= my && fabs(p.z - crz) <= mz;
        };
        /* Evaluates the first 32 entries of a list and moves the rest (< 32) to the front. */
        auto m2p_chunk = [&]() {
            BH_CLOCK(k_m2p, (bfs_m2p<R, ORDER, T>(node_list + h_m2p, 32, y, a.eps2, phi, g)));
            h_m2p ^= 32, n_m2p -= 32;
            __syncwarp(); /* the slots are written again */
        };
        auto loc_chunk = [&]() {
            BH_CLOCK(k_loc, (bfs_m2l<R, ORDER, LOC ? LOC : 3>(a.node, loc_list + h_loc, 32, a.local,
                                                              c, a.eps2, loc)));
            h_loc ^= 32, n_loc -= 32;
            __syncwarp();
        };
        /* The P2P list's sources arrive by asynchronous copies (cp.async: the point and, fp32,
         * its rest); a chunk's count entries are made relative to o, one per lane, when it is
         * evaluated. Returns whether one of them lies in the group's box. */
        auto p2p_ready = [&](int count) -> bool {
#if !FMK_BH_ASYNC_FILL
            return __any_sync(FULL, lane < count && inbox_list[(h_p2p + lane) & 63]);
#else
            __pipeline_wait_prior(0);
            __syncwarp(); /* the other lanes' copies */
            bool in = false;
            if (lane < count) {
                const int at = (h_p2p + lane) & 63;
                V v = src_list[at];
                if (sizeof(R) == 4) {
                    const real4f r = lo_list[sizeof(R) == 4 ? at : 0];
                    v.x = (v.x - o.x) + (R)r.x, v.y = (v.y - o.y) + (R)r.y;
                    v.z = (v.z - o.z) + (R)r.z;
                    src_list[at] = v;
                }
                in = in_box(v);
            }
            const bool any_in = __any_sync(FULL, in);
            __syncwarp();
            return any_in;
#endif
        };
        auto p2p_chunk = [&]() {
            const bool any_in = p2p_ready(32);
            BH_CLOCK(k_p2p, (bfs_p2p_any<R, SELF, T>(src_list + h_p2p,
                                                     idx_list + (SELF ? h_p2p : 0), any_in, 32,
                                                     t, y, a.eps2, phi, g)));
            h_p2p ^= 32, n_p2p -= 32;
            __syncwarp();
        };
#ifdef FMK_BH_COUNT
        long long c_m2p = 0, c_p2p = 0, c_steps = 0, c_over = 0, c_depth = 0, c_loc = 0;
        long long c_cand = 0, c_okc = 0, k_mac = 0, k_push = 0;
        long long c_open[7] = {0, 0, 0, 0, 0, 0, 0};
#endif
        __syncwarp();
        while (sp > 0) {
#ifdef FMK_BH_COUNT
            c_steps++;
#endif
            const int nb = sp < 32 ? sp : 32;
            sp -= nb;
            const bool valid = lane < nb;
            const int32_t i = valid ? stack[sp + lane] : 0;
            __syncwarp(); /* the popped slots are overwritten below */
            /* the batch's loads for the tests at once: one latency (the moments below, for the
             * nodes that go into the M2P list only) */
            const int4 l = __ldg(&a.links[i]);
            const int32_t nc = __ldg(&a.n_children[i]);
            const V x = a.node[4 * i];
#if !FMK_BH_LATE_MOMENTS
            const V m1 = a.node[4 * i + 1], m2 = a.node[4 * i + 2], m3 = a.node[4 * i + 3];
#endif
#if FMK_BH_DEFER
            /* the full chunks of the previous step, while the loads are in flight (the P2P list's
             * before the next batch's copies, FMK_P2P_AT_START) */
            if (n_m2p >= 32)
                m2p_chunk();
            if (FMK_P2P_AT_START && n_p2p >= 32)
                p2p_chunk();
#endif
            const R dx = fmax(fabs(x.x - c.x) - h.x, (R)0);
            const R dy = fmax(fabs(x.y - c.y) - h.y, (R)0);
            const R dz = fmax(fabs(x.z - c.z) - h.z, (R)0);
            bool far = dx * dx + dy * dy + dz * dz > x.w;
            const int32_t cnt = l.w - l.z;
            /* the split (walk_args): mine = this part sums the node, skip = another part's
             * subtree */
            bool mine = true, skip = false;
            if (a.parts > 1) {
                if (i < a.split_begin)
                    mine = i % a.parts == part;
                else if (i < a.split_end)
                    skip = (i - a.split_begin) % a.parts != part;
            }
#ifdef FMK_BH_COUNT
            const long long t_mac = clock64();
#endif
            if (a.mac) { /* fmk_cuda_bh_mac: the nodes the box opens, tested at every target */
                unsigned cand = __ballot_sync(FULL, valid && !skip && !far &&
                                                        cnt > p2p_cut<ORDER>::value &&
                                                        (a.mac == 1 || l.x < 0));
                unsigned ok = 0;
#if FMK_BH_MAC_PAIRS
                while (cand) { /* two leaves at a time (the second may repeat the first) */
                    const int f = __ffs(cand) - 1;
                    cand &= cand - 1;
                    const int f2 = cand ? __ffs(cand) - 1 : f;
                    cand &= cand - 1;
                    /* o is the same in every lane */
                    const R rs = x.w * (l.x < 0 ? a.leaf_r2 : a.inner_r2);
                    const R nx = __shfl_sync(FULL, x.x, f) - o.x,
                            ny = __shfl_sync(FULL, x.y, f) - o.y,
                            nz = __shfl_sync(FULL, x.z, f) - o.z, r2 = __shfl_sync(FULL, rs, f);
                    const R nx2 = __shfl_sync(FULL, x.x, f2) - o.x,
                            ny2 = __shfl_sync(FULL, x.y, f2) - o.y,
                            nz2 = __shfl_sync(FULL, x.z, f2) - o.z, r22 = __shfl_sync(FULL, rs, f2);
                    const bool all1 =
                        __all_sync(FULL, targets_far<R, T>(t, grp.y, y, nx, ny, nz, r2));
                    const bool all2 =
                        __all_sync(FULL, targets_far<R, T>(t, grp.y, y, nx2, ny2, nz2, r22));
                    ok |= (all1 ? 1u << f : 0u) | (all2 ? 1u << f2 : 0u);
                }
#else
                while (cand) {
                    const int f = __ffs(cand) - 1;
                    cand &= cand - 1;
                    /* o is the same in every lane */
                    const R nx = __shfl_sync(FULL, x.x, f) - o.x,
                            ny = __shfl_sync(FULL, x.y, f) - o.y,
                            nz = __shfl_sync(FULL, x.z, f) - o.z,
                            r2 = __shfl_sync(FULL, x.w * (l.x < 0 ? a.leaf_r2 : a.inner_r2), f);
                    if (__all_sync(FULL, targets_far<R, T>(t, grp.y, y, nx, ny, nz, r2)))
                        ok |= 1u << f;
                }
#endif
                far = far || (ok >> lane & 1u);
#ifdef FMK_BH_COUNT
                c_cand += __popc(__ballot_sync(FULL, valid && !skip &&
                                                         cnt > p2p_cut<ORDER>::value && l.x < 0 &&
                                                         !(dx * dx + dy * dy + dz * dz > x.w)));
                c_okc += __popc(ok);
                { /* the leaves still opened: their points by how many of the targets open them */
                    unsigned cc = __ballot_sync(FULL, valid && !skip && !far &&
                                                          cnt > p2p_cut<ORDER>::value && l.x < 0);
                    while (cc) {
                        const int f = __ffs(cc) - 1;
                        cc &= cc - 1;
                        const R nx = __shfl_sync(FULL, x.x, f) - o.x,
                                ny = __shfl_sync(FULL, x.y, f) - o.y,
                                nz = __shfl_sync(FULL, x.z, f) - o.z,
                                r2 = __shfl_sync(FULL, x.w * a.leaf_r2, f);
                        const int kn = __popc(
                            __ballot_sync(FULL, !targets_far<R, T>(t, grp.y, y, nx, ny, nz, r2)));
                        const int n = __shfl_sync(FULL, cnt, f);
                        c_open[kn <= 1    ? 0
                               : kn <= 4  ? 1
                               : kn <= 8  ? 2
                               : kn <= 16 ? 3
                               : kn <= 24 ? 4
                                          : 5] += n;
                        c_open[6] += kn * n;
                    }
                }
#endif
            }
#ifdef FMK_BH_COUNT
            k_mac += clock64() - t_mac;
            const long long t_push = clock64();
#endif
            const bool accept = valid && !skip && mine && far && cnt > p2p_cut<ORDER>::value;
            bool direct = valid && !skip && mine && !accept && (far || l.x < 0);
            bool open = valid && !skip && !far && l.x >= 0;

            /* accepted nodes far enough from the group -> its expansion, the others -> M2P list,
             * whose moments are loaded now (used after the stack's update) */
            bool to_loc = false;
            if (LOCAL && accept) {
                const R ex = x.x - c.x, ey = x.y - c.y, ez = x.z - c.z;
                const R d = sqrt(ex * ex + ey * ey + ez * ez) - loc_r;
                to_loc = d > 0 && d * d > a.local_a2 * x.w;
            }
#if FMK_BH_LATE_MOMENTS
            V m1, m2, m3;
            if (accept && !to_loc)
                m1 = a.node[4 * i + 1], m2 = a.node[4 * i + 2], m3 = a.node[4 * i + 3];
#endif

            /* children to push: warp scan of the counts */
            int32_t push = open ? nc : 0;
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                const int32_t v = __shfl_up_sync(FULL, push, d);
                if (lane >= d)
                    push += v;
            }
            const int32_t pushed = __shfl_sync(FULL, push, 31);
            if (sp + pushed > STACK) { /* no room: sum the opened nodes directly */
#ifdef FMK_BH_COUNT
                c_over++;
#endif
                /* Above the split level the parts would disagree on which nodes they sum: the
                 * host redoes such a walk unsplit. */
                if (a.parts > 1 && __any_sync(FULL, open && i < a.split_begin) && lane == 0)
                    atomicOr(a.overflow, 1ull);
                direct = direct || (open && mine);
                open = false;
            } else {
                if (open)
                    for (int32_t k = 0, at = sp + push - nc; k < nc; k++)
                        stack[at + k] = l.x + k;
                sp += pushed;
            }
#ifdef FMK_BH_COUNT
            c_depth = sp > c_depth ? sp : c_depth;
#endif

#ifdef FMK_BH_COUNT
            k_push += clock64() - t_push;
#endif
            const unsigned loc_mask = __ballot_sync(FULL, to_loc);
            if (LOCAL && loc_mask) {
                if (to_loc)
                    loc_list[(h_loc + n_loc + __popc(loc_mask & lt)) & 63] = i;
                n_loc += __popc(loc_mask);
                any_loc = true;
#ifdef FMK_BH_COUNT
                c_loc += __popc(loc_mask);
#endif
                __syncwarp();
                if (n_loc >= 32)
                    loc_chunk();
            }
            const unsigned acc_mask = __ballot_sync(FULL, accept && !to_loc);
            if (accept && !to_loc) {
                V xo = x; /* the centre relative to o */
                xo.x = x.x - o.x, xo.y = x.y - o.y, xo.z = x.z - o.z;
                bfs_pack<R, ORDER>(xo, m1, m2, m3, a.eps2,
                                   node_list[(h_m2p + n_m2p + __popc(acc_mask & lt)) & 63]);
            }
            n_m2p += __popc(acc_mask);
#ifdef FMK_BH_COUNT
            c_m2p += __popc(acc_mask);
#endif
            __syncwarp();
            if (!FMK_BH_DEFER && n_m2p >= 32)
                m2p_chunk();

            /* sources of directly summed nodes -> P2P list, 32 at a time */
            int32_t incl = direct ? cnt : 0;
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                const int32_t v = __shfl_up_sync(FULL, incl, d);
                if (lane >= d)
                    incl += v;
            }
            const int32_t total = __shfl_sync(FULL, incl, 31);
#ifdef FMK_BH_COUNT
            c_p2p += total;
#endif
            /* source = first + position; this lane's positions are [excl, incl) */
            const int32_t excl = incl - (direct ? cnt : 0), first = l.z - excl;
            for (int32_t base = 0; base < total; base += 32) {
                /* the batch's positions [base, base + 32): the range holding base and the ranges
                 * starting in it write their first at their start's slot (bit in starts); a
                 * position's range is the one of the highest slot at or below it */
                unsigned bit = 0;
                if (direct && cnt > 0) {
                    if (excl <= base && base < incl)
                        first_at[0] = first;
                    else if (excl > base && excl < base + 32)
                        first_at[excl - base] = first, bit = 1u << (excl - base);
                }
#if __CUDA_ARCH__ >= 800
                const unsigned starts = __reduce_or_sync(FULL, bit) | 1u;
#else
                unsigned starts = bit | 1u;
#pragma unroll
                for (int d = 16; d > 0; d >>= 1)
                    starts |= __shfl_xor_sync(FULL, starts, d);
#endif
                __syncwarp();
                const int slot = 31 - __clz(starts & (0xffffffffu >> (31 - lane)));
                const int32_t j = first_at[slot] + base + lane;
                const int k = total - base < 32 ? total - base : 32;
#if FMK_BH_ASYNC_FILL
#if FMK_BH_DEFER
                if (n_p2p >= 32) /* before the copies: p2p_ready waits for all of them */
                    p2p_chunk();
#endif
                __syncwarp(); /* first_at is written again by the next batch */
                if (lane < k) {
                    const int at = (h_p2p + n_p2p + lane) & 63;
                    /* 16 bytes a copy (fp64: a point in two) */
                    for (int b = 0; b < (int)(sizeof(V) / 16); b++)
                        __pipeline_memcpy_async((char *)&src_list[at] + 16 * b,
                                                (const char *)&a.src[j] + 16 * b, 16);
                    if (sizeof(R) == 4)
                        __pipeline_memcpy_async(&lo_list[sizeof(R) == 4 ? at : 0], &a.src_lo[j],
                                                sizeof(real4f));
                    if (SELF && a.eps2 > 0)
                        idx_list[at] = j;
                }
                __pipeline_commit();
#else
                V sv;
                if (lane < k)
                    sv = rel_point<R>(a.src, a.src_lo, j, o);
#if FMK_BH_DEFER
                if (n_p2p >= 32) /* while the loads are in flight */
                    p2p_chunk();
#endif
                __syncwarp(); /* first_at is written again by the next batch */
                if (lane < k) {
                    const int at = (h_p2p + n_p2p + lane) & 63;
                    src_list[at] = sv;
                    if (SELF && a.eps2 > 0)
                        idx_list[at] = j;
                    inbox_list[at] = in_box(sv);
                }
#endif
                n_p2p += k;
                __syncwarp();
                if (!FMK_BH_DEFER && n_p2p >= 32)
                    p2p_chunk();
            }
        }
        if (FMK_BH_DEFER && n_m2p >= 32)
            m2p_chunk();
        if (FMK_BH_DEFER && n_p2p >= 32)
            p2p_chunk();
        BH_CLOCK(k_m2p, (bfs_m2p<R, ORDER, T>(node_list + h_m2p, n_m2p, y, a.eps2, phi, g)));
        {
            const bool any_in = p2p_ready(n_p2p);
            BH_CLOCK(k_p2p, (bfs_p2p_any<R, SELF, T>(src_list + h_p2p,
                                                     idx_list + (SELF ? h_p2p : 0), any_in,
                                                     n_p2p, t, y, a.eps2, phi, g)));
        }
        /* the rest of the lists, then the group's expansion at each target (L2P) */
        if (LOCAL && any_loc) {
            if (n_loc > 0)
                BH_CLOCK(k_loc, (bfs_m2l<R, ORDER, LOC ? LOC : 3>(a.node, loc_list + h_loc, n_loc,
                                                                  a.local, c, a.eps2, loc)));
#ifdef FMK_BH_COUNT
            const long long t_l2p = clock64();
#endif
            constexpr int NC = local_acc<R, LOC ? LOC : 3>::NC;
            R H[NC];
#pragma unroll
            for (int k = 0; k < NC; k++)
                H[k] = k < 32 ? __shfl_sync(FULL, loc.c[0], k) : loc.c[k < 32 ? 0 : k - 31];
            /* LOC = 5: the coefficients with bz >= 2 from Laplace's equation */
            R L[LOC == 5 ? FMK_BH_LOCAL4 : NC];
            if (LOC == 5)
                local4_from_harm(H, L);
            else
#pragma unroll
                for (int k = 0; k < NC; k++)
                    L[k] = H[k];
#pragma unroll
            for (int k = 0; k < T; k++)
                l2p_order<LOC == 5 ? 4 : LOC ? LOC : 3>(a.local, L, y[k][0] - crx, y[k][1] - cry,
                                                        y[k][2] - crz, &phi[k], g[k]);
#ifdef FMK_BH_COUNT
            k_l2p += clock64() - t_l2p;
#endif
        }
#undef BH_CLOCK
#ifdef FMK_BH_COUNT
        if (lane == 0) {
            const long long nt = grp.y - grp.x;
            atomicAdd(&fmk_bh_counts[0], (unsigned long long)nt);
            atomicAdd(&fmk_bh_counts[1], (unsigned long long)(c_m2p * nt));
            atomicAdd(&fmk_bh_counts[2], (unsigned long long)(c_p2p * nt));
            atomicAdd(&fmk_bh_counts[3], (unsigned long long)c_steps);
            atomicAdd(&fmk_bh_counts[4], (unsigned long long)c_over);
            atomicAdd(&fmk_bh_counts[5], 1ull);
            atomicMax(&fmk_bh_counts[6], (unsigned long long)c_depth);
            atomicAdd(&fmk_bh_counts[7], (unsigned long long)(c_loc * nt));
            const long long k_all = clock64() - k_start;
            atomicAdd(&fmk_bh_counts[9], (unsigned long long)k_m2p);
            atomicAdd(&fmk_bh_counts[10], (unsigned long long)k_p2p);
            atomicAdd(&fmk_bh_counts[11], (unsigned long long)k_loc);
            atomicAdd(&fmk_bh_counts[13], (unsigned long long)k_l2p);
            atomicAdd(&fmk_bh_counts[14], (unsigned long long)k_all);
            atomicMax(&fmk_bh_counts[15], (unsigned long long)k_all);
            atomicAdd(&fmk_bh_counts[16], (unsigned long long)c_cand);
            atomicAdd(&fmk_bh_counts[17], (unsigned long long)c_okc);
            atomicAdd(&fmk_bh_counts[18], (unsigned long long)k_mac);
            atomicAdd(&fmk_bh_counts[19], (unsigned long long)k_push);
            for (int b = 0; b < 7; b++)
                atomicAdd(&fmk_bh_counts[24 + b], (unsigned long long)c_open[b]);
        }
#endif
#pragma unroll
        for (int k = 0; k < T; k++)
            if (t[k] < grp.y)
                store(a, t[k], phi[k], g[k], 1.0 / charge_scale<R>(a.stats), part);
#ifdef FMK_BH_TRACE
        trace_put(tr0, 0, (float)sqrt(h.x * h.x + h.y * h.y + h.z * h.z), (unsigned)w);
#endif
        if (!a.ticket)
            break;
        __syncwarp(); /* the lists' slots and the stack are written again */
        wp = take_ticket(a.ticket);
    }
}

/* The super-groups' walk (fmk_cuda_bh_super, walk_args): one warp per super-group of
 * a.super consecutive groups of a.super_order, from the root, breadth-first as k_walk_bfs
 * (32 nodes per step), with the super-group's box B (the union of its groups' boxes, widened
 * by the rounding of its centre) and the tests of the group walk. A node that B's box test
 * accepts and whose centre is farther than a r_open + local_k R_B from B's centre (the
 * cell-to-group step's rule with B for the group's box) goes into the super-group's expansion
 * (bfs_m2l), which is written out once (FMK_BH_LOCAL4 coefficients). A node that B opens is
 * opened when every group box of the super-group opens it too (a.super_open = 0) or always
 * (1). Every other node (accepted by B but too near for the expansion, leaves, nodes some
 * group accepts) goes to the start list. Each group box lies in B, so a node in the expansion
 * passes the group's own tests (box test and the step's rule), and every node of the tree is
 * either in the expansion, in the list, or under an opened node: each source reaches each
 * target once. A list that would exceed a.super_cap entries is dropped (count -1: the groups
 * walk from the root). With a second level (a.super_up) the walk starts from the parent's
 * start list instead of the root (whose nodes the parent neither took nor opened: the same
 * cover of the tree), unless that list overflowed. */
#ifndef FMK_SUPER_WARPS
#define FMK_SUPER_WARPS 1
#endif
constexpr int SUPER_WARPS = FMK_SUPER_WARPS, SUPER_STACK = 1024;

template <typename R, int ORDER, int LOC>
__global__ void __launch_bounds__(SUPER_WARPS * 32) k_walk_super(walk_args<R> a)
{
    typedef typename vec4<R>::type V;
    constexpr unsigned FULL = 0xffffffffu;
    __shared__ int32_t s_stack[SUPER_WARPS][SUPER_STACK];
    __shared__ int32_t s_loc[SUPER_WARPS][64];
    __shared__ V s_gbox[SUPER_WARPS][32][2];
    const int wb = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t sg = blockIdx.x * (int64_t)SUPER_WARPS + wb;
    if (sg * a.super >= a.n_groups || charges_bad(a.stats))
        return;
#ifdef FMK_BH_TRACE
    const unsigned long long tr0 = trace_clock();
#endif
    int32_t *stack = s_stack[wb], *loc_list = s_loc[wb];
    V(*gbox)[2] = s_gbox[wb];
    const unsigned lt = (1u << lane) - 1;
    const int64_t g0 = sg * a.super;
    const int ng = (int)(a.n_groups - g0 < a.super ? a.n_groups - g0 : a.super);

    /* the super box: the union of the group boxes, reduced over the lanes */
    R lo[3] = {(R)1e30, (R)1e30, (R)1e30}, hi[3] = {(R)-1e30, (R)-1e30, (R)-1e30};
    if (lane < ng) {
        const int32_t gi = a.super_order ? a.super_order[g0 + lane] : (int32_t)(g0 + lane);
        const V c = a.box[2 * gi], h = a.box[2 * gi + 1];
        gbox[lane][0] = c, gbox[lane][1] = h;
        lo[0] = c.x - h.x, lo[1] = c.y - h.y, lo[2] = c.z - h.z;
        hi[0] = c.x + h.x, hi[1] = c.y + h.y, hi[2] = c.z + h.z;
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
#pragma unroll
        for (int k = 0; k < 3; k++) {
            lo[k] = fmin(lo[k], __shfl_xor_sync(FULL, lo[k], d));
            hi[k] = fmax(hi[k], __shfl_xor_sync(FULL, hi[k], d));
        }
    V c, h; /* centre, half sizes: a margin of 2^-20 of the coordinates for the rounding */
    c.x = (lo[0] + hi[0]) / 2, c.y = (lo[1] + hi[1]) / 2, c.z = (lo[2] + hi[2]) / 2, c.w = 0;
    h.x = (hi[0] - lo[0]) / 2 + fabs(c.x) * (R)0x1p-20;
    h.y = (hi[1] - lo[1]) / 2 + fabs(c.y) * (R)0x1p-20;
    h.z = (hi[2] - lo[2]) / 2 + fabs(c.z) * (R)0x1p-20;
    h.w = 0;
    /* the step's radius: k R_B, and at least k R_g + |c - c_g| for each group g (so that the
     * group's own rule, |xc - c_g| > a r_open + k R_g, holds for every node it takes) */
    R lr = 0;
    if (lane < ng) {
        const V gc = gbox[lane][0], gh = gbox[lane][1];
        const R ux = c.x - gc.x, uy = c.y - gc.y, uz = c.z - gc.z;
        lr = a.local_k * sqrt(gh.x * gh.x + gh.y * gh.y + gh.z * gh.z) +
             sqrt(ux * ux + uy * uy + uz * uz);
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        lr = fmax(lr, __shfl_xor_sync(FULL, lr, d));
    const R loc_r = fmax(a.super_k * sqrt(h.x * h.x + h.y * h.y + h.z * h.z), lr);

    int32_t *out = a.super_list + sg * a.super_cap;
    int sp = 1, n_out = 0, n_loc = 0, h_loc = 0; /* warp-uniform */
    const int64_t up = a.super_up ? g0 / a.super_up : 0;
    const int32_t n_up = a.super_up ? a.up_count[up] : -1; /* < 0: from the root */
    bool any_loc = false, over = false;
    local_acc<R, LOC> loc = {};
#ifdef FMK_BH_COUNT
    long long c_steps = 0, c_loc = 0;
#endif
    if (n_up >= 0) { /* the parent's list (at most up_cap <= SUPER_LIST_MAX entries) */
        for (int e = lane; e < n_up; e += 32)
            stack[e] = a.up_list[up * a.up_cap + e];
        sp = n_up;
    } else if (lane == 0) {
        stack[0] = 0;
    }
    __syncwarp();
    while (sp > 0) {
#ifdef FMK_BH_COUNT
        c_steps++;
#endif
        const int nb = sp < 32 ? sp : 32;
        sp -= nb;
        const bool valid = lane < nb;
        const int32_t i = valid ? stack[sp + lane] : 0;
        __syncwarp();
        const int4 l = __ldg(&a.links[i]);
        const int32_t nc = __ldg(&a.n_children[i]);
        const V x = a.node[4 * i];
        const R dx = fmax(fabs(x.x - c.x) - h.x, (R)0);
        const R dy = fmax(fabs(x.y - c.y) - h.y, (R)0);
        const R dz = fmax(fabs(x.z - c.z) - h.z, (R)0);
        const bool far = dx * dx + dy * dy + dz * dz > x.w;
        bool to_loc = false;
        if (valid && far && l.w - l.z > p2p_cut<ORDER>::value) {
            const R ex = x.x - c.x, ey = x.y - c.y, ez = x.z - c.z;
            const R d = sqrt(ex * ex + ey * ey + ez * ez) - loc_r;
            to_loc = d > 0 && d * d > a.local_a2 * x.w;
        }
        bool open = valid && !far && l.x >= 0;
        if (open && !a.super_open) /* opened only if no group box accepts it */
            for (int k = 0; k < ng && open; k++) {
                const V gc = gbox[k][0], gh = gbox[k][1];
                const R gx = fmax(fabs(x.x - gc.x) - gh.x, (R)0);
                const R gy = fmax(fabs(x.y - gc.y) - gh.y, (R)0);
                const R gz = fmax(fabs(x.z - gc.z) - gh.z, (R)0);
                open = !(gx * gx + gy * gy + gz * gz > x.w);
            }
        int32_t push = open ? nc : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int32_t v = __shfl_up_sync(FULL, push, d);
            if (lane >= d)
                push += v;
        }
        const int32_t pushed = __shfl_sync(FULL, push, 31);
        bool emit = valid && !to_loc && !open;
        if (sp + pushed > SUPER_STACK) { /* no room: the group walks open them */
            emit = emit || open;
        } else {
            if (open)
                for (int32_t k = 0, at = sp + push - nc; k < nc; k++)
                    stack[at + k] = l.x + k;
            sp += pushed;
        }
        const unsigned loc_mask = __ballot_sync(FULL, to_loc);
        if (loc_mask) {
            if (to_loc)
                loc_list[(h_loc + n_loc + __popc(loc_mask & lt)) & 63] = i;
            n_loc += __popc(loc_mask);
            any_loc = true;
#ifdef FMK_BH_COUNT
            c_loc += __popc(loc_mask);
#endif
            __syncwarp();
            if (n_loc >= 32) {
                bfs_m2l<R, ORDER, LOC>(a.node, loc_list + h_loc, 32, a.local, c, a.eps2, loc);
                h_loc ^= 32, n_loc -= 32;
                __syncwarp();
            }
        }
        const unsigned emit_mask = __ballot_sync(FULL, emit);
        if (n_out + __popc(emit_mask) > a.super_cap) {
            over = true;
            break;
        }
        if (emit)
            out[n_out + __popc(emit_mask & lt)] = i;
        n_out += __popc(emit_mask);
        __syncwarp(); /* the stack's slots */
    }
#ifdef FMK_BH_COUNT
    if (lane == 0) {
        unsigned long long *sc = fmk_bh_super_counts + (a.super_up ? 0 : a.up_count ? 6 : 0);
        atomicAdd(&sc[0], 1ull);
        atomicAdd(&sc[1], (unsigned long long)n_out);
        atomicAdd(&sc[2], (unsigned long long)c_loc);
        atomicAdd(&sc[3], (unsigned long long)c_steps);
        atomicAdd(&sc[4], over ? 1ull : 0ull);
        atomicMax(&sc[5], (unsigned long long)n_out);
    }
#endif
#ifdef FMK_BH_TRACE
    trace_put(tr0, a.super_up ? 1 : a.up_count ? 2 : 1, over ? -1.0f : (float)n_out, (unsigned)sg);
#endif
    if (over) {
        if (lane == 0)
            a.super_count[sg] = -1;
        return;
    }
    if (n_loc > 0)
        bfs_m2l<R, ORDER, LOC>(a.node, loc_list + h_loc, n_loc, a.local, c, a.eps2, loc);
    if (any_loc) {
        constexpr int NC = local_acc<R, LOC>::NC;
        R H[NC];
#pragma unroll
        for (int k = 0; k < NC; k++)
            H[k] = k < 32 ? __shfl_sync(FULL, loc.c[0], k) : loc.c[k < 32 ? 0 : k - 31];
        R L[FMK_BH_LOCAL4];
        if (LOC == 5)
            local4_from_harm(H, L);
        else
#pragma unroll
            for (int k = 0; k < FMK_BH_LOCAL4; k++)
                L[k] = H[k < NC ? k : 0];
        if (lane == 0)
#pragma unroll
            for (int k = 0; k < FMK_BH_LOCAL4; k++)
                a.super_local[sg * FMK_BH_LOCAL4 + k] = L[k];
    }
    if (lane == 0) {
        c.w = any_loc ? (R)1 : (R)0;
        a.super_centre[sg] = c;
        a.super_count[sg] = n_out;
    }
}

/* The groups' begins (their Morton order's keys) and indices, for the super-groups' sort. */
__global__ void k_super_keys(int64_t n_groups, const int2 *__restrict__ groups,
                             int32_t *__restrict__ keys, int32_t *__restrict__ vals)
{
    const int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (g < n_groups)
        keys[g] = groups[g].x, vals[g] = (int32_t)g;
}

/* The parts of a split walk added up, in part order (the same sums on every run). */
__global__ void k_sum_parts(int64_t m, int parts, const double *__restrict__ part_pot,
                            const double *__restrict__ part_grad,
                            const unsigned long long *__restrict__ stats, double *__restrict__ pot,
                            double *__restrict__ grad)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= m || charges_bad(stats))
        return;
    if (pot) {
        double v = 0;
        for (int p = 0; p < parts; p++)
            v += part_pot[i + p * m];
        pot[i] = v;
    }
    if (grad)
        for (int d = 0; d < 3; d++) {
            double v = 0;
            for (int p = 0; p < parts; p++)
                v += part_grad[3 * (i + p * m) + d];
            grad[3 * i + d] = v;
        }
}

/* The super-groups' walks: with a second level (a.super_up) the parents' first, from the
 * root (their lists and expansions in the up_* buffers; the parents' own counts kept apart
 * in the statistics: up_count set, super_up 0), then the super-groups'. */
template <typename R, int ORDER, int LOC>
void super_walks(const walk_args<R> &a, unsigned super_blocks)
{
    if (a.super_up) {
        walk_args<R> u = a;
        u.super = a.super_up, u.super_up = 0, u.super_cap = a.up_cap;
        u.super_count = a.up_count, u.super_list = a.up_list;
        u.super_centre = a.up_centre, u.super_local = a.up_local;
        const int64_t n_up = (a.n_groups + a.super_up - 1) / a.super_up;
        k_walk_super<R, ORDER, LOC>
            <<<(unsigned)((n_up + SUPER_WARPS - 1) / SUPER_WARPS), SUPER_WARPS * 32>>>(u);
    }
    k_walk_super<R, ORDER, LOC><<<super_blocks, SUPER_WARPS * 32>>>(a);
}

/* A breadth-first walk's launch: with tickets (walk_args.ticket) a grid of as many blocks as
 * the GPU holds at once, at most blocks; else blocks (one group walk per warp). */
template <typename R, typename K>
void launch_bfs(K kernel, const walk_args<R> &a, unsigned blocks)
{
    constexpr int threads = bfs_cfg<R>::WARPS * 32;
    int per_sm = 0, dev = 0;
    /* (small grids as they are: the query costs host time, and a grid larger than the GPU
     * holds only has warps that find no ticket left) */
    if (a.ticket && cudaPeekAtLastError() == cudaSuccess && cudaGetDevice(&dev) == cudaSuccess &&
        (blocks > 16ll * fmk_cuda_sm_count(dev) || fmk_cuda_bh_tickets > 1)) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) ==
            cudaSuccess) {
            long long held = (long long)(per_sm > 1 ? per_sm : 1) * fmk_cuda_sm_count(dev);
            if (fmk_cuda_bh_tickets > 1 && fmk_cuda_bh_tickets < held) /* the tests' */
                held = fmk_cuda_bh_tickets;
            blocks = held < (long long)blocks ? (unsigned)held : blocks;
        } else {
            (void)cudaGetLastError(); /* the full grid (tickets work with any grid) */
        }
    }
    kernel<<<blocks, threads>>>(a);
}

template <typename R, int ORDER, bool SELF>
cudaError_t launch_walk(const walk_args<R> &a, int stackless, int group)
{
    constexpr int WB = bfs_cfg<R>::WARPS;
    if (a.m == 0 || (!stackless && a.n_groups == 0))
        return cudaSuccess;
    const unsigned bfs_blocks = (unsigned)((a.n_groups * a.parts + WB - 1) / WB);
    const int64_t n_super = a.super ? (a.n_groups + a.super - 1) / a.super : 0;
    const unsigned super_blocks = (unsigned)((n_super + SUPER_WARPS - 1) / SUPER_WARPS);
    if (stackless)
        k_walk_stackless<R, ORDER, SELF><<<blocks_for(a.m, WALK_BLOCK), WALK_BLOCK>>>(a);
    else if (fmk_cuda_bh_group_walk == 1 && group == 64)
        k_walk_group<R, ORDER, SELF, 2><<<blocks_for(a.n_groups * 32, WALK_BLOCK), WALK_BLOCK>>>(a);
    else if (fmk_cuda_bh_group_walk == 1)
        k_walk_group<R, ORDER, SELF, 1><<<blocks_for(a.n_groups * 32, WALK_BLOCK), WALK_BLOCK>>>(a);
    else if (group == 64)
        launch_bfs(k_walk_bfs<R, ORDER, SELF, 2, 0>, a, bfs_blocks);
    else if (a.local == 4 && a.harmonic) { /* the cell-to-group step (groups of 32 only) */
        if (a.super) {
            super_walks<R, ORDER, 5>(a, super_blocks);
            launch_bfs(k_walk_bfs<R, ORDER, SELF, 1, 5, true>, a, bfs_blocks);
        } else {
            launch_bfs(k_walk_bfs<R, ORDER, SELF, 1, 5>, a, bfs_blocks);
        }
    } else if (a.local == 4) {
        if (a.super) {
            super_walks<R, ORDER, 4>(a, super_blocks);
            launch_bfs(k_walk_bfs<R, ORDER, SELF, 1, 4, true>, a, bfs_blocks);
        } else {
            launch_bfs(k_walk_bfs<R, ORDER, SELF, 1, 4>, a, bfs_blocks);
        }
    }
    else if (a.local)
        launch_bfs(k_walk_bfs<R, ORDER, SELF, 1, 3>, a, bfs_blocks);
    else
        launch_bfs(k_walk_bfs<R, ORDER, SELF, 1, 0>, a, bfs_blocks);
    return cudaGetLastError();
}

template <typename R>
cudaError_t walk(const walk_args<R> &a, int order, int self, int stackless, int group)
{
    switch (order * 2 + (self ? 1 : 0)) {
    case 0: return launch_walk<R, 0, false>(a, stackless, group);
    case 1: return launch_walk<R, 0, true>(a, stackless, group);
    case 2: return launch_walk<R, 1, false>(a, stackless, group);
    case 3: return launch_walk<R, 1, true>(a, stackless, group);
    case 4: return launch_walk<R, 2, false>(a, stackless, group);
    default: return launch_walk<R, 2, true>(a, stackless, group);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* The engine                                                                               */

/* A device buffer kept from one set_points_device to the next (grow-only). */
typedef struct buf {
    void *p;
    size_t cap;
} buf;

typedef struct bh_state {
    int device;
    int real;                   /* 4 or 8 */
    int group;                  /* targets per group walk: 32 or 64 */
    fmk_cuda_tree tree;         /* the sources' tree */
    fmk_cuda_tree ttree;        /* the targets' tree, when they are not the sources */
    buf x;                      /* mapped points (ns + nt) * 3 doubles, during set_points */
    buf bbox;                   /* the bounding box's workspace */
    buf src;                    /* n sorted 4-vectors (x, y, z, q) */
    buf trg;                    /* m sorted 4-vectors; unused when self */
    buf src_lo, trg_lo;         /* fp32: the coordinates' rest (k_pack_points), as src, trg */
    buf links;                  /* n_nodes int4 */
    buf node;                   /* n_nodes * 4 4-vectors */
    buf box;                    /* groups * 2 4-vectors */
    buf charges, pot, grad;     /* host evaluations */
    buf part;                   /* a split walk's sums per part (walk_args), parts * m * 4 doubles */
    buf super;                  /* super-groups (super_layout) */
    int parts;                  /* 1: the walk is not split */
    int32_t split_begin, split_end;
    int2 *d_groups;             /* cap_groups slots, n_groups used */
    int64_t cap_groups, n_groups;
    unsigned long long *d_stats;  /* charge check (2 words), split walk overflow (1), the
                                   * blocks of k_moments_small done (1), the group walk's
                                   * tickets (1); each evaluation clears them before its walk */
    unsigned long long *h_stats;  /* pinned: d_stats after the walk */
    frame_out *h_frame, *dh_frame; /* pinned: k_frame_small's results (host and device view) */
    cudaEvent_t ev[4];
    int events;
    int64_t bytes;              /* device bytes held (held()) */
    double tree_time;           /* seconds of the last build (FMK_PHASE_TREE) */
} bh_state;

int real_of(const fmk_plan *plan) { return plan->opts.precision == FMK_PRECISION_FP32 ? 4 : 8; }

int64_t leaf_size_of(const fmk_plan *plan)
{
    /* Group walk: 48, no leaf of more than 48 points (the 2^24 cube's cells of ~64 points are
     * split: walk -17% against a leaf size of 64); at 2^20 nearly the tree of 64 for the cube,
     * and the fastest of 32, 48, 64 for the Plummer sphere at 2^20 and 2^24. Stackless walk:
     * 64, as measured and tested before (bench/RESULTS.md). */
    if (plan->opts.leaf_size > 0)
        return plan->opts.leaf_size;
    return plan->opts.walk == FMK_WALK_STACKLESS ? 64 : 48;
}

int group_of(void) { return fmk_cuda_bh_group_size == 64 ? 64 : 32; }

void free_ptr(void *p)
{
    if (p && cudaFree(p) != cudaSuccess)
        (void)cudaGetLastError();
}

int64_t held(const bh_state *s)
{
    const buf *b[] = {&s->x, &s->bbox, &s->src, &s->trg, &s->src_lo, &s->trg_lo, &s->links,
                      &s->node, &s->box, &s->charges, &s->pot, &s->grad, &s->part, &s->super};
    int64_t total = s->tree.bytes + s->ttree.bytes + s->cap_groups * (int64_t)sizeof(int2) + 40;
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++)
        total += (int64_t)b[k]->cap;
    return total;
}

void buf_free(buf *b)
{
    free_ptr(b->p);
    b->p = NULL, b->cap = 0;
}

void free_state(bh_state *s)
{
    fmk_cuda_tree3d_free(&s->tree);
    fmk_cuda_tree3d_free(&s->ttree);
    buf *b[] = {&s->x, &s->bbox, &s->src, &s->trg, &s->src_lo, &s->trg_lo, &s->links,
                &s->node, &s->box, &s->charges, &s->pot, &s->grad, &s->part, &s->super};
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++)
        buf_free(b[k]);
    free_ptr(s->d_groups);
    free_ptr(s->d_stats);
    if (s->h_stats && cudaFreeHost(s->h_stats) != cudaSuccess)
        (void)cudaGetLastError();
    if (s->h_frame && cudaFreeHost(s->h_frame) != cudaSuccess)
        (void)cudaGetLastError();
    if (s->events)
        for (int k = 0; k < 4; k++)
            if (cudaEventDestroy(s->ev[k]) != cudaSuccess)
                (void)cudaGetLastError();
    free(s);
}

void bh_release(fmk_plan *plan)
{
    bh_state *s = (bh_state *)plan->state;
    if (!s)
        return;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    const int dev = s->device;
    free_state(s);
    if (st == FMK_OK)
        fmk_cuda_leave(dev, prev);
    plan->state = NULL;
    plan->state_bytes_device = plan->state_bytes_host = 0;
}

/* Warps a split walk aims at, and the most its part sums can take for m targets:
 * parts * m * 32 bytes with parts <= MAX_PARTS and parts * groups < 2 * warps, groups >= m / 64. */
constexpr int MAX_PARTS = 16;

int64_t split_warps(int device)
{
    return (int64_t)fmk_cuda_bh_split_warps * fmk_cuda_sm_count(device);
}

int64_t split_bytes_bound(int device, int64_t m)
{
    const int64_t b = 2 * split_warps(device) * 64 * 32, bm = MAX_PARTS * m * 32;
    return b < bm ? b : bm;
}

/* Super-groups (fmk_cuda_bh_super) for m targets: whether the walk uses them (an unsplit
 * walk also needed: run_eval_t). */
int super_wanted(const fmk_plan *plan, int64_t m)
{
    return fmk_cuda_bh_super >= 2 && fmk_cuda_bh_super <= 32 && fmk_cuda_bh_super_cap > 0 &&
           plan->opts.walk != FMK_WALK_STACKLESS && fmk_cuda_bh_group_walk == 0 &&
           group_of() == 32 && fmk_cuda_bh_local == 4 && m >= fmk_cuda_bh_super_min;
}

/* Whether the sources' tree is deep enough for super-groups (fmk_cuda_bh_super_depth). */
int super_deep(const fmk_plan *plan, const bh_state *s)
{
    const double uniform = log((double)plan->n_sources / (double)leaf_size_of(plan)) / log(8.0);
    return s->tree.levels >= uniform + fmk_cuda_bh_super_depth;
}

/* The super-groups' buffer (bh_state.super) for g groups: the groups' begins and indices and
 * their Morton order (CUB radix sort: keys and values twice, and its workspace), then per
 * super-group its start-list length, centre, expansion and start list (walk_args). Offsets
 * in bytes, each aligned to 256. */
typedef struct super_layout {
    size_t keys[2], vals[2], temp, temp_bytes, count, centre, local, list, bytes;
    size_t up_count, up_centre, up_local, up_list; /* a second level's parents (super_up) */
    int key_bits, super_up;
} super_layout;

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

int super_cap(void)
{
    return fmk_cuda_bh_super_cap < SUPER_LIST_MAX ? fmk_cuda_bh_super_cap : SUPER_LIST_MAX;
}

int super2_cap(void)
{
    const int c = fmk_cuda_bh_super2_cap > 0 ? fmk_cuda_bh_super2_cap : 0;
    return c < SUPER_LIST_MAX ? c : SUPER_LIST_MAX;
}

/* Groups per parent of a second level (fmk_cuda_bh_super2), 0 without one. */
int super_up_of(void)
{
    const int s2 = fmk_cuda_bh_super2;
    return s2 >= 2 && s2 * fmk_cuda_bh_super <= 32 ? s2 * fmk_cuda_bh_super : 0;
}

cudaError_t super_layout_of(int64_t g, int64_t m, int real, super_layout *l)
{
    const int64_t ns = (g + fmk_cuda_bh_super - 1) / fmk_cuda_bh_super;
    l->super_up = super_up_of();
    const int64_t nu = l->super_up ? (g + l->super_up - 1) / l->super_up : 0;
    l->key_bits = 1;
    while (l->key_bits < 31 && (1ll << l->key_bits) <= m)
        l->key_bits++;
    l->temp_bytes = 0;
    cudaError_t err = cub::DeviceRadixSort::SortPairs(NULL, l->temp_bytes, (const int32_t *)NULL,
                                                      (int32_t *)NULL, (const int32_t *)NULL,
                                                      (int32_t *)NULL, (int)g, 0, l->key_bits);
    size_t o = 0;
    for (int k = 0; k < 2; k++) {
        l->keys[k] = o, o += align256((size_t)g * 4);
        l->vals[k] = o, o += align256((size_t)g * 4);
    }
    l->temp = o, o += align256(l->temp_bytes);
    l->count = o, o += align256((size_t)ns * 4);
    l->centre = o, o += align256((size_t)ns * 4 * real);
    l->local = o, o += align256((size_t)ns * FMK_BH_LOCAL4 * real);
    l->list = o, o += align256((size_t)ns * super_cap() * 4);
    l->up_count = o, o += align256((size_t)nu * 4);
    l->up_centre = o, o += align256((size_t)nu * 4 * real);
    l->up_local = o, o += align256((size_t)nu * FMK_BH_LOCAL4 * real);
    l->up_list = o, o += (size_t)nu * super2_cap() * 4;
    l->bytes = o;
    return err;
}

/* Device bytes for ns sources and nt targets (nt < 0: the sources), nodes at their bound;
 * everything set_points keeps (its workspace included). */
int64_t device_bytes(const fmk_plan *plan, int64_t ns, int64_t nt, int with_host_buffers,
                     int64_t *peak)
{
    const int self = nt < 0;
    const int64_t m = self ? ns : nt, r = real_of(plan), G = group_of();
    const int64_t nodes = fmk_cuda_tree3d_node_bound(ns, leaf_size_of(plan));
    int64_t b = fmk_cuda_tree3d_build_bytes(ns) + nodes * FMK_CUDA_TREE_NODE_BYTES; /* tree */
    b += ns * 4 * r + nodes * (16 + 16 * r);                      /* sources, links, moments */
    if (r == 4)
        b += (ns + (self ? 0 : m)) * 16;                          /* the coordinates' rest */
    b += (ns + (self ? 0 : m)) * 24;                              /* mapped points */
    const int64_t groups = (self ? nodes : fmk_cuda_tree3d_node_bound(m, G)) + m / G + 1;
    b += groups * (8 + 8 * r);
    if (!self)
        b += fmk_cuda_tree3d_build_bytes(m) + fmk_cuda_tree3d_node_bound(m, G) *
             FMK_CUDA_TREE_NODE_BYTES + m * 4 * r;
    if (with_host_buffers)
        b += ns * 8 + m * 8 + m * 24;
    b += split_bytes_bound(plan->opts.device, m);
    super_layout sl;
    if (super_wanted(plan, m)) {
        if (super_layout_of(groups, m, (int)r, &sl) != cudaSuccess)
            (void)cudaGetLastError(); /* a size query: the workspace counted as 0 */
        b += (int64_t)sl.bytes;
    }
    b += 40;
    if (ns + (self ? 0 : m) > fmk_cuda_bh_frame_small_max)
        b += (int64_t)sizeof(frame_grid_ws); /* the grid frame's workspace */
    if (peak)
        *peak = b;
    return b;
}

void bh_memory(const fmk_plan *plan, int64_t ns, int64_t nt, int64_t *h, int64_t *d)
{
    int prev = plan->opts.device;
    int entered = fmk_cuda_enter((fmk_plan *)plan, plan->opts.device, &prev) == FMK_OK;
    *d = device_bytes(plan, ns, nt, 1, NULL);
    if (entered)
        fmk_cuda_leave(plan->opts.device, prev);
    *h = (int64_t)sizeof(bh_state) + 2 * (FMK_TREE_MAX_LEVEL + 2) * 8;
}

/* *b holds at least bytes (its contents are not kept when it grows). */
fmk_status need(fmk_plan *plan, bh_state *s, buf *b, size_t bytes, const char *what)
{
    if (bytes <= b->cap && b->p)
        return FMK_OK;
    buf_free(b);
    fmk_status st = fmk_cuda_alloc(plan, &b->p, bytes, what, (long long)(held(s) + bytes));
    if (st == FMK_OK)
        b->cap = bytes;
    return st;
}

fmk_status ok(fmk_plan *plan, cudaError_t err, const char *what)
{
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, what);
}

/* Splits the breadth-first walk (walk_args) when its groups give fewer warps than
 * split_warps: up to warps / groups parts (at most MAX_PARTS), with at least
 * fmk_cuda_bh_split_nodes nodes per part at the split level (the more, the better the parts
 * share the work of a dense core), at the level no deeper than fmk_cuda_bh_split_level_max that
 * allows the most parts (the shallowest of equals, or the deepest: fmk_cuda_bh_split_deepest). (A walk whose stack overflows above the split level is redone unsplit
 * by run_eval_t.) */
fmk_status choose_split(fmk_plan *plan, bh_state *s, int64_t m)
{
    const fmk_cuda_tree *t = &s->tree;
    const int64_t target = split_warps(s->device);
    s->parts = 1, s->split_begin = s->split_end = 0;
    if (plan->opts.walk == FMK_WALK_STACKLESS || fmk_cuda_bh_group_walk != 0 || s->n_groups == 0 ||
        s->n_groups >= target)
        return FMK_OK;
    int64_t want = target / s->n_groups;
    want = want > MAX_PARTS ? MAX_PARTS : want;
    /* the level that allows the most parts (the shallowest of equals) */
    int64_t parts = 1;
    int level = 0;
    for (int L = 1; L <= fmk_cuda_bh_split_level_max && L < t->levels; L++) {
        int64_t p = (t->level_begin[L + 1] - t->level_begin[L]) / fmk_cuda_bh_split_nodes;
        p = p < want ? p : want;
        if (p > parts || (fmk_cuda_bh_split_deepest && p == parts && p >= 2))
            parts = p, level = L;
    }
    if (parts < 2)
        return FMK_OK;
    fmk_status st = need(plan, s, &s->part, (size_t)(parts * m * 32), "the split walk's sums");
    if (st != FMK_OK)
        return st;
    s->parts = (int)parts;
    s->split_begin = (int32_t)t->level_begin[level], s->split_end = (int32_t)t->level_begin[level + 1];
    return FMK_OK;
}

/* Everything geometric from mapped points on the device (d_xs, and d_xt unless self), queued
 * (build_wait waits). async: trees of at most fmk_cuda_tree_small_max points are built without
 * a host wait (tree_internal.h): the kernels after them take the node count from the device
 * and the buffers are sized by the node arrays' capacity. */
fmk_status build_launch(fmk_plan *plan, bh_state *s, int64_t ns, const double *d_xs, int64_t nt,
                        const double *d_xt, int async)
{
    const int self = plan->self, r = s->real;
    const int64_t m = self ? ns : nt;
    const int ls = (int)leaf_size_of(plan);
    const size_t v4 = 4 * (size_t)r;
    const double S = coord_scale(r);
    /* the groups, made by the launch of the tree they come from when it is built without a
     * wait (fmk_cuda_groups_want) */
    const int merge = m >= fmk_cuda_bh_group_merge_min ? fmk_cuda_bh_group_merge : 0;
    const fmk_cuda_groups_want want = {s->group, merge, &s->d_groups, &s->cap_groups};
    fmk_status st = ok(plan, cudaEventRecord(s->ev[0], 0), "cudaEventRecord");
    if (st == FMK_OK)
        st = async ? fmk_cuda_tree3d_build_async(plan, ns, d_xs, ls, (long long)held(s),
                                                 self && m > 0 ? &want : NULL, &s->tree)
                   : fmk_cuda_tree3d_build(plan, ns, d_xs, ls, (long long)held(s), &s->tree);
    if (st != FMK_OK)
        return st;
    fmk_cuda_tree *t = &s->tree;
    const int64_t nn = t->pending ? t->cap_nodes : t->n_nodes;
    const int32_t *count = t->pending ? t->d_lb + FMK_CUDA_TREE_LB_NODES : NULL;
    st = need(plan, s, &s->src, (size_t)ns * v4, "the sorted sources");
    if (st == FMK_OK && r == 4)
        st = need(plan, s, &s->src_lo, (size_t)ns * sizeof(real4f), "the sources' fp32 offsets");
    if (st == FMK_OK)
        st = need(plan, s, &s->links, (size_t)nn * sizeof(int4), "the tree's links");
    if (st == FMK_OK)
        st = need(plan, s, &s->node, (size_t)nn * 4 * v4, "the tree's moments");
    if (st != FMK_OK)
        return st;

    /* Targets: the sources' tree gives the groups, or the targets get their own tree. */
    fmk_cuda_tree *gt = t; /* the tree the groups come from */
    if (!self && m > 0) {
        gt = &s->ttree;
        st = async ? fmk_cuda_tree3d_build_async(plan, m, d_xt, s->group, (long long)held(s),
                                                 &want, gt)
                   : fmk_cuda_tree3d_build(plan, m, d_xt, s->group, (long long)held(s), gt);
        if (st == FMK_OK)
            st = need(plan, s, &s->trg, (size_t)m * v4, "the sorted targets");
        if (st == FMK_OK && r == 4)
            st = need(plan, s, &s->trg_lo, (size_t)m * sizeof(real4f), "the targets' fp32 offsets");
        if (st != FMK_OK)
            return st;
    }
    int64_t bound = 0;
    if (m > 0) { /* (nothing to queue when the build's launch made them) */
        st = fmk_cuda_tree3d_groups(plan, gt, s->group, merge, (long long)held(s), &s->d_groups,
                                    &s->cap_groups);
        bound = fmk_cuda_tree3d_groups_bound(gt, s->group);
    }
    if (st == FMK_OK && bound > 0)
        st = need(plan, s, &s->box, (size_t)bound * 2 * v4, "the group boxes");
    if (st != FMK_OK)
        return st;
    const int32_t *n_groups = gt->d_lb + FMK_CUDA_TREE_LB_GROUPS;
    /* the boxes in the packing launch of the points they bound: trees built without a wait
     * (a warp per group) */
    const int fold = bound > 0 && gt->pending && fmk_cuda_bh_pack_boxes;
    const boxes_in<float> bf = {bound, n_groups, s->d_groups, fold ? (real4f *)s->box.p : NULL};
    const boxes_in<double> bd = {bound, n_groups, s->d_groups, fold ? (real4d *)s->box.p : NULL};
    const boxes_in<float> nf = {0, NULL, NULL, NULL};
    const boxes_in<double> nd = {0, NULL, NULL, NULL};
    const links_in li = {(int32_t)nn, count, t->d_more, t->d_next, t->d_begin, t->d_end,
                         (int4 *)s->links.p};
    const int64_t box_threads = fold ? bound * 32 : 0;
    int64_t np = ns > nn ? ns : nn;
    np = self && np < box_threads ? box_threads : np;
    if (r == 4)
        k_pack_points<float><<<blocks_for(np), BLOCK>>>(ns, t->d_order, d_xs, S, (real4f *)s->src.p,
                                                        (real4f *)s->src_lo.p, li, self ? bf : nf);
    else
        k_pack_points<double><<<blocks_for(np), BLOCK>>>(ns, t->d_order, d_xs, S, (real4d *)s->src.p,
                                                         NULL, li, self ? bd : nd);
    const void *trg = s->src.p;
    if (!self && m > 0) {
        const links_in none = {0, NULL, NULL, NULL, NULL, NULL, NULL};
        const int64_t mp = m > box_threads ? m : box_threads;
        if (r == 4)
            k_pack_points<float><<<blocks_for(mp), BLOCK>>>(m, gt->d_order, d_xt, S,
                                                            (real4f *)s->trg.p,
                                                            (real4f *)s->trg_lo.p, none, bf);
        else
            k_pack_points<double><<<blocks_for(mp), BLOCK>>>(m, gt->d_order, d_xt, S,
                                                             (real4d *)s->trg.p, NULL, none, bd);
        trg = s->trg.p;
    }
    if ((st = ok(plan, cudaGetLastError(), "the packing kernel")) != FMK_OK)
        return st;
    if (bound > 0 && !fold) {
        const real4f *t4 = (const real4f *)trg;
        const real4d *t8 = (const real4d *)trg;
        if (r == 4 && gt->pending) /* a small tree (built without a wait) */
            k_group_boxes<float, 32><<<blocks_for(bound * 32), BLOCK>>>(
                bound, n_groups, s->d_groups, t4, (real4f *)s->box.p);
        else if (r == 4)
            k_group_boxes<float, 1><<<blocks_for(bound), BLOCK>>>(
                bound, n_groups, s->d_groups, t4, (real4f *)s->box.p);
        else if (gt->pending)
            k_group_boxes<double, 32><<<blocks_for(bound * 32), BLOCK>>>(
                bound, n_groups, s->d_groups, t8, (real4d *)s->box.p);
        else
            k_group_boxes<double, 1><<<blocks_for(bound), BLOCK>>>(
                bound, n_groups, s->d_groups, t8, (real4d *)s->box.p);
        st = ok(plan, cudaGetLastError(), "the group box kernel");
    }
    return st;
}

/* The wait for build_launch (the caller's contract: set_points returns with the work done),
 * then what the host needs of the trees. *redo: a tree built without a wait did not fit in
 * its arrays (or its split sort's keys were out of order); build again with async = 0. */
fmk_status build_wait(fmk_plan *plan, bh_state *s, int64_t m, int *redo)
{
    *redo = 0;
    fmk_status st = ok(plan, cudaEventRecord(s->ev[1], 0), "cudaEventRecord");
    if (st == FMK_OK)
        st = ok(plan, cudaEventSynchronize(s->ev[1]), "the tree build");
    if (st != FMK_OK)
        return st;
    int r1 = 0, r2 = 0;
    fmk_cuda_tree3d_finish(&s->tree, &r1);
    fmk_cuda_tree3d_finish(&s->ttree, &r2);
    if (r1 || r2) {
        fmk_cuda_bh_build_redos++;
        *redo = 1;
        return FMK_OK;
    }
    /* the group count came to the pinned host copy with the stream */
    const fmk_cuda_tree *gt = plan->self ? &s->tree : &s->ttree;
    s->n_groups = m > 0 ? gt->h_lb[FMK_CUDA_TREE_LB_GROUPS] : 0;
    st = choose_split(plan, s, m); /* plan->n_targets is not set yet here */
    float ms = 0;
    if (st == FMK_OK)
        st = ok(plan, cudaEventElapsedTime(&ms, s->ev[0], s->ev[1]), "cudaEventElapsedTime");
    if (st == FMK_OK)
        s->tree_time = plan->info.phase_time[FMK_PHASE_TREE] = ms * 1e-3;
    return st;
}

/* build_launch and build_wait, without a wait inside when async (and again with one when that
 * tree did not fit). */
fmk_status build(fmk_plan *plan, bh_state *s, int64_t ns, const double *d_xs, int64_t nt,
                 const double *d_xt, int async)
{
    const int64_t m = plan->self ? ns : nt;
    int redo = 0;
    fmk_status st = build_launch(plan, s, ns, d_xs, nt, d_xt, async);
    if (st == FMK_OK)
        st = build_wait(plan, s, m, &redo);
    if (st == FMK_OK && redo)
        st = build_launch(plan, s, ns, d_xs, nt, d_xt, 0);
    if (st == FMK_OK && redo)
        st = build_wait(plan, s, m, &redo);
    return st;
}

/* A new state in plan->state (nothing allocated on the device yet but the events and the
 * charge-check words). */
fmk_status new_state(fmk_plan *plan, bh_state **out)
{
    bh_state *s = (bh_state *)calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory (%zu bytes)", sizeof *s);
    s->device = plan->opts.device;
    s->real = real_of(plan);
    s->group = group_of();
    static const fmk_cuda_tree_tune tree_tune = FMK_CUDA_TREE_TUNE_DEFAULTS;
    s->tree.tune = s->ttree.tune = tree_tune;
    fmk_status st = FMK_OK;
    int k = 0;
    for (; k < 4 && st == FMK_OK; k++)
        st = ok(plan, cudaEventCreate(&s->ev[k]), "cudaEventCreate");
    if (st != FMK_OK) {
        for (int j = 0; j < k - 1; j++)
            (void)cudaEventDestroy(s->ev[j]);
        free(s);
        return st;
    }
    s->events = 1;
    st = fmk_cuda_alloc(plan, (void **)&s->d_stats, 5 * sizeof(unsigned long long),
                        "the charge checks", 32);
    if (st == FMK_OK)
        st = ok(plan, cudaMallocHost((void **)&s->h_stats, 3 * sizeof(unsigned long long)),
                "cudaMallocHost (the charge check and the walk's overflow flag)");
    if (st == FMK_OK)
        st = ok(plan, cudaMallocHost((void **)&s->h_frame, sizeof(frame_out)),
                "cudaMallocHost (the frame of small sets)");
    if (st == FMK_OK)
        st = ok(plan, cudaHostGetDevicePointer((void **)&s->dh_frame, s->h_frame, 0),
                "cudaHostGetDevicePointer (the frame of small sets)");
    if (st != FMK_OK) {
        free_state(s);
        return st;
    }
    plan->state = s;
    *out = s;
    return FMK_OK;
}

void finish_setup(fmk_plan *plan, bh_state *s)
{
    s->bytes = held(s);
    plan->state_bytes_device = s->bytes;
    plan->state_bytes_host = (int64_t)sizeof *s;
    plan->info.levels = s->tree.levels;
    plan->info.leaf_size = leaf_size_of(plan);
    plan->info.walk = plan->opts.walk == FMK_WALK_STACKLESS ? FMK_WALK_STACKLESS : FMK_WALK_GROUP;
}

fmk_status too_many(fmk_plan *plan, int64_t ns, int64_t nt)
{
    if (ns > FMK_CUDA_TREE_MAX_POINTS || nt > FMK_CUDA_TREE_MAX_POINTS)
        return fmk_error_set(plan, FMK_ERR_ARG,
                             "the GPU treecode takes at most %lld sources and targets (got %lld, "
                             "%lld); use backend cpu or split the points",
                             FMK_CUDA_TREE_MAX_POINTS, (long long)ns, (long long)nt);
    return FMK_OK;
}

fmk_status bh_setup(fmk_plan *plan)
{
    const int64_t ns = plan->n_sources, nt = plan->self ? 0 : plan->n_targets;
    fmk_status st = too_many(plan, ns, nt);
    if (st != FMK_OK)
        return st;
    int prev;
    if ((st = fmk_cuda_enter(plan, plan->opts.device, &prev)) != FMK_OK)
        return st;
    plan->info.phase_time[FMK_PHASE_TREE] = 0;
    bh_state *s;
    st = new_state(plan, &s);
    if (st == FMK_OK && ns > 0) {
        const size_t bytes = (size_t)(ns + nt) * 24;
        st = need(plan, s, &s->x, bytes, "staging the points");
        double *d_x = (double *)s->x.p;
        if (st == FMK_OK)
            st = ok(plan, cudaMemcpy(d_x, plan->sources, (size_t)ns * 24, cudaMemcpyHostToDevice),
                    "cudaMemcpy (sources to the GPU)");
        if (st == FMK_OK && nt > 0)
            st = ok(plan, cudaMemcpy(d_x + 3 * ns, plan->targets, (size_t)nt * 24,
                                     cudaMemcpyHostToDevice),
                    "cudaMemcpy (targets to the GPU)");
        if (st == FMK_OK)
            st = build(plan, s, ns, d_x, nt, d_x + 3 * ns, fmk_cuda_bh_async);
        /* host points: the plan keeps them, so the staging copy is not kept (the next
         * set_points starts a new state anyway) */
        buf_free(&s->x);
    }
    if (st == FMK_OK)
        finish_setup(plan, s);
    else
        bh_release(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

fmk_status bad_point(fmk_plan *plan, int64_t bad, int64_t ns, const double *d_s, const double *d_t)
{
    const char *what = bad < ns ? "sources" : "targets";
    const int64_t i = bad < ns ? bad : bad - ns;
    double x[3] = {0, 0, 0};
    cudaError_t err = cudaMemcpy(x, (bad < ns ? d_s : d_t) + 3 * i, 3 * sizeof(double),
                                 cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (a point from the GPU)");
    int k = 0;
    while (k < 2 && isfinite(x[k]))
        k++;
    return fmk_error_set(plan, FMK_ERR_NONFINITE, "%s[%lld][%d] is %g; points must be finite",
                         what, (long long)i, k, x[k]);
}

/* The frame on the device and the build: small sets by one cluster of blocks (k_frame_small),
 * larger ones by a grid (k_frame_grid, k_map_frame). lo, hi, *bad: the set's box and first
 * non-finite point as the kernels found them; *width, *center: the frame the points were
 * mapped with (the host checks it against its own frame from the box). */
fmk_status frame_device(fmk_plan *plan, bh_state *s, int small, int64_t ns, const double *d_s,
                        int64_t nt, const double *d_t, double *d_x, double lo[3], double hi[3],
                        int64_t *bad, double center[3], double *width)
{
    fmk_status st = FMK_OK;
    if (small)
        st = ok(plan, frame_launch(s->device, ns, d_s, nt, d_t, d_x, s->dh_frame),
                "the frame kernel (a cluster of blocks)");
    else if ((st = need(plan, s, &s->bbox, sizeof(frame_grid_ws), "the frame's workspace")) == FMK_OK)
        st = ok(plan, frame_grid_launch(ns, d_s, nt, d_t, d_x, (frame_grid_ws *)s->bbox.p, s->dh_frame),
                "the frame kernels");
    if (st == FMK_OK) /* its one wait is the frame kernels' too */
        st = build(plan, s, ns, d_x, nt, d_x + 3 * ns, fmk_cuda_bh_async);
    if (st != FMK_OK)
        return st;
    const frame_out *f = s->h_frame;
    for (int k = 0; k < 3; k++)
        lo[k] = f->lo[k], hi[k] = f->hi[k], center[k] = f->center[k];
    *width = f->width;
    *bad = f->bad;
    return FMK_OK;
}

fmk_status points_device(fmk_plan *plan, bh_state *s, int64_t ns, const double *d_s, int64_t nt,
                         const double *d_t)
{
    const int self = d_t == NULL;
    if (self)
        nt = 0;
    plan->self = self;
    /* The mapped points' buffer first: a size the GPU cannot hold fails before any read. */
    const size_t xbytes = (size_t)(ns + nt) * 24;
    fmk_status st = need(plan, s, &s->x, xbytes, "the mapped points");
    double *d_x = (double *)s->x.p;
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0}, center[3] = {0, 0, 0}, width = 0;
    int64_t bad = -1;
    /* built: the points were mapped and built before the host saw their box (small sets by
     * one cluster of blocks, larger ones by a grid of blocks) */
    const int small = ns > 0 && ns + nt <= fmk_cuda_bh_frame_small_max;
    const int grid = ns > 0 && !small && fmk_cuda_bh_frame_grid;
    const int built = small || grid;
    if (st == FMK_OK && built)
        st = frame_device(plan, s, small, ns, d_s, nt, d_t, d_x, lo, hi, &bad, center, &width);
    if (st == FMK_OK && !built) {
        size_t temp_bytes = 0, box_off = 0;
        st = ok(plan, fmk_cuda_bounding_box(3, ns, d_s, nt, d_t, NULL, &temp_bytes, NULL, lo, hi, &bad),
                "cub::DeviceReduce (workspace query)");
        if (st == FMK_OK) {
            box_off = (temp_bytes + 255) / 256 * 256;
            st = need(plan, s, &s->bbox, box_off + fmk_cuda_box_bytes(), "the bounding-box workspace");
        }
        if (st == FMK_OK)
            st = ok(plan, fmk_cuda_bounding_box(3, ns, d_s, nt, d_t, s->bbox.p, &temp_bytes,
                                                (char *)s->bbox.p + box_off, lo, hi, &bad),
                    "cub::DeviceReduce (bounding box)");
    }
    if (st == FMK_OK && bad >= 0)
        st = bad_point(plan, bad, ns, d_s, d_t);
    fmk_frame frame;
    if (st == FMK_OK)
        st = fmk_plan_frame_from_box(plan, lo, hi, &frame);
    int redo = !built;
    if (st == FMK_OK && built &&
        (frame.width != width || frame.center[0] != center[0] || frame.center[1] != center[1] ||
         frame.center[2] != center[2])) {
        redo = 1; /* the softening made the frame wider than the points' box */
        fmk_cuda_bh_frame_redos++;
    }
    if (st == FMK_OK)
        plan->frame = frame;
    if (st == FMK_OK && redo) {
        const double inv = 1.0 / frame.width;
        if (ns > 0)
            k_map<<<blocks_for(ns), BLOCK>>>(ns, d_s, frame.center[0], frame.center[1],
                                             frame.center[2], inv, d_x);
        if (nt > 0)
            k_map<<<blocks_for(nt), BLOCK>>>(nt, d_t, frame.center[0], frame.center[1],
                                             frame.center[2], inv, d_x + 3 * ns);
        st = ok(plan, cudaGetLastError(), "the point mapping kernel");
        if (st == FMK_OK && ns > 0)
            st = build(plan, s, ns, d_x, nt, d_x + 3 * ns, fmk_cuda_bh_async);
    }
    if (st != FMK_OK)
        return st;
    plan->n_sources = ns;
    plan->n_targets = self ? ns : nt;
    plan->has_points = 1;
    finish_setup(plan, s);
    return FMK_OK;
}

fmk_status bh_set_points_device(fmk_plan *plan, int64_t ns, const double *d_s, int64_t nt,
                                const double *d_t)
{
    /* The state of the previous points is kept, with its buffers, when it fits this plan: its
     * buffers only grow, so repeated calls allocate nothing. */
    bh_state *keep = (bh_state *)plan->state;
    if (keep && (keep->device != plan->opts.device || keep->real != real_of(plan)))
        keep = NULL;
    if (keep)
        plan->state = NULL;
    fmk_plan_drop_points(plan); /* the contract: on failure the plan has no points */
    int prev;
    fmk_status st = fmk_cuda_enter(plan, plan->opts.device, &prev);
    if (st != FMK_OK) {
        if (keep)
            free_state(keep);
        return st;
    }
    plan->state = keep; /* released with the plan from here on */
    if (st == FMK_OK)
        st = too_many(plan, ns, nt);
    memset(plan->info.phase_time, 0, sizeof plan->info.phase_time);
    bh_state *s = keep;
    if (st == FMK_OK && !s)
        st = new_state(plan, &s);
    if (st == FMK_OK) {
        s->group = group_of();
        st = points_device(plan, s, ns, d_s, nt, d_t);
    }
    if (st != FMK_OK)
        fmk_plan_drop_points(plan);
    fmk_cuda_leave(plan->opts.device, prev);
    return st;
}

fmk_status bad_charge(fmk_plan *plan, int64_t i, const double *d_q)
{
    double q = 0;
    cudaError_t err = cudaMemcpy(&q, d_q + i, sizeof q, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaMemcpy (a charge from the GPU)");
    return fmk_error_set(plan, FMK_ERR_NONFINITE, "charges[%lld] is %g; charges must be finite",
                         (long long)i, q);
}

/* Whether an evaluation checks the charges and computes the moments in one block. */
int prep_small(const fmk_plan *plan, const bh_state *s)
{
    return plan->n_sources <= fmk_cuda_bh_prep_small_max &&
           s->tree.n_nodes <= fmk_cuda_bh_moments_small_max;
}

/* Super-groups for the walk a (super_wanted, an unsplit walk with the step of order 4): the
 * buffer, the groups in Morton order (queued), and a's fields. */
template <typename R>
fmk_status super_setup(fmk_plan *plan, bh_state *s, walk_args<R> *a)
{
    super_layout l;
    cudaError_t err = super_layout_of(s->n_groups, a->m, s->real, &l);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cub::DeviceRadixSort (workspace query)");
    fmk_status st = need(plan, s, &s->super, l.bytes, "the super-groups");
    s->bytes = held(s);
    plan->state_bytes_device = plan->info.bytes_device = s->bytes;
    if (st != FMK_OK)
        return st;
    char *p = (char *)s->super.p;
    int32_t *keys[2] = {(int32_t *)(p + l.keys[0]), (int32_t *)(p + l.keys[1])};
    int32_t *vals[2] = {(int32_t *)(p + l.vals[0]), (int32_t *)(p + l.vals[1])};
    /* the groups in Morton order: made so by the tree (fmk_cuda_tree3d_groups), or sorted */
    const fmk_cuda_tree *gt = plan->self ? &s->tree : &s->ttree;
    if (!gt->groups_sorted) {
        k_super_keys<<<blocks_for(s->n_groups), BLOCK>>>(s->n_groups, s->d_groups, keys[0],
                                                         vals[0]);
        err = cudaGetLastError();
        size_t tb = l.temp_bytes;
        if (err == cudaSuccess)
            err = cub::DeviceRadixSort::SortPairs(p + l.temp, tb, keys[0], keys[1], vals[0],
                                                  vals[1], (int)s->n_groups, 0, l.key_bits);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "the super-groups' sort");
    }
    a->super = fmk_cuda_bh_super;
    a->super_cap = super_cap();
    a->super_k = (R)(a->local_k * (fmk_cuda_bh_super_k > 1 ? fmk_cuda_bh_super_k : 1));
    a->super_order = gt->groups_sorted ? NULL : vals[1];
    a->super_count = (int32_t *)(p + l.count);
    a->super_list = (int32_t *)(p + l.list);
    a->super_centre = (typename vec4<R>::type *)(p + l.centre);
    a->super_local = (R *)(p + l.local);
    a->super_up = l.super_up, a->up_cap = super2_cap();
    if (l.super_up) {
        a->up_count = (int32_t *)(p + l.up_count);
        a->up_list = (int32_t *)(p + l.up_list);
        a->up_centre = (typename vec4<R>::type *)(p + l.up_centre);
        a->up_local = (R *)(p + l.up_local);
    }
    return FMK_OK;
}

template <typename R>
fmk_status run_eval_t(fmk_plan *plan, bh_state *s, const double *d_q, double *pot,
                      double *grad)
{
    typedef typename vec4<R>::type V;
    const fmk_cuda_tree *t = &s->tree;
    const int64_t n = plan->n_sources;
    double *phase = plan->info.phase_time;
    const double S = coord_scale(s->real);
    const real4f *lo = (const real4f *)s->src_lo.p; /* fp32 only */
    cudaError_t err = cudaEventRecord(s->ev[1], 0);
    /* tree3d.h: theta capped so that no node is accepted by a target inside it */
    const double theta = plan->opts.theta < FMK_TREE_THETA_CAP ? plan->opts.theta : FMK_TREE_THETA_CAP;
    const double inv_theta = 1.0 / theta;
    level_table lt;
    for (int L = 0; L <= t->levels; L++)
        lt.begin[L] = (int32_t)t->level_begin[L];
    if (err == cudaSuccess && prep_small(plan, s)) { /* the charge check too (run_eval) */
        k_prep_small<R><<<1, PREP_BLOCK>>>(n, t->d_order, d_q, s->d_stats, (int32_t)t->n_nodes,
                                           t->levels, lt, t->d_level, inv_theta, S, t->d_keys,
                                           (const int4 *)s->links.p, t->d_n_children,
                                           (V *)s->src.p, lo, (V *)s->node.p);
        err = cudaGetLastError();
    } else if (err == cudaSuccess && t->n_nodes <= fmk_cuda_bh_moments_small_max &&
               fmk_cuda_bh_moments_fused) {
        constexpr int W = MOMENTS_FUSED_BLOCK / 32;
        constexpr int NPB = W * (32 / MOMENTS_LANES); /* nodes a block takes at once */
        k_moments_small<R><<<(unsigned)((t->n_nodes + NPB - 1) / NPB), MOMENTS_FUSED_BLOCK>>>(
            (int32_t)t->n_nodes, t->levels, lt, t->d_level, inv_theta, S, t->d_keys,
            (const int4 *)s->links.p, t->d_n_children, t->d_order, d_q, s->d_stats, (V *)s->src.p,
            lo, (V *)s->node.p);
        err = cudaGetLastError();
    } else if (err == cudaSuccess && fmk_cuda_bh_moments_up &&
               t->n_nodes <= fmk_cuda_bh_moments_up_max) {
        err = cudaMemsetAsync(t->d_counts, 0, (size_t)t->n_nodes * sizeof(int32_t), 0);
        const unsigned nb = blocks_for(t->n_nodes * MOMENTS_LANES, MOMENTS_UP_BLOCK);
        if (err == cudaSuccess)
            k_moments_up<R><<<nb, MOMENTS_UP_BLOCK>>>(
                (int32_t)t->n_nodes, t->d_level, inv_theta, S, t->d_keys, (const int4 *)s->links.p,
                t->d_n_children, t->d_parent, t->d_order, d_q, s->d_stats, (V *)s->src.p, lo,
                (V *)s->node.p, t->d_counts, fmk_cuda_bh_moments_acq);
        if (err == cudaSuccess)
            err = cudaGetLastError();
    } else if (err == cudaSuccess) {
        k_pack_charges<R><<<blocks_for(n), BLOCK>>>(n, t->d_order, d_q, s->d_stats, (V *)s->src.p);
        if (t->n_nodes <= fmk_cuda_bh_moments_small_max) {
            k_moments_leaves<R><<<blocks_for(t->n_nodes * MOMENTS_LANES, 128), 128>>>(
                (int32_t)t->n_nodes, t->d_level, inv_theta, S, t->d_keys, (const int4 *)s->links.p,
                t->d_n_children, (const V *)s->src.p, lo, (V *)s->node.p);
            k_moments_inner<R><<<1, MOMENTS_SMALL_BLOCK>>>(t->levels, lt, inv_theta, S, t->d_keys,
                                                          (const int4 *)s->links.p, t->d_n_children,
                                                          (const V *)s->src.p, (V *)s->node.p);
        } else {
            for (int L = t->levels - 1; L >= 0; L--) {
                const int32_t first = (int32_t)t->level_begin[L];
                const int32_t count = (int32_t)(t->level_begin[L + 1] - first);
                k_moments<R><<<blocks_for((int64_t)count * MOMENTS_LANES, 128), 128>>>(first, count, L, inv_theta, S, t->d_keys,
                                                              (const int4 *)s->links.p, t->d_n_children,
                                                              (const V *)s->src.p, lo, (V *)s->node.p);
            }
        }
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev[2], 0);
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the moment kernels");

    walk_args<R> a;
    a.links = (const int4 *)s->links.p;
    a.n_children = t->d_n_children;
    a.node = (const V *)s->node.p;
    a.src = (const V *)s->src.p;
    a.trg = plan->self ? (const V *)s->src.p : (const V *)s->trg.p;
    a.src_lo = lo;
    a.trg_lo = plan->self ? lo : (const real4f *)s->trg_lo.p;
    a.trg_order = plan->self ? t->d_order : s->ttree.d_order;
    a.groups = s->d_groups;
    a.box = (const V *)s->box.p;
    a.m = plan->n_targets;
    a.n_groups = s->n_groups;
    a.eps2 = (R)(plan->frame.softening * S * plan->frame.softening * S);
    a.pot_scale = plan->frame.pot_scale * S; /* times 1 / charge_scale on the device */
    a.grad_scale = plan->frame.pot_scale * S; /* 1/width^2 may overflow: two steps */
    a.grad_scale2 = plan->frame.pot_scale * S;
    a.pot = pot;
    a.grad = grad;
    a.parts = s->parts;
    a.split_begin = s->split_begin, a.split_end = s->split_end;
    double *part_pot = NULL, *part_grad = NULL;
    if (s->parts > 1) { /* the parts' sums, added up after the walk */
        part_pot = pot ? (double *)s->part.p : NULL;
        part_grad = grad ? (double *)s->part.p + s->parts * a.m : NULL;
        a.pot = part_pot, a.grad = part_grad;
    }
    const int stackless = plan->opts.walk == FMK_WALK_STACKLESS;
#ifdef FMK_BH_COUNT
    unsigned long long cnt[32] = {0};
    (void)cudaMemcpyToSymbol(fmk_bh_counts, cnt, sizeof cnt);
#endif
    a.overflow = s->d_stats + 2;
    const int tuned = plan->n_sources >= fmk_cuda_bh_auto_min; /* the defaults of mac, local_k */
    a.mac = fmk_cuda_bh_mac >= 0 ? fmk_cuda_bh_mac : tuned ? 1 : 2;
    {
        const double th = plan->opts.theta < FMK_TREE_THETA_CAP ? plan->opts.theta : FMK_TREE_THETA_CAP;
        const double f_min = 1.01 * sqrt(3.0) / (1 / th + sqrt(3.0) / 2);
        double f = fmk_cuda_bh_leaf_theta > th ? th / fmk_cuda_bh_leaf_theta : 1;
        f = f < f_min ? f_min : f;
        a.leaf_r2 = (R)(f < 1 ? f * f : 1);
        const double fi = fmk_cuda_bh_mac_inner > 1 ? fmk_cuda_bh_mac_inner : 1;
        a.inner_r2 = (R)(fi * fi);
    }
    a.local = fmk_cuda_bh_local >= 2 && fmk_cuda_bh_local <= 4 ? fmk_cuda_bh_local : 0;
    {
        /* the group's radius scaled like a node's size in r_open (l / theta): k at theta 0.6,
         * so that the expansion's truncation falls with theta as the M2P's does; at least 1
         * (every target of the group then outside the node's opening sphere) */
        const double th = plan->opts.theta < FMK_TREE_THETA_CAP ? plan->opts.theta : FMK_TREE_THETA_CAP;
        const double k0 = fmk_cuda_bh_local_k >= 0 ? fmk_cuda_bh_local_k : tuned ? 1.65 : 2.25;
        const double k = k0 * 0.6 / th;
        a.local_k = (R)(k > 1 ? k : 1);
        const double ao = fmk_cuda_bh_local_open > 0 ? fmk_cuda_bh_local_open : 0;
        a.local_a2 = (R)(ao * ao);
    }
    a.harmonic = a.local == 4 && fmk_cuda_bh_local_harmonic && a.eps2 == 0;
    a.stats = s->d_stats;
    a.ticket = fmk_cuda_bh_tickets && s->parts == 1 ? s->d_stats + 4 : NULL;
    a.super = 0, a.super_open = fmk_cuda_bh_super_open, a.super_cap = 0, a.super_k = 0;
    a.super_order = NULL, a.super_count = a.super_list = NULL;
    a.super_centre = NULL, a.super_local = NULL;
    a.super_up = a.up_cap = 0, a.up_count = a.up_list = NULL, a.up_centre = NULL, a.up_local = NULL;
#ifdef FMK_BH_TRACE
    {
        const unsigned zero = 0;
        (void)cudaMemcpyToSymbol(fmk_bh_trace_n, &zero, sizeof zero);
    }
#endif
    if (err == cudaSuccess && !stackless && s->parts == 1 && a.local == 4 &&
        super_wanted(plan, a.m) && super_deep(plan, s) && s->n_groups > 0) {
        fmk_status st = super_setup<R>(plan, s, &a);
        if (st != FMK_OK)
            return st;
    }
#ifdef FMK_BH_COUNT
    {
        unsigned long long sc[12] = {0};
        (void)cudaMemcpyToSymbol(fmk_bh_super_counts, sc, sizeof sc);
    }
#endif
    if (err == cudaSuccess)
        err = walk<R>(a, plan->opts.order, plan->self, stackless, s->group);
    if (err == cudaSuccess && s->parts > 1) {
        k_sum_parts<<<blocks_for(a.m), BLOCK>>>(a.m, s->parts, part_pot, part_grad, s->d_stats,
                                                pot, grad);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess) /* the charge check and the overflow flag, read after the wait */
        err = cudaMemcpyAsync(s->h_stats, s->d_stats, 3 * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, 0);
#ifdef FMK_BH_COUNT
    if (cudaMemcpyFromSymbol(cnt, fmk_bh_counts, sizeof cnt) == cudaSuccess && cnt[0] > 0)
        fprintf(stderr, "walk counts: n %llu targets, %llu groups (%.1f targets each); per "
                "target %.1f M2P, %.1f P2P, %.1f nodes into the group's expansion; %.1f steps "
                "per group; %llu stack overflows, deepest stack %llu\n",
                cnt[0], cnt[5], (double)cnt[0] / cnt[5], (double)cnt[1] / cnt[0],
                (double)cnt[2] / cnt[0], (double)cnt[7] / cnt[0], (double)cnt[3] / cnt[5], cnt[4], cnt[6]);
    if (cnt[0] > 0 && cnt[14] > 0)
        fprintf(stderr, "walk cycles: per warp %.0f: M2P %.1f%%, P2P %.1f%%, M2L %.1f%%, L2P "
                "%.1f%%, the rest (tests, lists, stack) %.1f%%; longest warp %.2f x the mean\n",
                (double)cnt[14] / cnt[5], 100.0 * cnt[9] / cnt[14], 100.0 * cnt[10] / cnt[14],
                100.0 * cnt[11] / cnt[14], 100.0 * cnt[13] / cnt[14],
                100.0 * (cnt[14] - cnt[9] - cnt[10] - cnt[11] - cnt[13]) / cnt[14],
                (double)cnt[15] * cnt[5] / cnt[14]);
    if (cnt[0] > 0 && cnt[14] > 0)
        fprintf(stderr, "walk steps: per group %.1f leaves tested at every target, %.1f of them "
                "accepted; the per-target test %.1f%% of the cycles, the children's push %.1f%%\n",
                (double)cnt[16] / cnt[5], (double)cnt[17] / cnt[5], 100.0 * cnt[18] / cnt[14],
                100.0 * cnt[19] / cnt[14]);
    const double opened = (double)(cnt[24] + cnt[25] + cnt[26] + cnt[27] + cnt[28] + cnt[29]);
    if (cnt[0] > 0 && cnt[14] > 0 && opened > 0) {
        const double all = opened;
        fprintf(stderr, "walk opened leaves (per-target tested): per group %.1f points; by how "
                "many targets are inside the leaf's sphere: 1 %.1f%%, 2-4 %.1f%%, 5-8 %.1f%%, "
                "9-16 %.1f%%, 17-24 %.1f%%, 25-32 %.1f%%; %.1f on average\n",
                all / cnt[5], 100 * cnt[24] / all, 100 * cnt[25] / all, 100 * cnt[26] / all,
                100 * cnt[27] / all, 100 * cnt[28] / all, 100 * cnt[29] / all, cnt[30] / all);
    }
    {
        unsigned long long sc[12] = {0};
        if (a.super && cudaMemcpyFromSymbol(sc, fmk_bh_super_counts, sizeof sc) == cudaSuccess)
            for (int lv = 0; lv < 2; lv++) {
                const unsigned long long *c = sc + 6 * lv;
                if (c[0] > 0)
                    fprintf(stderr, "super-groups%s: %llu of %d groups; per super-group %.1f "
                            "start-list entries (longest %llu), %.1f nodes into its expansion, "
                            "%.1f steps; %llu overflows\n", lv ? " (parents)" : "", c[0],
                            lv ? a.super_up : a.super, (double)c[1] / c[0], c[5],
                            (double)c[2] / c[0], (double)c[3] / c[0], c[4]);
            }
    }
#endif
#ifdef FMK_BH_TRACE
    {
        unsigned nt = 0;
        const char *path = getenv("FMK_BH_TRACE");
        if (path && cudaMemcpyFromSymbol(&nt, fmk_bh_trace_n, sizeof nt) == cudaSuccess) {
            nt = nt < BH_TRACE_MAX ? nt : BH_TRACE_MAX;
            bh_trace_rec *rec = (bh_trace_rec *)malloc(((size_t)nt + 1) * sizeof *rec);
            FILE *f = rec ? fopen(path, "ab") : NULL;
            if (f && cudaMemcpyFromSymbol(rec, fmk_bh_trace, nt * sizeof *rec) == cudaSuccess) {
                rec[nt] = {0, 0, 0, 99, 0, 0};
                fwrite(rec, sizeof *rec, (size_t)nt + 1, f);
            }
            if (f)
                fclose(f);
            free(rec);
        }
    }
#endif
    if (err == cudaSuccess)
        err = cudaEventRecord(s->ev[3], 0);
    if (err == cudaSuccess)
        err = cudaEventSynchronize(s->ev[3]);
    if (err == cudaSuccess && s->h_stats[0] != 0) /* nothing was written */
        return bad_charge(plan, (int64_t)~s->h_stats[0], d_q);
    if (err == cudaSuccess && s->parts > 1 && s->h_stats[2]) {
        /* the split walk's stack overflowed above the split, where the parts could disagree
         * on what they sum: the walk again, unsplit (into the outputs themselves) */
        a.parts = 1, a.pot = pot, a.grad = grad;
        a.ticket = NULL; /* one group per block: no counter was cleared for this walk */
        fmk_cuda_bh_split_redos++;
        err = walk<R>(a, plan->opts.order, plan->self, stackless, s->group);
        if (err == cudaSuccess)
            err = cudaEventRecord(s->ev[3], 0);
        if (err == cudaSuccess)
            err = cudaEventSynchronize(s->ev[3]);
    }
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the tree walk kernel");
    float ms1 = 0, ms2 = 0;
    if ((err = cudaEventElapsedTime(&ms1, s->ev[1], s->ev[2])) != cudaSuccess ||
        (err = cudaEventElapsedTime(&ms2, s->ev[2], s->ev[3])) != cudaSuccess)
        return fmk_cuda_fail(plan, err, "cudaEventElapsedTime");
    phase[FMK_PHASE_MOMENTS] = ms1 * 1e-3;
    phase[FMK_PHASE_WALK] = ms2 * 1e-3;
    return FMK_OK;
}

fmk_status run_eval(fmk_plan *plan, bh_state *s, const double *charges, double *pot,
                    double *grad, int on_device)
{
    const int64_t n = plan->n_sources, m = plan->n_targets;
    double *phase = plan->info.phase_time;
    cudaError_t err;
    fmk_status st;
    if (n == 0) { /* only the device path gets here: plan.c answers host calls itself */
        if (pot && (err = cudaMemset(pot, 0, (size_t)m * sizeof(double))) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (pot)");
        if (grad && (err = cudaMemset(grad, 0, (size_t)m * 3 * sizeof(double))) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemset (grad)");
        return ok(plan, cudaDeviceSynchronize(), "cudaMemset");
    }
    double t0 = fmk_time_now();
    const double *d_q = charges;
    if (!on_device) {
        st = need(plan, s, &s->charges, (size_t)n * 8, "the charges");
        if (st == FMK_OK)
            st = need(plan, s, &s->pot, (size_t)m * 8, "the potential");
        if (st == FMK_OK)
            st = need(plan, s, &s->grad, (size_t)m * 24, "the gradient");
        s->bytes = held(s);
        plan->state_bytes_device = plan->info.bytes_device = s->bytes;
        if (st != FMK_OK)
            return st;
        err = cudaMemcpy(s->charges.p, charges, (size_t)n * 8, cudaMemcpyHostToDevice);
        if (err != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (charges to the GPU)");
        d_q = (const double *)s->charges.p;
    }
    /* the charge check: read on the device (charge_scale) and by the host after the walk
     * (small sets: in k_prep_small) */
    err = cudaSuccess;
    if (!prep_small(plan, s) && n <= fmk_cuda_bh_charge_block_max) {
        k_charge_stats<<<1, CHARGE_BLOCK>>>(n, d_q, s->d_stats, 1);
        err = cudaGetLastError();
    } else if (!prep_small(plan, s)) {
        err = cudaMemsetAsync(s->d_stats, 0, 5 * sizeof(unsigned long long), 0);
        const int64_t nb = (n + BLOCK - 1) / BLOCK;
        if (err == cudaSuccess)
            k_charge_stats<<<(unsigned)(nb < 1024 ? nb : 1024), BLOCK>>>(n, d_q, s->d_stats, 0);
        if (err == cudaSuccess)
            err = cudaGetLastError();
    }
    if (err != cudaSuccess)
        return fmk_cuda_fail(plan, err, "the charge check kernel");
    double *p = pot ? (on_device ? pot : (double *)s->pot.p) : NULL;
    double *g = grad ? (on_device ? grad : (double *)s->grad.p) : NULL;
    phase[FMK_PHASE_UPLOAD] = fmk_time_now() - t0;
    st = s->real == 4 ? run_eval_t<float>(plan, s, d_q, p, g)
                      : run_eval_t<double>(plan, s, d_q, p, g);
    if (st != FMK_OK)
        return st;
    if (!on_device) {
        double t2 = fmk_time_now();
        if (pot && (err = cudaMemcpy(pot, s->pot.p, (size_t)m * 8, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (potential from the GPU)");
        if (grad && (err = cudaMemcpy(grad, s->grad.p, (size_t)m * 24, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return fmk_cuda_fail(plan, err, "cudaMemcpy (gradient from the GPU)");
        phase[FMK_PHASE_DOWNLOAD] = fmk_time_now() - t2;
    }
    return FMK_OK;
}

fmk_status bh_eval(fmk_plan *plan, const double *charges, double *pot, double *grad, int on_device)
{
    bh_state *s = (bh_state *)plan->state;
    if (!s)
        return fmk_error_set(plan, FMK_ERR_INTERNAL, "the GPU treecode has no state");
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    st = run_eval(plan, s, charges, pot, grad, on_device);
    /* the tree's time belongs to set_points: plan.c clears eval's phases, keep it */
    plan->info.phase_time[FMK_PHASE_TREE] = s->tree_time;
    fmk_cuda_leave(s->device, prev);
    return st;
}

} // namespace

extern "C" fmk_status fmk_cuda_bh_tree(fmk_plan *plan, fmk_tree3d *tree)
{
    memset(tree, 0, sizeof *tree);
    if (plan->engine != &fmk_engine_tree_cuda || !plan->state)
        return fmk_error_set(plan, FMK_ERR_STATE, "the plan has no GPU tree");
    bh_state *s = (bh_state *)plan->state;
    int prev;
    fmk_status st = fmk_cuda_enter(plan, s->device, &prev);
    if (st != FMK_OK)
        return st;
    st = fmk_cuda_tree3d_download(plan, &s->tree, NULL, tree);
    fmk_cuda_leave(s->device, prev);
    return st;
}

extern "C" const fmk_engine fmk_engine_tree_cuda = {
    /* .name */ "tree/cuda",
    /* .setup */ bh_setup,
    /* .eval */ bh_eval,
    /* .memory */ bh_memory,
    /* .set_points_device */ bh_set_points_device,
    /* .release */ bh_release,
    /* .check_opts */ fmk_treecode_check_opts,
};
