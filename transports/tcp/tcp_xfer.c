/*
 * tcp data path. Sends queue on the endpoint; whichever stream is idle carves the next chunk of
 * the oldest send (so large messages stripe over every stream and a slow stream never holds the
 * others back) and writes header and payload with one writev. Receivers read into a small
 * staging buffer for headers and small payloads and straight into the destination for the
 * bulk of large chunks; the destination is the posted receive when it was posted before the
 * first chunk arrived, otherwise an unexpected buffer copied out when the receive is posted.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "tcp"
#include "transports/tcp/tcp.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

static mesh_tl_tcp_iface_t *tcp_iface(mesh_tl_tcp_ep_t *ep)
{
    return (mesh_tl_tcp_iface_t *)ep->super.iface;
}

static mesh_tl_tcp_rmsg_t *rmsg_get(mesh_tl_tcp_iface_t *ti)
{
    mesh_tl_tcp_rmsg_t *m = ti->rmsg_free;
    if (m)
        ti->rmsg_free = m->next;
    else
        m = calloc(1, sizeof(*m));
    if (m) { /* the span array is kept for the next message */
        struct mesh_tl_tcp_span *spans = m->spans;
        int cap = m->cap_spans;
        memset(m, 0, sizeof(*m));
        m->spans = spans;
        m->cap_spans = cap;
    }
    return m;
}

static char *ubuf_get(mesh_tl_tcp_iface_t *ti, size_t len, size_t *cap)
{
    int best = -1;
    for (int i = 0; i < MESH_TL_TCP_UCACHE; i++)
        if (ti->ucache[i].buf && ti->ucache[i].cap >= len &&
            (best < 0 || ti->ucache[i].cap < ti->ucache[best].cap))
            best = i;
    if (best >= 0) {
        char *b = ti->ucache[best].buf;
        *cap = ti->ucache[best].cap;
        ti->ucache[best].buf = NULL;
        return b;
    }
    *cap = len;
    return malloc(len);
}

static void ubuf_put(mesh_tl_tcp_iface_t *ti, char *buf, size_t cap)
{
    if (buf == NULL)
        return;
    int slot = -1;
    for (int i = 0; i < MESH_TL_TCP_UCACHE; i++) {
        if (ti->ucache[i].buf == NULL) {
            slot = i;
            break;
        }
        if (slot < 0 || ti->ucache[i].cap < ti->ucache[slot].cap)
            slot = i;
    }
    if (ti->ucache[slot].buf) {
        if (ti->ucache[slot].cap >= cap) {
            free(buf);
            return;
        }
        free(ti->ucache[slot].buf); /* keep the larger ones */
    }
    ti->ucache[slot].buf = buf;
    ti->ucache[slot].cap = cap;
}

void mesh_tl_tcp_ucache_free(mesh_tl_tcp_iface_t *ti)
{
    for (int i = 0; i < MESH_TL_TCP_UCACHE; i++) {
        free(ti->ucache[i].buf);
        ti->ucache[i].buf = NULL;
    }
}

static void rmsg_put(mesh_tl_tcp_iface_t *ti, mesh_tl_tcp_rmsg_t *m)
{
    ubuf_put(ti, m->buf, m->buf_cap);
    m->buf = NULL;
    m->next = ti->rmsg_free;
    ti->rmsg_free = m;
}

static void rmsg_unlink(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_rmsg_t *m)
{
    for (mesh_tl_tcp_rmsg_t **p = &ep->incoming; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            return;
        }
    }
}

mesh_status_t mesh_tl_tcp_isend(mesh_tl_ep_t *uep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_tcp_ep_t *ep = (mesh_tl_tcp_ep_t *)uep;
    /* a failed peer is named with its address */
    MESH_CHECK(mesh_tl_post_check(&tcp_iface(ep)->aborted, MESH_OK, NULL, "send to", uep->peer));
    if (ep->failed < 0)
        return mesh_error(ep->failed, "send to failed peer rank %d (%s): %s", uep->peer,
                          ep->addr_str, ep->why);
    mesh_tl_op_set(op, tag, buf, len);
    mesh_tl_opq_push(&ep->sendq, op);
    return MESH_OK;
}

