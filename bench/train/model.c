/* The GPT's forward and backward passes per micro-batch, composed from layers.c; communication
 * only through the layout's hooks. */
#include "gpt.h"

#include <stddef.h>
#include <string.h>

#define HOOK(m, name, ...) ((m)->ops.name ? (m)->ops.name((m)->ops.ctx, __VA_ARGS__) : 0)

/* Without hooks a tp region's inside is its outside. */
int gpt_enter_fwd(gpt_t *m, const gpt_real *out, gpt_real *in, int width)
{
    if (m->ops.enter_fwd)
        return m->ops.enter_fwd(m->ops.ctx, out, in, m->b, width);
    memcpy(in, out, sizeof(gpt_real) * m->b * m->T * width);
    return 0;
}

int gpt_enter_bwd(gpt_t *m, const gpt_real *din, gpt_real *dout, int width)
{
    if (m->ops.enter_bwd)
        return m->ops.enter_bwd(m->ops.ctx, din, dout, m->b, width);
    memcpy(dout, din, sizeof(gpt_real) * m->b * m->T * width);
    return 0;
}

int gpt_exit_fwd(gpt_t *m, const gpt_real *in, gpt_real *out, int width)
{
    if (m->ops.exit_fwd)
        return m->ops.exit_fwd(m->ops.ctx, in, out, m->b, width);
    memcpy(out, in, sizeof(gpt_real) * m->b * m->T * width);
    return 0;
}

int gpt_exit_bwd(gpt_t *m, const gpt_real *dout, gpt_real *din, int width)
{
    if (m->ops.exit_bwd)
        return m->ops.exit_bwd(m->ops.ctx, dout, din, m->b, width);
    memcpy(din, dout, sizeof(gpt_real) * m->b * m->T * width);
    return 0;
}

static void add_rows_bias(gpt_real *out, const gpt_real *bias, int n, int c)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < c; k++)
            out[(size_t)i * c + k] += bias[k];
}

static void colsum(gpt_real *dbias, const gpt_real *d, int n, int c)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < c; k++)
            dbias[k] += d[(size_t)i * c + k];
}

/* Split backward: what a weight gradient needs beyond the activations, kept from B for W. */
static void keep(gpt_t *m, int mb, int l, int slot, const gpt_real *src)
{
    memcpy(gpt_wgrad_slot(m, mb, l, slot), src, gpt_wgrad_slot_numel(m, slot) * sizeof(gpt_real));
}

/* ---------------------------------------------------------------- attention and MLP: the
 * layers of a dense block (gpt_attention, gpt_mlp) */

static int attn_fwd(gpt_t *m, int mb, int l, const gpt_group_t *p, const gpt_real *in,
                    gpt_real *out)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, Cl = m->Cl;
    gpt_real *in_l = a->ln1_in + gpt_blk(m, l) * N * C, *qkv = a->qkv + gpt_blk(m, l) * N * 3 * Cl;
    gpt_real *att = a->att + gpt_blk(m, l) * m->b * m->NHl * m->T * m->T;
    gpt_real *atty = a->atty + gpt_blk(m, l) * N * Cl;
    if (gpt_enter_fwd(m, in, in_l, C))
        return -1;
    gpt_matmul_forward(qkv, in_l, p->qkvw, p->qkvb, N, C, 3 * Cl);
    if (m->ops.attn_core_fwd) {
        if (m->ops.attn_core_fwd(m->ops.ctx, qkv, atty, att, m->b))
            return -1;
    } else {
        gpt_attention_forward(atty, att, qkv, m->b, m->T, m->NHl, m->hs);
    }
    gpt_matmul_forward(m->partial, atty, p->attprojw, NULL, N, Cl, C);
    if (gpt_exit_fwd(m, m->partial, out, C))
        return -1;
    add_rows_bias(out, p->attprojb, No, C);
    return 0;
}

/* The key bias adds q.b to every score of a row, which the softmax ignores: its gradient is
 * zero, given as such rather than as rounding noise (which Adam would scale up to a full step,
 * differently for every order of summation). */
static void qkv_bias_grad(gpt_real *dqkvb, const gpt_real *dqkv, int n, int cl)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3 * cl; k++)
            if (k < cl || k >= 2 * cl)
                dqkvb[k] += dqkv[(size_t)i * 3 * cl + k];
}

