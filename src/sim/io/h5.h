/*
 * h5.h -- HDF5 helpers of src/sim/io/ (only with FMK_HAVE_HDF5).
 *
 * Every call of the file layer runs between fmk_h5_quiet_begin and fmk_h5_quiet_end: HDF5's
 * automatic error printing is off (and the caller's own setting restored after), and a failure
 * is turned into a sentence by fmk_h5_fail, which reads HDF5's error stack.
 */
#ifndef FMMKIT_SIM_IO_H5_H
#define FMMKIT_SIM_IO_H5_H

#include <hdf5.h>

#include "sim/io/io.h"

/* The caller's automatic error handler, saved while the file layer works. */
typedef struct fmk_h5_quiet {
    H5E_auto2_t func;
    void *data;
} fmk_h5_quiet;
void fmk_h5_quiet_begin(fmk_h5_quiet *q);
void fmk_h5_quiet_end(const fmk_h5_quiet *q);

/* A failed HDF5 call: msg gets "<what> '<path>' failed: <reason> (HDF5: <call>: <its
 * message>)", the reason being errno's text when HDF5 recorded one (e.g. "No space left on
 * device"), else HDF5's innermost message. Clears the error stack; returns status. */
fmk_status fmk_h5_fail(fmk_status status, const char *what, const char *path, char *msg,
                       size_t cap);

/* Closes an id of any kind when it is valid (>= 0), keeping the error stack of an earlier
 * failure; returns 0, or -1 when the close failed. */
int fmk_h5_close(hid_t id);

/* A new HDF5 file in memory (the core driver, no backing store): writing it cannot fail for
 * want of disk, and a failure cannot leave HDF5 with a file it is unable to close (HDF5 1.10
 * keeps a dangling identifier when a close's flush fails). size_hint: the bytes expected.
 * The file's bytes are handed to image when it is closed by fmk_h5_close_in_memory. */
typedef struct fmk_h5_image {
    void *data;  /* the file's bytes after the close (free() it, also after a failure) */
    size_t size; /* how many of them make the file */
    int nomem;   /* an allocation of the image failed */
} fmk_h5_image;
hid_t fmk_h5_create_in_memory(size_t size_hint, fmk_h5_image *image);

/* Flushes and closes a file of fmk_h5_create_in_memory (failed: an earlier write failed, only
 * close it); image->data, image->size are the complete file. Returns < 0 on a failure, with
 * the first one on HDF5's error stack. */
herr_t fmk_h5_close_in_memory(hid_t file, int failed, fmk_h5_image *image);

/* Writing (return < 0 on an HDF5 failure, with the error on HDF5's stack). */
herr_t fmk_h5_attr_scalar(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                          const void *value);
herr_t fmk_h5_attr_vector(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                          hsize_t count, const void *values);
/* A dataset of rows x cols (cols 0: one dimension, rows). */
herr_t fmk_h5_dataset_write(hid_t group, const char *name, hid_t file_type, hid_t mem_type,
                            hsize_t rows, hsize_t cols, const void *data);

/* Reading. The shape of a dataset or attribute (rank, dims[0..1]) and its type class. */
typedef struct fmk_h5_shape {
    int rank;
    hsize_t dims[2];
    H5T_class_t cls;
    size_t size; /* bytes per element in the file */
} fmk_h5_shape;
/* 1 found and shape filled, 0 absent, -1 an HDF5 failure or rank > 2. */
int fmk_h5_dataset_shape(hid_t group, const char *name, fmk_h5_shape *shape);
int fmk_h5_attr_shape(hid_t obj, const char *name, fmk_h5_shape *shape);
/* Reads a whole attribute or dataset converted to mem_type (< 0 on failure). */
herr_t fmk_h5_attr_read(hid_t obj, const char *name, hid_t mem_type, void *values);
herr_t fmk_h5_dataset_read(hid_t group, const char *name, hid_t mem_type, void *data);
/* 1 when group (a path) exists as a link in file, else 0. */
int fmk_h5_exists(hid_t file, const char *path);

/* snapshot.c's HDF5 half, which restart.c extends. ------------------------------------- */

/* Writes path atomically: the snapshot layout of p (checked first), then extra(file, ctx)
 * when extra is not NULL (about extra_bytes more), built in memory and written by
 * fmk_files_write. what names the file in messages ("snapshot", "restart file"). */
typedef herr_t (*fmk_snapshot_extra_write)(hid_t file, const void *ctx);
fmk_status fmk_snapshot_write_file(const char *path, const fmk_sim_particles *p, const char *what,
                                   fmk_snapshot_extra_write extra, const void *ctx,
                                   size_t extra_bytes, char *msg, size_t cap);

/* Reads path's snapshot layout into p, then calls extra(file, p->n, ctx) when not NULL; on
 * any failure p is freed and zeroed. */
typedef fmk_status (*fmk_snapshot_extra_read)(hid_t file, const char *path, int64_t n, void *ctx,
                                              char *msg, size_t cap);
fmk_status fmk_snapshot_read_file(const char *path, fmk_sim_particles *p, const char *what,
                                  fmk_snapshot_extra_read extra, void *ctx, char *msg, size_t cap);

/* Checks that dataset name of group has rows x cols (cols 0: rank 1) elements of class cls;
 * the message names it as "<group_name>/<name>" of path. FMK_OK, or FMK_ERR_ARG when it is
 * missing (if required) or has another shape; *found says whether it exists. */
fmk_status fmk_snapshot_expect(hid_t group, const char *group_name, const char *name,
                               H5T_class_t cls, int64_t rows, int64_t cols, int required,
                               int *found, const char *path, char *msg, size_t cap);

#endif /* FMMKIT_SIM_IO_H5_H */
