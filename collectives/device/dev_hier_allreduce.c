/* Hierarchical all-reduce on device buffers across nodes (dev_hier.h): local rank l reduces
 * chunk l of its node's inputs into its output (its own input first, then the next ranks' in
 * order, reading them through IPC), copies that chunk to pinned host memory, all-reduces it
 * along its rail over the network (ring for large chunks, recursive doubling for small ones, as
 * the host's hierarchical all-reduce), copies it back (divided for MESH_AVG), and once every rank
 * of the node is there, copies the other chunks from their owners' outputs. Each rank stages
 * 1/L of the vector each way; nothing else leaves the device. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_hier.h"
#include "libmesh/log.h"

/* Rail chunks above this size take the ring, below it recursive doubling. */
#define HIER_RAIL_RING_BYTES (64 * 1024)

static void own_chunk(const mesh_dev_hier_call_t *c, size_t *lo, size_t *len)
{
    mesh_dev_hier_chunk(c, c->h.lr, c->h.L, lo, len);
}

/* Chunk lr of every input of the node reduced into our output, then copied to the host. */
static mesh_status_t issue_reduce(mesh_dev_hier_call_t *c, void *stream)
{
    int L = c->h.L, me = c->h.lr;
    size_t ds = c->dsize, lo, len;
    own_chunk(c, &lo, &len);
    if (len == 0)
        return MESH_OK;
    char *dst = c->rbuf + lo * ds;
    const char *acc = c->sbuf + lo * ds;
    for (int j = 1; j < L; j++) {
        MESH_CHECK(c->ops->reduce_async(dst, acc, mesh_dev_hier_peer(c, (me + j) % L, 0) + lo * ds,
                                        len, c->dtype, c->op, stream));
        acc = dst;
    }
    return mesh_dev_hier_to_host(c, c->host, dst, len * ds, stream);
}

/* The chunk, reduced across nodes, back into our output. */
static mesh_status_t issue_back(mesh_dev_hier_call_t *c, void *stream)
{
    size_t ds = c->dsize, lo, len;
    own_chunk(c, &lo, &len);
    if (len == 0)
        return MESH_OK;
    MESH_CHECK(mesh_dev_hier_from_host(c, c->rbuf + lo * ds, c->host, len * ds, stream));
    if (c->avg)
        MESH_CHECK(c->ops->divide_async(c->rbuf + lo * ds, len, c->dtype, c->comm->size, stream));
    return MESH_OK;
}

/* The other chunks from their owners' outputs. */
static mesh_status_t issue_gather(mesh_dev_hier_call_t *c, void *stream)
{
    int L = c->h.L, me = c->h.lr;
    size_t ds = c->dsize, lo, len;
    for (int j = 1; j < L; j++) {
        int l = (me + j) % L;
        mesh_dev_hier_chunk(c, l, L, &lo, &len);
        if (len > 0)
            MESH_CHECK(c->ops->copy_async(c->rbuf + lo * ds, mesh_dev_hier_peer(c, l, 1) + lo * ds,
                                          len * ds, stream));
    }
    return MESH_OK;
}

mesh_status_t mesh_dev_hier_allreduce(mesh_sched_t *s, mesh_dev_hier_call_t *c)
{
    size_t ds = c->dsize, lo, len;
    if (c->count == 0)
        return mesh_sched_build_status(s);
    own_chunk(c, &lo, &len);
    c->exp[0] = c->sbuf;
    c->exp[1] = c->rbuf;
    MESH_CHECK(mesh_dev_hier_stage(c, len * ds));
    int have = mesh_dev_hier_start(s, c);
    int red = mesh_dev_hier_device(s, c, issue_reduce, &have, 1);
    int net = red;
    /* every member of the rail holds a chunk of the same length */
    if (len > 0 && len * ds > HIER_RAIL_RING_BYTES)
        MESH_CHECK(mesh_coll_ring_allreduce_phase(s, &c->h.rail, c->host, c->host, len, ds, &red, 1,
                                                  &net));
    else if (len > 0)
        MESH_CHECK(
            mesh_coll_rd_allreduce_phase(s, &c->h.rail, c->host, c->host, len, ds, &red, 1, &net));
    int back = mesh_dev_hier_device(s, c, issue_back, &net, 1);
    int final = mesh_dev_hier_token(s, c, back);
    int all = mesh_dev_hier_device(s, c, issue_gather, &final, 1);
    int done = mesh_dev_hier_token(s, c, all);
    mesh_dev_hier_end(s, c, &done, 1);
    return mesh_sched_build_status(s);
}
