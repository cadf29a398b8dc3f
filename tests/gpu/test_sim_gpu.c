/* test_sim_gpu.c -- the simulation driver with its state on the GPU (src/sim/cuda, device.c)
 * against the same simulation on the CPU, on a small Plummer sphere:
 *
 *   - the first forces (acceleration, potential) and the diagnostics (energies, momentum,
 *     angular momentum: the device reductions against diag.c's sums) agree: fp64 direct sum to
 *     1e-12, with the spline correction on the device (softenings per particle) as well, and
 *     the fp32 treecode (theta 0.6, the headline) to the method's accuracy;
 *   - 50 steps of the device loop follow the host loop (fp64 direct: positions to 1e-9), the
 *     adaptive step picks the same steps, and energy is kept alike;
 *   - fmk_sim_create_device (device arrays, checked on the device) gives the same run bit for
 *     bit as fmk_sim_create with the host arrays; a NaN mass on the device is refused;
 *     fmk_sim_get_state_device equals fmk_sim_get_state;
 *   - restart on the GPU: a checkpoint continued gives the uninterrupted run bit for bit (fp64
 *     direct, fp32 treecode, spline), and through a restart file when the file layer exists;
 *   - an interrupt stops the device loop at a whole step (the state equals that many steps);
 *   - comoving integration (the step's factors, the background term c x on the device, the
 *     comoving reduction every step): 50 steps of the device loop follow the host loop (fp64
 *     direct: positions to 1e-9, K, W and the Layzer-Irvine integral to 1e-9), and a restart
 *     on the device continues bit for bit (the Layzer-Irvine state included);
 *   - the potential only where it is read: 20 steps without it (fmk_sim_step: the plan's
 *     eval_device with pot NULL, the spline correcting the accelerations alone), then
 *     fmk_sim_info_get evaluates it on demand (the accelerations into the next buffer: the
 *     state's unchanged bit for bit, the trajectory equal to the same steps without queries
 *     bit for bit) and W equals that of the same 20 steps with the potential on every
 *     evaluation (fp64 direct, with the spline per particle: 1e-12; fp32 treecode: 1e-5).
 * Exit 77 (skipped) without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim_internal.h"

#include "gpu_check.h"

#define N 4096

static double *ic_mass, *ic_pos, *ic_vel, *ic_soft;

static fmk_sim_opts opts_for(fmk_backend backend, fmk_method method, fmk_precision prec)
{
    fmk_sim_opts o;
    fmk_sim_opts_default(&o);
    o.plan.backend = backend;
    o.plan.method = method;
    o.plan.precision = prec;
    if (method == FMK_METHOD_TREE)
        o.plan.theta = 0.6;
    o.soft = 0.01;
    o.dt = 0.005;
    return o;
}

static fmk_sim *make(const fmk_sim_opts *o, int per_particle)
{
    fmk_sim *sim = NULL;
    fmk_status st =
        fmk_sim_create(&sim, N, ic_mass, ic_pos, ic_vel, per_particle ? ic_soft : NULL, NULL, o);
    CHECK(st == FMK_OK, "create (%s): %s", fmk_backend_name(o->plan.backend),
          fmk_sim_last_error(NULL));
    return sim;
}

static double rel_l2(const double *a, const double *b, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++)
        d += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* The state of a simulation: pos, vel, acc (3N each), pot (N). */
typedef struct state {
    double pos[3 * N], vel[3 * N], acc[3 * N], pot[N];
} state;

static void get(const fmk_sim *sim, state *s)
{
    fmk_status st = fmk_sim_get_state(sim, NULL, s->pos, s->vel, s->acc, s->pot);
    CHECK(st == FMK_OK, "get_state: %s", fmk_sim_last_error(sim));
}

static int same(const fmk_sim *a, const fmk_sim *b)
{
    static state x, y;
    get(a, &x), get(b, &y);
    fmk_sim_info ia, ib;
    fmk_sim_info_get(a, &ia), fmk_sim_info_get(b, &ib);
    return memcmp(&x, &y, sizeof x) == 0 && ia.step == ib.step && ia.time == ib.time;
}

