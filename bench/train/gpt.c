/* The GPT's parameter table, shards, initialisation and activation buffers. */
#include "gpt.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t local_numel(const gpt_t *m, const gpt_tensor_t *t)
{
    size_t n = (size_t)t->rows * t->cols;
    if (t->split == GPT_EXPERT_ROWS || t->split == GPT_EXPERT_COLS)
        return n / (size_t)m->cfg.ep / (size_t)m->cfg.tp;
    return t->split == GPT_WHOLE ? n : n / (size_t)m->cfg.tp;
}

static void add(gpt_t *m, const char *name, int rows, int cols, gpt_split_t split, int group,
                size_t field_off)
{
    gpt_tensor_t *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->rows = rows, t->cols = cols, t->split = split, t->group = group;
    t->field_off = field_off;
    t->expert = split == GPT_EXPERT_ROWS || split == GPT_EXPERT_COLS;
    t->numel = local_numel(m, t);
    t->offset = m->n_params;
    m->n_params += t->numel;
}

gpt_layers_t gpt_layer_spec(const gpt_config_t *cfg, int l)
{
    int moe = cfg->experts > 0 && l >= 0 && l < 64 && ((cfg->moe_layers >> l) & 1);
    return (gpt_layers_t){.attn = &gpt_attention, .mlp = moe ? &gpt_moe : &gpt_mlp};
}

/* A block's parameter: "h<l>.<leaf>" in group l + 1. */
static void add_block(gpt_t *m, int l, const gpt_tensor_decl_t *d)
{
    char name[32];
    snprintf(name, sizeof(name), "h%d.%s", l, d->leaf);
    add(m, name, d->rows, d->cols, d->split, l + 1, d->field_off);
}

/* Block l's tensors: its layernorms around the layers of its spec, each layer's declared. */
static void add_block_tensors(gpt_t *m, int l)
{
    int C = m->C;
    const gpt_tensor_decl_t ln1[] = {{"ln1w", C, 1, GPT_WHOLE, offsetof(gpt_group_t, ln1w)},
                                     {"ln1b", C, 1, GPT_WHOLE, offsetof(gpt_group_t, ln1b)}};
    const gpt_tensor_decl_t ln2[] = {{"ln2w", C, 1, GPT_WHOLE, offsetof(gpt_group_t, ln2w)},
                                     {"ln2b", C, 1, GPT_WHOLE, offsetof(gpt_group_t, ln2b)}};
    const gpt_layer_t *layers[] = {m->blocks[l].attn, m->blocks[l].mlp};
    for (int s = 0; s < 2; s++) {
        gpt_tensor_decl_t d[GPT_LAYER_TENSORS_MAX];
        const gpt_tensor_decl_t *ln = s == 0 ? ln1 : ln2;
        for (int i = 0; i < 2; i++)
            add_block(m, l, &ln[i]);
        int n = layers[s]->tensors(m, l, d);
        for (int i = 0; i < n; i++)
            add_block(m, l, &d[i]);
    }
}

/* The mixture-of-experts sizes; -1 and a message naming the option when they do not fit. */
static int moe_sizes(gpt_t *m, char *err, size_t errlen)
{
    const gpt_config_t *c = &m->cfg;
    int ep = c->ep < 1 ? 1 : c->ep;
    m->cfg.ep = ep;
    if (c->experts <= 0) {
        if (ep > 1)
            return snprintf(err, errlen, "ep=%d needs --experts", ep), -1;
        return 0;
    }
    if (c->topk < 1 || c->topk > c->experts)
        return snprintf(err, errlen, "--topk %d must be 1..--experts %d", c->topk, c->experts), -1;
    if (c->experts % ep)
        return snprintf(err, errlen, "--experts %d does not split evenly across ep=%d", c->experts,
                        ep),
               -1;
    int F = c->expert_ffn > 0 ? c->expert_ffn : 4 * c->d_model;
    if (F % c->tp)
        return snprintf(err, errlen, "--expert-ffn %d does not split evenly across tp=%d", F,
                        c->tp),
               -1;
    if (m->L < 64 && (c->moe_layers >> m->L))
        return snprintf(err, errlen, "--moe-layers names a block beyond --layers %d", m->L), -1;
    if (!c->moe_layers)
        return snprintf(err, errlen, "--moe-layers chooses no block"), -1;
    m->E = c->experts, m->K = c->topk, m->El = m->E / ep, m->e0 = m->El * c->ep_rank;
    m->Fe = F, m->Fel = F / c->tp;
    return 0;
}

