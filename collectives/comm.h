/* The communicator as the collectives layer sees it. */
#ifndef MESH_COLL_COMM_H
#define MESH_COLL_COMM_H

#include "mesh.h"
#include "collectives/p2p_seq.h"
#include "transports/tl.h"
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define MESH_COMM_MAX_TLS 8
#define MESH_COMM_MAX_PREMUL 32

typedef struct mesh_sched mesh_sched_t;
struct mesh_sched_cache; /* finished schedules kept for reuse; owned by sched.c */

/* One open transport interface of a communicator plus its byte counters. */
typedef struct {
    const mesh_tl_ops_t *ops;
    mesh_tl_iface_t *iface;
    mesh_tl_caps_t caps;
    uint64_t bytes_sent;
    uint64_t bytes_recv;
} mesh_comm_tl_t;

/* Per-peer route: the endpoint and which of comm->tls carries it. */
typedef struct {
    mesh_tl_ep_t *ep;
    int tl;
    int pid;
    unsigned long long pidns;
} mesh_comm_peer_t;

typedef struct mesh_comm {
    int rank;
    int size;
    uint64_t uid;
    double timeout_s;

    /* node map */
    int nnodes;
    int *node_of;      /* [size] node index of each rank */
    int *local_rank;   /* [size] rank within its node */
    int *node_size;    /* [nnodes] */
    int *node_first;   /* [nnodes] index into node_ranks */
    int *node_ranks;   /* [size] ranks grouped by node, ascending within a node */
    char **node_names; /* [nnodes] */
    struct mesh_topo_summary *summary; /* [size] each rank's GPU, CPUs and nearest NIC */

    /* routing */
    int ntls;
    mesh_comm_tl_t tls[MESH_COMM_MAX_TLS];
    mesh_comm_peer_t *peers; /* [size] */

    /* Posting, progress and completion of this communicator's operations happen under this
     * lock (mesh_comm_lock), so that one thread may post while another waits or a progress
     * thread runs; waits on other communicators only try it, never block on it. */
    atomic_int lock;

    /* ordering: the n-th collective has tag sequence n on every rank; point-to-point messages
     * are numbered per (peer, tag) */
    uint32_t coll_seq;
    uint64_t replays; /* collectives that ran a schedule built for an identical earlier call */
    mesh_p2p_seq_t p2p;

    /* failure verdicts: a rank that sees a peer fail tells every other rank which one */
    int32_t culprit;             /* rank known to have failed, -1 if none */
    int32_t verdict_out;         /* what we sent */
    int32_t *verdict_in;         /* [size] received from each peer */
    mesh_tl_op_t *verdict_rops;  /* [size] preposted receives */
    mesh_tl_op_t *verdict_sops;  /* [size] sends */
    int verdict_sent;
    double verdict_wait_s;

    /* schedules started and not yet completed, progressed together (mesh_comm_activate) */
    mesh_sched_t **active;
    int nactive, cap_active;
    atomic_int nactive_hint; /* nactive, for other threads' sweeps without the lock */
    struct mesh_sched_cache *sched_cache;

    struct {
        int used;
        mesh_dtype_t dtype;
        unsigned char scalar[8];
    } premul[MESH_COMM_MAX_PREMUL];

    int replay;       /* MESH_REPLAY */
    struct mesh_coll_map *coll_map; /* algorithm per collective and size (select.c) */
    const char *last_algo;
    char last_error[512];
    atomic_int aborted;
    mesh_status_t failed; /* sticky: set once a peer failed or a wait timed out */
} mesh_comm_t;

static inline int mesh_comm_trylock(mesh_comm_t *c)
{
    return !atomic_exchange_explicit(&c->lock, 1, memory_order_acquire);
}

static inline void mesh_comm_lock(mesh_comm_t *c)
{
    /* held for one progress pass or one post at a time: spin, then let the holder run */
    for (unsigned n = 0; !mesh_comm_trylock(c); n++)
        if (n >= 64) sched_yield();
}

static inline void mesh_comm_unlock(mesh_comm_t *c)
{
    atomic_store_explicit(&c->lock, 0, memory_order_release);
}

/* Message tags: bit 63 separates point-to-point (sequence in the low 32 bits) and control
 * traffic from collectives (31-bit sequence above a 32-bit message index). */
