/* The schedule executor: a task graph run on the progress engine. */
#define MESH_LOG_SUBSYSTEM "sched"
#include "collectives/sched.h"
#include "collectives/signature.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/reduce.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TASK_SEND, TASK_RECV, TASK_REDUCE, TASK_REDUCE3, TASK_COPY, TASK_NOP };
enum { TASK_WAITING, TASK_POSTED, TASK_DONE };

static const char *const task_kind_names[] = {"send", "recv", "reduce", "reduce3", "copy", "nop"};

typedef struct {
    uint8_t kind;
    uint8_t state;
    uint8_t stream; /* reduce3: dst written with non-temporal stores */
    int peer;
    uint32_t ndeps_left;
    uint32_t ndeps; /* as built, for a replay */
    uint32_t succ_first;
    uint32_t succ_count;
    void *dst;
    const void *a;
    const void *b;
    size_t n; /* bytes for send/recv/copy, elements for reductions */
    uint64_t tag; /* send/recv: added to the schedule's tag base (the message's index for a
                     collective, the whole tag for point-to-point) */
    mesh_tl_op_t op;
} mesh_task_t;

typedef struct {
    int from;
    int to;
} mesh_edge_t;

typedef struct mesh_scratch {
    struct mesh_scratch *next;
    size_t size;
    /* payload follows, 64-byte aligned */
} mesh_scratch_t;

/* A communicator keeps a few finished schedules, with their task arrays and up to
 * MESH_SCHED_SCRATCH_KEEP_BYTES of scratch each, so that a stream of collectives does not go
 * through malloc (and page faults) on every call. */
#define SCHED_POOL_MAX 4

/* The communicator's store of schedules: the pool above, and failed schedules whose operations
 * transports may still complete (freed once the transports are closed). */
struct mesh_sched_cache {
    mesh_sched_t *pool;
    int pool_len;
    mesh_sched_t *zombies;
};
/* Idle progress calls between two reads of the clock (a power of two). */
#define SCHED_CLOCK_EVERY 16

struct mesh_sched {
    mesh_comm_t *comm;
    mesh_dtype_t dtype;
    mesh_op_t op;
    mesh_status_t status; /* build error, then run state */
    int started;
    int shared; /* other threads' waits may have to drive it (mesh_comm_activate) */

    mesh_task_t *tasks;
    int ntasks, cap_tasks;
    mesh_edge_t *edges;
    int nedges, cap_edges;
    int *succ;     /* CSR successors */
    int cap_succ;
    int csr_built; /* succ[] and the run arrays are ready (kept across a replay) */
    int cap_run;   /* of ready and inflight */
    /* ready task ids: sends and receives stacked from the front ([0, nready)), local work
     * (copies, reductions, joins) from the back ([ntasks - ncomp, ntasks)), so that a rank posts
     * every transfer it can before it spends time on local work */
    int *ready;
    int nready, ncomp;
    int *inflight; /* posted send/recv task ids */
    int ninflight;
    int ndone;

    uint32_t *send_count; /* [comm size] messages to each peer so far (build) */
    uint32_t *recv_count;
    uint64_t tag_base;
    /* the call, for a message naming it when a peer called another operation */
    uint32_t call_seq;
    int call_root;
    size_t call_count;

    mesh_scratch_t *scratch;
    mesh_scratch_t *spare; /* kept from an earlier use of this schedule object */
    mesh_sched_finalize_fn finalize;
    void *finalize_arg;

    unsigned char *key; /* arguments this graph was built for (replay); keylen 0: none */
    size_t keylen, keycap;
    const void *cookie;

    double deadline;
    double next_check;
    unsigned idle_polls; /* progress calls since something last moved */
    int moved;           /* something moved since the deadline was set */
    mesh_sched_t *next;  /* in the communicator's cache */
};

static void scratch_free_list(mesh_scratch_t *sc)
{
    while (sc != NULL) {
        mesh_scratch_t *n = sc->next;
        free(sc);
        sc = n;
    }
}