static void against_cpu(const char *what, fmk_method method, fmk_precision prec, int spline,
                        int adaptive, double tol_force, double tol_run)
{
    fmk_sim_opts oc = opts_for(FMK_BACKEND_CPU, method, prec);
    if (spline)
        oc.softening = FMK_SIM_SOFT_SPLINE, oc.soft = 0;
    if (adaptive)
        oc.stepping = FMK_SIM_STEP_ADAPTIVE, oc.eta = 0.05, oc.dt_max = 0.01;
    fmk_sim_opts og = oc;
    og.plan.backend = FMK_BACKEND_CUDA;
    fmk_sim *c = make(&oc, spline), *g = make(&og, spline);
    if (!c || !g)
        goto done;
    static state sc, sg;
    get(c, &sc), get(g, &sg);
    const double ea = rel_l2(sg.acc, sc.acc, 3 * N), ep = rel_l2(sg.pot, sc.pot, N);
    fmk_sim_info ic, ig;
    fmk_sim_info_get(c, &ic), fmk_sim_info_get(g, &ig);
    const double ee = fabs(ig.total / ic.total - 1),
                 eL = fabs(ig.angular_momentum[2] - ic.angular_momentum[2]) +
                      fabs(ig.momentum[0] - ic.momentum[0]);
    const double e0 = ic.total;
    fmk_status st = fmk_sim_run(c, 0, 50);
    CHECK(st == FMK_OK, "%s: cpu run: %s", what, fmk_sim_last_error(c));
    st = fmk_sim_run(g, 0, 50);
    CHECK(st == FMK_OK, "%s: gpu run: %s", what, fmk_sim_last_error(g));
    get(c, &sc), get(g, &sg);
    fmk_sim_info_get(c, &ic), fmk_sim_info_get(g, &ig);
    const double ex = rel_l2(sg.pos, sc.pos, 3 * N);
    printf("%-34s forces %.1e, potential %.1e, energy %.1e, P/L %.1e; after 50 steps: positions "
           "%.1e, time %.6f / %.6f, |dE/E| %.1e / %.1e\n",
           what, ea, ep, ee, eL, ex, ic.time, ig.time, fabs(ic.total / e0 - 1),
           fabs(ig.total / e0 - 1));
    CHECK(ea <= tol_force && ep <= tol_force, "%s: forces differ by %.2e, %.2e", what, ea, ep);
    CHECK(ee <= tol_force && eL <= 1e-12, "%s: diagnostics differ by %.2e, %.2e", what, ee, eL);
    CHECK(ex <= tol_run, "%s: positions after 50 steps differ by %.2e", what, ex);
    CHECK(fabs(ig.time / ic.time - 1) <= (adaptive ? 1e-9 : 0), "%s: the steps differ", what);
    CHECK(fabs(ig.total / e0 - 1) <= 1e-3, "%s: the GPU run's energy", what);
done:
    fmk_sim_destroy(c), fmk_sim_destroy(g);
}

