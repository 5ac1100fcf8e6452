/*
 * The device-independent logic of the verbs transport, as pure functions:
 * - the connection state machine of one RC queue pair (wire-up over the UD queue pair),
 * - the protocol of one message (inline, eager through bounce buffers, or rendezvous) and the
 *   states of a message on each side,
 * - send credits: each peer posts `depth` bounce buffers for us; we may have at most that many
 *   messages unconsumed. The peer returns buffers by RDMA-writing its cumulative count of
 *   reposted buffers into our memory, so returning credits never needs a credit itself.
 */
#ifndef MESH_TL_VERBS_PROTO_H
#define MESH_TL_VERBS_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* Connection states, in the order a healthy connection passes them. */
typedef enum {
    MESH_TL_VERBS_CONN_NONE = 0, /* no queue pair */
    MESH_TL_VERBS_CONN_INIT,     /* QP in INIT, receives posted, our connect message goes out */
    MESH_TL_VERBS_CONN_RTS,      /* peer's message applied (RTR, RTS); peer may lack ours */
    MESH_TL_VERBS_CONN_READY,    /* the peer acknowledged ours: it is at RTR, data may flow */
    MESH_TL_VERBS_CONN_FAILED,   /* completion error, async event or timeout */
    MESH_TL_VERBS_CONN_CLOSED
} mesh_tl_verbs_conn_state_t;

typedef enum {
    MESH_TL_VERBS_EV_CREATE = 0, /* QP created and moved to INIT */
    MESH_TL_VERBS_EV_PEER_INFO,  /* a connect message from the peer */
    MESH_TL_VERBS_EV_PEER_ACK,   /* a connect message saying it has ours */
    MESH_TL_VERBS_EV_ERROR,
    MESH_TL_VERBS_EV_CLOSE
} mesh_tl_verbs_conn_event_t;

/* The next state, or -1 when the event is illegal in this state. */
int mesh_tl_verbs_conn_next(mesh_tl_verbs_conn_state_t state, mesh_tl_verbs_conn_event_t ev);
const char *mesh_tl_verbs_conn_name(mesh_tl_verbs_conn_state_t state);
/* Whether our connect message must be (re)sent at time now (seconds) when last sent at
 * last_sent; interval doubles per attempt up to 1 s so a slow peer is not flooded. */
int mesh_tl_verbs_conn_resend_due(mesh_tl_verbs_conn_state_t state, double now, double last_sent,
                                  int attempts, double interval);

typedef enum {
    MESH_TL_VERBS_PROTO_INLINE = 0, /* header + payload inside the work request */
    MESH_TL_VERBS_PROTO_EAGER,      /* copied into a registered bounce buffer */
    MESH_TL_VERBS_PROTO_RNDV        /* RTS, the receiver reads, FIN */
} mesh_tl_verbs_proto_t;

/* hdr: eager header bytes; max_inline: the QP's max_inline_data; bounce: bounce buffer size */
mesh_tl_verbs_proto_t mesh_tl_verbs_proto_pick(size_t len, size_t hdr, size_t max_inline,
                                               size_t bounce);

/* States of one message. Send: QUEUED -post-> POSTED -local-> DONE (eager) or
 * POSTED -local-> WAIT_FIN -fin-> DONE, and POSTED -fin-> WAIT_LOCAL -local-> DONE when the
 * FIN overtakes our own completion. Receive of a rendezvous: MATCHED -post-> READING
 * -local-> DONE (the FIN is queued separately). Any -error-> FAILED. */
typedef enum {
    MESH_TL_VERBS_MSG_QUEUED = 0,
    MESH_TL_VERBS_MSG_POSTED,
    MESH_TL_VERBS_MSG_WAIT_FIN,
    MESH_TL_VERBS_MSG_WAIT_LOCAL,
    MESH_TL_VERBS_MSG_MATCHED,
    MESH_TL_VERBS_MSG_READING,
    MESH_TL_VERBS_MSG_DONE,
    MESH_TL_VERBS_MSG_FAILED
} mesh_tl_verbs_msg_state_t;

typedef enum {
    MESH_TL_VERBS_MEV_POST = 0, /* resources found, work request posted */
    MESH_TL_VERBS_MEV_LOCAL,    /* our work request completed */
    MESH_TL_VERBS_MEV_FIN,      /* the peer's FIN arrived */
    MESH_TL_VERBS_MEV_ERROR
} mesh_tl_verbs_msg_event_t;

int mesh_tl_verbs_msg_next(mesh_tl_verbs_msg_state_t state, mesh_tl_verbs_proto_t proto,
                           mesh_tl_verbs_msg_event_t ev);

/* Send credits towards one peer. */
typedef struct {
    uint32_t depth;      /* bounce buffers the peer posts for us */
    uint64_t sent;       /* messages we sent */
    uint64_t peer_freed; /* cumulative buffers the peer reposted (written by the peer) */
} mesh_tl_verbs_credits_t;

static inline uint32_t mesh_tl_verbs_credits_avail(const mesh_tl_verbs_credits_t *c)
{
    uint64_t used = c->sent - c->peer_freed;
    return used >= c->depth ? 0 : (uint32_t)(c->depth - used);
}
/* Takes one credit; 0 when none is left. */
int mesh_tl_verbs_credits_take(mesh_tl_verbs_credits_t *c);
/* Applies a value the peer wrote; stale or impossible values (more than we sent) are ignored. */
void mesh_tl_verbs_credits_update(mesh_tl_verbs_credits_t *c, uint64_t peer_freed);

/* Receive side: buffers reposted and how many of them the peer has been told about. */
typedef struct {
    uint64_t reposted;
    uint64_t reported;
    uint64_t in_flight; /* value of the last credit write not yet completed, 0 if none */
} mesh_tl_verbs_creturn_t;

/* Whether to write the count back now: once threshold buffers are owed, or any are owed and
 * the caller is idle; never while an earlier write is still in flight. */
int mesh_tl_verbs_creturn_due(const mesh_tl_verbs_creturn_t *r, uint32_t threshold, int idle);

#endif
