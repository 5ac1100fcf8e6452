/*
 * Bruck all-to-all: ceil(log2(size)) steps instead of size - 1. After a rotation in scratch
 * (slot j holds what goes to rank + j), step k packs every slot whose index has bit k set,
 * sends the pack to rank + 2^k and unpacks what rank - 2^k sent into the same slots. Each block
 * travels up to log2(size) times, so this only pays for small blocks. Uniform counts only.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/bruck.h"
#include "libmesh/log.h"

static int is_uniform(const mesh_comm_t *comm, const mesh_coll_args_t *a)
{
    size_t c = a->counts[0];
    for (int i = 0; i < comm->size; i++)
        if (a->counts[i] != c || a->rcounts[i] != c || a->displs[i] != (size_t)i * c ||
            a->rdispls[i] != (size_t)i * c)
            return 0;
    return 1;
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* bytes is size blocks */
    return bytes <= 256 * (size_t)comm->size && comm->size >= 4 ? 30 : 5;
}

/* Copies the slots that move at step k between the slot buffer and a packed buffer. */
static int pack(mesh_sched_t *s, char *slots, char *packed, int n, int k, size_t blk, int unpack,
                int dep0, int dep1)
{
    int run = 1 << k, last = -1;
    size_t off = 0;
    for (int j = run; j < n; j += 2 * run) {
        size_t len = (size_t)(j + run <= n ? run : n - j) * blk;
        int deps[3] = {dep0, dep1, last};
        if (unpack)
            last = mesh_sched_copy(s, slots + (size_t)j * blk, packed + off, len, deps, 3);
        else
            last = mesh_sched_copy(s, packed + off, slots + (size_t)j * blk, len, deps, 3);
        off += len;
    }
    return last;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank;
    size_t blk = a->counts[0] * a->dsize;
    char *rb = a->rbuf;
    const char *sb = a->sbuf;

    if (n == 1) {
        mesh_sched_copy(s, rb, sb, blk, NULL, 0);
        return mesh_sched_build_status(s);
    }
    if (blk == 0)
        return mesh_sched_build_status(s);

    int steps = mesh_bruck_nsteps(n);
    size_t maxmove = 0;
    for (int k = 0; k < steps; k++)
        if ((size_t)mesh_bruck_a2a_nmoved(n, k) > maxmove)
            maxmove = (size_t)mesh_bruck_a2a_nmoved(n, k);
    char *slots = mesh_sched_scratch(s, (size_t)n * blk);
    char *packs = mesh_sched_scratch(s, maxmove * blk);
    char *recvs = mesh_sched_scratch(s, (size_t)steps * maxmove * blk);
    if (slots == NULL || packs == NULL || recvs == NULL)
        return mesh_sched_build_status(s);

    /* rotation in: slot j gets the block for rank r + j */
    int have = mesh_sched_copy(s, slots, sb + (size_t)r * blk, (size_t)(n - r) * blk, NULL, 0);
    have = mesh_sched_copy(s, slots + (size_t)(n - r) * blk, sb, (size_t)r * blk, &have, 1);

    int sent = -1;
    for (int k = 0; k < steps; k++) {
        size_t bytes = (size_t)mesh_bruck_a2a_nmoved(n, k) * blk;
        char *rbk = recvs + (size_t)k * maxmove * blk;
        /* one pack buffer: packing step k waits until the send of step k-1 is done */
        int packed = pack(s, slots, packs, n, k, blk, 0, have, sent);
        sent = mesh_sched_send(s, mesh_bruck_a2a_send_peer(r, n, k), packs, bytes, &packed, 1);
        int rv = mesh_sched_recv(s, mesh_bruck_a2a_recv_peer(r, n, k), rbk, bytes, NULL, 0);
        have = pack(s, slots, rbk, n, k, blk, 1, rv, packed);
    }
    /* rotation out: slot j holds the block from rank r - j */
    for (int j = 0; j < n; j++)
        mesh_sched_copy(s, rb + (size_t)mesh_bruck_a2a_out_block(r, n, j) * blk,
                        slots + (size_t)j * blk, blk, &have, 1);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_alltoall_bruck = {
    .name = "bruck",
    .desc = "Bruck, ceil(log2) steps with packing; uniform counts, small blocks",
    .type = MESH_COLL_ALLTOALL,
    .score = score,
    .fits = is_uniform,
    .build = build};