static int attn_bwd(gpt_t *m, int mb, int l, const gpt_group_t *p, gpt_group_t *g,
                    const gpt_real *dout, gpt_real *din)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, Cl = m->Cl;
    gpt_real *in_l = a->ln1_in + gpt_blk(m, l) * N * C, *qkv = a->qkv + gpt_blk(m, l) * N * 3 * Cl;
    gpt_real *att = a->att + gpt_blk(m, l) * m->b * m->NHl * m->T * m->T;
    gpt_real *atty = a->atty + gpt_blk(m, l) * N * Cl;
    /* g NULL: the input gradient only, what W needs kept */
    if (g)
        colsum(g->attprojb, dout, No, C);
    else
        keep(m, mb, l, GPT_WG_ATTN_DOUT, dout);
    if (gpt_exit_bwd(m, dout, m->partial, C))
        return -1;
    if (!g)
        keep(m, mb, l, GPT_WG_ATTN_PARTIAL, m->partial);
    gpt_real *datty = m->wide_a, *dqkv = m->wide_b;
    gpt_matmul_backward(datty, g ? g->attprojw : NULL, NULL, m->partial, atty, p->attprojw, N, Cl,
                        C, 0);
    if (m->ops.attn_core_bwd) {
        if (m->ops.attn_core_bwd(m->ops.ctx, qkv, atty, att, datty, dqkv, m->b))
            return -1;
    } else {
        gpt_attention_backward(dqkv, m->datt, datty, qkv, att, m->b, m->T, m->NHl, m->hs);
    }
    gpt_matmul_backward(m->dinside, g ? g->qkvw : NULL, NULL, dqkv, in_l, p->qkvw, N, C, 3 * Cl, 0);
    if (g)
        qkv_bias_grad(g->qkvb, dqkv, N, Cl);
    else
        keep(m, mb, l, GPT_WG_ATTN_DQKV, dqkv);
    return gpt_enter_bwd(m, m->dinside, din, C);
}

static int attn_wgrad(gpt_t *m, int mb, int l, gpt_group_t *g)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, Cl = m->Cl;
    const gpt_real *in_l = a->ln1_in + gpt_blk(m, l) * N * C,
                   *atty = a->atty + gpt_blk(m, l) * N * Cl;
    const gpt_real *dqkv = gpt_wgrad_slot(m, mb, l, GPT_WG_ATTN_DQKV);
    colsum(g->attprojb, gpt_wgrad_slot(m, mb, l, GPT_WG_ATTN_DOUT), No, C);
    gpt_matmul_backward(NULL, g->attprojw, NULL, gpt_wgrad_slot(m, mb, l, GPT_WG_ATTN_PARTIAL),
                        atty, NULL, N, Cl, C, 0);
    gpt_matmul_backward(NULL, g->qkvw, NULL, dqkv, in_l, NULL, N, C, 3 * Cl, 0);
    qkv_bias_grad(g->qkvb, dqkv, N, Cl);
    return 0;
}

static int mlp_fwd(gpt_t *m, int mb, int l, const gpt_group_t *p, const gpt_real *in, gpt_real *out)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, F = m->Fl;
    gpt_real *in_l = a->ln2_in + gpt_blk(m, l) * N * C, *fch = a->fch + gpt_blk(m, l) * N * F;
    gpt_real *gel = a->fch_gelu + gpt_blk(m, l) * N * F;
    if (gpt_enter_fwd(m, in, in_l, C))
        return -1;
    gpt_matmul_forward(fch, in_l, p->fcw, p->fcb, N, C, F);
    gpt_gelu_forward(gel, fch, N * F);
    gpt_matmul_forward(m->partial, gel, p->fcprojw, NULL, N, F, C);
    if (gpt_exit_fwd(m, m->partial, out, C))
        return -1;
    add_rows_bias(out, p->fcprojb, No, C);
    return 0;
}

