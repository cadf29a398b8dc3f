/* fuzz_npy.c -- libFuzzer harness for the .npy reader of the fmmkit command (cli/npy.c).
 *
 * The input is a whole .npy file. It is read from a regular file (an in-memory memfd, reached
 * through /proc/self/fd, so the reader's stat-based length check runs) and, when
 * FMK_FUZZ_NPY_PIPE=1 (tests/fuzz/run.sh sets it) and the input fits a pipe's buffer, from a pipe as well (the path of a
 * file whose length is not known, as with `--sources /dev/stdin`). Every read must either
 * succeed with a consistent array or fail with a message and an empty array; a successful
 * read of up to two dimensions must survive npy_write and a second read bit for bit. The same
 * bytes read from memory (npy_read_memory: a member of a .npz archive) must give the same
 * result: the same status and message, or the same array.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npy.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_npy: %s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static int memfd = -1;
static int use_pipe = -1;

/* Replaces the memfd's contents with data[0..size). */
static void fill_memfd(const uint8_t *data, size_t size)
{
    if (memfd < 0) {
        memfd = memfd_create("fuzz_npy", 0);
        REQUIRE(memfd >= 0);
    }
    REQUIRE(ftruncate(memfd, 0) == 0);
    REQUIRE(pwrite(memfd, data, size, 0) == (ssize_t)size);
}

/* The invariants of one npy_read result. */
static void check_result(int rc, const npy_array *a, const char *err)
{
    if (rc != 0) {
        REQUIRE(rc == -1);
        REQUIRE(err[0] != '\0');
        REQUIRE(a->data == NULL);
        return;
    }
    REQUIRE(a->data != NULL);
    REQUIRE(a->ndim >= 0 && a->ndim <= NPY_MAX_DIMS);
    REQUIRE(a->is_complex == (a->dtype == NPY_COMPLEX128 || a->dtype == NPY_COMPLEX64));
    int64_t count = 1;
    for (int k = 0; k < a->ndim; k++) {
        REQUIRE(a->shape[k] >= 0);
        count *= a->shape[k];
    }
    REQUIRE(count == a->count);
    REQUIRE(strcmp(npy_dtype_name(a->dtype), "?") != 0);
    /* touch every value: ASan reports a short buffer */
    volatile double sum = 0;
    for (int64_t i = 0; i < a->count * (a->is_complex ? 2 : 1); i++)
        sum += a->data[i];
    (void)sum;
}

/* Writes a (ndim <= 2) back with npy_write and reads it again: the same shape and bits. */
static void round_trip(const npy_array *a)
{
    int fd = memfd_create("fuzz_npy_rt", 0);
    REQUIRE(fd >= 0);
    FILE *out = fdopen(dup(fd), "wb");
    REQUIRE(out != NULL);
    REQUIRE(npy_write(out, a->is_complex, a->ndim, a->shape, a->data) == 0);
    REQUIRE(fclose(out) == 0);
    char path[64], err[256] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    npy_array b;
    int rc = npy_read(path, &b, err, sizeof err);
    close(fd);
    if (rc != 0)
        fprintf(stderr, "fuzz_npy: reading back what npy_write wrote failed: %s\n", err);
    REQUIRE(rc == 0);
    REQUIRE(b.ndim == a->ndim && b.count == a->count && b.is_complex == a->is_complex);
    REQUIRE(b.dtype == (a->is_complex ? NPY_COMPLEX128 : NPY_FLOAT64));
    for (int k = 0; k < a->ndim; k++)
        REQUIRE(b.shape[k] == a->shape[k]);
    size_t bytes = (size_t)a->count * (a->is_complex ? 2 : 1) * sizeof(double);
    REQUIRE(memcmp(a->data, b.data, bytes) == 0);
    npy_free(&b);
}

static void read_from_pipe(const uint8_t *data, size_t size)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    if (fcntl(p[1], F_GETPIPE_SZ) < (int)size && fcntl(p[1], F_SETPIPE_SZ, (int)size) < 0) {
        close(p[0]), close(p[1]);
        return;
    }
    REQUIRE(size == 0 || write(p[1], data, size) == (ssize_t)size);
    close(p[1]);
    char path[64], err[256] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
    npy_array a;
    int rc = npy_read(path, &a, err, sizeof err);
    check_result(rc, &a, err);
    npy_free(&a);
    close(p[0]);
}

/* npy_read_memory on the same bytes: the file read's outcome exactly. */
static void read_from_memory(const uint8_t *data, size_t size, int rc, const npy_array *a,
                             const char *err)
{
    char err2[256] = "";
    npy_array b;
    int rc2 = npy_read_memory(data, size, &b, err2, sizeof err2);
    check_result(rc2, &b, err2);
    REQUIRE(rc2 == rc);
    if (rc != 0) {
        REQUIRE(strcmp(err, err2) == 0);
        return;
    }
    REQUIRE(b.dtype == a->dtype && b.ndim == a->ndim && b.count == a->count);
    for (int k = 0; k < a->ndim; k++)
        REQUIRE(b.shape[k] == a->shape[k]);
    REQUIRE(memcmp(a->data, b.data, (size_t)a->count * (a->is_complex ? 2 : 1) * sizeof(double)) ==
            0);
    npy_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (use_pipe < 0) {
        const char *env = getenv("FMK_FUZZ_NPY_PIPE");
        use_pipe = env && strcmp(env, "1") == 0;
    }
    fill_memfd(data, size);
    char path[64], err[256] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    npy_array a;
    int rc = npy_read(path, &a, err, sizeof err);
    check_result(rc, &a, err);
    read_from_memory(data, size, rc, &a, err);
    if (rc == 0 && a.ndim <= 2)
        round_trip(&a);
    npy_free(&a);
    npy_free(&a); /* a second free of an emptied array is a no-op */
    if (use_pipe && size <= (1 << 20))
        read_from_pipe(data, size);
    return 0;
}
