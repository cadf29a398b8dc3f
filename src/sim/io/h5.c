/* h5.c -- HDF5 helpers: quiet error handling, the error stack as a sentence, files built in
 * memory, attributes and datasets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/io/io.h"

#ifdef FMK_HAVE_HDF5
#include "sim/io/h5.h"

void fmk_h5_quiet_begin(fmk_h5_quiet *q)
{
    q->func = NULL;
    q->data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void fmk_h5_quiet_end(const fmk_h5_quiet *q)
{
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
}

/* What the walk of the error stack keeps: the API call (the outermost entry), errno's text
 * where HDF5 recorded one, and the innermost message. */
typedef struct stack_summary {
    char call[64], call_desc[160], reason[160], inner[240];
} stack_summary;

static herr_t summarize(unsigned n, const H5E_error2_t *e, void *data)
{
    stack_summary *s = data;
    const char *desc = e->desc ? e->desc : "";
    if (n == 0) {
        snprintf(s->call, sizeof s->call, "%s", e->func_name ? e->func_name : "?");
        snprintf(s->call_desc, sizeof s->call_desc, "%s", desc);
    }
    snprintf(s->inner, sizeof s->inner, "%s", desc);
    const char *key = "error message = '";
    const char *at = strstr(desc, key);
    if (at && !s->reason[0]) {
        at += strlen(key);
        const char *end = strchr(at, '\'');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        if (len >= sizeof s->reason)
            len = sizeof s->reason - 1;
        memcpy(s->reason, at, len);
        s->reason[len] = '\0';
    }
    return 0;
}

fmk_status fmk_h5_fail(fmk_status status, const char *what, const char *path, char *msg, size_t cap)
{
    stack_summary s;
    memset(&s, 0, sizeof s);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, summarize, &s);
    H5Eclear2(H5E_DEFAULT);
    const char *reason = s.reason[0] ? s.reason : s.inner[0] ? s.inner : "unknown HDF5 error";
    if (!s.call[0])
        return fmk_files_fail(msg, cap, status, "%s '%s' failed: %s", what, path, reason);
    return fmk_files_fail(msg, cap, status, "%s '%s' failed: %s (HDF5: %s: %s)", what, path, reason,
                          s.call, s.call_desc);
}

/* The error stack survives a close (every HDF5 API call but a few clears it): the message is
 * about the first failure, not about closing after it. */
int fmk_h5_close(hid_t id)
{
    if (id < 0)
        return 0;
    hid_t saved = H5Eget_num(H5E_DEFAULT) > 0 ? H5Eget_current_stack() : -1;
    herr_t rc;
    switch (H5Iget_type(id)) {
    case H5I_FILE: rc = H5Fclose(id); break;
    case H5I_GROUP: rc = H5Gclose(id); break;
    case H5I_DATASET: rc = H5Dclose(id); break;
    case H5I_ATTR: rc = H5Aclose(id); break;
    case H5I_DATASPACE: rc = H5Sclose(id); break;
    case H5I_DATATYPE: rc = H5Tclose(id); break;
    case H5I_GENPROP_LST: rc = H5Pclose(id); break;
    default: rc = -1; break;
    }
    if (saved >= 0)
        H5Eset_current_stack(saved); /* and closes saved */
    return rc < 0 ? -1 : 0;
}

hid_t fmk_h5_create_in_memory(size_t size_hint)
{
    /* The core driver without a backing store: HDF5 itself never writes to disk. A strong
     * close degree: closing the file closes whatever an error path left open. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t file = -1;
    size_t increment = size_hint > (1u << 20) ? size_hint : (1u << 20);
    if (fapl >= 0 && H5Pset_fapl_core(fapl, increment, 0) >= 0 &&
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0)
        file = H5Fcreate("fmmkit-in-memory", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    fmk_h5_close(fapl);
    return file;
}

herr_t fmk_h5_image(hid_t file, void **image, size_t *size)
{
    *image = NULL;
    *size = 0;
    /* H5Fget_file_image copies what the driver holds: the metadata cache first. */
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0)
        return -1;
    ssize_t bytes = H5Fget_file_image(file, NULL, 0);
    if (bytes <= 0)
        return -1;
    *image = malloc((size_t)bytes);
    if (!*image)
        return -2;
    if (H5Fget_file_image(file, *image, (size_t)bytes) != bytes) {
        free(*image);
        *image = NULL;
        return -1;
    }
    *size = (size_t)bytes;
    return 0;
}

