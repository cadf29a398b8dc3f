/* fuzz_api.c -- libFuzzer harness for the C API on the CPU backend.
 *
 * The input is decoded (see decode()) into a plan's dimension, kernel, method, precision, eps
 * and options, up to 64 sources and 64 targets, and charges; values come from a table of
 * hostile doubles (NaN, +-Inf, huge, tiny, subnormal, -0) or are moderate numbers, raw bits,
 * or copies of earlier points. The harness then runs create, memory, set_points, eval (twice),
 * eval_many, info and destroy, and aborts when a contract of include/fmmkit.h breaks:
 *   - a failure returns a status in range, never FMK_ERR_INTERNAL, with a non-empty message,
 *     leaves *plan NULL (create) and the outputs untouched (eval);
 *   - a success on finite, moderate inputs gives finite outputs, the same bits on a second eval,
 *     and (fp64 direct or fmm) agrees with a direct-method reference to a relative l2 error of
 *     10 max(eps, 1e-10), unless the sum cancels (the reference norm is below 1% of the sum of
 *     absolute terms: then a relative bound on it says nothing); the treecode's accuracy is
 *     not checked.
 * Crashes, leaks, hangs and sanitizer reports are found by libFuzzer itself.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit.h"

#define MAX_POINTS 64

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_api: %s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static unsigned byte(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static double raw_double(reader *r)
{
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits |= (uint64_t)byte(r) << (8 * i);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static const double hostile[] = {0.0,       -0.0,    1e-300,   5e-324, 2.2250738585072014e-308,
                                 1e300,     DBL_MAX, -DBL_MAX, NAN,    INFINITY,
                                 -INFINITY, 1e-8,    1e8,      1e16,   1.0 + DBL_EPSILON,
                                 1.0,       -1.0,    1e-154,   1e154,  0.5};
#define N_HOSTILE (sizeof hostile / sizeof hostile[0])

/* One value: mostly moderate (-8..8 in steps of 1/4096), else hostile, raw or huge-scaled. */
static double value(reader *r)
{
    unsigned sel = byte(r);
    if (sel < 176)
        return (int8_t)byte(r) / 16.0 + byte(r) / 4096.0;
    if (sel < 216)
        return hostile[byte(r) % N_HOSTILE];
    if (sel < 236)
        return raw_double(r);
    return ldexp((int8_t)byte(r) / 16.0, (int)(int8_t)byte(r) * 4); /* 2^-512 .. 2^508 */
}

/* n points of dim coordinates; a point may copy an earlier one exactly. */
static void points(reader *r, int64_t n, int dim, double *x)
{
    for (int64_t i = 0; i < n; i++) {
        unsigned sel = byte(r);
        if (i > 0 && sel >= 224) {
            memcpy(x + dim * i, x + dim * (int64_t)(sel % i), (size_t)dim * sizeof *x);
            continue;
        }
        for (int k = 0; k < dim; k++)
            x[dim * i + k] = value(r);
    }
}

typedef struct problem {
    int dim;
    fmk_kernel kernel;
    double eps;
    fmk_opts opts;
    int64_t ns, nt;  /* nt = 0 with targets NULL: targets are the sources */
    int use_targets; /* targets given (nt may still be 0) */
    int n_vectors;   /* for eval_many: 0..2 */
    double src[MAX_POINTS * 3], trg[MAX_POINTS * 3], q[2 * MAX_POINTS * 2];
} problem;

