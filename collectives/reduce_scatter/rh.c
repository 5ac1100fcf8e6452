/*
 * Recursive-halving reduce-scatter: the packed vector is halved log2(p) times between core ranks
 * (extra ranks of a non-power-of-two size fold into a partner first), each core rank ending with
 * the blocks of the ranks it stands for; it then hands its extra partner that rank's block.
 * log2(p) latency terms: small and medium vectors. Any counts: core block boundaries are the
 * boundaries of the ranks' blocks. The halving phase builder serves the Rabenseifner all-reduce
 * and reduce too.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/rd.h"
#include "collectives/phases.h"
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
    res->shift = shift;
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
    if (bytes <= 64 * 1024)
        return pof2 ? 100 : 90;
    return 20;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank, p = mesh_rd_pof2(n);
    size_t ds = args->dsize, own = args->counts[me], total = 0;
    const char *sbuf = args->sbuf;

    if (n == 1) {
        if (own && !args->in_place)
            mesh_sched_copy(s, args->rbuf, sbuf + args->displs[0] * ds, own * ds, NULL, 0);
        return mesh_sched_build_status(s);
    }
    size_t *pk = mesh_sched_scratch(s, ((size_t)n + (size_t)p + 2) * sizeof(size_t));
    if (!pk)
        return mesh_error(MESH_ERR_NO_MEMORY, "recursive halving: no memory for offsets");
    size_t *bnd = pk + n + 1;
    int packed = 1;
    for (int i = 0; i < n; i++) {
        pk[i] = total;
        total += args->counts[i];
        if (args->displs[i] != args->displs[0] + pk[i])
            packed = 0;
    }
    pk[n] = total;
    if (total == 0)
        return mesh_sched_build_status(s);
    for (int c = 0; c <= p; c++)
        bnd[c] = pk[mesh_rd_core_first_rank(c, n)];

    /* the halving works on a packed vector: the input itself when its blocks are back to back,
     * else a packed copy */
    const char *src = sbuf + args->displs[0] * ds;
    mesh_coll_ids_t ids = {0};
    if (!packed) {
        char *cp = mesh_sched_scratch(s, total * ds);
        if (!cp)
            return mesh_error(MESH_ERR_NO_MEMORY, "recursive halving: no memory to pack");
        for (int i = 0; i < n; i++)
            if (args->counts[i])
                mesh_coll_ids_add(&ids,
                                  mesh_sched_copy(s, cp + pk[i] * ds, sbuf + args->displs[i] * ds,
                                                  args->counts[i] * ds, NULL, 0));
        src = cp;
    }
    int ready;
    MESH_CHECK(mesh_coll_ids_join(s, &ids, NULL, 0, &ready));
    char *acc = mesh_rd_is_extra(me, n) ? NULL : mesh_sched_scratch(s, total * ds);
    if (!mesh_rd_is_extra(me, n) && !acc)
        return mesh_error(MESH_ERR_NO_MEMORY, "recursive halving: no memory for %zu bytes",
                          total * ds);
    mesh_coll_group_t g = mesh_coll_group_all(comm);
    mesh_coll_rh_result_t rh;
    MESH_CHECK(
        mesh_coll_rh_reduce_scatter_phase(s, &g, 0, src, acc, bnd, total, ds, &ready, 1, &rh));
    int fold = mesh_rd_fold_partner(me, n);
    if (rh.core < 0) {
        if (own)
            mesh_sched_recv(s, fold, args->rbuf, own * ds, &rh.done, 1);
        return mesh_sched_build_status(s);
    }
    if (own)
        mesh_sched_copy(s, args->rbuf, acc + pk[me] * ds, own * ds, &rh.last, 1);
    if (fold >= 0 && args->counts[fold])
        mesh_sched_send(s, fold, acc + pk[fold] * ds, args->counts[fold] * ds, &rh.last, 1);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_rh = {
    .name = "rh",
    .desc = "recursive halving, non-powers of two by folding; any counts",
    .type = MESH_COLL_REDUCE_SCATTER,
    .score = score,
    .build = build};
