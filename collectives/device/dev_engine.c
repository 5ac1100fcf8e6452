/*
 * The device engine: one thread per process that drives calls on device buffers.
 *
 * A batch (one call, or a group's device calls) waits until each of its streams wrote its ready
 * flag (the caller's earlier work on the stream is done, inputs final), copies the inputs into
 * staging on an internal stream of the table, starts the schedules once an event says the
 * copies are done, progresses them, copies the results back, and once an event says those
 * copies are done writes each stream's done flag, which lets the stream go on, and completes
 * the requests. Batches advance independently, so calls on different streams and communicators
 * never wait for each other here; on one stream the flags order them.
 *
 * Flags live in pinned host memory of the table, two words per slot (ready, done). A slot's
 * values only grow (a generation per use, compared with wrapping as cuStreamWaitValue32's GEQ
 * does), so a slot is reused as soon as its done flag is written: a stream that has not yet
 * reached its wait still finds the value it waits for, or a later one.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/reduce.h"
#include "libmesh/wait.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH_WAIT_READY, BATCH_STAGE_IN, BATCH_RUN, BATCH_STAGE_OUT, BATCH_DONE };

#define SLOTS_PER_SLAB 64
#define SLOT_WORDS     16 /* a slot per 64-byte line: ready in word 0, done in word 1 */

struct dev_slot {
    const mesh_mem_ops_t *ops;
    uint32_t *flags;
    uint32_t gen;
    struct dev_slot *next;
};

/* The table's internal streams for one device, where staging copies run: a call staged whole
 * copies on stream both ways; a pipelined one copies in on stream and out on stream_out. */
struct dev_lane {
    const mesh_mem_ops_t *ops;
    int device;
    void *stream, *stream_out;
    struct dev_lane *next;
};

struct dev_batch_stream {
    void *stream;
    struct dev_slot *slot;
    uint32_t gen;
};

struct dev_batch {
    int state;
    int n, nst;
    mesh_request_h *reqs;
    mesh_status_t *status; /* per call */
    struct dev_batch_stream *st;
    const mesh_mem_ops_t *ops;
    struct dev_lane *lane;
    void *event;
    int copies; /* the last batch_copies enqueued some (else its event was not recorded) */
    struct dev_batch *next;
};

static pthread_mutex_t eng_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t eng_cond = PTHREAD_COND_INITIALIZER;
static struct dev_batch *eng_incoming, *eng_incoming_tail; /* posted, under eng_lock */
static struct dev_slot *eng_free_slots;                    /* under eng_lock */
static struct dev_lane *eng_lanes;                         /* under eng_lock */
static pthread_once_t eng_once = PTHREAD_ONCE_INIT;
static int eng_started;

/* A slot of ops, its generation advanced (eng_lock held). */
static mesh_status_t slot_get(const mesh_mem_ops_t *ops, struct dev_slot **out)
{
    for (struct dev_slot **s = &eng_free_slots; *s != NULL; s = &(*s)->next) {
        if ((*s)->ops != ops)
            continue;
        struct dev_slot *f = *s;
        *s = f->next;
        *out = f;
        return MESH_OK;
    }
    uint32_t *words;
    struct dev_slot *slab = calloc(SLOTS_PER_SLAB, sizeof(*slab));
    mesh_status_t st = slab == NULL
                           ? MESH_ERR_NO_MEMORY
                           : ops->host_alloc((void **)&words, SLOTS_PER_SLAB * SLOT_WORDS * 4);
    if (st < 0) {
        free(slab);
        return mesh_error(st, "cannot allocate the flags of calls on device buffers");
    }
    memset(words, 0, SLOTS_PER_SLAB * SLOT_WORDS * 4);
    /* slabs live as long as the process: a stream may still read a flag after its call */
    for (int i = 1; i < SLOTS_PER_SLAB; i++) {
        slab[i] = (struct dev_slot){ops, words + i * SLOT_WORDS, 0, eng_free_slots};
        eng_free_slots = &slab[i];
    }
    slab[0] = (struct dev_slot){ops, words, 0, NULL};
    *out = &slab[0];
    return MESH_OK;
}

