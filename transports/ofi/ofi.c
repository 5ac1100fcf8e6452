/*
 * ofi: libfabric reliable datagram endpoints (FI_EP_RDM) with tagged messages. One fabric,
 * domain, endpoint, completion queue and address vector (FI_AV_TABLE) per communicator; the
 * address each rank publishes is its endpoint's fi_getname. The provider is whatever fi_getinfo
 * returns first for our needs, narrowed by MESH_OFI_PROVIDER or libfabric's own FI_PROVIDER.
 * Wire-up is an untagged hello each way, so that both sides know the other reached it.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "ofi"
#include "transports/ofi/ofi.h"
#include "transports/tl_registry.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/sock.h"
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const mesh_config_entry_t ofi_config_entries[] = {
    {"OFI_PROVIDER", "", MESH_CFG_STRING,
     "Libfabric provider for the ofi transport (tcp, shm, efa, cxi, verbs, ...); empty: the "
     "first that fits, as narrowed by FI_PROVIDER.",
     NULL},
    {"OFI_MAX_MSG", "0", MESH_CFG_SIZE,
     "Largest message handed to libfabric in one piece (larger ones travel in pieces); 0: the "
     "provider's max_msg_size.",
     NULL, "0.."},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t ofi_config = {"ofi", ofi_config_entries};

#define OFI_RMA_CAPS (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

/* What we ask for, from the most to the least we can use: RMA, then without it, then without
 * the ordering guarantee. Directed receives are required: mesh's tags use all 64 bits, so the
 * source cannot ride in the tag without losing exact matching. */
static struct fi_info *ofi_hints(int attempt)
{
    struct fi_info *h = fi_allocinfo();
    if (h == NULL)
        return NULL;
    h->caps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
    if (attempt == 0)
        h->caps |= OFI_RMA_CAPS;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    /* no FI_MR_LOCAL: providers that need it are reached through their utility layers */
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    if (attempt < 2) {
        /* two messages with one tag between a pair must match their receives in order */
        h->tx_attr->msg_order = FI_ORDER_SAS;
        h->rx_attr->msg_order = FI_ORDER_SAS;
    }
    const char *prov = mesh_config_str("OFI_PROVIDER");
    if (prov && *prov)
        h->fabric_attr->prov_name = strdup(prov);
    return h;
}

static int sockaddr_is_loopback(const struct fi_info *fi)
{
    if (fi->src_addr == NULL)
        return 0;
    if (fi->addr_format == FI_SOCKADDR_IN) {
        const struct sockaddr_in *s = fi->src_addr;
        return (ntohl(s->sin_addr.s_addr) >> 24) == 127;
    }
    if (fi->addr_format == FI_SOCKADDR_IN6) {
        const struct sockaddr_in6 *s = fi->src_addr;
        return IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr);
    }
    return 0;
}

/* Whether the entry's source address is the one mesh's sockets use (MESH_SOCKET_IFNAME). */
static int sockaddr_is_ours(const struct fi_info *fi, const mesh_sockaddr_t *ours)
{
    if (fi->src_addr == NULL || ours == NULL)
        return 0;
    if (fi->addr_format == FI_SOCKADDR_IN && ours->ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = fi->src_addr, *b = (const struct sockaddr_in *)&ours->ss;
        return a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (fi->addr_format == FI_SOCKADDR_IN6 && ours->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = fi->src_addr, *b = (const struct sockaddr_in6 *)&ours->ss;
        return memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
    }
    return 0;
}

/* Finds the provider entry to use, or returns NULL (quietly: usable() asks too). */
static struct fi_info *ofi_find(int *attempt_out)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct fi_info *h = ofi_hints(attempt), *list = NULL;
        if (h == NULL)
            return NULL;
        int rc = fi_getinfo(MESH_TL_OFI_VERSION, NULL, NULL, 0, h, &list);
        fi_freeinfo(h);
        if (rc != 0 || list == NULL)
            continue;
        /* IP-based providers list one entry per interface: take the one our sockets use,
         * else the first that other hosts can reach */
        mesh_sockaddr_t ours;
        int have_ours = mesh_sock_local_addr(&ours) == MESH_OK;
        mesh_error_clear();
        const struct fi_info *pick = NULL;
        for (const struct fi_info *fi = list; fi && !pick; fi = fi->next)
            if (have_ours && sockaddr_is_ours(fi, &ours))
                pick = fi;
        for (const struct fi_info *fi = list; fi && !pick; fi = fi->next)
            if (!sockaddr_is_loopback(fi))
                pick = fi;
        if (pick == NULL)
            pick = list;
        struct fi_info *dup = fi_dupinfo(pick);
        fi_freeinfo(list);
        if (attempt_out)
            *attempt_out = attempt;
        return dup;
    }
    return NULL;
}

