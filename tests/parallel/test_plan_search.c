/*
 * The planner's search: every layout it proposes fits in memory and keeps tp and etp x ep inside
 * a node (unless nothing else fits, and then it says so), the ranking is by predicted step time
 * and each proposal evaluates again to the same numbers; impossible requests are refused with
 * the reason; mesh_plan_best for a trainer; calibration from mesh-bench's CSV; layout text.
 */
#include "tests/harness/harness.h"

#include <math.h>
#include <mesh/parallel.h>
#include <string.h>

static mesh_plan_model_t preset(const char *name)
{
    mesh_plan_model_t m;
    CHECK_MSG(mesh_plan_model_preset(name, &m) == MESH_OK, "%s", name);
    return m;
}

static mesh_plan_cluster_t cluster(const char *name, int gpus)
{
    mesh_plan_cluster_t c;
    CHECK_MSG(mesh_plan_cluster_preset(name, gpus, &c) == MESH_OK, "%s", name);
    return c;
}

static mesh_plan_params_t batch(double tokens)
{
    mesh_plan_params_t p = {.field_mask = MESH_PLAN_PARAM_FIELD_TOP, .top = 100000};
    if (tokens > 0) {
        p.field_mask |= MESH_PLAN_PARAM_FIELD_BATCH;
        p.batch_tokens = tokens;
    }
    return p;
}

static void check_proposals(const char *what, const mesh_plan_model_t *m,
                            const mesh_plan_cluster_t *c, const mesh_plan_params_t *p)
{
    mesh_plan_result_h r;
    CHECK_MSG(mesh_plan_search(m, c, p, &r) == MESH_OK, "%s: %s", what, mesh_comm_last_error(NULL));
    int n = mesh_plan_result_count(r), g = c->gpus_per_node;
    CHECK_MSG(n > 0, "%s: nothing fits", what);
    CHECK(!mesh_plan_result_forced_span(r));
    CHECK(mesh_plan_result_reason(r, 0) != NULL);
    for (int i = 0; i < n; i++) {
        const mesh_plan_eval_t *e = mesh_plan_result_layout(r, i);
        const mesh_plan_layout_t *l = &e->layout;
        CHECK_MSG(e->reject == MESH_PLAN_OK && e->mem_total <= e->mem_limit,
                  "%s #%d: %.1f of %.1f GiB", what, i + 1, e->mem_total / (1 << 30),
                  e->mem_limit / (1 << 30));
        CHECK_MSG(l->tp <= g && g % l->tp == 0, "%s #%d: tp=%d spans nodes of %d", what, i + 1,
                  l->tp, g);
        /* an expert group inside a node or over whole nodes */
        int eg = l->etp * l->ep;
        CHECK_MSG(l->ep == 1 || (g % l->etp == 0 && (eg <= g ? g % eg == 0 : eg % g == 0)),
                  "%s #%d: etp=%d ep=%d span part of a node", what, i + 1, l->etp, l->ep);
        CHECK(e->ep_hier == 0 || e->axis_nodes[MESH_AXIS_EP] > 1);
        CHECK(e->axis_nodes[MESH_AXIS_TP] == 1);
        CHECK((long)l->tp * l->cp * l->ep * l->dp * l->pp == c->gpus);
        CHECK((long)l->etp * l->ep * l->edp * l->pp == c->gpus);
        if (i > 0)
            CHECK(e->step >= mesh_plan_result_layout(r, i - 1)->step);
        /* the same layout evaluated alone gives the same numbers */
        mesh_plan_eval_t again;
        CHECK(mesh_plan_evaluate(m, c, p, l, &again) == MESH_OK);
        CHECK_MSG(again.reject == MESH_PLAN_OK && fabs(again.step - e->step) < 1e-9 * e->step &&
                      fabs(again.mem_total - e->mem_total) < 1e-6 * e->mem_total,
                  "%s #%d evaluates to %g s (%s), not %g s", what, i + 1, again.step, again.why,
                  e->step);
    }
    /* what was turned down for spanning nodes did span them */
    for (int i = 0; i < mesh_plan_result_rejected_count(r); i++) {
        const mesh_plan_eval_t *e = mesh_plan_result_rejected(r, i);
        CHECK(e->reject != MESH_PLAN_OK && e->why[0]);
        if (e->reject == MESH_PLAN_REJ_SPAN)
            CHECK(e->layout.tp > g || g % e->layout.tp || g % e->layout.etp ||
                  (e->layout.etp * e->layout.ep) % g || e->layout.etp * e->layout.ep > g);
        if (e->reject == MESH_PLAN_REJ_MEMORY)
            CHECK(e->mem_total > e->mem_limit);
    }
    long combos, variants, rej[MESH_PLAN_REJ_COUNT];
    mesh_plan_result_stats(r, &combos, &variants, rej);
    CHECK(combos == n + rej[1] + rej[2] + rej[3] && variants >= combos);
    mesh_plan_result_free(r);
}

