/*
 * mesh pipeline parallelism: schedules as data, a static checker, and an executor over the pp
 * communicator.
 *
 * The model is cut into S = p * v model stages; each of the p ranks of the pp communicator holds
 * v of them, its chunks 0..v-1 (the stage map says which). A schedule is, for every rank, the
 * ordered list of what it does in one training step: forward (F) and backward (B, and W when
 * the backward is split into input gradient B and weight gradient W) of each (micro-batch,
 * chunk), and the sends and receives that move activations forward and gradients backward
 * between ranks. Generators build the usual schedules; users may build their own, action by
 * action. mesh_pp_check proves a schedule correct before anything runs and predicts its bubble;
 * the executor runs it, calling the user's forward and backward for each action.
 */
#ifndef MESH_PIPELINE_H
#define MESH_PIPELINE_H

#include <mesh.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- schedules as data */

typedef enum {
    MESH_PP_F = 0,  /* forward of (micro-batch, chunk) */
    MESH_PP_B,      /* backward: input gradient, and the weight gradient too unless the
                       schedule has W actions */
    MESH_PP_W,      /* weight gradient (schedules that split the backward) */
    MESH_PP_SEND_F, /* send the chunk's output activation to the rank of the next stage */
    MESH_PP_RECV_F, /* receive the chunk's input activation from the rank of the previous stage */
    MESH_PP_SEND_B, /* send the gradient of the chunk's input to the rank of the previous stage */
    MESH_PP_RECV_B, /* receive the gradient of the chunk's output from the rank of the next stage */
    MESH_PP_OP_COUNT
} mesh_pp_op_t;

/* For mesh_pp_schedule_insert: the peer of a send or receive is the rank that the stage map
 * (as it is at insertion) puts on the other side. */
#define MESH_PP_PEER_AUTO (-1)

typedef struct {
    mesh_pp_op_t op;
    int mb;    /* micro-batch, 0..m-1 */
    int chunk; /* the rank's own chunk, 0..v-1 */
    int peer;  /* sends and receives: the other rank; -1 for F, B and W */
    /* A send's chunk is the one whose output (SEND_F) or input gradient (SEND_B) it carries;
     * a receive's, the one whose input (RECV_F) or output gradient (RECV_B) it brings. */
} mesh_pp_action_t;

typedef enum {
    MESH_PP_AFAB = 0,    /* "afab" (GPipe): all forwards, then all backwards */
    MESH_PP_1F1B,        /* "1f1b": warm-up forwards, then one forward one backward */
    MESH_PP_INTERLEAVED, /* "interleaved": 1F1B over v > 1 chunks per rank (Megatron's) */
    MESH_PP_ZB1,         /* "zb1" (ZB-H1; "zbh1", "zb-h1"): 1F1B, backward split, W deferred */
    MESH_PP_ZBV,         /* "zbv": two chunks per rank in a V, backward split */
    MESH_PP_USER,        /* "user": empty lists, built with mesh_pp_schedule_insert */
    MESH_PP_NONE,        /* "none": no pipeline (pp = 1), as a plan's layout says (mesh/plan.h);
                            nothing to build */
    MESH_PP_KIND_COUNT
} mesh_pp_kind_t;

typedef struct mesh_pp_schedule *mesh_pp_schedule_h;

enum { MESH_PP_SCHED_FIELD_CHUNKS = 1u << 0, MESH_PP_SCHED_FIELD_GROUP = 1u << 1 };

typedef struct {
    uint64_t field_mask;
    mesh_pp_kind_t kind;
    int stages;       /* p: ranks of the pp communicator */
    int microbatches; /* m, per step */
    int chunks;       /* v: chunks per rank; default 1 (interleaved: 2; zbv: 2) */
    int group;        /* interleaved: micro-batches that run one chunk before the next (Megatron's
                         microbatch_group_size_per_vp_stage); p <= group <= m; default p */
} mesh_pp_schedule_params_t;

/*
 * Builds the schedule of params->kind. Interleaved follows Megatron-Core's rules and refuses
 * what they refuse, naming the rule: p > 1, v > 1, p <= group <= m, and m % group either 0 or
 * at least p. The stage map of every kind but zbv puts stage c * p + r on rank r, chunk c; zbv
 * puts chunk 0 of rank r at stage r and chunk 1 at stage 2p - 1 - r.
 */
MESH_API mesh_status_t mesh_pp_schedule_create(const mesh_pp_schedule_params_t *params,
                                               mesh_pp_schedule_h *sched);
MESH_API void mesh_pp_schedule_destroy(mesh_pp_schedule_h sched);
/* A copy that can be changed without touching the original. */
MESH_API mesh_status_t mesh_pp_schedule_copy(mesh_pp_schedule_h sched, mesh_pp_schedule_h *copy);

/* "afab", "1f1b", "interleaved", "zb1", "zbv", "user", "none"; NULL for an unknown kind. The
 * one spelling of the schedules: the trainer, mesh-info, mesh-plan and the planner use it. */
