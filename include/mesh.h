/*
 * mesh: collective communication for CPUs and GPUs.
 *
 * This is the only header users include. Every exported name starts with mesh_ or MESH_.
 * Handles are opaque; parameter structs begin with a field_mask so they can grow.
 * Every function that can fail returns mesh_status_t; outputs are set only on success.
 */
#ifndef MESH_H
#define MESH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MESH_API __attribute__((visibility("default")))
#else
#define MESH_API
#endif

#define MESH_VERSION_MAJOR 0
#define MESH_VERSION_MINOR 1
#define MESH_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

/* X(name, value, description) */
#define MESH_STATUS_TABLE(X)                                                                       \
    X(MESH_OK, 0, "success")                                                                       \
    X(MESH_INPROGRESS, 1, "operation in progress")                                                 \
    X(MESH_ERR_INVALID_ARG, -1, "invalid argument")                                                \
    X(MESH_ERR_NO_MEMORY, -2, "out of memory")                                                     \
    X(MESH_ERR_UNSUPPORTED, -3, "operation not supported")                                         \
    X(MESH_ERR_TIMEOUT, -4, "timed out")                                                           \
    X(MESH_ERR_PEER_FAILED, -5, "peer failed")                                                     \
    X(MESH_ERR_ABORTED, -6, "communicator aborted")                                                \
    X(MESH_ERR_IO, -7, "input/output error")                                                       \
    X(MESH_ERR_BOOTSTRAP, -8, "bootstrap failed")                                                  \
    X(MESH_ERR_NOT_FOUND, -9, "not found")                                                         \
    X(MESH_ERR_BUSY, -10, "resource busy")                                                         \
    X(MESH_ERR_INTERNAL, -11, "internal error")                                                    \
    X(MESH_ERR_TRUNCATED, -12, "message longer than the receive buffer")                           \
    X(MESH_ERR_MISMATCH, -13, "ranks called different operations")

typedef enum {
#define MESH_STATUS_ENUM_(name, value, desc) name = value,
    MESH_STATUS_TABLE(MESH_STATUS_ENUM_)
#undef MESH_STATUS_ENUM_
} mesh_status_t;

/* Short description of a status; never NULL. */
MESH_API const char *mesh_status_string(mesh_status_t status);

/* ---------------------------------------------------------------- datatypes and ops */

typedef enum {
    MESH_INT8 = 0,
    MESH_UINT8,
    MESH_INT32,
    MESH_UINT32,
    MESH_INT64,
    MESH_UINT64,
    MESH_FP16,
    MESH_BF16,
    MESH_FP32,
    MESH_FP64,
    MESH_FP8_E4M3,
    MESH_FP8_E5M2,
    MESH_DTYPE_COUNT
} mesh_dtype_t;

typedef enum {
    MESH_SUM = 0,
    MESH_PROD,
    MESH_MIN,
    MESH_MAX,
    MESH_AVG,
    MESH_OP_COUNT,
    /* Pre-multiplied sums are created per communicator (mesh_op_create_premul). */
    MESH_OP_USER_BASE = 64
} mesh_op_t;

MESH_API size_t mesh_dtype_size(mesh_dtype_t dtype);      /* 0 for an unknown type */
MESH_API const char *mesh_dtype_name(mesh_dtype_t dtype); /* "fp32", ...; "unknown" */
MESH_API const char *mesh_op_name(mesh_op_t op);          /* "sum", ...; "premul_sum" */

/* ---------------------------------------------------------------- handles */

typedef struct mesh_comm *mesh_comm_h;
typedef struct mesh_request *mesh_request_h;

/* 128 bytes, copied verbatim between processes (like ncclUniqueId). */
#define MESH_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[MESH_UNIQUE_ID_BYTES];
} mesh_unique_id_t;

/* ---------------------------------------------------------------- communicators */

/*
 * Creates a unique id on the root: it carries the root's bootstrap address and a random secret.
 * The root keeps listening until the communicator that uses it is created.
 */
