/* All-gather, broadcast, all-reduce, reduce-scatter and all-to-all on device buffers inside a
 * node, by device copies and reductions between the ranks' IPC-mapped buffers (dev_ipc.h says how).
 * This file decides which calls go this way and builds their schedules; the device work of each
 * collective is its issue function. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_ipc.h"
#include "collectives/api.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IPC_BUFS 2 /* buffers a rank exports: its input, its output */

/* What a rank tells its peers once its stream reached the call. */
struct ipc_desc {
    uint64_t pid;
    uint64_t addr[IPC_BUFS]; /* 0: nothing exported */
    mesh_mem_ipc_t h[IPC_BUFS];
    uint64_t blk[]; /* all-to-all: for each rank, the offset and bytes of its block in the input */
};

struct ipc_call;
struct ipc_step {
    struct ipc_call *c;
    int phase;
};

struct ipc_call {
    mesh_comm_t *comm;
    const mesh_mem_ops_t *ops;
    mesh_coll_type_t type;
    mesh_dtype_t dtype;
    mesh_op_t op;
    int avg, root, in_place;
    size_t count, dsize;
    const char *sbuf;
    char *rbuf;
    size_t *counts, *displs; /* blocks (all-gather, reduce-scatter, all-to-all's input) */
    size_t total;            /* elements of all blocks */
    struct ipc_desc *desc;   /* [size] of dstride bytes: the peers', and ours at [rank] */
    size_t dstride;
    size_t *rcounts, *rdispls; /* all-to-all's output blocks */
    char **peer;               /* [size * IPC_BUFS]: the peers' buffers mapped here */
    mesh_dev_ipc_map_t **used; /* [size * IPC_BUFS]: their mappings, released at the end */
    mesh_dev_ipc_t *ipc;
    void *event;
    int issued;
    uint32_t token; /* sent: "done" */
    uint32_t *got;  /* [2 * size]: received */
    struct ipc_step step[2];
};

/* ---------------------------------------------------------------- which calls */