mesh_status_t mesh_tl_tcp_irecv(mesh_tl_ep_t *uep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_tcp_ep_t *ep = (mesh_tl_tcp_ep_t *)uep;
    mesh_tl_tcp_iface_t *ti = tcp_iface(ep);
    MESH_CHECK(mesh_tl_post_check(&ti->aborted, MESH_OK, NULL, "receive from", uep->peer));
    mesh_tl_op_set(op, tag, buf, len);
    for (mesh_tl_tcp_rmsg_t *m = ep->incoming; m; m = m->next) {
        /* a message with an error is being dropped: a truncated receive took it */
        if (m->op != NULL || m->error < 0 || !mesh_tl_tag_match(tag, m->tag))
            continue;
        op->peer_tag = m->tag;
        if (m->msg_len > len) {
            /* the receive fails; the message is read to its end and dropped */
            mesh_tl_op_complete(op, m->msg_len, mesh_tl_truncated(uep, m->msg_len, len));
            m->error = MESH_ERR_TRUNCATED; /* its later chunks still name its tag */
            if (m->complete) {
                rmsg_unlink(ep, m);
                rmsg_put(ti, m);
            }
            return MESH_OK;
        }
        if (m->complete) {
            size_t n = m->msg_len;
            if (n)
                memcpy(buf, m->buf, n);
            rmsg_unlink(ep, m);
            rmsg_put(ti, m);
            mesh_tl_op_complete(op, n, MESH_OK);
            return MESH_OK;
        }
        m->op = op; /* the rest arrives in place; what came before is copied when complete */
        return MESH_OK;
    }
    if (ep->failed < 0)
        return mesh_error(ep->failed, "receive from failed peer rank %d (%s): %s", uep->peer,
                          ep->addr_str, ep->why);
    mesh_tl_opq_push(&ep->posted, op);
    return MESH_OK;
}

int mesh_tl_tcp_stream_has_tx(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    if (s->state == TCP_ST_HELLO)
        return 1;
    if (s->state != TCP_ST_READY)
        return 0;
    return s->tx_active || !mesh_tl_opq_empty(&ep->sendq) ||
           (ep->notice_rank >= 0 && s == &ep->streams[0]);
}

/* Carves the next chunk of the oldest send onto this stream. */
static int carve(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    if (ep->notice_rank >= 0 && s == &ep->streams[0]) {
        memset(&s->tx_hdr, 0, sizeof(s->tx_hdr));
        s->tx_hdr.tag = (uint64_t)ep->notice_rank;
        s->tx_hdr.msg_id = MESH_TL_TCP_NOTICE_ID;
        s->tx_hdr_done = 0;
        s->tx_op = NULL;
        s->tx_data = NULL;
        s->tx_len = s->tx_done = 0;
        s->tx_active = 1;
        ep->notice_rank = -1;
        return 1;
    }
    mesh_tl_op_t *op = ep->sendq.head;
    if (op == NULL)
        return 0;
    size_t len = mesh_tl_op_len(op);
    if (!ep->head_started) {
        ep->head_started = 1;
        ep->head_msg_id = ep->next_msg_id++;
        ep->head_offset = 0;
    }
    size_t chunk = tcp_iface(ep)->chunk;
    size_t n = len - ep->head_offset;
    /* small messages never split; the last piece of a large one is never a sliver */
    if (n > chunk + chunk / 2)
        n = chunk;
    s->tx_hdr.tag = mesh_tl_op_tag(op);
    s->tx_hdr.msg_len = len;
    s->tx_hdr.offset = ep->head_offset;
    s->tx_hdr.chunk_len = (uint32_t)n;
    s->tx_hdr.msg_id = ep->head_msg_id;
    s->tx_hdr_done = 0;
    s->tx_op = op;
    s->tx_data = (const char *)mesh_tl_op_buf(op) + ep->head_offset;
    s->tx_len = n;
    s->tx_done = 0;
    s->tx_active = 1;
    ep->head_offset += n;
    if (ep->head_offset >= len) {
        mesh_tl_opq_pop(&ep->sendq);
        ep->head_started = 0;
    }
    return 1;
}

/* A chunk is on the wire: its send completes once no other chunk of it is left. */
static int chunk_sent(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    mesh_tl_op_t *op = s->tx_op;
    s->tx_active = 0;
    s->tx_op = NULL;
    if (op == NULL || ep->sendq.head == op)
        return 0; /* a notice, or more chunks to carve */
    for (int i = 0; i < ep->nstreams; i++)
        if (ep->streams[i].tx_active && ep->streams[i].tx_op == op)
            return 0;
    mesh_tl_op_complete(op, mesh_tl_op_len(op), MESH_OK);
    return 1;
}