/* Back to a freshly created state, keeping the arrays and a bounded amount of scratch. */
static void sched_reset(mesh_sched_t *s)
{
    size_t kept = 0;
    for (mesh_scratch_t *sc = s->spare; sc != NULL; sc = sc->next) kept += sc->size;
    while (s->scratch != NULL) {
        mesh_scratch_t *sc = s->scratch;
        s->scratch = sc->next;
        if (kept + sc->size > MESH_SCHED_SCRATCH_KEEP_BYTES) {
            free(sc);
            continue;
        }
        kept += sc->size;
        sc->next = s->spare;
        s->spare = sc;
    }
    s->status = MESH_OK;
    s->started = 0;
    s->csr_built = 0;
    s->keylen = 0;
    s->ntasks = s->nedges = s->nready = s->ncomp = s->ninflight = s->ndone = 0;
    s->tag_base = 0;
    s->finalize = NULL;
    s->finalize_arg = NULL;
    s->next = NULL;
    memset(s->send_count, 0, 2 * (size_t)s->comm->size * sizeof(uint32_t));
}

struct mesh_sched_cache *mesh_sched_cache_create(void)
{
    return calloc(1, sizeof(struct mesh_sched_cache));
}

mesh_status_t mesh_sched_create(mesh_comm_t *comm, mesh_dtype_t dtype, mesh_op_t op,
                                mesh_sched_t **out)
{
    /* an unkeyed pooled schedule, else the least recently pooled one (its graph is the least
     * likely to be replayed) */
    struct mesh_sched_cache *cache = comm->sched_cache;
    mesh_sched_t **pick = NULL;
    for (mesh_sched_t **pp = &cache->pool; *pp != NULL; pp = &(*pp)->next) {
        pick = pp;
        if ((*pp)->keylen == 0) break;
    }
    mesh_sched_t *s = pick ? *pick : NULL;
    if (s != NULL) {
        *pick = s->next;
        cache->pool_len--;
        sched_reset(s);
    } else {
        s = calloc(1, sizeof(*s));
        if (s == NULL) return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule");
        s->send_count = calloc(2 * (size_t)comm->size, sizeof(uint32_t));
        if (s->send_count == NULL) {
            free(s);
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule for %d ranks",
                              comm->size);
        }
        s->comm = comm;
        s->status = MESH_OK;
    }
    s->recv_count = s->send_count + comm->size;
    s->dtype = dtype;
    s->op = op;
    *out = s;
    return MESH_OK;
}

static void sched_free(mesh_sched_t *s);

static size_t scratch_bytes(const mesh_sched_t *s)
{
    size_t n = 0;
    for (const mesh_scratch_t *sc = s->scratch; sc != NULL; sc = sc->next) n += sc->size;
    return n;
}

void mesh_sched_set_key(mesh_sched_t *s, const void *key, size_t len, const void *cookie)
{
    s->keylen = 0;
    if (len == 0 || s->status != MESH_OK) return;
    if (len > s->keycap) {
        unsigned char *k = realloc(s->key, len);
        if (k == NULL) return;
        s->key = k;
        s->keycap = len;
    }
    memcpy(s->key, key, len);
    s->keylen = len;
    s->cookie = cookie;
}

mesh_sched_t *mesh_sched_reuse(mesh_comm_t *comm, const void *key, size_t len,
                               const void **cookie)
{
    struct mesh_sched_cache *cache = comm->sched_cache;
    for (mesh_sched_t **pp = &cache->pool; *pp != NULL; pp = &(*pp)->next) {
        mesh_sched_t *s = *pp;
        if (s->keylen != len || memcmp(s->key, key, len) != 0) continue;
        *pp = s->next;
        cache->pool_len--;
        /* the tasks, their successor lists, scratch and finalizer stay as built */
        s->status = MESH_OK;
        s->started = 0;
        s->nready = s->ncomp = s->ninflight = s->ndone = 0;
        s->next = NULL;
        for (int i = 0; i < s->ntasks; i++) {
            s->tasks[i].state = TASK_WAITING;
            s->tasks[i].ndeps_left = s->tasks[i].ndeps;
        }
        *cookie = s->cookie;
        return s;
    }
    return NULL;
}

