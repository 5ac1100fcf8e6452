/*
 * ucx: a UCP context and worker per interface (one per communicator), whose network-only worker
 * address is the transport's address. A dead peer fails its operations with
 * MESH_ERR_PEER_FAILED: reported by UCX's peer error handling on RDMA hosts, and by the tcp
 * transport itself where UCX runs over tcp, which keeps zero-copy rendezvous (MESH_UCX_ERR_MODE).
 * Each endpoint sends a hello active message when it is created; wire-up waits for the hello of
 * every peer, so both sides have their endpoint and the connections carry traffic before the
 * first collective. UCX's own variables (UCX_TLS, UCX_NET_DEVICES, ...) are read by UCX as usual
 * and win over the defaults set here.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "ucx"
#include "transports/ucx/ucx.h"
#include "transports/tl_queue.h"
#include "transports/tl_registry.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mesh_config_entry_t ucx_config_entries[] = {
    {"UCX_CLOSE_TIMEOUT", "1.0", MESH_CFG_DOUBLE,
     "Seconds closing an interface waits for its endpoints to flush before destroying them "
     "anyway (a peer that is gone never answers). Select UCX's own transports and devices with "
     "UCX_TLS and UCX_NET_DEVICES, which are honoured unchanged.",
     NULL, "0..3600"},
    {"UCX_FAIL_DELAY", "0.1", MESH_CFG_DOUBLE,
     "Seconds a peer failure reported by UCX is held before operations with that peer fail, so "
     "that a failure verdict another rank sent at the same time arrives first and every "
     "survivor names the rank that really failed.",
     NULL, "0..60"},
    {"UCX_TCP_SEG", "64k", MESH_CFG_SIZE,
     "Segment size of UCX's tcp transport for sending (UCX_TCP_TX_SEG_SIZE; receive segments, "
     "UCX_TCP_RX_SEG_SIZE, are 4 times as large), applied where the environment does not set "
     "those UCX variables itself. UCX's own defaults (8k and 64k) cost a bulk transfer over TCP "
     "a quarter of its throughput. 0 keeps UCX's defaults.",
     NULL, "0..64m"},
    {"UCX_ERR_MODE", "auto", MESH_CFG_ENUM,
     "How UCX endpoints report a failed peer. peer: UCX's peer error handling, which reports "
     "every failure but takes zero-copy rendezvous away from UCX's tcp transport (each received "
     "byte is then copied once more). none: no peer error handling; failures the transport "
     "sees (over tcp, the peer's sockets closing) still fail operations with "
     "MESH_ERR_PEER_FAILED, others end at MESH_TIMEOUT, and UCX warns at teardown of the "
     "requests a failed peer left unfinished. auto: none on hosts without an RDMA "
     "device, where UCX runs over tcp, peer otherwise.",
     "auto|peer|none"},
    {"UCX_RNDV_THRESH", "1m", MESH_CFG_SIZE,
     "Rendezvous threshold of UCX (UCX_RNDV_THRESH) on hosts without an RDMA device, where UCX "
     "runs over tcp, applied where the environment does not set UCX_RNDV_THRESH itself. Smaller "
     "messages go eagerly (copied once on arrival, no handshake), larger ones by rendezvous, "
     "zero-copy without peer error handling (MESH_UCX_ERR_MODE). 0 keeps UCX's own threshold.",
     NULL, "0.."},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t ucx_config = {"ucx", ucx_config_entries};

/* MESH_UCX_TCP_SEG into UCX's tcp transport, unless the environment sets UCX's variables. UCX
 * applies a key it does not know at context level to every transport that has it: TX_SEG_SIZE
 * and RX_SEG_SIZE belong to tcp only. */
static void tcp_segments(ucp_config_t *cfg)
{
    size_t seg = mesh_config_size("UCX_TCP_SEG");
    static const char *const names[2] = {"TX_SEG_SIZE", "RX_SEG_SIZE"};
    for (int i = 0; i < 2 && seg != 0; i++) {
        char env[32], val[32];
        snprintf(env, sizeof(env), "UCX_TCP_%s", names[i]);
        if (getenv(env) != NULL)
            continue;
        snprintf(val, sizeof(val), "%zu", i == 0 ? seg : 4 * seg);
        ucs_status_t st = ucp_config_modify(cfg, names[i], val);
        if (st != UCS_OK)
            mesh_log_debug("ucx: %s=%s not applied: %s", env, val, ucs_status_string(st));
    }
}

