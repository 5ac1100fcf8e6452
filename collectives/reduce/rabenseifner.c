/*
 * Rabenseifner reduce: recursive-halving reduce-scatter (core ranks numbered relative to the
 * root's core rank), then a binomial gather of the reduced blocks to the root, where every subtree
 * holds a contiguous range. Moves about 2 (p-1)/p of the vector per rank instead of log2(p)
 * whole vectors: large vectors. A root that is an extra rank of a non-power-of-two size gets the
 * result from its folding partner.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/rd.h"
#include "collectives/patterns/ring.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (bytes > 64 * 1024)
        return 90;
    return 20;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, me = comm->rank, root = args->root, p = mesh_rd_pof2(n);
    size_t ds = args->dsize, count = args->count;

    if (count == 0)
        return mesh_sched_build_status(s);
    if (n == 1) {
        if (!args->in_place)
            mesh_sched_copy(s, args->rbuf, args->sbuf, count * ds, NULL, 0);
        return mesh_sched_build_status(s);
    }
    int root_extra = mesh_rd_is_extra(root, n);
    int groot = root_extra ? mesh_rd_fold_partner(root, n) : root; /* where the gather ends */
    int shift = mesh_rd_core_rank(groot, n);
    size_t *bnd = mesh_sched_scratch(s, (size_t)(p + 1) * sizeof(size_t));
    if (!bnd)
        return mesh_error(MESH_ERR_NO_MEMORY, "rabenseifner reduce: no memory for offsets");
    for (int i = 0; i <= p; i++)
        bnd[i] = mesh_block_offset(count, p, i);

    /* the root accumulates in its receive buffer, the other core ranks in scratch */
    char *acc = NULL;
    if (!mesh_rd_is_extra(me, n)) {
        acc = me == root ? args->rbuf : mesh_sched_scratch(s, count * ds);
        if (!acc)
            return mesh_error(MESH_ERR_NO_MEMORY, "rabenseifner reduce: no memory for %zu bytes",
                              count * ds);
    }
    mesh_coll_group_t g = mesh_coll_group_all(comm);
    mesh_coll_rh_result_t rh;
    MESH_CHECK(mesh_coll_rh_reduce_scatter_phase(s, &g, shift, args->sbuf, acc, bnd, count, ds,
                                                 NULL, 0, &rh));
    if (rh.core < 0) {
        if (me == root)
            mesh_sched_recv(s, groot, args->rbuf, count * ds, &rh.done, 1);
        return mesh_sched_build_status(s);
    }
    /* binomial gather over relative core ranks: the subtree of cr holds blocks [cr, cr + sub) */
    int cr = rh.core, ready = rh.done;
    int nch = mesh_binomial_nchildren(cr, 0, p);
    for (int i = 0; i < nch; i++) {
        int ch = mesh_binomial_child(cr, 0, p, i), sub = mesh_binomial_subtree(ch, 0, p);
        int peer = mesh_rd_core_to_rank((ch + shift) % p, n);
        size_t len = bnd[ch + sub] - bnd[ch];
        int rv = len ? mesh_sched_recv(s, peer, acc + bnd[ch] * ds, len * ds, &rh.done, 1) : -1;
        ready = mesh_sched_nop(s, (int[]){ready, rv}, 2);
    }
    if (cr != 0) {
        int parent = mesh_rd_core_to_rank((mesh_binomial_parent(cr, 0, p) + shift) % p, n);
        int sub = mesh_binomial_subtree(cr, 0, p);
        size_t len = bnd[cr + sub] - bnd[cr];
        if (len)
            mesh_sched_send(s, parent, acc + bnd[cr] * ds, len * ds, &ready, 1);
    } else if (me != root) {
        /* the gather ended at the folding partner of an extra root */
        mesh_sched_send(s, root, acc, count * ds, &ready, 1);
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_reduce_rabenseifner = {
    .name = "rabenseifner",
    .desc = "recursive-halving reduce-scatter + binomial gather to the root; large vectors",
    .type = MESH_COLL_REDUCE,
    .score = score,
    .build = build};
