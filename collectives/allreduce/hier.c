/*
 * Hierarchical all-reduce: ring reduce-scatter among the ranks of each node, all-reduce of each
 * rank's reduced block across nodes among the ranks with the same local rank (a "rail": ring for
 * large blocks, recursive doubling for small ones), then ring all-gather within the node. Only
 * 1/L of the vector crosses the network per rank (L ranks per node), on L rails at once: the
 * network carries 2 (N-1)/N of the vector per node, the least an all-reduce over N nodes can.
 * Needs the same number of ranks on every node, so that rails line up.
 *
 * Large vectors go in chunks through the three phases as a pipeline: the node reduce-scatter of
 * chunk c + 1 and the node all-gather of chunk c - 1 run while chunk c is on the network. Each
 * phase of a chunk waits for the same phase of the previous chunk, so the chunks enter every
 * resource in order instead of competing for it.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/hier.h"
#include "collectives/patterns/ring.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

/* Rail blocks above this size take the ring, below it recursive doubling. */
#ifndef MESH_COLL_HIER_RAIL_RING_BYTES /* tests lower it to reach both paths */
#define MESH_COLL_HIER_RAIL_RING_BYTES (64 * 1024)
#endif
/* Pipeline chunks: at least this large, at most MESH_COLL_HIER_MAX_CHUNKS of them. */
#ifndef MESH_COLL_HIER_CHUNK_BYTES /* tests lower it to reach several chunks */
#define MESH_COLL_HIER_CHUNK_BYTES ((size_t)4 << 20)
#endif
#define MESH_COLL_HIER_MAX_CHUNKS 8

static int score(const mesh_comm_t *comm, size_t bytes)
{
    int L = mesh_hier_rails(comm->nnodes, comm->node_size);
    if (comm->nnodes <= 1 || L < 1)
        return -1;
    if (L == 1)
        return 1; /* one rank per node: the flat ring plus a copy of the vector */
    if (bytes > 1024 * 1024)
        return 120;
    if (bytes > 64 * 1024)
        return 95;
    return 15;
}

/* One chunk of count elements at element offset base through the three phases; prev[3] holds
 * the previous chunk's phase ends and receives this chunk's. */
static mesh_status_t chunk(const mesh_coll_hier_t *h, const mesh_coll_args_t *args, mesh_sched_t *s,
                           size_t base, size_t count, int prev[3])
{
    size_t ds = args->dsize;
    char *rbuf = (char *)args->rbuf + base * ds;
    mesh_coll_ring_phase_t p;
    MESH_CHECK(mesh_coll_ring_allreduce_setup(s, &h->local, (const char *)args->sbuf + base * ds,
                                              rbuf, count, ds, &prev[0], 1, &p));

    /* 1. within the node: this rank ends with block lr reduced over the node */
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &p, &prev[0]));
    /* 2. across nodes, in place on that block */
    char *blk = p.own;
    size_t len = p.len[h->lr];
    int deps[2] = {prev[0], prev[1]};
    if (len * ds > MESH_COLL_HIER_RAIL_RING_BYTES)
        MESH_CHECK(
            mesh_coll_ring_allreduce_phase(s, &h->rail, blk, blk, len, ds, deps, 2, &prev[1]));
    else
        MESH_CHECK(mesh_coll_rd_allreduce_phase(s, &h->rail, blk, blk, len, ds, deps, 2, &prev[1]));
    /* 3. within the node again */
    int deps3[2] = {prev[1], prev[2]};
    p.src = NULL;
    p.deps = deps3;
    p.ndeps = 2;
    return mesh_coll_ring_allgather_phase(s, &p, &prev[2]);
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    size_t count = args->count, bytes = count * args->dsize;
    mesh_coll_hier_t h;

    MESH_CHECK(mesh_coll_hier_rails(comm, s, "hierarchical all-reduce", &h));
    if (count == 0)
        return mesh_sched_build_status(s);
    size_t nchunks = bytes / MESH_COLL_HIER_CHUNK_BYTES;
    nchunks = nchunks < 1                           ? 1
              : nchunks > MESH_COLL_HIER_MAX_CHUNKS ? MESH_COLL_HIER_MAX_CHUNKS
                                                    : nchunks;
    int prev[3] = {-1, -1, -1};
    for (size_t c = 0; c < nchunks; c++) {
        size_t base = mesh_block_offset(count, (int)nchunks, (int)c);
        MESH_CHECK(chunk(&h, args, s, base, mesh_block_count(count, (int)nchunks, (int)c), prev));
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_hier = {
    .name = "hier",
    .desc = "node reduce-scatter, rail all-reduce across nodes, node all-gather, pipelined in "
            "chunks; multi-node",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
