/* The communicator as the collectives layer sees it. */
#ifndef MESH_COLL_COMM_H
#define MESH_COLL_COMM_H

#include "mesh.h"
#include "collectives/health.h"
#include "collectives/p2p_seq.h"
#include "libmesh/dtype.h"
#include "libmesh/progress.h"
#include "transports/tl.h"
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define MESH_COMM_MAX_TLS    8
#define MESH_COMM_MAX_PREMUL MESH_OP_PREMUL_MAX

typedef struct mesh_sched mesh_sched_t;

struct mesh_sched_cache; /* finished schedules kept for reuse; owned by sched.c */
struct mesh_dev_pool;    /* staging of device buffers; owned by device/dev_stage.c */
struct mesh_dev_ipc;     /* IPC mappings of peers' device buffers; device/dev_ipc_cache.c */
struct mesh_dev_hier;    /* pinned buffers of hierarchical device calls; device/dev_hier.c */

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

/* The first word of a live communicator ("meshcomm"), cleared when it is destroyed; the memory
 * of a destroyed one stays a communicator's (mesh_comm_unref), so that a destroyed or foreign
 * handle is refused, not followed. */
#define MESH_COMM_MAGIC 0x6d657368636f6d6dull

typedef struct mesh_comm {
    uint64_t magic;
    int rank;
    int size;
    uint64_t uid;
    double timeout_s;

    /* node map */
    int nnodes;
    int *node_of;                      /* [size] node index of each rank */
    int *local_rank;                   /* [size] rank within its node */
    int *node_size;                    /* [nnodes] */
    int *node_first;                   /* [nnodes] index into node_ranks */
    int *node_ranks;                   /* [size] ranks grouped by node, ascending within a node */
    char **node_names;                 /* [nnodes] */
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

    /* what is known of failed, stopped and mismatched ranks, and the control channel that
     * tells every rank (health.h) */
    mesh_health_t health;

    /* schedules started and not yet completed, progressed together (sched.c: activate) */
    mesh_sched_t **active;
    int nactive, cap_active;
    atomic_int nactive_hint; /* nactive, for other threads' sweeps without the lock */
    /* of them, those that other threads' waits may have to drive (nonblocking and grouped
     * operations; a blocking call's thread drives its own), and its copy for them */
    int nshared;
    atomic_int nshared_hint;
    struct mesh_sched_cache *sched_cache;
    /* pinned buffers staging device buffers (collectives/device/), made at the first call on
     * device buffers and freed with the structure */
    _Atomic(struct mesh_dev_pool *) dev_pool;
    /* calls on device buffers handed to the engine whose schedules have not started: peers'
     * messages for them may already be here, so no call looks for messages left behind while
     * there are any (mesh_comm_start_call) */
    int dev_unstarted;
    /* peers' device buffers mapped through IPC, the stream and events of device copies between
     * them (collectives/device/dev_ipc_cache.c): made by the first such call, under the lock */
    struct mesh_dev_ipc *dev_ipc;
    uint64_t dev_ipc_calls; /* collectives that ran by device copies between IPC mappings */
    /* pinned buffers of hierarchical calls on device buffers across nodes
     * (collectives/device/dev_hier.c), under the lock; what those calls did, for tests: calls
     * ended, bytes copied from device to host and back */
    struct mesh_dev_hier *dev_hier;
    uint64_t dev_hier_calls, dev_hier_to_host, dev_hier_from_host;

    struct {
        int used;
        mesh_dtype_t dtype;
        unsigned char scalar[8];
    } premul[MESH_COMM_MAX_PREMUL];

    int replay;                     /* MESH_REPLAY */
    struct mesh_coll_map *coll_map; /* algorithm per collective and size (select.c) */
    const char *last_algo;
    char last_error[512];
    mesh_status_t last_status; /* of last_error */
    atomic_int aborted;
    mesh_status_t failed; /* sticky: set once a peer failed or a wait timed out */
    char failure[384];    /* the message of that first failure */
    /* the user's handle, plus one per request alive: a destroyed communicator keeps its
     * structure (released set, every resource gone) until its last request is freed */
    atomic_int refs;
    int released;
    struct mesh_comm *pool_next; /* among destroyed structures kept for reuse (comm.c) */
} mesh_comm_t;

/* Whether a handle is a live communicator's (see MESH_COMM_MAGIC). */
static inline int mesh_comm_live(const mesh_comm_t *c)
{
    return c != NULL && c->magic == MESH_COMM_MAGIC;
}

