/* tree.cu -- the GPU treecode engine. Not written yet: its setup is NULL, so plan.c refuses a
 * plan with method tree on the GPU at creation ("not available yet"). */
#include "cuda_internal.h"

extern "C" const fmk_engine fmk_engine_tree_cuda = {"tree/cuda", NULL, NULL, NULL, NULL, NULL};
