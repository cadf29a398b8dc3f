/*
 * walk_group.cu -- the group walk (FMK_WALK_GROUP, the default): breadth-first (Bonsai style),
 * one warp per group of up to 32 nearby sorted targets, with the cell-to-group step and, when
 * asked, from the super-groups' start lists (super.cu); the split walk's sum; the launch.
 */
#ifdef FMK_BH_COUNT
#include <stdio.h>
#endif

#include <cuda_pipeline.h>

#include "treecode/cuda/walk_lists.cuh"
#include "treecode/cuda/bh_diag.cuh"

namespace {

#ifdef FMK_BH_COUNT
/* Walk statistics (a build with -DFMK_BH_COUNT only): per breadth-first walk, the sums over
 * warps of targets, M2P entries x targets, P2P entries x targets, steps, stack overflows and
 * warps, and the deepest stack; and clock64 cycles per warp in the M2P, P2P, M2L and L2P
 * parts, in all, and the longest warp's; the points of the leaves that the per-target test
 * leaves opened, by how many targets open them (24..30); printed to stderr after each walk. */
__device__ unsigned long long fmk_bh_counts[32];
#define BH_CLOCK(var, stmt)              \
    do {                                 \
        const long long t0_ = clock64(); \
        stmt;                            \
        var += clock64() - t0_;          \
    } while (0)
#else
#define BH_CLOCK(var, stmt) stmt
#endif

/* Breadth-first group walk (Bonsai style), one warp per group of targets. The warp takes the
 * nodes still to test 32 at a time from a per-warp stack in shared memory: each lane tests one
 * node against the group's box (the test of the group walk), so a level of the tree costs one
 * memory latency for 32 nodes instead of one per node. Accepted nodes (centre and moments) and
 * the sources of opened leaves are appended (ballot + popc, a warp scan for source counts) to
 * shared-memory lists; the children of opened nodes (contiguous: more, more + n_children) are
 * pushed on the stack. A list that holds 32 entries is evaluated by all lanes at once, each
 * lane for its target(s), reading the entries from shared memory (broadcast). A stack that
 * would overflow (seen only with leaves of 128 on a Plummer sphere) makes the node's opening a
 * direct sum over its points (exact).
 *
 * The lists are rings of 64 entries: the n entries waiting start at head (0 or 32), so a full
 * chunk of 32 is contiguous and is evaluated in place (no copying). The M2P and P2P lists are
 * evaluated before entries are added when they hold 32 or more (then at most 31 + 32 = 63
 * entries), so that the chunk's work overlaps the loads of what is added: the M2P list's over
 * a step's node loads, the P2P list's over the previous P2P batch's copies (the expansion's
 * list is evaluated as soon as it is full: its chunk, held over the loads, spills more). A
 * node's moments are loaded only when it goes into the M2P list. The P2P list's sources are
 * copied into shared memory asynchronously (cp.async) and made relative to the walk's origin
 * when their chunk is evaluated. The per-target tests of the leaves the group's box opens take
 * two leaves at a time, so that their shuffles and votes overlap.
 *
 * One walk of a warp: its state (registers; the lists and the stack in shared memory) and its
 * steps, all inlined into k_walk_bfs. LOC: 0 no cell-to-group step; 3 the step of order
 * a.local (2 or 3); 4 the step of order 4; 5 that of order 4 for eps2 = 0 (its harmonic
 * coefficients). SUPER (LOC 4 and 5): the walk starts from its super-group's start list. */
template <typename R, int ORDER, int MODE, int T, int LOC, bool SUPER> struct bfs_walk {
    typedef typename vec4<R>::type V;
    /* MODE (walk_mode): 0 separate targets, 1 targets = sources (the self pair left out by
     * index under a softened kernel), 2 the gradient alone (no potential terms; the self pair
     * taken in: its gradient term is 0) */
    static constexpr bool SELF = MODE == 1, POT = MODE != 2;
    static constexpr bool LOCAL = LOC != 0;
    /* nodes waiting per warp (the deepest seen at 2^20 points: 408 (cube), 620 (Plummer, with
     * super-groups); a smaller stack would sum more nodes directly) */
    static constexpr int STACK = LOCAL ? 896 : 960;
    static constexpr unsigned FULL = 0xffffffffu;
    typedef local_acc<R, LOC ? LOC : 3> acc_t;

    const fmk_bh_walk_args<R> &a;
    const int lane;
    const unsigned lt; /* the lanes below this one */
    V (*const node_list)[4];
    V *const src_list;
    real4f *const lo_list;
    int32_t *const idx_list, *const first_at, *const stack, *const loc_list;
    int part;
    int2 grp;
    V c, h, o;
    R crx, cry, crz; /* c - o */
    int32_t t[T];
    R y[T][3], phi[T], g[T][3];
    int sp;                         /* warp-uniform */
    int n_m2p, n_p2p, h_m2p, h_p2p; /* warp-uniform */
    /* warp-uniform: the walk's accepted nodes (M2P and expansion) and P2P sources, for
     * fmk_info's counts (count_flush); a walk's are below 2^31: sources and nodes are int32 */
    int32_t all_far, all_p2p;
    R loc_r;
    int n_loc, h_loc;
    bool any_loc;
    acc_t loc;
    R mx, my, mz; /* the group's box with a margin (in_box) */
#ifdef FMK_BH_COUNT
    long long k_m2p = 0, k_p2p = 0, k_loc = 0, k_l2p = 0, k_start = 0;
    long long c_m2p = 0, c_p2p = 0, c_steps = 0, c_over = 0, c_depth = 0, c_loc = 0;
    long long c_cand = 0, c_okc = 0, k_mac = 0, k_push = 0;
    long long c_open[7] = {0, 0, 0, 0, 0, 0, 0};
#endif

    __device__ __forceinline__ bfs_walk(const fmk_bh_walk_args<R> &a_, V (*nodes)[4], V *srcs,
                                        real4f *los, int32_t *idx, int32_t *first, int32_t *stk,
                                        int32_t *locs)
        : a(a_), lane(threadIdx.x & 31), lt((1u << (threadIdx.x & 31)) - 1), node_list(nodes),
          src_list(srcs), lo_list(los), idx_list(idx), first_at(first), stack(stk), loc_list(locs)
    {
#ifdef FMK_BH_COUNT
        k_start = clock64();
#endif
    }

    /* Group w, part `part` of it; n_start >= 0: the walk starts from the start list on the
     * stack, with the super-groups' expansions at the targets (init), else from the root. */
    __device__ __forceinline__ void begin(int64_t w, int part_, int32_t n_start, const R *init)
    {
        part = part_;
        grp = a.groups[w];
        c = a.box[2 * w], h = a.box[2 * w + 1];
        /* positions relative to o (rel_point): the targets here, the P2P list's sources as they
         * enter it, node centres as they are tested or packed; cr = c - o */
        o = walk_origin<R>(c);
        crx = sizeof(R) == 4 ? (R)0 : c.x, cry = sizeof(R) == 4 ? (R)0 : c.y;
        crz = sizeof(R) == 4 ? (R)0 : c.z;
#pragma unroll
        for (int k = 0; k < T; k++) {
            t[k] = grp.x + lane + 32 * k;
            const V p = rel_point<R>(a.trg, a.trg_lo, t[k] < grp.y ? t[k] : grp.x, o);
            y[k][0] = p.x, y[k][1] = p.y, y[k][2] = p.z;
            phi[k] = 0, g[k][0] = g[k][1] = g[k][2] = 0;
        }
        sp = 1;
        if (SUPER && n_start >= 0) {
            sp = n_start;
#pragma unroll
            for (int k = 0; k < T; k++)
                phi[k] = init[k], g[k][0] = init[T + 3 * k], g[k][1] = init[T + 3 * k + 1],
                g[k][2] = init[T + 3 * k + 2];
        } else if (lane == 0) {
            stack[0] = 0; /* the root */
        }
        n_m2p = 0, n_p2p = 0, h_m2p = 0, h_p2p = 0;
        all_far = 0, all_p2p = 0;
        /* The cell-to-group step: an accepted node goes into the group's expansion about c
         * when its centre is farther than a r_open + local_k R_g from c (a = tune.local_open);
         * every target of the group (within R_g of c) is outside its opening sphere (it was
         * accepted), and |y - c| / |xc - c| < 1 / local_k. Lane k holds coefficient k of the
         * expansion. */
        loc_r = a.local_k * sqrt(h.x * h.x + h.y * h.y + h.z * h.z);
        n_loc = 0, h_loc = 0;
        any_loc = false;
        loc = {};
        /* A source that can coincide with a target lies in the group's box (which holds them
         * up to the rounding of its centre: a margin of 2^-20 of the coordinates, 2^-10 of the
         * box). */
        mx = fabs(c.x) * (R)0x1p-20 + h.x * (R)(1 + 0x1p-10);
        my = fabs(c.y) * (R)0x1p-20 + h.y * (R)(1 + 0x1p-10);
        mz = fabs(c.z) * (R)0x1p-20 + h.z * (R)(1 + 0x1p-10);
    }

    __device__ __forceinline__ unsigned char in_box(const V &p) const /* p relative to o */
    {
        return fabs(p.x - crx) <= mx && fabs(p.y - cry) <= my && fabs(p.z - crz) <= mz;
    }

    /* Evaluates the first 32 entries of a list and moves the rest (< 32) to the front. */
    __device__ __forceinline__ void m2p_chunk()
    {
        BH_CLOCK(k_m2p, (bfs_m2p<R, ORDER, T, POT>(node_list + h_m2p, 32, y, a.eps2, phi, g)));
        h_m2p ^= 32, n_m2p -= 32;
        __syncwarp(); /* the slots are written again */
    }

    __device__ __forceinline__ void loc_chunk()
    {
        BH_CLOCK(k_loc, (bfs_m2l<R, ORDER, LOC ? LOC : 3>(a.node, loc_list + h_loc, 32, a.local, c,
                                                          a.eps2, loc)));
        h_loc ^= 32, n_loc -= 32;
        __syncwarp();
    }

    /* The P2P list's sources arrive by asynchronous copies (cp.async: the point and, fp32,
     * its rest); a chunk's count entries are made relative to o, one per lane, when it is
     * evaluated. Returns whether one of them lies in the group's box. */
    __device__ __forceinline__ bool p2p_ready(int count)
    {
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
    }

    __device__ __forceinline__ void p2p_chunk()
    {
        const bool any_in = p2p_ready(32);
        BH_CLOCK(k_p2p,
                 (bfs_p2p_any<R, SELF, T, POT>(src_list + h_p2p, idx_list + (SELF ? h_p2p : 0),
                                               any_in, 32, t, y, a.eps2, phi, g)));
        h_p2p ^= 32, n_p2p -= 32;
        __syncwarp();
    }

    /* The per-target test (a.mac) of the candidates (a bit per lane: nodes the box opens):
     * the bits of those outside whose sphere every target of the group lies. Two at a time
     * (the second may repeat the first). */
    __device__ __forceinline__ unsigned mac_ok(unsigned cand, const V &x, const int4 &l) const
    {
        unsigned ok = 0;
        while (cand) {
            const int f = __ffs(cand) - 1;
            cand &= cand - 1;
            const int f2 = cand ? __ffs(cand) - 1 : f;
            cand &= cand - 1;
            /* o is the same in every lane */
            const R rs = x.w * (l.x < 0 ? a.leaf_r2 : a.inner_r2);
            const R nx = __shfl_sync(FULL, x.x, f) - o.x, ny = __shfl_sync(FULL, x.y, f) - o.y,
                    nz = __shfl_sync(FULL, x.z, f) - o.z, r2 = __shfl_sync(FULL, rs, f);
            const R nx2 = __shfl_sync(FULL, x.x, f2) - o.x, ny2 = __shfl_sync(FULL, x.y, f2) - o.y,
                    nz2 = __shfl_sync(FULL, x.z, f2) - o.z, r22 = __shfl_sync(FULL, rs, f2);
            const bool all1 = __all_sync(FULL, targets_far<R, T>(t, grp.y, y, nx, ny, nz, r2));
            const bool all2 = __all_sync(FULL, targets_far<R, T>(t, grp.y, y, nx2, ny2, nz2, r22));
            ok |= (all1 ? 1u << f : 0u) | (all2 ? 1u << f2 : 0u);
        }
        return ok;
    }

#ifdef FMK_BH_COUNT
    /* The leaves the per-target test left opened: their points by how many of the targets
     * open them. */
    __device__ __forceinline__ void count_open(bool still, const V &x, int32_t cnt)
    {
        unsigned cc = __ballot_sync(FULL, still);
        while (cc) {
            const int f = __ffs(cc) - 1;
            cc &= cc - 1;
            const R nx = __shfl_sync(FULL, x.x, f) - o.x, ny = __shfl_sync(FULL, x.y, f) - o.y,
                    nz = __shfl_sync(FULL, x.z, f) - o.z,
                    r2 = __shfl_sync(FULL, x.w * a.leaf_r2, f);
            const int kn =
                __popc(__ballot_sync(FULL, !targets_far<R, T>(t, grp.y, y, nx, ny, nz, r2)));
            const int n = __shfl_sync(FULL, cnt, f);
            c_open[kn <= 1 ? 0 : kn <= 4 ? 1 : kn <= 8 ? 2 : kn <= 16 ? 3 : kn <= 24 ? 4 : 5] += n;
            c_open[6] += kn * n;
        }
    }
#endif

    /* The children of the opened nodes onto the stack (a warp scan of their counts); when
     * there is no room, the opened nodes are summed directly instead. */
    __device__ __forceinline__ void push_children(bool &open, bool &direct, bool mine, int32_t i,
                                                  const int4 &l, int32_t nc)
    {
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
    }

    /* Node i into the group's expansion's list (evaluated when it holds 32). */
    __device__ __forceinline__ void add_loc(bool to_loc, int32_t i)
    {
        const unsigned loc_mask = __ballot_sync(FULL, to_loc);
        if (LOCAL && loc_mask) {
            if (to_loc)
                loc_list[(h_loc + n_loc + __popc(loc_mask & lt)) & 63] = i;
            n_loc += __popc(loc_mask);
            all_far += __popc(loc_mask);
            any_loc = true;
#ifdef FMK_BH_COUNT
            c_loc += __popc(loc_mask);
#endif
            __syncwarp();
            if (n_loc >= 32)
                loc_chunk();
        }
    }

    /* The accepted node (centre x, moments m1, m2, m3) packed into the M2P list. */
    __device__ __forceinline__ void add_m2p(bool take, const V &x, const V &m1, const V &m2,
                                            const V &m3)
    {
        const unsigned acc_mask = __ballot_sync(FULL, take);
        if (take) {
            V xo = x; /* the centre relative to o */
            xo.x = x.x - o.x, xo.y = x.y - o.y, xo.z = x.z - o.z;
            bfs_pack<R, ORDER>(xo, m1, m2, m3, a.eps2,
                               node_list[(h_m2p + n_m2p + __popc(acc_mask & lt)) & 63]);
        }
        n_m2p += __popc(acc_mask);
        all_far += __popc(acc_mask);
#ifdef FMK_BH_COUNT
        c_m2p += __popc(acc_mask);
#endif
        __syncwarp();
    }

    /* The sources [begin, begin + cnt) of the directly summed nodes (direct) into the P2P list,
     * 32 positions at a time. */
    __device__ __forceinline__ void add_p2p(bool direct, int32_t cnt, int32_t begin)
    {
        int32_t incl = direct ? cnt : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int32_t v = __shfl_up_sync(FULL, incl, d);
            if (lane >= d)
                incl += v;
        }
        const int32_t total = __shfl_sync(FULL, incl, 31);
        all_p2p += total;
#ifdef FMK_BH_COUNT
        c_p2p += total;
#endif
        /* source = first + position; this lane's positions are [excl, incl) */
        const int32_t excl = incl - (direct ? cnt : 0), first = begin - excl;
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
            if (n_p2p >= 32) /* before the copies: p2p_ready waits for all of them */
                p2p_chunk();
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
            n_p2p += k;
            __syncwarp();
        }
    }

    /* One step: up to 32 nodes from the stack, tested by one lane each, and what they make:
     * children pushed, expansion, M2P and P2P list entries. */
    __device__ __forceinline__ void step()
    {
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
        /* the previous step's full M2P chunk, while the loads are in flight */
        if (n_m2p >= 32)
            m2p_chunk();
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
        if (a.mac) { /* tune.mac: the nodes the box opens, tested at every target */
            const unsigned cand =
                __ballot_sync(FULL, valid && !skip && !far && cnt > p2p_cut<ORDER>::value &&
                                        (a.mac == 1 || l.x < 0));
            const unsigned ok = mac_ok(cand, x, l);
            far = far || (ok >> lane & 1u);
#ifdef FMK_BH_COUNT
            c_cand +=
                __popc(__ballot_sync(FULL, valid && !skip && cnt > p2p_cut<ORDER>::value &&
                                               l.x < 0 && !(dx * dx + dy * dy + dz * dz > x.w)));
            c_okc += __popc(ok);
            count_open(valid && !skip && !far && cnt > p2p_cut<ORDER>::value && l.x < 0, x, cnt);
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
        V m1, m2, m3;
        if (accept && !to_loc)
            m1 = a.node[4 * i + 1], m2 = a.node[4 * i + 2], m3 = a.node[4 * i + 3];

        push_children(open, direct, mine, i, l, nc);
#ifdef FMK_BH_COUNT
        k_push += clock64() - t_push;
#endif
        add_loc(to_loc, i);
        add_m2p(accept && !to_loc, x, m1, m2, m3);
        add_p2p(direct, cnt, l.z);
    }

    /* The rest of the lists, then the group's expansion at each target (L2P). */
    __device__ __forceinline__ void finish()
    {
        if (n_m2p >= 32)
            m2p_chunk();
        if (n_p2p >= 32)
            p2p_chunk();
        BH_CLOCK(k_m2p, (bfs_m2p<R, ORDER, T, POT>(node_list + h_m2p, n_m2p, y, a.eps2, phi, g)));
        {
            const bool any_in = p2p_ready(n_p2p);
            BH_CLOCK(k_p2p,
                     (bfs_p2p_any<R, SELF, T, POT>(src_list + h_p2p, idx_list + (SELF ? h_p2p : 0),
                                                   any_in, n_p2p, t, y, a.eps2, phi, g)));
        }
        if (LOCAL && any_loc) {
            if (n_loc > 0)
                BH_CLOCK(k_loc, (bfs_m2l<R, ORDER, LOC ? LOC : 3>(a.node, loc_list + h_loc, n_loc,
                                                                  a.local, c, a.eps2, loc)));
#ifdef FMK_BH_COUNT
            const long long t_l2p = clock64();
#endif
            constexpr int NC = acc_t::NC;
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
                l2p_order<LOC == 5 ? 4
                          : LOC    ? LOC
                                   : 3>(a.local, L, y[k][0] - crx, y[k][1] - cry, y[k][2] - crz,
                                     &phi[k], g[k]);
#ifdef FMK_BH_COUNT
            k_l2p += clock64() - t_l2p;
#endif
        }
    }

    /* fmk_info's counts of this walk (a.count): every target of the group takes the whole
     * lists; the pair of a target with its own source (self: in the P2P list of the part that
     * holds its leaf) left out once per group, by part 0. One atomic each, by lane 0. */
    __device__ __forceinline__ void count_flush() const
    {
        if (lane != 0)
            return;
        const unsigned long long nt = (unsigned long long)(grp.y - grp.x);
        atomicAdd(&a.count[0], nt * (unsigned long long)all_p2p - (SELF && part == 0 ? nt : 0));
        atomicAdd(&a.count[1], nt * (unsigned long long)all_far);
    }

    __device__ __forceinline__ void store_all() const
    {
#pragma unroll
        for (int k = 0; k < T; k++)
            if (t[k] < grp.y)
                store(a, t[k], phi[k], g[k], 1.0 / charge_scale<R>(a.stats), part);
    }

#ifdef FMK_BH_COUNT
    __device__ __forceinline__ void counts_flush() const
    {
        if (lane != 0)
            return;
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
};

template <typename R, int ORDER, int MODE, int T, int LOC, bool SUPER = false>
__global__ void
__launch_bounds__(bfs_cfg<R>::WARPS * 32,
                  LOC && sizeof(R) == 4
                      ? bfs_cfg<R>::blocks(4 * (FMK_LOCAL_MINB - (SUPER ? FMK_SUPER_MINB_LESS : 0)))
                      : bfs_cfg<R>::MIN_BLOCKS) k_walk_bfs(fmk_bh_walk_args<R> a)
{
    typedef bfs_walk<R, ORDER, MODE, T, LOC, SUPER> walk_t;
    typedef typename vec4<R>::type V;
    constexpr bool LOCAL = walk_t::LOCAL;
    constexpr int WARPS = bfs_cfg<R>::WARPS, STACK = walk_t::STACK;
    __shared__ V s_node[WARPS][64][4]; /* accepted nodes, packed by bfs_pack */
    __shared__ V s_src[WARPS][64];     /* sources of opened leaves (copied, then relative to o) */
    __shared__ real4f s_lo[WARPS][sizeof(R) == 4 ? 64 : 1]; /* fp32: their rests (copied) */
    __shared__ int32_t s_idx[WARPS][walk_t::SELF ? 64 : 1];
    __shared__ int32_t s_first[WARPS][32]; /* a P2P batch's source ranges by first position */
    __shared__ int32_t s_stack[WARPS][STACK];
    __shared__ int32_t s_loc[WARPS][LOCAL ? 64 : 1]; /* nodes for the group's expansion */
    const int wb = threadIdx.x >> 5;
    if (charges_bad(a.stats))
        return;
    /* the walks of this warp, of the launch's [walk0, walk1): one (a.ticket NULL), or one
     * after another by tickets (the counter starts at walk0) */
    int64_t wp = a.ticket ? take_ticket(a.ticket) : a.walk0 + blockIdx.x * (int64_t)WARPS + wb;
    while (wp < a.walk1) {
#ifdef FMK_BH_TRACE
        const unsigned long long tr0 = trace_clock();
#endif
        walk_t walk(a, s_node[wb], s_src[wb], s_lo[wb], s_idx[wb], s_first[wb], s_stack[wb],
                    s_loc[wb]);
        int64_t w = wp / a.parts; /* the group */
        /* super-groups (walk_args): the start list replaces the root, unless it overflowed */
        int32_t n_start = -1; /* start-list entries; -1: from the root */
        R init[4 * T];        /* the super-group's expansion at the targets */
        if (SUPER)
            n_start = super_start<R, T>(a.super_order, a.super_count, a.super_list, a.super_cap,
                                        a.super, a.super_centre, a.super_local, a.super_up,
                                        a.up_count, a.up_centre, a.up_local, a.groups, a.box, a.trg,
                                        a.trg_lo, wp, s_stack[wb], &w, init, a.count + 1);
        walk.begin(w, (int)(wp % a.parts), n_start, init);
        __syncwarp();
        while (walk.sp > 0)
            walk.step();
        walk.finish();
        walk.count_flush();
#ifdef FMK_BH_COUNT
        walk.counts_flush();
#endif
        walk.store_all();
#ifdef FMK_BH_TRACE
        trace_put(tr0, 0,
                  (float)sqrt(walk.h.x * walk.h.x + walk.h.y * walk.h.y + walk.h.z * walk.h.z),
                  (unsigned)w);
#endif
        if (!a.ticket)
            break;
        __syncwarp(); /* the lists' slots and the stack are written again */
        wp = take_ticket(a.ticket);
    }
}
#undef BH_CLOCK

/* A breadth-first walk's launch: with tickets (walk_args.ticket) a grid of as many blocks as
 * the GPU holds at once, at most blocks (and at most `tickets` when that is more than 1: the
 * tests' warps that walk many groups each); else blocks (one group walk per warp). */
template <typename R, typename K>
void launch_bfs(K kernel, const fmk_bh_walk_args<R> &a, unsigned blocks, int tickets)
{
    constexpr int threads = bfs_cfg<R>::WARPS * 32;
    int per_sm = 0, dev = 0;
    /* (small grids as they are: the query costs host time, and a grid larger than the GPU
     * holds only has warps that find no ticket left) */
    if (a.ticket && cudaPeekAtLastError() == cudaSuccess && cudaGetDevice(&dev) == cudaSuccess &&
        (blocks > 16ll * fmk_cuda_sm_count(dev) || tickets > 1)) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) ==
            cudaSuccess) {
            long long held = (long long)(per_sm > 1 ? per_sm : 1) * fmk_cuda_sm_count(dev);
            if (tickets > 1 && tickets < held) /* the tests' */
                held = tickets;
            blocks = held < (long long)blocks ? (unsigned)held : blocks;
        } else {
            (void)cudaGetLastError(); /* the full grid (tickets work with any grid) */
        }
    }
    kernel<<<blocks, threads>>>(a);
}

