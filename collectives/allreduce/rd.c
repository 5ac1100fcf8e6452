/*
 * Recursive-doubling all-reduce: log2(p) exchanges of the whole vector between core ranks, after
 * the extra ranks of a non-power-of-two size have folded their input into a core partner (which
 * sends them the result at the end). Fewest latency terms: the choice for small vectors. Partners
 * reduce in the same operand order, so every rank gets identical bits.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/rd.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

mesh_status_t mesh_coll_rd_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                           const void *src, void *dst, size_t count, size_t dsize,
                                           const int *deps, int ndeps, int *done)
{
    int n = g->n, me = g->me;
    size_t bytes = count * dsize;
    mesh_coll_ids_t ids = {0};

    if (bytes == 0)
        return mesh_coll_ids_join(s, &ids, deps, ndeps, done);
    if (n == 1) {
        if (src != dst)
            mesh_coll_ids_add(&ids, mesh_sched_copy(s, dst, src, bytes, deps, ndeps));
        return mesh_coll_ids_join(s, &ids, deps, ndeps, done);
    }
    int start = ndeps ? mesh_sched_nop(s, deps, ndeps) : -1;
    int fold = mesh_rd_fold_partner(me, n);
    int fold_rank = fold >= 0 ? mesh_coll_group_rank(g, fold) : -1;

    if (mesh_rd_is_extra(me, n)) {
        /* hand the input over and wait for the result (after the send: src may be dst) */
        int sd = mesh_sched_send(s, fold_rank, src, bytes, &start, 1);
        int rv = mesh_sched_recv(s, fold_rank, dst, bytes, (int[]){start, sd}, 2);
        mesh_coll_ids_add(&ids, sd);
        mesh_coll_ids_add(&ids, rv);
        return mesh_coll_ids_join(s, &ids, &start, 1, done);
    }

    char *tmp = mesh_sched_scratch(s, bytes);
    if (!tmp)
        return mesh_error(MESH_ERR_NO_MEMORY, "rd all-reduce: no memory for %zu bytes", bytes);
    const void *have = src; /* where this rank's current partial result is */
    int last = start;
    if (fold >= 0) {
        int rv = mesh_sched_recv(s, fold_rank, tmp, bytes, NULL, 0);
        last = mesh_sched_reduce3(s, dst, src, tmp, count, (int[]){rv, start}, 2);
        have = dst;
        mesh_coll_ids_add(&ids, rv);
    }
    int steps = mesh_rd_log2(mesh_rd_pof2(n));
    for (int k = 0; k < steps; k++) {
        int peer = mesh_coll_group_rank(g, mesh_rd_partner(me, n, k));
        /* the receive reuses tmp once the previous reduction consumed it; the reduction may
         * overwrite what was sent only after the send completed. The receive is posted first,
         * so that the partner's message finds it and lands in place. */
        int rv = mesh_sched_recv(s, peer, tmp, bytes, &last, 1);
        int sd = mesh_sched_send(s, peer, have, bytes, &last, 1);
        if (have == dst)
            mesh_sched_send_reused(s, sd);
        /* both partners reduce in the same operand order (lower core rank first) so that they
         * agree bit for bit even where op is not bitwise commutative (min/max of signed zeros) */
        int mine_first = mesh_rd_core_rank(me, n) < (mesh_rd_core_rank(me, n) ^ (1 << k));
        last = mesh_sched_reduce3(s, dst, mine_first ? have : tmp, mine_first ? tmp : have, count,
                                  (int[]){sd, rv, last}, 3);
        have = dst;
        mesh_coll_ids_add(&ids, sd);
        mesh_coll_ids_add(&ids, rv);
    }
    mesh_coll_ids_add(&ids, last);
    if (fold >= 0)
        mesh_coll_ids_add(&ids, mesh_sched_send(s, fold_rank, dst, bytes, &last, 1));
    return mesh_coll_ids_join(s, &ids, &start, 1, done);
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes <= 16 * 1024)
        return 100;
    /* two ranks: one exchange of the whole vector beats two of halves (Rabenseifner) while
     * latency still counts */
    if (comm->size == 2 && bytes <= 128 * 1024)
        return 95;
    if (bytes <= 64 * 1024)
        return 50;
    return 5;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    mesh_coll_group_t g = mesh_coll_group_all(comm);
    int done;
    MESH_CHECK(mesh_coll_rd_allreduce_phase(s, &g, args->sbuf, args->rbuf, args->count, args->dsize,
                                            NULL, 0, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_rd = {
    .name = "rd",
    .desc = "recursive doubling, non-powers of two by folding; small vectors",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
