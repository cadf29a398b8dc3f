/* test_cpu_no_cuda.c -- CPU work never starts the CUDA runtime.
 *
 * CUDA's runtime loads the driver library (libcuda.so) on its first call, not when the program
 * starts; so a process that has made, used and destroyed plans with backend cpu, and asked
 * fmk_method_available about the CPU, must not have libcuda.so mapped (/proc/self/maps).
 * Before, every fmk_plan_create counted the devices, which started the runtime, and a failure
 * inside it (out of memory) crashed CPU-only work.
 *
 * What this proves depends on the build and the machine: in a CUDA build on a machine with a
 * driver it is a real check (and the test confirms the driver does get mapped once devices are
 * counted); in a CPU-only build, or without a driver, the check cannot fail and the test says so.
 * On a system without /proc/self/maps it checks nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* 1 if libcuda.so is mapped into this process, 0 if not, -1 if the maps cannot be read. */
static int driver_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "/libcuda.so") != NULL;
    fclose(f);
    return found;
}

static void cpu_work(fmk_method method, int dim, fmk_kernel kernel)
{
    check_context("%s %dD on the CPU", fmk_method_name(method), dim);
    CHECK(fmk_method_available(method, dim, FMK_BACKEND_CPU));
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CPU;
    o.method = method;
    if (o.method == FMK_METHOD_TREE)
        o.theta = 0.6; /* the expert theta: eps here is below what the tree reaches */
    o.threads = 1;
    enum { N = 300 };
    double *x = malloc(sizeof(double) * 3 * N), *q = malloc(sizeof(double) * 2 * N);
    double *pot = malloc(sizeof(double) * 2 * N), *grad = malloc(sizeof(double) * 3 * N);
    for (int i = 0; i < 3 * N; i++)
        x[i] = (double)((i * 7919) % 1009) / 1009.0;
    for (int i = 0; i < 2 * N; i++)
        q[i] = (i % 3) - 1.0;
    fmk_plan *plan = NULL;
    fmk_status st = fmk_plan_create(&plan, dim, kernel, 1e-6, &o);
    if (CHECK_MSG(st == FMK_OK, "create: %s", fmk_plan_last_error(NULL))) {
        CHECK_PLAN_OK(fmk_plan_set_points(plan, N, x, 0, NULL), plan);
        CHECK_PLAN_OK(fmk_plan_eval(plan, q, pot, grad), plan);
        int64_t h, d;
        CHECK_PLAN_OK(fmk_plan_memory(plan, 1000, -1, &h, &d), plan);
        fmk_info info;
        CHECK_PLAN_OK(fmk_plan_info(plan, &info), plan);
        fmk_plan_destroy(plan);
    }
    /* the one-shot call too */
    CHECK_STATUS(fmk_eval(dim, kernel, 1e-6, &o, N, x, q, 0, NULL, pot, NULL), FMK_OK);
    free(x), free(q), free(pot), free(grad);
}

int main(void)
{
    if (driver_mapped() < 0) {
        printf("/proc/self/maps cannot be read: nothing to check here\n");
        return check_summary();
    }
    CHECK(driver_mapped() == 0); /* nothing has run yet */
    cpu_work(FMK_METHOD_DIRECT, 3, FMK_KERNEL_LAPLACE);
    cpu_work(FMK_METHOD_DIRECT, 2, FMK_KERNEL_LOG2D);
    cpu_work(FMK_METHOD_TREE, 3, FMK_KERNEL_LAPLACE);
    cpu_work(FMK_METHOD_FMM, 3, FMK_KERNEL_LAPLACE);
    cpu_work(FMK_METHOD_FMM, 2, FMK_KERNEL_LOG2D);
    check_context("after the CPU plans");
    CHECK_MSG(driver_mapped() == 0, "CPU-only work loaded the CUDA driver (libcuda.so)");

    /* Counting devices is what starts the runtime: with a driver installed, libcuda.so shows
     * up now, which shows the check above could have failed. */
    const int devices = fmk_cuda_device_count();
    const int mapped = driver_mapped();
    printf("after counting CUDA devices (%d): libcuda.so %s; the check above was %s\n", devices,
           mapped ? "mapped" : "not mapped",
           mapped ? "a real one" : "vacuous here (no CUDA backend or no driver)");
    return check_summary();
}
