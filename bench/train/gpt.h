/*
 * The GPT of mesh-train: token and position embeddings, L blocks (layernorm, causal multi-head
 * self-attention, layernorm, GELU MLP, residuals), a final layernorm and an LM head tied to the
 * token embedding, trained with cross-entropy. Pure math over flat fp32 arrays: nothing here
 * calls mesh. What is split, and the communication at the edges of split regions, come from
 * the hooks (gpt_ops_t) that the layout fills in; with no hooks the model is the single-process
 * reference.
 *
 * Shapes are row-major, weights [out, in] as in GPT-2. With tp ranks the model holds its shard:
 * vocab / tp rows of the token table (which is also the head), heads / tp heads (their q, k, v
 * rows of the qkv weight, their columns of the attention projection), 4C / tp MLP features;
 * layernorms, position embeddings and the biases of row-parallel layers are whole.
 *
 * Each block is an attention slot and an MLP slot filled by its layer spec (gpt_layers_t). A
 * mixture of experts (moe.c) fills the MLP slot of the blocks chosen by moe_layers: a router
 * (linear d_model -> E, no bias, softmax, top-k) and E expert MLPs (fc, GELU, projection, no
 * biases). With ep ranks the model holds E / ep experts, each split across tp like the dense MLP.
 */
#ifndef MESH_TRAIN_GPT_H
#define MESH_TRAIN_GPT_H

#include <stddef.h>
#include <stdint.h>

/* fp32; the gradient check builds the same sources in double (GPT_DOUBLE). */
#ifdef GPT_DOUBLE
typedef double gpt_real;
#define GPT_GEMM cblas_dgemm
#define GPT_EXP  exp
#define GPT_TANH tanh
#define GPT_SQRT sqrt
#else
typedef float gpt_real;
#define GPT_GEMM cblas_sgemm
#define GPT_EXP  expf
#define GPT_TANH tanhf
#define GPT_SQRT sqrtf
#endif

struct gpt_layer;
typedef struct gpt_layers gpt_layers_t;

typedef struct gpt_config {
    int vocab, seq, d_model, layers, heads; /* the full model */
    int tp, tp_rank;                        /* this rank's shard (1, 0: the whole model) */
    int sequence_parallel;                  /* activations between tp regions split along seq */
    int cp, cp_rank; /* context parallelism: positions [cp_rank seq / cp, ...) (1, 0: all) */
    /* mixture of experts: experts 0 means none */
    int experts, topk, expert_ffn; /* E, k, each expert's hidden width (0: 4 d_model) */
    uint64_t moe_layers;           /* bit l: block l is a mixture of experts (l < 64) */
    double capacity;               /* capacity factor of the one-process routing; 0: dropless */
    int capacity_groups;           /* its tokens in that many equal parts, each with its capacity */
    int ep, ep_rank;               /* this rank holds experts [ep_rank E / ep, +E / ep) */
    const int *pos; /* [seq / cp] this cp rank's positions in local order; NULL: those above */
    /* each block's layers; NULL: gpt_layer_spec */
    gpt_layers_t (*spec)(const struct gpt_config *cfg, int layer);
} gpt_config_t;

/* How a tensor is split across tp. */
typedef enum {
    GPT_WHOLE = 0, /* every tp rank holds it */
    GPT_ROWS,      /* output features of a column-parallel weight (or bias) */
    GPT_ROWS_QKV,  /* the same within each of q, k and v */
    GPT_COLS,      /* input features of a row-parallel weight */
    GPT_VOCAB,     /* rows of the token table: a vocabulary range */
    /* expert tensors, split across ep (the rank's experts) whatever tp is, and inside each
     * expert across tp: */
    GPT_EXPERT_ROWS, /* [E x F, C]: F rows per expert, split as GPT_ROWS */
    GPT_EXPERT_COLS  /* [E x C, F]: split as GPT_COLS */
} gpt_split_t;

/* One parameter tensor: name, full shape and split. Group: 0 embeddings (and the tied head),
 * 1..L blocks, L + 1 final layernorm. */
