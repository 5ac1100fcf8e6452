/*
 * Runs the all-gather, all-to-all, gather, scatter and barrier algorithms on a simulated
 * communicator inside one process. This file provides its own schedule implementation: the
 * schedules of all ranks are executed together, one randomly chosen action at a time (a rank
 * enters the collective, a ready copy runs, a matched send/receive pair delivers), so missing
 * dependencies, mismatched message orders or sizes, and deadlocks show up as wrong data or a
 * stuck run. Buffers are unaligned and guarded; gaps between blocks must stay untouched.
 */
#include "collectives/algo.h"
#include "libmesh/log.h"
#include "tests/harness/harness.h"
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define MAXR 17

enum { T_SEND, T_RECV, T_COPY, T_NOP };

typedef struct {
    int kind, peer, index; /* index: i-th send to (receive from) peer */
    void *dst;
    const void *src;
    size_t n;
    int deps_left, posted, done;
    int *succ, nsucc;
} task_t;

typedef struct scratch {
    struct scratch *next;
} scratch_t;

struct mesh_sched {
    mesh_comm_t *comm;
    task_t *tasks;
    int ntasks, cap;
    int nsent[MAXR], nrecvd[MAXR];
    scratch_t *scratch;
    mesh_status_t status;
};

/* ---------------------------------------------------------------- the schedule API */

