/* direct.c -- the life of an fmmkit plan, and the one-shot call.
 *
 * Gravity-like potentials of N random unit charges in the unit cube (kernel 1/r), evaluated
 * at the sources themselves. A plan is made once for a kernel and options, given the points
 * once, and then evaluated for as many charge vectors as needed; the one-shot call fmk_eval
 * does all of it for a single vector.
 *
 * Build against an installed fmmkit:
 *     cc direct.c $(pkg-config --cflags --libs fmmkit) -o direct
 * or with CMake: find_package(fmmkit) and link fmmkit::fmmkit (see CMakeLists.txt here). */
#include <stdio.h>
#include <stdlib.h>

#include <fmmkit.h>

enum { N = 2000 };

/* Prints why a call failed; plan may be NULL for create and the one-shot call. */
static int failed(const char *what, fmk_status status, const fmk_plan *plan)
{
    fprintf(stderr, "%s failed: %s: %s\n", what, fmk_status_string(status),
            fmk_plan_last_error(plan));
    return 1;
}

int main(void)
{
    /* Points are interleaved: x[3*i + 0..2]. Arrays belong to the caller; fmmkit copies. */
    double *x = malloc(3 * N * sizeof *x), *q1 = malloc(N * sizeof *q1),
           *q2 = malloc(N * sizeof *q2), *pot = malloc(N * sizeof *pot),
           *grad = malloc(3 * N * sizeof *grad), *pot2 = malloc(N * sizeof *pot2);
    if (!x || !q1 || !q2 || !pot || !grad || !pot2)
        return 1;
    unsigned long long seed = 12345;
    for (int i = 0; i < 3 * N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (double)(seed >> 11) * 0x1p-53;
    }
    for (int i = 0; i < N; i++)
        q1[i] = 1.0, q2[i] = i % 2 ? 1.0 : -1.0;

    /* 1. Options: start from the defaults, then change what you need. */
    fmk_opts opts;
    fmk_opts_default(&opts);
    opts.method = FMK_METHOD_DIRECT; /* exact O(N^2) sum */
    opts.backend = FMK_BACKEND_CPU;  /* AUTO would pick a GPU when there is one */

    /* 2. Create: dimension, kernel, requested accuracy, options. */
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-6, &opts);
    if (st != FMK_OK)
        return failed("fmk_plan_create", st, NULL);

    /* 3. Points: targets NULL means "at the sources"; the term j = i is then left out. */
    st = fmk_plan_set_points(plan, N, x, 0, NULL);
    if (st != FMK_OK)
        return failed("fmk_plan_set_points", st, plan);

    /* 4. Evaluate, twice, with different charges; the points are not processed again. */
    st = fmk_plan_eval(plan, q1, pot, grad);
    if (st != FMK_OK)
        return failed("fmk_plan_eval", st, plan);
    printf("equal charges:       phi[0] = %.12g, grad phi[0] = (%.6g, %.6g, %.6g)\n", pot[0],
           grad[0], grad[1], grad[2]);
    st = fmk_plan_eval(plan, q2, pot2, NULL); /* potential only */
    if (st != FMK_OK)
        return failed("fmk_plan_eval", st, plan);
    printf("alternating charges: phi[0] = %.12g\n", pot2[0]);

    /* 5. What the plan is and what its last calls cost. */
    fmk_info info;
    st = fmk_plan_info(plan, &info);
    if (st != FMK_OK)
        return failed("fmk_plan_info", st, plan);
    printf("method %s on %s [%s], %lld sources, %lld bytes; set_points %.2e s, last eval %.2e s\n",
           fmk_method_name(info.method), fmk_backend_name(info.backend), info.device_name,
           (long long)info.n_sources, (long long)info.bytes_host, info.phase_time[FMK_PHASE_SETUP],
           info.phase_time[FMK_PHASE_P2P]);

    /* A failed call says why, and leaves the plan usable. */
    q2[7] = 0.0 / 0.0; /* NaN */
    st = fmk_plan_eval(plan, q2, pot2, NULL);
    printf("eval with a NaN charge: %s (\"%s\")\n", fmk_status_string(st),
           fmk_plan_last_error(plan));
    q2[7] = -1.0;

    /* 6. Destroy (NULL would be a no-op). */
    fmk_plan_destroy(plan);

    /* The one-shot call: create + set_points + eval + destroy. */
    st = fmk_eval(3, FMK_KERNEL_LAPLACE, 1e-6, &opts, N, x, q1, 0, NULL, pot2, NULL);
    if (st != FMK_OK)
        return failed("fmk_eval", st, NULL);
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= pot2[i] == pot[i];
    printf("one-shot call %s the plan\n", same ? "agrees with" : "DIFFERS from");

    free(x), free(q1), free(q2), free(pot), free(grad), free(pot2);
    return same ? 0 : 1;
}