static void test_properties(void)
{
    mesh_plan_model_t m = preset("gpt3-175b");
    mesh_plan_cluster_t c = cluster("a100-80g", 1024);
    mesh_plan_params_t p = batch(0);
    check_proposals("gpt3-175b on 1024 A100", &m, &c, &p);
    m = preset("llama3-70b"), c = cluster("h100", 64), p = batch(4194304);
    check_proposals("llama3-70b on 64 H100", &m, &c, &p);
    m = preset("mixtral-8x7b"), p = batch(4194304);
    check_proposals("mixtral on 64 H100", &m, &c, &p);
    m = preset("deepseek-v3"), c = cluster("h800", 2048), p = batch(0);
    check_proposals("deepseek-v3 on 2048 H800", &m, &c, &p);
    m = preset("llama2-7b"), c = cluster("a100-40g", 32), p = batch(0);
    check_proposals("llama2-7b on 32 A100-40GB", &m, &c, &p);
    /* a node of 4 GPUs */
    m = preset("llama3-8b"), c = cluster("h100", 16), c.gpus_per_node = 4, p = batch(1048576);
    check_proposals("llama3-8b on 4 nodes of 4", &m, &c, &p);
}

static void test_refusals(void)
{
    mesh_plan_result_h r;
    mesh_plan_model_t m = preset("llama3-405b");
    mesh_plan_cluster_t c = cluster("a100-40g", 8);
    mesh_plan_params_t p = batch(0);
    /* 405B parameters on 8 GPUs of 40 GiB: nothing fits, and each axis layout says why */
    CHECK(mesh_plan_search(&m, &c, &p, &r) == MESH_OK);
    CHECK(mesh_plan_result_count(r) == 0 && mesh_plan_result_rejected_count(r) > 0);
    const mesh_plan_eval_t *e = mesh_plan_result_rejected(r, 0);
    CHECK_MSG(e->reject == MESH_PLAN_REJ_MEMORY && strstr(e->why, "exceeds memory by"), "%s",
              e->why);
    mesh_plan_result_free(r);
    mesh_plan_layout_t best;
    CHECK(mesh_plan_best(&m, 8, 8, NULL, &best) == MESH_ERR_NOT_FOUND);
    CHECK(strstr(mesh_comm_last_error(NULL), "exceeds memory") != NULL);

    /* a batch that is not whole sequences; a model without a published batch and none given */
    p = batch(16777216 + 100);
    c = cluster("h100", 8192);
    CHECK(mesh_plan_search(&m, &c, &p, &r) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "whole number") != NULL);
    mesh_plan_model_t m8 = preset("llama3-8b");
    p = batch(0);
    CHECK(mesh_plan_search(&m8, &c, &p, &r) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "no global batch") != NULL);
    /* a cluster that is not one */
    c = cluster("h100", 12);
    p = batch(1048576);
    CHECK(mesh_plan_search(&m8, &c, &p, &r) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "not a multiple of gpus-per-node 8") != NULL);
    c = cluster("h100", 8);
    c.gpu_mem = 1.0 * (1 << 30);
    CHECK(mesh_plan_cluster_check(&c, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "reserve") != NULL);

    /* layouts that cannot run come back with the reason */
    mesh_plan_eval_t ev;
    c = cluster("a100-80g", 1024);
    mesh_plan_model_t g3 = preset("gpt3-175b");
    struct {
        mesh_plan_layout_t l;
        const char *why;
    } bad[] = {{{.tp = 5}, "tp x cp x ep x pp = 5 does not divide the 1024 GPUs"},
               {{.tp = 64}, "heads 96 are not divisible by tp=64"},
               {{.tp = 8, .pp = 128}, "pp=128 exceeds the 96 layers"},
               {{.tp = 8, .ep = 2}, "ep=2 needs a mixture of experts"},
               {{.tp = 8, .cp = 4, .pp = 4, .dp = 3}, "not the 1024 GPUs"},
               {{.tp = 8, .pp = 8, .mbs = 64}, "not divisible by dp x ep x mbs"},
               {{.tp = 8, .pp = 8, .schedule = MESH_PP_INTERLEAVED, .vpp = 16},
                "interleaving 16 chunks needs as many layers per stage"}};
    p = batch(0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(mesh_plan_evaluate(&g3, &c, &p, &bad[i].l, &ev) == MESH_OK);
        CHECK_MSG(ev.reject == MESH_PLAN_REJ_INVALID && strstr(ev.why, bad[i].why), "%zu: %s", i,
                  ev.why);
    }
    /* tp across nodes is evaluated but marked; one that does not fit says by how much */
    mesh_plan_layout_t l = {.tp = 16, .pp = 4, .cp = 2};
    mesh_plan_model_t g = g3;
    g.heads = 128, g.head_dim = 96; /* so that tp=16 divides the heads */
    CHECK(mesh_plan_evaluate(&g, &c, &p, &l, &ev) == MESH_OK);
    CHECK_MSG(ev.reject == MESH_PLAN_REJ_SPAN && strstr(ev.why, "tp=16 spans nodes of 8 GPUs") &&
                  ev.step > 0 && ev.axis_nodes[MESH_AXIS_TP] == 2,
              "%s", ev.why);
    l = (mesh_plan_layout_t){.tp = 8, .pp = 2, .zero = 0};
    CHECK(mesh_plan_evaluate(&g3, &c, &p, &l, &ev) == MESH_OK);
    CHECK_MSG(ev.reject == MESH_PLAN_REJ_MEMORY && strstr(ev.why, "exceeds memory by") &&
                  ev.mem_total > ev.mem_limit,
              "%s", ev.why);
}

