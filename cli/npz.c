/* npz.c -- NumPy .npz archives through libzip: a zip file whose members name.npy are .npy files,
 * stored (numpy.savez) or deflated (numpy.savez_compressed). We write stored members, as
 * numpy.savez does, with zip64 records where sizes need them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arrayfile.h"

#ifdef FMK_CLI_LIBZIP
#include <zip.h>

int npz_available(void)
{
    return 1;
}

/* A deflated member holds at most about 1032 times its compressed size; a claim beyond that is
 * a broken or hostile archive, refused before anything is allocated for it. */
#define NPZ_MAX_RATIO 1100

static int zip_failed(char *err, size_t err_size, const char *what, zip_error_t *ze)
{
    snprintf(err, err_size, "%s: %s", what, zip_error_strerror(ze));
    return NPY_BAD_INPUT;
}

/* The archive's arrays as "a, b, c" (their names without .npy). */
static void member_list(zip_t *za, zip_int64_t count, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (zip_int64_t i = 0; i < count && len < size; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        size_t n = name ? strlen(name) : 0;
        if (n > 4 && strcmp(name + n - 4, ".npy") == 0)
            n -= 4;
        len += (size_t)snprintf(out + len, size - len, "%s%.*s", i ? ", " : "", (int)n,
                                name ? name : "?");
    }
}

/* The index of the member that holds array `member` (name.npy, or the name as given), or of
 * the only member when member is NULL; -1 with a message. */
static zip_int64_t locate(zip_t *za, const char *member, char *err, size_t err_size)
{
    zip_int64_t count = zip_get_num_entries(za, 0);
    char names[160];
    if (!member) {
        if (count == 1)
            return 0;
        member_list(za, count, names, sizeof names);
        if (count == 0)
            snprintf(err, err_size, "the archive holds no arrays");
        else
            snprintf(err, err_size, "the archive holds %lld arrays (%s); choose one: FILE.npz:NAME",
                     (long long)count, names);
        return -1;
    }
    size_t n = strlen(member);
    char *with_ext = malloc(n + 5);
    zip_int64_t index = -1;
    if (with_ext) {
        snprintf(with_ext, n + 5, "%s.npy", member);
        index = zip_name_locate(za, with_ext, 0);
        free(with_ext);
    }
    if (index < 0)
        index = zip_name_locate(za, member, 0);
    if (index < 0) {
        member_list(za, count, names, sizeof names);
        snprintf(err, err_size, "the archive has no array '%s' (it holds: %s)", member,
                 count ? names : "nothing");
    }
    return index;
}

int npz_read(const char *path, const char *member, npy_array *array, char *err, size_t err_size)
{
    memset(array, 0, sizeof *array);
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        int rc = zip_failed(err, err_size, "cannot read it as a .npz (zip) archive", &ze);
        zip_error_fini(&ze);
        return rc;
    }
    int rc = NPY_BAD_INPUT;
    unsigned char *bytes = NULL;
    zip_file_t *zf = NULL;
    zip_stat_t st;
    zip_int64_t index = locate(za, member, err, err_size);
    if (index < 0)
        goto done;
    if (zip_stat_index(za, (zip_uint64_t)index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
        !(st.valid & ZIP_STAT_COMP_SIZE)) {
        zip_failed(err, err_size, "cannot read the member", zip_get_error(za));
        goto done;
    }
    if (st.size > SIZE_MAX / 2 || (st.size > 1024 && st.size / NPZ_MAX_RATIO > st.comp_size)) {
        snprintf(err, err_size,
                 "member '%s' claims %llu bytes from %llu compressed: a broken archive", st.name,
                 (unsigned long long)st.size, (unsigned long long)st.comp_size);
        goto done;
    }
    bytes = malloc(st.size ? (size_t)st.size : 1);
    if (!bytes) {
        snprintf(err, err_size, "out of memory for member '%s' (%llu bytes)", st.name,
                 (unsigned long long)st.size);
        rc = NPY_NO_MEMORY;
        goto done;
    }
    zf = zip_fopen_index(za, (zip_uint64_t)index, 0);
    zip_int64_t got = zf ? zip_fread(zf, bytes, st.size) : -1;
    if (got < 0 || (zip_uint64_t)got != st.size) {
        zip_failed(err, err_size, "cannot read the member",
                   zf ? zip_file_get_error(zf) : zip_get_error(za));
        goto done;
    }
    rc = npy_read_memory(bytes, (size_t)st.size, array, err, err_size);
done:
    if (zf)
        zip_fclose(zf);
    free(bytes);
    zip_discard(za);
    return rc;
}

int npz_check_existing(const char *path, char *err, size_t err_size)
{
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (za) {
        zip_discard(za);
        return NPY_OK;
    }
    snprintf(err, err_size,
             "it exists and is not a .npz (zip) archive that fmmkit can add to; remove it or "
             "name another file");
    return NPY_BAD_INPUT;
}

