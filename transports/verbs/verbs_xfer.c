/*
 * verbs messages. A message of up to IB_EAGER_SIZE (header included) is copied into a send
 * slot's bounce buffer (or sent inline when it fits max_inline_data) and lands in one of the
 * receive buffers the peer preposted for us; each such message takes one credit, returned when
 * the peer reposts the buffer (it RDMA-writes its count of reposted buffers into our memory).
 * A larger message sends an RTS with the registered buffer's address and rkey; the receiver,
 * once its receive is matched, RDMA-reads the data straight into the user buffer and answers
 * FIN, which releases the sender's buffer. Matching is by exact (peer, tag), first-in first-out;
 * what arrives before its receive is kept (eager data copied out, RTS as a descriptor).
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "verbs"
#include "transports/verbs/verbs.h"
#include "libmesh/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mesh_tl_verbs_msg_t *msg_get(mesh_tl_verbs_iface_t *vi)
{
    mesh_tl_verbs_msg_t *m = vi->msg_free;
    if (m)
        vi->msg_free = m->next;
    else
        m = malloc(sizeof(*m));
    if (m)
        memset(m, 0, sizeof(*m));
    return m;
}

static void msg_put(mesh_tl_verbs_iface_t *vi, mesh_tl_verbs_msg_t *m)
{
    free(m->data);
    m->data = NULL;
    m->next = vi->msg_free;
    vi->msg_free = m;
}

static void msgq_push(mesh_tl_verbs_msgq_t *q, mesh_tl_verbs_msg_t *m)
{
    m->next = NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
}

static void msgq_remove(mesh_tl_verbs_msgq_t *q, mesh_tl_verbs_msg_t *m)
{
    mesh_tl_verbs_msg_t *prev = NULL;
    for (mesh_tl_verbs_msg_t *x = q->head; x; prev = x, x = x->next) {
        if (x != m)
            continue;
        if (prev)
            prev->next = x->next;
        else
            q->head = x->next;
        if (q->tail == x)
            q->tail = prev;
        x->next = NULL;
        return;
    }
}

/* A receive too small for its message fails with the message's length; the message is dropped. */
static void truncated(mesh_tl_verbs_ep_t *ep, mesh_tl_op_t *op, uint64_t len)
{
    mesh_tl_op_complete(op, (size_t)len,
                        mesh_tl_truncated(&ep->super, (size_t)len, mesh_tl_op_len(op)));
}

int mesh_tl_verbs_post_recv(mesh_tl_verbs_ep_t *ep, uint32_t slot)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    struct ibv_sge sge = {.addr = (uintptr_t)(ep->rx_bufs + (size_t)slot * vi->bounce),
                          .length = (uint32_t)vi->bounce,
                          .lkey = ep->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = mesh_tl_verbs_wr_id(ep->super.peer, VERBS_WR_RECV, slot),
                             .sg_list = &sge,
                             .num_sge = 1},
                       *bad;
    int rc = ibv_post_recv(ep->qp, &wr, &bad);
    if (rc != 0)
        errno = rc;
    return rc;
}

static int slot_get(mesh_tl_verbs_ep_t *ep)
{
    return ep->nfree > 0 ? (int)ep->free_slots[--ep->nfree] : -1;
}

static void slot_put(mesh_tl_verbs_ep_t *ep, uint32_t slot)
{
    ep->slots[slot].kind = VERBS_WR_NONE;
    ep->slots[slot].op = NULL;
    ep->slots[slot].msg = NULL;
    ep->free_slots[ep->nfree++] = slot;
}

static char *slot_buf(mesh_tl_verbs_ep_t *ep, uint32_t slot)
{
    return ep->tx_bufs + (size_t)slot * mesh_tl_verbs_iface(ep)->bounce;
}

/* Posts one send work request on slot; fails the endpoint when the device refuses it. */
static int post(mesh_tl_verbs_ep_t *ep, uint32_t slot, int kind, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    wr->wr_id = mesh_tl_verbs_wr_id(ep->super.peer, kind, slot);
    ep->slots[slot].kind = kind;
    int rc = ibv_post_send(ep->qp, wr, &bad);
    if (rc == 0) {
        mesh_tl_verbs_iface(ep)->moved++;
        return 0;
    }
    char why[160];
    snprintf(why, sizeof(why), "rank %d: posting a send failed: %s", ep->super.peer, strerror(rc));
    /* fails the slot's operation too; nothing was posted, so no completion returns the slot */
    mesh_tl_verbs_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
    slot_put(ep, slot);
    return -1;
}

