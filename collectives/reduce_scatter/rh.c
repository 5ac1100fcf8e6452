/*
 * Recursive-halving reduce-scatter: the packed vector is halved log2(p) times between core ranks
 * (extra ranks of a non-power-of-two size fold into a partner first), each core rank ending with
 * the blocks of the ranks it stands for; it then hands its extra partner that rank's block.
 * log2(p) latency terms: small and medium vectors. Any counts: core block boundaries are the
 * boundaries of the ranks' blocks.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/rd.h"
#include "collectives/patterns/ring_sched.h"
#include "libmesh/log.h"

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
        return mesh_sched_status(s);
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
        return mesh_sched_status(s);
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
    mesh_coll_group_t g = {.me = me, .n = n, .ranks = NULL};
    mesh_coll_rh_result_t rh;
    MESH_CHECK(
        mesh_coll_rh_reduce_scatter_phase(s, &g, 0, src, acc, bnd, total, ds, &ready, 1, &rh));
    int fold = mesh_rd_fold_partner(me, n);
    if (rh.core < 0) {
        if (own)
            mesh_sched_recv(s, fold, args->rbuf, own * ds, &rh.done, 1);
        return mesh_sched_status(s);
    }
    if (own)
        mesh_sched_copy(s, args->rbuf, acc + pk[me] * ds, own * ds, &rh.last, 1);
    if (fold >= 0 && args->counts[fold])
        mesh_sched_send(s, fold, acc + pk[fold] * ds, args->counts[fold] * ds, &rh.last, 1);
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_scatter_rh = {
    .name = "rh",
    .desc = "recursive halving, non-powers of two by folding; any counts",
    .type = MESH_COLL_REDUCE_SCATTER,
    .score = score,
    .build = build};
