/* test_poisson_tc_gpu.c -- the Poisson treecode's GPU part (src/poisson/treecode/cuda/eval.cu)
 * on hand-made logical plans, against sums in double on the CPU: a uniform box cut into bricks
 * of up to 8 points per axis, sources on half of its points summed directly through several
 * ranges per brick, and two far clusters taken by their multipoles (whose truncation error, at
 * order 12 and a/r < 0.05, is far below the tolerances). fp64 (eps 1e-8) and fp32 (eps 1e-4)
 * direct parts; 1 and 3 components; with and without the velocity. Exit 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmm3d/fmm3d_ops.h"
#include "poisson/treecode/treecode.h"

#include "gpu_check.h"

enum { NX = 20, NY = 17, NZ = 12, NP = NX * NY * NZ, NFAR = 200, ORDER = 12 };

static double G(double r2, double e2)
{
    return (r2 + 1.5 * e2) / pow(r2 + e2, 1.5);
}
static double Gg(double r2, double e2) /* grad_y G = -Gg d */
{
    return (r2 + 2.5 * e2) / pow(r2 + e2, 2.5);
}

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* Cuts a side of n points into pieces of at most 8: their starts and sizes. */
static int cut(int n, int *start, int *size)
{
    const int k = (n + 7) / 8;
    for (int i = 0, s = 0; i < k; i++) {
        size[i] = n / k + (i < n % k);
        start[i] = s;
        s += size[i];
    }
    return k;
}