mesh_status_t mesh_error_set_(mesh_status_t status, const char *subsys, const char *file, int line,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

static int add(mesh_sched_t *s, int kind, int peer, void *dst, const void *src, size_t n,
               const int *deps, int ndeps)
{
    if (s->ntasks == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->tasks = realloc(s->tasks, sizeof(task_t) * (size_t)s->cap);
        CHECK(s->tasks != NULL);
    }
    int id = s->ntasks++;
    task_t *t = &s->tasks[id];
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->peer = peer;
    t->dst = dst;
    t->src = src;
    t->n = n;
    if (kind == T_SEND || kind == T_RECV) {
        CHECK_MSG(peer >= 0 && peer < s->comm->size && peer != s->comm->rank,
                  "rank %d: bad peer %d", s->comm->rank, peer);
        t->index = kind == T_SEND ? s->nsent[peer]++ : s->nrecvd[peer]++;
        CHECK(n == 0 || (kind == T_SEND ? src != NULL : dst != NULL));
    }
    for (int i = 0; i < ndeps; i++) {
        if (deps[i] < 0)
            continue;
        CHECK_MSG(deps[i] < id, "rank %d: dependency %d of task %d not created yet", s->comm->rank,
                  deps[i], id);
        task_t *d = &s->tasks[deps[i]];
        d->succ = realloc(d->succ, sizeof(int) * (size_t)(d->nsucc + 1));
        d->succ[d->nsucc++] = id;
        t->deps_left++;
    }
    return id;
}

mesh_comm_t *mesh_sched_comm(const mesh_sched_t *s)
{
    return s->comm;
}

int mesh_sched_send(mesh_sched_t *s, int peer, const void *buf, size_t bytes, const int *deps,
                    int ndeps)
{
    return add(s, T_SEND, peer, NULL, buf, bytes, deps, ndeps);
}

void mesh_sched_reduce_stream(mesh_sched_t *s, int id)
{
    CHECK(!"the coll_b collectives do not reduce");
}

void mesh_sched_send_reused(mesh_sched_t *s, int id)
{
    /* a hint for the transport only; it must name a send of this schedule */
    CHECK(id >= 0 && id < s->ntasks && s->tasks[id].kind == T_SEND);
}

int mesh_sched_recv(mesh_sched_t *s, int peer, void *buf, size_t bytes, const int *deps, int ndeps)
{
    return add(s, T_RECV, peer, buf, NULL, bytes, deps, ndeps);
}

int mesh_sched_copy(mesh_sched_t *s, void *dst, const void *src, size_t bytes, const int *deps,
                    int ndeps)
{
    return add(s, T_COPY, -1, dst, src, bytes, deps, ndeps);
}

int mesh_sched_nop(mesh_sched_t *s, const int *deps, int ndeps)
{
    return add(s, T_NOP, -1, NULL, NULL, 0, deps, ndeps);
}

/* The ring phases are linked in whole (allgather/ring.c uses the shared all-gather phase);
 * the all-gathers never reduce, so a reduction here is a defect. */
int mesh_sched_reduce(mesh_sched_t *s, void *dst, const void *src, size_t count, const int *deps,
                      int ndeps)
{
    CHECK(!"the coll_b collectives do not reduce");
    return -1;
}

int mesh_sched_reduce3(mesh_sched_t *s, void *dst, const void *a, const void *b, size_t count,
                       const int *deps, int ndeps)
{
    CHECK(!"the coll_b collectives do not reduce");
    return -1;
}

void *mesh_sched_scratch(mesh_sched_t *s, size_t bytes)
{
    /* 64-byte aligned as the contract says; filled so that reads of unwritten bytes show */
    scratch_t *sc = NULL;
    CHECK(posix_memalign((void **)&sc, 64, 64 + bytes + 1) == 0);
    sc->next = s->scratch;
    s->scratch = sc;
    memset((char *)sc + 64, 0xA5, bytes + 1);
    return (char *)sc + 64;
}

mesh_status_t mesh_sched_build_status(const mesh_sched_t *s)
{
    return s->status;
}

/* ---------------------------------------------------------------- random execution */

typedef struct {
    int kind; /* 0 enter, 1 run a local task, 2 deliver */
    int rank, task;
} action_t;

typedef struct {
    int n;
    mesh_comm_t comm[MAXR];
    mesh_sched_t sched[MAXR];
    int entered[MAXR], left[MAXR], nentered;
    int sync; /* the collective synchronizes: check that no rank leaves early */
    action_t *acts;
    int nacts, capacts;
    uint64_t rng;
} sim_t;

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void push(sim_t *m, int kind, int rank, int task)
{
    if (m->nacts == m->capacts) {
        m->capacts = m->capacts ? 2 * m->capacts : 256;
        m->acts = realloc(m->acts, sizeof(action_t) * (size_t)m->capacts);
        CHECK(m->acts != NULL);
    }
    m->acts[m->nacts++] = (action_t){kind, rank, task};
}

static int find(mesh_sched_t *s, int kind, int peer, int index)
{
    for (int i = 0; i < s->ntasks; i++)
        if (s->tasks[i].kind == kind && s->tasks[i].peer == peer && s->tasks[i].index == index)
            return i;
    return -1;
}

/* A task whose dependencies are met: local tasks become runnable, messages get posted. */
static void make_ready(sim_t *m, int r, int id)
{
    task_t *t = &m->sched[r].tasks[id];
    if (t->kind == T_COPY || t->kind == T_NOP) {
        push(m, 1, r, id);
        return;
    }
    t->posted = 1;
    int other = find(&m->sched[t->peer], t->kind == T_SEND ? T_RECV : T_SEND, r, t->index);
    if (other >= 0 && m->sched[t->peer].tasks[other].posted) {
        if (t->kind == T_SEND)
            push(m, 2, r, id);
        else
            push(m, 2, t->peer, other);
    }
}

static void complete(sim_t *m, int r, int id)
{
    task_t *t = &m->sched[r].tasks[id];
    CHECK(!t->done);
    t->done = 1;
    m->left[r]--;
    for (int i = 0; i < t->nsucc; i++)
        if (--m->sched[r].tasks[t->succ[i]].deps_left == 0)
            make_ready(m, r, t->succ[i]);
    if (m->left[r] == 0 && m->sync)
        /* nobody may leave a barrier before everyone entered it */
        CHECK_MSG(m->nentered == m->n, "rank %d finished before all ranks entered", r);
}

static void run(sim_t *m)
{
    int n = m->n;
    for (int r = 0; r < n; r++) {
        mesh_sched_t *s = &m->sched[r];
        m->left[r] = s->ntasks;
        m->entered[r] = 0;
        /* every message has a partner of the same size */
        for (int i = 0; i < s->ntasks; i++) {
            task_t *t = &s->tasks[i];
            if (t->kind != T_SEND)
                continue;
            int o = find(&m->sched[t->peer], T_RECV, r, t->index);
            CHECK_MSG(o >= 0, "n %d: send %d from %d to %d has no receive", n, t->index, r,
                      t->peer);
            CHECK_MSG(m->sched[t->peer].tasks[o].n == t->n,
                      "n %d: send %d from %d to %d: %zu bytes, receive expects %zu", n, t->index, r,
                      t->peer, t->n, m->sched[t->peer].tasks[o].n);
        }
        for (int p = 0; p < n; p++)
            CHECK_MSG(s->nrecvd[p] == m->sched[p].nsent[r], "n %d: %d receives %d from %d, sent %d",
                      n, r, s->nrecvd[p], p, m->sched[p].nsent[r]);
    }
    m->nentered = 0;
    m->nacts = 0;
    for (int r = 0; r < n; r++)
        push(m, 0, r, -1);
    while (m->nacts > 0) {
        int i = (int)(rnd(&m->rng) % (uint64_t)m->nacts);
        action_t a = m->acts[i];
        m->acts[i] = m->acts[--m->nacts];
        mesh_sched_t *s = &m->sched[a.rank];
        if (a.kind == 0) {
            m->entered[a.rank] = 1;
            m->nentered++;
            for (int t = 0; t < s->ntasks; t++)
                if (s->tasks[t].deps_left == 0)
                    make_ready(m, a.rank, t);
        } else if (a.kind == 1) {
            task_t *t = &s->tasks[a.task];
            if (t->kind == T_COPY && t->n && t->dst != t->src)
                memmove(t->dst, t->src, t->n);
            complete(m, a.rank, a.task);
        } else {
            task_t *t = &s->tasks[a.task];
            int o = find(&m->sched[t->peer], T_RECV, a.rank, t->index);
            task_t *rv = &m->sched[t->peer].tasks[o];
            if (t->n)
                memcpy(rv->dst, t->src, t->n);
            complete(m, a.rank, a.task);
            complete(m, t->peer, o);
        }
    }
    for (int r = 0; r < n; r++)
        CHECK_MSG(m->left[r] == 0, "n %d: rank %d stuck with %d of %d tasks left", n, r, m->left[r],
                  m->sched[r].ntasks);
}

static void sim_init(sim_t *m, int n, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->n = n;
    m->rng = seed * 2654435761u + 88172645463325252ull;
    for (int r = 0; r < n; r++) {
        m->comm[r].rank = r;
        m->comm[r].size = n;
        m->sched[r].comm = &m->comm[r];
    }
}

static void sim_fini(sim_t *m)
{
    for (int r = 0; r < m->n; r++) {
        mesh_sched_t *s = &m->sched[r];
        for (int i = 0; i < s->ntasks; i++)
            free(s->tasks[i].succ);
        free(s->tasks);
        while (s->scratch) {
            scratch_t *n = s->scratch->next;
            free(s->scratch);
            s->scratch = n;
        }
    }
    free(m->acts);
}

/* ---------------------------------------------------------------- collectives under test */

static uint8_t pat(int src, int dst, size_t k)
{
    return (uint8_t)(src * 131 + dst * 17 + k * 7 + 1);
}

#define GUARD 8
#define FILL  0xEE

/* A buffer with GUARD fill bytes either side, starting at an odd address. */
static uint8_t *buf_new(size_t bytes)
{
    uint8_t *b = malloc(bytes + 2 * GUARD + 1);
    CHECK(b != NULL);
    memset(b, FILL, bytes + 2 * GUARD + 1);
    return b + GUARD + 1;
}
static void buf_free(uint8_t *b)
{
    free(b - GUARD - 1);
}
static void check_guards(const uint8_t *b, size_t bytes, const char *what)
{
    for (int i = 1; i <= GUARD; i++) {
        CHECK_MSG(b[-i] == FILL, "%s: byte before the buffer overwritten", what);
        CHECK_MSG(b[bytes + (size_t)i - 1] == FILL, "%s: byte after the buffer overwritten", what);
    }
}

static void build_all(sim_t *m, const mesh_coll_algo_t *al, mesh_coll_args_t *args)
{
    for (int r = 0; r < m->n; r++) {
        mesh_status_t st = al->build(&m->comm[r], &args[r], &m->sched[r]);
        CHECK_MSG(st == MESH_OK, "%s %s rank %d of %d: build failed (%d)",
                  mesh_coll_type_name(al->type), al->name, r, m->n, st);
    }
}

/* Returns 0 when the algorithm declined (allowed only where it says so). */
static int usable(const mesh_coll_algo_t *al, sim_t *m, mesh_coll_args_t *args, int may_decline)
{
    for (int r = 0; r < m->n; r++) {
        int sc = mesh_coll_algo_score(al, &m->comm[r], &args[r]);
        if (sc < 0) {
            CHECK_MSG(may_decline, "%s %s declined n %d", mesh_coll_type_name(al->type), al->name,
                      m->n);
            return 0;
        }
    }
    return 1;
}

static int seed_count;

/* counts[i] per rank (elements of ds bytes); scramble leaves holes and reverses block order. */
static void test_allgather(const mesh_coll_algo_t *al, int n, const size_t *counts, size_t ds,
                           int in_place, int scramble, int may_decline)
{
    size_t displs[MAXR], total = 0, extent = 0;
    int uniform = !scramble;
    for (int i = 0; i < n; i++)
        uniform &= counts[i] == counts[0];
    for (int k = 0; k < n; k++) {
        int i = scramble ? n - 1 - k : k;
        displs[i] = total + (scramble ? 3 : 0);
        total = displs[i] + counts[i];
    }
    extent = total;
    sim_t m;
    sim_init(&m, n, (uint64_t)++seed_count);
    mesh_coll_args_t args[MAXR];
    uint8_t *sb[MAXR], *rb[MAXR];
    for (int r = 0; r < n; r++) {
        rb[r] = buf_new(extent * ds);
        sb[r] = in_place ? rb[r] + displs[r] * ds : buf_new(counts[r] * ds);
        for (size_t k = 0; k < counts[r] * ds; k++)
            sb[r][k] = pat(r, 0, k);
        args[r] = (mesh_coll_args_t){.type = MESH_COLL_ALLGATHER,
                                     .sbuf = sb[r],
                                     .rbuf = rb[r],
                                     .count = counts[r],
                                     .in_place = in_place,
                                     .uniform = uniform,
                                     .dsize = ds,
                                     .bytes = total * ds,
                                     .counts = counts,
                                     .displs = displs};
    }
    if (usable(al, &m, args, may_decline)) {
        build_all(&m, al, args);
        run(&m);
        for (int r = 0; r < n; r++) {
            uint8_t *expect = malloc(extent * ds + 1);
            memset(expect, FILL, extent * ds + 1);
            for (int i = 0; i < n; i++)
                for (size_t k = 0; k < counts[i] * ds; k++)
                    expect[displs[i] * ds + k] = pat(i, 0, k);
            for (size_t k = 0; k < extent * ds; k++)
                CHECK_MSG(rb[r][k] == expect[k], "allgather %s n %d rank %d byte %zu: %u != %u",
                          al->name, n, r, k, rb[r][k], expect[k]);
            check_guards(rb[r], extent * ds, "allgather rbuf");
            if (!in_place)
                for (size_t k = 0; k < counts[r] * ds; k++)
                    CHECK(sb[r][k] == pat(r, 0, k));
            free(expect);
        }
    }
    for (int r = 0; r < n; r++) {
        if (!in_place)
            buf_free(sb[r]);
        buf_free(rb[r]);
    }
    sim_fini(&m);
}

/* c[i*n+j]: elements from i to j. In place requires a symmetric matrix. */
static void test_alltoall(const mesh_coll_algo_t *al, int n, const size_t *c, size_t ds,
                          int in_place, int scramble, int may_decline)
{
    static size_t cnt[MAXR][MAXR], dsp[MAXR][MAXR], rcnt[MAXR][MAXR], rdsp[MAXR][MAXR];
    size_t sext[MAXR], rext[MAXR];
    for (int r = 0; r < n; r++) {
        size_t so = 0, ro = 0;
        for (int k = 0; k < n; k++) {
            int j = scramble ? (2 * n - 1 - k + r) % n : k;
            cnt[r][j] = c[r * n + j];
            dsp[r][j] = so + (scramble ? 1 : 0);
            so = dsp[r][j] + cnt[r][j];
            rcnt[r][j] = c[j * n + r];
            rdsp[r][j] = in_place ? dsp[r][j] : ro + (scramble ? 2 : 0);
            ro = rdsp[r][j] + rcnt[r][j];
        }
        sext[r] = so;
        rext[r] = in_place ? so : ro;
    }
    sim_t m;
    sim_init(&m, n, (uint64_t)++seed_count);
    mesh_coll_args_t args[MAXR];
    uint8_t *sb[MAXR], *rb[MAXR];
    for (int r = 0; r < n; r++) {
        rb[r] = buf_new(rext[r] * ds);
        sb[r] = in_place ? rb[r] : buf_new(sext[r] * ds);
        for (int j = 0; j < n; j++)
            for (size_t k = 0; k < cnt[r][j] * ds; k++)
                sb[r][dsp[r][j] * ds + k] = pat(r, j, k);
        args[r] = (mesh_coll_args_t){.type = MESH_COLL_ALLTOALL,
                                     .sbuf = sb[r],
                                     .rbuf = rb[r],
                                     .count = cnt[r][0],
                                     .in_place = in_place,
                                     .dsize = ds,
                                     .bytes = sext[r] * ds,
                                     .counts = cnt[r],
                                     .displs = dsp[r],
                                     .rcounts = rcnt[r],
                                     .rdispls = rdsp[r]};
        int uniform = !scramble;
        for (int j = 0; j < n; j++)
            uniform &= cnt[r][j] == cnt[r][0] && rcnt[r][j] == cnt[r][0];
        args[r].uniform = uniform;
    }
    if (usable(al, &m, args, may_decline)) {
        build_all(&m, al, args);
        run(&m);
        for (int r = 0; r < n; r++) {
            uint8_t *expect = malloc(rext[r] * ds + 1);
            memset(expect, FILL, rext[r] * ds + 1);
            for (int j = 0; j < n; j++)
                for (size_t k = 0; k < rcnt[r][j] * ds; k++)
                    expect[rdsp[r][j] * ds + k] = pat(j, r, k);
            for (size_t k = 0; k < rext[r] * ds; k++)
                CHECK_MSG(rb[r][k] == expect[k], "alltoall %s n %d rank %d byte %zu: %u != %u",
                          al->name, n, r, k, rb[r][k], expect[k]);
            check_guards(rb[r], rext[r] * ds, "alltoall rbuf");
            if (!in_place)
                for (int j = 0; j < n; j++)
                    for (size_t k = 0; k < cnt[r][j] * ds; k++)
                        CHECK(sb[r][dsp[r][j] * ds + k] == pat(r, j, k));
            free(expect);
        }
    }
    for (int r = 0; r < n; r++) {
        if (!in_place)
            buf_free(sb[r]);
        buf_free(rb[r]);
    }
    sim_fini(&m);
}

static void test_gather(const mesh_coll_algo_t *al, int n, size_t count, size_t ds, int root,
                        int in_place)
{
    size_t blk = count * ds;
    sim_t m;
    sim_init(&m, n, (uint64_t)++seed_count);
    mesh_coll_args_t args[MAXR];
    uint8_t *sb[MAXR], *rb = buf_new((size_t)n * blk);
    for (int r = 0; r < n; r++) {
        int ip = in_place && r == root;
        sb[r] = ip ? rb + (size_t)r * blk : buf_new(blk);
        for (size_t k = 0; k < blk; k++)
            sb[r][k] = pat(r, root, k);
        args[r] = (mesh_coll_args_t){.type = MESH_COLL_GATHER,
                                     .sbuf = sb[r],
                                     .rbuf = r == root ? rb : NULL,
                                     .count = count,
                                     .root = root,
                                     .in_place = ip,
                                     .uniform = 1,
                                     .dsize = ds,
                                     .bytes = (size_t)n * blk};
    }
    if (usable(al, &m, args, 0)) {
        build_all(&m, al, args);
        run(&m);
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < blk; k++)
                CHECK_MSG(rb[(size_t)i * blk + k] == pat(i, root, k),
                          "gather %s n %d root %d block %d byte %zu", al->name, n, root, i, k);
        check_guards(rb, (size_t)n * blk, "gather rbuf");
        for (int r = 0; r < n; r++)
            for (size_t k = 0; k < blk; k++)
                CHECK(sb[r][k] == pat(r, root, k));
    }
    for (int r = 0; r < n; r++)
        if (!(in_place && r == root))
            buf_free(sb[r]);
    buf_free(rb);
    sim_fini(&m);
}

