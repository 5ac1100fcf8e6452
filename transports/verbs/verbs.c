/*
 * verbs: libibverbs on InfiniBand and RoCE. The interface opens one port (MESH_IB_HCA, or the
 * first active one), one protection domain, one completion queue for the RC queue pairs of
 * every peer, and one UD queue pair for wire-up. The address blob each rank publishes at
 * communicator creation carries the port's LID, GID and the UD queue pair number; ep_create()
 * makes the peer's RC queue pair (INIT, receive buffers posted) and wireup() exchanges QP numbers
 * and first PSNs over UD, resending until each side has acknowledged the other's message, so a
 * queue pair carries data only once the peer's is ready to receive. See verbs_xfer.c for the
 * message protocols.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "verbs"
#include "transports/verbs/verbs.h"
#include "transports/tl_registry.h"
#include "libmesh/config.h"
#include "libmesh/mem.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const mesh_config_entry_t verbs_config_entries[] = {
    {"IB_HCA", "", MESH_CFG_STRING,
     "RDMA devices and ports the verbs transport may use, in order of preference, comma-"
     "separated: 'mlx5_0:1,mlx5_1' (a device without ':port' allows any of its ports). Empty: "
     "the first active port of any device.",
     NULL},
    {"IB_GID_INDEX", "-1", MESH_CFG_INT,
     "GID table index on RoCE ports; -1 picks a RoCE v2 IPv4-mapped GID where the port has one "
     "(then RoCE v2, then v1). InfiniBand ports use GID 0 unless set.",
     NULL, "-1..255"},
    {"IB_EAGER_SIZE", "8k", MESH_CFG_SIZE,
     "Size of each bounce buffer, header included: messages that fit go eagerly through the "
     "peer's preposted buffers; larger ones use a rendezvous (RTS, RDMA read by the receiver, "
     "FIN).",
     NULL, "256..1m"},
    {"IB_RX_DEPTH", "32", MESH_CFG_INT,
     "Bounce buffers posted per peer, which is also the number of eager messages a sender may "
     "have outstanding towards one peer (its credits).",
     NULL, "4..4096"},
    {"IB_TX_DEPTH", "32", MESH_CFG_INT, "Send work requests in flight per peer.", NULL, "4..4096"},
    {"IB_RCACHE_MAX", "0", MESH_CFG_SIZE,
     "Bytes of user memory kept registered between rendezvous transfers (least recently used "
     "regions are deregistered beyond it). 0: each transfer registers its buffer and "
     "deregisters it when done. Set it only when the application keeps its buffers mapped (a "
     "caching allocator, buffers reused for the whole run): memory freed to the system and "
     "mapped again at the same address stays registered to its old pages, and transfers "
     "would silently read or write those.",
     NULL, "0.."},
    {"IB_RCACHE_ENTRIES", "1024", MESH_CFG_INT,
     "Registered regions the registration cache keeps at most.", NULL, "1..1048576"},
    {"IB_SL", "0", MESH_CFG_INT,
     "Service level of the traffic (on RoCE the driver maps it to a priority).", NULL, "0..15"},
    {"IB_TIMEOUT", "18", MESH_CFG_INT,
     "Local ACK timeout exponent: 4.096 us * 2^n before a retry (18 is about 1 s); with "
     "IB_RETRY_COUNT retries it bounds how long a dead peer takes to be reported.",
     NULL, "1..31"},
    {"IB_RETRY_COUNT", "7", MESH_CFG_INT, "Transport retries before a peer is declared failed.",
     NULL, "0..7"},
    {"IB_KEEPALIVE", "1.0", MESH_CFG_DOUBLE,
     "Seconds without a completion from a peer that operations wait on before a zero-byte "
     "RDMA write probes it; a peer whose process or node is gone is then reported after "
     "IB_TIMEOUT and IB_RETRY_COUNT rather than at MESH_TIMEOUT. 0: no probes.",
     NULL, "0..3600"},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t verbs_config = {"verbs", verbs_config_entries};

typedef struct {
    struct ibv_context *ctx;
    int port;
    struct ibv_port_attr attr;
    struct ibv_device_attr dev_attr;
} verbs_port_t;

/* Finds the port to use; fills why when there is none. */
static mesh_status_t verbs_find_port(verbs_port_t *out, char *why, size_t len)
{
    mesh_tl_verbs_hca_t hca[MESH_TL_VERBS_HCA_MAX];
    int nhca = 0, ndev = 0, down = 0, best_pref = INT_MAX;
    const char *spec = mesh_config_str("IB_HCA");
    mesh_status_t st = mesh_tl_verbs_hca_parse(spec, hca, MESH_TL_VERBS_HCA_MAX, &nhca);
    if (st != MESH_OK) {
        snprintf(why, len, "%s", mesh_error_last());
        return st;
    }
    struct ibv_device **list = ibv_get_device_list(&ndev);
    if (list == NULL || ndev == 0) {
        snprintf(why, len, "no rdma device found");
        if (list)
            ibv_free_device_list(list);
        return MESH_ERR_NOT_FOUND;
    }
    char down_name[IBV_SYSFS_NAME_MAX + 8] = "";
    memset(out, 0, sizeof(*out));
    for (int d = 0; d < ndev; d++) {
        const char *name = ibv_get_device_name(list[d]);
        if (nhca > 0 && mesh_tl_verbs_hca_match(hca, nhca, name, 0) < 0) {
            int any = 0; /* a device listed with a port matches only that port */
            for (int i = 0; i < nhca; i++)
                any |= strcmp(hca[i].name, name) == 0;
            if (!any)
                continue;
        }
        struct ibv_context *ctx = ibv_open_device(list[d]);
        struct ibv_device_attr da;
        if (ctx == NULL)
            continue;
        if (ibv_query_device(ctx, &da) != 0) {
            ibv_close_device(ctx);
            continue;
        }
        int kept = 0;
        for (int p = 1; p <= da.phys_port_cnt; p++) {
            struct ibv_port_attr pa;
            int pref = mesh_tl_verbs_hca_match(hca, nhca, name, p);
            if (pref < 0 || ibv_query_port(ctx, (uint8_t)p, &pa) != 0)
                continue;
            if (pa.state != IBV_PORT_ACTIVE) {
                if (!down++)
                    snprintf(down_name, sizeof(down_name), "%s:%d", name, p);
                continue;
            }
            if (pref < best_pref) {
                if (out->ctx && out->ctx != ctx)
                    ibv_close_device(out->ctx);
                out->ctx = ctx;
                out->port = p;
                out->attr = pa;
                out->dev_attr = da;
                best_pref = pref;
                kept = 1;
            }
        }
        if (!kept && out->ctx != ctx)
            ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (out->ctx != NULL)
        return MESH_OK;
    if (down)
        snprintf(why, len, "no active port (%s%s down)", down_name, down > 1 ? " and others" : "");
    else if (nhca)
        snprintf(why, len, "MESH_IB_HCA=%s matches no port", spec);
    else
        snprintf(why, len, "no usable rdma port");
    return MESH_ERR_NOT_FOUND;
}

static int verbs_usable(void)
{
    verbs_port_t p;
    char why[160];
    if (verbs_find_port(&p, why, sizeof(why)) != MESH_OK) {
        mesh_tl_set_unusable(why);
        return 0;
    }
    ibv_close_device(p.ctx);
    return 1;
}

static mesh_status_t verbs_pick_gid(mesh_tl_verbs_iface_t *vi)
{
    long long want = mesh_config_int("IB_GID_INDEX");
    if (want >= 0) {
        vi->gid_index = (int)want;
    } else if (vi->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        vi->gid_index = 0;
    } else {
        int n = vi->port_attr.gid_tbl_len, k = 0;
        mesh_tl_verbs_gid_t *g = calloc((size_t)(n > 0 ? n : 1), sizeof(*g));
        if (g == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "verbs gid table of %d", n);
        for (int i = 0; i < n; i++) {
            struct ibv_gid_entry e;
            if (ibv_query_gid_ex(vi->ctx, (uint32_t)vi->port, (uint32_t)i, &e, 0) != 0)
                continue;
            g[k].index = i;
            g[k].type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? MESH_TL_VERBS_GID_ROCE_V2
                        : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? MESH_TL_VERBS_GID_ROCE_V1
                                                             : MESH_TL_VERBS_GID_IB;
            memcpy(g[k].raw, e.gid.raw, 16);
            k++;
        }
        vi->gid_index = mesh_tl_verbs_gid_pick(g, k);
        free(g);
        if (vi->gid_index < 0)
            return mesh_error(MESH_ERR_NOT_FOUND, "verbs: %s port %d has no usable gid",
                              vi->dev_name, vi->port);
    }
    if (ibv_query_gid(vi->ctx, (uint8_t)vi->port, vi->gid_index, &vi->gid) != 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "verbs: %s port %d: gid index %d: %m", vi->dev_name,
                          vi->port, vi->gid_index);
    return MESH_OK;
}

static mesh_status_t verbs_ud_setup(mesh_tl_verbs_iface_t *vi)
{
    int total = MESH_TL_VERBS_UD_RX + MESH_TL_VERBS_UD_TX;
    vi->ud_cq = ibv_create_cq(vi->ctx, total, NULL, NULL, 0);
    if (vi->ud_cq == NULL)
        return mesh_error(MESH_ERR_IO, "verbs: ud completion queue: %m");
    struct ibv_qp_init_attr ia = {.send_cq = vi->ud_cq,
                                  .recv_cq = vi->ud_cq,
                                  .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = MESH_TL_VERBS_UD_TX,
                                          .max_recv_wr = MESH_TL_VERBS_UD_RX,
                                          .max_send_sge = 1,
                                          .max_recv_sge = 1}};
    vi->ud_qp = ibv_create_qp(vi->pd, &ia);
    if (vi->ud_qp == NULL)
        return mesh_error(MESH_ERR_IO, "verbs: ud queue pair: %m");
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)vi->port, .qkey = vi->qkey};
    if (ibv_modify_qp(vi->ud_qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0)
        return mesh_error(MESH_ERR_IO, "verbs: ud queue pair to init: %m");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(vi->ud_qp, &a, IBV_QP_STATE) != 0)
        return mesh_error(MESH_ERR_IO, "verbs: ud queue pair to rtr: %m");
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    if (ibv_modify_qp(vi->ud_qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0)
        return mesh_error(MESH_ERR_IO, "verbs: ud queue pair to rts: %m");
    size_t bytes = (size_t)total * MESH_TL_VERBS_UD_SLOT;
    vi->ud_block = aligned_alloc(4096, bytes);
    if (vi->ud_block == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "verbs: ud buffers");
    vi->ud_mr = ibv_reg_mr(vi->pd, vi->ud_block, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (vi->ud_mr == NULL)
        return mesh_error(MESH_ERR_IO, "verbs: registering ud buffers: %m");
    for (uint32_t i = 0; i < MESH_TL_VERBS_UD_RX; i++) {
        struct ibv_sge sge = {.addr = (uintptr_t)(vi->ud_block + i * MESH_TL_VERBS_UD_SLOT),
                              .length = MESH_TL_VERBS_UD_SLOT,
                              .lkey = vi->ud_mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
        if (ibv_post_recv(vi->ud_qp, &wr, &bad) != 0)
            return mesh_error(MESH_ERR_IO, "verbs: posting ud receives: %m");
    }
    return MESH_OK;
}

static mesh_status_t verbs_reg(void *arg, void *addr, size_t len, void **handle, uint32_t *lkey,
                               uint32_t *rkey)
{
    mesh_tl_verbs_iface_t *vi = arg;
    struct ibv_mr *mr =
        ibv_reg_mr(vi->pd, addr, len,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (mr == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "verbs: registering %zu bytes at %p: %m", len, addr);
    *handle = mr;
    *lkey = mr->lkey;
    *rkey = mr->rkey;
    return MESH_OK;
}

static void verbs_dereg(void *arg, void *handle)
{
    (void)arg;
    ibv_dereg_mr(handle);
}

static void verbs_close(mesh_tl_iface_t *iface);

static long long clamp(long long v, long long lo, long long hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static mesh_status_t verbs_open(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface)
{
    mesh_status_t st;
    verbs_port_t p;
    char why[160];
    st = verbs_find_port(&p, why, sizeof(why));
    if (st != MESH_OK)
        return mesh_error(st, "%s", why);
    mesh_tl_verbs_iface_t *vi = calloc(1, sizeof(*vi));
    if (vi == NULL) {
        ibv_close_device(p.ctx);
        return mesh_error(MESH_ERR_NO_MEMORY, "verbs interface allocation failed");
    }
    vi->super.ops = mesh_tl_verbs_ops;
    vi->super.rank = params->rank;
    vi->super.size = params->size;
    vi->comm_uid = params->comm_uid;
    vi->timeout_s = params->timeout_s;
    vi->ctx = p.ctx;
    vi->port = p.port;
    vi->port_attr = p.attr;
    snprintf(vi->dev_name, sizeof(vi->dev_name), "%s", ibv_get_device_name(p.ctx->device));
    atomic_init(&vi->aborted, 0);
    /* a private queue key per communicator: stray datagrams of another one are dropped */
    vi->qkey = (uint32_t)(params->comm_uid ^ (params->comm_uid >> 32)) & 0x7fffffffu;
    /* the table's ranges bound every value */
    vi->bounce = mesh_config_size("IB_EAGER_SIZE");
    vi->rx_depth = (uint32_t)mesh_config_int("IB_RX_DEPTH");
    vi->keepalive = mesh_config_double("IB_KEEPALIVE");
    vi->tx_depth = (uint32_t)mesh_config_int("IB_TX_DEPTH");
    vi->sl = (int)mesh_config_int("IB_SL");
    vi->timeout = (int)mesh_config_int("IB_TIMEOUT");
    vi->retry = (int)mesh_config_int("IB_RETRY_COUNT");
    /* reads in flight as initiator and as responder: the same bound on both sides */
    vi->max_rd_atomic = (uint32_t)clamp(p.dev_attr.max_qp_rd_atom < p.dev_attr.max_qp_init_rd_atom
                                            ? p.dev_attr.max_qp_rd_atom
                                            : p.dev_attr.max_qp_init_rd_atom,
                                        1, 16);
    if ((uint32_t)p.dev_attr.max_qp_wr < vi->rx_depth)
        vi->rx_depth = (uint32_t)p.dev_attr.max_qp_wr;
    if ((uint32_t)p.dev_attr.max_qp_wr < vi->tx_depth)
        vi->tx_depth = (uint32_t)p.dev_attr.max_qp_wr;
    /* one completion queue for every peer's queue pair: size it for all, within the device */
    long long cqe =
        (long long)(params->size > 1 ? params->size - 1 : 1) * (vi->rx_depth + vi->tx_depth);
    if (cqe > p.dev_attr.max_cqe) {
        long long per = p.dev_attr.max_cqe / (params->size > 1 ? params->size - 1 : 1);
        vi->rx_depth = vi->tx_depth = (uint32_t)clamp(per / 2, 2, 4096);
        cqe = p.dev_attr.max_cqe;
        mesh_log_warn("verbs: %s allows %d completions: %u buffers and %u sends per peer",
                      vi->dev_name, p.dev_attr.max_cqe, vi->rx_depth, vi->tx_depth);
    }
    vi->eps = calloc((size_t)params->size, sizeof(*vi->eps));
    if (vi->eps == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "verbs endpoint table for %d ranks", params->size);
        goto err;
    }
    vi->pd = ibv_alloc_pd(vi->ctx);
    if (vi->pd == NULL) {
        st = mesh_error(MESH_ERR_IO, "verbs: %s: protection domain: %m", vi->dev_name);
        goto err;
    }
    vi->cq = ibv_create_cq(vi->ctx, (int)cqe, NULL, NULL, 0);
    if (vi->cq == NULL) {
        st = mesh_error(MESH_ERR_IO, "verbs: %s: completion queue of %lld: %m", vi->dev_name, cqe);
        goto err;
    }
    MESH_CHECK_GOTO(verbs_pick_gid(vi), st, err);
    MESH_CHECK_GOTO(verbs_ud_setup(vi), st, err);
    /* async events are read without blocking from progress() */
    int fl = fcntl(vi->ctx->async_fd, F_GETFL);
    if (fl < 0 || fcntl(vi->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        st = mesh_error(MESH_ERR_IO, "verbs: async event fd: %m");
        goto err;
    }
    mesh_tl_verbs_rcache_init(&vi->rcache, verbs_reg, verbs_dereg, vi,
                              mesh_config_size("IB_RCACHE_MAX"),
                              (size_t)mesh_config_int("IB_RCACHE_ENTRIES"));
    vi->max_inline = 256; /* asked for at the first queue pair; lowered to what it grants */
    vi->addr.magic = MESH_TL_VERBS_MAGIC;
    vi->addr.link_layer = vi->port_attr.link_layer;
    vi->addr.port = (uint8_t)vi->port;
    vi->addr.mtu = (uint8_t)vi->port_attr.active_mtu;
    vi->addr.gid_index = (uint8_t)vi->gid_index;
    vi->addr.lid = vi->port_attr.lid;
    vi->addr.ud_qpn = vi->ud_qp->qp_num;
    memcpy(vi->addr.gid, vi->gid.raw, 16);
    mesh_log_debug("rank %d: %s port %d (%s), lid %u, gid index %d, ud qp %u", params->rank,
                   vi->dev_name, vi->port,
                   vi->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "infiniband",
                   vi->port_attr.lid, vi->gid_index, vi->addr.ud_qpn);
    *iface = &vi->super;
    return MESH_OK;
err:
    verbs_close(&vi->super);
    return st;
}

/* What an endpoint holds of the device and the heap, freed with it (also half-built). */
static void verbs_ep_free(mesh_tl_verbs_ep_t *ep)
{
    if (ep->qp)
        ibv_destroy_qp(ep->qp);
    if (ep->ah)
        ibv_destroy_ah(ep->ah);
    if (ep->mr)
        ibv_dereg_mr(ep->mr);
    free(ep->block);
    free(ep->slots);
    free(ep->free_slots);
    free(ep->fins);
    free(ep);
}

static void verbs_ep_destroy(mesh_tl_ep_t *uep)
{
    mesh_tl_verbs_ep_t *ep = (mesh_tl_verbs_ep_t *)uep;
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    mesh_tl_verbs_ep_drop(ep, MESH_ERR_ABORTED);
    if (vi->eps[uep->peer] == ep)
        vi->eps[uep->peer] = NULL;
    verbs_ep_free(ep);
}

static void verbs_close(mesh_tl_iface_t *iface)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    if (vi->eps)
        for (int r = 0; r < iface->size; r++)
            if (vi->eps[r])
                verbs_ep_destroy(&vi->eps[r]->super);
    if (vi->pd)
        mesh_tl_verbs_rcache_destroy(&vi->rcache);
    while (vi->msg_free) {
        mesh_tl_verbs_msg_t *m = vi->msg_free;
        vi->msg_free = m->next;
        free(m);
    }
    if (vi->ud_qp)
        ibv_destroy_qp(vi->ud_qp);
    if (vi->ud_mr)
        ibv_dereg_mr(vi->ud_mr);
    free(vi->ud_block);
    if (vi->ud_cq)
        ibv_destroy_cq(vi->ud_cq);
    if (vi->cq)
        ibv_destroy_cq(vi->cq);
    if (vi->pd)
        ibv_dealloc_pd(vi->pd);
    if (vi->ctx)
        ibv_close_device(vi->ctx);
    free(vi->eps);
    free(vi);
}

int mesh_tl_verbs_dmabuf(char *why, size_t len)
{
    /* the library found at run time decides, not the headers at build time */
    if (dlsym(RTLD_DEFAULT, "ibv_reg_dmabuf_mr") == NULL) {
        snprintf(why, len, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or later)");
        return 0;
    }
    const mesh_mem_ops_t *ops = mesh_mem_table(NULL);
    int device = 0;
    if (ops == NULL) {
        snprintf(why, len, "no device table is active");
        return 0;
    }
    if (ops->dmabuf_query == NULL) {
        snprintf(why, len, "the %s device exports no dma-buf", ops->name);
        return 0;
    }
    if (ops->current_device(&device) != MESH_OK) {
        snprintf(why, len, "the %s table names no current device", ops->name);
        return 0;
    }
    return ops->dmabuf_query(device, why, len) == MESH_OK;
}

static void verbs_query(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    memset(caps, 0, sizeof(*caps));
    /* an open verbs interface is an RDMA port: it never gives way to tcp */
    caps->flags =
        MESH_TL_CAP_TAGGED | MESH_TL_CAP_SIGNATURE | MESH_TL_CAP_SINGLE_COPY | MESH_TL_CAP_HW_NET;
    caps->scope = MESH_TL_SCOPE_NET;
    caps->latency_us = 2.0;
    /* active_speed/width would give the link rate; a round figure is enough to rank */
    caps->bandwidth_GBps = 12.0;
    caps->eager_limit = vi->bounce - MESH_TL_VERBS_HDR_EAGER;
    caps->priority = MESH_TL_PRIO_VERBS;
    char why[200];
    if (mesh_tl_verbs_dmabuf(why, sizeof(why)))
        caps->flags |= MESH_TL_CAP_DEVICE_DMABUF;
}

static mesh_status_t verbs_address(mesh_tl_iface_t *iface, void *addr, size_t *len)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    memcpy(addr, &vi->addr, sizeof(vi->addr));
    *len = sizeof(vi->addr);
    return MESH_OK;
}

static int verbs_reachable(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    const mesh_tl_verbs_addr_t *a = peer->addr;
    if (peer->rank == iface->rank || peer->addr_len != sizeof(*a) ||
        a->magic != MESH_TL_VERBS_MAGIC || a->link_layer != vi->addr.link_layer)
        return 0;
    /* InfiniBand without a GID route: only the same subnet */
    if (a->link_layer != IBV_LINK_LAYER_ETHERNET && memcmp(a->gid, vi->addr.gid, 8) != 0 &&
        a->lid == 0)
        return 0;
    return 1;
}

static void verbs_ah_attr(mesh_tl_verbs_iface_t *vi, const mesh_tl_verbs_addr_t *pa,
                          struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof(*ah));
    ah->dlid = pa->lid;
    ah->sl = (uint8_t)vi->sl;
    ah->port_num = (uint8_t)vi->port;
    int global = pa->link_layer == IBV_LINK_LAYER_ETHERNET || memcmp(pa->gid, vi->addr.gid, 8) != 0;
    if (global) {
        ah->is_global = 1;
        memcpy(ah->grh.dgid.raw, pa->gid, 16);
        ah->grh.sgid_index = (uint8_t)vi->gid_index;
        ah->grh.hop_limit = 64;
    }
}

static mesh_status_t verbs_ep_create(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                                     mesh_tl_ep_t **out)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    mesh_status_t st;
    mesh_tl_verbs_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "verbs endpoint for rank %d", peer->rank);
    ep->super.iface = iface;
    ep->super.peer = peer->rank;
    memcpy(&ep->paddr, peer->addr, sizeof(ep->paddr));
    ep->cr.depth = vi->rx_depth;
    ep->fin_cap = (int)vi->rx_depth;
    size_t rx = (size_t)vi->rx_depth * vi->bounce, tx = (size_t)vi->tx_depth * vi->bounce;
    size_t bytes = rx + tx + 64;
    ep->block = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    ep->slots = calloc(vi->tx_depth, sizeof(*ep->slots));
    ep->free_slots = calloc(vi->tx_depth, sizeof(*ep->free_slots));
    ep->fins = calloc((size_t)ep->fin_cap, sizeof(*ep->fins));
    if (!ep->block || !ep->slots || !ep->free_slots || !ep->fins) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "verbs buffers for rank %d", peer->rank);
        goto err;
    }
    memset(ep->block + rx + tx, 0, 64);
    ep->rx_bufs = ep->block;
    ep->tx_bufs = ep->block + rx;
    ep->credit_in = (volatile uint64_t *)(ep->block + rx + tx);
    ep->credit_out = (uint64_t *)(ep->block + rx + tx + 8);
    for (uint32_t i = 0; i < vi->tx_depth; i++)
        ep->free_slots[i] = vi->tx_depth - 1 - i;
    ep->nfree = (int)vi->tx_depth;
    ep->mr = ibv_reg_mr(vi->pd, ep->block, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (ep->mr == NULL) {
        st = mesh_error(MESH_ERR_IO, "verbs: registering buffers for rank %d: %m", peer->rank);
        goto err;
    }
    struct ibv_ah_attr aha;
    verbs_ah_attr(vi, &ep->paddr, &aha);
    ep->ah = ibv_create_ah(vi->pd, &aha);
    if (ep->ah == NULL) {
        st = mesh_error(MESH_ERR_IO, "verbs: address handle for rank %d: %m", peer->rank);
        goto err;
    }
    struct ibv_qp_init_attr ia = {.send_cq = vi->cq,
                                  .recv_cq = vi->cq,
                                  .qp_type = IBV_QPT_RC,
                                  .sq_sig_all = 1,
                                  .cap = {.max_send_wr = vi->tx_depth,
                                          .max_recv_wr = vi->rx_depth,
                                          .max_send_sge = 1,
                                          .max_recv_sge = 1,
                                          .max_inline_data = vi->max_inline}};
    ep->qp = ibv_create_qp(vi->pd, &ia);
    if (ep->qp == NULL && vi->max_inline > 0) {
        /* some devices refuse inline data of that size: ask for none */
        ia.cap.max_inline_data = 0;
        ep->qp = ibv_create_qp(vi->pd, &ia);
    }
    if (ep->qp == NULL) {
        st = mesh_error(MESH_ERR_IO, "verbs: queue pair for rank %d: %m", peer->rank);
        goto err;
    }
    if (ia.cap.max_inline_data < vi->max_inline)
        vi->max_inline = ia.cap.max_inline_data;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .pkey_index = 0,
                            .port_num = (uint8_t)vi->port,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                               IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        st = mesh_error(MESH_ERR_IO, "verbs: queue pair for rank %d to init: %m", peer->rank);
        goto err;
    }
    for (uint32_t i = 0; i < vi->rx_depth; i++)
        if (mesh_tl_verbs_post_recv(ep, i) != 0) {
            st = mesh_error(MESH_ERR_IO, "verbs: receive buffers for rank %d: %m", peer->rank);
            goto err;
        }
    uint32_t psn = 0;
    if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
        psn = (uint32_t)getpid() * 2654435761u;
    ep->psn = psn & 0xffffff;
    ep->state = mesh_tl_verbs_conn_next(MESH_TL_VERBS_CONN_NONE, MESH_TL_VERBS_EV_CREATE);
    vi->eps[peer->rank] = ep;
    *out = &ep->super;
    return MESH_OK;
