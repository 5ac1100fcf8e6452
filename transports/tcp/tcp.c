/*
 * tcp: one listening socket per communicator on this rank's own address (so ranks in different
 * network namespaces reach each other), TCP_STREAMS connections per peer opened by the lower
 * rank, each starting with a hello naming communicator, rank and stream. All sockets are
 * nonblocking and serviced by one zero-timeout poll() per progress call.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "tcp"
#include "transports/tcp/tcp.h"
#include "transports/tl_registry.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/wait.h"
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const mesh_config_entry_t tcp_config_entries[] = {
    {"TCP_STREAMS", "1", MESH_CFG_INT,
     "Connections per peer; messages larger than TCP_CHUNK are striped over them.", NULL,
     "1..16" /* MESH_TL_TCP_MAX_STREAMS */},
    {"TCP_CHUNK", "512k", MESH_CFG_SIZE,
     "Striping unit of large messages over the connections of a peer.", NULL, "4k..1g"},
    {"TCP_SOCKBUF", "0", MESH_CFG_SIZE,
     "Socket send and receive buffer size; 0 keeps the kernel's autotuning.", NULL, "0..1g"},
    {NULL, NULL, 0, NULL, NULL},
};

static const mesh_config_table_t tcp_config = {"tcp", tcp_config_entries};

static void tcp_tune_socket(mesh_tl_tcp_iface_t *ti, int fd)
{
    if (ti->sockbuf) {
        int v = (int)ti->sockbuf;
        /* the FORCE variants pass net.core.[rw]mem_max when we may; else the capped ones */
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) != 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
    }
    mesh_sock_set_nodelay(fd);
}

static mesh_status_t tcp_open(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface)
{
    mesh_status_t st;
    mesh_sockaddr_t local, bound;
    mesh_tl_tcp_iface_t *ti = calloc(1, sizeof(*ti));
    if (ti == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "tcp interface allocation failed");
    ti->super.ops = mesh_tl_tcp_ops;
    ti->super.rank = params->rank;
    ti->super.size = params->size;
    ti->comm_uid = params->comm_uid;
    ti->timeout_s = params->timeout_s;
    ti->lfd = -1;
    ti->first_failed = -1;
    atomic_init(&ti->aborted, 0);
    /* the table's ranges bound both (MESH_TL_TCP_MAX_STREAMS streams) */
    ti->nstreams = (int)mesh_config_int("TCP_STREAMS");
    ti->chunk = mesh_config_size("TCP_CHUNK");
    ti->sockbuf = mesh_config_size("TCP_SOCKBUF");
    ti->eps = calloc((size_t)params->size, sizeof(*ti->eps));
    if (ti->eps == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "tcp endpoint table for %d ranks", params->size);
        goto err_free;
    }
    MESH_CHECK_GOTO(mesh_sock_local_addr(&local), st, err_free);
    MESH_CHECK_GOTO(mesh_sock_listen(&local, SOMAXCONN, &ti->lfd, &bound), st, err_free);
    MESH_CHECK_GOTO(mesh_sock_set_nonblocking(ti->lfd, 1), st, err_close);
    /* accepted sockets inherit the buffer sizes, which must be set before the handshake for
     * the window scale to follow */
    tcp_tune_socket(ti, ti->lfd);
    ti->addr.magic = MESH_TL_TCP_MAGIC;
    ti->addr.nstreams = (uint16_t)ti->nstreams;
    ti->addr.sa_len = bound.len;
    memcpy(&ti->addr.sa, &bound.ss, sizeof(bound.ss));
    char buf[64];
    mesh_log_debug("rank %d listens on %s with %d streams per peer", params->rank,
                   mesh_sock_addr_str(&bound, buf, sizeof(buf)), ti->nstreams);
    *iface = &ti->super;
    return MESH_OK;

err_close:
    close(ti->lfd);
err_free:
    free(ti->eps);
    free(ti);
    return st;
}

static void stream_close(mesh_tl_tcp_stream_t *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    s->state = TCP_ST_CLOSED;
}

static void tcp_ep_destroy(mesh_tl_ep_t *uep)
{
    mesh_tl_tcp_ep_t *ep = (mesh_tl_tcp_ep_t *)uep;
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)uep->iface;
    for (int i = 0; i < ep->nstreams; i++) {
        stream_close(&ep->streams[i]);
        free(ep->streams[i].stage);
    }
    /* drop everything, including unexpected messages nobody will receive */
    ep->failed = MESH_ERR_ABORTED;
    mesh_tl_tcp_ep_fail_ops(ep, MESH_ERR_ABORTED);
    while (ep->incoming) {
        mesh_tl_tcp_rmsg_t *m = ep->incoming;
        ep->incoming = m->next;
        free(m->buf);
        free(m->spans);
        free(m);
    }
    if (ti->eps[uep->peer] == ep)
        ti->eps[uep->peer] = NULL;
    free(ep);
}

