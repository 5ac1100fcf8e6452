/*
 * mesh planner: from a model, a cluster and a global batch to ranked 5D layouts (tp, cp, ep,
 * etp, dp, pp, ZeRO stage, micro-batches, pipeline schedule, recomputation), each with its
 * memory per GPU by category and its predicted step time per axis. Pure computation: nothing
 * here communicates. tools/mesh-plan prints what these functions return; a trainer calls
 * mesh_plan_best() to take its layout from the planner.
 *
 * Memory follows the usual formulas: model states per parameter by ZeRO stage with bf16
 * parameters and gradients and an fp32 master copy plus Adam m and v (DDP 16 bytes, ZeRO-1
 * 4 + 12/d, ZeRO-2 2 + 14/d, ZeRO-3 16/d); activations per layer from Korthikanti et al. 2022
 * (sbh(34 + 5as/h) for GPT without parallelism, divided by t where tensor and sequence
 * parallelism split them, with selective or full recomputation); the activations a pipeline
 * stage holds per schedule. Time: flops at the cluster's peak times an efficiency, each axis's
 * collectives at its latency and bus bandwidth (nominal, or measured by mesh-bench and read by
 * mesh_plan_calib_load), and the pipeline bubble. The layers are split over the stages so that
 * the slowest, whose work counts the output layer on the last, is as fast as it can be, the
 * first stage (embedding) and then the last taking the fewest layers that allows; an ep group
 * may span whole nodes, its dispatch flat or hierarchical (once per node), the faster.
 */
#ifndef MESH_PLAN_H
#define MESH_PLAN_H

#include <mesh.h>
#include <mesh/pipeline.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- model */

/* A decoder-only transformer, dense or mixture of experts. Zero fields take the default given. */
typedef struct {
    char name[48];
    double params; /* total parameters; 0: counted from the dimensions (else they are
                      scaled to it) */
    int layers;
    int hidden;
    int heads;
    int kv_heads; /* key/value heads (GQA); 0: heads */
    int head_dim; /* 0: hidden / heads */
    int ffn;      /* MLP hidden size of a dense layer; 0: 4 x hidden */
    int gated;    /* 1: gated MLP (SwiGLU, three matrices); 0: two matrices (GELU) */
    int vocab;
    int seq;            /* training sequence length */
    int tied;           /* input embedding and output layer share their weights */
    int dropout;        /* dropout masks are stored (GPT-3 style); 0: no dropout */
    double attn_params; /* attention weights of one layer; 0: from heads, kv_heads, head_dim */
    /* mixture of experts: experts == 0 means dense */
    int experts;         /* routed experts per MoE layer */
    int top_k;           /* experts each token goes to */
    int expert_ffn;      /* MLP hidden size of one expert */
    int shared_experts;  /* experts every token goes through (DeepSeek), of expert_ffn each */
    int dense_layers;    /* the first layers that keep a dense MLP */
    int moe_interval;    /* after them, every moe_interval-th layer is MoE (layer i when
                            (i - dense_layers) % moe_interval == moe_interval - 1; GShard and
                            Switch: 2); 0: 1, every one */
    int route_nodes;     /* node-limited routing: the experts of a token lie on at most this many
                            nodes when ep spans nodes (DeepSeek-V3: 4); 0: no limit */
    double batch_tokens; /* the published global batch in tokens (presets); 0: none */
    const char *source;  /* where the numbers come from (presets) */
} mesh_plan_model_t;

/* Presets: published architectures of public models (mesh-plan --list-models). */
MESH_API int mesh_plan_model_preset_count(void);
MESH_API const mesh_plan_model_t *mesh_plan_model_preset_at(int i);
/* Copies the preset named (case-insensitive; "llama3-405b", ...). MESH_ERR_NOT_FOUND naming it. */
MESH_API mesh_status_t mesh_plan_model_preset(const char *name, mesh_plan_model_t *out);
/* Checks a model (MESH_ERR_INVALID_ARG naming the field) and counts its parameters: all of
 * them, and those one token goes through (active; the same for a dense model). */
