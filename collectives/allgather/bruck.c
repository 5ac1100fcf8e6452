/*
 * Bruck all-gather: ceil(log2(size)) steps for any rank count. Blocks are gathered in a rotated
 * scratch buffer (local index j holds rank + j's block), which a final rotation puts in rank
 * order. Uniform counts only; meant for small messages, where the step count dominates.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/bruck.h"
#include "libmesh/log.h"

static int fits(const mesh_comm_t *comm, const mesh_coll_args_t *args)
{
    /* the rotation needs equal blocks back to back */
    for (int i = 0; i < comm->size; i++)
        if (args->counts[i] != args->counts[0] || args->displs[i] != (size_t)i * args->counts[0])
            return 0;
    return 1;
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes > ((size_t)64 << 10))
        return 5;
    /* on powers of two recursive doubling takes as many steps without the rotation */
    return (comm->size & (comm->size - 1)) == 0 ? 20 : 40;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank;
    size_t blk = a->counts[0] * a->dsize;
    char *rb = a->rbuf;
    const char *own = a->in_place ? rb + (size_t)r * blk : (const char *)a->sbuf;

    if (n == 1 || blk == 0) {
        if (!a->in_place)
            mesh_sched_copy(s, rb + (size_t)r * blk, own, blk, NULL, 0);
        return mesh_sched_build_status(s);
    }
    /* rank 0 needs no rotation, so it gathers in place */
    char *tmp = r == 0 ? rb : mesh_sched_scratch(s, (size_t)n * blk);
    if (tmp == NULL)
        return mesh_sched_build_status(s);

    int have = mesh_sched_copy(s, tmp, own, blk, NULL, 0);
    int steps = mesh_bruck_nsteps(n);
    for (int k = 0; k < steps; k++) {
        size_t bytes = (size_t)mesh_bruck_ag_nblocks(n, k) * blk;
        mesh_sched_send(s, mesh_bruck_ag_send_peer(r, n, k), tmp, bytes, &have, 1);
        int rv = mesh_sched_recv(s, mesh_bruck_ag_recv_peer(r, n, k),
                                 tmp + (size_t)mesh_bruck_ag_recv_index(k) * blk, bytes, NULL, 0);
        have = mesh_sched_nop(s, (int[]){have, rv}, 2);
    }
    if (r != 0) {
        /* local index j holds block (r + j) mod n */
        mesh_sched_copy(s, rb + (size_t)r * blk, tmp, (size_t)(n - r) * blk, &have, 1);
        mesh_sched_copy(s, rb, tmp + (size_t)(n - r) * blk, (size_t)r * blk, &have, 1);
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_bruck = {
    .name = "bruck",
    .desc = "Bruck, ceil(log2) steps for any rank count; uniform counts, small messages",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .fits = fits,
    .build = build};