static int ofi_usable(void)
{
    struct fi_info *fi = ofi_find(NULL);
    if (fi == NULL)
        return 0;
    fi_freeinfo(fi);
    return 1;
}

static mesh_status_t ofi_fail(int rc, const char *what)
{
    return mesh_error(rc == -FI_ENOMEM ? MESH_ERR_NO_MEMORY : MESH_ERR_IO, "%s failed: %s", what,
                      fi_strerror(-rc));
}

static void ofi_close_fids(mesh_tl_ofi_iface_t *oi)
{
    if (oi->ep)
        fi_close(&oi->ep->fid);
    oi->ep = NULL;
    for (mesh_tl_ofi_req_t *r = oi->all_reqs, *n; r; r = n) {
        n = r->all_next;
        free(r);
    }
    oi->all_reqs = NULL;
    oi->free_reqs = NULL;
    oi->orphans = NULL;
    if (oi->av)
        fi_close(&oi->av->fid);
    if (oi->cq)
        fi_close(&oi->cq->fid);
    if (oi->domain)
        fi_close(&oi->domain->fid);
    if (oi->fabric)
        fi_close(&oi->fabric->fid);
    oi->av = NULL;
    oi->cq = NULL;
    oi->domain = NULL;
    oi->fabric = NULL;
    if (oi->info)
        fi_freeinfo(oi->info);
    oi->info = NULL;
    if (oi->sink)
        munmap(oi->sink, oi->sink_len);
    oi->sink = NULL;
}

/* Whether this process maps /dev/shm/name. */
static int shm_mapped_here(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return 1; /* cannot tell: keep it */
    char line[512], want[300];
    snprintf(want, sizeof(want), " /dev/shm/%s\n", name);
    size_t wl = strlen(want);
    int found = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        size_t l = strlen(line);
        found = l >= wl && strcmp(line + l - wl, want) == 0;
    }
    fclose(f);
    return found;
}

/* libfabric's shm provider names its regions "<pid>:<n>:<n>" and cannot enable an endpoint
 * (EBUSY) while one of that name exists. A process killed without cleanup leaves its regions
 * behind, and a later process that gets its pid fails. A region named after our pid that we do
 * not map is such a leftover: remove it. */
static void ofi_shm_remove_stale(void)
{
    char prefix[24];
    int pl = snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        unsigned a, b;
        char end;
        if (strncmp(e->d_name, prefix, (size_t)pl) != 0 ||
            sscanf(e->d_name + pl, "%u:%u%c", &a, &b, &end) != 2 || shm_mapped_here(e->d_name))
            continue;
        if (shm_unlink(e->d_name) == 0)
            mesh_log_info("removed /dev/shm/%s, left by a dead process that had our pid",
                          e->d_name);
    }
    closedir(d);
}