MESH_API mesh_status_t mesh_plan_model_count(const mesh_plan_model_t *model, double *total,
                                             double *active);

/* ---------------------------------------------------------------- cluster */

typedef struct mesh_plan_calib mesh_plan_calib_t;

/* The numbers a rank trains in. BF16: bf16 parameters, gradients and activations, an fp32
 * master copy beside Adam's m and v (16 bytes a parameter). FP32: fp32 throughout, the
 * parameters being their own master (16 bytes: parameters, gradients, m and v); activations
 * take twice the bytes of bf16's. */
typedef enum {
    MESH_PLAN_PREC_BF16 = 0,
    MESH_PLAN_PREC_FP32,
    MESH_PLAN_PREC_COUNT
} mesh_plan_precision_t;

typedef struct {
    char name[48];
    int gpus; /* ranks in all (the world size) */
    int gpus_per_node;
    double gpu_mem;      /* bytes per rank */
    double flops;        /* peak dense bf16 FLOP/s per rank */
    double efficiency;   /* fraction of that peak the layers' matmuls reach; 0: 0.6 */
    double mem_bw;       /* device memory bytes/s: matmuls whose weights outweigh their work
                            (experts with few tokens) and the optimizer step; 0: not counted */
    double intra_bw;     /* bus bandwidth (nccl-tests busbw) per rank inside a node, bytes/s */
    double inter_bw;     /* the same between nodes, per rank */
    double intra_lat;    /* seconds per step of a collective inside a node; 0: 2 us (CPU 5) */
    double inter_lat;    /* the same between nodes; 0: 6 us (CPU 30) */
    double reserve;      /* bytes per rank kept aside: context, workspaces, fragmentation;
                            0: 2 GiB (CPU ranks: the process itself, as measured of
                            mesh-train, docs/mesh-plan.md) */
    double overlap_cost; /* compute a collective hidden under it still costs, per second hidden
                            (the SMs or cores it takes); 0: 0.15 on GPUs, 1 on CPU ranks (they
                            drive communication on the cores that compute); < 0: none */
    int cpu;             /* the ranks are CPU processes */
    const mesh_plan_calib_t *calib;  /* measured per-axis figures that replace the nominal ones */
    const char *source;              /* where the nominal figures come from (presets) */
    mesh_plan_precision_t precision; /* what the ranks train in: bf16 with an fp32 master (GPUs,
                                        the default), or fp32 throughout (the cpu preset) */
    /* gradient bucket of the data-parallel reductions; 0: 40M gradients on GPUs (Megatron-Core's
     * bucket), 4 MiB on CPU ranks (mesh's ZeRO) */
    double bucket_bytes;
    /* bucket reductions under way at once (mesh_zero_params_t's max_inflight); 0: 2 */
    int inflight;
    /* receive scratch one reduction holds beyond its buffers, at most; 0: none on GPUs (the
     * library's channel buffers are in the reserve), 8 MiB on CPU ranks (mesh's ring
     * reduce-scatter window); < 0: none */
    double coll_window;
} mesh_plan_cluster_t;

/* Presets by GPU kind ("a100-80g", "h100", "h800", "cpu", ...) with gpus ranks; gpus <= 0
 * keeps one node. MESH_ERR_NOT_FOUND naming an unknown one. */
MESH_API int mesh_plan_cluster_preset_count(void);
MESH_API const mesh_plan_cluster_t *mesh_plan_cluster_preset_at(int i);
MESH_API mesh_status_t mesh_plan_cluster_preset(const char *name, int gpus,
                                                mesh_plan_cluster_t *out);
/* MESH_ERR_INVALID_ARG naming the first bad field; filled (may be NULL) gets the cluster with
 * its defaults in place of zeros. */
MESH_API mesh_status_t mesh_plan_cluster_check(const mesh_plan_cluster_t *cluster,
                                               mesh_plan_cluster_t *filled);

/* ---------------------------------------------------------------- calibration */

