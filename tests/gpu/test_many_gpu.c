/* test_many_gpu.c -- several charge vectors in one evaluation on the GPU: fmk_plan_eval_many and
 * fmk_plan_eval_many_device against one fmk_plan_eval per vector, for the GPU 3D FMM and the GPU
 * direct sum (their eval_many). Per plan (method, precision, uniform or Plummer points, targets
 * the sources or apart, opts.n_vectors 1 or more): 1, 2, 3, 5 and 9 vectors (odd counts: the
 * passes' remainders), potential only, gradient only and both, host and device arrays (device
 * outputs poisoned with NaN first); each vector's relative l2 difference from its own evaluation
 * at most 1e-12 in fp64, 1e-5 in fp32. Also: the FMM at order 32 (the M2L by rotations, records of
 * few vectors a launch), the FMM's variants (fmm3d.many_points, fmm3d.p2p_many_rt), the direct sum
 * cut into launches and with the plummer, regularized and log2d kernels, a plan's single
 * evaluation after eval_many grew its buffers, and a non-finite charge in a vector of a device
 * call (refused, the vector named). --quick: fewer, smaller cases (for compute-sanitizer). Exit 77
 * without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit.h"

#include "core/tune.h"

#include "gpu_check.h"

#define ND_MAX 9

static int quick;

static void *xmalloc(size_t b)
{
    void *p = malloc(b ? b : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(2);
    }
    return p;
}

/* ||a - b|| / ||b||; -1 when a value of a is not finite. */
static double rel_l2(const double *a, const double *b, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return -1;
        d += (a[i] - b[i]) * (a[i] - b[i]);
        r += b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : d == 0 ? 0 : INFINITY;
}

/* n points: uniform in the unit cube, or Plummer (scale 1, cut at radius 4). */
static void points(int plummer, int64_t n, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        double *p = x + 3 * i;
        if (plummer) {
            double r;
            do
                r = 1 / sqrt(pow(urand() * 0.999 + 0.0005, -2.0 / 3.0) - 1);
            while (r > 4);
            const double z = 2 * urand() - 1, ph = 6.283185307179586 * urand(), s = sqrt(1 - z * z);
            p[0] = r * s * cos(ph), p[1] = r * s * sin(ph), p[2] = r * z;
        } else {
            for (int k = 0; k < 3; k++)
                p[k] = urand();
        }
    }
}

typedef struct many_case {
    fmk_method method;
    fmk_kernel kernel;
    fmk_precision prec;
    int plummer, separate, n_vectors, order;
    int64_t n, leaf, launch_pairs; /* launch_pairs: the direct sum's knob (0: default) */
    int many_points, many_rt;      /* the FMM's knobs fmm3d.many_points, p2p_many_rt (-2: as
                                    * they are) */
} many_case;

static const char *case_name(const many_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s %s %s %s n_vectors %d%s%s%s", fmk_method_name(c->method),
             c->kernel == FMK_KERNEL_LAPLACE       ? "laplace"
             : c->kernel == FMK_KERNEL_PLUMMER     ? "plummer"
             : c->kernel == FMK_KERNEL_REGULARIZED ? "regularized"
                                                   : "log2d",
             c->prec == FMK_PRECISION_FP32 ? "fp32" : "fp64", c->plummer ? "Plummer" : "uniform",
             c->separate ? "targets apart" : "targets = sources", c->n_vectors,
             c->order >= 0 ? " order 32" : "", c->launch_pairs ? " cut" : "",
             c->many_points > -2 || c->many_rt > -2 ? " knobs" : "");
    return buf;
}