/* The bytes of an existing archive (NULL for an empty one). */
static int slurp_file(const char *path, unsigned char **bytes, size_t *len, char *err,
                      size_t err_size)
{
    *bytes = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f || fseeko(f, 0, SEEK_END) != 0) {
        snprintf(err, err_size, "cannot read the existing archive: %s", strerror(errno));
        if (f)
            fclose(f);
        return NPY_BAD_INPUT;
    }
    off_t size = ftello(f);
    rewind(f);
    *bytes = size > 0 && (uint64_t)size < SIZE_MAX ? malloc((size_t)size) : NULL;
    if (size > 0 && !*bytes) {
        fclose(f);
        snprintf(err, err_size, "out of memory reading the existing archive");
        return NPY_NO_MEMORY;
    }
    *len = size > 0 ? fread(*bytes, 1, (size_t)size, f) : 0;
    fclose(f);
    return NPY_OK;
}

/* Adds one array to the archive as a stored member NAME.npy (replacing one of that name). */
static int add_array(zip_t *za, const arrayfile_out *a, char *err, size_t err_size)
{
    char *bytes = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&bytes, &len);
    if (!mem || npy_write(mem, a->is_complex, a->ndim, a->shape, a->data) != 0 || fclose(mem)) {
        free(bytes);
        snprintf(err, err_size, "out of memory building member '%s'", a->member);
        return NPY_NO_MEMORY;
    }
    size_t n = strlen(a->member);
    char *name = malloc(n + 5);
    zip_source_t *src = name ? zip_source_buffer(za, bytes, len, 1) : NULL;
    if (!src) {
        free(name);
        free(bytes);
        snprintf(err, err_size, "out of memory building member '%s'", a->member);
        return NPY_NO_MEMORY;
    }
    snprintf(name, n + 5, "%s%s", a->member,
             n > 4 && strcmp(a->member + n - 4, ".npy") == 0 ? "" : ".npy");
    zip_int64_t index = zip_file_add(za, name, src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    free(name);
    if (index < 0) {
        zip_source_free(src);
        return zip_failed(err, err_size, "cannot add the array", zip_get_error(za));
    }
    if (zip_set_file_compression(za, (zip_uint64_t)index, ZIP_CM_STORE, 0) != 0)
        return zip_failed(err, err_size, "cannot add the array", zip_get_error(za));
    return NPY_OK;
}

/* The finished archive held by src, copied to out. */
static int copy_out(zip_source_t *src, FILE *out, char *err, size_t err_size)
{
    if (zip_source_open(src) != 0)
        return zip_failed(err, err_size, "cannot finish the archive", zip_source_error(src));
    static const size_t chunk = 1 << 16;
    unsigned char *buf = malloc(chunk);
    int rc = buf ? NPY_OK : NPY_NO_MEMORY;
    zip_int64_t got;
    while (rc == NPY_OK && (got = zip_source_read(src, buf, chunk)) > 0)
        if (fwrite(buf, 1, (size_t)got, out) != (size_t)got) {
            snprintf(err, err_size, "write failed: %s", strerror(errno));
            rc = NPY_BAD_INPUT;
        }
    if (!buf)
        snprintf(err, err_size, "out of memory");
    free(buf);
    zip_source_close(src);
    return rc;
}

int npz_write(FILE *out, const char *existing, const arrayfile_out *arrays, int n, char *err,
              size_t err_size)
{
    unsigned char *old = NULL;
    size_t old_len = 0;
    int rc = existing ? slurp_file(existing, &old, &old_len, err, err_size) : NPY_OK;
    if (rc != NPY_OK)
        return rc;
    zip_error_t ze;
    zip_error_init(&ze);
    /* The archive is built in memory, so a FIFO can take it and nothing is half-written. */
    zip_source_t *src = zip_source_buffer_create(old, old_len, 0, &ze);
    zip_t *za = NULL;
    if (src) {
        zip_source_keep(src);
        za = zip_open_from_source(src, old_len ? 0 : ZIP_CREATE | ZIP_TRUNCATE, &ze);
    }
    if (!za) {
        rc = zip_failed(err, err_size, "cannot build the archive", &ze);
        goto done;
    }
    for (int i = 0; i < n && rc == NPY_OK; i++)
        rc = add_array(za, &arrays[i], err, err_size);
    if (rc != NPY_OK) {
        zip_discard(za);
        goto done;
    }
    if (zip_close(za) != 0) {
        rc = zip_failed(err, err_size, "cannot build the archive", zip_get_error(za));
        zip_discard(za);
        goto done;
    }
    rc = copy_out(src, out, err, err_size);
done:
    if (src)
        zip_source_free(src);
    zip_error_fini(&ze);
    free(old);
    return rc;
}

#else /* built without libzip */

int npz_available(void)
{
    return 0;
}

static int unavailable(char *err, size_t err_size)
{
    snprintf(err, err_size, ".npz files need libzip, which this fmmkit was built without");
    return NPY_BAD_INPUT;
}

int npz_read(const char *path, const char *member, npy_array *array, char *err, size_t err_size)
{
    (void)path, (void)member;
    memset(array, 0, sizeof *array);
    return unavailable(err, err_size);
}

int npz_write(FILE *out, const char *existing, const arrayfile_out *arrays, int n, char *err,
              size_t err_size)
{
    (void)out, (void)existing, (void)arrays, (void)n;
    return unavailable(err, err_size);
}

int npz_check_existing(const char *path, char *err, size_t err_size)
{
    (void)path;
    return unavailable(err, err_size);
}
#endif
