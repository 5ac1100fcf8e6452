/* The device engine's side of a call in chunks (dev_pipe.c): each round it looks at the chunks in
 * flight (copy-in done: start the schedule; schedule done: copy out; copy-out done: the slot is
 * free), then copies in the next chunks while slots are free. Copies in and out go on two of the
 * engine's streams, so that on a GPU they use both directions of the copy engines at once, and
 * the wire of the chunks between them runs meanwhile. Each round also charges the time since
 * the last one to the stages that were busy, which is what the communicator's figures say. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_pipe.h"
#include "collectives/request.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/reduce.h"

static char *slot_base(const mesh_dev_op_t *d, int k)
{
    return d->base + (size_t)(k % d->pipe->depth) * d->pipe->slot_bytes;
}

/* Enqueues chunk k's copies in (device to its slot) or out, then the event that says they ran. */
static mesh_status_t chunk_copies(mesh_dev_op_t *d, int k, int out, void *stream)
{
    mesh_dev_pipe_t *p = d->pipe;
    size_t off = p->c[k].first * p->dsize, bytes = p->c[k].count * p->dsize;
    char *base = slot_base(d, k);
    for (int i = 0; i < d->nreg; i++) {
        mesh_dev_region_t *r = &d->reg[i];
        if (!(out ? r->out : r->in))
            continue;
        char *stage = base + r->offset;
        MESH_CHECK(out ? d->ops->copy_async(r->dev + off, stage, bytes, stream)
                       : d->ops->copy_async(stage, r->dev + off, bytes, stream));
        p->stats.bytes[out ? MESH_DEV_STAGE_OUT : MESH_DEV_STAGE_IN] += bytes;
    }
    int slot = k % p->depth;
    return d->ops->event_record(out ? p->ev_out[slot] : p->ev_in[slot], stream);
}

/* Charges the time since the last round to the stages busy during it. */
static void pipe_account(mesh_dev_pipe_t *p, double now)
{
    int busy[MESH_DEV_STAGES] = {0}, nbusy = 0;
    for (int k = p->lo; k < p->next; k++) {
        int st = p->c[k].state;
        if (st == PIPE_IN)
            busy[MESH_DEV_STAGE_IN] = 1;
        else if (st == PIPE_RUN)
            busy[MESH_DEV_STAGE_WIRE] = 1;
        else if (st == PIPE_OUT)
            busy[MESH_DEV_STAGE_OUT] = 1;
    }
    double dt = now - p->t_last;
    for (int i = 0; i < MESH_DEV_STAGES; i++) {
        p->stats.busy[i] += busy[i] ? dt : 0;
        nbusy += busy[i];
    }
    if (nbusy >= 2)
        p->stats.overlap += dt;
    p->t_last = now;
}

static void pipe_fail(mesh_dev_pipe_t *p, mesh_status_t st)
{
    if (p->fail == MESH_OK)
        p->fail = st;
}

/* Chunk k's copy-in arrived: scaled (a pre-multiplied sum), its schedule started. */
static void chunk_start(mesh_dev_op_t *d, int k)
{
    mesh_dev_pipe_t *p = d->pipe;
    if (p->scale) {
        char *in = slot_base(d, k) + p->in_offset;
        mesh_reduce_scale(in, in, p->c[k].count, p->dtype, p->scalar);
    }
    mesh_status_t st = mesh_request_start_chunk(d->req, p->c[k].s, k == p->n - 1);
    p->c[k].state = st < 0 ? PIPE_DONE : PIPE_RUN;
    if (st < 0)
        pipe_fail(p, st);
}

