/* test_mpi_device.c -- a distributed plan's *_device calls (src/mpi/device.c) on the ranks
 * mpirun gives: each rank's Plummer share (uneven, the last rank none) in GPU memory; the
 * treecode plan's set_points_device, eval_device and eval_many_device (two vectors) equal bit
 * for bit to the same plan's host calls; a NULL device array on one rank and a plan of
 * backend cpu refused on every rank with a status. Exit 77 (skipped) without a CUDA device. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fmmkit_mpi.h"
#include "mpi_test.h"

static void *device_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 8) != cudaSuccess)
        return NULL;
    if (h && bytes)
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int gpus = fmk_cuda_device_count(), least = gpus;
    MPI_Allreduce(&gpus, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (least < 1) {
        if (rank == 0)
            printf("test_mpi_device: no CUDA device, skipped\n");
        MPI_Finalize();
        return 77;
    }
    const int64_t n = 20000, nd = 2;
    /* ranks 0 .. size - 2 weighted 1, 2, ...; the last of several none */
    const int shared = size > 1 ? size - 1 : 1;
    const int64_t w = (int64_t)shared * (shared + 1) / 2;
    const int64_t below = rank < shared ? (int64_t)rank * (rank + 1) / 2 : w;
    const int64_t first = n * below / w, last = rank < shared ? n * (below + rank + 1) / w : n;
    const int64_t my = last - first;
    double *x = malloc(sizeof(double) * 3 * (size_t)(my + 1));
    double *q = malloc(sizeof(double) * (size_t)(my + 1) * nd);
    rng_state = 1000 + (uint64_t)rank;
    for (int64_t i = 0; i < my; i++)
        plummer_point(x + 3 * i);
    for (int64_t i = 0; i < my * nd; i++)
        q[i] = uniform01() - 0.5;
    const size_t rb = sizeof(double) * (size_t)(my + 1) * 4 * (1 + nd); /* one, then nd */
    double *host = malloc(rb), *dev = malloc(rb);
    double *dx = device_copy(x, sizeof(double) * 3 * my),
           *dq = device_copy(q, sizeof(double) * my * nd);
    double *dp = device_copy(NULL, sizeof(double) * my * nd),
           *dg = device_copy(NULL, sizeof(double) * my * nd * 3);
    CHECK(dx && dq && dp && dg, "cudaMalloc");
    fmk_opts o;
    fmk_opts_default(&o);
    o.method = FMK_METHOD_TREE, o.backend = FMK_BACKEND_CUDA;
    fmk_plan *plan = NULL;
    fmk_status st = FMK_OK;
    /* host calls, then device calls, each on a new plan (a plan's second partition weighs the
     * targets by the first evaluation's measured costs) */
    for (int pass = 0; pass < 2 && st == FMK_OK; pass++) {
        fmk_plan_destroy(plan);
        st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-3, &o);
        CHECK(st == FMK_OK, "create: %s", fmk_plan_last_error(NULL));
        if (st != FMK_OK)
            break;
        double *out = pass ? dev : host;
        st = pass ? fmk_plan_set_points_device(plan, my, dx, 0, NULL)
                  : fmk_plan_set_points(plan, my, x, 0, NULL);
        CHECK(st == FMK_OK, "set_points (pass %d): %s", pass, fmk_plan_last_error(plan));
        if (st == FMK_OK)
            st = pass ? fmk_plan_eval_device(plan, dq, dp, dg)
                      : fmk_plan_eval(plan, q, out, out + my);
        if (st == FMK_OK && pass) {
            cudaMemcpy(out, dp, sizeof(double) * my, cudaMemcpyDeviceToHost);
            cudaMemcpy(out + my, dg, sizeof(double) * 3 * my, cudaMemcpyDeviceToHost);
        }
        double *many = out + 4 * my;
        if (st == FMK_OK)
            st = pass ? fmk_plan_eval_many_device(plan, nd, dq, dp, dg)
                      : fmk_plan_eval_many(plan, nd, q, many, many + nd * my);
        if (st == FMK_OK && pass) {
            cudaMemcpy(many, dp, sizeof(double) * my * nd, cudaMemcpyDeviceToHost);
            cudaMemcpy(many + nd * my, dg, sizeof(double) * 3 * my * nd, cudaMemcpyDeviceToHost);
        }
        CHECK(st == FMK_OK, "eval (pass %d): %s", pass, fmk_plan_last_error(plan));
    }
    CHECK(st != FMK_OK || !memcmp(host, dev, sizeof(double) * (size_t)my * 4 * (1 + nd)),
          "the device calls differ from the host calls");
    /* a NULL charge array on the last rank that has sources: every rank fails */
    const int bad = size > 1 ? size - 2 : 0;
    st = fmk_plan_eval_device(plan, rank == bad ? NULL : dq, dp, dg);
    CHECK(st == FMK_ERR_NULL, "NULL charges on rank %d: %d", bad, (int)st);
    fmk_plan_destroy(plan);
    /* a plan of backend cpu: refused on every rank */
    o.backend = FMK_BACKEND_CPU;
    st = fmk_plan_create_mpi(&plan, MPI_COMM_WORLD, 3, FMK_KERNEL_LAPLACE, 1e-3, &o);
    if (st == FMK_OK)
        st = fmk_plan_set_points_device(plan, my, dx, 0, NULL);
    CHECK(st == FMK_ERR_STATE, "a cpu plan's set_points_device: %d", (int)st);
    fmk_plan_destroy(plan);
    cudaFree(dx), cudaFree(dq), cudaFree(dp), cudaFree(dg);
    free(x), free(q), free(host), free(dev);
    int total = failures;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi_device on %d rank%s: %s (%d failure%s)\n", size, size == 1 ? "" : "s",
               total ? "FAILED" : "ok", total, total == 1 ? "" : "s");
    MPI_Finalize();
    return total ? 1 : 0;
}
