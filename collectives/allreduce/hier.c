/*
 * Hierarchical all-reduce: ring reduce-scatter among the ranks of each node, all-reduce of each
 * rank's reduced block across nodes among the ranks with the same local rank (a "rail": ring for
 * large blocks, recursive doubling for small ones), then ring all-gather within the node. Only
 * 1/L of the vector crosses the network per rank (L ranks per node), on L rails at once. Needs
 * the same number of ranks on every node, so that rails line up.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/ring.h"
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

/* Rail blocks above this size take the ring, below it recursive doubling. */
#ifndef MESH_COLL_HIER_RAIL_RING_BYTES /* tests lower it to reach both paths */
#define MESH_COLL_HIER_RAIL_RING_BYTES (64 * 1024)
#endif

static int score(const mesh_comm_t *comm, const mesh_coll_args_t *args)
{
    if (comm->nnodes <= 1 || !comm->node_size)
        return -1;
    for (int k = 1; k < comm->nnodes; k++)
        if (comm->node_size[k] != comm->node_size[0])
            return -1;
    if (args->bytes > 1024 * 1024)
        return 120;
    if (args->bytes > 64 * 1024)
        return 95;
    return 15;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int me = comm->rank, node = comm->node_of[me], nn = comm->nnodes;
    int L = comm->node_size[node], lr = comm->local_rank[me];
    size_t ds = args->dsize, count = args->count;
    char *rbuf = args->rbuf;

    if (count == 0)
        return mesh_sched_status(s);
    for (int k = 0; k < nn; k++)
        if (comm->node_size[k] != L)
            return mesh_error(MESH_ERR_UNSUPPORTED,
                              "hierarchical all-reduce: node %d has %d "
                              "ranks, node %d has %d",
                              k, comm->node_size[k], node, L);
    size_t *off = mesh_sched_scratch(s, 2 * (size_t)L * sizeof(size_t) + (size_t)nn * sizeof(int));
    if (!off)
        return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical all-reduce: no memory");
    size_t *len = off + L;
    int *rail = (int *)(len + L);
    for (int i = 0; i < L; i++) {
        off[i] = mesh_block_offset(count, L, i);
        len[i] = mesh_block_count(count, L, i);
    }
    for (int k = 0; k < nn; k++)
        rail[k] = comm->node_ranks[comm->node_first[k] + lr];

    /* 1. within the node: this rank ends with block lr reduced over the node */
    mesh_coll_ring_phase_t p = {
        .g = {.me = lr, .n = L, .ranks = comm->node_ranks + comm->node_first[node]},
        .dsize = ds,
        .src = args->sbuf,
        .src_off = off,
        .acc = rbuf,
        .acc_off = off,
        .own = rbuf + off[lr] * ds,
        .len = len};
    int rs, ar, ag;
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &p, &rs));
    /* 2. across nodes, in place on that block */
    mesh_coll_group_t g = {.me = node, .n = nn, .ranks = rail};
    char *blk = rbuf + off[lr] * ds;
    if (len[lr] * ds > MESH_COLL_HIER_RAIL_RING_BYTES)
        MESH_CHECK(mesh_coll_ring_allreduce_phase(s, &g, blk, blk, len[lr], ds, &rs, 1, &ar));
    else
        MESH_CHECK(mesh_coll_rd_allreduce_phase(s, &g, blk, blk, len[lr], ds, &rs, 1, &ar));
    /* 3. within the node again */
    p.src = NULL;
    p.deps = &ar;
    p.ndeps = 1;
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &ag));
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_hier = {
    .name = "hier",
    .desc = "node reduce-scatter, rail all-reduce across nodes, node all-gather; multi-node",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