/* Moves chunk k on if its stage ended; returns 1 if it did. */
static int chunk_step(mesh_dev_op_t *d, int k, void *out_stream)
{
    mesh_dev_pipe_t *p = d->pipe;
    struct mesh_dev_pipe_chunk *c = &p->c[k];
    int slot = k % p->depth;
    mesh_status_t st;
    switch (c->state) {
    case PIPE_IN:
        if ((st = d->ops->event_query(p->ev_in[slot])) == MESH_INPROGRESS)
            return 0;
        if (st < 0 || p->fail < 0) {
            pipe_fail(p, st);
            c->state = PIPE_DONE;
            return 1;
        }
        chunk_start(d, k);
        return 1;
    case PIPE_RUN:
        if ((st = mesh_sched_run_status(c->s)) == MESH_INPROGRESS)
            return 0;
        p->stats.bytes[MESH_DEV_STAGE_WIRE] += c->count * p->dsize;
        if (st == MESH_OK)
            st = chunk_copies(d, k, 1, out_stream);
        c->state = st < 0 ? PIPE_DONE : PIPE_OUT;
        if (st < 0)
            pipe_fail(p, st);
        return 1;
    case PIPE_OUT:
        if ((st = d->ops->event_query(p->ev_out[slot])) == MESH_INPROGRESS)
            return 0;
        pipe_fail(p, st);
        c->state = PIPE_DONE;
        return 1;
    default:
        return 0;
    }
}

/* After a failure: the schedules still running end with it (their slots hold nothing to copy
 * out); copies in flight finish on their own. */
static void pipe_stop_runs(mesh_dev_op_t *d)
{
    mesh_dev_pipe_t *p = d->pipe;
    mesh_comm_lock(d->comm);
    for (int k = p->lo; k < p->next; k++) {
        if (p->c[k].state != PIPE_RUN)
            continue;
        if (mesh_sched_run_status(p->c[k].s) == MESH_INPROGRESS)
            mesh_sched_fail(p->c[k].s, p->fail);
        p->c[k].state = PIPE_DONE;
    }
    mesh_comm_unlock(d->comm);
}

/* Copies in the next chunks while slots are free. */
static int pipe_feed(mesh_dev_op_t *d, void *in_stream)
{
    mesh_dev_pipe_t *p = d->pipe;
    int events = 0;
    while (p->fail == MESH_OK && p->next < p->n && p->next - p->lo < p->depth) {
        mesh_status_t st = chunk_copies(d, p->next, 0, in_stream);
        p->c[p->next++].state = st < 0 ? PIPE_DONE : PIPE_IN;
        if (st < 0)
            pipe_fail(p, st);
        events++;
    }
    return events;
}

static int pipe_running(const mesh_dev_pipe_t *p)
{
    for (int k = p->lo; k < p->next; k++)
        if (p->c[k].state == PIPE_RUN)
            return 1;
    return 0;
}

mesh_status_t mesh_dev_pipe_advance(mesh_dev_op_t *d, void *in_stream, void *out_stream,
                                    int *events)
{
    mesh_dev_pipe_t *p = d->pipe;
    double now = mesh_time();
    if (p->t_first == 0)
        p->t_first = p->t_last = now;
    pipe_account(p, now);
    if (pipe_running(p) && mesh_comm_trylock(d->comm)) {
        *events += mesh_comm_progress(d->comm);
        mesh_comm_unlock(d->comm);
    }
    for (int k = p->lo; k < p->next; k++)
        *events += chunk_step(d, k, out_stream);
    if (p->fail < 0)
        pipe_stop_runs(d);
    while (p->lo < p->next && p->c[p->lo].state == PIPE_DONE)
        p->lo++;
    *events += pipe_feed(d, in_stream);
    if (p->lo < p->next || (p->fail == MESH_OK && p->lo < p->n))
        return MESH_INPROGRESS;
    p->stats.calls = 1;
    p->stats.chunks = (uint64_t)p->n;
    p->stats.span = now - p->t_first;
    p->stats.chunk_bytes = p->chunk_elems * p->dsize;
    p->stats.depth = p->depth;
    mesh_dev_stage_account(d->comm, &p->stats);
    return p->fail;
}
