/*
 * Models: the published architectures of public models, with their source, and the parameter
 * count of any model by part (attention, MLP, experts, embeddings) so that each pipeline stage
 * knows what it holds.
 */
#include "planner.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* The numbers are the papers' and released configurations'; anything else is said so. */
static const mesh_plan_model_t plan_models[] = {
    {.name = "gpt3-175b",
     .layers = 96,
     .hidden = 12288,
     .heads = 96,
     .ffn = 49152,
     .vocab = 50257,
     .seq = 2048,
     .tied = 1,
     .dropout = 1,
     .batch_tokens = 1536.0 * 2048,
     .source = "Brown et al. 2020 (arXiv 2005.14165) Table 2.1: 96 layers, d_model 12288, 96 "
               "heads, ffn 4 x d_model, context 2048, GPT-2 vocabulary; batch 1536 x 2048 "
               "tokens as in Narayanan et al. 2021 (arXiv 2104.04473)"},
    {.name = "llama2-7b",
     .layers = 32,
     .hidden = 4096,
     .heads = 32,
     .ffn = 11008,
     .gated = 1,
     .vocab = 32000,
     .seq = 4096,
     .batch_tokens = 4194304,
     .source = "Touvron et al. 2023 (arXiv 2307.09288) sec. 2.2 (4096 context, 4M-token batch) "
               "and the released config (hidden 4096, 32 layers, 32 heads, ffn 11008, vocab "
               "32000)"},
    {.name = "llama2-13b",
     .layers = 40,
     .hidden = 5120,
     .heads = 40,
     .ffn = 13824,
     .gated = 1,
     .vocab = 32000,
     .seq = 4096,
     .batch_tokens = 4194304,
     .source = "Touvron et al. 2023 (arXiv 2307.09288) and the released config (hidden 5120, "
               "40 layers, 40 heads, ffn 13824)"},
    {.name = "llama2-70b",
     .layers = 80,
     .hidden = 8192,
     .heads = 64,
     .kv_heads = 8,
     .ffn = 28672,
     .gated = 1,
     .vocab = 32000,
     .seq = 4096,
     .batch_tokens = 4194304,
     .source = "Touvron et al. 2023 (arXiv 2307.09288) and the released config (hidden 8192, "
               "80 layers, 64 heads, 8 kv heads, ffn 28672)"},
    {.name = "llama3-8b",
     .layers = 32,
     .hidden = 4096,
     .heads = 32,
     .kv_heads = 8,
     .ffn = 14336,
     .gated = 1,
     .vocab = 128256,
     .seq = 8192,
     .source = "Llama Team 2024 (arXiv 2407.21783) Table 3: 32 layers, dim 4096, ffn 14336, 32 "
               "heads, 8 kv heads, vocabulary 128K (128256 in the released config), 8K context"},
    {.name = "llama3-70b",
     .layers = 80,
     .hidden = 8192,
     .heads = 64,
     .kv_heads = 8,
     .ffn = 28672,
     .gated = 1,
     .vocab = 128256,
     .seq = 8192,
     .source = "Llama Team 2024 (arXiv 2407.21783) Table 3: 80 layers, dim 8192, ffn 28672, 64 "
               "heads, 8 kv heads, 8K context"},
    {.name = "llama3-405b",
     .layers = 126,
     .hidden = 16384,
     .heads = 128,
     .kv_heads = 8,
     .ffn = 53248,
     .gated = 1,
     .vocab = 128256,
     .seq = 8192,
     .batch_tokens = 16777216,
     .source = "Llama Team 2024 (arXiv 2407.21783) Table 3 (126 layers, dim 16384, ffn 53248, "
               "128 heads, 8 kv heads) and sec. 3.4.1 (16M-token batch at 8K sequences)"},
    {.name = "mixtral-8x7b",
     .layers = 32,
     .hidden = 4096,
     .heads = 32,
     .kv_heads = 8,
     .gated = 1,
     .vocab = 32000,
     .seq = 32768,
     .experts = 8,
     .top_k = 2,
     .expert_ffn = 14336,
     .source = "Jiang et al. 2024 (arXiv 2401.04088) Table 1: dim 4096, 32 layers, head_dim "
               "128, hidden_dim 14336, 32 heads, 8 kv heads, context 32768, vocab 32000, 8 "
               "experts, top 2; the training sequence is not published (seq = the context)"},
    /* MLA attention per layer: q_a 7168x1536 + 1536 + q_b 1536x(128x192) + kv_a 7168x576
     * + 512 + kv_b 512x(128x256) + o (128x128)x7168 = 187107328 */
    {.name = "deepseek-v3",
     .layers = 61,
     .hidden = 7168,
     .heads = 128,
     .kv_heads = 128,
     .head_dim = 128,
     .ffn = 18432,
     .gated = 1,
     .vocab = 129280,
     .seq = 4096,
     .attn_params = 187107328.0,
     .experts = 256,
     .top_k = 8,
     .expert_ffn = 2048,
     .shared_experts = 1,
     .dense_layers = 3,
     .route_nodes = 4,
     .batch_tokens = 15360.0 * 4096,
     .source = "DeepSeek-AI 2024 (arXiv 2412.19437) sec. 4.2 and the released config: 61 "
               "layers (first 3 dense, ffn 18432), hidden 7168, MLA with 128 heads, 256 routed "
               "experts of ffn 2048 plus 1 shared, top 8, vocab 129280, 4K sequences, batch "
               "15360 sequences; node-limited routing, each token to at most 4 nodes (sec. "
               "2.1.2); the 14B multi-token-prediction module is left out"},
};

