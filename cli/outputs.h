/* outputs.h -- the result files of `fmmkit eval`, written all or nothing.
 *
 * The rule (`fmmkit eval --help` and the README state it too):
 *  - An output that is a regular file, or does not exist yet, is written to a temporary file
 *    beside it ("P.npy.tmp.XXXXXX"), fsync'd, and renamed over it only when every output has
 *    been written. A failure before then, a full disk, `ulimit -f` (SIGXFSZ is ignored so the
 *    write fails with EFBIG) or a signal (SIGINT, SIGTERM, SIGHUP) removes the temporaries and
 *    leaves every old output as it was; signals are blocked while the renames happen, and a
 *    rename that fails puts back the outputs already renamed.
 *  - A symbolic link is followed: the file it names is replaced, the link stays.
 *  - An existing FIFO or character device (a pipe, /dev/null, /dev/stdout) is written in place,
 *    after the temporaries and before the renames; it is never renamed over or removed.
 *  - An output may be a .npz archive or an HDF5 file (arrayfile.h): the new file is the old one
 *    (if any) with the array added, an array or dataset of the same name replaced, built in
 *    memory and then written by the rule above. Two outputs naming different members of one
 *    such file write it once; an output that names the same member as an input is refused.
 *  - A directory, a block device, a socket, a link to nothing, a missing parent directory, and an
 *    output that is the same file as an input or as the other output are refused with exit
 *    status 2 before any work is done.
 */
#ifndef FMMKIT_CLI_OUTPUTS_H
#define FMMKIT_CLI_OUTPUTS_H

#include <stdint.h>
#include <sys/types.h>

#include "arrayfile.h"

typedef struct out_file {
    const char *option; /* "--out-pot", for messages */
    const char *path;   /* as given; NULL when not asked for */
    const char *member; /* the array's name in a .npz or HDF5 file named without one ("pot") */

    /* The array to write; the caller sets these before outputs_write. */
    int is_complex, ndim;
    int64_t shape[2];
    const double *data;

    /* Filled by outputs_check; private to outputs.c. */
    arrayfile_spec spec; /* path split into file, format and member */
    int leader;          /* the output that writes this one's file: itself, or an earlier one */
    char *dest;          /* the file to replace: path with its links and parent resolved */
    int in_place;        /* an existing FIFO or character device: written directly */
    int existed;         /* dest existed when checked */
    dev_t dev;           /* identity of dest when it existed */
    ino_t ino;
    char *temp;   /* the temporary beside dest while it exists */
    char *backup; /* a second name for the old dest during the renames */
    int renamed;
} out_file;

/* Checks outputs[0..n) (entries with path NULL are skipped) against the rule above and against
 * the input files. Returns CLI_OK, or CLI_USAGE after printing why. */
int outputs_check(const char *cmd, out_file *outs, int n, const char *const *inputs, int n_inputs);

/* Writes every output, all or nothing. Returns CLI_OK, or CLI_FAIL / CLI_USAGE after printing
 * why, with nothing left behind. A signal caught meanwhile is raised again once the temporaries
 * are gone, so the process ends by it as it would have. */
int outputs_write(const char *cmd, out_file *outs, int n);

/* Frees what outputs_check allocated. */
void outputs_free(out_file *outs, int n);

#endif /* FMMKIT_CLI_OUTPUTS_H */
