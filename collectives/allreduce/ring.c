/*
 * Ring all-reduce: ring reduce-scatter then ring all-gather over size element-aligned blocks,
 * both pipelined in segments. Bandwidth-optimal (2 (n-1)/n of the vector per rank) with n - 1
 * latency terms per phase: the choice for large vectors. The all-gather phase builder lives here
 * and is shared (hierarchical all-reduce, broadcast by scatter and all-gather).
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/ring.h"
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

mesh_status_t mesh_coll_ring_allgather_phase(mesh_sched_t *s, const mesh_coll_ring_phase_t *p,
                                             int *done)
{
    int n = p->g.n, me = p->g.me;
    int left = mesh_coll_group_rank(&p->g, mesh_ring_left(me, n));
    int right = mesh_coll_group_rank(&p->g, mesh_ring_right(me, n));
    size_t ds = p->dsize, segel = MESH_COLL_RING_SEG_BYTES / ds ? MESH_COLL_RING_SEG_BYTES / ds : 1;
    size_t maxlen = 0;
    mesh_coll_ids_t ids = {0};

    for (int i = 0; i < n; i++)
        maxlen = p->len[i] > maxlen ? p->len[i] : maxlen;
    if (n == 1 || maxlen == 0)
        return mesh_coll_ids_join(s, &ids, p->deps, p->ndeps, done);
    /* Segments exist so that a block is forwarded while it still arrives. Between two members
     * nothing is forwarded: one message per block spares the per-message costs (on shm, a
     * rendezvous and a cross-memory read per segment). */
    if (n == 2)
        segel = maxlen;

    size_t maxseg = (maxlen + segel - 1) / segel;
    int *rcv = malloc(maxseg * sizeof(int));
    if (!rcv)
        return mesh_error(MESH_ERR_NO_MEMORY, "ring all-gather: no memory for task ids");
    int start = p->ndeps ? mesh_sched_nop(s, p->deps, p->ndeps) : -1;

    for (int step = 0; step < n - 1; step++) {
        int sb = mesh_ring_ag_send_block(me, n, step), rb = mesh_ring_ag_recv_block(me, n, step);
        const char *sbase = step == 0 && p->src ? (const char *)p->src + p->src_off[me] * ds
                                                : (const char *)p->acc + p->acc_off[sb] * ds;
        char *rbase = (char *)p->acc + p->acc_off[rb] * ds;

        /* segment k is forwarded as soon as it arrived at the previous step */
        for (size_t off = 0, k = 0; off < p->len[sb]; off += segel, k++) {
            size_t cnt = p->len[sb] - off < segel ? p->len[sb] - off : segel;
            int dep = step == 0 ? start : rcv[k];
            mesh_coll_ids_add(&ids, mesh_sched_send(s, right, sbase + off * ds, cnt * ds, &dep, 1));
        }
        for (size_t off = 0, k = 0; off < p->len[rb]; off += segel, k++) {
            size_t cnt = p->len[rb] - off < segel ? p->len[rb] - off : segel;
            rcv[k] = mesh_sched_recv(s, left, rbase + off * ds, cnt * ds, &start, 1);
            mesh_coll_ids_add(&ids, rcv[k]);
        }
    }
    free(rcv);
    return mesh_coll_ids_join(s, &ids, &start, 1, done);
}

mesh_status_t mesh_coll_ring_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                             const void *src, void *dst, size_t count, size_t dsize,
                                             const int *deps, int ndeps, int *done)
{
    int n = g->n;
    size_t *off = mesh_sched_scratch(s, 2 * (size_t)n * sizeof(size_t));
    if (!off)
        return mesh_error(MESH_ERR_NO_MEMORY, "ring all-reduce: no memory for offsets");
    size_t *len = off + n;
    for (int i = 0; i < n; i++) {
        off[i] = mesh_block_offset(count, n, i);
        len[i] = mesh_block_count(count, n, i);
    }
    mesh_coll_ring_phase_t p = {.g = *g,
                                .dsize = dsize,
                                .src = src,
                                .src_off = off,
                                .acc = dst,
                                .acc_off = off,
                                .own = (char *)dst + off[g->me] * dsize,
                                .len = len,
                                .deps = deps,
                                .ndeps = ndeps};
    int rs;
    MESH_CHECK(mesh_coll_ring_reduce_scatter_phase(s, &p, &rs));
    p.src = NULL;
    p.deps = &rs;
    p.ndeps = 1;
    return mesh_coll_ring_allgather_phase(s, &p, done);
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes > 1024 * 1024)
        return 80;
    if (bytes > 16 * 1024)
        return 40;
    return 10;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    mesh_coll_group_t g = {.me = comm->rank, .n = comm->size, .ranks = NULL};
    int done;
    if (args->count == 0)
        return mesh_sched_status(s);
    MESH_CHECK(mesh_coll_ring_allreduce_phase(s, &g, args->sbuf, args->rbuf, args->count,
                                              args->dsize, NULL, 0, &done));
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_ring = {
    .name = "ring",
    .desc = "ring reduce-scatter + ring all-gather, pipelined; large vectors",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
