/* Staging of device buffers: an operation's device ranges, merged where they overlap, stand in
 * one pinned host buffer taken from the communicator's pool. The pool keeps buffers for later
 * calls and bounds what a communicator holds (MESH_DEVICE_STAGING_MAX): a call that would pass
 * the bound waits for earlier operations to give theirs back. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/reduce.h"
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const mesh_config_entry_t dev_entries[] = {
    {"DEVICE_STAGING_MAX", "256m", MESH_CFG_SIZE,
     "Pinned host memory a communicator holds to stage device buffers (inputs copied in, results "
     "copied out around the host schedule). A call whose buffers would pass it waits for earlier "
     "calls to finish; a call larger than it alone still runs, with a buffer freed after it.",
     NULL, "64k.."},
    {"DEVICE_STAGING_CHUNK", "4m", MESH_CFG_SIZE,
     "Staged all-reduce, reduce and broadcast of device buffers larger than this run in chunks "
     "of this many bytes (rounded down to whole elements), each its own call, pipelined so that "
     "copies to pinned host memory, the wire and copies back overlap, with up to 3 chunks in "
     "flight as MESH_DEVICE_STAGING_MAX allows. 0 stages every call whole. Every rank must use "
     "the same value.",
     NULL, NULL},
    {"DEVICE_STAGING_REPORT", "0", MESH_CFG_BOOL,
     "Prints, when a communicator is destroyed, what its pipelined device calls did per stage "
     "(bytes and busy time of copy-in, wire and copy-out, and the time two or more stages were "
     "busy at once), one line per rank on stderr.",
     NULL, NULL},
    {"DEVICE_IPC", "1", MESH_CFG_BOOL,
     "Device buffers of a communicator whose ranks share one node: all-gather, broadcast, "
     "all-reduce, reduce-scatter and all-to-all (not in place) move data by device copies "
     "between the ranks' buffers, mapped through CUDA IPC (and reductions read peers' memory), "
     "instead of staging them through pinned host memory. 0 stages every call. Every rank must "
     "use the same value.",
     NULL, NULL},
    {"DEVICE_IPC_CACHE", "128", MESH_CFG_INT,
     "Peers' device allocations a communicator keeps mapped through IPC for later calls (those "
     "not in use, least recently used first, are unmapped past it; a mapping whose allocation "
     "its owner replaced is unmapped at once). A mapping can keep memory its owner freed alive "
     "until it is unmapped.",
     NULL, "1.."},
    {"DEVICE_HIER", "auto", MESH_CFG_ENUM,
     "Device buffers of a communicator spanning nodes that each hold the same number (above one) "
     "of ranks: all-reduce, all-gather, broadcast and reduce-scatter (not pre-multiplied sums, "
     "not the v-forms) run by device copies between the IPC-mapped buffers of each node's ranks "
     "and stage through pinned host memory only what crosses the network, on each rank's rail "
     "(about 1/L of an all-reduce per rank, L ranks per node). auto: where the layout allows, "
     "else staged whole; 1: the same, but a call it cannot serve fails with "
     "MESH_ERR_UNSUPPORTED saying why; 0: staged whole. Off with MESH_DEVICE_IPC=0. Idle pinned "
     "buffers are kept up to MESH_DEVICE_STAGING_MAX. Every rank must use the same value.",
     "auto|1|0", NULL},
    {NULL, NULL, 0, NULL, NULL}};

static const mesh_config_table_t dev_config = {"device", dev_entries};

mesh_status_t mesh_dev_config_register(void)
{
    return mesh_config_register(&dev_config);
}

struct mesh_dev_stage {
    const mesh_mem_ops_t *ops;
    void *ptr;
    size_t cap;
    struct mesh_dev_stage *next;
};

struct mesh_dev_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mesh_dev_stage_t *free_list;
    size_t held;  /* bytes allocated, in use or kept */
    size_t inuse; /* bytes in use */
    size_t max;
    mesh_dev_stage_stats_t stats; /* pipelined calls (dev_pipe.c), under lock */
};

static pthread_mutex_t dev_pool_create_lock = PTHREAD_MUTEX_INITIALIZER;

static struct mesh_dev_pool *dev_pool(mesh_comm_t *comm)
{
    struct mesh_dev_pool *p = atomic_load_explicit(&comm->dev_pool, memory_order_acquire);
    if (p != NULL)
        return p;
    pthread_mutex_lock(&dev_pool_create_lock);
    p = atomic_load(&comm->dev_pool);
    if (p == NULL && (p = calloc(1, sizeof(*p))) != NULL) {
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->cond, NULL);
        p->max = mesh_dev_config_register() == MESH_OK ? mesh_config_size("DEVICE_STAGING_MAX")
                                                       : (size_t)256 << 20;
        atomic_store_explicit(&comm->dev_pool, p, memory_order_release);
    }
    pthread_mutex_unlock(&dev_pool_create_lock);
    return p;
}

