/*
 * TCP star bootstrap. Every rank connects to rank 0 and presents a hello carrying the shared
 * secret; rank 0 drops (and logs) anything else. An allgather sends each blob to rank 0, which
 * returns the whole array. When rank 0 gives up it sends the reason to every connected rank, so
 * that all of them report the same cause (e.g. which rank never joined).
 */
#define MESH_LOG_SUBSYSTEM "bootstrap"
#include <config.h>
#include "libmesh/bootstrap.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define STAR_HELLO_MAGIC 0x6d42534cu /* "mBSL" */
#define STAR_MSG_MAGIC   0x6d42534du /* "mBSM" */
#define STAR_VERSION     1
#define STAR_MAX_PENDING 64
#define STAR_ABORT_TEXT  512

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[32];
    int32_t rank;
    int32_t size;
} star_hello_t;

enum { STAR_READY = 1, STAR_DATA = 2, STAR_ABORT = 3 };

typedef struct {
    uint32_t magic;
    uint32_t type;
    uint64_t seq;
    uint64_t len;
    int32_t status;
    uint32_t pad;
} star_msg_t;

typedef struct {
    mesh_bootstrap_t base;
    int lfd;        /* rank 0: listener */
    int *fds;       /* rank 0: one per rank (fds[0] unused); others: fds[0] is rank 0 */
    uint64_t seq;   /* allgather round */
    uint64_t token; /* unique-id listener to forget on destroy (0: none) */
    mesh_status_t failed;
} star_t;

/* ------------------------------------------------------------ unique-id listeners */

/* Listeners created by mesh_bootstrap_uid_create, found again by rank 0 through the id's token.
 * Part of the process context: fork() children inherit it along with the sockets. */
#define UID_MAX 64
static struct {
    pthread_mutex_t lock;
    struct {
        uint64_t token;
        int fd;
        int in_use;
    } e[UID_MAX];
} uid_table = {.lock = PTHREAD_MUTEX_INITIALIZER};

static mesh_status_t random_bytes(void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return mesh_error(MESH_ERR_IO, "getrandom failed: %m");
        p += n;
        len -= (size_t)n;
    }
    return MESH_OK;
}

static mesh_status_t uid_add(uint64_t token, int fd)
{
    int added = 0;
    pthread_mutex_lock(&uid_table.lock);
    for (int i = 0; i < UID_MAX && !added; i++) {
        if (uid_table.e[i].token == 0) {
            uid_table.e[i].token = token;
            uid_table.e[i].fd = fd;
            uid_table.e[i].in_use = 0;
            added = 1;
        }
    }
    pthread_mutex_unlock(&uid_table.lock);
    if (!added)
        return mesh_error(MESH_ERR_BUSY,
                          "more than %d unique ids are waiting for their "
                          "communicator in this process",
                          UID_MAX);
    return MESH_OK;
}

/* Claims the listener of token; -1 if this process has none, -2 if a communicator uses it. */
static int uid_claim(uint64_t token)
{
    int fd = -1;
    pthread_mutex_lock(&uid_table.lock);
    for (int i = 0; i < UID_MAX; i++) {
        if (uid_table.e[i].token == token) {
            fd = uid_table.e[i].in_use ? -2 : uid_table.e[i].fd;
            uid_table.e[i].in_use = 1;
            break;
        }
    }
    pthread_mutex_unlock(&uid_table.lock);
    return fd;
}

static void uid_forget(uint64_t token)
{
    pthread_mutex_lock(&uid_table.lock);
    for (int i = 0; i < UID_MAX; i++)
        if (uid_table.e[i].token == token)
            uid_table.e[i].token = 0;
    pthread_mutex_unlock(&uid_table.lock);
}

