/* m2l_gemm.cu -- the dense M2L of the GPU 3D FMM (fmm3d_cuda.h), below the order of the
 * rotation-based one (m2l_rot.cu): per octant of the sources, a cuBLAS DGEMM of the stacked
 * matrices of each run of directions of one degree they reach with their multipoles (on packed
 * expansions, (p + 1)^2 doubles without the zero imaginary parts at m = 0; the far directions'
 * operators truncated to a lower degree where the order comes from eps), then a gather of each
 * target box's V entries of the part. Also the degrees of the directions (truncation, classes,
 * the size rule) and the GEMMs' plan, made at set_points. */
#include <math.h>
#include <string.h>

#include <dlfcn.h>

#include <cublas_v2.h>

#include "fmm3d/cuda/fmm3d_cuda.h"
#include "fmm3d/cuda/report.h"

namespace {

/* cuBLAS is loaded when the first GPU FMM plan starts, not linked: libfmmkit then runs
 * (CPU and every other GPU engine) on machines whose loader cannot find libcublas, and the
 * GPU FMM says what is missing. The four entry points used are the _v2 ones that
 * cublas_v2.h maps cublasCreate, cublasDestroy, cublasSetStream and cublasDgemm to. */
namespace blas {

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*dgemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                   int, const double *, const double *, int, const double *, int,
                                   const double *, double *, int);
create_fn create;
destroy_fn destroy;
stream_fn set_stream;
dgemm_fn dgemm;

#define FMK_STR2(x) #x
#define FMK_STR(x) FMK_STR2(x)
#define FMK_CUBLAS_SONAME "libcublas.so." FMK_STR(CUBLAS_VER_MAJOR)

/* 1 when the four functions are there (tries the loader's path, then $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64); the library stays loaded for the life of the process. */
int load(void)
{
    static int state = 0; /* 0 not tried, 1 loaded, -1 not found */
    if (state)
        return state > 0;
    const char *home = getenv("CUDA_HOME");
    char path[1024];
    void *h = dlopen(FMK_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h && home && strlen(home) < sizeof path - 40) {
        snprintf(path, sizeof path, "%s/lib64/" FMK_CUBLAS_SONAME, home);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h)
        h = dlopen("/usr/local/cuda/lib64/" FMK_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        create = (create_fn)dlsym(h, "cublasCreate_v2");
        destroy = (destroy_fn)dlsym(h, "cublasDestroy_v2");
        set_stream = (stream_fn)dlsym(h, "cublasSetStream_v2");
        dgemm = (dgemm_fn)dlsym(h, "cublasDgemm_v2");
    }
    state = h && create && destroy && set_stream && dgemm ? 1 : -1;
    return state > 0;
}

} // namespace blas

/* The M2L's packed layout: an expansion's (p + 1)^2 doubles without the imaginary parts of the
 * m = 0 coefficients (zero in every multipole and local expansion), by degree: degree n at
 * n^2 .. n^2 + 2n, re(n, 0), re(n, 1), im(n, 1), ..., im(n, n); the leading (q + 1)^2 hold the
 * degrees up to q. packed_at(k): the place of packed double k in the full layout. */
__host__ __device__ inline int packed_at(int k)
{
    int n = (int)sqrt((double)k);
    n -= n * n > k, n += (n + 1) * (n + 1) <= k;
    const int j = k - n * n;
    return n * (n + 1) + (j ? j + 1 : 0);
}

/* M2L, first: the multipoles of the sources from level 2 down as the GEMMs' columns, grouped by
 * octant (Mp column c = M of node box[c], packed: Sp doubles, then zeros to the stride Sx). nv
 * charge vectors: column c nv + v holds vector v's (M + v vstride), so that an octant's
 * columns of every vector are one block. */
__global__ void k_m2l_columns(int S, int Sp, int Sx, int64_t n, int nv, int64_t vstride,
                              const int32_t *__restrict__ box, const double *__restrict__ M,
                              double *Mp)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * nv * Sx;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i / Sx;
        const int k = (int)(i - c * Sx);
        int v = 0;
        if (nv > 1)
            v = (int)(c % nv), c /= nv;
        Mp[i] = k < Sp ? M[v * vstride + (int64_t)box[c] * S + packed_at(k)] : 0;
    }
}

