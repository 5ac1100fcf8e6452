/*
 * ofi data path. Each mesh operation becomes one tagged send or receive (several when it is
 * larger than the provider's message limit), matched by the provider by tag and, through
 * directed receives, by source address. The
 * provider keeps unexpected messages, so receives may be posted in any order. A receive that
 * may arrive in pieces holds back later receives of the same tag from that peer until its
 * last piece is in, so that pieces of two messages never interleave. Operations the provider
 * refuses for now (FI_EAGAIN) wait in per-peer queues, in order, for the next progress().
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "ofi"
#include "transports/ofi/ofi.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

static mesh_tl_ofi_iface_t *ofi_iface(mesh_tl_ofi_ep_t *ep)
{
    return (mesh_tl_ofi_iface_t *)ep->super.iface;
}

/* The provider's tag for a mesh tag from rank src. A provider with fewer than 64 tag bits gets
 * the bits above its range folded onto the top of the rest: mesh puts its flags in the highest
 * bits and counts sequences up from the middle, so two tags that fold together are hundreds
 * of millions of collectives apart. */
static uint64_t ofi_wire_tag(const mesh_tl_ofi_iface_t *oi, uint64_t tag, int src)
{
    /* A collective's signature bits stay off the wire: receives match exactly, with no ignore
     * bits (libfabric 1.17's shm provider let an exact receive posted after receives with
     * ignore bits match another tag), and the transport does not report signatures. */
    tag &= ~mesh_tl_tag_ignore(tag);
    int nb = oi->tag_bits - oi->src_bits;
    if (nb < 64) {
        uint64_t mask = (1ull << nb) - 1;
        int hb = 64 - nb;
        while (tag >> nb)
            tag = (tag & mask) ^ ((tag >> nb) << (nb - hb));
        if (oi->src_bits)
            tag |= (uint64_t)src << nb;
    }
    return tag;
}

mesh_tl_ofi_req_t *mesh_tl_ofi_req_get(mesh_tl_ofi_iface_t *oi)
{
    mesh_tl_ofi_req_t *r = oi->free_reqs;
    if (r) {
        oi->free_reqs = r->next;
    } else {
        r = malloc(sizeof(*r));
        if (r == NULL)
            return NULL;
        r->all_next = oi->all_reqs;
        oi->all_reqs = r;
    }
    mesh_tl_ofi_req_t *keep = r->all_next;
    memset(r, 0, sizeof(*r));
    r->all_next = keep;
    return r;
}

static void req_put(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r)
{
    r->next = oi->free_reqs;
    oi->free_reqs = r;
}

static void list_add(mesh_tl_ofi_req_t **head, mesh_tl_ofi_req_t *r)
{
    r->prev = NULL;
    r->next = *head;
    if (*head)
        (*head)->prev = r;
    *head = r;
}

