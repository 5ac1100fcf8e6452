/*
 * Linear gather: every rank sends its block straight to the root, which posts all receives at
 * once into their final places. One hop per byte, so it is the choice for large blocks. The
 * builder serves the linear scatter too, which moves the same blocks the other way.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

mesh_status_t mesh_coll_linear_build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, root = a->root, to_root = a->type == MESH_COLL_GATHER;
    size_t blk = a->count * a->dsize;
    /* the root's n blocks in rank order, and this rank's own block */
    char *all = to_root ? a->rbuf : (char *)a->sbuf;
    /* every rank knows the count: with nothing to move there is nothing to wait for */
    if (blk == 0)
        return mesh_sched_build_status(s);

    if (r != root) {
        if (to_root)
            mesh_sched_send(s, root, a->sbuf, blk, NULL, 0);
        else
            mesh_sched_recv(s, root, a->rbuf, blk, NULL, 0);
        return mesh_sched_build_status(s);
    }
    if (!a->in_place) {
        if (to_root)
            mesh_sched_copy(s, all + (size_t)r * blk, a->sbuf, blk, NULL, 0);
        else
            mesh_sched_copy(s, a->rbuf, all + (size_t)r * blk, blk, NULL, 0);
    }
    /* start with the rank after the root so that not every root hits rank 0 first */
    for (int i = 1; i < n; i++) {
        int p = (root + i) % n;
        if (to_root)
            mesh_sched_recv(s, p, all + (size_t)p * blk, blk, NULL, 0);
        else
            mesh_sched_send(s, p, all + (size_t)p * blk, blk, NULL, 0);
    }
    return mesh_sched_build_status(s);
}

int mesh_coll_linear_score(const mesh_comm_t *comm, size_t bytes)
{
    return bytes <= ((size_t)64 << 10) ? 10 : 30;
}

const mesh_coll_algo_t mesh_coll_gather_linear = {
    .name = "linear",
    .desc = "every rank sends to the root directly; large messages",
    .type = MESH_COLL_GATHER,
    .score = mesh_coll_linear_score,
    .build = mesh_coll_linear_build};
