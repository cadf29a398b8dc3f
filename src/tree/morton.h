/*
 * morton.h -- the bit spreading of Morton keys, one definition for the host and the device:
 * fmk_spread3 puts the 21 low bits of v on every third bit (bit b on bit 3b), fmk_compact3 is
 * its inverse, fmk_spread2 puts the 31 low bits on every second bit. Used by the octree's keys
 * (tree3d.c, cuda/tree3d_device.cuh), the resolution guard's (resolution.c) and the
 * distributed plans' partition (src/mpi/partition.c).
 */
#ifndef FMMKIT_TREE_MORTON_H
#define FMMKIT_TREE_MORTON_H

#include <stdint.h>

#ifdef __CUDACC__
#define FMK_MORTON_HD static __host__ __device__ __forceinline__
#else
#define FMK_MORTON_HD static inline
#endif

FMK_MORTON_HD uint64_t fmk_spread3(uint64_t v)
{
    v &= 0x1fffffull;
    v = (v | v << 32) & 0x001f00000000ffffull;
    v = (v | v << 16) & 0x001f0000ff0000ffull;
    v = (v | v << 8) & 0x100f00f00f00f00full;
    v = (v | v << 4) & 0x10c30c30c30c30c3ull;
    v = (v | v << 2) & 0x1249249249249249ull;
    return v;
}

FMK_MORTON_HD uint64_t fmk_compact3(uint64_t v)
{
    v &= 0x1249249249249249ull;
    v = (v ^ (v >> 2)) & 0x10c30c30c30c30c3ull;
    v = (v ^ (v >> 4)) & 0x100f00f00f00f00full;
    v = (v ^ (v >> 8)) & 0x001f0000ff0000ffull;
    v = (v ^ (v >> 16)) & 0x001f00000000ffffull;
    v = (v ^ (v >> 32)) & 0x1fffffull;
    return v;
}

FMK_MORTON_HD uint64_t fmk_spread2(uint64_t v)
{
    v &= 0x7fffffffull;
    v = (v | v << 16) & 0x0000ffff0000ffffull;
    v = (v | v << 8) & 0x00ff00ff00ff00ffull;
    v = (v | v << 4) & 0x0f0f0f0f0f0f0f0full;
    v = (v | v << 2) & 0x3333333333333333ull;
    v = (v | v << 1) & 0x5555555555555555ull;
    return v;
}

#endif /* FMMKIT_TREE_MORTON_H */
