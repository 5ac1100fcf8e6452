/* A loopback port for a test's own listener, drawn below the kernel's ephemeral range: a port
 * from that range, free when checked, may be taken by any outgoing connection (of the tests
 * running beside this one, UCX's among them) before the test binds it. */
#ifndef MESH_TEST_FREE_PORT_H
#define MESH_TEST_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A port in 20000 up to the ephemeral range that nobody listens on now (and, with want_next,
 * whose successor is free too); -1 when none was found. The seed is per process, so tests
 * running side by side do not all try the same ports first. */
static inline int mesh_test_free_port(int want_next)
{
    unsigned lo = 32768, hi;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%u %u", &lo, &hi) != 2 || lo <= 21000) lo = 32768;
        fclose(f);
    }
    static unsigned seed;
    if (seed == 0) seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int tries = 0; tries < 200; tries++) {
        int port = 20000 + rand_r(&seed) % (int)(lo - 20001);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = 1;
        for (int k = 0; k <= (want_next != 0) && ok; k++) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0) return -1;
            a.sin_port = htons((uint16_t)(port + k));
            ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
            close(fd);
        }
        if (ok) return port;
    }
    return -1;
}

#endif
