/* The planner's internals, shared by the files of parallel/plan. Public API only below. */
#ifndef MESH_PLAN_PLANNER_H
#define MESH_PLAN_PLANNER_H

#include <mesh/plan.h>

#include "../common.h"

/* The schedules the planner models, as bits of mesh_pp_kind_t (a zbv run is planned as zb1);
 * with pp = 1 a layout's schedule is MESH_PP_NONE. */
#define PLAN_SCHEDULES                                                                             \
    ((1u << MESH_PP_AFAB) | (1u << MESH_PP_1F1B) | (1u << MESH_PP_INTERLEAVED) |                   \
     (1u << MESH_PP_ZB1))

#define PLAN_GIB (1024.0 * 1024.0 * 1024.0)
#define PLAN_MIB (1024.0 * 1024.0)

/* What a CPU rank holds beside its model states, activations and buffers: the program, its
 * libraries (OpenBLAS's buffers), the transports, the communicators, the trainer's
 * temporaries. Measured: the peak resident memory of mesh-train's 12M-parameter model (6
 * layers, d_model 384, 8 heads, seq 128, vocab 4096, batch 8) on dp=8, ZeRO 1, two gradient
 * reductions in flight, less what the planner counts of it (the reductions' scratch included):
 * 28.6 MiB on average over the 8 ranks, 28.7 at most (docs/mesh-train.md). */
#define PLAN_CPU_RESERVE (29.0 * PLAN_MIB)

/* The receive scratch of one ring reduce-scatter in mesh (collectives/phases.h's window): the
 * segments of the blocks a rank receives, (n - 1) / n of the vector, at most this many bytes. */
#define PLAN_CPU_COLL_WINDOW (8.0 * PLAN_MIB)

/* Parameters of one model, by part; from layer moe_from on, every moe_interval-th layer is MoE
 * when experts > 0. */
typedef struct {
    double attn;   /* attention weights of one layer */
    double norms;  /* the norms of one layer */
    double mlp;    /* dense MLP of one layer */
    double expert; /* one routed expert */
    double shared; /* the shared experts of one MoE layer */
    double router; /* one MoE layer's router */
    double embed;  /* input embedding */
    double output; /* output layer (a copy of the embedding when tied) */
    int moe_from;  /* first MoE layer; layers when dense */
    double total, active;
} plan_counts_t;

/* model.c: defaults filled in (kv_heads, head_dim, ffn, ...); MESH_ERR_INVALID_ARG naming the
 * bad field. */
mesh_status_t plan_model_norm(const mesh_plan_model_t *in, mesh_plan_model_t *out);
/* Counts of a normalised model, scaled to model->params when it is given. */
void plan_model_counts(const mesh_plan_model_t *m, plan_counts_t *c);
static inline int plan_is_moe_layer(const mesh_plan_model_t *m, const plan_counts_t *c, int layer)
{
    int k = m->moe_interval > 1 ? m->moe_interval : 1;
    return m->experts > 0 && layer >= c->moe_from && (layer - c->moe_from) % k == k - 1;
}

/* cluster.c */
mesh_status_t plan_cluster_norm(const mesh_plan_cluster_t *in, mesh_plan_cluster_t *out);

/* Everything one search or evaluation needs, with the defaults filled in. */
typedef struct {
    mesh_plan_model_t m;
    plan_counts_t c;
    mesh_plan_cluster_t cl;
    mesh_plan_params_t p;
    double batch_tokens;
    long batch_seqs;
} plan_ctx_t;

/* Bytes of one element of the parameters, gradients, activations and messages: bf16's 2, or
 * 4 in fp32. */
static inline double plan_elem_bytes(const plan_ctx_t *x)
{
    return x->cl.precision == MESH_PLAN_PREC_FP32 ? 4.0 : 2.0;
}

/* evaluate.c */
mesh_status_t plan_ctx_init(plan_ctx_t *x, const mesh_plan_model_t *model,
                            const mesh_plan_cluster_t *cluster, const mesh_plan_params_t *params);
/* Nodes one group of n ranks at rank stride `stride` spans. */
int plan_group_nodes(const plan_ctx_t *x, int stride, int n);
/* Fills the derived fields of l (dp, etp, edp, micro_batches, vpp, sp) and checks that the
 * sizes divide the model, the world and the batch, that the layout keeps to the constraints
 * (fixed fields, limits, allowed choices), and with span == 0 that tp stays inside a node and
 * etp x ep inside one or over whole nodes. Returns the reject code and writes the reason to why. */
mesh_plan_reject_t plan_structure(const plan_ctx_t *x, mesh_plan_layout_t *l, int span, char *why,
                                  size_t len);
