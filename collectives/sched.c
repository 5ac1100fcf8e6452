/* The schedule executor: a task graph run on the progress engine. */
#define MESH_LOG_SUBSYSTEM "sched"
#include "collectives/health.h"
#include "collectives/sched_impl.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/reduce.h"
#include "libmesh/wait.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Idle progress calls between two reads of the clock (a power of two). */
#define SCHED_CLOCK_EVERY 16

static const char *const task_kind_names[] = {"send", "recv", "reduce",     "reduce3",
                                              "copy", "nop",  "device work"};

/* The communicator's active schedules (the caller holds its lock): a started schedule is active
 * until it ends; a shared one (not driven by a blocked caller alone) also counts as work under
 * way for other communicators' waits (mesh_comm_others_busy). Shared schedules are counted
 * process-wide (an atomic add) as the communicator gets its first and loses its last. */
static void share(mesh_comm_t *c, int delta)
{
    atomic_store_explicit(&c->nshared_hint, c->nshared + delta, memory_order_relaxed);
    int before = c->nshared;
    c->nshared += delta;
    if (before == 0 || c->nshared == 0)
        mesh_progress_active_add(delta);
}

static mesh_status_t activate(mesh_comm_t *c, mesh_sched_t *s, int shared)
{
    if (c->nactive == c->cap_active) {
        int cap = c->cap_active ? 2 * c->cap_active : 8;
        mesh_sched_t **a = realloc(c->active, (size_t)cap * sizeof(*a));
        if (a == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot keep %d operations under way", cap);
        c->active = a;
        c->cap_active = cap;
    }
    c->active[c->nactive] = s;
    atomic_store_explicit(&c->nactive_hint, c->nactive + 1, memory_order_relaxed);
    c->nactive++;
    if (shared)
        share(c, 1);
    return MESH_OK;
}

static void deactivate(mesh_comm_t *c, mesh_sched_t *s, int shared)
{
    /* the common case is the last; otherwise the last one takes its place: progress walks the
     * array backwards, so it has been visited already in a pass that removes s */
    for (int i = c->nactive - 1; i >= 0; i--) {
        if (c->active[i] != s)
            continue;
        c->active[i] = c->active[--c->nactive];
        atomic_store_explicit(&c->nactive_hint, c->nactive, memory_order_relaxed);
        break;
    }
    if (shared)
        share(c, -1);
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 16; /* small collectives have a handful of tasks */
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static int add_task(mesh_sched_t *s, const mesh_task_t *t, const int *deps, int ndeps)
{
    if (s->status != MESH_OK)
        return -1;
    if (grow((void **)&s->tasks, &s->cap_tasks, s->ntasks + 1, sizeof(mesh_task_t)) ||
        grow((void **)&s->edges, &s->cap_edges, s->nedges + ndeps, sizeof(mesh_edge_t))) {
        s->status =
            mesh_error(MESH_ERR_NO_MEMORY, "cannot grow a schedule past %d tasks", s->ntasks);
        return -1;
    }
    int id = s->ntasks++;
    mesh_task_t *task = &s->tasks[id];
    *task = *t;
    task->state = TASK_WAITING;
    task->ndeps_left = 0;
    for (int i = 0; i < ndeps; i++) {
        if (deps[i] < 0)
            continue;
        if (deps[i] >= id) {
            s->status =
                mesh_error(MESH_ERR_INTERNAL, "task %d depends on later task %d", id, deps[i]);
            return -1;
        }
        s->edges[s->nedges++] = (mesh_edge_t){deps[i], id};
        task->ndeps_left++;
    }
    task->ndeps = task->ndeps_left;
    return id;
}

/* The next message between this rank and peer, placed in a collective's tag (comm.h). */
static uint64_t msg_index(mesh_sched_t *s, uint32_t *count, int peer)
{
    if (count[peer] >> MESH_TAG_COLL_INDEX_BITS) {
        s->status = mesh_error(MESH_ERR_UNSUPPORTED,
                               "a collective of more than %u messages "
                               "between two ranks",
                               1u << MESH_TAG_COLL_INDEX_BITS);
        return 0;
    }
    return (uint64_t)count[peer]++ << MESH_TL_TAG_SIG_BITS;
}

int mesh_sched_send(mesh_sched_t *s, int peer, const void *buf, size_t bytes, const int *deps,
                    int ndeps)
{
    mesh_task_t t = {.kind = TASK_SEND, .peer = peer, .a = buf, .n = bytes};
    if (s->status == MESH_OK && (peer < 0 || peer >= s->comm->size)) {
        s->status =
            mesh_error(MESH_ERR_INTERNAL, "send to rank %d outside 0..%d", peer, s->comm->size - 1);
        return -1;
    }
    t.tag = s->status == MESH_OK ? msg_index(s, s->send_count, peer) : 0;
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_send_tag(mesh_sched_t *s, int peer, const void *buf, size_t bytes, uint64_t tag)
{
    int id = mesh_sched_send(s, peer, buf, bytes, NULL, 0);
    if (id >= 0)
        s->tasks[id].tag = tag;
    return id;
}

int mesh_sched_recv_tag(mesh_sched_t *s, int peer, void *buf, size_t bytes, uint64_t tag)
{
    int id = mesh_sched_recv(s, peer, buf, bytes, NULL, 0);
    if (id >= 0)
        s->tasks[id].tag = tag;
    return id;
}

void mesh_sched_reduce_stream(mesh_sched_t *s, int id)
{
    if (s->status == MESH_OK && id >= 0 && id < s->ntasks && s->tasks[id].kind == TASK_REDUCE3)
        s->tasks[id].stream = 1;
}

void mesh_sched_send_reused(mesh_sched_t *s, int id)
{
    if (s->status == MESH_OK && id >= 0 && id < s->ntasks && s->tasks[id].kind == TASK_SEND)
        s->tasks[id].op.flags |= MESH_TL_OP_SRC_REUSED;
}

int mesh_sched_recv(mesh_sched_t *s, int peer, void *buf, size_t bytes, const int *deps, int ndeps)
{
    mesh_task_t t = {.kind = TASK_RECV, .peer = peer, .dst = buf, .n = bytes};
    if (s->status == MESH_OK && (peer < 0 || peer >= s->comm->size)) {
        s->status = mesh_error(MESH_ERR_INTERNAL, "receive from rank %d outside 0..%d", peer,
                               s->comm->size - 1);
        return -1;
    }
    t.tag = s->status == MESH_OK ? msg_index(s, s->recv_count, peer) : 0;
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_reduce(mesh_sched_t *s, void *dst, const void *src, size_t count, const int *deps,
                      int ndeps)
{
    mesh_task_t t = {.kind = TASK_REDUCE, .dst = dst, .a = src, .n = count};
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_reduce3(mesh_sched_t *s, void *dst, const void *a, const void *b, size_t count,
                       const int *deps, int ndeps)
{
    mesh_task_t t = {.kind = TASK_REDUCE3, .dst = dst, .a = a, .b = b, .n = count};
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_copy(mesh_sched_t *s, void *dst, const void *src, size_t bytes, const int *deps,
                    int ndeps)
{
    mesh_task_t t = {.kind = TASK_COPY, .dst = dst, .a = src, .n = bytes};
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_nop(mesh_sched_t *s, const int *deps, int ndeps)
{
    mesh_task_t t = {.kind = TASK_NOP};
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_poll(mesh_sched_t *s, mesh_sched_poll_fn fn, void *arg, const int *deps, int ndeps)
{
    mesh_task_poll_t *p = mesh_sched_scratch(s, sizeof(*p));
    if (p == NULL)
        return -1;
    *p = (mesh_task_poll_t){fn, arg};
    mesh_task_t t = {.kind = TASK_POLL, .peer = -1, .dst = p};
    return add_task(s, &t, deps, ndeps);
}

static mesh_status_t task_poll(const mesh_task_t *t)
{
    const mesh_task_poll_t *p = t->dst;
    return p->fn(p->arg);
}

void *mesh_sched_scratch(mesh_sched_t *s, size_t bytes)
{
    if (s->status != MESH_OK)
        return NULL;
    mesh_scratch_t *sc = NULL;
    /* a kept block that fits without wasting much */
    for (mesh_scratch_t **pp = &s->spare; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->size >= bytes && (*pp)->size <= 2 * bytes + 4096) {
            sc = *pp;
            *pp = sc->next;
            break;
        }
    }
    if (sc == NULL) {
        if (posix_memalign((void **)&sc, 64, 64 + (bytes ? bytes : 1)) != 0) {
            s->status =
                mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate %zu bytes of scratch", bytes);
            return NULL;
        }
        sc->size = bytes ? bytes : 1;
    }
    sc->next = s->scratch;
    s->scratch = sc;
    return (char *)sc + 64;
}

void mesh_sched_on_complete(mesh_sched_t *s, mesh_sched_finalize_fn fn, void *arg)
{
    s->finalize = fn;
    s->finalize_arg = arg;
}

mesh_status_t mesh_sched_build_status(const mesh_sched_t *s)
{
    return s->status;
}
mesh_status_t mesh_sched_run_status(const mesh_sched_t *s)
{
    /* read by waiters without the communicator's lock: finish() stores it last */
    return __atomic_load_n(&s->status, __ATOMIC_ACQUIRE);
}
mesh_comm_t *mesh_sched_comm(const mesh_sched_t *s)
{
    return s->comm;
}

void mesh_sched_set_tag(mesh_sched_t *s, uint64_t tag_base)
{
    s->tag_base = tag_base;
}
uint64_t mesh_sched_tag(const mesh_sched_t *s)
{
    return s->tag_base;
}

uint32_t mesh_sched_sig(const mesh_sched_t *s)
{
    return (uint32_t)(s->tag_base & MESH_TL_TAG_SIG_MASK);
}

void mesh_sched_set_call(mesh_sched_t *s, uint32_t seq, size_t count, int root)
{
    s->call_seq = seq;
    s->call_count = count;
    s->call_root = root;
}

uint32_t mesh_sched_replay_call(mesh_sched_t *s, uint32_t seq, size_t count, int root)
{
    uint32_t sig = mesh_sched_sig(s);
    s->tag_base = mesh_tag_coll(seq, sig);
    mesh_sched_set_call(s, seq, count, root);
    return sig;
}

static void ready_push(mesh_sched_t *s, int id)
{
    int kind = s->tasks[id].kind;
    if (kind == TASK_SEND || kind == TASK_RECV)
        s->ready[s->nready++] = id;
    else
        s->ready[s->ntasks - 1 - s->ncomp++] = id;
}

static int ready_pop(mesh_sched_t *s)
{
    if (s->nready > 0)
        return s->ready[--s->nready];
    return s->ready[s->ntasks - 1 - --s->ncomp];
}

/* Successor lists (CSR) from the edge list, and room for the run. */
static mesh_status_t build_csr(mesh_sched_t *s)
{
    int n = s->ntasks;
    int run_cap = s->cap_run;
    if (grow((void **)&s->succ, &s->cap_succ, s->nedges ? s->nedges : 1, sizeof(int)) ||
        grow((void **)&s->ready, &run_cap, n ? n : 1, sizeof(int)) ||
        grow((void **)&s->inflight, &s->cap_run, n ? n : 1, sizeof(int)))
        return s->status = mesh_error(MESH_ERR_NO_MEMORY, "cannot start a %d-task schedule", n);
    for (int i = 0; i < n; i++)
        s->tasks[i].succ_count = 0;
    for (int e = 0; e < s->nedges; e++)
        s->tasks[s->edges[e].from].succ_count++;
    uint32_t pos = 0;
    for (int i = 0; i < n; i++) {
        s->tasks[i].succ_first = pos;
        pos += s->tasks[i].succ_count;
        s->tasks[i].succ_count = 0;
    }
    for (int e = 0; e < s->nedges; e++) {
        mesh_task_t *t = &s->tasks[s->edges[e].from];
        s->succ[t->succ_first + t->succ_count++] = s->edges[e].to;
    }
    s->csr_built = 1;
    return MESH_OK;
}

mesh_status_t mesh_sched_start(mesh_sched_t *s, int caller_drives)
{
    if (s->status != MESH_OK)
        return s->status;
    int n = s->ntasks;
    if (!s->csr_built)
        MESH_CHECK(build_csr(s));
    s->shared = !caller_drives;
    MESH_CHECK(activate(s->comm, s, s->shared));
    s->nready = s->ncomp = 0;
    for (int i = n - 1; i >= 0; i--)
        if (s->tasks[i].ndeps_left == 0)
            ready_push(s, i);
    s->started = 1;
    __atomic_store_n(&s->status, MESH_INPROGRESS, __ATOMIC_RELAXED);
    /* the first idle poll reads the clock and sets both (a small collective often completes
     * before any) */
    s->next_check = 0;
    s->idle_polls = 0;
    s->moved = 1;
    return MESH_OK;
}

static void complete_task(mesh_sched_t *s, int id)
{
    mesh_task_t *t = &s->tasks[id];
    t->state = TASK_DONE;
    s->ndone++;
    /* push successors in reverse so the first-created runs first */
    for (int k = (int)t->succ_count - 1; k >= 0; k--) {
        int sid = s->succ[t->succ_first + k];
        if (--s->tasks[sid].ndeps_left == 0)
            ready_push(s, sid);
    }
}

static uint64_t task_tag(const mesh_sched_t *s, const mesh_task_t *t)
{
    return s->tag_base | t->tag;
}

static void finish(mesh_sched_t *s, mesh_status_t status)
{
    deactivate(s->comm, s, s->shared);
    if (status == MESH_OK && s->finalize)
        s->finalize(s, s->finalize_arg);
    /* last: a waiter on another thread may return (and reuse the buffers) once it sees it */
    int shared = s->shared;
    __atomic_store_n(&s->status, status, __ATOMIC_RELEASE);
    /* and it may sleep: a nonblocking operation's waiter can be any thread */
    if (shared)
        mesh_wait_wake_local();
}

/* The call this schedule serves, for the health reports. */
static mesh_health_call_t sched_call(const mesh_sched_t *s)
{
    return (mesh_health_call_t){.seq = (s->tag_base & MESH_TAG_P2P) ? UINT32_MAX : s->call_seq,
                                .sig = (uint32_t)(s->tag_base & MESH_TL_TAG_SIG_MASK),
                                .count = s->call_count,
                                .root = s->call_root};
}

static mesh_status_t fail_with(mesh_sched_t *s, mesh_status_t status)
{
    /* operations still posted keep pointing at our tasks; transports complete them on abort or
     * peer failure, and the communicator is unusable after a failure anyway */
    mesh_health_call_t call = sched_call(s);
    mesh_health_failed(s->comm, status, &call);
    finish(s, status);
    return status;
}

void mesh_sched_fail(mesh_sched_t *s, mesh_status_t status)
{
    if (s->started && s->status == MESH_INPROGRESS)
        fail_with(s, status);
}

static void describe_waits(const mesh_sched_t *s, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->ninflight && i < 6 && off < len; i++) {
        const mesh_task_t *t = &s->tasks[s->inflight[i]];
        if (t->kind == TASK_POLL)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                                    task_kind_names[t->kind]);
        else
            off += (size_t)snprintf(buf + off, len - off, "%s%s rank %d (%zu bytes)", i ? ", " : "",
                                    task_kind_names[t->kind], t->peer, t->n);
    }
    if (s->ninflight > 6 && off < len)
        snprintf(buf + off, len - off, ", ...");
}

/* An operation failed: a message too long for its receive, or a peer's failure (the rank every
 * survivor names: mesh_health_peer_failed). */
static mesh_status_t op_failure(mesh_sched_t *s, const mesh_task_t *t, mesh_status_t st)
{
    const char *dir = t->kind == TASK_SEND ? "to" : "from";
    if (st == MESH_ERR_TRUNCATED && t->op.length > t->n)
        return mesh_error(st,
                          "receive from rank %d: its %zu-byte message is longer than the "
                          "%zu-byte receive",
                          t->peer, t->op.length, t->n);
    if (st == MESH_ERR_TRUNCATED)
        return mesh_error(st,
                          "receive from rank %d: its message is longer than the %zu-byte "
                          "receive",
                          t->peer, t->n);
    if (st != MESH_ERR_PEER_FAILED)
        return mesh_error(st, "%s %s rank %d failed: %s", task_kind_names[t->kind], dir, t->peer,
                          mesh_status_string(st));
    char during[32];
    snprintf(during, sizeof(during), "%s %s", task_kind_names[t->kind], dir);
    return mesh_health_peer_failed(s->comm, t->peer, during);
}

/* Slow path while nothing moves: is a rank this schedule still exchanges with known dead?
 * Ranks it is done with may have finished and exited legitimately; a failure further away
 * reaches us as a verdict from the rank that saw it. */
static mesh_status_t check_peers(mesh_sched_t *s)
{
    for (int i = 0; i < s->ntasks; i++) {
        const mesh_task_t *t = &s->tasks[i];
        if ((t->kind != TASK_SEND && t->kind != TASK_RECV) || t->state == TASK_DONE)
            continue;
        MESH_CHECK(mesh_health_watch(s->comm, t->peer));
    }
    return MESH_OK;
}

/* The wait timed out: the health protocol names the rank that stopped, or the other call. */
static mesh_status_t stalled(mesh_sched_t *s)
{
    char waits[256];
    describe_waits(s, waits, sizeof(waits));
    int peers[8], npeers = 0;
    for (int i = 0; i < s->ninflight && npeers < 8; i++)
        if (s->tasks[s->inflight[i]].kind != TASK_POLL)
            peers[npeers++] = s->tasks[s->inflight[i]].peer;
    mesh_health_call_t call = sched_call(s);
    return mesh_health_stalled(s->comm, &call, peers, npeers, waits);
}

mesh_status_t mesh_sched_progress(mesh_sched_t *s)
{
    mesh_comm_t *comm = s->comm;
    if (s->status != MESH_INPROGRESS)
        return s->status;
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed))
        return fail_with(s, mesh_error(MESH_ERR_ABORTED, "communicator aborted"));
    int progressed = 0;
    for (;;) {
        while (s->nready + s->ncomp > 0) {
            int id = ready_pop(s);
            mesh_task_t *t = &s->tasks[id];
            mesh_status_t st = MESH_OK;
            switch (t->kind) {
            case TASK_SEND:
                st = mesh_comm_isend(comm, t->peer, task_tag(s, t), t->a, t->n, &t->op);
                break;
            case TASK_RECV:
                st = mesh_comm_irecv(comm, t->peer, task_tag(s, t), t->dst, t->n, &t->op);
                break;
            case TASK_REDUCE:
                mesh_reduce_local(t->dst, t->a, t->n, s->dtype, s->op);
                break;
            case TASK_REDUCE3:
                if (t->stream)
                    mesh_reduce_local3_stream(t->dst, t->a, t->b, t->n, s->dtype, s->op);
                else
                    mesh_reduce_local3(t->dst, t->a, t->b, t->n, s->dtype, s->op);
                break;
            case TASK_COPY:
                if (t->n && t->dst != t->a)
                    memmove(t->dst, t->a, t->n);
                break;
            case TASK_POLL:
                st = task_poll(t);
                if (st < 0)
                    return fail_with(s, st);
                break;
            default:
                break;
            }
            if (st < 0)
                return fail_with(s, op_failure(s, t, st));
            if (t->kind == TASK_SEND || t->kind == TASK_RECV || st == MESH_INPROGRESS) {
                t->state = TASK_POSTED;
                s->inflight[s->ninflight++] = id;
            } else {
                complete_task(s, id);
            }
            progressed = 1;
        }
        int moved = 0;
        for (int i = 0; i < s->ninflight;) {
            mesh_task_t *t = &s->tasks[s->inflight[i]];
            int st = t->kind == TASK_POLL ? task_poll(t) : t->op.status;
            if (t->kind == TASK_POLL && st < 0)
                return fail_with(s, (mesh_status_t)st);
            if (st == MESH_INPROGRESS) {
                i++;
                continue;
            }
            /* a message longer than its receive is, in a collective, another call's message */
            if (t->kind == TASK_RECV && (st == MESH_OK || st == MESH_ERR_TRUNCATED) &&
                ((t->op.peer_tag ^ task_tag(s, t)) & MESH_TL_TAG_SIG_MASK) != 0) {
                mesh_health_call_t call = sched_call(s);
                return fail_with(
                    s, mesh_health_other_call(comm, &call, t->peer,
                                              (uint32_t)(t->op.peer_tag & MESH_TL_TAG_SIG_MASK)));
            }
            if (t->kind == TASK_RECV && st == MESH_ERR_TRUNCATED &&
                !(task_tag(s, t) & MESH_TL_TAG_EXACT)) {
                char len[32] = "longer";
                if (t->op.length > t->n)
                    snprintf(len, sizeof(len), "%zu bytes", t->op.length);
                return fail_with(s, mesh_error(MESH_ERR_MISMATCH,
                                               "a message from rank %d has %s where rank %d "
                                               "expected %zu: the ranks called with different "
                                               "counts",
                                               t->peer, len, s->comm->rank, t->n));
            }
            if (st < 0)
                return fail_with(s, op_failure(s, t, (mesh_status_t)st));
            if (t->kind == TASK_RECV && t->op.length != t->n) {
                return fail_with(s, mesh_error(MESH_ERR_MISMATCH,
                                               "a message from rank %d has %zu bytes where rank "
                                               "%d expected %zu: the ranks called with different "
                                               "counts",
                                               t->peer, t->op.length, s->comm->rank, t->n));
            }
            s->inflight[i] = s->inflight[--s->ninflight];
            complete_task(s, (int)(t - s->tasks));
            moved = 1;
        }
        if (!moved && s->nready + s->ncomp == 0)
            break;
        progressed = 1;
    }
    if (s->ndone == s->ntasks) {
        finish(s, MESH_OK);
        return MESH_OK;
    }
    if (progressed) {
        s->idle_polls = 0;
        s->moved = 1;
        return MESH_INPROGRESS;
    }
    /* the clock is read every few idle polls only: a read costs as much as a poll */
    if ((++s->idle_polls & (SCHED_CLOCK_EVERY - 1)) != 1)
        return MESH_INPROGRESS;
    double now = mesh_time();
    if (s->moved) { /* the timeout counts from the last time something moved */
        s->moved = 0;
        s->deadline = now + comm->timeout_s;
    }
    if (s->next_check == 0)
        s->next_check = now + 0.2;
    if (now >= s->next_check) {
        s->next_check = now + 0.2;
        mesh_status_t st = check_peers(s);
        if (st < 0)
            return fail_with(s, st);
    }
    if (now > s->deadline)
        return fail_with(s, stalled(s));
    return MESH_INPROGRESS;
}