template <typename R, int ORDER, int MODE>
cudaError_t launch_walk(const fmk_bh_walk_args<R> &a, int tickets)
{
    constexpr int WB = bfs_cfg<R>::WARPS;
    if (a.m == 0 || a.n_groups == 0 || a.walk1 <= a.walk0)
        return cudaSuccess;
    const unsigned blocks = (unsigned)((a.walk1 - a.walk0 + WB - 1) / WB);
    /* the super-groups' walks before the first launch of the group walks */
    const int first = a.walk0 == 0;
    if (a.local == 4 && a.harmonic) { /* the cell-to-group step of order 4 */
        if (a.super) {
            if (first)
                (void)fmk_cuda_bh_super_walks(a, ORDER, 5); /* errors: below */
            launch_bfs(k_walk_bfs<R, ORDER, MODE, 1, 5, true>, a, blocks, tickets);
        } else {
            launch_bfs(k_walk_bfs<R, ORDER, MODE, 1, 5>, a, blocks, tickets);
        }
    } else if (a.local == 4) {
        if (a.super) {
            if (first)
                (void)fmk_cuda_bh_super_walks(a, ORDER, 4);
            launch_bfs(k_walk_bfs<R, ORDER, MODE, 1, 4, true>, a, blocks, tickets);
        } else {
            launch_bfs(k_walk_bfs<R, ORDER, MODE, 1, 4>, a, blocks, tickets);
        }
    } else if (a.local) {
        launch_bfs(k_walk_bfs<R, ORDER, MODE, 1, 3>, a, blocks, tickets);
    } else {
        launch_bfs(k_walk_bfs<R, ORDER, MODE, 1, 0>, a, blocks, tickets);
    }
    return cudaGetLastError();
}

