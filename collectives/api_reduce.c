/* Public entry points of the reductions: all-reduce, reduce, reduce-scatter(v). */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include <stdlib.h>

mesh_status_t mesh_allreduce(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                             mesh_dtype_t dtype, mesh_op_t op, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_allreduce";
    mesh_op_t base;
    const void *scalar;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_op(comm, fn, op, dtype, &base, &scalar));
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf", sbuf, count));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf", rbuf, count));
    MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, count * ds, sbuf == rbuf));
    mesh_coll_args_t a = {.type = MESH_COLL_ALLREDUCE,
                          .sbuf = sbuf,
                          .rbuf = rbuf,
                          .count = count,
                          .dtype = dtype,
                          .op = base,
                          .opcode = mesh_api_opcode(op),
                          .in_place = sbuf == rbuf,
                          .uniform = 1,
                          .dsize = ds,
                          .bytes = count * ds};
    MESH_CHECK(mesh_api_check_mem(comm, fn, stream, "sbuf", sbuf, "rbuf", rbuf, &a));
    return mesh_api_launch(comm, &a, scalar, count, op == MESH_AVG ? rbuf : NULL, count, NULL, req);
}

mesh_status_t mesh_reduce(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                          mesh_dtype_t dtype, mesh_op_t op, int root, void *stream,
                          mesh_request_h *req)
{
    static const char fn[] = "mesh_reduce";
    mesh_op_t base;
    const void *scalar;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_op(comm, fn, op, dtype, &base, &scalar));
    MESH_CHECK(mesh_api_check_root(comm, fn, root));
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf", sbuf, count));
    int is_root = comm->rank == root;
    if (is_root) {
        MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf (at the root)", rbuf, count));
        MESH_CHECK(
            mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, count * ds, sbuf == rbuf));
    }
    mesh_coll_args_t a = {.type = MESH_COLL_REDUCE,
                          .sbuf = sbuf,
                          .rbuf = is_root ? rbuf : NULL,
                          .count = count,
                          .dtype = dtype,
                          .op = base,
                          .opcode = mesh_api_opcode(op),
                          .root = root,
                          .in_place = sbuf == rbuf,
                          .uniform = 1,
                          .dsize = ds,
                          .bytes = count * ds};
    MESH_CHECK(mesh_api_check_mem(comm, fn, stream, "sbuf", sbuf, "rbuf", a.rbuf, &a));
    return mesh_api_launch(comm, &a, scalar, count, op == MESH_AVG && is_root ? rbuf : NULL, count,
                           NULL, req);
}

/* recvcounts NULL: every rank gets fill elements. */
static mesh_status_t reduce_scatter_common(mesh_comm_t *comm, const char *fn, const void *sbuf,
                                           void *rbuf, const size_t *recvcounts, size_t fill,
                                           mesh_dtype_t dtype, mesh_op_t op, void *stream,
                                           mesh_request_h *req)
{
    mesh_op_t base;
    const void *scalar;
    size_t ds = mesh_dtype_size(dtype), total, extent, *blocks;
    int uniform;
    MESH_CHECK(mesh_api_check_op(comm, fn, op, dtype, &base, &scalar));
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 2, &blocks));
    mesh_status_t st =
        mesh_api_layout(comm, fn, recvcounts ? "recvcounts" : "recvcount", NULL, recvcounts, fill,
                        NULL, ds, 0, blocks, &total, &extent, &uniform);
    size_t *counts = blocks, *displs = blocks + comm->size;
    if (st < 0 || (st = mesh_api_check_buf(comm, fn, "sbuf", sbuf, total)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "rbuf", rbuf, counts[comm->rank])) < 0) {
        free(blocks);
        return st;
    }
    int in_place = sbuf != NULL && (const char *)sbuf + displs[comm->rank] * ds == (char *)rbuf;
    if ((st = mesh_api_check_overlap(comm, fn, sbuf, total * ds, rbuf, counts[comm->rank] * ds,
                                     in_place)) < 0) {
        free(blocks);
        return st;
    }
    mesh_coll_args_t a = {.type = MESH_COLL_REDUCE_SCATTER,
                          .sbuf = sbuf,
                          .rbuf = rbuf,
                          .count = counts[comm->rank],
                          .dtype = dtype,
                          .op = base,
                          .opcode = mesh_api_opcode(op),
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
    return mesh_api_launch(comm, &a, scalar, total, op == MESH_AVG ? rbuf : NULL,
                           counts[comm->rank], blocks, req);
}

mesh_status_t mesh_reduce_scatter(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t recvcount,
                                  mesh_dtype_t dtype, mesh_op_t op, void *stream,
                                  mesh_request_h *req)
{
    static const char fn[] = "mesh_reduce_scatter";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    return reduce_scatter_common(comm, fn, sbuf, rbuf, NULL, recvcount, dtype, op, stream, req);
}

mesh_status_t mesh_reduce_scatterv(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                   const size_t *recvcounts, mesh_dtype_t dtype, mesh_op_t op,
                                   void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_reduce_scatterv";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(recvcounts != NULL, "%s: recvcounts is NULL", fn);
    return reduce_scatter_common(comm, fn, sbuf, rbuf, recvcounts, 0, dtype, op, stream, req);
}
