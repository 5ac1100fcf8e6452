/*
 * Hierarchical collectives on device buffers, for communicators that span nodes.
 *
 * On N nodes of L ranks each (L > 1), all-reduce, all-gather, broadcast and reduce-scatter on
 * device buffers stage only what crosses the network: the phases inside a node move data by
 * device copies and reductions between the IPC-mapped buffers of the node's ranks (as dev_ipc.h
 * does for a communicator of one node), and the phase between nodes runs on the rail of this
 * rank (the ranks with its local rank, patterns/hier.h) over the network transports, on a pinned
 * host buffer that holds this rank's share only:
 *
 *   all-reduce  node reduce-scatter (rank l reduces chunk l of the node's inputs into its output,
 *               reading its peers' inputs), the chunk copied to host, all-reduced along the rail,
 *               copied back (divided for MESH_AVG), then node all-gather (device copies of the
 *               other chunks from the peers' outputs): B/L bytes each way per rank
 *   all-gather  rail first: the rank's input copied to host, all-gathered along the rail, the
 *               rail's blocks copied into the output, then every other block by a device copy
 *               from the output of the node's rank that holds it: (N - 1) blocks in
 *   broadcast   the root's node copies chunk l of the root's buffer (IPC) to rank l, which sends
 *               it along its rail; the other nodes' rank l copies it to its output; then every
 *               rank copies the other chunks from the node's peers: B/L bytes per rank
 *   reduce-scatter  node first: rank l reduces the node's blocks of its rail (reading its peers'
 *               inputs) and copies them to host, a rail reduce-scatter finishes its own block,
 *               which is copied back: N blocks out, one in
 *
 * Every rank writes only its own memory. A call is one host schedule (sched.h) with poll tasks
 * for the device work, so it keeps the communicator's call order, sequence numbers and failure
 * reports: a peer that dies or stays silent fails its transfers, which fails the call on the
 * stream. Ranks of a node tell each other, with token messages, when the data a peer reads is
 * final, and the call ends once every peer said it is done reading.
 *
 * Unequal nodes, one rank per node, buffers peers cannot map, pre-multiplied sums, the v-forms
 * and the other collectives are staged whole (dev_stage.c) and run by the host selection, unless
 * MESH_DEVICE_HIER=1 asks for this path, which then refuses them (MESH_ERR_UNSUPPORTED).
 */
#ifndef MESH_COLL_DEV_HIER_H
#define MESH_COLL_DEV_HIER_H

#include "collectives/device/dev_ipc.h"
#include "collectives/phases.h"

/* What a rank tells the ranks of its node once its stream reached the call: buffer 0 is its
 * input, buffer 1 its output (addr 0: not exported). */
#define MESH_DEV_HIER_BUFS 2
typedef struct {
    uint64_t pid;
    uint64_t addr[MESH_DEV_HIER_BUFS];
    mesh_mem_ipc_t h[MESH_DEV_HIER_BUFS];
} mesh_dev_hier_desc_t;

typedef struct mesh_dev_hier_call mesh_dev_hier_call_t;
typedef struct mesh_dev_hier_buf mesh_dev_hier_buf_t;

/* The device work of one step, enqueued on the communicator's internal stream (c->part: the
 * part of the call the step was built for). */
typedef mesh_status_t (*mesh_dev_hier_issue_fn)(mesh_dev_hier_call_t *c, void *stream);

typedef struct {
    mesh_dev_hier_call_t *c;
    mesh_dev_hier_issue_fn fn;
    int part;
    int issued;
    void *event; /* recorded after the step's work; back to the pool once it completed */
} mesh_dev_hier_step_t;