static void list_del(mesh_tl_ofi_req_t **head, mesh_tl_ofi_req_t *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        *head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

/* The provider is done with the request: off its list and back to the pool. */
static void req_retire(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r)
{
    if (r->ep)
        list_del(&r->ep->inflight, r);
    else
        list_del(&oi->orphans, r);
    req_put(oi, r);
}

static void op_done(mesh_tl_ofi_ep_t *ep, mesh_tl_op_t *op, size_t len, mesh_status_t st)
{
    ep->npending--;
    if (op->flags & MESH_TL_OP_STANDING)
        ep->nstanding--;
    ofi_iface(ep)->npending--;
    mesh_tl_op_complete(op, len, st);
}

/* Send bookkeeping in op->tl_priv[3]: pieces in flight (low 32 bits) and whether the last piece
 * was posted (bit 32); op->length counts the bytes posted until the operation completes. */
#define OFI_SEND_ALL_POSTED (1ull << 32)
static uint64_t send_state(const mesh_tl_op_t *op)
{
    return (uint64_t)(uintptr_t)op->tl_priv[3];
}
static void send_state_set(mesh_tl_op_t *op, uint64_t v)
{
    op->tl_priv[3] = (void *)(uintptr_t)v;
}

/* Posts what is left of a send; FI_EAGAIN leaves it for later. Returns 0, 1 (try again
 * later) or a negative status. */
static int send_post(mesh_tl_ofi_ep_t *ep, mesh_tl_op_t *op)
{
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    const char *buf = mesh_tl_op_buf(op);
    size_t len = mesh_tl_op_len(op);
    uint64_t wtag = ofi_wire_tag(oi, mesh_tl_op_tag(op), oi->super.rank);
    for (;;) {
        uint64_t state = send_state(op);
        if (state & OFI_SEND_ALL_POSTED)
            return 0;
        size_t off = op->length;
        size_t left = len - off;
        size_t piece = left < oi->max_msg ? left : oi->max_msg;
        mesh_tl_ofi_req_t *r = mesh_tl_ofi_req_get(oi);
        if (r == NULL)
            return 1;
        r->kind = OFI_REQ_SEND;
        r->op = op;
        r->ep = ep;
        ssize_t rc = fi_tsend(oi->ep, buf + off, piece, NULL, ep->fi_addr, wtag, &r->ctx);
        if (rc == -FI_EAGAIN) {
            req_put(oi, r);
            return 1;
        }
        if (rc != 0) {
            req_put(oi, r);
            char why[128];
            snprintf(why, sizeof(why), "fi_tsend: %s", fi_strerror((int)-rc));
            mesh_tl_ofi_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
            return MESH_ERR_PEER_FAILED;
        }
        r->posted = 1;
        list_add(&ep->inflight, r);
        state++;
        /* a piece shorter than the limit ends the message (a multiple of it ends with an
         * empty piece) */
        if (left < oi->max_msg)
            state |= OFI_SEND_ALL_POSTED;
        send_state_set(op, state);
        op->length = off + piece;
    }
}

/* Posts the next piece of a receive; returns 0, 1 (try again later) or a negative status. */
static int recv_piece(mesh_tl_ofi_ep_t *ep, mesh_tl_ofi_req_t *r)
{
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    size_t left = r->cap - r->done;
    size_t piece = left < oi->max_msg ? left : oi->max_msg;
    fi_addr_t src = oi->directed ? ep->fi_addr : FI_ADDR_UNSPEC;
    ssize_t rc;
    r->piece = piece;
    if (oi->sink && piece < oi->max_msg) {
        /* the receive's last piece: what a longer message brings beyond it lands in the sink */
        struct iovec iov[2] = {{r->buf + r->done, piece}, {oi->sink, oi->sink_len}};
        if (piece == 0)
            rc = fi_trecv(oi->ep, oi->sink, oi->sink_len, NULL, src, r->wtag, 0, &r->ctx);
        else
            rc = fi_trecvv(oi->ep, iov, NULL, 2, src, r->wtag, 0, &r->ctx);
    } else {
        rc = fi_trecv(oi->ep, r->buf + r->done, piece, NULL, src, r->wtag, 0, &r->ctx);
    }
    if (rc == -FI_EAGAIN)
        return 1;
    if (rc != 0) {
        char why[128];
        snprintf(why, sizeof(why), "fi_trecv: %s", fi_strerror((int)-rc));
        mesh_tl_ofi_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
        return MESH_ERR_PEER_FAILED;
    }
    r->posted = 1;
    return 0;
}

/* Whether a receive that may still arrive in pieces holds this tag. */
static int tag_held(mesh_tl_ofi_ep_t *ep, uint64_t wtag)
{
    if (!ep->chunking)
        return 0;
    for (mesh_tl_ofi_req_t *r = ep->inflight; r; r = r->next)
        if (r->kind == OFI_REQ_RECV && r->held && r->wtag == wtag)
            return 1;
    return 0;
}

/* Posts a receive; returns 0, 1 (held or refused for now) or a negative status. */
static int recv_post(mesh_tl_ofi_ep_t *ep, mesh_tl_op_t *op)
{
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    uint64_t wtag = ofi_wire_tag(oi, mesh_tl_op_tag(op), ep->super.peer);
    if (tag_held(ep, wtag))
        return 1;
    mesh_tl_ofi_req_t *r = mesh_tl_ofi_req_get(oi);
    if (r == NULL)
        return 1;
    r->kind = OFI_REQ_RECV;
    r->op = op;
    r->ep = ep;
    r->buf = mesh_tl_op_buf(op);
    r->cap = mesh_tl_op_len(op);
    r->wtag = wtag;
    int rc = recv_piece(ep, r);
    if (rc != 0) {
        req_put(oi, r);
        return rc;
    }
    list_add(&ep->inflight, r);
    if (r->cap >= oi->max_msg) {
        r->held = 1;
        ep->chunking++;
    }
    return 0;
}

/* An operation that failed before any of it reached the provider. */
static void op_failed(mesh_tl_ofi_ep_t *ep, mesh_tl_op_t *op, mesh_status_t st)
{
    if (op->status == MESH_INPROGRESS)
        op_done(ep, op, 0, st);
}

/* Retries the operations waiting on this endpoint, in order. */
static void ep_drain(mesh_tl_ofi_ep_t *ep)
{
    while (ep->failed == MESH_OK && ep->sendq.head) {
        if (send_post(ep, ep->sendq.head) == 1)
            break;
        mesh_tl_opq_pop(&ep->sendq); /* posted, or completed by the failure */
    }
    /* receives held back for their tag may pass others; refused ones keep their order */
    mesh_tl_opq_t waiting = ep->deferred;
    mesh_tl_op_t *op;
    int refused = 0;
    ep->deferred.head = ep->deferred.tail = NULL;
    while ((op = mesh_tl_opq_pop(&waiting)) != NULL) {
        if (ep->failed < 0) {
            op_failed(ep, op, ep->failed);
            continue;
        }
        int rc = refused ? 1 : recv_post(ep, op);
        if (rc < 0) {
            op_failed(ep, op, rc);
            continue;
        }
        if (rc == 1) {
            if (!refused &&
                !tag_held(ep, ofi_wire_tag(ofi_iface(ep), mesh_tl_op_tag(op), ep->super.peer)))
                refused = 1;
            mesh_tl_opq_push(&ep->deferred, op);
        }
    }
}

mesh_status_t mesh_tl_ofi_isend(mesh_tl_ep_t *uep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_ofi_ep_t *ep = (mesh_tl_ofi_ep_t *)uep;
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    MESH_CHECK(mesh_tl_post_check(&oi->aborted, ep->failed, ep->why, "send to", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    ep->npending++;
    oi->npending++;
    if (mesh_tl_opq_empty(&ep->sendq)) {
        int rc = send_post(ep, op);
        if (rc < 0)
            op_failed(ep, op, rc);
        if (rc <= 0)
            return MESH_OK;
    }
    mesh_tl_opq_push(&ep->sendq, op);
    return MESH_OK;
}

mesh_status_t mesh_tl_ofi_irecv(mesh_tl_ep_t *uep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_ofi_ep_t *ep = (mesh_tl_ofi_ep_t *)uep;
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    MESH_CHECK(mesh_tl_post_check(&oi->aborted, ep->failed, ep->why, "receive from", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    ep->npending++;
    oi->npending++;
    if (op->flags & MESH_TL_OP_STANDING)
        ep->nstanding++;
    if (mesh_tl_opq_empty(&ep->deferred)) {
        int rc = recv_post(ep, op);
        if (rc < 0)
            op_failed(ep, op, rc);
        if (rc <= 0)
            return MESH_OK;
    }
    mesh_tl_opq_push(&ep->deferred, op);
    return MESH_OK;
}

mesh_status_t mesh_tl_ofi_ctrl_post(mesh_tl_ofi_iface_t *oi, int i)
{
    if (oi->ep == NULL)
        return MESH_OK; /* closed by an abort */
    mesh_tl_ofi_req_t *r = oi->ctrl_req[i];
    if (r == NULL) {
        r = mesh_tl_ofi_req_get(oi);
        if (r == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "ofi control receive");
        r->kind = OFI_REQ_CTRL_RECV;
        r->cap = (size_t)i;
        oi->ctrl_req[i] = r;
    }
    ssize_t rc =
        fi_recv(oi->ep, &oi->ctrl_buf[i], sizeof(oi->ctrl_buf[i]), NULL, FI_ADDR_UNSPEC, &r->ctx);
    if (rc == -FI_EAGAIN)
        return MESH_OK; /* progress() posts it again */
    if (rc != 0)
        return mesh_error(MESH_ERR_IO, "posting an ofi control receive failed: %s",
                          fi_strerror((int)-rc));
    r->posted = 1;
    return MESH_OK;
}

mesh_status_t mesh_tl_ofi_hello(mesh_tl_ofi_ep_t *ep)
{
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    if (oi->ep == NULL)
        return mesh_error(MESH_ERR_ABORTED, "ofi hello to rank %d after abort", ep->super.peer);
    mesh_tl_ofi_req_t *r = mesh_tl_ofi_req_get(oi);
    if (r == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "ofi hello to rank %d", ep->super.peer);
    r->kind = OFI_REQ_CTRL_SEND;
    r->ep = ep;
    ssize_t rc = fi_send(oi->ep, &oi->hello, sizeof(oi->hello), NULL, ep->fi_addr, &r->ctx);
    if (rc == -FI_EAGAIN) {
        req_put(oi, r);
        return MESH_OK; /* the next round tries again */
    }
    if (rc != 0) {
        req_put(oi, r);
        return mesh_error(MESH_ERR_PEER_FAILED, "ofi hello to rank %d failed: %s", ep->super.peer,
                          fi_strerror((int)-rc));
    }
    r->posted = 1;
    list_add(&ep->inflight, r);
    ep->hello_sent = 1;
    return MESH_OK;
}

/* Detaches a request from its operation and endpoint; the provider still owns it. */
static void req_orphan(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r)
{
    list_del(&r->ep->inflight, r);
    r->ep = NULL;
    r->op = NULL;
    list_add(&oi->orphans, r);
    if (r->kind == OFI_REQ_RECV && oi->ep)
        fi_cancel(&oi->ep->fid, &r->ctx);
}

int mesh_tl_ofi_ep_fail_ops(mesh_tl_ofi_ep_t *ep, mesh_status_t status)
{
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    int n = 0;
    while (ep->inflight) {
        mesh_tl_ofi_req_t *r = ep->inflight;
        mesh_tl_op_t *op = r->op;
        if (op && op->status == MESH_INPROGRESS &&
            (r->kind == OFI_REQ_SEND || r->kind == OFI_REQ_RECV || r->kind == OFI_REQ_RMA)) {
            op_done(ep, op, 0, status);
            n++;
        }
        req_orphan(oi, r);
    }
    ep->chunking = 0;
    mesh_tl_op_t *op;
    while ((op = mesh_tl_opq_pop(&ep->sendq)) != NULL) {
        if (op->status == MESH_INPROGRESS) {
            op_done(ep, op, 0, status);
            n++;
        }
    }
    while ((op = mesh_tl_opq_pop(&ep->deferred)) != NULL) {
        op_done(ep, op, 0, status);
        n++;
    }
    return n;
}

int mesh_tl_ofi_ep_fail(mesh_tl_ofi_ep_t *ep, mesh_status_t status, const char *why)
{
    if (ep->failed < 0)
        return mesh_tl_ofi_ep_fail_ops(ep, ep->failed);
    /* standing receives alone: a peer that finished and left did nothing wrong */
    int pending = ep->npending > ep->nstanding;
    ep->failed = status;
    snprintf(ep->why, sizeof(ep->why), "%s", why);
    if (pending)
        mesh_error(status, "peer rank %d failed: %s", ep->super.peer, why);
    else
        mesh_log_debug("peer rank %d is gone: %s", ep->super.peer, why);
    return mesh_tl_ofi_ep_fail_ops(ep, status);
}

static int on_hello(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r)
{
    int i = (int)r->cap;
    const mesh_tl_ofi_hello_t *h = &oi->ctrl_buf[i];
    if (h->magic == MESH_TL_OFI_MAGIC && h->comm_uid == oi->comm_uid &&
        h->rank < (uint32_t)oi->super.size)
        oi->hello_in[h->rank] = 1;
    else
        mesh_log_warn("dropping an ofi hello from another communicator or program");
    r->posted = 0;
    if (!atomic_load_explicit(&oi->aborted, memory_order_relaxed))
        mesh_tl_ofi_ctrl_post(oi, i);
    return 1;
}

static int on_send(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r)
{
    mesh_tl_ofi_ep_t *ep = r->ep;
    mesh_tl_op_t *op = r->op;
    req_retire(oi, r);
    uint64_t state = send_state(op) - 1;
    send_state_set(op, state);
    if (state == OFI_SEND_ALL_POSTED) {
        op_done(ep, op, mesh_tl_op_len(op), MESH_OK);
        return 1;
    }
    return 0;
}

static int on_truncated(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r, size_t piece);

static int on_recv(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r, size_t got)
{
    mesh_tl_ofi_ep_t *ep = r->ep;
    r->posted = 0;
    if (got > r->piece) /* the sink took the rest */
        return on_truncated(oi, r, got);
    r->done += got;
    if (got >= oi->max_msg) {
        /* a full piece: more follow (an empty one when the length is a multiple) */
        int rc = recv_piece(ep, r);
        if (rc == 1)
            return mesh_tl_ofi_ep_fail(ep, MESH_ERR_IO, "the provider refused the next piece");
        return rc == 0 ? 1 : 0;
    }
    mesh_tl_op_t *op = r->op;
    if (r->held)
        ep->chunking--;
    req_retire(oi, r);
    if (op == NULL) /* the empty last piece of a truncated message */
        return 0;
    op_done(ep, op, r->done, MESH_OK);
    return 1;
}

/* A piece of `piece` bytes did not fit the receive. The receive fails (with the message's
 * length when this piece ended it); when more pieces follow, the request takes them into the
 * sink, so that the sender completes and no later receive of the tag gets them. */
static int on_truncated(mesh_tl_ofi_iface_t *oi, mesh_tl_ofi_req_t *r, size_t piece)
{
    mesh_tl_ofi_ep_t *ep = r->ep;
    int done = 0;
    if (r->op != NULL) {
        mesh_tl_op_t *op = r->op;
        size_t len = piece < oi->max_msg ? r->done + piece : 0;
        r->op = NULL;
        op_done(ep, op, len, mesh_tl_truncated(&ep->super, len, mesh_tl_op_len(op)));
        done = 1;
    }
    if (piece >= oi->max_msg) {
        if (!r->held) {
            r->held = 1;
            ep->chunking++;
        }
        r->cap = r->done; /* empty receives from now on */
        if (recv_piece(ep, r) == 1)
            return done +
                   mesh_tl_ofi_ep_fail(ep, MESH_ERR_IO, "the provider refused the next piece");
        return done;
    }
    if (r->held)
        ep->chunking--;
    req_retire(oi, r);
    return done;
}

static int on_completion(mesh_tl_ofi_iface_t *oi, const struct fi_cq_tagged_entry *e)
{
    mesh_tl_ofi_req_t *r = e->op_context;
    if (r == NULL)
        return 0;
    if (r->kind == OFI_REQ_CTRL_RECV)
        return on_hello(oi, r);
    r->posted = 0;
    if (r->ep == NULL) { /* its operation already failed */
        req_retire(oi, r);
        return 0;
    }
    switch (r->kind) {
    case OFI_REQ_CTRL_SEND:
        r->ep->hello_sent = 2;
        req_retire(oi, r);
        return 1;
    case OFI_REQ_SEND:
        return on_send(oi, r);
    case OFI_REQ_RECV:
        r->posted = 1;
        return on_recv(oi, r, e->len);
    default: {
        mesh_tl_ofi_ep_t *ep = r->ep;
        mesh_tl_op_t *op = r->op;
        req_retire(oi, r);
        op_done(ep, op, mesh_tl_op_len(op), MESH_OK);
        return 1;
    }
    }
}

static int on_error(mesh_tl_ofi_iface_t *oi, const struct fi_cq_err_entry *e)
{
    mesh_tl_ofi_req_t *r = e->op_context;
    if (r == NULL) {
        mesh_log_warn("ofi completion error without context: %s", fi_strerror(e->err));
        return 0;
    }
    if (r->kind == OFI_REQ_CTRL_RECV) {
        r->posted = 0;
        if (e->err != FI_ECANCELED && !atomic_load_explicit(&oi->aborted, memory_order_relaxed))
            mesh_tl_ofi_ctrl_post(oi, (int)r->cap);
        return 0;
    }
    r->posted = 0;
    mesh_tl_ofi_ep_t *ep = r->ep;
    if (ep == NULL) {
        req_retire(oi, r);
        return 0;
    }
    /* the shm provider reports the error negated */
    if (r->kind == OFI_REQ_RECV && (e->err == FI_ETRUNC || e->err == -FI_ETRUNC))
        return on_truncated(oi, r, e->len + e->olen);
    char why[160], prov[96];
    const char *detail = fi_cq_strerror(oi->cq, e->prov_errno, e->err_data, prov, sizeof(prov));
    snprintf(why, sizeof(why), "%s (%s)", fi_strerror(e->err), detail ? detail : "");
    return mesh_tl_ofi_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
}

/* Peers on this host whose process ended fail at once; elsewhere error completions tell. */
static int check_peers(mesh_tl_ofi_iface_t *oi)
{
    int n = 0;
    for (int p = 0; p < oi->super.size; p++) {
        mesh_tl_ofi_ep_t *ep = oi->eps[p];
        if (ep == NULL || ep->failed < 0 || ep->npending == 0 || ep->pid <= 0)
            continue;
        if (mesh_context_pid_gone(ep->pid, ep->pidns)) {
            char why[64];
            snprintf(why, sizeof(why), "process %d exited", ep->pid);
            n += mesh_tl_ofi_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
        }
    }
    return n;
}

static int abort_pending(mesh_tl_ofi_iface_t *oi)
{
    int n = 0;
    if (oi->abort_done)
        return 0;
    oi->abort_done = 1;
    for (int p = 0; p < oi->super.size; p++) {
        mesh_tl_ofi_ep_t *ep = oi->eps[p];
        if (ep == NULL)
            continue;
        if (ep->failed == MESH_OK) {
            ep->failed = MESH_ERR_ABORTED;
            snprintf(ep->why, sizeof(ep->why), "aborted");
        }
        n += mesh_tl_ofi_ep_fail_ops(ep, MESH_ERR_ABORTED);
    }
    /* closing the endpoint drops our connections, so that peers waiting on us notice */
    if (oi->ep) {
        fi_close(&oi->ep->fid);
        oi->ep = NULL;
    }
    return n;
}

int mesh_tl_ofi_progress(mesh_tl_iface_t *iface)
{
    mesh_tl_ofi_iface_t *oi = (mesh_tl_ofi_iface_t *)iface;
    if (atomic_load_explicit(&oi->aborted, memory_order_acquire))
        return abort_pending(oi);
    int done = 0;
    struct fi_cq_tagged_entry ent[MESH_TL_OFI_CQ_BATCH];
    for (int round = 0; round < 8; round++) {
        ssize_t n = fi_cq_read(oi->cq, ent, MESH_TL_OFI_CQ_BATCH);
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++)
                done += on_completion(oi, &ent[i]);
            if (done == 0)
                done = 1; /* pieces and hellos moved */
            if (n < MESH_TL_OFI_CQ_BATCH)
                break;
            continue;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err;
            memset(&err, 0, sizeof(err));
            if (fi_cq_readerr(oi->cq, &err, 0) > 0)
                done += on_error(oi, &err) + 1;
            continue;
        }
        break;
    }
    for (int i = 0; i < MESH_TL_OFI_NCTRL; i++)
        if (oi->ctrl_req[i] && !oi->ctrl_req[i]->posted)
            mesh_tl_ofi_ctrl_post(oi, i);
    for (int p = 0; p < iface->size; p++) {
        mesh_tl_ofi_ep_t *ep = oi->eps[p];
        if (ep && ep->failed == MESH_OK && (ep->sendq.head || ep->deferred.head))
            ep_drain(ep);
    }
    if (oi->npending > 0) {
        double now = mesh_time();
        if (now >= oi->next_check) {
            oi->next_check = now + MESH_TL_OFI_CHECK_S;
            done += check_peers(oi);
        }
    }
    return done;
}

static mesh_status_t rma_post(mesh_tl_ep_t *uep, void *buf, size_t len, uint64_t raddr,
                              uint64_t rkey, mesh_tl_op_t *op, int is_put)
{
    mesh_tl_ofi_ep_t *ep = (mesh_tl_ofi_ep_t *)uep;
    mesh_tl_ofi_iface_t *oi = ofi_iface(ep);
    if (!oi->rma)
        return is_put ? mesh_tl_stub_put(uep, buf, len, raddr, rkey, op)
                      : mesh_tl_stub_get(uep, buf, len, raddr, rkey, op);
    if (atomic_load_explicit(&oi->aborted, memory_order_acquire))
        return mesh_error(MESH_ERR_ABORTED, "rma with rank %d after abort", uep->peer);
    if (ep->failed < 0)
        return mesh_error(ep->failed, "rma with failed peer rank %d: %s", uep->peer, ep->why);
    mesh_tl_ofi_req_t *r = mesh_tl_ofi_req_get(oi);
    if (r == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "ofi rma request");
    mesh_tl_op_set(op, 0, buf, len);
    r->kind = OFI_REQ_RMA;
    r->op = op;
    r->ep = ep;
    unsigned idle = 0;
    double deadline = mesh_time() + oi->timeout_s;
    ssize_t rc;
    for (;;) {
        rc = is_put ? fi_write(oi->ep, buf, len, NULL, ep->fi_addr, raddr, rkey, &r->ctx)
                    : fi_read(oi->ep, buf, len, NULL, ep->fi_addr, raddr, rkey, &r->ctx);
        if (rc != -FI_EAGAIN || mesh_time() > deadline)
            break;
        if (mesh_tl_ofi_progress(&oi->super) == 0)
            mesh_backoff(&idle);
    }
    if (rc != 0) {
        req_put(oi, r);
        return mesh_error(rc == -FI_EAGAIN ? MESH_ERR_TIMEOUT : MESH_ERR_IO,
                          "ofi %s of %zu bytes with rank %d failed: %s", is_put ? "put" : "get",
                          len, uep->peer, fi_strerror((int)-rc));
    }
    r->posted = 1;
    list_add(&ep->inflight, r);
    ep->npending++;
    oi->npending++;
    return MESH_OK;
}

mesh_status_t mesh_tl_ofi_put(mesh_tl_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                              uint64_t rkey, mesh_tl_op_t *op)
{
    return rma_post(ep, (void *)buf, len, raddr, rkey, op, 1);
}

mesh_status_t mesh_tl_ofi_get(mesh_tl_ep_t *ep, void *buf, size_t len, uint64_t raddr,
                              uint64_t rkey, mesh_tl_op_t *op)
{
    return rma_post(ep, buf, len, raddr, rkey, op, 0);
}

/* Puts and gets complete only once remote (the provider's default completion semantics for
 * RMA is delivery), so a flush has nothing left to wait for. */
mesh_status_t mesh_tl_ofi_flush(mesh_tl_ep_t *uep, mesh_tl_op_t *op)
{
    mesh_tl_ofi_ep_t *ep = (mesh_tl_ofi_ep_t *)uep;
    if (!ofi_iface(ep)->rma)
        return mesh_tl_stub_flush(uep, op);
    if (ep->failed < 0)
        return mesh_error(ep->failed, "flush to failed peer rank %d: %s", uep->peer, ep->why);
    mesh_tl_op_complete(op, 0, MESH_OK);
    return MESH_OK;
}
