/* h5file.c -- HDF5 datasets as the command's arrays (libhdf5, the serial C library the simulation
 * driver uses too).
 *
 * Read: a dataset of float64, float32, int64 or int32 (integers within +-2^53), or complex as
 * h5py stores it (a compound of two floats named r and i). Written: float64, complex128 as h5py's
 * compound, contiguous. A written file is built in memory (HDF5's core driver: the existing file,
 * if any, then the datasets), so that the command's all-or-nothing rule (outputs.h) holds and a
 * FIFO can take it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arrayfile.h"

#ifdef FMK_CLI_HDF5
#include <hdf5.h>

int h5file_available(void)
{
    return 1;
}

/* HDF5 prints its error stack by default; our messages say what went wrong instead. */
static void quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* Walks dataset's path: every leading component must be a group (or missing when `may_miss`).
 * Returns 1 when the full path is a dataset, 0 when it is missing, -1 with a message. */
static int walk(hid_t file, const char *dataset, int may_miss, char *err, size_t err_size)
{
    size_t len = strlen(dataset);
    char *prefix = malloc(len + 1);
    if (!prefix) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    int rc = -1;
    for (size_t end = 1; end <= len; end++) {
        if (end < len && dataset[end] != '/')
            continue;
        memcpy(prefix, dataset, end);
        prefix[end] = '\0';
        htri_t exists = H5Lexists(file, prefix, H5P_DEFAULT);
        if (exists <= 0) {
            rc = 0;
            if (!may_miss)
                snprintf(err, err_size, "there is no %s %s in it", end < len ? "group" : "dataset",
                         prefix);
            break;
        }
        /* H5Iget_type of the opened object: the same call in every libhdf5 (H5Oget_info's
         * signature changed in 1.12) */
        hid_t obj = H5Oopen(file, prefix, H5P_DEFAULT);
        H5I_type_t type = obj >= 0 ? H5Iget_type(obj) : H5I_BADID;
        if (obj >= 0)
            H5Oclose(obj);
        if (type == H5I_BADID) {
            snprintf(err, err_size, "cannot open %s", prefix);
            break;
        }
        if (end < len && type != H5I_GROUP) {
            snprintf(err, err_size, "%s is not a group", prefix);
            break;
        }
        if (end == len) {
            if (type == H5I_DATASET)
                rc = 1;
            else
                snprintf(err, err_size, "%s is a %s, not a dataset", prefix,
                         type == H5I_GROUP ? "group" : "named datatype");
        }
    }
    free(prefix);
    return rc == 0 && !may_miss ? -1 : rc;
}

/* The dataset's type as one of ours, or -1 with a message. complex: a compound (r, i). */
static int dtype_of(hid_t type, npy_dtype *dtype, char *err, size_t err_size)
{
    H5T_class_t cls = H5Tget_class(type);
    size_t size = H5Tget_size(type);
    if (cls == H5T_FLOAT && (size == 8 || size == 4)) {
        *dtype = size == 8 ? NPY_FLOAT64 : NPY_FLOAT32;
        return 0;
    }
    if (cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_2 && (size == 8 || size == 4)) {
        *dtype = size == 8 ? NPY_INT64 : NPY_INT32;
        return 0;
    }
    if (cls == H5T_COMPOUND && H5Tget_nmembers(type) == 2) {
        char *r = H5Tget_member_name(type, 0), *i = H5Tget_member_name(type, 1);
        int ok = r && i && strcmp(r, "r") == 0 && strcmp(i, "i") == 0 &&
                 H5Tget_member_class(type, 0) == H5T_FLOAT &&
                 H5Tget_member_class(type, 1) == H5T_FLOAT;
        H5free_memory(r);
        H5free_memory(i);
        if (ok) {
            *dtype = size == 16 ? NPY_COMPLEX128 : NPY_COMPLEX64;
            return 0;
        }
    }
    const char *what = cls == H5T_ENUM       ? "an enum (h5py's bool)"
                       : cls == H5T_INTEGER  ? "an unsigned or short integer"
                       : cls == H5T_STRING   ? "strings"
                       : cls == H5T_COMPOUND ? "a compound other than complex (r, i)"
                                             : "not a number type we read";
    snprintf(err, err_size,
             "the dataset's type is %s (%zu bytes); use float64, float32, int64 or int32", what,
             size);
    return -1;
}

