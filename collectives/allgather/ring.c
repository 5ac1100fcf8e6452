/*
 * Ring all-gather: in step i every rank forwards to its right neighbour the block it received
 * in step i-1 (its own in step 0). Handles per-rank counts and displacements. It is the ring
 * all-gather phase shared with the all-reduces (patterns/ring_sched.h), segmented so that a
 * segment is forwarded as soon as it arrives.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    return bytes >= ((size_t)256 << 10) ? 50 : 10;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, done;
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    /* the own block travels from where the caller has it; the copy into place runs alongside */
    size_t *src_off = mesh_sched_scratch(s, sizeof(size_t) * (size_t)n);
    if (src_off == NULL)
        return mesh_sched_status(s);
    src_off[r] = 0;
    if (!a->in_place)
        mesh_sched_copy(s, rb + a->displs[r] * ds, a->sbuf, a->counts[r] * ds, NULL, 0);
    mesh_coll_ring_phase_t p = {.g = {.me = r, .n = n, .ranks = NULL},
                                .dsize = ds,
                                .src = a->in_place ? rb + a->displs[r] * ds : a->sbuf,
                                .src_off = src_off,
                                .acc = rb,
                                .acc_off = a->displs,
                                .len = a->counts};
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &done));
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_ring = {
    .name = "ring",
    .desc = "ring, any counts and displacements, pipelined in segments",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