MESH_API mesh_status_t mesh_unique_id(mesh_unique_id_t *id);

/* NCCL-style creation: every rank passes the same id. Blocks until all ranks joined or
 * MESH_TIMEOUT expires. */
MESH_API mesh_status_t mesh_comm_init_rank(mesh_comm_h *comm, int size, const mesh_unique_id_t *id,
                                           int rank);

/* Creation from the environment: MESH_RANK/MESH_SIZE/MESH_ADDR (meshrun), torchrun's
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or PMIx (mpirun, srun) when built with it. */
MESH_API mesh_status_t mesh_comm_init_env(mesh_comm_h *comm);

/* User out-of-band allgather: gathers len bytes from every rank into out (size * len bytes,
 * in rank order). Returns 0 on success. Called collectively during creation only. */
typedef int (*mesh_oob_allgather_fn)(const void *in, void *out, size_t len, void *ctx);

enum {
    MESH_COMM_PARAM_FIELD_RANK = 1u << 0,
    MESH_COMM_PARAM_FIELD_SIZE = 1u << 1,
    MESH_COMM_PARAM_FIELD_OOB = 1u << 2,
    MESH_COMM_PARAM_FIELD_NODE = 1u << 3,
    MESH_COMM_PARAM_FIELD_TIMEOUT = 1u << 4
};

typedef struct {
    uint64_t field_mask;
    int rank;
    int size;
    mesh_oob_allgather_fn oob_allgather;
    void *oob_ctx;
    const char *node; /* node label; default: MESH_NODE_ID or the host name */
    double timeout_s; /* overrides MESH_TIMEOUT for this communicator */
} mesh_comm_params_t;

MESH_API mesh_status_t mesh_comm_init(mesh_comm_h *comm, const mesh_comm_params_t *params);

/* Collective over comm. Ranks with the same color form a new communicator ordered by key,
 * then by old rank. color MESH_COLOR_NONE gives *newcomm = NULL. */
#define MESH_COLOR_NONE (-1)
MESH_API mesh_status_t mesh_comm_split(mesh_comm_h comm, int color, int key, mesh_comm_h *newcomm);
MESH_API mesh_status_t mesh_comm_dup(mesh_comm_h comm, mesh_comm_h *newcomm);
/* Releases the communicator; pending requests complete with MESH_ERR_ABORTED. The handles of its
 * requests stay valid: wait, test and free them as usual. The communicator's own handle must not
 * be used afterwards (while requests of it are alive, calls on it are refused). */
MESH_API void mesh_comm_destroy(mesh_comm_h comm);
/* Never blocks: marks the communicator failed, wakes every waiter with MESH_ERR_ABORTED and
 * closes its connections so peers notice. Safe from another thread. Destroy afterwards. */
MESH_API void mesh_comm_abort(mesh_comm_h comm);

MESH_API int mesh_comm_rank(mesh_comm_h comm);
MESH_API int mesh_comm_size(mesh_comm_h comm);
/* Last error message on comm (or of this thread when comm is NULL); "" when none. */
MESH_API const char *mesh_comm_last_error(mesh_comm_h comm);

/* The error of a communicator, for programs that act on it: once the communicator failed (a
 * peer failed or stopped answering, ranks called different operations, a wait timed out), that
 * failure; otherwise the last call refused on it (MESH_OK: none). */
typedef struct {
    mesh_status_t status;
    int rank;           /* the rank it names: the one that failed, stopped answering or called
                           another operation; -1 when it names none */
    char operation[96]; /* the call it ended, "allreduce(sum, 1024 fp32)"; "" when none */
    char message[512];  /* as mesh_comm_last_error */
} mesh_error_info_t;
MESH_API mesh_status_t mesh_comm_error_info(mesh_comm_h comm, mesh_error_info_t *info);