static int io_failed(mesh_tl_tcp_ep_t *ep, const char *what)
{
    char why[160];
    snprintf(why, sizeof(why), "%s: %s", what, strerror(errno));
    return mesh_tl_tcp_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
}

int mesh_tl_tcp_stream_send(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    int done = 0;
    if (s->state == TCP_ST_HELLO) {
        while (s->hello_done < sizeof(s->hello)) {
            ssize_t n = send(s->fd, (char *)&s->hello + s->hello_done,
                             sizeof(s->hello) - s->hello_done, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return 0;
                if (errno == EINTR)
                    continue;
                return io_failed(ep, "sending hello");
            }
            s->hello_done += (size_t)n;
        }
        s->state = TCP_ST_READY;
    }
    if (s->state != TCP_ST_READY)
        return 0;
    size_t budget = MESH_TL_TCP_ROUND_BYTES;
    for (;;) {
        if (budget == 0)
            return done; /* the socket still takes data: the next round goes on */
        if (!s->tx_active && !carve(ep, s))
            return done;
        struct iovec iov[2];
        int niov = 0;
        if (s->tx_hdr_done < sizeof(s->tx_hdr)) {
            iov[niov].iov_base = (char *)&s->tx_hdr + s->tx_hdr_done;
            iov[niov++].iov_len = sizeof(s->tx_hdr) - s->tx_hdr_done;
        }
        if (s->tx_done < s->tx_len) {
            iov[niov].iov_base = (char *)s->tx_data + s->tx_done;
            iov[niov++].iov_len = s->tx_len - s->tx_done;
        }
        if (niov == 0) {
            done += chunk_sent(ep, s);
            continue;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        ssize_t n = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return done;
            if (errno == EINTR)
                continue;
            return io_failed(ep, "send");
        }
        tcp_iface(ep)->moved = 1;
        budget -= (size_t)n < budget ? (size_t)n : budget;
        size_t left = (size_t)n;
        size_t h = sizeof(s->tx_hdr) - s->tx_hdr_done;
        if (h > left)
            h = left;
        s->tx_hdr_done += h;
        left -= h;
        s->tx_done += left;
        if (s->tx_hdr_done == sizeof(s->tx_hdr) && s->tx_done == s->tx_len)
            done += chunk_sent(ep, s);
    }
}