typedef struct {
    char name[32];
    int rows, cols; /* full shape; vectors have rows = 1 */
    gpt_split_t split;
    int group;
    size_t numel;     /* this rank's elements */
    size_t offset;    /* in a flat local buffer laid out in table order */
    size_t field_off; /* its pointer's place in gpt_group_t */
    int expert;       /* an expert's tensor: not replicated across ep */
} gpt_tensor_t;

/* Pointers of a group's tensors (parameters or gradients), local shapes. */
typedef struct {
    gpt_real *wte, *wpe; /* group 0 */
    gpt_real *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
        *fcprojb;          /* a block */
    gpt_real *lnfw, *lnfb; /* group L + 1 */
    /* a mixture-of-experts block, instead of fc*: [E, C], [El Fl, C], [El C, Fl] */
    gpt_real *routerw, *efcw, *eprojw;
} gpt_group_t;

enum { GPT_FWD = 0, GPT_BWD = 1 };

struct gpt;

/*
 * The layout's hooks. Every hook returns 0 or -1 (then the model stops and returns -1). Region
 * hooks move activations across the edge of a tp region ([b, seq, width] inside, the local
 * positions of them outside, see mesh/tensor.h); NULL hooks mean one process (identity).
 */
typedef struct {
    void *ctx;
    /* parameters (and in the backward pass gradients) of a group, valid until release */
    int (*acquire)(void *ctx, int group, int phase, gpt_group_t *p, gpt_group_t *g);
    int (*release)(void *ctx, int group, int phase);
    /* the group that will be acquired next: its parameters may be fetched meanwhile */
    int (*prefetch)(void *ctx, int group);
    int (*enter_fwd)(void *ctx, const gpt_real *outside, gpt_real *inside, int b, int width);
    int (*enter_bwd)(void *ctx, const gpt_real *dinside, gpt_real *doutside, int b, int width);
    int (*exit_fwd)(void *ctx, const gpt_real *inside, gpt_real *outside, int b, int width);
    int (*exit_bwd)(void *ctx, const gpt_real *doutside, gpt_real *dinside, int b, int width);
    /* vocabulary-parallel embedding (into the outside tensor) and loss; NULL: unsplit */
    int (*embed_fwd)(void *ctx, const int32_t *tokens, const gpt_real *wte, gpt_real *out, int b);
    int (*embed_bwd)(void *ctx, const int32_t *tokens, const gpt_real *dout, gpt_real *dwte, int b);
    int (*loss_fwd)(void *ctx, const gpt_real *logits, const int32_t *targets, gpt_real *loss,
                    gpt_real *lse, int rows);
    int (*loss_bwd)(void *ctx, const gpt_real *logits, const int32_t *targets, const gpt_real *lse,
                    const gpt_real *dloss, gpt_real *dlogits, int rows);
    /* causal attention of qkv [b, T, 3 Cl] into atty [b, T, Cl] keeping lse [b, NHl, T] for the
     * backward pass (context parallelism: the keys of the other positions come from elsewhere);
     * NULL: gpt_attention_forward/backward */
    int (*attn_core_fwd)(void *ctx, const gpt_real *qkv, gpt_real *atty, gpt_real *lse, int b);
    int (*attn_core_bwd)(void *ctx, const gpt_real *qkv, const gpt_real *atty, const gpt_real *lse,
                         const gpt_real *datty, gpt_real *dqkv, int b);
    /*
     * Mixture of experts across ep (mesh/expert.h); all NULL: every expert here, routed by
     * moe.c. route takes the tokens' top-k expert ids [tokens k] of (micro-batch, layer) and
     * gives the expert rows this rank receives, how many each local expert has and which of this
     * rank's choices the capacity dropped; the moves that follow reuse that routing until
     * moe_done. Rows are grouped by local expert, then in global token order.
     */
    int (*moe_route)(void *ctx, int mb, int layer, int tokens, const int32_t *ids, int *rows,
                     int *expert_rows, uint8_t *dropped);
    int (*moe_dispatch)(void *ctx, int mb, int layer, const gpt_real *in, gpt_real *rows);
    int (*moe_combine)(void *ctx, int mb, int layer, const gpt_real *rows, const gpt_real *weights,
                       gpt_real *out, gpt_real *gathered);
    int (*moe_combine_bwd)(void *ctx, int mb, int layer, const gpt_real *dout,
                           const gpt_real *weights, const gpt_real *gathered, gpt_real *drows,
                           gpt_real *dweights);
    int (*moe_dispatch_bwd)(void *ctx, int mb, int layer, const gpt_real *drows, gpt_real *din);
    int (*moe_done)(void *ctx, int mb, int layer);
    /* sums n doubles over the data-parallel ranks (the router's load statistics) */
    int (*moe_dp_sum)(void *ctx, double *buf, int n);
    /* sums n values over tp (the router weights' gradients from the experts' partial rows) */
    int (*moe_tp_sum)(void *ctx, gpt_real *buf, int n);
} gpt_ops_t;