static void tcp_close(mesh_tl_iface_t *iface)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    for (int r = 0; r < iface->size; r++)
        if (ti->eps[r])
            tcp_ep_destroy(&ti->eps[r]->super);
    while (ti->conns) {
        mesh_tl_tcp_conn_t *c = ti->conns;
        ti->conns = c->next;
        close(c->fd);
        free(c);
    }
    while (ti->rmsg_free) {
        mesh_tl_tcp_rmsg_t *m = ti->rmsg_free;
        ti->rmsg_free = m->next;
        free(m->spans);
        free(m);
    }
    if (ti->lfd >= 0)
        close(ti->lfd);
    mesh_tl_tcp_ucache_free(ti);
    free(ti->pfds);
    free(ti->pobj);
    free(ti->eps);
    free(ti);
}

static void tcp_query(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    memset(caps, 0, sizeof(*caps));
    caps->flags = MESH_TL_CAP_TAGGED | MESH_TL_CAP_SIGNATURE |
                  (ti->nstreams > 1 ? MESH_TL_CAP_MULTI_STREAM : 0);
    caps->scope = MESH_TL_SCOPE_NET;
    caps->latency_us = 20.0;
    caps->bandwidth_GBps = 1.0;
    caps->eager_limit = SIZE_MAX;
    caps->priority = MESH_TL_PRIO_TCP;
}

static mesh_status_t tcp_address(mesh_tl_iface_t *iface, void *addr, size_t *len)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    memcpy(addr, &ti->addr, sizeof(ti->addr));
    *len = sizeof(ti->addr);
    return MESH_OK;
}

static int tcp_reachable(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer)
{
    const mesh_tl_tcp_addr_t *a = peer->addr;
    return peer->rank != iface->rank && peer->addr_len == sizeof(*a) &&
           a->magic == MESH_TL_TCP_MAGIC;
}

/* Starts (or restarts after a refusal) the connection of one stream. */
static int stream_connect(mesh_tl_tcp_iface_t *ti, mesh_tl_tcp_ep_t *ep, int idx)
{
    mesh_tl_tcp_stream_t *s = &ep->streams[idx];
    int fd = socket(ep->addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        char why[128];
        snprintf(why, sizeof(why), "socket: %s", strerror(errno));
        return mesh_tl_tcp_ep_fail(ep, MESH_ERR_IO, why);
    }
    tcp_tune_socket(ti, fd);
    s->fd = fd;
    s->hello.magic = MESH_TL_TCP_MAGIC;
    s->hello.rank = (uint32_t)ti->super.rank;
    s->hello.comm_uid = ti->comm_uid;
    s->hello.stream = (uint32_t)idx;
    s->hello.nstreams = (uint32_t)ep->nstreams;
    s->hello_done = 0;
    if (connect(fd, (const struct sockaddr *)&ep->addr.ss, ep->addr.len) == 0) {
        s->state = TCP_ST_HELLO;
    } else if (errno == EINPROGRESS) {
        s->state = TCP_ST_CONNECTING;
    } else if (errno == ECONNREFUSED || errno == EAGAIN) {
        close(fd);
        s->fd = -1;
        s->state = TCP_ST_NONE;
        s->retry_at = mesh_time() + 0.01;
    } else {
        char why[160];
        snprintf(why, sizeof(why), "connect: %s", strerror(errno));
        return mesh_tl_tcp_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
    }
    return 0;
}

/* Hands an accepted connection whose hello is complete to its endpoint; 1 when adopted. */
static int conn_adopt(mesh_tl_tcp_iface_t *ti, mesh_tl_tcp_conn_t *c)
{
    mesh_tl_tcp_ep_t *ep = ti->eps[c->hello.rank];
    if (ep == NULL)
        return 0; /* its endpoint is created later */
    mesh_tl_tcp_stream_t *s = &ep->streams[c->hello.stream];
    /* a stream beyond the endpoint's count would never be polled nor closed */
    if (c->hello.nstreams != (uint32_t)ep->nstreams || c->hello.stream >= (uint32_t)ep->nstreams ||
        s->state != TCP_ST_NONE) {
        mesh_log_warn("dropping unexpected connection from rank %u stream %u", c->hello.rank,
                      c->hello.stream);
        close(c->fd);
        return 1;
    }
    s->fd = c->fd;
    s->state = TCP_ST_READY;
    return 1;
}

