/* Communicator creation: identity exchange, node map, transport routing and wire-up. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/algo.h"
#include "collectives/comm.h"
#include "collectives/route.h"
#include "collectives/sched.h"
#include "libmesh/bootstrap.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/mem.h"
#include "collectives/device/dev.h"
#include "libmesh/progress.h"
#include "libmesh/topo.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define MESH_NODE_NAME_MAX 64
#define MESH_TL_NAME_MAX   16
#define MESH_NET_DEFAULT   "verbs,ucx,ofi,tcp"

/* First exchange: who and where every rank is. */
typedef struct {
    char node[MESH_NODE_NAME_MAX];
    int32_t pid;
    int32_t pad;
    uint64_t pidns;
    uint64_t uid; /* rank 0's value becomes the communicator's uid */
} mesh_comm_rec_id_t;

/* Second exchange: transport addresses. */
typedef struct {
    mesh_topo_summary_t summary; /* GPU, CPUs, nearest NIC: needs the local rank from the map */
    uint32_t ntl;
    uint32_t pad;
    struct {
        char name[MESH_TL_NAME_MAX];
        uint32_t len;
        /* transports read their address blob as a struct: keep it aligned */
        _Alignas(16) uint8_t addr[MESH_TL_ADDR_MAX];
    } tl[MESH_COMM_MAX_TLS];
} mesh_comm_rec_addr_t;

static const mesh_config_entry_t mesh_coll_config_entries[] = {
    {"TLS", "all", MESH_CFG_STRING,
     "Transports a communicator may open, comma-separated ('all' for every one built). Same-node "
     "peers prefer node-scope transports (shm); other nodes use the first network transport of "
     "MESH_NET that both sides opened. A network transport must be allowed by both MESH_TLS and "
     "MESH_NET.",
     NULL},
    {"NET", MESH_NET_DEFAULT, MESH_CFG_STRING,
     "Network transports for peers on other nodes, in order of preference, comma-separated: "
     "each node pair uses the first one that runs on both sides. Network transports not named "
     "are not used. One that cannot run here is skipped, with a warning saying why when MESH_NET "
     "is set, and the communicator logs its choice at info level (MESH_LOG_LEVEL=info). With "
     "the default value, ucx and ofi give way to tcp on hosts without an RDMA device, where "
     "they would only wrap sockets (setting MESH_NET, or naming them in MESH_TLS, keeps them). "
     "An unknown name is an error.",
     NULL},
    {"TUNE", "", MESH_CFG_STRING,
     "Forces algorithms: comma-separated rules [coll:]algo[@min-max] (bytes, k/m/g suffixes, "
     "inf), e.g. 'allreduce:ring@1m-inf,bruck'; the last matching rule wins, and a forced "
     "algorithm that cannot serve a call falls back to the default choice. mesh-info -A lists "
     "the algorithms. A rule naming an unknown collective or algorithm is refused.",
     NULL, NULL, mesh_coll_tune_check},
    {"REPLAY", "1", MESH_CFG_BOOL,
     "Runs a collective called again with the same arguments (buffers, counts, type, op, root) "
     "on the schedule built for the last such call, skipping algorithm selection and the "
     "build: a communicator keeps up to 4 finished schedules. 0 selects and builds every call.",
     NULL},
    {"HANG_PROBE", "1", MESH_CFG_DOUBLE,
     "Seconds a rank whose wait timed out (MESH_TIMEOUT) waits for every other rank to answer a "
     "probe: a rank that does not answer is named, to every survivor, as the one that stopped. "
     "Ranks waiting in mesh answer within milliseconds on an idle machine, and the probe ends as "
     "soon as all have; on cores shared with other work a live rank may not run for a few "
     "hundred milliseconds, hence the margin. 0: no probe; the timeout names the ranks this one "
     "waited on.",
     NULL, "0..60"},
    {"VERDICT_WAIT", "0.1", MESH_CFG_DOUBLE,
     "Seconds a rank that sees a peer fail first listens for another rank's verdict before "
     "naming that peer itself: a survivor that left after seeing a failure looks failed to the "
     "ranks it leaves behind, and its verdict names the rank that really failed.",
     NULL, "0..60"},
    {NULL, NULL, 0, NULL, NULL}};

