/* mesh-train's layout: the grid, the tp handle and the model's hooks. */
#include "layout.h"
#include "commrep.h"

#include <mesh/dtype.h>
#include <mesh/pipeline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int st(mesh_status_t s)
{
    if (s == MESH_OK)
        return 0;
    fprintf(stderr, "mesh-train: %s: %s\n", mesh_status_string(s), mesh_comm_last_error(NULL));
    return -1;
}

/* The cp options: meaningful with cp > 1 only, no-overlap the ring's, a sequence that splits. */
static int cp_refused(const layout_params_t *p, char *err, size_t len)
{
    int cp = p->size[MESH_AXIS_CP] > 1 ? p->size[MESH_AXIS_CP] : 1;
    const char *opt = p->cp_zigzag       ? "--cp-zigzag"
                      : p->cp_algo       ? "--cp-algo"
                      : p->cp_no_overlap ? "--cp-no-overlap"
                                         : NULL;
    if (cp == 1 && opt)
        snprintf(err, len, "%s needs --mesh cp=C with C > 1", opt);
    else if (p->cp_no_overlap && p->cp_algo && strcmp(p->cp_algo, "ring"))
        snprintf(err, len,
                 "--cp-no-overlap with --cp-algo %s: only the ring overlaps (use --cp-algo ring)",
                 p->cp_algo);
    else if (p->cp_zigzag && p->seq % (2 * cp))
        snprintf(err, len, "--seq %d with --cp-zigzag does not cut into 2 x cp=%d equal chunks",
                 p->seq, cp);
    else if (p->seq % cp)
        snprintf(err, len, "--seq %d does not split evenly across cp=%d", p->seq, cp);
    else
        return 0;
    return -1;
}

/* The positions this cp rank holds, chunk after chunk. */
static int cp_positions(layout_t *lo, const layout_params_t *p)
{
    mesh_cp_range_t ch[2];
    int n = 0;
    mesh_status_t s =
        mesh_cp_chunks((size_t)p->seq, lo->cp_size, lo->cp_rank, p->cp_zigzag, ch, &n);
    if (s != MESH_OK) {
        snprintf(lo->err, sizeof(lo->err), "--seq %d: %s", p->seq, mesh_comm_last_error(NULL));
        return -1;
    }
    lo->cp_pos = malloc((size_t)(p->seq / lo->cp_size) * sizeof(int));
    if (!lo->cp_pos) {
        snprintf(lo->err, sizeof(lo->err), "out of memory");
        return -1;
    }
    size_t k = 0;
    for (int c = 0; c < n; c++)
        for (size_t i = 0; i < ch[c].count; i++)
            lo->cp_pos[k++] = (int)(ch[c].start + i);
    return 0;
}

int layout_refused(const layout_params_t *p, char *err, size_t len)
{
    /* the capacity counts each ep group's whole samples; a cp rank holds part of each */
    if (p->size[MESH_AXIS_CP] > 1 && p->experts && p->capacity > 0) {
        snprintf(err, len,
                 "--mesh cp=%d with --capacity: the capacity keeps an ep group's first tokens of "
                 "whole samples, and a cp rank holds only part of each; run cp dropless",
                 p->size[MESH_AXIS_CP]);
        return -1;
    }
    if (cp_refused(p, err, len))
        return -1;
    if (p->size[MESH_AXIS_EP] > 1 && !p->experts) {
        snprintf(err, len, "--mesh ep=%d needs --experts", p->size[MESH_AXIS_EP]);
        return -1;
    }
    return 0;
}