static void test_scatter(const mesh_coll_algo_t *al, int n, size_t count, size_t ds, int root,
                         int in_place)
{
    size_t blk = count * ds;
    sim_t m;
    sim_init(&m, n, (uint64_t)++seed_count);
    mesh_coll_args_t args[MAXR];
    uint8_t *sb = buf_new((size_t)n * blk), *rb[MAXR];
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < blk; k++)
            sb[(size_t)i * blk + k] = pat(root, i, k);
    for (int r = 0; r < n; r++) {
        int ip = in_place && r == root;
        rb[r] = ip ? sb + (size_t)r * blk : buf_new(blk);
        args[r] = (mesh_coll_args_t){.type = MESH_COLL_SCATTER,
                                     .sbuf = r == root ? sb : NULL,
                                     .rbuf = rb[r],
                                     .count = count,
                                     .root = root,
                                     .in_place = ip,
                                     .uniform = 1,
                                     .dsize = ds,
                                     .bytes = (size_t)n * blk};
    }
    if (usable(al, &m, args, 0)) {
        build_all(&m, al, args);
        run(&m);
        for (int r = 0; r < n; r++) {
            for (size_t k = 0; k < blk; k++)
                CHECK_MSG(rb[r][k] == pat(root, r, k), "scatter %s n %d root %d rank %d byte %zu",
                          al->name, n, root, r, k);
            if (!(in_place && r == root))
                check_guards(rb[r], blk, "scatter rbuf");
        }
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < blk; k++)
                CHECK(sb[(size_t)i * blk + k] == pat(root, i, k));
        check_guards(sb, (size_t)n * blk, "scatter sbuf");
    }
    for (int r = 0; r < n; r++)
        if (!(in_place && r == root))
            buf_free(rb[r]);
    buf_free(sb);
    sim_fini(&m);
}

