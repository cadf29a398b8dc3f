/* sim_io_check.h -- what the tests of the simulation driver's files share (test_sim_io.c,
 * test_sim_png.c): a scratch directory, file checks, CHECK_IO, and writes under a file-size
 * limit (a disk that fills). Include after check.h. */
#ifndef FMMKIT_TESTS_SIM_IO_CHECK_H
#define FMMKIT_TESTS_SIM_IO_CHECK_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/sim_io.h"

/* call returns expected; on failure prints the message in msg. */
#define CHECK_IO(call, expected, msg)                                                            \
    do {                                                                                         \
        fmk_status check_st_ = (call), check_ex_ = (expected);                                   \
        check_report(check_st_ == check_ex_, __FILE__, __LINE__,                                 \
                     "%s returned %d (%s), expected %d (%s): \"%s\"", #call, (int)check_st_,     \
                     fmk_status_string(check_st_), (int)check_ex_, fmk_status_string(check_ex_), \
                     (msg));                                                                     \
    } while (0)

/* msg contains word. */
static inline int message_has(const char *msg, const char *word)
{
    return msg && strstr(msg, word) != NULL;
}

/* A scratch directory under the working directory (ctest runs in the build tree). */
static inline void scratch_make(char *dir, size_t cap, const char *name)
{
    snprintf(dir, cap, "%.200s.XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
}

/* Removes every file of dir (one level, plus one level of subdirectories) and dir itself. */
static inline void scratch_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%.700s/%.255s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            scratch_remove(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The number of names in dir that contain part (e.g. ".tmp."). */
static inline int count_names(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, part))
            count++;
    closedir(d);
    return count;
}

static inline int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static inline long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Writes text into path (the "old" content a failed write must leave alone). */
static inline void file_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* path holds exactly text. */
static inline int file_holds(const char *path, const char *text)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return got == strlen(text) && memcmp(buf, text, got) == 0;
}

/* Runs job(ctx) in a child process whose files cannot grow beyond limit bytes
 * (RLIMIT_FSIZE; SIGXFSZ ignored, so write() fails with EFBIG as on a full disk). The child's
 * exit status is job's result: 0 when every check in it passed. Returns -1 if the child
 * could not run. */
static inline int with_file_limit(long limit, int (*job)(void *ctx), void *ctx)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        int rc = job(ctx);
        fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

#endif /* FMMKIT_TESTS_SIM_IO_CHECK_H */
