/*
 * Ring all-reduce: ring reduce-scatter then ring all-gather over size element-aligned blocks,
 * both pipelined in segments. Bandwidth-optimal (2 (n-1)/n of the vector per rank) with n - 1
 * latency terms per phase: the choice for large vectors. The all-reduce phase built here serves
 * the rails of the hierarchical all-reduce too.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

mesh_status_t mesh_coll_ring_allreduce_setup(mesh_sched_t *s, const mesh_coll_group_t *g,
                                             const void *src, void *dst, size_t count, size_t dsize,
                                             const int *deps, int ndeps, mesh_coll_ring_phase_t *p)
{
    size_t *off, *len;
    MESH_CHECK(mesh_coll_ring_split(s, count, g->n, 0, &off, &len));
    *p = (mesh_coll_ring_phase_t){.g = *g,
                                  .dsize = dsize,
                                  .src = src,
                                  .src_off = off,
                                  .acc = dst,
                                  .acc_off = off,
                                  .own = (char *)dst + off[g->me] * dsize,
                                  .len = len,
                                  .deps = deps,
                                  .ndeps = ndeps};
    return MESH_OK;
}

mesh_status_t mesh_coll_ring_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                             const void *src, void *dst, size_t count, size_t dsize,
                                             const int *deps, int ndeps, int *done)
{
    mesh_coll_ring_phase_t p;
    int rs;
    MESH_CHECK(mesh_coll_ring_allreduce_setup(s, g, src, dst, count, dsize, deps, ndeps, &p));
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
    mesh_coll_group_t g = mesh_coll_group_all(comm);
    int done;
    if (args->count == 0)
        return mesh_sched_build_status(s);
    MESH_CHECK(mesh_coll_ring_allreduce_phase(s, &g, args->sbuf, args->rbuf, args->count,
                                              args->dsize, NULL, 0, &done));
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allreduce_ring = {
    .name = "ring",
    .desc = "ring reduce-scatter + ring all-gather, pipelined; large vectors",
    .type = MESH_COLL_ALLREDUCE,
    .score = score,
    .build = build};
