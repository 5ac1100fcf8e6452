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
#include "collectives/phases.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* small vectors: recursive halving's log2(n) steps */
    return mesh_hier_rail_score(comm->nnodes, comm->node_size, bytes, 50);
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    size_t ds = a->dsize;
    mesh_coll_hier_t h;
    mesh_coll_hier_blocks_t b;

    MESH_CHECK(mesh_coll_hier_rails(comm, s, "hierarchical reduce-scatter", &h));
    MESH_CHECK(mesh_coll_hier_blocks(comm, s, &h, a->counts, a->displs, &b));
    int nn = h.nnodes, L = h.L;
    /* the node partials of the rail blocks, packed, and the ends of their node phases */
    size_t *toff = mesh_sched_scratch(s, sizeof(size_t) * (size_t)nn), tot = 0;
    int *p1 = mesh_sched_scratch(s, sizeof(int) * (size_t)nn);
    if (!toff || !p1)
        return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical reduce-scatter: no memory");
    for (int j = 0; j < nn; j++) {
        toff[j] = tot;
        tot += b.rail_len[j];
    }
    char *tmp = mesh_sched_scratch(s, tot ? tot * ds : 1);
    if (!tmp)
        return mesh_error(MESH_ERR_NO_MEMORY,
                          "hierarchical reduce-scatter: no memory for %zu bytes", tot * ds);

    /* 1. within the node: the node's partial of rail block j lands at tmp + toff[j] */
    for (int j = 0; j < nn; j++) {
        mesh_coll_ring_phase_t p = {.g = h.local,
                                    .dsize = ds,
                                    .src = a->sbuf,
                                    .src_off = b.node_off + (size_t)j * L,
                                    .own = tmp + toff[j] * ds,
                                    .len = b.node_len + (size_t)j * L};
        MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &p, &p1[j]));
    }
    /* 2. across nodes on the rail; in place, the own block of sbuf was read in step 1 already */
    mesh_coll_ring_phase_t q = {.g = h.rail,
                                .dsize = ds,
                                .src = tmp,
                                .src_off = toff,
                                .own = a->rbuf,
                                .len = b.rail_len,
                                .deps = p1,
                                .ndeps = nn};
    int done;
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &q, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_hier = {
    .name = "hier",
    .desc = "node reduce-scatter of each rail's blocks, then rail reduce-scatter; multi-node",
    .type = MESH_COLL_REDUCE_SCATTER,
    .score = score,
    .build = build};
