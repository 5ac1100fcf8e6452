/*
 * Binomial-tree broadcast: every rank receives the vector from its parent and forwards it to its
 * children, farthest (largest subtree) first. log2(n) latency terms with the whole vector at each:
 * small vectors.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes <= 64 * 1024 || comm->size <= 2)
        return 100;
    return 30;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank, root = args->root;
    size_t bytes = args->count * args->dsize;

    if (bytes == 0)
        return mesh_sched_build_status(s);
    const void *src = args->rbuf;
    int got = -1;
    if (me == root) {
        /* the root sends straight from its input and copies it aside in parallel */
        src = args->sbuf;
        if (!args->in_place)
            mesh_sched_copy(s, args->rbuf, args->sbuf, bytes, NULL, 0);
    } else {
        got = mesh_sched_recv(s, mesh_binomial_parent(me, root, n), args->rbuf, bytes, NULL, 0);
    }
    for (int i = mesh_binomial_nchildren(me, root, n) - 1; i >= 0; i--)
        mesh_sched_send(s, mesh_binomial_child(me, root, n, i), src, bytes, &got, 1);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_broadcast_binomial = {
    .name = "binomial",
    .desc = "binomial tree from the root; small vectors",
    .type = MESH_COLL_BROADCAST,
    .score = score,
    .build = build};