static int mlp_bwd(gpt_t *m, int mb, int l, const gpt_group_t *p, gpt_group_t *g,
                   const gpt_real *dout, gpt_real *din)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, F = m->Fl;
    gpt_real *in_l = a->ln2_in + gpt_blk(m, l) * N * C, *fch = a->fch + gpt_blk(m, l) * N * F;
    gpt_real *gel = a->fch_gelu + gpt_blk(m, l) * N * F;
    if (g)
        colsum(g->fcprojb, dout, No, C);
    else
        keep(m, mb, l, GPT_WG_MLP_DOUT, dout);
    if (gpt_exit_bwd(m, dout, m->partial, C))
        return -1;
    if (!g)
        keep(m, mb, l, GPT_WG_MLP_PARTIAL, m->partial);
    gpt_real *dgel = m->wide_a, *dfch = m->wide_b;
    gpt_matmul_backward(dgel, g ? g->fcprojw : NULL, NULL, m->partial, gel, p->fcprojw, N, F, C, 0);
    gpt_gelu_backward(dfch, fch, dgel, N * F);
    if (!g)
        keep(m, mb, l, GPT_WG_MLP_DFCH, dfch);
    gpt_matmul_backward(m->dinside, g ? g->fcw : NULL, g ? g->fcb : NULL, dfch, in_l, p->fcw, N, C,
                        F, 0);
    return gpt_enter_bwd(m, m->dinside, din, C);
}

static int mlp_wgrad(gpt_t *m, int mb, int l, gpt_group_t *g)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, F = m->Fl;
    const gpt_real *in_l = a->ln2_in + gpt_blk(m, l) * N * C,
                   *gel = a->fch_gelu + gpt_blk(m, l) * N * F;
    colsum(g->fcprojb, gpt_wgrad_slot(m, mb, l, GPT_WG_MLP_DOUT), No, C);
    gpt_matmul_backward(NULL, g->fcprojw, NULL, gpt_wgrad_slot(m, mb, l, GPT_WG_MLP_PARTIAL), gel,
                        NULL, N, F, C, 0);
    gpt_matmul_backward(NULL, g->fcw, g->fcb, gpt_wgrad_slot(m, mb, l, GPT_WG_MLP_DFCH), in_l, NULL,
                        N, C, F, 0);
    return 0;
}

/* A tp-split tensor's split, or whole on one tp rank. */
static gpt_split_t tp_split(const gpt_t *m, gpt_split_t split)
{
    return m->cfg.tp > 1 ? split : GPT_WHOLE;
}

/* qkv [3C, C] (q, k and v rows split alike across tp) and the output projection [C, C]. */
static int attn_tensors(const gpt_t *m, int l, gpt_tensor_decl_t *d)
{
    int C = m->C;
    (void)l;
    d[0] = (gpt_tensor_decl_t){"qkvw", 3 * C, C, tp_split(m, GPT_ROWS_QKV),
                               offsetof(gpt_group_t, qkvw)};
    d[1] = (gpt_tensor_decl_t){"qkvb", 3 * C, 1, tp_split(m, GPT_ROWS_QKV),
                               offsetof(gpt_group_t, qkvb)};
    d[2] = (gpt_tensor_decl_t){"attprojw", C, C, tp_split(m, GPT_COLS),
                               offsetof(gpt_group_t, attprojw)};
    d[3] = (gpt_tensor_decl_t){"attprojb", C, 1, GPT_WHOLE, offsetof(gpt_group_t, attprojb)};
    return 4;
}

/* fc [4C, C] column-parallel, projection [C, 4C] row-parallel. */
static int mlp_tensors(const gpt_t *m, int l, gpt_tensor_decl_t *d)
{
    int C = m->C;
    (void)l;
    d[0] = (gpt_tensor_decl_t){"fcw", 4 * C, C, tp_split(m, GPT_ROWS), offsetof(gpt_group_t, fcw)};
    d[1] = (gpt_tensor_decl_t){"fcb", 4 * C, 1, tp_split(m, GPT_ROWS), offsetof(gpt_group_t, fcb)};
    d[2] = (gpt_tensor_decl_t){"fcprojw", C, 4 * C, tp_split(m, GPT_COLS),
                               offsetof(gpt_group_t, fcprojw)};
    d[3] = (gpt_tensor_decl_t){"fcprojb", C, 1, GPT_WHOLE, offsetof(gpt_group_t, fcprojb)};
    return 4;
}

const gpt_layer_t gpt_attention = {
    .tensors = attn_tensors, .fwd = attn_fwd, .bwd = attn_bwd, .wgrad = attn_wgrad};

const gpt_layer_t gpt_mlp = {
    .tensors = mlp_tensors, .fwd = mlp_fwd, .bwd = mlp_bwd, .wgrad = mlp_wgrad};

/* ---------------------------------------------------------------- the whole model */