int gpt_create(gpt_t *m, const gpt_config_t *cfg, char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    int tp = cfg->tp < 1 ? 1 : cfg->tp, cp = cfg->cp < 1 ? 1 : cfg->cp;
    m->cfg.tp = tp;
    m->cfg.cp = cp;
    m->C = cfg->d_model, m->T = cfg->seq, m->V = cfg->vocab, m->L = cfg->layers;
    m->NH = cfg->heads;
    if (m->C < 1 || m->T < 1 || m->V < 1 || m->L < 1 || m->NH < 1)
        return snprintf(err, errlen, "every size must be positive"), -1;
    if (m->T % cp)
        return snprintf(err, errlen, "--seq %d does not split evenly across cp=%d", m->T, cp), -1;
    m->T /= cp;
    if (m->C % m->NH)
        return snprintf(err, errlen, "--d-model %d is not a multiple of --heads %d", m->C, m->NH),
               -1;
    const char *bad = NULL;
    int val = 0;
    if (m->NH % tp)
        bad = "--heads", val = m->NH;
    else if (m->V % tp)
        bad = "--vocab", val = m->V;
    else if (cfg->sequence_parallel && m->T % tp)
        bad = cp > 1 ? "--seq / cp (with --sequence-parallel)" : "--seq (with --sequence-parallel)",
        val = m->T;
    if (bad)
        return snprintf(err, errlen, "%s %d does not split evenly across tp=%d", bad, val, tp), -1;
    if (moe_sizes(m, err, errlen))
        return -1;
    m->hs = m->C / m->NH;
    m->Vl = m->V / tp, m->v0 = m->Vl * cfg->tp_rank;
    m->NHl = m->NH / tp, m->Cl = m->NHl * m->hs;
    m->Fl = 4 * m->C / tp;
    m->tl = cfg->sequence_parallel ? m->T / tp : m->T;
    m->t0 = m->T * cfg->cp_rank + (cfg->sequence_parallel ? m->tl * cfg->tp_rank : 0);
    m->blocks = calloc((size_t)m->L, sizeof(gpt_layers_t));
    m->tensors = calloc((size_t)(4 + (4 + 2 * GPT_LAYER_TENSORS_MAX) * m->L), sizeof(gpt_tensor_t));
    if (!m->blocks || !m->tensors)
        return snprintf(err, errlen, "out of memory"), -1;
    int C = m->C;
    add(m, "wte", m->V, C, tp > 1 ? GPT_VOCAB : GPT_WHOLE, 0, offsetof(gpt_group_t, wte));
    add(m, "wpe", cfg->seq, C, GPT_WHOLE, 0, offsetof(gpt_group_t, wpe));
    for (int l = 0; l < m->L; l++) {
        m->blocks[l] = cfg->spec ? cfg->spec(&m->cfg, l) : gpt_layer_spec(&m->cfg, l);
        add_block_tensors(m, l);
    }
    add(m, "lnf.w", C, 1, GPT_WHOLE, m->L + 1, offsetof(gpt_group_t, lnfw));
    add(m, "lnf.b", C, 1, GPT_WHOLE, m->L + 1, offsetof(gpt_group_t, lnfb));
    return 0;
}

int gpt_position(const gpt_t *m, int t)
{
    if (!m->cfg.pos)
        return m->t0 + t;
    return m->cfg.pos[(m->cfg.sequence_parallel ? m->tl * m->cfg.tp_rank : 0) + t];
}

int gpt_tensor_index(const gpt_t *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name))
            return i;
    return -1;
}

void gpt_group_pointers(const gpt_t *m, int group, gpt_real *flat, gpt_group_t *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < m->n_tensors; i++) {
        const gpt_tensor_t *t = &m->tensors[i];
        if (t->group == group)
            *(gpt_real **)((char *)out + t->field_off) = flat + t->offset;
    }
}

