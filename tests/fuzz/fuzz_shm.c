/*
 * Fuzz target: the shm transport's receive side. The input's bytes are what a peer process
 * writes into the ring it owns in our segment: packet headers (streamed ones carry the
 * SHM_STAMP_STREAMED mark) and payloads, published by the head pointer. Byte 0 says how many
 * receives (tags 0..3) are posted first (the others are posted after), byte 1 their sizes. Two
 * real interfaces, ranks 0 and 1 of one communicator, run in this process; the bytes stand for
 * rank 0's.
 */
#include "config.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_tl.h"
#include "libmesh/context.h"
#include "transports/shm/shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_FIFO 8192

static const mesh_tl_ops_t *shm_ops(void)
{
    static const mesh_tl_ops_t *ops;
    if (ops == NULL) {
        setenv("MESH_LOG_FILE", "/dev/null", 0);
        setenv("MESH_SHM_FIFO_SIZE", "8k", 1);
        if (mesh_tl_global_init() != MESH_OK || (ops = mesh_tl_find("shm")) == NULL)
            abort();
    }
    return ops;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t uid = 0x6d65736873686d00ull;
    if (size < 2)
        return 0;
    const mesh_tl_ops_t *ops = shm_ops();
    mesh_tl_iface_t *iface[2] = {NULL, NULL};
    unsigned char addr[2][MESH_TL_ADDR_MAX];
    size_t alen[2];
    mesh_tl_ep_t *ep = NULL;
    uid++; /* a fresh pair of segment names each run */
    for (int r = 0; r < 2; r++) {
        mesh_tl_open_params_t p = {
            .rank = r, .size = 2, .comm_uid = uid, .node = "fuzz", .timeout_s = 1};
        alen[r] = sizeof(addr[r]);
        if (ops->open(&p, &iface[r]) != MESH_OK || ops->address(iface[r], addr[r], &alen[r]))
            goto out;
    }
    mesh_tl_peer_t peer = {.rank = 0,
                           .node = "fuzz",
                           .pid = getpid(),
                           .pidns = mesh_context_pidns(),
                           .addr = addr[0],
                           .addr_len = alen[0]};
    if (ops->ep_create(iface[1], &peer, &ep) != MESH_OK)
        goto out;
    fuzz_recv_t r[FUZZ_RECVS];
    fuzz_recvs_init(r, data[1] | (unsigned)data[0] << 8);
    for (int k = 0; k < data[0] % (FUZZ_RECVS + 1); k++)
        fuzz_recv_post(ep, r, k);

    mesh_tl_shm_ep_t *se = (mesh_tl_shm_ep_t *)ep;
    size_t n = size - 2 < FUZZ_FIFO ? size - 2 : FUZZ_FIFO;
    memcpy(se->rx->data, data + 2, n);
    atomic_store_explicit(&se->rx->head, n, memory_order_release);
    for (int i = 0, idle = 0; i < 200 && idle < 8 && se->failed == MESH_OK; i++)
        idle = ops->progress(iface[1]) > 0 ? 0 : idle + 1;
    for (int k = 0; k < FUZZ_RECVS; k++)
        fuzz_recv_post(ep, r, k);
    for (int i = 0; i < 4; i++)
        ops->progress(iface[1]);
    ops->ep_destroy(ep);
    ep = NULL;
    fuzz_recvs_check(r);
out:
    if (ep != NULL)
        ops->ep_destroy(ep);
    for (int k = 1; k >= 0; k--)
        if (iface[k] != NULL)
            ops->close(iface[k]);
    for (int k = 0; k < 2; k++) {
        char path[64];
        snprintf(path, sizeof(path), "/dev/shm/mesh-%016llx-%d", (unsigned long long)uid, k);
        if (access(path, F_OK) == 0)
            abort(); /* a segment left behind */
    }
    return 0;
}
