/*
 * Broadcast by scatter and all-gather (van de Geijn): the root's vector, split into n blocks
 * numbered relative to the root, is scattered down a binomial tree (each subtree receives its
 * contiguous range of blocks), then a ring all-gather gives every rank every block. About twice
 * the vector per rank instead of log2(n) times: large vectors.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/ring.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes > 64 * 1024 && comm->size > 2)
        return 90;
    return 20;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank, root = args->root;
    size_t ds = args->dsize, count = args->count;
    char *rbuf = args->rbuf;
    mesh_coll_ids_t ids = {0};

    if (count == 0)
        return mesh_sched_build_status(s);
    if (me == root && !args->in_place)
        mesh_coll_ids_add(&ids, mesh_sched_copy(s, rbuf, args->sbuf, count * ds, NULL, 0));
    if (n == 1) {
        free(ids.v);
        return mesh_sched_build_status(s);
    }
    /* relative block j: elements [off(j), off(j + 1)); ring member i starts the all-gather with
     * relative block (i - root) mod n */
    size_t *off, *len;
    mesh_status_t st = mesh_coll_ring_split(s, count, n, root, &off, &len);
    if (st != MESH_OK) {
        free(ids.v);
        return st;
    }
    int vr = mesh_binomial_vrank(me, root, n), sub = mesh_binomial_subtree(me, root, n);
    const char *src = me == root ? args->sbuf : rbuf;
    int got = -1;
    if (me != root) {
        size_t lo = mesh_block_offset(count, n, vr), hi = mesh_block_offset(count, n, vr + sub);
        if (hi > lo)
            got = mesh_sched_recv(s, mesh_binomial_parent(me, root, n), rbuf + lo * ds,
                                  (hi - lo) * ds, NULL, 0);
        mesh_coll_ids_add(&ids, got);
    }
    for (int i = mesh_binomial_nchildren(me, root, n) - 1; i >= 0; i--) {
        int ch = mesh_binomial_child(me, root, n, i), cv = mesh_binomial_vrank(ch, root, n);
        size_t lo = mesh_block_offset(count, n, cv);
        size_t hi = mesh_block_offset(count, n, cv + mesh_binomial_subtree(ch, root, n));
        if (hi > lo)
            mesh_coll_ids_add(&ids, mesh_sched_send(s, ch, src + lo * ds, (hi - lo) * ds, &got, 1));
    }
    int scattered, done;
    MESH_CHECK(mesh_coll_ids_join(s, &ids, NULL, 0, &scattered));
    mesh_coll_ring_phase_t p = {.g = mesh_coll_group_all(comm),
                                .dsize = ds,
                                .acc = rbuf,
                                .acc_off = off,
                                .len = len,
                                .deps = &scattered,
                                .ndeps = 1};
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_broadcast_scatter_allgather = {
    .name = "scatter_allgather",
    .desc = "binomial scatter + ring all-gather (van de Geijn); large vectors",
    .type = MESH_COLL_BROADCAST,
    .score = score,
    .build = build};
