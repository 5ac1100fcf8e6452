/* The inside of a schedule, shared by the builder and runner (sched.c) and the pool of finished
 * schedules kept for reuse and replay (sched_pool.c). */
#ifndef MESH_COLL_SCHED_IMPL_H
#define MESH_COLL_SCHED_IMPL_H

#include "collectives/sched.h"

enum { TASK_SEND, TASK_RECV, TASK_REDUCE, TASK_REDUCE3, TASK_COPY, TASK_NOP, TASK_POLL };

/* A poll task's function and argument (in the schedule's scratch; the task's dst). */
typedef struct {
    mesh_sched_poll_fn fn;
    void *arg;
} mesh_task_poll_t;
enum { TASK_WAITING, TASK_POSTED, TASK_DONE };

typedef struct {
    uint8_t kind;
    uint8_t state;
    uint8_t stream; /* reduce3: dst written with non-temporal stores */
    int peer;
    uint32_t ndeps_left;
    uint32_t ndeps; /* as built, for a replay */
    uint32_t succ_first;
    uint32_t succ_count;
    void *dst;
    const void *a;
    const void *b;
    size_t n;     /* bytes for send/recv/copy, elements for reductions */
    uint64_t tag; /* send/recv: added to the schedule's tag base (the message's index for a
                     collective, the whole tag for point-to-point) */
    mesh_tl_op_t op;
} mesh_task_t;

typedef struct {
    int from;
    int to;
} mesh_edge_t;

typedef struct mesh_scratch {
    struct mesh_scratch *next;
    size_t size;
    /* payload follows, 64-byte aligned */
} mesh_scratch_t;

struct mesh_sched {
    mesh_comm_t *comm;
    mesh_dtype_t dtype;
    mesh_op_t op;
    mesh_status_t status; /* build error, then run state */
    int started;
    int shared; /* other threads' waits may have to drive it (sched.c: activate) */

    mesh_task_t *tasks;
    int ntasks, cap_tasks;
    mesh_edge_t *edges;
    int nedges, cap_edges;
    int *succ; /* CSR successors */
    int cap_succ;
    int csr_built; /* succ[] and the run arrays are ready (kept across a replay) */
    int cap_run;   /* of ready and inflight */
    /* ready task ids: sends and receives stacked from the front ([0, nready)), local work
     * (copies, reductions, joins) from the back ([ntasks - ncomp, ntasks)), so that a rank posts
     * every transfer it can before it spends time on local work */
    int *ready;
    int nready, ncomp;
    int *inflight; /* posted send/recv task ids */
    int ninflight;
    int ndone;

    uint32_t *send_count; /* [comm size] messages to each peer so far (build) */
    uint32_t *recv_count;
    uint64_t tag_base;
    /* the call, for a message naming it when a peer called another operation */
    uint32_t call_seq;
    int call_root;
    size_t call_count;

    mesh_scratch_t *scratch;
    mesh_scratch_t *spare; /* kept from an earlier use of this schedule object */
    mesh_sched_finalize_fn finalize;
    void *finalize_arg;

    unsigned char *key; /* arguments this graph was built for (replay); keylen 0: none */
    size_t keylen, keycap;
    const void *cookie;

    double deadline;
    double next_check;
    unsigned idle_polls; /* progress calls since something last moved */
    int moved;           /* something moved since the deadline was set */
    mesh_sched_t *next;  /* in the communicator's cache */
};

#endif
