/* Public point-to-point entry points: send, receive and their exchange, matched by (peer, tag)
 * in posting order per tag. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "collectives/request.h"
#include "collectives/device/dev.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"

/* The transport tag of the seq-th message with a user tag: bit 63 marks point-to-point, bits
 * 32..61 carry the user's tag (bit 62 stays free for control traffic), the low 32 bits count
 * messages of that tag between the pair. */
static uint64_t p2p_tag(int tag, uint32_t seq)
{
    return MESH_TAG_P2P | ((uint64_t)(uint32_t)tag << 32) | seq;
}

static mesh_status_t check_side(mesh_comm_t *comm, const char *fn, const char *bufname,
                                const void *buf, size_t count, size_t ds, const char *peername,
                                int peer)
{
    CHECK_ARG(peer >= 0 && peer < comm->size, "%s: %s %d is outside 0..%d", fn, peername, peer,
              comm->size - 1);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    return mesh_api_check_buf(comm, fn, bufname, buf, count);
}

static mesh_status_t check_tag(mesh_comm_t *comm, const char *fn, int tag)
{
    CHECK_ARG(tag >= 0 && tag <= MESH_TAG_MAX, "%s: tag %d is outside 0..MESH_TAG_MAX (%d)", fn,
              tag, MESH_TAG_MAX);
    return MESH_OK;
}

/* Adds this side's task to s (communicator locked). */
static mesh_status_t add_side(mesh_comm_t *comm, mesh_sched_t *s, int is_send, void *buf,
                              size_t bytes, int peer, int tag)
{
    uint32_t seq;
    MESH_CHECK(mesh_p2p_seq_next(&comm->p2p, peer, tag, is_send, &seq));
    if (is_send)
        mesh_sched_send_tag(s, peer, buf, bytes, p2p_tag(tag, seq));
    else
        mesh_sched_recv_tag(s, peer, buf, bytes, p2p_tag(tag, seq));
    return mesh_sched_build_status(s);
}

/* Device buffers: the message goes out of and comes into staging (the receive buffer goes in
 * too, since a shorter message leaves its tail as it was). */
static mesh_status_t p2p_stage(mesh_comm_t *comm, const mesh_coll_args_t *m, const void **sbuf,
                               size_t sbytes, void **rbuf, size_t rbytes, mesh_dev_op_t **out)
{
    mesh_dev_op_t *d;
    MESH_CHECK(mesh_dev_op_create(comm, m, &d));
    mesh_status_t st = mesh_dev_op_add(d, *sbuf, sbytes, 1, 0);
    if (st == MESH_OK)
        st = mesh_dev_op_add(d, *rbuf, rbytes, 1, 1);
    if (st == MESH_OK)
        st = mesh_dev_op_stage(d);
    if (st < 0) {
        mesh_dev_op_free(d);
        return mesh_comm_fail(comm, st);
    }
    *sbuf = mesh_dev_op_map(d, *sbuf);
    *rbuf = mesh_dev_op_map(d, *rbuf);
    *out = d;
    return MESH_OK;
}

