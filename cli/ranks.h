/* ranks.h -- what the distributed commands (eval, bench under mpirun) share: each rank's share
 * of a global array, agreed statuses, and one message for the whole job.
 *
 * Every function works without MPI too (built without it, or started without a launcher): the
 * job is then one rank, 0, and nothing is communicated.
 */
#ifndef FMMKIT_CLI_RANKS_H
#define FMMKIT_CLI_RANKS_H

#include <stdint.h>

/* The contiguous near-equal share of total items that rank gets out of size ranks: the first
 * total % size ranks one more than the others; *offset is its first item. */
void ranks_share(int64_t total, int rank, int size, int64_t *offset, int64_t *count);

/* Collective: the largest of every rank's status (an exit status), on every rank. */
int ranks_agree(int status);

/* The messages of a job of several ranks. ranks_hold keeps what this rank writes on stderr in
 * a temporary file (and sends the stdout of every rank but 0 to /dev/null) until ranks_release,
 * which, collectively, prints the held messages of one rank only: the lowest rank among those
 * whose status is the largest (rank 0 when it failed like the others, or when all succeeded).
 * So a failure every rank sees (a usage error, a library status agreed by the distributed plan)
 * is said once, and a failure of one rank's own files is said by that rank. Without MPI, or on
 * one rank, both do nothing but return the status. */
typedef struct ranks_held {
    int active;    /* 1 while held */
    int saved_err; /* the real stderr, dup'ed */
    int saved_out; /* the real stdout, dup'ed (ranks other than 0), else -1 */
    int held;      /* the temporary file that stands for stderr */
} ranks_held;

void ranks_hold(ranks_held *h);
int ranks_release(ranks_held *h, int status);

#endif /* FMMKIT_CLI_RANKS_H */
