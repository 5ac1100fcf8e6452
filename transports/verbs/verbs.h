/*
 * verbs transport internals shared by verbs.c (device, interface, wire-up) and verbs_xfer.c
 * (messages). One RC queue pair per peer; one UD queue pair per interface carries the connect
 * messages that exchange the per-peer QP numbers (the address blob exchanged at communicator
 * creation holds only what is common to every peer: port, LID, GID and the UD QP number).
 *
 * Every work request on a peer's send queue takes one slot of that peer's slot table, which
 * bounds the send queue and maps a completion back to its operation: wr_id encodes
 * (peer, kind, slot). Each slot owns a bounce buffer for eager sends that do not fit inline.
 */
#ifndef MESH_TL_VERBS_H
#define MESH_TL_VERBS_H

#include "transports/tl.h"
#include "transports/tl_queue.h"
#include "transports/verbs/verbs_proto.h"
#include "transports/verbs/verbs_rcache.h"
#include "transports/verbs/verbs_select.h"
#include "transports/verbs/verbs_wire.h"
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdint.h>

#define MESH_TL_VERBS_MAGIC    0x4d534842u /* "MSHB" */
#define MESH_TL_VERBS_UD_SLOT  128         /* GRH (40) + connect message, rounded */
#define MESH_TL_VERBS_UD_RX    64
#define MESH_TL_VERBS_UD_TX    32
#define MESH_TL_VERBS_READ_MAX (1ul << 30) /* bytes per RDMA read */

/* Address blob: what every peer needs to reach this interface. */
typedef struct {
    uint32_t magic;
    uint8_t link_layer; /* IBV_LINK_LAYER_* */
    uint8_t port;
    uint8_t mtu; /* enum ibv_mtu */
    uint8_t gid_index;
    uint16_t lid;
    uint16_t reserved;
    uint32_t ud_qpn;
    uint8_t gid[16];
} mesh_tl_verbs_addr_t;

enum {
    VERBS_WR_NONE = 0,
    VERBS_WR_SEND,
    VERBS_WR_RTS,
    VERBS_WR_READ,
    VERBS_WR_FIN,
    VERBS_WR_CREDIT,
    VERBS_WR_RECV,
    VERBS_WR_PROBE
};

static inline uint64_t mesh_tl_verbs_wr_id(int peer, int kind, uint32_t slot)
{
    return ((uint64_t)(uint32_t)peer << 32) | ((uint64_t)kind << 28) | (slot & 0x0fffffffu);
}

/* A rendezvous on either side, or an unexpected message. */
typedef struct mesh_tl_verbs_msg {
    struct mesh_tl_verbs_msg *next;
    mesh_tl_op_t *op;
    int state; /* mesh_tl_verbs_msg_state_t */
    uint32_t msg_id;
    uint64_t tag;
    uint64_t len;
    uint64_t raddr; /* receive: where the sender's data is */
    uint32_t rkey;
    int is_rts; /* unexpected: an RTS rather than eager data */
    char *data; /* unexpected eager payload */
    mesh_tl_verbs_region_t *region;
    uint64_t posted;     /* receive: bytes for which reads are posted */
    int reads;           /* receive: reads in flight */
    mesh_status_t error; /* receive: truncation, reported when the reads are done */
} mesh_tl_verbs_msg_t;

typedef struct {
    int kind;
    mesh_tl_op_t *op;         /* SEND */
    mesh_tl_verbs_msg_t *msg; /* RTS, READ */
} mesh_tl_verbs_slot_t;

typedef struct {
    mesh_tl_verbs_msg_t *head, *tail;
} mesh_tl_verbs_msgq_t;

