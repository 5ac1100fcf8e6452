/*
 * Ring reduce-scatter: size - 1 steps; at each, a rank forwards a partial block to its right
 * neighbour and reduces the block arriving from its left into its own contribution, so that it
 * ends with its own block fully reduced. Handles any counts (v-variant included): a block of the
 * ring is simply the block of the rank that ends with it. The phase builder is the ring
 * reduce-scatter of every algorithm that composes one (the ring and hierarchical all-reduces,
 * the hierarchical reduce-scatter).
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/ring.h"
#include "collectives/phases.h"
#include "libmesh/log.h"
#include <string.h>

mesh_status_t mesh_coll_ring_reduce_scatter_phase(mesh_sched_t *s, const mesh_coll_ring_phase_t *p,
                                                  int *done)
{
    int n = p->g.n, me = p->g.me;
    mesh_coll_ring_walk_t w = mesh_coll_ring_walk(p);
    int left = w.left, right = w.right;
    size_t ds = p->dsize, segel = w.segel, maxlen = w.maxlen;
    mesh_coll_ids_t ids = {0};

    if (n == 1) {
        /* a group of one: the own block is the whole answer */
        int c = -1;
        if (p->len[0] && (const char *)p->own != (const char *)p->src + p->src_off[0] * ds)
            c = mesh_sched_copy(s, p->own, (const char *)p->src + p->src_off[0] * ds,
                                p->len[0] * ds, p->deps, p->ndeps);
        mesh_coll_ids_add(&ids, c);
        return mesh_coll_ids_join(s, &ids, p->deps, p->ndeps, done);
    }
    if (maxlen == 0)
        return mesh_coll_ids_join(s, &ids, p->deps, p->ndeps, done);

    size_t maxseg = (maxlen + segel - 1) / segel;
    /* Segments arrive into a window of receive slots used in turn (the same slot sequence on
     * every rank), so that the scratch stays small, warm and kept between calls whatever the
     * vector size. A receive waits for the last task that read its slot: the reduction, or,
     * without acc, the send that forwards the partial sum from the slot one step later. That
     * send waits for the next rank's receive of the same step, so without acc a slot may only be
     * reused two steps later: the window then spans two steps, or a cycle around the ring would
     * wait on itself. */
    size_t slotel = maxlen < segel ? maxlen : segel;
    size_t nslot = (size_t)(n - 1) * maxseg;
    size_t window = MESH_COLL_RING_WINDOW_BYTES;
    if (mesh_comm_peer_caps(mesh_sched_comm(s), left) & MESH_TL_CAP_SINGLE_COPY)
        window /= 4;
    size_t wslots = window / (slotel * ds);
    if (!p->acc && n > 2 && wslots < 2 * maxseg)
        wslots = 2 * maxseg;
    if (nslot > wslots)
        nslot = wslots > 2 ? wslots : 2;
    char *tmp = mesh_sched_scratch(s, nslot * slotel * ds);
    int *red = calloc(2 * maxseg + nslot, sizeof(int));
    if (!tmp || !red) {
        free(red);
        return mesh_error(MESH_ERR_NO_MEMORY, "ring reduce-scatter: no memory for %zu bytes",
                          nslot * slotel * ds);
    }
    /* red[k]: the reduction the next send of segment k waits for; at[k]: the slot holding
     * segment k's partial sum; last[j]: the last task reading slot j */
    int *at = red + maxseg, *last = red + 2 * maxseg;
    for (size_t k = 0; k < 2 * maxseg + nslot; k++)
        red[k] = -1;
    int start = p->ndeps ? mesh_sched_nop(s, p->deps, p->ndeps) : -1;

    for (int step = 0; step < n - 1; step++) {
        int sb = mesh_ring_rs_send_block(me, n, step), rb = mesh_ring_rs_recv_block(me, n, step);
        int final = step == n - 2;
        const char *rsrc = (const char *)p->src + p->src_off[rb] * ds;

        for (size_t off = 0, k = 0; off < p->len[sb]; off += segel, k++) {
            size_t cnt = mesh_coll_ring_seg(p->len[sb], off, segel);
            const char *sbuf = step == 0 ? (const char *)p->src + (p->src_off[sb] + off) * ds
                               : p->acc  ? (const char *)p->acc + (p->acc_off[sb] + off) * ds
                                         : tmp + (size_t)at[k] * slotel * ds;
            int dep = step == 0 ? start : red[k];
            int sd = mesh_sched_send(s, right, sbuf, cnt * ds, &dep, 1);
            if (step > 0 && !p->acc)
                last[at[k]] = sd;
            mesh_coll_ids_add(&ids, sd);
        }
        for (size_t off = 0, k = 0; off < p->len[rb]; off += segel, k++) {
            size_t cnt = mesh_coll_ring_seg(p->len[rb], off, segel);
            size_t j = ((size_t)step * maxseg + k) % nslot;
            char *slot = tmp + j * slotel * ds;
            char *rdst = final    ? (char *)p->own + off * ds
                         : p->acc ? (char *)p->acc + (p->acc_off[rb] + off) * ds
                                  : slot;
            int r = mesh_sched_recv(s, left, slot, cnt * ds, &last[j], 1);
            int x = mesh_sched_reduce3(s, rdst, rsrc + off * ds, slot, cnt, (int[]){r, start}, 2);
            if (final && p->len[rb] * ds >= MESH_COLL_RING_STREAM_BYTES)
                mesh_sched_reduce_stream(s, x);
            red[k] = last[j] = x;
            at[k] = (int)j;
            mesh_coll_ids_add(&ids, r);
            mesh_coll_ids_add(&ids, x);
        }
    }
    free(red);
    return mesh_coll_ids_join(s, &ids, &start, 1, done);
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    /* bandwidth-optimal: the default above the small vectors recursive halving takes */
    if (bytes > 64 * 1024)
        return 80;
    return 30;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    /* no acc: the receive buffer holds only this rank's block, so partial sums travel on
     * from the receive slots they were reduced in */
    mesh_coll_ring_phase_t p = {.g = mesh_coll_group_all(comm),
                                .dsize = args->dsize,
                                .src = args->sbuf,
                                .src_off = args->displs,
                                .own = args->rbuf,
                                .len = args->counts};
    int done;
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &p, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_ring = {
    .name = "ring",
    .desc = "ring reduce-scatter, pipelined in segments; any counts",
    .type = MESH_COLL_REDUCE_SCATTER,
    .score = score,
    .build = build};
