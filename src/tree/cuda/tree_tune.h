/* tree_tune.h -- the knobs of the GPU octree's build (tree3d_cuda.h), in their own header so
 * that C tests and benchmarks can hold a copy of an engine's knob struct (core/tune.h). */
#ifndef FMMKIT_TREE_CUDA_TREE_TUNE_H
#define FMMKIT_TREE_CUDA_TREE_TUNE_H

#include <stdint.h>

#include "core/tune.h"

/* The GPU tree build's tuning knobs (core/tune.h): part of the tuning struct of every engine
 * that builds GPU trees (member "tree": knobs "treecode.tree.*", "fmm3d.tree.*"). The engine
 * copies its plan's values into fmk_cuda_tree.tune before each build. */
typedef struct fmk_cuda_tree_tune {
    int64_t small_max;      /* trees of at most this many points are built by one block (2^16) */
    int64_t split_sort_min; /* more points: the split sort, the keys' top 32 bits first (2^16) */
    int split_run_max;      /* a longer out-of-order run of equal top bits: sort all 63 (1024) */
    int sort_tiles;         /* small trees of at most this many times 8192 points sort their
                               keys by one block per tile and merge them (4; 1 to 8) */
    int fused_max;          /* trees of at most this many points get keys, sort and nodes from
                               one launch of one block (4096; at most 8192) */
} fmk_cuda_tree_tune;

#define FMK_CUDA_TREE_TUNE_DEFAULTS {1ll << 16, 1ll << 16, 1024, 4, 4096}

/* The rows of the knob table for member `member` of tuning struct `type`. */
#define FMK_CUDA_TREE_KNOBS(type, member)                                                       \
    FMK_KNOB(type, member.small_max, FMK_TUNE_INT64, 0, 1e15,                                   \
             "one-block trees up to this many points"),                                         \
        FMK_KNOB(type, member.split_sort_min, FMK_TUNE_INT64, 0, 1e15,                          \
                 "split sort from this many points"),                                           \
        FMK_KNOB(type, member.split_run_max, FMK_TUNE_INT, 1, 1e9, "split sort's longest run"), \
        FMK_KNOB(type, member.sort_tiles, FMK_TUNE_INT, 1, 8, "small trees' sort tiles"),       \
        FMK_KNOB(type, member.fused_max, FMK_TUNE_INT, 0, 8192, "one-launch trees up to")

#endif /* FMMKIT_TREE_CUDA_TREE_TUNE_H */