static const mesh_config_table_t mesh_coll_config = {"coll", mesh_coll_config_entries};

static pthread_once_t mesh_coll_once = PTHREAD_ONCE_INIT;
static mesh_status_t mesh_coll_init_status;

static void mesh_coll_global_init_once(void)
{
    mesh_status_t st = mesh_context_init();
    if (st == MESH_OK)
        st = mesh_bootstrap_config_register();
    if (st == MESH_OK)
        st = mesh_tl_global_init();
    if (st == MESH_OK)
        st = mesh_config_register(&mesh_coll_config);
    if (st == MESH_OK)
        st = mesh_topo_config_register();
    if (st == MESH_OK)
        st = mesh_dev_config_register();
    if (st == MESH_OK)
        mesh_config_warn_unknown();
    /* the device tables (the cuda table loads its driver) before any call asks a pointer */
    if (st == MESH_OK)
        mesh_mem_init();
    mesh_coll_init_status = st;
}

mesh_status_t mesh_coll_global_init(void)
{
    pthread_once(&mesh_coll_once, mesh_coll_global_init_once);
    return mesh_coll_init_status;
}

static mesh_status_t build_node_map(mesh_comm_t *c, const mesh_comm_rec_id_t *ids)
{
    c->node_of = calloc((size_t)c->size, sizeof(int));
    c->local_rank = calloc((size_t)c->size, sizeof(int));
    c->node_ranks = calloc((size_t)c->size, sizeof(int));
    c->node_size = calloc((size_t)c->size, sizeof(int));
    c->node_first = calloc((size_t)c->size, sizeof(int));
    c->node_names = calloc((size_t)c->size, sizeof(char *));
    if (!c->node_of || !c->local_rank || !c->node_ranks || !c->node_size || !c->node_first ||
        !c->node_names)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate the node map of %d ranks", c->size);
    c->nnodes = 0;
    for (int r = 0; r < c->size; r++) {
        int n;
        for (n = 0; n < c->nnodes; n++)
            if (strncmp(c->node_names[n], ids[r].node, MESH_NODE_NAME_MAX) == 0)
                break;
        if (n == c->nnodes) {
            c->node_names[n] = strndup(ids[r].node, MESH_NODE_NAME_MAX);
            if (c->node_names[n] == NULL)
                return mesh_error(MESH_ERR_NO_MEMORY, "node map");
            c->nnodes++;
        }
        c->node_of[r] = n;
        c->local_rank[r] = c->node_size[n]++;
    }
    for (int n = 1; n < c->nnodes; n++)
        c->node_first[n] = c->node_first[n - 1] + c->node_size[n - 1];
    /* ranks sharing this kernel (same pid namespace and boot), which simulated nodes do */
    int here = 0, mine = c->node_size[c->node_of[c->rank]];
    for (int r = 0; r < c->size; r++)
        here += ids[r].pidns != 0 && ids[r].pidns == ids[c->rank].pidns;
    mesh_progress_node_ranks(here > mine ? here : mine);
    int *fill = calloc((size_t)c->nnodes, sizeof(int));
    if (fill == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "node map");
    for (int r = 0; r < c->size; r++) {
        int n = c->node_of[r];
        c->node_ranks[c->node_first[n] + fill[n]++] = r;
    }
    free(fill);
    return MESH_OK;
}

