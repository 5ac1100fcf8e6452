/*
 * Schedules: a collective is built as a graph of tasks (send, receive, reduce, copy) with
 * dependencies, then run by the executor on the progress engine. Tasks whose dependencies are
 * met start at once, so algorithms pipeline simply by splitting work into segments.
 *
 * Matching: the i-th send task to peer p (in creation order) matches the i-th receive task from
 * this rank on p. Algorithms create sends and receives between a pair in the same order on both
 * sides (natural for symmetric algorithms).
 *
 * Builders return a task id (>= 0) or -1 after recording MESH_ERR_NO_MEMORY in the schedule;
 * dependency arrays may contain -1 entries, which are ignored, so
 *     int r = mesh_sched_recv(s, left, tmp, n, NULL, 0);
 *     int x = mesh_sched_reduce(s, dst, tmp, cnt, (int[]){r, prev}, 2);
 */
#ifndef MESH_COLL_SCHED_H
#define MESH_COLL_SCHED_H

#include "collectives/comm.h"
#include <stddef.h>

typedef void (*mesh_sched_finalize_fn)(mesh_sched_t *s, void *arg);

/* tag_base: mesh_tag_coll(seq, 0) for collectives, or a p2p tag. */
mesh_status_t mesh_sched_create(mesh_comm_t *comm, mesh_dtype_t dtype, mesh_op_t op,
                                mesh_sched_t **s);
void mesh_sched_destroy(mesh_sched_t *s);

int mesh_sched_send(mesh_sched_t *s, int peer, const void *buf, size_t bytes, const int *deps,
                    int ndeps);
int mesh_sched_recv(mesh_sched_t *s, int peer, void *buf, size_t bytes, const int *deps, int ndeps);
/* A send or receive with an explicit tag (point-to-point), outside the collective numbering. */
int mesh_sched_send_tag(mesh_sched_t *s, int peer, const void *buf, size_t bytes, uint64_t tag);
int mesh_sched_recv_tag(mesh_sched_t *s, int peer, void *buf, size_t bytes, uint64_t tag);
/* Marks send task id: this rank writes its buffer again soon after it completed
 * (MESH_TL_OP_SRC_REUSED). No effect on other tasks or a failed build. */
void mesh_sched_send_reused(mesh_sched_t *s, int id);
/* dst = dst op src over count elements of the schedule's dtype and op. */
int mesh_sched_reduce(mesh_sched_t *s, void *dst, const void *src, size_t count, const int *deps,
                      int ndeps);
/* dst = a op b. */
int mesh_sched_reduce3(mesh_sched_t *s, void *dst, const void *a, const void *b, size_t count,
                       const int *deps, int ndeps);
int mesh_sched_copy(mesh_sched_t *s, void *dst, const void *src, size_t bytes, const int *deps,
                    int ndeps);
/* Marks reduce3 task id: its result is too large to be read again from cache, so it is written
 * with non-temporal stores (mesh_reduce_local3_stream). No effect on other tasks. */
void mesh_sched_reduce_stream(mesh_sched_t *s, int id);
/* A task that does nothing: joins dependencies. */
int mesh_sched_nop(mesh_sched_t *s, const int *deps, int ndeps);
/* A task that runs fn(arg) once its dependencies completed, and again at every progress while it
 * returns MESH_INPROGRESS; MESH_OK completes it, an error (message recorded) fails the schedule.
 * Work that completes outside the host (device copies: collectives/device/dev_ipc.c) waits so.
 * It runs under the communicator's lock, on whichever thread progresses the schedule. */
typedef mesh_status_t (*mesh_sched_poll_fn)(void *arg);
int mesh_sched_poll(mesh_sched_t *s, mesh_sched_poll_fn fn, void *arg, const int *deps, int ndeps);

/* Scratch memory that lives as long as the schedule (64-byte aligned); NULL on failure. A pooled
 * schedule keeps up to MESH_SCHED_SCRATCH_KEEP_BYTES of it for later calls. */
#define MESH_SCHED_SCRATCH_KEEP_BYTES (((size_t)8 << 20) + ((size_t)256 << 10))
void *mesh_sched_scratch(mesh_sched_t *s, size_t bytes);
/* Runs after every task completed successfully (e.g. the division of MESH_AVG). */
void mesh_sched_on_complete(mesh_sched_t *s, mesh_sched_finalize_fn fn, void *arg);
/* While building (before mesh_sched_start): the first error recorded (MESH_OK if none). */
mesh_status_t mesh_sched_build_status(const mesh_sched_t *s);

/* Replay: a collective called again with the same arguments runs the graph built for the last
 * such call instead of being selected and built anew. The key is the call's arguments as opaque
 * bytes; cookie is returned with the schedule (the algorithm that built it). A schedule keeps
 * its key into the communicator's pool only if it completed and its scratch fits in
 * MESH_SCHED_SCRATCH_KEEP_BYTES; failing to store the key only costs the replay. */
void mesh_sched_set_key(mesh_sched_t *s, const void *key, size_t len, const void *cookie);
/* A pooled schedule built under this key, rewound to run again (tag not set yet); NULL if none. */
mesh_sched_t *mesh_sched_reuse(mesh_comm_t *comm, const void *key, size_t len, const void **cookie);

/* Where a collective's tags come from: mesh_tag_coll(seq, signature); each message adds its
 * index. */
void mesh_sched_set_tag(mesh_sched_t *s, uint64_t tag_base);
/* The base of its tags (mesh_sched_set_tag). */
uint64_t mesh_sched_tag(const mesh_sched_t *s);
/* The signature in the tags of a collective's schedule (kept when it is replayed). */
uint32_t mesh_sched_sig(const mesh_sched_t *s);
/* The call a collective's schedule serves (its sequence number, count and root, -1 for none),
 * for the message that names it when a peer called another operation. */
void mesh_sched_set_call(mesh_sched_t *s, uint32_t seq, size_t count, int root);
/* A replayed collective's graph serves call seq: its tags (with the signature it was built
 * with, which it returns) and the call, as the two above. */
uint32_t mesh_sched_replay_call(mesh_sched_t *s, uint32_t seq, size_t count, int root);

/* Starts the schedule (the communicator holds it as active until it ends). caller_drives: a
 * blocking call, whose thread progresses it until it ends, so that other threads' waits need
 * not. The caller holds the communicator's lock for this and every call below. */
mesh_status_t mesh_sched_start(mesh_sched_t *s, int caller_drives);
/* Progresses it once: MESH_INPROGRESS, MESH_OK, or the error (message recorded). */
mesh_status_t mesh_sched_progress(mesh_sched_t *s);
/* Once started: MESH_INPROGRESS until it ends, then MESH_OK or its error, without progressing
 * it; read by waiters without the communicator's lock. */
mesh_status_t mesh_sched_run_status(const mesh_sched_t *s);
/* Fails every pending task of a started schedule with status (abort, timeout). */
void mesh_sched_fail(mesh_sched_t *s, mesh_status_t status);
mesh_comm_t *mesh_sched_comm(const mesh_sched_t *s);
/* The store of finished schedules of a communicator (NULL when out of memory); freed, with the
 * schedules it still keeps, once the communicator's transports are closed. */
struct mesh_sched_cache *mesh_sched_cache_create(void);
void mesh_sched_cache_free(struct mesh_sched_cache *cache);

#endif