static struct dev_lane *lane_get(const mesh_mem_ops_t *ops, int device)
{
    for (struct dev_lane *l = eng_lanes; l != NULL; l = l->next)
        if (l->ops == ops && l->device == device)
            return l;
    struct dev_lane *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    if (ops->stream_create(&l->stream) != MESH_OK) {
        free(l);
        return NULL;
    }
    if (ops->stream_create(&l->stream_out) != MESH_OK) {
        ops->stream_destroy(l->stream);
        free(l);
        return NULL;
    }
    *l = (struct dev_lane){ops, device, l->stream, l->stream_out, eng_lanes};
    eng_lanes = l;
    return l;
}

static int flag_reached(const uint32_t *flag, uint32_t gen)
{
    return (int32_t)(__atomic_load_n(flag, __ATOMIC_ACQUIRE) - gen) >= 0;
}

static mesh_status_t batch_copies(struct dev_batch *b, int out)
{
    b->copies = 0;
    for (int i = 0; i < b->n; i++) {
        mesh_dev_op_t *d = b->reqs[i]->dev;
        if (b->status[i] < 0 || d->pipe != NULL) /* a pipeline copies chunk by chunk */
            continue;
        for (int k = 0; k < d->nreg; k++) {
            mesh_dev_region_t *r = &d->reg[k];
            if (!(out ? r->out : r->in))
                continue;
            char *stage = d->base + r->offset;
            mesh_status_t st = out ? b->ops->copy_async(r->dev, stage, r->bytes, b->lane->stream)
                                   : b->ops->copy_async(stage, r->dev, r->bytes, b->lane->stream);
            if (st < 0)
                return st;
            b->copies = 1;
        }
    }
    /* nothing staged (calls by IPC move their data themselves): no event to wait for */
    return b->copies ? b->ops->event_record(b->event, b->lane->stream) : MESH_OK;
}

/* MESH_OK once the copies of the last batch_copies completed, MESH_INPROGRESS before. */
static mesh_status_t batch_copied(struct dev_batch *b)
{
    return b->copies ? b->ops->event_query(b->event) : MESH_OK;
}

/* Lets the streams go and completes the calls (a failure of the batch fails every call). */
static void batch_finish(struct dev_batch *b, mesh_status_t st)
{
    for (int i = 0; i < b->nst; i++)
        __atomic_store_n(&b->st[i].slot->flags[1], b->st[i].gen, __ATOMIC_RELEASE);
    pthread_mutex_lock(&eng_lock);
    for (int i = 0; i < b->nst; i++) {
        b->st[i].slot->next = eng_free_slots;
        eng_free_slots = b->st[i].slot;
    }
    pthread_mutex_unlock(&eng_lock);
    for (int i = 0; i < b->n; i++) {
        mesh_request_h r = b->reqs[i];
        mesh_status_t s = b->status[i] < 0 ? b->status[i] : st;
        if (s < 0 && b->status[i] >= 0)
            mesh_comm_fail(r->comm, s);
        if (s < 0 && r->internal) {
            /* nobody waits for this call: the communicator's next call reports it */
            mesh_comm_lock(r->comm);
            mesh_error_restore(r->comm->last_error);
            mesh_health_failed(r->comm, s, NULL);
            mesh_comm_unlock(r->comm);
        }
        __atomic_store_n(&r->status, s, __ATOMIC_RELEASE);
        mesh_dev_put(r);
    }
    /* a thread asleep in mesh_wait on one of these calls wakes now, not at its slice's end */
    mesh_wait_wake_local();
    b->state = BATCH_DONE;
}

static int batch_ready(struct dev_batch *b)
{
    for (int i = 0; i < b->nst; i++)
        if (!flag_reached(&b->st[i].slot->flags[0], b->st[i].gen))
            return 0;
    mesh_status_t st = batch_copies(b, 0);
    if (st < 0)
        batch_finish(b, st);
    else
        b->state = BATCH_STAGE_IN;
    return 1;
}

