/*
 * Simulated schedule executor. Besides running the tasks it checks what a real executor cannot:
 * every access stays inside the rank's buffers or scratch (and writes inside writable ones), any
 * two tasks of a rank whose accesses conflict are ordered by dependencies, matched sends and
 * receives have the same size, and nothing deadlocks.
 */
#include "tests/unit/coll_a_sim.h"
#include "libmesh/log.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_SEND, T_RECV, T_REDUCE, T_REDUCE3, T_COPY, T_NOP };

typedef struct {
    int type, peer, ndeps, state; /* state: 0 pending, 1 active (comm), 2 done */
    int *deps;
    const void *a, *b;
    void *dst;
    size_t n;  /* bytes (send/recv/copy) or elements (reduce) */
    int match; /* index among sends to / receives from peer */
    int mtask; /* the matching task on peer */
} task_t;

struct mesh_sched {
    mesh_comm_t *comm;
    mesh_dtype_t dtype;
    mesh_op_t op;
    size_t dsize;
    task_t *t;
    int nt, cap;
    mesh_status_t st;
    void **scratch;
    int nscratch;
};

typedef struct {
    const char *p;
    size_t len;
    int writable;
} region_t;

static region_t regions[SIM_MAXN][64];
static int nregions[SIM_MAXN];
static int sim_n;
static mesh_sched_t *sim_scheds[SIM_MAXN];

void sim_reset(int n)
{
    sim_n = n;
    memset(nregions, 0, sizeof(nregions));
}

void sim_region(int rank, const void *p, size_t len, int writable)
{
    if (!p || !len)
        return;
    regions[rank][nregions[rank]++] = (region_t){p, len, writable};
}

