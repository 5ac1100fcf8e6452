/* Hierarchical collectives on device buffers across nodes (dev_hier.h says how): which calls go
 * this way, the pinned host buffers of their rail phases, and the pieces their schedules share;
 * each collective's schedule is in its own file. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev_hier.h"
#include "collectives/patterns/hier.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- which calls */

enum { HIER_OFF, HIER_AUTO, HIER_FORCE };

static int hier_mode(void)
{
    static int mode = -1; /* read once: every rank of a communicator takes the same path */
    int v = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *s =
            mesh_dev_config_register() == MESH_OK ? mesh_config_str("DEVICE_HIER") : NULL;
        v = s == NULL || strcmp(s, "auto") == 0 ? HIER_AUTO
            : strcmp(s, "1") == 0               ? HIER_FORCE
                                                : HIER_OFF;
        if (v != HIER_OFF && mesh_config_bool("DEVICE_IPC") == 0)
            v = HIER_OFF; /* the node phases are device copies between IPC mappings */
        __atomic_store_n(&mode, v, __ATOMIC_RELAXED);
    }
    return v;
}

static int hier_type(mesh_coll_type_t type)
{
    return type == MESH_COLL_ALLREDUCE || type == MESH_COLL_ALLGATHER ||
           type == MESH_COLL_BROADCAST || type == MESH_COLL_REDUCE_SCATTER;
}

/* Why a communicator of this shape cannot run collectives by this path (NULL: it can). */
static const char *shape_refusal(const mesh_comm_t *comm)
{
    if (comm->nnodes < 2)
        return "the ranks share one node";
    int L = mesh_hier_rails(comm->nnodes, comm->node_size);
    if (L < 0)
        return "the nodes hold different numbers of ranks";
    if (L < 2)
        return "every node holds one rank";
    return NULL;
}

int mesh_dev_hier_select(mesh_comm_t *comm, const mesh_coll_args_t *args, const void *scalar)
{
    int mode = comm->nnodes > 1 && hier_type(args->type) ? hier_mode() : HIER_OFF;
    if (mode == HIER_OFF)
        return 0;
    const char *why = shape_refusal(comm);
    const mesh_mem_ops_t *ops = args->mem;
    if (why == NULL && scalar != NULL)
        why = "it does not serve pre-multiplied sums";
    /* blocks are read from the peers' buffers, which must place them alike */
    if (why == NULL && args->type == MESH_COLL_ALLGATHER && !args->uniform)
        why = "it does not serve counts per rank";
    if (why == NULL && args->type == MESH_COLL_REDUCE_SCATTER && !args->uniform)
        why = "it does not serve counts per rank";
    if (why == NULL && (!args->mappable || ops->ipc_export == NULL || ops->ipc_import == NULL))
        why = "peers cannot map the buffers through IPC";
    if (why == NULL)
        return 1;
    if (mode == HIER_AUTO)
        return 0;
    return mesh_error(MESH_ERR_UNSUPPORTED,
                      "%s on device buffers: MESH_DEVICE_HIER=1 asks for the hierarchical path, "
                      "but %s",
                      mesh_coll_type_name(args->type), why);
}

const char *mesh_dev_hier_path(const mesh_comm_t *comm, mesh_coll_type_t type)
{
    int mode = hier_mode();
    if (mode == HIER_OFF || !hier_type(type))
        return mode == HIER_OFF && hier_type(type)
                   ? "staged through pinned host memory (the ranks span nodes; MESH_DEVICE_HIER=0 "
                     "or MESH_DEVICE_IPC=0), then the selection above"
                   : "staged through pinned host memory (the ranks span nodes), then the "
                     "selection above";
    if (shape_refusal(comm) != NULL)
        return mode == HIER_FORCE ? "refused (MESH_DEVICE_HIER=1, and the nodes are not all "
                                    "alike with more than one rank)"
                                  : "staged through pinned host memory (the nodes are not all "
                                    "alike with more than one rank), then the selection above";
    if (type == MESH_COLL_ALLREDUCE)
        return "ipc-hier (node reduce-scatter by IPC, rail all-reduce of 1/L staged through "
               "pinned host memory, node all-gather by IPC; pre-multiplied sums staged)";
    if (type == MESH_COLL_ALLGATHER)
        return "ipc-hier (rail all-gather staged through pinned host memory, then device copies "
               "from the node's peers by IPC; counts per rank staged)";
    if (type == MESH_COLL_REDUCE_SCATTER)
        return "ipc-hier (the rail's blocks reduced over the node by IPC, rail reduce-scatter "
               "staged through pinned host memory; counts per rank and pre-multiplied sums "
               "staged)";
    return "ipc-hier (chunk l of the root's buffer by IPC to local rank l, along its rail "
           "through pinned host memory, then device copies from the node's peers by IPC)";
}

