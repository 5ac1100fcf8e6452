/*
 * Hierarchical all-gather, rails first. With N nodes of L ranks, a ring all-gather over each
 * rail ((0, l), ..., (N-1, l)) brings every rank the blocks of its rail; then, within the node,
 * one ring all-gather per node j spreads the blocks of (j, 0..L-1). Every block enters every
 * other node exactly once, on its own rail: (N-1) blocks per rank cross the network, the least
 * any order can do, spread over all L ranks of a node. Gathering the node first and exchanging
 * whole nodes on the rails would send L times more across nodes; a leader per node sends as
 * little in total but funnels it through one rank and adds a gather and a scatter within the
 * node (patterns/hier.h). The ring of the own node's blocks needs nothing from the network and
 * runs alongside the rail phase. Any counts and displacements (the v-variant too); needs the same
 * number of ranks on every node.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/hier.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* small vectors: recursive doubling and Bruck's log2(n) steps */
    return mesh_hier_rail_score(comm->nnodes, comm->node_size, bytes, 25);
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int me = comm->rank;
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    mesh_coll_hier_t h;
    mesh_coll_hier_blocks_t b;

    MESH_CHECK(mesh_coll_hier_rails(comm, s, "hierarchical all-gather", &h));
    MESH_CHECK(mesh_coll_hier_blocks(comm, s, &h, a->counts, a->displs, &b));
    const char *own = a->in_place ? rb + a->displs[me] * ds : (const char *)a->sbuf;
    if (!a->in_place)
        mesh_sched_copy(s, rb + a->displs[me] * ds, a->sbuf, a->counts[me] * ds, NULL, 0);

    /* 1. the rail: block (j, lr) of every node j lands in place */
    mesh_coll_ring_phase_t p = {
        .g = h.rail, .dsize = ds, .src = own, .acc = rb, .acc_off = b.rail_off, .len = b.rail_len};
    int rail_done;
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &rail_done));
    /* 2. within the node, one ring per node j; the own node's ring starts at once */
    for (int j = 0; j < h.nnodes; j++) {
        mesh_coll_ring_phase_t q = {.g = h.local,
                                    .dsize = ds,
                                    .src = j == h.node ? own : NULL,
                                    .acc = rb,
                                    .acc_off = b.node_off + (size_t)j * h.L,
                                    .len = b.node_len + (size_t)j * h.L,
                                    .deps = j == h.node ? NULL : &rail_done,
                                    .ndeps = j == h.node ? 0 : 1};
        int done;
        MESH_CHECK(mesh_coll_ring_allgather_phase(s, &q, &done));
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_hier = {
    .name = "hier",
    .desc = "rail all-gather across nodes, then node all-gathers; multi-node",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