err:
    verbs_ep_free(ep);
    return st;
}

/* Sends our connect message to the peer's UD queue pair. */
static void verbs_conn_send(mesh_tl_verbs_iface_t *vi, mesh_tl_verbs_ep_t *ep)
{
    if (vi->ud_tx_busy >= MESH_TL_VERBS_UD_TX)
        return; /* resent on the next round */
    uint32_t slot = MESH_TL_VERBS_UD_RX + (uint32_t)(vi->ud_tx_next++ % MESH_TL_VERBS_UD_TX);
    char *buf = vi->ud_block + (size_t)slot * MESH_TL_VERBS_UD_SLOT;
    mesh_tl_verbs_conn_msg_t m = {
        .comm_uid = vi->comm_uid,
        .src = (uint32_t)vi->super.rank,
        .dst = (uint32_t)ep->super.peer,
        .qpn = ep->qp->qp_num,
        .psn = ep->psn,
        .flags = (ep->state >= MESH_TL_VERBS_CONN_RTS ? MESH_TL_VERBS_CONN_ACK : 0) |
                 (ep->state == MESH_TL_VERBS_CONN_READY ? MESH_TL_VERBS_CONN_DONE : 0),
        .credit_rkey = ep->mr->rkey,
        .credit_addr = (uintptr_t)ep->credit_in,
        .rx_depth = vi->rx_depth};
    size_t n = mesh_tl_verbs_conn_encode(&m, buf, MESH_TL_VERBS_UD_SLOT);
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)n, .lkey = vi->ud_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = slot,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.ud.ah = ep->ah;
    wr.wr.ud.remote_qpn = ep->paddr.ud_qpn;
    wr.wr.ud.remote_qkey = vi->qkey;
    if (ibv_post_send(vi->ud_qp, &wr, &bad) != 0) {
        mesh_log_debug("verbs: connect message to rank %d not posted: %m", ep->super.peer);
        return;
    }
    vi->ud_tx_busy++;
    ep->last_sent = ep->last_heard = mesh_time();
    ep->attempts++;
}