typedef enum {
    MESH_PLAN_OP_ALLREDUCE = 0,
    MESH_PLAN_OP_ALLGATHER,
    MESH_PLAN_OP_REDUCE_SCATTER,
    MESH_PLAN_OP_ALLTOALL,
    MESH_PLAN_OP_SENDRECV,
    MESH_PLAN_OP_COUNT
} mesh_plan_op_t;

/* What one (axis, op, group size, nodes) of a mesh-bench CSV became: its measured points and an
 * alpha-beta fit, t = alpha + S x factor / busbw (factor: nccl-tests' busbw factor). */
typedef struct {
    char axis[32]; /* mesh-bench's axis name: "tp", "dp-cp", "world" */
    mesh_plan_op_t op;
    int nranks, nodes;
    int npoints;
    double min_bytes, max_bytes;
    double alpha;   /* seconds */
    double busbw;   /* bytes/s */
    double fit_err; /* largest relative error of the fit at the measured points */
    char mem[16];   /* the buffers measured: "host", or a device table ("cuda", "emu") */
} mesh_plan_calib_entry_t;

/* Reads `mesh-bench --mesh ... --axes all --csv FILE` output (columns op, nranks, nodes, bytes,
 * time_us, in_place, axis, mem, ...). Out-of-place rows are used (in-place ones where a group
 * has no other); repeated sizes take their median. The mem column (host without it) says which
 * memory the run measured; one calibration is of one memory. MESH_ERR_INVALID_ARG naming the
 * line of a malformed row or of a row of another memory than the first; MESH_ERR_NOT_FOUND
 * when no row is usable. */
MESH_API mesh_status_t mesh_plan_calib_parse(const char *csv, mesh_plan_calib_t **out);
MESH_API mesh_status_t mesh_plan_calib_load(const char *path, mesh_plan_calib_t **out);
MESH_API void mesh_plan_calib_free(mesh_plan_calib_t *calib);
MESH_API int mesh_plan_calib_count(const mesh_plan_calib_t *calib);
MESH_API mesh_status_t mesh_plan_calib_entry(const mesh_plan_calib_t *calib, int i,
                                             mesh_plan_calib_entry_t *out);
/* The measured points of entry i, ascending in size (median seconds per size): fills up to max
 * of them and returns how many the entry has (-1 for a bad index). */
MESH_API int mesh_plan_calib_points(const mesh_plan_calib_t *calib, int i, double *bytes,
                                    double *seconds, int max);
/* Predicted seconds of op over bytes (nccl-tests' S) on the axis measured with nranks ranks on
 * nodes nodes: interpolated between measured sizes, the fit's slope outside them.
 * MESH_ERR_NOT_FOUND when that axis and op were not measured at that size of group. */
MESH_API mesh_status_t mesh_plan_calib_predict(const mesh_plan_calib_t *calib, const char *axis,
                                               mesh_plan_op_t op, int nranks, int nodes,
                                               double bytes, double *seconds);
MESH_API const char *mesh_plan_op_name(mesh_plan_op_t op);

/* ---------------------------------------------------------------- layouts */

typedef enum {
    MESH_PLAN_RECOMPUTE_NONE = 0,
    MESH_PLAN_RECOMPUTE_SELECTIVE, /* attention scores recomputed (as flash attention does) */
    MESH_PLAN_RECOMPUTE_FULL,      /* each layer's input kept, the layer run again */
    MESH_PLAN_RECOMPUTE_COUNT
} mesh_plan_recompute_t;

/* One layout. tp x cp x ep x dp x pp is the world size (mesh_grid_params_t's sizes, order
 * tp-cp-ep-dp-pp); the expert layers use etp x ep x edp x pp (mesh_grid's expert_tp). The
 * dense layers are replicated over dp x ep, which also splits the batch; their ZeRO shards
 * span dp x ep x cp, the experts' edp. */
