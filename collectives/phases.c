/*
 * The groups and block layouts the schedule phases run over: this rank's node and rail, the
 * blocks of a collective as the node and rail phases see them, and the ring's walk and even
 * split. Set up here once for every algorithm that composes phases.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/phases.h"
#include "collectives/patterns/hier.h"
#include "collectives/patterns/ring.h"
#include "libmesh/log.h"

void mesh_coll_hier_node(const mesh_comm_t *comm, mesh_coll_hier_t *h)
{
    int me = comm->rank, node = comm->node_of[me];
    *h = (mesh_coll_hier_t){.node = node,
                            .nnodes = comm->nnodes,
                            .L = comm->node_size[node],
                            .lr = comm->local_rank[me],
                            .local = {.me = comm->local_rank[me],
                                      .n = comm->node_size[node],
                                      .ranks = comm->node_ranks + comm->node_first[node]}};
}

mesh_status_t mesh_coll_hier_rails(const mesh_comm_t *comm, mesh_sched_t *s, const char *what,
                                   mesh_coll_hier_t *h)
{
    mesh_coll_hier_t v;
    mesh_coll_hier_node(comm, &v);
    if (mesh_hier_rails(v.nnodes, comm->node_size) != v.L)
        return mesh_error(MESH_ERR_UNSUPPORTED, "%s: nodes have different rank counts", what);
    int *rail = mesh_sched_scratch(s, (size_t)v.nnodes * sizeof(int));
    if (!rail)
        return mesh_error(MESH_ERR_NO_MEMORY, "%s: no memory for the rail", what);
    for (int k = 0; k < v.nnodes; k++)
        rail[k] = mesh_hier_rank(comm->node_first, comm->node_ranks, k, v.lr);
    v.rail = (mesh_coll_group_t){.me = v.node, .n = v.nnodes, .ranks = rail};
    *h = v;
    return MESH_OK;
}

mesh_status_t mesh_coll_hier_blocks(const mesh_comm_t *comm, mesh_sched_t *s,
                                    const mesh_coll_hier_t *h, const size_t *counts,
                                    const size_t *displs, mesh_coll_hier_blocks_t *b)
{
    size_t nn = (size_t)h->nnodes, L = (size_t)h->L;
    size_t *v = mesh_sched_scratch(s, sizeof(size_t) * (2 * nn + 2 * L * nn));
    if (!v)
        return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical blocks: no memory for %zu nodes", nn);
    mesh_coll_hier_blocks_t r = {
        .rail_off = v, .rail_len = v + nn, .node_off = v + 2 * nn, .node_len = v + 2 * nn + L * nn};
    for (size_t k = 0; k < nn; k++) {
        int rk = h->rail.ranks[k];
        r.rail_off[k] = displs[rk];
        r.rail_len[k] = counts[rk];
        for (size_t i = 0; i < L; i++) {
            int x = mesh_hier_rank(comm->node_first, comm->node_ranks, (int)k, (int)i);
            r.node_off[k * L + i] = displs[x];
            r.node_len[k * L + i] = counts[x];
        }
    }
    *b = r;
    return MESH_OK;
}

mesh_coll_ring_walk_t mesh_coll_ring_walk(const mesh_coll_ring_phase_t *p)
{
    int n = p->g.n, me = p->g.me;
    size_t seg = MESH_COLL_RING_SEG_BYTES / p->dsize;
    mesh_coll_ring_walk_t w = {.left = mesh_coll_group_rank(&p->g, mesh_ring_left(me, n)),
                               .right = mesh_coll_group_rank(&p->g, mesh_ring_right(me, n)),
                               .segel = seg ? seg : 1,
                               .maxlen = 0};
    for (int i = 0; i < n; i++)
        w.maxlen = p->len[i] > w.maxlen ? p->len[i] : w.maxlen;
    return w;
}

mesh_status_t mesh_coll_ring_split(mesh_sched_t *s, size_t count, int n, int first, size_t **off,
                                   size_t **len)
{
    size_t *o = mesh_sched_scratch(s, 2 * (size_t)n * sizeof(size_t));
    if (!o)
        return mesh_error(MESH_ERR_NO_MEMORY, "ring: no memory for the offsets of %d blocks", n);
    for (int i = 0; i < n; i++) {
        int b = mesh_ring_mod(i - first, n);
        o[i] = mesh_block_offset(count, n, b);
        o[n + i] = mesh_block_count(count, n, b);
    }
    *off = o;
    *len = o + n;
    return MESH_OK;
}