int gpt_flat_acquire(void *ctx, int group, int phase, gpt_group_t *p, gpt_group_t *g)
{
    gpt_flat_t *f = ctx;
    gpt_group_pointers(f->m, group, f->params, p);
    if (g)
        gpt_group_pointers(f->m, group, f->grads, g);
    (void)phase;
    return 0;
}

/* bytes ALLOC has allocated, for gpt_alloc_acts's account */
static size_t allocated;

#define ALLOC(p, n)                                                                                \
    do {                                                                                           \
        if (!((p) = calloc((size_t)(n), sizeof(*(p)))))                                            \
            return -1;                                                                             \
        allocated += (size_t)(n) * sizeof(*(p));                                                   \
    } while (0)

/* Whether layer k (0 attention, 1 MLP) of block l is the first use of its layer: each layer's
 * own state is kept once per model. */
static int first_use(const gpt_t *m, int l, int k)
{
    const gpt_layer_t *x = k ? m->blocks[l].mlp : m->blocks[l].attn;
    for (int j = 0; j <= l; j++)
        for (int i = 0; i < 2 && (j < l || i < k); i++)
            if ((i ? m->blocks[j].mlp : m->blocks[j].attn) == x)
                return 0;
    return 1;
}

/* The layers' own state: for the micro-batches (wgrad 0) or the split backward (1). */
static int layers_alloc(gpt_t *m, int wgrad)
{
    for (int l = 0; l < m->L; l++)
        for (int k = 0; k < 2; k++) {
            const gpt_layer_t *x = k ? m->blocks[l].mlp : m->blocks[l].attn;
            int (*fn)(gpt_t *) = wgrad ? x->alloc_wgrad : x->alloc;
            if (fn && first_use(m, l, k) && fn(m))
                return -1;
        }
    return 0;
}

static void layers_release(gpt_t *m)
{
    for (int l = 0; m->blocks && l < m->L; l++)
        for (int k = 0; k < 2; k++) {
            const gpt_layer_t *x = k ? m->blocks[l].mlp : m->blocks[l].attn;
            if (x && x->release && first_use(m, l, k))
                x->release(m);
        }
}

/* The arrays of a micro-batch kept from its forward to its backward pass, which micro-batches
 * that never live at once share (gpt_share_acts); tokens, targets, lse and loss stay each
 * micro-batch's own (the step loads them all first). */
#define GPT_SLOT_ARRAYS(a)                                                                         \
    {                                                                                              \
        &(a)->x, &(a)->xmid, &(a)->ln1, &(a)->ln2, &(a)->ln1_mean, &(a)->ln1_rstd, &(a)->ln2_mean, \
            &(a)->ln2_rstd, &(a)->ln1_in, &(a)->ln2_in, &(a)->qkv, &(a)->att, &(a)->atty,          \
            &(a)->fch, &(a)->fch_gelu, &(a)->lnf, &(a)->lnf_mean, &(a)->lnf_rstd, &(a)->lnf_in,    \
            &(a)->logits                                                                           \
    }

/* The per-block arrays of one micro-batch: nb blocks, nx block inputs and outputs. */
static int alloc_block_arrays(gpt_t *m, gpt_acts_t *a, size_t nb, size_t nx)
{
    size_t C = m->C, N = (size_t)m->b * m->T, No = (size_t)m->b * m->tl;
    ALLOC(a->x, nx * No * C);
    ALLOC(a->xmid, nb * No * C);
    ALLOC(a->ln1, nb * No * C);
    ALLOC(a->ln2, nb * No * C);
    ALLOC(a->ln1_mean, nb * No);
    ALLOC(a->ln1_rstd, nb * No);
    ALLOC(a->ln2_mean, nb * No);
    ALLOC(a->ln2_rstd, nb * No);
    ALLOC(a->ln1_in, nb * N * C);
    ALLOC(a->ln2_in, nb * N * C);
    ALLOC(a->qkv, nb * N * 3 * m->Cl);
    ALLOC(a->att, nb * m->b * m->NHl * (size_t)m->T * m->T);
    ALLOC(a->atty, nb * N * m->Cl);
    ALLOC(a->fch, nb * N * m->Fl);
    ALLOC(a->fch_gelu, nb * N * m->Fl);
    return 0;
}