static herr_t attr_write(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, hid_t space,
                         const void *values)
{
    if (space < 0)
        return -1;
    hid_t attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, mem_type, values);
    if (fmk_h5_close(attr) != 0 || fmk_h5_close(space) != 0)
        rc = -1;
    return rc;
}

herr_t fmk_h5_attr_scalar(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                          const void *value)
{
    return attr_write(obj, name, file_type, mem_type, H5Screate(H5S_SCALAR), value);
}

herr_t fmk_h5_attr_vector(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                          hsize_t count, const void *values)
{
    return attr_write(obj, name, file_type, mem_type, H5Screate_simple(1, &count, NULL), values);
}

herr_t fmk_h5_dataset_write(hid_t group, const char *name, hid_t file_type, hid_t mem_type,
                            hsize_t rows, hsize_t cols, const void *data)
{
    hsize_t dims[2] = {rows, cols};
    hid_t space = H5Screate_simple(cols ? 2 : 1, dims, NULL);
    if (space < 0)
        return -1;
    hid_t dset = H5Dcreate2(group, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = dset < 0 ? -1 : H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (fmk_h5_close(dset) != 0 || fmk_h5_close(space) != 0)
        rc = -1;
    return rc;
}

/* The shape of a space and type (closes both). */
static int shape_of(hid_t space, hid_t type, fmk_h5_shape *shape)
{
    int ok = space >= 0 && type >= 0;
    if (ok) {
        shape->rank = H5Sget_simple_extent_ndims(space);
        ok = shape->rank >= 0 && shape->rank <= 2;
    }
    if (ok) {
        shape->dims[0] = shape->dims[1] = 0;
        ok = H5Sget_simple_extent_dims(space, shape->dims, NULL) >= 0;
        shape->cls = H5Tget_class(type);
        shape->size = H5Tget_size(type);
    }
    if (fmk_h5_close(space) != 0 || fmk_h5_close(type) != 0)
        ok = 0;
    return ok ? 1 : -1;
}

int fmk_h5_dataset_shape(hid_t group, const char *name, fmk_h5_shape *shape)
{
    htri_t exists = H5Lexists(group, name, H5P_DEFAULT);
    if (exists <= 0)
        return exists == 0 ? 0 : -1;
    hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
    if (dset < 0)
        return -1;
    int rc = shape_of(H5Dget_space(dset), H5Dget_type(dset), shape);
    if (fmk_h5_close(dset) != 0)
        rc = -1;
    return rc;
}

int fmk_h5_attr_shape(hid_t obj, const char *name, fmk_h5_shape *shape)
{
    htri_t exists = H5Aexists(obj, name);
    if (exists <= 0)
        return exists == 0 ? 0 : -1;
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (attr < 0)
        return -1;
    int rc = shape_of(H5Aget_space(attr), H5Aget_type(attr), shape);
    if (fmk_h5_close(attr) != 0)
        rc = -1;
    return rc;
}

herr_t fmk_h5_attr_read(hid_t obj, const char *name, hid_t mem_type, void *values)
{
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Aread(attr, mem_type, values);
    if (fmk_h5_close(attr) != 0)
        rc = -1;
    return rc;
}

herr_t fmk_h5_dataset_read(hid_t group, const char *name, hid_t mem_type, void *data)
{
    hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
    herr_t rc = dset < 0 ? -1 : H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (fmk_h5_close(dset) != 0)
        rc = -1;
    return rc;
}

int fmk_h5_exists(hid_t file, const char *path)
{
    return H5Lexists(file, path, H5P_DEFAULT) > 0;
}

#else
/* Without HDF5 this file has nothing to build (ISO C wants one declaration). */
typedef int fmk_h5_unused;
#endif /* FMK_HAVE_HDF5 */