/* Node map: which ranks share a node. */
MESH_API int mesh_comm_node_count(mesh_comm_h comm);
MESH_API int mesh_comm_node(mesh_comm_h comm, int rank);       /* node index of a rank */
MESH_API int mesh_comm_local_rank(mesh_comm_h comm, int rank); /* rank within its node */
MESH_API int mesh_comm_local_size(mesh_comm_h comm, int node); /* ranks on that node */
/* Ranks of a node in ascending order: fills up to max of them and returns how many the node has
 * (-1 for a bad comm or node). */
MESH_API int mesh_comm_node_ranks(mesh_comm_h comm, int node, int *ranks, int max);

/*
 * What a rank told the others at creation. Its GPU (index on its node in PCI bus order) is
 * MESH_LOCAL_GPU when set, else entry (local rank % n) of CUDA_VISIBLE_DEVICES, else local rank
 * % GPUs of the node, where the local rank is the launcher's (MESH_LOCAL_RANK, LOCAL_RANK, ...)
 * or that in the first communicator of the process; it is fixed for the process. Its CPUs are
 * its binding when bound, else those near its GPU, else the node's. Its NIC is the one nearest
 * its GPU in the PCI tree (an RDMA one when the node has any).
 */
enum {
    MESH_RANK_INFO_FIELD_NODE = 1u << 0, /* node, local_rank, node_name */
    MESH_RANK_INFO_FIELD_GPU = 1u << 1,  /* gpu */
    MESH_RANK_INFO_FIELD_CPUS = 1u << 2, /* cpu_first, cpu_last, cpu_count */
    MESH_RANK_INFO_FIELD_NIC = 1u << 3   /* nic */
};

typedef struct {
    uint64_t field_mask;   /* fields wanted; on return, those filled */
    int node;              /* node index, as mesh_comm_node() */
    int local_rank;        /* rank within its node */
    const char *node_name; /* node label (MESH_NODE_ID or host name); owned by comm */
    int gpu;               /* -1: none */
    int cpu_first;         /* first and last CPU (OS numbering) of the rank's set; -1 unknown */
    int cpu_last;
    int cpu_count; /* CPUs in the set */
    char nic[32];  /* e.g. "mlx5_0", "eth0"; "" when none */
} mesh_rank_info_t;

/* Reads the fields of info->field_mask for a rank of comm. */
MESH_API mesh_status_t mesh_comm_rank_info(mesh_comm_h comm, int rank, mesh_rank_info_t *info);

/* Bytes this rank sent and received through a transport ("shm", "tcp", "self", ...) on this
 * communicator. Unknown transport: MESH_ERR_NOT_FOUND. */
MESH_API mesh_status_t mesh_comm_tl_bytes(mesh_comm_h comm, const char *transport,
                                          uint64_t *bytes_sent, uint64_t *bytes_received);
/* Name of the transport carrying traffic to a peer ("shm", "tcp", ...). */
MESH_API const char *mesh_comm_peer_transport(mesh_comm_h comm, int peer);

/* Pre-multiplied sum: reduces sum(scalar * x). The scalar has the collective's dtype. */
MESH_API mesh_status_t mesh_op_create_premul(mesh_comm_h comm, const void *scalar,
                                             mesh_dtype_t dtype, mesh_op_t *op);
MESH_API mesh_status_t mesh_op_destroy(mesh_comm_h comm, mesh_op_t op);

/* ---------------------------------------------------------------- requests */