struct mesh_dev_hier_call {
    mesh_comm_t *comm;
    const mesh_mem_ops_t *ops;
    mesh_coll_type_t type;
    mesh_dtype_t dtype;
    mesh_op_t op;
    int avg, root;
    size_t count, dsize;
    const char *sbuf;
    char *rbuf;
    size_t *counts, *displs;             /* all-gather's blocks (copied) */
    mesh_coll_hier_t h;                  /* this rank's node and rail */
    const void *exp[MESH_DEV_HIER_BUFS]; /* what this rank exports */
    mesh_dev_hier_desc_t *desc;          /* [L], by local rank: the peers', and ours */
    char **peer;                         /* [L * BUFS]: the peers' buffers mapped here */
    mesh_dev_ipc_map_t **used;           /* [L * BUFS]: their mappings, released at the end */
    int mapped;
    int part; /* of the step issuing now */
    mesh_dev_ipc_t *ipc;
    mesh_dev_hier_buf_t *buf; /* the pinned host buffer of the rail phase */
    char *host;
    int rounds;     /* token exchanges built so far */
    uint32_t token; /* sent */
    uint32_t *got;  /* [MESH_DEV_HIER_ROUNDS * L] received (at most that many token rounds) */
    uint64_t to_host, from_host; /* bytes this call copied between device and host */
    void *priv;                  /* the collective's own layout */
};
#define MESH_DEV_HIER_ROUNDS 3

/* dev_hier.c: the call and the pieces of its schedule */

/* A pinned host buffer of bytes for the call, given back by its last task. */
mesh_status_t mesh_dev_hier_stage(mesh_dev_hier_call_t *c, size_t bytes);
/* Exports c->exp once the stream reached the call and exchanges descriptors with the node's
 * ranks; returns the task after which every peer's descriptor is here. */
int mesh_dev_hier_start(mesh_sched_t *s, mesh_dev_hier_call_t *c);
/* A poll task that issues fn for part on the internal stream (the peers mapped before the first
 * step of the call, which every other depends on) and completes once that work did. */
int mesh_dev_hier_device(mesh_sched_t *s, mesh_dev_hier_call_t *c, mesh_dev_hier_issue_fn fn,
                         int part, const int *deps, int ndeps);
/* Every rank of the node tells every other one it passed dep; returns the join. */
int mesh_dev_hier_token(mesh_sched_t *s, mesh_dev_hier_call_t *c, int dep);
/* The last task: descriptors closed, mappings released, the host buffer given back, counted. */
void mesh_dev_hier_end(mesh_sched_t *s, mesh_dev_hier_call_t *c, const int *deps, int ndeps);

/* Peer l's (local rank) buffer b mapped here; ours for l == lr. */
char *mesh_dev_hier_peer(const mesh_dev_hier_call_t *c, int l, int b);
/* Chunk i of n over the call's count elements: whole 256-byte lines, the last chunks short or
 * empty. */
void mesh_dev_hier_chunk(const mesh_dev_hier_call_t *c, int i, int n, size_t *lo, size_t *len);
/* The node's other chunks into the output, each copied from its owner's output (buffer 1): the
 * all-gather inside the node that ends all-reduce and broadcast. */
mesh_status_t mesh_dev_hier_gather_chunks(mesh_dev_hier_call_t *c, void *stream);
/* Device copies to and from the host buffer, counted. */
mesh_status_t mesh_dev_hier_to_host(mesh_dev_hier_call_t *c, void *host, const void *dev,
                                    size_t bytes, void *stream);
mesh_status_t mesh_dev_hier_from_host(mesh_dev_hier_call_t *c, void *dev, const void *host,
                                      size_t bytes, void *stream);

/* One file per collective: the schedule of the call. */
mesh_status_t mesh_dev_hier_allreduce(mesh_sched_t *s, mesh_dev_hier_call_t *c);
mesh_status_t mesh_dev_hier_allgather(mesh_sched_t *s, mesh_dev_hier_call_t *c);
mesh_status_t mesh_dev_hier_broadcast(mesh_sched_t *s, mesh_dev_hier_call_t *c);
mesh_status_t mesh_dev_hier_reduce_scatter(mesh_sched_t *s, mesh_dev_hier_call_t *c);

#endif
