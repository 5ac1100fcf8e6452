/* placeholder until the algorithm lands */
#include "collectives/algo.h"

static int score(const mesh_comm_t *comm, const mesh_coll_args_t *args) { return -1; }
static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    return MESH_ERR_UNSUPPORTED;
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_ring = {
    .name = "ring", .desc = "", .type = MESH_COLL_REDUCE_SCATTER, .score = score, .build = build};