/* MESH_UCX_RNDV_THRESH into UCX where it runs over tcp, unless the environment sets it. */
static void tcp_rndv_thresh(ucp_config_t *cfg)
{
    size_t thresh = mesh_config_size("UCX_RNDV_THRESH");
    if (thresh == 0 || getenv("UCX_RNDV_THRESH") != NULL || mesh_tl_rdma_present())
        return;
    char val[32];
    snprintf(val, sizeof(val), "%zu", thresh);
    ucs_status_t st = ucp_config_modify(cfg, "RNDV_THRESH", val);
    if (st != UCS_OK)
        mesh_log_debug("ucx: UCX_RNDV_THRESH=%s not applied: %s", val, ucs_status_string(st));
}

/* Whether endpoints use UCX's peer error handling (MESH_UCX_ERR_MODE: auto, peer, none). */
static int ucx_err_peer(void)
{
    switch (mesh_config_int("UCX_ERR_MODE")) {
    case 1:
        return 1;
    case 2:
        return 0;
    default:
        return mesh_tl_rdma_present();
    }
}

static void req_init(void *request)
{
    ((mesh_tl_ucx_req_t *)request)->op = NULL;
}

static mesh_status_t ucx_context(size_t neps, ucp_context_h *ctx)
{
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK)
        return mesh_error(MESH_ERR_IO, "ucx configuration cannot be read: %s",
                          ucs_status_string(st));
    tcp_segments(cfg);
    tcp_rndv_thresh(cfg);
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                                    UCP_PARAM_FIELD_REQUEST_INIT |
                                    UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
                      .features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_RMA,
                      .request_size = sizeof(mesh_tl_ucx_req_t),
                      .request_init = req_init,
                      .estimated_num_eps = neps};
    st = ucp_init(&p, cfg, ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        return mesh_error(MESH_ERR_UNSUPPORTED, "ucx context cannot be created: %s",
                          ucs_status_string(st));
    return MESH_OK;
}

/* Whether a context can be created here: probed once per process, as the answer cannot
 * change while it runs. */
static pthread_once_t ucx_probe_once = PTHREAD_ONCE_INIT;
static int ucx_probe_ok;

static void ucx_probe(void)
{
    ucp_context_h ctx;
    ucp_config_t *cfg;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return;
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                      .features = UCP_FEATURE_TAG | UCP_FEATURE_AM};
    ucs_status_t st = ucp_init(&p, cfg, &ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        mesh_log_debug("ucx context cannot be created: %s", ucs_status_string(st));
        return;
    }
    ucp_cleanup(ctx);
    ucx_probe_ok = 1;
}

static int ucx_usable(void)
{
    pthread_once(&ucx_probe_once, ucx_probe);
    return ucx_probe_ok;
}

static ucs_status_t hello_cb(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param)
{
    mesh_tl_ucx_iface_t *ui = arg;
    mesh_tl_ucx_hello_t h;
    /* UCX hands the header at any alignment */
    if (header_length != sizeof(h)) {
        mesh_log_warn("dropping an invalid ucx hello");
        return UCS_OK;
    }
    memcpy(&h, header, sizeof(h));
    if (h.magic != MESH_TL_UCX_MAGIC || h.comm_uid != ui->comm_uid ||
        h.rank >= (uint32_t)ui->super.size) {
        mesh_log_warn("dropping an invalid ucx hello");
        return UCS_OK;
    }
    ui->hello_from[h.rank] = 1;
    return UCS_OK;
}

static void ucx_close(mesh_tl_iface_t *iface);