static mesh_status_t route_peers(mesh_comm_t *c, const mesh_route_t *route,
                                 const mesh_comm_rec_id_t *ids, const mesh_comm_rec_addr_t *addrs)
{
    int used[MESH_COMM_MAX_TLS] = {0};
    for (int p = 0; p < c->size; p++) {
        int best = -1;
        const void *best_addr = NULL;
        size_t best_len = 0;
        for (int t = 0; t < c->ntls; t++) {
            mesh_comm_tl_t *tl = &c->tls[t];
            if (tl->caps.scope == MESH_TL_SCOPE_SELF && p != c->rank)
                continue;
            /* find the peer's address for this transport */
            const mesh_comm_rec_addr_t *ra = &addrs[p];
            int k;
            for (k = 0; k < (int)ra->ntl; k++)
                if (strncmp(ra->tl[k].name, tl->ops->name, MESH_TL_NAME_MAX) == 0)
                    break;
            if (k == (int)ra->ntl)
                continue;
            mesh_tl_peer_t peer = {.rank = p,
                                   .node = c->node_names[c->node_of[p]],
                                   .pid = ids[p].pid,
                                   .pidns = ids[p].pidns,
                                   .addr = ra->tl[k].addr,
                                   .addr_len = ra->tl[k].len};
            if (!tl->ops->reachable(tl->iface, &peer))
                continue;
            if (best < 0 || mesh_route_better(route, tl, &c->tls[best])) {
                best = t;
                best_addr = ra->tl[k].addr;
                best_len = ra->tl[k].len;
            }
        }
        if (best < 0)
            return mesh_error(MESH_ERR_UNSUPPORTED,
                              "no transport reaches rank %d (node %s) from rank %d (node %s); "
                              "MESH_TLS=%s MESH_NET=%s",
                              p, c->node_names[c->node_of[p]], c->rank,
                              c->node_names[c->node_of[c->rank]], mesh_config_str("TLS"),
                              mesh_config_str("NET"));
        mesh_tl_peer_t peer = {.rank = p,
                               .node = c->node_names[c->node_of[p]],
                               .pid = ids[p].pid,
                               .pidns = ids[p].pidns,
                               .addr = best_addr,
                               .addr_len = best_len};
        MESH_CHECK(c->tls[best].ops->ep_create(c->tls[best].iface, &peer, &c->peers[p].ep));
        c->peers[p].tl = best;
        c->peers[p].pid = ids[p].pid;
        c->peers[p].pidns = ids[p].pidns;
        used[best] = 1;
        mesh_log_debug("rank %d -> rank %d over %s", c->rank, p, c->tls[best].ops->name);
    }
    /* wire up what is used, close what is not (keeping indices stable) */
    double deadline = mesh_time() + c->timeout_s;
    for (int t = 0; t < c->ntls; t++) {
        if (!used[t])
            continue;
        MESH_CHECK(c->tls[t].ops->wireup(c->tls[t].iface, deadline));
    }
    for (int t = 0; t < c->ntls; t++) {
        if (used[t] || c->tls[t].iface == NULL)
            continue;
        c->tls[t].ops->close(c->tls[t].iface);
        c->tls[t].iface = NULL;
    }
    return MESH_OK;
}

/* Everything but the structure itself, which requests still alive may read (their status); the
 * transports are closed, so nothing completes any more. */
static void comm_release_resources(mesh_comm_t *c)
{
    if (c->peers) {
        for (int p = 0; p < c->size; p++) {
            mesh_comm_peer_t *peer = &c->peers[p];
            if (peer->ep)
                c->tls[peer->tl].ops->ep_destroy(peer->ep);
        }
    }
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface)
            c->tls[t].ops->close(c->tls[t].iface);
    mesh_sched_cache_free(c->sched_cache);
    mesh_coll_map_free(c->coll_map);
    mesh_p2p_seq_fini(&c->p2p);
    free(c->active);
    if (c->node_names)
        for (int n = 0; n < c->nnodes; n++)
            free(c->node_names[n]);
    free(c->node_names);
    free(c->node_of);
    free(c->local_rank);
    free(c->node_size);
    free(c->node_first);
    free(c->node_ranks);
    free(c->summary);
    free(c->peers);
    mesh_health_fini(c);
    c->ntls = 0;
    c->nactive = c->cap_active = 0;
    c->nnodes = 0;
    c->active = NULL;
    c->sched_cache = NULL;
    c->coll_map = NULL;
    c->peers = NULL;
    c->node_names = NULL;
    c->node_of = c->local_rank = c->node_size = c->node_first = c->node_ranks = NULL;
    c->summary = NULL;
}