static int batch_start(struct dev_batch *b)
{
    mesh_status_t st = batch_copied(b);
    if (st == MESH_INPROGRESS)
        return 0;
    if (st < 0) {
        batch_finish(b, st);
        return 1;
    }
    for (int i = 0; i < b->n; i++) {
        mesh_dev_op_t *d = b->reqs[i]->dev;
        if (d->scale_buf != NULL)
            mesh_reduce_scale(d->scale_buf, d->scale_buf, d->scale_count, d->scale_dtype,
                              d->scalar);
        b->status[i] = mesh_request_start_dev(b->reqs[i]);
    }
    b->state = BATCH_RUN;
    return 1;
}

static int batch_run(struct dev_batch *b)
{
    int events = 0, pending = 0;
    for (int i = 0; i < b->n; i++) {
        mesh_request_h r = b->reqs[i];
        if (b->status[i] != MESH_OK)
            continue;
        if (r->dev->pipe != NULL) {
            mesh_status_t st =
                mesh_dev_pipe_advance(r->dev, b->lane->stream, b->lane->stream_out, &events);
            pending |= st == MESH_INPROGRESS;
            if (st < 0)
                b->status[i] = st;
            continue;
        }
        mesh_status_t st = mesh_sched_run_status(r->sched);
        if (st == MESH_INPROGRESS && mesh_comm_trylock(r->comm)) {
            events += mesh_comm_progress(r->comm);
            mesh_comm_unlock(r->comm);
            st = mesh_sched_run_status(r->sched);
        }
        if (st == MESH_INPROGRESS)
            pending = 1;
        else if (st < 0)
            b->status[i] = st;
    }
    if (pending)
        return events;
    mesh_status_t st = batch_copies(b, 1);
    if (st < 0)
        batch_finish(b, st);
    else
        b->state = BATCH_STAGE_OUT;
    return 1;
}

static int batch_advance(struct dev_batch *b)
{
    switch (b->state) {
    case BATCH_WAIT_READY:
        return batch_ready(b);
    case BATCH_STAGE_IN:
        return batch_start(b);
    case BATCH_RUN:
        return batch_run(b);
    case BATCH_STAGE_OUT: {
        mesh_status_t st = batch_copied(b);
        if (st == MESH_INPROGRESS)
            return 0;
        batch_finish(b, st < 0 ? st : MESH_OK);
        return 1;
    }
    default:
        return 0;
    }
}

static void batch_free(struct dev_batch *b)
{
    if (b->event != NULL)
        b->ops->event_destroy(b->event);
    free(b);
}