template <typename R>
cudaError_t walk(const fmk_bh_walk_args<R> &a, int order, int mode, int tickets)
{
    switch (order * 3 + (mode >= 0 && mode <= 2 ? mode : 0)) {
    case 0: return launch_walk<R, 0, 0>(a, tickets);
    case 1: return launch_walk<R, 0, 1>(a, tickets);
    case 2: return launch_walk<R, 0, 2>(a, tickets);
    case 3: return launch_walk<R, 1, 0>(a, tickets);
    case 4: return launch_walk<R, 1, 1>(a, tickets);
    case 5: return launch_walk<R, 1, 2>(a, tickets);
    case 6: return launch_walk<R, 2, 0>(a, tickets);
    case 7: return launch_walk<R, 2, 1>(a, tickets);
    default: return launch_walk<R, 2, 2>(a, tickets);
    }
}

} // namespace

cudaError_t fmk_cuda_bh_walk_group(const fmk_bh_walk_args<float> &a, int order, int mode,
                                   int tickets)
{
    return walk<float>(a, order, mode, tickets);
}

cudaError_t fmk_cuda_bh_walk_group(const fmk_bh_walk_args<double> &a, int order, int mode,
                                   int tickets)
{
    return walk<double>(a, order, mode, tickets);
}

void fmk_bh_walk_diag_begin(void)
{
#ifdef FMK_BH_COUNT
    unsigned long long cnt[32] = {0};
    (void)cudaMemcpyToSymbol(fmk_bh_counts, cnt, sizeof cnt);
#endif
#ifdef FMK_BH_TRACE
    trace_reset();
#endif
}

