/*
 * The transport table. A transport moves bytes between two ranks of a communicator and reports
 * what it can do; it never decides which peer or algorithm to use (the collectives layer does).
 *
 * Model: one interface per communicator (mesh_tl_iface_t, opened with the communicator's ranks),
 * one endpoint per peer. Messages are tagged; a receive matches exactly one send with the same
 * (source endpoint, tag), in any posting order: sends that arrive before their receive is posted
 * are kept until it is. Operations complete asynchronously: op->status stays MESH_INPROGRESS
 * until the transport sets MESH_OK or an error (MESH_ERR_PEER_FAILED when the peer died or
 * closed its connection, MESH_ERR_ABORTED after abort). Completion happens inside progress().
 *
 * RMA (put/get with registered memory) and device memory are part of the table for the network
 * and CUDA transports; transports without them point at the shared stubs in tl_stub.c.
 */
#ifndef MESH_TL_H
#define MESH_TL_H

#include "mesh.h"
#include "libmesh/config.h"
#include <stddef.h>
#include <stdint.h>

typedef struct mesh_tl_iface mesh_tl_iface_t;
typedef struct mesh_tl_ep mesh_tl_ep_t;
typedef struct mesh_tl_ops mesh_tl_ops_t;
struct mesh_wait_set; /* libmesh/wait.h */
/* A visitor of the messages a transport keeps for receives to come (ops.unexpected). */
typedef int (*mesh_tl_unexpected_fn)(void *arg, int peer, uint64_t tag);

/* Tags are 64 bits. A collective's tag (bit 63 clear) carries in its low MESH_TL_TAG_SIG_BITS
 * bits a signature of the call that sent it: a receive matches a message whose tag equals its
 * own but for those bits, and reports the message's whole tag in op->peer_tag, so that the
 * receiver can tell a different call from its own. Point-to-point and control tags (bit 63 set)
 * match exactly. */
#define MESH_TL_TAG_EXACT    (1ull << 63) /* tags with this bit set match exactly */
#define MESH_TL_TAG_SIG_BITS 24
#define MESH_TL_TAG_SIG_MASK ((1ull << MESH_TL_TAG_SIG_BITS) - 1)
/* The bits a receive posted with tag does not compare. */
static inline uint64_t mesh_tl_tag_ignore(uint64_t tag)
{
    return (tag & MESH_TL_TAG_EXACT) ? 0 : MESH_TL_TAG_SIG_MASK;
}
static inline int mesh_tl_tag_match(uint64_t posted, uint64_t incoming)
{
    return ((posted ^ incoming) & ~mesh_tl_tag_ignore(posted)) == 0;
}

/* One pending operation; owned by the caller, which must keep it alive until completion. */
typedef struct mesh_tl_op {
    volatile int status;        /* MESH_INPROGRESS, then MESH_OK or a negative mesh_status_t */
    size_t length;              /* bytes transferred (a receive may get fewer than posted) */
    uint64_t peer_tag;          /* a receive: the tag its message was sent with (see above) */
    unsigned flags;             /* MESH_TL_OP_*, set by the caller before posting */
    struct mesh_tl_op *tl_next; /* for the transport's own lists */
    void *tl_priv[4];           /* for the transport */
} mesh_tl_op_t;

/* A receive left posted for the life of the endpoint (control notices). When the peer goes
 * away it fails like any other, but it alone does not make the departure worth reporting: a
 * peer that finished and left while only standing receives wait for it did nothing wrong. */
#define MESH_TL_OP_STANDING 1u
/* A send whose buffer the sender writes again soon after the send completes (an in-place
 * reduction into it, or scratch that the next call fills again). A transport that would have
 * the receiver read the buffer where it is may copy it out instead, up to a larger size: the
 * sender's next writes then need not take the lines back from the reader's cache one by one. */
#define MESH_TL_OP_SRC_REUSED 2u

/* Where a transport can reach. */
typedef enum {
    MESH_TL_SCOPE_SELF = 0, /* the same process */
    MESH_TL_SCOPE_NODE,     /* processes of one node */
    MESH_TL_SCOPE_NET       /* any node */
} mesh_tl_scope_t;

enum {
    MESH_TL_CAP_TAGGED = 1u << 0,       /* isend/irecv */
    MESH_TL_CAP_PUT = 1u << 1,          /* put to registered memory */
    MESH_TL_CAP_GET = 1u << 2,          /* get from registered memory */
    MESH_TL_CAP_SINGLE_COPY = 1u << 3,  /* large messages copied once (CMA, RDMA) */
    MESH_TL_CAP_DEVICE_MEM = 1u << 4,   /* device buffers accepted */
    MESH_TL_CAP_MULTI_STREAM = 1u << 5, /* stripes large messages over several connections */
    /* network transports: the path uses RDMA-class hardware here. Without it a library
     * transport (ucx, ofi) would only wrap sockets, which the tcp transport drives directly. */
    MESH_TL_CAP_HW_NET = 1u << 6,
    /* receives report the sender's signature bits in peer_tag (above); without it peer_tag
     * holds the receive's own tag, and a collective learns of another call only from lengths
     * and from the hang probe */
    MESH_TL_CAP_SIGNATURE = 1u << 7,
    /* GPUDirect RDMA could register device memory through dma-buf here (detection: no
     * transport moves device memory directly yet; device data between nodes is staged) */
    MESH_TL_CAP_DEVICE_DMABUF = 1u << 8
};

