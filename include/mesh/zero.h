/*
 * mesh ZeRO: a sharded optimizer over a data-parallel communicator (the grid's "dp", or "dp-cp"
 * with context parallelism).
 *
 * The model registers its tensors by name, then reads parameters and writes gradients in place,
 * in flat buffers the layer owns: one for parameters and one for gradients, in the parameter
 * dtype (MESH_FP32 or MESH_BF16), each tensor at a recorded offset. The optimizer (AdamW or SGD
 * with momentum) runs on fp32 master weights; with fp32 parameters the master weights are the
 * parameters themselves (stages 0-2: this rank's part of the parameter buffer; stage 3: the
 * parameter shard), and mesh_zero_memory reports no separate master.
 *
 *   mesh_zero_create(dp, &params, &z);
 *   mesh_zero_add(z, "h0.attn.w", numel, 2, shape, 0, 0); ...   (group = layer index)
 *   mesh_zero_finalize(z);                                 (collective over dp)
 *   mesh_zero_init_param(z, "h0.attn.w", values); ...      (or write through mesh_zero_param)
 *   for each step:
 *     for each micro-batch: mesh_zero_micro_begin(z, last);  (optional with one micro-batch)
 *       forward (stage 3: mesh_zero_gather / wait_params / release per group)
 *       backward: write (+=) into mesh_zero_grad, then mesh_zero_grad_ready(z, name)
 *     mesh_zero_step(z, &info);
 * A pipeline stage, whose micro-batches interleave with the other stages', runs its step as one
 * micro-batch: gradients accumulated over the step and marked ready after their last backward
 * (or weight-gradient) pass, in stage 3 every group gathered once before the first forward pass
 * and released after the last backward; then each stage moves 2 Psi (d-1)/d per step
 * (docs/parallel.md, "ZeRO under a pipeline").
 *
 * Layout. Tensors are laid out by group (stable: registration order within a group), each at an
 * offset aligned to 64 bytes. Buckets are formed from the end of the layout, in backward order:
 * a bucket closes once it holds bucket_bytes (in stage 3 also where the group changes, so that a
 * group is a whole number of buckets), and is padded to a multiple of dp size x 64 bytes. Rank r
 * owns slice r of every bucket: its shard is the concatenation of those slices.
 *
 * Where each stage communicates on the dp communicator (d ranks, Psi = parameter bytes):
 *   stage 0  all-reduce of each bucket's gradients, at the last micro-batch before the step only
 *            (2 Psi (d-1)/d per step); every rank runs the optimizer on the whole buffer.
 *   stage 1  reduce-scatter of each bucket at the last micro-batch only, and after the optimizer
 *            an all-gather of the updated parameters (2 Psi (d-1)/d per step).
 *   stage 2  reduce-scatter of each bucket at every micro-batch, accumulated into the gradient
 *            shard; all-gather of the parameters after the optimizer (2 Psi (d-1)/d per step
 *            with one micro-batch, + Psi (d-1)/d per extra micro-batch).
 *   stage 3  all-gather of a group's parameters at each mesh_zero_gather (forward and backward:
 *            2 Psi (d-1)/d per micro-batch) and reduce-scatter of each bucket at every
 *            micro-batch (3 Psi (d-1)/d per step with one micro-batch); no all-gather after the
 *            optimizer: it updates the parameter shard.
 *   With overlap on, a bucket's reduction starts as soon as its last tensor is marked ready
 *   (buckets start in backward order, so every rank posts the same sequence); with overlap off,
 *   all of them start when the micro-batch ends. Either way at most max_inflight reductions
 *   are under way: the oldest is waited for before one more starts. The step also all-reduces
 *   one double (the squared gradient norm) over dp (stages 1-3) and over the model-parallel
 *   communicator.
 *   Communication advances inside the calls of this layer (grad_ready, gather, wait_params,
 *   progress, micro_begin/end, step): a model whose computation runs long between them calls
 *   mesh_zero_progress from time to time.
 *
 * Memory per rank (model states, bytes per parameter, mesh_zero_memory reports them by
 * category; padding adds to the parameter count):
 *             params  grads  master  optimizer (AdamW; SGD with momentum: 4, without: 0)
 *   bf16:  0   2       2      4       8                   = 16
 *          1   2       2      4/d     8/d                 = 4 + 12/d
 *          2   2       2/d    4/d     8/d                 = 2 + 14/d
 *          3   2/d     2/d    4/d     8/d                 = 16/d
 *   fp32:  0   4       4      -       8                   = 16
 *          1   4       4      -       8/d                 = 8 + 8/d
 *          2   4       4/d    -       8/d                 = 4 + 12/d
 *          3   4/d     4/d    -       8/d                 = 16/d
 * In stages 2 and 3 the full gradient buffer is staging: its pages are resident only from the
 * model's first write to a bucket until that bucket's reduce-scatter has been folded into the
 * shard, then given back (reading zero again); stage 3's gathered parameters likewise, from
 * mesh_zero_gather to mesh_zero_release. mesh_zero_memory counts what is resident of them as
 * buffers. Addresses never move, so pointers stay valid (see mesh_zero_param for what they hold).
 * Pages are given back with madvise(MADV_DONTNEED): a transport that keeps memory registered
 * between transfers (the verbs registration cache, MESH_IB_RCACHE_MAX > 0) would keep reading
 * the pages given back, so do not combine it with stages 2-3.
 *
 * Checkpoints: mesh_zero_save writes, per rank, the fp32 master weights and optimizer state of
 * its shard and the step count, and from dp rank 0 an index of tensor names, global offsets,
 * shapes, buckets, dp size and stage. mesh_zero_load reads it back at any dp size and stage (the
 * tensor set and shapes must match). The model-parallel rank (when mp_comm is set) is part of
 * the file names, so every rank of a grid can save into one directory.
 *
 * Not thread safe: one thread drives a mesh_zero_h. All calls return mesh_status_t; on failure
 * the message is mesh_comm_last_error(NULL) and, unless said otherwise, nothing has changed.
 */
