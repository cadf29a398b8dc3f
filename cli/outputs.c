/* outputs.c -- the result files of `fmmkit eval`, written all or nothing (the rule is in
 * outputs.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"

/* ---------------------------------------------------------------------------------------------
 * Before any work: where each output goes, and whether it may go there
 * ------------------------------------------------------------------------------------------ */
static char *concat(const char *a, const char *b, const char *c)
{
    size_t len = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s%s%s", a, b, c);
    return s;
}

/* The resolved parent directory of a path that does not exist, joined with its last name. */
static int resolve_new(const char *cmd, out_file *o)
{
    char *copy_dir = strdup(o->spec.path), *copy_base = strdup(o->spec.path);
    char *dir = NULL;
    int rc = CLI_USAGE;
    if (!copy_dir || !copy_base) {
        cli_error(cmd, "out of memory");
        rc = CLI_FAIL;
        goto done;
    }
    const char *base = basename(copy_base);
    dir = realpath(dirname(copy_dir), NULL);
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_usage(cmd, "%s: '%s' cannot be created: its directory %s", o->option, o->path,
                  errno == ENOENT || errno == ENOTDIR ? "does not exist" : strerror(errno));
        goto done;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_usage(cmd, "%s: '%s' cannot be created: %s", o->option, o->path, strerror(errno));
        goto done;
    }
    o->dest = concat(dir, strcmp(dir, "/") == 0 ? "" : "/", base);
    rc = o->dest ? CLI_OK : (cli_error(cmd, "out of memory"), CLI_FAIL);
done:
    free(copy_dir);
    free(copy_base);
    free(dir);
    return rc;
}

/* Fills dest, in_place, existed, dev, ino of one output. */
static int resolve_output(const char *cmd, out_file *o)
{
    struct stat st, lst;
    const char *file = o->spec.path;
    size_t len = strlen(file);
    if (len == 0 || file[len - 1] == '/')
        return cli_usage(cmd, "%s: '%s' names a directory, not a file", o->option, o->path);
    if (stat(file, &st) != 0) {
        if (errno != ENOENT)
            return cli_usage(cmd, "%s: '%s': %s", o->option, o->path, strerror(errno));
        if (lstat(file, &lst) == 0)
            return cli_usage(cmd, "%s: '%s' is a symbolic link to a file that does not exist",
                             o->option, o->path);
        return resolve_new(cmd, o);
    }
    if (S_ISDIR(st.st_mode))
        return cli_usage(cmd, "%s: '%s' is a directory; give a file name", o->option, o->path);
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
        return cli_usage(cmd,
                         "%s: '%s' is a block device or socket; outputs are regular files, "
                         "FIFOs or character devices",
                         o->option, o->path);
    o->existed = 1;
    o->dev = st.st_dev;
    o->ino = st.st_ino;
    o->in_place = !S_ISREG(st.st_mode);
    /* A stream is opened by its name (/dev/stdout's target may be "pipe:[...]"); a regular file
     * is replaced where its links lead. */
    o->dest = o->in_place ? strdup(file) : realpath(file, NULL);
    if (!o->dest)
        return cli_usage(cmd, "%s: '%s': %s", o->option, o->path, strerror(errno));
    if (!o->in_place) {
        char *copy = strdup(o->dest);
        int ok = copy && access(dirname(copy), W_OK | X_OK) == 0;
        int saved = errno;
        free(copy);
        if (!ok)
            return cli_usage(cmd, "%s: '%s' cannot be replaced: its directory: %s", o->option,
                             o->path, strerror(saved));
    }
    return CLI_OK;
}

/* Splits the output's name (arrayfile.h), resolves its file, and refuses a format it cannot
 * take: an unknown extension (unless a FIFO or device), or an existing .npz or HDF5 file that
 * cannot take the member. */