typedef struct {
    uint64_t flags; /* MESH_TL_CAP_* */
    mesh_tl_scope_t scope;
    double latency_us;     /* rough one-way small-message latency */
    double bandwidth_GBps; /* rough peak per endpoint */
    size_t eager_limit;    /* largest message sent without a rendezvous */
    int priority;          /* among transports of the same scope, higher wins */
} mesh_tl_caps_t;

/* caps.priority of the network transports. Between nodes the communicator takes the first
 * reachable transport in MESH_NET's order (default verbs,ucx,ofi,tcp); priority only ranks
 * network transports that MESH_NET does not name and breaks ties, so it must agree with that
 * order. */
enum {
    MESH_TL_PRIO_TCP = 10,
    MESH_TL_PRIO_OFI = 20,
    MESH_TL_PRIO_UCX = 30,
    MESH_TL_PRIO_VERBS = 40
};

/* What a communicator tells a transport when it opens an interface. */
typedef struct {
    int rank;
    int size;
    uint64_t comm_uid; /* same on every rank of the communicator; unique per communicator */
    const char *node;  /* this rank's node label */
    double timeout_s;  /* connection deadlines */
} mesh_tl_open_params_t;

/* What a transport learns about a peer (all of it exchanged at communicator creation). */
typedef struct {
    int rank;
    const char *node; /* node label */
    int pid;
    unsigned long long pidns; /* pid namespace id; pid checks only when equal to ours */
    const void *addr;         /* the peer's address blob from ops.address() */
    size_t addr_len;
} mesh_tl_peer_t;

typedef struct {
    void *addr;
    size_t length;
    uint64_t key; /* remote key, exchanged by the caller */
    void *tl_priv;
} mesh_tl_mem_t;

#define MESH_TL_ADDR_MAX 256

struct mesh_tl_ops {
    const char *name;                  /* "shm", "tcp", ... */
    const char *doc;                   /* one line for mesh-info -t */
    const mesh_config_table_t *config; /* knobs of this transport, or NULL */

    /* Whether the transport can run here at all (device present, kernel feature, ...). When
     * it cannot, it may say why with mesh_tl_set_unusable() before returning 0. */
    int (*usable)(void);
    mesh_status_t (*open)(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface);
    void (*close)(mesh_tl_iface_t *iface);
    void (*query)(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps);
    /* Writes this interface's address (at most MESH_TL_ADDR_MAX bytes) and its length. */
    mesh_status_t (*address)(mesh_tl_iface_t *iface, void *addr, size_t *len);
    /* Whether this interface can reach the peer at all (shm: same node label). */
    int (*reachable)(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer);
    /* Creates the endpoint; connection may complete later inside progress(). Collective in
     * the sense that both sides create their endpoint to each other. */
    mesh_status_t (*ep_create)(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                               mesh_tl_ep_t **ep);
    void (*ep_destroy)(mesh_tl_ep_t *ep);
    /* Drives connection establishment until every endpoint is usable or the deadline passes. */
    mesh_status_t (*wireup)(mesh_tl_iface_t *iface, double deadline);

    mesh_status_t (*isend)(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                           mesh_tl_op_t *op);
    /* A message longer than len fails the receive with MESH_ERR_TRUNCATED (length: the
     * message's, where the transport knows it) and writes nothing past buf + len; the sender
     * completes as usual and the next messages on the endpoint are not disturbed. */
    mesh_status_t (*irecv)(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len, mesh_tl_op_t *op);
    /* Makes progress on every endpoint; returns the number of completions, plus one when bytes
     * moved without completing anything (0: nothing happened, so a waiter may back off). */
    int (*progress)(mesh_tl_iface_t *iface);
    /* MESH_OK while the peer is alive; MESH_ERR_PEER_FAILED once it is known dead. */
    mesh_status_t (*ep_check)(mesh_tl_ep_t *ep);
    /* Calls fn with the peer and tag of each message that arrived and that no receive took yet
     * (kept for a receive to come), until fn returns nonzero, which it returns; 0 after all of
     * them. NULL where the transport cannot list them (a library keeps them): a collective
     * that ended without taking a message another rank sent it for that call then goes
     * unnoticed there. */
    int (*unexpected)(mesh_tl_iface_t *iface, mesh_tl_unexpected_fn fn, void *arg);
    /* Never blocks; callable from another thread: makes peers notice (closes connections,
     * flags shared segments) and completes pending operations with MESH_ERR_ABORTED. Only
     * flags are touched from the calling thread; the completions happen in the owner's next
     * progress(), and isend/irecv fail with MESH_ERR_ABORTED from then on. */
    void (*abort)(mesh_tl_iface_t *iface);
    /* How a waiter sleeps until this interface has something to do (libmesh/wait.h): adds the
     * descriptors to poll, or sets set->bell when its peers ring this process's bell whenever
     * they give it work (write to its rings, free room in theirs), or set->blind when nothing
     * wakes a sleeper (it then naps). Called with the interface's communicator locked; must not
     * block. */
    void (*wait_arm)(mesh_tl_iface_t *iface, struct mesh_wait_set *set);

