/*
 * Ring all-gather: in step i every rank forwards to its right neighbour the block it received
 * in step i-1 (its own in step 0). Handles per-rank counts and displacements. Large blocks go in
 * segments, each forwarded as soon as it arrives, so receiving from the left overlaps sending
 * to the right within a step.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "libmesh/log.h"

/* Blocks above this size are split; at most MAX_SEGS segments per block. */
#define RING_SEG_BYTES ((size_t)256 * 1024)
#define RING_MAX_SEGS  64

static size_t total_bytes(const mesh_comm_t *comm, const mesh_coll_args_t *a)
{
    size_t t = 0;
    for (int i = 0; i < comm->size; i++)
        t += a->counts[i];
    return t * a->dsize;
}

static int score(const mesh_comm_t *comm, const mesh_coll_args_t *args)
{
    return total_bytes(comm, args) >= ((size_t)256 << 10) ? 50 : 10;
}

/* Segmentation depends on the block size only, so both ends of a link agree on it. */
static size_t seg_size(size_t bytes)
{
    size_t seg = (bytes + RING_MAX_SEGS - 1) / RING_MAX_SEGS;
    return seg > RING_SEG_BYTES ? seg : RING_SEG_BYTES;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank;
    int right = (r + 1) % n, left = (r - 1 + n) % n;
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    const char *own = a->in_place ? rb + a->displs[r] * ds : (const char *)a->sbuf;

    if (!a->in_place)
        mesh_sched_copy(s, rb + a->displs[r] * ds, own, a->counts[r] * ds, NULL, 0);

    /* prev[j]: receive task of segment j of the block forwarded in this step */
    int prev[RING_MAX_SEGS];
    for (int i = 0; i < n - 1; i++) {
        int sb = (r - i + n) % n, rk = (r - i - 1 + n) % n;
        size_t sbytes = a->counts[sb] * ds, rbytes = a->counts[rk] * ds;
        const char *src = i == 0 ? own : rb + a->displs[sb] * ds;
        size_t seg = seg_size(sbytes);
        for (size_t off = 0, j = 0; off < sbytes; off += seg, j++) {
            size_t len = sbytes - off < seg ? sbytes - off : seg;
            mesh_sched_send(s, right, src + off, len, i == 0 ? NULL : &prev[j], i == 0 ? 0 : 1);
        }
        seg = seg_size(rbytes);
        for (size_t off = 0, j = 0; off < rbytes; off += seg, j++) {
            size_t len = rbytes - off < seg ? rbytes - off : seg;
            prev[j] = mesh_sched_recv(s, left, rb + a->displs[rk] * ds + off, len, NULL, 0);
        }
    }
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_ring = {
    .name = "ring",
    .desc = "ring, any counts and displacements, segmented for large blocks",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
