/*
 * Fuzz target: the tcp transport's receive side. The input's bytes are what a peer sends on a
 * connection to our listener: the connection hello, then chunk headers and payloads. Byte 0
 * says how many receives (tags 0..3) are posted before the bytes arrive (the others are posted
 * after, matching unexpected messages), byte 1 their sizes. A real interface and endpoint run
 * it, over loopback.
 */
#include "config.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_tl.h"
#include "transports/tcp/tcp.h"

#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_UID 0x6d65736866757a7aull /* the corpus's hellos carry it */

static const mesh_tl_ops_t *tcp_ops(void)
{
    static const mesh_tl_ops_t *ops;
    if (ops == NULL) {
        setenv("MESH_LOG_FILE", "/dev/null", 0);
        setenv("MESH_TCP_STREAMS", "2", 0);
        if (mesh_tl_global_init() != MESH_OK || (ops = mesh_tl_find("tcp")) == NULL)
            abort();
    }
    return ops;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static int ep_failed(mesh_tl_ep_t *ep)
{
    return ((mesh_tl_tcp_ep_t *)ep)->failed != MESH_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const mesh_tl_ops_t *ops = tcp_ops();
    int fds = open_fds();
    mesh_tl_open_params_t p = {
        .rank = 1, .size = 2, .comm_uid = FUZZ_UID, .node = "fuzz", .timeout_s = 1};
    mesh_tl_iface_t *iface;
    if (ops->open(&p, &iface) != MESH_OK)
        return 0;
    mesh_tl_tcp_addr_t addr;
    size_t alen = sizeof(addr);
    mesh_tl_ep_t *ep = NULL;
    if (ops->address(iface, &addr, &alen) != MESH_OK)
        goto out;
    /* rank 0's endpoint: rank 0 connects to us, as the lower rank does */
    mesh_tl_peer_t peer = {
        .rank = 0, .node = "fuzz", .pid = getpid(), .addr = &addr, .addr_len = alen};
    if (ops->ep_create(iface, &peer, &ep) != MESH_OK)
        goto out;
    fuzz_recv_t r[FUZZ_RECVS];
    fuzz_recvs_init(r, data[1] | (unsigned)data[0] << 8);
    for (int k = 0; k < data[0] % (FUZZ_RECVS + 1); k++)
        fuzz_recv_post(ep, r, k);

    int fd = socket(addr.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (const struct sockaddr *)&addr.sa, addr.sa_len) == 0) {
        size_t off = 2;
        while (off < size) {
            ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        shutdown(fd, SHUT_WR);
        /* accept, read the hello, then the stream until the end of it fails the endpoint */
        for (int i = 0, idle = 0; i < 400 && idle < 40 && !ep_failed(ep); i++)
            idle = ops->progress(iface) > 0 ? 0 : idle + 1;
        for (int k = 0; k < FUZZ_RECVS; k++)
            fuzz_recv_post(ep, r, k);
        for (int i = 0; i < 4; i++)
            ops->progress(iface);
    }
    if (fd >= 0) {
        /* reset, not close: no TIME_WAIT left behind by millions of runs */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(fd);
    }
    ops->ep_destroy(ep);
    ep = NULL;
    fuzz_recvs_check(r);
out:
    if (ep != NULL)
        ops->ep_destroy(ep);
    ops->close(iface);
    if (open_fds() != fds)
        abort(); /* a connection the transport kept no track of */
    return 0;
}