static void stage_drop(struct mesh_dev_pool *p, mesh_dev_stage_t *s)
{
    p->held -= s->cap;
    s->ops->host_free(s->ptr);
    free(s);
}

/* A kept buffer of ops holding bytes (the smallest that fits), removed from the list. */
static mesh_dev_stage_t *stage_take(struct mesh_dev_pool *p, const mesh_mem_ops_t *ops,
                                    size_t bytes)
{
    mesh_dev_stage_t **best = NULL;
    for (mesh_dev_stage_t **s = &p->free_list; *s != NULL; s = &(*s)->next)
        if ((*s)->ops == ops && (*s)->cap >= bytes && (best == NULL || (*s)->cap < (*best)->cap))
            best = s;
    if (best == NULL)
        return NULL;
    mesh_dev_stage_t *s = *best;
    *best = s->next;
    return s;
}

static mesh_status_t stage_get(mesh_comm_t *comm, const mesh_mem_ops_t *ops, size_t bytes,
                               mesh_dev_stage_t **out)
{
    struct mesh_dev_pool *p = dev_pool(comm);
    if (p == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a staging pool");
    size_t cap = (bytes + 65535) & ~(size_t)65535;
    double deadline = mesh_time() + comm->timeout_s;
    /* a group's calls start at its end: one waiting for another's staging would wait forever */
    int may_wait = !mesh_group_active();
    pthread_mutex_lock(&p->lock);
    mesh_dev_stage_t *s;
    while ((s = stage_take(p, ops, bytes)) == NULL && may_wait && p->inuse > 0 &&
           p->inuse + cap > p->max) {
        if (mesh_time() > deadline) {
            pthread_mutex_unlock(&p->lock);
            return mesh_error(MESH_ERR_TIMEOUT,
                              "staging device buffers: %zu bytes did not come "
                              "free within %.0f s (MESH_DEVICE_STAGING_MAX %zu, in use %zu)",
                              cap, comm->timeout_s, p->max, p->inuse);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    if (s == NULL) {
        /* make room: kept buffers too small for this call go first */
        while (p->free_list != NULL && p->held + cap > p->max) {
            mesh_dev_stage_t *f = p->free_list;
            p->free_list = f->next;
            stage_drop(p, f);
        }
        s = calloc(1, sizeof(*s));
        mesh_status_t st = s == NULL ? MESH_ERR_NO_MEMORY : ops->host_alloc(&s->ptr, cap);
        if (st < 0) {
            free(s);
            pthread_mutex_unlock(&p->lock);
            return mesh_error(st,
                              "cannot allocate %zu bytes of pinned memory to stage device "
                              "buffers",
                              cap);
        }
        s->ops = ops;
        s->cap = cap;
        p->held += cap;
    }
    p->inuse += s->cap;
    if (p->held > p->stats.peak)
        p->stats.peak = p->held;
    pthread_mutex_unlock(&p->lock);
    *out = s;
    return MESH_OK;
}

static void stage_put(mesh_comm_t *comm, mesh_dev_stage_t *s)
{
    struct mesh_dev_pool *p = atomic_load(&comm->dev_pool);
    pthread_mutex_lock(&p->lock);
    p->inuse -= s->cap;
    if (p->held > p->max) {
        stage_drop(p, s);
    } else {
        s->next = p->free_list;
        p->free_list = s;
    }
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

size_t mesh_dev_chunk_bytes(void)
{
    return mesh_dev_config_register() == MESH_OK ? mesh_config_size("DEVICE_STAGING_CHUNK")
                                                 : (size_t)4 << 20;
}

size_t mesh_dev_staging_max(mesh_comm_t *comm)
{
    struct mesh_dev_pool *p = dev_pool(comm);
    return p != NULL ? p->max : (size_t)256 << 20;
}

void mesh_dev_stage_account(mesh_comm_t *comm, const mesh_dev_stage_stats_t *add)
{
    struct mesh_dev_pool *p = dev_pool(comm);
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    mesh_dev_stage_stats_t *t = &p->stats;
    t->calls += add->calls;
    t->chunks += add->chunks;
    for (int i = 0; i < MESH_DEV_STAGES; i++) {
        t->bytes[i] += add->bytes[i];
        t->busy[i] += add->busy[i];
    }
    t->overlap += add->overlap;
    t->span += add->span;
    t->chunk_bytes = add->chunk_bytes;
    t->depth = add->depth > t->depth ? add->depth : t->depth;
    pthread_mutex_unlock(&p->lock);
}

void mesh_dev_stage_stats(mesh_comm_t *comm, mesh_dev_stage_stats_t *out)
{
    struct mesh_dev_pool *p = atomic_load(&comm->dev_pool);
    memset(out, 0, sizeof(*out));
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    *out = p->stats;
    pthread_mutex_unlock(&p->lock);
}

static void stage_report(const mesh_comm_t *comm, const mesh_dev_stage_stats_t *t)
{
    if (t->calls == 0 || mesh_dev_config_register() != MESH_OK ||
        !mesh_config_bool("DEVICE_STAGING_REPORT"))
        return;
    const double mib = 1024.0 * 1024.0, ms = 1e3;
    fprintf(stderr,
            "mesh: device staging, rank %d of %d: %llu calls in %llu chunks of %zu bytes, up to %d "
            "in flight, %zu bytes staged at most; copy-in %.1f MiB busy %.1f ms, wire %.1f MiB "
            "busy %.1f ms, copy-out %.1f "
            "MiB busy %.1f ms; two or more at once %.1f ms of %.1f ms\n",
            comm->rank, comm->size, (unsigned long long)t->calls, (unsigned long long)t->chunks,
            t->chunk_bytes, t->depth, t->peak, t->bytes[MESH_DEV_STAGE_IN] / mib,
            t->busy[MESH_DEV_STAGE_IN] * ms, t->bytes[MESH_DEV_STAGE_WIRE] / mib,
            t->busy[MESH_DEV_STAGE_WIRE] * ms, t->bytes[MESH_DEV_STAGE_OUT] / mib,
            t->busy[MESH_DEV_STAGE_OUT] * ms, t->overlap * ms, t->span * ms);
}

void mesh_dev_pool_free(mesh_comm_t *comm)
{
    struct mesh_dev_pool *p = atomic_load(&comm->dev_pool);
    if (p == NULL)
        return;
    stage_report(comm, &p->stats);
    while (p->free_list != NULL) {
        mesh_dev_stage_t *f = p->free_list;
        p->free_list = f->next;
        stage_drop(p, f);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
    atomic_store(&comm->dev_pool, NULL);
}

mesh_status_t mesh_dev_op_create(mesh_comm_t *comm, const mesh_coll_args_t *args,
                                 mesh_dev_op_t **out)
{
    mesh_dev_op_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a device operation");
    d->ops = args->mem;
    d->device = args->device;
    d->stream = args->stream;
    d->comm = comm;
    atomic_init(&d->refs, 1);
    *out = d;
    return MESH_OK;
}

mesh_status_t mesh_dev_op_add(mesh_dev_op_t *d, const void *p, size_t bytes, int in, int out)
{
    if (p == NULL || bytes == 0)
        return MESH_OK;
    mesh_dev_region_t r = {(char *)p, bytes, 0, in, out};
    /* merge every region r overlaps (in place: one range, copied both ways) */
    for (int i = 0; i < d->nreg;) {
        mesh_dev_region_t *q = &d->reg[i];
        if (q->dev + q->bytes <= r.dev || r.dev + r.bytes <= q->dev) {
            i++;
            continue;
        }
        char *lo = q->dev < r.dev ? q->dev : r.dev;
        char *hi = q->dev + q->bytes > r.dev + r.bytes ? q->dev + q->bytes : r.dev + r.bytes;
        r = (mesh_dev_region_t){lo, (size_t)(hi - lo), 0, 1, q->out || r.out};
        d->reg[i] = d->reg[--d->nreg];
    }
    if (d->nreg == MESH_DEV_MAX_REGIONS)
        return mesh_error(MESH_ERR_INTERNAL, "a device operation has more than %d buffers",
                          MESH_DEV_MAX_REGIONS);
    d->reg[d->nreg++] = r;
    return MESH_OK;
}

mesh_status_t mesh_dev_op_stage(mesh_dev_op_t *d)
{
    size_t total = 0;
    for (int i = 0; i < d->nreg; i++) {
        d->reg[i].offset = total;
        total += (d->reg[i].bytes + 63) & ~(size_t)63;
    }
    return mesh_dev_op_stage_bytes(d, total);
}

mesh_status_t mesh_dev_op_stage_bytes(mesh_dev_op_t *d, size_t bytes)
{
    if (bytes == 0)
        return MESH_OK;
    MESH_CHECK(stage_get(d->comm, d->ops, bytes, &d->stage));
    d->base = d->stage->ptr;
    return MESH_OK;
}

void *mesh_dev_op_map(const mesh_dev_op_t *d, const void *p)
{
    const char *c = p;
    for (int i = 0; c != NULL && i < d->nreg; i++)
        if (c >= d->reg[i].dev && c < d->reg[i].dev + d->reg[i].bytes)
            return d->base + d->reg[i].offset + (size_t)(c - d->reg[i].dev);
    return (void *)p;
}

void mesh_dev_op_scale(mesh_dev_op_t *d, void *staged, size_t count, mesh_dtype_t dtype,
                       const void *scalar)
{
    d->scale_buf = staged;
    d->scale_count = count;
    d->scale_dtype = dtype;
    memcpy(d->scalar, scalar, mesh_dtype_size(dtype));
}

void mesh_dev_op_free(mesh_dev_op_t *d)
{
    if (d == NULL)
        return;
    /* a pipeline's copies and schedules ended before its op is freed: the staging is unused */
    mesh_dev_pipe_free(d);
    if (d->stage != NULL)
        stage_put(d->comm, d->stage);
    free(d);
}