static mesh_status_t ucx_open(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface)
{
    mesh_status_t st;
    ucs_status_t us;
    mesh_tl_ucx_iface_t *ui = calloc(1, sizeof(*ui));
    if (ui == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "ucx interface allocation failed");
    ui->super.ops = mesh_tl_ucx_ops;
    ui->super.rank = params->rank;
    ui->super.size = params->size;
    ui->comm_uid = params->comm_uid;
    ui->hello = (mesh_tl_ucx_hello_t){
        .magic = MESH_TL_UCX_MAGIC, .rank = (uint32_t)params->rank, .comm_uid = params->comm_uid};
    ui->timeout_s = params->timeout_s;
    ui->close_timeout_s = mesh_config_double("UCX_CLOSE_TIMEOUT");
    ui->fail_delay_s = mesh_config_double("UCX_FAIL_DELAY");
    ui->err_peer = ucx_err_peer();
    atomic_init(&ui->aborted, 0);
    int bits = 0;
    while (bits < 31 && ((int64_t)1 << bits) < params->size)
        bits++;
    ui->src_shift = 62 - bits;
    size_t n = (size_t)params->size;
    ui->eps = calloc(n, sizeof(*ui->eps));
    ui->hello_from = calloc(n, 1);
    ui->closing = calloc(n, sizeof(*ui->closing));
    if (!ui->eps || !ui->hello_from || !ui->closing) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "ucx tables for %d ranks", params->size);
        goto err;
    }
    MESH_CHECK_GOTO(ucx_context(n, &ui->ctx), st, err);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    us = ucp_worker_create(ui->ctx, &wp, &ui->worker);
    if (us != UCS_OK) {
        st = mesh_error(MESH_ERR_IO, "ucx worker cannot be created: %s", ucs_status_string(us));
        goto err;
    }
    ucp_am_handler_param_t ap = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = MESH_TL_UCX_AM_HELLO,
                                 .cb = hello_cb,
                                 .arg = ui};
    us = ucp_worker_set_am_recv_handler(ui->worker, &ap);
    if (us != UCS_OK) {
        st = mesh_error(MESH_ERR_IO, "ucx active message handler: %s", ucs_status_string(us));
        goto err;
    }
    /* network devices only: same-node peers use shm, and the full address may not fit */
    ucp_worker_attr_t wa = {.field_mask =
                                UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                            .address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY};
    us = ucp_worker_query(ui->worker, &wa);
    if (us != UCS_OK) {
        st = mesh_error(MESH_ERR_IO, "ucx worker address: %s", ucs_status_string(us));
        goto err;
    }
    ui->addr = wa.address;
    ui->addr_len = wa.address_length;
    if (ui->addr_len + sizeof(mesh_tl_ucx_addr_t) > MESH_TL_ADDR_MAX) {
        st = mesh_error(MESH_ERR_UNSUPPORTED,
                        "ucx worker address of %zu bytes exceeds the %d-byte limit; narrow "
                        "UCX_NET_DEVICES",
                        ui->addr_len, MESH_TL_ADDR_MAX - (int)sizeof(mesh_tl_ucx_addr_t));
        goto err;
    }
    mesh_log_debug("rank %d: ucx worker address of %zu bytes, %s error handling", params->rank,
                   ui->addr_len, ui->err_peer ? "peer" : "no peer");
    *iface = &ui->super;
    return MESH_OK;

err:
    ucx_close(&ui->super);
    return st;
}

/* Waits (bounded) for the endpoint close requests, then releases the worker and context. */
static void ucx_close(mesh_tl_iface_t *iface)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    if (ui->eps)
        for (int r = 0; r < iface->size; r++)
            if (ui->eps[r])
                iface->ops.ep_destroy(&ui->eps[r]->super);
    double deadline = mesh_time() + ui->close_timeout_s;
    unsigned idle = 0;
    while (ui->nclosing > 0) {
        if (ucp_worker_progress(ui->worker))
            idle = 0;
        for (int i = 0; i < ui->nclosing;) {
            if (ucp_request_check_status(ui->closing[i]) != UCS_INPROGRESS) {
                ucp_request_free(ui->closing[i]);
                ui->closing[i] = ui->closing[--ui->nclosing];
            } else {
                i++;
            }
        }
        if (ui->nclosing == 0)
            break;
        if (mesh_time() > deadline) {
            mesh_log_debug("ucx: %d endpoints did not flush within %.1f s; destroying them",
                           ui->nclosing, ui->close_timeout_s);
            for (int i = 0; i < ui->nclosing; i++)
                ucp_request_free(ui->closing[i]);
            ui->nclosing = 0;
            break;
        }
        mesh_backoff(&idle);
    }
    if (ui->addr)
        ucp_worker_release_address(ui->worker, ui->addr);
    if (ui->worker)
        ucp_worker_destroy(ui->worker);
    if (ui->ctx)
        ucp_cleanup(ui->ctx);
    free(ui->closing);
    free(ui->hello_from);
    free(ui->eps);
    free(ui);
}

