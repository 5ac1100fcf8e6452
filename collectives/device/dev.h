/*
 * Collectives on device buffers, ordered on the caller's stream as NCCL's are.
 *
 * A call on device buffers builds its schedule at once (so that calls keep their order and
 * sequence numbers on the communicator) on pinned host staging buffers that stand for the
 * device buffers, and enqueues on the caller's stream a write of a ready flag and a wait for a
 * done flag; it returns then. The device engine (dev_engine.c, one thread per process) sees the
 * ready flag, copies the device inputs into the staging buffers on an internal stream of the
 * table, starts the schedule (any algorithm serves, unchanged), copies the results back, waits
 * for those copies (an event) and writes the done flag, which releases the caller's stream.
 *
 * Inside a node, all-gather, broadcast, all-reduce, reduce-scatter and all-to-all stage nothing:
 * their schedules move data by device copies between the ranks' IPC-mapped buffers (dev_ipc.h),
 * started by the engine as any other. Across nodes of more than one rank each, all-reduce,
 * all-gather, broadcast and reduce-scatter do the same inside each node and stage only what crosses
 * the network (dev_hier.h).
 */
#ifndef MESH_COLL_DEV_H
#define MESH_COLL_DEV_H

#include "collectives/algo.h"
#include "collectives/request.h"
#include "libmesh/mem.h"

/* A device buffer (or several overlapping ones, merged) and where it stands in staging. */
#define MESH_DEV_MAX_REGIONS 4
typedef struct {
    char *dev; /* the caller's memory */
    size_t bytes;
    size_t offset; /* in the op's staging buffer */
    int in, out;   /* copied in before the schedule runs, out after it completed */
} mesh_dev_region_t;

typedef struct mesh_dev_stage mesh_dev_stage_t; /* a pooled pinned buffer */
typedef struct mesh_dev_pipe mesh_dev_pipe_t;   /* a call split in chunks (dev_pipe.c) */

typedef struct mesh_dev_op {
    const mesh_mem_ops_t *ops;
    int device;
    void *stream; /* the caller's */
    mesh_comm_t *comm;
    mesh_dev_region_t reg[MESH_DEV_MAX_REGIONS];
    int nreg;
    mesh_dev_stage_t *stage;
    char *base; /* the staging buffer's memory */
    /* a pre-multiplied sum scales the staged input once it arrived */
    void *scale_buf;
    size_t scale_count;
    mesh_dtype_t scale_dtype;
    unsigned char scalar[16];
    mesh_request_h req;
    atomic_int refs;       /* the engine's, and the user's request handle's */
    mesh_dev_pipe_t *pipe; /* NULL: staged whole around the request's one schedule */
} mesh_dev_op_t;

/* What a communicator's pipelined calls did, per stage: copy-in (device to staging), wire (the
 * chunks' schedules) and copy-out (staging to device). A stage is busy from the moment the
 * engine enqueues or starts its work on a chunk until the engine sees it complete; overlap is the
 * time two or more stages were busy at once, span the time from each call's first copy-in to its
 * last copy-out, summed over calls. */
enum { MESH_DEV_STAGE_IN, MESH_DEV_STAGE_WIRE, MESH_DEV_STAGE_OUT, MESH_DEV_STAGES };
typedef struct {
    uint64_t calls, chunks;
    uint64_t bytes[MESH_DEV_STAGES]; /* wire: the chunks' payload (count x dtype size) */
    double busy[MESH_DEV_STAGES];    /* seconds */
    double overlap, span;            /* seconds */
    size_t chunk_bytes;              /* the last call's chunk */
    int depth;                       /* chunks in flight at most, over the calls */
    size_t peak;                     /* pinned bytes the pool held at most (every call's) */
} mesh_dev_stage_stats_t;

/* dev_stage.c: the op and its staging */
mesh_status_t mesh_dev_op_create(mesh_comm_t *comm, const mesh_coll_args_t *args,
                                 mesh_dev_op_t **out);
/* Adds the device memory [p, p + bytes) (nothing for NULL or 0 bytes); overlapping ranges merge
 * (in place), their flags joined. */
mesh_status_t mesh_dev_op_add(mesh_dev_op_t *d, const void *p, size_t bytes, int in, int out);
/* Takes one staging buffer for every region from the communicator's pool (waiting, bounded by
 * the communicator's timeout, while earlier operations hold MESH_DEVICE_STAGING_MAX). */
mesh_status_t mesh_dev_op_stage(mesh_dev_op_t *d);
/* The staging address standing for device address p (p itself outside every region). */
void *mesh_dev_op_map(const mesh_dev_op_t *d, const void *p);
void mesh_dev_op_scale(mesh_dev_op_t *d, void *staged, size_t count, mesh_dtype_t dtype,
                       const void *scalar);