/* int64 values read into data's own storage, made doubles in place; each must be exact. */
static int int64_to_double(npy_array *a, char *err, size_t err_size)
{
    const int64_t limit = (int64_t)1 << 53;
    for (int64_t i = 0; i < a->count; i++) {
        int64_t v;
        memcpy(&v, &a->data[i], sizeof v);
        if (v > limit || v < -limit) {
            char index[96];
            size_t len = (size_t)snprintf(index, sizeof index, "[");
            int64_t rest = i, idx[NPY_MAX_DIMS];
            for (int k = a->ndim - 1; k >= 0; k--) {
                idx[k] = a->shape[k] ? rest % a->shape[k] : 0;
                rest = a->shape[k] ? rest / a->shape[k] : 0;
            }
            for (int k = 0; k < a->ndim && len < sizeof index; k++)
                len += (size_t)snprintf(index + len, sizeof index - len, "%s%lld", k ? ", " : "",
                                        (long long)idx[k]);
            snprintf(err, err_size,
                     "element %s] is %lld; integers beyond 2^53 have no exact float64 (convert "
                     "the array to float64 yourself if rounding is acceptable)",
                     index, (long long)v);
            return -1;
        }
        a->data[i] = (double)v;
    }
    return 0;
}

/* Reads the open dataset into a (its shape already set). */
static int read_values(hid_t dset, npy_array *a, char *err, size_t err_size)
{
    const int per = a->is_complex ? 2 : 1;
    if (a->count > INT64_MAX / 16 || (uint64_t)a->count > SIZE_MAX / 16) {
        snprintf(err, err_size, "the dataset is too large (%lld elements)", (long long)a->count);
        return NPY_BAD_INPUT;
    }
    a->data = malloc(sizeof(double) * (size_t)(a->count > 0 ? a->count * per : 1));
    if (!a->data) {
        snprintf(err, err_size, "out of memory for %lld values", (long long)(a->count * per));
        return NPY_NO_MEMORY;
    }
    hid_t mem;
    if (a->is_complex) {
        mem = H5Tcreate(H5T_COMPOUND, 2 * sizeof(double));
        H5Tinsert(mem, "r", 0, H5T_NATIVE_DOUBLE);
        H5Tinsert(mem, "i", sizeof(double), H5T_NATIVE_DOUBLE);
    } else {
        mem = H5Tcopy(a->dtype == NPY_INT64 ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE);
    }
    herr_t st = a->count > 0 ? H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, a->data) : 0;
    H5Tclose(mem);
    if (st < 0) {
        snprintf(err, err_size,
                 "cannot read the dataset's values (a broken file, or a filter "
                 "this libhdf5 lacks)");
        return NPY_BAD_INPUT;
    }
    if (a->dtype == NPY_INT64 && int64_to_double(a, err, err_size) != 0)
        return NPY_BAD_INPUT;
    return NPY_OK;
}

