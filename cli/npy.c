/* npy.c -- the .npy format: a 6-byte magic "\x93NUMPY", a version (major, minor), the header's
 * length (2 bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), then the header: a
 * Python dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), } padded with
 * spaces and ended by '\n', then the raw array data. */
#define _POSIX_C_SOURCE 200809L
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Static_assert(sizeof(double) == 8 && sizeof(float) == 4, "IEEE 754 binary64 and binary32");

/* Headers we write are under 128 bytes; numpy's own reader refuses more than 10000 unless told
 * otherwise. A generous cap still stops a header length of 4 GiB from being allocated. */
#define NPY_MAX_HEADER (1 << 20)

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

int npy_scalar_size(npy_dtype dtype)
{
    return dtype == NPY_FLOAT32 || dtype == NPY_COMPLEX64 || dtype == NPY_INT32 ? 4 : 8;
}

const char *npy_dtype_name(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_FLOAT64: return "float64";
    case NPY_FLOAT32: return "float32";
    case NPY_COMPLEX128: return "complex128";
    case NPY_COMPLEX64: return "complex64";
    case NPY_INT64: return "int64";
    case NPY_INT32: return "int32";
    }
    return "?";
}

static int fail(char *err, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Header parsing: a strict reader of the one dict literal numpy writes.
 * ------------------------------------------------------------------------------------------ */
typedef struct header {
    const char *p; /* cursor */
    char *err;
    size_t err_size;
    char descr[32];
    int fortran_order;
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
} header;

static void skip_space(header *h)
{
    while (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')
        h->p++;
}

static int expect(header *h, char c, const char *where)
{
    skip_space(h);
    if (*h->p != c)
        return fail(h->err, h->err_size, "malformed header: expected '%c' %s", c, where);
    h->p++;
    return 0;
}

/* A quoted string without escapes into out (size bytes). */
static int parse_string(header *h, char *out, size_t size, const char *what)
{
    skip_space(h);
    char quote = *h->p;
    if (quote != '\'' && quote != '"')
        return fail(h->err, h->err_size, "malformed header: expected a quoted %s", what);
    const char *start = ++h->p;
    while (*h->p && *h->p != quote && *h->p != '\\')
        h->p++;
    if (*h->p != quote)
        return fail(h->err, h->err_size, "malformed header: unterminated or escaped %s", what);
    size_t len = (size_t)(h->p - start);
    h->p++;
    if (len >= size)
        return fail(h->err, h->err_size, "malformed header: %s '%.20s...' is too long", what,
                    start);
    memcpy(out, start, len);
    out[len] = '\0';
    return 0;
}

static int parse_bool(header *h, int *out)
{
    skip_space(h);
    if (strncmp(h->p, "True", 4) == 0)
        *out = 1, h->p += 4;
    else if (strncmp(h->p, "False", 5) == 0)
        *out = 0, h->p += 5;
    else
        return fail(h->err, h->err_size, "malformed header: 'fortran_order' is not True or False");
    return 0;
}

/* A non-negative decimal integer that fits int64_t. */
static int parse_dim(header *h, int64_t *out)
{
    skip_space(h);
    if (*h->p == '-')
        return fail(h->err, h->err_size, "malformed header: negative dimension in 'shape'");
    if (*h->p < '0' || *h->p > '9')
        return fail(h->err, h->err_size, "malformed header: 'shape' is not a tuple of integers");
    int64_t v = 0;
    while (*h->p >= '0' && *h->p <= '9') {
        int d = *h->p++ - '0';
        if (v > (INT64_MAX - d) / 10)
            return fail(h->err, h->err_size, "a dimension in 'shape' is too large");
        v = 10 * v + d;
    }
    *out = v;
    return 0;
}

/* A tuple: "()", "(3,)", "(3, 2)" or "(3, 2,)". "(3)" is an int in Python, not a tuple. */
static int parse_shape(header *h)
{
    if (expect(h, '(', "to open 'shape'") != 0)
        return -1;
    h->ndim = 0;
    skip_space(h);
    if (*h->p == ')') {
        h->p++;
        return 0;
    }
    for (;;) {
        if (h->ndim == NPY_MAX_DIMS)
            return fail(h->err, h->err_size, "the array has more than %d dimensions", NPY_MAX_DIMS);
        if (parse_dim(h, &h->shape[h->ndim]) != 0)
            return -1;
        h->ndim++;
        skip_space(h);
        if (*h->p == ')') {
            if (h->ndim == 1)
                return fail(h->err, h->err_size, "malformed header: 'shape' is not a tuple");
            h->p++;
            return 0;
        }
        if (expect(h, ',', "between dimensions of 'shape'") != 0)
            return -1;
        skip_space(h);
        if (*h->p == ')') {
            h->p++;
            return 0;
        }
    }
}

static int parse_header(header *h)
{
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (expect(h, '{', "at the start of the header") != 0)
        return -1;
    for (;;) {
        skip_space(h);
        if (*h->p == '}')
            break;
        char key[32];
        if (parse_string(h, key, sizeof key, "key") != 0 || expect(h, ':', "after a key") != 0)
            return -1;
        int *seen;
        int rc;
        if (strcmp(key, "descr") == 0) {
            seen = &have_descr;
            skip_space(h);
            if (*h->p == '[')
                return fail(h->err, h->err_size, "structured dtypes are not supported");
            rc = parse_string(h, h->descr, sizeof h->descr, "'descr'");
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &have_order;
            rc = parse_bool(h, &h->fortran_order);
        } else if (strcmp(key, "shape") == 0) {
            seen = &have_shape;
            rc = parse_shape(h);
        } else {
            return fail(h->err, h->err_size, "malformed header: unexpected key '%s'", key);
        }
        if (rc != 0)
            return -1;
        if (*seen)
            return fail(h->err, h->err_size, "malformed header: key '%s' appears twice", key);
        *seen = 1;
        skip_space(h);
        if (*h->p == ',')
            h->p++;
        else if (*h->p != '}')
            return fail(h->err, h->err_size, "malformed header: expected ',' or '}' after '%s'",
                        key);
    }
    h->p++;
    skip_space(h);
    if (*h->p != '\0')
        return fail(h->err, h->err_size, "malformed header: characters after the closing '}'");
    if (!have_descr || !have_order || !have_shape)
        return fail(h->err, h->err_size, "malformed header: it lacks '%s'",
                    !have_descr   ? "descr"
                    : !have_order ? "fortran_order"
                                  : "shape");
    return 0;
}

/* The dtype for a descr, or -1 with a message. */
static int dtype_of(const char *descr, npy_dtype *dtype, char *err, size_t size)
{
    static const struct {
        const char *code;
        npy_dtype dtype;
    } known[] = {{"f8", NPY_FLOAT64},   {"f4", NPY_FLOAT32}, {"c16", NPY_COMPLEX128},
                 {"c8", NPY_COMPLEX64}, {"i8", NPY_INT64},   {"i4", NPY_INT32}};
    for (size_t i = 0; descr[0] && i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(descr + 1, known[i].code) != 0)
            continue;
        if (descr[0] == '<') {
            *dtype = known[i].dtype;
            return 0;
        }
        if (descr[0] == '>')
            return fail(err, size, "big-endian data ('%s') is not supported; save a.astype('<%s')",
                        descr, known[i].code);
    }
    return fail(err, size,
                "dtype '%s' is not supported (use float64, float32, complex128, "
                "complex64, int64 or int32)",
                descr);
}

/* ---------------------------------------------------------------------------------------------
 * Data
 * ------------------------------------------------------------------------------------------ */
static uint64_t load_le(const unsigned char *b, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void store_le(unsigned char *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++, v >>= 8)
        b[i] = (unsigned char)(v & 0xff);
}

/* Integers beyond 2^53 have no exact double. */
#define NPY_MAX_EXACT_INT ((int64_t)1 << 53)

/* One scalar of the file's type as a double; *exact is cleared for an integer beyond 2^53, which
 * is left in *too_large. */
static double to_double(const unsigned char *b, npy_dtype dtype, int *exact, int64_t *too_large)
{
    const int scalar_size = npy_scalar_size(dtype);
    uint64_t bits = load_le(b, scalar_size);
    switch (dtype) {
    case NPY_INT64: {
        int64_t v;
        memcpy(&v, &bits, sizeof v);
        if (v > NPY_MAX_EXACT_INT || v < -NPY_MAX_EXACT_INT)
            *exact = 0, *too_large = v;
        return (double)v;
    }
    case NPY_INT32: {
        uint32_t b32 = (uint32_t)bits;
        int32_t v;
        memcpy(&v, &b32, sizeof v);
        return (double)v;
    }
    case NPY_FLOAT32:
    case NPY_COMPLEX64: {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        return (double)f;
    }
    case NPY_FLOAT64:
    case NPY_COMPLEX128: break;
    }
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* Reads n_values scalars of the file's type and converts them to doubles. Returns the number of
 * scalars read (less than n_values if the stream ended, or if an integer has no exact double:
 * then *inexact is its index and *too_large its value). */
static int64_t read_values(FILE *in, npy_dtype dtype, int64_t n_values, double *out,
                           int64_t *inexact, int64_t *too_large)
{
    enum { CHUNK = 8192 };
    unsigned char buf[CHUNK * 8];
    const size_t scalar_size = (size_t)npy_scalar_size(dtype);
    int64_t done = 0;
    *inexact = -1;
    while (done < n_values) {
        size_t want = (size_t)(n_values - done < CHUNK ? n_values - done : CHUNK);
        size_t got = fread(buf, scalar_size, want, in);
        for (size_t i = 0; i < got; i++) {
            int exact = 1;
            out[done + (int64_t)i] = to_double(buf + i * scalar_size, dtype, &exact, too_large);
            if (!exact) {
                *inexact = done + (int64_t)i;
                return *inexact;
            }
        }
        done += (int64_t)got;
        if (got < want)
            break;
    }
    return done;
}

/* "[2, 1]": the index of the element at position flat of the file (C or Fortran order). */
static const char *index_text(const npy_array *a, int fortran, int64_t flat, char *buf, size_t size)
{
    int64_t idx[NPY_MAX_DIMS];
    for (int j = 0; j < a->ndim; j++) {
        int k = fortran ? j : a->ndim - 1 - j; /* the axis that varies fastest first */
        idx[k] = a->shape[k] ? flat % a->shape[k] : 0;
        flat = a->shape[k] ? flat / a->shape[k] : 0;
    }
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < a->ndim && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", k ? ", " : "", (long long)idx[k]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

/* A Fortran-ordered array's values (elements of per_element doubles) into C order. */
static int to_c_order(npy_array *a, int per_element)
{
    if (a->ndim < 2 || a->count == 0)
        return 0;
    double *c = malloc((size_t)a->count * (size_t)per_element * sizeof(double));
    if (!c)
        return -1;
    int64_t stride[NPY_MAX_DIMS], idx[NPY_MAX_DIMS] = {0}, f = 0;
    stride[0] = 1;
    for (int k = 1; k < a->ndim; k++)
        stride[k] = stride[k - 1] * a->shape[k - 1];
    for (int64_t i = 0; i < a->count; i++) {
        memcpy(c + i * per_element, a->data + f * per_element,
               sizeof(double) * (size_t)per_element);
        for (int k = a->ndim - 1; k >= 0; k--) { /* the next C index; f follows it */
            if (++idx[k] < a->shape[k]) {
                f += stride[k];
                break;
            }
            f -= stride[k] * (a->shape[k] - 1);
            idx[k] = 0;
        }
    }
    free(a->data);
    a->data = c;
    return 0;
}

void npy_free(npy_array *array)
{
    if (!array)
        return;
    free(array->data);
    array->data = NULL;
}

/* size: the bytes the stream holds (a regular file's length, or what was read from a pipe), so
 * that a header cannot make us allocate more than the data that is there. */
static int read_file(FILE *in, int64_t size, npy_array *a, char *err, size_t err_size)
{
    unsigned char pre[12];
    size_t got = fread(pre, 1, 8, in);
    if (got < 6 || memcmp(pre, magic, sizeof magic) != 0)
        return fail(err, err_size, "not a .npy file (it does not start with \\x93NUMPY)");
    if (got < 8)
        return fail(err, err_size, "truncated header");
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return fail(err, err_size, ".npy format version %d.%d is not supported (1.0, 2.0 or 3.0)",
                    major, minor);
    int len_bytes = major == 1 ? 2 : 4;
    if (fread(pre + 8, 1, (size_t)len_bytes, in) != (size_t)len_bytes)
        return fail(err, err_size, "truncated header");
    uint64_t header_len = load_le(pre + 8, len_bytes);
    if (header_len > NPY_MAX_HEADER)
        return fail(err, err_size, "header length %llu is larger than %d bytes",
                    (unsigned long long)header_len, NPY_MAX_HEADER);
    int64_t data_offset = 8 + len_bytes + (int64_t)header_len;

    char *text = malloc((size_t)header_len + 1);
    if (!text) {
        fail(err, err_size, "out of memory reading the header");
        return NPY_NO_MEMORY;
    }
    if (fread(text, 1, (size_t)header_len, in) != (size_t)header_len) {
        free(text);
        return fail(err, err_size, "truncated header");
    }
    text[header_len] = '\0';
    header h = {.p = text, .err = err, .err_size = err_size};
    int rc = memchr(text, '\0', (size_t)header_len)
                 ? fail(err, err_size, "malformed header: it contains a NUL byte")
                 : parse_header(&h);
    free(text);
    if (rc != 0)
        return -1;
    if (dtype_of(h.descr, &a->dtype, err, err_size) != 0)
        return -1;

    a->is_complex = a->dtype == NPY_COMPLEX128 || a->dtype == NPY_COMPLEX64;
    a->ndim = h.ndim;
    int64_t count = 1;
    for (int k = 0; k < h.ndim; k++) {
        a->shape[k] = h.shape[k];
        if (h.shape[k] != 0 && count > INT64_MAX / h.shape[k])
            return fail(err, err_size, "the shape's element count overflows");
        count *= h.shape[k];
    }
    a->count = count;
    const int scalar_size = npy_scalar_size(a->dtype);
    const int per_element = a->is_complex ? 2 : 1;
    /* count * per_element doubles in memory and count * per_element * scalar_size bytes on disk */
    if (count > INT64_MAX / 16 || (uint64_t)count > SIZE_MAX / 16)
        return fail(err, err_size, "the array is too large (%lld elements)", (long long)count);
    const int64_t n_values = count * per_element;
    const int64_t data_bytes = n_values * scalar_size;

    /* Compare with the stream's length before allocating anything. */
    {
        int64_t held = size - data_offset;
        if (held < data_bytes)
            return fail(err, err_size,
                        "the data is truncated: the header promises %lld bytes, "
                        "the file holds %lld",
                        (long long)data_bytes, (long long)(held > 0 ? held : 0));
    }
    a->data = malloc((size_t)(n_values > 0 ? n_values : 1) * sizeof(double));
    if (!a->data) {
        fail(err, err_size, "out of memory for %lld values", (long long)n_values);
        return NPY_NO_MEMORY;
    }
    int64_t inexact, too_large = 0;
    int64_t read = read_values(in, a->dtype, n_values, a->data, &inexact, &too_large);
    if (inexact >= 0) {
        char index[64];
        return fail(err, err_size,
                    "element %s is %lld; integers beyond 2^53 have no exact float64 (convert "
                    "the array to float64 yourself if rounding is acceptable)",
                    index_text(a, h.fortran_order, inexact, index, sizeof index),
                    (long long)too_large);
    }
    if (ferror(in))
        return fail(err, err_size, "read error: %s", strerror(errno));
    if (read < n_values)
        return fail(err, err_size,
                    "the data is truncated: the header promises %lld bytes, "
                    "the file holds %lld",
                    (long long)data_bytes, (long long)(read * scalar_size));
    if (fgetc(in) != EOF)
        return fail(err, err_size, "there are bytes after the array data");
    if (h.fortran_order && to_c_order(a, per_element) != 0) {
        fail(err, err_size, "out of memory transposing a Fortran-ordered array");
        return NPY_NO_MEMORY;
    }
    return NPY_OK;
}

/* A stream whose length is unknown (a pipe, a terminal): all of it into memory, the buffer
 * growing with what arrives (never more than twice what was sent). NULL when out of memory. */
static unsigned char *slurp(FILE *in, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, in);
        if (n < cap)
            break;
        unsigned char *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!grown)
            free(buf);
        buf = grown, cap *= 2;
    }
    *len = n;
    return buf;
}

