/*
 * Rabenseifner all-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather
 * of the reduced blocks, over the power-of-two core after folding the extra ranks. Moves
 * 2 (p-1)/p of the vector like the ring but with 2 log2(p) latency terms: medium vectors. Both
 * halves are phases: the halving of reduce_scatter/rh.c, the doubling of allgather/rd.c.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/rd.h"
#include "collectives/patterns/ring.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    int pof2 = (comm->size & (comm->size - 1)) == 0;
    if (bytes > 16 * 1024 && bytes <= 1024 * 1024)
        return pof2 ? 90 : 70;
    return 20;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s)
{
    int n = comm->size, p = mesh_rd_pof2(n), done;
    size_t ds = args->dsize, count = args->count;
    char *rbuf = args->rbuf;

    if (count == 0)
        return mesh_sched_build_status(s);
    if (n == 1) {
        if (!args->in_place)
            mesh_sched_copy(s, rbuf, args->sbuf, count * ds, NULL, 0);
        return mesh_sched_build_status(s);
    }
    size_t *bnd = mesh_sched_scratch(s, (size_t)(p + 1) * sizeof(size_t));
    if (!bnd)
        return mesh_error(MESH_ERR_NO_MEMORY, "rabenseifner: no memory for offsets");
    for (int i = 0; i <= p; i++)
        bnd[i] = mesh_block_offset(count, p, i);

    mesh_coll_group_t g = mesh_coll_group_all(comm);
    mesh_coll_rh_result_t rh;
    MESH_CHECK(mesh_coll_rh_reduce_scatter_phase(s, &g, 0, args->sbuf, rbuf, bnd, count, ds, NULL,
                                                 0, &rh));
    MESH_CHECK(mesh_coll_rd_allgather_phase(s, &g, rbuf, bnd, count, ds, &rh, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_rabenseifner = {
    .name = "rabenseifner",
    .desc = "recursive-halving reduce-scatter + recursive-doubling all-gather; medium vectors",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