void mesh_sched_destroy(mesh_sched_t *s)
{
    if (s == NULL) return;
    if (s->started && s->status == MESH_INPROGRESS) mesh_sched_fail(s, MESH_ERR_ABORTED);
    struct mesh_sched_cache *cache = s->comm->sched_cache;
    if (cache == NULL) {
        /* its communicator was destroyed: transports are closed, nothing holds our tasks */
        sched_free(s);
        return;
    }
    for (int i = 0; i < s->ninflight; i++) {
        if (s->tasks[s->inflight[i]].op.status == MESH_INPROGRESS) {
            /* a transport still holds one of our operations: keep the memory until the
             * communicator closes its transports */
            s->next = cache->zombies;
            cache->zombies = s;
            return;
        }
    }
    /* only a graph that ran to completion is replayed, and only if its scratch is small
     * enough to keep */
    if (s->keylen != 0 && (s->status != MESH_OK || !s->started ||
                           scratch_bytes(s) > MESH_SCHED_SCRATCH_KEEP_BYTES))
        s->keylen = 0;
    if (cache->pool_len < SCHED_POOL_MAX) {
        s->next = cache->pool;
        cache->pool = s;
        cache->pool_len++;
        return;
    }
    sched_free(s);
}

void mesh_sched_cache_free(struct mesh_sched_cache *cache)
{
    if (cache == NULL) return;
    mesh_sched_t *lists[2] = {cache->zombies, cache->pool};
    for (int i = 0; i < 2; i++) {
        while (lists[i]) {
            mesh_sched_t *s = lists[i];
            lists[i] = s->next;
            sched_free(s);
        }
    }
    free(cache);
}