mesh_status_t mesh_error_set_(mesh_status_t status, const char *subsys, const char *file, int line,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error %d at %s:%d: ", status, file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

static size_t dtype_size(mesh_dtype_t d)
{
    switch (d) {
    case MESH_INT8:
    case MESH_UINT8:
        return 1;
    case MESH_INT32:
    case MESH_UINT32:
    case MESH_FP32:
        return 4;
    case MESH_FP16:
    case MESH_BF16:
        return 2;
    default:
        return 8;
    }
}

mesh_comm_t *mesh_sched_comm(const mesh_sched_t *s)
{
    return s->comm;
}

mesh_status_t mesh_sched_create(mesh_comm_t *comm, mesh_dtype_t dtype, mesh_op_t op,
                                mesh_sched_t **s)
{
    mesh_sched_t *x = calloc(1, sizeof(*x));
    x->comm = comm;
    x->dtype = dtype;
    x->op = op;
    x->dsize = dtype_size(dtype);
    *s = x;
    return MESH_OK;
}

void mesh_sched_destroy(mesh_sched_t *s)
{
    for (int i = 0; i < s->nt; i++)
        free(s->t[i].deps);
    for (int i = 0; i < s->nscratch; i++)
        free(s->scratch[i]);
    free(s->scratch);
    free(s->t);
    free(s);
}

static int add(mesh_sched_t *s, task_t t, const int *deps, int ndeps)
{
    if (s->nt == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->t = realloc(s->t, (size_t)s->cap * sizeof(task_t));
    }
    t.deps = malloc((size_t)(ndeps + 1) * sizeof(int));
    t.ndeps = 0;
    for (int i = 0; i < ndeps; i++) {
        if (deps[i] < 0)
            continue;
        if (deps[i] >= s->nt) {
            fprintf(stderr, "rank %d: task %d depends on later task %d\n", s->comm->rank, s->nt,
                    deps[i]);
            abort();
        }
        t.deps[t.ndeps++] = deps[i];
    }
    t.state = 0;
    t.match = 0;
    if (t.type == T_SEND || t.type == T_RECV) {
        if (t.peer < 0 || t.peer >= s->comm->size || t.peer == s->comm->rank) {
            fprintf(stderr, "rank %d: bad peer %d\n", s->comm->rank, t.peer);
            abort();
        }
        for (int i = 0; i < s->nt; i++)
            if (s->t[i].type == t.type && s->t[i].peer == t.peer)
                t.match++;
    }
    s->t[s->nt] = t;
    return s->nt++;
}

int mesh_sched_send(mesh_sched_t *s, int peer, const void *buf, size_t bytes, const int *deps,
                    int ndeps)
{
    return add(s, (task_t){.type = T_SEND, .peer = peer, .a = buf, .n = bytes}, deps, ndeps);
}
void mesh_sched_reduce_stream(mesh_sched_t *s, int id)
{
    /* how the result is stored only; it must name a reduce3 of this schedule */
    if (id < 0 || id >= s->nt || s->t[id].type != T_REDUCE3) {
        fprintf(stderr, "rank %d: task %d marked streaming is not a reduce3\n", s->comm->rank, id);
        abort();
    }
}
void mesh_sched_send_reused(mesh_sched_t *s, int id)
{
    /* a hint for the transport only; it must name a send of this schedule */
    if (id < 0 || id >= s->nt || s->t[id].type != T_SEND) {
        fprintf(stderr, "rank %d: task %d marked reused is not a send\n", s->comm->rank, id);
        abort();
    }
}
int mesh_sched_recv(mesh_sched_t *s, int peer, void *buf, size_t bytes, const int *deps, int ndeps)
{
    return add(s, (task_t){.type = T_RECV, .peer = peer, .dst = buf, .n = bytes}, deps, ndeps);
}
int mesh_sched_reduce(mesh_sched_t *s, void *dst, const void *src, size_t count, const int *deps,
                      int ndeps)
{
    return add(s, (task_t){.type = T_REDUCE, .dst = dst, .a = src, .n = count}, deps, ndeps);
}
int mesh_sched_reduce3(mesh_sched_t *s, void *dst, const void *a, const void *b, size_t count,
                       const int *deps, int ndeps)
{
    return add(s, (task_t){.type = T_REDUCE3, .dst = dst, .a = a, .b = b, .n = count}, deps, ndeps);
}
int mesh_sched_copy(mesh_sched_t *s, void *dst, const void *src, size_t bytes, const int *deps,
                    int ndeps)
{
    return add(s, (task_t){.type = T_COPY, .dst = dst, .a = src, .n = bytes}, deps, ndeps);
}
int mesh_sched_nop(mesh_sched_t *s, const int *deps, int ndeps)
{
    return add(s, (task_t){.type = T_NOP}, deps, ndeps);
}
void *mesh_sched_scratch(mesh_sched_t *s, size_t bytes)
{
    /* poisoned, so that reading scratch before writing it shows in the results */
    void *p = malloc(bytes ? bytes : 1);
    memset(p, 0xa5, bytes);
    s->scratch = realloc(s->scratch, (size_t)(s->nscratch + 1) * sizeof(void *));
    s->scratch[s->nscratch++] = p;
    sim_region(s->comm->rank, p, bytes, 1);
    return p;
}
mesh_status_t mesh_sched_build_status(const mesh_sched_t *s)
{
    return s->st;
}

/* ---- checks */

typedef struct {
    const char *p;
    size_t len;
    int w;
} acc_t;

static int accesses(const mesh_sched_t *s, const task_t *t, acc_t *a)
{
    size_t ds = s->dsize;
    int n = 0;
    switch (t->type) {
    case T_SEND:
        a[n++] = (acc_t){t->a, t->n, 0};
        break;
    case T_RECV:
        a[n++] = (acc_t){t->dst, t->n, 1};
        break;
    case T_REDUCE:
        a[n++] = (acc_t){t->a, t->n * ds, 0};
        a[n++] = (acc_t){t->dst, t->n * ds, 1};
        break;
    case T_REDUCE3:
        a[n++] = (acc_t){t->a, t->n * ds, 0};
        a[n++] = (acc_t){t->b, t->n * ds, 0};
        a[n++] = (acc_t){t->dst, t->n * ds, 1};
        break;
    case T_COPY:
        a[n++] = (acc_t){t->a, t->n, 0};
        a[n++] = (acc_t){t->dst, t->n, 1};
        break;
    }
    return n;
}

static int check_bounds(int rank, const mesh_sched_t *s)
{
    for (int i = 0; i < s->nt; i++) {
        acc_t a[3];
        int na = accesses(s, &s->t[i], a);
        for (int j = 0; j < na; j++) {
            if (a[j].len == 0)
                continue;
            int ok = 0;
            for (int r = 0; r < nregions[rank] && !ok; r++) {
                const region_t *g = &regions[rank][r];
                if (a[j].p >= g->p && a[j].p + a[j].len <= g->p + g->len &&
                    (!a[j].w || g->writable))
                    ok = 1;
            }
            if (!ok) {
                fprintf(stderr, "rank %d task %d (type %d): %s of %zu bytes at %p out of bounds\n",
                        rank, i, s->t[i].type, a[j].w ? "write" : "read", a[j].len,
                        (const void *)a[j].p);
                return -1;
            }
        }
        if (s->t[i].type == T_COPY && s->t[i].a == s->t[i].dst) {
            fprintf(stderr, "rank %d task %d copies onto itself\n", rank, i);
            return -1;
        }
    }
    return 0;
}

static int check_races(int rank, const mesh_sched_t *s)
{
    int nt = s->nt;
    size_t words = ((size_t)nt + 63) / 64;
    uint64_t *anc = calloc((size_t)nt * words, sizeof(uint64_t));
    for (int i = 0; i < nt; i++) {
        uint64_t *ai = anc + (size_t)i * words;
        for (int d = 0; d < s->t[i].ndeps; d++) {
            int j = s->t[i].deps[d];
            uint64_t *aj = anc + (size_t)j * words;
            for (size_t w = 0; w < words; w++)
                ai[w] |= aj[w];
            ai[j / 64] |= 1ull << (j % 64);
        }
    }
    int rc = 0;
    for (int i = 0; i < nt && !rc; i++) {
        acc_t ai[3];
        int ni = accesses(s, &s->t[i], ai);
        for (int j = i + 1; j < nt && !rc; j++) {
            if (anc[(size_t)j * words + i / 64] & (1ull << (i % 64)))
                continue;
            acc_t aj[3];
            int nj = accesses(s, &s->t[j], aj);
            for (int x = 0; x < ni && !rc; x++)
                for (int y = 0; y < nj && !rc; y++) {
                    if (!ai[x].w && !aj[y].w)
                        continue;
                    if (!ai[x].len || !aj[y].len)
                        continue;
                    if (ai[x].p < aj[y].p + aj[y].len && aj[y].p < ai[x].p + ai[x].len) {
                        fprintf(stderr,
                                "rank %d: unordered tasks %d (type %d) and %d (type %d) "
                                "conflict\n",
                                rank, i, s->t[i].type, j, s->t[j].type);
                        rc = -1;
                    }
                }
        }
    }
    free(anc);
    return rc;
}

/* ---- reductions of the types the tests use */

static void reduce_elems(const mesh_sched_t *s, void *dst, const void *a, const void *b, size_t n)
{
    mesh_op_t op = s->op;
    for (size_t i = 0; i < n; i++) {
        switch (s->dtype) {
        case MESH_INT8: {
            int8_t x, y, r;
            memcpy(&x, (const char *)a + i, 1);
            memcpy(&y, (const char *)b + i, 1);
            r = op == MESH_SUM    ? (int8_t)(x + y)
                : op == MESH_PROD ? (int8_t)(x * y)
                : op == MESH_MIN  ? (x < y ? x : y)
                                  : (x > y ? x : y);
            memcpy((char *)dst + i, &r, 1);
            break;
        }
        case MESH_INT64: {
            uint64_t x, y, r;
            memcpy(&x, (const char *)a + 8 * i, 8);
            memcpy(&y, (const char *)b + 8 * i, 8);
            r = op == MESH_SUM    ? x + y
                : op == MESH_PROD ? x * y
                : op == MESH_MIN  ? ((int64_t)x < (int64_t)y ? x : y)
                                  : ((int64_t)x > (int64_t)y ? x : y);
            memcpy((char *)dst + 8 * i, &r, 8);
            break;
        }
        default: {
            double x, y, r;
            memcpy(&x, (const char *)a + 8 * i, 8);
            memcpy(&y, (const char *)b + 8 * i, 8);
            r = op == MESH_SUM    ? x + y
                : op == MESH_PROD ? x * y
                : op == MESH_MIN  ? (x < y ? x : y)
                                  : (x > y ? x : y);
            memcpy((char *)dst + 8 * i, &r, 8);
            break;
        }
        }
    }
}

static void execute(mesh_sched_t *s, task_t *t)
{
    switch (t->type) {
    case T_REDUCE:
        reduce_elems(s, t->dst, t->dst, t->a, t->n);
        break;
    case T_REDUCE3:
        reduce_elems(s, t->dst, t->a, t->b, t->n);
        break;
    case T_COPY:
        memmove(t->dst, t->a, t->n);
        break;
    }
}

static int ready(const mesh_sched_t *s, const task_t *t)
{
    for (int d = 0; d < t->ndeps; d++)
        if (s->t[t->deps[d]].state != 2)
            return 0;
    return 1;
}

static task_t *find_match(int rank, const task_t *t)
{
    mesh_sched_t *p = sim_scheds[t->peer];
    int want = t->type == T_SEND ? T_RECV : T_SEND;
    for (int i = 0; i < p->nt; i++)
        if (p->t[i].type == want && p->t[i].peer == rank && p->t[i].match == t->match)
            return &p->t[i];
    return NULL;
}

int sim_run(mesh_sched_t **scheds, int n, unsigned seed)
{
    for (int r = 0; r < n; r++) {
        sim_scheds[r] = scheds[r];
        if (scheds[r]->st) {
            fprintf(stderr, "rank %d: schedule status %d\n", r, scheds[r]->st);
            return -1;
        }
        if (check_bounds(r, scheds[r]) || check_races(r, scheds[r]))
            return -1;
    }
    /* every send has exactly one receive of the same size */
    for (int r = 0; r < n; r++)
        for (int i = 0; i < scheds[r]->nt; i++) {
            task_t *t = &scheds[r]->t[i];
            if (t->type != T_SEND && t->type != T_RECV)
                continue;
            task_t *m = find_match(r, t);
            if (m)
                t->mtask = (int)(m - scheds[t->peer]->t);
            if (!m || m->n != t->n) {
                fprintf(stderr, "rank %d task %d (%s peer %d #%d, %zu bytes): %s\n", r, i,
                        t->type == T_SEND ? "send" : "recv", t->peer, t->match, t->n,
                        m ? "size mismatch" : "no match");
                return -1;
            }
        }
    srand(seed);
    typedef struct {
        int rank, task;
    } ev_t;
    size_t total = 0;
    for (int r = 0; r < n; r++)
        total += (size_t)scheds[r]->nt;
    ev_t *ev = malloc((total + 1) * sizeof(ev_t));
    for (;;) {
        size_t nev = 0, left = 0;
        for (int r = 0; r < n; r++)
            for (int i = 0; i < scheds[r]->nt; i++) {
                task_t *t = &scheds[r]->t[i];
                if (t->state != 2)
                    left++;
                if (t->state == 0 && ready(scheds[r], t))
                    ev[nev++] = (ev_t){r, i};
                /* a transfer: an active send whose receive is active too */
                if (t->state == 1 && t->type == T_SEND && scheds[t->peer]->t[t->mtask].state == 1)
                    ev[nev++] = (ev_t){r, i};
            }
        if (!left)
            break;
        if (!nev) {
            fprintf(stderr, "deadlock: %zu tasks left\n", left);
            free(ev);
            return -1;
        }
        /* every event found stays valid while the others run: apply them in random order */
        for (size_t i = nev - 1; i > 0; i--) {
            size_t j = (size_t)rand() % (i + 1);
            ev_t x = ev[i];
            ev[i] = ev[j];
            ev[j] = x;
        }
        for (size_t i = 0; i < nev; i++) {
            mesh_sched_t *s = scheds[ev[i].rank];
            task_t *t = &s->t[ev[i].task];
            if (t->state == 0) {
                if (t->type == T_SEND || t->type == T_RECV) {
                    t->state = 1;
                } else {
                    execute(s, t);
                    t->state = 2;
                }
            } else {
                task_t *m = &scheds[t->peer]->t[t->mtask];
                memcpy(m->dst, t->a, t->n);
                t->state = m->state = 2;
            }
        }
    }
    free(ev);
    return 0;
}