/* M2L, second half, for one part (m2l_part): L[b] += sum over b's V entries with a source of
 * octant oct and a slot in [slot_lo, slot_hi) of X[column of the source][rows of the slot] /
 * side(b), a block per target box. X holds the part's directions' matrices times the
 * multipoles of the octant's sources (packed, each direction's to its degree): column
 * col[source], rows xrow[2 (slot - slot_lo)] .. + xrow[2 (slot - slot_lo) + 1] (the leading
 * packed doubles of the direction's degree), leading dimension ldx. A box's V entries are
 * sorted by the source's octant, then slot. nv (<= NV) charge vectors: vector v's products in
 * column col[source] nv + v, its locals at L + v vstride. */
template <int NV>
__global__ void
k_m2l_gather(int S, int Sp, int64_t ldx, int oct, int slot_lo, int slot_hi, int nv, int64_t vstride,
             const int32_t *__restrict__ xrow, const int32_t *__restrict__ vnodes,
             const int32_t *__restrict__ v_begin, const int32_t *__restrict__ v,
             const int16_t *__restrict__ v_slot, const int8_t *__restrict__ node_oct,
             const int32_t *__restrict__ col, const real4d *__restrict__ cube,
             const double *__restrict__ X, double *L)
{
    const int b = vnodes[blockIdx.x];
    int e0 = v_begin[b], e1 = v_begin[b + 1];
    const int key = oct * 1024 + slot_lo;
    while (e0 < e1) { /* first entry of (octant, slot) >= (oct, slot_lo) */
        const int mid = (e0 + e1) / 2;
        if (node_oct[v[mid]] * 1024 + v_slot[mid] < key)
            e0 = mid + 1;
        else
            e1 = mid;
    }
    e1 = v_begin[b + 1];
    /* locals carry 1/s (fmm3d_ops.h: P2L); the matrices are for unit sides */
    const double inv_s = 1 / cube[b].w;
    for (int k = threadIdx.x; k < Sp; k += blockDim.x) {
        double acc[NV];
#pragma unroll
        for (int u = 0; u < NV; u++)
            acc[u] = 0;
        for (int e = e0; e < e1; e++) {
            const int a = v[e], sl = v_slot[e];
            if (node_oct[a] != oct || sl >= slot_hi)
                break;
            const int r = xrow[2 * (sl - slot_lo)]; /* >= 0: the octant's sources reach the slot */
            if (r >= 0 && k < xrow[2 * (sl - slot_lo) + 1]) {
                const double *x = X + (int64_t)col[a] * (NV == 1 ? 1 : nv) * ldx + r + k;
#pragma unroll
                for (int u = 0; u < NV; u++)
                    if (NV == 1 || u < nv)
                        acc[u] += x[u * ldx];
            }
        }
#pragma unroll
        for (int u = 0; u < NV; u++)
            if (NV == 1 || u < nv)
                L[u * vstride + (int64_t)b * S + packed_at(k)] += acc[u] * inv_s;
    }
}

} // namespace

fmk_status fmk_fmm3d_cuda_blas_load(fmk_plan *plan)
{
    if (blas::load())
        return FMK_OK;
    return fmk_error_set(plan, FMK_ERR_UNAVAILABLE,
                         "the GPU FMM needs cuBLAS (" FMK_CUBLAS_SONAME
                         "), which was not found: add "
                         "the CUDA toolkit's lib64 to LD_LIBRARY_PATH (or set CUDA_HOME), or use "
                         "backend cpu");
}

void fmk_fmm3d_cuda_blas_destroy(fmk_fmm3d_cuda *s)
{
    if (s->has_blas)
        blas::destroy(s->blas);
    s->has_blas = 0;
}

/* A launch of the rotation-based M2L's target boxes [lo, hi) (fmk_cuda_launch_ranges), of one
 * charge vector's expansions M and L. */