int layout_create(layout_t *lo, mesh_comm_h world, const layout_params_t *p)
{
    memset(lo, 0, sizeof(*lo));
    lo->world = world;
    lo->bf16 = p->bf16;
    lo->stage = p->stage;
    int prod = 1;
    for (int a = 0; a < MESH_AXIS_COUNT; a++)
        prod *= p->size[a] > 0 ? p->size[a] : 1;
    if (layout_refused(p, lo->err, sizeof(lo->err)))
        return -1;
    if (prod != mesh_comm_size(world)) {
        snprintf(lo->err, sizeof(lo->err),
                 "--mesh: the axis sizes multiply to %d, but %d ranks run (meshrun -n %d)", prod,
                 mesh_comm_size(world), prod);
        return -1;
    }
    mesh_grid_params_t gp = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES};
    for (int a = 0; a < MESH_AXIS_COUNT; a++)
        gp.size[a] = p->size[a];
    if (p->order) {
        gp.field_mask |= MESH_GRID_PARAM_FIELD_ORDER;
        gp.order = p->order;
    }
    mesh_cp_params_t cpp = {
        .field_mask = MESH_CP_PARAM_FIELD_FLAGS | MESH_CP_PARAM_FIELD_ALGORITHM,
        .flags = (p->cp_zigzag ? MESH_CP_ZIGZAG : 0) | (p->cp_no_overlap ? MESH_CP_NO_OVERLAP : 0),
        .algorithm =
            p->cp_algo && !strcmp(p->cp_algo, "allgather") ? MESH_CP_ALLGATHER : MESH_CP_RING};
    mesh_status_t s = mesh_grid_create(world, &gp, &lo->grid);
    if (s == MESH_OK)
        s = mesh_grid_comm(lo->grid, "tp", &lo->tp_comm);
    if (s == MESH_OK)
        s = mesh_grid_comm(lo->grid, p->size[MESH_AXIS_EP] > 1 ? "dp-ep" : "dp", &lo->dp_comm);
    if (s == MESH_OK)
        s = mesh_grid_comm(lo->grid, "pp", &lo->pp_comm);
    if (s == MESH_OK)
        s = mesh_grid_comm(lo->grid, "cp", &lo->cp_comm);
    if (s == MESH_OK)
        s = mesh_grid_comm(lo->grid, "cp-dp-ep", &lo->zero_comm);
    if (s == MESH_OK)
        s = mesh_cp_create(lo->cp_comm, &cpp, &lo->cp);
    mesh_tp_params_t tpp = {.field_mask = MESH_TP_PARAM_FIELD_FLAGS,
                            .flags = p->sequence_parallel ? MESH_TP_SEQUENCE_PARALLEL : 0};
    if (s == MESH_OK)
        s = mesh_tp_create(lo->tp_comm, &tpp, &lo->tp);
    if (s != MESH_OK) {
        snprintf(lo->err, sizeof(lo->err), "--mesh: %s", mesh_comm_last_error(NULL));
        return -1;
    }
    lo->tp_size = mesh_comm_size(lo->tp_comm), lo->tp_rank = mesh_comm_rank(lo->tp_comm);
    lo->dp_size = mesh_comm_size(lo->dp_comm), lo->dp_rank = mesh_comm_rank(lo->dp_comm);
    lo->pp_size = mesh_comm_size(lo->pp_comm), lo->pp_rank = mesh_comm_rank(lo->pp_comm);
    lo->cp_size = mesh_comm_size(lo->cp_comm), lo->cp_rank = mesh_comm_rank(lo->cp_comm);
    lo->tied_peer = -1;
    if (cp_positions(lo, p))
        return -1;
    return p->experts ? layout_moe_create(lo, p) : 0;
}

/* ---------------------------------------------------------------- the model's hooks */

/* Context parallelism: the attention of this rank's positions against the whole sequence, q, k
 * and v read in place from the fused qkv. */
static mesh_cp_shape_t cp_shape(const layout_t *lo, int b)
{
    const gpt_t *m = lo->m;
    return (mesh_cp_shape_t){.batch = (size_t)b,
                             .seq = (size_t)m->cfg.seq,
                             .heads = m->NHl,
                             .head_dim = (size_t)m->hs,
                             .stride = 3 * (size_t)m->Cl};
}

static int attn_core_fwd(void *ctx, const float *qkv, float *atty, float *lse, int b)
{
    layout_t *lo = ctx;
    mesh_cp_shape_t sh = cp_shape(lo, b);
    size_t cl = (size_t)lo->m->Cl;
    return st(
        CR(CR_CP, mesh_cp_attention_forward(lo->cp, &sh, qkv, qkv + cl, qkv + 2 * cl, atty, lse)));
}

static int attn_core_bwd(void *ctx, const float *qkv, const float *atty, const float *lse,
                         const float *datty, float *dqkv, int b)
{
    layout_t *lo = ctx;
    mesh_cp_shape_t sh = cp_shape(lo, b);
    size_t cl = (size_t)lo->m->Cl;
    return st(CR(CR_CP, mesh_cp_attention_backward(lo->cp, &sh, qkv, qkv + cl, qkv + 2 * cl, atty,
                                                   lse, datty, dqkv, dqkv + cl, dqkv + 2 * cl)));
}