static int ipc_enabled(void)
{
    static int on = -1; /* read once: every rank of a communicator takes the same path */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        v = mesh_dev_config_register() == MESH_OK ? mesh_config_bool("DEVICE_IPC") : 0;
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* Whether a communicator of this shape runs collective type on device buffers by IPC. */
static int ipc_shape(const mesh_comm_t *comm, mesh_coll_type_t type)
{
    if (comm->nnodes != 1 || comm->size < 2 || !ipc_enabled())
        return 0;
    return type == MESH_COLL_ALLGATHER || type == MESH_COLL_BROADCAST ||
           type == MESH_COLL_ALLREDUCE || type == MESH_COLL_REDUCE_SCATTER ||
           type == MESH_COLL_ALLTOALL;
}

int mesh_dev_ipc_serves(const mesh_comm_t *comm, const mesh_coll_args_t *args, const void *scalar)
{
    const mesh_mem_ops_t *ops = args->mem;
    if (!ipc_shape(comm, args->type) || scalar != NULL || !args->mappable ||
        ops->ipc_export == NULL || ops->ipc_import == NULL)
        return 0;
    /* all-to-all in place would overwrite blocks its peers still read */
    if (args->type == MESH_COLL_ALLTOALL)
        return !args->in_place;
    int reduces = args->type == MESH_COLL_ALLREDUCE || args->type == MESH_COLL_REDUCE_SCATTER;
    return !reduces || args->op == MESH_SUM || args->op == MESH_PROD || args->op == MESH_MIN ||
           args->op == MESH_MAX;
}

const char *mesh_dev_path(const mesh_comm_t *comm, mesh_coll_type_t type)
{
    if (comm->nnodes > 1)
        return mesh_dev_hier_path(comm, type);
    if (comm->size < 2)
        return "staged (one rank)";
    if (!ipc_shape(comm, type))
        return ipc_enabled() ? "staged through pinned host memory, then the selection above"
                             : "staged through pinned host memory, then the selection above "
                               "(MESH_DEVICE_IPC=0)";
    if (type == MESH_COLL_BROADCAST)
        return "ipc (a device copy from the root's buffer)";
    if (type == MESH_COLL_ALLTOALL)
        return "ipc (a device copy from each peer's input; in place staged)";
    if (type == MESH_COLL_REDUCE_SCATTER)
        return "ipc (the rank's block of every input reduced, reading peers' inputs; "
               "pre-multiplied sums staged)";
    return type == MESH_COLL_ALLREDUCE
               ? "ipc (reduce-scatter reading peers' inputs, then device copies; pre-multiplied "
                 "sums staged)"
               : "ipc (a device copy from each peer's input)";
}

mesh_status_t mesh_dev_ipc_launch(mesh_comm_t *comm, mesh_coll_args_t *args, void *avg_buf,
                                  size_t avg_count, void *owned0, mesh_request_h *req)
{
    mesh_dev_op_t *d = NULL;
    mesh_status_t st = mesh_dev_op_create(comm, args, &d);
    if (st < 0) {
        free(owned0);
        return mesh_comm_fail(comm, st);
    }
    /* nothing staged: the schedule reads and writes the device buffers through the table */
    return mesh_api_launch_on(comm, args, NULL, 0, avg_buf, avg_count, owned0, d, req);
}

/* ---------------------------------------------------------------- the device work */

/* Chunk c of an all-reduce's n elements: whole 256-byte lines, the last chunks short or empty. */
static void chunk(const struct ipc_call *c, int i, size_t *lo, size_t *len)
{
    size_t unit = c->dsize < 256 ? 256 / c->dsize : 1, k = (size_t)c->comm->size;
    size_t per = ((c->count + unit - 1) / unit + k - 1) / k * unit;
    *lo = per * (size_t)i < c->count ? per * (size_t)i : c->count;
    *len = c->count - *lo < per ? c->count - *lo : per;
}

static struct ipc_desc *desc_at(const struct ipc_call *c, int p)
{
    return (struct ipc_desc *)((char *)c->desc + (size_t)p * c->dstride);
}

static char *peer_buf(const struct ipc_call *c, int p, int b)
{
    return c->peer[p * IPC_BUFS + b];
}

static mesh_status_t issue_allgather(struct ipc_call *c, void *stream)
{
    int n = c->comm->size, me = c->comm->rank;
    size_t ds = c->dsize;
    /* each rank starts after itself, so that the ranks read different inputs at once */
    for (int j = 1; j < n; j++) {
        int p = (me + j) % n;
        if (c->counts[p] > 0)
            MESH_CHECK(c->ops->copy_async(c->rbuf + c->displs[p] * ds, peer_buf(c, p, 0),
                                          c->counts[p] * ds, stream));
    }
    char *own = c->rbuf + c->displs[me] * ds;
    if (c->counts[me] > 0 && own != c->sbuf)
        MESH_CHECK(c->ops->copy_async(own, c->sbuf, c->counts[me] * ds, stream));
    return MESH_OK;
}

static mesh_status_t issue_broadcast(struct ipc_call *c, void *stream)
{
    size_t bytes = c->count * c->dsize;
    if (bytes == 0)
        return MESH_OK;
    if (c->comm->rank != c->root)
        return c->ops->copy_async(c->rbuf, peer_buf(c, c->root, 0), bytes, stream);
    if (c->rbuf != c->sbuf)
        return c->ops->copy_async(c->rbuf, c->sbuf, bytes, stream);
    return MESH_OK;
}

/* Phase 0: this rank's chunk of every input, reduced into its output (its own input first, then
 * the next ranks'), divided for MESH_AVG. Phase 1: the other chunks from their owners' outputs. */
static mesh_status_t issue_allreduce(struct ipc_call *c, int phase, void *stream)
{
    int n = c->comm->size, me = c->comm->rank;
    size_t ds = c->dsize, lo, len;
    if (phase == 1) {
        for (int j = 1; j < n; j++) {
            int p = (me + j) % n;
            chunk(c, p, &lo, &len);
            if (len > 0)
                MESH_CHECK(c->ops->copy_async(c->rbuf + lo * ds, peer_buf(c, p, 1) + lo * ds,
                                              len * ds, stream));
        }
        return MESH_OK;
    }
    chunk(c, me, &lo, &len);
    if (len == 0)
        return MESH_OK;
    char *dst = c->rbuf + lo * ds;
    const char *acc = c->sbuf + lo * ds;
    for (int j = 1; j < n; j++) {
        MESH_CHECK(c->ops->reduce_async(dst, acc, peer_buf(c, (me + j) % n, 0) + lo * ds, len,
                                        c->dtype, c->op, stream));
        acc = dst;
    }
    if (c->avg)
        MESH_CHECK(c->ops->divide_async(dst, len, c->dtype, n, stream));
    return MESH_OK;
}

/* The rank's block of every input, reduced into its output (its own input first), divided for
 * MESH_AVG. */
static mesh_status_t issue_reduce_scatter(struct ipc_call *c, void *stream)
{
    int n = c->comm->size, me = c->comm->rank;
    size_t len = c->counts[me], off = c->displs[me] * c->dsize;
    if (len == 0)
        return MESH_OK;
    const char *acc = c->sbuf + off;
    for (int j = 1; j < n; j++) {
        MESH_CHECK(c->ops->reduce_async(c->rbuf, acc, peer_buf(c, (me + j) % n, 0) + off, len,
                                        c->dtype, c->op, stream));
        acc = c->rbuf;
    }
    if (c->avg)
        MESH_CHECK(c->ops->divide_async(c->rbuf, len, c->dtype, n, stream));
    return MESH_OK;
}

/* Each block a rank receives is one copy from the block its sender's input holds for it. */
static mesh_status_t issue_alltoall(struct ipc_call *c, void *stream)
{
    int n = c->comm->size, me = c->comm->rank;
    size_t ds = c->dsize;
    for (int j = 0; j < n; j++) {
        int p = (me + j) % n;
        const struct ipc_desc *d = desc_at(c, p);
        uint64_t off = d->blk[2 * me], bytes = d->blk[2 * me + 1];
        if (bytes != c->rcounts[p] * ds)
            return mesh_error(MESH_ERR_MISMATCH,
                              "rank %d sends %llu bytes to rank %d, which expects %zu: the ranks "
                              "called with different counts",
                              p, (unsigned long long)bytes, me, c->rcounts[p] * ds);
        const char *src = p == me ? c->sbuf : peer_buf(c, p, 0);
        if (bytes > 0)
            MESH_CHECK(c->ops->copy_async(c->rbuf + c->rdispls[p] * ds, src + off, bytes, stream));
    }
    return MESH_OK;
}

/* ---------------------------------------------------------------- poll tasks */

/* Our stream reached the call: export our buffers into our descriptor. */
static mesh_status_t step_export(void *arg)
{
    struct ipc_call *c = arg;
    int me = c->comm->rank;
    struct ipc_desc *d = desc_at(c, me);
    const void *buf[IPC_BUFS] = {NULL, NULL};
    size_t bytes = c->count * c->dsize;
    switch (c->type) {
    case MESH_COLL_ALLGATHER:
        buf[0] = c->counts[me] > 0 ? c->sbuf : NULL;
        break;
    case MESH_COLL_BROADCAST:
        buf[0] = me == c->root && bytes > 0 ? c->sbuf : NULL;
        break;
    case MESH_COLL_REDUCE_SCATTER:
    case MESH_COLL_ALLTOALL:
        buf[0] = c->total > 0 ? c->sbuf : NULL;
        break;
    default:
        buf[0] = bytes > 0 ? c->sbuf : NULL;
        buf[1] = bytes > 0 ? c->rbuf : NULL;
        break;
    }
    memset(d, 0, sizeof(*d));
    d->pid = (uint64_t)getpid();
    c->issued = 0;
    for (int b = 0; b < IPC_BUFS; b++) {
        d->h[b].fd = -1;
        if (buf[b] == NULL)
            continue;
        MESH_CHECK(mesh_dev_ipc_state(c->comm, c->ops, &c->ipc));
        mesh_status_t st = c->ops->ipc_export(buf[b], &d->h[b]);
        if (st == MESH_OK && d->h[b].fd >= 0)
            st = mesh_dev_ipc_hold(c->ipc, d->h[b].fd);
        if (st < 0) {
            d->h[b].fd = -1;
            return st;
        }
        d->addr[b] = (uint64_t)(uintptr_t)buf[b];
    }
    return MESH_OK;
}

/* Maps every buffer a peer exported (once per call, before the first phase). */
static mesh_status_t map_peers(struct ipc_call *c)
{
    int n = c->comm->size;
    MESH_CHECK(mesh_dev_ipc_state(c->comm, c->ops, &c->ipc));
    for (int p = 0; p < n; p++) {
        for (int b = 0; b < IPC_BUFS; b++) {
            const struct ipc_desc *d = desc_at(c, p);
            c->peer[p * IPC_BUFS + b] = NULL;
            c->used[p * IPC_BUFS + b] = NULL;
            if (p == c->comm->rank || d->addr[b] == 0)
                continue;
            MESH_CHECK(mesh_dev_ipc_map(c->ipc, p, d->pid, d->addr[b], &d->h[b],
                                        (void **)&c->peer[p * IPC_BUFS + b],
                                        &c->used[p * IPC_BUFS + b]));
        }
    }
    return MESH_OK;
}

/* A phase's device work: issued on the communicator's internal stream the first time, then
 * done once its event is. */
static mesh_status_t step_phase(void *arg)
{
    struct ipc_step *s = arg;
    struct ipc_call *c = s->c;
    if (!c->issued) {
        if (s->phase == 0)
            MESH_CHECK(map_peers(c));
        void *stream = mesh_dev_ipc_stream(c->ipc);
        mesh_status_t st;
        switch (c->type) {
        case MESH_COLL_ALLGATHER:
            st = issue_allgather(c, stream);
            break;
        case MESH_COLL_BROADCAST:
            st = issue_broadcast(c, stream);
            break;
        case MESH_COLL_REDUCE_SCATTER:
            st = issue_reduce_scatter(c, stream);
            break;
        case MESH_COLL_ALLTOALL:
            st = issue_alltoall(c, stream);
            break;
        default:
            st = issue_allreduce(c, s->phase, stream);
            break;
        }
        if (st == MESH_OK && c->event == NULL)
            st = mesh_dev_ipc_event_get(c->ipc, &c->event);
        if (st == MESH_OK)
            st = c->ops->event_record(c->event, stream);
        if (st < 0)
            return st;
        c->issued = 1;
    }
    mesh_status_t st = c->ops->event_query(c->event);
    if (st != MESH_INPROGRESS)
        c->issued = 0;
    return st;
}

/* Every peer is done with our buffers: our exported descriptors close, mappings are released. */
static mesh_status_t step_end(void *arg)
{
    struct ipc_call *c = arg;
    struct ipc_desc *d = desc_at(c, c->comm->rank);
    for (int b = 0; b < IPC_BUFS; b++)
        if (d->h[b].fd >= 0) {
            mesh_dev_ipc_drop(c->ipc, d->h[b].fd);
            d->h[b].fd = -1;
        }
    for (int i = 0; i < c->comm->size * IPC_BUFS; i++) {
        mesh_dev_ipc_release(c->used[i]);
        c->used[i] = NULL;
    }
    if (c->event != NULL) {
        mesh_dev_ipc_event_put(c->ipc, c->event);
        c->event = NULL;
    }
    c->comm->dev_ipc_calls++;
    return MESH_OK;
}

/* ---------------------------------------------------------------- the schedule */

/* Every rank tells every other one it passed dep (its descriptor, or "done"); returns the join
 * of what it received and sent. msg: the descriptor, or NULL for a token. */
static int exchange(mesh_sched_t *s, struct ipc_call *c, int dep, int round)
{
    int n = c->comm->size, me = c->comm->rank;
    int *ids = mesh_sched_scratch(s, sizeof(int) * 2 * (size_t)n);
    if (ids == NULL)
        return -1;
    int k = 0;
    for (int j = 1; j < n; j++) {
        int p = (me + j) % n;
        if (round == 0) {
            ids[k++] = mesh_sched_send(s, p, desc_at(c, me), c->dstride, &dep, 1);
            ids[k++] = mesh_sched_recv(s, p, desc_at(c, p), c->dstride, NULL, 0);
        } else {
            ids[k++] = mesh_sched_send(s, p, &c->token, sizeof(c->token), &dep, 1);
            ids[k++] =
                mesh_sched_recv(s, p, &c->got[(round - 1) * n + p], sizeof(c->token), NULL, 0);
        }
    }
    ids[k++] = dep;
    return mesh_sched_nop(s, ids, k);
}

static struct ipc_call *call_create(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                                    mesh_sched_t *s)
{
    size_t n = (size_t)comm->size;
    int a2a = args->type == MESH_COLL_ALLTOALL;
    size_t stride = sizeof(struct ipc_desc) + (a2a ? 2 * n * sizeof(uint64_t) : 0);
    struct ipc_call *c = mesh_sched_scratch(s, sizeof(*c));
    struct ipc_desc *desc = mesh_sched_scratch(s, stride * n);
    void *maps = mesh_sched_scratch(s, (sizeof(char *) + sizeof(void *)) * n * IPC_BUFS);
    uint32_t *got = mesh_sched_scratch(s, sizeof(uint32_t) * 2 * n);
    size_t *blocks = mesh_sched_scratch(s, sizeof(size_t) * 4 * n);
    if (c == NULL || desc == NULL || maps == NULL || got == NULL || blocks == NULL)
        return NULL;
    memset(c, 0, sizeof(*c));
    memset(desc, 0, stride * n);
    memset(maps, 0, (sizeof(char *) + sizeof(void *)) * n * IPC_BUFS);
    *c = (struct ipc_call){.comm = comm,
                           .ops = args->mem,
                           .type = args->type,
                           .dtype = args->dtype,
                           .op = args->op,
                           .avg = avg,
                           .root = args->root,
                           .in_place = args->in_place,
                           .count = args->count,
                           .dsize = args->dsize,
                           .sbuf = args->sbuf,
                           .rbuf = args->rbuf,
                           .desc = desc,
                           .dstride = stride,
                           .peer = maps,
                           .used = (mesh_dev_ipc_map_t **)((char **)maps + n * IPC_BUFS),
                           .got = got,
                           .token = 1};
    if (args->type == MESH_COLL_ALLGATHER || args->type == MESH_COLL_REDUCE_SCATTER || a2a) {
        memcpy(blocks, args->counts, sizeof(size_t) * n);
        memcpy(blocks + n, args->displs, sizeof(size_t) * n);
        c->counts = blocks;
        c->displs = blocks + n;
        for (size_t i = 0; i < n; i++)
            c->total += blocks[i];
    }
    if (a2a) {
        memcpy(blocks + 2 * n, args->rcounts, sizeof(size_t) * n);
        memcpy(blocks + 3 * n, args->rdispls, sizeof(size_t) * n);
        c->rcounts = blocks + 2 * n;
        c->rdispls = blocks + 3 * n;
        /* where our input holds each rank's block, for the peers that pull it */
        struct ipc_desc *mine = desc_at(c, comm->rank);
        for (size_t i = 0; i < n; i++) {
            mine->blk[2 * i] = c->displs[i] * c->dsize;
            mine->blk[2 * i + 1] = c->counts[i] * c->dsize;
        }
    }
    for (int i = 0; i < 2; i++)
        c->step[i] = (struct ipc_step){c, i};
    return c;
}

static mesh_status_t ipc_build(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                               mesh_sched_t *s)
{
    struct ipc_call *c = call_create(comm, args, avg, s);
    if (c == NULL)
        return mesh_sched_build_status(s);
    int e = mesh_sched_poll(s, step_export, c, NULL, 0);
    int have = exchange(s, c, e, 0);
    int done = mesh_sched_poll(s, step_phase, &c->step[0], &have, 1);
    if (args->type == MESH_COLL_ALLREDUCE) {
        int final = exchange(s, c, done, 1);
        done = mesh_sched_poll(s, step_phase, &c->step[1], &final, 1);
    }
    int all = exchange(s, c, done, 2);
    mesh_sched_poll(s, step_end, c, &all, 1);
    return mesh_sched_build_status(s);
}

/* Not in the registry: MESH_TUNE never forces them on host buffers, nor host algorithms here. */
#define IPC_ALGO(coll, what)                                                                       \
    {                                                                                              \
        .name = "ipc", .desc = what, .type = coll, .score = NULL, .build = NULL                    \
    }
static const mesh_coll_algo_t ipc_algos[] = {
    IPC_ALGO(MESH_COLL_ALLGATHER, "device copies from every peer's input (IPC)"),
    IPC_ALGO(MESH_COLL_BROADCAST, "a device copy from the root's buffer (IPC)"),
    IPC_ALGO(MESH_COLL_ALLREDUCE, "reduce-scatter reading peers' inputs, then device copies of "
                                  "the reduced chunks (IPC)"),
    IPC_ALGO(MESH_COLL_ALLTOALL, "device copies from every peer's input (IPC)"),
    IPC_ALGO(MESH_COLL_REDUCE_SCATTER, "the rank's block of every input reduced, reading peers' "
                                       "inputs (IPC)"),
};

mesh_status_t mesh_dev_ipc_build(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                                 mesh_sched_t *s, const mesh_coll_algo_t **algo)
{
    if (comm->nnodes > 1)
        return mesh_dev_hier_build(comm, args, avg, s, algo);
    for (size_t i = 0; i < sizeof(ipc_algos) / sizeof(ipc_algos[0]); i++)
        if (ipc_algos[i].type == args->type)
            *algo = &ipc_algos[i];
    mesh_log_debug("%s: %zu bytes of device buffers on %d ranks -> ipc",
                   mesh_coll_type_name(args->type), args->bytes, comm->size);
    return ipc_build(comm, args, avg, s);
}