struct rot_range {
    const fmk_fmm3d_cuda *s;
    const double *M;
    double *L;
};

static cudaError_t rot_range_launch(void *ctx, int64_t lo, int64_t hi)
{
    const rot_range *c = (const rot_range *)ctx;
    const fmk_fmm3d_cuda *s = c->s;
    return fmk_cuda_fmm3d_m2l_rot(&s->rot, hi - lo, s->g.d_vnodes + lo, s->g.d_v_begin, s->g.d_v,
                                  s->g.d_v_slot, s->g.d_cube, c->M, c->L, s->stream[0]);
}

/* The rotation-based M2L of one charge vector's expansions M and L: one launch, or in a long eval
 * (fmk_cuda_long: at high orders it is seconds at a few million points) launches of about
 * 0.1 s, with an interrupt check after each (its status into *status). */
static cudaError_t m2l_rot(fmk_plan *plan, fmk_fmm3d_cuda *s, const double *M, double *L,
                           fmk_status *status)
{
    if (!fmk_cuda_long(plan, plan->self ? plan->n_sources : plan->n_sources + plan->n_targets))
        return fmk_cuda_fmm3d_m2l_rot(&s->rot, s->g.n_vnodes, s->g.d_vnodes, s->g.d_v_begin,
                                      s->g.d_v, s->g.d_v_slot, s->g.d_cube, M, L, s->stream[0]);
    rot_range ctx = {s, M, L};
    fmk_cuda_ranges r;
    r.total = s->g.n_vnodes, r.quantum = 4 * (int64_t)s->sms, r.item_work = 1;
    r.first = (double)(s->g.n_vnodes / 4 > 1 ? s->g.n_vnodes / 4 : 1), r.fixed = 0;
    r.rate = &s->rot_rate, r.ev = s->ev + EV_CUT, r.stream = s->stream[0];
    r.launch = rot_range_launch, r.ctx = &ctx, r.what = "the M2L by rotations";
    *status = fmk_cuda_launch_ranges(plan, &r);
    return *status == FMK_OK ? cudaSuccess : cudaErrorUnknown;
}

/* The M2L on stream 0: per octant of the sources and run of the directions they reach, X = [T_d0;
 * T_d1; ...] Mp (the matrices stacked, the octant's sources: one GEMM on the tensor cores), then
 * each target box gathers its V entries of the part; at high orders point and shoot instead
 * (m2l_rot.cu), a block per target box. A fresh plan makes its cuBLAS handle here (the knob
 * blas_at 1), the GPU busy meanwhile: a failure there, or of a GEMM (cuBLAS allocates its
 * workspace at its first GEMM on a stream), is *blas_status (and cudaErrorUnknown), as is an
 * interrupt between the launches of a long M2L by rotations (m2l_rot). nv charge vectors: each
 * GEMM takes the octant's columns of all of them (n_o nv columns; X holds nv times one vector's
 * products), each gather all of them; by rotations, one pass per vector. */