/* ---------------------------------------------------------------- pinned host buffers */

/* A communicator's pinned buffers for rail phases, used under its lock (builds and poll tasks).
 * A buffer is busy from the build of its call to the call's last task; a failed call never
 * gives it back (a transport may still write it), so it is freed with the communicator. */
struct mesh_dev_hier_buf {
    void *ptr;
    size_t cap;
    int busy;
    struct mesh_dev_hier_buf *next;
};

struct mesh_dev_hier {
    const mesh_mem_ops_t *ops;
    mesh_dev_hier_buf_t *bufs;
    size_t idle; /* bytes of buffers not busy */
    size_t keep; /* MESH_DEVICE_STAGING_MAX: idle bytes kept for later calls */
};

static mesh_status_t state(mesh_comm_t *comm, const mesh_mem_ops_t *ops, struct mesh_dev_hier **out)
{
    struct mesh_dev_hier *st = comm->dev_hier;
    if (st != NULL && st->ops != ops)
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "device buffers of table %s on a communicator that used table %s",
                          ops->name, st->ops->name);
    if (st == NULL) {
        if ((st = calloc(1, sizeof(*st))) == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate the hierarchical state");
        st->ops = ops;
        st->keep = mesh_config_size("DEVICE_STAGING_MAX");
        comm->dev_hier = st;
    }
    *out = st;
    return MESH_OK;
}

mesh_status_t mesh_dev_hier_stage(mesh_dev_hier_call_t *c, size_t bytes)
{
    struct mesh_dev_hier *st = NULL;
    if (bytes == 0)
        return MESH_OK;
    MESH_CHECK(state(c->comm, c->ops, &st));
    size_t cap = (bytes + 65535) & ~(size_t)65535;
    mesh_dev_hier_buf_t *best = NULL;
    for (mesh_dev_hier_buf_t *b = st->bufs; b != NULL; b = b->next)
        if (!b->busy && b->cap >= cap && (best == NULL || b->cap < best->cap))
            best = b;
    if (best == NULL) {
        best = calloc(1, sizeof(*best));
        mesh_status_t s = best == NULL ? MESH_ERR_NO_MEMORY : st->ops->host_alloc(&best->ptr, cap);
        if (s < 0) {
            free(best);
            return mesh_error(s,
                              "cannot allocate %zu bytes of pinned memory for a hierarchical "
                              "call on device buffers",
                              cap);
        }
        best->cap = cap;
        best->next = st->bufs;
        st->bufs = best;
    } else {
        st->idle -= best->cap;
    }
    best->busy = 1;
    c->buf = best;
    c->host = best->ptr;
    return MESH_OK;
}

static void stage_put(mesh_comm_t *comm, mesh_dev_hier_buf_t *buf)
{
    struct mesh_dev_hier *st = comm->dev_hier;
    buf->busy = 0;
    st->idle += buf->cap;
    /* idle buffers past the bound go, the largest first */
    while (st->idle > st->keep) {
        mesh_dev_hier_buf_t **big = NULL;
        for (mesh_dev_hier_buf_t **b = &st->bufs; *b != NULL; b = &(*b)->next)
            if (!(*b)->busy && (big == NULL || (*b)->cap > (*big)->cap))
                big = b;
        mesh_dev_hier_buf_t *f = *big;
        *big = f->next;
        st->idle -= f->cap;
        st->ops->host_free(f->ptr);
        free(f);
    }
}

void mesh_dev_hier_free(mesh_comm_t *comm)
{
    struct mesh_dev_hier *st = comm->dev_hier;
    if (st == NULL)
        return;
    while (st->bufs != NULL) {
        mesh_dev_hier_buf_t *f = st->bufs;
        st->bufs = f->next;
        st->ops->host_free(f->ptr);
        free(f);
    }
    free(st);
    comm->dev_hier = NULL;
}

