/* scratch.c -- a distributed plan's work buffers, kept from call to call (mpi_internal.h).
 *
 * Every evaluation of a distributed plan stages its charges, its rows to send and its results
 * in buffers as large as its points (a gigabyte a rank at 2^25 targets). Allocated afresh at
 * each call they came from mmap and cost a page fault every 4 KiB, more than the copies
 * themselves; kept in the plan, each is faulted in once. Large ones are 2 MiB aligned and
 * advised as huge pages where the system has them. The plan's set_points with no points and
 * its destruction free them. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* posix_memalign, madvise's MADV_HUGEPAGE */
#endif
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "mpi/mpi_internal.h"

enum { HUGE_PAGE = 1 << 21 };

void *fmk_mpi_alloc(size_t bytes, size_t *cap)
{
    bytes = bytes > 0 ? bytes : 1;
    void *p = NULL;
    if (bytes < HUGE_PAGE) {
        p = malloc(bytes);
    } else {
        bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
            return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        madvise(p, bytes, MADV_HUGEPAGE); /* advice: its failure changes nothing */
#endif
    }
    if (p && cap)
        *cap = bytes;
    return p;
}

void *fmk_mpi_scratch(fmk_mpi_state *s, fmk_mpi_slot slot, size_t bytes)
{
    fmk_mpi_buffer *b = &s->scratch[slot];
    if (b->p && b->cap >= bytes)
        return b->p;
    free(b->p);
    b->cap = 0;
    b->p = fmk_mpi_alloc(bytes, &b->cap);
    return b->p;
}

void fmk_mpi_scratch_free(fmk_mpi_state *s)
{
    for (int k = 0; k < FMK_MPI_SLOTS; k++) {
        free(s->scratch[k].p);
        s->scratch[k].p = NULL, s->scratch[k].cap = 0;
    }
}

int64_t fmk_mpi_scratch_bytes(const fmk_mpi_state *s)
{
    int64_t n = 0;
    for (int k = 0; k < FMK_MPI_SLOTS; k++)
        n += (int64_t)s->scratch[k].cap;
    return n;
}
