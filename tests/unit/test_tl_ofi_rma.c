/*
 * RMA over the ofi transport: two processes, rank 1 registers two buffers; rank 0 writes a
 * pattern into the first with put, reads the second with get, and both check every byte.
 * Skips (77) without libfabric, when no provider matches, or when the provider chosen (e.g. by
 * FI_PROVIDER) offers no RMA with virtual addresses.
 */
#include "config.h"
#include "transports/tl.h"
#include "libmesh/context.h"
#include "libmesh/progress.h"
#include "tests/harness/harness.h"
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE ((size_t)3 << 20)

typedef struct {
    atomic_int step[2];
    int pid[2];
    size_t addr_len[2];
    unsigned char addr[2][MESH_TL_ADDR_MAX];
    uint64_t raddr[2], rkey[2];
} shared_t;

static shared_t *sh;

static void wait_step(int rank, int step)
{
    double until = mesh_time() + 30;
    while (atomic_load(&sh->step[rank]) < step) {
        CHECK_MSG(mesh_time() < until, "rank %d never reached step %d", rank, step);
        usleep(1000);
    }
}

static void wait_op(mesh_tl_iface_t *iface, mesh_tl_op_t *op)
{
    double until = mesh_time() + 30;
    unsigned idle = 0;
    while (op->status == MESH_INPROGRESS) {
        CHECK_MSG(mesh_time() < until, "rma operation still pending after 30 s");
        if (mesh_tl_progress(iface) == 0)
            mesh_backoff(&idle);
        else
            idle = 0;
    }
    CHECK_MSG(op->status == MESH_OK, "rma operation failed: %d", op->status);
}

static unsigned char pat(size_t i, int k)
{
    return (unsigned char)(i * 13 + (i >> 11) + k * 101);
}

static int child(const mesh_tl_ops_t *ops, int rank)
{
    alarm(60);
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    mesh_tl_open_params_t p = {.rank = rank,
                               .size = 2,
                               .comm_uid = 0x5eed ^ (uint64_t)getppid(),
                               .node = "n",
                               .timeout_s = 20};
    mesh_tl_iface_t *iface;
    CHECK(ops->open(&p, &iface) == MESH_OK);
    CHECK(ops->address(iface, sh->addr[rank], &sh->addr_len[rank]) == MESH_OK);
    sh->pid[rank] = getpid();
    atomic_store(&sh->step[rank], 1);
    wait_step(1 - rank, 1);
    mesh_tl_peer_t peer = {.rank = 1 - rank,
                           .node = "n",
                           .pid = sh->pid[1 - rank],
                           .pidns = mesh_context_pidns(),
                           .addr = sh->addr[1 - rank],
                           .addr_len = sh->addr_len[1 - rank]};
    mesh_tl_ep_t *ep;
    CHECK(ops->ep_create(iface, &peer, &ep) == MESH_OK);
    CHECK(ops->wireup(iface, mesh_time() + 20) == MESH_OK);
    unsigned char *a = malloc(SIZE), *b = malloc(SIZE);
    CHECK(a && b);
    mesh_tl_mem_t ma, mb;
    if (rank == 1) {
        memset(a, 0, SIZE);
        for (size_t i = 0; i < SIZE; i++)
            b[i] = pat(i, 2);
        CHECK(ops->mem_reg(iface, a, SIZE, &ma) == MESH_OK);
        CHECK(ops->mem_reg(iface, b, SIZE, &mb) == MESH_OK);
        sh->raddr[0] = (uint64_t)(uintptr_t)a;
        sh->rkey[0] = ma.key;
        sh->raddr[1] = (uint64_t)(uintptr_t)b;
        sh->rkey[1] = mb.key;
        atomic_store(&sh->step[1], 2);
        /* the put is complete at the target once rank 0 says so */
        while (atomic_load(&sh->step[0]) < 2) {
            mesh_tl_progress(iface);
            usleep(100);
        }
        for (size_t i = 0; i < SIZE; i++)
            CHECK_MSG(a[i] == pat(i, 1), "put: byte %zu is %u, want %u", i, a[i], pat(i, 1));
        atomic_store(&sh->step[1], 3);
        while (atomic_load(&sh->step[0]) < 3) {
            mesh_tl_progress(iface);
            usleep(100);
        }
        ops->mem_dereg(iface, &ma);
        ops->mem_dereg(iface, &mb);
    } else {
        for (size_t i = 0; i < SIZE; i++)
            a[i] = pat(i, 1);
        memset(b, 0, SIZE);
        CHECK(ops->mem_reg(iface, a, SIZE, &ma) == MESH_OK);
        CHECK(ops->mem_reg(iface, b, SIZE, &mb) == MESH_OK);
        wait_step(1, 2);
        mesh_tl_op_t op = {.status = MESH_INPROGRESS};
        CHECK(ops->put(ep, a, SIZE, sh->raddr[0], sh->rkey[0], &op) == MESH_OK);
        wait_op(iface, &op);
        CHECK(op.length == SIZE);
        op.status = MESH_INPROGRESS;
        CHECK(ops->flush(ep, &op) == MESH_OK);
        wait_op(iface, &op);
        atomic_store(&sh->step[0], 2);
        /* get the second buffer, from an offset inside it */
        op.status = MESH_INPROGRESS;
        CHECK(ops->get(ep, b + 5, SIZE - 5, sh->raddr[1] + 5, sh->rkey[1], &op) == MESH_OK);
        wait_op(iface, &op);
        for (size_t i = 5; i < SIZE; i++)
            CHECK_MSG(b[i] == pat(i, 2), "get: byte %zu is %u, want %u", i, b[i], pat(i, 2));
        CHECK(b[0] == 0 && b[4] == 0);
        wait_step(1, 3);
        atomic_store(&sh->step[0], 3);
        ops->mem_dereg(iface, &ma);
        ops->mem_dereg(iface, &mb);
    }
    ops->ep_destroy(ep);
    ops->close(iface);
    free(a);
    free(b);
    return 0;
}

int main(void)
{
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    const mesh_tl_ops_t *ops = mesh_tl_find("ofi");
    if (ops == NULL || !ops->usable()) {
        printf("ofi transport not built or no provider matches: skipped\n");
        return 77;
    }
    mesh_tl_open_params_t p = {.rank = 0, .size = 1, .comm_uid = 1, .node = "n", .timeout_s = 5};
    mesh_tl_iface_t *probe;
    mesh_tl_caps_t caps;
    CHECK(ops->open(&p, &probe) == MESH_OK);
    ops->query(probe, &caps);
    ops->close(probe);
    if (!(caps.flags & MESH_TL_CAP_PUT)) {
        printf("the libfabric provider offers no rma here: skipped\n");
        return 77;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    pid_t pids[2];
    fflush(stdout);
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(child(ops, r));
    }
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        int st;
        CHECK(waitpid(pids[r], &st, 0) == pids[r]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d ended with status 0x%x\n", r, st);
            bad = 1;
        }
    }
    printf("ofi rma: put and get of %zu bytes %s\n", SIZE, bad ? "FAILED" : "ok");
    return bad;
}