static void ucx_query(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->flags = MESH_TL_CAP_TAGGED | MESH_TL_CAP_SIGNATURE |
                  (mesh_tl_rdma_present() ? MESH_TL_CAP_HW_NET : 0);
    caps->scope = MESH_TL_SCOPE_NET;
    caps->latency_us = 10.0;
    caps->bandwidth_GBps = 1.0;
    caps->eager_limit = 8192;
    /* network order: verbs, ucx, ofi, tcp */
    caps->priority = MESH_TL_PRIO_UCX;
}

static mesh_status_t ucx_address(mesh_tl_iface_t *iface, void *addr, size_t *len)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    mesh_tl_ucx_addr_t *a = addr;
    a->magic = MESH_TL_UCX_MAGIC;
    a->len = (uint32_t)ui->addr_len;
    memcpy(a->ucp, ui->addr, ui->addr_len);
    *len = sizeof(*a) + ui->addr_len;
    return MESH_OK;
}

static int ucx_reachable(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer)
{
    const mesh_tl_ucx_addr_t *a = peer->addr;
    return peer->rank != iface->rank && peer->addr_len >= sizeof(*a) &&
           a->magic == MESH_TL_UCX_MAGIC && sizeof(*a) + a->len == peer->addr_len && a->len > 0;
}

/* UCX calls this from progress when the endpoint fails; the operations are failed later by
 * progress(), outside UCX. */
static void ep_error_cb(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    mesh_tl_ucx_ep_dying(arg, status);
}

static mesh_status_t ucx_ep_create(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                                   mesh_tl_ep_t **out)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    if (!ucx_reachable(iface, peer))
        return mesh_error(MESH_ERR_INVALID_ARG, "ucx cannot reach rank %d: bad address",
                          peer->rank);
    if (peer->rank < 0 || peer->rank >= iface->size || ui->eps[peer->rank])
        return mesh_error(MESH_ERR_INVALID_ARG, "ucx endpoint to rank %d: bad or duplicate",
                          peer->rank);
    const mesh_tl_ucx_addr_t *a = peer->addr;
    mesh_tl_ucx_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "ucx endpoint allocation failed");
    ep->super.iface = iface;
    ep->super.peer = peer->rank;
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)a->ucp,
        .err_mode = ui->err_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = {.cb = ep_error_cb, .arg = ep}};
    ucs_status_t us = ucp_ep_create(ui->worker, &p, &ep->uep);
    if (us != UCS_OK) {
        free(ep);
        return mesh_error(MESH_ERR_PEER_FAILED, "ucx endpoint to rank %d: %s", peer->rank,
                          ucs_status_string(us));
    }
    ui->eps[peer->rank] = ep;
    mesh_tl_op_t *op = &ep->hello_op;
    op->status = MESH_INPROGRESS;
    /* the hello completes like any send: through a tracked request */
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS,
                              .cb.send = mesh_tl_ucx_send_cb,
                              .flags = UCP_AM_SEND_FLAG_EAGER};
    void *r =
        ucp_am_send_nbx(ep->uep, MESH_TL_UCX_AM_HELLO, &ui->hello, sizeof(ui->hello), NULL, 0, &rp);
    if (r == NULL) {
        mesh_tl_op_complete(op, 0, MESH_OK);
    } else if (UCS_PTR_IS_ERR(r)) {
        ep->failed = MESH_ERR_PEER_FAILED;
        ep->why = UCS_PTR_STATUS(r);
        mesh_tl_op_complete(op, 0, MESH_ERR_PEER_FAILED);
    } else {
        mesh_tl_ucx_op_track(ep, op, r, 0, 1);
    }
    *out = &ep->super;
    return MESH_OK;
}

