/* test_fmm_small.c -- the FMMs on empty and tiny point sets, in fp64 and
 * fp32, against the direct sum: no sources, no targets, one point, coincident points, a few.
 * Small sets reach the engines' edge cases (arrays of length zero, buffers that exist only for
 * one precision) cheaply; under the sanitizer build (clang's UBSan flags an offset added to a
 * NULL pointer) they caught the 3D FMM's P2P offsetting its NULL fp32 arrays in fp64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { MAXN = 40 };

static fmk_status run(fmk_method method, int dim, fmk_kernel kernel, fmk_precision precision,
                      int64_t ns, const double *s, const double *q, int64_t nt, const double *t,
                      double *pot, double *grad)
{
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.method = method;
    o.precision = method == FMK_METHOD_DIRECT ? FMK_PRECISION_FP64 : precision;
    o.threads = 2;
    if (method != FMK_METHOD_DIRECT)
        o.leaf_size = 2; /* a tree with levels even for a few points */
    return fmk_eval(dim, kernel, precision == FMK_PRECISION_FP32 ? 1e-5 : 1e-9, &o, ns, s, q, nt, t,
                    pot, grad);
}

static void one_case(const char *what, fmk_method method, int dim, fmk_precision precision,
                     int64_t ns, const double *s, int64_t nt, const double *t)
{
    const fmk_kernel kernel = dim == 3 ? FMK_KERNEL_LAPLACE : FMK_KERNEL_LOG2D;
    check_context("%s: %s %dD precision %d", what, fmk_method_name(method), dim, (int)precision);
    double q[MAXN], pot[MAXN], grad[3 * MAXN], rp[MAXN], rg[3 * MAXN];
    for (int i = 0; i < MAXN; i++)
        q[i] = 1.0 + 0.25 * (i % 5) - 0.6 * (i % 2);
    const int64_t m = t ? nt : ns;
    for (int i = 0; i < MAXN; i++)
        pot[i] = rp[i] = -99;
    fmk_status st = run(method, dim, kernel, precision, ns, s, q, nt, t, pot, grad);
    CHECK_MSG(st == FMK_OK, "status %d: %s", (int)st, fmk_plan_last_error(NULL));
    st = run(FMK_METHOD_DIRECT, dim, kernel, precision, ns, s, q, nt, t, rp, rg);
    CHECK_MSG(st == FMK_OK, "direct: status %d: %s", (int)st, fmk_plan_last_error(NULL));
    const double tol = precision == FMK_PRECISION_FP32 ? 1e-3 : 1e-7;
    double scale = 1e-300;
    for (int64_t i = 0; i < m; i++)
        scale = fmax(scale, fabs(rp[i]));
    for (int64_t i = 0; i < m; i++)
        CHECK_MSG(fabs(pot[i] - rp[i]) <= tol * scale, "pot[%lld] = %.17g, direct %.17g",
                  (long long)i, pot[i], rp[i]);
    for (int64_t i = m; i < MAXN; i++) /* nothing beyond the targets is written */
        CHECK_MSG(pot[i] == -99, "pot[%lld] written", (long long)i);
}

static void all_methods(const char *what, int dim, int64_t ns, const double *s, int64_t nt,
                        const double *t)
{
    const fmk_precision prec[2] = {FMK_PRECISION_FP64, FMK_PRECISION_FP32};
    for (int k = 0; k < 2; k++) {
        if (dim == 3 || k == 0) /* the 2D FMM is fp64 only */
            one_case(what, FMK_METHOD_FMM, dim, prec[k], ns, s, nt, t);
    }
}

int main(void)
{
    double s[3 * MAXN], t[3 * MAXN], same[3 * MAXN];
    for (int i = 0; i < 3 * MAXN; i++) {
        s[i] = fmod(0.37 * i * i + 0.11 * i, 1.0);
        t[i] = fmod(0.53 * i * i + 0.29 * i + 0.5, 1.0);
        same[i] = 0.25;
    }
    for (int dim = 2; dim <= 3; dim++) {
        all_methods("no sources", dim, 0, NULL, 7, t);
        all_methods("no targets", dim, 9, s, 0, t);
        all_methods("nothing", dim, 0, NULL, 0, NULL);
        all_methods("one point", dim, 1, s, 0, NULL);
        all_methods("one source, targets", dim, 1, s, 5, t);
        all_methods("sources, one target", dim, 12, s, 1, t);
        all_methods("coincident sources, targets elsewhere", dim, 6, same, 4, t);
        all_methods("a few points", dim, MAXN, s, 0, NULL);
        all_methods("a few sources and targets", dim, MAXN, s, MAXN, t);
    }
    return check_summary();
}