/* A chunk header arrived: find or create its message and point the stream at its bytes. */
static int on_header(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    mesh_tl_tcp_iface_t *ti = tcp_iface(ep);
    mesh_tl_tcp_hdr_t *h = &s->rx_hdr;
    mesh_tl_tcp_rmsg_t *m;
    if (h->msg_id == MESH_TL_TCP_NOTICE_ID && h->msg_len == 0) {
        if (h->tag < (uint64_t)ep->super.iface->size)
            ep->culprit = (int)h->tag;
        s->rx_msg = NULL;
        s->rx_dst = NULL;
        s->rx_remain = 0;
        s->rx_state = TCP_RX_PAYLOAD;
        return 0;
    }
    /* the chunk lies inside its message (checked without a sum that could wrap) */
    if (h->chunk_len > h->msg_len || h->offset > h->msg_len - h->chunk_len)
        return mesh_tl_tcp_ep_fail(ep, MESH_ERR_PEER_FAILED, "malformed chunk header");
    for (m = ep->incoming; m; m = m->next)
        if (m->msg_id == h->msg_id && !m->complete)
            break;
    /* a later chunk must describe the message its first one did, within what is left of it */
    if (m != NULL &&
        (m->msg_len != h->msg_len || m->tag != h->tag || h->chunk_len > m->msg_len - m->received))
        return mesh_tl_tcp_ep_fail(ep, MESH_ERR_PEER_FAILED,
                                   "chunk header contradicts its message");
    if (m == NULL) {
        m = rmsg_get(ti);
        if (m == NULL)
            return mesh_tl_tcp_ep_fail(ep, MESH_ERR_NO_MEMORY, "no memory for a message record");
        m->msg_id = h->msg_id;
        m->tag = h->tag;
        m->msg_len = h->msg_len;
        m->op = mesh_tl_opq_take_tag(&ep->posted, h->tag);
        if (m->op && m->msg_len > mesh_tl_op_len(m->op)) {
            m->error = mesh_tl_truncated(&ep->super, m->msg_len, mesh_tl_op_len(m->op));
        } else if (m->op == NULL && m->msg_len) {
            m->buf = ubuf_get(ti, m->msg_len, &m->buf_cap);
            if (m->buf == NULL) {
                rmsg_put(ti, m);
                return mesh_tl_tcp_ep_fail(ep, MESH_ERR_NO_MEMORY,
                                           "no memory for an unexpected message");
            }
        }
        /* append: unexpected messages match receives in arrival order */
        mesh_tl_tcp_rmsg_t **p = &ep->incoming;
        while (*p)
            p = &(*p)->next;
        *p = m;
    }
    s->rx_msg = m;
    s->rx_remain = h->chunk_len;
    if (m->error < 0 || h->chunk_len == 0) {
        s->rx_dst = NULL;
    } else if (m->op == NULL) {
        if (m->nspans == m->cap_spans) {
            int cap = m->cap_spans ? 2 * m->cap_spans : 16;
            struct mesh_tl_tcp_span *v = realloc(m->spans, (size_t)cap * sizeof(*v));
            if (v == NULL)
                return mesh_tl_tcp_ep_fail(ep, MESH_ERR_NO_MEMORY,
                                           "no memory for an unexpected message");
            m->spans = v;
            m->cap_spans = cap;
        }
        m->spans[m->nspans++] = (struct mesh_tl_tcp_span){h->offset, h->chunk_len};
        s->rx_dst = m->buf + h->offset;
    } else {
        s->rx_dst = (char *)mesh_tl_op_buf(m->op) + h->offset;
    }
    s->rx_state = TCP_RX_PAYLOAD;
    return 0;
}

/* The current chunk is in; completes its message when every byte is. */
static int on_chunk(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    mesh_tl_tcp_rmsg_t *m = s->rx_msg;
    s->rx_state = TCP_RX_HDR;
    s->rx_hdr_done = 0;
    s->rx_msg = NULL;
    if (m == NULL)
        return 0; /* a notice */
    m->received += s->rx_hdr.chunk_len;
    if (m->received < m->msg_len)
        return 0;
    if (m->op == NULL && m->error == MESH_OK) {
        m->complete = 1; /* waits for its receive */
        return 0;
    }
    mesh_tl_op_t *op = m->op;
    if (op) {
        if (m->error < 0) {
            mesh_tl_op_complete(op, m->msg_len, m->error);
        } else {
            for (int i = 0; m->buf && i < m->nspans; i++)
                memcpy((char *)mesh_tl_op_buf(op) + m->spans[i].offset, m->buf + m->spans[i].offset,
                       m->spans[i].len);
            mesh_tl_op_complete(op, m->msg_len, MESH_OK);
        }
    }
    rmsg_unlink(ep, m);
    rmsg_put(tcp_iface(ep), m);
    return op != NULL;
}

/* Consumes staged bytes; returns completions or a negative status. */
static int parse_stage(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    int done = 0;
    while (s->stage_pos < s->stage_len) {
        size_t avail = s->stage_len - s->stage_pos;
        if (s->rx_state == TCP_RX_HDR) {
            size_t need = sizeof(s->rx_hdr) - s->rx_hdr_done;
            size_t n = avail < need ? avail : need;
            memcpy((char *)&s->rx_hdr + s->rx_hdr_done, s->stage + s->stage_pos, n);
            s->stage_pos += n;
            s->rx_hdr_done += n;
            if (s->rx_hdr_done < sizeof(s->rx_hdr))
                break;
            int rc = on_header(ep, s);
            if (rc < 0)
                return rc;
            if (s->rx_remain == 0)
                done += on_chunk(ep, s);
        } else {
            size_t n = avail < s->rx_remain ? avail : s->rx_remain;
            if (s->rx_dst) {
                memcpy(s->rx_dst, s->stage + s->stage_pos, n);
                s->rx_dst += n;
            }
            s->stage_pos += n;
            s->rx_remain -= n;
            if (s->rx_remain == 0)
                done += on_chunk(ep, s);
        }
    }
    if (s->stage_pos == s->stage_len)
        s->stage_pos = s->stage_len = 0;
    return done;
}