static void test_barrier(const mesh_coll_algo_t *al, int n)
{
    sim_t m;
    sim_init(&m, n, (uint64_t)++seed_count);
    mesh_coll_args_t args[MAXR];
    for (int r = 0; r < n; r++)
        args[r] = (mesh_coll_args_t){.type = MESH_COLL_BARRIER};
    m.sync = 1;
    CHECK(usable(al, &m, args, 0));
    build_all(&m, al, args);
    run(&m);
    sim_fini(&m);
}

/* ---------------------------------------------------------------- driver */

extern const mesh_coll_algo_t mesh_coll_allgather_ring, mesh_coll_allgather_rd,
    mesh_coll_allgather_bruck, mesh_coll_alltoall_pairwise, mesh_coll_alltoall_bruck,
    mesh_coll_gather_binomial, mesh_coll_gather_linear, mesh_coll_scatter_binomial,
    mesh_coll_scatter_linear, mesh_coll_barrier_dissemination;

const char *mesh_coll_type_name(mesh_coll_type_t t)
{
    static const char *names[] = {"allreduce", "reduce", "broadcast", "reduce_scatter", "allgather",
                                  "alltoall",  "gather", "scatter",   "barrier"};
    return (unsigned)t < MESH_COLL_TYPE_COUNT ? names[t] : "unknown";
}