/* One layer too large for one GPU of a node: tp must span nodes, and the planner says it was
 * forced to. */
static void test_forced_span(void)
{
    mesh_plan_model_t m = {.name = "wide",
                           .layers = 1,
                           .hidden = 16384,
                           .heads = 128,
                           .ffn = 65536,
                           .vocab = 1000,
                           .seq = 1024,
                           .batch_tokens = 4096};
    mesh_plan_cluster_t c = cluster("h100", 4);
    c.gpus_per_node = 1;
    /* room for a tp=2 half of the layer, its ZeRO 2 gradient staging included, not the whole */
    c.gpu_mem = 18.0 * (1 << 30);
    mesh_plan_params_t p = batch(0);
    mesh_plan_result_h r;
    CHECK(mesh_plan_search(&m, &c, &p, &r) == MESH_OK);
    CHECK_MSG(mesh_plan_result_count(r) > 0 && mesh_plan_result_forced_span(r),
              "count %d forced %d", mesh_plan_result_count(r), mesh_plan_result_forced_span(r));
    for (int i = 0; i < mesh_plan_result_count(r); i++) {
        const mesh_plan_eval_t *e = mesh_plan_result_layout(r, i);
        CHECK(e->layout.tp > 1 && e->mem_total <= e->mem_limit &&
              strncmp(e->why, "forced: tp=", 11) == 0);
    }
    CHECK(strncmp(mesh_plan_result_reason(r, 0), "forced:", 7) == 0);
    mesh_plan_result_free(r);
    /* asked for: --allow-span proposes them without being forced */
    p.field_mask |= MESH_PLAN_PARAM_FIELD_SPAN;
    p.allow_span = 1;
    CHECK(mesh_plan_search(&m, &c, &p, &r) == MESH_OK);
    CHECK(mesh_plan_result_count(r) > 0 && !mesh_plan_result_forced_span(r));
    mesh_plan_result_free(r);
}

