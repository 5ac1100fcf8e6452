/*
 * Linear scatter: the root sends every rank its block directly, all at once. One hop per byte,
 * so it is the choice for large blocks: the linear gather run the other way, by the same builder
 * (gather/linear.c).
 */
#include "collectives/algo.h"
#include "collectives/phases.h"

const mesh_coll_algo_t mesh_coll_scatter_linear = {
    .name = "linear",
    .desc = "the root sends every rank its block directly; large messages",
    .type = MESH_COLL_SCATTER,
    .score = mesh_coll_linear_score,
    .build = mesh_coll_linear_build};