/* Communicator structures are never given back to malloc: a destroyed one keeps its memory,
 * with its magic word cleared, so that a call handed its handle refuses it instead of reading
 * freed memory. They are reused first in, first out, and only once COMM_POOL_KEEP of them wait,
 * so that a stale handle is refused across the next creations too; after that it may name a
 * newer communicator (as a freed request's handle may, request.c). A pointer that was never a
 * communicator's is refused when its first word is not the magic one. */
#define COMM_POOL_KEEP 16
static pthread_mutex_t comm_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_comm_t *comm_pool_head, *comm_pool_tail;
static int comm_pool_len;

static mesh_comm_t *comm_alloc(void)
{
    mesh_comm_t *c = NULL;
    pthread_mutex_lock(&comm_pool_lock);
    if (comm_pool_len > COMM_POOL_KEEP) {
        c = comm_pool_head;
        comm_pool_head = c->pool_next;
        if (comm_pool_head == NULL)
            comm_pool_tail = NULL;
        comm_pool_len--;
    }
    pthread_mutex_unlock(&comm_pool_lock);
    if (c == NULL)
        return calloc(1, sizeof(*c));
    memset(c, 0, sizeof(*c));
    return c;
}

static void comm_pool_put(mesh_comm_t *c)
{
    c->magic = 0;
    c->pool_next = NULL;
    pthread_mutex_lock(&comm_pool_lock);
    if (comm_pool_tail)
        comm_pool_tail->pool_next = c;
    else
        comm_pool_head = c;
    comm_pool_tail = c;
    comm_pool_len++;
    pthread_mutex_unlock(&comm_pool_lock);
}

