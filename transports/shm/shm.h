/* shm transport internals shared by shm.c (segments, endpoints, liveness) and shm_xfer.c. */
#ifndef MESH_TL_SHM_H
#define MESH_TL_SHM_H

#include "transports/tl.h"
#include "transports/tl_queue.h"
#include "libmesh/wait.h"
#include <stdatomic.h>
#include <stdint.h>

#define MESH_TL_SHM_MAGIC    0x4d534853u /* "MSHS" */
#define MESH_TL_SHM_LINE     64
#define MESH_TL_SHM_HDR_SIZE 256
/* Largest cross-memory read per endpoint and progress call, so other peers keep moving. */
#define MESH_TL_SHM_CMA_CHUNK   (4u << 20)
#define MESH_TL_SHM_LIVENESS_S  0.1
#define MESH_TL_SHM_CLOCK_EVERY 16 /* progress calls between reads of the clock (power of 2) */

/* Start of every segment. */
typedef struct {
    uint32_t magic;
    int32_t pid;
    int32_t rank;
    int32_t size;
    uint64_t fifo_size;
    uint64_t ring_stride;
    uint64_t pidns;     /* pid namespace of pid, so stale segments are judged only by peers */
    uint64_t stamp_key; /* random: keys the stamps of whole packets in this segment's rings */
    _Alignas(MESH_TL_SHM_LINE) atomic_int aborted;
    atomic_int failed_rank; /* 1 + the first peer we saw die, so peers can name it */
} mesh_tl_shm_seg_hdr_t;

/* One single-producer single-consumer byte ring: sender s writes ring s of the receiver's
 * segment. head and tail grow without wrapping (64 bits); data index is modulo fifo_size. */
typedef struct {
    _Alignas(MESH_TL_SHM_LINE) atomic_uint_fast64_t head; /* written by the producer */
    atomic_int mapped;                                    /* producer has mapped us */
    _Alignas(MESH_TL_SHM_LINE) atomic_uint_fast64_t tail; /* written by the consumer */
    _Alignas(MESH_TL_SHM_LINE) unsigned char data[];
} mesh_tl_shm_ring_t;

/* Address blob. */
typedef struct {
    uint32_t magic;
    int32_t pid;
    int32_t cma; /* this receiver can read peers' memory */
    uint32_t reserved;
    uint64_t fifo_size;
    char name[64];
    char bell[MESH_BELL_NAME_MAX]; /* the process's bell (libmesh/wait.h), "" without one */
} mesh_tl_shm_addr_t;

enum { SHM_PKT_EAGER = 1, SHM_PKT_RNDV, SHM_PKT_FIN, SHM_PKT_RETRY, SHM_PKT_RDATA };

/* Packet header in a ring; EAGER and RDATA are followed by len payload bytes. Every packet is
 * padded so that headers start at multiples of SHM_PKT_ALIGN in the stream. stamp is written
 * last: when the header and its whole payload are in, it holds mesh_tl_shm_stamp(key, stream
 * offset of the header), so the receiver learns of the packet by reading its first line alone;
 * otherwise it is SHM_STAMP_STREAMED (even, so never a stamp) and the head pointer tells. */
#define SHM_PKT_ALIGN      MESH_TL_SHM_LINE
#define SHM_STAMP_STREAMED 2u
typedef struct {
    uint64_t stamp;
    uint32_t type;
    int32_t pid; /* RNDV: sender's pid */
    uint64_t tag;
    uint64_t len;
    uint64_t cookie; /* RNDV/FIN/RETRY: the sender's op; RDATA: the receiver's op */
    uint64_t addr;   /* RNDV: sender's buffer; RETRY: the receiver's op */
} mesh_tl_shm_pkt_t;

/* A message that arrived before its receive (eager payload or rendezvous header). */
typedef struct mesh_tl_shm_unexp {
    struct mesh_tl_shm_unexp *next;
    uint32_t type;
    int complete;
    uint64_t tag;
    size_t len;
    mesh_tl_op_t *op; /* receive matched while the payload still streams in */
    mesh_tl_shm_pkt_t pkt;
    int pooled;
    unsigned char *data;
} mesh_tl_shm_unexp_t;

/* A matched rendezvous receive being read through cross-memory attach. */
typedef struct mesh_tl_shm_rndv {
    struct mesh_tl_shm_rndv *next;
    mesh_tl_op_t *op;
    uint64_t raddr;
    uint64_t cookie;
    int pid;
    size_t len, done;
} mesh_tl_shm_rndv_t;

enum { SHM_RX_HDR = 0, SHM_RX_PAYLOAD };

/* A peer process's bell, mapped once for every endpoint to that process. */
typedef struct mesh_tl_shm_bell {
    struct mesh_tl_shm_bell *next;
    int refs;
    int pid;
    char name[MESH_BELL_NAME_MAX];
    mesh_bell_t *bell;
} mesh_tl_shm_bell_t;