/* A parameter a layer declares for one block: its name after "h<l>.", its full shape (vectors:
 * cols 1), its split across tp and its pointer's place in gpt_group_t. */
typedef struct {
    const char *leaf;
    int rows, cols;
    gpt_split_t split;
    size_t field_off;
} gpt_tensor_decl_t;

#define GPT_LAYER_TENSORS_MAX 8

/*
 * A replaceable layer of a block, as Megatron-Core's layer specs build a block from an attention
 * and an MLP submodule: the attention (context parallelism swaps its core through the hooks),
 * the dense MLP, or a mixture of experts (moe.c). fwd maps the block's normalised input (outside
 * a tp region) to its output (outside, before the residual add) for micro-batch mb, bwd back;
 * split backward: bwd with g NULL computes din only and keeps what the weight gradients need,
 * which wgrad then adds into g. tensors declares the layer's parameters in block `layer` (at
 * most GPT_LAYER_TENSORS_MAX, in table order) and returns how many. alloc, alloc_wgrad and
 * release (NULL: nothing) keep state of the layer's own for the model's micro-batches: called
 * once per model whatever the blocks using the layer, after gpt_alloc_acts, after
 * gpt_alloc_wgrad, and from gpt_destroy.
 */
typedef struct gpt_layer {
    int (*tensors)(const struct gpt *m, int layer, gpt_tensor_decl_t *out);
    int (*alloc)(struct gpt *m);
    int (*alloc_wgrad)(struct gpt *m);
    void (*release)(struct gpt *m);
    int (*fwd)(struct gpt *m, int mb, int layer, const gpt_group_t *p, const gpt_real *in,
               gpt_real *out);
    int (*bwd)(struct gpt *m, int mb, int layer, const gpt_group_t *p, gpt_group_t *g,
               const gpt_real *dout, gpt_real *din);
    int (*wgrad)(struct gpt *m, int mb, int layer, gpt_group_t *g);
} gpt_layer_t;

/* A block's layer spec: its attention slot and its MLP slot (layernorms and residuals are the
 * block's own). */
struct gpt_layers {
    const struct gpt_layer *attn, *mlp;
};

extern const gpt_layer_t gpt_attention; /* model.c: causal multi-head self-attention */
extern const gpt_layer_t gpt_mlp;       /* model.c: fc, GELU, projection */
extern const gpt_layer_t gpt_moe;       /* moe.c: a router and E expert MLPs */

/* The default spec of block l: attention, and a mixture of experts where cfg's moe_layers name
 * the block (with experts), the dense MLP elsewhere. */
gpt_layers_t gpt_layer_spec(const gpt_config_t *cfg, int l);

/* What a split backward keeps per (micro-batch, layer) for the weight gradients: gradients of
 * the layers' outputs (the inputs are activations, kept anyway). Layer L holds the final
 * layernorm's and the embedding's. */
enum {
    GPT_WG_MLP_DOUT = 0, /* [b, tl, C] d(MLP output), outside */
    GPT_WG_MLP_PARTIAL,  /* [b, T, C] d(projection output), inside */
    GPT_WG_MLP_DFCH,     /* [b, T, Fl] d(first MLP matmul output) */
    GPT_WG_LN2,          /* [b, tl, C] d(ln2 output) */
    GPT_WG_ATTN_DOUT,    /* [b, tl, C] */
    GPT_WG_ATTN_PARTIAL, /* [b, T, C] */
    GPT_WG_ATTN_DQKV,    /* [b, T, 3 Cl] */
    GPT_WG_LN1,          /* [b, tl, C] */
    GPT_WG_PER_LAYER,
    /* layer L, [b, tl, C] each: d(final layernorm output), d(x[0]) (named after per-layer slots
     * of the same size) */
    GPT_WG_LNF = GPT_WG_MLP_DOUT,
    GPT_WG_EMBED = GPT_WG_LN2
};