/* Closes the UCP endpoint without waiting: interface close waits (bounded) for the requests.
 * UCX refuses a forced close without peer error handling: there a live endpoint is flushed,
 * and a failed one, whose flush would only log errors, is left to the worker's destruction. */
static void ep_close(mesh_tl_ucx_ep_t *ep, int force)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)ep->super.iface;
    if (ep->uep == NULL)
        return;
    if (force && !ui->err_peer) {
        if (ep->failed < 0 && ep->failed != MESH_ERR_ABORTED) {
            ep->uep = NULL;
            return;
        }
        force = 0;
    }
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    void *r = ucp_ep_close_nbx(ep->uep, &p);
    ep->uep = NULL;
    if (r == NULL || UCS_PTR_IS_ERR(r))
        return;
    if (ui->nclosing < ui->super.size)
        ui->closing[ui->nclosing++] = r;
    else
        ucp_request_free(r);
}

static void ucx_ep_destroy(mesh_tl_ep_t *uep)
{
    mesh_tl_ucx_ep_t *ep = (mesh_tl_ucx_ep_t *)uep;
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)uep->iface;
    /* a send still in flight may read a buffer its owner frees once it failed: drop it */
    int force = ep->failed < 0 || atomic_load(&ui->aborted) || mesh_tl_ucx_ep_has_sends(ep);
    mesh_tl_ucx_ep_fail_ops(ep, MESH_ERR_ABORTED);
    ep_close(ep, force);
    if (ui->eps[uep->peer] == ep)
        ui->eps[uep->peer] = NULL;
    free(ep);
}

/* Fails the operations of endpoints whose failure delay has passed. */
static int fail_eps(mesh_tl_ucx_iface_t *ui)
{
    int n = 0;
    double now = mesh_time();
    ui->fail_pending = 0;
    for (int r = 0; r < ui->super.size; r++) {
        mesh_tl_ucx_ep_t *ep = ui->eps[r];
        if (ep == NULL || ep->fail_at == 0 || ep->fail_done)
            continue;
        if (ep->failed == MESH_OK && now < ep->fail_at) {
            ui->fail_pending = 1;
            continue;
        }
        ep->fail_done = 1;
        if (ep->failed == MESH_OK)
            ep->failed = MESH_ERR_PEER_FAILED;
        /* a peer that left while only standing receives waited for it did nothing wrong */
        int owed = 0;
        for (mesh_tl_op_t *op = ep->pending; op && !owed; op = op->tl_next)
            owed = !(op->flags & MESH_TL_OP_STANDING);
        if (owed)
            mesh_error(MESH_ERR_PEER_FAILED, "ucx peer rank %d failed: %s", r,
                       ucs_status_string(ep->why));
        else
            mesh_log_debug("ucx peer rank %d is gone: %s", r, ucs_status_string(ep->why));
        n += mesh_tl_ucx_ep_fail_ops(ep, MESH_ERR_PEER_FAILED);
    }
    return n;
}

/* The owner's side of abort: fail everything and close every endpoint, so peers notice. Live
 * endpoints are closed with a flush, so that what was sent before (a failure verdict queued
 * behind bulk data) still arrives ahead of the disconnection. */
static int abort_pending(mesh_tl_ucx_iface_t *ui)
{
    int n = 0;
    if (ui->abort_done)
        return 0;
    ui->abort_done = 1;
    for (int r = 0; r < ui->super.size; r++) {
        mesh_tl_ucx_ep_t *ep = ui->eps[r];
        if (ep == NULL)
            continue;
        int force = ep->failed < 0;
        if (ep->failed == MESH_OK)
            ep->failed = MESH_ERR_ABORTED;
        n += mesh_tl_ucx_ep_fail_ops(ep, MESH_ERR_ABORTED);
        ep_close(ep, force);
    }
    ucp_worker_progress(ui->worker);
    return n;
}