int npy_read_memory(const void *bytes, size_t len, npy_array *array, char *err, size_t err_size)
{
    memset(array, 0, sizeof *array);
    if (len == 0) /* fmemopen refuses an empty buffer on older C libraries */
        return fail(err, err_size, "not a .npy file (it does not start with \\x93NUMPY)");
    FILE *mem = fmemopen((void *)bytes, len, "rb");
    if (!mem) {
        fail(err, err_size, "out of memory reading it");
        return NPY_NO_MEMORY;
    }
    int rc = read_file(mem, (int64_t)len, array, err, err_size);
    fclose(mem);
    if (rc != 0)
        npy_free(array);
    return rc;
}

int npy_read(const char *path, npy_array *array, char *err, size_t err_size)
{
    memset(array, 0, sizeof *array);
    FILE *in = fopen(path, "rb");
    if (!in)
        return fail(err, err_size, "cannot open it: %s", strerror(errno));
    struct stat st;
    int rc;
    if (fstat(fileno(in), &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = fail(err, err_size, "it is a directory, not a .npy file");
    } else if (fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode)) {
        rc = read_file(in, (int64_t)st.st_size, array, err, err_size);
    } else {
        size_t len = 0;
        unsigned char *buf = slurp(in, &len);
        if (buf && ferror(in))
            rc = fail(err, err_size, "read error: %s", strerror(errno));
        else if (!buf) {
            fail(err, err_size, "out of memory reading it");
            rc = NPY_NO_MEMORY;
        } else {
            rc = npy_read_memory(buf, len, array, err, err_size);
        }
        free(buf);
    }
    fclose(in);
    if (rc != 0)
        npy_free(array);
    return rc;
}