static const int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};
static const size_t counts[] = {0, 1, 3, 17, 64};
static const size_t dsizes[] = {1, 2, 8};

int main(void)
{
    const mesh_coll_algo_t *ag[] = {&mesh_coll_allgather_ring, &mesh_coll_allgather_rd,
                                    &mesh_coll_allgather_bruck};
    const mesh_coll_algo_t *a2a[] = {&mesh_coll_alltoall_pairwise, &mesh_coll_alltoall_bruck};
    const mesh_coll_algo_t *tree[2][2] = {{&mesh_coll_gather_binomial, &mesh_coll_gather_linear},
                                          {&mesh_coll_scatter_binomial, &mesh_coll_scatter_linear}};
    uint64_t x = 12345;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int n = sizes[si];
        size_t vc[MAXR], mat[MAXR * MAXR];
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (size_t di = 0; di < sizeof(dsizes) / sizeof(dsizes[0]); di++)
                for (int ip = 0; ip < 2; ip++) {
                    size_t c = counts[ci], ds = dsizes[di];
                    for (int i = 0; i < n; i++)
                        vc[i] = c;
                    for (int i = 0; i < n * n; i++)
                        mat[i] = c;
                    for (int a = 0; a < 3; a++)
                        test_allgather(ag[a], n, vc, ds, ip, 0, 0);
                    for (int a = 0; a < 2; a++)
                        test_alltoall(a2a[a], n, mat, ds, ip, 0, 0);
                    for (int root = 0; root < n; root += (n > 5 ? 3 : 1))
                        for (int t = 0; t < 2; t++)
                            for (int a = 0; a < 2; a++) {
                                if (t == 0)
                                    test_gather(tree[t][a], n, c, ds, root, ip);
                                else
                                    test_scatter(tree[t][a], n, c, ds, root, ip);
                            }
                }
        /* v-counts with zeros, holes and blocks out of rank order */
        for (int rep = 0; rep < 4; rep++)
            for (int ip = 0; ip < 2; ip++) {
                for (int i = 0; i < n; i++)
                    vc[i] = rnd(&x) % 4 == 0 ? 0 : rnd(&x) % 40;
                for (int i = 0; i < n; i++)
                    for (int j = 0; j <= i; j++)
                        mat[i * n + j] = mat[j * n + i] = rnd(&x) % 4 == 0 ? 0 : rnd(&x) % 40;
                if (!ip)
                    for (int i = 0; i < n * n; i++)
                        mat[i] = rnd(&x) % 3 == 0 ? 0 : rnd(&x) % 40;
                for (int a = 0; a < 3; a++)
                    test_allgather(ag[a], n, vc, 4, ip, rep & 1, a == 2);
                for (int a = 0; a < 2; a++)
                    test_alltoall(a2a[a], n, mat, 2, ip, rep & 1, a == 1);
            }
        test_barrier(&mesh_coll_barrier_dissemination, n);
        for (int rep = 0; rep < 20; rep++)
            test_barrier(&mesh_coll_barrier_dissemination, n);
    }
    /* blocks large enough to be segmented */
    for (int n = 2; n <= 5; n++) {
        size_t vc[MAXR];
        for (int i = 0; i < n; i++)
            vc[i] = 300000 + (size_t)i * 70001;
        test_allgather(&mesh_coll_allgather_ring, n, vc, 1, 0, 0, 0);
        test_allgather(&mesh_coll_allgather_ring, n, vc, 1, 1, 1, 0);
    }
    printf("coll b simulation: %d runs ok\n", seed_count);
    return 0;
}