static mesh_status_t ofi_open_fids(mesh_tl_ofi_iface_t *oi)
{
    struct fi_info *fi = oi->info;
    int rc;
    if ((rc = fi_fabric(fi->fabric_attr, &oi->fabric, NULL)) != 0)
        return ofi_fail(rc, "fi_fabric");
    if ((rc = fi_domain(oi->fabric, fi, &oi->domain, NULL)) != 0)
        return ofi_fail(rc, "fi_domain");
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
    if ((rc = fi_cq_open(oi->domain, &cq_attr, &oi->cq, NULL)) != 0)
        return ofi_fail(rc, "fi_cq_open");
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = (size_t)oi->super.size};
    if ((rc = fi_av_open(oi->domain, &av_attr, &oi->av, NULL)) != 0)
        return ofi_fail(rc, "fi_av_open");
    if (strncmp(fi->fabric_attr->prov_name, "shm", 3) == 0)
        ofi_shm_remove_stale();
    if ((rc = fi_endpoint(oi->domain, fi, &oi->ep, NULL)) != 0)
        return ofi_fail(rc, "fi_endpoint");
    if ((rc = fi_ep_bind(oi->ep, &oi->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
        return ofi_fail(rc, "binding the completion queue");
    if ((rc = fi_ep_bind(oi->ep, &oi->av->fid, 0)) != 0)
        return ofi_fail(rc, "binding the address vector");
    if ((rc = fi_enable(oi->ep)) != 0)
        return ofi_fail(rc, "fi_enable");
    size_t len = sizeof(oi->addr.name);
    if ((rc = fi_getname(&oi->ep->fid, oi->addr.name, &len)) != 0)
        return ofi_fail(rc, "fi_getname");
    oi->addr.magic = MESH_TL_OFI_MAGIC;
    oi->addr.addr_format = fi->addr_format;
    oi->addr.protocol = fi->ep_attr->protocol;
    oi->addr.name_len = (uint16_t)len;
    oi->addr.local_only = !(fi->caps & FI_REMOTE_COMM) && (fi->caps & FI_LOCAL_COMM);
    oi->addr_len = offsetof(mesh_tl_ofi_addr_t, name) + len;
    return MESH_OK;
}

static int ofi_bits(uint64_t v)
{
    int n = 0;
    while (v) {
        n++;
        v >>= 1;
    }
    return n;
}

static mesh_status_t ofi_open(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface)
{
    mesh_status_t st;
    mesh_tl_ofi_iface_t *oi = calloc(1, sizeof(*oi));
    if (oi == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "ofi interface allocation failed");
    oi->super.ops = mesh_tl_ofi_ops;
    oi->super.rank = params->rank;
    oi->super.size = params->size;
    oi->comm_uid = params->comm_uid;
    oi->timeout_s = params->timeout_s;
    snprintf(oi->node, sizeof(oi->node), "%s", params->node ? params->node : "");
    atomic_init(&oi->aborted, 0);
    oi->eps = calloc((size_t)params->size, sizeof(*oi->eps));
    oi->hello_in = calloc((size_t)params->size, 1);
    if (oi->eps == NULL || oi->hello_in == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "ofi endpoint table for %d ranks", params->size);
        goto err;
    }
    int attempt = 0;
    oi->info = ofi_find(&attempt);
    if (oi->info == NULL) {
        st = mesh_error(MESH_ERR_NOT_FOUND,
                        "no libfabric provider offers tagged reliable "
                        "datagrams here (MESH_OFI_PROVIDER=%s)",
                        mesh_config_str("OFI_PROVIDER"));
        goto err;
    }
    struct fi_info *fi = oi->info;
    oi->directed = (fi->caps & FI_DIRECTED_RECV) != 0;
    oi->rma = (fi->caps & FI_RMA) && (fi->domain_attr->mr_mode & FI_MR_VIRT_ADDR);
    oi->mr_mode = (uint64_t)fi->domain_attr->mr_mode;
    oi->tag_bits = fi->ep_attr->mem_tag_format ? ofi_bits(fi->ep_attr->mem_tag_format) : 64;
    oi->src_bits = oi->directed ? 0 : ofi_bits((uint64_t)(params->size - 1));
    if (!oi->directed && oi->src_bits == 0)
        oi->src_bits = 1;
    if (oi->tag_bits - oi->src_bits < 40) {
        st = mesh_error(MESH_ERR_UNSUPPORTED,
                        "libfabric provider %s has %d tag bits, too few for %d ranks",
                        fi->fabric_attr->prov_name, oi->tag_bits, params->size);
        goto err;
    }
    oi->max_msg = fi->ep_attr->max_msg_size ? fi->ep_attr->max_msg_size : SIZE_MAX;
    size_t lim = mesh_config_size("OFI_MAX_MSG");
    if (lim && lim < oi->max_msg)
        oi->max_msg = lim;
    MESH_CHECK_GOTO(ofi_open_fids(oi), st, err);
    if (fi->rx_attr->iov_limit >= 2) {
        oi->sink_len = oi->max_msg < MESH_TL_OFI_SINK ? oi->max_msg : MESH_TL_OFI_SINK;
        oi->sink = mmap(NULL, oi->sink_len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (oi->sink == MAP_FAILED)
            oi->sink = NULL;
    }
    oi->hello = (mesh_tl_ofi_hello_t){
        .magic = MESH_TL_OFI_MAGIC, .rank = (uint32_t)params->rank, .comm_uid = params->comm_uid};
    for (int i = 0; i < MESH_TL_OFI_NCTRL; i++)
        MESH_CHECK_GOTO(mesh_tl_ofi_ctrl_post(oi, i), st, err);
    mesh_log_debug("rank %d uses provider %s (fabric %s, domain %s)%s%s, %d tag bits, "
                   "messages up to %zu bytes per piece",
                   params->rank, fi->fabric_attr->prov_name, fi->fabric_attr->name,
                   fi->domain_attr->name, oi->directed ? ", directed receives" : "",
                   oi->rma ? ", rma" : "", oi->tag_bits, oi->max_msg);
    (void)attempt;
    *iface = &oi->super;
    return MESH_OK;

err:
    ofi_close_fids(oi);
    free(oi->eps);
    free(oi->hello_in);
    free(oi);
    return st;
}

static void ofi_ep_destroy(mesh_tl_ep_t *uep)
{
    mesh_tl_ofi_ep_t *ep = (mesh_tl_ofi_ep_t *)uep;
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)uep->iface;
    if (ep->failed == MESH_OK)
        ep->failed = MESH_ERR_ABORTED;
    mesh_tl_ofi_ep_fail_ops(ep, MESH_ERR_ABORTED);
    if (oi->eps[uep->peer] == ep)
        oi->eps[uep->peer] = NULL;
    free(ep);
}

static void ofi_close(mesh_tl_iface_t *iface)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    for (int r = 0; r < iface->size; r++)
        if (oi->eps[r])
            ofi_ep_destroy(&oi->eps[r]->super);
    ofi_close_fids(oi);
    free(oi->eps);
    free(oi->hello_in);
    free(oi);
}

