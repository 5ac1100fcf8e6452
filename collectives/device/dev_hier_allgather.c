/* Hierarchical all-gather on device buffers across nodes (dev_hier.h), rail first: each rank
 * copies its input to pinned host memory, all-gathers it along its rail over the network (a
 * ring), copies the rail's blocks into its output, and once every rank of the node is there,
 * copies every other block from the output of the node's rank whose rail brought it. Every
 * block enters every other node once; a rank stages its own block out and the (N - 1) blocks of
 * its rail in. Blocks lie at the same place in every rank's output (the uniform form). */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_hier.h"
#include "libmesh/log.h"

/* Element offsets and lengths of the rail's blocks in the host buffer, packed in rail order. */
struct ag_rail {
    size_t *off, *len, total;
};

static struct ag_rail *rail_blocks(mesh_sched_t *s, const mesh_dev_hier_call_t *c)
{
    int N = c->h.nnodes;
    struct ag_rail *r = mesh_sched_scratch(s, sizeof(*r));
    size_t *v = mesh_sched_scratch(s, sizeof(size_t) * 2 * (size_t)N);
    if (r == NULL || v == NULL)
        return NULL;
    *r = (struct ag_rail){v, v + N, 0};
    for (int k = 0; k < N; k++) {
        r->off[k] = r->total;
        r->len[k] = c->counts[mesh_coll_group_rank(&c->h.rail, k)];
        r->total += r->len[k];
    }
    return r;
}

static const struct ag_rail *rail_of(const mesh_dev_hier_call_t *c)
{
    return c->priv;
}

/* Our input to its place in the host buffer, and to our block of the output. */
static mesh_status_t issue_out(mesh_dev_hier_call_t *c, void *stream)
{
    const struct ag_rail *r = rail_of(c);
    int me = c->comm->rank, k = c->h.node;
    size_t ds = c->dsize, bytes = c->counts[me] * ds;
    char *own = c->rbuf + c->displs[me] * ds;
    MESH_CHECK(mesh_dev_hier_to_host(c, c->host + r->off[k] * ds, c->sbuf, bytes, stream));
    if (bytes > 0 && own != c->sbuf)
        MESH_CHECK(c->ops->copy_async(own, c->sbuf, bytes, stream));
    return MESH_OK;
}

/* The other nodes' blocks of our rail into our output. */
static mesh_status_t issue_in(mesh_dev_hier_call_t *c, void *stream)
{
    const struct ag_rail *r = rail_of(c);
    size_t ds = c->dsize;
    for (int k = 0; k < c->h.nnodes; k++) {
        int x = mesh_coll_group_rank(&c->h.rail, k);
        if (k != c->h.node)
            MESH_CHECK(mesh_dev_hier_from_host(c, c->rbuf + c->displs[x] * ds,
                                               c->host + r->off[k] * ds, r->len[k] * ds, stream));
    }
    return MESH_OK;
}

/* Every block of the other rails from the output of the node's rank on that rail. */
static mesh_status_t issue_node(mesh_dev_hier_call_t *c, void *stream)
{
    const mesh_comm_t *comm = c->comm;
    int L = c->h.L, me = c->h.lr;
    size_t ds = c->dsize;
    for (int j = 1; j < L; j++) {
        int l = (me + j) % L;
        const char *peer = mesh_dev_hier_peer(c, l, 1);
        for (int k = 0; k < c->h.nnodes; k++) {
            int x = comm->node_ranks[comm->node_first[k] + l];
            size_t off = c->displs[x] * ds;
            if (c->counts[x] > 0)
                MESH_CHECK(
                    c->ops->copy_async(c->rbuf + off, peer + off, c->counts[x] * ds, stream));
        }
    }
    return MESH_OK;
}

mesh_status_t mesh_dev_hier_allgather(mesh_sched_t *s, mesh_dev_hier_call_t *c)
{
    size_t ds = c->dsize;
    struct ag_rail *r = rail_blocks(s, c);
    if (r == NULL)
        return mesh_sched_build_status(s);
    c->priv = r;
    if (r->total == 0)
        return mesh_sched_build_status(s);
    c->exp[1] = c->rbuf;
    MESH_CHECK(mesh_dev_hier_stage(c, r->total * ds));
    int have = mesh_dev_hier_start(s, c);
    int out = mesh_dev_hier_device(s, c, issue_out, 0, &have, 1);
    mesh_coll_ring_phase_t p = {.g = c->h.rail,
                                .dsize = ds,
                                .acc = c->host,
                                .acc_off = r->off,
                                .len = r->len,
                                .deps = &out,
                                .ndeps = 1};
    int net;
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &net));
    int in = mesh_dev_hier_device(s, c, issue_in, 0, &net, 1);
    int final = mesh_dev_hier_token(s, c, in);
    int all = mesh_dev_hier_device(s, c, issue_node, 0, &final, 1);
    int done = mesh_dev_hier_token(s, c, all);
    mesh_dev_hier_end(s, c, &done, 1);
    return mesh_sched_build_status(s);
}
