/* Socket helpers: address parsing, local address choice and deadline-bounded blocking I/O. */
#define MESH_LOG_SUBSYSTEM "sock"
#include <config.h> /* the generated one: _GNU_SOURCE for accept4 */
#include "libmesh/sock.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Milliseconds left before deadline for poll(), capped so that callers re-check often. */
static int ms_left(double deadline, int cap_ms)
{
    double left = deadline - mesh_time();
    if (left <= 0)
        return 0;
    double ms = left * 1e3 + 1;
    return ms > cap_ms ? cap_ms : (int)ms;
}

static mesh_status_t parse_port(const char *text, const char *p, uint16_t *port)
{
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*p == '\0' || *end != '\0' || errno || v < 0 || v > 65535)
        return mesh_error(MESH_ERR_INVALID_ARG, "bad port in address '%s'", text);
    *port = (uint16_t)v;
    return MESH_OK;
}

mesh_status_t mesh_sock_parse_addr(const char *text, mesh_sockaddr_t *out)
{
    char host[256];
    uint16_t port = 0;
    const char *colon;

    if (text == NULL || *text == '\0')
        return mesh_error(MESH_ERR_INVALID_ARG, "empty socket address");
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || (close[1] != '\0' && close[1] != ':') ||
            (size_t)(close - text - 1) >= sizeof(host))
            return mesh_error(MESH_ERR_INVALID_ARG, "bad address '%s' (want [v6]:port)", text);
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        if (close[1] == ':')
            MESH_CHECK(parse_port(text, close + 2, &port));
    } else if ((colon = strrchr(text, ':')) != NULL && strchr(text, ':') == colon) {
        if ((size_t)(colon - text) >= sizeof(host))
            return mesh_error(MESH_ERR_INVALID_ARG, "host name too long in '%s'", text);
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = '\0';
        MESH_CHECK(parse_port(text, colon + 1, &port));
    } else {
        /* No colon, or a bare IPv6 address without brackets: no port. */
        if (strlen(text) >= sizeof(host))
            return mesh_error(MESH_ERR_INVALID_ARG, "host name too long in '%s'", text);
        strcpy(host, text);
    }
    if (host[0] == '\0')
        return mesh_error(MESH_ERR_INVALID_ARG, "no host in address '%s'", text);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return mesh_error(MESH_ERR_NOT_FOUND, "cannot resolve '%s': %s", host, gai_strerror(rc));
    /* Prefer IPv4: it is what the local address choice and most launchers hand out. */
    struct addrinfo *pick = res;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    }
    mesh_sockaddr_t a;
    memset(&a, 0, sizeof(a));
    memcpy(&a.ss, pick->ai_addr, pick->ai_addrlen);
    a.len = pick->ai_addrlen;
    freeaddrinfo(res);
    if (a.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&a.ss)->sin_port = htons(port);
    else if (a.ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a.ss)->sin6_port = htons(port);
    else
        return mesh_error(MESH_ERR_UNSUPPORTED, "address '%s' is neither IPv4 nor IPv6", text);
    *out = a;
    return MESH_OK;
}

const char *mesh_sock_addr_str(const mesh_sockaddr_t *a, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
    } else if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
    } else {
        snprintf(buf, len, "<family %d>", a->ss.ss_family);
    }
    return buf;
}

static void set_from_ifa(const struct ifaddrs *ifa, mesh_sockaddr_t *out)
{
    memset(out, 0, sizeof(*out));
    out->len = ifa->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                   : sizeof(struct sockaddr_in6);
    memcpy(&out->ss, ifa->ifa_addr, out->len);
}