cudaError_t fmk_cuda_fmm3d_m2l(fmk_plan *plan, fmk_fmm3d_cuda *s, fmk_status *blas_status, int nv)
{
    const int S = s->S, Sp = s->Sp, Sx = s->Sx;
    const int64_t nn = s->n_nodes - s->gemm_first, vstride = s->n_nodes * (int64_t)S;
    cudaStream_t fs = s->stream[0];
    cudaError_t err = cudaSuccess;
    if (s->n_m2l_parts > 0 && (*blas_status = fmk_fmm3d_cuda_ensure_blas(plan, s)) != FMK_OK)
        err = cudaErrorUnknown;
    for (int v = 0; s->use_rot && v < nv && err == cudaSuccess; v++)
        err = m2l_rot(plan, s, s->d_M + v * vstride, s->d_L + v * vstride, blas_status);
    if (s->n_m2l_parts > 0) {
        const int64_t n = nn * Sx * nv;
        k_m2l_columns<<<(unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096), 256, 0, fs>>>(
            S, Sp, Sx, nn, nv, vstride, s->g.d_m2l_box, s->d_M, s->d_Mp);
    }
    for (int i = 0; i < s->n_m2l_parts && err == cudaSuccess; i++) {
        const fmk_fmm3d_cuda::m2l_part &q = s->m2l_parts[i];
        const int64_t c0 = s->g.m2l_first[q.oct], n_o = s->g.m2l_first[q.oct + 1] - c0;
        const int64_t ldx = q.rows;
        for (int j = q.gemm0; j < q.gemm0 + q.n_gemms; j++) {
            /* a run of one degree: each direction's leading gm.k packed doubles in and out, padded
             * with zeros to gm.size */
            const fmk_fmm3d_cuda::m2l_gemm &gm = s->m2l_gemms[j];
            const double one = 1, zero = 0;
            const cublasStatus_t bs = blas::dgemm(
                s->blas, CUBLAS_OP_N, CUBLAS_OP_N, gm.n_ranks * gm.size, (int)(n_o * nv), gm.size,
                &one, s->d_m2l + s->m2l_roff[gm.rank0], s->m2l_roff[M2L_DIRS],
                s->d_Mp + c0 * nv * Sx, Sx, &zero, s->d_X + gm.row, (int)ldx);
            if (bs != CUBLAS_STATUS_SUCCESS) {
                *blas_status =
                    bs == CUBLAS_STATUS_ALLOC_FAILED
                        ? fmk_error_set(plan, FMK_ERR_DEVICE_NOMEM,
                                        "out of GPU memory in cuBLAS's DGEMM (its workspace); the "
                                        "plan needs about %lld bytes on the GPU",
                                        fmk_fmm3d_cuda_plan_bytes(plan))
                        : fmk_error_set(plan, FMK_ERR_DEVICE, "cuBLAS's DGEMM failed (status %d)",
                                        (int)bs);
                err = cudaErrorUnknown;
                break;
            }
        }
        if (nv == 1)
            k_m2l_gather<1><<<(unsigned)s->g.n_vnodes, 128, 0, fs>>>(
                S, Sp, ldx, q.oct, q.slot_lo, q.slot_hi, 1, vstride, s->d_xrow + 2 * q.xrow,
                s->g.d_vnodes, s->g.d_v_begin, s->g.d_v, s->g.d_v_slot, s->g.d_oct, s->g.d_m2l_col,
                s->g.d_cube, s->d_X, s->d_L);
        else
            k_m2l_gather<FMM_NV_MAX><<<(unsigned)s->g.n_vnodes, 128, 0, fs>>>(
                S, Sp, ldx, q.oct, q.slot_lo, q.slot_hi, nv, vstride, s->d_xrow + 2 * q.xrow,
                s->g.d_vnodes, s->g.d_v_begin, s->g.d_v, s->g.d_v_slot, s->g.d_oct, s->g.d_m2l_col,
                s->g.d_cube, s->d_X, s->d_L);
    }
    return err == cudaSuccess ? cudaGetLastError() : err;
}

/* X's size in directions (of Sx doubles) times all nn boxes from level 2 down: as many as keep
 * it within the knob m2l_bytes (at least one). */
int fmk_fmm3d_cuda_m2l_batch(const fmk_plan *plan, int64_t Sp, int64_t nn, int n_dirs)
{
    const int64_t per = 8 * Sp * (nn > 0 ? nn : 1);
    int64_t b = fmk_fmm3d_cuda_tune_of(plan)->m2l_bytes / per;
    if (b > n_dirs)
        b = n_dirs;
    return b < 1 ? 1 : (int)b;
}

/* The M2L's GEMMs and parts (fmk_fmm3d_cuda): per octant o of the sources (columns m2l_first[o] ..
 * m2l_first[o + 1] of Mp), the directions in use (the lists' slots) that its sources reach, d_i
 * in [-2 - o_i, 3 - o_i] per axis, in the order of the stacked matrices (the M2L order, ranks:
 * fmk_cuda_fmm3d_m2l_order puts them in about 4 runs per degree), runs of one degree at most
 * the knob m2l_gap directions in use apart merged (a GEMM the fewer, a few products more),
 * cut into parts of at most what X holds. A part covers the slots of its ranks; *n_xrow: the
 * entries of the parts' slot -> (row, size) tables (fill_xrow). */
