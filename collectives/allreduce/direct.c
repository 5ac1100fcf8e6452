/*
 * Direct all-reduce: every rank sends its whole vector to every other rank and reduces the n
 * vectors itself, in rank order, so that every rank gets identical bits. One round of n - 1
 * messages each way instead of recursive doubling's log2(n) rounds: a rank waits for its peers
 * once per call, which is what counts where ranks share CPUs and each wait can cost a hand-over
 * of the CPU. n (n - 1) messages of the whole vector: for small vectors on a few ranks of one
 * node only.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

#include <stdlib.h>

#define DIRECT_MAX_RANKS 8 /* dependencies kept on the stack up to this many ranks */

/* Offered only when forced (MESH_TUNE=allreduce:direct). Where ranks share CPUs and sleep, each
 * of the n - 1 messages that reach a rank may wake it: on 8 ranks of 2 busy CPUs an 8-byte call
 * took 220-250 us against recursive doubling's 150-170, with twice its futex calls; on 4 ranks
 * the two were level. */
static int score(const mesh_comm_t *comm, size_t bytes)
{
    (void)comm;
    (void)bytes;
    return 1;
}

/* The input of rank i as this rank reads it. */
static const char *input_of(int i, int me, const char *own, const char *tmp, size_t bytes)
{
    if (i == me)
        return own;
    return tmp + (size_t)(i < me ? i : i - 1) * bytes;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank;
    size_t bytes = args->count * args->dsize;

    if (bytes == 0)
        return mesh_sched_build_status(s);
    if (n == 1) {
        if (!args->in_place)
            mesh_sched_copy(s, args->rbuf, args->sbuf, bytes, NULL, 0);
        return mesh_sched_build_status(s);
    }
    /* the n - 1 vectors received, then (in place) a copy of our own: the result overwrites
     * rbuf while our input is still to be read in rank order */
    char *tmp = mesh_sched_scratch(s, (size_t)n * bytes);
    int local[2 * DIRECT_MAX_RANKS];
    int *deps = n <= DIRECT_MAX_RANKS ? local : malloc(sizeof(int) * 2 * (size_t)n);
    if (tmp == NULL || deps == NULL) {
        if (deps != local)
            free(deps);
        return mesh_error(MESH_ERR_NO_MEMORY, "direct all-reduce: no memory for %d x %zu bytes", n,
                          bytes);
    }
    const char *own = args->sbuf;
    int nd = 0;
    if (args->in_place) {
        char *copy = tmp + (size_t)(n - 1) * bytes;
        deps[nd++] = mesh_sched_copy(s, copy, args->sbuf, bytes, NULL, 0);
        own = copy;
    }
    /* every receive is posted before any send, so that messages land in place */
    for (int k = 1; k < n; k++) {
        int peer = (me + k) % n;
        deps[nd++] =
            mesh_sched_recv(s, peer, (char *)input_of(peer, me, own, tmp, bytes), bytes, NULL, 0);
    }
    /* the sends read sbuf, which is rbuf in place: the reduction waits for them too */
    for (int k = 1; k < n; k++)
        deps[nd++] = mesh_sched_send(s, (me + k) % n, args->sbuf, bytes, NULL, 0);
    int last = mesh_sched_reduce3(s, args->rbuf, input_of(0, me, own, tmp, bytes),
                                  input_of(1, me, own, tmp, bytes), args->count, deps, nd);
    for (int i = 2; i < n; i++)
        last = mesh_sched_reduce(s, args->rbuf, input_of(i, me, own, tmp, bytes), args->count,
                                 &last, 1);
    if (deps != local)
        free(deps);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_direct = {
    .name = "direct",
    .desc = "every rank sends its vector to every other and reduces all of them, one round; "
            "chosen only when forced (small vectors, few ranks of one node)",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