static int read_dataset(hid_t file, const char *dataset, npy_array *a, char *err, size_t err_size)
{
    if (walk(file, dataset, 0, err, err_size) != 1)
        return NPY_BAD_INPUT;
    hid_t dset = H5Dopen2(file, dataset, H5P_DEFAULT);
    hid_t type = dset >= 0 ? H5Dget_type(dset) : -1;
    hid_t space = dset >= 0 ? H5Dget_space(dset) : -1;
    int rc = NPY_BAD_INPUT;
    if (type < 0 || space < 0) {
        snprintf(err, err_size, "cannot open dataset %s", dataset);
        goto done;
    }
    if (dtype_of(type, &a->dtype, err, err_size) != 0)
        goto done;
    a->is_complex = a->dtype == NPY_COMPLEX128 || a->dtype == NPY_COMPLEX64;
    int ndim = H5Sget_simple_extent_ndims(space);
    if (ndim < 0 || ndim > NPY_MAX_DIMS) {
        snprintf(err, err_size, "dataset %s has an unsupported dataspace", dataset);
        goto done;
    }
    hsize_t dims[NPY_MAX_DIMS];
    H5Sget_simple_extent_dims(space, dims, NULL);
    a->ndim = ndim;
    a->count = 1;
    for (int k = 0; k < ndim; k++) {
        if (dims[k] > (hsize_t)INT64_MAX ||
            (dims[k] != 0 && (int64_t)a->count > INT64_MAX / (int64_t)dims[k])) {
            snprintf(err, err_size, "the shape's element count overflows");
            goto done;
        }
        a->shape[k] = (int64_t)dims[k];
        a->count *= a->shape[k];
    }
    rc = read_values(dset, a, err, err_size);
done:
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dset >= 0)
        H5Dclose(dset);
    return rc;
}

int h5file_read(const char *path, const char *dataset, npy_array *array, char *err, size_t err_size)
{
    memset(array, 0, sizeof *array);
    quiet();
    if (H5Fis_hdf5(path) <= 0) {
        FILE *f = fopen(path, "rb");
        snprintf(err, err_size, "%s", f ? "not an HDF5 file" : "cannot open it");
        if (!f)
            snprintf(err, err_size, "cannot open it: %s", strerror(errno));
        else
            fclose(f);
        return NPY_BAD_INPUT;
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        snprintf(err, err_size, "cannot open it as an HDF5 file");
        return NPY_BAD_INPUT;
    }
    int rc = read_dataset(file, dataset, array, err, err_size);
    H5Fclose(file);
    if (rc != NPY_OK)
        npy_free(array);
    return rc;
}

int h5file_check_existing(const char *path, const char *dataset, char *err, size_t err_size)
{
    quiet();
    hid_t file = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (file < 0) {
        snprintf(err, err_size,
                 "it exists and is not an HDF5 file that fmmkit can add to; remove it or name "
                 "another file");
        return NPY_BAD_INPUT;
    }
    int rc = walk(file, dataset, 1, err, err_size) < 0 ? NPY_BAD_INPUT : NPY_OK;
    H5Fclose(file);
    return rc;
}

/* The bytes of an existing file (for the core driver's image). */
static int slurp_file(const char *path, void **bytes, size_t *len, char *err, size_t err_size)
{
    *bytes = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    off_t size = f && fseeko(f, 0, SEEK_END) == 0 ? ftello(f) : -1;
    if (size < 0) {
        snprintf(err, err_size, "cannot read the existing file: %s", strerror(errno));
        if (f)
            fclose(f);
        return NPY_BAD_INPUT;
    }
    rewind(f);
    *bytes = (uint64_t)size < SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;
    if (!*bytes) {
        fclose(f);
        snprintf(err, err_size, "out of memory reading the existing file");
        return NPY_NO_MEMORY;
    }
    *len = fread(*bytes, 1, (size_t)size, f);
    fclose(f);
    return NPY_OK;
}

/* One dataset written into file (its groups made, an old dataset of the name replaced). */
static int write_dataset(hid_t file, const arrayfile_out *a, char *err, size_t err_size)
{
    int found = walk(file, a->member, 1, err, err_size);
    if (found < 0)
        return NPY_BAD_INPUT;
    if (found == 1 && H5Ldelete(file, a->member, H5P_DEFAULT) < 0) {
        snprintf(err, err_size, "cannot replace dataset %s", a->member);
        return NPY_BAD_INPUT;
    }
    hsize_t dims[2] = {(hsize_t)a->shape[0], a->ndim > 1 ? (hsize_t)a->shape[1] : 0};
    hid_t space = H5Screate_simple(a->ndim, dims, NULL);
    hid_t type;
    if (a->is_complex) { /* h5py's complex128 */
        type = H5Tcreate(H5T_COMPOUND, 2 * sizeof(double));
        H5Tinsert(type, "r", 0, H5T_IEEE_F64LE);
        H5Tinsert(type, "i", sizeof(double), H5T_IEEE_F64LE);
    } else {
        type = H5Tcopy(H5T_IEEE_F64LE);
    }
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dset = H5Dcreate2(file, a->member, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int ok = dset >= 0 && (dims[0] == 0 || (a->ndim > 1 && dims[1] == 0) ||
                           H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, a->data) >= 0);
    if (dset >= 0)
        H5Dclose(dset);
    H5Pclose(lcpl);
    H5Tclose(type);
    H5Sclose(space);
    if (!ok) {
        snprintf(err, err_size, "cannot write dataset %s", a->member);
        return NPY_BAD_INPUT;
    }
    return NPY_OK;
}