static void sched_free(mesh_sched_t *s)
{
    scratch_free_list(s->scratch);
    scratch_free_list(s->spare);
    free(s->tasks);
    free(s->edges);
    free(s->succ);
    free(s->ready);
    free(s->inflight);
    free(s->send_count);
    free(s->key);
    free(s);
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int ncap = *cap ? *cap * 2 : 16; /* small collectives have a handful of tasks */
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static int add_task(mesh_sched_t *s, const mesh_task_t *t, const int *deps, int ndeps)
{
    if (s->status != MESH_OK) return -1;
    if (grow((void **)&s->tasks, &s->cap_tasks, s->ntasks + 1, sizeof(mesh_task_t)) ||
        grow((void **)&s->edges, &s->cap_edges, s->nedges + ndeps, sizeof(mesh_edge_t))) {
        s->status = mesh_error(MESH_ERR_NO_MEMORY, "cannot grow a schedule past %d tasks",
                               s->ntasks);
        return -1;
    }
    int id = s->ntasks++;
    mesh_task_t *task = &s->tasks[id];
    *task = *t;
    task->state = TASK_WAITING;
    task->ndeps_left = 0;
    for (int i = 0; i < ndeps; i++) {
        if (deps[i] < 0) continue;
        if (deps[i] >= id) {
            s->status = mesh_error(MESH_ERR_INTERNAL, "task %d depends on later task %d", id,
                                   deps[i]);
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
        s->status = mesh_error(MESH_ERR_UNSUPPORTED, "a collective of more than %u messages "
                               "between two ranks", 1u << MESH_TAG_COLL_INDEX_BITS);
        return 0;
    }
    return (uint64_t)count[peer]++ << MESH_TL_TAG_SIG_BITS;
}

int mesh_sched_send(mesh_sched_t *s, int peer, const void *buf, size_t bytes, const int *deps,
                    int ndeps)
{
    mesh_task_t t = {.kind = TASK_SEND, .peer = peer, .a = buf, .n = bytes};
    if (s->status == MESH_OK && (peer < 0 || peer >= s->comm->size)) {
        s->status = mesh_error(MESH_ERR_INTERNAL, "send to rank %d outside 0..%d", peer,
                               s->comm->size - 1);
        return -1;
    }
    t.tag = s->status == MESH_OK ? msg_index(s, s->send_count, peer) : 0;
    return add_task(s, &t, deps, ndeps);
}

int mesh_sched_send_tag(mesh_sched_t *s, int peer, const void *buf, size_t bytes, uint64_t tag)
{
    int id = mesh_sched_send(s, peer, buf, bytes, NULL, 0);
    if (id >= 0) s->tasks[id].tag = tag;
    return id;
}

int mesh_sched_recv_tag(mesh_sched_t *s, int peer, void *buf, size_t bytes, uint64_t tag)
{
    int id = mesh_sched_recv(s, peer, buf, bytes, NULL, 0);
    if (id >= 0) s->tasks[id].tag = tag;
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

int mesh_sched_recv(mesh_sched_t *s, int peer, void *buf, size_t bytes, const int *deps,
                    int ndeps)
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

void *mesh_sched_scratch(mesh_sched_t *s, size_t bytes)
{
    if (s->status != MESH_OK) return NULL;
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
            s->status = mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate %zu bytes of scratch",
                                   bytes);
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

mesh_status_t mesh_sched_status(const mesh_sched_t *s) { return s->status; }
mesh_status_t mesh_sched_state(const mesh_sched_t *s)
{
    /* read by waiters without the communicator's lock: finish() stores it last */
    return __atomic_load_n(&s->status, __ATOMIC_ACQUIRE);
}
mesh_comm_t *mesh_sched_comm(const mesh_sched_t *s) { return s->comm; }

void mesh_sched_set_tag(mesh_sched_t *s, uint64_t tag_base) { s->tag_base = tag_base; }
uint64_t mesh_sched_tag(const mesh_sched_t *s) { return s->tag_base; }

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
    for (int i = 0; i < n; i++) s->tasks[i].succ_count = 0;
    for (int e = 0; e < s->nedges; e++) s->tasks[s->edges[e].from].succ_count++;
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
    if (s->status != MESH_OK) return s->status;
    int n = s->ntasks;
    if (!s->csr_built) MESH_CHECK(build_csr(s));
    s->shared = !caller_drives;
    MESH_CHECK(mesh_comm_activate(s->comm, s, s->shared));
    s->nready = s->ncomp = 0;
    for (int i = n - 1; i >= 0; i--)
        if (s->tasks[i].ndeps_left == 0) ready_push(s, i);
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
        if (--s->tasks[sid].ndeps_left == 0) ready_push(s, sid);
    }
}

static uint64_t task_tag(const mesh_sched_t *s, const mesh_task_t *t)
{
    return s->tag_base | t->tag;
}

static void finish(mesh_sched_t *s, mesh_status_t status)
{
    mesh_comm_deactivate(s->comm, s, s->shared);
    if (status == MESH_OK && s->finalize) s->finalize(s, s->finalize_arg);
    /* last: a waiter on another thread may return (and reuse the buffers) once it sees it */
    __atomic_store_n(&s->status, status, __ATOMIC_RELEASE);
}

static mesh_status_t fail_with(mesh_sched_t *s, mesh_status_t status)
{
    /* operations still posted keep pointing at our tasks; transports complete them on abort or
     * peer failure, and the communicator is unusable after a failure anyway */
    mesh_comm_set_failed(s->comm, status);
    finish(s, status);
    return status;
}

void mesh_sched_fail(mesh_sched_t *s, mesh_status_t status)
{
    if (s->started && s->status == MESH_INPROGRESS) fail_with(s, status);
}

static void describe_waits(const mesh_sched_t *s, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->ninflight && i < 6 && off < len; i++) {
        const mesh_task_t *t = &s->tasks[s->inflight[i]];
        off += (size_t)snprintf(buf + off, len - off, "%s%s rank %d (%zu bytes)", i ? ", " : "",
                                task_kind_names[t->kind], t->peer, t->n);
    }
    if (s->ninflight > 6 && off < len) snprintf(buf + off, len - off, ", ...");
}

/* A peer's operation failed: name the rank every survivor names (mesh_comm_blame). */
static mesh_status_t op_failure(mesh_sched_t *s, const mesh_task_t *t, mesh_status_t st)
{
    const char *dir = t->kind == TASK_SEND ? "to" : "from";
    if (st == MESH_ERR_TRUNCATED && t->op.length > t->n)
        return mesh_error(st, "receive from rank %d: its %zu-byte message is longer than the "
                          "%zu-byte receive", t->peer, t->op.length, t->n);
    if (st == MESH_ERR_TRUNCATED)
        return mesh_error(st, "receive from rank %d: its message is longer than the %zu-byte "
                          "receive", t->peer, t->n);
    if (st != MESH_ERR_PEER_FAILED)
        return mesh_error(st, "%s %s rank %d failed: %s", task_kind_names[t->kind], dir, t->peer,
                          mesh_status_string(st));
    int culprit = mesh_comm_blame(s->comm, t->peer);
    if (culprit != t->peer && s->comm->culprit_hung)
        return mesh_error(MESH_ERR_TIMEOUT, "rank %d stopped answering (reported by another "
                          "rank); rank %d closed its connection during a %s %s it",
                          culprit, t->peer, task_kind_names[t->kind], dir);
    if (culprit != t->peer)
        return mesh_error(st, "rank %d failed (reported by another rank); rank %d closed its "
                          "connection during a %s %s it",
                          culprit, t->peer, task_kind_names[t->kind], dir);
    return mesh_error(st, "rank %d failed: %s during a %s %s rank %d", t->peer,
                      mesh_status_string(st), task_kind_names[t->kind], dir, t->peer);
}

