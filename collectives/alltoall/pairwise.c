/*
 * Pairwise all-to-all: in step s a rank sends to one peer and receives from another, so every
 * link carries one message per direction. A window of steps is in flight at once: step s
 * starts when step s - WINDOW completed, which overlaps latencies without flooding a peer.
 * Handles per-rank counts and displacements; empty blocks are not sent (both ends see the same
 * count). In place, the blocks for other ranks are packed into scratch first (our own one
 * too if it moves).
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/pairwise.h"
#include "libmesh/log.h"

#define PAIRWISE_WINDOW 4

static int score(const mesh_comm_t *comm, size_t bytes)
{
    return 10;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank;
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    const char *sb = a->sbuf;
    const size_t *sdispls = a->displs;
    int ready = -1; /* the sends' source is ready; receives may overwrite the send buffer */

    const char *own = sb + sdispls[r] * ds;
    if (a->in_place && n > 1) {
        /* our own block stays where it is when it is already in its place */
        int stays = a->displs[r] == a->rdispls[r];
        size_t total = 0;
        for (int i = 0; i < n; i++)
            total += i == r && stays ? 0 : a->counts[i];
        char *tmp = mesh_sched_scratch(s, total * ds);
        size_t *packed = mesh_sched_scratch(s, sizeof(size_t) * (size_t)n);
        if ((tmp == NULL && total) || packed == NULL)
            return mesh_sched_build_status(s);
        total = 0;
        for (int i = 0; i < n; i++) {
            packed[i] = total;
            if (i == r && stays)
                continue;
            ready = mesh_sched_copy(s, tmp + total * ds, sb + a->displs[i] * ds, a->counts[i] * ds,
                                    &ready, 1);
            total += a->counts[i];
        }
        own = stays ? rb + a->rdispls[r] * ds : tmp + packed[r] * ds;
        sb = tmp;
        sdispls = packed;
    }

    mesh_sched_copy(s, rb + a->rdispls[r] * ds, own, a->counts[r] * ds, &ready, 1);
    int done[PAIRWISE_WINDOW];
    for (int w = 0; w < PAIRWISE_WINDOW; w++)
        done[w] = ready;
    for (int step = 1; step < n; step++) {
        int sp = mesh_pairwise_send_peer(r, n, step), rp = mesh_pairwise_recv_peer(r, n, step);
        int *slot = &done[step % PAIRWISE_WINDOW];
        int ids[2] = {-1, -1};
        if (a->counts[sp]) {
            ids[0] = mesh_sched_send(s, sp, sb + sdispls[sp] * ds, a->counts[sp] * ds, slot, 1);
            if (a->in_place) /* the scratch is packed again by the next call */
                mesh_sched_send_reused(s, ids[0]);
        }
        if (a->rcounts[rp])
            ids[1] = mesh_sched_recv(s, rp, rb + a->rdispls[rp] * ds, a->rcounts[rp] * ds, slot, 1);
        *slot = mesh_sched_nop(s, (int[]){ids[0], ids[1], ready}, 3);
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_alltoall_pairwise = {
    .name = "pairwise",
    .desc = "pairwise exchange with a window of steps in flight; any counts",
    .type = MESH_COLL_ALLTOALL,
    .score = score,
    .build = build};
