/*
 * Ring all-gather: in step i every rank forwards to its right neighbour the block it received
 * in step i-1 (its own in step 0). Handles per-rank counts and displacements. The phase builder
 * is the ring all-gather of every algorithm that composes one (the ring and hierarchical
 * all-reduces, broadcast by scatter and all-gather), segmented so that a segment is forwarded
 * as soon as it arrives.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/ring.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

mesh_status_t mesh_coll_ring_allgather_phase(mesh_sched_t *s, const mesh_coll_ring_phase_t *p,
                                             int *done)
{
    int n = p->g.n, me = p->g.me;
    mesh_coll_ring_walk_t w = mesh_coll_ring_walk(p);
    size_t ds = p->dsize, segel = w.segel;
    mesh_coll_ids_t ids = {0};

    if (n == 1 || w.maxlen == 0)
        return mesh_coll_ids_join(s, &ids, p->deps, p->ndeps, done);
    /* Segments exist so that a block is forwarded while it still arrives. Between two members
     * nothing is forwarded: one message per block spares the per-message costs (on shm, a
     * rendezvous and a cross-memory read per segment). */
    if (n == 2)
        segel = w.maxlen;

    size_t maxseg = (w.maxlen + segel - 1) / segel;
    int *rcv = malloc(maxseg * sizeof(int));
    if (!rcv)
        return mesh_error(MESH_ERR_NO_MEMORY, "ring all-gather: no memory for task ids");
    int start = p->ndeps ? mesh_sched_nop(s, p->deps, p->ndeps) : -1;

    for (int step = 0; step < n - 1; step++) {
        int sb = mesh_ring_ag_send_block(me, n, step), rb = mesh_ring_ag_recv_block(me, n, step);
        const char *sbase =
            step == 0 && p->src ? (const char *)p->src : (const char *)p->acc + p->acc_off[sb] * ds;
        char *rbase = (char *)p->acc + p->acc_off[rb] * ds;

        /* segment k is forwarded as soon as it arrived at the previous step */
        for (size_t off = 0, k = 0; off < p->len[sb]; off += segel, k++) {
            size_t cnt = mesh_coll_ring_seg(p->len[sb], off, segel);
            int dep = step == 0 ? start : rcv[k];
            mesh_coll_ids_add(&ids,
                              mesh_sched_send(s, w.right, sbase + off * ds, cnt * ds, &dep, 1));
        }
        for (size_t off = 0, k = 0; off < p->len[rb]; off += segel, k++) {
            size_t cnt = mesh_coll_ring_seg(p->len[rb], off, segel);
            rcv[k] = mesh_sched_recv(s, w.left, rbase + off * ds, cnt * ds, &start, 1);
            mesh_coll_ids_add(&ids, rcv[k]);
        }
    }
    free(rcv);
    return mesh_coll_ids_join(s, &ids, &start, 1, done);
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    return bytes >= ((size_t)256 << 10) ? 50 : 10;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int r = comm->rank, done;
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    /* the own block travels from where the caller has it; the copy into place runs alongside */
    if (!a->in_place)
        mesh_sched_copy(s, rb + a->displs[r] * ds, a->sbuf, a->counts[r] * ds, NULL, 0);
    mesh_coll_ring_phase_t p = {.g = mesh_coll_group_all(comm),
                                .dsize = ds,
                                .src = a->in_place ? rb + a->displs[r] * ds : a->sbuf,
                                .acc = rb,
                                .acc_off = a->displs,
                                .len = a->counts};
    MESH_CHECK(mesh_coll_ring_allgather_phase(s, &p, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_ring = {
    .name = "ring",
    .desc = "ring, any counts and displacements, pipelined in segments",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