/* The lock word: 0 free, 1 held, 2 held with threads asleep on it (a futex). */
static inline int mesh_comm_trylock(mesh_comm_t *c)
{
    int free_ = 0;
    return atomic_compare_exchange_strong_explicit(&c->lock, &free_, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

/* Sleeps until the lock is free and takes it (comm_progress.c). */
void mesh_comm_lock_slow(mesh_comm_t *c);
/* Wakes a thread asleep on the lock. */
void mesh_comm_lock_wake(mesh_comm_t *c);

static inline void mesh_comm_lock(mesh_comm_t *c)
{
    /* held for one progress pass or one post at a time: spin a little, then sleep until the
     * holder lets it go (it may be off its CPU; yielding would hand the CPU to anyone) */
    for (unsigned n = 0; n < 64; n++) {
        if (mesh_comm_trylock(c))
            return;
        mesh_cpu_relax();
    }
    mesh_comm_lock_slow(c);
}

static inline void mesh_comm_unlock(mesh_comm_t *c)
{
    if (atomic_exchange_explicit(&c->lock, 0, memory_order_release) == 2)
        mesh_comm_lock_wake(c);
}

/* Message tags. Bit 63 set: point-to-point (the user's tag in bits 32..61, a sequence per
 * (peer, tag) in the low 32) and control traffic (bit 62). Bit 63 clear: a collective, with its
 * sequence number on the communicator in bits 44..62, the index of the message between the pair
 * in bits 24..43, and the call's signature in the low MESH_TL_TAG_SIG_BITS (24) bits, which
 * receives do not compare (tl.h): a message of another call shows as a signature that differs. */
#define MESH_TAG_P2P             (1ull << 63)
#define MESH_TAG_VERDICT         (MESH_TAG_P2P | (1ull << 62))
#define MESH_TAG_COLL_SEQ_BITS   19
#define MESH_TAG_COLL_INDEX_BITS 20
/* Capabilities (MESH_TL_CAP_*) of the transport that carries messages to and from a peer; none
 * for a communicator without routes (the schedule simulators of the tests). */
static inline uint64_t mesh_comm_peer_caps(const mesh_comm_t *c, int peer)
{
    return c->peers ? c->tls[c->peers[peer].tl].caps.flags : 0;
}
#define MESH_TAG_COLL_SEQ_MASK ((1u << MESH_TAG_COLL_SEQ_BITS) - 1)
static inline uint64_t mesh_tag_coll(uint32_t seq, uint32_t sig)
{
    return ((uint64_t)(seq & MESH_TAG_COLL_SEQ_MASK)
            << (MESH_TL_TAG_SIG_BITS + MESH_TAG_COLL_INDEX_BITS)) |
           (sig & MESH_TL_TAG_SIG_MASK);
}
/* The sequence number (its low MESH_TAG_COLL_SEQ_BITS) of a collective's tag. */
static inline uint32_t mesh_tag_coll_seq(uint64_t tag)
{
    return (uint32_t)(tag >> (MESH_TL_TAG_SIG_BITS + MESH_TAG_COLL_INDEX_BITS)) &
           MESH_TAG_COLL_SEQ_MASK;
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
/* Whether another communicator than self has shared operations under way. */
int mesh_comm_others_busy(mesh_comm_t *self);
/* Records the thread's last error on the communicator and returns status. */
mesh_status_t mesh_comm_fail(mesh_comm_t *comm, mesh_status_t status);

/* A collective this rank starts (the lock held): refused when the communicator failed meanwhile
 * or, look set, when a message an earlier collective left behind waits (mesh_health_start_call),
 * after taking in what peers sent before it; the two calls after a rooted collective look, the
 * others do not. look 0: recorded only (a member of a group, whose operations start together at
 * its end: its earlier members' messages may wait already). */
mesh_status_t mesh_comm_start_call(mesh_comm_t *comm, const mesh_health_call_t *call, int look);
/* References of requests to their communicator (see refs). */
void mesh_comm_ref(mesh_comm_t *comm);
void mesh_comm_unref(mesh_comm_t *comm);
/* Fails every active schedule with status. */
void mesh_comm_fail_active(mesh_comm_t *comm, mesh_status_t status);
/* Into and out of the process's registry of communicators that waits progress. */
void mesh_comm_register(mesh_comm_t *comm);
void mesh_comm_unregister(mesh_comm_t *comm);

/* Routing wrappers used by the schedule executor (route.c); they count bytes per transport. */
mesh_status_t mesh_comm_isend(mesh_comm_t *comm, int peer, uint64_t tag, const void *buf,
                              size_t len, mesh_tl_op_t *op);
mesh_status_t mesh_comm_irecv(mesh_comm_t *comm, int peer, uint64_t tag, void *buf, size_t len,
                              mesh_tl_op_t *op);
/* Whether this host can tell the peer's process has ended (same host and pid namespace). */
int mesh_comm_peer_gone(mesh_comm_t *comm, int peer);
/* Liveness of one peer through its transport. */
mesh_status_t mesh_comm_check_peer(mesh_comm_t *comm, int peer);

#endif
