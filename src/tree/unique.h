/* unique.h -- coincident points: the distinct points of a set, for methods that sum a run of
 * coincident sources as one source and evaluate coincident targets once (issue 31; the 2D FMM).
 * Points are in the plan's frame (core/internal.h), where "coincident" means equal mapped
 * coordinates (docs/kernels.md). */
#ifndef FMMKIT_UNIQUE_H
#define FMMKIT_UNIQUE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Numbers the distinct points of x (n points of dim coordinates, interleaved) in order of
 * first appearance: slot[i] is the number of point i's first copy. Returns the number of
 * distinct points (n when no two coincide), or -1 when out of memory. O(n) expected time
 * (a hash table of 8 to 16 bytes a point, freed before returning); deterministic. */
int64_t fmk_unique_points(int dim, int64_t n, const double *x, int64_t *slot);

#ifdef __cplusplus
}
#endif

#endif /* FMMKIT_UNIQUE_H */
