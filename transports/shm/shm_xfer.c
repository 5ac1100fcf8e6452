/*
 * shm data path. Every sender owns one ring in each receiver's segment and writes packets into
 * it as a byte stream: eager messages (header + payload, streamed in pieces as the ring frees,
 * which also carries large messages when cross-memory attach is unavailable), rendezvous headers
 * for large messages (the receiver copies them once with process_vm_readv, then answers FIN),
 * and the control packets FIN, RETRY (the receiver cannot read our memory: stream it instead)
 * and RDATA (that stream). The receiver always drains its rings, into the posted buffer when the
 * receive is there and aside otherwise, so no sender waits on a receive being posted.
 * Packets start on cache lines. A packet written whole (header and payload at once, the common
 * case) carries a stamp in its first word, stored last, by which the receiver sees it with one
 * cache-line transfer; a streamed one is announced by the head pointer, as its pieces are.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "shm"
#include "transports/shm/shm.h"
#include "libmesh/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

static mesh_tl_shm_iface_t *shm_iface(mesh_tl_shm_ep_t *ep)
{
    return (mesh_tl_shm_iface_t *)ep->super.iface;
}

static void op_done(mesh_tl_shm_ep_t *ep, mesh_tl_op_t *op, size_t len, mesh_status_t st)
{
    ep->npending--;
    if (op->flags & MESH_TL_OP_STANDING)
        ep->nstanding--;
    mesh_tl_op_complete(op, len, st);
}

/* A receive too small for its message fails; the message is dropped. */
static void truncated(mesh_tl_shm_ep_t *ep, mesh_tl_op_t *op, size_t len)
{
    op_done(ep, op, len, mesh_tl_truncated(&ep->super, len, mesh_tl_op_len(op)));
}