static void test_best(void)
{
    /* a small model on 8 CPU ranks, 4 per node, as the trainer asks */
    mesh_plan_model_t m = {
        .name = "tiny", .layers = 4, .hidden = 64, .heads = 4, .ffn = 256, .vocab = 256, .seq = 32};
    mesh_plan_layout_t l;
    CHECK(mesh_plan_best(&m, 8, 4, NULL, &l) == MESH_OK);
    CHECK(l.tp * l.cp * l.ep * l.dp * l.pp == 8 && l.tp <= 4 && l.micro_batches >= 1 &&
          l.mbs >= 1 && l.zero >= 0 && l.zero <= 3);
    CHECK(mesh_plan_best(&m, 8, 3, NULL, &l) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "multiple of the node size") != NULL);
    /* with a cluster and choices: the search's best */
    mesh_plan_model_t g = preset("gpt3-175b");
    mesh_plan_cluster_t c = cluster("a100-80g", 16);
    mesh_plan_params_t p = {.field_mask =
                                MESH_PLAN_PARAM_FIELD_CLUSTER | MESH_PLAN_PARAM_FIELD_CHOICES,
                            .cluster = &c,
                            .zero_mask = 1u << 1,
                            .schedule_mask = 1u << MESH_PP_1F1B};
    mesh_plan_result_h r;
    CHECK(mesh_plan_best(&g, 1024, 8, &p, &l) == MESH_OK);
    c.gpus = 1024;
    CHECK(mesh_plan_search(&g, &c, &p, &r) == MESH_OK);
    const mesh_plan_eval_t *e = mesh_plan_result_layout(r, 0);
    CHECK(e && memcmp(&e->layout, &l, sizeof(l)) == 0);
    CHECK(l.zero == 1 && l.schedule == MESH_PP_1F1B);
    mesh_plan_result_free(r);
}

static const char calib_csv[] =
    "op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,wrong,in_place,redop,axis\n"
    "allreduce,2,1,1048576,fp32,ring,1000,0,0,0,0,sum,tp\n"
    "allreduce,2,1,1048576,fp32,ring,9999,0,0,0,1,sum,tp\n" /* in place: not used */
    "allreduce,2,1,1048576,fp32,ring,1200,0,0,0,0,sum,tp\n"
    "allreduce,2,1,1048576,fp32,ring,1100,0,0,0,0,sum,tp\n" /* median of 3: 1100 */
    "allreduce,2,1,2097152,fp32,ring,2100,0,0,0,0,sum,tp\n"
    "allreduce,2,1,4194304,fp32,ring,4100,0,0,0,0,sum,tp\n"
    "allgather,2,1,1048576,fp32,ring,600,0,0,0,0,none,tp\n"
    "allgather,2,1,4194304,fp32,ring,2100,0,0,0,0,none,tp\n"
    "reduce_scatter,2,1,1048576,fp32,ring,700,0,0,0,0,sum,tp\n"
    "reduce_scatter,2,1,4194304,fp32,ring,2200,0,0,0,0,sum,tp\n"
    "broadcast,2,1,1048576,fp32,ring,100,0,0,0,0,none,tp\n" /* not the planner's */
    "sendrecv,2,2,1048576,fp32,p2p,10000,0,0,0,0,none,pp\n"
    "sendrecv,2,2,4194304,fp32,p2p,40000,0,0,0,0,none,pp\n";

