/* Public entry points where every rank exchanges with every other: all-to-all(v) and barrier. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include <stdlib.h>

/* counts NULL: count elements to and from every rank, back to back. */
static mesh_status_t alltoall_common(mesh_comm_t *comm, const char *fn, const void *sbuf,
                                     const size_t *sendcounts, const size_t *sdispls, void *rbuf,
                                     const size_t *recvcounts, const size_t *rdispls, size_t count,
                                     mesh_dtype_t dtype, void *stream, mesh_request_h *req)
{
    int n = comm->size, suni, runi;
    size_t ds = mesh_dtype_size(dtype), stotal, rtotal, sext, rext, *b;
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 4, &b));
    size_t *sc = b, *sd = b + n, *rc = b + 2 * n, *rd = b + 3 * n;
    int in_place = sbuf == rbuf && sbuf != NULL;
    mesh_status_t st;
    if ((st = mesh_api_layout(comm, fn, sendcounts ? "sendcounts" : "count", "sdispls", sendcounts,
                              count, sdispls, ds, 0, b, &stotal, &sext, &suni)) < 0 ||
        (st = mesh_api_layout(comm, fn, recvcounts ? "recvcounts" : "count", "rdispls", recvcounts,
                              count, rdispls, ds, 1, b + 2 * n, &rtotal, &rext, &runi)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "sbuf", sbuf, stotal)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "rbuf", rbuf, rtotal)) < 0 ||
        (st = mesh_api_check_overlap(comm, fn, sbuf, sext * ds, rbuf, rext * ds, in_place)) < 0) {
        free(b);
        return st;
    }
    if (in_place) {
        for (int i = 0; i < n; i++) {
            if (sc[i] != rc[i] || sd[i] != rd[i]) {
                free(b);
                CHECK_ARG(0,
                          "%s: in place needs equal send and receive counts and displacements "
                          "(rank %d differs)",
                          fn, i);
            }
        }
    }
    mesh_coll_args_t a = {.type = MESH_COLL_ALLTOALL,
                          .sbuf = sbuf,
                          .rbuf = rbuf,
                          .count = sc[0],
                          .dtype = dtype,
                          .op = MESH_SUM,
                          .in_place = in_place,
                          .uniform = suni && runi && sc[0] == rc[0],
                          .dsize = ds,
                          .bytes = (stotal > rtotal ? stotal : rtotal) * ds,
                          .counts = sc,
                          .displs = sd,
                          .rcounts = rc,
                          .rdispls = rd};
    if ((st = mesh_api_check_mem(comm, fn, stream, "sbuf", sbuf, "rbuf", rbuf, &a)) < 0) {
        free(b);
        return st;
    }
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, b, req);
}

mesh_status_t mesh_alltoall(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                            mesh_dtype_t dtype, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_alltoall";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    return alltoall_common(comm, fn, sbuf, NULL, NULL, rbuf, NULL, NULL, count, dtype, stream, req);
}

mesh_status_t mesh_alltoallv(mesh_comm_h comm, const void *sbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *rbuf, const size_t *recvcounts,
                             const size_t *rdispls, mesh_dtype_t dtype, void *stream,
                             mesh_request_h *req)
{
    static const char fn[] = "mesh_alltoallv";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(sendcounts != NULL, "%s: sendcounts is NULL", fn);
    CHECK_ARG(recvcounts != NULL, "%s: recvcounts is NULL", fn);
    return alltoall_common(comm, fn, sbuf, sendcounts, sdispls, rbuf, recvcounts, rdispls, 0, dtype,
                           stream, req);
}

mesh_status_t mesh_barrier(mesh_comm_h comm, mesh_request_h *req)
{
    MESH_CHECK(mesh_api_check_comm(comm, "mesh_barrier", NULL));
    mesh_coll_args_t a = {
        .type = MESH_COLL_BARRIER, .dtype = MESH_UINT8, .op = MESH_SUM, .uniform = 1, .dsize = 1};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}