/* The sharded optimizer's communication advances inside its calls: the tp hooks, which run
 * between the layers' matrix products, give it a turn. */
static int progress(layout_t *lo)
{
    return CR(CR_DP, optim_progress(&lo->opt));
}

static int enter_fwd(void *ctx, const float *out, float *in, int b, int w)
{
    layout_t *lo = ctx;
    if (progress(lo))
        return -1;
    return st(CR(CR_TP, mesh_tp_enter_forward(lo->tp, out, in, b, lo->m->T, w, MESH_FP32)));
}

static int enter_bwd(void *ctx, const float *din, float *dout, int b, int w)
{
    layout_t *lo = ctx;
    if (progress(lo))
        return -1;
    return st(CR(CR_TP, mesh_tp_enter_backward(lo->tp, din, dout, b, lo->m->T, w, MESH_FP32)));
}

static int exit_fwd(void *ctx, const float *in, float *out, int b, int w)
{
    layout_t *lo = ctx;
    return st(CR(CR_TP, mesh_tp_exit_forward(lo->tp, in, out, b, lo->m->T, w, MESH_FP32)));
}

static int exit_bwd(void *ctx, const float *dout, float *din, int b, int w)
{
    layout_t *lo = ctx;
    if (progress(lo))
        return -1;
    return st(CR(CR_TP, mesh_tp_exit_backward(lo->tp, dout, din, b, lo->m->T, w, MESH_FP32)));
}

static int embed_fwd(void *ctx, const int32_t *tokens, const float *wte, float *out, int b)
{
    layout_t *lo = ctx;
    return st(CR(CR_TP, mesh_tp_embedding_forward(lo->tp, tokens, b, lo->m->T, wte, lo->m->V,
                                                  lo->m->C, out)));
}

static int embed_bwd(void *ctx, const int32_t *tokens, const float *dout, float *dwte, int b)
{
    layout_t *lo = ctx;
    return st(CR(CR_TP, mesh_tp_embedding_backward(lo->tp, tokens, b, lo->m->T, dout, lo->m->V,
                                                   lo->m->C, dwte)));
}

static int loss_fwd(void *ctx, const float *logits, const int32_t *targets, float *loss, float *lse,
                    int rows)
{
    layout_t *lo = ctx;
    return st(CR(
        CR_TP, mesh_tp_cross_entropy_forward(lo->tp, logits, rows, lo->m->V, targets, loss, lse)));
}

static int loss_bwd(void *ctx, const float *logits, const int32_t *targets, const float *lse,
                    const float *dloss, float *dlogits, int rows)
{
    layout_t *lo = ctx;
    return st(CR(CR_TP, mesh_tp_cross_entropy_backward(lo->tp, logits, rows, lo->m->V, targets, lse,
                                                       dloss, dlogits)));
}

static void set_field(gpt_group_t *grp, const gpt_tensor_t *t, float *ptr)
{
    *(float **)((char *)grp + t->field_off) = ptr;
}

static int zst(mesh_status_t s)
{
    return st(s);
}

/* The optimizer instance holding a tensor: the experts' own, or the dense layers'. */
static mesh_zero_h zof(const layout_t *lo, const gpt_tensor_t *t)
{
    return optim_zero(&lo->opt, t->expert ? OPTIM_EXPERT : OPTIM_DENSE);
}

/* fp32 parameters of a tensor: the optimizer's own, or a copy of its bf16 ones */
static float *param_of(layout_t *lo, const gpt_tensor_t *t)
{
    void *ptr;
    if (zst(mesh_zero_param(zof(lo, t), t->name, &ptr)))
        return NULL;
    if (!lo->bf16)
        return ptr;
    float *w = lo->work_p + t->offset;
    return zst(mesh_dtype_convert(w, MESH_FP32, ptr, MESH_BF16, t->numel)) ? NULL : w;
}

/* Stage 3: the next group's all-gather starts under this group's computation. */
static int prefetch(void *ctx, int group)
{
    layout_t *lo = ctx;
    if (lo->stage != 3 || lo->prefetched[group])
        return 0;
    if (CR(CR_DP, optim_gather(&lo->opt, group)))
        return -1;
    lo->prefetched[group] = 1;
    return 0;
}

/* Stage 3: a group's parameters gathered (or their prefetch finished); a no-op otherwise. */
static int gather(layout_t *lo, int group)
{
    if (lo->stage != 3)
        return 0;
    if (lo->prefetched[group])
        lo->prefetched[group] = 0;
    else if (CR(CR_DP, optim_gather(&lo->opt, group)))
        return -1;
    return CR(CR_DP, optim_wait_params(&lo->opt, group));
}

