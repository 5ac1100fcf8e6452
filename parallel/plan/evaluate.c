/*
 * One layout: whether its sizes fit the model, the world and the batch, then its memory and
 * time. A layout that cannot run or does not fit still comes back with its numbers and the
 * reason, which is what mesh-plan --check prints.
 */
#include "planner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

mesh_status_t plan_ctx_init(plan_ctx_t *x, const mesh_plan_model_t *model,
                            const mesh_plan_cluster_t *cluster, const mesh_plan_params_t *params)
{
    memset(x, 0, sizeof(*x));
    if (!model || !cluster)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan: %s is NULL",
                              model ? "cluster" : "model");
    MESH_PAR_CHECK(plan_model_norm(model, &x->m));
    plan_model_counts(&x->m, &x->c);
    MESH_PAR_CHECK(plan_cluster_norm(cluster, &x->cl));
    if (params)
        x->p = *params;
    uint64_t fm = x->p.field_mask;
    if (!(fm & MESH_PLAN_PARAM_FIELD_FIX))
        x->p.fix_set = 0;
    if (!(fm & MESH_PLAN_PARAM_FIELD_LIMITS))
        x->p.max_tp = x->p.max_cp = x->p.max_ep = x->p.max_pp = x->p.max_mbs = 0;
    if (!(fm & MESH_PLAN_PARAM_FIELD_CHOICES)) {
        x->p.zero_mask = x->p.schedule_mask = x->p.recompute_mask = 0;
        x->p.no_sp = 0;
    }
    if (!(fm & MESH_PLAN_PARAM_FIELD_TOP) || x->p.top <= 0)
        x->p.top = 10;
    if (!(fm & MESH_PLAN_PARAM_FIELD_SPAN))
        x->p.allow_span = 0;
    if (x->p.max_mbs <= 0)
        x->p.max_mbs = 16;
    if (!x->p.zero_mask)
        x->p.zero_mask = 0xf;
    if (!x->p.recompute_mask)
        x->p.recompute_mask = (1u << MESH_PLAN_RECOMPUTE_COUNT) - 1;
    if (!x->p.schedule_mask)
        x->p.schedule_mask = PLAN_SCHEDULES;
    x->p.schedule_mask |= 1u << MESH_PP_NONE; /* what pp = 1 runs */
    double bt = (fm & MESH_PLAN_PARAM_FIELD_BATCH) && x->p.batch_tokens > 0 ? x->p.batch_tokens
                                                                            : x->m.batch_tokens;
    if (!(bt > 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_plan: no global batch: model %s "
                              "publishes none, give one in tokens",
                              x->m.name);
    if (bt > 1e15 || fmod(bt, x->m.seq) != 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_plan: global batch of %.0f tokens is "
                              "not a whole number of %d-token sequences",
                              bt, x->m.seq);
    x->batch_tokens = bt;
    x->batch_seqs = (long)(bt / x->m.seq);
    return MESH_OK;
}

int plan_group_nodes(const plan_ctx_t *x, int stride, int n)
{
    int g = x->cl.gpus_per_node;
    if (n <= 1)
        return 1;
    if (stride >= g)
        return n;
    long span = (long)stride * n;
    return (int)((span + g - 1) / g);
}

void plan_stage_counts(const plan_ctx_t *x, const mesh_plan_layout_t *l, int *counts)
{
    if (!l->even) {
        plan_stage_split(x->m.layers, l->pp, plan_output_weight(x), counts);
        return;
    }
    for (int i = 0; i < l->pp; i++)
        counts[i] = x->m.layers / l->pp;
}

#define PLAN_WHY(code, ...)                                                                        \
    do {                                                                                           \
        snprintf(why, len, __VA_ARGS__);                                                           \
        return (code);                                                                             \
    } while (0)