static void free_block_arrays(gpt_acts_t *a)
{
    gpt_real *f[] = {a->x,        a->xmid,     a->ln1,      a->ln2,    a->ln1_mean,
                     a->ln1_rstd, a->ln2_mean, a->ln2_rstd, a->ln1_in, a->ln2_in,
                     a->qkv,      a->att,      a->atty,     a->fch,    a->fch_gelu};
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
        free(f[k]);
}

int gpt_alloc_acts(gpt_t *m, int b, int n_mb)
{
    m->b = b, m->n_mb = n_mb, m->slots = n_mb;
    size_t before = allocated;
    ALLOC(m->acts, n_mb);
    size_t C = m->C, N = (size_t)b * m->T, No = (size_t)b * m->tl;
    size_t wide = 3 * (size_t)m->Cl > (size_t)m->Fl ? 3 * (size_t)m->Cl : (size_t)m->Fl;
    for (int i = 0; i < n_mb; i++) {
        gpt_acts_t *a = &m->acts[i];
        size_t start = allocated;
        if (alloc_block_arrays(m, a, (size_t)m->L, (size_t)m->L + 1))
            return -1;
        ALLOC(a->lnf, No * C);
        ALLOC(a->lnf_mean, No);
        ALLOC(a->lnf_rstd, No);
        ALLOC(a->lnf_in, N * C);
        ALLOC(a->logits, N * m->Vl);
        m->slot_bytes = allocated - start;
        ALLOC(a->lse, N);
        ALLOC(a->loss, N);
        ALLOC(a->tokens, N);
        ALLOC(a->targets, N);
    }
    ALLOC(m->partial, N * C);
    ALLOC(m->dinside, N * C);
    ALLOC(m->wide_a, N * wide);
    ALLOC(m->wide_b, N * wide);
    ALLOC(m->datt, m->T);
    ALLOC(m->dx, No * C);
    ALLOC(m->dtmp, No * C);
    ALLOC(m->dloss, N);
    m->act_bytes = allocated - before;
    return layers_alloc(m, 0);
}

/* Bytes of alloc_block_arrays's arrays for nb blocks and nx block inputs and outputs. */
static size_t block_bytes(const gpt_t *m, size_t nb, size_t nx)
{
    size_t C = m->C, N = (size_t)m->b * m->T, No = (size_t)m->b * m->tl;
    size_t per = 3 * No * C + 4 * No + 2 * N * C + N * 3 * m->Cl +
                 (size_t)m->b * m->NHl * (size_t)m->T * m->T + N * m->Cl + 2 * N * m->Fl;
    return (nx * No * C + nb * per) * sizeof(gpt_real);
}

int gpt_keep_blocks(gpt_t *m, const uint8_t *mine)
{
    if (m->blk || m->slots != m->n_mb || (m->acts && m->acts[0].wg))
        return -1;
    m->blk = malloc(sizeof(int) * (size_t)m->L);
    m->xblk = malloc(sizeof(int) * ((size_t)m->L + 1));
    if (!m->blk || !m->xblk)
        return -1;
    int nb = 0, nx = 0;
    for (int l = 0; l <= m->L; l++) {
        if (l < m->L)
            m->blk[l] = mine[l] ? nb++ : -1;
        /* x[l] is block l's input and block l - 1's output */
        m->xblk[l] = (l < m->L && mine[l]) || (l > 0 && mine[l - 1]) ? nx++ : -1;
    }
    for (int i = 0; i < m->n_mb; i++) {
        free_block_arrays(&m->acts[i]);
        if (alloc_block_arrays(m, &m->acts[i], (size_t)nb, (size_t)nx))
            return -1;
    }
    size_t less =
        block_bytes(m, (size_t)m->L, (size_t)m->L + 1) - block_bytes(m, (size_t)nb, (size_t)nx);
    m->act_bytes -= (size_t)m->n_mb * less;
    m->slot_bytes -= less;
    m->nblk = nb;
    return 0;
}

