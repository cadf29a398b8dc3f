/*
 * bh_local.cuh -- the cell-to-group step's device code, shared by the group walk
 * (walk_group.cu) and the super-groups' walk (super.cu): a warp's list of nodes translated
 * into one expansion about a box's centre (M2L of bh_local.h, one node per lane, the lanes'
 * expansions added by a reduce-scatter), and its evaluation at a point (L2P).
 */
#ifndef FMMKIT_TREECODE_BH_LOCAL_CUH
#define FMMKIT_TREECODE_BH_LOCAL_CUH

#include "treecode/cuda/bh_device.cuh"

/* The cell-to-group step (tune.local). Each lane translates one node of the warp's list
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
static __device__ __forceinline__ void local4_from_harm(const float *H, float *L)
{
    local4_from_harm_f(H, L);
}
static __device__ __forceinline__ void local4_from_harm(const double *H, double *L)
{
    local4_from_harm_d(H, L);
}
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
#ifndef FMK_LOCAL_INL
#define FMK_LOCAL_INL __forceinline__
#endif
/* The group's expansion held by the warp: lane k holds coefficient k < 32 in c[0]; LOC = 4
 * (35 coefficients) adds coefficients 32..34 in c[1..3], the same in every lane. LOC = 3 is
 * the kernel for orders 2 and 3 (a.local picks one at run time); LOC = 5 is order 4 for
 * eps2 = 0, the 25 coefficients with bz <= 1 (tune.local_harmonic). */
template <typename R, int LOC> struct local_acc {
    static constexpr int NC = LOC == 5   ? FMK_BH_HARM4
                              : LOC == 4 ? FMK_BH_LOCAL4
                                         : FMK_BH_LOCAL3; /* coefficients */
    static constexpr int EXTRA = NC > 32 ? NC - 32 : 0;
    R c[1 + EXTRA];
};

template <typename R, int ORDER, int LOC>
__device__ FMK_LOCAL_INL void
bfs_m2l(const typename vec4<R>::type *__restrict__ node, const int32_t *list, int count, int local,
        const typename vec4<R>::type &c, R eps2, local_acc<R, LOC> &acc)
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

#endif /* FMMKIT_TREECODE_BH_LOCAL_CUH */