static void run(fmk_poisson *s, int nc, int want_u, double eps)
{
    const double e = 1.0, e2 = e * e;
    /* sources: every other grid point, then the two far clusters */
    int64_t ns = 0;
    double *x = malloc(sizeof(double) * (NP + NFAR)), *y = malloc(sizeof(double) * (NP + NFAR)),
           *z = malloc(sizeof(double) * (NP + NFAR)), *w = malloc(sizeof(double) * 3 * (NP + NFAR));
    for (int p = 0; p < NP; p += 2, ns++)
        x[ns] = p % NX, y[ns] = p / NX % NY, z[ns] = p / (NX * NY);
    const int64_t ngrid = ns;
    const double cc[2][3] = {{90, 20.5, 6}, {-60, -40, 70}};
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < NFAR / 2; k++, ns++) {
            x[ns] = cc[c][0] + 3 * (urand() - 0.5);
            y[ns] = cc[c][1] + 3 * (urand() - 0.5);
            z[ns] = cc[c][2] + 3 * (urand() - 0.5);
        }
    double *wt = malloc(sizeof(double) * 3 * ns);
    for (int64_t j = 0; j < ns; j++)
        for (int a = 0; a < nc; a++)
            wt[a * ns + j] = urand() - 0.3;
    memcpy(w, wt, sizeof(double) * nc * ns);
    fmk_tc_sources src = {.n = ns, .nc = nc, .x = x, .y = y, .z = z, .w = w};

    /* tree: two nodes, the clusters, with their multipoles */
    fmk_fmm3d_ops_ctx ctx;
    CHECK(fmk_fmm3d_ops_create(&ctx, ORDER) == FMK_OK, "ops");
    const int64_t coef = 2 * fmk_fmm3d_ncoef(ORDER);
    double center[6], scale[2] = {4, 4};
    double *mp = calloc((size_t)(2 * nc * coef), sizeof(double));
    double *work = malloc(sizeof(double) * (size_t)fmk_fmm3d_points_work_size(&ctx, nc));
    for (int c = 0; c < 2; c++) {
        memcpy(center + 3 * c, cc[c], sizeof cc[c]);
        double pts[3 * NFAR / 2];
        const int64_t j0 = ngrid + c * NFAR / 2;
        for (int k = 0; k < NFAR / 2; k++)
            pts[3 * k] = x[j0 + k], pts[3 * k + 1] = y[j0 + k], pts[3 * k + 2] = z[j0 + k];
        fmk_fmm3d_p2m_many(&ctx, cc[c], scale[c], NFAR / 2, pts, nc, w + j0, ns,
                           mp + (int64_t)c * nc * coef, coef, work);
    }
    int64_t begin[2] = {ngrid, ngrid + NFAR / 2}, end[2] = {ngrid + NFAR / 2, ns};
    int32_t child[2] = {-1, -1};
    int8_t nchild[2] = {0, 0};
    double radius[2] = {3, 3};
    fmk_tc_tree tree = {.n_nodes = 2, .begin = begin, .end = end, .child = child,
                        .n_child = nchild, .center = center, .radius = radius, .scale = scale,
                        .order = ORDER, .coef = coef, .multipole = mp, .nc = nc};

    /* bricks and plans: every brick takes the grid's sources in three ranges, and both nodes */
    int xs[4], xn[4], ys[4], yn[4], zs[4], zn[4];
    const int kx = cut(NX, xs, xn), ky = cut(NY, ys, yn), kz = cut(NZ, zs, zn);
    const int64_t nb = kx * ky * kz;
    fmk_tc_brick *bricks = calloc((size_t)nb, sizeof *bricks);
    int64_t *dstart = malloc(sizeof(int64_t) * (nb + 1)), *fstart = malloc(sizeof(int64_t) * (nb + 1));
    int64_t *drange = malloc(sizeof(int64_t) * 6 * nb);
    int32_t *fnode = malloc(sizeof(int32_t) * 2 * nb);
    int64_t b = 0;
    for (int k = 0; k < kz; k++)
        for (int j = 0; j < ky; j++)
            for (int i = 0; i < kx; i++, b++) {
                fmk_tc_brick *br = &bricks[b];
                br->corner[0] = xs[i], br->corner[1] = ys[j], br->corner[2] = zs[k];
                br->h = 1;
                br->n[0] = xn[i], br->n[1] = yn[j], br->n[2] = zn[k];
                br->first = xs[i] + NX * (ys[j] + NY * zs[k]);
                br->stride[0] = NX, br->stride[1] = NX * NY;
                dstart[b] = 3 * b, fstart[b] = 2 * b;
                const int64_t cuts[4] = {0, ngrid / 3, ngrid / 3 + 1 + (b % 5), ngrid};
                for (int r = 0; r < 3; r++)
                    drange[6 * b + 2 * r] = cuts[r], drange[6 * b + 2 * r + 1] = cuts[r + 1];
                fnode[2 * b] = 0, fnode[2 * b + 1] = 1;
            }
    dstart[nb] = 3 * nb, fstart[nb] = 2 * nb;
    fmk_tc_plans plans = {.n_bricks = nb, .bricks = bricks, .direct_start = dstart,
                          .direct_range = drange, .far_start = fstart, .far_node = fnode};

    /* reference */
    double *ref = calloc(NP * 3, sizeof(double)), *refu = calloc(NP * 3, sizeof(double));
    for (int p = 0; p < NP; p++) {
        const double px = p % NX, py = p / NX % NY, pz = p / (NX * NY);
        for (int64_t j = 0; j < ns; j++) {
            const double d[3] = {px - x[j], py - y[j], pz - z[j]};
            const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            /* the far clusters are summed by their multipoles of 1/r, by design (the treecode
             * takes a node by its multipole only where G and 1/r agree to within eps) */
            const int far = j >= ngrid;
            const double g = far ? 1 / sqrt(r2) : G(r2, e2), gg = far ? pow(r2, -1.5) : Gg(r2, e2);
            double wj[3] = {0, 0, 0};
            for (int a = 0; a < nc; a++) {
                wj[a] = w[a * ns + j];
                ref[nc * p + a] += wj[a] * g;
            }
            refu[3 * p] -= gg * (d[1] * wj[2] - d[2] * wj[1]);
            refu[3 * p + 1] -= gg * (d[2] * wj[0] - d[0] * wj[2]);
            refu[3 * p + 2] -= gg * (d[0] * wj[1] - d[1] * wj[0]);
        }
    }

    fmk_tc_gpu_args args = {0, eps, e, NP, 1};
    struct fmk_tc_gpu *gpu = NULL;
    CHECK(fmk_tc_gpu_create(s, &args, &gpu) == FMK_OK, "create: %s", fmk_poisson_last_error(s));
    double *pot = calloc(NP * 3, sizeof(double)), *u = calloc(NP * 3, sizeof(double));
    double secs[4];
    for (int round = 0; round < 2 && gpu; round++) { /* the second reuses the plans */
        memset(pot, 0, sizeof(double) * NP * 3);
        memset(u, 0, sizeof(double) * NP * 3);
        CHECK(fmk_tc_gpu_upload(s, gpu, &src, &tree, &plans, round == 0) == FMK_OK,
              "upload: %s", fmk_poisson_last_error(s));
        CHECK(fmk_tc_gpu_launch(s, gpu, 1, want_u) == FMK_OK, "launch: %s",
              fmk_poisson_last_error(s));
        CHECK(fmk_tc_gpu_far(s, gpu, &tree) == FMK_OK, "far: %s", fmk_poisson_last_error(s));
        CHECK(fmk_tc_gpu_collect(s, gpu, pot, want_u ? u : NULL, secs) == FMK_OK, "collect: %s",
              fmk_poisson_last_error(s));
        const double tol = eps >= 1e-4 ? 1e-5 : 1e-11;
        const double ep = rel_l2(pot, ref, (int64_t)NP * nc);
        CHECK(ep < tol, "nc %d eps %g round %d: Psi error %.3g > %.1g", nc, eps, round, ep, tol);
        printf("treecode GPU part: nc %d, u %d, eps %g: Psi %.3g", nc, want_u, eps, ep);
        if (want_u) {
            const double eu = rel_l2(u, refu, (int64_t)NP * 3);
            CHECK(eu < tol, "nc %d eps %g: u error %.3g > %.1g", nc, eps, eu, tol);
            printf(", u %.3g", eu);
        }
        printf(" (direct %.3f ms, far %.3f ms)\n", 1e3 * secs[0], 1e3 * secs[1]);
    }
    fmk_tc_gpu_release(gpu);
    fmk_fmm3d_ops_destroy(&ctx);
    free(x), free(y), free(z), free(w), free(wt), free(mp), free(work), free(bricks);
    free(dstart), free(fstart), free(drange), free(fnode), free(ref), free(refu), free(pot), free(u);
}

int main(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    fmk_poisson *s = NULL; /* holds the messages */
    if (fmk_poisson_create(&s, 1e-6, NULL) != FMK_OK)
        return 2;
    run(s, 1, 0, 1e-8);
    run(s, 3, 0, 1e-8);
    run(s, 3, 1, 1e-8);
    run(s, 1, 0, 1e-4);
    run(s, 3, 1, 1e-4);
    fmk_poisson_destroy(s);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