MESH_API const char *mesh_pp_kind_name(mesh_pp_kind_t kind);
/* Also accepts "gpipe", "zbh1" and "zb-h1". */
MESH_API mesh_status_t mesh_pp_kind_parse(const char *name, mesh_pp_kind_t *kind);
/* "F", "B", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B"; NULL for an unknown op. */
MESH_API const char *mesh_pp_op_name(mesh_pp_op_t op);

MESH_API int mesh_pp_schedule_stages(mesh_pp_schedule_h sched);       /* p */
MESH_API int mesh_pp_schedule_microbatches(mesh_pp_schedule_h sched); /* m */
MESH_API int mesh_pp_schedule_chunks(mesh_pp_schedule_h sched);       /* v */
MESH_API mesh_pp_kind_t mesh_pp_schedule_kind(mesh_pp_schedule_h sched);
/* Number of actions in a rank's list; -1 for a bad rank. */
MESH_API int mesh_pp_schedule_length(mesh_pp_schedule_h sched, int rank);
MESH_API mesh_status_t mesh_pp_schedule_action(mesh_pp_schedule_h sched, int rank, int index,
                                               mesh_pp_action_t *action);
/* Puts action at index of rank's list (index == length appends), shifting the rest. Fields
 * are range-checked here; whether the lists fit together is mesh_pp_check's job. */
MESH_API mesh_status_t mesh_pp_schedule_insert(mesh_pp_schedule_h sched, int rank, int index,
                                               const mesh_pp_action_t *action);
MESH_API mesh_status_t mesh_pp_schedule_remove(mesh_pp_schedule_h sched, int rank, int index);
/* Model stage (0..p*v-1) of a rank's chunk; -1 for a bad rank or chunk. */
MESH_API int mesh_pp_schedule_stage(mesh_pp_schedule_h sched, int rank, int chunk);
/* Changes the stage map; it must stay one to one (checked by mesh_pp_check). */
MESH_API mesh_status_t mesh_pp_schedule_set_stage(mesh_pp_schedule_h sched, int rank, int chunk,
                                                  int stage);

/* ---------------------------------------------------------------- static checker */

enum {
    MESH_PP_COSTS_FIELD_F = 1u << 0,
    MESH_PP_COSTS_FIELD_B = 1u << 1,
    MESH_PP_COSTS_FIELD_W = 1u << 2,
    MESH_PP_COSTS_FIELD_COMM = 1u << 3,
    MESH_PP_COSTS_FIELD_WAKE = 1u << 4,
    MESH_PP_COSTS_FIELD_WAKE_AFTER = 1u << 5,
    MESH_PP_COSTS_FIELD_GAP = 1u << 6
};

/* Time of one action of one chunk, in any unit. A schedule without W actions pays b + w for
 * each B, so that schedules that split the backward and those that do not compare at equal
 * work. comm: from the later of a send and its receive being posted until the data is there.
 * wake: how much later than that a rank that had been waiting for the data at least
 * wake_after starts its action (a rank that waits long stops spinning and notices the data
 * late, see MESH_PROGRESS_SPIN); a busy rank, or one that waited less, finds it there. gap:
 * the executor's own time after each F, B or W (posting and testing messages), idle time for
 * the model. */
typedef struct {
    uint64_t field_mask;
    double f, b, w, comm, wake, wake_after, gap; /* defaults 1, 1, 1, 0, 0, 0, 0 */
} mesh_pp_costs_t;

typedef struct {
    double makespan;      /* from the start until the last action of any rank ends */
    double bubble;        /* idle time / makespan on each rank, averaged over the ranks */
    int peak_activations; /* most (micro-batch, chunk) activations stored on one rank */
    int peak_rank;        /* the first rank with that peak */
    int split_backward;   /* 1 when the schedule has W actions */
} mesh_pp_report_t;

/*
 * Proves that the lists fit together and predicts the bubble, or refuses the schedule with
 * MESH_ERR_INVALID_ARG and a message naming the rank, the position in its list and the reason.
 * Checked: fields and stage map; every send has exactly one receive (peer, micro-batch, chunk,
 * direction) and every receive one send; on every rank, each (micro-batch, chunk) runs F, then
 * B, then W (when the schedule has W: then every pair has one), each input arrives (a receive
 * or this rank's own previous stage) before the action that uses it, and each output leaves
 * after the action that makes it; and no deadlock under the executor's rule:
 *
 *   sends and receives are posted without blocking, where they stand in the list; a send
 *   completes once its receive is posted; a rank waits only at an F or B whose input has not
 *   arrived, i.e. whose matching send its peer has not posted yet.
 *
 * The lists are then run under that rule with the given costs (NULL: defaults), every action
 * as early as the rule allows; the report gives the makespan, the bubble fraction and the peak
 * number of stored activations (an activation is stored from its F until its last backward
 * action: W when the schedule has W, else B). report may be NULL.
 */
MESH_API mesh_status_t mesh_pp_check(mesh_pp_schedule_h sched, const mesh_pp_costs_t *costs,
                                     mesh_pp_report_t *report);