static void run_case(const many_case *c)
{
    char name[160];
    case_name(c, name, sizeof name);
    const int dim = c->kernel == FMK_KERNEL_LOG2D ? 2 : 3, gw = dim;
    const int64_t n = c->n, m = c->separate ? n / 2 + 7 : n;
    double *x = xmalloc(24 * (size_t)(n + m)), *y = c->separate ? x + 3 * n : NULL;
    points(c->plummer, n, x);
    if (y)
        points(0, m, y);
    if (dim == 2) /* (x, y) pairs: the first 2 n coordinates */
        for (int64_t i = 0; i < n; i++)
            x[2 * i] = x[3 * i], x[2 * i + 1] = x[3 * i + 1];
    double *q = xmalloc(8 * (size_t)(ND_MAX * n));
    for (int64_t i = 0; i < ND_MAX * n; i++)
        q[i] = 2 * urand() - 1;
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = c->method, o.backend = FMK_BACKEND_CUDA, o.precision = c->prec;
    o.n_vectors = c->n_vectors, o.order = c->order, o.leaf_size = c->leaf;
    if (c->kernel == FMK_KERNEL_PLUMMER || c->kernel == FMK_KERNEL_REGULARIZED)
        o.softening = 0.01;
    /* the fp32 direct sum's resolution guard refuses close pairs at small eps: its eps is 1e-2 */
    const double eps = c->prec == FMK_PRECISION_FP64    ? 1e-6
                       : c->method == FMK_METHOD_DIRECT ? 1e-2
                                                        : 1e-5;
    const double tol = c->prec == FMK_PRECISION_FP32 ? 1e-5 : 1e-12;
    fmk_plan *p = NULL;
    fmk_status st = fmk_plan_create(&p, dim, c->kernel, eps, &o);
    CHECK(st == FMK_OK, "%s: create: %s", name, fmk_plan_last_error(NULL));
    if (st != FMK_OK) {
        free(x), free(q);
        return;
    }
    if (c->launch_pairs)
        CHECK(fmk_plan_tune(p, "direct.launch_pairs", (double)c->launch_pairs) == FMK_OK,
              "%s: tune: %s", name, fmk_plan_last_error(p));
    if (c->many_points > -2)
        CHECK(fmk_plan_tune(p, "fmm3d.many_points", c->many_points) == FMK_OK, "%s: tune: %s", name,
              fmk_plan_last_error(p));
    if (c->many_rt > -2)
        CHECK(fmk_plan_tune(p, "fmm3d.p2p_many_rt", c->many_rt) == FMK_OK, "%s: tune: %s", name,
              fmk_plan_last_error(p));
    st = fmk_plan_set_points(p, n, x, y ? m : 0, y);
    CHECK(st == FMK_OK, "%s: set_points: %s", name, fmk_plan_last_error(p));
    /* the reference: one evaluation per vector */
    double *rp = xmalloc(8 * (size_t)(ND_MAX * m)), *rg = xmalloc(8 * (size_t)(ND_MAX * m * gw));
    for (int v = 0; v < ND_MAX && st == FMK_OK; v++) {
        st = fmk_plan_eval(p, q + v * n, rp + v * m, rg + v * m * gw);
        CHECK(st == FMK_OK, "%s: eval of vector %d: %s", name, v, fmk_plan_last_error(p));
    }
    double *hp = xmalloc(8 * (size_t)(ND_MAX * m)), *hg = xmalloc(8 * (size_t)(ND_MAX * m * gw));
    double *dq = NULL, *dp = NULL, *dg = NULL;
    CUDA_OK(cudaMalloc((void **)&dq, 8 * (size_t)(ND_MAX * n)));
    CUDA_OK(cudaMalloc((void **)&dp, 8 * (size_t)(ND_MAX * m)));
    CUDA_OK(cudaMalloc((void **)&dg, 8 * (size_t)(ND_MAX * m * gw)));
    CUDA_OK(cudaMemcpy(dq, q, 8 * (size_t)(ND_MAX * n), cudaMemcpyHostToDevice));
    /* --quick: 3 and 9 vectors (passes of 2 + 1, of 5 = 4 + 1 and 4) */
    const int nds[] = {1, 2, 3, 5, 9}, quick_nds[] = {3, 9};
    const int n_nd = quick ? 2 : 5;
    double worst = 0;
    for (int a = 0; a < n_nd && st == FMK_OK; a++) {
        const int nd = quick ? quick_nds[a] : nds[a];
        for (int out = 0; out < 3; out++) /* pot, grad, both */
            for (int dev = 0; dev < 2; dev++) {
                const int wp = out != 1, wg = out != 0;
                fmk_status s2;
                if (dev) {
                    CUDA_OK(cudaMemset(dp, 0xff, 8 * (size_t)(nd * m))); /* NaN */
                    CUDA_OK(cudaMemset(dg, 0xff, 8 * (size_t)(nd * m * gw)));
                    s2 = fmk_plan_eval_many_device(p, nd, dq, wp ? dp : NULL, wg ? dg : NULL);
                    if (s2 == FMK_OK) {
                        CUDA_OK(cudaMemcpy(hp, dp, 8 * (size_t)(nd * m), cudaMemcpyDeviceToHost));
                        CUDA_OK(
                            cudaMemcpy(hg, dg, 8 * (size_t)(nd * m * gw), cudaMemcpyDeviceToHost));
                    }
                } else {
                    s2 = fmk_plan_eval_many(p, nd, q, wp ? hp : NULL, wg ? hg : NULL);
                }
                CHECK(s2 == FMK_OK, "%s: eval_many nd %d out %d dev %d: %s", name, nd, out, dev,
                      fmk_plan_last_error(p));
                if (s2 != FMK_OK)
                    continue;
                for (int v = 0; v < nd; v++) {
                    if (wp) {
                        const double e = rel_l2(hp + v * m, rp + v * m, m);
                        CHECK(e >= 0 && e <= tol, "%s: nd %d %s vector %d potential %.3e", name, nd,
                              dev ? "device" : "host", v, e);
                        worst = e > worst || e < 0 ? (e < 0 ? INFINITY : e) : worst;
                    }
                    if (wg) {
                        const double e = rel_l2(hg + v * m * gw, rg + v * m * gw, m * gw);
                        CHECK(e >= 0 && e <= tol, "%s: nd %d %s vector %d gradient %.3e", name, nd,
                              dev ? "device" : "host", v, e);
                        worst = e > worst || e < 0 ? (e < 0 ? INFINITY : e) : worst;
                    }
                }
            }
    }
    /* one vector again, after eval_many's buffers */
    if (st == FMK_OK) {
        st = fmk_plan_eval(p, q + 2 * n, hp, hg);
        CHECK(st == FMK_OK, "%s: eval after eval_many: %s", name, fmk_plan_last_error(p));
        if (st == FMK_OK) {
            const double ep = rel_l2(hp, rp + 2 * m, m), eg = rel_l2(hg, rg + 2 * m * gw, m * gw);
            CHECK(ep >= 0 && ep <= tol && eg >= 0 && eg <= tol,
                  "%s: eval after eval_many: %.3e %.3e", name, ep, eg);
        }
    }
    /* a NaN charge in vector 1 of 3 (device charges: the engine's check) */
    if (st == FMK_OK && c->kernel == FMK_KERNEL_LAPLACE) {
        const double nan = NAN;
        CUDA_OK(cudaMemcpy(dq + n + 7, &nan, 8, cudaMemcpyHostToDevice));
        st = fmk_plan_eval_many_device(p, 3, dq, dp, dg);
        const char *msg = fmk_plan_last_error(p);
        CHECK(st == FMK_ERR_NONFINITE && strstr(msg, "charge vector 1") &&
                  strstr(msg, "charges[7]"),
              "%s: a NaN charge in vector 1: status %d, %s", name, (int)st, msg);
        CUDA_OK(cudaMemcpy(dq + n + 7, q + n + 7, 8, cudaMemcpyHostToDevice));
    }
    fmk_info info;
    fmk_plan_info(p, &info);
    printf("%-78s worst %.2e (device bytes %lld)\n", name, worst, (long long)info.bytes_device);
    fflush(stdout);
    CUDA_OK(cudaFree(dq));
    CUDA_OK(cudaFree(dp));
    CUDA_OK(cudaFree(dg));
    fmk_plan_destroy(p);
    free(x), free(q), free(rp), free(rg), free(hp), free(hg);
}

