/*
 * Published training layouts against the planner (docs/mesh-plan.md, "Published layouts"): what
 * it ranks first for the same model, machine and batch, where the published layout stands, and
 * the numbers behind the difference. A change to the model that moves these must update
 * docs/mesh-plan.md.
 *
 * GPT-3 175B on 1024 A100-80GB, batch 1536 x 2048, t=8 p=8 (Narayanan et al. 2021, sec. 5.1);
 * Llama 3 405B on 8192 H100, 16M tokens of 8K, TP8 CP1 PP16 DP64, 43% MFU, and on 16384 H100 at
 * 128K, TP8 CP16 PP16 DP8, 38% (Llama Team 2024, Table 4); DeepSeek-V3 on 2048 H800, PP16 EP64
 * (8 nodes) TP1, ZeRO-1 (DeepSeek-AI 2024, sec. 3.2), 2.664M GPU hours for 14.8T tokens.
 */
#include "tests/harness/harness.h"

#include <math.h>
#include <mesh/parallel.h>
#include <string.h>

typedef struct {
    mesh_plan_eval_t top;
    int count;
} plan_top_t;

/* The best layout with the choices given; fix (may be NULL) fixes axes as mesh-plan --check
 * does (those not named are 1). */
static plan_top_t best(const mesh_plan_model_t *m, const mesh_plan_cluster_t *c,
                       const char *choices, const char *fix)
{
    mesh_plan_params_t p = {.field_mask = MESH_PLAN_PARAM_FIELD_TOP, .top = 1};
    if (choices && strstr(choices, "nocp")) {
        p.field_mask |= MESH_PLAN_PARAM_FIELD_LIMITS;
        p.max_cp = 1;
    }
    if (choices && strstr(choices, "megatron2021")) { /* DDP, 1F1B or interleaved, no SP, CP */
        p.field_mask |= MESH_PLAN_PARAM_FIELD_CHOICES | MESH_PLAN_PARAM_FIELD_LIMITS;
        p.zero_mask = 1u << 0;
        p.schedule_mask = (1u << MESH_PP_1F1B) | (1u << MESH_PP_INTERLEAVED);
        p.no_sp = 1;
        p.max_cp = 1;
        if (strstr(choices, "full"))
            p.recompute_mask = 1u << MESH_PLAN_RECOMPUTE_FULL;
    }
    if (fix) {
        unsigned set = 0;
        mesh_plan_layout_t l = {0};
        CHECK(mesh_plan_layout_parse(fix, &l, &set) == MESH_OK);
        if (!(set & MESH_PLAN_SET_CP))
            l.cp = 1;
        if (!(set & MESH_PLAN_SET_EP))
            l.ep = 1;
        if (!(set & MESH_PLAN_SET_ETP))
            l.etp = l.tp;
        p.fix = l;
        p.fix_set = set | MESH_PLAN_SET_CP | MESH_PLAN_SET_EP | MESH_PLAN_SET_ETP;
        p.allow_span = 1;
        p.field_mask |= MESH_PLAN_PARAM_FIELD_FIX | MESH_PLAN_PARAM_FIELD_SPAN;
    }
    mesh_plan_result_h r;
    plan_top_t t;
    memset(&t, 0, sizeof(t));
    CHECK(mesh_plan_search(m, c, &p, &r) == MESH_OK);
    t.count = mesh_plan_result_count(r);
    CHECK_MSG(t.count > 0, "%s %s: nothing fits", m->name, fix ? fix : "");
    t.top = *mesh_plan_result_layout(r, 0);
    mesh_plan_result_free(r);
    return t;
}

#define AXES(e, TP, CP, EP, PP)                                                                    \
    CHECK_MSG((e).layout.tp == (TP) && (e).layout.cp == (CP) && (e).layout.ep == (EP) &&           \
                  (e).layout.pp == (PP),                                                           \
              "got tp=%d cp=%d ep=%d pp=%d", (e).layout.tp, (e).layout.cp, (e).layout.ep,          \
              (e).layout.pp)
#define WITHIN(x, lo, hi) CHECK_MSG((x) >= (lo) && (x) <= (hi), #x " = %.4f", (double)(x))

static mesh_plan_model_t preset(const char *name)
{
    mesh_plan_model_t m;
    CHECK(mesh_plan_model_preset(name, &m) == MESH_OK);
    return m;
}

