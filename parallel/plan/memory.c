/*
 * Memory per rank: model states by ZeRO stage, activations per layer (Korthikanti et al. 2022,
 * "Reducing Activation Recomputation in Large Transformer Models", generalised to grouped-query
 * attention, gated MLPs and experts), the micro-batches a pipeline stage holds, and buffers.
 */
#include "planner.h"

#include <math.h>
#include <stdio.h>

void mesh_plan_state_bytes_at(int zero, int d, mesh_plan_precision_t precision, int pipelined,
                              double *params, double *grads, double *optim)
{
    double dd = d > 1 ? d : 1;
    /* bf16: parameters and gradients (2 + 2), fp32 master weights and Adam m and v (4 + 4 + 4);
     * fp32: parameters and gradients (4 + 4), the parameters their own master, m and v (4 + 4) */
    int fp32 = precision == MESH_PLAN_PREC_FP32;
    double p = fp32 ? 4 : 2, g = fp32 ? 4 : 2, o = fp32 ? 8 : 12;
    double ps = p, gs = g; /* what a rank keeps of each between steps */
    if (zero >= 1)
        o /= dd;
    if (zero >= 2)
        gs = g / dd;
    if (zero >= 3)
        ps = p / dd;
    /* under a pipeline stages 2 and 3 reduce and gather once per step: through the step the
     * whole gradient (stage 3: and the whole parameters) beside the shard */
    if (pipelined && zero >= 2) {
        gs += g;
        if (zero >= 3)
            ps += p;
    }
    if (params)
        *params = ps;
    if (grads)
        *grads = gs;
    if (optim)
        *optim = o;
}

void mesh_plan_state_bytes(int zero, int d, double *params, double *grads, double *optim)
{
    mesh_plan_state_bytes_at(zero, d, MESH_PLAN_PREC_BF16, 0, params, grads, optim);
}

/* Bytes one layer keeps per micro-batch, per rank, for a normalised model, with e bytes an
 * element (2 in bf16, 4 in fp32; dropout masks take one byte). In units of sbh
 * (s the sequence a rank holds, b the micro-batch, h the hidden size): the layer norms' inputs,
 * the QKV and MLP inputs and the dropout masks are replicated across tp unless sequence
 * parallelism splits them; Q, K, V, the attention output and the MLP's intermediates are split
 * by tp; the attention scores (softmax output, and with dropout its mask and output) are what
 * selective recomputation drops. */
static double plan_act(const mesh_plan_model_t *m, int mbs, int tp, int cp, int sp,
                       mesh_plan_recompute_t rc, int moe, int etp, double e)
{
    double b = mbs, s = (double)m->seq / cp, h = m->hidden, t = tp;
    double tsp = sp && tp > 1 ? t : 1;
    double sb = s * b;
    if (rc == MESH_PLAN_RECOMPUTE_FULL)
        return e * sb * h / tsp;

    double q = (double)m->heads * m->head_dim / t;
    double kv = (m->kv_heads >= tp ? (double)m->kv_heads / t : 1.0) * m->head_dim;
    double mats = (m->gated ? 3.0 : 2.0) * e;
    /* norm 1 input, QKV input, norm 2 input, MLP input, and two dropout masks */
    double repl = (4.0 * e + (m->dropout ? 2.0 : 0.0)) * sb * h / tsp;
    /* Q, K, V, the attention output (input of the output projection) */
    double attn = e * sb * q + 2.0 * e * sb * kv + e * sb * q;
    double scores = 0;
    if (rc == MESH_PLAN_RECOMPUTE_NONE) /* queries held here against every key: the softmax
                                           output, and with dropout its mask and output */
        scores = (m->dropout ? 2.0 * e + 1.0 : e) * (m->heads / t) * s * m->seq * b;
    double mlp;
    if (moe) {
        /* tokens that enter the MoE layer on this rank; each goes to top_k experts, whose
         * inputs and outputs are copied to every etp rank of an expert while the
         * intermediates are split by etp */
        double tok = sb / tsp, k = m->top_k;
        mlp = tok * k * (2.0 * e * h * etp + mats * m->expert_ffn) +
              sb * mats * (double)m->shared_experts * m->expert_ffn / t +
              tok * 4.0 * m->experts; /* fp32 router logits */
    } else {
        mlp = sb * mats * m->ffn / t;
    }
    return repl + attn + scores + mlp;
}

