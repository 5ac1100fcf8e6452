/*
 * Linear scatter: the root sends every rank its block directly, all at once. One hop per byte,
 * so it is the choice for large blocks.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    return bytes <= ((size_t)64 << 10) ? 10 : 30;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, root = a->root;
    size_t blk = a->count * a->dsize;
    const char *sb = a->sbuf;
    /* every rank knows the count: with nothing to move there is nothing to wait for */
    if (blk == 0)
        return mesh_sched_status(s);

    if (r != root) {
        mesh_sched_recv(s, root, a->rbuf, blk, NULL, 0);
        return mesh_sched_status(s);
    }
    if (!a->in_place)
        mesh_sched_copy(s, a->rbuf, sb + (size_t)r * blk, blk, NULL, 0);
    for (int i = 1; i < n; i++) {
        int p = (root + i) % n;
        mesh_sched_send(s, p, sb + (size_t)p * blk, blk, NULL, 0);
    }
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_scatter_linear = {
    .name = "linear",
    .desc = "the root sends every rank its block directly; large messages",
    .type = MESH_COLL_SCATTER,
    .score = score,
    .build = build};