static mesh_plan_cluster_t machine(const char *name, int gpus)
{
    mesh_plan_cluster_t c;
    CHECK(mesh_plan_cluster_preset(name, gpus, &c) == MESH_OK);
    return c;
}

static void gpt3(void)
{
    mesh_plan_model_t m = preset("gpt3-175b");
    mesh_plan_cluster_t c = machine("a100-80g", 1024);
    /* the same pp; tp=4 with cp=2 halves TP's traffic, and fits thanks to ZeRO-2 and SP */
    plan_top_t top = best(&m, &c, NULL, NULL), pub = best(&m, &c, NULL, "tp=8,pp=8");
    AXES(top.top, 4, 2, 1, 8);
    WITHIN(pub.top.step / top.top.step - 1, 0.015, 0.04);
    WITHIN(top.top.comm_exposed[MESH_AXIS_TP] / pub.top.comm_exposed[MESH_AXIS_TP], 0.35, 0.5);
    /* with what Megatron-LM had in 2021 (DDP, tensor parallelism without sequence
     * parallelism, no CP, 1F1B or interleaved): t=8 p=8 first, 3.6% ahead of p=16 */
    top = best(&m, &c, "megatron2021", NULL);
    AXES(top.top, 8, 1, 1, 8);
    CHECK(top.top.layout.zero == 0 && top.top.layout.recompute == MESH_PLAN_RECOMPUTE_SELECTIVE);
    pub = best(&m, &c, "megatron2021", "tp=8,pp=16");
    WITHIN(pub.top.step / top.top.step - 1, 0.02, 0.05);
    /* and with full recomputation only, as the paper's flop count has it: tp=4 pp=16 by 0.6%,
     * t=8 p=8 at 36.5% of peak in model flops, 48.7% counting the recomputation as the paper
     * does (140 TFLOP/s, 45%) */
    top = best(&m, &c, "megatron2021 full", NULL);
    pub = best(&m, &c, "megatron2021 full", "tp=8,pp=8");
    AXES(top.top, 4, 1, 1, 16);
    WITHIN(pub.top.step / top.top.step - 1, 0.0, 0.01);
    WITHIN(pub.top.mfu * 4 / 3, 0.44, 0.52);
}

static void llama3(void)
{
    mesh_plan_model_t m = preset("llama3-405b");
    mesh_plan_cluster_t c = machine("h100", 8192);
    plan_top_t top = best(&m, &c, NULL, NULL), pub = best(&m, &c, NULL, "tp=8,pp=16");
    /* free to use CP at 8K, the planner shrinks the bubble with 64 stages of CP8 */
    AXES(top.top, 4, 8, 1, 64);
    WITHIN(pub.top.step / top.top.step - 1, 0.1, 0.16);
    WITHIN(pub.top.mfu, 0.40, 0.47); /* Meta: 43% */
    /* without CP, as Meta trained at 8K: tp=8 and pp=16 as published (ZeRO 2 under a
     * pipeline holds the stage's whole gradient through the step, which leaves pp=8 no room
     * for selective recomputation), pp=32 next by 0.6% */
    top = best(&m, &c, "nocp", NULL);
    AXES(top.top, 8, 1, 1, 16);
    WITHIN(pub.top.step / top.top.step - 1, 0.0, 0.001);
    /* the 126 layers on 16 stages: 7, 8 x 14, 7, as Meta balanced them, the first stage
     * holding the embedding, the last the output layer (0.63 of a layer's work); 128 layers
     * leave the last stage 7.4% over the average and the step 7.6% longer */
    CHECK(pub.top.stage_layers_first == 7 && pub.top.stage_layers_last == 7 &&
          pub.top.stage_layers_max == 8 && pub.top.stage_layers_min == 7);
    WITHIN(pub.top.head_layers, 0.6, 0.66);
    WITHIN(pub.top.stage_imbalance, 0.0, 0.02);
    m.layers = 128;
    plan_top_t l128 = best(&m, &c, NULL, "tp=8,pp=16");
    CHECK(l128.top.stage_layers_first == 8 && l128.top.stage_layers_last == 8 &&
          l128.top.stage_layers_max == 8);
    WITHIN(l128.top.stage_imbalance, 0.07, 0.08);
    WITHIN(l128.top.step / pub.top.step - 1, 0.06, 0.09);
    m.layers = 126;

    /* 128K sequences on 16384 GPUs: tp=8 and cp=16 as published; ZeRO-3 with one 131K-token
     * micro-batch per replica instead of 16 pipeline stages with 16 micro-batches */
    m.seq = 131072;
    c = machine("h100", 16384);
    top = best(&m, &c, NULL, NULL);
    pub = best(&m, &c, NULL, "tp=8,cp=16,pp=16");
    AXES(top.top, 8, 16, 1, 1);
    CHECK(top.top.layout.zero == 3);
    WITHIN(pub.top.bubble_fraction, 0.15, 0.25);
    WITHIN(pub.top.step / top.top.step - 1, 0.12, 0.25);
    WITHIN(pub.top.mfu, 0.33, 0.42); /* Meta: 38% */
}