static int acquire(gpt_t *m, int group, int phase, gpt_group_t *p, gpt_group_t *g)
{
    return m->ops.acquire ? m->ops.acquire(m->ops.ctx, group, phase, p, g) : -1;
}

int gpt_embed_fwd(gpt_t *m, int mb)
{
    gpt_acts_t *a = &m->acts[mb];
    int b = m->b, C = m->C;
    gpt_group_t p0;
    if (acquire(m, 0, GPT_FWD, &p0, NULL) || HOOK(m, prefetch, 1))
        return -1;
    gpt_real *x = a->x + gpt_xblk(m, 0) * m->b * m->tl * C;
    a->aux = 0, a->dropped = 0;
    if (m->ops.embed_fwd) {
        if (m->ops.embed_fwd(m->ops.ctx, a->tokens, p0.wte, x, b))
            return -1;
    } else {
        gpt_embed_forward(x, a->tokens, p0.wte, b * m->T, C);
    }
    for (int s = 0; s < b; s++)
        for (int t = 0; t < m->tl; t++) {
            gpt_real *row = x + ((size_t)s * m->tl + t) * C;
            const gpt_real *pos = p0.wpe + (size_t)gpt_position(m, t) * C;
            for (int k = 0; k < C; k++)
                row[k] += pos[k];
        }
    return HOOK(m, release, 0, GPT_FWD);
}

int gpt_blocks_fwd(gpt_t *m, int mb, int l0, int l1)
{
    gpt_acts_t *a = &m->acts[mb];
    int No = m->b * m->tl, C = m->C;
    gpt_group_t p;
    for (int l = l0; l < l1; l++) {
        size_t o = gpt_blk(m, l) * No * C;
        gpt_real *xl = a->x + gpt_xblk(m, l) * No * C, *xmid = a->xmid + o;
        gpt_real *xn = a->x + gpt_xblk(m, l + 1) * No * C;
        gpt_real *ln1 = a->ln1 + o, *ln2 = a->ln2 + o;
        if (acquire(m, l + 1, GPT_FWD, &p, NULL))
            return -1;
        /* the next block's group, or the final layernorm's after the last block */
        if ((l + 1 < l1 || l1 == m->L) && HOOK(m, prefetch, l + 2))
            return -1;
        gpt_layernorm_forward(ln1, a->ln1_mean + gpt_blk(m, l) * No,
                              a->ln1_rstd + gpt_blk(m, l) * No, xl, p.ln1w, p.ln1b, No, C);
        const gpt_layers_t *blk = &m->blocks[l];
        if (blk->attn->fwd(m, mb, l, &p, ln1, m->dtmp))
            return -1;
        for (size_t i = 0; i < (size_t)No * C; i++)
            xmid[i] = xl[i] + m->dtmp[i];
        gpt_layernorm_forward(ln2, a->ln2_mean + gpt_blk(m, l) * No,
                              a->ln2_rstd + gpt_blk(m, l) * No, xmid, p.ln2w, p.ln2b, No, C);
        if (blk->mlp->fwd(m, mb, l, &p, ln2, m->dtmp))
            return -1;
        for (size_t i = 0; i < (size_t)No * C; i++)
            xn[i] = xmid[i] + m->dtmp[i];
        if (HOOK(m, release, l + 1, GPT_FWD))
            return -1;
    }
    return 0;
}

int gpt_head_fwd(gpt_t *m, int mb, double *loss_sum)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, L = m->L;
    gpt_group_t p0, p;
    if (acquire(m, L + 1, GPT_FWD, &p, NULL))
        return -1;
    gpt_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->x + gpt_xblk(m, L) * No * C, p.lnfw,
                          p.lnfb, No, C);
    if (HOOK(m, release, L + 1, GPT_FWD))
        return -1;
    /* the head, tied to the token table: logits of this rank's vocabulary range */
    if (acquire(m, 0, GPT_FWD, &p0, NULL))
        return -1;
    if (gpt_enter_fwd(m, a->lnf, a->lnf_in, C))
        return -1;
    gpt_matmul_forward(a->logits, a->lnf_in, p0.wte, NULL, N, C, m->Vl);
    if (m->ops.loss_fwd) {
        if (m->ops.loss_fwd(m->ops.ctx, a->logits, a->targets, a->loss, a->lse, N))
            return -1;
    } else {
        gpt_ce_forward(a->loss, a->lse, a->logits, a->targets, N, m->V);
    }
    if (HOOK(m, release, 0, GPT_FWD))
        return -1;
    double s = 0;
    for (int i = 0; i < N; i++)
        s += a->loss[i];
    *loss_sum = s;
    return 0;
}

