/*
 * Collectives on device buffers inside a node, by device copies between the ranks' buffers.
 *
 * On a communicator whose ranks all share one node, all-gather, broadcast, all-reduce,
 * reduce-scatter and all-to-all (not in place) on device buffers stage nothing: once a rank's
 * stream reached the call, the rank exports its buffers (ipc_export: the allocation's handle and
 * the pointer's offset in it) and sends that descriptor to every peer over the host transports;
 * once it has every peer's descriptor (each sent after that peer's stream reached the call, so the
 * peer's inputs are final), it maps the peers' buffers through the communicator's IPC cache and
 * pulls what it receives with device copies (copy_async) into its own buffers, or reduces peer
 * memory (reduce_async), on an internal stream, waits for them with an event, and tells its peers
 * it is done; a call ends once every peer said so, so that nobody frees or reuses a buffer a peer
 * still reads. A rank only ever writes its own memory, and the host orders everything: no kernel
 * waits for another process's kernel.
 *
 *   all-gather  every block a rank receives is one copy from its owner's input
 *   broadcast   one copy from the root's buffer
 *   all-reduce  reduce-scatter, then all-gather: rank r reduces chunk r of every input into its
 *               output (reading the peers' inputs), the ranks exchange a "done" so the chunks are
 *               final, then rank r copies chunk p from rank p's output; every byte a rank
 *               receives is one copy, every input byte is read once
 *   reduce-scatter  rank r reduces block r of every input into its output
 *   all-to-all  every block a rank receives is one copy from its sender's input, which says in
 *               its descriptor where each rank's block lies (in place stages: a rank would
 *               overwrite blocks its peers still read)
 * The reductions are chains of reduce_async (dst = acc op peer), the rank's own input first and
 * then the next ranks' in order, so every rank's block is reduced in one order by one rank.
 *
 * The schedule is a host schedule with poll tasks for the device work (sched.h), so that it
 * keeps the communicator's call order, sequence numbers and failure reports, and replays.
 */
#ifndef MESH_COLL_DEV_IPC_H
#define MESH_COLL_DEV_IPC_H

#include "collectives/device/dev.h"

/* The communicator's IPC state: its internal stream, events, and the cache of peers' mappings
 * (dev_ipc_cache.c). Used under the communicator's lock (by poll tasks), freed with the
 * communicator. */
typedef struct mesh_dev_ipc mesh_dev_ipc_t;
typedef struct mesh_dev_ipc_map mesh_dev_ipc_map_t;

/* The state of comm for table ops, made at the first use. */
mesh_status_t mesh_dev_ipc_state(mesh_comm_t *comm, const mesh_mem_ops_t *ops,
                                 mesh_dev_ipc_t **out);
void *mesh_dev_ipc_stream(const mesh_dev_ipc_t *ipc);
mesh_status_t mesh_dev_ipc_event_get(mesh_dev_ipc_t *ipc, void **event);
void mesh_dev_ipc_event_put(mesh_dev_ipc_t *ipc, void *event);

/* Descriptors this rank exported (mesh_mem_ipc_t.fd) for a call under way: held until the call
 * ends (its peers imported them), closed by drop, or with the state when a failed call left
 * them. */
mesh_status_t mesh_dev_ipc_hold(mesh_dev_ipc_t *ipc, int fd);
void mesh_dev_ipc_drop(mesh_dev_ipc_t *ipc, int fd);

/* The address in this process of peer's pointer addr, exported as h by process pid: the peer's
 * own address when it is this process, else the mapping of its allocation, cached per peer and
 * allocation identity (h->id) and made on a miss (the descriptor h->fd of process pid is
 * obtained with pidfd_getfd, or /proc). A mapping in use (*used, released with
 * mesh_dev_ipc_release) stays mapped; one not in use is closed once the peer exports another
 * allocation over its address range (it freed the old one), or the cache is full. */
mesh_status_t mesh_dev_ipc_map(mesh_dev_ipc_t *ipc, int peer, uint64_t pid, uint64_t addr,
                               const mesh_mem_ipc_t *h, void **out, mesh_dev_ipc_map_t **used);
void mesh_dev_ipc_release(mesh_dev_ipc_map_t *m);

/* What the communicator's cache did so far, for tests: mappings made, lookups that found one,
 * mappings open now. */
void mesh_dev_ipc_stats(const mesh_comm_t *comm, uint64_t *maps, uint64_t *hits, int *open);

#endif