static int ucx_progress(mesh_tl_iface_t *iface)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    if (atomic_load_explicit(&ui->aborted, memory_order_acquire))
        return abort_pending(ui);
    int before = ui->completed;
    /* drain what is ready (a few rounds), so bulk transfers move further per call */
    unsigned moved = 0, m;
    for (int i = 0; i < 8 && (m = ucp_worker_progress(ui->worker)) > 0; i++) {
        moved += m;
        if (ui->completed != before)
            break;
    }
    int done = ui->completed - before;
    if (ui->fail_pending)
        done += fail_eps(ui);
    /* events that completed nothing still tell waiters not to sleep */
    return done > 0 ? done : moved > 0;
}

static mesh_status_t ucx_wireup(mesh_tl_iface_t *iface, double deadline)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    unsigned idle = 0;
    for (;;) {
        int missing = 0;
        for (int r = 0; r < iface->size; r++) {
            mesh_tl_ucx_ep_t *ep = ui->eps[r];
            if (ep == NULL)
                continue;
            if (ep->failed < 0)
                return mesh_error(ep->failed, "ucx connection to rank %d failed: %s", r,
                                  ucs_status_string(ep->why));
            if (!ui->hello_from[r] || ep->hello_op.status == MESH_INPROGRESS)
                missing++;
        }
        if (missing == 0)
            return MESH_OK;
        if (atomic_load_explicit(&ui->aborted, memory_order_acquire))
            return mesh_error(MESH_ERR_ABORTED, "ucx wireup aborted");
        if (mesh_time() > deadline) {
            char list[256];
            size_t off = 0;
            list[0] = '\0';
            for (int r = 0; r < iface->size && off < sizeof(list) - 16; r++) {
                mesh_tl_ucx_ep_t *ep = ui->eps[r];
                if (ep && (!ui->hello_from[r] || ep->hello_op.status == MESH_INPROGRESS))
                    off +=
                        (size_t)snprintf(list + off, sizeof(list) - off, "%s%d", off ? "," : "", r);
            }
            return mesh_error(MESH_ERR_TIMEOUT,
                              "ucx wireup timed out: %d peers never answered (ranks %s)", missing,
                              list);
        }
        if (ucx_progress(iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
}

static mesh_status_t ucx_ep_check(mesh_tl_ep_t *uep)
{
    mesh_tl_ucx_ep_t *ep = (mesh_tl_ucx_ep_t *)uep;
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)uep->iface;
    if (ep->failed == MESH_ERR_ABORTED || atomic_load(&ui->aborted))
        return MESH_ERR_ABORTED;
    return ep->failed < 0 ? MESH_ERR_PEER_FAILED : MESH_OK;
}

/* A UCP worker belongs to its owner's thread: only the flag is set here, and the owner's next
 * progress() fails the operations and closes the endpoints, which is when peers notice. */
static void ucx_abort(mesh_tl_iface_t *iface)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    atomic_store_explicit(&ui->aborted, 1, memory_order_release);
}

const mesh_tl_ops_t mesh_tl_ucx_ops = {
    .name = "ucx",
    .doc = "UCX (UCP tagged messages) over UCX's network transports",
    .config = &ucx_config,
    .usable = ucx_usable,
    .open = ucx_open,
    .close = ucx_close,
    .query = ucx_query,
    .address = ucx_address,
    .reachable = ucx_reachable,
    .ep_create = ucx_ep_create,
    .ep_destroy = ucx_ep_destroy,
    .wireup = ucx_wireup,
    .isend = mesh_tl_ucx_isend,
    .irecv = mesh_tl_ucx_irecv,
    .progress = ucx_progress,
    .ep_check = ucx_ep_check,
    .abort = ucx_abort,
    .wait_arm = mesh_tl_stub_wait_arm,
    .mem_reg = mesh_tl_ucx_mem_reg,
    .mem_dereg = mesh_tl_ucx_mem_dereg,
    .put = mesh_tl_stub_put,
    .get = mesh_tl_stub_get,
    .flush = mesh_tl_stub_flush,
};
