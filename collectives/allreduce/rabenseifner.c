/*
 * Rabenseifner all-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather
 * of the reduced blocks, over the power-of-two core after folding the extra ranks. Moves
 * 2 (p-1)/p of the vector like the ring but with 2 log2(p) latency terms: medium vectors. The
 * halving phase builder is shared with reduce/rabenseifner.c and reduce_scatter/rh.c.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/rd.h"
#include "collectives/patterns/ring.h"
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

mesh_status_t mesh_coll_rh_reduce_scatter_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                                int shift, const void *src, void *acc,
                                                const size_t *bnd, size_t count, size_t dsize,
                                                const int *deps, int ndeps,
                                                mesh_coll_rh_result_t *res)
{
    int n = g->n, me = g->me, p = mesh_rd_pof2(n), lg = mesh_rd_log2(p);
    int fold = mesh_rd_fold_partner(me, n);
    int fold_rank = fold >= 0 ? mesh_coll_group_rank(g, fold) : -1;
    size_t ds = dsize;
    mesh_coll_ids_t ids = {0};

    for (int i = 0; i < 32; i++)
        res->sent[i] = -1;
    res->core = -1;
    res->last = -1;
    int start = ndeps ? mesh_sched_nop(s, deps, ndeps) : -1;
    mesh_coll_ids_add(&ids, start);
    if (mesh_rd_is_extra(me, n)) {
        res->last = count ? mesh_sched_send(s, fold_rank, src, count * ds, &start, 1) : -1;
        mesh_coll_ids_add(&ids, res->last);
        return mesh_coll_ids_join(s, &ids, NULL, 0, &res->done);
    }
    int c = mesh_rd_core_rank(me, n), cr = ((c - shift) % p + p) % p;
    res->core = cr;
    char *tmp = count ? mesh_sched_scratch(s, count * ds) : NULL;
    if (count && !tmp)
        return mesh_error(MESH_ERR_NO_MEMORY, "recursive halving: no memory for %zu bytes",
                          count * ds);
    const char *have = src; /* where the current window's partial results are */
    int last = start;
    if (fold >= 0 && count) {
        int rv = mesh_sched_recv(s, fold_rank, tmp, count * ds, NULL, 0);
        last = mesh_sched_reduce3(s, acc, src, tmp, count, (int[]){rv, start}, 2);
        have = acc;
        mesh_coll_ids_add(&ids, rv);
    }
    for (int lv = 0; lv < lg; lv++) {
        int qr = mesh_rh_partner(cr, p, lv);
        int peer = mesh_coll_group_rank(g, mesh_rd_core_to_rank((qr + shift) % p, n));
        int kf = mesh_rh_window_first(cr, p, lv + 1), qf = mesh_rh_window_first(qr, p, lv + 1);
        int nb = mesh_rh_window_blocks(p, lv + 1);
        size_t kn = bnd[kf + nb] - bnd[kf], qn = bnd[qf + nb] - bnd[qf];
        /* the partner's half leaves; ours is reduced with what the partner sends of it */
        if (qn)
            res->sent[lv] = mesh_sched_send(s, peer, have + bnd[qf] * ds, qn * ds, &last, 1);
        mesh_coll_ids_add(&ids, res->sent[lv]);
        if (kn) {
            int rv = mesh_sched_recv(s, peer, tmp, kn * ds, &last, 1);
            last = mesh_sched_reduce3(s, (char *)acc + bnd[kf] * ds, have + bnd[kf] * ds, tmp, kn,
                                      (int[]){rv, last}, 2);
            mesh_coll_ids_add(&ids, rv);
        }
        have = acc;
    }
    /* an empty keep window at some level means an empty own block: nothing to finish */
    res->last = last;
    mesh_coll_ids_add(&ids, last);
    return mesh_coll_ids_join(s, &ids, NULL, 0, &res->done);
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    int pof2 = (comm->size & (comm->size - 1)) == 0;
    if (bytes > 16 * 1024 && bytes <= 1024 * 1024)
        return pof2 ? 90 : 70;
    return 20;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank, p = mesh_rd_pof2(n), lg = mesh_rd_log2(p);
    size_t ds = args->dsize, count = args->count;
    char *rbuf = args->rbuf;

    if (count == 0)
        return mesh_sched_status(s);
    if (n == 1) {
        if (!args->in_place)
            mesh_sched_copy(s, rbuf, args->sbuf, count * ds, NULL, 0);
        return mesh_sched_status(s);
    }
    size_t *bnd = mesh_sched_scratch(s, (size_t)(p + 1) * sizeof(size_t));
    if (!bnd)
        return mesh_error(MESH_ERR_NO_MEMORY, "rabenseifner: no memory for offsets");
    for (int i = 0; i <= p; i++)
        bnd[i] = mesh_block_offset(count, p, i);

    mesh_coll_group_t g = {.me = me, .n = n, .ranks = NULL};
    mesh_coll_rh_result_t rh;
    MESH_CHECK(mesh_coll_rh_reduce_scatter_phase(s, &g, 0, args->sbuf, rbuf, bnd, count, ds, NULL,
                                                 0, &rh));
    int fold = mesh_rd_fold_partner(me, n);
    if (rh.core < 0) {
        /* extra rank: the result comes back from the partner, after our input left */
        mesh_sched_recv(s, fold, rbuf, count * ds, &rh.done, 1);
        return mesh_sched_status(s);
    }
    /* recursive doubling of the reduced windows, the halving walked backwards */
    int cr = rh.core, ready = rh.last;
    for (int lv = lg - 1; lv >= 0; lv--) {
        int qr = mesh_rh_partner(cr, p, lv), peer = mesh_rd_core_to_rank(qr, n);
        int kf = mesh_rh_window_first(cr, p, lv + 1), qf = mesh_rh_window_first(qr, p, lv + 1);
        int nb = mesh_rh_window_blocks(p, lv + 1);
        size_t kn = bnd[kf + nb] - bnd[kf], qn = bnd[qf + nb] - bnd[qf];
        int sd = kn ? mesh_sched_send(s, peer, rbuf + bnd[kf] * ds, kn * ds, &ready, 1) : -1;
        /* the partner's window was sent from (or reduced into) this memory while halving */
        int rv = qn ? mesh_sched_recv(s, peer, rbuf + bnd[qf] * ds, qn * ds,
                                      (int[]){rh.sent[lv], rh.last}, 2)
                    : -1;
        ready = mesh_sched_nop(s, (int[]){ready, sd, rv}, 3);
    }
    if (fold >= 0)
        mesh_sched_send(s, fold, rbuf, count * ds, &ready, 1);
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_rabenseifner = {
    .name = "rabenseifner",
    .desc = "recursive-halving reduce-scatter + recursive-doubling all-gather; medium vectors",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