static int acquire(void *ctx, int group, int phase, gpt_group_t *p, gpt_group_t *g)
{
    layout_t *lo = ctx;
    if (gather(lo, group))
        return -1;
    lo->held[group]++;
    memset(p, 0, sizeof(*p));
    if (g)
        memset(g, 0, sizeof(*g));
    for (int i = 0; i < lo->m->n_tensors; i++) {
        const gpt_tensor_t *t = &lo->m->tensors[i];
        if (t->group != group || (lo->owned && !lo->owned[i]))
            continue;
        float *w = param_of(lo, t);
        if (!w)
            return -1;
        set_field(p, t, w);
        if (!g)
            continue;
        void *gp;
        if (!lo->bf16 && zst(mesh_zero_grad(zof(lo, t), t->name, &gp)))
            return -1;
        set_field(g, t, lo->bf16 ? lo->work_g + t->offset : gp);
    }
    (void)phase;
    return progress(lo);
}

/* A tensor's gradient is final for the step: tp-replicated gradients summed under sequence
 * parallelism, bf16 ones stored, marked ready so that its bucket's reduction starts under the
 * rest of the backward pass. */
static int hand_over(layout_t *lo, const gpt_tensor_t *t)
{
    void *gp;
    if (zst(mesh_zero_grad(zof(lo, t), t->name, &gp)))
        return -1;
    float *g32 = lo->bf16 ? lo->work_g + t->offset : gp;
    if (lo->tp_size > 1 && t->split == GPT_WHOLE &&
        st(CR(CR_TP, mesh_tp_replicated_grad(lo->tp, g32, t->numel, MESH_FP32))))
        return -1;
    if (lo->bf16) {
        if (zst(mesh_dtype_convert(gp, MESH_BF16, g32, MESH_FP32, t->numel)))
            return -1;
        memset(g32, 0, t->numel * sizeof(float));
    }
    return zst(CR(CR_DP, mesh_zero_grad_ready(zof(lo, t), t->name)));
}

/* At the end of a group's backward pass in a micro-batch whose gradients the optimizer takes
 * (the last before a step; without a pipeline every one in stages 2 and 3, which reduce each
 * micro-batch; under a pipeline, one optimizer micro-batch per step, the last), each of the
 * group's gradients is handed over. */
static int release(void *ctx, int group, int phase)
{
    layout_t *lo = ctx;
    /* nested acquisitions (the token table serves head and embedding): the outermost hands
     * the gradient over */
    int last = --lo->held[group] == 0;
    int taken = last && (lo->boundary || (lo->stage >= 2 && lo->pp_size == 1));
    if (lo->pp_size > 1 && group == 0)
        taken = 0; /* layout_pp_handover */
    for (int i = 0; phase == GPT_BWD && taken && i < lo->m->n_tensors; i++) {
        const gpt_tensor_t *t = &lo->m->tensors[i];
        if (t->group == group && (!lo->owned || lo->owned[i]) && hand_over(lo, t))
            return -1;
    }
    return lo->stage == 3 ? optim_release(&lo->opt, group) : 0;
}

int layout_pp_handover(layout_t *lo)
{
    gpt_t *m = lo->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const gpt_tensor_t *t = &m->tensors[i];
        if (t->group != 0 || (lo->owned && !lo->owned[i]))
            continue;
        if (!strcmp(t->name, "wte") && lo->tied_peer >= 0) {
            void *gp;
            if (zst(mesh_zero_grad(zof(lo, t), t->name, &gp)))
                return -1;
            float *g32 = lo->bf16 ? lo->work_g + t->offset : gp;
            float *other = malloc(t->numel * sizeof(float));
            if (!other)
                return -1;
            /* the two stages add the same two numbers: their copies stay identical */
            int rc = st(
                CR(CR_PP, mesh_sendrecv(lo->pp_comm, g32, t->numel, lo->tied_peer, other, t->numel,
                                        lo->tied_peer, MESH_FP32, MESH_PP_TAG_END, NULL, NULL)));
            for (size_t k = 0; rc == 0 && k < t->numel; k++)
                g32[k] += other[k];
            free(other);
            if (rc)
                return -1;
        }
        if (hand_over(lo, t))
            return -1;
    }
    return 0;
}