static mesh_status_t p2p(mesh_comm_t *comm, const char *fn, const void *sbuf, size_t scount,
                         int dst, void *rbuf, size_t rcount, int src, mesh_dtype_t dtype, int tag,
                         void *stream, mesh_request_h *req)
{
    mesh_sched_t *s;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(check_tag(comm, fn, tag));
    size_t ds = mesh_dtype_size(dtype);
    int sendrecv = dst >= 0 && src >= 0;
    if (dst >= 0)
        MESH_CHECK(check_side(comm, fn, sendrecv ? "sbuf" : "buf", sbuf, scount, ds,
                              sendrecv ? "dst" : "peer", dst));
    if (src >= 0)
        MESH_CHECK(check_side(comm, fn, sendrecv ? "rbuf" : "buf", rbuf, rcount, ds,
                              sendrecv ? "src" : "peer", src));
    if (sendrecv)
        MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, scount * ds, rbuf, rcount * ds, 0));
    mesh_coll_args_t m = {.mem = NULL};
    MESH_CHECK(mesh_api_check_mem(comm, fn, stream, sendrecv ? "sbuf" : "buf",
                                  dst >= 0 ? sbuf : NULL, sendrecv ? "rbuf" : "buf",
                                  src >= 0 ? rbuf : NULL, &m));
    mesh_dev_op_t *dev = NULL;
    if (m.mem != NULL)
        MESH_CHECK(p2p_stage(comm, &m, &sbuf, scount * ds, &rbuf, rcount * ds, &dev));
    mesh_comm_lock(comm); /* released by mesh_request_submit */
    mesh_status_t st = mesh_sched_create(comm, dtype, MESH_SUM, &s);
    if (st < 0) {
        mesh_comm_unlock(comm);
        mesh_dev_op_free(dev);
        return mesh_comm_fail(comm, st);
    }
    /* the receive first: in an exchange it is posted before the send it answers */
    if (src >= 0)
        st = add_side(comm, s, 0, rbuf, rcount * ds, src, tag);
    if (st >= 0 && dst >= 0)
        st = add_side(comm, s, 1, (void *)sbuf, scount * ds, dst, tag);
    if (st < 0) {
        mesh_sched_destroy(s);
        mesh_comm_unlock(comm);
        mesh_dev_op_free(dev);
        return mesh_comm_fail(comm, st);
    }
    if (dev != NULL)
        return mesh_comm_fail(comm, mesh_request_submit_dev(comm, s, NULL, NULL, dev, req));
    return mesh_comm_fail(comm, mesh_request_submit(comm, s, NULL, NULL, req));
}

/* Point-to-point with a peer given: a negative one is refused as such, not taken for "none". */
static mesh_status_t one_side(mesh_comm_t *comm, const char *fn, int is_send, void *buf,
                              size_t count, mesh_dtype_t dtype, int peer, int tag, void *stream,
                              mesh_request_h *req)
{
    if (comm != NULL && peer < 0)
        CHECK_ARG(0, "%s: peer %d is outside 0..%d", fn, peer, comm->size - 1);
    if (is_send)
        return p2p(comm, fn, buf, count, peer, NULL, 0, -1, dtype, tag, stream, req);
    return p2p(comm, fn, NULL, 0, -1, buf, count, peer, dtype, tag, stream, req);
}

mesh_status_t mesh_send(mesh_comm_h comm, const void *buf, size_t count, mesh_dtype_t dtype,
                        int peer, void *stream, mesh_request_h *req)
{
    return one_side(comm, "mesh_send", 1, (void *)buf, count, dtype, peer, 0, stream, req);
}

mesh_status_t mesh_recv(mesh_comm_h comm, void *buf, size_t count, mesh_dtype_t dtype, int peer,
                        void *stream, mesh_request_h *req)
{
    return one_side(comm, "mesh_recv", 0, buf, count, dtype, peer, 0, stream, req);
}

mesh_status_t mesh_send_tagged(mesh_comm_h comm, const void *buf, size_t count, mesh_dtype_t dtype,
                               int peer, int tag, void *stream, mesh_request_h *req)
{
    return one_side(comm, "mesh_send_tagged", 1, (void *)buf, count, dtype, peer, tag, stream, req);
}

mesh_status_t mesh_recv_tagged(mesh_comm_h comm, void *buf, size_t count, mesh_dtype_t dtype,
                               int peer, int tag, void *stream, mesh_request_h *req)
{
    return one_side(comm, "mesh_recv_tagged", 0, buf, count, dtype, peer, tag, stream, req);
}

mesh_status_t mesh_sendrecv(mesh_comm_h comm, const void *sbuf, size_t scount, int dst, void *rbuf,
                            size_t rcount, int src, mesh_dtype_t dtype, int tag, void *stream,
                            mesh_request_h *req)
{
    static const char fn[] = "mesh_sendrecv";
    if (comm != NULL && (dst < 0 || src < 0))
        CHECK_ARG(0, "%s: %s %d is outside 0..%d", fn, dst < 0 ? "dst" : "src", dst < 0 ? dst : src,
                  comm->size - 1);
    return p2p(comm, fn, sbuf, scount, dst, rbuf, rcount, src, dtype, tag, stream, req);
}
