/* A port for a listener that a launcher or a test opens on the host's loopback, header only
 * (meshrun links no library). It is drawn from 20000 up to the kernel's ephemeral range, never
 * inside it: outgoing connections take ports from that range at any moment, so a port found
 * free there may be gone before the listener binds it. */
#ifndef MESH_LISTEN_PORT_H
#define MESH_LISTEN_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#define MESH_LISTEN_PORT_MIN 20000u

/* The end (exclusive) of the ports to draw from: the first port of the ephemeral range, or
 * Linux's default 32768 where the range cannot be read or leaves too little below it. */
static inline unsigned mesh_listen_port_top(void)
{
    unsigned lo = 0, hi = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%u %u", &lo, &hi) != 2)
            lo = 0;
        fclose(f);
    }
    return lo > MESH_LISTEN_PORT_MIN + 1000 && lo <= 65536 ? lo : 32768;
}

/* A port p such that p .. p + count - 1 all bind on 127.0.0.1 now, drawn with rnd(arg) from
 * MESH_LISTEN_PORT_MIN up to mesh_listen_port_top(); -1 when 200 draws found none or rnd
 * failed (returned nonzero). */
static inline int mesh_listen_port_pick(int count, int (*rnd)(void *arg, unsigned *out), void *arg)
{
    const unsigned top = mesh_listen_port_top();
    for (int tries = 0; tries < 200; tries++) {
        unsigned r;
        if (rnd(arg, &r) != 0)
            return -1;
        const unsigned port = MESH_LISTEN_PORT_MIN + r % (top - MESH_LISTEN_PORT_MIN - count + 1);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = 1;
        for (int k = 0; k < count && ok; k++) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
                return -1;
            a.sin_port = htons((uint16_t)(port + (unsigned)k));
            ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
            close(fd);
        }
        if (ok)
            return (int)port;
    }
    return -1;
}

#endif