int mesh_tl_tcp_stream_recv(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s)
{
    int done = 0;
    size_t budget = MESH_TL_TCP_ROUND_BYTES;
    while (budget > 0 && s->state == TCP_ST_READY) {
        int rc = parse_stage(ep, s);
        if (rc < 0)
            return rc;
        done += rc;
        ssize_t n;
        if (s->rx_state == TCP_RX_PAYLOAD && s->rx_dst && s->rx_remain >= MESH_TL_TCP_DIRECT) {
            n = recv(s->fd, s->rx_dst, s->rx_remain, MSG_DONTWAIT);
            if (n > 0) {
                s->rx_dst += n;
                s->rx_remain -= (size_t)n;
                if (s->rx_remain == 0)
                    done += on_chunk(ep, s);
            }
        } else {
            n = recv(s->fd, s->stage, MESH_TL_TCP_STAGE, MSG_DONTWAIT);
            if (n > 0) {
                s->stage_pos = 0;
                s->stage_len = (size_t)n;
            }
        }
        if (n == 0) {
            char why[96];
            snprintf(why, sizeof(why), "connection closed by peer");
            return mesh_tl_tcp_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            return io_failed(ep, "receive");
        }
        tcp_iface(ep)->moved = 1;
        budget -= (size_t)n < budget ? (size_t)n : budget;
    }
    int rc = parse_stage(ep, s);
    return rc < 0 ? rc : done + rc;
}

int mesh_tl_tcp_ep_has_ops(mesh_tl_tcp_ep_t *ep)
{
    if (!mesh_tl_opq_empty(&ep->sendq))
        return 1;
    for (mesh_tl_op_t *op = ep->posted.head; op; op = op->tl_next)
        if (!(op->flags & MESH_TL_OP_STANDING))
            return 1;
    for (int i = 0; i < ep->nstreams; i++)
        if (ep->streams[i].tx_active && ep->streams[i].tx_op)
            return 1;
    for (mesh_tl_tcp_rmsg_t *m = ep->incoming; m; m = m->next)
        if (m->op && !(m->op->flags & MESH_TL_OP_STANDING))
            return 1;
    return 0;
}

int mesh_tl_tcp_ep_fail_ops(mesh_tl_tcp_ep_t *ep, mesh_status_t status)
{
    int n = 0;
    for (int i = 0; i < ep->nstreams; i++) {
        mesh_tl_tcp_stream_t *s = &ep->streams[i];
        if (s->tx_active && s->tx_op && s->tx_op->status == MESH_INPROGRESS) {
            mesh_tl_op_complete(s->tx_op, 0, status);
            n++;
        }
        s->tx_active = 0;
        s->tx_op = NULL;
        s->rx_msg = NULL;
        s->rx_state = TCP_RX_HDR;
        s->rx_hdr_done = 0;
        s->stage_pos = s->stage_len = 0;
    }
    mesh_tl_op_t *op;
    while ((op = mesh_tl_opq_pop(&ep->sendq)) != NULL) {
        if (op->status == MESH_INPROGRESS) {
            mesh_tl_op_complete(op, 0, status);
            n++;
        }
    }
    ep->head_started = 0;
    n += mesh_tl_opq_fail_all(&ep->posted, status);
    for (mesh_tl_tcp_rmsg_t *m = ep->incoming; m; m = m->next) {
        if (m->op) {
            mesh_tl_op_complete(m->op, 0, status);
            m->op = NULL;
            n++;
        }
    }
    mesh_tl_tcp_ep_free_msgs(ep);
    return n;
}

void mesh_tl_tcp_ep_free_msgs(mesh_tl_tcp_ep_t *ep)
{
    mesh_tl_tcp_iface_t *ti = tcp_iface(ep);
    /* unexpected messages that arrived complete stay matchable after a failure */
    mesh_tl_tcp_rmsg_t **p = &ep->incoming;
    while (*p) {
        mesh_tl_tcp_rmsg_t *m = *p;
        if (m->complete && m->op == NULL && m->error == MESH_OK) {
            p = &m->next;
            continue;
        }
        *p = m->next;
        rmsg_put(ti, m);
    }
}