/* Moves the peer's queue pair to RTR then RTS with what its connect message says. */
static mesh_status_t verbs_conn_apply(mesh_tl_verbs_iface_t *vi, mesh_tl_verbs_ep_t *ep,
                                      const mesh_tl_verbs_conn_msg_t *m)
{
    int peer = ep->super.peer;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu =
        ep->paddr.mtu < vi->addr.mtu ? (enum ibv_mtu)ep->paddr.mtu : (enum ibv_mtu)vi->addr.mtu;
    a.dest_qp_num = m->qpn;
    a.rq_psn = m->psn;
    a.max_dest_rd_atomic = (uint8_t)vi->max_rd_atomic;
    a.min_rnr_timer = 12;
    verbs_ah_attr(vi, &ep->paddr, &a.ah_attr);
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return mesh_error(MESH_ERR_PEER_FAILED, "verbs: queue pair for rank %d to rtr: %m", peer);
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)vi->timeout;
    a.retry_cnt = (uint8_t)vi->retry;
    a.rnr_retry = 7; /* infinite: a slow receiver is not a failure */
    a.sq_psn = ep->psn;
    a.max_rd_atomic = (uint8_t)vi->max_rd_atomic;
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return mesh_error(MESH_ERR_PEER_FAILED, "verbs: queue pair for rank %d to rts: %m", peer);
    ep->peer_credit_addr = m->credit_addr;
    ep->peer_credit_rkey = m->credit_rkey;
    /* our credits are the buffers the peer posts for us, whatever our own setting */
    ep->cr.depth = m->rx_depth;
    return MESH_OK;
}

