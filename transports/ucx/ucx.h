/* ucx transport internals shared by ucx.c (context, worker, endpoints) and ucx_xfer.c (data). */
#ifndef MESH_TL_UCX_H
#define MESH_TL_UCX_H

#include "transports/tl.h"
#include <stdatomic.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#define MESH_TL_UCX_MAGIC    0x4d534855u /* "MSHU" */
#define MESH_TL_UCX_AM_HELLO 0x4d53      /* active message id of the wire-up hello */

/* Address blob: a header, then the worker's network-only address. */
typedef struct {
    uint32_t magic;
    uint32_t len; /* bytes of UCP address that follow */
    uint8_t ucp[];
} mesh_tl_ucx_addr_t;

/* Sent once per endpoint as an active message: the peer has an endpoint to us. */
typedef struct {
    uint32_t magic;
    uint32_t rank;
    uint64_t comm_uid;
} mesh_tl_ucx_hello_t;

/* Our part of every UCP request (ucp_params_t.request_size): the operation it completes, or
 * NULL once the operation was completed without it (failure, abort, destroy), in which case
 * the callback only frees the request. */
typedef struct {
    mesh_tl_op_t *op;
    int send;
} mesh_tl_ucx_req_t;

/* op->tl_priv while an operation is pending: the request, the endpoint, the previous pending
 * operation of that endpoint (op->tl_next is the next), the posted length. */
#define UCX_OP_REQ(op)  ((op)->tl_priv[0])
#define UCX_OP_EP(op)   ((op)->tl_priv[1])
#define UCX_OP_PREV(op) ((op)->tl_priv[2])
#define UCX_OP_LEN(op)  ((op)->tl_priv[3])

typedef struct mesh_tl_ucx_ep {
    mesh_tl_ep_t super;
    ucp_ep_h uep;          /* NULL once closed */
    mesh_tl_op_t *pending; /* operations with a request in flight */
    mesh_tl_op_t hello_op; /* our hello to the peer */
    mesh_status_t failed;  /* MESH_OK, MESH_ERR_PEER_FAILED or MESH_ERR_ABORTED */
    int fail_done;         /* pending operations were failed after the error callback */
    double fail_at;        /* when a failure UCX reported becomes ours (0: none reported) */
    ucs_status_t why;      /* what UCX reported */
} mesh_tl_ucx_ep_t;

typedef struct {
    mesh_tl_iface_t super;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    uint64_t comm_uid;
    mesh_tl_ucx_hello_t hello; /* what every endpoint sends first */
    double timeout_s;
    double close_timeout_s;
    double fail_delay_s;
    int err_peer;              /* endpoints use UCX's peer error handling */
    int src_shift;             /* where the sender's rank is folded into UCX tags */
    mesh_tl_ucx_ep_t **eps;    /* [size] */
    unsigned char *hello_from; /* [size] hellos received */
    void **closing;            /* [size] endpoint close requests still in flight */
    int nclosing;
    int completed;         /* completions counted by the callbacks */
    mesh_tl_op_t *posting; /* receive being posted, until its request is tracked */
    int fail_pending;      /* an error callback ran since the last progress() */
    atomic_int aborted;
    int abort_done;
} mesh_tl_ucx_iface_t;

/* The UCX tag of a message from rank src: the sender's rank is folded into bits just below
 * bit 62 (mesh tags keep their flags in bits 62-63), so that a receive posted for one peer
 * never matches another's message. */
static inline ucp_tag_t mesh_tl_ucx_tag(const mesh_tl_ucx_iface_t *ui, int src, uint64_t tag)
{
    return tag ^ ((uint64_t)(uint32_t)src << ui->src_shift);
}

/* ucx_xfer.c */
mesh_status_t mesh_tl_ucx_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op);
mesh_status_t mesh_tl_ucx_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op);
mesh_status_t mesh_tl_ucx_mem_reg(mesh_tl_iface_t *iface, void *addr, size_t len,
                                  mesh_tl_mem_t *mem);
void mesh_tl_ucx_mem_dereg(mesh_tl_iface_t *iface, mesh_tl_mem_t *mem);
/* Completion callback of every send (hellos included). */
void mesh_tl_ucx_send_cb(void *request, ucs_status_t st, void *user_data);
/* Tracks an operation whose request is in flight. */
void mesh_tl_ucx_op_track(mesh_tl_ucx_ep_t *ep, mesh_tl_op_t *op, void *req, size_t len, int send);
/* Whether a send (which reads its buffer until done) is still pending on the endpoint. */
int mesh_tl_ucx_ep_has_sends(mesh_tl_ucx_ep_t *ep);
/* Completes every pending operation of the endpoint with status, detaching (and cancelling)
 * their requests; returns how many. */
int mesh_tl_ucx_ep_fail_ops(mesh_tl_ucx_ep_t *ep, mesh_status_t status);
/* UCX reported the peer failed: from fail_delay_s on, its operations fail. Until then they are
 * held, so that a verdict another rank sent at the same time (naming the rank that really
 * failed) is received before this peer's departure is reported. */
void mesh_tl_ucx_ep_dying(mesh_tl_ucx_ep_t *ep, ucs_status_t why);
/* The status a failed UCX operation on this endpoint maps to, reported once. */
mesh_status_t mesh_tl_ucx_status(mesh_tl_ucx_ep_t *ep, ucs_status_t st, const char *what);

#endif
