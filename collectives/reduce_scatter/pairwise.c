/*
 * Pairwise reduce-scatter: at step k a rank sends block (rank + k) straight to its owner and
 * receives its own block's contribution from rank - k, reducing it into the result. n - 1 steps,
 * each rank sends exactly what it does not keep: good for medium vectors and uneven counts.
 * Two receive slots alternate so that a receive overlaps the previous reduction.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/ring.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* all n - 1 messages in flight at once: measured no better than the ring on shared memory,
     * so only a fallback by default (MESH_TUNE selects it) */
    return 35;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank;
    size_t ds = args->dsize, own = args->counts[me];
    const char *sbuf = args->sbuf;
    const char *mine = sbuf + args->displs[me] * ds;

    if (n == 1 || own == 0) {
        if (own && !args->in_place)
            mesh_sched_copy(s, args->rbuf, mine, own * ds, NULL, 0);
        if (n == 1)
            return mesh_sched_build_status(s);
    }
    char *slot = own ? mesh_sched_scratch(s, 2 * own * ds) : NULL;
    if (own && !slot)
        return mesh_error(MESH_ERR_NO_MEMORY, "pairwise reduce-scatter: no memory for %zu bytes",
                          2 * own * ds);
    int red[2] = {-1, -1}, last = -1;
    for (int k = 1; k < n; k++) {
        int to = mesh_ring_mod(me + k, n), from = mesh_ring_mod(me - k, n);
        if (args->counts[to])
            mesh_sched_send(s, to, sbuf + args->displs[to] * ds, args->counts[to] * ds, NULL, 0);
        if (!own)
            continue;
        char *buf = slot + (size_t)(k % 2) * own * ds;
        int rv = mesh_sched_recv(s, from, buf, own * ds, &red[k % 2], 1);
        if (k == 1)
            last = mesh_sched_reduce3(s, args->rbuf, mine, buf, own, &rv, 1);
        else
            last = mesh_sched_reduce(s, args->rbuf, buf, own, (int[]){rv, last}, 2);
        red[k % 2] = last;
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_pairwise = {
    .name = "pairwise",
    .desc = "direct exchange of every block with its owner; any counts",
    .type = MESH_COLL_REDUCE_SCATTER,
    .score = score,
    .build = build};
