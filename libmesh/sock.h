/* Socket helpers shared by the bootstrap and the tcp transport. Every blocking helper takes an
 * absolute deadline (mesh_time() seconds) and fails with MESH_ERR_TIMEOUT past it. */
#ifndef MESH_SOCK_H
#define MESH_SOCK_H

#include "mesh.h"
#include <stddef.h>
#include <sys/socket.h>

typedef struct {
    struct sockaddr_storage ss;
    socklen_t len;
} mesh_sockaddr_t;

/* "host:port", "[v6]:port" or "host" (port 0). */
mesh_status_t mesh_sock_parse_addr(const char *text, mesh_sockaddr_t *out);
/* Renders "a.b.c.d:port" into buf. */
const char *mesh_sock_addr_str(const mesh_sockaddr_t *a, char *buf, size_t len);
/* The address other hosts should use to reach this one: MESH_SOCKET_IFNAME's interface if set,
 * else the first non-loopback up interface, else loopback. */
mesh_status_t mesh_sock_local_addr(mesh_sockaddr_t *out);
/* Whether addr (port ignored) belongs to this host, i.e. a socket can bind to it. */
int mesh_sock_addr_is_local(const mesh_sockaddr_t *addr);

/* Listening socket bound to addr (port 0: any); *bound gets the actual address. */
mesh_status_t mesh_sock_listen(const mesh_sockaddr_t *addr, int backlog, int *fd,
                               mesh_sockaddr_t *bound);
/* Connects, retrying refused connections until the deadline. */
mesh_status_t mesh_sock_connect(const mesh_sockaddr_t *addr, double deadline, int *fd);
/* Accepts one connection before the deadline. */
mesh_status_t mesh_sock_accept(int lfd, double deadline, int *fd);
/* Sends or receives exactly len bytes before the deadline (EOF: MESH_ERR_PEER_FAILED). */
mesh_status_t mesh_sock_send_all(int fd, const void *buf, size_t len, double deadline);
mesh_status_t mesh_sock_recv_all(int fd, void *buf, size_t len, double deadline);
/* As mesh_sock_recv_all, reporting nothing (a peer that may be gone). */
mesh_status_t mesh_sock_recv_quiet(int fd, void *buf, size_t len, double deadline);
mesh_status_t mesh_sock_set_nonblocking(int fd, int on);
void mesh_sock_set_nodelay(int fd);

/* The sockets' table: MESH_SOCKET_IFNAME. */
mesh_status_t mesh_sock_config_register(void);

#endif