/* Activations of one micro-batch, kept from its forward to its backward pass. */
typedef struct {
    gpt_real *x;    /* [L + 1][b, tl, C] block inputs; x[L] is the last block's output */
    gpt_real *xmid; /* [L][b, tl, C] after the attention residual */
    gpt_real *ln1, *ln1_mean, *ln1_rstd, *ln2, *ln2_mean, *ln2_rstd; /* [L][b, tl, C], [L][b, tl] */
    gpt_real *ln1_in, *ln2_in;  /* [L][b, T, C] normalised inputs inside the tp region */
    gpt_real *qkv, *att, *atty; /* [L][b, T, 3 Cl], [L][b, Hl, T, T], [L][b, T, Cl] */
    gpt_real *fch, *fch_gelu;   /* [L][b, T, Fl] */
    gpt_real *lnf, *lnf_mean, *lnf_rstd, *lnf_in; /* [b, tl, C], [b, tl], [b, T, C] */
    gpt_real *logits, *lse, *loss;                /* [b, T, Vl], [b, T], [b, T] */
    int32_t *tokens, *targets;                    /* [b, T] */
    gpt_real *wg; /* split backward (gpt_alloc_wgrad): the GPT_WG_ slots of every layer */
    struct gpt_moe_acts *moe; /* [L]: a mixture-of-experts block's routing and expert rows */
    double aux;               /* this micro-batch's auxiliary loss, scaled (aux_scale) */
    uint64_t dropped;         /* choices of this rank's tokens the capacity dropped */
} gpt_acts_t;

typedef struct gpt {
    gpt_config_t cfg;
    int C, T, V, L, NH, hs;  /* full sizes (T: this cp rank's positions); hs = C / NH */
    int Vl, v0, NHl, Cl, Fl; /* this rank's vocabulary range, heads, attention and MLP width */
    int tl, t0;              /* sequence positions held outside tp regions */
    int b;                   /* samples per micro-batch */
    int n_tensors;
    gpt_tensor_t *tensors;
    size_t n_params; /* local */
    gpt_ops_t ops;
    gpt_layers_t *blocks; /* [L] each block's layer spec */
    int n_mb;
    gpt_acts_t *acts;  /* one per micro-batch */
    int slots;         /* distinct activation slots: micro-batch mb uses slot mb % slots */
    int *blk, *xblk;   /* gpt_keep_blocks: block l's place in the per-block arrays, and x[l]'s
                          (-1: not kept); NULL: every block, in order */
    int nblk;          /* blocks kept */
    size_t act_bytes;  /* what gpt_alloc_acts allocated: the slots' and the temporaries */
    size_t slot_bytes; /* one slot's */
    /* temporaries shared by the micro-batches: [b, T, C] partial sums and gradients inside a
     * tp region, [b, T, max(3 Cl, Fl)] twice, [T], [b, tl, C] twice outside, [b, T] */
    gpt_real *partial, *dinside, *wide_a, *wide_b, *datt, *dx, *dtmp, *dloss;
    gpt_real dloss_scale; /* d(mean loss)/d(row loss): 1 / (global batch x seq) */
    int split_backward;   /* the _bwd functions compute input gradients only (see _wgrad) */
    /* mixture of experts: E, k, local experts from e0, expert width and its tp part, the most
     * expert rows a rank can receive; the auxiliary loss's factor (coefficient / micro-batches) */
    int E, K, El, e0, Fe, Fel, rmax;
    gpt_real aux_scale;
    struct gpt_moe_scratch *moe_scr;
} gpt_t;

/* Parameters and gradients in two flat buffers laid out in table order: the hooks of one
 * process (acquire hands out the group's pointers, nothing else happens). */