static mesh_status_t tcp_ep_create(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                                   mesh_tl_ep_t **out)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    if (!tcp_reachable(iface, peer))
        return mesh_error(MESH_ERR_INVALID_ARG, "tcp cannot reach rank %d: bad address",
                          peer->rank);
    if (peer->rank < 0 || peer->rank >= iface->size || ti->eps[peer->rank])
        return mesh_error(MESH_ERR_INVALID_ARG, "tcp endpoint to rank %d: bad or duplicate",
                          peer->rank);
    const mesh_tl_tcp_addr_t *a = peer->addr;
    mesh_tl_tcp_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "tcp endpoint allocation failed");
    ep->super.iface = iface;
    ep->super.peer = peer->rank;
    ep->nstreams = a->nstreams < ti->nstreams ? a->nstreams : ti->nstreams;
    if (ep->nstreams < 1)
        ep->nstreams = 1;
    ep->addr.len = a->sa_len;
    memcpy(&ep->addr.ss, &a->sa, sizeof(a->sa));
    mesh_sock_addr_str(&ep->addr, ep->addr_str, sizeof(ep->addr_str));
    ep->connector = iface->rank < peer->rank;
    ep->notice_rank = -1;
    ep->culprit = -1;
    for (int i = 0; i < ep->nstreams; i++) {
        ep->streams[i].fd = -1;
        ep->streams[i].ep = ep;
        ep->streams[i].stage = malloc(MESH_TL_TCP_STAGE);
        if (ep->streams[i].stage == NULL) {
            for (int j = 0; j < i; j++)
                free(ep->streams[j].stage);
            free(ep);
            return mesh_error(MESH_ERR_NO_MEMORY, "tcp staging buffers for rank %d", peer->rank);
        }
    }
    ti->eps[peer->rank] = ep;
    if (ep->connector) {
        for (int i = 0; i < ep->nstreams; i++)
            stream_connect(ti, ep, i);
    } else {
        for (mesh_tl_tcp_conn_t **p = &ti->conns; *p;) {
            mesh_tl_tcp_conn_t *c = *p;
            if (c->hello_done == sizeof(c->hello) && (int)c->hello.rank == peer->rank &&
                conn_adopt(ti, c)) {
                *p = c->next;
                free(c);
            } else {
                p = &c->next;
            }
        }
    }
    *out = &ep->super;
    return MESH_OK;
}

/* Tells every other connected peer which rank failed first (best effort: written now when the
 * stream is between chunks, else after the current chunk). */
static void tcp_announce(mesh_tl_tcp_iface_t *ti, int failed)
{
    if (ti->first_failed >= 0 || atomic_load(&ti->aborted))
        return;
    ti->first_failed = failed;
    for (int r = 0; r < ti->super.size; r++) {
        mesh_tl_tcp_ep_t *ep = ti->eps[r];
        if (ep == NULL || r == failed || ep->failed < 0)
            continue;
        ep->notice_rank = failed;
        if (ep->streams[0].state == TCP_ST_READY)
            mesh_tl_tcp_stream_send(ep, &ep->streams[0]);
    }
}

int mesh_tl_tcp_ep_fail(mesh_tl_tcp_ep_t *ep, mesh_status_t status, const char *why)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)ep->super.iface;
    if (ep->failed < 0)
        return mesh_tl_tcp_ep_fail_ops(ep, ep->failed);
    int n = 0, pending = mesh_tl_tcp_ep_has_ops(ep);
    ep->failed = status;
    for (int i = 0; i < ep->nstreams; i++)
        stream_close(&ep->streams[i]);
    int culprit = ep->culprit;
    mesh_tl_tcp_ep_t *cep = culprit >= 0 ? ti->eps[culprit] : NULL;
    /* only a peer that left while we still exchanged with it failed; one that finished and
     * closed is no news to spread */
    if (status == MESH_ERR_PEER_FAILED && pending)
        tcp_announce(ti, culprit >= 0 ? culprit : ep->super.peer);
    /* the rank it saw fail goes first, so that the first failure reported names it */
    if (cep && cep != ep && cep->failed == MESH_OK) {
        char cwhy[64];
        snprintf(cwhy, sizeof(cwhy), "rank %d saw it fail", ep->super.peer);
        n += mesh_tl_tcp_ep_fail(cep, MESH_ERR_PEER_FAILED, cwhy);
    }
    char after[48] = "";
    if (culprit >= 0)
        snprintf(after, sizeof(after), " (after it saw rank %d fail)", culprit);
    snprintf(ep->why, sizeof(ep->why), "%s%s", why, after);
    if (pending)
        mesh_error(status, "peer rank %d (%s) failed: %s%s", ep->super.peer, ep->addr_str, why,
                   after);
    else
        mesh_log_debug("peer rank %d (%s) is gone: %s%s", ep->super.peer, ep->addr_str, why, after);
    return n + mesh_tl_tcp_ep_fail_ops(ep, status);
}