/* Takes one staging buffer of bytes for the op (its regions' offsets set by the caller). */
mesh_status_t mesh_dev_op_stage_bytes(mesh_dev_op_t *d, size_t bytes);
/* Gives the staging back and frees the op (and a pipeline's schedules: communicator locked). */
void mesh_dev_op_free(mesh_dev_op_t *d);
/* MESH_DEVICE_STAGING_CHUNK (0: calls are staged whole). */
size_t mesh_dev_chunk_bytes(void);
/* MESH_DEVICE_STAGING_MAX of the communicator's pool. */
size_t mesh_dev_staging_max(mesh_comm_t *comm);
/* Adds a pipelined call's figures to the communicator's, and reads them (zeros before any). */
void mesh_dev_stage_account(mesh_comm_t *comm, const mesh_dev_stage_stats_t *add);
void mesh_dev_stage_stats(mesh_comm_t *comm, mesh_dev_stage_stats_t *out);
/* The communicator's staging pool, freed with its structure. */
void mesh_dev_pool_free(mesh_comm_t *comm);
mesh_status_t mesh_dev_config_register(void);

/* dev_launch.c: a collective's device buffers staged, then built and launched on them */
mesh_status_t mesh_dev_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                              size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                              mesh_request_h *req);

/* dev_pipe.c: all-reduce, reduce and broadcast of more than one chunk (MESH_DEVICE_STAGING_CHUNK)
 * whose device buffers stage: split in calls of a chunk each, built at once (every rank splits
 * alike, so sequence numbers agree), run through a few chunk-sized staging slots so that the
 * copy-in of one chunk, the wire of another and the copy-out of a third overlap. */
int mesh_dev_pipe_serves(const mesh_comm_t *comm, const mesh_coll_args_t *args, const void *scalar,
                         size_t in_count, const void *avg_buf, size_t avg_count);
mesh_status_t mesh_dev_pipe_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                                   void *avg_buf, void *owned0, mesh_request_h *req);
/* Destroys the chunks' schedules (the communicator locked) and the pipeline. */
void mesh_dev_pipe_free(mesh_dev_op_t *d);
/* dev_pipe_run.c: for the engine, once the caller's stream reached the call: enqueues copies on
 * in_stream and out_stream (the engine's, of the op's device), starts and progresses the chunks.
 * MESH_INPROGRESS until every chunk's results are back in device memory (or, after a failure,
 * until no copy is in flight any more); *events counts what moved. */
mesh_status_t mesh_dev_pipe_advance(mesh_dev_op_t *d, void *in_stream, void *out_stream,
                                    int *events);

/* dev_ipc.c: calls that move data by device copies between the IPC-mapped buffers of the node's
 * ranks instead of staging (dev_ipc.h): all-gather, broadcast, all-reduce and reduce-scatter (not
 * pre-multiplied), all-to-all (not in place) of device memory on a communicator of one node,
 * unless MESH_DEVICE_IPC=0. */
int mesh_dev_ipc_serves(const mesh_comm_t *comm, const mesh_coll_args_t *args, const void *scalar);
mesh_status_t mesh_dev_ipc_launch(mesh_comm_t *comm, mesh_coll_args_t *args, void *avg_buf,
                                  size_t avg_count, void *owned0, mesh_request_h *req);
/* How a communicator of this shape runs collective type on device buffers, for mesh-info -A:
 * "ipc (...)", "staged ..." or "refused (...)". */
const char *mesh_dev_path(const mesh_comm_t *comm, mesh_coll_type_t type);
/* Builds such a call (args->mem set) for mesh_api_launch_on; avg: divide by the size (MESH_AVG)
 * on the device. */
mesh_status_t mesh_dev_ipc_build(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                                 mesh_sched_t *s, const mesh_coll_algo_t **algo);
/* The communicator's IPC mappings, stream and events, freed after its last request. */
void mesh_dev_ipc_free(mesh_comm_t *comm);

/* dev_hier.c: all-reduce, all-gather, broadcast and reduce-scatter of device memory on a
 * communicator spanning nodes of equal size (more than one rank each), by IPC inside the nodes and
 * staging only what crosses the network (dev_hier.h). select: 1 when this path serves the call, 0
 * when it is staged, an error when MESH_DEVICE_HIER=1 forces the path on a call it cannot serve. */
int mesh_dev_hier_select(mesh_comm_t *comm, const mesh_coll_args_t *args, const void *scalar);
/* The schedule of such a call (mesh_dev_ipc_build hands it over on a communicator of nodes). */
mesh_status_t mesh_dev_hier_build(mesh_comm_t *comm, const mesh_coll_args_t *args, int avg,
                                  mesh_sched_t *s, const mesh_coll_algo_t **algo);
/* mesh_dev_path on a communicator spanning nodes. */
const char *mesh_dev_hier_path(const mesh_comm_t *comm, mesh_coll_type_t type);
/* The communicator's pinned buffers of those calls, freed after its last request. */
void mesh_dev_hier_free(mesh_comm_t *comm);

/* dev_engine.c: hands n submitted requests (a call, or a group's device calls) to the engine
 * as one batch: each distinct stream gets its ready and done flags enqueued. On failure nothing
 * was enqueued and the requests are the caller's. */
mesh_status_t mesh_dev_post(mesh_request_h *reqs, int n);
/* Whether a device request ended (its status in req->status, read with acquire). */
int mesh_dev_done(mesh_request_h req);
/* The request's handle is given up (mesh_request_free, or a NULL request's): the last of the
 * engine and the handle releases it. */
void mesh_dev_put(mesh_request_h req);

#endif
