/* owners.c -- where a distributed plan evaluated this rank's targets (the partition's owner
 * array, partition.c), for the simulation driver's migration (src/sim/migrate.c through the
 * hooks of src/mpi/sim/sim_mpi.c; docs/distributed.md, "The simulation under MPI"). */
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_internal.h"

fmk_status fmk_mpi_plan_owners(const fmk_plan *plan, int64_t n, int *owner, int *distributed)
{
    const fmk_mpi_state *s = fmk_mpi_plan_state(plan);
    if (!s || !owner || !distributed || n < 0)
        return FMK_ERR_NULL;
    *distributed = s->let != NULL;
    if (!s->has_points || !s->owner || s->owner_n != n || s->n_targets != n)
        return FMK_ERR_STATE;
    if (n > 0)
        memcpy(owner, s->owner, (size_t)n * sizeof *owner);
    return FMK_OK;
}

void fmk_mpi_plan_owners_here(fmk_plan *plan, int64_t n)
{
    fmk_mpi_state *s = fmk_mpi_plan_state(plan);
    if (!s || n < 0)
        return;
    int *owner = malloc((size_t)(n > 0 ? n : 1) * sizeof *owner);
    free(s->owner);
    s->owner = owner;
    s->owner_n = owner ? n : 0; /* out of memory: the next partition weighs 1 a target */
    for (int64_t i = 0; owner && i < n; i++)
        owner[i] = s->rank;
}
