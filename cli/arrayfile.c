/* arrayfile.c -- which format a name on the command line means, and the readers and writers
 * behind it (arrayfile.h). */
#define _POSIX_C_SOURCE 200809L
#include "arrayfile.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const struct {
    const char *ext;
    arrayfile_format format;
} extensions[] = {{".npy", ARRAYFILE_NPY},
                  {".npz", ARRAYFILE_NPZ},
                  {".h5", ARRAYFILE_HDF5},
                  {".hdf5", ARRAYFILE_HDF5}};
enum { N_EXTENSIONS = sizeof extensions / sizeof extensions[0] };

/* The format whose extension text[0..len) ends with. */
static arrayfile_format format_of(const char *text, size_t len)
{
    for (int i = 0; i < N_EXTENSIONS; i++) {
        size_t e = strlen(extensions[i].ext);
        if (len > e && strncasecmp(text + len - e, extensions[i].ext, e) == 0 &&
            text[len - e - 1] != '/')
            return extensions[i].format;
    }
    return ARRAYFILE_UNKNOWN;
}

const char *arrayfile_format_name(arrayfile_format format)
{
    switch (format) {
    case ARRAYFILE_NPY: return ".npy";
    case ARRAYFILE_NPZ: return ".npz";
    case ARRAYFILE_HDF5: return "HDF5";
    case ARRAYFILE_UNKNOWN: break;
    }
    return "unknown";
}

void arrayfile_spec_free(arrayfile_spec *spec)
{
    if (!spec)
        return;
    free(spec->path);
    free(spec->member);
    spec->path = spec->member = NULL;
}

int arrayfile_parse(const char *text, arrayfile_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    size_t len = strlen(text), split = len;
    /* The first ':' after a container's extension ends the file's name: a dataset's name may
     * hold ':' of its own. */
    for (const char *c = strchr(text, ':'); c; c = strchr(c + 1, ':')) {
        arrayfile_format f = format_of(text, (size_t)(c - text));
        if (f == ARRAYFILE_NPZ || f == ARRAYFILE_HDF5) {
            split = (size_t)(c - text);
            break;
        }
    }
    spec->format = format_of(text, split);
    spec->path = strndup(text, split);
    if (!spec->path)
        return NPY_NO_MEMORY;
    const char *member = split < len ? text + split + 1 : "";
    if (*member) {
        int root = spec->format == ARRAYFILE_HDF5 && member[0] != '/';
        size_t m = strlen(member);
        spec->member = malloc(m + 2);
        if (!spec->member) {
            arrayfile_spec_free(spec);
            return NPY_NO_MEMORY;
        }
        snprintf(spec->member, m + 2, "%s%s", root ? "/" : "", member);
        /* data.npz:pot and data.npz:pot.npy name the one member pot.npy */
        if (spec->format == ARRAYFILE_NPZ && m > 4 && strcmp(spec->member + m - 4, ".npy") == 0)
            spec->member[m - 4] = '\0';
    }
    return NPY_OK;
}

int arrayfile_usable(const arrayfile_spec *spec, int is_stream, char *err, size_t err_size)
{
    switch (spec->format) {
    case ARRAYFILE_UNKNOWN:
        if (is_stream)
            return NPY_OK;
        snprintf(err, err_size,
                 "unknown file type: name it .npy, .npz (file.npz:name) or .h5 "
                 "(file.h5:/group/name)");
        return NPY_BAD_INPUT;
    case ARRAYFILE_NPY: return NPY_OK;
    case ARRAYFILE_NPZ:
        if (npz_available())
            return NPY_OK;
        snprintf(err, err_size,
                 ".npz files need libzip, which this fmmkit was built without (Debian: "
                 "apt-get install libzip-dev, then rebuild); use .npy files");
        return NPY_BAD_INPUT;
    case ARRAYFILE_HDF5:
        if (h5file_available())
            return NPY_OK;
        snprintf(err, err_size,
                 "HDF5 files need libhdf5, which this fmmkit was built without (Debian: "
                 "apt-get install libhdf5-dev, then rebuild); use .npy files");
        return NPY_BAD_INPUT;
    }
    return NPY_BAD_INPUT;
}

int arrayfile_read(const char *text, npy_array *array, char *err, size_t err_size)
{
    memset(array, 0, sizeof *array);
    arrayfile_spec spec;
    if (arrayfile_parse(text, &spec) != NPY_OK) {
        snprintf(err, err_size, "out of memory");
        return NPY_NO_MEMORY;
    }
    int rc;
    struct stat st;
    if (spec.format == ARRAYFILE_UNKNOWN && stat(spec.path, &st) == 0 && S_ISREG(st.st_mode)) {
        /* a name without a known extension is read as .npy only when it is a stream */
        rc = arrayfile_usable(&spec, 0, err, err_size);
    } else if (spec.format == ARRAYFILE_NPY || spec.format == ARRAYFILE_UNKNOWN) {
        rc = npy_read(spec.path, array, err, err_size);
    } else if ((rc = arrayfile_usable(&spec, 0, err, err_size)) == NPY_OK) {
        if (spec.format == ARRAYFILE_NPZ)
            rc = npz_read(spec.path, spec.member, array, err, err_size);
        else if (!spec.member) {
            snprintf(err, err_size, "name the dataset: %s:/group/name", spec.path);
            rc = NPY_BAD_INPUT;
        } else
            rc = h5file_read(spec.path, spec.member, array, err, err_size);
    }
    arrayfile_spec_free(&spec);
    return rc;
}

int arrayfile_write(FILE *out, arrayfile_format format, const char *existing,
                    const arrayfile_out *arrays, int n, char *err, size_t err_size)
{
    switch (format) {
    case ARRAYFILE_NPZ: return npz_write(out, existing, arrays, n, err, err_size);
    case ARRAYFILE_HDF5: return h5file_write(out, existing, arrays, n, err, err_size);
    case ARRAYFILE_NPY:
    case ARRAYFILE_UNKNOWN: break;
    }
    if (n != 1 || npy_write(out, arrays[0].is_complex, arrays[0].ndim, arrays[0].shape,
                            arrays[0].data) != 0) {
        snprintf(err, err_size, "write failed");
        return NPY_BAD_INPUT;
    }
    return NPY_OK;
}

int arrayfile_check_existing(const arrayfile_spec *spec, char *err, size_t err_size)
{
    if (spec->format == ARRAYFILE_NPZ)
        return npz_check_existing(spec->path, err, err_size);
    if (spec->format == ARRAYFILE_HDF5)
        return h5file_check_existing(spec->path, spec->member, err, err_size);
    return NPY_OK;
}
