/* rsqrt.cuh -- 1/sqrt(x) for the pair loops of the direct engine (p2p.cu) and the 3D FMM's P2P
 * (fmm3d.cu): in fp32 MUFU.RSQ; in fp64 the MUFU.RSQ64H seed and one third-order correction.
 * Every overload of a name is declared here, in one scope: a caller's own overload of the same
 * name would hide these from its namespace (the fp64 call then binding to the fp32 one). */
#ifndef FMMKIT_CUDA_RSQRT_CUH
#define FMMKIT_CUDA_RSQRT_CUH

/* One third-order correction of a seed y ~ 1/sqrt(x) with relative error d: error ~5d^3/16
 * (far below 2^-53 for the seed's d). */
__device__ __forceinline__ double rsqrt_refine(double x, double y)
{
    double e = fma(-x, y * y, 1.0);
    return fma(y, e * fma(e, 0.375, 0.5), y);
}
__device__ __forceinline__ double rsqrt_seed(double x)
{
    double y;
    asm("rsqrt.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(x));
    return y;
}
/* 1/sqrt(x), and 0 where x == 0 (a coincident pair: x is exactly 0 only then). */
__device__ __forceinline__ double rsqrt_masked(double x)
{
    /* Zero the seed's high word when x == 0 (x >= 2^-104 otherwise in the box frame, 2^-600 in
     * the direct sum's exact frame (pair_exact.h), so its high word is not zero): the
     * correction then keeps y = 0 exactly, with no Inf or NaN on the way. */
    double y = rsqrt_seed(x);
    int hi = __double2hiint(x) != 0 ? __double2hiint(y) : 0;
    return rsqrt_refine(x, __hiloint2double(hi, __double2loint(y)));
}
__device__ __forceinline__ double rsqrt_plain(double x)
{
    return rsqrt_refine(x, rsqrt_seed(x));
}
__device__ __forceinline__ float rsqrt_plain(float x)
{
    return rsqrtf(x); /* MUFU.RSQ */
}

#endif /* FMMKIT_CUDA_RSQRT_CUH */