static void deepseek(void)
{
    mesh_plan_model_t m = preset("deepseek-v3");
    mesh_plan_cluster_t c = machine("h800", 2048);
    plan_top_t top = best(&m, &c, NULL, NULL);
    plan_top_t pub = best(&m, &c, NULL, "tp=1,pp=16,ep=64,etp=1");
    /* EP inside the node: tp=2, ep=8, pp=32 */
    AXES(top.top, 2, 1, 8, 32);
    CHECK(top.top.layout.etp == 1 && top.top.axis_nodes[MESH_AXIS_EP] == 1 && !top.top.ep_hier);
    /* DeepSeek: 14.8T tokens in 2.664M H800 hours, 3.16M tokens/s on 2048 GPUs */
    WITHIN(top.top.tokens_per_s / 3.16e6, 0.9, 1.1);
    /* the published EP64 across 8 nodes with hierarchical dispatch: a token crosses to each of
     * the at most 4 nodes of its experts once (3.2 other nodes on average, not 7 of its 8
     * copies); its all-to-all, not hidden, is still half of the step */
    CHECK(pub.top.axis_nodes[MESH_AXIS_EP] == 8 && pub.top.ep_hier);
    WITHIN(pub.top.comm_exposed[MESH_AXIS_EP] / pub.top.step, 0.45, 0.55);
    WITHIN(pub.top.step / top.top.step, 1.8, 2.0);
    /* the same without node-limited routing: a token reaches 5.3 nodes, 4.6 of them others */
    mesh_plan_model_t free = m;
    free.route_nodes = 0;
    plan_top_t pubfree = best(&free, &c, NULL, "tp=1,pp=16,ep=64,etp=1");
    WITHIN(pubfree.top.comm_exposed[MESH_AXIS_EP] / pub.top.comm_exposed[MESH_AXIS_EP], 1.2, 1.4);
    /* with DeepSeek's pp=16, tp=1 and cp=1 fixed: ep=4 inside one node, then ep=8, then
     * ep=16 over 2 nodes with hierarchical dispatch, 16.6% behind (under ZeRO-1: stages 2 and 3
     * hold the stage's whole gradient through the step under a pipeline and gain nothing) */
    mesh_plan_params_t p = {.field_mask = MESH_PLAN_PARAM_FIELD_TOP | MESH_PLAN_PARAM_FIELD_FIX,
                            .top = 3,
                            .fix = {.tp = 1, .pp = 16, .cp = 1},
                            .fix_set = MESH_PLAN_SET_TP | MESH_PLAN_SET_PP | MESH_PLAN_SET_CP};
    mesh_plan_result_h r;
    CHECK(mesh_plan_search(&m, &c, &p, &r) == MESH_OK && mesh_plan_result_count(r) == 3);
    const mesh_plan_eval_t *f1 = mesh_plan_result_layout(r, 0), *f2 = mesh_plan_result_layout(r, 1),
                           *f3 = mesh_plan_result_layout(r, 2);
    AXES(*f1, 1, 1, 4, 16);
    CHECK(f1->axis_nodes[MESH_AXIS_EP] == 1 && f1->layout.zero == 1);
    AXES(*f2, 1, 1, 8, 16);
    WITHIN(f2->step / f1->step - 1, 0.02, 0.03);
    AXES(*f3, 1, 1, 16, 16);
    CHECK(f3->axis_nodes[MESH_AXIS_EP] == 2 && f3->ep_hier);
    WITHIN(f3->step / f1->step - 1, 0.15, 0.18);
    mesh_plan_result_free(r);
}

int main(void)
{
    gpt3();
    llama3();
    deepseek();
    printf("ok\n");
    return 0;
}