mesh_plan_reject_t plan_structure(const plan_ctx_t *x, mesh_plan_layout_t *l, int span, char *why,
                                  size_t len)
{
    const mesh_plan_model_t *m = &x->m;
    int world = x->cl.gpus, gpn = x->cl.gpus_per_node;
    const mesh_plan_reject_t BAD = MESH_PLAN_REJ_INVALID;
    const char *U = PLAN_UNIT(x);
    why[0] = 0;
    if (l->tp < 1)
        l->tp = 1;
    if (l->cp < 1)
        l->cp = 1;
    if (l->ep < 1)
        l->ep = 1;
    if (l->pp < 1)
        l->pp = 1;
    if (l->mbs < 1)
        l->mbs = 1;
    if (m->experts == 0 || l->etp < 1)
        l->etp = l->tp; /* mesh_grid's default expert_tp */
    long prod = (long)l->tp * l->cp * l->ep * l->pp;
    if (prod > world || world % prod)
        PLAN_WHY(BAD, "tp x cp x ep x pp = %ld does not divide the %d %s", prod, world, U);
    if (l->dp > 0 && l->dp * prod != world)
        PLAN_WHY(BAD, "tp x cp x ep x dp x pp = %ld, not the %d %s", l->dp * prod, world, U);
    l->dp = (int)(world / prod);
    if (m->heads % l->tp)
        PLAN_WHY(BAD, "heads %d are not divisible by tp=%d", m->heads, l->tp);
    if (m->kv_heads % l->tp && l->tp % m->kv_heads)
        PLAN_WHY(BAD, "kv heads %d and tp=%d: neither divides the other", m->kv_heads, l->tp);
    if (m->ffn % l->tp)
        PLAN_WHY(BAD, "ffn %d is not divisible by tp=%d", m->ffn, l->tp);
    if (l->cp > 1 && m->seq % (2 * l->cp))
        PLAN_WHY(BAD, "seq %d is not divisible by 2 x cp = %d (two balanced halves per rank)",
                 m->seq, 2 * l->cp);
    if (l->pp > m->layers)
        PLAN_WHY(BAD, "pp=%d exceeds the %d layers", l->pp, m->layers);
    if (x->p.fix_set & MESH_PLAN_SET_EVEN)
        l->even = x->p.fix.even;
    l->even = l->even && l->pp > 1;
    if (l->even && m->layers % l->pp)
        PLAN_WHY(BAD, "%d layers do not split evenly into pp=%d stages", m->layers, l->pp);
    if (m->experts == 0 && l->ep > 1)
        PLAN_WHY(BAD, "ep=%d needs a mixture of experts", l->ep);
    if (m->experts) {
        if (m->experts % l->ep)
            PLAN_WHY(BAD, "experts %d are not divisible by ep=%d", m->experts, l->ep);
        if (m->expert_ffn % l->etp)
            PLAN_WHY(BAD, "expert ffn %d is not divisible by etp=%d", m->expert_ffn, l->etp);
        long e = (long)l->etp * l->ep * l->pp;
        if (world % e)
            PLAN_WHY(BAD, "etp x ep x pp = %ld does not divide the %d %s", e, world, U);
        l->edp = (int)(world / e);
        if (l->tp > 1 && x->p.no_sp)
            PLAN_WHY(BAD, "experts with tp=%d need sequence parallelism", l->tp);
    } else {
        l->edp = (int)(world / ((long)l->etp * l->ep * l->pp)); /* mesh_grid's expert grid */
    }
    l->sp = l->tp > 1 && !x->p.no_sp;
    long replicas = (long)l->dp * l->ep;
    if (x->batch_seqs % (replicas * l->mbs))
        PLAN_WHY(BAD, "batch of %ld sequences is not divisible by dp x ep x mbs = %ld",
                 x->batch_seqs, replicas * l->mbs);
    int mb = (int)(x->batch_seqs / (replicas * l->mbs));
    if (l->micro_batches > 0 && l->micro_batches != mb)
        PLAN_WHY(BAD, "micro_batches=%d, but the batch gives %d per pipeline", l->micro_batches,
                 mb);
    l->micro_batches = mb;
    if (l->zero < 0 || l->zero > 3)
        PLAN_WHY(BAD, "zero=%d is not a ZeRO stage 0..3", l->zero);
    if (l->recompute < 0 || l->recompute >= MESH_PLAN_RECOMPUTE_COUNT)
        PLAN_WHY(BAD, "recompute %d is unknown", (int)l->recompute);
    if (l->pp == 1)
        l->schedule = MESH_PP_NONE;
    else if (l->schedule == MESH_PP_NONE)
        l->schedule = MESH_PP_1F1B;
    if ((unsigned)l->schedule >= MESH_PP_KIND_COUNT ||
        !((PLAN_SCHEDULES | 1u << MESH_PP_NONE) >> l->schedule & 1))
        PLAN_WHY(BAD, "schedule %d is unknown", (int)l->schedule);
    if (l->schedule != MESH_PP_INTERLEAVED) {
        l->vpp = 1;
    } else {
        if (l->vpp < 2)
            l->vpp = 2;
        int counts[l->pp], least = m->layers;
        plan_stage_counts(x, l, counts);
        for (int i = 0; i < l->pp; i++)
            if (counts[i] < least)
                least = counts[i];
        if (least < l->vpp || (l->even && least % l->vpp))
            PLAN_WHY(BAD, "interleaving %d chunks needs %s layers per stage (a stage has %d)",
                     l->vpp, l->even ? "a multiple of that many" : "as many", least);
        if (l->micro_batches % l->pp)
            PLAN_WHY(BAD, "interleaving needs the micro-batches (%d) to be a multiple of pp=%d",
                     l->micro_batches, l->pp);
    }
    if (!span) {
        if (l->tp > gpn || gpn % l->tp)
            PLAN_WHY(MESH_PLAN_REJ_SPAN, "tp=%d spans nodes of %d %s", l->tp, gpn, U);
        /* ep may span whole nodes: its dispatch crosses them once per node of a token's
         * experts (hierarchical, timing.c); etp stays inside a node */
        long e = (long)l->etp * l->ep;
        if (m->experts && l->ep > 1 &&
            (l->etp > gpn || gpn % l->etp || (e > gpn && e % gpn) || (e < gpn && gpn % e)))
            PLAN_WHY(MESH_PLAN_REJ_SPAN, "etp x ep = %ld spans nodes of %d %s", e, gpn, U);
    }
    return MESH_PLAN_OK;
}

