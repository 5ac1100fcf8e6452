/* A staged device call split in chunks: all-reduce, reduce and broadcast are element-wise, so
 * chunk k of the call is the same collective on elements [k c, k c + c) of every buffer, a call
 * of its own. Every chunk's schedule is built at launch, in order, on one of a few staging slots
 * (chunk k on slot k mod depth), so that every rank takes the same sequence numbers for the same
 * chunks whatever the engine does later; the engine (dev_pipe_run.c) copies a chunk in once its
 * slot is free, starts its schedule once it arrived, and copies it out once it completed. The
 * staging is depth slots, each holding the chunk of every distinct buffer, bounded by
 * MESH_DEVICE_STAGING_MAX. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_pipe.h"
#include "collectives/api.h"
#include "collectives/request.h"
#include "libmesh/log.h"
#include <stdlib.h>
#include <string.h>

static size_t chunk_elems(size_t dsize)
{
    size_t c = mesh_dev_chunk_bytes() / dsize;
    return c > 0 ? c : 1;
}

int mesh_dev_pipe_serves(const mesh_comm_t *comm, const mesh_coll_args_t *args, const void *scalar,
                         size_t in_count, const void *avg_buf, size_t avg_count)
{
    if (args->type != MESH_COLL_ALLREDUCE && args->type != MESH_COLL_REDUCE &&
        args->type != MESH_COLL_BROADCAST)
        return 0;
    if (comm->size < 2 || mesh_dev_chunk_bytes() == 0 || args->count <= chunk_elems(args->dsize))
        return 0;
    /* a pre-multiplied sum scales and MESH_AVG divides chunk by chunk: the whole buffer only */
    if ((scalar != NULL && in_count != args->count) ||
        (avg_buf != NULL && avg_count != args->count))
        return 0;
    return 1;
}

void mesh_dev_pipe_free(mesh_dev_op_t *d)
{
    mesh_dev_pipe_t *p = d->pipe;
    if (p == NULL)
        return;
    for (int k = 0; k < p->n; k++)
        mesh_sched_destroy(p->c[k].s);
    for (int i = 0; i < p->depth; i++) {
        if (p->ev_in[i] != NULL)
            d->ops->event_destroy(p->ev_in[i]);
        if (p->ev_out[i] != NULL)
            d->ops->event_destroy(p->ev_out[i]);
    }
    free(p);
    d->pipe = NULL;
}

/* The slots: how many chunks fly at once, and where each buffer's chunk sits in a slot. Every
 * region of these calls spans the whole call (count elements), or the call is staged whole. */
static mesh_status_t pipe_layout(mesh_dev_op_t *d, const mesh_coll_args_t *args, size_t ce,
                                 size_t *slot_bytes, int *depth)
{
    size_t cb = ce * args->dsize, aligned = (cb + 63) & ~(size_t)63;
    for (int i = 0; i < d->nreg; i++) {
        if (d->reg[i].bytes != args->count * args->dsize)
            return mesh_error(MESH_ERR_INTERNAL,
                              "a pipelined device call's buffers overlap in part (%zu bytes "
                              "staged for a call of %zu)",
                              d->reg[i].bytes, args->count * args->dsize);
        d->reg[i].offset = (size_t)i * aligned;
    }
    *slot_bytes = (size_t)d->nreg * aligned;
    size_t n = (args->count + ce - 1) / ce, max = mesh_dev_staging_max(d->comm);
    int k = n < MESH_DEV_PIPE_DEPTH ? (int)n : MESH_DEV_PIPE_DEPTH;
    while (k > 1 && (size_t)k * *slot_bytes > max)
        k--;
    *depth = k;
    return MESH_OK;
}