/* ---------------------------------------------------------------- the call */

static mesh_dev_hier_call_t *call_create(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                                         const mesh_coll_hier_t *hp, mesh_sched_t *s)
{
    mesh_coll_hier_t h = *hp;
    size_t L = (size_t)h.L, n = (size_t)comm->size, B = MESH_DEV_HIER_BUFS;
    mesh_dev_hier_call_t *c = mesh_sched_scratch(s, sizeof(*c));
    mesh_dev_hier_desc_t *desc = mesh_sched_scratch(s, sizeof(*desc) * L);
    void *maps = mesh_sched_scratch(s, (sizeof(char *) + sizeof(void *)) * L * B);
    uint32_t *got = mesh_sched_scratch(s, sizeof(uint32_t) * MESH_DEV_HIER_ROUNDS * L);
    size_t *blocks = mesh_sched_scratch(s, sizeof(size_t) * 2 * n);
    if (c == NULL || desc == NULL || maps == NULL || got == NULL || blocks == NULL)
        return NULL;
    memset(desc, 0, sizeof(*desc) * L);
    memset(maps, 0, (sizeof(char *) + sizeof(void *)) * L * B);
    *c = (mesh_dev_hier_call_t){.comm = comm,
                                .ops = args->mem,
                                .type = args->type,
                                .dtype = args->dtype,
                                .op = args->op,
                                .avg = avg,
                                .root = args->root,
                                .count = args->count,
                                .dsize = args->dsize,
                                .sbuf = args->sbuf,
                                .rbuf = args->rbuf,
                                .h = h,
                                .desc = desc,
                                .peer = maps,
                                .used = (mesh_dev_ipc_map_t **)((char **)maps + L * B),
                                .got = got,
                                .token = 1};
    if (args->counts != NULL && args->displs != NULL) {
        memcpy(blocks, args->counts, sizeof(size_t) * n);
        memcpy(blocks + n, args->displs, sizeof(size_t) * n);
        c->counts = blocks;
        c->displs = blocks + n;
    }
    return c;
}

char *mesh_dev_hier_peer(const mesh_dev_hier_call_t *c, int l, int b)
{
    if (l == c->h.lr)
        return b == 0 ? (char *)c->sbuf : c->rbuf;
    return c->peer[l * MESH_DEV_HIER_BUFS + b];
}

void mesh_dev_hier_chunk(const mesh_dev_hier_call_t *c, int i, int n, size_t *lo, size_t *len)
{
    size_t unit = c->dsize < 256 ? 256 / c->dsize : 1, k = (size_t)n;
    size_t per = ((c->count + unit - 1) / unit + k - 1) / k * unit;
    *lo = per * (size_t)i < c->count ? per * (size_t)i : c->count;
    *len = c->count - *lo < per ? c->count - *lo : per;
}

mesh_status_t mesh_dev_hier_gather_chunks(mesh_dev_hier_call_t *c, void *stream)
{
    int L = c->h.L, me = c->h.lr;
    size_t ds = c->dsize, lo, len;
    for (int j = 1; j < L; j++) {
        int l = (me + j) % L;
        mesh_dev_hier_chunk(c, l, L, &lo, &len);
        if (len > 0)
            MESH_CHECK(c->ops->copy_async(c->rbuf + lo * ds, mesh_dev_hier_peer(c, l, 1) + lo * ds,
                                          len * ds, stream));
    }
    return MESH_OK;
}

mesh_status_t mesh_dev_hier_to_host(mesh_dev_hier_call_t *c, void *host, const void *dev,
                                    size_t bytes, void *stream)
{
    if (bytes == 0)
        return MESH_OK;
    c->to_host += bytes;
    return c->ops->copy_async(host, dev, bytes, stream);
}

mesh_status_t mesh_dev_hier_from_host(mesh_dev_hier_call_t *c, void *dev, const void *host,
                                      size_t bytes, void *stream)
{
    if (bytes == 0)
        return MESH_OK;
    c->from_host += bytes;
    return c->ops->copy_async(dev, host, bytes, stream);
}

/* ---------------------------------------------------------------- poll tasks */

