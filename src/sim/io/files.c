/* files.c -- messages, directories and atomic replacement of files (write to a temporary name,
 * make it durable, rename it onto the target). POSIX. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "sim/io/io.h"

fmk_status fmk_files_fail(char *msg, size_t cap, fmk_status status, const char *fmt, ...)
{
    if (msg && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return status;
}

void fmk_files_strerror(int err, char *buf, size_t cap)
{
    /* The XSI strerror_r (_POSIX_C_SOURCE without _GNU_SOURCE) fills buf. */
    if (strerror_r(err, buf, cap) != 0)
        snprintf(buf, cap, "error %d", err);
}

fmk_status fmk_files_check_path(const char *path, const char *what, char *msg, size_t cap)
{
    if (!path || !path[0])
        return fmk_files_fail(msg, cap, FMK_ERR_ARG, "%s: the path is %s; give a file name", what,
                              path ? "empty" : "NULL");
    return FMK_OK;
}

/* The temporary name of path, "path.tmp.<pid>", in a new buffer (free()). */
static char *temp_name(const char *path)
{
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (tmp)
        snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    return tmp;
}

/* Removes tmp if it exists; errno is left as it was. */
static void discard(const char *tmp)
{
    int saved = errno;
    if (tmp)
        unlink(tmp);
    errno = saved;
}

/* The directory part of path ("." when it has none), in buf. */
static void directory_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, cap, ".");
        return;
    }
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, path, len);
    buf[len] = '\0';
}

fmk_status fmk_files_write(const char *path, const char *what, const void *data, size_t bytes,
                           char *msg, size_t cap)
{
    char *tmp = temp_name(path);
    if (!tmp)
        return fmk_files_fail(msg, cap, FMK_ERR_NOMEM, "out of host memory writing %s '%s'", what,
                              path);
    const char *step = "creating its temporary file";
    int err = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        err = errno;
    } else {
        step = "writing its temporary file";
        const char *at = data;
        size_t left = bytes;
        while (left > 0 && !err) {
            ssize_t done = write(fd, at, left < (1u << 30) ? left : (1u << 30));
            if (done > 0) {
                at += done;
                left -= (size_t)done;
            } else if (done == 0 || errno != EINTR) {
                err = done == 0 ? EIO : errno;
            }
        }
        /* Write-back errors (a full disk on a file system that allocates late, NFS) show up
         * at fsync and close, before the rename. */
        if (!err && fsync(fd) != 0)
            err = errno, step = "flushing its temporary file to disk";
        if (close(fd) != 0 && !err)
            err = errno, step = "closing its temporary file";
    }
    if (!err && rename(tmp, path) != 0)
        err = errno, step = "renaming the complete temporary file onto it";
    fmk_status st = FMK_OK;
    if (err) {
        char reason[128];
        fmk_files_strerror(err, reason, sizeof reason);
        discard(tmp);
        st = fmk_files_fail(msg, cap, FMK_ERR_INTERNAL,
                            "writing %s '%s' failed: %s (%s '%s'; '%s' is as it was)", what, path,
                            reason, step, tmp, path);
    } else {
        /* The rename itself on disk: best effort (some file systems refuse to sync a
         * directory). */
        char dir[4096];
        directory_of(path, dir, sizeof dir);
        int dfd = open(dir, O_RDONLY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    free(tmp);
    return st;
}

/* One mkdir: fine when dir exists as a directory. */
static fmk_status make_one(const char *dir, const char *whole, char *msg, size_t cap)
{
    char reason[128];
    if (mkdir(dir, 0777) == 0)
        return FMK_OK;
    int err = errno;
    struct stat st;
    if (err == EEXIST && stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return FMK_OK;
        return fmk_files_fail(msg, cap, FMK_ERR_ARG,
                              "cannot create directory '%s': '%s' exists and is not a directory",
                              whole, dir);
    }
    fmk_files_strerror(err, reason, sizeof reason);
    return fmk_files_fail(msg, cap, FMK_ERR_INTERNAL, "cannot create directory '%s': %s (at '%s')",
                          whole, reason, dir);
}

fmk_status fmk_sim_io_mkdir(const char *dir, char *msg, size_t cap)
{
    fmk_status st = fmk_files_check_path(dir, "fmk_sim_io_mkdir", msg, cap);
    if (st != FMK_OK)
        return st;
    size_t len = strlen(dir);
    char *part = malloc(len + 1);
    if (!part)
        return fmk_files_fail(msg, cap, FMK_ERR_NOMEM, "out of host memory creating directory '%s'",
                              dir);
    memcpy(part, dir, len + 1);
    /* Each parent in turn ("a", "a/b", ...), then dir itself; repeated slashes are skipped. */
    for (size_t i = 1; i <= len && st == FMK_OK; i++) {
        if (i < len && !(part[i] == '/' && part[i - 1] != '/'))
            continue;
        char saved = part[i];
        part[i] = '\0';
        st = make_one(part, dir, msg, cap);
        part[i] = saved;
    }
    free(part);
    return st;
}
