/*
 * Dissemination barrier: in round k each rank signals rank + 2^k once it has heard the signals
 * of all earlier rounds, so after ceil(log2(size)) rounds everyone has transitively heard from
 * all. The signals are zero-byte messages.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/dissemination.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    return 10;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank;
    int rounds = mesh_dissem_nrounds(n);
    /* zero-byte messages still want a valid address */
    char *token = rounds > 0 ? mesh_sched_scratch(s, 1) : NULL;
    if (rounds > 0 && token == NULL)
        return mesh_sched_build_status(s);
    int heard = -1;
    for (int k = 0; k < rounds; k++) {
        /* the signal of round k goes out only after the signals of all earlier rounds
         * arrived: it vouches for everything this rank has heard so far */
        mesh_sched_send(s, mesh_dissem_send_peer(r, n, k), token, 0, &heard, 1);
        int rv = mesh_sched_recv(s, mesh_dissem_recv_peer(r, n, k), token, 0, NULL, 0);
        heard = mesh_sched_nop(s, (int[]){heard, rv}, 2);
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_barrier_dissemination = {
    .name = "dissemination",
    .desc = "dissemination, ceil(log2) rounds of zero-byte messages",
    .type = MESH_COLL_BARRIER,
    .score = score,
    .build = build};
