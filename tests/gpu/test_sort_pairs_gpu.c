/* test_sort_pairs_gpu.c -- the GPU sort of (key, value) pairs that libfmmkit_mpi's partition
 * and sending trees use (fmk_plan_hook_sort_pairs, cuda/sort_pairs.cu): against a stable
 * reference (qsort by key, then by the original position), for random keys of 63 and 64 bits,
 * keys with many ties, sizes 0, 1, 2, 1000 and 2^21 + 3; also that a CPU plan and a device
 * allocation that fails give a status and leave the caller's message alone. Exit 77 without a
 * CUDA device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmmkit.h"

#include "core/hooks.h"
#include "core/tune.h"

typedef struct pair {
    uint64_t key;
    int64_t value;
} pair;

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static int by_key_then_value(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

static int failures;

static void check_case(fmk_plan *plan, int64_t n, int bits, uint64_t ties)
{
    pair *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a),
         *ref = malloc((size_t)(n > 0 ? n : 1) * sizeof *ref);
    uint64_t s = 88172645463325252ull + (uint64_t)n;
    const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    for (int64_t i = 0; i < n; i++) {
        a[i].key = next(&s) & mask;
        if (ties)
            a[i].key %= ties;
        a[i].value = i; /* the position: ties must keep it increasing */
    }
    memcpy(ref, a, (size_t)n * sizeof *a);
    qsort(ref, (size_t)n, sizeof *ref, by_key_then_value);
    const fmk_status st = fmk_plan_hook_sort_pairs(plan, n, a, bits);
    const int ok = st == FMK_OK && memcmp(a, ref, (size_t)n * sizeof *a) == 0;
    printf("%-4s n = %8lld, %d-bit keys%s: %s\n", ok ? "ok" : "FAIL", (long long)n, bits,
           ties ? " (ties)" : "", fmk_status_string(st));
    failures += !ok;
    free(a), free(ref);
}

int main(void)
{
    if (fmk_cuda_device_count() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    fmk_opts o;
    fmk_opts_default(&o);
    o.backend = FMK_BACKEND_CUDA;
    o.method = FMK_METHOD_TREE;
    fmk_plan *plan = NULL;
    if (fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-3, &o) != FMK_OK) {
        printf("FAIL: fmk_plan_create: %s\n", fmk_plan_last_error(NULL));
        return 1;
    }
    const int64_t sizes[] = {0, 1, 2, 1000, (1 << 21) + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        check_case(plan, sizes[k], 63, 0);
        check_case(plan, sizes[k], 64, 0);
        check_case(plan, sizes[k], 63, 97);
    }
    /* a failing device allocation: a status, the plan's message untouched */
    pair p[4] = {{3, 0}, {1, 1}, {2, 2}, {0, 3}};
    fmk_plan_set_points(plan, 0, NULL, 0, NULL);
    const char *before = fmk_plan_last_error(plan);
    char kept[256];
    snprintf(kept, sizeof kept, "%s", before ? before : "");
    double allocs = 0; /* the next allocation of the plan's GPU fails */
    fmk_plan_counter(plan, "cuda.allocs", &allocs);
    fmk_plan_tune(plan, "cuda.fail_alloc_at", allocs + 1);
    fmk_status st = fmk_plan_hook_sort_pairs(plan, 4, p, 63);
    const char *after = fmk_plan_last_error(plan);
    const int ok_fail = st == FMK_ERR_DEVICE_NOMEM && strcmp(kept, after ? after : "") == 0;
    printf("%-4s a failed allocation: %s\n", ok_fail ? "ok" : "FAIL", fmk_status_string(st));
    failures += !ok_fail;
    fmk_plan_tune(plan, "cuda.fail_alloc_at", 0);
    fmk_plan_destroy(plan);
    /* a CPU plan: unavailable */
    o.backend = FMK_BACKEND_CPU;
    if (fmk_plan_create(&plan, 3, FMK_KERNEL_LAPLACE, 1e-3, &o) == FMK_OK) {
        st = fmk_plan_hook_sort_pairs(plan, 4, p, 63);
        printf("%-4s a CPU plan: %s\n", st == FMK_ERR_UNAVAILABLE ? "ok" : "FAIL",
               fmk_status_string(st));
        failures += st != FMK_ERR_UNAVAILABLE;
        fmk_plan_destroy(plan);
    }
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