typedef struct {
    int tp, cp, ep, etp, dp, pp;
    int edp;
    int zero;                /* ZeRO stage 0..3 */
    int mbs;                 /* sequences per micro-batch */
    int micro_batches;       /* per pipeline per step */
    mesh_pp_kind_t schedule; /* afab, 1f1b, interleaved or zb1 (mesh/pipeline.h); none: pp = 1 */
    int vpp;                 /* model chunks per stage (interleaved); 1 otherwise */
    mesh_plan_recompute_t recompute;
    int sp;   /* sequence parallelism: derived, on with tp > 1 unless params->no_sp */
    int even; /* every stage holds layers / pp layers (Megatron's default split, mesh-train's);
                 0: the planner's balanced split (the first and last stages lighter) */
} mesh_plan_layout_t;

/* Which fields of a layout a spec named (mesh_plan_layout_parse). */
enum {
    MESH_PLAN_SET_TP = 1u << 0,
    MESH_PLAN_SET_CP = 1u << 1,
    MESH_PLAN_SET_EP = 1u << 2,
    MESH_PLAN_SET_ETP = 1u << 3,
    MESH_PLAN_SET_DP = 1u << 4,
    MESH_PLAN_SET_PP = 1u << 5,
    MESH_PLAN_SET_ZERO = 1u << 6,
    MESH_PLAN_SET_MBS = 1u << 7,
    MESH_PLAN_SET_SCHEDULE = 1u << 8,
    MESH_PLAN_SET_VPP = 1u << 9,
    MESH_PLAN_SET_RECOMPUTE = 1u << 10,
    MESH_PLAN_SET_SP = 1u << 11,
    MESH_PLAN_SET_EVEN = 1u << 12
};

/* "tp=8,pp=8,zero=1,mbs=1,schedule=interleaved,vpp=2,recompute=selective,sp=1,even=1": the
 * fields named go into *layout and *set (MESH_PLAN_SET_*); MESH_ERR_INVALID_ARG naming a bad
 * one. */
MESH_API mesh_status_t mesh_plan_layout_parse(const char *spec, mesh_plan_layout_t *layout,
                                              unsigned *set);
/* The same form back; returns what snprintf returns. */
MESH_API int mesh_plan_layout_format(const mesh_plan_layout_t *layout, char *buf, size_t len);
MESH_API const char *mesh_plan_recompute_name(mesh_plan_recompute_t r);

/* ---------------------------------------------------------------- the formulas */

/* Model-state bytes per parameter with ZeRO stage zero (0: DDP) sharded over d ranks, bf16
 * with an fp32 master. */
MESH_API void mesh_plan_state_bytes(int zero, int d, double *params, double *grads, double *optim);
/* The same in a precision, and at the peak of a step under a pipeline (pipelined: pp > 1),
 * where stages 2 and 3 reduce the gradients and gather the parameters once per step: stage 2
 * holds the whole gradient beside its shard through the step, stage 3 also the whole
 * parameters beside their shard (fp32: 8 + 12/d and 8 + 16/d; bf16: 4 + 14/d and 4 + 16/d;
 * between steps they shard again). */
MESH_API void mesh_plan_state_bytes_at(int zero, int d, mesh_plan_precision_t precision,
                                       int pipelined, double *params, double *grads, double *optim);
/* Activation bytes one layer keeps for the backward pass, per micro-batch of mbs sequences,
 * per rank of tp (with sp: sequence parallel) and cp; moe selects an MoE layer's MLP with
 * etp. Dense GPT with dropout: sbh(34 + 5as/h) at tp = 1, sbh(10 + 24/t + 5as/(ht)) with TP,
 * sbh(34 + 5as/h)/t with TP and SP, sbh 34/t selective, 2sbh/t full (Korthikanti et al.). */
MESH_API double mesh_plan_act_layer(const mesh_plan_model_t *model, int mbs, int tp, int cp, int sp,
                                    mesh_plan_recompute_t recompute, int moe, int etp);
/* Micro-batches whose activations pipeline stage `stage` of p holds at its peak (in units of
 * the activations of all its layers): 1F1B min(p - stage, m), ZB-H1 min(p, m) (until their
 * deferred W), AFAB m, interleaved with v chunks (2(p - stage - 1) + (v - 1)p + 1)/v, at most
 * m: the peaks of mesh's own schedules (mesh_pp_check_rank, tests/parallel/test_pp_sched). */