#ifndef MESH_ZERO_H
#define MESH_ZERO_H

#include <mesh.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mesh_zero *mesh_zero_h;

typedef enum {
    MESH_ZERO_ADAMW = 0, /* decoupled weight decay and bias correction, as torch.optim.AdamW */
    MESH_ZERO_SGD        /* weight decay added to the gradient; momentum as torch.optim.SGD */
} mesh_zero_optimizer_t;

enum {
    MESH_ZERO_PARAM_FIELD_STAGE = 1u << 0,
    MESH_ZERO_PARAM_FIELD_OPTIMIZER = 1u << 1,
    MESH_ZERO_PARAM_FIELD_LR = 1u << 2,
    MESH_ZERO_PARAM_FIELD_BETAS = 1u << 3, /* beta1 and beta2 */
    MESH_ZERO_PARAM_FIELD_EPS = 1u << 4,
    MESH_ZERO_PARAM_FIELD_WEIGHT_DECAY = 1u << 5,
    MESH_ZERO_PARAM_FIELD_BIAS_CORRECTION = 1u << 6,
    MESH_ZERO_PARAM_FIELD_MOMENTUM = 1u << 7,
    MESH_ZERO_PARAM_FIELD_DTYPE = 1u << 8,
    MESH_ZERO_PARAM_FIELD_BUCKET_BYTES = 1u << 9,
    MESH_ZERO_PARAM_FIELD_OVERLAP = 1u << 10,
    MESH_ZERO_PARAM_FIELD_MAX_GRAD_NORM = 1u << 11,
    MESH_ZERO_PARAM_FIELD_MP_COMM = 1u << 12,
    MESH_ZERO_PARAM_FIELD_GRAD_SCALE = 1u << 13,
    MESH_ZERO_PARAM_FIELD_MAX_INFLIGHT = 1u << 14
};

typedef struct {
    uint64_t field_mask;
    int stage;                       /* 0 (plain data parallel) .. 3; default 0 */
    mesh_zero_optimizer_t optimizer; /* default MESH_ZERO_ADAMW */
    double lr;                       /* default 1e-3 */
    double beta1, beta2;             /* AdamW; default 0.9, 0.999 */
    double eps;                      /* AdamW; default 1e-8 */
    double weight_decay;             /* default 0 */
    int bias_correction;             /* AdamW; default 1 */
    double momentum;                 /* SGD; default 0 (no state) */
    mesh_dtype_t dtype;              /* parameters and gradients: MESH_FP32 (default), MESH_BF16 */
    size_t bucket_bytes;             /* gradient bucket size; default 4 MiB */
    int overlap;                     /* start a bucket's reduction when it is ready; default 1 */
    double max_grad_norm;            /* clip the global gradient norm to this; 0 (default): off */
    /* Model-parallel communicator (the grid's "tp-pp", "tp-cp-pp", ...): the squared gradient
     * norm is summed over it too, counting MESH_ZERO_REPLICATED and MESH_ZERO_SHARED tensors
     * once. Default NULL: none. */
    mesh_comm_h mp_comm;
    /* Factor applied to the summed gradients before clipping and the optimizer; default 1/d
     * (the average over data-parallel ranks). Scale the loss by 1/micro-batches in the model. */
    double grad_scale;
    /* Gradient reductions in flight at once: before another bucket's reduction starts, the
     * oldest is waited for once this many are under way, so that the collectives' receive
     * scratch (one window per reduction) and, in stages 2-3, the staging not yet folded stay
     * bounded whatever the timing. Default 2 (one on the wire while the next is posted). */
    int max_inflight;
} mesh_zero_params_t;