static void accept_all(mesh_tl_tcp_iface_t *ti)
{
    for (;;) {
        int fd = accept4(ti->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
                mesh_log_warn("accept on the tcp listener failed: %m");
            return;
        }
        mesh_sock_set_nodelay(fd);
        mesh_tl_tcp_conn_t *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            return;
        }
        c->fd = fd;
        c->next = ti->conns;
        ti->conns = c;
    }
}

/* Reads hellos of accepted connections; returns how many were adopted. */
static int conns_progress(mesh_tl_tcp_iface_t *ti)
{
    int n = 0;
    for (mesh_tl_tcp_conn_t **p = &ti->conns; *p;) {
        mesh_tl_tcp_conn_t *c = *p;
        int drop = 0;
        while (c->hello_done < sizeof(c->hello)) {
            ssize_t r = recv(c->fd, (char *)&c->hello + c->hello_done,
                             sizeof(c->hello) - c->hello_done, MSG_DONTWAIT);
            if (r > 0) {
                c->hello_done += (size_t)r;
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (r < 0 && errno == EINTR)
                continue;
            drop = 1;
            break;
        }
        if (!drop && c->hello_done == sizeof(c->hello)) {
            if (c->hello.magic != MESH_TL_TCP_MAGIC || c->hello.comm_uid != ti->comm_uid ||
                c->hello.rank >= (uint32_t)ti->super.size || (int)c->hello.rank >= ti->super.rank ||
                c->hello.stream >= MESH_TL_TCP_MAX_STREAMS) {
                mesh_log_warn("dropping a connection with an invalid hello");
                drop = 1;
            } else if (conn_adopt(ti, c)) {
                *p = c->next;
                free(c);
                n++;
                continue;
            }
        }
        if (drop) {
            close(c->fd);
            *p = c->next;
            free(c);
            continue;
        }
        p = &c->next;
    }
    return n;
}

static int pfd_reserve(mesh_tl_tcp_iface_t *ti, int n)
{
    if (n <= ti->pcap)
        return 0;
    int cap = n * 2;
    struct pollfd *p = realloc(ti->pfds, (size_t)cap * sizeof(*p));
    if (p == NULL)
        return -1;
    ti->pfds = p;
    void **o = realloc(ti->pobj, (size_t)cap * sizeof(*o));
    if (o == NULL)
        return -1;
    ti->pobj = o;
    ti->pcap = cap;
    return 0;
}

static int tcp_abort_pending(mesh_tl_tcp_iface_t *ti)
{
    int n = 0;
    if (ti->abort_done)
        return 0;
    ti->abort_done = 1;
    for (int r = 0; r < ti->super.size; r++) {
        mesh_tl_tcp_ep_t *ep = ti->eps[r];
        if (ep == NULL)
            continue;
        if (ep->failed == MESH_OK) {
            ep->failed = MESH_ERR_ABORTED;
            snprintf(ep->why, sizeof(ep->why), "aborted");
        }
        for (int i = 0; i < ep->nstreams; i++)
            stream_close(&ep->streams[i]);
        n += mesh_tl_tcp_ep_fail_ops(ep, MESH_ERR_ABORTED);
    }
    return n;
}

/* A sleeper polls the sockets progress() would: the listener, accepted connections, and each
 * stream for reading, or writing while it has bytes to send; a stream waiting to connect again
 * has nothing to poll, so the sleep turns into naps. */
static void tcp_wait_arm(mesh_tl_iface_t *iface, struct mesh_wait_set *set)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    if (atomic_load_explicit(&ti->aborted, memory_order_acquire) && !ti->abort_done) {
        set->blind = 1;
        return;
    }
    if (ti->lfd >= 0)
        mesh_wait_set_fd(set, ti->lfd, POLLIN);
    for (mesh_tl_tcp_conn_t *c = ti->conns; c; c = c->next)
        mesh_wait_set_fd(set, c->fd, POLLIN);
    for (int r = 0; r < iface->size; r++) {
        mesh_tl_tcp_ep_t *ep = ti->eps[r];
        if (ep == NULL || ep->failed < 0)
            continue;
        for (int i = 0; i < ep->nstreams; i++) {
            mesh_tl_tcp_stream_t *s = &ep->streams[i];
            if (s->fd < 0) {
                if (s->state == TCP_ST_NONE && ep->connector)
                    set->blind = 1;
                continue;
            }
            short ev = 0;
            if (s->state == TCP_ST_CONNECTING || mesh_tl_tcp_stream_has_tx(ep, s))
                ev |= POLLOUT;
            if (s->state == TCP_ST_READY)
                ev |= POLLIN;
            mesh_wait_set_fd(set, s->fd, ev);
        }
    }
}