static void test_device_arrays(void)
{
    const fmk_sim_opts o = opts_for(FMK_BACKEND_CUDA, FMK_METHOD_DIRECT, FMK_PRECISION_FP64);
    double *d_m, *d_x, *d_v;
    CUDA_OK(cudaMalloc((void **)&d_m, N * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_x, 3 * N * sizeof(double)));
    CUDA_OK(cudaMalloc((void **)&d_v, 3 * N * sizeof(double)));
    CUDA_OK(cudaMemcpy(d_m, ic_mass, N * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_x, ic_pos, 3 * N * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_v, ic_vel, 3 * N * sizeof(double), cudaMemcpyHostToDevice));
    fmk_sim *a = NULL, *b = make(&o, 0);
    fmk_status st = fmk_sim_create_device(&a, N, d_m, d_x, d_v, &o);
    CHECK(st == FMK_OK, "create_device: %s", fmk_sim_last_error(NULL));
    if (a && b) {
        fmk_sim_run(a, 0, 10), fmk_sim_run(b, 0, 10);
        CHECK(same(a, b), "create_device and create differ after 10 steps");
        /* get_state_device: the device's copy of the state */
        static state h, dd;
        get(a, &h);
        CUDA_OK(cudaMemset(d_x, 0, 3 * N * sizeof(double)));
        st = fmk_sim_get_state_device(a, NULL, d_x, d_v, NULL, NULL);
        CHECK(st == FMK_OK, "get_state_device: %s", fmk_sim_last_error(a));
        CUDA_OK(cudaMemcpy(dd.pos, d_x, 3 * N * sizeof(double), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(dd.vel, d_v, 3 * N * sizeof(double), cudaMemcpyDeviceToHost));
        CHECK(memcmp(h.pos, dd.pos, sizeof h.pos) == 0 && memcmp(h.vel, dd.vel, sizeof h.vel) == 0,
              "get_state_device differs from get_state");
    }
    fmk_sim_destroy(a), fmk_sim_destroy(b);
    /* a NaN mass on the device */
    const double nan = NAN;
    CUDA_OK(cudaMemcpy(d_m + 17, &nan, sizeof nan, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_x, ic_pos, 3 * N * sizeof(double), cudaMemcpyHostToDevice));
    a = (fmk_sim *)&a;
    st = fmk_sim_create_device(&a, N, d_m, d_x, d_v, &o);
    CHECK(st == FMK_ERR_NONFINITE && a == NULL, "a NaN mass on the device: %d (%s)", (int)st,
          fmk_sim_last_error(NULL));
    cudaFree(d_m), cudaFree(d_x), cudaFree(d_v);
}

static void restart(const char *what, fmk_sim_opts o, int spline)
{
    fmk_sim *a = make(&o, spline), *b = make(&o, spline), *c = NULL;
    if (!a || !b)
        goto done;
    fmk_sim_run(a, 0, 30);
    fmk_sim_run(b, 0, 12);
    fmk_sim_checkpoint cp;
    fmk_status st = fmk_sim_checkpoint_take(b, &cp);
    CHECK(st == FMK_OK, "%s: checkpoint: %s", what, fmk_sim_last_error(b));
    if (st == FMK_OK) {
        st = fmk_sim_create_from_checkpoint(&c, &cp, NULL);
        CHECK(st == FMK_OK, "%s: restart: %s", what, fmk_sim_last_error(NULL));
        fmk_sim_checkpoint_free(&cp);
    }
    if (c) {
        fmk_sim_run(c, 0, 18);
        CHECK(same(a, c), "%s: the continued run differs from the uninterrupted one", what);
        fmk_sim_destroy(c);
        c = NULL;
    }
    /* through a file, where the file layer exists */
    char path[] = "/tmp/fmk_sim_gpu_restart_XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    fmk_sim_destroy(b);
    b = make(&o, spline);
    fmk_sim_run(b, 0, 12);
    st = fmk_sim_write_restart(b, path);
    if (st == FMK_OK) {
        st = fmk_sim_create_from_file(&c, path, NULL);
        CHECK(st == FMK_OK, "%s: restart file: %s", what, fmk_sim_last_error(NULL));
        if (c) {
            fmk_sim_run(c, 0, 18);
            CHECK(same(a, c), "%s: the run continued from a file differs", what);
        }
    } else {
        printf("%s: restart through a file skipped: %s\n", what, fmk_sim_last_error(b));
    }
    remove(path);
    printf("%-34s restart bit for bit checked\n", what);
done:
    fmk_sim_destroy(a), fmk_sim_destroy(b), fmk_sim_destroy(c);
}

typedef struct interrupter {
    fmk_sim *sim;
    atomic_int done;
} interrupter;

static void *interrupt_loop(void *arg)
{
    interrupter *it = arg;
    const struct timespec pause = {0, 20000000};
    while (!atomic_load(&it->done)) {
        nanosleep(&pause, NULL);
        fmk_sim_interrupt(it->sim);
    }
    return NULL;
}

static void test_interrupt(void)
{
    const fmk_sim_opts o = opts_for(FMK_BACKEND_CUDA, FMK_METHOD_DIRECT, FMK_PRECISION_FP64);
    fmk_sim *a = make(&o, 0), *b = make(&o, 0);
    if (a && b) {
        interrupter it = {.sim = a};
        atomic_init(&it.done, 0);
        pthread_t th;
        pthread_create(&th, NULL, interrupt_loop, &it);
        fmk_status st = fmk_sim_run(a, 0, 1000000);
        atomic_store(&it.done, 1);
        pthread_join(th, NULL);
        fmk_sim_info info;
        fmk_sim_info_get(a, &info);
        printf("interrupted on the GPU after %lld steps: %s\n", (long long)info.step,
               fmk_sim_last_error(a));
        CHECK(st == FMK_ERR_INTERRUPTED, "the run returned %d", (int)st);
        fmk_sim_run(b, 0, info.step);
        CHECK(same(a, b), "the interrupted state is not that of %lld steps", (long long)info.step);
    }
    fmk_sim_destroy(a), fmk_sim_destroy(b);
}

/* The Plummer sphere as a comoving clump: positions x 5 Mpc, masses 1e10 Msun each, at rest at
 * a = 0.1, steps of 0.02 in ln a (WMAP). */
static fmk_sim *make_comoving(fmk_backend backend, fmk_method method)
{
    static double pos[3 * N], vel[3 * N], mass[N];
    for (int k = 0; k < 3 * N; k++)
        pos[k] = 5 * ic_pos[k], vel[k] = 0;
    for (int i = 0; i < N; i++)
        mass[i] = 1;
    fmk_sim_opts o = opts_for(backend, method, FMK_PRECISION_FP64);
    o.comoving = 1;
    o.spacing = FMK_SIM_SPACING_LOGA;
    o.a_start = 0.1;
    o.dt = 0.02;
    o.soft = 0.05;
    fmk_sim *sim = NULL;
    fmk_status st = fmk_sim_create(&sim, N, mass, pos, vel, NULL, NULL, &o);
    CHECK(st == FMK_OK, "comoving create (%s): %s", fmk_backend_name(backend),
          fmk_sim_last_error(NULL));
    return sim;
}

static void test_comoving(void)
{
    fmk_sim *c = make_comoving(FMK_BACKEND_CPU, FMK_METHOD_DIRECT);
    fmk_sim *g = make_comoving(FMK_BACKEND_CUDA, FMK_METHOD_DIRECT);
    if (c && g) {
        fmk_sim_run(c, 0, 50), fmk_sim_run(g, 0, 50);
        static state sc, sg;
        get(c, &sc), get(g, &sg);
        fmk_sim_info ic, ig;
        fmk_sim_info_get(c, &ic), fmk_sim_info_get(g, &ig);
        const double ex = rel_l2(sg.pos, sc.pos, 3 * N);
        const double ek = fabs(ig.kinetic / ic.kinetic - 1),
                     ew = fabs(ig.potential / ic.potential - 1),
                     el = fabs(ig.layzer_irvine / ic.layzer_irvine - 1);
        printf("%-34s after 50 steps (a %.4f): positions %.1e, K %.1e, W %.1e, C %.1e; "
               "Layzer-Irvine error %.1e / %.1e\n",
               "comoving, direct fp64", ig.time, ex, ek, ew, el, ic.layzer_irvine_error,
               ig.layzer_irvine_error);
        CHECK(ic.time == ig.time, "comoving: the steps differ");
        CHECK(ex <= 1e-9 && ek <= 1e-9 && ew <= 1e-9 && el <= 1e-9,
              "comoving: the device loop differs (%.2e %.2e %.2e %.2e)", ex, ek, ew, el);
    }
    fmk_sim_destroy(c), fmk_sim_destroy(g);
    /* restart on the device, bit for bit */
    fmk_sim *a = make_comoving(FMK_BACKEND_CUDA, FMK_METHOD_TREE);
    fmk_sim *b = make_comoving(FMK_BACKEND_CUDA, FMK_METHOD_TREE), *r = NULL;
    if (a && b) {
        fmk_sim_run(a, 0, 30), fmk_sim_run(b, 0, 12);
        fmk_sim_checkpoint cp;
        if (fmk_sim_checkpoint_take(b, &cp) == FMK_OK) {
            fmk_status st = fmk_sim_create_from_checkpoint(&r, &cp, NULL);
            CHECK(st == FMK_OK, "comoving restart: %s", fmk_sim_last_error(NULL));
            fmk_sim_checkpoint_free(&cp);
        }
        if (r) {
            fmk_sim_run(r, 0, 18);
            fmk_sim_info ia, ir;
            fmk_sim_info_get(a, &ia), fmk_sim_info_get(r, &ir);
            CHECK(same(a, r) && ia.layzer_irvine == ir.layzer_irvine,
                  "comoving: the continued run differs from the uninterrupted one");
            printf("%-34s restart bit for bit checked\n", "comoving, tree fp64");
        }
    }
    fmk_sim_destroy(a), fmk_sim_destroy(b), fmk_sim_destroy(r);
}

/* Steps of sim with the potential on every evaluation (fmk_sim_run's steps that end in a row). */
static void steps_with_potential(fmk_sim *sim, int steps)
{
    for (int k = 0; k < steps; k++) {
        double dt = 0;
        fmk_status st = fmk_sim_next_dt(sim, &dt);
        if (st == FMK_OK)
            st = fmk_sim_step_once(sim, dt, 0, 1);
        CHECK(st == FMK_OK, "step with the potential: %s", fmk_sim_last_error(sim));
    }
}

static void test_potential_on_demand(const char *what, fmk_sim_opts o, int spline, double tol)
{
    fmk_sim *a = make(&o, spline), *b = make(&o, spline), *c = make(&o, spline);
    if (!a || !b || !c)
        goto done;
    static state sa, sb, sb2, sc;
    steps_with_potential(a, 20);
    for (int k = 0; k < 20; k++) {
        CHECK(fmk_sim_step(b) == FMK_OK, "step: %s", fmk_sim_last_error(b));
        CHECK(fmk_sim_step(c) == FMK_OK, "step: %s", fmk_sim_last_error(c));
        if (k % 5 == 4) { /* queries in the middle: they must not change b's trajectory */
            fmk_sim_info ib;
            CHECK(b->pot_ok == 0, "%s: the potential current after a step without it", what);
            CHECK(fmk_sim_get_state(b, NULL, NULL, NULL, sb.acc, NULL) == FMK_OK, "get_state");
            CHECK(fmk_sim_info_get(b, &ib) == FMK_OK, "info: %s", fmk_sim_last_error(b));
            CHECK(b->pot_ok == 1 && isfinite(ib.potential) && ib.potential < 0,
                  "%s: W on demand %g", what, ib.potential);
            CHECK(fmk_sim_get_state(b, NULL, NULL, NULL, sb2.acc, NULL) == FMK_OK, "get_state");
            CHECK(memcmp(sb.acc, sb2.acc, sizeof sb.acc) == 0,
                  "%s: the potential on demand changed the state's accelerations", what);
        }
    }
    CHECK(a->pot_ok == 1 && c->pot_ok == 0, "%s: the flags after the steps", what);
    fmk_sim_info ia, ib;
    CHECK(fmk_sim_info_get(a, &ia) == FMK_OK && fmk_sim_info_get(b, &ib) == FMK_OK, "info");
    const double dw = fabs(ia.potential - ib.potential) / fabs(ia.potential);
    get(a, &sa), get(b, &sb), get(c, &sc);
    const double dpot = rel_l2(sb.pot, sa.pot, N);
    CHECK(dw < tol && dpot < tol,
          "%s: W after steps without the potential %.17g, with it %.17g (%.2e; pot %.2e)", what,
          ib.potential, ia.potential, dw, dpot);
    CHECK(memcmp(sb.pos, sc.pos, sizeof sb.pos) == 0 &&
              memcmp(sb.vel, sc.vel, sizeof sb.vel) == 0 &&
              memcmp(sb.acc, sc.acc, sizeof sb.acc) == 0,
          "%s: queries of the energy changed the trajectory", what);
    printf("%-34s W on demand vs every step %.2e, pot %.2e, positions %.2e\n", what, dw, dpot,
           rel_l2(sb.pos, sa.pos, 3 * N));
done:
    fmk_sim_destroy(a), fmk_sim_destroy(b), fmk_sim_destroy(c);
}

int main(void)
{
    (void)urand; /* gpu_check.h's generator: the initial conditions come from fmk_sim_ic_plummer */
    if (fmk_cuda_device_count() == 0) {
        printf("skipped: no GPU\n");
        return 77;
    }
    ic_mass = malloc(N * sizeof(double)), ic_pos = malloc(3 * N * sizeof(double));
    ic_vel = malloc(3 * N * sizeof(double)), ic_soft = malloc(N * sizeof(double));
    fmk_sim_ic_plummer(N, 12, ic_mass, ic_pos, ic_vel);
    for (int i = 0; i < N; i++)
        ic_soft[i] = 0.005 + 0.02 * (i % 5) / 4.0;
    against_cpu("direct fp64", FMK_METHOD_DIRECT, FMK_PRECISION_FP64, 0, 0, 1e-12, 1e-9);
    against_cpu("direct fp64, spline per particle", FMK_METHOD_DIRECT, FMK_PRECISION_FP64, 1, 0,
                1e-12, 1e-9);
    against_cpu("direct fp64, adaptive", FMK_METHOD_DIRECT, FMK_PRECISION_FP64, 0, 1, 1e-12, 1e-9);
    against_cpu("tree fp32 theta 0.6", FMK_METHOD_TREE, FMK_PRECISION_FP32, 0, 0, 5e-3, 1e-2);
    test_device_arrays();
    restart("restart, direct fp64",
            opts_for(FMK_BACKEND_CUDA, FMK_METHOD_DIRECT, FMK_PRECISION_FP64), 0);
    restart("restart, tree fp32", opts_for(FMK_BACKEND_CUDA, FMK_METHOD_TREE, FMK_PRECISION_FP32),
            0);
    fmk_sim_opts o = opts_for(FMK_BACKEND_CUDA, FMK_METHOD_TREE, FMK_PRECISION_FP64);
    o.softening = FMK_SIM_SOFT_SPLINE, o.soft = 0;
    o.stepping = FMK_SIM_STEP_ADAPTIVE, o.eta = 0.05, o.dt_max = 0.01;
    restart("restart, tree fp64 spline adaptive", o, 1);
    test_interrupt();
    test_comoving();
    test_potential_on_demand("potential, direct fp64",
                             opts_for(FMK_BACKEND_CUDA, FMK_METHOD_DIRECT, FMK_PRECISION_FP64), 0,
                             1e-12);
    o = opts_for(FMK_BACKEND_CUDA, FMK_METHOD_DIRECT, FMK_PRECISION_FP64);
    o.softening = FMK_SIM_SOFT_SPLINE, o.soft = 0;
    test_potential_on_demand("potential, direct fp64 spline", o, 1, 1e-12);
    test_potential_on_demand("potential, tree fp32 theta 0.6",
                             opts_for(FMK_BACKEND_CUDA, FMK_METHOD_TREE, FMK_PRECISION_FP32), 0,
                             1e-5);
    free(ic_mass), free(ic_pos), free(ic_vel), free(ic_soft);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