/* The finished in-memory file's image, copied to out. */
static int copy_image(hid_t file, FILE *out, char *err, size_t err_size)
{
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) {
        snprintf(err, err_size, "cannot finish the HDF5 file");
        return NPY_BAD_INPUT;
    }
    ssize_t size = H5Fget_file_image(file, NULL, 0);
    void *image = size > 0 ? malloc((size_t)size) : NULL;
    if (!image) {
        snprintf(err, err_size, size > 0 ? "out of memory" : "cannot finish the HDF5 file");
        return size > 0 ? NPY_NO_MEMORY : NPY_BAD_INPUT;
    }
    int rc = NPY_OK;
    if (H5Fget_file_image(file, image, (size_t)size) != size) {
        snprintf(err, err_size, "cannot finish the HDF5 file");
        rc = NPY_BAD_INPUT;
    } else if (fwrite(image, 1, (size_t)size, out) != (size_t)size) {
        snprintf(err, err_size, "write failed: %s", strerror(errno));
        rc = NPY_BAD_INPUT;
    }
    free(image);
    return rc;
}

int h5file_write(FILE *out, const char *existing, const arrayfile_out *arrays, int n, char *err,
                 size_t err_size)
{
    quiet();
    void *old = NULL;
    size_t old_len = 0;
    int rc = existing ? slurp_file(existing, &old, &old_len, err, err_size) : NPY_OK;
    if (rc != NPY_OK)
        return rc;
    /* The core driver without a backing store: the file lives in memory only. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    hid_t file;
    if (old_len > 0) {
        H5Pset_file_image(fapl, old, old_len); /* copied by the library */
        file = H5Fopen("fmmkit-output.h5", H5F_ACC_RDWR, fapl);
    } else {
        file = H5Fcreate("fmmkit-output.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    }
    H5Pclose(fapl);
    free(old);
    if (file < 0) {
        snprintf(err, err_size, "cannot %s the HDF5 file in memory",
                 old_len ? "open the existing" : "create");
        return NPY_BAD_INPUT;
    }
    for (int i = 0; i < n && rc == NPY_OK; i++)
        rc = write_dataset(file, &arrays[i], err, err_size);
    if (rc == NPY_OK)
        rc = copy_image(file, out, err, err_size);
    H5Fclose(file);
    return rc;
}

#else /* built without HDF5 */

int h5file_available(void)
{
    return 0;
}

static int unavailable(char *err, size_t err_size)
{
    snprintf(err, err_size, "HDF5 files need libhdf5, which this fmmkit was built without");
    return NPY_BAD_INPUT;
}

int h5file_read(const char *path, const char *dataset, npy_array *array, char *err, size_t err_size)
{
    (void)path, (void)dataset;
    memset(array, 0, sizeof *array);
    return unavailable(err, err_size);
}

int h5file_write(FILE *out, const char *existing, const arrayfile_out *arrays, int n, char *err,
                 size_t err_size)
{
    (void)out, (void)existing, (void)arrays, (void)n;
    return unavailable(err, err_size);
}

int h5file_check_existing(const char *path, const char *dataset, char *err, size_t err_size)
{
    (void)path, (void)dataset;
    return unavailable(err, err_size);
}
#endif