/* A message of another call: say which calls, and tell every rank. */
static mesh_status_t op_mismatch(mesh_sched_t *s, const mesh_task_t *t)
{
    uint32_t mine = (uint32_t)(task_tag(s, t) & MESH_TL_TAG_SIG_MASK);
    uint32_t theirs = (uint32_t)(t->op.peer_tag & MESH_TL_TAG_SIG_MASK);
    char a[96], b[96];
    mesh_coll_sig_describe(mine, s->call_count, s->call_root, a, sizeof(a));
    mesh_coll_sig_describe(theirs, SIZE_MAX, -1, b, sizeof(b));
    mesh_comm_publish_mismatch(s->comm, t->peer, mine, theirs, s->call_count);
    return mesh_error(MESH_ERR_MISMATCH, "rank %d called %s where rank %d called %s (%s; "
                      "collective %u of the communicator)", t->peer, b, s->comm->rank, a,
                      mesh_coll_sig_diff(mine, theirs), s->call_seq);
}

/* Slow path while nothing moves: is a rank this schedule still exchanges with known dead?
 * Ranks it is done with may have finished and exited legitimately; a failure further away
 * reaches us as a verdict from the rank that saw it. */
static mesh_status_t check_peers(mesh_sched_t *s)
{
    mesh_comm_t *comm = s->comm;
    for (int i = 0; i < s->ntasks; i++) {
        const mesh_task_t *t = &s->tasks[i];
        if ((t->kind != TASK_SEND && t->kind != TASK_RECV) || t->state == TASK_DONE) continue;
        int p = t->peer;
        if (p == comm->rank || mesh_comm_check_peer(comm, p) != MESH_ERR_PEER_FAILED) continue;
        int culprit = mesh_comm_blame(comm, p);
        if (culprit != p && comm->culprit_hung)
            return mesh_error(MESH_ERR_TIMEOUT, "rank %d of the communicator stopped answering "
                              "(reported by another rank; rank %d of %d saw rank %d leave)",
                              culprit, comm->rank, comm->size, p);
        return mesh_error(MESH_ERR_PEER_FAILED,
                          "rank %d of the communicator failed (rank %d of %d saw it)", culprit,
                          comm->rank, comm->size);
    }
    return MESH_OK;
}

