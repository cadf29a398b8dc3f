/* alloc_shim.h -- the allocation-failure injector of tests/unit/test_alloc_fail.c and
 * test_poisson_alloc.c. The library's calls to malloc, calloc, realloc, posix_memalign and
 * aligned_alloc are redirected here by the linker (-Wl,--wrap=..., see CMakeLists.txt): --wrap
 * rewrites the references of the objects being linked, which are the test's file and the
 * static library's objects; libc and the OpenMP runtime are shared libraries, so their own
 * allocations are not counted. Include it in one file of a program only. */
#ifndef FMMKIT_TESTS_ALLOC_SHIM_H
#define FMMKIT_TESTS_ALLOC_SHIM_H

#include <errno.h>
#include <stdlib.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t size);
int __real_posix_memalign(void **p, size_t alignment, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);

/* The injector: calls counts the library's allocations; the fail_at-th fails (and every later
 * one when sticky). fail_at = 0: nothing fails. */
static long calls, fail_at;
static int sticky;
static long tolerated; /* failed allocations after which the run still succeeded */

static int fail_now(void)
{
    calls++;
    return fail_at > 0 && (calls == fail_at || (sticky && calls > fail_at));
}

void *__wrap_malloc(size_t size)
{
    return fail_now() ? NULL : __real_malloc(size);
}
void *__wrap_calloc(size_t count, size_t size)
{
    return fail_now() ? NULL : __real_calloc(count, size);
}
void *__wrap_realloc(void *p, size_t size)
{
    return fail_now() ? NULL : __real_realloc(p, size);
}
int __wrap_posix_memalign(void **p, size_t alignment, size_t size)
{
    return fail_now() ? ENOMEM : __real_posix_memalign(p, alignment, size);
}
void *__wrap_aligned_alloc(size_t alignment, size_t size)
{
    return fail_now() ? NULL : __real_aligned_alloc(alignment, size);
}

#endif /* FMMKIT_TESTS_ALLOC_SHIM_H */