/* Layers per pipeline stage of l: layers / pp each with l->even, else plan_stage_split's. */
void plan_stage_counts(const plan_ctx_t *x, const mesh_plan_layout_t *l, int *counts);
/* Memory and time of a structurally valid layout; sets reject to MEMORY when it does not fit. */
void plan_eval(const plan_ctx_t *x, const mesh_plan_layout_t *l, mesh_plan_eval_t *out);

/* memory.c */
/* Layers per pipeline stage: contiguous runs, the last stage lighter by the work of the output
 * layer (w_last, in layers) and the extra layers on the stages before it. */
void plan_stage_split(int layers, int p, double w_last, int *counts);
/* Work of the output layer in units of an average layer (for plan_stage_split). */
double plan_output_weight(const plan_ctx_t *x);
/* Fills out->mem, mem_total, mem_limit, stage_layers_*, and reject/why when over memory. */
void plan_memory(const plan_ctx_t *x, const mesh_plan_layout_t *l, const int *stage_layers,
                 mesh_plan_eval_t *out);
/* Parameters a rank of stage `stage` holds: dense (sharded over dp x ep x cp by ZeRO) and
 * expert (over edp). */
void plan_stage_params(const plan_ctx_t *x, const mesh_plan_layout_t *l, const int *stage_layers,
                       int stage, double *dense, double *expert);

/* timing.c: expert dispatch across nodes (flat or hierarchical, the faster; 1 when
 * hierarchical) and the distinct nodes a token's experts hit. */
int plan_ep_span(const plan_ctx_t *x, const mesh_plan_layout_t *l, int nodes, double tokens,
                 double *seconds, double *bytes, int *calibrated);
double plan_ep_nodes_hit(int experts, int top_k, int nodes, int route_nodes);
/* timing.c: fills step, compute, bubble, comm_*, optimizer, tokens_per_s, mfu. */
void plan_time(const plan_ctx_t *x, const mesh_plan_layout_t *l, const int *stage_layers,
               mesh_plan_eval_t *out);

/* collcost.c: seconds of one collective on an axis (nccl-tests' S in bytes) from the
 * calibration when it has the axis (or one like it) and from the nominal figures otherwise;
 * *calibrated says which. */
double plan_coll_time(const plan_ctx_t *x, const char *axis, mesh_plan_op_t op, int n, int nodes,
                      double bytes, int *calibrated);
/* nccl-tests' bus bandwidth factor and the steps of a ring-like algorithm. */
double plan_busbw_factor(mesh_plan_op_t op, int n);
int plan_op_steps(mesh_plan_op_t op, int n);

/* calib.c, for collcost.c: seconds of op on an axis from the measurements: the axis itself
 * at its group size (interpolated), else its fit scaled to n ranks, else the fit of another
 * axis measured on the same side of the node boundary (inside one node or across nodes);
 * all-to-all, when not measured, takes all-gather's figures (same bus factor). Returns 0 when
 * nothing applies. */
int plan_calib_time(const mesh_plan_calib_t *c, const char *axis, mesh_plan_op_t op, int n,
                    int nodes, double bytes, double *seconds);

/* search.c, for explain.c: the best variant (zero, mbs, schedule, vpp, recompute) of the axes
 * of l with the fields in `pin` (MESH_PLAN_SET_*) fixed to l's values; 0 when none fits. */
int plan_best_variant(const plan_ctx_t *x, const mesh_plan_layout_t *l, unsigned pin,
                      mesh_plan_eval_t *out);

/* explain.c: the reasons for the best layout, as lines (mesh_plan_result_reason). */
typedef struct plan_lines {
    char **line;
    int n, cap;
} plan_lines_t;
void plan_lines_add(plan_lines_t *ls, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void plan_lines_free(plan_lines_t *ls);
struct plan_search_view {
    const plan_ctx_t *x;
    const mesh_plan_eval_t *fit; /* best variant of each fitting axis layout, ranked */
    int nfit;
    const mesh_plan_eval_t *rej; /* rejected axis layouts, closest variant */
    int nrej;
    int forced_span;
};
void plan_explain(const struct plan_search_view *v, plan_lines_t *out);

/* "GPUs", or "ranks" for CPU clusters, in the reasons. */
#define PLAN_UNIT(x) ((x)->cl.cpu ? "ranks" : "GPUs")

/* Short text of the axis sizes: "tp=8 cp=1 ep=1 etp=8 dp=16 pp=8". */
void plan_axes_text(const mesh_plan_layout_t *l, int moe, char *buf, size_t len);

#endif