/*
 * Every collective takes a request pointer as its last argument. NULL: the call blocks until
 * the operation completes (bounded by MESH_TIMEOUT). Non-NULL: the call starts the operation and
 * returns MESH_OK with a request to test or wait on; the buffers belong to mesh until then.
 * Inside mesh_group_start/end, operations start at mesh_group_end.
 *
 * Device buffers (memory of the rank's current GPU) are ordered on the call's stream, as NCCL's
 * calls are: the call returns once the operation is enqueued there, whether the request is NULL
 * or not; the operation starts when the stream reaches it (work enqueued before it on the stream
 * is its input) and work enqueued after it on the stream sees its results. A NULL stream is the
 * device's default stream. With a request, mesh_test/mesh_wait complete once the results are in
 * device memory; with NULL, an error that happens after the call returned is reported by the
 * communicator's next call and mesh_comm_last_error. Inside a group, the group's device calls
 * are enqueued at mesh_group_end and start together. Buffers of one call are all host memory or
 * all memory of the rank's device. Inside one node the data moves between the ranks' device
 * buffers directly (IPC); on a communicator that spans nodes it is staged through pinned host
 * memory.
 *
 * Progress: a wait or test on any request (and a blocking call) also moves every other
 * communicator of the process that has operations under way, so a rank blocked on one
 * communicator keeps serving its peers on the others. With MESH_PROGRESS_THREAD=1 a thread
 * does so all the time, and operations started nonblocking complete without the caller polling.
 * Threads: a communicator may be used by several threads (one posts while another waits); its
 * operations are ordered as the calls were made. Group state is per thread.
 */
MESH_API mesh_status_t mesh_test(mesh_request_h req, int *done);
/* Waits, bounded by the communicator's timeout; returns the operation's status. */
MESH_API mesh_status_t mesh_wait(mesh_request_h req);
/* Waits for every request of reqs (NULL entries are skipped; communicators may differ).
 * Returns MESH_OK, or the status of the first failed one in array order, whose message is
 * mesh_comm_last_error(NULL); mesh_test tells each request's own status. */
MESH_API mesh_status_t mesh_waitall(int n, mesh_request_h *reqs);
/* Progresses once and sets *index to a completed request of reqs (the first in array order), or
 * -1 when none is; returns that request's status, MESH_OK when none completed. Completed
 * requests stay in the array until freed: free it (or drop it from reqs) before calling again. */
MESH_API mesh_status_t mesh_testany(int n, mesh_request_h *reqs, int *index);
/* mesh_testany, and *events (unless NULL) gets the events its round of progress saw: data
 * that moved, messages that arrived, operations that completed; 0 when nothing moved (and when
 * no request of reqs is under way). A caller polling in a loop backs off after rounds of 0
 * only, as mesh_wait does: a transfer that keeps moving keeps it polling. */
MESH_API mesh_status_t mesh_testany_events(int n, mesh_request_h *reqs, int *index, int *events);
/* Frees a completed request (or cancels and frees an incomplete one after an abort). A request
 * must not be used once freed: freeing, waiting or testing it again is refused (logged, or
 * MESH_ERR_INVALID_ARG) for as long as mesh has not reused its memory for a later request, and is
 * always memory-safe, since request memory goes back to mesh's pool, never to the system. */
MESH_API void mesh_request_free(mesh_request_h req);
/* Drives all communicators of this process once; returns the number of events. */
MESH_API int mesh_progress(void);

/* The library's wait policy, for callers that poll requests themselves (mesh_test,
 * mesh_testany_events) in a loop, as mesh_wait does: after a round that moved nothing, call
 * mesh_idle; after one that moved something, mesh_idle_reset. For the first spin_s seconds of
 * idleness it pauses the CPU once per call (a wake-up within a microsecond while the peers
 * run); after that it sleeps until a peer of any communicator of this process sends or frees
 * room, another thread completes or posts an operation, a communicator aborts, or at most
 * max_sleep_s passes. No core is taken from other work meanwhile. */
typedef struct mesh_idle {
    double spin_s;      /* seconds to spin before sleeping; < 0: MESH_PROGRESS_SPIN */
    double max_sleep_s; /* longest sleep of one call; <= 0: MESH_PROGRESS_SLICE */
    uint64_t state[5];  /* the library's */
} mesh_idle_t;
MESH_API void mesh_idle_init(mesh_idle_t *idle, double spin_s, double max_sleep_s);
MESH_API void mesh_idle_reset(mesh_idle_t *idle);
/* Returns 1 when it slept, 0 when it only paused the CPU. */
MESH_API int mesh_idle(mesh_idle_t *idle);