typedef struct mesh_tl_verbs_ep {
    mesh_tl_ep_t super;
    int state; /* mesh_tl_verbs_conn_state_t */
    mesh_tl_verbs_addr_t paddr;
    struct ibv_qp *qp;
    struct ibv_ah *ah;
    uint32_t psn;
    double last_sent;
    int attempts;
    double last_heard; /* last completion on the queue pair (keepalive) */
    int probing;       /* a keepalive probe is in flight */
    /* one registered block: rx bounce buffers, tx bounce buffers, credit words */
    char *block;
    struct ibv_mr *mr;
    char *rx_bufs, *tx_bufs;
    volatile uint64_t *credit_in; /* the peer writes its reposted count here */
    uint64_t *credit_out;         /* source of our credit writes */
    uint64_t peer_credit_addr;
    uint32_t peer_credit_rkey;
    mesh_tl_verbs_slot_t *slots; /* [tx_depth] */
    uint32_t *free_slots;
    int nfree;
    mesh_tl_verbs_credits_t cr;
    mesh_tl_verbs_creturn_t ret;
    mesh_tl_opq_t sendq;            /* sends not yet posted (credits or slots lacking) */
    mesh_tl_opq_t posted;           /* receives not matched */
    mesh_tl_verbs_msgq_t unexp;     /* arrived, not matched */
    mesh_tl_verbs_msgq_t rndv_send; /* our RTS posted, waiting for FIN */
    mesh_tl_verbs_msgq_t reads;     /* matched RTS with reads left to post */
    uint32_t *fins;                 /* msg_ids to acknowledge */
    int fin_head, fin_n, fin_cap;
    uint32_t next_msg_id;
    mesh_status_t failed;
    char why[192];
} mesh_tl_verbs_ep_t;

typedef struct {
    mesh_tl_iface_t super;
    uint64_t comm_uid;
    double timeout_s;
    double keepalive; /* IB_KEEPALIVE */
    double poll_time; /* mesh_time() at the start of the current progress call */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_port_attr port_attr;
    int port;
    int gid_index;
    union ibv_gid gid;
    char dev_name[IBV_SYSFS_NAME_MAX];
    mesh_tl_verbs_addr_t addr;
    /* UD wire-up queue pair */
    struct ibv_cq *ud_cq;
    struct ibv_qp *ud_qp;
    uint32_t qkey;
    char *ud_block;
    struct ibv_mr *ud_mr;
    int ud_tx_next, ud_tx_busy;
    /* sizes */
    uint32_t rx_depth, tx_depth;
    size_t bounce;
    uint32_t max_inline;
    uint32_t max_rd_atomic;
    int sl, timeout, retry;
    mesh_tl_verbs_rcache_t rcache;
    mesh_tl_verbs_ep_t **eps; /* [size] */
    mesh_tl_verbs_msg_t *msg_free;
    int moved;
    double next_async;
    atomic_int aborted;
    int abort_done;
} mesh_tl_verbs_iface_t;

static inline mesh_tl_verbs_iface_t *mesh_tl_verbs_iface(mesh_tl_verbs_ep_t *ep)
{
    return (mesh_tl_verbs_iface_t *)ep->super.iface;
}

/* verbs_xfer.c */
mesh_status_t mesh_tl_verbs_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                                  mesh_tl_op_t *op);
mesh_status_t mesh_tl_verbs_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                  mesh_tl_op_t *op);
/* Handles one RC completion; returns operations completed. */
int mesh_tl_verbs_handle_wc(mesh_tl_verbs_iface_t *vi, const struct ibv_wc *wc);
/* Posts what the endpoint has queued (FINs, reads, sends, credit returns) as resources allow. */
void mesh_tl_verbs_ep_push(mesh_tl_verbs_ep_t *ep, int idle);
/* While operations wait on the peer and its queue pair has completed nothing for interval
 * seconds, posts a zero-byte RDMA write: a peer whose process or node is gone then fails the
 * endpoint through the retry limit instead of leaving the wait to the timeout. */
void mesh_tl_verbs_ep_keepalive(mesh_tl_verbs_ep_t *ep, double now, double interval);
/* Marks the endpoint failed, moves its QP to the error state and completes every operation
 * with status; returns how many. Logs why (naming the peer) once. */
int mesh_tl_verbs_ep_fail(mesh_tl_verbs_ep_t *ep, mesh_status_t status, const char *why);
/* Frees messages and fails operations without logging (endpoint destruction). */
void mesh_tl_verbs_ep_drop(mesh_tl_verbs_ep_t *ep, mesh_status_t status);
int mesh_tl_verbs_post_recv(mesh_tl_verbs_ep_t *ep, uint32_t slot);

/* verbs.c */
extern const mesh_tl_ops_t mesh_tl_verbs_ops;
/* GPUDirect RDMA through dma-buf: whether libibverbs has ibv_reg_dmabuf_mr and the active device
 * table exports the current device's memory as dma-buf (MESH_TL_CAP_DEVICE_DMABUF); if not, why.
 * Detection only: device data between nodes is staged through pinned host memory either way. */
int mesh_tl_verbs_dmabuf(char *why, size_t len);

#endif
