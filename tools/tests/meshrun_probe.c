/*
 * Helper of the meshrun tests, run under meshrun. Rank 0 listens on the port of MESH_ADDR on
 * every address of its node; every other rank connects to MESH_ADDR, and while that connection
 * proves rank 0 is listening, a rank on another node also checks that 127.0.0.1 on that port
 * is refused (its loopback is its own namespace's). Exit 0 when all of it held.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int probe_connect(const char *host, int port, int *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        *err = errno;
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

static int probe_root(int port, int size)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, size) < 0) {
        fprintf(stderr, "probe: rank 0 cannot listen on port %d: %s\n", port, strerror(errno));
        return 1;
    }
    for (int i = 1; i < size; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 20000) != 1) {
            fprintf(stderr, "probe: rank 0 got %d of %d connections\n", i - 1, size - 1);
            return 1;
        }
        int c = accept(fd, NULL, NULL);
        char verdict = 0;
        /* the peer reports its loopback check, then closes */
        if (c < 0 || read(c, &verdict, 1) != 1 || verdict != 'y') {
            fprintf(stderr, "probe: a peer reported a failed check ('%c')\n", verdict);
            return 1;
        }
        close(c);
    }
    close(fd);
    printf("probe: rank 0 heard from %d peers\n", size - 1);
    return 0;
}

int main(void)
{
    const char *rank_s = getenv("MESH_RANK"), *size_s = getenv("MESH_SIZE");
    const char *addr = getenv("MESH_ADDR"), *node = getenv("MESH_NODE_ID");
    char host[64];
    int err = 0, port;

    if (!rank_s || !size_s || !addr || !node) {
        fprintf(stderr, "probe: MESH_RANK/MESH_SIZE/MESH_ADDR/MESH_NODE_ID not set\n");
        return 1;
    }
    int rank = atoi(rank_s), size = atoi(size_s);
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof(host))
        return 1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    port = atoi(colon + 1);
    if (rank == 0)
        return probe_root(port, size);

    int fd = -1;
    for (int i = 0; i < 400 && fd < 0; i++) {
        fd = probe_connect(host, port, &err);
        if (fd < 0)
            usleep(25000);
    }
    if (fd < 0) {
        fprintf(stderr, "probe: rank %d cannot reach %s: %s\n", rank, addr, strerror(err));
        return 1;
    }
    char verdict = 'y';
    if (strcmp(node, "node0") != 0) {
        int lo = probe_connect("127.0.0.1", port, &err);
        if (lo >= 0 || err != ECONNREFUSED) {
            fprintf(stderr, "probe: rank %d on %s reached rank 0 through 127.0.0.1 (%s)\n", rank,
                    node, lo >= 0 ? "connected" : strerror(err));
            verdict = 'n';
            if (lo >= 0)
                close(lo);
        }
    }
    if (write(fd, &verdict, 1) != 1)
        return 1;
    close(fd);
    printf("probe: rank %d on %s reached %s%s\n", rank, node, addr,
           strcmp(node, "node0") ? ", loopback refused" : "");
    return verdict == 'y' ? 0 : 1;
}