/* Removes op from q by identity; 1 when it was there. */
static int opq_remove(mesh_tl_opq_t *q, mesh_tl_op_t *op)
{
    mesh_tl_op_t *prev = NULL;
    for (mesh_tl_op_t *o = q->head; o; prev = o, o = o->tl_next) {
        if (o != op)
            continue;
        if (prev)
            prev->tl_next = o->tl_next;
        else
            q->head = o->tl_next;
        if (q->tail == o)
            q->tail = prev;
        o->tl_next = NULL;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- unexpected messages */

static mesh_tl_shm_unexp_t *unexp_new(mesh_tl_shm_ep_t *ep, size_t len)
{
    mesh_tl_shm_iface_t *si = shm_iface(ep);
    mesh_tl_shm_unexp_t *u;
    if (len <= si->eager_limit && si->unexp_free) {
        u = si->unexp_free;
        si->unexp_free = u->next;
    } else if (len <= si->eager_limit) {
        u = malloc(sizeof(*u) + si->eager_limit);
        if (u == NULL)
            return NULL;
        u->pooled = 1;
    } else {
        if (len > SIZE_MAX - sizeof(*u)) /* an impossible length from the peer */
            return NULL;
        u = malloc(sizeof(*u) + len);
        if (u == NULL)
            return NULL;
        u->pooled = 0;
    }
    int pooled = u->pooled;
    memset(u, 0, sizeof(*u));
    u->pooled = pooled;
    u->data = (unsigned char *)(u + 1);
    u->len = len;
    u->next = NULL;
    if (ep->unexp_tail)
        ep->unexp_tail->next = u;
    else
        ep->unexp_head = u;
    ep->unexp_tail = u;
    return u;
}

static void unexp_free(mesh_tl_shm_ep_t *ep, mesh_tl_shm_unexp_t *u)
{
    mesh_tl_shm_unexp_t *prev = NULL;
    for (mesh_tl_shm_unexp_t *x = ep->unexp_head; x; prev = x, x = x->next) {
        if (x != u)
            continue;
        if (prev)
            prev->next = x->next;
        else
            ep->unexp_head = x->next;
        if (ep->unexp_tail == x)
            ep->unexp_tail = prev;
        break;
    }
    if (u->pooled) {
        mesh_tl_shm_iface_t *si = shm_iface(ep);
        u->next = si->unexp_free;
        si->unexp_free = u;
    } else {
        free(u);
    }
}

/* ---------------------------------------------------------------- control packets */

static int ctrl_push(mesh_tl_shm_ep_t *ep, uint32_t type, uint64_t tag, uint64_t cookie,
                     uint64_t addr)
{
    if (ep->ctrl_n == ep->ctrl_cap) {
        size_t cap = ep->ctrl_cap ? ep->ctrl_cap * 2 : 16;
        mesh_tl_shm_pkt_t *c = malloc(cap * sizeof(*c));
        if (c == NULL)
            return -1;
        for (size_t i = 0; i < ep->ctrl_n; i++)
            c[i] = ep->ctrl[(ep->ctrl_first + i) % ep->ctrl_cap];
        free(ep->ctrl);
        ep->ctrl = c;
        ep->ctrl_cap = cap;
        ep->ctrl_first = 0;
    }
    mesh_tl_shm_pkt_t *p = &ep->ctrl[(ep->ctrl_first + ep->ctrl_n) % ep->ctrl_cap];
    memset(p, 0, sizeof(*p));
    p->type = type;
    p->tag = tag;
    p->cookie = cookie;
    p->addr = addr;
    ep->ctrl_n++;
    return 0;
}

/* ---------------------------------------------------------------- posting */

static int tx_progress(mesh_tl_shm_ep_t *ep);

mesh_status_t mesh_tl_shm_isend(mesh_tl_ep_t *uep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_shm_ep_t *ep = (mesh_tl_shm_ep_t *)uep;
    MESH_CHECK(
        mesh_tl_post_check(&shm_iface(ep)->aborted, ep->failed, ep->why, "send to", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    mesh_tl_opq_push(&ep->sendq, op);
    ep->npending++;
    /* into the ring at once: the receiver sees an eager message or a rendezvous request now,
     * not at this rank's next progress call, which may come only after local work (a copy, a
     * reduction) or a cross-memory read of its own; the operation may complete here */
    tx_progress(ep);
    mesh_tl_shm_notify(ep);
    return MESH_OK;
}

/* A matched rendezvous: read it through CMA, or ask the sender to stream it. */
static int rndv_start(mesh_tl_shm_ep_t *ep, mesh_tl_op_t *op, const mesh_tl_shm_pkt_t *pkt)
{
    mesh_tl_shm_iface_t *si = shm_iface(ep);
    if (pkt->len > mesh_tl_op_len(op)) {
        /* the sender only needs to be released */
        if (ctrl_push(ep, SHM_PKT_FIN, pkt->tag, pkt->cookie, 0) != 0)
            return mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY, "no memory for a control packet");
        truncated(ep, op, pkt->len);
        return 1;
    }
    if (ep->cma_broken || !si->cma) {
        if (ctrl_push(ep, SHM_PKT_RETRY, pkt->tag, pkt->cookie, (uint64_t)(uintptr_t)op) != 0)
            return mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY, "no memory for a control packet");
        mesh_tl_opq_push(&ep->retry_wait, op);
        return 0;
    }
    mesh_tl_shm_rndv_t *r = si->rndv_free;
    if (r)
        si->rndv_free = r->next;
    else if ((r = malloc(sizeof(*r))) == NULL)
        return mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY, "no memory for a rendezvous");
    r->op = op;
    r->raddr = pkt->addr;
    r->cookie = pkt->cookie;
    r->pid = pkt->pid;
    r->len = pkt->len;
    r->done = 0;
    r->next = NULL;
    mesh_tl_shm_rndv_t **p = &ep->reads;
    while (*p)
        p = &(*p)->next;
    *p = r;
    return 0;
}

mesh_status_t mesh_tl_shm_irecv(mesh_tl_ep_t *uep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_shm_ep_t *ep = (mesh_tl_shm_ep_t *)uep;
    MESH_CHECK(
        mesh_tl_post_check(&shm_iface(ep)->aborted, MESH_OK, NULL, "receive from", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    ep->npending++;
    if (op->flags & MESH_TL_OP_STANDING)
        ep->nstanding++;
    for (mesh_tl_shm_unexp_t *u = ep->unexp_head; u; u = u->next) {
        if (u->op != NULL || u->type == 0 || !mesh_tl_tag_match(tag, u->tag))
            continue;
        op->peer_tag = u->tag;
        if (u->type == SHM_PKT_RNDV) {
            mesh_tl_shm_pkt_t pkt = u->pkt;
            unexp_free(ep, u);
            rndv_start(ep, op, &pkt);
            return MESH_OK;
        }
        if (u->len > len) {
            truncated(ep, op, u->len);
            if (u->complete)
                unexp_free(ep, u);
            else
                u->type = 0; /* dropped once its payload is in */
            return MESH_OK;
        }
        if (u->complete) {
            size_t n = u->len;
            if (n)
                memcpy(buf, u->data, n);
            unexp_free(ep, u);
            op_done(ep, op, n, MESH_OK);
            return MESH_OK;
        }
        u->op = op;
        return MESH_OK;
    }
    if (ep->failed < 0) {
        ep->npending--;
        if (op->flags & MESH_TL_OP_STANDING)
            ep->nstanding--;
        return mesh_error(ep->failed, "receive from failed peer rank %d: %s", uep->peer, ep->why);
    }
    mesh_tl_opq_push(&ep->posted, op);
    return MESH_OK;
}

/* ---------------------------------------------------------------- ring access */

#define PKT sizeof(mesh_tl_shm_pkt_t)
_Static_assert(sizeof(mesh_tl_shm_pkt_t) <= SHM_PKT_ALIGN, "a header must not wrap the ring");

/* Payload bytes that follow a header. */
static size_t pkt_payload(const mesh_tl_shm_pkt_t *p)
{
    return p->type == SHM_PKT_EAGER || p->type == SHM_PKT_RDATA ? p->len : 0;
}

/* Bytes a header is followed by in the ring: its payload, padded so that the next header starts
 * on a cache line (a small packet is then one line for the receiver to fetch). */
static size_t pkt_body(const mesh_tl_shm_pkt_t *p)
{
    size_t end = (PKT + pkt_payload(p) + SHM_PKT_ALIGN - 1) & ~(size_t)(SHM_PKT_ALIGN - 1);
    return end - PKT;
}

static atomic_uint_fast64_t *stamp_at(mesh_tl_shm_ring_t *ring, uint64_t fifo, uint64_t off)
{
    return (atomic_uint_fast64_t *)(void *)(ring->data + off % fifo);
}

/* Copies n bytes to stream offset off of our ring in the peer, wrapping. */
static void ring_write_at(mesh_tl_shm_ep_t *ep, uint64_t off, const void *src, size_t n)
{
    uint64_t pos = off % ep->fifo;
    size_t first = ep->fifo - pos < n ? ep->fifo - pos : n;
    memcpy(ep->tx->data + pos, src, first);
    if (n > first)
        memcpy(ep->tx->data, (const char *)src + first, n - first);
}

static void ring_put(mesh_tl_shm_ep_t *ep, const void *src, size_t n)
{
    ring_write_at(ep, ep->tx_head, src, n);
    ep->tx_head += n;
    ep->moved = 1;
}

/* Writes a header at tx_head: the fields, then the stamp (whole: the payload is in already). */
static void pkt_put(mesh_tl_shm_ep_t *ep, const mesh_tl_shm_pkt_t *p, size_t body, int whole)
{
    ring_write_at(ep, ep->tx_head + sizeof(p->stamp), (const char *)p + sizeof(p->stamp),
                  PKT - sizeof(p->stamp));
    atomic_store_explicit(stamp_at(ep->tx, ep->fifo, ep->tx_head),
                          whole ? mesh_tl_shm_stamp(ep->tx_key, ep->tx_head) : SHM_STAMP_STREAMED,
                          memory_order_release);
    ep->tx_head += PKT + (whole ? body : 0);
    ep->moved = 1;
}

static void ring_get(mesh_tl_shm_ep_t *ep, void *dst, size_t n)
{
    uint64_t pos = ep->rx_tail % ep->fifo;
    size_t first = ep->fifo - pos < n ? ep->fifo - pos : n;
    if (dst) {
        memcpy(dst, ep->rx->data + pos, first);
        if (n > first)
            memcpy((char *)dst + first, ep->rx->data, n - first);
    }
    ep->rx_tail += n;
    ep->moved = 1;
}

static size_t ring_space(mesh_tl_shm_ep_t *ep, size_t want)
{
    size_t space = ep->fifo - (size_t)(ep->tx_head - ep->tx_tail_cache);
    if (space < want) {
        ep->tx_tail_cache = atomic_load_explicit(&ep->tx->tail, memory_order_acquire);
        space = ep->fifo - (size_t)(ep->tx_head - ep->tx_tail_cache);
    }
    return space;
}

static void ring_publish(mesh_tl_shm_ep_t *ep)
{
    atomic_store_explicit(&ep->tx->head, ep->tx_head, memory_order_seq_cst); /* see notify */
    ep->notify = 1;
}

/* ---------------------------------------------------------------- sending */

/* Starts the next packet of a message (tx_cur); 0 when there is none. */
static int tx_next(mesh_tl_shm_ep_t *ep)
{
    mesh_tl_shm_iface_t *si = shm_iface(ep);
    mesh_tl_op_t *op;
    if (ep->rdataq.head == NULL && ep->sendq.head == NULL)
        return 0;
    memset(&ep->tx_pkt, 0, sizeof(ep->tx_pkt));
    if ((op = mesh_tl_opq_pop(&ep->rdataq)) != NULL) {
        ep->tx_pkt.type = SHM_PKT_RDATA;
        ep->tx_pkt.cookie = (uint64_t)(uintptr_t)op->tl_priv[3];
    } else {
        op = mesh_tl_opq_pop(&ep->sendq);
        size_t len = mesh_tl_op_len(op);
        size_t lim = op->flags & MESH_TL_OP_SRC_REUSED ? si->eager_reused : si->eager_limit;
        int rndv = len > lim && si->cma && ep->peer_cma && ep->same_pidns && !ep->cma_broken;
        ep->tx_pkt.type = rndv ? SHM_PKT_RNDV : SHM_PKT_EAGER;
        ep->tx_pkt.cookie = (uint64_t)(uintptr_t)op;
        ep->tx_pkt.addr = (uint64_t)(uintptr_t)mesh_tl_op_buf(op);
        ep->tx_pkt.pid = si->hdr->pid;
    }
    ep->tx_pkt.tag = mesh_tl_op_tag(op);
    ep->tx_pkt.len = mesh_tl_op_len(op);
    ep->tx_cur = op;
    ep->tx_pkt_done = 0;
    ep->tx_off = 0;
    return 1;
}

/* The message tx_cur is all in the ring (or, for a rendezvous, announced). */
static int tx_sent(mesh_tl_shm_ep_t *ep)
{
    mesh_tl_op_t *op = ep->tx_cur;
    ep->tx_cur = NULL;
    if (ep->tx_pkt.type == SHM_PKT_RNDV) {
        mesh_tl_opq_push(&ep->rndv_wait, op);
        return 0;
    }
    op_done(ep, op, mesh_tl_op_len(op), MESH_OK);
    return 1;
}

static int tx_progress(mesh_tl_shm_ep_t *ep)
{
    int done = 0, wrote = 0;
    for (;;) {
        if (ep->tx_cur == NULL) {
            while (ep->ctrl_n) {
                const mesh_tl_shm_pkt_t *c = &ep->ctrl[ep->ctrl_first];
                size_t body = pkt_body(c);
                if (ring_space(ep, PKT + body) < PKT + body)
                    goto out;
                pkt_put(ep, c, body, 1);
                ep->ctrl_first = (ep->ctrl_first + 1) % ep->ctrl_cap;
                ep->ctrl_n--;
                wrote = 1;
            }
            if (!tx_next(ep))
                break;
        }
        mesh_tl_op_t *op = ep->tx_cur;
        size_t len = pkt_payload(&ep->tx_pkt), body = pkt_body(&ep->tx_pkt);
        if (!ep->tx_pkt_done) {
            size_t space = ring_space(ep, PKT + body);
            if (space >= PKT + body) {
                /* whole: the payload, then the header stamped last */
                if (len)
                    ring_write_at(ep, ep->tx_head + PKT, mesh_tl_op_buf(op), len);
                pkt_put(ep, &ep->tx_pkt, body, 1);
                wrote = 1;
                done += tx_sent(ep);
                continue;
            }
            if (space < PKT)
                break;
            pkt_put(ep, &ep->tx_pkt, body, 0);
            ep->tx_pkt_done = 1;
            wrote = 1;
        }
        /* streamed as the ring frees, padding last */
        while (ep->tx_off < body) {
            size_t n = ring_space(ep, body - ep->tx_off);
            if (n == 0)
                goto out;
            if (n > body - ep->tx_off)
                n = body - ep->tx_off;
            size_t real = ep->tx_off < len ? len - ep->tx_off : 0;
            if (real > n)
                real = n;
            ring_put(ep, (const char *)mesh_tl_op_buf(op) + ep->tx_off, real);
            ep->tx_head += n - real;
            ep->tx_off += n;
            ring_publish(ep); /* let the receiver copy out while we copy in */
            wrote = 0;
        }
        done += tx_sent(ep);
    }
out:
    if (wrote)
        ring_publish(ep);
    return done;
}

/* ---------------------------------------------------------------- receiving */

static int payload_done(mesh_tl_shm_ep_t *ep)
{
    int done = 0;
    size_t len = ep->rx_pkt.len;
    ep->rx_state = SHM_RX_HDR;
    ep->rx_skip = ep->rx_pad;
    if (ep->rx_op) {
        op_done(ep, ep->rx_op, len, MESH_OK);
        done++;
    } else if (ep->rx_unexp) {
        mesh_tl_shm_unexp_t *u = ep->rx_unexp;
        u->complete = 1;
        if (u->op) {
            if (len)
                memcpy(mesh_tl_op_buf(u->op), u->data, len);
            op_done(ep, u->op, len, MESH_OK);
            unexp_free(ep, u);
            done++;
        } else if (u->type == 0) {
            unexp_free(ep, u);
        }
    }
    ep->rx_op = NULL;
    ep->rx_unexp = NULL;
    return done;
}

/* A packet header arrived; returns completions or a negative status. */
static int on_packet(mesh_tl_shm_ep_t *ep)
{
    mesh_tl_shm_pkt_t *p = &ep->rx_pkt;
    mesh_tl_op_t *op;
    int done = 0;
    switch (p->type) {
    case SHM_PKT_EAGER:
        ep->rx_op = NULL;
        ep->rx_unexp = NULL;
        ep->rx_dst = NULL;
        op = mesh_tl_opq_take_tag(&ep->posted, p->tag);
        if (op && p->len > mesh_tl_op_len(op)) {
            truncated(ep, op, p->len);
            done++;
        } else if (op) {
            ep->rx_op = op;
            ep->rx_dst = mesh_tl_op_buf(op);
        } else {
            mesh_tl_shm_unexp_t *u = unexp_new(ep, p->len);
            if (u == NULL)
                return mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY,
                                           "no memory for an unexpected message");
            u->type = SHM_PKT_EAGER;
            u->tag = p->tag;
            ep->rx_unexp = u;
            ep->rx_dst = u->data;
        }
        ep->rx_remain = p->len;
        ep->rx_state = SHM_RX_PAYLOAD;
        if (p->len == 0)
            done += payload_done(ep);
        return done;
    case SHM_PKT_RDATA:
        op = (mesh_tl_op_t *)(uintptr_t)p->cookie;
        if (!opq_remove(&ep->retry_wait, op))
            return mesh_tl_shm_ep_fail(ep, MESH_ERR_INTERNAL, "stream for an unknown receive");
        ep->rx_op = op;
        ep->rx_unexp = NULL;
        ep->rx_dst = mesh_tl_op_buf(op);
        ep->rx_remain = p->len;
        ep->rx_state = SHM_RX_PAYLOAD;
        if (p->len == 0)
            done += payload_done(ep);
        return done;
    case SHM_PKT_RNDV:
        op = mesh_tl_opq_take_tag(&ep->posted, p->tag);
        if (op)
            return rndv_start(ep, op, p);
        mesh_tl_shm_unexp_t *u = unexp_new(ep, 0);
        if (u == NULL)
            return mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY, "no memory for a rendezvous");
        u->type = SHM_PKT_RNDV;
        u->tag = p->tag;
        u->len = p->len;
        u->pkt = *p;
        u->complete = 1;
        return 0;
    case SHM_PKT_FIN:
        op = (mesh_tl_op_t *)(uintptr_t)p->cookie;
        if (!opq_remove(&ep->rndv_wait, op))
            return mesh_tl_shm_ep_fail(ep, MESH_ERR_INTERNAL, "completion for an unknown send");
        op_done(ep, op, mesh_tl_op_len(op), MESH_OK);
        return 1;
    case SHM_PKT_RETRY:
        op = (mesh_tl_op_t *)(uintptr_t)p->cookie;
        if (!opq_remove(&ep->rndv_wait, op))
            return mesh_tl_shm_ep_fail(ep, MESH_ERR_INTERNAL, "retry for an unknown send");
        if (!ep->cma_broken) /* the receiver logged it at info, once */
            mesh_log_debug("rank %d cannot read our memory: large messages to it go through "
                           "the ring",
                           ep->super.peer);
        ep->cma_broken = 1;
        op->tl_priv[3] = (void *)(uintptr_t)p->addr;
        mesh_tl_opq_push(&ep->rdataq, op);
        return 0;
    default:
        return mesh_tl_shm_ep_fail(ep, MESH_ERR_INTERNAL, "corrupt packet in the ring");
    }
}

/* Bytes of the stream known to be in past rx_tail, want at least: the head pointer, or (at a
 * header) a stamp saying a whole packet is there, which needs one cache line of the sender's
 * instead of two. */
static size_t rx_avail(mesh_tl_shm_ep_t *ep, size_t want)
{
    size_t avail = (size_t)(ep->rx_known - ep->rx_tail);
    if (avail >= want)
        return avail;
    if (ep->rx_state == SHM_RX_HDR && ep->rx_skip == 0) {
        uint64_t stamp =
            atomic_load_explicit(stamp_at(ep->rx, ep->fifo, ep->rx_tail), memory_order_acquire);
        if (stamp == mesh_tl_shm_stamp(ep->rx_key, ep->rx_tail)) {
            /* the header (which never wraps) says how much payload follows it */
            const mesh_tl_shm_pkt_t *p = (const void *)(ep->rx->data + ep->rx_tail % ep->fifo);
            ep->rx_known = ep->rx_tail + PKT + pkt_body(p);
            return (size_t)(ep->rx_known - ep->rx_tail);
        }
        /* a streamed header is marked so; anything else there is an older lap's bytes (or the
         * zeros of a new ring), so nothing new was written: the head pointer, another line, is
         * left alone */
        if (stamp != SHM_STAMP_STREAMED)
            return avail;
    }
    uint64_t head = atomic_load_explicit(&ep->rx->head, memory_order_acquire);
    if ((int64_t)(head - ep->rx_known) > 0)
        ep->rx_known = head;
    return (size_t)(ep->rx_known - ep->rx_tail);
}

static int rx_progress(mesh_tl_shm_ep_t *ep)
{
    int done = 0;
    size_t budget = 16u << 20;
    while (ep->failed == MESH_OK && budget > 0) {
        if (ep->rx_state == SHM_RX_HDR) {
            size_t avail = rx_avail(ep, ep->rx_skip ? ep->rx_skip : PKT);
            if (ep->rx_skip) {
                size_t n = avail < ep->rx_skip ? avail : ep->rx_skip;
                if (n == 0)
                    break;
                ring_get(ep, NULL, n);
                ep->rx_skip -= n;
                continue;
            }
            if (avail < PKT)
                break; /* headers are published whole */
            ring_get(ep, &ep->rx_pkt, PKT);
            ep->rx_pad = pkt_body(&ep->rx_pkt) - pkt_payload(&ep->rx_pkt);
            int rc = on_packet(ep);
            if (rc < 0)
                return done;
            done += rc;
            if (ep->rx_state == SHM_RX_HDR)
                ep->rx_skip = ep->rx_pad; /* no payload, or none left */
        } else {
            size_t avail = rx_avail(ep, 1);
            if (avail == 0)
                break;
            size_t n = avail < ep->rx_remain ? avail : ep->rx_remain;
            ring_get(ep, ep->rx_dst, n);
            if (ep->rx_dst)
                ep->rx_dst += n;
            ep->rx_remain -= n;
            budget -= n < budget ? n : budget;
            if (ep->rx_remain == 0) {
                int c = payload_done(ep);
                done += c;
                /* a receive completed: its caller acts on it first, and the next packet's line,
                 * cold in this cache, is polled at the next call */
                if (c && rx_avail(ep, ep->rx_skip) >= ep->rx_skip) {
                    ring_get(ep, NULL, ep->rx_skip);
                    ep->rx_skip = 0;
                    break;
                }
            } else {
                atomic_store_explicit(&ep->rx->tail, ep->rx_tail, memory_order_seq_cst);
                ep->notify = 1;
            }
        }
    }
    if (atomic_load_explicit(&ep->rx->tail, memory_order_relaxed) != ep->rx_tail) {
        atomic_store_explicit(&ep->rx->tail, ep->rx_tail, memory_order_seq_cst);
        ep->notify = 1; /* a sender may sleep on a full ring (seq_cst: see notify) */
    }
    return done;
}

/* One chunk of every rendezvous read in progress. */
static int reads_progress(mesh_tl_shm_ep_t *ep)
{
    mesh_tl_shm_iface_t *si = shm_iface(ep);
    int done = 0;
    for (mesh_tl_shm_rndv_t **pp = &ep->reads; *pp && ep->failed == MESH_OK;) {
        mesh_tl_shm_rndv_t *r = *pp;
        size_t n = r->len - r->done;
        if (n > MESH_TL_SHM_CMA_CHUNK)
            n = MESH_TL_SHM_CMA_CHUNK;
        ssize_t got = 0;
        if (n) {
            struct iovec l = {(char *)mesh_tl_op_buf(r->op) + r->done, n};
            struct iovec rv = {(void *)(uintptr_t)(r->raddr + r->done), n};
            got = process_vm_readv(r->pid, &l, 1, &rv, 1, 0);
        }
        if (got < 0) {
            if (errno == EPERM || errno == ENOSYS || errno == EACCES) {
                if (!si->cma_logged)
                    mesh_log_info("cross-memory attach to rank %d refused (%m): large messages "
                                  "go through the ring",
                                  ep->super.peer);
                si->cma_logged = 1;
                ep->cma_broken = 1;
                if (ctrl_push(ep, SHM_PKT_RETRY, r->op ? mesh_tl_op_tag(r->op) : 0, r->cookie,
                              (uint64_t)(uintptr_t)r->op) != 0)
                    return done + mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY,
                                                      "no memory for a control packet");
                mesh_tl_opq_push(&ep->retry_wait, r->op);
            } else {
                char why[128];
                snprintf(why, sizeof(why), "reading its memory: %s", strerror(errno));
                /* a peer that exited may have left because another one died: name that one */
                done += mesh_tl_shm_sweep(si);
                return done + mesh_tl_shm_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
            }
        } else {
            r->done += (size_t)got;
            ep->moved = 1;
            if (r->done < r->len) {
                pp = &r->next;
                continue;
            }
            if (ctrl_push(ep, SHM_PKT_FIN, mesh_tl_op_tag(r->op), r->cookie, 0) != 0)
                return done + mesh_tl_shm_ep_fail(ep, MESH_ERR_NO_MEMORY,
                                                  "no memory for a control packet");
            op_done(ep, r->op, r->len, MESH_OK);
            done++;
        }
        *pp = r->next;
        r->next = si->rndv_free;
        si->rndv_free = r;
    }
    return done;
}