MESH_API mesh_status_t mesh_group_start(void);
/* Starts every operation recorded since mesh_group_start; those posted with a NULL request are
 * waited for here. Send/recv pairs inside a group never deadlock, in any order. */
MESH_API mesh_status_t mesh_group_end(void);

/* ---------------------------------------------------------------- collectives
 * counts are in elements of dtype; sbuf == rbuf (or sbuf == rbuf + rank offset for gathers)
 * means in place; stream is a CUDA stream for device buffers (NULL: the default stream) and must
 * be NULL for host ones. */

MESH_API mesh_status_t mesh_allreduce(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                                      mesh_dtype_t dtype, mesh_op_t op, void *stream,
                                      mesh_request_h *req);
MESH_API mesh_status_t mesh_reduce(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                                   mesh_dtype_t dtype, mesh_op_t op, int root, void *stream,
                                   mesh_request_h *req);
MESH_API mesh_status_t mesh_broadcast(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                                      mesh_dtype_t dtype, int root, void *stream,
                                      mesh_request_h *req);
/* rbuf gets recvcount elements: block `rank` of the reduction of sbuf (size * recvcount). */
MESH_API mesh_status_t mesh_reduce_scatter(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                           size_t recvcount, mesh_dtype_t dtype, mesh_op_t op,
                                           void *stream, mesh_request_h *req);
/* Rank i gets recvcounts[i] elements; sbuf holds the blocks back to back in rank order. */
MESH_API mesh_status_t mesh_reduce_scatterv(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                            const size_t *recvcounts, mesh_dtype_t dtype,
                                            mesh_op_t op, void *stream, mesh_request_h *req);
/* rbuf gets size * sendcount elements. */
MESH_API mesh_status_t mesh_allgather(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                      size_t sendcount, mesh_dtype_t dtype, void *stream,
                                      mesh_request_h *req);
/* Block of rank i lands at rbuf + displs[i] elements (NULL displs: back to back). */
MESH_API mesh_status_t mesh_allgatherv(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                       const size_t *recvcounts, const size_t *displs,
                                       mesh_dtype_t dtype, void *stream, mesh_request_h *req);
/* count elements to and from every rank; sbuf and rbuf hold size * count. */
MESH_API mesh_status_t mesh_alltoall(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                                     mesh_dtype_t dtype, void *stream, mesh_request_h *req);
MESH_API mesh_status_t mesh_alltoallv(mesh_comm_h comm, const void *sbuf, const size_t *sendcounts,
                                      const size_t *sdispls, void *rbuf, const size_t *recvcounts,
                                      const size_t *rdispls, mesh_dtype_t dtype, void *stream,
                                      mesh_request_h *req);
/* Root's rbuf gets size * count elements. */
MESH_API mesh_status_t mesh_gather(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                                   mesh_dtype_t dtype, int root, void *stream, mesh_request_h *req);
/* Root's sbuf holds size * count elements; each rank gets count. */
MESH_API mesh_status_t mesh_scatter(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                                    mesh_dtype_t dtype, int root, void *stream,
                                    mesh_request_h *req);
MESH_API mesh_status_t mesh_barrier(mesh_comm_h comm, mesh_request_h *req);

/*
 * Point-to-point. A receive matches the sends of its peer with the same tag in posting order:
 * the n-th send from a to b with tag t matches the n-th receive on b from a with tag t, whatever
 * other tags do in between, so a pipeline stage can post the receives of activations and of
 * gradients independently. mesh_send and mesh_recv use tag 0. A message longer than the receive
 * buffer fails the receive (MESH_ERR_TRUNCATED).
 */
#define MESH_TAG_MAX 0x3fffffff /* tags are 0..MESH_TAG_MAX */
MESH_API mesh_status_t mesh_send(mesh_comm_h comm, const void *buf, size_t count,
                                 mesh_dtype_t dtype, int peer, void *stream, mesh_request_h *req);
MESH_API mesh_status_t mesh_recv(mesh_comm_h comm, void *buf, size_t count, mesh_dtype_t dtype,
                                 int peer, void *stream, mesh_request_h *req);
