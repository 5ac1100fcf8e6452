/*
 * ucx data path: tagged sends and receives (UCX chooses eager or rendezvous by size), their
 * completion callbacks, and memory registration.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "ucx"
#include "transports/ucx/ucx.h"
#include "transports/tl_queue.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <stdatomic.h>
#include <stdio.h>

/* Errors that mean the peer (or the path to it) is gone. */
static int ucx_peer_error(ucs_status_t st)
{
    switch (st) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_TIMED_OUT:
        return 1;
    default:
        return 0;
    }
}

mesh_status_t mesh_tl_ucx_status(mesh_tl_ucx_ep_t *ep, ucs_status_t st, const char *what)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)ep->super.iface;
    int peer = ep->super.peer;
    if (atomic_load_explicit(&ui->aborted, memory_order_acquire) || ep->failed == MESH_ERR_ABORTED)
        return mesh_error(MESH_ERR_ABORTED, "ucx %s with rank %d: aborted", what, peer);
    if (ep->failed < 0 || ucx_peer_error(st) || st == UCS_ERR_CANCELED) {
        if (ep->failed == MESH_OK) {
            ep->failed = MESH_ERR_PEER_FAILED;
            ep->why = st;
        }
        return mesh_error(MESH_ERR_PEER_FAILED, "ucx %s with peer rank %d failed: %s", what, peer,
                          ucs_status_string(ep->why != UCS_OK ? ep->why : st));
    }
    return mesh_error(MESH_ERR_IO, "ucx %s with rank %d failed: %s", what, peer,
                      ucs_status_string(st));
}

void mesh_tl_ucx_ep_dying(mesh_tl_ucx_ep_t *ep, ucs_status_t why)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)ep->super.iface;
    if (ep->failed < 0 || ep->fail_at > 0)
        return;
    ep->fail_at = mesh_time() + ui->fail_delay_s;
    ep->why = why;
    ui->fail_pending = 1;
}

/* A NULL request: the operation is held until its endpoint's failure is reported. */
void mesh_tl_ucx_op_track(mesh_tl_ucx_ep_t *ep, mesh_tl_op_t *op, void *req, size_t len, int send)
{
    if (req) {
        ((mesh_tl_ucx_req_t *)req)->op = op;
        ((mesh_tl_ucx_req_t *)req)->send = send;
    }
    UCX_OP_REQ(op) = req;
    UCX_OP_EP(op) = ep;
    UCX_OP_LEN(op) = (void *)(uintptr_t)len;
    UCX_OP_PREV(op) = NULL;
    op->tl_next = ep->pending;
    if (ep->pending)
        UCX_OP_PREV(ep->pending) = op;
    ep->pending = op;
}

static void op_untrack(mesh_tl_ucx_ep_t *ep, mesh_tl_op_t *op)
{
    mesh_tl_op_t *prev = UCX_OP_PREV(op);
    if (prev)
        prev->tl_next = op->tl_next;
    else
        ep->pending = op->tl_next;
    if (op->tl_next)
        UCX_OP_PREV(op->tl_next) = prev;
    op->tl_next = NULL;
    UCX_OP_PREV(op) = NULL;
}

/* Completion of a tracked request; the request is freed in every case. */
static void req_done(void *request, ucs_status_t st, size_t length, const char *what)
{
    mesh_tl_ucx_req_t *req = request;
    mesh_tl_op_t *op = req->op;
    req->op = NULL;
    if (op != NULL) {
        mesh_tl_ucx_ep_t *ep = UCX_OP_EP(op);
        mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)ep->super.iface;
        if (ucx_peer_error(st) && ep->failed == MESH_OK &&
            !atomic_load_explicit(&ui->aborted, memory_order_acquire)) {
            mesh_tl_ucx_ep_dying(ep, st);
            UCX_OP_REQ(op) = NULL; /* held */
            ucp_request_free(request);
            return;
        }
        op_untrack(ep, op);
        ui->completed++;
        if (st == UCS_OK)
            mesh_tl_op_complete(op, length, MESH_OK);
        else
            mesh_tl_op_complete(op, 0, mesh_tl_ucx_status(ep, st, what));
    }
    ucp_request_free(request);
}