void plan_eval(const plan_ctx_t *x, const mesh_plan_layout_t *l, mesh_plan_eval_t *out)
{
    int counts[l->pp];
    double head = plan_output_weight(x), most = 0;
    plan_stage_counts(x, l, counts);
    for (int i = 0; i < l->pp; i++)
        most = fmax(most, counts[i] + (i == l->pp - 1 ? head : 0));
    out->stage_layers_first = counts[0];
    out->stage_layers_last = counts[l->pp - 1];
    out->head_layers = head;
    out->stage_imbalance = most / ((x->m.layers + head) / l->pp) - 1;
    plan_memory(x, l, counts, out);
    plan_time(x, l, counts, out);
}

mesh_status_t mesh_plan_evaluate(const mesh_plan_model_t *model, const mesh_plan_cluster_t *cluster,
                                 const mesh_plan_params_t *params, const mesh_plan_layout_t *layout,
                                 mesh_plan_eval_t *out)
{
    plan_ctx_t x;
    if (!layout || !out)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_evaluate: %s is NULL",
                              layout ? "out" : "layout");
    MESH_PAR_CHECK(plan_ctx_init(&x, model, cluster, params));
    mesh_plan_eval_t e;
    memset(&e, 0, sizeof(e));
    e.layout = *layout;
    e.reject = plan_structure(&x, &e.layout, 0, e.why, sizeof(e.why));
    if (e.reject == MESH_PLAN_OK || e.reject == MESH_PLAN_REJ_SPAN) {
        mesh_plan_reject_t keep = e.reject;
        char why[sizeof(e.why)];
        snprintf(why, sizeof(why), "%s", e.why);
        e.reject = MESH_PLAN_OK;
        plan_eval(&x, &e.layout, &e);
        if (keep == MESH_PLAN_REJ_SPAN) {
            if (e.reject == MESH_PLAN_REJ_MEMORY) {
                char mem[sizeof(e.why)];
                snprintf(mem, sizeof(mem), "%s", e.why);
                snprintf(e.why, sizeof(e.why), "%.120s; %.120s", why, mem);
            } else {
                snprintf(e.why, sizeof(e.why), "%s", why);
            }
            e.reject = MESH_PLAN_REJ_SPAN;
        }
    }
    *out = e;
    return MESH_OK;
}
