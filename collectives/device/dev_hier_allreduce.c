/* Hierarchical all-reduce on device buffers across nodes (dev_hier.h): local rank l reduces
 * chunk l of its node's inputs into its output (its own input first, then the next ranks' in
 * order, reading them through IPC), copies that chunk to pinned host memory, all-reduces it
 * along its rail over the network (ring for large chunks, recursive doubling for small ones, as
 * the host's hierarchical all-reduce), copies it back (divided for MESH_AVG), and once every rank
 * of the node is there, copies the other chunks from their owners' outputs. Each rank stages
 * 1/L of the vector each way; nothing else leaves the device. A large chunk goes in parts, as a
 * pipeline: part i + 1 is reduced and copied out while part i is on the wire. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_hier.h"
#include "collectives/patterns/ring.h"
#include "libmesh/log.h"

/* Rail chunks above this size take the ring, below it recursive doubling. */
#define HIER_RAIL_RING_BYTES (64 * 1024)
/* The rank's chunk goes through the device, the wire and back in parts of at least this size
 * (at most HIER_PARTS of them), so that one part's copies overlap another's transfer. */
#ifndef MESH_DEV_HIER_PART_BYTES /* tests lower it to reach several parts */
#define MESH_DEV_HIER_PART_BYTES ((size_t)512 << 10)
#endif
#define HIER_PARTS 8

/* This rank's chunk, and the parts it goes in. */
struct ar_parts {
    size_t lo, len; /* the chunk */
    int n;
};

/* Part i: elements [*lo, *lo + *len) of the vector, at element *host of the host buffer. */
static void part(const mesh_dev_hier_call_t *c, int i, size_t *lo, size_t *len, size_t *host)
{
    const struct ar_parts *p = c->priv;
    *host = mesh_block_offset(p->len, p->n, i);
    *lo = p->lo + *host;
    *len = mesh_block_count(p->len, p->n, i);
}

/* Part c->part of our chunk of every input of the node reduced into our output (our own input
 * first, then the next ranks'), then copied to the host. */
static mesh_status_t issue_reduce(mesh_dev_hier_call_t *c, void *stream)
{
    int L = c->h.L, me = c->h.lr;
    size_t ds = c->dsize, lo, len, h;
    part(c, c->part, &lo, &len, &h);
    if (len == 0)
        return MESH_OK;
    char *dst = c->rbuf + lo * ds;
    const char *acc = c->sbuf + lo * ds;
    for (int j = 1; j < L; j++) {
        MESH_CHECK(c->ops->reduce_async(dst, acc, mesh_dev_hier_peer(c, (me + j) % L, 0) + lo * ds,
                                        len, c->dtype, c->op, stream));
        acc = dst;
    }
    return mesh_dev_hier_to_host(c, c->host + h * ds, dst, len * ds, stream);
}

/* The part, reduced across nodes, back into our output. */
static mesh_status_t issue_back(mesh_dev_hier_call_t *c, void *stream)
{
    size_t ds = c->dsize, lo, len, h;
    part(c, c->part, &lo, &len, &h);
    if (len == 0)
        return MESH_OK;
    MESH_CHECK(mesh_dev_hier_from_host(c, c->rbuf + lo * ds, c->host + h * ds, len * ds, stream));
    if (c->avg)
        MESH_CHECK(c->ops->divide_async(c->rbuf + lo * ds, len, c->dtype, c->comm->size, stream));
    return MESH_OK;
}

/* Part i across the rail, in place in the host buffer, after part i - 1's (prev). */
static mesh_status_t rail(mesh_sched_t *s, mesh_dev_hier_call_t *c, int i, int red, int prev,
                          int *done)
{
    size_t ds = c->dsize, lo, len, h;
    part(c, i, &lo, &len, &h);
    int deps[2] = {red, prev};
    char *buf = c->host + h * ds;
    *done = red;
    if (len == 0)
        return MESH_OK;
    /* every member of the rail holds a chunk, and parts, of the same length */
    if (len * ds > HIER_RAIL_RING_BYTES)
        return mesh_coll_ring_allreduce_phase(s, &c->h.rail, buf, buf, len, ds, deps, 2, done);
    return mesh_coll_rd_allreduce_phase(s, &c->h.rail, buf, buf, len, ds, deps, 2, done);
}

mesh_status_t mesh_dev_hier_allreduce(mesh_sched_t *s, mesh_dev_hier_call_t *c)
{
    size_t ds = c->dsize;
    if (c->count == 0)
        return mesh_sched_build_status(s);
    struct ar_parts *p = mesh_sched_scratch(s, sizeof(*p));
    if (p == NULL)
        return mesh_sched_build_status(s);
    mesh_dev_hier_chunk(c, c->h.lr, c->h.L, &p->lo, &p->len);
    size_t n = p->len * ds / MESH_DEV_HIER_PART_BYTES;
    p->n = n < 1 ? 1 : n > HIER_PARTS ? HIER_PARTS : (int)n;
    c->priv = p;
    c->exp[0] = c->sbuf;
    c->exp[1] = c->rbuf;
    MESH_CHECK(mesh_dev_hier_stage(c, p->len * ds));
    /* each stage of a part waits for the same stage of the part before: the parts enter the
     * stream and the wire in order */
    int have = mesh_dev_hier_start(s, c), red = have, net = -1, back = -1;
    for (int i = 0; i < p->n; i++) {
        red = mesh_dev_hier_device(s, c, issue_reduce, i, &red, 1);
        MESH_CHECK(rail(s, c, i, red, net, &net));
        back = mesh_dev_hier_device(s, c, issue_back, i, (int[]){net, back}, 2);
    }
    int final = mesh_dev_hier_token(s, c, back);
    int all = mesh_dev_hier_device(s, c, mesh_dev_hier_gather_chunks, 0, &final, 1);
    int done = mesh_dev_hier_token(s, c, all);
    mesh_dev_hier_end(s, c, &done, 1);
    return mesh_sched_build_status(s);
}