int gpt_head_bwd(gpt_t *m, int mb)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, L = m->L, split = m->split_backward;
    gpt_group_t p0, g0, p, g;
    if (acquire(m, 0, GPT_BWD, &p0, split ? NULL : &g0) || HOOK(m, prefetch, L + 1))
        return -1;
    for (int i = 0; i < N; i++)
        m->dloss[i] = m->dloss_scale;
    /* in place: the logits are not needed after this, and the head's weight gradient of a split
     * backward reads their gradient there */
    gpt_real *dlogits = a->logits;
    if (m->ops.loss_bwd) {
        if (m->ops.loss_bwd(m->ops.ctx, a->logits, a->targets, a->lse, m->dloss, dlogits, N))
            return -1;
    } else {
        gpt_ce_backward(dlogits, a->logits, a->targets, a->lse, m->dloss, N, m->V);
    }
    gpt_matmul_backward(m->dinside, split ? NULL : g0.wte, NULL, dlogits, a->lnf_in, p0.wte, N, C,
                        m->Vl, 0);
    if (gpt_enter_bwd(m, m->dinside, m->dtmp, C))
        return -1;
    if (HOOK(m, release, 0, GPT_BWD))
        return -1;
    memset(m->dx, 0, sizeof(gpt_real) * No * C);
    if (acquire(m, L + 1, GPT_BWD, &p, split ? NULL : &g) || HOOK(m, prefetch, L))
        return -1;
    if (split)
        keep(m, mb, L, GPT_WG_LNF, m->dtmp);
    gpt_layernorm_backward(m->dx, split ? NULL : g.lnfw, split ? NULL : g.lnfb, m->dtmp,
                           a->x + gpt_xblk(m, L) * No * C, p.lnfw, a->lnf_mean, a->lnf_rstd, No, C);
    return HOOK(m, release, L + 1, GPT_BWD);
}

int gpt_blocks_bwd(gpt_t *m, int mb, int l0, int l1)
{
    gpt_acts_t *a = &m->acts[mb];
    int No = m->b * m->tl, C = m->C, split = m->split_backward;
    gpt_group_t p, g, *gp = split ? NULL : &g;
    for (int l = l1 - 1; l >= l0; l--) {
        size_t o = gpt_blk(m, l) * No * C, ox = gpt_xblk(m, l) * No * C;
        if (acquire(m, l + 1, GPT_BWD, &p, gp) || (l > l0 && HOOK(m, prefetch, l)))
            return -1;
        /* dx holds d(block output); the residual passes it through to xmid and x */
        const gpt_layers_t *blk = &m->blocks[l];
        if (blk->mlp->bwd(m, mb, l, &p, gp, m->dx, m->dtmp))
            return -1;
        if (split)
            keep(m, mb, l, GPT_WG_LN2, m->dtmp);
        gpt_layernorm_backward(m->dx, gp ? g.ln2w : NULL, gp ? g.ln2b : NULL, m->dtmp, a->xmid + o,
                               p.ln2w, a->ln2_mean + gpt_blk(m, l) * No,
                               a->ln2_rstd + gpt_blk(m, l) * No, No, C);
        if (blk->attn->bwd(m, mb, l, &p, gp, m->dx, m->dtmp))
            return -1;
        if (split)
            keep(m, mb, l, GPT_WG_LN1, m->dtmp);
        gpt_layernorm_backward(m->dx, gp ? g.ln1w : NULL, gp ? g.ln1b : NULL, m->dtmp, a->x + ox,
                               p.ln1w, a->ln1_mean + gpt_blk(m, l) * No,
                               a->ln1_rstd + gpt_blk(m, l) * No, No, C);
        if (HOOK(m, release, l + 1, GPT_BWD))
            return -1;
    }
    return 0;
}