/* Whether a provider drives network hardware rather than sockets or local memory; a layered
 * name such as "tcp;ofi_rxm" counts by its core provider. */
static int ofi_hw_provider(const char *name)
{
    static const char *const software[] = {"tcp", "sockets", "udp", "shm", "sm2", "net", NULL};
    if (name == NULL)
        return 0;
    size_t len = strcspn(name, ";");
    for (int i = 0; software[i]; i++)
        if (strlen(software[i]) == len && strncmp(name, software[i], len) == 0)
            return 0;
    return 1;
}

static void ofi_query(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    memset(caps, 0, sizeof(*caps));
    caps->flags = MESH_TL_CAP_TAGGED;
    if (ofi_hw_provider(oi->info->fabric_attr->prov_name))
        caps->flags |= MESH_TL_CAP_HW_NET;
    if (oi->rma)
        caps->flags |= MESH_TL_CAP_PUT | MESH_TL_CAP_GET;
    caps->scope = MESH_TL_SCOPE_NET;
    caps->latency_us = 10.0;
    caps->bandwidth_GBps = 1.0;
    caps->eager_limit = oi->info->tx_attr->inject_size;
    /* below the RDMA-native transports, above plain sockets */
    caps->priority = MESH_TL_PRIO_OFI;
}

static mesh_status_t ofi_address(mesh_tl_iface_t *iface, void *addr, size_t *len)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    memcpy(addr, &oi->addr, oi->addr_len);
    *len = oi->addr_len;
    return MESH_OK;
}

