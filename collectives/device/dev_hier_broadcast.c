/* Hierarchical broadcast on device buffers across nodes (dev_hier.h): on the root's node, local
 * rank l copies chunk l of the root's buffer (through IPC) into its output and to pinned host
 * memory, and sends it along its rail to rank l of every other node, which copies it into its
 * output; once every rank of the node holds its chunk, each copies the other chunks from the
 * node's peers. The L rails carry the message at once, 1/L of it each; a rank stages its chunk
 * only. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_hier.h"
#include "libmesh/log.h"

static int root_node(const mesh_dev_hier_call_t *c)
{
    return c->comm->node_of[c->root];
}

static void own_chunk(const mesh_dev_hier_call_t *c, size_t *lo, size_t *len)
{
    mesh_dev_hier_chunk(c, c->h.lr, c->h.L, lo, len);
}

/* On the root's node: our chunk of the root's buffer into our output and the host buffer (the
 * root copies its whole buffer into its output). */
static mesh_status_t issue_root_node(mesh_dev_hier_call_t *c, void *stream)
{
    size_t ds = c->dsize, lo, len;
    own_chunk(c, &lo, &len);
    if (c->comm->rank == c->root) {
        if (c->rbuf != c->sbuf)
            MESH_CHECK(c->ops->copy_async(c->rbuf, c->sbuf, c->count * ds, stream));
        return mesh_dev_hier_to_host(c, c->host, c->sbuf + lo * ds, len * ds, stream);
    }
    const char *src = mesh_dev_hier_peer(c, c->comm->local_rank[c->root], 0) + lo * ds;
    if (len > 0)
        MESH_CHECK(c->ops->copy_async(c->rbuf + lo * ds, src, len * ds, stream));
    return mesh_dev_hier_to_host(c, c->host, src, len * ds, stream);
}

/* Elsewhere: our chunk, received along the rail, into our output. */
static mesh_status_t issue_in(mesh_dev_hier_call_t *c, void *stream)
{
    size_t ds = c->dsize, lo, len;
    own_chunk(c, &lo, &len);
    return mesh_dev_hier_from_host(c, c->rbuf + lo * ds, c->host, len * ds, stream);
}

/* The other chunks from the node's peers (the root holds them all already). */
static mesh_status_t issue_node(mesh_dev_hier_call_t *c, void *stream)
{
    return c->comm->rank == c->root ? MESH_OK : mesh_dev_hier_gather_chunks(c, stream);
}

mesh_status_t mesh_dev_hier_broadcast(mesh_sched_t *s, mesh_dev_hier_call_t *c)
{
    size_t ds = c->dsize, lo, len;
    int R = root_node(c), N = c->h.nnodes;
    if (c->count == 0)
        return mesh_sched_build_status(s);
    own_chunk(c, &lo, &len);
    c->exp[0] = c->comm->rank == c->root ? c->sbuf : NULL;
    c->exp[1] = c->rbuf;
    MESH_CHECK(mesh_dev_hier_stage(c, len * ds));
    int have = mesh_dev_hier_start(s, c);
    int ready, sent = -1;
    if (c->h.node == R) {
        ready = mesh_dev_hier_device(s, c, issue_root_node, 0, &have, 1);
        mesh_coll_ids_t ids = {0};
        for (int k = 0; k < N && len > 0; k++)
            if (k != R)
                mesh_coll_ids_add(&ids, mesh_sched_send(s, mesh_coll_group_rank(&c->h.rail, k),
                                                        c->host, len * ds, &ready, 1));
        MESH_CHECK(mesh_coll_ids_join(s, &ids, &ready, 1, &sent));
    } else {
        int got = len > 0 ? mesh_sched_recv(s, mesh_coll_group_rank(&c->h.rail, R), c->host,
                                            len * ds, NULL, 0)
                          : -1;
        ready = mesh_dev_hier_device(s, c, issue_in, 0, (int[]){have, got}, 2);
    }
    int final = mesh_dev_hier_token(s, c, ready);
    int all = mesh_dev_hier_device(s, c, issue_node, 0, &final, 1);
    int done = mesh_dev_hier_token(s, c, all);
    mesh_dev_hier_end(s, c, (int[]){done, sent}, 2);
    return mesh_sched_build_status(s);
}
