/* Public entry points that move blocks without reducing them: broadcast, all-gather(v), gather,
 * scatter. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include <stdlib.h>

mesh_status_t mesh_broadcast(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                             mesh_dtype_t dtype, int root, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_broadcast";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_root(comm, fn, root));
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    if (comm->rank == root) {
        MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf (at the root)", sbuf, count));
        MESH_CHECK(
            mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, count * ds, sbuf == rbuf));
    }
    MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf", rbuf, count));
    mesh_coll_args_t a = {.type = MESH_COLL_BROADCAST,
                          .sbuf = comm->rank == root ? sbuf : rbuf,
                          .rbuf = rbuf,
                          .count = count,
                          .dtype = dtype,
                          .op = MESH_SUM,
                          .root = root,
                          .in_place = sbuf == rbuf,
                          .uniform = 1,
                          .dsize = ds,
                          .bytes = count * ds};
    MESH_CHECK(mesh_api_check_mem(comm, fn, stream, "sbuf", comm->rank == root ? sbuf : NULL,
                                  "rbuf", rbuf, &a));
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}

/* counts NULL: every rank contributes fill elements, back to back. */
static mesh_status_t allgather_common(mesh_comm_t *comm, const char *fn, const void *sbuf,
                                      void *rbuf, const size_t *recvcounts, size_t fill,
                                      const size_t *given_displs, mesh_dtype_t dtype, void *stream,
                                      mesh_request_h *req)
{
    size_t ds = mesh_dtype_size(dtype), total, extent, *blocks;
    int uniform;
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 2, &blocks));
    mesh_status_t st =
        mesh_api_layout(comm, fn, recvcounts ? "recvcounts" : "sendcount", "displs", recvcounts,
                        fill, given_displs, ds, 1, blocks, &total, &extent, &uniform);
    size_t *counts = blocks, *displs = blocks + comm->size;
    size_t mine = counts[comm->rank];
    int in_place = st == MESH_OK && rbuf != NULL &&
                   (const char *)rbuf + displs[comm->rank] * ds == (const char *)sbuf;
    if (st < 0 || (st = mesh_api_check_buf(comm, fn, "sbuf", sbuf, mine)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "rbuf", rbuf, extent)) < 0 ||
        (st = mesh_api_check_overlap(comm, fn, sbuf, mine * ds, rbuf, extent * ds, in_place)) < 0) {
        free(blocks);
        return st;
    }
    mesh_coll_args_t a = {.type = MESH_COLL_ALLGATHER,
                          .sbuf = sbuf,
                          .rbuf = rbuf,
                          .count = mine,
                          .dtype = dtype,
                          .op = MESH_SUM,
                          .in_place = in_place,
                          .uniform = uniform,
                          .dsize = ds,
                          .bytes = total * ds,
                          .counts = counts,
                          .displs = displs};
    if ((st = mesh_api_check_mem(comm, fn, stream, "sbuf", sbuf, "rbuf", rbuf, &a)) < 0) {
        free(blocks);
        return st;
    }
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, blocks, req);
}

mesh_status_t mesh_allgather(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t sendcount,
                             mesh_dtype_t dtype, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_allgather";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    return allgather_common(comm, fn, sbuf, rbuf, NULL, sendcount, NULL, dtype, stream, req);
}

mesh_status_t mesh_allgatherv(mesh_comm_h comm, const void *sbuf, void *rbuf,
                              const size_t *recvcounts, const size_t *displs, mesh_dtype_t dtype,
                              void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_allgatherv";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(recvcounts != NULL, "%s: recvcounts is NULL", fn);
    return allgather_common(comm, fn, sbuf, rbuf, recvcounts, 0, displs, dtype, stream, req);
}

mesh_status_t mesh_gather(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                          mesh_dtype_t dtype, int root, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_gather";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_root(comm, fn, root));
    size_t ds = mesh_dtype_size(dtype), all = count * (size_t)comm->size;
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, (size_t)comm->size));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf", sbuf, count));
    int in_place = 0;
    if (comm->rank == root) {
        MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf (at the root)", rbuf, all));
        in_place = rbuf != NULL && (char *)rbuf + (size_t)root * count * ds == (const char *)sbuf;
        MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, all * ds, in_place));
    }
    mesh_coll_args_t a = {.type = MESH_COLL_GATHER,
                          .sbuf = sbuf,
                          .rbuf = comm->rank == root ? rbuf : NULL,
                          .count = count,
                          .dtype = dtype,
                          .op = MESH_SUM,
                          .root = root,
                          .in_place = in_place,
                          .uniform = 1,
                          .dsize = ds,
                          .bytes = all * ds};
    MESH_CHECK(mesh_api_check_mem(comm, fn, stream, "sbuf", sbuf, "rbuf", a.rbuf, &a));
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}

mesh_status_t mesh_scatter(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                           mesh_dtype_t dtype, int root, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_scatter";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_root(comm, fn, root));
    size_t ds = mesh_dtype_size(dtype), all = count * (size_t)comm->size;
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, (size_t)comm->size));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf", rbuf, count));
    int in_place = 0;
    if (comm->rank == root) {
        MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf (at the root)", sbuf, all));
        in_place = sbuf != NULL && (const char *)sbuf + (size_t)root * count * ds == (char *)rbuf;
        MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, all * ds, rbuf, count * ds, in_place));
    }
    mesh_coll_args_t a = {.type = MESH_COLL_SCATTER,
                          .sbuf = comm->rank == root ? sbuf : NULL,
                          .rbuf = rbuf,
                          .count = count,
                          .dtype = dtype,
                          .op = MESH_SUM,
                          .root = root,
                          .in_place = in_place,
                          .uniform = 1,
                          .dsize = ds,
                          .bytes = all * ds};
    MESH_CHECK(mesh_api_check_mem(comm, fn, stream, "sbuf", a.sbuf, "rbuf", rbuf, &a));
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}
