/* ranks.c -- shares, agreed statuses and held messages of the distributed commands (ranks.h). */
#define _POSIX_C_SOURCE 200809L
#include "ranks.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "cli_mpi.h"

#ifdef FMK_CLI_MPI
#include <mpi.h>
#endif

void ranks_share(int64_t total, int rank, int size, int64_t *offset, int64_t *count)
{
    const int64_t base = total / size, extra = total % size;
    *count = base + (rank < extra ? 1 : 0);
    *offset = base * rank + (rank < extra ? rank : extra);
}

int ranks_agree(int status)
{
    return cli_mpi_exit_status(status);
}

void ranks_hold(ranks_held *h)
{
    h->active = 0;
    h->saved_err = h->saved_out = h->held = -1;
    if (cli_mpi_size() <= 1)
        return;
    fflush(stdout);
    fflush(stderr);
    FILE *tmp = tmpfile();
    int held = tmp ? dup(fileno(tmp)) : -1;
    if (tmp)
        fclose(tmp); /* the file lives on through its duplicate, already unlinked */
    int saved = held >= 0 ? dup(STDERR_FILENO) : -1;
    if (saved < 0 || dup2(held, STDERR_FILENO) < 0) {
        /* nothing held: every rank's messages go straight out */
        if (held >= 0)
            close(held);
        if (saved >= 0)
            close(saved);
        return;
    }
    h->held = held;
    h->saved_err = saved;
    h->active = 1;
    if (cli_mpi_rank() != 0) {
        int null = open("/dev/null", O_WRONLY);
        h->saved_out = null >= 0 ? dup(STDOUT_FILENO) : -1;
        if (h->saved_out >= 0)
            dup2(null, STDOUT_FILENO);
        if (null >= 0)
            close(null);
    }
}

#ifdef FMK_CLI_MPI
/* Copies the held file to fd. */
static void copy_held(int held, int fd)
{
    char buf[4096];
    ssize_t got;
    if (lseek(held, 0, SEEK_SET) < 0)
        return;
    while ((got = read(held, buf, sizeof buf)) > 0)
        for (ssize_t done = 0; done < got;) {
            ssize_t put = write(fd, buf + done, (size_t)(got - done));
            if (put <= 0)
                return;
            done += put;
        }
}

int ranks_release(ranks_held *h, int status)
{
    if (cli_mpi_size() <= 1)
        return status;
    struct {
        int status, rank;
    } mine = {status, cli_mpi_rank()}, worst;
    MPI_Allreduce(&mine, &worst, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
    fflush(stdout);
    fflush(stderr);
    if (h->saved_out >= 0) {
        dup2(h->saved_out, STDOUT_FILENO);
        close(h->saved_out);
    }
    if (h->active) {
        dup2(h->saved_err, STDERR_FILENO);
        close(h->saved_err);
        if (worst.rank == mine.rank)
            copy_held(h->held, STDERR_FILENO);
        close(h->held);
    }
    h->active = 0;
    h->saved_out = -1;
    return worst.status;
}
#else
int ranks_release(ranks_held *h, int status)
{
    (void)h;
    return status;
}
#endif