int gpt_share_acts(gpt_t *m, int slots)
{
    if (slots < 1 || slots > m->n_mb || m->slots != m->n_mb || (m->acts && m->acts[0].wg))
        return -1;
    for (int i = slots; i < m->n_mb; i++) {
        gpt_acts_t *a = &m->acts[i], *s = &m->acts[i % slots];
        gpt_real **mine[] = GPT_SLOT_ARRAYS(a), **theirs[] = GPT_SLOT_ARRAYS(s);
        for (size_t k = 0; k < sizeof(mine) / sizeof(mine[0]); k++) {
            free(*mine[k]);
            *mine[k] = *theirs[k];
        }
    }
    m->act_bytes -= (size_t)(m->n_mb - slots) * m->slot_bytes;
    m->slots = slots;
    return 0;
}

size_t gpt_wgrad_slot_numel(const gpt_t *m, int slot)
{
    size_t N = (size_t)m->b * m->T, No = (size_t)m->b * m->tl, C = m->C;
    switch (slot) {
    case GPT_WG_MLP_PARTIAL:
    case GPT_WG_ATTN_PARTIAL:
        return N * C;
    case GPT_WG_MLP_DFCH:
        return N * m->Fl;
    case GPT_WG_ATTN_DQKV:
        return N * 3 * m->Cl;
    default:
        return No * C;
    }
}

gpt_real *gpt_wgrad_slot(gpt_t *m, int mb, int layer, int slot)
{
    size_t off = 0, per_layer = 0;
    for (int s = 0; s < GPT_WG_PER_LAYER; s++) {
        if (s == slot)
            off = per_layer;
        per_layer += gpt_wgrad_slot_numel(m, s);
    }
    if (layer == m->L) /* the final layernorm's and the embedding's, one after the other */
        off = slot == GPT_WG_EMBED ? gpt_wgrad_slot_numel(m, GPT_WG_LNF) : 0;
    size_t at = layer == m->L ? (m->blk ? (size_t)m->nblk : (size_t)m->L) : gpt_blk(m, layer);
    return m->acts[mb].wg + at * per_layer + off;
}

int gpt_alloc_wgrad(gpt_t *m)
{
    size_t per_layer = 0;
    for (int s = 0; s < GPT_WG_PER_LAYER; s++)
        per_layer += gpt_wgrad_slot_numel(m, s);
    size_t n =
        (size_t)(m->blk ? m->nblk : m->L) * per_layer + 2 * gpt_wgrad_slot_numel(m, GPT_WG_LNF);
    for (int i = 0; i < m->n_mb; i++)
        if (i < m->slots)
            ALLOC(m->acts[i].wg, n);
        else
            m->acts[i].wg = m->acts[i % m->slots].wg;
    return layers_alloc(m, 1);
}

void gpt_destroy(gpt_t *m)
{
    for (int i = 0; m->acts && i < m->n_mb; i++) {
        gpt_acts_t *a = &m->acts[i];
        gpt_real **f[] = GPT_SLOT_ARRAYS(a);
        for (size_t k = 0; i < m->slots && k < sizeof(f) / sizeof(f[0]); k++)
            free(*f[k]);
        if (i < m->slots)
            free(a->wg);
        free(a->lse), free(a->loss), free(a->tokens), free(a->targets);
    }
    layers_release(m);
    free(m->blocks), free(m->acts), free(m->tensors), free(m->partial), free(m->dinside);
    free(m->blk), free(m->xblk);
    free(m->wide_a), free(m->wide_b), free(m->datt), free(m->dx), free(m->dtmp), free(m->dloss);
    memset(m, 0, sizeof(*m));
}