mesh_status_t mesh_bootstrap_uid_create(mesh_unique_id_t *id)
{
    mesh_uid_layout_t u;
    mesh_sockaddr_t local, bound;
    int fd;

    _Static_assert(sizeof(mesh_uid_layout_t) <= MESH_UNIQUE_ID_BYTES, "unique id too small");
    MESH_CHECK(mesh_bootstrap_config_register());
    memset(&u, 0, sizeof(u));
    u.magic = MESH_UID_MAGIC;
    MESH_CHECK(random_bytes(u.secret, sizeof(u.secret)));
    do {
        MESH_CHECK(random_bytes(&u.listener_token, sizeof(u.listener_token)));
    } while (u.listener_token == 0);
    MESH_CHECK(mesh_sock_local_addr(&local));
    MESH_CHECK(mesh_sock_listen(&local, 128, &fd, &bound));
    u.family = bound.ss.ss_family;
    if (bound.ss.ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)&bound.ss;
        u.port = s->sin_port;
        memcpy(u.addr, &s->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&bound.ss;
        u.port = s->sin6_port;
        memcpy(u.addr, &s->sin6_addr, 16);
    }
    mesh_status_t st = uid_add(u.listener_token, fd);
    if (st != MESH_OK) {
        close(fd);
        return st;
    }
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, &u, sizeof(u));
    return MESH_OK;
}

static void uid_addr(const mesh_uid_layout_t *u, mesh_sockaddr_t *a)
{
    memset(a, 0, sizeof(*a));
    if (u->family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)&a->ss;
        s->sin_family = AF_INET;
        s->sin_port = u->port;
        memcpy(&s->sin_addr, u->addr, 4);
        a->len = sizeof(*s);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a->ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = u->port;
        memcpy(&s->sin6_addr, u->addr, 16);
        a->len = sizeof(*s);
    }
}

mesh_status_t mesh_bootstrap_uid_parse(const mesh_unique_id_t *id, mesh_uid_layout_t *u,
                                       mesh_sockaddr_t *addr)
{
    memcpy(u, id->internal, sizeof(*u));
    if (u->magic != MESH_UID_MAGIC || (u->family != AF_INET && u->family != AF_INET6))
        return mesh_error(MESH_ERR_INVALID_ARG, "not a mesh unique id (bad magic or family)");
    uid_addr(u, addr);
    return MESH_OK;
}

/* ------------------------------------------------------------ the star */

static void star_msg(star_msg_t *m, uint32_t type, uint64_t seq, uint64_t len, int32_t status)
{
    memset(m, 0, sizeof(*m));
    m->magic = htonl(STAR_MSG_MAGIC);
    m->type = htonl(type);
    m->seq = htobe64(seq);
    m->len = htobe64(len);
    m->status = (int32_t)htonl((uint32_t)status);
}

static void peer_name(int fd, char *buf, size_t len)
{
    mesh_sockaddr_t a;
    memset(&a, 0, sizeof(a));
    a.len = sizeof(a.ss);
    if (getpeername(fd, (struct sockaddr *)&a.ss, &a.len) != 0)
        snprintf(buf, len, "unknown");
    else
        mesh_sock_addr_str(&a, buf, len);
}

/* The message of the error just reported below us, copied: it is about to be replaced. */
#define LAST_CAUSE(buf) (snprintf(buf, sizeof(buf), "%s", mesh_error_last()), buf)