static void verbs_conn_recv(mesh_tl_verbs_iface_t *vi, const char *buf, size_t len)
{
    mesh_tl_verbs_conn_msg_t m;
    if (len < 40 || mesh_tl_verbs_conn_decode(buf + 40, len - 40, &m) != MESH_OK)
        return;
    if (m.comm_uid != vi->comm_uid || m.dst != (uint32_t)vi->super.rank ||
        m.src >= (uint32_t)vi->super.size)
        return;
    mesh_tl_verbs_ep_t *ep = vi->eps[m.src];
    if (ep == NULL)
        return; /* created later: the peer sends again */
    int s = mesh_tl_verbs_conn_next(ep->state, MESH_TL_VERBS_EV_PEER_INFO);
    if (s < 0)
        return;
    if (ep->state == MESH_TL_VERBS_CONN_INIT) {
        if (verbs_conn_apply(vi, ep, &m) != MESH_OK) {
            mesh_tl_verbs_ep_fail(ep, MESH_ERR_PEER_FAILED, mesh_error_last());
            return;
        }
        ep->state = s;
        ep->attempts = 0; /* acknowledge at once */
    }
    if (m.flags & MESH_TL_VERBS_CONN_ACK) {
        s = mesh_tl_verbs_conn_next(ep->state, MESH_TL_VERBS_EV_PEER_ACK);
        if (s >= 0)
            ep->state = s;
    }
    /* a peer that is not done repeats itself until it sees our acknowledgement, which may
     * have been lost: answer each of its messages (a done peer answers none, so no loop) */
    if (ep->state == MESH_TL_VERBS_CONN_READY && !(m.flags & MESH_TL_VERBS_CONN_DONE))
        verbs_conn_send(vi, ep);
}

