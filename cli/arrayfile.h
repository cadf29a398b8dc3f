/* arrayfile.h -- the array files of the fmmkit command: NumPy .npy, NumPy .npz archives and
 * HDF5 datasets, named on the command line as
 *
 *   points.npy              a .npy file (also any FIFO or character device: /dev/stdin)
 *   data.npz:name           the array `name` of a .npz archive (the member name.npy); an input
 *                           without :name takes the archive's only array
 *   data.h5:/group/name     the dataset /group/name of an HDF5 file (.h5, .hdf5); a name
 *                           without a leading '/' is taken from the root
 *
 * Every reader returns an npy_array (npy.h): values as doubles in C order, complex as
 * (re, im) pairs, integers within +-2^53 only. .npz needs libzip and HDF5 needs libhdf5 at
 * build time; without them such a file is refused with a message that says so.
 */
#ifndef FMMKIT_CLI_ARRAYFILE_H
#define FMMKIT_CLI_ARRAYFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "npy.h"

typedef enum arrayfile_format {
    ARRAYFILE_UNKNOWN, /* an extension we do not know: only a stream (FIFO, device) is .npy */
    ARRAYFILE_NPY,
    ARRAYFILE_NPZ,
    ARRAYFILE_HDF5
} arrayfile_format;

typedef struct arrayfile_spec {
    arrayfile_format format;
    char *path;   /* the file */
    char *member; /* .npz: the array's name ("pot"); HDF5: the dataset ("/g/pot"); else NULL */
} arrayfile_spec;

/* Splits text into file and member by the rule above. Returns NPY_OK or NPY_NO_MEMORY; an
 * unknown extension is not an error here (format ARRAYFILE_UNKNOWN, member NULL). */
int arrayfile_parse(const char *text, arrayfile_spec *spec);
void arrayfile_spec_free(arrayfile_spec *spec);

/* "a.npy", ".npz" or ".h5" as the format's name in messages. */
const char *arrayfile_format_name(arrayfile_format format);

/* Refuses a spec that cannot be used: an unknown extension (unless is_stream), .npz or HDF5
 * not built in. NPY_OK, else NPY_BAD_INPUT with a sentence in err. */
int arrayfile_usable(const arrayfile_spec *spec, int is_stream, char *err, size_t err_size);

/* Reads the array that text names. NPY_OK, NPY_BAD_INPUT or NPY_NO_MEMORY with a sentence in
 * err (without the file's name); *array is then empty. */
int arrayfile_read(const char *text, npy_array *array, char *err, size_t err_size);

/* One array to write: float64, or complex128 (pairs) when is_complex. */
typedef struct arrayfile_out {
    const char *member; /* .npz name or HDF5 dataset; ignored for .npy */
    int is_complex, ndim;
    const int64_t *shape;
    const double *data;
} arrayfile_out;

/* Writes the n arrays of one output file to out: for .npy the one array; for .npz and HDF5
 * the file `existing` (NULL: none) with the arrays added, an array of the same name replaced.
 * Returns NPY_OK, NPY_NO_MEMORY, or NPY_BAD_INPUT with err set (errno set when a write to out
 * failed: err is then "write failed: ..."). */
int arrayfile_write(FILE *out, arrayfile_format format, const char *existing,
                    const arrayfile_out *arrays, int n, char *err, size_t err_size);

/* Checks before any work that an existing file can take the member: a .npz must be a zip
 * archive we read, an HDF5 file must be one, and the dataset's path must lead through groups
 * (an existing dataset there is replaced; a group is refused). NPY_OK or NPY_BAD_INPUT. */
int arrayfile_check_existing(const arrayfile_spec *spec, char *err, size_t err_size);

/* The format modules (npz.c, h5file.c); each returns NPY_BAD_INPUT with a message when its
 * library was not built in. */
int npz_read(const char *path, const char *member, npy_array *array, char *err, size_t err_size);
int npz_write(FILE *out, const char *existing, const arrayfile_out *arrays, int n, char *err,
              size_t err_size);
int npz_check_existing(const char *path, char *err, size_t err_size);
int npz_available(void);

int h5file_read(const char *path, const char *dataset, npy_array *array, char *err,
                size_t err_size);
int h5file_write(FILE *out, const char *existing, const arrayfile_out *arrays, int n, char *err,
                 size_t err_size);
int h5file_check_existing(const char *path, const char *dataset, char *err, size_t err_size);
int h5file_available(void);

#endif /* FMMKIT_CLI_ARRAYFILE_H */