MESH_API double mesh_plan_inflight(mesh_pp_kind_t s, int p, int m, int v, int stage);
/* Idle time of a step over its ideal time (p - 1)/m for AFAB and 1F1B, (p - 1)/(v m)
 * interleaved, a third of 1F1B's for ZB-H1 (its bubble is (p-1)(F+B-W), F = B = W). */
MESH_API double mesh_plan_bubble(mesh_pp_kind_t s, int p, int m, int v);

/* ---------------------------------------------------------------- evaluation and search */

typedef enum {
    MESH_PLAN_MEM_PARAMS = 0,
    MESH_PLAN_MEM_GRADS,
    MESH_PLAN_MEM_OPTIM,
    MESH_PLAN_MEM_ACT,
    MESH_PLAN_MEM_BUFFERS,
    MESH_PLAN_MEM_COUNT
} mesh_plan_mem_t;

/* Why a layout was turned down. */
typedef enum {
    MESH_PLAN_OK = 0,
    MESH_PLAN_REJ_MEMORY,  /* exceeds the memory of a rank */
    MESH_PLAN_REJ_INVALID, /* sizes that do not divide the model, the world or the batch, or
                              knobs that cannot go together */
    MESH_PLAN_REJ_SPAN,    /* tp or etp x ep spans nodes */
    MESH_PLAN_REJ_COUNT
} mesh_plan_reject_t;

typedef struct {
    mesh_plan_layout_t layout;
    mesh_plan_reject_t reject;       /* MESH_PLAN_OK: it can run and fits */
    char why[256];                   /* the reason when rejected */
    double mem[MESH_PLAN_MEM_COUNT]; /* bytes per rank on its fullest pipeline stage */
    double mem_total, mem_limit;
    int stage_layers_max, stage_layers_min;
    int stage_layers_first, stage_layers_last; /* the first stage also holds the embedding, the
                                                  last the output layer and the loss */
    double head_layers;     /* the output layer's work in layers (the last stage's extra) */
    double stage_imbalance; /* the slowest stage's work over the average stage's, - 1 */
    int ep_hier;            /* ep spans nodes and its tokens cross them once per node
                               (hierarchical dispatch), not once per expert */
    double step;            /* predicted seconds per optimizer step */
    double compute;         /* seconds of compute on the slowest stage (recomputation
                               included) */
    double bubble;          /* seconds idle in the pipeline's fill and drain */
    double bubble_fraction; /* bubble / step */
    double optimizer;       /* seconds of the optimizer step */
    double comm_bytes[MESH_AXIS_COUNT];   /* bytes a rank sends per step, per axis */
    double comm_time[MESH_AXIS_COUNT];    /* seconds per step per axis, all of it */
    double comm_exposed[MESH_AXIS_COUNT]; /* the part not hidden under compute */
    int axis_nodes[MESH_AXIS_COUNT];      /* nodes one group of the axis spans (ep: etp x ep) */
    unsigned calibrated;                  /* (1u << axis) of axes timed from calibration */
    double tokens_per_s;
    double mfu; /* model flops (6 x active params x tokens + causal attention)
                   over the peak of all ranks */
} mesh_plan_eval_t;

enum {
    MESH_PLAN_PARAM_FIELD_BATCH = 1u << 0,
    MESH_PLAN_PARAM_FIELD_FIX = 1u << 1,
    MESH_PLAN_PARAM_FIELD_LIMITS = 1u << 2,
    MESH_PLAN_PARAM_FIELD_CHOICES = 1u << 3,
    MESH_PLAN_PARAM_FIELD_TOP = 1u << 4,
    MESH_PLAN_PARAM_FIELD_SPAN = 1u << 5,
    MESH_PLAN_PARAM_FIELD_CLUSTER = 1u << 6
};