/* Counter-based: value i of a stream depends on (seed, stream, i) only. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static double unit(uint64_t seed, uint64_t stream, uint64_t i)
{
    return ((double)(mix(mix(seed + 0x9e3779b97f4a7c15ull * (stream + 1)) + i) >> 11) + 0.5) /
           9007199254740992.0;
}

void gpt_init_full(const gpt_t *m, const gpt_tensor_t *t, uint64_t seed, gpt_real *full)
{
    size_t n = (size_t)t->rows * t->cols;
    const char *leaf = strrchr(t->name, '.');
    leaf = leaf ? leaf + 1 : t->name;
    size_t len = strlen(leaf);
    int is_ln = !strncmp(leaf, "ln", 2) || !strcmp(t->name, "lnf.w") || !strcmp(t->name, "lnf.b");
    if (is_ln || (t->cols == 1 && leaf[len - 1] == 'b')) {
        gpt_real v = (is_ln && leaf[len - 1] == 'w') ? 1.0f : 0.0f;
        for (size_t i = 0; i < n; i++)
            full[i] = v;
        return;
    }
    double std = 0.02;
    if (!strcmp(leaf, "attprojw") || !strcmp(leaf, "fcprojw") || !strcmp(leaf, "eprojw"))
        std /= sqrt(2.0 * m->L);
    if (!strcmp(t->name, "wpe"))
        std = 0.01;
    uint64_t stream = name_hash(t->name);
    for (size_t i = 0; i < n; i++) {
        double u1 = unit(seed, stream, 2 * i), u2 = unit(seed, stream, 2 * i + 1);
        full[i] = (gpt_real)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* Calls fn(local index, full index, count) for the runs of a shard. */
static void shard_runs(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, int e0,
                       void (*fn)(void *, size_t, size_t, size_t), void *ctx)
{
    size_t rows = (size_t)t->rows, cols = (size_t)t->cols;
    gpt_split_t split = t->split;
    if (tp <= 1 && !t->expert)
        split = GPT_WHOLE;
    switch (split) {
    case GPT_WHOLE:
        fn(ctx, 0, 0, rows * cols);
        break;
    case GPT_ROWS:
    case GPT_VOCAB: {
        size_t r = rows / (size_t)tp;
        fn(ctx, 0, r * (size_t)rank * cols, r * cols);
        break;
    }
    case GPT_ROWS_QKV: {
        size_t part = rows / 3, r = part / (size_t)tp;
        for (size_t p = 0; p < 3; p++)
            fn(ctx, p * r * cols, (p * part + r * (size_t)rank) * cols, r * cols);
        break;
    }
    case GPT_COLS: {
        size_t c = cols / (size_t)tp;
        for (size_t i = 0; i < rows; i++)
            fn(ctx, i * c, i * cols + c * (size_t)rank, c);
        break;
    }
    case GPT_EXPERT_ROWS: { /* expert e's rows e F .. (e + 1) F - 1, F / tp of them here */
        size_t F = (size_t)m->Fe, f = F / (size_t)tp;
        for (size_t i = 0; i < (size_t)m->El; i++)
            fn(ctx, i * f * cols, ((e0 + i) * F + f * (size_t)rank) * cols, f * cols);
        break;
    }
    case GPT_EXPERT_COLS: { /* expert e's rows e C .. (e + 1) C - 1, their F / tp columns here */
        size_t C = (size_t)m->C, f = cols / (size_t)tp;
        for (size_t i = 0; i < (size_t)m->El * C; i++)
            fn(ctx, i * f, ((size_t)e0 * C + i) * cols + f * (size_t)rank, f);
        break;
    }
    }
}

typedef struct {
    gpt_real *dst;
    const gpt_real *src;
    int to_local;
} copy_ctx_t;

static void copy_run(void *p, size_t local, size_t full, size_t n)
{
    copy_ctx_t *c = p;
    if (c->to_local)
        memcpy(c->dst + local, c->src + full, n * sizeof(gpt_real));
    else
        memcpy(c->dst + full, c->src + local, n * sizeof(gpt_real));
}

void gpt_slice(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, const gpt_real *full,
               gpt_real *local)
{
    copy_ctx_t c = {local, full, 1};
    shard_runs(m, t, tp, rank, m->e0, copy_run, &c);
}

void gpt_unslice(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, const gpt_real *local,
                 gpt_real *full)
{
    copy_ctx_t c = {full, local, 0};
    shard_runs(m, t, tp, rank, m->e0, copy_run, &c);
}

void gpt_unslice_ep(const gpt_t *m, const gpt_tensor_t *t, int tp, int rank, int ep_rank,
                    const gpt_real *local, gpt_real *full)
{
    copy_ctx_t c = {full, local, 0};
    shard_runs(m, t, tp, rank, ep_rank * m->El, copy_run, &c);
}
