/* bh.c -- the CPU treecode engine (Barnes-Hut, Nakasato's walk). Not implemented yet: a plan
 * with method tree on the CPU is refused at creation (plan.c checks engine->setup). */
#include "internal.h"

const fmk_engine fmk_engine_tree_cpu = {"tree/cpu", NULL, NULL, NULL, NULL, NULL};