static int ofi_reachable(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    const mesh_tl_ofi_addr_t *a = peer->addr;
    if (peer->rank == iface->rank || peer->addr_len < offsetof(mesh_tl_ofi_addr_t, name) ||
        a->magic != MESH_TL_OFI_MAGIC || a->addr_format != oi->addr.addr_format ||
        a->protocol != oi->addr.protocol ||
        peer->addr_len != offsetof(mesh_tl_ofi_addr_t, name) + a->name_len)
        return 0;
    /* a node-local provider (shm) reaches this node's ranks only */
    if (oi->addr.local_only && (peer->node == NULL || strcmp(peer->node, oi->node) != 0))
        return 0;
    return 1;
}

static mesh_status_t ofi_ep_create(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                                   mesh_tl_ep_t **out)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    if (!ofi_reachable(iface, peer))
        return mesh_error(MESH_ERR_INVALID_ARG, "ofi cannot reach rank %d: bad address",
                          peer->rank);
    if (peer->rank < 0 || peer->rank >= iface->size || oi->eps[peer->rank])
        return mesh_error(MESH_ERR_INVALID_ARG, "ofi endpoint to rank %d: bad or duplicate",
                          peer->rank);
    const mesh_tl_ofi_addr_t *a = peer->addr;
    mesh_tl_ofi_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "ofi endpoint allocation failed");
    ep->super.iface = iface;
    ep->super.peer = peer->rank;
    ep->pid = peer->pid;
    ep->pidns = peer->pidns;
    int rc = fi_av_insert(oi->av, a->name, 1, &ep->fi_addr, 0, NULL);
    if (rc != 1) {
        free(ep);
        return mesh_error(MESH_ERR_IO,
                          "inserting the address of rank %d into the ofi address "
                          "vector failed: %s",
                          peer->rank, fi_strerror(rc < 0 ? -rc : FI_EINVAL));
    }
    oi->eps[peer->rank] = ep;
    *out = &ep->super;
    return MESH_OK;
}

static int ofi_ep_ready(mesh_tl_ofi_iface_t *oi, int r)
{
    return oi->eps[r]->hello_sent == 2 && oi->hello_in[r];
}