static void test_calibration(void)
{
    mesh_plan_calib_t *c;
    CHECK(mesh_plan_calib_parse(calib_csv, &c) == MESH_OK);
    CHECK(mesh_plan_calib_count(c) == 4);
    mesh_plan_calib_entry_t e;
    CHECK(mesh_plan_calib_entry(c, 0, &e) == MESH_OK);
    CHECK(strcmp(e.axis, "tp") == 0 && e.op == MESH_PLAN_OP_ALLREDUCE && e.nranks == 2 &&
          e.nodes == 1 && e.npoints == 3 && e.min_bytes == 1048576 && e.max_bytes == 4194304);
    CHECK(strcmp(e.mem, "host") == 0); /* a CSV without the mem column measured host memory */
    /* 1000 us per MiB and 100 us of latency: t = 100us + S / (1 MiB/ms) */
    CHECK_MSG(fabs(e.alpha - 100e-6) < 1e-9 && fabs(e.busbw - 1048576e3) < 1, "%g %g", e.alpha,
              e.busbw);
    double t;
    CHECK(mesh_plan_calib_predict(c, "tp", MESH_PLAN_OP_ALLREDUCE, 2, 1, 1048576, &t) == MESH_OK);
    CHECK(fabs(t - 1100e-6) < 1e-12); /* the median */
    CHECK(mesh_plan_calib_predict(c, "tp", MESH_PLAN_OP_ALLREDUCE, 2, 1, 3145728, &t) == MESH_OK);
    CHECK(fabs(t - 3100e-6) < 1e-12); /* between 2 and 4 MiB */
    CHECK(mesh_plan_calib_predict(c, "tp", MESH_PLAN_OP_ALLREDUCE, 2, 1, 8388608, &t) == MESH_OK);
    CHECK(fabs(t - 8100e-6) < 1e-9); /* past the last size, along the fit */
    CHECK(mesh_plan_calib_predict(c, "dp", MESH_PLAN_OP_ALLREDUCE, 2, 1, 1048576, &t) ==
          MESH_ERR_NOT_FOUND);
    CHECK(strstr(mesh_comm_last_error(NULL), "no allreduce on axis dp") != NULL);
    double b[8], s[8];
    CHECK(mesh_plan_calib_points(c, 3, b, s, 8) == 2 && b[1] == 4194304 && s[1] == 0.04);

    /* the planner takes the measured figures for the axes measured */
    mesh_plan_model_t m = {.name = "small",
                           .layers = 8,
                           .hidden = 1024,
                           .heads = 8,
                           .vocab = 1000,
                           .seq = 1024,
                           .batch_tokens = 64 * 1024};
    mesh_plan_cluster_t cl = cluster("cpu", 8);
    cl.gpus_per_node = 4;
    mesh_plan_params_t p = batch(0);
    mesh_plan_layout_t l = {.tp = 2, .pp = 2};
    mesh_plan_eval_t nominal, measured;
    CHECK(mesh_plan_evaluate(&m, &cl, &p, &l, &nominal) == MESH_OK);
    cl.calib = c;
    CHECK(mesh_plan_evaluate(&m, &cl, &p, &l, &measured) == MESH_OK);
    CHECK(!(nominal.calibrated & (1u << MESH_AXIS_TP)));
    CHECK((measured.calibrated & (1u << MESH_AXIS_TP)) &&
          (measured.calibrated & (1u << MESH_AXIS_PP)));
    CHECK(measured.comm_time[MESH_AXIS_TP] != nominal.comm_time[MESH_AXIS_TP]);
    mesh_plan_calib_free(c);

    /* malformed input names the line */
    CHECK(mesh_plan_calib_parse("size,time\n1,2\n", &c) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "line 1") != NULL);
    CHECK(mesh_plan_calib_parse("op,nranks,nodes,bytes,time_us,axis\n"
                                "allreduce,2,1,1024,5,tp\nallreduce,two,1,1024,5,tp\n",
                                &c) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "line 3") != NULL);
    CHECK(mesh_plan_calib_parse("op,nranks,nodes,bytes,time_us,axis\nbroadcast,2,1,1024,5,tp\n",
                                &c) == MESH_ERR_NOT_FOUND);
    /* device buffers: the mem column names the table; one memory per calibration */
    CHECK(mesh_plan_calib_parse("op,nranks,nodes,bytes,time_us,axis,mem\n"
                                "allreduce,2,1,1024,5,tp,cuda\nsendrecv,2,2,1024,9,pp,cuda\n",
                                &c) == MESH_OK);
    CHECK(mesh_plan_calib_count(c) == 2);
    CHECK(mesh_plan_calib_entry(c, 1, &e) == MESH_OK && strcmp(e.mem, "cuda") == 0 &&
          e.op == MESH_PLAN_OP_SENDRECV && e.nodes == 2);
    mesh_plan_calib_free(c);
    CHECK(mesh_plan_calib_parse("op,nranks,nodes,bytes,time_us,axis,mem\n"
                                "allreduce,2,1,1024,5,tp,emu\nbroadcast,2,1,1024,5,tp,host\n"
                                "allreduce,2,1,2048,9,tp,host\n",
                                &c) == MESH_ERR_INVALID_ARG);
    CHECK_MSG(strstr(mesh_comm_last_error(NULL), "line 4 measured host buffers, line 2 emu") !=
                  NULL,
              "%s", mesh_comm_last_error(NULL));
    CHECK(mesh_plan_calib_load("/nonexistent/x.csv", &c) == MESH_ERR_IO);
    CHECK(strstr(mesh_comm_last_error(NULL), "/nonexistent/x.csv") != NULL);
}

