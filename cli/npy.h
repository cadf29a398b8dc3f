/* npy.h -- reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Only what fmmkit exchanges is supported: little-endian float64, float32, complex128,
 * complex64, int64 and int32 arrays, in C or Fortran order. Values are read into doubles
 * (complex as (re, im) pairs) in C order: a Fortran-ordered array is transposed on reading, and
 * an integer must lie within +-2^53 so that its double is exact. Output is always C-ordered
 * float64 or complex128. Every size is checked for overflow and against the
 * file's length before anything is allocated, so a hostile header cannot make us allocate or
 * read past the data.
 */
#ifndef FMMKIT_CLI_NPY_H
#define FMMKIT_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPY_MAX_DIMS 32

typedef enum npy_dtype {
    NPY_FLOAT64,
    NPY_FLOAT32,
    NPY_COMPLEX128,
    NPY_COMPLEX64,
    NPY_INT64,
    NPY_INT32
} npy_dtype;

/* npy_read's results. */
enum { NPY_OK = 0, NPY_BAD_INPUT = -1, NPY_NO_MEMORY = -2 };

typedef struct npy_array {
    npy_dtype dtype; /* as stored in the file */
    int is_complex;  /* complex128 or complex64: data holds (re, im) pairs */
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int64_t count; /* number of elements (product of shape) */
    double *data;  /* count values, or count pairs if complex; never NULL */
} npy_array;

/* Reads path into *array. On failure returns NPY_BAD_INPUT (the file is not one we read) or
 * NPY_NO_MEMORY, writes a sentence that says what is wrong (without the file name) into err,
 * and leaves *array empty (data NULL). */
int npy_read(const char *path, npy_array *array, char *err, size_t err_size);

/* The same for a whole .npy file held in memory (bytes[0..len)), e.g. a member of a .npz
 * archive; bytes is only read. */
int npy_read_memory(const void *bytes, size_t len, npy_array *array, char *err, size_t err_size);

/* Frees the data of an array read by npy_read; an empty array is a no-op. */
void npy_free(npy_array *array);

/* The bytes of one scalar of dtype (a complex number holds two). */
int npy_scalar_size(npy_dtype dtype);

/* The dtype's name as numpy spells it ("float64", ...). */
const char *npy_dtype_name(npy_dtype dtype);

/* Writes an array of ndim (0..2) dimensions to an open stream: float64, or complex128 when
 * is_complex (data then holds pairs). Returns 0, or -1 when a write failed (errno set). */
int npy_write(FILE *out, int is_complex, int ndim, const int64_t *shape, const double *data);

#endif /* FMMKIT_CLI_NPY_H */