typedef struct {
    gpt_t *m;
    gpt_real *params, *grads;
} gpt_flat_t;
int gpt_flat_acquire(void *ctx, int group, int phase, gpt_group_t *p, gpt_group_t *g);

/* Builds the tensor table and local sizes; refuses splits tp does not divide (-1 and a message
 * in err). */
int gpt_create(gpt_t *m, const gpt_config_t *cfg, char *err, size_t errlen);
/* Activation buffers for n_mb micro-batches of b samples. */
int gpt_alloc_acts(gpt_t *m, int b, int n_mb);
/* After gpt_alloc_acts and before gpt_alloc_wgrad: micro-batch mb keeps its activations in
 * slot mb % slots, for a caller that never has mb and mb + k slots apart alive at once (one
 * process: 1; a pipeline stage: its schedule's peak in flight). Tokens, targets and the losses
 * stay per micro-batch. -1 for a bad count or a second call. */
int gpt_share_acts(gpt_t *m, int slots);
/* After gpt_alloc_acts and before gpt_share_acts: the per-block activations only of the blocks
 * l with mine[l] (a pipeline stage's), x only of their inputs and outputs; the others must not
 * be run. -1 when called twice or out of memory. */
int gpt_keep_blocks(gpt_t *m, const uint8_t *mine);
/* Offsets, in blocks, of block l in the per-block arrays and of x[l] in x. */
static inline size_t gpt_blk(const gpt_t *m, int l)
{
    return m->blk ? (size_t)m->blk[l] : (size_t)l;
}
static inline size_t gpt_xblk(const gpt_t *m, int l)
{
    return m->xblk ? (size_t)m->xblk[l] : (size_t)l;
}
void gpt_destroy(gpt_t *m);
/* The sequence position of row t of the rows held outside tp regions (0 <= t < tl). */
int gpt_position(const gpt_t *m, int t);
/* Index of a tensor by name, -1 if none. */
int gpt_tensor_index(const gpt_t *m, const char *name);
/* The group's tensor pointers into flat local buffers laid out in table order. */
void gpt_group_pointers(const gpt_t *m, int group, gpt_real *flat, gpt_group_t *out);

/* The full tensor t (rows x cols) filled from (seed, name): normal(0, 0.02) weights, the
 * residual projections scaled by 1/sqrt(2L), zero biases, unit layernorm weights. */
void gpt_init_full(const gpt_t *m, const gpt_tensor_t *t, uint64_t seed, gpt_real *full);
/* This rank's shard of a full tensor, and back (scatter of a shard into a full tensor). */
void gpt_slice(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, const gpt_real *full,
               gpt_real *local);
void gpt_unslice(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, const gpt_real *local,
                 gpt_real *full);
/* gpt_unslice of the shard held by ep rank ep_rank (expert tensors; the others as gpt_unslice) */
void gpt_unslice_ep(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, int ep_rank,
                    const gpt_real *local, gpt_real *full);

/* Forward of micro-batch mb (tokens and targets [b, T] in acts); sets *loss_sum to the sum of
 * its rows' losses. Backward accumulates gradients (acquire's g) scaled by dloss_scale. */
int gpt_forward(gpt_t *m, int mb, double *loss_sum);
int gpt_backward(gpt_t *m, int mb);
/*
 * The same in the parts a pipeline stage runs: the embedding (first stage), blocks [l0, l1),
 * the final layernorm, head and loss (last stage). Activations: tokens -> x[0] -> ... -> x[L]
 * -> loss; between stages x[l0] comes in and x[l1] goes out (acts->x of micro-batch mb), and in
 * the backward pass the gradient of x[l1] comes in and that of x[l0] goes out in m->dx.
 * A hook's release in the backward pass hands a group's gradient over once the group's
 * acquisitions are all released (gpt_backward holds the token table across head and embedding).
 */
