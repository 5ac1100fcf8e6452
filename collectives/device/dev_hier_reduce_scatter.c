/* Hierarchical reduce-scatter on device buffers across nodes (dev_hier.h), node first: for each
 * node j, local rank l reduces block (j, l) of its node's inputs (its own first, then the next
 * ranks' in order, reading them through IPC) into its output, used as the device scratch of one
 * block at a time, and copies it to pinned host memory; a ring reduce-scatter along the rail
 * over those N partials leaves block (node, l) reduced over every rank, which goes back into the
 * output (divided for MESH_AVG). Its own node's block comes first, so that in place (the output
 * is the rank's own block of its input, which no peer reads) the input is read before it is
 * overwritten. A rank stages the N blocks of its rail out and its own block in; the network
 * carries (N - 1) blocks per rank, as the host's hierarchical reduce-scatter. Equal blocks (the
 * uniform form). */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_hier.h"
#include "libmesh/log.h"

/* Block (j, l) of every input of the node, reduced and copied to slot j of the host buffer. */
static mesh_status_t issue_node(mesh_dev_hier_call_t *c, void *stream)
{
    const mesh_comm_t *comm = c->comm;
    int L = c->h.L, me = c->h.lr, N = c->h.nnodes;
    size_t ds = c->dsize, n = c->count;
    for (int i = 0; i < N; i++) {
        int j = (c->h.node + i) % N, x = comm->node_ranks[comm->node_first[j] + me];
        size_t off = c->displs[x] * ds;
        const char *acc = c->sbuf + off;
        for (int m = 1; m < L; m++) {
            MESH_CHECK(c->ops->reduce_async(c->rbuf, acc,
                                            mesh_dev_hier_peer(c, (me + m) % L, 0) + off, n,
                                            c->dtype, c->op, stream));
            acc = c->rbuf;
        }
        MESH_CHECK(mesh_dev_hier_to_host(c, c->host + (size_t)j * n * ds, c->rbuf, n * ds, stream));
    }
    return MESH_OK;
}

/* Our block, reduced across nodes, into the output. */
static mesh_status_t issue_back(mesh_dev_hier_call_t *c, void *stream)
{
    size_t ds = c->dsize, n = c->count;
    MESH_CHECK(
        mesh_dev_hier_from_host(c, c->rbuf, c->host + (size_t)c->h.node * n * ds, n * ds, stream));
    if (c->avg)
        MESH_CHECK(c->ops->divide_async(c->rbuf, n, c->dtype, c->comm->size, stream));
    return MESH_OK;
}

mesh_status_t mesh_dev_hier_reduce_scatter(mesh_sched_t *s, mesh_dev_hier_call_t *c)
{
    int N = c->h.nnodes;
    size_t ds = c->dsize, n = c->count;
    if (n == 0)
        return mesh_sched_build_status(s);
    size_t *v = mesh_sched_scratch(s, sizeof(size_t) * 2 * (size_t)N);
    if (v == NULL)
        return mesh_sched_build_status(s);
    for (int j = 0; j < N; j++) {
        v[j] = (size_t)j * n;
        v[N + j] = n;
    }
    c->exp[0] = c->sbuf;
    MESH_CHECK(mesh_dev_hier_stage(c, (size_t)N * n * ds));
    int have = mesh_dev_hier_start(s, c);
    int node = mesh_dev_hier_device(s, c, issue_node, 0, &have, 1);
    mesh_coll_ring_phase_t q = {.g = c->h.rail,
                                .dsize = ds,
                                .src = c->host,
                                .src_off = v,
                                .own = c->host + v[c->h.node] * ds,
                                .len = v + N,
                                .deps = &node,
                                .ndeps = 1};
    int net;
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &q, &net));
    int back = mesh_dev_hier_device(s, c, issue_back, 0, &net, 1);
    /* every rank of the node read our input */
    int read = mesh_dev_hier_token(s, c, node);
    mesh_dev_hier_end(s, c, (int[]){read, back}, 2);
    return mesh_sched_build_status(s);
}