static const mesh_config_entry_t mesh_sock_entries[] = {
    {.name = "SOCKET_IFNAME",
     .dflt = "",
     .type = MESH_CFG_STRING,
     .doc = "Interface name prefix for bootstrap and tcp sockets (e.g. eth, ib0). Unset: the "
            "first non-loopback interface that is up, else loopback."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_sock_table = {"sock", mesh_sock_entries};

mesh_status_t mesh_sock_config_register(void)
{
    return mesh_config_register(&mesh_sock_table);
}

mesh_status_t mesh_sock_local_addr(mesh_sockaddr_t *out)
{
    struct ifaddrs *ifas = NULL;
    const struct ifaddrs *v4 = NULL, *v6 = NULL;

    MESH_CHECK(mesh_sock_config_register());
    const char *prefix = mesh_config_str("SOCKET_IFNAME");

    if (getifaddrs(&ifas) != 0)
        return mesh_error(MESH_ERR_IO, "getifaddrs failed: %m");
    for (const struct ifaddrs *ifa = ifas; ifa != NULL; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP))
            continue;
        int fam = ifa->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        if (prefix != NULL && *prefix != '\0') {
            if (strncmp(ifa->ifa_name, prefix, strlen(prefix)) != 0)
                continue;
        } else if (ifa->ifa_flags & IFF_LOOPBACK) {
            continue;
        }
        if (fam == AF_INET && v4 == NULL)
            v4 = ifa;
        /* Link-local IPv6 needs a scope id that peers cannot know; skip it. */
        if (fam == AF_INET6 && v6 == NULL &&
            !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
            v6 = ifa;
    }
    mesh_sockaddr_t a;
    if (v4 != NULL || v6 != NULL) {
        set_from_ifa(v4 != NULL ? v4 : v6, &a);
        freeifaddrs(ifas);
    } else {
        freeifaddrs(ifas);
        if (prefix != NULL && *prefix != '\0')
            return mesh_error(MESH_ERR_NOT_FOUND, "no up interface matches MESH_SOCKET_IFNAME=%s",
                              prefix);
        struct sockaddr_in *s = (struct sockaddr_in *)&a.ss;
        memset(&a, 0, sizeof(a));
        s->sin_family = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.len = sizeof(*s);
    }
    if (a.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&a.ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&a.ss)->sin6_port = 0;
    *out = a;
    return MESH_OK;
}

int mesh_sock_addr_is_local(const mesh_sockaddr_t *addr)
{
    mesh_sockaddr_t a = *addr;
    int fd = socket(a.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (a.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&a.ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&a.ss)->sin6_port = 0;
    int ok = bind(fd, (struct sockaddr *)&a.ss, a.len) == 0;
    close(fd);
    return ok;
}

mesh_status_t mesh_sock_listen(const mesh_sockaddr_t *addr, int backlog, int *fd,
                               mesh_sockaddr_t *bound)
{
    char as[80];
    int one = 1;
    int s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return mesh_error(MESH_ERR_IO, "socket for %s failed: %m",
                          mesh_sock_addr_str(addr, as, sizeof(as)));
    if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(s, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(s, backlog) != 0) {
        int err = errno;
        close(s);
        errno = err;
        /* EADDRNOTAVAIL tells callers the address is not on this host. */
        return mesh_error(err == EADDRNOTAVAIL ? MESH_ERR_NOT_FOUND : MESH_ERR_IO,
                          "cannot listen on %s: %m", mesh_sock_addr_str(addr, as, sizeof(as)));
    }
    mesh_sockaddr_t b;
    memset(&b, 0, sizeof(b));
    b.len = sizeof(b.ss);
    if (getsockname(s, (struct sockaddr *)&b.ss, &b.len) != 0) {
        mesh_status_t st = mesh_error(MESH_ERR_IO, "getsockname on listener %s failed: %m",
                                      mesh_sock_addr_str(addr, as, sizeof(as)));
        close(s);
        return st;
    }
    *fd = s;
    if (bound != NULL)
        *bound = b;
    return MESH_OK;
}

static int retryable_connect_errno(int err)
{
    return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
           err == ECONNRESET || err == EAGAIN || err == EINTR;
}

/* One non-blocking connect attempt; returns 0 (connected), else the errno. */
static int connect_once(const mesh_sockaddr_t *addr, double deadline, int *fd)
{
    int s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return errno;
    int err = 0;
    if (connect(s, (const struct sockaddr *)&addr->ss, addr->len) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {.fd = s, .events = POLLOUT};
            int n;
            do {
                n = poll(&p, 1, ms_left(deadline, 1000));
            } while ((n == 0 && mesh_time() < deadline) || (n < 0 && errno == EINTR));
            if (n == 0) {
                err = ETIMEDOUT;
            } else {
                socklen_t l = sizeof(err);
                if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
                    err = errno;
            }
        }
    }
    if (err != 0) {
        close(s);
        return err;
    }
    *fd = s;
    return 0;
}

mesh_status_t mesh_sock_connect(const mesh_sockaddr_t *addr, double deadline, int *fd)
{
    char as[80];
    double delay = 0.005;
    int err;
    for (;;) {
        int s = -1;
        err = connect_once(addr, deadline, &s);
        if (err == 0) {
            mesh_status_t st = mesh_sock_set_nonblocking(s, 0);
            if (st != MESH_OK) {
                close(s);
                return st;
            }
            *fd = s;
            return MESH_OK;
        }
        if (!retryable_connect_errno(err))
            break;
        double left = deadline - mesh_time();
        if (left <= 0)
            break;
        /* The listener may simply not be up yet: retry with a growing pause. */
        usleep((useconds_t)((delay < left ? delay : left) * 1e6));
        delay = delay * 2 > 0.2 ? 0.2 : delay * 2;
    }
    errno = err;
    if (retryable_connect_errno(err))
        return mesh_error(MESH_ERR_TIMEOUT, "connect to %s timed out (last error: %m)",
                          mesh_sock_addr_str(addr, as, sizeof(as)));
    return mesh_error(MESH_ERR_IO, "connect to %s failed: %m",
                      mesh_sock_addr_str(addr, as, sizeof(as)));
}

mesh_status_t mesh_sock_accept(int lfd, double deadline, int *fd)
{
    for (;;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int n = poll(&p, 1, ms_left(deadline, 1000));
        if (n < 0 && errno != EINTR)
            return mesh_error(MESH_ERR_IO, "poll on listener failed: %m");
        if (n > 0) {
            int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (s >= 0) {
                mesh_status_t st = mesh_sock_set_nonblocking(s, 0);
                if (st != MESH_OK) {
                    close(s);
                    return st;
                }
                *fd = s;
                return MESH_OK;
            }
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                return mesh_error(MESH_ERR_IO, "accept failed: %m");
        }
        if (mesh_time() >= deadline)
            return mesh_error(MESH_ERR_TIMEOUT, "no connection arrived before the deadline");
    }
}

static mesh_status_t peer_str_error(mesh_status_t st, int fd, const char *what)
{
    char as[80];
    mesh_sockaddr_t a;
    int err = errno;
    memset(&a, 0, sizeof(a));
    a.len = sizeof(a.ss);
    if (getpeername(fd, (struct sockaddr *)&a.ss, &a.len) != 0)
        snprintf(as, sizeof(as), "socket %d", fd);
    else
        mesh_sock_addr_str(&a, as, sizeof(as));
    errno = err;
    if (st == MESH_ERR_IO)
        return mesh_error(st, "%s %s failed: %m", what, as);
    if (st == MESH_ERR_PEER_FAILED)
        return mesh_error(st, "%s %s: connection closed", what, as);
    return mesh_error(st, "%s %s timed out", what, as);
}

/* Sends (out) or receives exactly len bytes before the deadline; a failure is reported unless
 * quiet. */
static mesh_status_t sock_move(int fd, char *p, size_t len, double deadline, int out, int quiet)
{
    while (len > 0) {
        ssize_t n =
            out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        mesh_status_t st = MESH_OK;
        if ((!out && n == 0) || errno == ECONNRESET || (out && errno == EPIPE))
            st = MESH_ERR_PEER_FAILED;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            st = MESH_ERR_IO;
        else if (mesh_time() >= deadline)
            st = MESH_ERR_TIMEOUT;
        if (st != MESH_OK)
            return quiet ? st : peer_str_error(st, fd, out ? "send to" : "receive from");
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        poll(&pf, 1, ms_left(deadline, 1000));
    }
    return MESH_OK;
}

mesh_status_t mesh_sock_send_all(int fd, const void *buf, size_t len, double deadline)
{
    return sock_move(fd, (char *)buf, len, deadline, 1, 0);
}

mesh_status_t mesh_sock_recv_all(int fd, void *buf, size_t len, double deadline)
{
    return sock_move(fd, buf, len, deadline, 0, 0);
}

mesh_status_t mesh_sock_recv_quiet(int fd, void *buf, size_t len, double deadline)
{
    return sock_move(fd, buf, len, deadline, 0, 1);
}

mesh_status_t mesh_sock_set_nonblocking(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) != 0)
        return mesh_error(MESH_ERR_IO, "fcntl on socket %d failed: %m", fd);
    return MESH_OK;
}

void mesh_sock_set_nodelay(int fd)
{
    int one = 1;
    /* Best effort: only latency depends on it. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