/* A message (header + payload already in the slot's buffer) as a send of n bytes. */
static int post_msg(mesh_tl_verbs_ep_t *ep, uint32_t slot, int kind, size_t n)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    struct ibv_sge sge = {
        .addr = (uintptr_t)slot_buf(ep, slot), .length = (uint32_t)n, .lkey = ep->mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags =
                                 IBV_SEND_SIGNALED | (n <= vi->max_inline ? IBV_SEND_INLINE : 0)};
    return post(ep, slot, kind, &wr);
}

static void fin_queue(mesh_tl_verbs_ep_t *ep, uint32_t msg_id)
{
    if (ep->fin_n == ep->fin_cap) {
        int cap = 2 * ep->fin_cap;
        uint32_t *f = malloc((size_t)cap * sizeof(*f));
        if (f == NULL) {
            /* the sender would wait for this FIN forever: fail loudly instead */
            mesh_tl_verbs_ep_fail(ep, MESH_ERR_NO_MEMORY, "out of memory queueing a fin");
            return;
        }
        for (int i = 0; i < ep->fin_n; i++)
            f[i] = ep->fins[(ep->fin_head + i) % ep->fin_cap];
        free(ep->fins);
        ep->fins = f;
        ep->fin_cap = cap;
        ep->fin_head = 0;
    }
    ep->fins[(ep->fin_head + ep->fin_n++) % ep->fin_cap] = msg_id;
}

/* A matched RTS: read into the receive's buffer, or fail the receive and still answer FIN. */
static int rndv_recv_start(mesh_tl_verbs_ep_t *ep, mesh_tl_verbs_msg_t *m, mesh_tl_op_t *op)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    size_t cap = mesh_tl_op_len(op);
    mesh_status_t st = MESH_OK;
    m->op = op;
    if (m->len > cap)
        truncated(ep, op, m->len);
    else if (m->len > 0)
        st = mesh_tl_verbs_rcache_get(&vi->rcache, mesh_tl_op_buf(op), m->len, &m->region);
    if (m->len > cap || st != MESH_OK || m->len == 0) {
        if (m->len <= cap)
            mesh_tl_op_complete(op, 0, st);
        fin_queue(ep, m->msg_id);
        msg_put(vi, m);
        return 1;
    }
    m->state = MESH_TL_VERBS_MSG_MATCHED;
    msgq_push(&ep->reads, m);
    return 0;
}

static void rndv_send_done(mesh_tl_verbs_ep_t *ep, mesh_tl_verbs_msg_t *m)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    msgq_remove(&ep->rndv_send, m);
    mesh_tl_verbs_rcache_put(&vi->rcache, m->region);
    mesh_tl_op_complete(m->op, (size_t)m->len, MESH_OK);
    msg_put(vi, m);
}

