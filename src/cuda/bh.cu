/* bh.cu -- the GPU treecode engine. Not implemented yet: a plan with method tree on the GPU is
 * refused at creation (plan.c checks engine->setup). */
#include "../internal.h"

extern "C" const fmk_engine fmk_engine_tree_cuda = {"tree/cuda", NULL, NULL, NULL, NULL, NULL};