void mesh_tl_ucx_send_cb(void *request, ucs_status_t st, void *user_data)
{
    mesh_tl_ucx_req_t *req = request;
    size_t len = req->op ? (size_t)(uintptr_t)UCX_OP_LEN(req->op) : 0;
    req_done(request, st, len, "send");
}

static void recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
                    void *user_data)
{
    mesh_tl_ucx_req_t *req = request;
    mesh_tl_ucx_iface_t *ui = user_data;
    size_t length = st == UCS_OK ? info->length : 0;
    mesh_tl_op_t *op = req->op != NULL ? req->op : ui->posting;
    if (op != NULL && (st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED))
        op->peer_tag =
            mesh_tl_ucx_tag(ui, ((mesh_tl_ucx_ep_t *)UCX_OP_EP(op))->super.peer, info->sender_tag);
    if (st == UCS_ERR_MESSAGE_TRUNCATED && op != NULL) {
        /* UCX reports the message's length where it knows it */
        size_t cap = (size_t)(uintptr_t)UCX_OP_LEN(op);
        length = info->length > cap ? info->length : 0;
        mesh_status_t err = mesh_tl_truncated(UCX_OP_EP(op), length, cap);
        if (req->op == NULL) {
            ui->posting = NULL;
            mesh_tl_op_complete(op, length, err);
            return;
        }
        mesh_tl_ucx_ep_t *ep = UCX_OP_EP(op);
        req->op = NULL;
        op_untrack(ep, op);
        ui->completed++;
        mesh_tl_op_complete(op, length, err);
        ucp_request_free(request);
        return;
    }
    if (req->op == NULL && ui->posting != NULL) {
        /* completed inside ucp_tag_recv_nbx(), which frees the request */
        ui->posting = NULL;
        mesh_tl_op_complete(
            op, length, st == UCS_OK ? MESH_OK : mesh_tl_ucx_status(UCX_OP_EP(op), st, "receive"));
        return;
    }
    req_done(request, st, length, "receive");
}

int mesh_tl_ucx_ep_fail_ops(mesh_tl_ucx_ep_t *ep, mesh_status_t status)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)ep->super.iface;
    int n = 0;
    mesh_tl_op_t *op;
    while ((op = ep->pending) != NULL) {
        mesh_tl_ucx_req_t *req = UCX_OP_REQ(op);
        op_untrack(ep, op);
        /* receives sit in the worker's matching queue until cancelled; sends are purged by
         * UCX when the endpoint fails or closes */
        if (req) {
            req->op = NULL;
            ucp_request_cancel(ui->worker, req);
        }
        if (op != &ep->hello_op)
            n++;
        mesh_tl_op_complete(op, 0, status);
    }
    return n;
}

int mesh_tl_ucx_ep_has_sends(mesh_tl_ucx_ep_t *ep)
{
    for (mesh_tl_op_t *op = ep->pending; op; op = op->tl_next)
        if (UCX_OP_REQ(op) && ((mesh_tl_ucx_req_t *)UCX_OP_REQ(op))->send)
            return 1;
    return 0;
}

/* Refuses new operations on an aborted interface or a failed endpoint. */
static mesh_status_t ucx_check_ep(mesh_tl_ucx_ep_t *ep, const char *what)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)ep->super.iface;
    if (atomic_load_explicit(&ui->aborted, memory_order_acquire))
        return mesh_error(MESH_ERR_ABORTED, "ucx %s with rank %d: aborted", what, ep->super.peer);
    if (ep->failed < 0 || ep->uep == NULL)
        return mesh_tl_ucx_status(ep, UCS_ERR_NOT_CONNECTED, what);
    return MESH_OK;
}