/* Our stream reached the call: our buffers exported into our descriptor. */
static mesh_status_t step_export(void *arg)
{
    mesh_dev_hier_call_t *c = arg;
    mesh_dev_hier_desc_t *d = &c->desc[c->h.lr];
    memset(d, 0, sizeof(*d));
    d->pid = (uint64_t)getpid();
    c->mapped = 0;
    c->to_host = c->from_host = 0;
    MESH_CHECK(mesh_dev_ipc_state(c->comm, c->ops, &c->ipc));
    for (int b = 0; b < MESH_DEV_HIER_BUFS; b++) {
        d->h[b].fd = -1;
        if (c->exp[b] == NULL)
            continue;
        mesh_status_t st = c->ops->ipc_export(c->exp[b], &d->h[b]);
        if (st == MESH_OK && d->h[b].fd >= 0)
            st = mesh_dev_ipc_hold(c->ipc, d->h[b].fd);
        if (st < 0) {
            d->h[b].fd = -1;
            return st;
        }
        d->addr[b] = (uint64_t)(uintptr_t)c->exp[b];
    }
    return MESH_OK;
}

/* Every buffer the node's peers exported, mapped (once per call, before the first device work). */
static mesh_status_t map_peers(mesh_dev_hier_call_t *c)
{
    for (int l = 0; l < c->h.L; l++) {
        const mesh_dev_hier_desc_t *d = &c->desc[l];
        for (int b = 0; b < MESH_DEV_HIER_BUFS; b++) {
            int i = l * MESH_DEV_HIER_BUFS + b;
            c->peer[i] = NULL;
            c->used[i] = NULL;
            if (l == c->h.lr || d->addr[b] == 0)
                continue;
            MESH_CHECK(mesh_dev_ipc_map(c->ipc, mesh_coll_group_rank(&c->h.local, l), d->pid,
                                        d->addr[b], &d->h[b], (void **)&c->peer[i], &c->used[i]));
        }
    }
    c->mapped = 1;
    return MESH_OK;
}

static mesh_status_t step_device(void *arg)
{
    mesh_dev_hier_step_t *s = arg;
    mesh_dev_hier_call_t *c = s->c;
    if (!s->issued) {
        if (!c->mapped)
            MESH_CHECK(map_peers(c));
        void *stream = mesh_dev_ipc_stream(c->ipc);
        c->part = s->part;
        mesh_status_t st = s->fn(c, stream);
        if (st == MESH_OK && s->event == NULL)
            st = mesh_dev_ipc_event_get(c->ipc, &s->event);
        if (st == MESH_OK)
            st = c->ops->event_record(s->event, stream);
        if (st < 0)
            return st;
        s->issued = 1;
    }
    mesh_status_t st = c->ops->event_query(s->event);
    if (st != MESH_INPROGRESS) {
        s->issued = 0;
        mesh_dev_ipc_event_put(c->ipc, s->event);
        s->event = NULL;
    }
    return st;
}

static mesh_status_t step_end(void *arg)
{
    mesh_dev_hier_call_t *c = arg;
    mesh_dev_hier_desc_t *d = &c->desc[c->h.lr];
    for (int b = 0; b < MESH_DEV_HIER_BUFS; b++)
        if (d->h[b].fd >= 0) {
            mesh_dev_ipc_drop(c->ipc, d->h[b].fd);
            d->h[b].fd = -1;
        }
    for (int i = 0; i < c->h.L * MESH_DEV_HIER_BUFS; i++) {
        mesh_dev_ipc_release(c->used[i]);
        c->used[i] = NULL;
    }
    if (c->buf != NULL) {
        stage_put(c->comm, c->buf);
        c->buf = NULL;
    }
    c->comm->dev_hier_calls++;
    c->comm->dev_hier_to_host += c->to_host;
    c->comm->dev_hier_from_host += c->from_host;
    return MESH_OK;
}

/* ---------------------------------------------------------------- the schedule */

/* Every rank of the node sends what it passed dep with (its descriptor, or a token) to every
 * other one; the join of what it received and sent. */