void fmk_bh_walk_diag_end(void)
{
#ifdef FMK_BH_COUNT
    unsigned long long cnt[32] = {0};
    if (cudaMemcpyFromSymbol(cnt, fmk_bh_counts, sizeof cnt) == cudaSuccess && cnt[0] > 0)
        fprintf(stderr,
                "walk counts: n %llu targets, %llu groups (%.1f targets each); per "
                "target %.1f M2P, %.1f P2P, %.1f nodes into the group's expansion; %.1f steps "
                "per group; %llu stack overflows, deepest stack %llu\n",
                cnt[0], cnt[5], (double)cnt[0] / cnt[5], (double)cnt[1] / cnt[0],
                (double)cnt[2] / cnt[0], (double)cnt[7] / cnt[0], (double)cnt[3] / cnt[5], cnt[4],
                cnt[6]);
    if (cnt[0] > 0 && cnt[14] > 0)
        fprintf(stderr,
                "walk cycles: per warp %.0f: M2P %.1f%%, P2P %.1f%%, M2L %.1f%%, L2P "
                "%.1f%%, the rest (tests, lists, stack) %.1f%%; longest warp %.2f x the mean\n",
                (double)cnt[14] / cnt[5], 100.0 * cnt[9] / cnt[14], 100.0 * cnt[10] / cnt[14],
                100.0 * cnt[11] / cnt[14], 100.0 * cnt[13] / cnt[14],
                100.0 * (cnt[14] - cnt[9] - cnt[10] - cnt[11] - cnt[13]) / cnt[14],
                (double)cnt[15] * cnt[5] / cnt[14]);
    if (cnt[0] > 0 && cnt[14] > 0)
        fprintf(stderr,
                "walk steps: per group %.1f leaves tested at every target, %.1f of them "
                "accepted; the per-target test %.1f%% of the cycles, the children's push %.1f%%\n",
                (double)cnt[16] / cnt[5], (double)cnt[17] / cnt[5], 100.0 * cnt[18] / cnt[14],
                100.0 * cnt[19] / cnt[14]);
    const double opened = (double)(cnt[24] + cnt[25] + cnt[26] + cnt[27] + cnt[28] + cnt[29]);
    if (cnt[0] > 0 && cnt[14] > 0 && opened > 0) {
        const double all = opened;
        fprintf(stderr,
                "walk opened leaves (per-target tested): per group %.1f points; by how "
                "many targets are inside the leaf's sphere: 1 %.1f%%, 2-4 %.1f%%, 5-8 %.1f%%, "
                "9-16 %.1f%%, 17-24 %.1f%%, 25-32 %.1f%%; %.1f on average\n",
                all / cnt[5], 100 * cnt[24] / all, 100 * cnt[25] / all, 100 * cnt[26] / all,
                100 * cnt[27] / all, 100 * cnt[28] / all, 100 * cnt[29] / all, cnt[30] / all);
    }
#endif
#ifdef FMK_BH_TRACE
    trace_append(1);
#endif
}