static void test_layout_text(void)
{
    mesh_plan_layout_t l = {0}, back = {0};
    unsigned set = 0, set2 = 0;
    CHECK(mesh_plan_layout_parse("tp=8,pp=16,cp=2,zero=1,mbs=2,schedule=interleaved,vpp=4,"
                                 "recompute=selective",
                                 &l, &set) == MESH_OK);
    CHECK(l.tp == 8 && l.pp == 16 && l.cp == 2 && l.zero == 1 && l.mbs == 2 &&
          l.schedule == MESH_PP_INTERLEAVED && l.vpp == 4 &&
          l.recompute == MESH_PLAN_RECOMPUTE_SELECTIVE);
    CHECK(set == (MESH_PLAN_SET_TP | MESH_PLAN_SET_PP | MESH_PLAN_SET_CP | MESH_PLAN_SET_ZERO |
                  MESH_PLAN_SET_MBS | MESH_PLAN_SET_SCHEDULE | MESH_PLAN_SET_VPP |
                  MESH_PLAN_SET_RECOMPUTE));
    char buf[256];
    CHECK(mesh_plan_layout_format(&l, buf, sizeof(buf)) > 0);
    CHECK(mesh_plan_layout_parse(buf, &back, &set2) == MESH_OK);
    CHECK(memcmp(&l, &back, sizeof(l)) == 0);
    CHECK(mesh_plan_layout_parse("tp=0", &l, &set) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "tp=0") != NULL);
    CHECK(mesh_plan_layout_parse("xp=2", &l, &set) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "unknown key 'xp'") != NULL);
    CHECK(mesh_plan_layout_parse("schedule=fast", &l, &set) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_plan_layout_parse("tp", &l, &set) == MESH_ERR_INVALID_ARG);
}

int main(void)
{
    test_properties();
    test_refusals();
    test_forced_span();
    test_best();
    test_calibration();
    test_layout_text();
    printf("ok\n");
    return 0;
}
