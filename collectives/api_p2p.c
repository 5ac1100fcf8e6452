/* Public point-to-point entry points: send and receive. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "collectives/request.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"

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