int npy_write(FILE *out, int is_complex, int ndim, const int64_t *shape, const double *data)
{
    char dict[160];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       is_complex ? "<c16" : "<f8");
    for (int k = 0; k < ndim; k++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%s%lld%s", k ? " " : "",
                        (long long)shape[k], ndim == 1 || k + 1 < ndim ? "," : "");
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");

    /* Pad with spaces and a final '\n' so the data starts at a multiple of 64 bytes. */
    unsigned char head[10 + 192];
    size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64;
    size_t header_len = total - 10;
    memcpy(head, magic, sizeof magic);
    head[6] = 1, head[7] = 0;
    store_le(head + 8, header_len, 2);
    memcpy(head + 10, dict, (size_t)len);
    memset(head + 10 + len, ' ', header_len - (size_t)len - 1);
    head[total - 1] = '\n';
    if (fwrite(head, 1, total, out) != total)
        return -1;

    int64_t n_values = is_complex ? 2 : 1;
    for (int k = 0; k < ndim; k++)
        n_values *= shape[k];
    enum { CHUNK = 8192 };
    unsigned char buf[CHUNK * 8];
    for (int64_t done = 0; done < n_values;) {
        size_t n = (size_t)(n_values - done < CHUNK ? n_values - done : CHUNK);
        for (size_t i = 0; i < n; i++) {
            uint64_t bits;
            memcpy(&bits, &data[done + (int64_t)i], sizeof bits);
            store_le(buf + 8 * i, bits, 8);
        }
        if (fwrite(buf, 8, n, out) != n)
            return -1;
        done += (int64_t)n;
    }
    return 0;
}
