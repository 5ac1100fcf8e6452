/* ofi transport internals shared by ofi.c (interface, endpoints, wire-up) and ofi_xfer.c (data). */
#ifndef MESH_TL_OFI_H
#define MESH_TL_OFI_H

#include "transports/tl.h"
#include "transports/tl_queue.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <stdatomic.h>
#include <stdint.h>

#define MESH_TL_OFI_MAGIC    0x4d53484fu /* "MSHO" */
#define MESH_TL_OFI_VERSION  FI_VERSION(1, 9)
#define MESH_TL_OFI_NCTRL    8                  /* untagged receives kept posted for hellos */
#define MESH_TL_OFI_CQ_BATCH 32                 /* completions read per fi_cq_read */
#define MESH_TL_OFI_SINK     ((size_t)64 << 20) /* room for the excess of a too long message */
/* Seconds between liveness checks of peers with pending operations. */
#define MESH_TL_OFI_CHECK_S 0.05

/* Address blob: what fi_getname returned, plus enough to refuse a peer on another provider. */
typedef struct {
    uint32_t magic;
    uint32_t addr_format;
    uint32_t protocol;
    uint16_t name_len;
    uint16_t local_only; /* the provider reaches processes of this node only */
    uint8_t name[MESH_TL_ADDR_MAX - 16];
} mesh_tl_ofi_addr_t;

/* First message to every peer, untagged: wire-up completes when each side has the other's. */
typedef struct {
    uint32_t magic;
    uint32_t rank;
    uint64_t comm_uid;
} mesh_tl_ofi_hello_t;

enum { OFI_REQ_SEND = 1, OFI_REQ_RECV, OFI_REQ_CTRL_RECV, OFI_REQ_CTRL_SEND, OFI_REQ_RMA };

struct mesh_tl_ofi_ep;

/* The provider's context of one posted operation. It outlives the mesh operation when that
 * fails early (peer dead, abort): op is then NULL and the request waits for the provider's
 * completion (or the interface's close) to be recycled. */
typedef struct mesh_tl_ofi_req {
    struct fi_context2 ctx; /* first: providers with FI_CONTEXT2 mode write here */
    int kind;
    int posted;                          /* handed to the provider, completion still due */
    mesh_tl_op_t *op;                    /* NULL once detached */
    struct mesh_tl_ofi_ep *ep;           /* NULL once detached */
    struct mesh_tl_ofi_req *prev, *next; /* the endpoint's in-flight list, or the free list */
    struct mesh_tl_ofi_req *all_next;    /* every request ever allocated, for close */
    /* receives larger than the provider's message limit arrive in pieces */
    char *buf;
    size_t cap;  /* bytes the receive may still take */
    size_t done; /* bytes received so far */
    uint64_t wtag;
    size_t piece;   /* receive: bytes of the buffer the posted piece may take */
    int held;       /* receive: may take pieces, so later receives of its tag wait */
    int last_piece; /* send: this piece completes the operation */
} mesh_tl_ofi_req_t;

typedef struct mesh_tl_ofi_ep {
    mesh_tl_ep_t super;
    fi_addr_t fi_addr;
    int pid;
    unsigned long long pidns;
    int hello_sent;              /* 1: posted, 2: completed */
    mesh_tl_ofi_req_t *inflight; /* requests posted for this peer */
    int npending;                /* mesh operations among them */
    int nstanding;               /* standing receives among those */
    mesh_tl_opq_t sendq;         /* sends the provider refused for now, in order */
    /* receives waiting behind a receive that arrives in pieces, and that receive */
    mesh_tl_opq_t deferred;
    int chunking;
    mesh_status_t failed;
    double next_check;
    char why[128];
} mesh_tl_ofi_ep_t;

typedef struct {
    mesh_tl_iface_t super;
    uint64_t comm_uid;
    double timeout_s;
    char node[64];
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    mesh_tl_ofi_addr_t addr;
    size_t addr_len;
    int directed; /* FI_DIRECTED_RECV: the source is matched by address */
    int tag_bits; /* usable bits of the provider's tags */
    int src_bits; /* bits of the source rank in the tag when not directed */
    int rma;      /* FI_RMA granted */
    uint64_t mr_mode;
    size_t max_msg; /* larger messages travel in pieces of this size */
    /* Where the bytes of a message beyond its receive go (never read; pages only where
     * written), so that the provider never truncates: libfabric's tcp provider closes the
     * connection on a truncated receive, and its shm provider may hang on one. */
    void *sink;
    size_t sink_len;
    mesh_tl_ofi_ep_t **eps;  /* [size] */
    unsigned char *hello_in; /* [size] hello received from rank */
    mesh_tl_ofi_hello_t hello;
    mesh_tl_ofi_hello_t ctrl_buf[MESH_TL_OFI_NCTRL];
    mesh_tl_ofi_req_t *ctrl_req[MESH_TL_OFI_NCTRL];
    mesh_tl_ofi_req_t *free_reqs;
    mesh_tl_ofi_req_t *all_reqs;
    mesh_tl_ofi_req_t *orphans; /* detached requests still owned by the provider */
    int npending;               /* mesh operations in flight on every endpoint */
    double next_check;
    atomic_int aborted;
    int abort_done;
} mesh_tl_ofi_iface_t;

/* ofi_xfer.c */
mesh_status_t mesh_tl_ofi_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op);
mesh_status_t mesh_tl_ofi_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op);
int mesh_tl_ofi_progress(mesh_tl_iface_t *iface);
mesh_status_t mesh_tl_ofi_put(mesh_tl_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                              uint64_t rkey, mesh_tl_op_t *op);
mesh_status_t mesh_tl_ofi_get(mesh_tl_ep_t *ep, void *buf, size_t len, uint64_t raddr,
                              uint64_t rkey, mesh_tl_op_t *op);
mesh_status_t mesh_tl_ofi_flush(mesh_tl_ep_t *ep, mesh_tl_op_t *op);
/* Posts the untagged receive of control slot i. */
mesh_status_t mesh_tl_ofi_ctrl_post(mesh_tl_ofi_iface_t *oi, int i);
/* Sends our hello to the peer. */
mesh_status_t mesh_tl_ofi_hello(mesh_tl_ofi_ep_t *ep);
mesh_tl_ofi_req_t *mesh_tl_ofi_req_get(mesh_tl_ofi_iface_t *oi);
/* Marks the endpoint failed and completes its operations with status; returns how many. */
int mesh_tl_ofi_ep_fail(mesh_tl_ofi_ep_t *ep, mesh_status_t status, const char *why);
/* Completes every operation of the endpoint with status, detaching their requests. */
int mesh_tl_ofi_ep_fail_ops(mesh_tl_ofi_ep_t *ep, mesh_status_t status);

#endif