static void *eng_main(void *arg)
{
    (void)arg;
    struct dev_batch *head = NULL, *tail = NULL;
    unsigned idle = 0;
    for (;;) {
        pthread_mutex_lock(&eng_lock);
        while (head == NULL && eng_incoming == NULL)
            pthread_cond_wait(&eng_cond, &eng_lock);
        if (eng_incoming != NULL) {
            if (tail)
                tail->next = eng_incoming;
            else
                head = eng_incoming;
            tail = eng_incoming_tail;
            eng_incoming = eng_incoming_tail = NULL;
            idle = 0;
        }
        pthread_mutex_unlock(&eng_lock);
        int events = 0;
        struct dev_batch **link = &head, *last = NULL;
        while (*link != NULL) {
            struct dev_batch *b = *link;
            events += batch_advance(b);
            if (b->state == BATCH_DONE) {
                *link = b->next;
                batch_free(b);
            } else {
                last = b;
                link = &b->next;
            }
        }
        tail = last;
        if (events > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
    return NULL;
}

static void eng_start(void)
{
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    eng_started = pthread_create(&th, &attr, eng_main, NULL) == 0;
    pthread_attr_destroy(&attr);
}

/* Undoes what a failed post set up: every stream that may wait already may go. */
static void post_undo(struct dev_batch *b)
{
    for (int i = 0; i < b->nst; i++)
        __atomic_store_n(&b->st[i].slot->flags[1], b->st[i].gen, __ATOMIC_RELEASE);
    pthread_mutex_lock(&eng_lock);
    for (int i = 0; i < b->nst; i++) {
        b->st[i].slot->next = eng_free_slots;
        eng_free_slots = b->st[i].slot;
    }
    pthread_mutex_unlock(&eng_lock);
    batch_free(b);
}

/* The batch's streams, a slot each, and the lane (eng_lock held). */
static mesh_status_t post_slots(struct dev_batch *b, int device)
{
    if ((b->lane = lane_get(b->ops, device)) == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot create an internal stream of table %s",
                          b->ops->name);
    for (int i = 0; i < b->n; i++) {
        void *s = b->reqs[i]->dev->stream;
        int seen = 0;
        for (int k = 0; k < b->nst && !seen; k++)
            seen = b->st[k].stream == s;
        if (seen)
            continue;
        struct dev_batch_stream *e = &b->st[b->nst];
        MESH_CHECK(slot_get(b->ops, &e->slot));
        e->stream = s;
        e->gen = ++e->slot->gen;
        b->nst++;
    }
    return MESH_OK;
}

mesh_status_t mesh_dev_post(mesh_request_h *reqs, int n)
{
    const mesh_mem_ops_t *ops = reqs[0]->dev->ops;
    int device = reqs[0]->dev->device;
    for (int i = 1; i < n; i++)
        if (reqs[i]->dev->ops != ops || reqs[i]->dev->device != device)
            return mesh_error(MESH_ERR_UNSUPPORTED,
                              "a group's calls on device buffers use "
                              "device %d of table %s and device %d of table %s: one device "
                              "per group",
                              device, ops->name, reqs[i]->dev->device, reqs[i]->dev->ops->name);
    pthread_once(&eng_once, eng_start);
    if (!eng_started)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot start the device engine's thread");
    struct dev_batch *b =
        calloc(1, sizeof(*b) + (size_t)n * (sizeof(mesh_request_h) + sizeof(mesh_status_t) +
                                            sizeof(struct dev_batch_stream)));
    if (b == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a device batch");
    b->n = n;
    b->ops = ops;
    b->reqs = (mesh_request_h *)(b + 1);
    b->st = (struct dev_batch_stream *)(b->reqs + n);
    b->status = (mesh_status_t *)(b->st + n);
    memcpy(b->reqs, reqs, sizeof(*reqs) * (size_t)n);
    pthread_mutex_lock(&eng_lock);
    mesh_status_t st = post_slots(b, device);
    pthread_mutex_unlock(&eng_lock);
    if (st == MESH_OK)
        st = ops->event_create(&b->event);
    /* each stream tells the engine it reached the call, then waits for the results */
    for (int i = 0; i < b->nst && st == MESH_OK; i++) {
        st = ops->stream_write(b->st[i].stream, &b->st[i].slot->flags[0], b->st[i].gen);
        if (st == MESH_OK)
            st = ops->stream_wait(b->st[i].stream, &b->st[i].slot->flags[1], b->st[i].gen);
    }
    if (st < 0) {
        post_undo(b);
        return st;
    }
    pthread_mutex_lock(&eng_lock);
    if (eng_incoming_tail)
        eng_incoming_tail->next = b;
    else
        eng_incoming = b;
    eng_incoming_tail = b;
    pthread_cond_signal(&eng_cond);
    pthread_mutex_unlock(&eng_lock);
    return MESH_OK;
}

int mesh_dev_done(mesh_request_h req)
{
    mesh_status_t st = __atomic_load_n(&req->status, __ATOMIC_ACQUIRE);
    if (st == MESH_INPROGRESS)
        return 0;
    if (st < 0)
        mesh_error_restore(req->comm->last_error);
    return 1;
}

void mesh_dev_put(mesh_request_h req)
{
    if (atomic_fetch_sub(&req->dev->refs, 1) == 1)
        mesh_request_release(req);
}