#define PLAN_NMODELS ((int)(sizeof(plan_models) / sizeof(plan_models[0])))

int mesh_plan_model_preset_count(void)
{
    return PLAN_NMODELS;
}

const mesh_plan_model_t *mesh_plan_model_preset_at(int i)
{
    return i >= 0 && i < PLAN_NMODELS ? &plan_models[i] : NULL;
}

mesh_status_t mesh_plan_model_preset(const char *name, mesh_plan_model_t *out)
{
    if (!name || !out)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_plan_model_preset: "
                              "%s is NULL",
                              name ? "out" : "name");
    for (int i = 0; i < PLAN_NMODELS; i++)
        if (strcasecmp(plan_models[i].name, name) == 0) {
            *out = plan_models[i];
            return MESH_OK;
        }
    return mesh_par_error(MESH_ERR_NOT_FOUND,
                          "model '%s' is not a preset (mesh-plan "
                          "--list-models names them)",
                          name);
}

mesh_status_t plan_model_norm(const mesh_plan_model_t *in, mesh_plan_model_t *m)
{
    *m = *in;
#define PLAN_POS(field, lo)                                                                        \
    if (m->field < (lo))                                                                           \
        return mesh_par_error(MESH_ERR_INVALID_ARG, "model %s: " #field " %d must be at least %d", \
                              m->name[0] ? m->name : "(unnamed)", m->field, lo);
    PLAN_POS(layers, 1)
    PLAN_POS(hidden, 1)
    PLAN_POS(heads, 1)
    PLAN_POS(vocab, 1)
    PLAN_POS(seq, 1)
    PLAN_POS(kv_heads, 0)
    PLAN_POS(head_dim, 0)
    PLAN_POS(ffn, 0)
    PLAN_POS(experts, 0)
    PLAN_POS(top_k, 0)
    PLAN_POS(expert_ffn, 0)
    PLAN_POS(shared_experts, 0)
    PLAN_POS(dense_layers, 0)
    PLAN_POS(moe_interval, 0)
    PLAN_POS(route_nodes, 0)
#undef PLAN_POS
    const char *nm = m->name[0] ? m->name : "(unnamed)";
    if (m->kv_heads == 0)
        m->kv_heads = m->heads;
    if (m->heads % m->kv_heads != 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "model %s: heads %d is not a multiple of "
                              "kv_heads %d",
                              nm, m->heads, m->kv_heads);
    if (m->head_dim == 0) {
        if (m->hidden % m->heads != 0)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "model %s: hidden %d is not divisible "
                                  "by heads %d (give head_dim)",
                                  nm, m->hidden, m->heads);
        m->head_dim = m->hidden / m->heads;
    }
    if (m->ffn == 0)
        m->ffn = 4 * m->hidden;
    m->gated = m->gated != 0;
    m->tied = m->tied != 0;
    m->dropout = m->dropout != 0;
    if (!(m->params >= 0) || !(m->attn_params >= 0) || !(m->batch_tokens >= 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "model %s: params, attn_params and "
                              "batch_tokens must not be negative",
                              nm);
    if (m->experts > 0) {
        if (m->top_k < 1 || m->top_k > m->experts)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "model %s: top_k %d must be in 1..%d "
                                  "(experts)",
                                  nm, m->top_k, m->experts);
        if (m->expert_ffn == 0)
            m->expert_ffn = m->ffn;
        if (m->moe_interval == 0)
            m->moe_interval = 1;
        if (m->dense_layers + m->moe_interval > m->layers)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "model %s: dense_layers %d and "
                                  "moe_interval %d leave no MoE layer of %d",
                                  nm, m->dense_layers, m->moe_interval, m->layers);
    } else if (m->top_k || m->expert_ffn || m->shared_experts || m->dense_layers ||
               m->moe_interval || m->route_nodes) {
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "model %s: top_k, expert_ffn, "
                              "shared_experts, dense_layers, moe_interval and route_nodes need "
                              "experts > 0",
                              nm);
    }
    /* far beyond any model, and what keeps the per-stage arrays small */
    if (m->layers > 10000 || m->hidden > (1 << 24) || m->seq > (1 << 26) || m->vocab > (1 << 26) ||
        m->experts > (1 << 16))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "model %s: layers, hidden, seq, vocab or "
                              "experts out of range",
                              nm);
    return MESH_OK;
}

