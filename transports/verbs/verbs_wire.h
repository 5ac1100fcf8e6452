/*
 * verbs wire formats, independent of any device: the header in front of every message on a
 * reliable-connected queue pair, and the connect message sent over the unreliable-datagram
 * queue pair during wire-up. Both are encoded explicitly little-endian, so mixed hosts agree and
 * a malformed buffer is rejected instead of trusted.
 */
#ifndef MESH_TL_VERBS_WIRE_H
#define MESH_TL_VERBS_WIRE_H

#include "mesh.h"
#include <stddef.h>
#include <stdint.h>

enum {
    MESH_TL_VERBS_MSG_EAGER = 1, /* header + payload in one bounce buffer */
    MESH_TL_VERBS_MSG_RTS = 2,   /* rendezvous: the receiver reads [raddr, raddr + len) */
    MESH_TL_VERBS_MSG_FIN = 3    /* rendezvous done: the sender may release msg_id's buffer */
};

#define MESH_TL_VERBS_HDR_EAGER 24 /* bytes of an eager or FIN header */
#define MESH_TL_VERBS_HDR_RTS   40 /* bytes of an RTS */

typedef struct {
    uint8_t type;
    uint8_t flags;
    uint32_t msg_id; /* sender's id of a rendezvous, echoed by FIN */
    uint64_t tag;
    uint64_t len;   /* eager: payload bytes following; RTS: message length; FIN: 0 */
    uint64_t raddr; /* RTS only */
    uint32_t rkey;  /* RTS only */
} mesh_tl_verbs_hdr_t;

/* Writes the header; returns its size, or 0 when cap is too small or the type is unknown. */
size_t mesh_tl_verbs_hdr_encode(const mesh_tl_verbs_hdr_t *h, void *buf, size_t cap);
/* Reads a received message of total bytes; *hdr_len gets the header's size. Fails with
 * MESH_ERR_IO on an unknown type or lengths that disagree with total. */
mesh_status_t mesh_tl_verbs_hdr_decode(const void *buf, size_t total, mesh_tl_verbs_hdr_t *h,
                                       size_t *hdr_len);

#define MESH_TL_VERBS_CONN_MAGIC 0x4d534856u /* "MSHV" */
#define MESH_TL_VERBS_CONN_LEN   48

enum {
    MESH_TL_VERBS_CONN_ACK = 1u << 0, /* the sender has our connect message */
    MESH_TL_VERBS_CONN_DONE = 1u << 1 /* the sender has our acknowledgement too: no reply */
};

/* Connect message: what the peer needs to move its queue pair towards ours to RTR. */
typedef struct {
    uint64_t comm_uid;
    uint32_t src;         /* sender's rank */
    uint32_t dst;         /* intended receiver's rank */
    uint32_t qpn;         /* sender's RC queue pair for dst */
    uint32_t psn;         /* its first packet sequence number */
    uint32_t flags;       /* MESH_TL_VERBS_CONN_* */
    uint32_t credit_rkey; /* where dst writes the credits it returns to the sender */
    uint32_t rx_depth;    /* receive buffers the sender posts for dst: dst's credits */
    uint64_t credit_addr;
} mesh_tl_verbs_conn_msg_t;

size_t mesh_tl_verbs_conn_encode(const mesh_tl_verbs_conn_msg_t *m, void *buf, size_t cap);
/* MESH_ERR_IO on a short buffer, a wrong magic, a psn/qpn above 24 bits or no buffers. */
mesh_status_t mesh_tl_verbs_conn_decode(const void *buf, size_t len, mesh_tl_verbs_conn_msg_t *m);

#endif