MESH_API mesh_status_t mesh_send_tagged(mesh_comm_h comm, const void *buf, size_t count,
                                        mesh_dtype_t dtype, int peer, int tag, void *stream,
                                        mesh_request_h *req);
MESH_API mesh_status_t mesh_recv_tagged(mesh_comm_h comm, void *buf, size_t count,
                                        mesh_dtype_t dtype, int peer, int tag, void *stream,
                                        mesh_request_h *req);
/* Sends scount elements to dst and receives rcount from src, both with tag, as one operation
 * (its receive is posted first); sbuf and rbuf must not overlap. */
MESH_API mesh_status_t mesh_sendrecv(mesh_comm_h comm, const void *sbuf, size_t scount, int dst,
                                     void *rbuf, size_t rcount, int src, mesh_dtype_t dtype,
                                     int tag, void *stream, mesh_request_h *req);

/* ---------------------------------------------------------------- 5D mesh grid */

/*
 * The parallelism axes of LLM training laid over a communicator's ranks. Axis sizes multiply to
 * the world size (unset sizes are 1). The order string lists the axes innermost first (adjacent
 * ranks differ in the first axis), default "tp-cp-ep-dp-pp". Axes that must stay inside one node
 * (TP always; CP and EP when listed in intra_node) are checked against the node map; with
 * MESH_GRID_REORDER the ranks are renumbered node by node first, so a round-robin launcher
 * placement still fits. Creation is collective over world and builds every communicator eagerly.
 */
typedef enum {
    MESH_AXIS_TP = 0,
    MESH_AXIS_CP,
    MESH_AXIS_EP,
    MESH_AXIS_DP,
    MESH_AXIS_PP,
    MESH_AXIS_COUNT
} mesh_axis_t;

typedef struct mesh_grid *mesh_grid_h;

enum {
    MESH_GRID_PARAM_FIELD_SIZES = 1u << 0,
    MESH_GRID_PARAM_FIELD_ORDER = 1u << 1,
    MESH_GRID_PARAM_FIELD_INTRA_NODE = 1u << 2,
    MESH_GRID_PARAM_FIELD_FLAGS = 1u << 3,
    MESH_GRID_PARAM_FIELD_EXPERT_TP = 1u << 4
};

enum {
    MESH_GRID_REORDER = 1u << 0 /* renumber ranks by node so that intra-node axes fit */
};

typedef struct {
    uint64_t field_mask;
    int size[MESH_AXIS_COUNT]; /* indexed by mesh_axis_t; 0 means 1 */
    const char *order;         /* e.g. "tp-cp-ep-dp-pp", innermost first */
    unsigned intra_node;       /* (1u << MESH_AXIS_x) of axes that must fit in a node; TP always */
    unsigned flags;            /* MESH_GRID_* */
    int expert_tp;             /* tensor parallel size inside expert layers; default: tp */
} mesh_grid_params_t;

MESH_API mesh_status_t mesh_grid_create(mesh_comm_h world, const mesh_grid_params_t *params,
                                        mesh_grid_h *grid);
MESH_API void mesh_grid_destroy(mesh_grid_h grid);
/*
 * Communicator of this rank's group along one axis or a combination, named by axes joined with
 * '-' in any order: "tp", "dp", "dp-cp", "tp-dp-cp", ...; the folded expert grid's axes are
 * "etp", "ep", "edp" and "pp" ("etp-ep", ...). Members are ordered as in the order string
 * (Megatron-Core's groups). A name with etp or edp, or of ep and pp only ("ep", "ep-pp"), is
 * the expert grid's; any other the dense grid's ("dp-ep" is the dense data-parallel group that
 * includes ep). Axes of size 1 add nothing ("cp" alone is this rank only). The expert grid lays
 * expert_tp, ep and world / (expert_tp * ep * pp) over the dense order (tp -> etp, dp -> edp,
 * cp dropped) and must have the dense grid's pp groups. Owned by the grid. Unknown name:
 * MESH_ERR_INVALID_ARG naming it.
 */