static void decode(reader *r, problem *pb)
{
    static const int dims[] = {2, 3, 2, 3, 2, 3, 0, 1, 4, -1};
    static const double epss[] = {1e-2, 1e-3, 1e-6, 1e-9, 1e-12, 1e-14, 1e-15,
                                  0.5,  0.99, 0,    1,    -1e-6, NAN,   1e-5};
    static const int32_t threads[] = {0, 1, 1, 2, -1, FMK_THREADS_MAX, FMK_THREADS_MAX + 1};
    static const double soft[] = {0, 1e-3, 0.1, 1, 10, -0.1, NAN, INFINITY, 1e-300, 1e300};
    static const double theta[] = {0, 0.3, 0.6, 0.9, 1, 2, -0.5, NAN, 1e-9};
    unsigned b = byte(r);
    pb->dim = dims[b % 10];
    b = byte(r);
    pb->kernel = (fmk_kernel)(b % 7); /* 0 and 6 are not kernels */
    if (b >= 32 && pb->kernel >= 1 && pb->kernel <= 5)
        pb->dim = fmk_kernel_dim(pb->kernel); /* mostly a dimension that fits */
    b = byte(r);
    pb->eps = b < 224 ? epss[b % 14] : raw_double(r);
    fmk_opts_default(&pb->opts);
    fmk_opts *o = &pb->opts;
    b = byte(r);
    o->method = (fmk_method)(b % 5); /* 4 is not a method */
    o->backend = FMK_BACKEND_CPU;
    b = byte(r);
    o->precision = (fmk_precision)(b % 8 == 7 ? 2 : b % 2);
    o->threads = threads[byte(r) % 7];
    b = byte(r);
    o->order = b < 128 ? -1 : b < 240 ? (int32_t)(b % 24) : (int32_t)(b % 64) - 2;
    b = byte(r);
    o->leaf_size = b < 128 ? 0 : b < 240 ? (int64_t)(b % 70) : (b == 255 ? INT64_MAX : -1);
    o->softening = soft[byte(r) % 10];
    if (pb->kernel == FMK_KERNEL_PLUMMER || pb->kernel == FMK_KERNEL_REGULARIZED)
        if (o->softening == 0 && byte(r) < 200)
            o->softening = 0.1;
    o->theta = theta[byte(r) % 9];
    o->walk = (fmk_walk)(byte(r) % 4);
    b = byte(r);
    pb->ns = b % (MAX_POINTS + 1);
    b = byte(r);
    pb->use_targets = b >= 128;
    pb->nt = pb->use_targets ? b % (MAX_POINTS + 1) : 0;
    pb->n_vectors = (int)(byte(r) % 3);
    int d = pb->dim == 2 || pb->dim == 3 ? pb->dim : 3;
    points(r, pb->ns, d, pb->src);
    points(r, pb->nt, d, pb->trg);
    int c = fmk_kernel_is_complex(pb->kernel) ? 2 : 1;
    for (int64_t i = 0; i < 2 * pb->ns * c; i++) /* two vectors for eval_many */
        pb->q[i] = value(r);
}

/* Finite and moderate: where a success must give finite, accurate outputs. */
static int sane(const double *x, int64_t count, double big)
{
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i]) || fabs(x[i]) > big || (x[i] != 0 && fabs(x[i]) < 1e-100))
            return 0;
    return 1;
}

static int all_finite(const double *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static void check_failure(fmk_status st, const fmk_plan *plan)
{
    REQUIRE(st > FMK_OK && st <= FMK_ERR_ACCURACY && st != FMK_ERR_INTERRUPTED);
    REQUIRE(st != FMK_ERR_INTERNAL);
    const char *msg = fmk_plan_last_error(plan);
    REQUIRE(msg != NULL && msg[0] != '\0');
}

/* The largest side of the box around every point (log2d's frame width, within a factor 2). */
static double box_side(const problem *pb)
{
    double side = 0;
    for (int k = 0; k < pb->dim; k++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int pass = 0; pass < 2; pass++) {
            const double *x = pass ? pb->trg : pb->src;
            const int64_t n = pass ? (pb->use_targets ? pb->nt : 0) : pb->ns;
            for (int64_t i = 0; i < n; i++)
                lo = fmin(lo, x[pb->dim * i + k]), hi = fmax(hi, x[pb->dim * i + k]);
        }
        side = fmax(side, hi - lo);
    }
    return side;
}

/* The sum over the sources of |q_j| |G| (|grad G| when grad): the size of the terms that a
 * relative error of the result is fairly measured against. For log2d's potential the FMM sums
 * q_j (log r'_j + log w) in its frame (width w), the log w term over the charges apart from
 * the target's own position taken as Q_total - Q_coincident: a charge at the target's
 * position enters with |q_j| |log w|, through that difference's rounding (docs/reliability.md,
 * "Open"). */
static double abs_term(const problem *pb, const double *y, int64_t skip, int grad)
{
    const int dim = pb->dim, c = fmk_kernel_is_complex(pb->kernel) ? 2 : 1;
    const double s2 = pb->opts.softening * pb->opts.softening;
    const double log_w =
        pb->kernel == FMK_KERNEL_LOG2D && !grad ? fabs(log(fmax(box_side(pb), 1e-300))) : 0;
    double sum = 0;
    for (int64_t j = 0; j < pb->ns; j++) {
        if (j == skip)
            continue;
        double r2 = 0;
        for (int k = 0; k < dim; k++)
            r2 += (y[k] - pb->src[dim * j + k]) * (y[k] - pb->src[dim * j + k]);
        double r = sqrt(r2), g;
        double qa = c == 2 ? hypot(pb->q[2 * j], pb->q[2 * j + 1]) : fabs(pb->q[j]);
        switch (pb->kernel) {
        case FMK_KERNEL_PLUMMER: g = grad ? r / pow(r2 + s2, 1.5) : 1 / sqrt(r2 + s2); break;
        case FMK_KERNEL_REGULARIZED:
            g = grad ? r * (r2 + 2.5 * s2) / pow(r2 + s2, 2.5)
                     : (r2 + 1.5 * s2) / pow(r2 + s2, 1.5);
            break;
        case FMK_KERNEL_LOG2D:
            if (r == 0) {
                sum += qa * log_w;
                continue;
            }
            g = grad ? 1 / r : fabs(log(r)) + log_w;
            break;
        default: /* laplace, cauchy2d */
            if (r == 0)
                continue;
            g = grad ? 1 / r2 : 1 / r;
            break;
        }
        sum += qa * g;
    }
    return sum;
}