int gpt_embed_fwd(gpt_t *m, int mb);
int gpt_blocks_fwd(gpt_t *m, int mb, int l0, int l1);
int gpt_head_fwd(gpt_t *m, int mb, double *loss_sum);
int gpt_head_bwd(gpt_t *m, int mb);
int gpt_blocks_bwd(gpt_t *m, int mb, int l0, int l1);
int gpt_embed_bwd(gpt_t *m, int mb);
/*
 * Split backward (zero-bubble schedules): with m->split_backward set, head, blocks and
 * embedding _bwd compute only the gradient that flows to the previous stage and keep in acts->wg
 * what the weight gradients need; the _wgrad functions later add those weight gradients (the
 * hooks' acquire and release around them, as in the backward pass). The numbers are those of
 * the unsplit backward pass. gpt_alloc_wgrad (after gpt_alloc_acts) makes the room.
 */
int gpt_alloc_wgrad(gpt_t *m);
gpt_real *gpt_wgrad_slot(gpt_t *m, int mb, int layer, int slot);
size_t gpt_wgrad_slot_numel(const gpt_t *m, int slot);
int gpt_head_wgrad(gpt_t *m, int mb);
int gpt_blocks_wgrad(gpt_t *m, int mb, int l0, int l1);
int gpt_embed_wgrad(gpt_t *m, int mb);

/* The ends of a tp region (identity without hooks), for the layers of other files. */
int gpt_enter_fwd(gpt_t *m, const gpt_real *out, gpt_real *in, int width);
int gpt_enter_bwd(gpt_t *m, const gpt_real *din, gpt_real *dout, int width);
int gpt_exit_fwd(gpt_t *m, const gpt_real *in, gpt_real *out, int width);
int gpt_exit_bwd(gpt_t *m, const gpt_real *dout, gpt_real *din, int width);

/* Layers (layers.c): _forward/_backward pairs over flat arrays. Backward ones add into the
 * parameter gradients and into din unless noted. */
void gpt_matmul_forward(gpt_real *out, const gpt_real *in, const gpt_real *w, const gpt_real *bias,
                        int n, int ic, int oc);
/* din = dout w (overwritten when accumulate is 0); dw += dout^T in; dbias += column sums; each
 * skipped when NULL */
void gpt_matmul_backward(gpt_real *din, gpt_real *dw, gpt_real *dbias, const gpt_real *dout,
                         const gpt_real *in, const gpt_real *w, int n, int ic, int oc,
                         int accumulate);
void gpt_layernorm_forward(gpt_real *out, gpt_real *mean, gpt_real *rstd, const gpt_real *in,
                           const gpt_real *w, const gpt_real *b, int n, int c);
/* dw and db NULL: din only */
void gpt_layernorm_backward(gpt_real *din, gpt_real *dw, gpt_real *db, const gpt_real *dout,
                            const gpt_real *in, const gpt_real *w, const gpt_real *mean,
                            const gpt_real *rstd, int n, int c);
/* dw and db only, as gpt_layernorm_backward computes them */
void gpt_layernorm_wgrad(gpt_real *dw, gpt_real *db, const gpt_real *dout, const gpt_real *in,
                         const gpt_real *mean, const gpt_real *rstd, int n, int c);
void gpt_gelu_forward(gpt_real *out, const gpt_real *in, int n);
void gpt_gelu_backward(gpt_real *din, const gpt_real *in, const gpt_real *dout, int n);
/* Causal attention over local heads: qkv [b, T, 3 Cl] -> out [b, T, Cl], att [b, Hl, T, T]. */
void gpt_attention_forward(gpt_real *out, gpt_real *att, const gpt_real *qkv, int b, int t, int hl,
                           int hs);
/* dqkv overwritten */
void gpt_attention_backward(gpt_real *dqkv, gpt_real *datt_scratch, const gpt_real *dout,
                            const gpt_real *qkv, const gpt_real *att, int b, int t, int hl, int hs);
/* Unsplit embedding and cross-entropy: the single-process paths. */
void gpt_embed_forward(gpt_real *out, const int32_t *tokens, const gpt_real *wte, int n, int c);
void gpt_embed_backward(gpt_real *dwte, const int32_t *tokens, const gpt_real *dout, int n, int c);
void gpt_ce_forward(gpt_real *loss, gpt_real *lse, const gpt_real *logits, const int32_t *targets,
                    int n, int v);
void gpt_ce_backward(gpt_real *dlogits, const gpt_real *logits, const int32_t *targets,
                     const gpt_real *lse, const gpt_real *dloss, int n, int v);

#endif