double mesh_plan_act_layer(const mesh_plan_model_t *model, int mbs, int tp, int cp, int sp,
                           mesh_plan_recompute_t recompute, int moe, int etp)
{
    mesh_plan_model_t m;
    if (!model || mbs < 1 || tp < 1 || cp < 1 || etp < 1 || recompute < 0 ||
        recompute >= MESH_PLAN_RECOMPUTE_COUNT)
        return 0;
    if (plan_model_norm(model, &m) != MESH_OK)
        return 0;
    if (moe && m.experts == 0)
        return 0;
    return plan_act(&m, mbs, tp, cp, sp, recompute, moe, etp, 2.0);
}

double mesh_plan_inflight(mesh_pp_kind_t s, int p, int m, int v, int stage)
{
    if (p < 1 || m < 1 || stage < 0 || stage >= p)
        return 0;
    if (v < 1)
        v = 1;
    switch (s) {
    case MESH_PP_NONE:
        return 1;
    case MESH_PP_AFAB:
        return m;
    case MESH_PP_1F1B:
        return p - stage < m ? p - stage : m;
    /* ZB-H1 defers the W of stage i's first i micro-batches: every stage holds 1F1B's first
     * stage's p until their W (the zero-bubble paper's pM_B on every worker) */
    case MESH_PP_ZB1:
        return p < m ? p : m;
    case MESH_PP_INTERLEAVED: {
        /* Megatron's warm-up: 2(p - stage - 1) + (v - 1)p chunks, one more in steady state */
        double chunks = 2.0 * (p - stage - 1) + (double)(v - 1) * p + 1;
        if (chunks > (double)m * v)
            chunks = (double)m * v;
        return chunks / v;
    }
    default:
        return 0;
    }
}

double mesh_plan_bubble(mesh_pp_kind_t s, int p, int m, int v)
{
    if (p <= 1 || m < 1)
        return 0;
    if (v < 1)
        v = 1;
    switch (s) {
    case MESH_PP_AFAB:
    case MESH_PP_1F1B:
        return (double)(p - 1) / m;
    case MESH_PP_INTERLEAVED:
        return (double)(p - 1) / ((double)v * m);
    case MESH_PP_ZB1:
        return (double)(p - 1) / (3.0 * m);
    default:
        return 0;
    }
}

double plan_output_weight(const plan_ctx_t *x)
{
    const mesh_plan_model_t *m = &x->m;
    const plan_counts_t *c = &x->c;
    double core = 2.0 * m->heads * m->head_dim * (double)m->seq; /* causal attention */
    double sum = 0;
    for (int i = 0; i < m->layers; i++)
        sum += 2.0 * (c->attn + (plan_is_moe_layer(m, c, i)
                                     ? m->top_k * c->expert + c->shared + c->router
                                     : c->mlp)) +
               core;
    return 2.0 * c->output / (sum / m->layers);
}

/*
 * The split that makes the slowest stage fastest: the first stage runs its layers and the
 * embedding (a lookup: no work beside a layer), the last its layers and the output layer and
 * loss (w_last layers of work). The least time T each stage may take is found by raising T
 * through the values where a stage can take one more layer (whole numbers, and whole numbers
 * plus w_last's fraction) until the stages hold every layer. At that T, the first stage takes
 * the fewest layers the others leave it, since it also holds the embedding and, under 1F1B, the
 * most micro-batches in flight; then the last stage the fewest; the stages between share the
 * rest evenly, the extra layers on those nearest the last. Llama 3 405B's 126 layers on 16
 * stages come out 7, 8 x 14, 7, as Meta trained them (Llama Team 2024, sec. 3.3.2).
 */
void plan_stage_split(int layers, int p, double w_last, int *counts)
{
    if (p <= 1) {
        counts[0] = layers;
        return;
    }
    const double eps = 1e-9;
    double frac = w_last - floor(w_last);
    double steps[2] = {0, frac};
    int cap0 = 1, capl = 1, capm = 1;
    /* T is at least the average work and leaves the last stage one layer */
    int k0 = (int)fmax(floor((layers + w_last) / p) - 1, floor(w_last));
    for (int k = k0; k <= layers + (int)ceil(w_last); k++) {
        int found = 0;
        for (int i = 0; i < 2 && !found; i++) {
            double T = k + steps[i];
            cap0 = (int)floor(T + eps);
            capl = (int)floor(T - w_last + eps);
            capm = p > 2 ? cap0 : 0;
            if (cap0 < 1 || capl < 1)
                continue;
            found = (long)cap0 + capl + (long)(p - 2) * capm >= layers;
        }
        if (found)
            break;
    }
    int first = layers - capl - (p - 2) * capm;
    if (first < 1)
        first = 1;
    int last = layers - first - (p - 2) * capm;
    if (last < 1)
        last = 1;
    if (last > capl)
        last = capl;
    counts[0] = first;
    counts[p - 1] = last;
    if (p > 2) {
        int rest = layers - first - last, base = rest / (p - 2), extra = rest % (p - 2);
        for (int i = 1; i < p - 1; i++)
            counts[i] = base + (i >= p - 1 - extra ? 1 : 0);
    } else {
        counts[1] = layers - first;
    }
}