static void plan_counts_raw(const mesh_plan_model_t *m, plan_counts_t *c)
{
    double h = m->hidden, q = (double)m->heads * m->head_dim,
           kv = (double)m->kv_heads * m->head_dim;
    double mats = m->gated ? 3.0 : 2.0;
    memset(c, 0, sizeof(*c));
    /* Q and O are h x q, K and V h x kv */
    c->attn = m->attn_params > 0 ? m->attn_params : 2.0 * h * q + 2.0 * h * kv;
    c->norms = 2.0 * h;
    c->mlp = mats * h * m->ffn;
    c->embed = (double)m->vocab * h;
    c->output = c->embed;
    c->moe_from = m->layers;
    if (m->experts > 0) {
        c->moe_from = m->dense_layers;
        c->expert = mats * h * m->expert_ffn;
        c->shared = m->shared_experts * c->expert;
        c->router = h * m->experts;
    }
    int moe = 0;
    for (int i = 0; i < m->layers; i++)
        moe += plan_is_moe_layer(m, c, i);
    int dense = m->layers - moe;
    double layer_common = c->attn + c->norms;
    c->total = m->layers * layer_common + dense * c->mlp +
               moe * (m->experts * c->expert + c->shared + c->router) + c->embed +
               (m->tied ? 0.0 : c->output) + h;
    c->active = m->layers * layer_common + dense * c->mlp +
                moe * (m->top_k * c->expert + c->shared + c->router) + c->embed +
                (m->tied ? 0.0 : c->output) + h;
}

void plan_model_counts(const mesh_plan_model_t *m, plan_counts_t *c)
{
    plan_counts_raw(m, c);
    if (m->params > 0 && c->total > 0) {
        double s = m->params / c->total;
        c->attn *= s;
        c->norms *= s;
        c->mlp *= s;
        c->expert *= s;
        c->shared *= s;
        c->router *= s;
        c->embed *= s;
        c->output *= s;
        c->total *= s;
        c->active *= s;
    }
}

mesh_status_t mesh_plan_model_count(const mesh_plan_model_t *model, double *total, double *active)
{
    mesh_plan_model_t m;
    plan_counts_t c;
    if (!model)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_model_count: model is "
                                                    "NULL");
    MESH_PAR_CHECK(plan_model_norm(model, &m));
    plan_model_counts(&m, &c);
    if (total)
        *total = c.total;
    if (active)
        *active = c.active;
    return MESH_OK;
}