mesh_status_t mesh_tl_verbs_isend(mesh_tl_ep_t *uep, uint64_t tag, const void *buf, size_t len,
                                  mesh_tl_op_t *op)
{
    mesh_tl_verbs_ep_t *ep = (mesh_tl_verbs_ep_t *)uep;
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    MESH_CHECK(mesh_tl_post_check(&vi->aborted, ep->failed, ep->why, "send to", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    mesh_tl_opq_push(&ep->sendq, op);
    if (ep->state == MESH_TL_VERBS_CONN_READY)
        mesh_tl_verbs_ep_push(ep, 0);
    return MESH_OK;
}

mesh_status_t mesh_tl_verbs_irecv(mesh_tl_ep_t *uep, uint64_t tag, void *buf, size_t len,
                                  mesh_tl_op_t *op)
{
    mesh_tl_verbs_ep_t *ep = (mesh_tl_verbs_ep_t *)uep;
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    MESH_CHECK(mesh_tl_post_check(&vi->aborted, MESH_OK, NULL, "receive from", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    for (mesh_tl_verbs_msg_t *m = ep->unexp.head; m; m = m->next) {
        if (!mesh_tl_tag_match(tag, m->tag))
            continue;
        op->peer_tag = m->tag;
        msgq_remove(&ep->unexp, m);
        if (m->is_rts) {
            rndv_recv_start(ep, m, op);
            if (ep->state == MESH_TL_VERBS_CONN_READY)
                mesh_tl_verbs_ep_push(ep, 0);
            return MESH_OK;
        }
        if (m->len > len) {
            truncated(ep, op, m->len);
        } else {
            if (m->len)
                memcpy(buf, m->data, m->len);
            mesh_tl_op_complete(op, m->len, MESH_OK);
        }
        msg_put(vi, m);
        return MESH_OK;
    }
    if (ep->failed < 0)
        return mesh_error(ep->failed, "receive from failed peer rank %d: %s", uep->peer, ep->why);
    mesh_tl_opq_push(&ep->posted, op);
    return MESH_OK;
}

/* Sends the head of the send queue; 0 when resources are lacking. */
static int push_send(mesh_tl_verbs_ep_t *ep)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    mesh_tl_op_t *op = ep->sendq.head;
    size_t len = mesh_tl_op_len(op);
    if (mesh_tl_verbs_credits_avail(&ep->cr) == 0 || ep->nfree == 0)
        return 0;
    mesh_tl_verbs_proto_t proto =
        mesh_tl_verbs_proto_pick(len, MESH_TL_VERBS_HDR_EAGER, vi->max_inline, vi->bounce);
    uint32_t slot = (uint32_t)slot_get(ep);
    char *b = slot_buf(ep, slot);
    mesh_tl_verbs_hdr_t h = {.tag = mesh_tl_op_tag(op), .len = len};
    if (proto != MESH_TL_VERBS_PROTO_RNDV) {
        h.type = MESH_TL_VERBS_MSG_EAGER;
        size_t n = mesh_tl_verbs_hdr_encode(&h, b, vi->bounce);
        if (len)
            memcpy(b + n, mesh_tl_op_buf(op), len);
        mesh_tl_opq_pop(&ep->sendq);
        mesh_tl_verbs_credits_take(&ep->cr);
        ep->slots[slot].op = op;
        return post_msg(ep, slot, VERBS_WR_SEND, n + len) == 0;
    }
    mesh_tl_verbs_msg_t *m = msg_get(vi);
    mesh_status_t st =
        m ? mesh_tl_verbs_rcache_get(&vi->rcache, mesh_tl_op_buf(op), len, &m->region)
          : mesh_error(MESH_ERR_NO_MEMORY, "verbs rendezvous to rank %d", ep->super.peer);
    mesh_tl_opq_pop(&ep->sendq);
    if (st != MESH_OK) {
        slot_put(ep, slot);
        if (m)
            msg_put(vi, m);
        mesh_tl_op_complete(op, 0, st);
        return 1;
    }
    m->op = op;
    m->tag = h.tag;
    m->len = len;
    m->msg_id = ep->next_msg_id++;
    m->state = mesh_tl_verbs_msg_next(MESH_TL_VERBS_MSG_QUEUED, proto, MESH_TL_VERBS_MEV_POST);
    h.type = MESH_TL_VERBS_MSG_RTS;
    h.msg_id = m->msg_id;
    h.raddr = (uintptr_t)mesh_tl_op_buf(op);
    h.rkey = m->region->rkey;
    size_t n = mesh_tl_verbs_hdr_encode(&h, b, vi->bounce);
    msgq_push(&ep->rndv_send, m);
    mesh_tl_verbs_credits_take(&ep->cr);
    ep->slots[slot].msg = m;
    return post_msg(ep, slot, VERBS_WR_RTS, n) == 0;
}

/* Posts reads for matched rendezvous receives; 0 when out of slots. */
static int push_reads(mesh_tl_verbs_ep_t *ep)
{
    for (mesh_tl_verbs_msg_t *m = ep->reads.head; m; m = m->next) {
        while (m->posted < m->len) {
            int s = slot_get(ep);
            if (s < 0)
                return 0;
            uint64_t n = m->len - m->posted;
            if (n > MESH_TL_VERBS_READ_MAX)
                n = MESH_TL_VERBS_READ_MAX;
            struct ibv_sge sge = {.addr = (uintptr_t)mesh_tl_op_buf(m->op) + m->posted,
                                  .length = (uint32_t)n,
                                  .lkey = m->region->lkey};
            struct ibv_send_wr wr = {.sg_list = &sge,
                                     .num_sge = 1,
                                     .opcode = IBV_WR_RDMA_READ,
                                     .send_flags = IBV_SEND_SIGNALED};
            wr.wr.rdma.remote_addr = m->raddr + m->posted;
            wr.wr.rdma.rkey = m->rkey;
            ep->slots[s].msg = m;
            if (m->state == MESH_TL_VERBS_MSG_MATCHED)
                m->state = mesh_tl_verbs_msg_next(m->state, MESH_TL_VERBS_PROTO_RNDV,
                                                  MESH_TL_VERBS_MEV_POST);
            if (post(ep, (uint32_t)s, VERBS_WR_READ, &wr) != 0)
                return 0;
            m->posted += n;
            m->reads++;
        }
    }
    return 1;
}

void mesh_tl_verbs_ep_push(mesh_tl_verbs_ep_t *ep, int idle)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    if (ep->failed < 0)
        return;
    mesh_tl_verbs_credits_update(&ep->cr, __atomic_load_n(ep->credit_in, __ATOMIC_ACQUIRE));
    /* returning credits needs no credit; it goes first so that a busy sender never starves it */
    if (ep->nfree > 0 && mesh_tl_verbs_creturn_due(&ep->ret, vi->rx_depth / 4, idle)) {
        uint32_t slot = (uint32_t)slot_get(ep);
        *ep->credit_out = ep->ret.reposted;
        ep->ret.in_flight = ep->ret.reposted;
        struct ibv_sge sge = {.addr = (uintptr_t)ep->credit_out, .length = 8, .lkey = ep->mr->lkey};
        struct ibv_send_wr wr = {.sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED |
                                               (vi->max_inline >= 8 ? IBV_SEND_INLINE : 0)};
        wr.wr.rdma.remote_addr = ep->peer_credit_addr;
        wr.wr.rdma.rkey = ep->peer_credit_rkey;
        if (post(ep, slot, VERBS_WR_CREDIT, &wr) != 0)
            return;
    }
    while (ep->fin_n > 0 && ep->nfree > 0 && mesh_tl_verbs_credits_avail(&ep->cr) > 0) {
        uint32_t slot = (uint32_t)slot_get(ep);
        mesh_tl_verbs_hdr_t h = {.type = MESH_TL_VERBS_MSG_FIN, .msg_id = ep->fins[ep->fin_head]};
        size_t n = mesh_tl_verbs_hdr_encode(&h, slot_buf(ep, slot), vi->bounce);
        ep->fin_head = (ep->fin_head + 1) % ep->fin_cap;
        ep->fin_n--;
        mesh_tl_verbs_credits_take(&ep->cr);
        if (post_msg(ep, slot, VERBS_WR_FIN, n) != 0)
            return;
    }
    if (!push_reads(ep) || ep->failed < 0)
        return;
    while (ep->sendq.head && ep->failed == MESH_OK)
        if (!push_send(ep))
            break;
}

static int ep_has_ops(mesh_tl_verbs_ep_t *ep);

void mesh_tl_verbs_ep_keepalive(mesh_tl_verbs_ep_t *ep, double now, double interval)
{
    if (interval <= 0 || ep->failed < 0 || ep->probing || ep->nfree == 0 ||
        now - ep->last_heard < interval || !ep_has_ops(ep))
        return;
    uint32_t slot = (uint32_t)slot_get(ep);
    /* no data: the responder only acknowledges, so a live but busy peer answers too */
    struct ibv_send_wr wr = {.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = ep->peer_credit_addr;
    wr.wr.rdma.rkey = ep->peer_credit_rkey;
    mesh_log_debug("verbs: probing rank %d: no completion for %.1f s", ep->super.peer,
                   now - ep->last_heard);
    if (post(ep, slot, VERBS_WR_PROBE, &wr) == 0)
        ep->probing = 1;
    ep->last_heard = now;
}

static int handle_recv(mesh_tl_verbs_ep_t *ep, uint32_t slot, size_t bytes)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    const char *b = ep->rx_bufs + (size_t)slot * vi->bounce;
    mesh_tl_verbs_hdr_t h;
    size_t hl;
    int done = 0;
    if (mesh_tl_verbs_hdr_decode(b, bytes, &h, &hl) != MESH_OK) {
        char why[192];
        snprintf(why, sizeof(why), "rank %d: malformed message: %s", ep->super.peer,
                 mesh_error_last());
        return mesh_tl_verbs_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
    }
    if (h.type == MESH_TL_VERBS_MSG_FIN) {
        mesh_tl_verbs_msg_t *m = ep->rndv_send.head;
        while (m && m->msg_id != h.msg_id)
            m = m->next;
        if (m == NULL) {
            mesh_log_debug("verbs: fin for unknown message %u from rank %d", h.msg_id,
                           ep->super.peer);
            return 0;
        }
        int s = mesh_tl_verbs_msg_next(m->state, MESH_TL_VERBS_PROTO_RNDV, MESH_TL_VERBS_MEV_FIN);
        if (s == MESH_TL_VERBS_MSG_DONE) {
            rndv_send_done(ep, m);
            return 1;
        }
        if (s >= 0)
            m->state = s;
        return 0;
    }
    mesh_tl_op_t *op = mesh_tl_opq_take_tag(&ep->posted, h.tag);
    if (h.type == MESH_TL_VERBS_MSG_EAGER && op) {
        size_t cap = mesh_tl_op_len(op);
        if (h.len > cap) {
            truncated(ep, op, h.len);
        } else {
            if (h.len)
                memcpy(mesh_tl_op_buf(op), b + hl, h.len);
            mesh_tl_op_complete(op, h.len, MESH_OK);
        }
        return 1;
    }
    mesh_tl_verbs_msg_t *m = msg_get(vi);
    if (m == NULL) {
        char why[96];
        snprintf(why, sizeof(why), "rank %d: out of memory for an arriving message",
                 ep->super.peer);
        return mesh_tl_verbs_ep_fail(ep, MESH_ERR_NO_MEMORY, why);
    }
    m->tag = h.tag;
    m->len = h.len;
    m->msg_id = h.msg_id;
    if (h.type == MESH_TL_VERBS_MSG_RTS) {
        m->raddr = h.raddr;
        m->rkey = h.rkey;
        m->is_rts = 1;
        if (op)
            return rndv_recv_start(ep, m, op);
    } else if (h.len > 0) {
        m->data = malloc(h.len);
        if (m->data == NULL) {
            msg_put(vi, m);
            char why[96];
            snprintf(why, sizeof(why), "rank %d: out of memory for an unexpected message",
                     ep->super.peer);
            return mesh_tl_verbs_ep_fail(ep, MESH_ERR_NO_MEMORY, why);
        }
        memcpy(m->data, b + hl, h.len);
    }
    msgq_push(&ep->unexp, m);
    return done;
}

int mesh_tl_verbs_handle_wc(mesh_tl_verbs_iface_t *vi, const struct ibv_wc *wc)
{
    int peer = (int)(wc->wr_id >> 32), kind = (int)((wc->wr_id >> 28) & 0xf);
    uint32_t slot = (uint32_t)(wc->wr_id & 0x0fffffffu);
    mesh_tl_verbs_ep_t *ep = peer >= 0 && peer < vi->super.size ? vi->eps[peer] : NULL;
    if (ep == NULL)
        return 0;
    if (wc->status != IBV_WC_SUCCESS || ep->failed < 0) {
        int n = 0;
        if (ep->failed == MESH_OK) {
            char why[192];
            mesh_status_t st = mesh_tl_verbs_wc_status(wc->status, peer, why, sizeof(why));
            n = mesh_tl_verbs_ep_fail(ep, st, why);
        }
        if (kind != VERBS_WR_RECV && slot < vi->tx_depth && ep->slots[slot].kind != VERBS_WR_NONE)
            slot_put(ep, slot);
        return n;
    }
    mesh_tl_verbs_slot_t s = kind == VERBS_WR_RECV ? (mesh_tl_verbs_slot_t){0} : ep->slots[slot];
    ep->last_heard = vi->poll_time;
    switch (kind) {
    case VERBS_WR_RECV: {
        int n = handle_recv(ep, slot, wc->byte_len);
        if (ep->failed == MESH_OK) {
            if (mesh_tl_verbs_post_recv(ep, slot) != 0) {
                char why[128];
                snprintf(why, sizeof(why), "rank %d: reposting a receive buffer: %m", peer);
                return n + mesh_tl_verbs_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
            }
            ep->ret.reposted++;
        }
        return n;
    }
    case VERBS_WR_SEND:
        slot_put(ep, slot);
        mesh_tl_op_complete(s.op, mesh_tl_op_len(s.op), MESH_OK);
        return 1;
    case VERBS_WR_RTS: {
        slot_put(ep, slot);
        mesh_tl_verbs_msg_t *m = s.msg;
        int st =
            mesh_tl_verbs_msg_next(m->state, MESH_TL_VERBS_PROTO_RNDV, MESH_TL_VERBS_MEV_LOCAL);
        if (st == MESH_TL_VERBS_MSG_DONE) {
            rndv_send_done(ep, m);
            return 1;
        }
        if (st >= 0)
            m->state = st;
        return 0;
    }
    case VERBS_WR_READ: {
        slot_put(ep, slot);
        mesh_tl_verbs_msg_t *m = s.msg;
        if (--m->reads > 0 || m->posted < m->len)
            return 0;
        msgq_remove(&ep->reads, m);
        mesh_tl_verbs_rcache_put(&vi->rcache, m->region);
        mesh_tl_op_complete(m->op, (size_t)m->len, MESH_OK);
        fin_queue(ep, m->msg_id);
        msg_put(vi, m);
        return 1;
    }
    case VERBS_WR_PROBE:
        slot_put(ep, slot);
        ep->probing = 0;
        return 0;
    case VERBS_WR_CREDIT:
        slot_put(ep, slot);
        ep->ret.reported = ep->ret.in_flight;
        ep->ret.in_flight = 0;
        return 0;
    default:
        slot_put(ep, slot);
        return 0;
    }
}

/* Completes everything the endpoint holds with status and frees its messages. */
static int ep_fail_ops(mesh_tl_verbs_ep_t *ep, mesh_status_t status)
{
    mesh_tl_verbs_iface_t *vi = mesh_tl_verbs_iface(ep);
    int n = mesh_tl_opq_fail_all(&ep->sendq, status) + mesh_tl_opq_fail_all(&ep->posted, status);
    for (uint32_t i = 0; i < vi->tx_depth; i++) {
        /* the slots stay taken until their flushed completions return them */
        if (ep->slots[i].kind == VERBS_WR_SEND && ep->slots[i].op) {
            mesh_tl_op_complete(ep->slots[i].op, 0, status);
            n++;
        }
        ep->slots[i].op = NULL;
        ep->slots[i].msg = NULL;
    }
    mesh_tl_verbs_msgq_t *qs[] = {&ep->rndv_send, &ep->reads, &ep->unexp};
    for (int q = 0; q < 3; q++) {
        while (qs[q]->head) {
            mesh_tl_verbs_msg_t *m = qs[q]->head;
            qs[q]->head = m->next;
            if (m->region)
                mesh_tl_verbs_rcache_put(&vi->rcache, m->region);
            if (m->op && q < 2) {
                mesh_tl_op_complete(m->op, 0, status);
                n++;
            }
            msg_put(vi, m);
        }
        qs[q]->tail = NULL;
    }
    ep->fin_n = 0;
    return n;
}

/* Whether anything but standing receives waits on the peer (see MESH_TL_OP_STANDING). */
static int ep_has_ops(mesh_tl_verbs_ep_t *ep)
{
    if (!mesh_tl_opq_empty(&ep->sendq) || ep->rndv_send.head || ep->reads.head)
        return 1;
    for (mesh_tl_op_t *op = ep->posted.head; op; op = op->tl_next)
        if (!(op->flags & MESH_TL_OP_STANDING))
            return 1;
    for (uint32_t i = 0; i < mesh_tl_verbs_iface(ep)->tx_depth; i++)
        if (ep->slots[i].kind == VERBS_WR_SEND && ep->slots[i].op)
            return 1;
    return 0;
}

int mesh_tl_verbs_ep_fail(mesh_tl_verbs_ep_t *ep, mesh_status_t status, const char *why)
{
    if (ep->failed < 0)
        return 0;
    ep->failed = status;
    snprintf(ep->why, sizeof(ep->why), "%s", why);
    int s = mesh_tl_verbs_conn_next(ep->state, MESH_TL_VERBS_EV_ERROR);
    if (s >= 0)
        ep->state = s;
    if (status != MESH_ERR_ABORTED && ep_has_ops(ep))
        mesh_error(status, "verbs: %s", why);
    else if (status != MESH_ERR_ABORTED)
        mesh_log_debug("verbs: %s (nothing was waiting on it)", why);
    if (ep->qp) {
        /* flushes what is posted, so every slot comes back through the completion queue */
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
        ibv_modify_qp(ep->qp, &a, IBV_QP_STATE);
    }
    return ep_fail_ops(ep, status);
}

void mesh_tl_verbs_ep_drop(mesh_tl_verbs_ep_t *ep, mesh_status_t status)
{
    if (ep->failed == MESH_OK)
        ep->failed = status;
    ep_fail_ops(ep, status);
}