fmk_status fmk_fmm3d_cuda_m2l_plan(fmk_plan *plan, fmk_fmm3d_cuda *s, int64_t nn, int64_t *n_xrow)
{
    const int n_slots = s->g.n_slots;
    free(s->m2l_gemms), free(s->m2l_parts);
    s->n_m2l_gemms = s->n_m2l_parts = 0;
    s->m2l_products = 0;
    s->m2l_flops = 0;
    *n_xrow = 0;
    /* at most every direction a GEMM and a part */
    s->m2l_gemms = hmalloc<fmk_fmm3d_cuda::m2l_gemm>(8 * (size_t)M2L_DIRS);
    s->m2l_parts = hmalloc<fmk_fmm3d_cuda::m2l_part>(8 * (size_t)M2L_DIRS);
    if (!s->m2l_gemms || !s->m2l_parts)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the M2L's plan");
    if (nn == 0 || s->g.n_vnodes == 0 || s->use_rot) /* rotations: no GEMMs */
        return FMK_OK;
    const int16_t *rank = s->rank, *dir_of_rank = s->dir_of_rank;
    const int32_t *roff = s->m2l_roff;
    int used[M2L_DIRS + 1], first_slot[M2L_DIRS + 1]; /* first_slot[r]: slots of ranks below r */
    for (int r = 0; r < M2L_DIRS; r++)
        used[r] = 0;
    for (int sl = 0; sl < n_slots; sl++)
        used[rank[s->g.dir_of_slot[sl]]] = 1;
    first_slot[0] = 0;
    for (int r = 0; r < M2L_DIRS; r++)
        first_slot[r + 1] = first_slot[r] + used[r];
    for (int o = 0; o < 8; o++) {
        const int64_t n_o = s->g.m2l_first[o + 1] - s->g.m2l_first[o];
        if (n_o == 0)
            continue;
        const int64_t cap =
            (int64_t)s->m2l_batch * nn / n_o * s->Sx; /* X's rows in a part (>= Sx) */
        const int lo[3] = {-2 - ((o >> 2) & 1), -2 - ((o >> 1) & 1), -2 - (o & 1)};
        fmk_fmm3d_cuda::m2l_part *part = NULL;
        int run0 = -1, run1 = -1; /* the current run, [run0, run1) */
        for (int r = 0; r <= M2L_DIRS; r++) {
            int in = 0;
            if (r < M2L_DIRS && used[r]) {
                const int d = dir_of_rank[r];
                const int dv[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
                in = 1;
                for (int a = 0; a < 3; a++)
                    in = in && dv[a] >= lo[a] && dv[a] <= lo[a] + 5;
                /* extend the run over a gap of at most m2l_gap directions in use; those not in use
                 * in between do not count (their few products are computed: the runs, and the
                 * GEMMs, are those of the lists' slots) */
                if (in && run0 >= 0 && s->m2l_deg[d] == s->m2l_deg[dir_of_rank[run0]] &&
                    first_slot[r] - first_slot[run1] <= s->tune->m2l_gap) {
                    run1 = r + 1;
                    continue;
                }
            }
            if (run0 >= 0 && (in || r == M2L_DIRS)) {        /* the run ends: its GEMMs */
                const int q = s->m2l_deg[dir_of_rank[run0]]; /* the run's one degree */
                const int size = roff[run0 + 1] - roff[run0];
                for (int a = run0; a < run1;) {
                    if (!part || part->rows + size > cap) {
                        part = &s->m2l_parts[s->n_m2l_parts++];
                        part->oct = o, part->gemm0 = s->n_m2l_gemms, part->n_gemms = 0;
                        part->slot_lo = first_slot[a], part->rows = 0;
                    }
                    const int64_t fit = (cap - part->rows) / size;
                    const int take = (int)(run1 - a < fit ? run1 - a : fit);
                    fmk_fmm3d_cuda::m2l_gemm &gm = s->m2l_gemms[s->n_m2l_gemms++];
                    gm.rank0 = a, gm.n_ranks = take, gm.size = size, gm.k = (q + 1) * (q + 1),
                    gm.row = part->rows;
                    part->n_gemms++, part->rows += take * size,
                        part->slot_hi = first_slot[a + take];
                    s->m2l_products += (int64_t)take * n_o;
                    s->m2l_flops += 2.0 * take * size * (double)size * (double)n_o;
                    a += take;
                }
                run0 = run1 = -1;
            }
            if (in)
                run0 = r, run1 = r + 1;
        }
    }
    for (int i = 0; i < s->n_m2l_parts; i++) {
        s->m2l_parts[i].xrow = *n_xrow;
        *n_xrow += s->m2l_parts[i].slot_hi - s->m2l_parts[i].slot_lo;
    }
    return FMK_OK;
}

/* The parts' slot -> (row, size) tables (n_xrow pairs, m2l_plan) into xr: X's first row of a
 * slot's products in its part and their count (the packed doubles of the direction's degree);
 * row -1 where the part's octant does not reach the slot's direction. */
void fmk_fmm3d_cuda_fill_xrow(const fmk_fmm3d_cuda *s, int32_t *xr)
{
    for (int i = 0; i < s->n_m2l_parts; i++) {
        const fmk_fmm3d_cuda::m2l_part &q = s->m2l_parts[i];
        for (int sl = q.slot_lo; sl < q.slot_hi; sl++) {
            const int r = s->rank[s->g.dir_of_slot[sl]];
            int32_t row = -1, size = 0;
            for (int j = q.gemm0; j < q.gemm0 + q.n_gemms && row < 0; j++) {
                const fmk_fmm3d_cuda::m2l_gemm &gm = s->m2l_gemms[j];
                if (r >= gm.rank0 && r < gm.rank0 + gm.n_ranks)
                    row = gm.row + (r - gm.rank0) * gm.size, size = gm.k;
            }
            xr[2 * (q.xrow + sl - q.slot_lo)] = row, xr[2 * (q.xrow + sl - q.slot_lo) + 1] = size;
        }
    }
}

fmk_status fmk_fmm3d_cuda_put_xrow(fmk_plan *plan, fmk_fmm3d_cuda *s)
{
    int32_t *xr = hmalloc<int32_t>(2 * (size_t)s->n_xrow);
    if (!xr)
        return fmk_error_set(plan, FMK_ERR_NOMEM, "out of host memory for the M2L tables");
    fmk_fmm3d_cuda_fill_xrow(s, xr);
    const cudaError_t err =
        cudaMemcpy(s->d_xrow, xr, 8 * (size_t)s->n_xrow, cudaMemcpyHostToDevice);
    free(xr);
    return err == cudaSuccess ? FMK_OK : fmk_cuda_fail(plan, err, "cudaMemcpy (the M2L tables)");
}

/* The state's cuBLAS handle on its first stream, made at the first call that needs it
 * (the knob blas_at). */
fmk_status fmk_fmm3d_cuda_ensure_blas(fmk_plan *plan, fmk_fmm3d_cuda *s)
{
    if (s->has_blas)
        return FMK_OK;
    /* cuBLAS allocates its handle's memory itself: counted as one allocation of the plan */
    const int fake = fmk_cuda_alloc_fails(plan, fmk_fmm3d_cuda_plan_bytes(plan));
    const cublasStatus_t bs = fake ? CUBLAS_STATUS_ALLOC_FAILED : blas::create(&s->blas);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return bs == CUBLAS_STATUS_ALLOC_FAILED
                   ? fmk_error_set(
                         plan, FMK_ERR_DEVICE_NOMEM,
                         "out of GPU memory starting cuBLAS; the plan needs about %lld bytes "
                         "on the GPU%s",
                         fmk_fmm3d_cuda_plan_bytes(plan),
                         fake ? " (a failure asked for by the knob cuda.fail_alloc_at)" : "")
                   : fmk_error_set(plan, FMK_ERR_DEVICE, "cuBLAS could not start (status %d)",
                                   (int)bs);
    s->has_blas = 1;
    if (blas::set_stream(s->blas, s->stream[0]) != CUBLAS_STATUS_SUCCESS)
        return fmk_error_set(plan, FMK_ERR_DEVICE, "cuBLAS could not take the FMM's stream");
    return FMK_OK;
}

/* The dense M2L's degree of each V direction d (FMK_FMM3D_DIR) at order p: the smallest p_d with
 * (rho / |d|)^(p_d + 1) <= f (rho / 2)^(p + 1), rho = sqrt(3) / 2 (the knob m2l_trunc); p
 * for all with f <= 0 (and for the near directions, which have no M2L). */
static void m2l_degrees(int p, double f, int8_t deg[FMK_FMM3D_NDIR])
{
    const double rho = 0.5 * sqrt(3.0), bound = f > 0 ? log(f) + (p + 1) * log(rho / 2) : 0;
    for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
        const int o[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
        const double dist = sqrt((double)(o[0] * o[0] + o[1] * o[1] + o[2] * o[2]));
        int q = p;
        if (f > 0 && dist > 2)
            for (q = 0; q < p && (q + 1) * log(rho / dist) > bound; q++)
                ;
        deg[d] = (int8_t)(q < 127 ? q : 127);
    }
}

/* The GEMM flops of one direction whose operator keeps degree q: its rows and inner dimension
 * are (q + 1)^2 padded to 8 (m2l_pad), per box. */
static double m2l_cost(int q)
{
    const double n = m2l_pad((int64_t)(q + 1) * (q + 1));
    return n * n;
}

/* The degrees of the 189 V directions that the sources of one octant reach (octant 0: d_i in
 * [-2, 3]; every octant's are its mirror image, with the same distances): count[q] of degree q,
 * q = 0 .. p (count: p + 1 entries). */
static void m2l_octant_degrees(int p, const int8_t deg[FMK_FMM3D_NDIR], int *count)
{
    for (int q = 0; q <= p; q++)
        count[q] = 0;
    for (int d = 0; d < FMK_FMM3D_NDIR; d++) {
        const int o[3] = {d / 49 - 3, (d / 7) % 7 - 3, d % 7 - 3};
        const int reach = o[0] >= -2 && o[1] >= -2 && o[2] >= -2;
        const int v = abs(o[0]) > 1 || abs(o[1]) > 1 || abs(o[2]) > 1;
        if (reach && v)
            count[deg[d] < p ? deg[d] : p]++;
    }
}

/* Degree classes (the knob m2l_classes): every V direction's degree rounded up to one of
 * at most k values, chosen to minimise the GEMM flops (m2l_cost) of the directions one octant
 * reaches (m2l_octant_degrees): the degrees that occur, ascending, cut into at most k groups,
 * each rounded up to its largest (so the largest degree stays), by dynamic programming over the
 * cuts (at most p + 1 degrees). k <= 0, or at least as many as occur: unchanged. */
static void m2l_classes(int p, int k, int8_t deg[FMK_FMM3D_NDIR])
{
    enum { MAXD = FMM_GPU_MAX_ORDER + 1 };
    int count[MAXD], v[MAXD], c[MAXD], nd = 0;
    if (k <= 0 || p >= MAXD)
        return;
    m2l_octant_degrees(p, deg, count);
    for (int q = 0; q <= p; q++)
        if (count[q] > 0)
            v[nd] = q, c[nd++] = count[q];
    if (nd <= k)
        return;
    /* best[j][i]: least cost of degrees v[0 .. i] in j + 1 groups, the last topped by v[i];
     * from[j][i]: the top of the group before (-1: none); 45 kB */
    double best[MAXD][MAXD];
    int from[MAXD][MAXD];
    for (int i = 0; i < nd; i++) {
        double n = 0;
        for (int a = 0; a <= i; a++)
            n += c[a];
        best[0][i] = n * m2l_cost(v[i]), from[0][i] = -1;
    }
    for (int j = 1; j < k; j++)
        for (int i = 0; i < nd; i++) {
            best[j][i] = best[j - 1][i], from[j][i] = from[j - 1][i]; /* fewer groups */
            double n = 0;                                             /* v[m + 1 .. i] up to v[i] */
            for (int m = i - 1; m >= 0; m--) {
                n += c[m + 1];
                const double t = best[j - 1][m] + n * m2l_cost(v[i]);
                if (t < best[j][i])
                    best[j][i] = t, from[j][i] = m;
            }
        }
    int8_t top[MAXD]; /* the class of each degree 0 .. p: the top of its group */
    for (int i = nd - 1, j = k - 1; i >= 0; j = j > 0 ? j - 1 : 0) {
        const int m = from[j][i];
        for (int q = m >= 0 ? v[m] + 1 : 0; q <= v[i]; q++)
            top[q] = (int8_t)v[i];
        i = m;
    }
    for (int d = 0; d < FMK_FMM3D_NDIR; d++)
        if (deg[d] < p)
            deg[d] = top[deg[d]];
}

/* The dense M2L's degrees (whole: every operator to p; else truncated by the state's factor
 * and rounded to its classes), their M2L order and the stacked matrices' rows (m2l_roff). */
void fmk_fmm3d_cuda_m2l_select(fmk_fmm3d_cuda *s, int whole)
{
    m2l_degrees(s->order, whole ? 0 : s->m2l_f, s->m2l_deg);
    if (!whole)
        m2l_classes(s->order, s->m2l_k, s->m2l_deg);
    s->m2l_whole = whole || s->m2l_f <= 0;
    fmk_cuda_fmm3d_m2l_order(s->m2l_deg, s->rank, s->dir_of_rank);
    s->m2l_roff[0] = 0;
    for (int r = 0; r < M2L_DIRS; r++) {
        const int q = s->m2l_deg[s->dir_of_rank[r]];
        s->m2l_roff[r + 1] = s->m2l_roff[r] + m2l_pad((q + 1) * (q + 1));
    }
}

/* The size rule (the knob m2l_trunc_min): whole operators for an M2L of nn GEMM columns
 * (boxes from level 2 down). */
int fmk_fmm3d_cuda_m2l_whole(const fmk_fmm3d_cuda *s, int64_t nn)
{
    return s->m2l_f <= 0 || (s->m2l_min > 0 && nn < s->m2l_min);
}

/* For the benchmark: at order p (from eps) with truncation factor trunc and at most classes
 * degree classes (the knobs m2l_trunc, m2l_classes), the dense M2L's degrees of the 189
 * directions one octant's sources reach: count[q] of degree q truncated, count_cls[q] after the
 * degree classes (q = 0 .. p, p + 1 entries each), and the GEMM flops of those directions over
 * the whole (padded, packed) operators' (flops[0]: truncated, flops[1]: classes). */
extern "C" fmk_status fmk_cuda_fmm3d_m2l_degrees(int p, double trunc, int classes, int *count,
                                                 int *count_cls, double flops[2])
{
    if (p < 0 || p >= FMM_GPU_MAX_ORDER)
        return FMK_ERR_ARG;
    int8_t deg[FMK_FMM3D_NDIR];
    m2l_degrees(p, trunc, deg);
    m2l_octant_degrees(p, deg, count);
    m2l_classes(p, classes, deg);
    m2l_octant_degrees(p, deg, count_cls);
    double f0 = 0, f1 = 0, whole = 0;
    for (int q = 0; q <= p; q++)
        f0 += count[q] * m2l_cost(q), f1 += count_cls[q] * m2l_cost(q),
            whole += count[q] * m2l_cost(p);
    flops[0] = f0 / whole, flops[1] = f1 / whole;
    return FMK_OK;
}
