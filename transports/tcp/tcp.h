/* tcp transport internals shared by tcp.c (interface, connections) and tcp_xfer.c (data). */
#ifndef MESH_TL_TCP_H
#define MESH_TL_TCP_H

#include "transports/tl.h"
#include "transports/tl_queue.h"
#include "libmesh/sock.h"
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#define MESH_TL_TCP_MAGIC       0x4d534854u /* "MSHT" */
#define MESH_TL_TCP_MAX_STREAMS 16
#define MESH_TL_TCP_UCACHE      8
#define MESH_TL_TCP_STAGE       65536
/* Payload left in a chunk beyond which we receive straight into the destination. */
#define MESH_TL_TCP_DIRECT (MESH_TL_TCP_STAGE / 2)
/* Bytes one stream moves each way in a round of progress, so that a long transfer does not
 * hold up the others (and the round reports its events) */
#define MESH_TL_TCP_ROUND_BYTES ((size_t)8 << 20)
/* msg_id of a header-only notice "rank <tag> failed", sent to every other peer when we see a
 * peer die, so that ranks which only see us leave can still name the rank that failed. */
#define MESH_TL_TCP_NOTICE_ID 0xffffffffu

/* Address blob: where our listener is and how many streams we open per peer. */
typedef struct {
    uint32_t magic;
    uint16_t nstreams;
    uint16_t reserved;
    uint32_t sa_len;
    struct sockaddr_storage sa;
} mesh_tl_tcp_addr_t;

/* First bytes on every connection, from the connecting (lower) rank. */
typedef struct {
    uint32_t magic;
    uint32_t rank;
    uint64_t comm_uid;
    uint32_t stream;
    uint32_t nstreams;
} mesh_tl_tcp_hello_t;

/* Header of every chunk; a message is one or more chunks, possibly over several streams. */
typedef struct {
    uint64_t tag;
    uint64_t msg_len;
    uint64_t offset;
    uint32_t chunk_len;
    uint32_t msg_id;
} mesh_tl_tcp_hdr_t;

/* A message being received or kept unexpected. */
typedef struct mesh_tl_tcp_rmsg {
    struct mesh_tl_tcp_rmsg *next;
    uint32_t msg_id;
    uint64_t tag;
    size_t msg_len;
    size_t received;
    mesh_tl_op_t *op; /* matched receive, or NULL while unexpected */
    char *buf;        /* unexpected payload, NULL when received in place */
    size_t buf_cap;
    /* chunks that went to buf: copied to the receive when it completes; chunks whose header
     * arrives after the receive matched go straight to it */
    struct mesh_tl_tcp_span {
        uint64_t offset, len;
    } * spans;
    int nspans, cap_spans;
    int complete;        /* unexpected and fully received */
    mesh_status_t error; /* truncation: data discarded, receive fails */
} mesh_tl_tcp_rmsg_t;

enum { TCP_ST_NONE = 0, TCP_ST_CONNECTING, TCP_ST_HELLO, TCP_ST_READY, TCP_ST_CLOSED };
enum { TCP_RX_HDR = 0, TCP_RX_PAYLOAD };

struct mesh_tl_tcp_ep;

typedef struct {
    struct mesh_tl_tcp_ep *ep;
    int fd;
    int state;
    double retry_at; /* refused connect: when to try again */
    /* send side: hello first, then the current chunk */
    mesh_tl_tcp_hello_t hello;
    size_t hello_done;
    int tx_active;
    mesh_tl_tcp_hdr_t tx_hdr;
    size_t tx_hdr_done;
    mesh_tl_op_t *tx_op;
    const char *tx_data;
    size_t tx_len, tx_done;
    /* receive side */
    int rx_state;
    mesh_tl_tcp_hdr_t rx_hdr;
    size_t rx_hdr_done;
    mesh_tl_tcp_rmsg_t *rx_msg;
    char *rx_dst; /* NULL: discard */
    size_t rx_remain;
    char *stage;
    size_t stage_pos, stage_len;
} mesh_tl_tcp_stream_t;

typedef struct mesh_tl_tcp_ep {
    mesh_tl_ep_t super;
    mesh_sockaddr_t addr;
    char addr_str[64];
    int nstreams;
    int connector; /* we are the lower rank */
    mesh_tl_tcp_stream_t streams[MESH_TL_TCP_MAX_STREAMS];
    mesh_tl_opq_t sendq; /* sends with chunks left to carve */
    int head_started;
    uint32_t head_msg_id;
    size_t head_offset;
    uint32_t next_msg_id;
    mesh_tl_opq_t posted;         /* receives not yet matched */
    mesh_tl_tcp_rmsg_t *incoming; /* messages in flight or unexpected, in arrival order */
    mesh_status_t failed;
    int notice_rank; /* failed rank to announce to this peer, or -1 */
    int culprit;     /* failed rank this peer announced to us, or -1 */
    char why[128];   /* how it failed, repeated to later sends and receives */
} mesh_tl_tcp_ep_t;

/* An accepted connection whose hello has not arrived (or whose endpoint does not exist yet). */
typedef struct mesh_tl_tcp_conn {
    struct mesh_tl_tcp_conn *next;
    int fd;
    mesh_tl_tcp_hello_t hello;
    size_t hello_done;
} mesh_tl_tcp_conn_t;

typedef struct {
    mesh_tl_iface_t super;
    uint64_t comm_uid;
    double timeout_s;
    int lfd;
    mesh_tl_tcp_addr_t addr;
    int nstreams;
    size_t chunk;
    size_t sockbuf;
    mesh_tl_tcp_ep_t **eps;    /* [size] */
    mesh_tl_tcp_conn_t *conns; /* accepted, waiting for hello or endpoint */
    mesh_tl_tcp_rmsg_t *rmsg_free;
    /* recently freed unexpected buffers, reused so that streaming ahead of the receives does
     * not map and fault fresh pages for every message */
    struct {
        char *buf;
        size_t cap;
    } ucache[MESH_TL_TCP_UCACHE];
    struct pollfd *pfds;
    void **pobj;
    int pcap;
    int moved;        /* bytes moved since the last progress() */
    int first_failed; /* first peer seen to fail (announced to the others), or -1 */
    atomic_int aborted;
    int abort_done;
} mesh_tl_tcp_iface_t;

/* tcp_xfer.c */
mesh_status_t mesh_tl_tcp_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op);
mesh_status_t mesh_tl_tcp_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op);
/* Moves data on one ready stream; returns completions, or a negative status on failure. */
int mesh_tl_tcp_stream_send(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s);
int mesh_tl_tcp_stream_recv(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s);
int mesh_tl_tcp_stream_has_tx(mesh_tl_tcp_ep_t *ep, mesh_tl_tcp_stream_t *s);
/* Completes every operation of the endpoint with status; returns how many. */
int mesh_tl_tcp_ep_fail_ops(mesh_tl_tcp_ep_t *ep, mesh_status_t status);
int mesh_tl_tcp_ep_has_ops(mesh_tl_tcp_ep_t *ep);
void mesh_tl_tcp_ep_free_msgs(mesh_tl_tcp_ep_t *ep);
void mesh_tl_tcp_ucache_free(mesh_tl_tcp_iface_t *ti);

/* tcp.c */
/* Marks the endpoint failed (closing its sockets) and fails its operations. */
int mesh_tl_tcp_ep_fail(mesh_tl_tcp_ep_t *ep, mesh_status_t status, const char *why);

#endif