/* Flags of mesh_zero_add: how the tensor is held across the model-parallel communicator, which
 * decides how it counts in the global gradient norm. A name identifies one tensor of the whole
 * model: the same name on two ranks of mp_comm means copies (REPLICATED, SHARED) or parts. */
enum {
    /* each rank holds a different part (or the only copy): counted on every rank */
    MESH_ZERO_PARTITIONED = 0,
    /* identical on every rank of mp_comm that registers this name (a layernorm weight under
     * tp): counted once, on the lowest such rank (finalize exchanges the names over mp_comm) */
    MESH_ZERO_REPLICATED = 1u << 0,
    /* one tensor held by two pipeline stages (a tied embedding on the first and last stage, even
     * when each tp rank holds a part of it): counted once, half on each; with REPLICATED too
     * (copies on every tp rank as well), once on the lowest rank holding it. The model sums the
     * two copies' gradients itself (over its pipeline group) before marking them ready. */
    MESH_ZERO_SHARED = 1u << 1,
    /* no weight decay (biases, norms) */
    MESH_ZERO_NO_DECAY = 1u << 2
};

#define MESH_ZERO_MAX_DIMS 8
#define MESH_ZERO_MAX_NAME 200

/* Not collective; dp_comm and mp_comm must outlive the handle. */
MESH_API mesh_status_t mesh_zero_create(mesh_comm_h dp_comm, const mesh_zero_params_t *params,
                                        mesh_zero_h *z);

/* Registers a tensor of numel elements. shape (ndim <= MESH_ZERO_MAX_DIMS dimensions whose
 * product is numel; NULL/0: one dimension) is recorded in checkpoints and checked when loading.
 * group >= 0 is the layer index: the unit of stage-3 gathering; the layout and the buckets follow
 * the group order. Names: 1..MESH_ZERO_MAX_NAME characters, no white space, unique. */
MESH_API mesh_status_t mesh_zero_add(mesh_zero_h z, const char *name, size_t numel, int ndim,
                                     const size_t *shape, unsigned flags, int group);

/* Collective over dp_comm (and mp_comm when set): lays out the buffers, forms the buckets, and
 * checks that every dp rank registered the same tensors. Parameters start at zero. */
MESH_API mesh_status_t mesh_zero_finalize(mesh_zero_h z);

/* Sets a tensor's parameters and fp32 master weights from numel floats (local; every dp rank
 * passes the same values). Any stage. Parameters written through mesh_zero_param instead
 * (stages 0-2) are taken as the master weights at the first step. */
MESH_API mesh_status_t mesh_zero_init_param(mesh_zero_h z, const char *name, const float *values);

/*
 * Address of a tensor's parameters / gradients (in the parameter dtype), after finalize.
 * Addresses never change. Parameters: stages 0-2 always valid; stage 3 between
 * mesh_zero_wait_params and mesh_zero_release of its group (otherwise MESH_ERR_INVALID_ARG).
 * Gradients: the model adds (+=) its gradient over the micro-batches of a step and must not
 * touch it after marking it ready in a micro-batch; they read zero at the start of every step
 * (stages 0-1) or micro-batch (stages 2-3).
 */
MESH_API mesh_status_t mesh_zero_param(mesh_zero_h z, const char *name, void **ptr);
MESH_API mesh_status_t mesh_zero_grad(mesh_zero_h z, const char *name, void **ptr);

/* Stage 3: starts the all-gather of a group's parameters (nonblocking; gather the next group
 * while computing this one), waits for it, and gives the full copy back. Gathers nest: a group
 * gathered twice is released twice. No-ops that return MESH_OK in stages 0-2. */
MESH_API mesh_status_t mesh_zero_gather(mesh_zero_h z, int group);
MESH_API mesh_status_t mesh_zero_wait_params(mesh_zero_h z, int group);
MESH_API mesh_status_t mesh_zero_release(mesh_zero_h z, int group);

/*
 * Micro-batches. mesh_zero_micro_begin(z, last) starts one (last: the last before the step);
 * without it every micro-batch is the last, which suits one micro-batch per step. It ends the
 * previous one and, in stages 2-3, waits for its reductions, so call it before the next
 * micro-batch writes gradients. mesh_zero_micro_end(z) ends the current micro-batch at once
 * (starting the reductions of tensors not marked ready); otherwise micro_begin or step end it.
 */
MESH_API mesh_status_t mesh_zero_micro_begin(mesh_zero_h z, int last);
MESH_API mesh_status_t mesh_zero_micro_end(mesh_zero_h z);