static int tcp_unexpected(mesh_tl_iface_t *iface, mesh_tl_unexpected_fn fn, void *arg)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    for (int r = 0; r < iface->size; r++) {
        const mesh_tl_tcp_ep_t *ep = ti->eps[r];
        if (ep == NULL)
            continue;
        /* a message with an error is being dropped (a truncated receive took it) */
        for (const mesh_tl_tcp_rmsg_t *m = ep->incoming; m; m = m->next) {
            int rc = m->op == NULL && m->error >= 0 ? fn(arg, r, m->tag) : 0;
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int tcp_progress(mesh_tl_iface_t *iface)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    if (atomic_load_explicit(&ti->aborted, memory_order_acquire))
        return tcp_abort_pending(ti);
    int done = 0, np = 0, nconns = 0;
    double now = -1;
    for (mesh_tl_tcp_conn_t *c = ti->conns; c; c = c->next)
        nconns++;
    if (pfd_reserve(ti, 1 + nconns + iface->size * MESH_TL_TCP_MAX_STREAMS) != 0)
        return 0;
    ti->pfds[np] = (struct pollfd){.fd = ti->lfd, .events = POLLIN};
    ti->pobj[np++] = NULL;
    for (mesh_tl_tcp_conn_t *c = ti->conns; c; c = c->next) {
        ti->pfds[np] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        ti->pobj[np++] = NULL;
    }
    for (int r = 0; r < iface->size; r++) {
        mesh_tl_tcp_ep_t *ep = ti->eps[r];
        if (ep == NULL || ep->failed < 0)
            continue;
        for (int i = 0; i < ep->nstreams; i++) {
            mesh_tl_tcp_stream_t *s = &ep->streams[i];
            if (s->state == TCP_ST_NONE && ep->connector) {
                if (now < 0)
                    now = mesh_time();
                if (now >= s->retry_at)
                    stream_connect(ti, ep, i);
            }
            if (s->fd < 0 || ep->failed < 0)
                continue;
            short ev = 0;
            if (s->state == TCP_ST_CONNECTING || mesh_tl_tcp_stream_has_tx(ep, s))
                ev |= POLLOUT;
            if (s->state == TCP_ST_READY)
                ev |= POLLIN;
            ti->pfds[np] = (struct pollfd){.fd = s->fd, .events = ev};
            ti->pobj[np++] = s;
        }
    }
    int rc = poll(ti->pfds, (nfds_t)np, 0);
    if (rc <= 0)
        return 0;
    ti->moved = 0;
    int conn_events = 0;
    for (int k = 1; k < 1 + nconns; k++)
        conn_events |= ti->pfds[k].revents;
    if (ti->pfds[0].revents)
        accept_all(ti);
    /* adopted connections are not completions */
    if (ti->pfds[0].revents || conn_events)
        conns_progress(ti);
    for (int k = 1 + nconns; k < np; k++) {
        short re = ti->pfds[k].revents;
        if (re == 0)
            continue;
        mesh_tl_tcp_stream_t *s = ti->pobj[k];
        mesh_tl_tcp_ep_t *ep = s->ep;
        if (ep->failed < 0)
            continue;
        if (s->state == TCP_ST_CONNECTING) {
            int err = 0;
            socklen_t el = sizeof(err);
            getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
            if (err == ECONNREFUSED) {
                stream_close(s);
                s->state = TCP_ST_NONE;
                s->retry_at = mesh_time() + 0.01;
                continue;
            }
            if (err != 0) {
                char why[160];
                snprintf(why, sizeof(why), "connect: %s", strerror(err));
                done += mesh_tl_tcp_ep_fail(ep, MESH_ERR_PEER_FAILED, why);
                continue;
            }
            if (!(re & POLLOUT))
                continue;
            s->state = TCP_ST_HELLO;
        }
        if (re & (POLLIN | POLLHUP | POLLERR)) {
            int n = mesh_tl_tcp_stream_recv(ep, s);
            if (n > 0)
                done += n;
            if (ep->failed < 0)
                continue;
        }
        if (re & POLLOUT || mesh_tl_tcp_stream_has_tx(ep, s)) {
            int n = mesh_tl_tcp_stream_send(ep, s);
            if (n > 0)
                done += n;
        }
    }
    /* bytes that moved without completing anything still tell waiters not to sleep */
    return done + ti->moved;
}

static int ep_connected(mesh_tl_tcp_ep_t *ep)
{
    for (int i = 0; i < ep->nstreams; i++)
        if (ep->streams[i].state != TCP_ST_READY)
            return 0;
    return 1;
}

static mesh_status_t tcp_wireup(mesh_tl_iface_t *iface, double deadline)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    unsigned idle = 0;
    for (;;) {
        int missing = 0;
        for (int r = 0; r < iface->size; r++) {
            mesh_tl_tcp_ep_t *ep = ti->eps[r];
            if (ep == NULL)
                continue;
            if (ep->failed < 0)
                return mesh_error(ep->failed, "tcp connection to rank %d (%s) failed", r,
                                  ep->addr_str);
            if (!ep_connected(ep))
                missing++;
        }
        if (missing == 0)
            return MESH_OK;
        if (atomic_load_explicit(&ti->aborted, memory_order_acquire))
            return mesh_error(MESH_ERR_ABORTED, "tcp wireup aborted");
        if (mesh_time() > deadline) {
            char list[256];
            size_t off = 0;
            list[0] = '\0';
            for (int r = 0; r < iface->size && off < sizeof(list) - 16; r++) {
                mesh_tl_tcp_ep_t *ep = ti->eps[r];
                if (ep && !ep_connected(ep))
                    off +=
                        (size_t)snprintf(list + off, sizeof(list) - off, "%s%d", off ? "," : "", r);
            }
            return mesh_error(MESH_ERR_TIMEOUT,
                              "tcp wireup timed out: %d peers never connected (ranks %s)", missing,
                              list);
        }
        if (tcp_progress(iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
}

static mesh_status_t tcp_ep_check(mesh_tl_ep_t *uep)
{
    mesh_tl_tcp_ep_t *ep = (mesh_tl_tcp_ep_t *)uep;
    return ep->failed == MESH_ERR_ABORTED ? MESH_ERR_ABORTED
           : ep->failed < 0               ? MESH_ERR_PEER_FAILED
                                          : MESH_OK;
}

/* Shutting sockets down is safe from any thread and wakes the peers; the owner's next
 * progress() completes the pending operations. */
static void tcp_abort(mesh_tl_iface_t *iface)
{
    mesh_tl_tcp_iface_t *ti = (mesh_tl_tcp_iface_t *)iface;
    if (atomic_exchange(&ti->aborted, 1))
        return;
    for (int r = 0; r < iface->size; r++) {
        mesh_tl_tcp_ep_t *ep = ti->eps[r];
        if (ep == NULL)
            continue;
        for (int i = 0; i < ep->nstreams; i++) {
            int fd = ep->streams[i].fd;
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
        }
    }
}

const mesh_tl_ops_t mesh_tl_tcp_ops = {
    .name = "tcp",
    .doc = "TCP sockets, several streams per peer",
    .config = &tcp_config,
    .usable = mesh_tl_stub_usable,
    .open = tcp_open,
    .close = tcp_close,
    .query = tcp_query,
    .address = tcp_address,
    .reachable = tcp_reachable,
    .ep_create = tcp_ep_create,
    .ep_destroy = tcp_ep_destroy,
    .wireup = tcp_wireup,
    .isend = mesh_tl_tcp_isend,
    .irecv = mesh_tl_tcp_irecv,
    .progress = tcp_progress,
    .ep_check = tcp_ep_check,
    .unexpected = tcp_unexpected,
    .abort = tcp_abort,
    .wait_arm = tcp_wait_arm,
    .mem_reg = mesh_tl_stub_mem_reg,
    .mem_dereg = mesh_tl_stub_mem_dereg,
    .put = mesh_tl_stub_put,
    .get = mesh_tl_stub_get,
    .flush = mesh_tl_stub_flush,
};
