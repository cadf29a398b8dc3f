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

/* The core driver's buffer goes through these callbacks, so that the file's memory is handed
 * over at close instead of freed: the image is never copied. */
static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    void *mem = malloc(size);
    if (!mem)
        ((fmk_h5_image *)udata)->nomem = 1;
    return mem;
}

static void *image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op,
                          void *udata)
{
    (void)op;
    (void)udata;
    return memcpy(dest, src, size);
}

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    void *mem = realloc(ptr, size);
    if (!mem)
        ((fmk_h5_image *)udata)->nomem = 1;
    return mem;
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
    fmk_h5_image *image = udata;
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && !image->data)
        image->data = ptr; /* the file's bytes: now the caller's */
    else
        free(ptr);
    return 0;
}

static void *udata_copy(void *udata)
{
    return udata; /* the one fmk_h5_image, shared by every copy of the property list */
}

static herr_t udata_free(void *udata)
{
    (void)udata;
    return 0;
}

hid_t fmk_h5_create_in_memory(size_t size_hint, fmk_h5_image *image)
{
    memset(image, 0, sizeof *image);
    /* The core driver without a backing store, growing by the expected size (one allocation),
     * its buffer handed over at close. A strong close degree: closing the file closes whatever
     * an error path left open. */
    H5FD_file_image_callbacks_t callbacks = {image_malloc, image_memcpy, image_realloc, image_free,
                                             udata_copy,   udata_free,   image};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t file = -1;
    size_t increment = size_hint > (1u << 20) ? size_hint : (1u << 20);
    if (fapl >= 0 && H5Pset_fapl_core(fapl, increment, 0) >= 0 &&
        H5Pset_file_image_callbacks(fapl, &callbacks) >= 0 &&
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0)
        file = H5Fcreate("fmmkit-in-memory", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    fmk_h5_close(fapl);
    return file;
}

herr_t fmk_h5_close_in_memory(hid_t file, int failed, fmk_h5_image *image)
{
    herr_t rc = failed ? -1 : 0;
    /* Everything flushed, the file's size (its end of allocation) taken, then closed: the
     * close writes nothing more into a flushed file. */
    if (rc >= 0 && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0)
        rc = -1;
    ssize_t bytes = rc >= 0 ? H5Fget_file_image(file, NULL, 0) : -1;
    if (rc >= 0 && bytes <= 0)
        rc = -1;
    if (fmk_h5_close(file) != 0)
        rc = -1;
    if (rc >= 0 && !image->data)
        rc = -1;
    image->size = rc >= 0 ? (size_t)bytes : 0;
    return rc;
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