MESH_API mesh_status_t mesh_grid_comm(mesh_grid_h grid, const char *axes, mesh_comm_h *comm);
/* This rank's coordinate along one axis ("tp", ..., "etp", "edp"; "ep" is the expert grid's,
 * as in mesh_grid_comm); -1 for an unknown name. */
MESH_API int mesh_grid_coord(mesh_grid_h grid, const char *axis);
/* This rank's rank in the grid's order (differs from the world rank after reordering). */
MESH_API int mesh_grid_rank(mesh_grid_h grid);

/* ---------------------------------------------------------------- device memory */

/*
 * Device buffers and streams of the device table that collectives use, for programs without a
 * CUDA of their own (benches, tests, tools). The table is "cuda" where the driver (opened at run
 * time) finds a GPU, "emu" where MESH_DEVICE_EMU=1 enables the emulated device (host memory that
 * counts as device memory, streams as threads: a test instrument), and none elsewhere. Streams
 * are the table's (a CUstream for cuda) and serve as the stream argument of the collectives.
 */
typedef enum {
    MESH_MEMTYPE_HOST = 0,    /* pageable host memory */
    MESH_MEMTYPE_HOST_PINNED, /* host memory the device's copy engines reach */
    MESH_MEMTYPE_DEVICE       /* memory of the calling thread's current device */
} mesh_memtype_t;

/* Name of the active device table, "cuda" or "emu"; NULL when there is none. */
MESH_API const char *mesh_device_table(void);
/* The calling thread's current device, an ordinal of the table (what MESH_MEMTYPE_DEVICE
 * allocates on). MESH_ERR_UNSUPPORTED without a table. */
MESH_API mesh_status_t mesh_device_current(int *device);
/* bytes (> 0) of memory of a type, aligned to at least 64 bytes. MESH_ERR_UNSUPPORTED for a
 * device type without a table, MESH_ERR_NO_MEMORY when the table or the host has none left. */
MESH_API mesh_status_t mesh_mem_alloc(mesh_memtype_t type, size_t bytes, void **ptr);
/* Frees what mesh_mem_alloc returned (NULL: nothing). */
MESH_API void mesh_mem_free(void *ptr);
/* The type of any pointer (one no table knows is host memory). */
MESH_API mesh_status_t mesh_mem_type(const void *ptr, mesh_memtype_t *type);

/* A stream of the table on the current device; mesh_stream_destroy waits for nothing. */
MESH_API mesh_status_t mesh_stream_create(void **stream);
MESH_API void mesh_stream_destroy(void *stream);
/* Enqueues a copy of bytes between any two of the types on stream. */
MESH_API mesh_status_t mesh_memcpy_async(void *dst, const void *src, size_t bytes, void *stream);
/* Returns once all work enqueued on stream before the call completed, without taking a core
 * while it waits long; MESH_ERR_TIMEOUT after MESH_TIMEOUT seconds. */
MESH_API mesh_status_t mesh_stream_synchronize(void *stream);

/* ---------------------------------------------------------------- time */

/* Seconds on the monotonic clock (CLOCK_MONOTONIC, never set back): the clock of the library's
 * timeouts and deadlines, for clients that time their own work (benches, trainers, layers). */
MESH_API double mesh_time_now(void);

/* ---------------------------------------------------------------- introspection */

/* Name of the algorithm the last collective of this kind used on comm ("ring", ...). */
MESH_API const char *mesh_comm_last_algorithm(mesh_comm_h comm);

/* Runtime configuration value of a MESH_* knob as text (NULL if unknown). */
MESH_API const char *mesh_config_get(const char *name);

/* For layers built on mesh (the parallel layers, bindings): records a formatted message as this
 * thread's last error (mesh_comm_last_error(NULL)), logs it as mesh's own errors are logged, and
 * returns status. */
MESH_API mesh_status_t mesh_error_report(mesh_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif /* MESH_H */