void mesh_comm_ref(mesh_comm_t *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void mesh_comm_unref(mesh_comm_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    mesh_dev_pool_free(c); /* after the last request: device operations give staging back */
    mesh_dev_ipc_free(c);  /* and no call reads through a peer's mapping any more */
    mesh_dev_hier_free(c); /* nor writes a rail phase's pinned buffer */
    comm_pool_put(c);
}

static void comm_free(mesh_comm_t *c)
{
    if (c == NULL)
        return;
    comm_release_resources(c);
    comm_pool_put(c);
}

mesh_status_t mesh_comm_create(void *bootstrap, double timeout_s, const char *node,
                               mesh_comm_t **out)
{
    mesh_bootstrap_t *bs = bootstrap;
    mesh_status_t st;
    mesh_comm_rec_id_t *ids = NULL;
    mesh_comm_rec_addr_t *addrs = NULL, *mine = NULL;
    mesh_route_t route;
    mesh_comm_t *c = comm_alloc();
    if (c == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a communicator");
    c->rank = bs->rank;
    c->size = bs->size;
    c->timeout_s = timeout_s;
    c->replay = mesh_config_bool("REPLAY");
    atomic_init(&c->aborted, 0);
    atomic_init(&c->refs, 1);
    c->peers = calloc((size_t)c->size, sizeof(mesh_comm_peer_t));
    ids = calloc((size_t)c->size, sizeof(*ids));
    addrs = calloc((size_t)c->size, sizeof(*addrs));
    mine = calloc(1, sizeof(*mine));
    if (!c->peers || !ids || !addrs || !mine) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a communicator of %d ranks", c->size);
        goto out;
    }
    MESH_CHECK_GOTO(mesh_health_init(c), st, out);
    MESH_CHECK_GOTO(mesh_p2p_seq_init(&c->p2p, c->size), st, out);
    if ((c->sched_cache = mesh_sched_cache_create()) == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule cache");
        goto out;
    }

    mesh_comm_rec_id_t me = {.pid = (int32_t)getpid(), .pidns = mesh_context_pidns()};
    snprintf(me.node, sizeof(me.node), "%s", node);
    if (getrandom(&me.uid, sizeof(me.uid), 0) != sizeof(me.uid))
        me.uid = ((uint64_t)getpid() << 32) ^ (uint64_t)(mesh_time() * 1e9);
    MESH_CHECK_GOTO(mesh_bootstrap_allgather(bs, &me, ids, sizeof(me)), st, out);
    c->uid = ids[0].uid;
    MESH_CHECK_GOTO(build_node_map(c, ids), st, out);
    MESH_CHECK_GOTO(mesh_coll_map_build(c, mesh_config_str("TUNE"), &c->coll_map), st, out);
    const char *net = mesh_config_str("NET");
    MESH_CHECK_GOTO(mesh_route_parse_net(net, net && strcmp(net, MESH_NET_DEFAULT) != 0, &route),
                    st, out);
    MESH_CHECK_GOTO(mesh_route_open(c, node, &route), st, out);

    for (int t = 0; t < c->ntls; t++) {
        size_t len = MESH_TL_ADDR_MAX;
        snprintf(mine->tl[t].name, MESH_TL_NAME_MAX, "%s", c->tls[t].ops->name);
        MESH_CHECK_GOTO(c->tls[t].ops->address(c->tls[t].iface, mine->tl[t].addr, &len), st, out);
        mine->tl[t].len = (uint32_t)len;
    }
    mine->ntl = (uint32_t)c->ntls;
    MESH_CHECK_GOTO(mesh_topo_summary(c->local_rank[c->rank], &mine->summary), st, out);
    MESH_CHECK_GOTO(mesh_bootstrap_allgather(bs, mine, addrs, sizeof(*mine)), st, out);
    if ((c->summary = calloc((size_t)c->size, sizeof(*c->summary))) == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate %d rank summaries", c->size);
        goto out;
    }
    for (int p = 0; p < c->size; p++)
        c->summary[p] = addrs[p].summary;
    MESH_CHECK_GOTO(route_peers(c, &route, ids, addrs), st, out);
    mesh_route_report(c, &route);

    MESH_CHECK_GOTO(mesh_health_listen(c), st, out);
    mesh_comm_register(c);
    c->magic = MESH_COMM_MAGIC;
    mesh_log_info("communicator %016llx: rank %d of %d, %d node(s)", (unsigned long long)c->uid,
                  c->rank, c->size, c->nnodes);
    *out = c;
    c = NULL;
    st = MESH_OK;
out:
    comm_free(c);
    free(ids);
    free(addrs);
    free(mine);
    return st;
}

mesh_status_t mesh_comm_create_skip(void *bootstrap)
{
    /* the same exchanges as mesh_comm_create, contributing nothing */
    mesh_bootstrap_t *bs = bootstrap;
    mesh_comm_rec_addr_t *rec = calloc(2, sizeof(*rec));
    if (rec == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate exchange records");
    mesh_status_t st = mesh_bootstrap_allgather(bs, rec, rec + 1, sizeof(mesh_comm_rec_id_t));
    if (st == MESH_OK)
        st = mesh_bootstrap_allgather(bs, rec, rec + 1, sizeof(*rec));
    free(rec);
    return st;
}

void mesh_comm_release(mesh_comm_t *c)
{
    if (c == NULL)
        return;
    /* refused from now on by every call handed it */
    c->magic = 0;
    /* out of the registry first: once this returns, no other thread's wait reaches it */
    mesh_comm_unregister(c);
    mesh_comm_lock(c);
    mesh_comm_fail_active(c, MESH_ERR_ABORTED);
    comm_release_resources(c);
    c->released = 1;
    mesh_comm_unlock(c);
    /* the structure goes with the last request that refers to it */
    mesh_comm_unref(c);
}

mesh_status_t mesh_comm_fail(mesh_comm_t *c, mesh_status_t status)
{
    if (c != NULL && status < 0) {
        snprintf(c->last_error, sizeof(c->last_error), "%s", mesh_error_last());
        c->last_status = status;
    }
    return status;
}

void mesh_comm_abort_transports(mesh_comm_t *c)
{
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface && c->tls[t].ops->abort)
            c->tls[t].ops->abort(c->tls[t].iface);
}