static mesh_status_t ofi_wireup(mesh_tl_iface_t *iface, double deadline)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    unsigned idle = 0;
    for (;;) {
        int missing = 0;
        for (int r = 0; r < iface->size; r++) {
            mesh_tl_ofi_ep_t *ep = oi->eps[r];
            if (ep == NULL)
                continue;
            if (ep->failed < 0)
                return mesh_error(ep->failed, "ofi wireup with rank %d failed: %s", r, ep->why);
            if (ep->hello_sent == 0)
                MESH_CHECK(mesh_tl_ofi_hello(ep));
            if (!ofi_ep_ready(oi, r))
                missing++;
        }
        if (missing == 0)
            return MESH_OK;
        if (atomic_load_explicit(&oi->aborted, memory_order_acquire))
            return mesh_error(MESH_ERR_ABORTED, "ofi wireup aborted");
        if (mesh_time() > deadline) {
            char list[256];
            size_t off = 0;
            list[0] = '\0';
            for (int r = 0; r < iface->size && off < sizeof(list) - 16; r++)
                if (oi->eps[r] && !ofi_ep_ready(oi, r))
                    off +=
                        (size_t)snprintf(list + off, sizeof(list) - off, "%s%d", off ? "," : "", r);
            return mesh_error(MESH_ERR_TIMEOUT,
                              "ofi wireup timed out: %d peers never answered (ranks %s)", missing,
                              list);
        }
        if (mesh_tl_ofi_progress(iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
}

static mesh_status_t ofi_ep_check(mesh_tl_ep_t *uep)
{
    mesh_tl_ofi_ep_t *ep = (mesh_tl_ofi_ep_t *)uep;
    if (ep->failed == MESH_OK && ep->pid > 0) {
        double now = mesh_time();
        if (now >= ep->next_check) {
            ep->next_check = now + MESH_TL_OFI_CHECK_S;
            if (mesh_context_pid_gone(ep->pid, ep->pidns)) {
                char why[64];
                snprintf(why, sizeof(why), "process %d exited", ep->pid);
                mesh_tl_ofi_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
            }
        }
    }
    return ep->failed == MESH_ERR_ABORTED ? MESH_ERR_ABORTED
           : ep->failed < 0               ? MESH_ERR_PEER_FAILED
                                          : MESH_OK;
}

/* Only a flag: the provider's objects belong to the owner's thread, whose next progress()
 * completes everything pending with MESH_ERR_ABORTED. */
static void ofi_abort(mesh_tl_iface_t *iface)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    atomic_store_explicit(&oi->aborted, 1, memory_order_release);
}

static mesh_status_t ofi_mem_reg(mesh_tl_iface_t *iface, void *addr, size_t len, mesh_tl_mem_t *mem)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    if (!oi->rma)
        return mesh_tl_stub_mem_reg(iface, addr, len, mem);
    if (oi->ep == NULL)
        return mesh_error(MESH_ERR_ABORTED, "ofi memory registration after abort");
    static atomic_ullong next_key = 1;
    struct fid_mr *mr = NULL;
    uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    uint64_t want = atomic_fetch_add(&next_key, 1);
    int rc = fi_mr_reg(oi->domain, addr, len, access, 0, want, 0, &mr, NULL);
    if (rc != 0)
        return mesh_error(MESH_ERR_IO, "registering %zu bytes at %p with libfabric failed: %s", len,
                          addr, fi_strerror(-rc));
    if (oi->mr_mode & FI_MR_ENDPOINT) {
        rc = fi_mr_bind(mr, &oi->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(mr);
        if (rc != 0) {
            fi_close(&mr->fid);
            return mesh_error(MESH_ERR_IO, "binding a libfabric registration failed: %s",
                              fi_strerror(-rc));
        }
    }
    mem->addr = addr;
    mem->length = len;
    mem->key = fi_mr_key(mr);
    mem->tl_priv = mr;
    return MESH_OK;
}

static void ofi_mem_dereg(mesh_tl_iface_t *iface, mesh_tl_mem_t *mem)
{
    if (mem->tl_priv)
        fi_close(&((struct fid_mr *)mem->tl_priv)->fid);
    mem->tl_priv = NULL;
}

const mesh_tl_ops_t mesh_tl_ofi_ops = {
    .name = "ofi",
    .doc = "libfabric reliable datagrams, tagged (provider from MESH_OFI_PROVIDER/FI_PROVIDER)",
    .config = &ofi_config,
    .usable = ofi_usable,
    .open = ofi_open,
    .close = ofi_close,
    .query = ofi_query,
    .address = ofi_address,
    .reachable = ofi_reachable,
    .ep_create = ofi_ep_create,
    .ep_destroy = ofi_ep_destroy,
    .wireup = ofi_wireup,
    .isend = mesh_tl_ofi_isend,
    .irecv = mesh_tl_ofi_irecv,
    .progress = mesh_tl_ofi_progress,
    .ep_check = ofi_ep_check,
    .abort = ofi_abort,
    .wait_arm = mesh_tl_stub_wait_arm,
    .mem_reg = ofi_mem_reg,
    .mem_dereg = ofi_mem_dereg,
    .put = mesh_tl_ofi_put,
    .get = mesh_tl_ofi_get,
    .flush = mesh_tl_ofi_flush,
};