typedef struct mesh_tl_shm_ep {
    mesh_tl_ep_t super;
    int pid;
    int same_pidns;
    int peer_cma;
    int cma_broken;                /* EPERM seen: large messages go through the ring */
    void *peer_seg;                /* mapping of the peer's segment */
    mesh_tl_shm_bell_t *peer_bell; /* the peer process's bell (shared by its endpoints) */
    int notify; /* wrote to the peer's ring or freed room in ours: ring its bell if it sleeps */
    size_t peer_seg_len;
    mesh_tl_shm_seg_hdr_t *peer_hdr;
    mesh_tl_shm_ring_t *tx; /* our ring in the peer's segment */
    mesh_tl_shm_ring_t *rx; /* the peer's ring in our segment */
    uint64_t fifo;          /* size of both rings */
    /* sending */
    uint64_t tx_head, tx_tail_cache;
    mesh_tl_opq_t sendq;  /* sends not yet fully in the ring */
    mesh_tl_opq_t rdataq; /* rendezvous sends the receiver asked to stream */
    mesh_tl_op_t *tx_cur; /* message being written (head of sendq or rdataq) */
    mesh_tl_shm_pkt_t tx_pkt;
    size_t tx_pkt_done, tx_off;
    mesh_tl_opq_t rndv_wait; /* rendezvous sends waiting for FIN or RETRY */
    mesh_tl_shm_pkt_t *ctrl; /* FIN and RETRY packets still to be written (a circular array) */
    size_t ctrl_cap, ctrl_first, ctrl_n;
    /* receiving */
    uint64_t rx_tail;
    uint64_t rx_known; /* the stream is written up to here (head, or a stamped packet's end) */
    uint64_t tx_key, rx_key; /* stamp keys of the peer's segment and of ours */
    size_t rx_pad;           /* padding after the current packet's payload */
    size_t rx_skip;          /* padding still to skip before the next header */
    int rx_state;
    mesh_tl_shm_pkt_t rx_pkt;
    unsigned char *rx_dst; /* NULL: discard */
    size_t rx_remain;
    mesh_tl_op_t *rx_op; /* completes when the payload is in (NULL: unexpected) */
    mesh_tl_shm_unexp_t *rx_unexp;
    mesh_tl_opq_t posted;
    mesh_tl_shm_unexp_t *unexp_head, *unexp_tail;
    mesh_tl_shm_rndv_t *reads; /* rendezvous reads in progress */
    mesh_tl_opq_t retry_wait;  /* receives waiting for RDATA */
    int moved;                 /* bytes moved since the last progress() */
    /* liveness */
    int npending;
    int nstanding; /* of npending, MESH_TL_OP_STANDING receives */
    mesh_status_t failed;
    char why[128]; /* how it failed, repeated to later sends and receives */
} mesh_tl_shm_ep_t;

typedef struct {
    mesh_tl_iface_t super;
    uint64_t comm_uid;
    char name[64];
    char node[256];
    void *seg;
    size_t seg_len;
    mesh_tl_shm_seg_hdr_t *hdr;
    int unlinked;
    uint64_t fifo;
    size_t eager_limit;
    size_t eager_reused; /* for MESH_TL_OP_SRC_REUSED sends, at least eager_limit */
    int cma;
    int cma_logged;
    unsigned long long pidns;
    mesh_tl_shm_ep_t **eps; /* [size] */
    int neps;
    mesh_tl_shm_unexp_t *unexp_free;
    mesh_tl_shm_rndv_t *rndv_free;
    mesh_tl_shm_bell_t *bells; /* of the peer processes */
    double next_sweep;
    unsigned polls;
    int bell_ok; /* this process has a bell and every peer one: a waiter may sleep */
    atomic_int aborted;
    int abort_done;
} mesh_tl_shm_iface_t;

/* The stamp of a whole packet at stream offset off (a multiple of SHM_PKT_ALIGN) of a ring
 * keyed key: distinct for every offset, never 0, and not guessable by payload bytes. */
static inline uint64_t mesh_tl_shm_stamp(uint64_t key, uint64_t off)
{
    return ((off * 0x9e3779b97f4a7c15ull) ^ key) | 1u;
}

static inline mesh_tl_shm_ring_t *mesh_tl_shm_ring(void *seg, uint64_t stride, int rank)
{
    return (mesh_tl_shm_ring_t *)((char *)seg + MESH_TL_SHM_HDR_SIZE + stride * (uint64_t)rank);
}

/* shm_xfer.c */
mesh_status_t mesh_tl_shm_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op);
mesh_status_t mesh_tl_shm_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op);
/* Moves data of one endpoint; returns completions. */
int mesh_tl_shm_ep_progress(mesh_tl_shm_ep_t *ep);
/* Reads what the ring holds (no cross-memory reads, no sends); returns completions. */
int mesh_tl_shm_ep_drain(mesh_tl_shm_ep_t *ep);
/* Rings the peer's bell after our writes to the rings, when it sleeps. Every write that sets
 * notify ends with a sequentially consistent store of a head or tail pointer, which orders the
 * look at the peer's sleepers after it (as the sleeper's announcement comes before its last
 * look at the rings). */
static inline void mesh_tl_shm_notify(mesh_tl_shm_ep_t *ep)
{
    if (!ep->notify)
        return;
    ep->notify = 0;
    if (ep->peer_bell && ep->peer_bell->bell)
        mesh_bell_ring_after_sc(ep->peer_bell->bell);
}
/* Completes every operation of the endpoint with status; returns how many. */
int mesh_tl_shm_ep_fail_ops(mesh_tl_shm_ep_t *ep, mesh_status_t status);
void mesh_tl_shm_ep_free(mesh_tl_shm_ep_t *ep);

/* shm.c */
/* Fails the endpoints of every dead peer (killed processes first, so that the rank that really
 * died is the one reported, not a survivor that aborted because of it); returns completions. */
int mesh_tl_shm_sweep(mesh_tl_shm_iface_t *si);
int mesh_tl_shm_ep_fail(mesh_tl_shm_ep_t *ep, mesh_status_t status, const char *why);

#endif
