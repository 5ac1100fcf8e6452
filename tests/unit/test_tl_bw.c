/*
 * Large-message bandwidth of one transport between two processes, checked for contents, with
 * memcpy of the same size as the reference. Optionally each process first joins a network
 * namespace, so tcp crosses a veth pair like two nodes would.
 * Usage: test_tl_bw [transport [size [iters [netns0 netns1]]]]
 * Without arguments it runs a short check of every network or node transport.
 */
#include "config.h"
#include "transports/tl.h"
#include "libmesh/context.h"
#include "libmesh/progress.h"
#include "tests/harness/harness.h"
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WINDOW 4

typedef struct {
    atomic_int count, gen;
    int pid[2];
    size_t addr_len[2];
    unsigned char addr[2][MESH_TL_ADDR_MAX];
    double gbps;
} shared_t;

static shared_t *sh;

static void barrier(mesh_tl_iface_t *iface)
{
    int gen = atomic_load(&sh->gen);
    if (atomic_fetch_add(&sh->count, 1) == 1) {
        atomic_store(&sh->count, 0);
        atomic_fetch_add(&sh->gen, 1);
        return;
    }
    unsigned idle = 0;
    while (atomic_load(&sh->gen) == gen) {
        if (iface)
            mesh_tl_progress(iface);
        mesh_backoff(&idle);
    }
}

static void wait_op(mesh_tl_iface_t *iface, mesh_tl_op_t *op)
{
    double t0 = mesh_time();
    unsigned idle = 0;
    while (op->status == MESH_INPROGRESS) {
        if (mesh_tl_progress(iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
        CHECK_MSG(mesh_time() - t0 < 60, "operation stuck");
    }
    CHECK_MSG(op->status == MESH_OK, "operation failed: %d", op->status);
}

static int child(const mesh_tl_ops_t *ops, int rank, size_t size, int iters, const char *netns)
{
    alarm(120);
    if (netns) {
        char path[256];
        snprintf(path, sizeof(path), "/var/run/netns/%s", netns);
        int fd = open(path, O_RDONLY);
        CHECK_MSG(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "cannot join netns %s", netns);
        close(fd);
    }
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    mesh_tl_open_params_t op = {.rank = rank,
                                .size = 2,
                                .comm_uid = 0xb0b0000ull + getppid(),
                                .node = "bwnode",
                                .timeout_s = 20};
    mesh_tl_iface_t *iface;
    mesh_tl_ep_t *ep;
    CHECK(ops->open(&op, &iface) == MESH_OK);
    CHECK(ops->address(iface, sh->addr[rank], &sh->addr_len[rank]) == MESH_OK);
    sh->pid[rank] = getpid();
    barrier(NULL);
    int p = 1 - rank;
    mesh_tl_peer_t peer = {.rank = p,
                           .node = "bwnode",
                           .pid = sh->pid[p],
                           .pidns = mesh_context_pidns(),
                           .addr = sh->addr[p],
                           .addr_len = sh->addr_len[p]};
    CHECK(ops->reachable(iface, &peer));
    CHECK(ops->ep_create(iface, &peer, &ep) == MESH_OK);
    CHECK(ops->wireup(iface, mesh_time() + 20) == MESH_OK);
    barrier(iface);
    unsigned char *buf[WINDOW];
    mesh_tl_op_t ops_[WINDOW];
    for (int w = 0; w < WINDOW; w++) {
        buf[w] = malloc(size);
        CHECK(buf[w]);
        memset(buf[w], rank ? 0 : 0x5a + w, size);
    }
    double t0 = 0;
    /* one warm-up round, then the timed iterations */
    for (int round = 0; round < 2; round++) {
        int n = round ? iters : WINDOW;
        barrier(iface);
        t0 = mesh_time();
        for (int i = 0; i < n + WINDOW; i++) {
            int w = i % WINDOW;
            if (i >= WINDOW)
                wait_op(iface, &ops_[w]);
            if (i >= n)
                continue;
            if (rank == 0)
                CHECK(mesh_tl_isend(ep, MESH_TL_TAG_EXACT | (uint64_t)i, buf[w], size, &ops_[w]) ==
                      MESH_OK);
            else
                CHECK(mesh_tl_irecv(ep, MESH_TL_TAG_EXACT | (uint64_t)i, buf[w], size, &ops_[w]) ==
                      MESH_OK);
        }
        /* the receiver's acknowledgement closes the timing on the sender */
        mesh_tl_op_t ack;
        if (rank == 0)
            CHECK(mesh_tl_irecv(ep, 1ull << 40, NULL, 0, &ack) == MESH_OK);
        else
            CHECK(mesh_tl_isend(ep, 1ull << 40, NULL, 0, &ack) == MESH_OK);
        wait_op(iface, &ack);
    }
    double t = mesh_time() - t0;
    if (rank == 1)
        for (int w = 0; w < WINDOW; w++)
            CHECK(buf[w][0] == 0x5a + w && buf[w][size - 1] == 0x5a + w &&
                  buf[w][size / 2] == 0x5a + w);
    if (rank == 0)
        sh->gbps = (double)size * iters / t / 1e9;
    barrier(iface);
    ops->ep_destroy(ep);
    ops->close(iface);
    return 0;
}

static double memcpy_gbps(size_t size, int iters)
{
    unsigned char *a = malloc(size), *b = malloc(size);
    CHECK(a && b);
    memset(a, 1, size);
    memset(b, 2, size);
    double t0 = mesh_time();
    for (int i = 0; i < iters; i++) {
        memcpy(b, a, size);
        a[i % size] ^= b[(i * 7) % size];
    }
    double t = mesh_time() - t0;
    free(a);
    free(b);
    return (double)size * iters / t / 1e9;
}

static void run(const mesh_tl_ops_t *ops, size_t size, int iters, char **netns)
{
    memset(sh, 0, sizeof(*sh));
    fflush(stdout);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(child(ops, r, size, iters, netns ? netns[r] : NULL));
    }
    for (int r = 0; r < 2; r++) {
        int st;
        CHECK(waitpid(pids[r], &st, 0) == pids[r]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed (0x%x)", r, st);
    }
    printf("%-5s %10zu bytes x %4d: %7.3f GB/s   (memcpy %7.3f GB/s)\n", ops->name, size, iters,
           sh->gbps, memcpy_gbps(size, iters));
}

int main(int argc, char **argv)
{
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    /* ucx over its tcp transport unless the caller chose (the same on any machine) */
    setenv("UCX_TLS", "tcp", 0);
    CHECK(sh != MAP_FAILED);
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    if (argc > 1) {
        const mesh_tl_ops_t *ops = mesh_tl_find(argv[1]);
        CHECK_MSG(ops, "no transport %s", argv[1]);
        size_t size = argc > 2 ? strtoull(argv[2], NULL, 0) : 64u << 20;
        int iters = argc > 3 ? atoi(argv[3]) : 20;
        run(ops, size, iters, argc > 5 ? argv + 4 : NULL);
        return 0;
    }
    for (int t = 0; t < mesh_tl_count(); t++) {
        const mesh_tl_ops_t *ops = mesh_tl_get(t);
        if (strcmp(ops->name, "self") == 0 || !ops->usable())
            continue;
        run(ops, 8u << 20, 8, NULL);
    }
    return 0;
}
