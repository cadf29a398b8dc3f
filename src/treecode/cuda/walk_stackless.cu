/*
 * walk_stackless.cu -- the paper's walk (FMK_WALK_STACKLESS; Nakasato Fig. 6): one thread per
 * sorted target, accept -> next, open -> more, no stack; the opening test against the target
 * itself (fewer interactions than the group walk's, divergent warps).
 */
#include "treecode/cuda/bh_device.cuh"

namespace {

constexpr int WALK_BLOCK = 128;

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
/* fmk_info's counts of a warp's targets (n_p2p pairs, n_far M2P terms per thread): summed over
 * the warp (every lane calls), one atomic each by lane 0. */
__device__ __forceinline__ void count_flush(unsigned long long *count, unsigned long long n_p2p,
                                            unsigned long long n_far)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        n_p2p += __shfl_down_sync(0xffffffffu, n_p2p, d);
        n_far += __shfl_down_sync(0xffffffffu, n_far, d);
    }
    if ((threadIdx.x & 31) == 0 && (n_p2p || n_far)) {
        atomicAdd(&count[0], n_p2p);
        atomicAdd(&count[1], n_far);
    }
}

/* One thread per sorted target (Nakasato Fig. 6). */
template <typename R, int ORDER, bool SELF>
__global__ void __launch_bounds__(WALK_BLOCK) k_walk_stackless(fmk_bh_walk_args<R> a)
{
    typedef typename vec4<R>::type V;
    const int64_t tt = a.walk0 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (charges_bad(a.stats)) /* the whole grid alike */
        return;
    /* a thread past the launch's targets walks nothing but takes part in count_flush */
    const int32_t t = (int32_t)(tt < a.walk1 ? tt : a.walk0);
    unsigned n_p2p = 0, n_far = 0; /* this target's terms (fewer than 2^31 each) */
    const V p = a.trg[t];
    /* offsets from the target's fp32 coordinate p (rel_point): p - s and p - xc exact (node
     * centres are fp32 numbers), then the rests */
    const real4f pr = sizeof(R) == 4 ? a.trg_lo[t] : real4f{0, 0, 0, 0};
    R phi = 0, g[3] = {0, 0, 0};
    int32_t i = tt < a.walk1 ? 0 : -1;
    while (i >= 0) {
        const int4 l = __ldg(&a.links[i]);
        const V x = a.node[4 * i];
        const R rx = (p.x - x.x) + (R)pr.x, ry = (p.y - x.y) + (R)pr.y, rz = (p.z - x.z) + (R)pr.z;
        const bool far = rx * rx + ry * ry + rz * rz > x.w;
        if (far && l.w - l.z > p2p_cut<ORDER>::value) {
            R m[10];
            ld_moments(a.node, i, m);
            m2p(ORDER, rx, ry, rz, a.eps2, m, &phi, g);
            n_far++;
            i = l.y;
        } else if (far || l.x < 0) {
            n_p2p += (unsigned)(l.w - l.z) - (SELF && t >= l.z && t < l.w ? 1u : 0u);
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
    count_flush(a.count, n_p2p, n_far);
    if (tt < a.walk1)
        store(a, t, phi, g, 1.0 / charge_scale<R>(a.stats));
}

template <typename R, bool SELF> cudaError_t launch(const fmk_bh_walk_args<R> &a, int order)
{
    if (a.walk1 <= a.walk0) /* the launch's targets [walk0, walk1) */
        return cudaSuccess;
    const unsigned blocks = fmk_bh_blocks(a.walk1 - a.walk0, WALK_BLOCK);
    if (order == 0)
        k_walk_stackless<R, 0, SELF><<<blocks, WALK_BLOCK>>>(a);
    else if (order == 1)
        k_walk_stackless<R, 1, SELF><<<blocks, WALK_BLOCK>>>(a);
    else
        k_walk_stackless<R, 2, SELF><<<blocks, WALK_BLOCK>>>(a);
    return cudaGetLastError();
}

} // namespace

cudaError_t fmk_cuda_bh_walk_stackless(const fmk_bh_walk_args<float> &a, int order, int self)
{
    return self ? launch<float, true>(a, order) : launch<float, false>(a, order);
}

cudaError_t fmk_cuda_bh_walk_stackless(const fmk_bh_walk_args<double> &a, int order, int self)
{
    return self ? launch<double, true>(a, order) : launch<double, false>(a, order);
}