/* After a successful check: one rank's bubble fraction and peak stored activations. */
MESH_API mesh_status_t mesh_pp_check_rank(mesh_pp_schedule_h sched, int rank, double *bubble,
                                          int *peak_activations);
/* After a successful check: when an action starts and ends in the predicted timeline. */
MESH_API mesh_status_t mesh_pp_check_time(mesh_pp_schedule_h sched, int rank, int index,
                                          double *start, double *end);

/* ---------------------------------------------------------------- executor */

/* What one F, B or W works on. Buffers hold count elements of dtype (mesh_pp_exec_params_t). */
typedef struct {
    mesh_pp_op_t op; /* MESH_PP_F, MESH_PP_B or MESH_PP_W */
    int mb, chunk;
    int stage;               /* model stage of the chunk, 0..p*v-1 */
    const void *input;       /* the chunk's input activation; NULL on stage 0 */
    void *output;            /* F: write the chunk's output here; NULL on the last stage */
    const void *grad_output; /* B, W: gradient of the loss by the output; NULL on the last stage */
    void *grad_input;        /* B: write the gradient by the input here; NULL on stage 0 */
} mesh_pp_work_t;

/* A callback's failure ends the step with its status. */
typedef mesh_status_t (*mesh_pp_work_fn)(void *ctx, const mesh_pp_work_t *work);
/* The rank's last backward action of that chunk in this step has run: its weight gradients are
 * final, and the caller may start their reduction on another communicator (nonblocking); the
 * executor goes on while it runs. */
typedef mesh_status_t (*mesh_pp_chunk_fn)(void *ctx, int chunk);

enum {
    MESH_PP_EXEC_FIELD_WEIGHT = 1u << 0,
    MESH_PP_EXEC_FIELD_GRADS_READY = 1u << 1,
    MESH_PP_EXEC_FIELD_ALLOC = 1u << 2,
    MESH_PP_EXEC_FIELD_STREAM = 1u << 3
};

typedef struct {
    uint64_t field_mask;
    size_t count;       /* elements in one activation, and in one gradient, at every boundary */
    mesh_dtype_t dtype; /* of activations and gradients */
    mesh_pp_work_fn forward, backward;
    mesh_pp_work_fn weight;       /* required by schedules with W actions */
    mesh_pp_chunk_fn grads_ready; /* optional */
    void *ctx;                    /* passed to every callback */
    /* where activation and gradient buffers live (default: host memory from malloc) */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *ptr);
    void *stream; /* passed to the sends and receives (device buffers); default NULL */
} mesh_pp_exec_params_t;

typedef struct mesh_pp_exec *mesh_pp_exec_h;

/* The executor's messages use the point-to-point tags below this one on its communicator;
 * other point-to-point traffic there takes tags from it up to MESH_TAG_MAX. */
#define MESH_PP_TAG_END (1 << 28)

/* Checks the schedule (mesh_pp_check with the default costs, unless it passed a check since
 * its last change; a refused one is refused here with the same message), that pp has p ranks,
 * and takes this rank's list; sched may be destroyed afterwards. Not collective. */
MESH_API mesh_status_t mesh_pp_exec_create(mesh_comm_h pp, mesh_pp_schedule_h sched,
                                           const mesh_pp_exec_params_t *params,
                                           mesh_pp_exec_h *exec);
/*
 * One step: this rank's list in order. Sends and receives are nonblocking tagged point to point
 * on pp (the tag carries direction, micro-batch and model stage, below MESH_PP_TAG_END; one
 * executor runs at a time on a communicator); receives are posted where the schedule puts
 * them, sends where the schedule puts them (the generators: right after the action that fills
 * them), and a rank waits only when an F or B needs data that has not arrived, driving every
 * communicator of the process meanwhile. Returns when every message of the step has completed.
 * Every rank of pp runs the same number of steps. A failed step (a callback's error, a peer's
 * failure or MESH_TIMEOUT) cancels what it had in flight; the executor then refuses further
 * steps, since its peers are out of step.
 */
MESH_API mesh_status_t mesh_pp_exec_run(mesh_pp_exec_h exec);
MESH_API void mesh_pp_exec_destroy(mesh_pp_exec_h exec);

typedef struct {
    double wall_s;    /* duration of the last mesh_pp_exec_run */
    double busy_s;    /* time spent in forward, backward and weight callbacks during it */
    double wait_s;    /* time spent waiting for data */
    int peak_buffers; /* most activation and gradient buffers held at once */
} mesh_pp_exec_stats_t;

MESH_API mesh_status_t mesh_pp_exec_stats(mesh_pp_exec_h exec, mesh_pp_exec_stats_t *stats);
/* When action index of this rank's list started and ended in the last step, in seconds from
 * the step's start (the list is the schedule's, mesh_pp_schedule_action). An F, B or W starts
 * when its callback starts, after any wait for its input; a send or receive is its posting. */
MESH_API mesh_status_t mesh_pp_exec_time(mesh_pp_exec_h exec, int index, double *start,
                                         double *end);

#ifdef __cplusplus
}
#endif
#endif /* MESH_PIPELINE_H */