/* Compares out (fmm or direct) with ref (direct) per output; aborts on a relative l2 error
 * above tol, unless the sum cancels (see the file's comment). */
static void compare(const problem *pb, const double *out, const double *ref, int per_target,
                    int grad, double tol)
{
    const int64_t nt = pb->use_targets ? pb->nt : pb->ns;
    double err2 = 0, ref2 = 0, abs2 = 0;
    for (int64_t i = 0; i < nt; i++) {
        const double *y = pb->use_targets ? pb->trg + pb->dim * i : pb->src + pb->dim * i;
        double a = abs_term(pb, y, pb->use_targets ? -1 : i, grad);
        abs2 += a * a;
        for (int k = 0; k < per_target; k++) {
            double e = out[per_target * i + k] - ref[per_target * i + k];
            err2 += e * e;
            ref2 += ref[per_target * i + k] * ref[per_target * i + k];
        }
    }
    if (!(ref2 > 0) || ref2 < 1e-4 * abs2 || !isfinite(abs2))
        return;
    double rel = sqrt(err2 / ref2);
    if (!(rel <= tol)) {
        fprintf(stderr,
                "fuzz_api: %s relative l2 error %.3g > %.3g (kernel %s, method %s, "
                "dim %d, eps %g, order %d, ns %lld, nt %lld)\n",
                grad ? "gradient" : "potential", rel, tol, fmk_kernel_name(pb->kernel),
                fmk_method_name(pb->opts.method), pb->dim, pb->eps, (int)pb->opts.order,
                (long long)pb->ns, (long long)nt);
        abort();
    }
}

static const uint64_t SENTINEL = 0x7ff4dead0000beefull; /* a signalling NaN nobody writes */

static void fill_sentinel(double *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        memcpy(&x[i], &SENTINEL, sizeof SENTINEL);
}

static int untouched(const double *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (memcmp(&x[i], &SENTINEL, sizeof SENTINEL) != 0)
            return 0;
    return 1;
}