    mesh_status_t (*mem_reg)(mesh_tl_iface_t *iface, void *addr, size_t len, mesh_tl_mem_t *mem);
    void (*mem_dereg)(mesh_tl_iface_t *iface, mesh_tl_mem_t *mem);
    mesh_status_t (*put)(mesh_tl_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                         uint64_t rkey, mesh_tl_op_t *op);
    mesh_status_t (*get)(mesh_tl_ep_t *ep, void *buf, size_t len, uint64_t raddr, uint64_t rkey,
                         mesh_tl_op_t *op);
    mesh_status_t (*flush)(mesh_tl_ep_t *ep, mesh_tl_op_t *op);
};

/* Base of every interface; transports embed it first and copy their ops in by value. */
struct mesh_tl_iface {
    mesh_tl_ops_t ops;
    int rank;
    int size;
};

/* Base of every endpoint; embedded first. */
struct mesh_tl_ep {
    mesh_tl_iface_t *iface;
    int peer; /* communicator rank */
};

/* Inline wrappers: the hot path goes through these. */
static inline mesh_status_t mesh_tl_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf,
                                          size_t len, mesh_tl_op_t *op)
{
    op->status = MESH_INPROGRESS;
    op->length = 0;
    return ep->iface->ops.isend(ep, tag, buf, len, op);
}

static inline mesh_status_t mesh_tl_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                          mesh_tl_op_t *op)
{
    op->status = MESH_INPROGRESS;
    op->length = 0;
    op->peer_tag = tag;
    return ep->iface->ops.irecv(ep, tag, buf, len, op);
}

static inline int mesh_tl_progress(mesh_tl_iface_t *iface)
{
    return iface->ops.progress(iface);
}

static inline int mesh_tl_unexpected(mesh_tl_iface_t *iface, mesh_tl_unexpected_fn fn, void *arg)
{
    return iface->ops.unexpected ? iface->ops.unexpected(iface, fn, arg) : 0;
}

/* Shared stubs for operations a transport does not offer (MESH_ERR_UNSUPPORTED). */
mesh_status_t mesh_tl_stub_mem_reg(mesh_tl_iface_t *iface, void *addr, size_t len,
                                   mesh_tl_mem_t *mem);
void mesh_tl_stub_mem_dereg(mesh_tl_iface_t *iface, mesh_tl_mem_t *mem);
mesh_status_t mesh_tl_stub_put(mesh_tl_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                               uint64_t rkey, mesh_tl_op_t *op);
mesh_status_t mesh_tl_stub_get(mesh_tl_ep_t *ep, void *buf, size_t len, uint64_t raddr,
                               uint64_t rkey, mesh_tl_op_t *op);
mesh_status_t mesh_tl_stub_flush(mesh_tl_ep_t *ep, mesh_tl_op_t *op);
mesh_status_t mesh_tl_stub_wireup(mesh_tl_iface_t *iface, double deadline);
/* A transport that cannot wake a sleeper: the set turns blind. */
void mesh_tl_stub_wait_arm(mesh_tl_iface_t *iface, struct mesh_wait_set *set);
/* A transport whose work only ever comes from this process (self): nothing to add. */
void mesh_tl_nowait_arm(mesh_tl_iface_t *iface, struct mesh_wait_set *set);
int mesh_tl_stub_usable(void);

/* Records why a receive of cap bytes from ep's peer cannot take a message of len bytes (0:
 * unknown) and returns MESH_ERR_TRUNCATED, for the transport to complete the receive with. */
mesh_status_t mesh_tl_truncated(const mesh_tl_ep_t *ep, size_t len, size_t cap);

/* Why the last usable() call of this thread returned 0 ("no active port"); "" when it did not
 * say. The caller reads it right after usable(). */
void mesh_tl_set_unusable(const char *why);
const char *mesh_tl_unusable_reason(void);
/* Whether this host has an RDMA device (InfiniBand, RoCE, iWARP) a library transport could use. */
int mesh_tl_rdma_present(void);

/* The registry (tl_registry.c): every transport built, in one table. */
int mesh_tl_count(void);
const mesh_tl_ops_t *mesh_tl_get(int index);
const mesh_tl_ops_t *mesh_tl_find(const char *name);
/* Registers every transport's config table. */
mesh_status_t mesh_tl_global_init(void);

#endif
