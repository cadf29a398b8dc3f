/* sentinel.h -- output arrays for "untouched on failure" checks (tests/unit/test_alloc_fail.c,
 * tests/gpu/test_alloc_fail_gpu.c): n doubles set to a NaN with a payload no computation makes,
 * and whether all n still hold it. */
#ifndef FMMKIT_TESTS_SENTINEL_H
#define FMMKIT_TESTS_SENTINEL_H

#include <stdint.h>
#include <string.h>

static const uint64_t TEST_SENTINEL = 0x7ff4dead0000beefull;

static inline void test_fill_sentinel(double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(&x[i], &TEST_SENTINEL, sizeof TEST_SENTINEL);
}

static inline int test_untouched(const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&x[i], &TEST_SENTINEL, sizeof TEST_SENTINEL) != 0)
            return 0;
    return 1;
}

#endif /* FMMKIT_TESTS_SENTINEL_H */