/* Best effort: tells every connected rank why rank 0 gives up, then the caller closes. */
static void star_abort_all(star_t *s, mesh_status_t st, const char *why)
{
    star_msg_t m;
    size_t n = strnlen(why, STAR_ABORT_TEXT);
    star_msg(&m, STAR_ABORT, s->seq, n, st);
    for (int r = 1; r < s->base.size; r++) {
        if (s->fds[r] < 0)
            continue;
        /* Never blocks: a rank that does not read must not hold up the failure. */
        if (send(s->fds[r], &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(m))
            (void)send(s->fds[r], why, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

/* Lists the ranks with missing[r] set as "rank 3" or "ranks 1, 3, 4". */
static void rank_list(const char *missing, int size, char *buf, size_t len)
{
    int n = 0;
    for (int r = 0; r < size; r++)
        n += missing[r] != 0;
    size_t o = (size_t)snprintf(buf, len, n == 1 ? "rank" : "ranks");
    int shown = 0;
    for (int r = 0; r < size && o + 16 < len; r++) {
        if (!missing[r])
            continue;
        o += (size_t)snprintf(buf + o, len - o, "%s %d", shown ? "," : "", r);
        shown++;
    }
    if (shown < n)
        snprintf(buf + o, len - o, ", ...");
}

/* Fails the star on rank 0: records the error, tells the others, returns st. */
static mesh_status_t star_root_fail(star_t *s, mesh_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mesh_status_t star_root_fail(star_t *s, mesh_status_t st, const char *fmt, ...)
{
    char why[STAR_ABORT_TEXT];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    s->failed = st;
    star_abort_all(s, st, why);
    return mesh_error(st, "%s", why);
}

typedef struct {
    int fd;
    size_t got;
    star_hello_t h;
} star_pending_t;

int mesh_bootstrap_star_hello_parse(const void *buf, size_t len, const uint8_t *secret, int size,
                                    char *why, size_t wlen)
{
    star_hello_t h;
    if (len != sizeof(h)) {
        snprintf(why, wlen, "a hello of %zu bytes, expected %zu", len, sizeof(h));
        return -1;
    }
    memcpy(&h, buf, sizeof(h));
    int rank = (int32_t)ntohl((uint32_t)h.rank);
    int hsize = (int32_t)ntohl((uint32_t)h.size);
    if (ntohl(h.magic) != STAR_HELLO_MAGIC || ntohl(h.version) != STAR_VERSION) {
        snprintf(why, wlen, "not a mesh hello");
        return -1;
    }
    /* Compare all bytes so the time taken does not tell how much of the secret matched. */
    uint8_t diff = 0;
    for (int i = 0; i < 32; i++)
        diff |= (uint8_t)(h.secret[i] ^ secret[i]);
    if (diff != 0) {
        snprintf(why, wlen, "(claims rank %d): wrong secret", rank);
        return -1;
    }
    if (hsize != size) {
        snprintf(why, wlen, "(rank %d): size %d, expected %d", rank, hsize, size);
        return -1;
    }
    if (rank <= 0 || rank >= size) {
        snprintf(why, wlen, "rank %d out of range 1..%d", rank, size - 1);
        return -1;
    }
    return rank;
}

int mesh_bootstrap_star_msg_parse(const void *buf, size_t len, mesh_bootstrap_star_msg_t *out)
{
    star_msg_t m;
    if (len != sizeof(m))
        return -1;
    memcpy(&m, buf, sizeof(m));
    if (ntohl(m.magic) != STAR_MSG_MAGIC)
        return -1;
    out->type = ntohl(m.type);
    out->seq = be64toh(m.seq);
    out->len = be64toh(m.len);
    out->status = (mesh_status_t)(int32_t)ntohl((uint32_t)m.status);
    /* an abort's reason follows, cut to what rank 0 ever sends; its status is an error */
    if (out->type == STAR_ABORT) {
        out->len = out->len > STAR_ABORT_TEXT ? STAR_ABORT_TEXT : out->len;
        if (out->status >= 0)
            out->status = MESH_ERR_BOOTSTRAP;
    }
    return 0;
}

/* Checks a complete hello; returns the rank it claims or -1 (logged) when it is refused. */
static int star_check_hello(star_t *s, const uint8_t *secret, const star_pending_t *p)
{
    char as[80], why[128];
    peer_name(p->fd, as, sizeof(as));
    int rank = mesh_bootstrap_star_hello_parse(&p->h, sizeof(p->h), secret, s->base.size, why,
                                               sizeof(why));
    if (rank < 0) {
        mesh_log_warn("refused bootstrap connection from %s: %s", as, why);
        return -1;
    }
    if (s->fds[rank] >= 0) {
        mesh_log_warn("refused bootstrap connection from %s: rank %d already joined", as, rank);
        return -1;
    }
    return rank;
}

/* Reads whatever part of a hello is available; 1 when complete, -1 when the peer is gone. */
static int star_read_hello(star_pending_t *p)
{
    ssize_t n = recv(p->fd, (char *)&p->h + p->got, sizeof(p->h) - p->got, MSG_DONTWAIT);
    if (n > 0)
        p->got += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        return -1;
    return p->got == sizeof(p->h);
}

static mesh_status_t star_root_accept(star_t *s, const uint8_t *secret, double deadline)
{
    star_pending_t pend[STAR_MAX_PENDING];
    struct pollfd pfd[STAR_MAX_PENDING + 1];
    int npend = 0, joined = 1;
    char as[80];

    while (joined < s->base.size) {
        double left = deadline - mesh_time();
        if (left <= 0) {
            char missing[s->base.size], list[256];
            for (int r = 0; r < s->base.size; r++)
                missing[r] = r > 0 && s->fds[r] < 0;
            rank_list(missing, s->base.size, list, sizeof(list));
            for (int i = 0; i < npend; i++)
                close(pend[i].fd);
            return star_root_fail(s, MESH_ERR_TIMEOUT,
                                  "bootstrap rank 0: %s never joined within %.1f s (%d of %d "
                                  "ranks joined)",
                                  list, s->base.timeout_s, joined, s->base.size);
        }
        pfd[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (int i = 0; i < npend; i++)
            pfd[i + 1] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
        int ms = left * 1e3 > 200 ? 200 : (int)(left * 1e3) + 1;
        if (poll(pfd, (nfds_t)npend + 1, ms) < 0 && errno != EINTR)
            return star_root_fail(s, MESH_ERR_IO, "bootstrap rank 0: poll failed: %m");
        /* Hellos first (from the end, so that removing one keeps the indices below valid). */
        for (int i = npend - 1; i >= 0; i--) {
            if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int done = star_read_hello(&pend[i]);
            if (done == 0)
                continue;
            int rank = -1;
            if (done < 0) {
                peer_name(pend[i].fd, as, sizeof(as));
                mesh_log_warn("dropped bootstrap connection from %s: closed before its hello", as);
            } else {
                rank = star_check_hello(s, secret, &pend[i]);
            }
            if (rank > 0) {
                s->fds[rank] = pend[i].fd;
                joined++;
                mesh_log_debug("bootstrap rank %d joined (%d of %d)", rank, joined, s->base.size);
            } else {
                close(pend[i].fd);
            }
            pend[i] = pend[--npend];
        }
        if ((pfd[0].revents & POLLIN) && npend == STAR_MAX_PENDING) {
            /* Connections that never send a hello must not lock the real ranks out. */
            peer_name(pend[0].fd, as, sizeof(as));
            mesh_log_warn("dropped bootstrap connection from %s: no hello while %d others wait", as,
                          npend - 1);
            close(pend[0].fd);
            pend[0] = pend[--npend];
        }
        if (pfd[0].revents & POLLIN) {
            int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd >= 0)
                pend[npend++] = (star_pending_t){.fd = fd, .got = 0};
            else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                return star_root_fail(s, MESH_ERR_IO, "bootstrap rank 0: accept failed: %m");
        }
    }
    for (int i = 0; i < npend; i++) {
        peer_name(pend[i].fd, as, sizeof(as));
        mesh_log_warn("dropped bootstrap connection from %s: every rank already joined", as);
        close(pend[i].fd);
    }
    star_msg_t m;
    star_msg(&m, STAR_READY, 0, 0, 0);
    for (int r = 1; r < s->base.size; r++) {
        mesh_sock_set_nonblocking(s->fds[r], 0);
        mesh_sock_set_nodelay(s->fds[r]);
        mesh_status_t st = mesh_sock_send_all(s->fds[r], &m, sizeof(m), deadline + 1);
        if (st != MESH_OK)
            return star_root_fail(s, st, "bootstrap rank 0: cannot reach rank %d: %s", r,
                                  mesh_error_last());
    }
    return MESH_OK;
}

/* Non-root: rank 0 gave up and said why (m is its abort message); fails with its status. */
static mesh_status_t star_root_gave_up(star_t *s, const mesh_bootstrap_star_msg_t *m)
{
    char why[STAR_ABORT_TEXT + 1];
    size_t l = (size_t)m->len;
    if (mesh_sock_recv_quiet(s->fds[0], why, l, mesh_time() + 1.0) != MESH_OK)
        l = 0;
    why[l] = '\0';
    return s->failed = mesh_error(m->status, "bootstrap rank %d: rank 0 gave up: %s", s->base.rank,
                                  l ? why : "no reason given");
}

/* Non-root: the connection to rank 0 failed with st. Rank 0 may have sent its reason before it
 * closed (our own send then fails); that reason names the rank at fault, so prefer it. */
static mesh_status_t star_lost_root(star_t *s, mesh_status_t st)
{
    char cause[STAR_ABORT_TEXT];
    star_msg_t raw;
    mesh_bootstrap_star_msg_t m;
    LAST_CAUSE(cause);
    if (st == MESH_ERR_PEER_FAILED &&
        mesh_sock_recv_quiet(s->fds[0], &raw, sizeof(raw), mesh_time() + 0.2) == MESH_OK &&
        mesh_bootstrap_star_msg_parse(&raw, sizeof(raw), &m) == 0 && m.type == STAR_ABORT)
        return star_root_gave_up(s, &m);
    return s->failed =
               mesh_error(st, "bootstrap rank %d: lost rank 0 (the root): %s", s->base.rank, cause);
}

/* Non-root: receives the next message from rank 0 and checks it (type, round, length). An
 * abort from rank 0 fails with rank 0's status and reason. */
static mesh_status_t star_recv_root(star_t *s, uint32_t type, uint64_t len, double deadline)
{
    star_msg_t raw;
    mesh_bootstrap_star_msg_t m;
    /* Rank 0 reports the real cause at its own deadline; give its message time to arrive. */
    double d = deadline + 0.5 + 0.05 * s->base.timeout_s;
    mesh_status_t st = mesh_sock_recv_all(s->fds[0], &raw, sizeof(raw), d);
    if (st != MESH_OK)
        return star_lost_root(s, st);
    if (mesh_bootstrap_star_msg_parse(&raw, sizeof(raw), &m) != 0)
        return s->failed = mesh_error(MESH_ERR_BOOTSTRAP, "bootstrap rank %d: garbage from rank 0",
                                      s->base.rank);
    uint32_t t = m.type;
    uint64_t l = m.len, q = m.seq;
    if (t == STAR_ABORT)
        return star_root_gave_up(s, &m);
    if (t != type || l != len || (t == STAR_DATA && q != s->seq))
        return s->failed = mesh_error(MESH_ERR_BOOTSTRAP,
                                      "bootstrap rank %d: unexpected message from rank 0 (type %u "
                                      "round %llu length %llu, expected type %u round %llu "
                                      "length %llu)",
                                      s->base.rank, t, (unsigned long long)q, (unsigned long long)l,
                                      type, (unsigned long long)s->seq, (unsigned long long)len);
    return MESH_OK;
}

static mesh_status_t star_root_allgather(star_t *s, char *out, size_t len, double deadline)
{
    int size = s->base.size, left = size - 1;
    char done[size];
    struct pollfd pfd[size];
    star_msg_t m;
    mesh_status_t st;

    memset(done, 0, sizeof(done));
    done[0] = 1;
    while (left > 0) {
        double tl = deadline - mesh_time();
        if (tl <= 0) {
            char list[256];
            for (int r = 0; r < size; r++)
                done[r] = !done[r];
            rank_list(done, size, list, sizeof(list));
            return star_root_fail(s, MESH_ERR_TIMEOUT,
                                  "bootstrap rank 0: allgather round %llu: "
                                  "no data from %s within %.1f s",
                                  (unsigned long long)s->seq, list, s->base.timeout_s);
        }
        int n = 0, ms = tl * 1e3 > 200 ? 200 : (int)(tl * 1e3) + 1;
        for (int r = 1; r < size; r++)
            if (!done[r])
                pfd[n++] = (struct pollfd){.fd = s->fds[r], .events = POLLIN};
        if (poll(pfd, (nfds_t)n, ms) < 0 && errno != EINTR)
            return star_root_fail(s, MESH_ERR_IO, "bootstrap rank 0: poll failed: %m");
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents)
                continue;
            int r = 1;
            while (s->fds[r] != pfd[i].fd)
                r++;
            st = mesh_sock_recv_all(s->fds[r], &m, sizeof(m), deadline);
            mesh_bootstrap_star_msg_t h = {0};
            if (st == MESH_OK && (mesh_bootstrap_star_msg_parse(&m, sizeof(m), &h) != 0 ||
                                  h.type != STAR_DATA || h.seq != s->seq || h.len != len)) {
                return star_root_fail(s, MESH_ERR_BOOTSTRAP,
                                      "bootstrap rank 0: rank %d sent round %llu length %llu, "
                                      "expected round %llu length %zu",
                                      r, (unsigned long long)h.seq, (unsigned long long)h.len,
                                      (unsigned long long)s->seq, len);
            }
            if (st == MESH_OK)
                st = mesh_sock_recv_all(s->fds[r], out + (size_t)r * len, len, deadline);
            if (st != MESH_OK)
                return star_root_fail(s, st, "bootstrap rank 0: lost rank %d: %s", r,
                                      mesh_error_last());
            done[r] = 1;
            left--;
        }
    }
    star_msg(&m, STAR_DATA, s->seq, (uint64_t)size * len, 0);
    for (int r = 1; r < size; r++) {
        st = mesh_sock_send_all(s->fds[r], &m, sizeof(m), deadline);
        if (st == MESH_OK)
            st = mesh_sock_send_all(s->fds[r], out, (size_t)size * len, deadline);
        if (st != MESH_OK)
            return star_root_fail(s, st, "bootstrap rank 0: lost rank %d: %s", r,
                                  mesh_error_last());
    }
    return MESH_OK;
}

static mesh_status_t star_allgather(mesh_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    star_t *s = (star_t *)bs;
    double deadline = mesh_time() + bs->timeout_s;
    mesh_status_t st;

    if (s->failed)
        return mesh_error(s->failed, "bootstrap rank %d: an earlier bootstrap step failed",
                          bs->rank);
    if (len > 0 && in != (char *)out + (size_t)bs->rank * len)
        memmove((char *)out + (size_t)bs->rank * len, in, len);
    if (bs->size == 1) {
        s->seq++;
        return MESH_OK;
    }
    if (bs->rank == 0) {
        MESH_CHECK(star_root_allgather(s, out, len, deadline));
    } else {
        star_msg_t m;
        star_msg(&m, STAR_DATA, s->seq, len, 0);
        st = mesh_sock_send_all(s->fds[0], &m, sizeof(m), deadline);
        if (st == MESH_OK)
            st = mesh_sock_send_all(s->fds[0], in, len, deadline);
        if (st != MESH_OK)
            return star_lost_root(s, st);
        MESH_CHECK(star_recv_root(s, STAR_DATA, (uint64_t)bs->size * len, deadline));
        st = mesh_sock_recv_all(s->fds[0], out, (size_t)bs->size * len, deadline);
        if (st != MESH_OK)
            return star_lost_root(s, st);
    }
    s->seq++;
    return MESH_OK;
}

static void star_destroy(mesh_bootstrap_t *bs)
{
    star_t *s = (star_t *)bs;
    if (s == NULL)
        return;
    for (int r = 0; r < bs->size; r++)
        if (s->fds[r] >= 0)
            close(s->fds[r]);
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->token != 0)
        uid_forget(s->token);
    free(s->fds);
    free(s);
}

static mesh_status_t star_create(int rank, int size, double timeout_s, const uint8_t secret[32],
                                 int lfd, const mesh_sockaddr_t *root, uint64_t token,
                                 mesh_bootstrap_t **bs)
{
    star_t *s = calloc(1, sizeof(*s));
    int *fds = calloc((size_t)size, sizeof(int));
    double deadline = mesh_time() + timeout_s;
    mesh_status_t st;

    if (s == NULL || fds == NULL) {
        free(s);
        free(fds);
        if (lfd >= 0)
            close(lfd);
        if (token != 0)
            uid_forget(token);
        return mesh_error(MESH_ERR_NO_MEMORY, "bootstrap rank %d: no memory for %d ranks", rank,
                          size);
    }
    for (int r = 0; r < size; r++)
        fds[r] = -1;
    if (timeout_s <= 0) {
        timeout_s = mesh_default_timeout();
        deadline = mesh_time() + timeout_s;
    }
    *s = (star_t){.base = {.rank = rank,
                           .size = size,
                           .timeout_s = timeout_s,
                           .allgather = star_allgather,
                           .destroy = star_destroy},
                  .lfd = lfd,
                  .fds = fds,
                  .token = token};
    if (rank == 0) {
        /* poll() said readable, but a connection reset meanwhile must not block accept. */
        MESH_CHECK_GOTO(mesh_sock_set_nonblocking(lfd, 1), st, err);
        MESH_CHECK_GOTO(star_root_accept(s, secret, deadline), st, err);
    } else {
        char as[80];
        star_hello_t h = {.magic = htonl(STAR_HELLO_MAGIC),
                          .version = htonl(STAR_VERSION),
                          .rank = (int32_t)htonl((uint32_t)rank),
                          .size = (int32_t)htonl((uint32_t)size)};
        memcpy(h.secret, secret, sizeof(h.secret));
        st = mesh_sock_connect(root, deadline, &s->fds[0]);
        if (st == MESH_OK) {
            mesh_sock_set_nodelay(s->fds[0]);
            st = mesh_sock_send_all(s->fds[0], &h, sizeof(h), deadline);
        }
        if (st != MESH_OK) {
            char cause[STAR_ABORT_TEXT];
            st = mesh_error(st, "bootstrap rank %d: cannot reach rank 0 (the root) at %s: %s", rank,
                            mesh_sock_addr_str(root, as, sizeof(as)), LAST_CAUSE(cause));
            goto err;
        }
        MESH_CHECK_GOTO(star_recv_root(s, STAR_READY, 0, deadline), st, err);
    }
    mesh_log_debug("bootstrap rank %d of %d ready", rank, size);
    *bs = &s->base;
    return MESH_OK;
err:
    star_destroy(&s->base);
    return st;
}

mesh_status_t mesh_bootstrap_star_create(int rank, int size, double timeout_s,
                                         const uint8_t secret[32], int lfd,
                                         const mesh_sockaddr_t *root, mesh_bootstrap_t **bs)
{
    if (size < 1 || rank < 0 || rank >= size || (rank == 0 && lfd < 0) ||
        (rank > 0 && root == NULL)) {
        if (lfd >= 0)
            close(lfd);
        return mesh_error(MESH_ERR_INVALID_ARG, "bootstrap: bad rank %d of size %d", rank, size);
    }
    return star_create(rank, size, timeout_s, secret, lfd, root, 0, bs);
}

mesh_status_t mesh_bootstrap_tcp_create(const mesh_unique_id_t *id, int rank, int size,
                                        double timeout_s, mesh_bootstrap_t **bs)
{
    mesh_uid_layout_t u;
    mesh_sockaddr_t addr;
    char as[80];
    int lfd = -1;
    uint64_t token = 0;

    MESH_CHECK(mesh_bootstrap_config_register());
    MESH_CHECK(mesh_bootstrap_uid_parse(id, &u, &addr));
    if (size < 1 || rank < 0 || rank >= size)
        return mesh_error(MESH_ERR_INVALID_ARG, "bad rank %d for size %d", rank, size);
    if (rank == 0) {
        lfd = uid_claim(u.listener_token);
        if (lfd == -2)
            return mesh_error(MESH_ERR_BUSY, "the listener of this unique id is already in use "
                                             "by another communicator");
        if (lfd >= 0) {
            token = u.listener_token;
        } else {
            /* Not created in this process: listen on the id's address, which must be here. */
            if (!mesh_sock_addr_is_local(&addr))
                return mesh_error(MESH_ERR_BOOTSTRAP,
                                  "rank 0 must run on the host of the unique "
                                  "id's address %s (create the id in rank 0's process)",
                                  mesh_sock_addr_str(&addr, as, sizeof(as)));
            MESH_CHECK(mesh_sock_listen(&addr, 128, &lfd, NULL));
        }
    }
    return star_create(rank, size, timeout_s, u.secret, lfd, &addr, token, bs);
}