void plan_stage_params(const plan_ctx_t *x, const mesh_plan_layout_t *l, const int *stage_layers,
                       int stage, double *dense, double *expert)
{
    const mesh_plan_model_t *m = &x->m;
    const plan_counts_t *c = &x->c;
    int start = 0;
    double d = 0, e = 0;
    for (int i = 0; i < stage; i++)
        start += stage_layers[i];
    for (int i = start; i < start + stage_layers[stage]; i++) {
        if (plan_is_moe_layer(m, c, i)) {
            d += (c->attn + c->norms + c->shared) / l->tp + c->router;
            e += (double)m->experts / l->ep * c->expert / l->etp;
        } else {
            d += (c->attn + c->norms + c->mlp) / l->tp;
        }
    }
    if (stage == 0)
        d += c->embed / l->tp;
    /* the last stage holds the output layer, a copy of the embedding when tied and p > 1 */
    if (stage == l->pp - 1 && !(m->tied && l->pp == 1))
        d += c->output / l->tp;
    *dense = d;
    *expert = e;
}

/* Buffers of a rank of stage `stage`, e bytes an element: the reserve (runtime, workspaces),
 * ZeRO-3's gathered layers (pp = 1: under a pipeline the stage's whole parameters count as
 * parameters), the gradient reductions in flight (at most `inflight` buckets at once: each
 * one's receive scratch, and with ZeRO 2 and 3 without a pipeline its staging until folded into
 * the shard, beside the gradients being written), pipeline messages, the tied table's gradient from
 * the other end of the pipeline (a receive buffer of the output layer's shard in fp32, on the first
 * and last stages), the sequence-parallel all-gather, expert dispatch and the context-parallel
 * ring. Gradients are reduced in place in their flat buffer (mesh's ZeRO, as Megatron-Core's
 * contiguous gradient buffer): no bucket copies. */
static double plan_buffers(const plan_ctx_t *x, const mesh_plan_layout_t *l, int stage,
                           double dense, double layer_max, double e)
{
    const mesh_plan_model_t *m = &x->m;
    double s = (double)m->seq / l->cp, b = l->mbs, h = m->hidden;
    double tsp = l->sp && l->tp > 1 ? l->tp : 1;
    double buf = x->cl.reserve;
    double dd = (double)l->dp * l->ep * l->cp, k = x->cl.inflight;
    double bucket = fmin(e * dense, x->cl.bucket_bytes);
    if (l->zero == 3 && l->pp == 1)
        buf += 2.0 * 2.0 * e * layer_max; /* params and grads, 2 layers */
    if (dd > 1) {
        /* ZeRO 2 and 3 reducing under the backward pass, the staging beside the shard (under a
         * pipeline the whole gradient counts as gradients): the buckets in flight, the layer
         * whose gradients the pass is writing (handed over when its backward ends; stage 3
         * counts it with its gathered layers above), and a tied table's gradient, written by
         * the output layer first and reduced last (its bucket opens the layout) */
        if (l->zero >= 2 && l->pp == 1) {
            buf += k * bucket + (l->zero == 2 ? e * layer_max : 0);
            if (m->tied)
                buf += e * x->c.output / l->tp;
        }
        /* each reduction's receive scratch: the ring's (n - 1) / n of its bucket, windowed */
        if (x->cl.coll_window > 0)
            buf += k * fmin((dd - 1) / dd * bucket, x->cl.coll_window);
    }
    if (l->pp > 1)
        buf += 4.0 * e * b * s * h / tsp;
    if (l->pp > 1 && m->tied && (stage == 0 || stage == l->pp - 1))
        buf += 4.0 * x->c.output / l->tp;
    if (l->tp > 1 && l->sp)
        buf += e * b * s * h;
    if (l->ep > 1)
        buf += 2.0 * e * (b * s / tsp) * m->top_k * h;
    if (l->cp > 1) {
        double kv = (m->kv_heads >= l->tp ? (double)m->kv_heads / l->tp : 1.0) * m->head_dim;
        buf += 2.0 * 2.0 * e * b * s * kv;
    }
    return buf;
}

