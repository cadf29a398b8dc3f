/*
 * walk_lists.cuh -- the group walk's device code besides its kernel (walk_group.cu): the
 * per-target test, positions relative to the group, the M2P and P2P lists' packing and
 * evaluation, the start of a walk from its super-group's start list, and the compile-time
 * choices of the walk's loop.
 */
#ifndef FMMKIT_TREECODE_WALK_LISTS_CUH
#define FMMKIT_TREECODE_WALK_LISTS_CUH

#include "treecode/cuda/bh_local.cuh"

/* The next walk of the warp's (walk_args.ticket): one atomic by lane 0, all lanes calling. */
static __device__ __forceinline__ int64_t take_ticket(unsigned long long *ticket)
{
    unsigned long long k = 0;
    if ((threadIdx.x & 31) == 0)
        k = atomicAdd(ticket, 1ull);
    return (int64_t)__shfl_sync(0xffffffffu, k, 0);
}

/* The per-target test of tune.mac, for this lane's targets (T per lane) against a node
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

/* Warps per block of the fp32 group walk: 1, so that a warp's slot is free as soon as its group
 * is done (with more, the groups' unequal work held each block until its slowest warp ended). */
#ifndef FMK_BFS_WARPS
#define FMK_BFS_WARPS 1
#endif
/* The group walk's hot loop is larger than the SM's instruction caches hold, and code added
 * to the loop, even code that does not run, makes it slower (docs/tree.md, "The loop's code
 * size"). So each list is evaluated at one place in the loop: the P2P list's full chunk only
 * before a P2P batch's copies. FMK_P2P_UNROLL and FMK_M2P_UNROLL: the lists' unrolling. */
#ifndef FMK_P2P_UNROLL
#define FMK_P2P_UNROLL 4
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
__device__ __forceinline__ void
bfs_pack(const typename vec4<R>::type &x, const typename vec4<R>::type &m1,
         const typename vec4<R>::type &m2, const typename vec4<R>::type &m3, R eps2,
         typename vec4<R>::type *e)
{
    typedef typename vec4<R>::type V;
    V a, b, c, d;
    a.x = x.x, a.y = x.y, a.z = x.z, a.w = m1.x;
    b.x = m1.y, b.y = m1.z, b.z = m1.w;
    const R tr = m2.x + m2.w + m3.y, third = tr * (R)(1.0 / 3.0);
    b.w = (R)1.5 * m3.x;                                                       /* Q_yz */
    c.x = (R)1.5 * (m2.x - third), c.y = (R)1.5 * m2.y, c.z = (R)1.5 * m2.z;   /* Q_xx Q_xy Q_xz */
    c.w = (R)1.5 * (m2.w - third);                                             /* Q_yy */
    d.x = (R)1.5 * (m3.y - third), d.y = (R)0.5 * tr * eps2, d.z = 0, d.w = 0; /* Q_zz, E */
    if (ORDER < 2)
        b.w = c.x = c.y = c.z = c.w = d.x = d.y = 0;
    e[0] = a, e[1] = b, e[2] = c, e[3] = d;
}

/* POT false: the potential's terms are left out (a walk for the gradient alone). */
template <typename R, int ORDER, int T, bool POT = true>
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
            if (POT)
                phi[k] = fma(a.w, u1, phi[k]);
            R cc = a.w * u3; /* coefficient of -r in the gradient */
            if (ORDER >= 1) {
                const V b = list[e][1];
                const R dr = fma(b.x, rx, fma(b.y, ry, b.z * rz));
                const R u5 = u3 * u2;
                if (POT)
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
                    if (POT)
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

#ifndef FMK_LOCAL_MINB
#define FMK_LOCAL_MINB 6
#endif
/* FMK_LOCAL_MINB: the fp32 group walk with the cell-to-group step is bounded for 4 x that many
 * warps per SM. Its shared memory, 10.4 KB a warp and the 1 KB the driver keeps per block,
 * holds 20 one-warp blocks on an SM. With super-groups (SUPER) 4 warps fewer: at the tighter
 * bound that walk's loop spilled (its stack's first length is no longer 1) and ran slower on
 * the same interactions. */
#ifndef FMK_SUPER_MINB_LESS
#define FMK_SUPER_MINB_LESS 1
#endif

/* P2P over a list of sources (POT false: the gradient alone). SOFT (eps2 > 0): t > 0 always,
 * and with SELF the self term is left out by index (without SELF, targets = sources take it
 * in: its offsets are 0, and so is its gradient term). Laplace (eps2 = 0): a coincident pair (the self term among them) adds nothing
 * (bh_terms.h's rule), so no index is needed, and GUARD = false skips that test for a list in
 * which no source lies in the group's box (no source there can coincide with a target). */
template <typename R, bool SELF, bool SOFT, bool GUARD, int T, bool POT = true>
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
            if (POT)
                phi[k] += qu;
            g[k][0] = fma(qu3, dx, g[k][0]);
            g[k][1] = fma(qu3, dy, g[k][1]);
            g[k][2] = fma(qu3, dz, g[k][2]);
        }
    }
}

/* count <= 32 entries; any_in: some source lies in the group's box. */
template <typename R, bool SELF, int T, bool POT = true>
__device__ __forceinline__ void bfs_p2p_any(const typename vec4<R>::type *src, const int32_t *idx,
                                            bool any_in, int count, const int32_t (&t)[T],
                                            const R (&y)[T][3], R eps2, R (&phi)[T], R (&g)[T][3])
{
    if (eps2 > 0)
        bfs_p2p<R, SELF, true, true, T, POT>(src, idx, count, t, y, eps2, phi, g);
    else if (any_in)
        bfs_p2p<R, SELF, false, true, T, POT>(src, idx, count, t, y, eps2, phi, g);
    else
        bfs_p2p<R, SELF, false, false, T, POT>(src, idx, count, t, y, eps2, phi, g);
}

/* The start of group walk wp with super-groups (k_walk_bfs, walk_args): its group (*w), its
 * super-group's start list on the stack, and the super-group's expansion at its T targets per
 * lane (L2P; init: T potentials, then 3 T gradient components, zeros when there is none);
 * the nodes of the expansions it adds, times its targets, into *count_far (fmk_info).
 * Returns the list's length, -1 after an overflow (from the root: *w and init as well). Not
 * inlined: its registers stay out of the walk's (inlined, the walk's loop spilled more and
 * ran slower on the same interactions: FMK_SUPER_MINB_LESS). */
template <typename R, int T>
__device__ __noinline__ int
super_start(const int32_t *super_order, const int32_t *super_count, const int32_t *super_list,
            int super_cap, int super, const typename vec4<R>::type *super_centre,
            const R *super_local, int super_up, const int32_t *up_count,
            const typename vec4<R>::type *up_centre, const R *up_local, const int2 *groups,
            const typename vec4<R>::type *box, const typename vec4<R>::type *trg,
            const real4f *trg_lo, int64_t wp, int32_t *stack, int64_t *w, R *init,
            unsigned long long *count_far)
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
        if (lane == 0) /* fmk_info's far terms: the expansion's nodes (cs.w) at every target */
            atomicAdd(count_far,
                      (unsigned long long)(groups[*w].y - groups[*w].x) * (unsigned long long)cs.w);
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

#endif /* FMMKIT_TREECODE_WALK_LISTS_CUH */