int layout_bind(layout_t *lo, gpt_t *m, const mesh_zero_params_t *zp)
{
    lo->m = m;
    m->ops = (gpt_ops_t){.ctx = lo, .acquire = acquire, .release = release, .prefetch = prefetch};
    if (lo->tp_size > 1) {
        m->ops.enter_fwd = enter_fwd, m->ops.enter_bwd = enter_bwd;
        m->ops.exit_fwd = exit_fwd, m->ops.exit_bwd = exit_bwd;
        m->ops.embed_fwd = embed_fwd, m->ops.embed_bwd = embed_bwd;
        m->ops.loss_fwd = loss_fwd, m->ops.loss_bwd = loss_bwd;
    }
    if (lo->cp_size > 1)
        m->ops.attn_core_fwd = attn_core_fwd, m->ops.attn_core_bwd = attn_core_bwd;
    if (lo->ep && layout_moe_bind(lo))
        return -1;
    mesh_zero_params_t p = *zp;
    p.field_mask |= MESH_ZERO_PARAM_FIELD_STAGE | MESH_ZERO_PARAM_FIELD_DTYPE |
                    MESH_ZERO_PARAM_FIELD_GRAD_SCALE;
    p.stage = lo->stage;
    p.dtype = lo->bf16 ? MESH_BF16 : MESH_FP32;
    p.grad_scale = 1.0; /* the model's loss is already the mean over the global batch */
    /* the gradient norm is global: summed over the tp shards and the pipeline stages */
    if (lo->tp_size > 1 || lo->pp_size > 1) {
        p.field_mask |= MESH_ZERO_PARAM_FIELD_MP_COMM;
        if (lo->pp_size == 1)
            p.mp_comm = lo->tp_comm;
        else if (zst(mesh_grid_comm(lo->grid, "tp-pp", &p.mp_comm)))
            return -1;
    }
    int groups = m->L + 2;
    if (optim_create(&lo->opt, OPTIM_DENSE, lo->zero_comm, &p, groups))
        return -1;
    /* The experts' tensors are not replicated across ep: their optimizer reduces over the
     * expert data-parallel group and sums the norm over the expert grid's tp and ep (the
     * pipeline stages' sums are added by the chain's step, which clips both with the model's one
     * norm). A stage without mixture-of-experts blocks has none. */
    int experts_here = 0;
    for (int i = 0; i < m->n_tensors; i++)
        experts_here |= m->tensors[i].expert && (!lo->owned || lo->owned[i]);
    if (lo->ep)
        optim_chain(&lo->opt, lo->pp_size > 1 ? lo->pp_comm : NULL);
    if (lo->ep && experts_here) {
        mesh_zero_params_t pe = p;
        mesh_comm_h emp;
        if (zst(mesh_grid_comm(lo->grid, "etp-ep", &emp)))
            return -1;
        lo->etp_ep_comm = emp;
        pe.field_mask &= ~(uint64_t)MESH_ZERO_PARAM_FIELD_MP_COMM;
        if (mesh_comm_size(emp) > 1)
            pe.field_mask |= MESH_ZERO_PARAM_FIELD_MP_COMM, pe.mp_comm = emp;
        if (optim_create(&lo->opt, OPTIM_EXPERT, lo->edp_comm, &pe, groups))
            return -1;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const gpt_tensor_t *t = &m->tensors[i];
        if (lo->owned && !lo->owned[i])
            continue;
        unsigned flags = t->split == GPT_WHOLE && lo->tp_size > 1 ? MESH_ZERO_REPLICATED : 0;
        if (!strcmp(t->name, "wte") && lo->tied_peer >= 0)
            flags |= MESH_ZERO_SHARED; /* on the first and the last stage */
        if (t->cols == 1)
            flags |= MESH_ZERO_NO_DECAY; /* biases and layernorms */
        size_t shape[2] = {t->numel / (size_t)t->cols, (size_t)t->cols};
        if (t->split == GPT_COLS)
            shape[0] = (size_t)t->rows, shape[1] = t->numel / t->rows;
        if (t->split == GPT_EXPERT_COLS)
            shape[1] = (size_t)m->Fel, shape[0] = t->numel / shape[1];
        if (t->expert)
            flags = 0; /* each rank of etp-ep holds its own part */
        if (optim_add(&lo->opt, t->expert ? OPTIM_EXPERT : OPTIM_DENSE, t->name, t->numel, shape,
                      flags, t->group))
            return -1;
    }
    if (optim_finalize(&lo->opt))
        return -1;
    lo->prefetched = calloc((size_t)m->L + 2, sizeof(int));
    lo->held = calloc((size_t)m->L + 2, sizeof(int));
    if (!lo->prefetched || !lo->held)
        return -1;
    if (lo->bf16) {
        lo->work_p = calloc(m->n_params, sizeof(float));
        lo->work_g = calloc(m->n_params, sizeof(float));
        if (!lo->work_p || !lo->work_g)
            return -1;
    }
    return 0;
}