/* Drains the UD completion queue and resends connect messages that are due. */
static int verbs_ud_progress(mesh_tl_verbs_iface_t *vi)
{
    struct ibv_wc wc[16];
    int n, events = 0;
    while ((n = ibv_poll_cq(vi->ud_cq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            uint32_t slot = (uint32_t)wc[i].wr_id;
            if (slot >= MESH_TL_VERBS_UD_RX) {
                vi->ud_tx_busy--;
                continue;
            }
            if (wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV)
                verbs_conn_recv(vi, vi->ud_block + (size_t)slot * MESH_TL_VERBS_UD_SLOT,
                                wc[i].byte_len);
            struct ibv_sge sge = {
                .addr = (uintptr_t)(vi->ud_block + (size_t)slot * MESH_TL_VERBS_UD_SLOT),
                .length = MESH_TL_VERBS_UD_SLOT,
                .lkey = vi->ud_mr->lkey};
            struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
            if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
                ibv_post_recv(vi->ud_qp, &wr, &bad);
            events++;
        }
    }
    double now = mesh_time();
    for (int r = 0; r < vi->super.size; r++) {
        mesh_tl_verbs_ep_t *ep = vi->eps[r];
        if (ep && mesh_tl_verbs_conn_resend_due(ep->state, now, ep->last_sent, ep->attempts, 0.05))
            verbs_conn_send(vi, ep);
    }
    return events;
}

static void verbs_async(mesh_tl_verbs_iface_t *vi)
{
    struct ibv_async_event ev;
    while (ibv_get_async_event(vi->ctx, &ev) == 0) {
        int peer = -1;
        if (ev.event_type == IBV_EVENT_QP_FATAL || ev.event_type == IBV_EVENT_QP_REQ_ERR ||
            ev.event_type == IBV_EVENT_QP_ACCESS_ERR || ev.event_type == IBV_EVENT_PATH_MIG_ERR)
            for (int r = 0; r < vi->super.size; r++)
                if (vi->eps[r] && vi->eps[r]->qp == ev.element.qp)
                    peer = r;
        char why[192];
        mesh_status_t st = mesh_tl_verbs_async_status(ev.event_type, peer, why, sizeof(why));
        enum ibv_event_type type = ev.event_type;
        ibv_ack_async_event(&ev);
        if (st == MESH_OK) {
            mesh_log_debug("verbs: %s: %s", vi->dev_name, ibv_event_type_str(type));
            continue;
        }
        for (int r = 0; r < vi->super.size; r++)
            if (vi->eps[r] && (peer < 0 || r == peer))
                mesh_tl_verbs_ep_fail(vi->eps[r], MESH_ERR_PEER_FAILED, why);
    }
}

static int verbs_progress(mesh_tl_iface_t *iface)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    int events = 0;
    if (atomic_load_explicit(&vi->aborted, memory_order_acquire) && !vi->abort_done) {
        vi->abort_done = 1;
        for (int r = 0; r < iface->size; r++)
            if (vi->eps[r])
                events += mesh_tl_verbs_ep_fail(vi->eps[r], MESH_ERR_ABORTED, "");
    }
    struct ibv_wc wc[32];
    int n;
    vi->moved = 0;
    vi->poll_time = mesh_time();
    while ((n = ibv_poll_cq(vi->cq, 32, wc)) > 0)
        for (int i = 0; i < n; i++)
            events += mesh_tl_verbs_handle_wc(vi, &wc[i]);
    events += verbs_ud_progress(vi) > 0;
    int idle = events == 0 && vi->moved == 0;
    double now = vi->poll_time;
    for (int r = 0; r < iface->size; r++)
        if (vi->eps[r] && vi->eps[r]->state == MESH_TL_VERBS_CONN_READY) {
            mesh_tl_verbs_ep_push(vi->eps[r], idle);
            if (idle)
                mesh_tl_verbs_ep_keepalive(vi->eps[r], now, vi->keepalive);
        }
    if (now >= vi->next_async) {
        vi->next_async = now + 0.01;
        verbs_async(vi);
    }
    return events + (vi->moved > 0);
}