static int prepare_output(const char *cmd, out_file *o)
{
    char err[256];
    if (arrayfile_parse(o->path, &o->spec) != NPY_OK) {
        cli_error(cmd, "out of memory");
        return CLI_FAIL;
    }
    arrayfile_spec *sp = &o->spec;
    if ((sp->format == ARRAYFILE_NPZ || sp->format == ARRAYFILE_HDF5) && !sp->member) {
        const char *name = o->member ? o->member : "data";
        size_t len = strlen(name) + 2;
        if (!(sp->member = malloc(len))) {
            cli_error(cmd, "out of memory");
            return CLI_FAIL;
        }
        snprintf(sp->member, len, "%s%s", sp->format == ARRAYFILE_HDF5 ? "/" : "", name);
    }
    int rc = resolve_output(cmd, o);
    if (rc != CLI_OK)
        return rc;
    if (arrayfile_usable(sp, o->in_place, err, sizeof err) != NPY_OK ||
        (o->existed && !o->in_place && arrayfile_check_existing(sp, err, sizeof err) != NPY_OK))
        return cli_usage(cmd, "%s: '%s': %s", o->option, o->path, err);
    return CLI_OK;
}

/* Whether output o would overwrite the input named text: the same file, and for a .npz or
 * HDF5 file of both the same member (an input .npz named without one may be any). */