/* Runs the plan's evaluations and checks them; the plan has its points. */
static void evaluate(const problem *pb, fmk_plan *plan, int inputs_sane)
{
    const int c = fmk_kernel_is_complex(pb->kernel) ? 2 : 1;
    const int64_t nt = pb->use_targets ? pb->nt : pb->ns;
    const int gdim = c == 2 ? 2 : pb->dim;
    static double pot[2][2 * MAX_POINTS * 2], grad[2][2 * MAX_POINTS * 3];
    const int64_t npot = nt * c, ngrad = nt * gdim;

    fill_sentinel(pot[0], npot), fill_sentinel(grad[0], ngrad);
    fmk_status st = fmk_plan_eval(plan, pb->q, pot[0], grad[0]);
    if (getenv("FMK_FUZZ_TRACE"))
        fprintf(stderr, "eval: %s %s\n", fmk_status_string(st),
                st ? fmk_plan_last_error(plan) : "");
    if (st != FMK_OK) {
        check_failure(st, plan);
        REQUIRE(untouched(pot[0], npot) && untouched(grad[0], ngrad));
        return;
    }
    const int charges_sane = sane(pb->q, pb->ns * c, 1e6);
    if (inputs_sane && charges_sane)
        REQUIRE(all_finite(pot[0], npot) && all_finite(grad[0], ngrad));

    /* the same charges again: the same bits (one thread, or a deterministic reduction) */
    fill_sentinel(pot[1], npot), fill_sentinel(grad[1], ngrad);
    st = fmk_plan_eval(plan, pb->q, pot[1], NULL);
    REQUIRE(st == FMK_OK);
    REQUIRE(untouched(grad[1], ngrad));
    if (pb->opts.threads == 1)
        REQUIRE(memcmp(pot[0], pot[1], (size_t)npot * sizeof(double)) == 0);

    /* eval_many: n_vectors vectors, outputs at their offsets */
    static double mpot[2 * MAX_POINTS * 2 * 2];
    fill_sentinel(mpot, 2 * npot);
    st = fmk_plan_eval_many(plan, pb->n_vectors, pb->q, mpot, NULL);
    if (st != FMK_OK)
        check_failure(st, plan);
    REQUIRE(untouched(mpot + pb->n_vectors * npot, (2 - pb->n_vectors) * npot));

    fmk_info info;
    REQUIRE(fmk_plan_info(plan, &info) == FMK_OK);
    REQUIRE(info.n_sources == pb->ns && info.n_targets == nt);
    REQUIRE(info.bytes_host >= 0 && info.backend == FMK_BACKEND_CPU);

    /* accuracy against the direct method: fp64, direct or fmm, moderate inputs */
    if (!inputs_sane || !charges_sane || pb->opts.precision != FMK_PRECISION_FP64 ||
        info.method == FMK_METHOD_TREE)
        return;
    fmk_opts ro;
    fmk_opts_default(&ro);
    ro.method = FMK_METHOD_DIRECT;
    ro.backend = FMK_BACKEND_CPU;
    ro.threads = 1;
    ro.softening = pb->opts.softening;
    static double rpot[2 * MAX_POINTS], rgrad[MAX_POINTS * 3];
    st = fmk_eval(pb->dim, pb->kernel, 1e-6, &ro, pb->ns, pb->src, pb->q, pb->nt,
                  pb->use_targets ? pb->trg : NULL, rpot, rgrad);
    REQUIRE(st == FMK_OK);
    /* an expert order (opts.order >= 0) overrides the one eps asks for (docs/fmm3d.md): such
     * a plan is held only to a sum of the right size, not to eps */
    const int expert = info.method == FMK_METHOD_FMM && pb->opts.order >= 0;
    const double tol = expert ? 1.0 : 10 * fmax(pb->eps, 1e-10);
    compare(pb, pot[0], rpot, c, 0, tol);
    compare(pb, grad[0], rgrad, gdim, 1, tol);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    static problem pb;
    memset(&pb, 0, sizeof pb);
    decode(&r, &pb);

    static int trace = -1; /* FMK_FUZZ_TRACE=1: a line per input, for reading reproducers */
    if (trace < 0)
        trace = getenv("FMK_FUZZ_TRACE") != NULL;
    fmk_plan *plan = (fmk_plan *)&pb; /* must be overwritten with NULL on failure */
    fmk_status st = fmk_plan_create(&plan, pb.dim, pb.kernel, pb.eps, &pb.opts);
    if (trace)
        fprintf(stderr,
                "create(dim %d, kernel %d, eps %g, method %d, precision %d, order %d, "
                "leaf %lld, threads %d): %s %s\n",
                pb.dim, (int)pb.kernel, pb.eps, (int)pb.opts.method, (int)pb.opts.precision,
                (int)pb.opts.order, (long long)pb.opts.leaf_size, (int)pb.opts.threads,
                fmk_status_string(st), st ? fmk_plan_last_error(NULL) : "");
    if (st != FMK_OK) {
        check_failure(st, NULL);
        REQUIRE(plan == NULL);
        return 0;
    }
    REQUIRE(plan != NULL);

    int64_t host = -7, device = -7;
    st = fmk_plan_memory(plan, pb.ns, pb.use_targets ? pb.nt : -1, &host, &device);
    if (st == FMK_OK)
        REQUIRE(host >= 0 && device >= 0);
    else {
        check_failure(st, plan);
        REQUIRE(host == -7 && device == -7);
    }

    /* eval before set_points is out of order */
    static double pot[2 * MAX_POINTS];
    REQUIRE(fmk_plan_eval(plan, pb.q, pot, NULL) == FMK_ERR_STATE);

    const int d = pb.dim;
    st = fmk_plan_set_points(plan, pb.ns, pb.src, pb.nt, pb.use_targets ? pb.trg : NULL);
    if (trace)
        fprintf(stderr, "set_points(%lld, %lld): %s %s\n", (long long)pb.ns, (long long)pb.nt,
                fmk_status_string(st), st ? fmk_plan_last_error(plan) : "");
    if (st != FMK_OK) {
        check_failure(st, plan);
    } else {
        int points_sane = sane(pb.src, pb.ns * d, 1e6) && sane(pb.trg, pb.nt * d, 1e6);
        evaluate(&pb, plan, points_sane);
    }
    fmk_info info;
    REQUIRE(fmk_plan_info(plan, &info) == FMK_OK);
    REQUIRE(info.dim == pb.dim && info.kernel == pb.kernel);
    REQUIRE(info.method != FMK_METHOD_AUTO && info.backend == FMK_BACKEND_CPU);
    fmk_plan_destroy(plan);
    return 0;
}