/* A case of method m with the defaults: laplace, no order, leaf or knobs of its own. */
static many_case base_case(fmk_method m, fmk_precision prec, int plummer, int separate,
                           int n_vectors, int64_t n)
{
    const many_case c = {m, FMK_KERNEL_LAPLACE, prec, plummer, separate, n_vectors, -1, n, 0, 0, -2,
                         -2};
    return c;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
    if (fmk_cuda_device_count() <= 0) {
        printf("test_many_gpu: no CUDA device; nothing to test\n");
        return 77;
    }
    const int64_t n_fmm = quick ? 3000 : 30000, n_dir = quick ? 700 : 3000;
    const int64_t leaf = quick ? 40 : 0; /* small trees still have V lists and leaf pairs */
    for (int prec = 0; prec < 2; prec++)
        for (int pl = 0; pl < 2; pl++)
            for (int sep = 0; sep < 2; sep++) {
                if (quick && (pl != sep || pl != prec)) /* fp64 uniform self, fp32 Plummer apart */
                    continue;
                const fmk_precision pr = prec ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64;
                /* the FMM with buffers for one vector (grown by eval_many) and for 3 */
                many_case f = base_case(FMK_METHOD_FMM, pr, pl, sep, pl ? 3 : 1, n_fmm);
                f.leaf = leaf;
                run_case(&f);
                const many_case d = base_case(FMK_METHOD_DIRECT, pr, pl, sep, 1, n_dir);
                run_case(&d);
            }
    /* the FMM at order 32: the M2L by rotations, per vector; the harmonics once for all vectors
     * (P2M and L2P: records of 2 vectors a launch) */
    many_case hi = base_case(FMK_METHOD_FMM, FMK_PRECISION_FP64, 0, 0, 1, quick ? 2000 : 6000);
    hi.order = 32, hi.leaf = 64, hi.many_points = 1;
    run_case(&hi);
    /* the FMM's other variants: the harmonics once for all vectors (P2M, L2P) or every vector
     * alone, and the P2P of leaf pairs at 1 .. 4 points of b per lane */
    const int variants[][2] = {{1, 2}, {0, 4}, {1, 1}};
    for (int k = 0; k < (quick ? 1 : 3); k++) {
        many_case f = base_case(FMK_METHOD_FMM, FMK_PRECISION_FP64, k == 2, 0, 1, n_fmm);
        f.leaf = leaf, f.many_points = variants[k][0], f.many_rt = variants[k][1];
        run_case(&f);
    }
    /* the direct sum cut into launches; its other kernels */
    many_case cut = base_case(FMK_METHOD_DIRECT, FMK_PRECISION_FP64, 0, 1, 1, n_dir);
    cut.launch_pairs = (int64_t)1 << 18;
    run_case(&cut);
    const fmk_kernel others[] = {FMK_KERNEL_PLUMMER, FMK_KERNEL_REGULARIZED, FMK_KERNEL_LOG2D};
    for (int k = 0; k < 3; k++)
        for (int prec = 0; prec < 2 - quick; prec++) {
            many_case d = base_case(FMK_METHOD_DIRECT,
                                    prec ? FMK_PRECISION_FP32 : FMK_PRECISION_FP64, 0, 0, 2, n_dir);
            d.kernel = others[k];
            run_case(&d);
        }
    printf("test_many_gpu: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