static int exchange(mesh_sched_t *s, mesh_dev_hier_call_t *c, int dep, int round)
{
    int L = c->h.L, me = c->h.lr;
    int *ids = mesh_sched_scratch(s, sizeof(int) * 2 * (size_t)L);
    if (ids == NULL)
        return -1;
    int k = 0;
    for (int j = 1; j < L; j++) {
        int l = (me + j) % L, p = mesh_coll_group_rank(&c->h.local, l);
        if (round == 0) {
            ids[k++] = mesh_sched_send(s, p, &c->desc[me], sizeof(c->desc[me]), &dep, 1);
            ids[k++] = mesh_sched_recv(s, p, &c->desc[l], sizeof(c->desc[l]), NULL, 0);
        } else {
            ids[k++] = mesh_sched_send(s, p, &c->token, sizeof(c->token), &dep, 1);
            ids[k++] =
                mesh_sched_recv(s, p, &c->got[(round - 1) * L + l], sizeof(c->token), NULL, 0);
        }
    }
    ids[k++] = dep;
    return mesh_sched_nop(s, ids, k);
}

int mesh_dev_hier_start(mesh_sched_t *s, mesh_dev_hier_call_t *c)
{
    int e = mesh_sched_poll(s, step_export, c, NULL, 0);
    return exchange(s, c, e, 0);
}

int mesh_dev_hier_device(mesh_sched_t *s, mesh_dev_hier_call_t *c, mesh_dev_hier_issue_fn fn,
                         int part, const int *deps, int ndeps)
{
    mesh_dev_hier_step_t *st = mesh_sched_scratch(s, sizeof(*st));
    if (st == NULL)
        return -1;
    *st = (mesh_dev_hier_step_t){.c = c, .fn = fn, .part = part};
    return mesh_sched_poll(s, step_device, st, deps, ndeps);
}

int mesh_dev_hier_token(mesh_sched_t *s, mesh_dev_hier_call_t *c, int dep)
{
    return exchange(s, c, dep, ++c->rounds);
}

void mesh_dev_hier_end(mesh_sched_t *s, mesh_dev_hier_call_t *c, const int *deps, int ndeps)
{
    mesh_sched_poll(s, step_end, c, deps, ndeps);
}

/* ---------------------------------------------------------------- entry */

/* Not in the registry: MESH_TUNE never forces them on host buffers, nor host algorithms here. */
#define HIER_ALGO(coll, what)                                                                      \
    {                                                                                              \
        .name = "ipc-hier", .desc = what, .type = coll, .score = NULL, .build = NULL               \
    }
static const mesh_coll_algo_t hier_algos[] = {
    HIER_ALGO(MESH_COLL_ALLREDUCE, "node reduce-scatter by IPC, rail all-reduce staged through "
                                   "pinned host memory, node all-gather by IPC"),
    HIER_ALGO(MESH_COLL_ALLGATHER, "rail all-gather staged through pinned host memory, then "
                                   "device copies from the node's peers (IPC)"),
    HIER_ALGO(MESH_COLL_REDUCE_SCATTER, "the rail's blocks reduced over the node by IPC, then a "
                                        "rail reduce-scatter staged through pinned host memory"),
    HIER_ALGO(MESH_COLL_BROADCAST, "the root's chunks by IPC to its node, along the rails "
                                   "through pinned host memory, then device copies (IPC)"),
};

mesh_status_t mesh_dev_hier_build(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                                  mesh_sched_t *s, const mesh_coll_algo_t **algo)
{
    for (size_t i = 0; i < sizeof(hier_algos) / sizeof(hier_algos[0]); i++)
        if (hier_algos[i].type == args->type)
            *algo = &hier_algos[i];
    mesh_log_debug("%s: %zu bytes of device buffers on %d nodes x %d ranks -> ipc-hier",
                   mesh_coll_type_name(args->type), args->bytes, comm->nnodes,
                   comm->size / comm->nnodes);
    mesh_coll_hier_t h;
    MESH_CHECK(mesh_coll_hier_rails(comm, s, "hierarchical call on device buffers", &h));
    mesh_dev_hier_call_t *c = call_create(comm, args, avg, &h, s);
    if (c == NULL)
        return mesh_sched_build_status(s);
    switch (args->type) {
    case MESH_COLL_ALLREDUCE:
        return mesh_dev_hier_allreduce(s, c);
    case MESH_COLL_ALLGATHER:
        return mesh_dev_hier_allgather(s, c);
    case MESH_COLL_BROADCAST:
        return mesh_dev_hier_broadcast(s, c);
    case MESH_COLL_REDUCE_SCATTER:
        return mesh_dev_hier_reduce_scatter(s, c);
    default:
        return mesh_error(MESH_ERR_INTERNAL, "%s has no hierarchical path on device buffers",
                          mesh_coll_type_name(args->type));
    }
}