static mesh_status_t pipe_create(mesh_dev_op_t *d, const mesh_coll_args_t *args, size_t ce,
                                 int depth, size_t slot_bytes, const void *scalar)
{
    size_t n = (args->count + ce - 1) / ce;
    mesh_dev_pipe_t *p = calloc(1, sizeof(*p) + n * sizeof(p->c[0]));
    if (p == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a pipeline of %zu chunks", n);
    d->pipe = p;
    p->n = (int)n;
    p->depth = depth;
    p->slot_bytes = slot_bytes;
    p->chunk_elems = ce;
    p->dsize = args->dsize;
    p->count = args->count;
    for (int i = 0; i < d->nreg; i++)
        if (d->reg[i].dev == (const char *)args->sbuf)
            p->in_offset = d->reg[i].offset;
    if (scalar != NULL) {
        p->scale = 1;
        memcpy(p->scalar, scalar, args->dsize);
        p->dtype = args->dtype;
    }
    for (int i = 0; i < depth; i++) {
        MESH_CHECK(d->ops->event_create(&p->ev_in[i]));
        MESH_CHECK(d->ops->event_create(&p->ev_out[i]));
    }
    return MESH_OK;
}

/* Where the chunk on slot of device address p sits (NULL stays NULL). */
static void *pipe_map(const mesh_dev_op_t *d, const void *p, int slot)
{
    const char *c = p;
    for (int i = 0; c != NULL && i < d->nreg; i++)
        if (c == d->reg[i].dev)
            return d->base + (size_t)slot * d->pipe->slot_bytes + d->reg[i].offset;
    return (void *)p;
}

/* Builds every chunk's call, in order (the communicator locked). */
static mesh_status_t pipe_build(mesh_comm_t *comm, mesh_dev_op_t *d, const mesh_coll_args_t *args,
                                const void *avg_buf)
{
    mesh_dev_pipe_t *p = d->pipe;
    for (int k = 0; k < p->n; k++) {
        size_t first = (size_t)k * p->chunk_elems, cnt = p->count - first;
        if (cnt > p->chunk_elems)
            cnt = p->chunk_elems;
        int slot = k % p->depth;
        mesh_coll_args_t a = *args;
        a.sbuf = pipe_map(d, args->sbuf, slot);
        a.rbuf = pipe_map(d, args->rbuf, slot);
        a.count = cnt;
        a.bytes = cnt * args->dsize;
        a.mem = NULL; /* the schedules run on the staging slots */
        p->c[k].first = first;
        p->c[k].count = cnt;
        MESH_CHECK(mesh_api_build_locked(comm, &a, avg_buf != NULL ? a.rbuf : NULL, cnt, k == 0,
                                         &p->c[k].s));
    }
    return MESH_OK;
}

mesh_status_t mesh_dev_pipe_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                                   void *avg_buf, void *owned0, mesh_request_h *req)
{
    mesh_dev_op_t *d = NULL;
    size_t ce = chunk_elems(args->dsize), slot_bytes = 0;
    int depth = 0;
    mesh_status_t st = mesh_dev_op_create(comm, args, &d);
    if (st == MESH_OK)
        st = mesh_dev_op_add(d, args->sbuf, args->count * args->dsize, 1, 0);
    if (st == MESH_OK)
        st = mesh_dev_op_add(d, args->rbuf, args->count * args->dsize, !args->uniform, 1);
    if (st == MESH_OK && (st = pipe_layout(d, args, ce, &slot_bytes, &depth)) == MESH_OK)
        st = pipe_create(d, args, ce, depth, slot_bytes, scalar);
    if (st == MESH_OK)
        st = mesh_dev_op_stage_bytes(d, (size_t)depth * slot_bytes);
    if (st < 0) {
        mesh_dev_op_free(d); /* no schedule yet: no lock needed */
        free(owned0);
        return mesh_comm_fail(comm, st);
    }
    mesh_comm_lock(comm); /* every chunk's sequence number, then the request: one call */
    st = pipe_build(comm, d, args, avg_buf);
    if (st < 0) {
        mesh_dev_op_free(d);
        mesh_comm_unlock(comm);
        free(owned0);
        return mesh_comm_fail(comm, st);
    }
    st = mesh_request_submit_dev(comm, NULL, owned0, NULL, d, req);
    return st < 0 ? mesh_comm_fail(comm, st) : st;
}