int mesh_tl_shm_ep_drain(mesh_tl_shm_ep_t *ep)
{
    int done = 0, moved = ep->moved;
    /* rx_progress stops after a completion or a budget: go on until the ring is empty */
    do {
        ep->moved = 0;
        done += rx_progress(ep);
        moved |= ep->moved;
    } while (ep->moved && ep->failed == MESH_OK);
    ep->moved = moved;
    return done;
}

int mesh_tl_shm_ep_progress(mesh_tl_shm_ep_t *ep)
{
    if (ep->failed < 0)
        return 0;
    int done = rx_progress(ep);
    if (ep->reads && ep->failed == MESH_OK)
        done += reads_progress(ep);
    if (ep->failed == MESH_OK)
        done += tx_progress(ep);
    return done;
}

/* ---------------------------------------------------------------- failure */

static int fail_q(mesh_tl_shm_ep_t *ep, mesh_tl_opq_t *q, mesh_status_t st)
{
    int n = 0;
    mesh_tl_op_t *op;
    while ((op = mesh_tl_opq_pop(q)) != NULL) {
        if (op->status != MESH_INPROGRESS)
            continue;
        op_done(ep, op, 0, st);
        n++;
    }
    return n;
}

int mesh_tl_shm_ep_fail_ops(mesh_tl_shm_ep_t *ep, mesh_status_t st)
{
    mesh_tl_shm_iface_t *si = shm_iface(ep);
    int n = 0;
    if (ep->tx_cur && ep->tx_cur->status == MESH_INPROGRESS) {
        op_done(ep, ep->tx_cur, 0, st);
        n++;
    }
    ep->tx_cur = NULL;
    if (ep->rx_op && ep->rx_op->status == MESH_INPROGRESS) {
        op_done(ep, ep->rx_op, 0, st);
        n++;
    }
    ep->rx_op = NULL;
    ep->rx_unexp = NULL;
    ep->rx_state = SHM_RX_HDR;
    n += fail_q(ep, &ep->sendq, st);
    n += fail_q(ep, &ep->rdataq, st);
    n += fail_q(ep, &ep->rndv_wait, st);
    n += fail_q(ep, &ep->posted, st);
    n += fail_q(ep, &ep->retry_wait, st);
    while (ep->reads) {
        mesh_tl_shm_rndv_t *r = ep->reads;
        ep->reads = r->next;
        if (r->op->status == MESH_INPROGRESS) {
            op_done(ep, r->op, 0, st);
            n++;
        }
        r->next = si->rndv_free;
        si->rndv_free = r;
    }
    /* complete unexpected messages stay receivable; partial ones and their receives go */
    for (mesh_tl_shm_unexp_t *u = ep->unexp_head, *next; u; u = next) {
        next = u->next;
        if (u->op && u->op->status == MESH_INPROGRESS) {
            op_done(ep, u->op, 0, st);
            n++;
        }
        u->op = NULL;
        if (!u->complete || u->type == SHM_PKT_RNDV || u->type == 0)
            unexp_free(ep, u);
    }
    ep->ctrl_n = 0;
    return n;
}

void mesh_tl_shm_ep_free(mesh_tl_shm_ep_t *ep)
{
    while (ep->unexp_head)
        unexp_free(ep, ep->unexp_head);
    free(ep->ctrl);
    ep->ctrl = NULL;
}
