/*
 * io.h -- what the files of src/sim/io/ share (the interface to the driver is sim/sim_io.h).
 *
 *   files.c       messages, directories, atomic writes: a temporary name, fsync, rename
 *                 (POSIX)
 *   h5.c          HDF5 helpers: quiet error handling, the error stack as a sentence, files
 *                 built in memory, attributes and datasets (FMK_HAVE_HDF5)
 *   snapshot.c    the GADGET-4 snapshot layout: write, read, check
 *   restart.c     the restart file: the snapshot plus /Restart
 *   projection.c  cloud-in-cell mass projection, auto-fit square, log scale, colour map
 *   png.c         the projection encoded by libpng (FMK_HAVE_PNG)
 *
 * Every file is built in memory, then written by fmk_files_write: the one place where a full
 * disk or an I/O error can strike, with errno at hand for the message.
 */
#ifndef FMMKIT_SIM_IO_IO_H
#define FMMKIT_SIM_IO_IO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sim_io.h"

/* Debian packages named in the messages of a build without the library. */
#define FMK_SIM_IO_NO_HDF5                                                                 \
    "this fmmkit was built without HDF5, so it cannot read or write snapshot and restart " \
    "files (Debian: apt-get install libhdf5-dev, then rebuild fmmkit)"
#define FMK_SIM_IO_NO_PNG                                                                \
    "this fmmkit was built without libpng, so it cannot write PNG projections (Debian: " \
    "apt-get install libpng-dev, then rebuild fmmkit)"

/* files.c ------------------------------------------------------------------------------- */

/* Writes a printf-style sentence into msg (cap bytes, terminated; msg may be NULL) and returns
 * status. */
fmk_status fmk_files_fail(char *msg, size_t cap, fmk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* errno's text (thread-safe strerror). */
void fmk_files_strerror(int err, char *buf, size_t cap);

/* Writes bytes of data to path atomically: into "path.tmp.<pid>", fsync, rename onto path
 * (then the directory is synced, best effort). On failure the temporary file is removed, path
 * is as it was, and msg names the file, the step and errno's reason (FMK_ERR_INTERNAL). what
 * names the file in the message ("snapshot"). */
fmk_status fmk_files_write(const char *path, const char *what, const void *data, size_t bytes,
                           char *msg, size_t cap);

/* Checks that a path argument is a non-empty string. */
fmk_status fmk_files_check_path(const char *path, const char *what, char *msg, size_t cap);

/* snapshot.c ---------------------------------------------------------------------------- */

/* Checks a particle set before it is written: n >= 1, arrays present, every value finite,
 * masses and softenings >= 0, header values finite. */
fmk_status fmk_snapshot_check(const fmk_sim_particles *p, const char *path, char *msg, size_t cap);

/* Checks n doubles for NaN and Inf (and < 0 when nonneg); what names them in the message. */
fmk_status fmk_snapshot_check_values(const double *v, int64_t n, int nonneg, const char *what,
                                     const char *path, char *msg, size_t cap);

/* projection.c -------------------------------------------------------------------------- */

/* The largest PNG side in pixels (the grid of doubles is width^2 * 8 bytes). */
#define FMK_PROJECTION_WIDTH_MAX 8192

/* The square of a projection: its centre (on the two axes other than axis, in their order)
 * and its side. extent > 0: centre as given (NULL: the centre of mass); else the square about
 * the centre of mass that holds 99% of the mass. Checks the points and masses. */
typedef struct fmk_projection_frame {
    int axis, u, v; /* the projection axis and the image's horizontal, vertical axes */
    double centre[2], extent;
} fmk_projection_frame;
fmk_status fmk_projection_frame_make(int64_t n, const double *pos, const double *mass, int axis,
                                     double extent, const double centre[2],
                                     fmk_projection_frame *frame, char *msg, size_t cap);

/* Mass per pixel on width x width pixels (grid[j width + i]: column i along u, row j along
 * v, both from the square's lower corner), cloud-in-cell. grid is zeroed first. */
void fmk_projection_deposit(int64_t n, const double *pos, const double *mass,
                            const fmk_projection_frame *frame, int width, double *grid);

/* The colour map: t in [0, 1] (clamped) to 8-bit sRGB. */
void fmk_projection_colour(double t, unsigned char rgb[3]);

/* The image, top row first (v decreasing): log10(grid / max) over 4 decades to [0, 1], then
 * the colour map; pixels at or below max 1e-4 (and empty ones) get colour 0. */
void fmk_projection_image(const double *grid, int width, unsigned char *rgb);

#endif /* FMMKIT_SIM_IO_IO_H */