static mesh_status_t verbs_wireup(mesh_tl_iface_t *iface, double deadline)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    unsigned idle = 0;
    for (;;) {
        int pending = -1;
        for (int r = 0; r < iface->size; r++) {
            mesh_tl_verbs_ep_t *ep = vi->eps[r];
            if (ep == NULL)
                continue;
            if (ep->state == MESH_TL_VERBS_CONN_FAILED)
                return mesh_error(MESH_ERR_PEER_FAILED, "verbs wireup with rank %d failed: %s", r,
                                  ep->why);
            if (ep->state != MESH_TL_VERBS_CONN_READY && pending < 0)
                pending = r;
        }
        if (pending < 0)
            return MESH_OK;
        if (mesh_time() > deadline)
            return mesh_error(
                MESH_ERR_TIMEOUT, "verbs wireup: rank %d did not connect within %.0f s (state %s)",
                pending, vi->timeout_s, mesh_tl_verbs_conn_name(vi->eps[pending]->state));
        if (verbs_progress(iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
}

static mesh_status_t verbs_ep_check(mesh_tl_ep_t *uep)
{
    mesh_tl_verbs_ep_t *ep = (mesh_tl_verbs_ep_t *)uep;
    return ep->failed < 0 ? MESH_ERR_PEER_FAILED : MESH_OK;
}

static void verbs_abort(mesh_tl_iface_t *iface)
{
    mesh_tl_verbs_iface_t *vi = (mesh_tl_verbs_iface_t *)iface;
    atomic_store_explicit(&vi->aborted, 1, memory_order_release);
}

const mesh_tl_ops_t mesh_tl_verbs_ops = {
    .name = "verbs",
    .doc = "RDMA over InfiniBand or RoCE through libibverbs: RC queue pairs per peer, eager "
           "sends through preposted buffers with credits, RDMA-read rendezvous for large "
           "messages.",
    .config = &verbs_config,
    .usable = verbs_usable,
    .open = verbs_open,
    .close = verbs_close,
    .query = verbs_query,
    .address = verbs_address,
    .reachable = verbs_reachable,
    .ep_create = verbs_ep_create,
    .ep_destroy = verbs_ep_destroy,
    .wireup = verbs_wireup,
    .isend = mesh_tl_verbs_isend,
    .irecv = mesh_tl_verbs_irecv,
    .progress = verbs_progress,
    .ep_check = verbs_ep_check,
    .abort = verbs_abort,
    .wait_arm = mesh_tl_stub_wait_arm,
    .mem_reg = mesh_tl_stub_mem_reg,
    .mem_dereg = mesh_tl_stub_mem_dereg,
    .put = mesh_tl_stub_put,
    .get = mesh_tl_stub_get,
    .flush = mesh_tl_stub_flush,
};