int layout_init_params(layout_t *lo, uint64_t seed)
{
    gpt_t *m = lo->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const gpt_tensor_t *t = &m->tensors[i];
        if (lo->owned && !lo->owned[i])
            continue;
        float *full = malloc((size_t)t->rows * t->cols * sizeof(float));
        float *local = malloc(t->numel * sizeof(float));
        if (!full || !local)
            return free(full), free(local), -1;
        gpt_init_full(m, t, seed, full);
        gpt_slice(m, t, lo->tp_size, lo->tp_rank, full, local);
        int rc = zst(mesh_zero_init_param(zof(lo, t), t->name, local));
        free(full), free(local);
        if (rc)
            return -1;
    }
    return 0;
}

/* Tensor t whole in full (rows x cols): this stage's shards gathered over the tensor's tp group
 * (collective over it; stage 3 gathers the dp shards first). */
static int full_tensor(layout_t *lo, const gpt_tensor_t *t, float *full)
{
    gpt_t *m = lo->m;
    /* an expert tensor's parts are spread over the expert grid's tp and ep */
    mesh_comm_h pc = t->expert ? lo->etp_ep_comm : lo->tp_comm;
    int np = mesh_comm_size(pc), rc = 0;
    float *parts = malloc(t->numel * (size_t)np * sizeof(float) + 4);
    float *w = NULL;
    if (!parts)
        return -1;
    mesh_zero_h z = zof(lo, t);
    if (lo->stage == 3 && zst(mesh_zero_gather(z, t->group)))
        rc = -1;
    if (rc == 0 && lo->stage == 3 && zst(mesh_zero_wait_params(z, t->group)))
        rc = -1;
    if (rc == 0 && !(w = param_of(lo, t)))
        rc = -1;
    if (rc == 0 && st(mesh_allgather(pc, w, parts, t->numel, MESH_FP32, NULL, NULL)))
        rc = -1;
    for (int r = 0; rc == 0 && r < np; r++) /* etp innermost */
        gpt_unslice_ep(m, t, lo->tp_size, r % lo->tp_size, r / lo->tp_size,
                       parts + (size_t)r * t->numel, full);
    if (rc == 0 && lo->stage == 3 && zst(mesh_zero_release(z, t->group)))
        rc = -1;
    free(parts);
    return rc;
}

int layout_gather_params(layout_t *lo, float *out)
{
    gpt_t *m = lo->m;
    int p = lo->pp_size, me = lo->pp_rank, rc = 0;
    /* the first pp rank holding each tensor sends it to pp rank 0 */
    int32_t *first = malloc((size_t)m->n_tensors * sizeof(int32_t));
    if (!first)
        return -1;
    for (int i = 0; i < m->n_tensors; i++)
        first[i] = !lo->owned || lo->owned[i] ? me : p;
    if (p > 1 && st(mesh_allreduce(lo->pp_comm, first, first, (size_t)m->n_tensors, MESH_INT32,
                                   MESH_MIN, NULL, NULL)))
        rc = -1;
    size_t off = 0;
    for (int i = 0; i < m->n_tensors && rc == 0; i++) {
        const gpt_tensor_t *t = &m->tensors[i];
        size_t n = (size_t)t->rows * t->cols;
        float *full = malloc(n * sizeof(float));
        if (!full)
            rc = -1;
        if (rc == 0 && (!lo->owned || lo->owned[i]))
            rc = full_tensor(lo, t, full);
        if (rc == 0 && first[i] != 0 && me == first[i])
            rc = st(mesh_send(lo->pp_comm, full, n, MESH_FP32, 0, NULL, NULL));
        else if (rc == 0 && first[i] != 0 && me == 0)
            rc = st(mesh_recv(lo->pp_comm, full, n, MESH_FP32, first[i], NULL, NULL));
        if (rc == 0 && out)
            memcpy(out + off, full, n * sizeof(float));
        off += n;
        free(full);
    }
    free(first);
    return rc;
}

