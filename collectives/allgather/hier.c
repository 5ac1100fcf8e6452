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
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* small vectors: recursive doubling and Bruck's log2(n) steps */
    return mesh_hier_rail_score(comm->nnodes, comm->node_size, bytes, 25);
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int me = comm->rank, node = comm->node_of[me], nn = comm->nnodes;
    int L = comm->node_size[node], lr = comm->local_rank[me];
    size_t ds = a->dsize;
    char *rb = a->rbuf;

    if (mesh_hier_rails(nn, comm->node_size) != L)
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "hierarchical all-gather: nodes have different rank counts");
    size_t *roff =
        mesh_sched_scratch(s, sizeof(size_t) * ((size_t)3 * nn + (size_t)(2 * nn + 1) * L));
    int *rail = mesh_sched_scratch(s, sizeof(int) * (size_t)nn);
    if (!roff || !rail)
        return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical all-gather: no memory");
    /* own_off: [nn + L] zeros, the own block's offset in `own` for either group */
    size_t *rlen = roff + nn, *own_off = rlen + nn, *boff = own_off + nn + L;
    for (int i = 0; i < nn + L; i++)
        own_off[i] = 0;
    size_t *blen = boff + (size_t)L * nn;
    for (int j = 0; j < nn; j++) {
        rail[j] = mesh_hier_rank(comm->node_first, comm->node_ranks, j, lr);
        roff[j] = a->displs[rail[j]];
        rlen[j] = a->counts[rail[j]];
        for (int i = 0; i < L; i++) {
            int r = mesh_hier_rank(comm->node_first, comm->node_ranks, j, i);
            boff[(size_t)j * L + i] = a->displs[r];
            blen[(size_t)j * L + i] = a->counts[r];
        }
    }
    const char *own = a->in_place ? rb + a->displs[me] * ds : (const char *)a->sbuf;
    if (!a->in_place)
        mesh_sched_copy(s, rb + a->displs[me] * ds, a->sbuf, a->counts[me] * ds, NULL, 0);

    /* 1. the rail: block (j, lr) of every node j lands in place */
    mesh_coll_ring_phase_t p = {.g = {.me = node, .n = nn, .ranks = rail},
                                .dsize = ds,
                                .src = own,
                                .src_off = own_off,
                                .acc = rb,
                                .acc_off = roff,
                                .len = rlen};
    int rail_done;
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &rail_done));
    /* 2. within the node, one ring per node j; the own node's ring starts at once */
    for (int j = 0; j < nn; j++) {
        mesh_coll_ring_phase_t q = {
            .g = {.me = lr, .n = L, .ranks = comm->node_ranks + comm->node_first[node]},
            .dsize = ds,
            .src = j == node ? own : NULL,
            .src_off = own_off,
            .acc = rb,
            .acc_off = boff + (size_t)j * L,
            .len = blen + (size_t)j * L,
            .deps = j == node ? NULL : &rail_done,
            .ndeps = j == node ? 0 : 1};
        int done;
        MESH_CHECK(mesh_coll_ring_allgather_phase(s, &q, &done));
    }
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_hier = {
    .name = "hier",
    .desc = "rail all-gather across nodes, then node all-gathers; multi-node",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