mesh_status_t mesh_sched_progress(mesh_sched_t *s)
{
    mesh_comm_t *comm = s->comm;
    if (s->status != MESH_INPROGRESS) return s->status;
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
                if (t->n && t->dst != t->a) memmove(t->dst, t->a, t->n);
                break;
            default:
                break;
            }
            if (st < 0) return fail_with(s, op_failure(s, t, st));
            if (t->kind == TASK_SEND || t->kind == TASK_RECV) {
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
            int st = t->op.status;
            if (st == MESH_INPROGRESS) {
                i++;
                continue;
            }
            /* a message longer than its receive is, in a collective, another call's message */
            if (t->kind == TASK_RECV && (st == MESH_OK || st == MESH_ERR_TRUNCATED) &&
                ((t->op.peer_tag ^ task_tag(s, t)) & MESH_TL_TAG_SIG_MASK) != 0)
                return fail_with(s, op_mismatch(s, t));
            if (t->kind == TASK_RECV && st == MESH_ERR_TRUNCATED &&
                !(task_tag(s, t) & MESH_TL_TAG_EXACT)) {
                char len[32] = "longer";
                if (t->op.length > t->n) snprintf(len, sizeof(len), "%zu bytes", t->op.length);
                return fail_with(s, mesh_error(MESH_ERR_MISMATCH,
                                               "a message from rank %d has %s where rank %d "
                                               "expected %zu: the ranks called with different "
                                               "counts",
                                               t->peer, len, s->comm->rank, t->n));
            }
            if (st < 0) return fail_with(s, op_failure(s, t, (mesh_status_t)st));
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
        if (!moved && s->nready + s->ncomp == 0) break;
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
    if ((++s->idle_polls & (SCHED_CLOCK_EVERY - 1)) != 1) return MESH_INPROGRESS;
    double now = mesh_time();
    if (s->moved) { /* the timeout counts from the last time something moved */
        s->moved = 0;
        s->deadline = now + comm->timeout_s;
    }
    if (s->next_check == 0) s->next_check = now + 0.2;
    if (now >= s->next_check) {
        s->next_check = now + 0.2;
        mesh_status_t st = check_peers(s);
        if (st < 0) return fail_with(s, st);
    }
    if (now > s->deadline) {
        char waits[256];
        describe_waits(s, waits, sizeof(waits));
        /* name the rank that stopped answering, as every survivor will */
        int peers[8], npeers = 0;
        for (int i = 0; i < s->ninflight && npeers < 8; i++)
            peers[npeers++] = s->tasks[s->inflight[i]].peer;
        uint32_t sig = (uint32_t)(s->tag_base & MESH_TL_TAG_SIG_MASK);
        uint32_t seq = (s->tag_base & MESH_TAG_P2P) ? UINT32_MAX : s->call_seq;
        mesh_comm_diag_t d;
        mesh_comm_find_hung(comm, peers, npeers, seq, sig, &d);
        int hung = d.kind == MESH_DIAG_HUNG ? d.peer : -1;
        if (d.kind == MESH_DIAG_MISMATCH) {
            char a[96], b[96];
            mesh_coll_sig_describe(sig, s->call_count, s->call_root, a, sizeof(a));
            mesh_coll_sig_describe(d.their_sig, (size_t)d.their_count, -1, b, sizeof(b));
            mesh_comm_publish_mismatch(comm, d.peer, sig, d.their_sig, s->call_count);
            return fail_with(s, mesh_error(MESH_ERR_MISMATCH, "rank %d called %s where rank %d "
                                           "called %s (%s; collective %u of the communicator, "
                                           "found when rank %d's wait timed out)", d.peer, b,
                                           comm->rank, a, mesh_coll_sig_diff(sig, d.their_sig),
                                           seq, comm->rank));
        }
        if (d.kind == MESH_DIAG_BEHIND) {
            char a[96], last[48] = "no collective call yet";
            mesh_coll_sig_describe(sig, s->call_count, s->call_root, a, sizeof(a));
            if (d.started) snprintf(last, sizeof(last), "its last is collective %u", d.their_last);
            mesh_comm_publish_verdict(comm, d.peer, 1);
            return fail_with(s, mesh_error(MESH_ERR_TIMEOUT, "rank %d has not called collective "
                                           "%u of the communicator, %s, which rank %d waits in "
                                           "since %.1f s (MESH_TIMEOUT): a call missing on rank "
                                           "%d, or made on another communicator?", d.peer, seq,
                                           a, comm->rank, comm->timeout_s, d.peer));
        }
        if (hung >= 0 && comm->culprit == hung && !comm->culprit_hung)
            return fail_with(s, mesh_error(MESH_ERR_PEER_FAILED, "rank %d failed (reported by "
                                           "another rank) while rank %d waited on: %s", hung,
                                           comm->rank, waits));
        if (hung >= 0) {
            mesh_comm_publish_verdict(comm, hung, 1);
            return fail_with(s, mesh_error(MESH_ERR_TIMEOUT,
                                           "rank %d stopped answering: rank %d waited %.1f s "
                                           "(MESH_TIMEOUT) on: %s, and rank %d did not answer "
                                           "a probe within %.2f s (MESH_HANG_PROBE)",
                                           hung, comm->rank, comm->timeout_s, waits, hung,
                                           comm->probe_wait_s));
        }
        return fail_with(s, mesh_error(MESH_ERR_TIMEOUT,
                                       "rank %d waited %.1f s (MESH_TIMEOUT) on: %s",
                                       comm->rank, comm->timeout_s, waits));
    }
    return MESH_INPROGRESS;
}