int layout_dump_params(layout_t *lo, const char *path)
{
    gpt_t *m = lo->m;
    int me = mesh_comm_rank(lo->world) == 0;
    size_t total = 0;
    for (int i = 0; i < m->n_tensors; i++)
        total += (size_t)m->tensors[i].rows * m->tensors[i].cols;
    float *full = me ? malloc(total * sizeof(float)) : NULL;
    if (me && !full)
        return -1;
    int rc = layout_gather_params(lo, full);
    FILE *f = NULL;
    if (rc == 0 && me && !(f = fopen(path, "w"))) {
        perror(path);
        rc = -1;
    }
    const float *x = full;
    for (int i = 0; f && rc == 0 && i < m->n_tensors; i++) {
        const gpt_tensor_t *t = &m->tensors[i];
        size_t n = (size_t)t->rows * t->cols;
        fprintf(f, "# %s %d %d\n", t->name, t->rows, t->cols);
        for (size_t k = 0; k < n; k++)
            fprintf(f, "%.9g\n", x[k]);
        x += n;
    }
    if (f && fclose(f))
        rc = -1;
    free(full);
    return rc;
}

/* The model and the step a checkpoint belongs to, beside the optimizer's files. */
static void describe_model(const layout_t *lo, char *buf, size_t len)
{
    const gpt_t *m = lo->m;
    int n = snprintf(buf, len, "layers=%d d_model=%d heads=%d seq=%d vocab=%d", m->L, m->C, m->NH,
                     m->cfg.seq, m->V);
    /* the experts' optimizer keeps one index per rank of the expert grid's tp x ep */
    if (m->E && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n,
                 " experts=%d topk=%d expert_ffn=%d moe_layers=0x%llx, experts over tp=%d ep=%d",
                 m->E, m->K, m->Fe, (unsigned long long)m->cfg.moe_layers, lo->tp_size,
                 lo->ep_size);
}

int layout_save(layout_t *lo, const char *dir, int64_t step)
{
    if (optim_save(&lo->opt, dir))
        return -1;
    int rc = 0;
    if (mesh_comm_rank(lo->world) == 0) {
        char path[4096], model[256];
        snprintf(path, sizeof(path), "%s/mesh-train.txt", dir);
        describe_model(lo, model, sizeof(model));
        FILE *f = fopen(path, "w");
        if (!f || fprintf(f, "%s\nstep=%lld\n", model, (long long)step) < 0 || fclose(f)) {
            perror(path);
            rc = -1;
        }
    }
    /* the checkpoint is whole before any rank goes on */
    return st(mesh_barrier(lo->world, NULL)) || rc ? -1 : 0;
}

int layout_load(layout_t *lo, const char *dir, int64_t *step)
{
    char path[4096], model[256], line[256], want[256];
    snprintf(path, sizeof(path), "%s/mesh-train.txt", dir);
    describe_model(lo, want, sizeof(want));
    FILE *f = fopen(path, "r");
    long long s = -1;
    int ok = f && fgets(model, sizeof(model), f) && fgets(line, sizeof(line), f) &&
             sscanf(line, "step=%lld", &s) == 1 && s >= 0;
    if (f)
        fclose(f);
    model[strcspn(model, "\n")] = 0;
    if (!ok) {
        fprintf(stderr, "mesh-train: --load: %s is missing or not a mesh-train checkpoint\n", path);
        return -1;
    }
    if (strcmp(model, want)) {
        fprintf(stderr, "mesh-train: --load: %s holds %s, this run is %s\n", path, model, want);
        return -1;
    }
    if (optim_load(&lo->opt, dir))
        return -1;
    *step = s;
    return 0;
}

void layout_destroy(layout_t *lo)
{
    for (int i = 0; lo->routes && lo->m && i < lo->m->n_mb * lo->m->L; i++)
        mesh_ep_layout_destroy(lo->routes[i]);
    free(lo->routes);
    mesh_ep_destroy(lo->ep);
    optim_destroy(&lo->opt);
    free(lo->prefetched), free(lo->held);
    mesh_tp_destroy(lo->tp);
    mesh_cp_destroy(lo->cp);
    free(lo->cp_pos);
    mesh_grid_destroy(lo->grid);
    free(lo->work_p), free(lo->work_g), free(lo->owned);
    memset(lo, 0, sizeof(*lo));
}
