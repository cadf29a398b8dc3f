/*
 * bh_diag.cuh -- warp timelines of the walks (a build with -DFMK_BH_TRACE only; nothing
 * otherwise): each walk warp's start and end (%globaltimer, ns), its SM and its walk (0 groups,
 * 1 super-groups, 2 their parents), appended after each evaluation to the file named by the
 * environment variable FMK_BH_TRACE (records of 32 bytes; an evaluation ends with a record of
 * walk 99). Each file that includes it (walk_group.cu, super.cu) has its own record buffer
 * (no relocatable device code) and appends its own records.
 */
#ifndef FMMKIT_TREECODE_BH_DIAG_CUH
#define FMMKIT_TREECODE_BH_DIAG_CUH

#ifdef FMK_BH_TRACE
#include <stdio.h>
#include <stdlib.h>

struct bh_trace_rec {
    unsigned long long t0, t1;
    unsigned sm, kind;
    float aux;   /* groups: the box's half diagonal; super-groups: start-list entries */
    unsigned id; /* the group or super-group */
};
constexpr int BH_TRACE_MAX = 1 << 18;
static __device__ bh_trace_rec fmk_bh_trace[BH_TRACE_MAX];
static __device__ unsigned fmk_bh_trace_n;

static __device__ __forceinline__ unsigned long long trace_clock()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ void trace_put(unsigned long long t0, unsigned kind, float aux,
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

static void trace_reset(void)
{
    const unsigned zero = 0;
    (void)cudaMemcpyToSymbol(fmk_bh_trace_n, &zero, sizeof zero);
}

/* Appends this file's records (and, with last, the evaluation's end record). */
static void trace_append(int last)
{
    unsigned nt = 0;
    const char *path = getenv("FMK_BH_TRACE");
    if (path && cudaMemcpyFromSymbol(&nt, fmk_bh_trace_n, sizeof nt) == cudaSuccess) {
        nt = nt < BH_TRACE_MAX ? nt : BH_TRACE_MAX;
        bh_trace_rec *rec = (bh_trace_rec *)malloc(((size_t)nt + 1) * sizeof *rec);
        FILE *f = rec ? fopen(path, "ab") : NULL;
        if (f && cudaMemcpyFromSymbol(rec, fmk_bh_trace, nt * sizeof *rec) == cudaSuccess) {
            rec[nt] = {0, 0, 0, 99, 0, 0};
            fwrite(rec, sizeof *rec, (size_t)nt + (last ? 1 : 0), f);
        }
        if (f)
            fclose(f);
        free(rec);
    }
}
#endif

#endif /* FMMKIT_TREECODE_BH_DIAG_CUH */