#define MESH_TAG_P2P (1ull << 63)
#define MESH_TAG_VERDICT (MESH_TAG_P2P | (1ull << 62))
/* Capabilities (MESH_TL_CAP_*) of the transport that carries messages to and from a peer; none
 * for a communicator without routes (the schedule simulators of the tests). */
static inline uint64_t mesh_comm_peer_caps(const mesh_comm_t *c, int peer)
{
    return c->peers ? c->tls[c->peers[peer].tl].caps.flags : 0;
}

static inline uint64_t mesh_tag_coll(uint32_t seq, uint32_t index)
{
    return ((uint64_t)(seq & 0x7fffffffu) << 32) | index;
}

/* Context, transports and the collectives' config table, once per process. */
mesh_status_t mesh_coll_global_init(void);

/* Creates the communicator over a bootstrap: exchanges node, pid and transport addresses,
 * builds the node map, opens transports and connects every peer. */
mesh_status_t mesh_comm_create(void *bootstrap, double timeout_s, const char *node,
                               mesh_comm_t **comm);
/* Takes part in the exchanges of a mesh_comm_create without joining (split with no color). */
mesh_status_t mesh_comm_create_skip(void *bootstrap);
/* Fails pending schedules and frees everything (transports closed). */
void mesh_comm_release(mesh_comm_t *comm);
/* Never blocks: tells every transport to abort (peers notice). */
void mesh_comm_abort_transports(mesh_comm_t *comm);
/* Progresses every transport and every active schedule once; returns events. The caller holds
 * the lock. */
int mesh_comm_progress(mesh_comm_t *comm);
/* Progresses once every other communicator of the process that has operations under way and
 * whose lock is free (the wait of one communicator keeps the others moving); returns events. */
int mesh_comm_progress_others(mesh_comm_t *self);
/* Records the thread's last error on the communicator and returns status. */
mesh_status_t mesh_comm_fail(mesh_comm_t *comm, mesh_status_t status);

/* What the schedule runner needs of its communicator (the caller holds the lock). A started
 * schedule is active until it ends: */
mesh_status_t mesh_comm_activate(mesh_comm_t *comm, mesh_sched_t *s);
void mesh_comm_deactivate(mesh_comm_t *comm, mesh_sched_t *s);
/* A schedule failed: the communicator is unusable from now on (sticky status, and the message
 * this thread recorded for it). */
void mesh_comm_set_failed(mesh_comm_t *comm, mesh_status_t status);
/* Fails every active schedule with status. */
void mesh_comm_fail_active(mesh_comm_t *comm, mesh_status_t status);
/* Into and out of the process's registry of communicators that waits progress. */
void mesh_comm_register(mesh_comm_t *comm);
void mesh_comm_unregister(mesh_comm_t *comm);
/* Fails what runs once a verdict from a peer arrived. */
void mesh_comm_check_verdicts(mesh_comm_t *comm);
/* This rank saw peer fail: returns the rank every survivor names (another rank's verdict, if one
 * arrives within MESH_VERDICT_WAIT, else peer, which it then tells the others). */
int mesh_comm_blame(mesh_comm_t *comm, int peer);

/* Routing wrappers used by the schedule executor; they count bytes per transport. */
mesh_status_t mesh_comm_isend(mesh_comm_t *comm, int peer, uint64_t tag, const void *buf,
                              size_t len, mesh_tl_op_t *op);
mesh_status_t mesh_comm_irecv(mesh_comm_t *comm, int peer, uint64_t tag, void *buf, size_t len,
                              mesh_tl_op_t *op);
/* After a peer failure: records the culprit and tells every other live rank, flushing for a
 * bounded moment so the notice leaves before the caller aborts. */
void mesh_comm_publish_verdict(mesh_comm_t *comm, int culprit);
/* After seeing a peer fail, listens for another rank's verdict for MESH_VERDICT_WAIT seconds
 * (progressing transports only); returns the culprit known by then, or -1. */
int mesh_comm_await_verdict(mesh_comm_t *comm);
/* Whether this host can tell the peer's process has ended (same host and pid namespace). */
int mesh_comm_peer_gone(mesh_comm_t *comm, int peer);
/* Liveness of one peer through its transport. */
mesh_status_t mesh_comm_check_peer(mesh_comm_t *comm, int peer);

#endif