void plan_memory(const plan_ctx_t *x, const mesh_plan_layout_t *l, const int *stage_layers,
                 mesh_plan_eval_t *out)
{
    const mesh_plan_model_t *m = &x->m;
    const plan_counts_t *c = &x->c;
    int p = l->pp, start = 0, dd = l->dp * l->ep * l->cp;
    mesh_plan_precision_t prec = x->cl.precision;
    double e = prec == MESH_PLAN_PREC_FP32 ? 4.0 : 2.0; /* bytes of an activation */
    double pb, gb, ob, peb, geb, oeb;
    mesh_plan_state_bytes_at(l->zero, dd, prec, p > 1, &pb, &gb, &ob);
    mesh_plan_state_bytes_at(l->zero, l->edp, prec, p > 1, &peb, &geb, &oeb);
    double act_d = plan_act(m, l->mbs, l->tp, l->cp, l->sp, l->recompute, 0, l->etp, e);
    double act_m =
        m->experts ? plan_act(m, l->mbs, l->tp, l->cp, l->sp, l->recompute, 1, l->etp, e) : 0;
    double transient = 0;
    if (l->recompute == MESH_PLAN_RECOMPUTE_FULL) { /* one layer rebuilt during its backward */
        transient =
            plan_act(m, l->mbs, l->tp, l->cp, l->sp, MESH_PLAN_RECOMPUTE_SELECTIVE, 0, l->etp, e);
        if (m->experts)
            transient = fmax(transient, plan_act(m, l->mbs, l->tp, l->cp, l->sp,
                                                 MESH_PLAN_RECOMPUTE_SELECTIVE, 1, l->etp, e));
    }
    double logits = 4.0 * l->mbs * ((double)m->seq / l->cp) * m->vocab / l->tp; /* fp32 */
    /* the largest layer a rank holds whole under ZeRO-3: a dense one, or an MoE one with its
     * local experts */
    double layer_max = (c->attn + c->norms + c->mlp) / l->tp;
    if (m->experts)
        layer_max = fmax(m->dense_layers || m->moe_interval > 1 ? layer_max : 0,
                         (c->attn + c->norms + c->shared) / l->tp + c->router +
                             (double)m->experts / l->ep * c->expert / l->etp);
    out->mem_total = -1;
    out->stage_layers_max = 0;
    out->stage_layers_min = m->layers;
    for (int i = 0; i < p; i++) {
        int n = stage_layers[i], nmoe = 0;
        for (int k = start; k < start + n; k++)
            nmoe += plan_is_moe_layer(m, c, k);
        start += n;
        if (n > out->stage_layers_max)
            out->stage_layers_max = n;
        if (n < out->stage_layers_min)
            out->stage_layers_min = n;
        double dense, expert;
        plan_stage_params(x, l, stage_layers, i, &dense, &expert);
        double inflight = mesh_plan_inflight(l->schedule, p, l->micro_batches, l->vpp, i);
        /* the logits live from a forward to its backward: under ZB-H1 as under 1F1B, not
         * until the deferred W */
        double to_b = l->schedule == MESH_PP_ZB1
                          ? mesh_plan_inflight(MESH_PP_1F1B, p, l->micro_batches, 1, i)
                          : inflight;
        double mem[MESH_PLAN_MEM_COUNT];
        mem[MESH_PLAN_MEM_PARAMS] = dense * pb + expert * peb;
        mem[MESH_PLAN_MEM_GRADS] = dense * gb + expert * geb;
        mem[MESH_PLAN_MEM_OPTIM] = dense * ob + expert * oeb;
        mem[MESH_PLAN_MEM_ACT] = ((n - nmoe) * act_d + nmoe * act_m) * inflight + transient +
                                 (i == p - 1 ? logits * fmax(1.0, to_b) : 0);
        mem[MESH_PLAN_MEM_BUFFERS] = plan_buffers(x, l, i, dense, layer_max, e);
        double total = 0;
        for (int k = 0; k < MESH_PLAN_MEM_COUNT; k++)
            total += mem[k];
        if (total > out->mem_total) {
            out->mem_total = total;
            for (int k = 0; k < MESH_PLAN_MEM_COUNT; k++)
                out->mem[k] = mem[k];
        }
    }
    out->mem_limit = x->cl.gpu_mem;
    if (out->mem_total > out->mem_limit && out->reject == MESH_PLAN_OK) {
        out->reject = MESH_PLAN_REJ_MEMORY;
        snprintf(out->why, sizeof(out->why), "exceeds memory by %.1f GiB (needs %.1f of %.1f GiB)",
                 (out->mem_total - out->mem_limit) / PLAN_GIB, out->mem_total / PLAN_GIB,
                 out->mem_limit / PLAN_GIB);
    }
}
