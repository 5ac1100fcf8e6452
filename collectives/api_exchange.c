/* Public entry points where every rank exchanges with every other: all-to-all(v) and barrier. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include <stdlib.h>

static mesh_status_t alltoall_common(mesh_comm_t *comm, const char *fn, const void *sbuf,
                                     void *rbuf, size_t *blocks, int uniform, mesh_dtype_t dtype,
                                     mesh_request_h *req)
{
    int n = comm->size;
    size_t ds = mesh_dtype_size(dtype), sext, rext;
    size_t *sc = blocks, *sd = blocks + n, *rc = blocks + 2 * n, *rd = blocks + 3 * n;
    size_t stotal = mesh_api_pack_displs(n, sc, sd, sd, &sext);
    size_t rtotal = mesh_api_pack_displs(n, rc, rd, rd, &rext);
    int in_place = sbuf == rbuf && sbuf != NULL;
    mesh_status_t st;
    if ((st = mesh_api_check_count(comm, fn, sext > rext ? sext : rext, ds, 1)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "sbuf", sbuf, stotal)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "rbuf", rbuf, rtotal)) < 0 ||
        (st = mesh_api_check_overlap(comm, fn, sbuf, sext * ds, rbuf, rext * ds, in_place)) < 0) {
        free(blocks);
        return st;
    }
    if (in_place) {
        for (int i = 0; i < n; i++) {
            if (sc[i] != rc[i] || sd[i] != rd[i]) {
                free(blocks);
                CHECK_ARG(0, "%s: in place needs equal send and receive counts and displacements "
                          "(rank %d differs)", fn, i);
            }
        }
    }
    mesh_coll_args_t a = {.type = MESH_COLL_ALLTOALL, .sbuf = sbuf, .rbuf = rbuf,
                          .count = sc[0], .dtype = dtype, .op = MESH_SUM,
                          .in_place = in_place, .uniform = uniform, .dsize = ds,
                          .bytes = (stotal > rtotal ? stotal : rtotal) * ds, .counts = sc,
                          .displs = sd, .rcounts = rc, .rdispls = rd};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, blocks, req);
}

mesh_status_t mesh_alltoall(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                            mesh_dtype_t dtype, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_alltoall";
    size_t *b = NULL;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_count(comm, fn, count, mesh_dtype_size(dtype), (size_t)comm->size));
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 4, &b));
    int n = comm->size;
    for (int i = 0; i < n; i++) {
        b[i] = b[2 * n + i] = count;
        b[n + i] = b[3 * n + i] = (size_t)i * count;
    }
    return alltoall_common(comm, fn, sbuf, rbuf, b, 1, dtype, req);
}

mesh_status_t mesh_alltoallv(mesh_comm_h comm, const void *sbuf, const size_t *sendcounts,
                             const size_t *sdispls, void *rbuf, const size_t *recvcounts,
                             const size_t *rdispls, mesh_dtype_t dtype, void *stream,
                             mesh_request_h *req)
{
    static const char fn[] = "mesh_alltoallv";
    size_t *b = NULL;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(sendcounts != NULL, "%s: sendcounts is NULL", fn);
    CHECK_ARG(recvcounts != NULL, "%s: recvcounts is NULL", fn);
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 4, &b));
    int n = comm->size, uniform = sdispls == NULL && rdispls == NULL;
    size_t soff = 0, roff = 0;
    for (int i = 0; i < n; i++) {
        b[i] = sendcounts[i];
        b[n + i] = sdispls ? sdispls[i] : soff;
        b[2 * n + i] = recvcounts[i];
        b[3 * n + i] = rdispls ? rdispls[i] : roff;
        soff += sendcounts[i];
        roff += recvcounts[i];
        uniform &= sendcounts[i] == sendcounts[0] && recvcounts[i] == sendcounts[0];
    }
    return alltoall_common(comm, fn, sbuf, rbuf, b, uniform, dtype, req);
}

mesh_status_t mesh_barrier(mesh_comm_h comm, mesh_request_h *req)
{
    MESH_CHECK(mesh_api_check_comm(comm, "mesh_barrier", NULL));
    mesh_coll_args_t a = {.type = MESH_COLL_BARRIER, .dtype = MESH_UINT8, .op = MESH_SUM,
                          .uniform = 1, .dsize = 1};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}
