/*
 * Binomial-tree reduce: each rank receives the partial results of its children's subtrees
 * (nearest child first), reduces them into its own contribution and sends the sum to its parent.
 * log2(n) latency terms, whole vector per step: small vectors. The receives from all children are
 * posted at once, into one scratch slot each, so that they overlap; the reductions run in a fixed
 * order, which makes the result independent of arrival order.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes <= 64 * 1024)
        return 100;
    return 30;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank, root = args->root;
    size_t ds = args->dsize, bytes = args->count * ds;

    if (bytes == 0)
        return mesh_sched_build_status(s);
    int nch = mesh_binomial_nchildren(me, root, n);
    if (nch == 0) {
        if (me == root) { /* n == 1 */
            if (!args->in_place)
                mesh_sched_copy(s, args->rbuf, args->sbuf, bytes, NULL, 0);
        } else {
            mesh_sched_send(s, mesh_binomial_parent(me, root, n), args->sbuf, bytes, NULL, 0);
        }
        return mesh_sched_build_status(s);
    }
    /* the root accumulates in its receive buffer; inner ranks in scratch (their rbuf is not
     * theirs to write) */
    char *tmp = mesh_sched_scratch(s, (size_t)(nch + (me != root)) * bytes);
    if (!tmp)
        return mesh_error(MESH_ERR_NO_MEMORY, "binomial reduce: no memory for %zu bytes",
                          (size_t)(nch + 1) * bytes);
    char *acc = me == root ? args->rbuf : tmp + (size_t)nch * bytes;
    const void *have = args->sbuf;
    int last = -1;
    for (int i = 0; i < nch; i++) {
        int child = mesh_binomial_child(me, root, n, i);
        int rv = mesh_sched_recv(s, child, tmp + (size_t)i * bytes, bytes, NULL, 0);
        last = mesh_sched_reduce3(s, acc, have, tmp + (size_t)i * bytes, args->count,
                                  (int[]){rv, last}, 2);
        have = acc;
    }
    if (me != root)
        mesh_sched_send(s, mesh_binomial_parent(me, root, n), acc, bytes, &last, 1);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_binomial = {
    .name = "binomial",
    .desc = "binomial tree to the root, reducing at inner ranks; small vectors",
    .type = MESH_COLL_REDUCE,
    .score = score,
    .build = build};