static int overwrites_input(const out_file *o, const char *text)
{
    arrayfile_spec in;
    struct stat st;
    if (!o->existed || arrayfile_parse(text, &in) != NPY_OK)
        return 0;
    int same = stat(in.path, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino;
    if (same && o->spec.format != ARRAYFILE_NPY && o->spec.format != ARRAYFILE_UNKNOWN &&
        in.format == o->spec.format)
        same = !in.member || strcmp(in.member, o->spec.member) == 0;
    arrayfile_spec_free(&in);
    return same;
}

int outputs_check(const char *cmd, out_file *outs, int n, const char *const *inputs, int n_inputs)
{
    int rc;
    for (int i = 0; i < n; i++)
        if (outs[i].path && (rc = prepare_output(cmd, &outs[i])) != CLI_OK)
            return rc;
    for (int i = 0; i < n; i++) {
        out_file *o = &outs[i];
        if (!o->path)
            continue;
        o->leader = i;
        for (int k = 0; k < n_inputs; k++)
            if (inputs[k] && overwrites_input(o, inputs[k]))
                return cli_usage(cmd, "%s: '%s' is the input file '%s'; it would be overwritten",
                                 o->option, o->path, inputs[k]);
        for (int k = 0; k < i; k++) {
            const out_file *p = &outs[k];
            if (!p->path || (strcmp(p->dest, o->dest) != 0 &&
                             !(p->existed && o->existed && p->dev == o->dev && p->ino == o->ino)))
                continue;
            /* two members of one .npz or HDF5 file: written together by the first */
            if (p->spec.format == o->spec.format &&
                (o->spec.format == ARRAYFILE_NPZ || o->spec.format == ARRAYFILE_HDF5) &&
                strcmp(p->spec.member, o->spec.member) != 0) {
                o->leader = p->leader;
                continue;
            }
            return cli_usage(cmd, "%s and %s name the same file '%s'", p->option, o->option,
                             o->path);
        }
    }
    return CLI_OK;
}

void outputs_free(out_file *outs, int n)
{
    for (int i = 0; i < n; i++) {
        free(outs[i].dest);
        free(outs[i].temp);
        free(outs[i].backup);
        outs[i].dest = outs[i].temp = outs[i].backup = NULL;
        arrayfile_spec_free(&outs[i].spec);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Signals while files are written. A handler can reach no state but a global: this flag is the
 * command's one mutable global, and the handler does nothing but set it. It is installed without
 * SA_RESTART, so a write or an open blocked on a FIFO returns EINTR and the run fails cleanly.
 * ------------------------------------------------------------------------------------------ */
static volatile sig_atomic_t caught_signal;

static void on_signal(int signo)
{
    caught_signal = signo;
}

enum { N_WATCHED = 5 };
static const int watched[N_WATCHED] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};

typedef struct signal_guard {
    struct sigaction old[N_WATCHED];
} signal_guard;

/* SIGINT, SIGTERM, SIGHUP: caught (unless ignored already); SIGPIPE and SIGXFSZ: ignored, so a
 * closed pipe or `ulimit -f` make write() fail with EPIPE or EFBIG instead of killing us. */
static void guard_install(signal_guard *g)
{
    caught_signal = 0;
    for (int i = 0; i < N_WATCHED; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sigfillset(&sa.sa_mask);
        sigaction(watched[i], NULL, &g->old[i]);
        if (watched[i] == SIGPIPE || watched[i] == SIGXFSZ)
            sa.sa_handler = SIG_IGN;
        else if (g->old[i].sa_handler == SIG_IGN)
            continue;
        else
            sa.sa_handler = on_signal;
        sigaction(watched[i], &sa, NULL);
    }
}

static void guard_restore(signal_guard *g)
{
    for (int i = 0; i < N_WATCHED; i++)
        sigaction(watched[i], &g->old[i], NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------------ */
static int write_failed(const char *cmd, const out_file *o, int err)
{
    cli_error(cmd, "%s: write failed: %s", o->path, strerror(err));
    return CLI_FAIL;
}

/* The file of outs[lead] into f: its array, or for a .npz or HDF5 file the old file with the
 * arrays of every output it leads. Returns CLI_OK, or CLI_FAIL after printing why. */
static int write_contents(const char *cmd, out_file *outs, int n, int lead, FILE *f)
{
    const out_file *o = &outs[lead];
    if (o->spec.format == ARRAYFILE_NPY || o->spec.format == ARRAYFILE_UNKNOWN)
        return npy_write(f, o->is_complex, o->ndim, o->shape, o->data) == 0
                   ? CLI_OK
                   : write_failed(cmd, o, errno);
    arrayfile_out arrays[8];
    int count = 0;
    for (int i = lead; i < n && count < 8; i++)
        if (outs[i].path && outs[i].leader == lead)
            arrays[count++] = (arrayfile_out){outs[i].spec.member, outs[i].is_complex, outs[i].ndim,
                                              outs[i].shape, outs[i].data};
    char err[256];
    const char *existing = o->existed && !o->in_place ? o->dest : NULL;
    if (arrayfile_write(f, o->spec.format, existing, arrays, count, err, sizeof err) == NPY_OK)
        return CLI_OK;
    cli_error(cmd, "%s: %s", o->path, err);
    return CLI_FAIL;
}

/* Writes the file of outs[lead] to fd and closes it; fsyncs a regular file. */
static int write_fd(const char *cmd, out_file *outs, int n, int lead, int fd, int sync)
{
    const out_file *o = &outs[lead];
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int saved = errno;
        close(fd);
        return write_failed(cmd, o, saved);
    }
    int rc = write_contents(cmd, outs, n, lead, f);
    int failed = rc == CLI_OK && (fflush(f) != 0 || (sync && fsync(fd) != 0));
    int saved = errno;
    if (fclose(f) != 0 && !failed && rc == CLI_OK)
        failed = 1, saved = errno;
    return failed ? write_failed(cmd, o, saved) : rc;
}

/* A new temporary beside o->dest holding the array. */
static int write_temp(const char *cmd, out_file *outs, int n, int lead, mode_t mode)
{
    out_file *o = &outs[lead];
    o->temp = concat(o->dest, ".tmp.XXXXXX", "");
    if (!o->temp) {
        cli_error(cmd, "out of memory");
        return CLI_FAIL;
    }
    int fd = mkstemp(o->temp);
    if (fd < 0) {
        int saved = errno;
        cli_error(cmd, "%s: cannot create a file there: %s", o->path, strerror(saved));
        free(o->temp);
        o->temp = NULL;
        return saved == ENOSPC || saved == EIO || saved == EINTR ? CLI_FAIL : CLI_USAGE;
    }
    (void)fchmod(fd, mode); /* mkstemp makes 0600; give what open() would have given */
    return write_fd(cmd, outs, n, lead, fd, 1);
}

/* An existing FIFO or character device, written where it is. */
static int write_in_place(const char *cmd, out_file *outs, int n, int lead)
{
    out_file *o = &outs[lead];
    int fd = open(o->dest, O_WRONLY | O_NOCTTY);
    struct stat st;
    if (fd < 0)
        return write_failed(cmd, o, errno);
    if (fstat(fd, &st) != 0 || (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))) {
        close(fd);
        cli_error(cmd, "%s: it changed while fmmkit ran (no longer a FIFO or device)", o->path);
        return CLI_FAIL;
    }
    return write_fd(cmd, outs, n, lead, fd, 0);
}

/* Removes the temporaries and puts back what the renames replaced. */
static void discard(out_file *outs, int n)
{
    for (int i = 0; i < n; i++) {
        out_file *o = &outs[i];
        if (o->temp)
            unlink(o->temp);
        if (o->renamed) {
            if (o->backup)
                rename(o->backup, o->dest);
            else if (!o->existed)
                unlink(o->dest);
            o->renamed = 0;
        } else if (o->backup) {
            unlink(o->backup);
        }
        free(o->temp);
        free(o->backup);
        o->temp = o->backup = NULL;
    }
}

/* Renames every temporary into place (signals are blocked by the caller). An old file gets a
 * second name first, so that a rename failing half way can put the earlier ones back. */
static int commit(const char *cmd, out_file *outs, int n)
{
    for (int i = 0; i < n; i++) {
        out_file *o = &outs[i];
        if (!o->temp || !o->existed)
            continue;
        o->backup = concat(o->temp, ".old", "");
        if (o->backup && link(o->dest, o->backup) != 0) {
            free(o->backup);
            o->backup = NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        out_file *o = &outs[i];
        if (!o->temp)
            continue;
        if (rename(o->temp, o->dest) != 0) {
            cli_error(cmd, "%s: cannot rename the finished file into place: %s", o->path,
                      strerror(errno));
            for (int k = 0; k < i; k++)
                if (outs[k].renamed && outs[k].existed && !outs[k].backup)
                    cli_error(cmd, "%s: the new file stays (its old one could not be kept)",
                              outs[k].path);
            return CLI_FAIL;
        }
        o->renamed = 1;
        free(o->temp);
        o->temp = NULL;
    }
    for (int i = 0; i < n; i++) {
        if (outs[i].backup)
            unlink(outs[i].backup);
        free(outs[i].backup);
        outs[i].backup = NULL;
        outs[i].renamed = 0;
    }
    return CLI_OK;
}

/* The directory of each renamed file, fsync'd so the renames survive a crash (best effort). */
static void sync_directories(const out_file *outs, int n)
{
    for (int i = 0; i < n; i++) {
        if (!outs[i].path || outs[i].in_place)
            continue;
        char *copy = strdup(outs[i].dest);
        int fd = copy ? open(dirname(copy), O_RDONLY) : -1;
        if (fd >= 0) {
            (void)fsync(fd);
            close(fd);
        }
        free(copy);
    }
}

int outputs_write(const char *cmd, out_file *outs, int n)
{
    mode_t mask = umask(0);
    umask(mask);
    const mode_t mode = 0666 & ~mask;
    signal_guard guard;
    guard_install(&guard);
    int rc = CLI_OK;
    for (int i = 0; i < n && rc == CLI_OK && !caught_signal; i++)
        if (outs[i].path && outs[i].leader == i && !outs[i].in_place)
            rc = write_temp(cmd, outs, n, i, mode);
    for (int i = 0; i < n && rc == CLI_OK && !caught_signal; i++)
        if (outs[i].path && outs[i].leader == i && outs[i].in_place)
            rc = write_in_place(cmd, outs, n, i);

    /* From here to the end no signal is acted on: the renames happen together or not at all. */
    sigset_t all, old_mask;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_mask);
    const int interrupted = caught_signal;
    if (rc == CLI_OK && !interrupted)
        rc = commit(cmd, outs, n);
    if (rc != CLI_OK || interrupted) {
        discard(outs, n);
        if (interrupted && rc == CLI_OK)
            rc = CLI_FAIL;
    } else {
        sync_directories(outs, n);
    }
    guard_restore(&guard);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    /* A signal caught while we wrote: end by it now that nothing is left behind. */
    const int signo = caught_signal;
    if (signo) {
        if (interrupted)
            cli_error(cmd, "interrupted by signal %d; no output was written", signo);
        raise(signo);
    }
    return rc;
}
