/*
 * Hierarchical reduce-scatter, node first. With N nodes of L ranks, rank (k, l) needs block
 * (k, l) reduced over every rank. Within each node, one ring reduce-scatter per node j over the
 * blocks of (j, 0..L-1) leaves rank (k, l) with the node's partial of every block of its rail,
 * (j, l) for all j; a ring reduce-scatter over the rail then finishes block (k, l). Each rank
 * sends (N-1) blocks across nodes; the reverse order (rails first, over the L blocks each node
 * needs) would send L times more (patterns/hier.h). The node rings of the N rail blocks run side
 * by side. Any counts (the v-variant too); needs the same number of ranks on every node.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/hier.h"
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* small vectors: recursive halving's log2(n) steps */
    return mesh_hier_rail_score(comm->nnodes, comm->node_size, bytes, 50);
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int me = comm->rank, node = comm->node_of[me], nn = comm->nnodes;
    int L = comm->node_size[node], lr = comm->local_rank[me];
    size_t ds = a->dsize;

    if (mesh_hier_rails(nn, comm->node_size) != L)
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "hierarchical reduce-scatter: nodes have different rank counts");
    /* rail blocks, each node's block offsets and lengths, the rail members, the partials */
    size_t *toff = mesh_sched_scratch(s, sizeof(size_t) * ((size_t)2 * nn + (size_t)2 * L * nn));
    int *rail = mesh_sched_scratch(s, sizeof(int) * (size_t)nn);
    int *p1 = mesh_sched_scratch(s, sizeof(int) * (size_t)nn);
    if (!toff || !rail || !p1)
        return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical reduce-scatter: no memory");
    size_t *rlen = toff + nn, *boff = rlen + nn, *blen = boff + (size_t)L * nn, tot = 0;
    for (int j = 0; j < nn; j++) {
        rail[j] = mesh_hier_rank(comm->node_first, comm->node_ranks, j, lr);
        toff[j] = tot;
        rlen[j] = a->counts[rail[j]];
        tot += rlen[j];
        for (int i = 0; i < L; i++) {
            int r = mesh_hier_rank(comm->node_first, comm->node_ranks, j, i);
            boff[(size_t)j * L + i] = a->displs[r];
            blen[(size_t)j * L + i] = a->counts[r];
        }
    }
    char *tmp = mesh_sched_scratch(s, tot ? tot * ds : 1);
    if (!tmp)
        return mesh_error(MESH_ERR_NO_MEMORY,
                          "hierarchical reduce-scatter: no memory for %zu "
                          "bytes",
                          tot * ds);

    /* 1. within the node: the node's partial of rail block j lands at tmp + toff[j] */
    for (int j = 0; j < nn; j++) {
        mesh_coll_ring_phase_t p = {
            .g = {.me = lr, .n = L, .ranks = comm->node_ranks + comm->node_first[node]},
            .dsize = ds,
            .src = a->sbuf,
            .src_off = boff + (size_t)j * L,
            .own = tmp + toff[j] * ds,
            .len = blen + (size_t)j * L};
        MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &p, &p1[j]));
    }
    /* 2. across nodes on the rail; in place, the own block of sbuf was read in step 1 already */
    mesh_coll_ring_phase_t q = {.g = {.me = node, .n = nn, .ranks = rail},
                                .dsize = ds,
                                .src = tmp,
                                .src_off = toff,
                                .own = a->rbuf,
                                .len = rlen,
                                .deps = p1,
                                .ndeps = nn};
    int done;
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &q, &done));
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_hier = {
    .name = "hier",
    .desc = "node reduce-scatter of each rail's blocks, then rail reduce-scatter; multi-node",
    .type = MESH_COLL_REDUCE_SCATTER,
    .score = score,
    .build = build};
