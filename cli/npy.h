/* npy.h -- reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Only what fmmkit exchanges is supported: C-ordered, little-endian float64, float32,
 * complex128 and complex64 arrays. Values are read into doubles (complex as (re, im) pairs);
 * output is always float64 or complex128. Every size is checked for overflow and against the
 * file's length before anything is allocated, so a hostile header cannot make us allocate or
 * read past the data.
 */
#ifndef FMMKIT_CLI_NPY_H
#define FMMKIT_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NPY_MAX_DIMS 32

typedef enum npy_dtype { NPY_FLOAT64, NPY_FLOAT32, NPY_COMPLEX128, NPY_COMPLEX64 } npy_dtype;

typedef struct npy_array {
    npy_dtype dtype; /* as stored in the file */
    int is_complex;  /* complex128 or complex64: data holds (re, im) pairs */
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int64_t count; /* number of elements (product of shape) */
    double *data;  /* count values, or count pairs if complex; never NULL */
} npy_array;

/* Reads path into *array. On failure returns -1, writes a sentence that says what is wrong
 * (without the file name) into err, and leaves *array empty (data NULL). */
int npy_read(const char *path, npy_array *array, char *err, size_t err_size);

/* Frees the data of an array read by npy_read; an empty array is a no-op. */
void npy_free(npy_array *array);

/* The dtype's name as numpy spells it ("float64", ...). */
const char *npy_dtype_name(npy_dtype dtype);

/* Writes an array of ndim (0..2) dimensions to an open stream: float64, or complex128 when
 * is_complex (data then holds pairs). Returns 0, or -1 when a write failed (errno set). */
int npy_write(FILE *out, int is_complex, int ndim, const int64_t *shape, const double *data);

#endif /* FMMKIT_CLI_NPY_H */