mesh_status_t mesh_tl_ucx_isend(mesh_tl_ep_t *uep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_ucx_ep_t *ep = (mesh_tl_ucx_ep_t *)uep;
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)uep->iface;
    MESH_CHECK(ucx_check_ep(ep, "send"));
    if (ep->fail_at > 0) {
        mesh_tl_ucx_op_track(ep, op, NULL, len, 1);
        return MESH_OK;
    }
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK,
                             .cb.send = mesh_tl_ucx_send_cb};
    void *r = ucp_tag_send_nbx(ep->uep, buf, len, mesh_tl_ucx_tag(ui, ui->super.rank, tag), &p);
    if (r == NULL) {
        mesh_tl_op_complete(op, len, MESH_OK);
        return MESH_OK;
    }
    if (UCS_PTR_IS_ERR(r) && ucx_peer_error(UCS_PTR_STATUS(r))) {
        mesh_tl_ucx_ep_dying(ep, UCS_PTR_STATUS(r));
        r = NULL;
    } else if (UCS_PTR_IS_ERR(r)) {
        return mesh_tl_ucx_status(ep, UCS_PTR_STATUS(r), "send");
    }
    mesh_tl_ucx_op_track(ep, op, r, len, 1);
    return MESH_OK;
}

mesh_status_t mesh_tl_ucx_irecv(mesh_tl_ep_t *uep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_ucx_ep_t *ep = (mesh_tl_ucx_ep_t *)uep;
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)uep->iface;
    MESH_CHECK(ucx_check_ep(ep, "receive"));
    /* the length of a receive that completes at once reaches only the callback (which then
     * runs inside the call), so immediate completion is turned off */
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                             UCP_OP_ATTR_FIELD_USER_DATA |
                                             UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                             .cb.recv = recv_cb,
                             .user_data = ui};
    UCX_OP_EP(op) = ep;
    UCX_OP_LEN(op) = (void *)(uintptr_t)len;
    ui->posting = op;
    /* the signature bits of a collective's tag are not compared (tl.h) */
    void *r = ucp_tag_recv_nbx(ui->worker, buf, len, mesh_tl_ucx_tag(ui, uep->peer, tag),
                               ~(ucp_tag_t)mesh_tl_tag_ignore(tag), &p);
    if (ui->posting == NULL) {
        if (r != NULL && !UCS_PTR_IS_ERR(r))
            ucp_request_free(r);
        return MESH_OK;
    }
    ui->posting = NULL;
    if (r == NULL) { /* not expected with NO_IMM_CMPL; the length is unknown */
        mesh_tl_op_complete(op, len, MESH_OK);
        return MESH_OK;
    }
    if (UCS_PTR_IS_ERR(r))
        return mesh_tl_ucx_status(ep, UCS_PTR_STATUS(r), "receive");
    mesh_tl_ucx_op_track(ep, op, r, len, 0);
    return MESH_OK;
}

/* Registration maps the memory for UCX (pinned where the hardware needs it). The packed remote
 * key of UCX is a blob larger than mesh_tl_mem_t.key, so put and get are not offered. */
mesh_status_t mesh_tl_ucx_mem_reg(mesh_tl_iface_t *iface, void *addr, size_t len,
                                  mesh_tl_mem_t *mem)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    ucp_mem_map_params_t p = {.field_mask =
                                  UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                              .address = addr,
                              .length = len};
    ucp_mem_h memh;
    ucs_status_t st = ucp_mem_map(ui->ctx, &p, &memh);
    if (st != UCS_OK)
        return mesh_error(MESH_ERR_IO, "ucx cannot register %zu bytes at %p: %s", len, addr,
                          ucs_status_string(st));
    mem->addr = addr;
    mem->length = len;
    mem->key = 0;
    mem->tl_priv = memh;
    return MESH_OK;
}

void mesh_tl_ucx_mem_dereg(mesh_tl_iface_t *iface, mesh_tl_mem_t *mem)
{
    mesh_tl_ucx_iface_t *ui = (mesh_tl_ucx_iface_t *)iface;
    if (mem->tl_priv)
        ucp_mem_unmap(ui->ctx, mem->tl_priv);
    mem->tl_priv = NULL;
}