/* The embeddings' gradients from d(x[0]) */
static int embed_grads(gpt_t *m, int mb, const gpt_real *dx)
{
    gpt_acts_t *a = &m->acts[mb];
    int b = m->b, C = m->C;
    gpt_group_t p0, g0;
    if (acquire(m, 0, GPT_BWD, &p0, &g0))
        return -1;
    for (int s = 0; s < b; s++)
        for (int t = 0; t < m->tl; t++) {
            const gpt_real *row = dx + ((size_t)s * m->tl + t) * C;
            gpt_real *pos = g0.wpe + (size_t)gpt_position(m, t) * C;
            for (int k = 0; k < C; k++)
                pos[k] += row[k];
        }
    if (m->ops.embed_bwd) {
        if (m->ops.embed_bwd(m->ops.ctx, a->tokens, dx, g0.wte, b))
            return -1;
    } else {
        gpt_embed_backward(g0.wte, a->tokens, dx, b * m->T, C);
    }
    return HOOK(m, release, 0, GPT_BWD);
}

int gpt_embed_bwd(gpt_t *m, int mb)
{
    /* nothing but weight gradients here */
    if (m->split_backward) {
        keep(m, mb, m->L, GPT_WG_EMBED, m->dx);
        return 0;
    }
    return embed_grads(m, mb, m->dx);
}

int gpt_head_wgrad(gpt_t *m, int mb)
{
    gpt_acts_t *a = &m->acts[mb];
    int N = m->b * m->T, No = m->b * m->tl, C = m->C, L = m->L;
    gpt_group_t p0, g0, p, g;
    if (acquire(m, 0, GPT_BWD, &p0, &g0))
        return -1;
    gpt_matmul_backward(NULL, g0.wte, NULL, a->logits, a->lnf_in, NULL, N, C, m->Vl, 0);
    if (HOOK(m, release, 0, GPT_BWD) || acquire(m, L + 1, GPT_BWD, &p, &g))
        return -1;
    gpt_layernorm_wgrad(g.lnfw, g.lnfb, gpt_wgrad_slot(m, mb, L, GPT_WG_LNF),
                        a->x + gpt_xblk(m, L) * No * C, a->lnf_mean, a->lnf_rstd, No, C);
    return HOOK(m, release, L + 1, GPT_BWD);
}

int gpt_blocks_wgrad(gpt_t *m, int mb, int l0, int l1)
{
    gpt_acts_t *a = &m->acts[mb];
    int No = m->b * m->tl, C = m->C;
    gpt_group_t p, g;
    for (int l = l1 - 1; l >= l0; l--) {
        size_t o = gpt_blk(m, l) * No * C, ox = gpt_xblk(m, l) * No * C;
        const gpt_layers_t *blk = &m->blocks[l];
        if (acquire(m, l + 1, GPT_BWD, &p, &g) || blk->mlp->wgrad(m, mb, l, &g))
            return -1;
        gpt_layernorm_wgrad(g.ln2w, g.ln2b, gpt_wgrad_slot(m, mb, l, GPT_WG_LN2), a->xmid + o,
                            a->ln2_mean + gpt_blk(m, l) * No, a->ln2_rstd + gpt_blk(m, l) * No, No,
                            C);
        if (blk->attn->wgrad(m, mb, l, &g))
            return -1;
        gpt_layernorm_wgrad(g.ln1w, g.ln1b, gpt_wgrad_slot(m, mb, l, GPT_WG_LN1), a->x + ox,
                            a->ln1_mean + gpt_blk(m, l) * No, a->ln1_rstd + gpt_blk(m, l) * No, No,
                            C);
        if (HOOK(m, release, l + 1, GPT_BWD))
            return -1;
    }
    return 0;
}

int gpt_embed_wgrad(gpt_t *m, int mb)
{
    return embed_grads(m, mb, gpt_wgrad_slot(m, mb, m->L, GPT_WG_EMBED));
}

int gpt_forward(gpt_t *m, int mb, double *loss_sum)
{
    if (gpt_embed_fwd(m, mb) || gpt_blocks_fwd(m, mb, 0, m->L))
        return -1;
    return gpt_head_fwd(m, mb, loss_sum);
}

int gpt_backward(gpt_t *m, int mb)
{
    /* the token table serves the head and the embedding: held across both, so that its
     * gradient is complete when the outer release hands it over */
    gpt_group_t p0, g0;
    if (acquire(m, 0, GPT_BWD, &p0, &g0))
        return -1;
    if (gpt_head_bwd(m, mb) || gpt_blocks_bwd(m, mb, 0, m->L) || gpt_embed_bwd(m, mb))
        return -1;
    return HOOK(m, release, 0, GPT_BWD);
}