typedef struct {
    uint64_t field_mask;
    double batch_tokens;    /* BATCH: global batch in tokens; default the model's */
    mesh_plan_layout_t fix; /* FIX: fields named in fix_set are fixed */
    unsigned fix_set;       /* MESH_PLAN_SET_* */
    int max_tp, max_cp, max_ep, max_pp, max_mbs; /* LIMITS: 0 = no limit (mbs: 16) */
    unsigned zero_mask;                          /* CHOICES: (1u << stage) allowed; 0: all */
    unsigned schedule_mask;  /* (1u << mesh_pp_kind_t) of afab, 1f1b, interleaved, zb1; 0: all */
    unsigned recompute_mask; /* (1u << mesh_plan_recompute_t); 0: all */
    int no_sp;               /* no sequence parallelism */
    int top;                 /* TOP: distinct axis layouts kept; default 10 */
    int allow_span;          /* SPAN: tp (and etp x ep in part of a node) may span nodes
                                even when nothing forces it; ep spans whole nodes freely */
    const mesh_plan_cluster_t *cluster; /* CLUSTER: mesh_plan_best's machine (else CPU ranks) */
} mesh_plan_params_t;

/* One layout on a cluster: its memory and time, or why it cannot run or does not fit
 * (out->reject, out->why; the status is still MESH_OK). Fields of the layout left 0 (dp, etp,
 * edp, micro_batches, vpp) are derived. MESH_ERR_INVALID_ARG for a bad model or cluster. */
MESH_API mesh_status_t mesh_plan_evaluate(const mesh_plan_model_t *model,
                                          const mesh_plan_cluster_t *cluster,
                                          const mesh_plan_params_t *params,
                                          const mesh_plan_layout_t *layout, mesh_plan_eval_t *out);

typedef struct mesh_plan_result *mesh_plan_result_h;

/* Every layout the constraints allow, ranked by predicted step time: the best variant (ZeRO
 * stage, micro-batch size, schedule, recomputation) of each distinct tp/cp/ep/etp/dp/pp, and
 * those rejected with the reason. When nothing fits with tp and ep inside a node, layouts
 * that span nodes are tried, and said to be forced. The result may hold no layout (nothing
 * fits): mesh_plan_result_count() is then 0 and the rejected ones say why. */
MESH_API mesh_status_t mesh_plan_search(const mesh_plan_model_t *model,
                                        const mesh_plan_cluster_t *cluster,
                                        const mesh_plan_params_t *params, mesh_plan_result_h *out);
MESH_API int mesh_plan_result_count(mesh_plan_result_h r);
MESH_API const mesh_plan_eval_t *mesh_plan_result_layout(mesh_plan_result_h r, int i);
/* Distinct axis layouts turned down, the most promising first (fastest predicted, ignoring
 * memory); each is its closest variant with the reason. */
MESH_API int mesh_plan_result_rejected_count(mesh_plan_result_h r);
MESH_API const mesh_plan_eval_t *mesh_plan_result_rejected(mesh_plan_result_h r, int i);
/* Distinct axis layouts and variants looked at, and how many axis layouts each reason
 * turned down. */
MESH_API void mesh_plan_result_stats(mesh_plan_result_h r, long *axis_layouts, long *variants,
                                     long rejected[MESH_PLAN_REJ_COUNT]);
/* Lines explaining the best layout: the rule that placed each axis and knob, and how the
 * nearest alternative compares (i = 0, 1, ... until NULL). */
MESH_API const char *mesh_plan_result_reason(mesh_plan_result_h r, int i);
/* 1 when nothing fitted with tp and ep inside a node and the layouts span nodes. */
MESH_API int mesh_plan_result_forced_span(mesh_plan_result_h r);
MESH_API void mesh_plan_result_free(mesh_plan_result_h r);

/*
 * For a trainer: the best layout of model for world ranks, ranks_per_node per node. The
 * machine is params->cluster when given (its gpus and gpus_per_node are replaced by world and
 * ranks_per_node), else CPU ranks with nominal figures; the batch is params->batch_tokens,
 * else the model's, else one sequence per rank. MESH_ERR_NOT_FOUND with the reason when
 * nothing fits.
 */
MESH_API mesh_status_t mesh_plan_best(const mesh_plan_model_t *model, int world, int ranks_per_node,
                                      const mesh_plan_params_t *params, mesh_plan_layout_t *out);

#ifdef __cplusplus
}
#endif

#endif
