/* Public entry points: all-to-all(v), gather, scatter, barrier, send and receive. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "collectives/request.h"
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
    mesh_coll_args_t a = {.type = MESH_COLL_GATHER, .sbuf = sbuf,
                          .rbuf = comm->rank == root ? rbuf : NULL, .count = count,
                          .dtype = dtype, .op = MESH_SUM, .root = root, .in_place = in_place,
                          .uniform = 1, .dsize = ds, .bytes = all * ds};
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
    mesh_coll_args_t a = {.type = MESH_COLL_SCATTER, .sbuf = comm->rank == root ? sbuf : NULL,
                          .rbuf = rbuf, .count = count, .dtype = dtype, .op = MESH_SUM,
                          .root = root, .in_place = in_place, .uniform = 1, .dsize = ds,
                          .bytes = all * ds};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}

mesh_status_t mesh_barrier(mesh_comm_h comm, mesh_request_h *req)
{
    MESH_CHECK(mesh_api_check_comm(comm, "mesh_barrier", NULL));
    mesh_coll_args_t a = {.type = MESH_COLL_BARRIER, .dtype = MESH_UINT8, .op = MESH_SUM,
                          .uniform = 1, .dsize = 1};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}

static mesh_status_t p2p(mesh_comm_t *comm, const char *fn, void *buf, size_t count,
                         mesh_dtype_t dtype, int peer, void *stream, int is_send,
                         mesh_request_h *req)
{
    mesh_sched_t *s;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(peer >= 0 && peer < comm->size, "%s: peer %d is outside 0..%d", fn, peer,
              comm->size - 1);
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "buf", buf, count));
    MESH_CHECK(mesh_comm_fail(comm, mesh_sched_create(comm, dtype, MESH_SUM, &s)));
    /* the n-th send from a to b matches the n-th receive on b from a */
    uint32_t seq = is_send ? comm->p2p_send_seq[peer]++ : comm->p2p_recv_seq[peer]++;
    mesh_sched_set_tag(s, MESH_TAG_P2P | seq, 1);
    if (is_send) mesh_sched_send(s, peer, buf, count * ds, NULL, 0);
    else mesh_sched_recv(s, peer, buf, count * ds, NULL, 0);
    mesh_status_t st = mesh_sched_status(s);
    if (st < 0) {
        mesh_sched_destroy(s);
        return mesh_comm_fail(comm, st);
    }
    return mesh_comm_fail(comm, mesh_request_submit(comm, s, NULL, NULL, req));
}

mesh_status_t mesh_send(mesh_comm_h comm, const void *buf, size_t count, mesh_dtype_t dtype,
                        int peer, void *stream, mesh_request_h *req)
{
    return p2p(comm, "mesh_send", (void *)buf, count, dtype, peer, stream, 1, req);
}

mesh_status_t mesh_recv(mesh_comm_h comm, void *buf, size_t count, mesh_dtype_t dtype, int peer,
                        void *stream, mesh_request_h *req)
{
    return p2p(comm, "mesh_recv", buf, count, dtype, peer, stream, 0, req);
}