/* Marks a tensor's gradient complete for this micro-batch (once per tensor and micro-batch).
 * With overlap on, a bucket whose tensors are all ready starts its reduction, nonblocking, where
 * the stage communicates in this micro-batch. Tensors never marked are reduced when the
 * micro-batch ends. */
MESH_API mesh_status_t mesh_zero_grad_ready(mesh_zero_h z, const char *name);

/* Advances the reductions and gathers in flight. */
MESH_API mesh_status_t mesh_zero_progress(mesh_zero_h z);

/* Ends the current micro-batch and waits for its reductions: the gradients are then reduced
 * (stage 0: all of them; stages 1-3: this rank's shard) and mesh_zero_step only runs the
 * optimizer. For timing the communication apart from the optimizer; mesh_zero_step and
 * mesh_zero_micro_begin do it themselves. */
MESH_API mesh_status_t mesh_zero_wait_grads(mesh_zero_h z);

typedef struct {
    uint64_t field_mask; /* reserved: 0 */
    double grad_norm;    /* global gradient norm, before clipping */
    int clipped;         /* gradients were scaled by clip_coef < 1 */
    double clip_coef;    /* max_grad_norm / (norm + 1e-6), at most 1 */
    int64_t step;        /* optimizer steps done, this one included */
    double lr;
} mesh_zero_step_info_t;

/*
 * Collective over dp_comm (and mp_comm): ends the micro-batch, waits for the reductions,
 * computes the global gradient norm, clips, runs the optimizer on the local shard in fp32,
 * writes the parameters back (stages 1-2: all-gathered again; stage 3: the shard), and zeroes
 * the gradients. Every group must have been released (stage 3). info may be NULL.
 */
MESH_API mesh_status_t mesh_zero_step(mesh_zero_h z, mesh_zero_step_info_t *info);
/*
 * For a model whose tensors live in several instances reduced over different communicators
 * (dense tensors over dp, mixture-of-experts tensors over the expert data-parallel group), so
 * that all of them clip with the model's one global norm. mesh_zero_grad_sqnorm, collective like
 * mesh_zero_step, ends the micro-batch, waits for the reductions and sets *sq to the squared
 * norm mesh_zero_step would clip with; nothing else changes. The sum of the instances' squares
 * is the model's squared norm; mesh_zero_step_norm is mesh_zero_step with that norm given
 * (info->grad_norm returns it) instead of its own.
 */
MESH_API mesh_status_t mesh_zero_grad_sqnorm(mesh_zero_h z, double *sq);
MESH_API mesh_status_t mesh_zero_step_norm(mesh_zero_h z, double grad_norm,
                                           mesh_zero_step_info_t *info);
MESH_API mesh_status_t mesh_zero_set_lr(mesh_zero_h z, double lr);

typedef struct {
    uint64_t field_mask; /* reserved: 0 */
    /* bytes this rank holds, by category */
    size_t params;       /* stages 0-2: the full buffer; stage 3: the shard */
    size_t grads;        /* stages 0-1: the full buffer; stages 2-3: the shard */
    size_t master;       /* fp32 master weights; 0 with fp32 parameters (they are the master) */
    size_t optimizer;    /* AdamW m and v; SGD momentum */
    size_t buffers;      /* staging resident now (stages 2-3) and bookkeeping */
    size_t numel;        /* elements registered */
    size_t padded_numel; /* elements of the flat buffer, alignment and dp padding included */
    size_t shard_numel;  /* this rank's slice of it (padded_numel / d) */
    int master_is_params;
} mesh_zero_memory_t;

MESH_API mesh_status_t mesh_zero_memory(mesh_zero_h z, mesh_zero_memory_t *report);

/*
 * Collective over dp_comm (and mp_comm). Between steps only (no micro-batch in progress).
 * save: creates dir if needed; writes shard-mpR-dpr.bin per rank and index-mpR.txt from dp rank
 * 0 (R: rank in mp_comm, 0 without), each through a temporary file renamed when complete.
 * load: reads the index and the files this rank needs, validating everything (index syntax,
 * the same tensor names and shapes, every file present with its exact size and header) on every
 * rank before any state changes; one rank's failure fails every rank with its message (which
 * names the file and tensor). Then master weights, optimizer state and step count are replaced
 * and the parameters rebuilt from them.
 */
MESH_API mesh_status_t mesh_zero_save(mesh_zero_h z, const char *dir);
MESH_API mesh_status_t mesh_zero_load(mesh_zero_h z, const char *dir);

/* Frees everything (requests in flight are cancelled). Not collective. */
MESH_API void mesh_zero_destroy(mesh_zero_h z);

#ifdef __cplusplus
}
#endif
#endif /* MESH_ZERO_H */
