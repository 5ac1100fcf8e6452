/*
 * The planner's memory and pipeline formulas against the numbers the reference and the papers
 * behind it give: bytes per parameter by ZeRO stage (and the ZeRO paper's 7.5B-parameter
 * example), Korthikanti et al.'s activations per layer for GPT-3 175B in each of their cases
 * (and the 70% saved by selective recomputation), the micro-batches a pipeline stage holds and
 * the bubble per schedule, the activation total of a 1F1B pipeline (L layers' worth whatever p),
 * the communication volume of ZeRO-3 against ZeRO-2 (3 against 2 times the parameters), the
 * split of layers over pipeline stages with the embedding and the output layer, and the bytes
 * of expert dispatch across nodes, flat and hierarchical.
 */
#include "tests/harness/harness.h"

#include <math.h>
#include <mesh/parallel.h>
#include <string.h>

#define NEAR(a, b, tol) (fabs((a) - (double)(b)) <= (tol)*fmax(1.0, fabs((double)(b))))

static void test_zero_bytes(void)
{
    static const int ds[] = {1, 2, 3, 8, 64, 1024};
    for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
        double d = ds[i], p, g, o;
        /* DDP 16, ZeRO-1 4 + 12/d, ZeRO-2 2 + 14/d, ZeRO-3 16/d */
        const double want[4] = {16, 4 + 12 / d, 2 + 14 / d, 16 / d};
        for (int z = 0; z < 4; z++) {
            mesh_plan_state_bytes(z, ds[i], &p, &g, &o);
            CHECK_MSG(NEAR(p + g + o, want[z], 1e-12), "zero=%d d=%d: %g bytes, want %g", z, ds[i],
                      p + g + o, want[z]);
        }
        /* categories: bf16 parameters and gradients, 12 bytes of optimizer state */
        mesh_plan_state_bytes(0, ds[i], &p, &g, &o);
        CHECK(p == 2 && g == 2 && o == 12);
        mesh_plan_state_bytes(2, ds[i], &p, &g, &o);
        CHECK(p == 2 && NEAR(g, 2 / d, 1e-12) && NEAR(o, 12 / d, 1e-12));
    }
    /* fp32 throughout (the parameters their own master): DDP 16, ZeRO-1 8 + 8/d, ZeRO-2
     * 4 + 12/d, ZeRO-3 16/d; under a pipeline, at the peak of a step, stages 2 and 3 hold the
     * whole gradient (and parameters) beside the shard: bf16 4 + 14/d and 4 + 16/d, fp32
     * 8 + 12/d and 8 + 16/d; stages 0 and 1 as without */
    for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
        double d = ds[i], p, g, o;
        const double fp32[4] = {16, 8 + 8 / d, 4 + 12 / d, 16 / d};
        const double piped[2][4] = {{16, 4 + 12 / d, 4 + 14 / d, 4 + 16 / d},
                                    {16, 8 + 8 / d, 8 + 12 / d, 8 + 16 / d}};
        for (int z = 0; z < 4; z++) {
            mesh_plan_state_bytes_at(z, ds[i], MESH_PLAN_PREC_FP32, 0, &p, &g, &o);
            CHECK_MSG(NEAR(p + g + o, fp32[z], 1e-12), "fp32 zero=%d d=%d: %g, want %g", z, ds[i],
                      p + g + o, fp32[z]);
            for (int f = 0; f < 2; f++) {
                mesh_plan_state_bytes_at(z, ds[i], f ? MESH_PLAN_PREC_FP32 : MESH_PLAN_PREC_BF16, 1,
                                         &p, &g, &o);
                CHECK_MSG(NEAR(p + g + o, piped[f][z], 1e-12),
                          "%s zero=%d d=%d under pp: %g, want %g", f ? "fp32" : "bf16", z, ds[i],
                          p + g + o, piped[f][z]);
            }
        }
        mesh_plan_state_bytes_at(3, ds[i], MESH_PLAN_PREC_FP32, 1, &p, &g, &o);
        CHECK(NEAR(p, 4 + 4 / d, 1e-12) && NEAR(g, 4 + 4 / d, 1e-12) && NEAR(o, 8 / d, 1e-12));
    }
    /* the ZeRO paper's example: 7.5B parameters over 64 ranks: 120, 31.4, 16.6, 1.9 GB */
    const double psi = 7.5e9, want[4] = {120, 31.4, 16.6, 1.9};
    for (int z = 0; z < 4; z++) {
        double p, g, o;
        mesh_plan_state_bytes(z, 64, &p, &g, &o);
        double gb = psi * (p + g + o) / 1e9;
        CHECK_MSG(fabs(gb - want[z]) < 0.05, "zero=%d: %.2f GB, want %.1f", z, gb, want[z]);
    }
}

/* GPT-3 175B as Korthikanti et al. use it: s = 2048, h = 12288, a = 96, with dropout. */
static mesh_plan_model_t gpt3(void)
{
    mesh_plan_model_t m;
    CHECK(mesh_plan_model_preset("gpt3-175b", &m) == MESH_OK);
    return m;
}

static void test_activations(void)
{
    mesh_plan_model_t m = gpt3();
    double s = 2048, h = 12288, a = 96, b = 1, t = 8, sbh = s * b * h;
    const mesh_plan_recompute_t NONE = MESH_PLAN_RECOMPUTE_NONE,
                                SEL = MESH_PLAN_RECOMPUTE_SELECTIVE,
                                FULL = MESH_PLAN_RECOMPUTE_FULL;
    struct {
        const char *what;
        int tp, sp;
        mesh_plan_recompute_t rc;
        double want;
    } cases[] = {
        {"no parallelism", 1, 0, NONE, sbh * (34 + 5 * a * s / h)},
        {"tensor parallel", 8, 0, NONE, sbh * (10 + 24 / t + 5 * a * s / (h * t))},
        {"tensor + sequence parallel", 8, 1, NONE, sbh * (34 + 5 * a * s / h) / t},
        {"tensor parallel + selective", 8, 0, SEL, sbh * (10 + 24 / t)},
        {"tensor + sequence parallel + selective", 8, 1, SEL, sbh * 34 / t},
        {"full recomputation", 8, 0, FULL, 2 * sbh},
        {"full recomputation with sequence parallel", 8, 1, FULL, 2 * sbh / t},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double got = mesh_plan_act_layer(&m, 1, cases[i].tp, 1, cases[i].sp, cases[i].rc, 0, 1);
        CHECK_MSG(NEAR(got, cases[i].want, 1e-12), "%s: %.0f bytes, want %.0f", cases[i].what, got,
                  cases[i].want);
    }
    /* "a 70% activation memory reduction" for GPT-3 with selective recomputation */
    double full = mesh_plan_act_layer(&m, 1, 8, 1, 1, NONE, 0, 1);
    double sel = mesh_plan_act_layer(&m, 1, 8, 1, 1, SEL, 0, 1);
    CHECK_MSG(fabs((1 - sel / full) - 0.70) < 0.01, "selective saves %.1f%%",
              100 * (1 - sel / full));
    /* micro-batch size and context parallelism scale the activations linearly (the scores
     * quadratically in the local sequence but held against the whole one) */
    CHECK(NEAR(mesh_plan_act_layer(&m, 4, 8, 1, 1, SEL, 0, 1), 4 * sel, 1e-12));
    CHECK(NEAR(mesh_plan_act_layer(&m, 1, 8, 2, 1, SEL, 0, 1), sel / 2, 1e-12));
    /* a gated MLP without dropout, grouped-query attention: by hand for one layer */
    mesh_plan_model_t l = {.layers = 1,
                           .hidden = 4096,
                           .heads = 32,
                           .kv_heads = 8,
                           .ffn = 14336,
                           .gated = 1,
                           .vocab = 1000,
                           .seq = 1024};
    double sb = 1024, hh = 4096;
    double want = sb * hh * 8 + 2 * sb * hh + 4 * sb * 8 * 128 + 2 * sb * hh + 6 * sb * 14336;
    CHECK(NEAR(mesh_plan_act_layer(&l, 1, 1, 1, 0, SEL, 0, 1), want, 1e-12));
    /* bad arguments give 0, never a crash */
    CHECK(mesh_plan_act_layer(NULL, 1, 1, 1, 0, SEL, 0, 1) == 0);
    CHECK(mesh_plan_act_layer(&m, 0, 1, 1, 0, SEL, 0, 1) == 0);
    CHECK(mesh_plan_act_layer(&m, 1, 1, 1, 0, SEL, 1, 1) == 0); /* no experts */
}

static void test_pipeline(void)
{
    /* 1F1B: stage i holds p - i micro-batches (all m when m < p); ZB-H1 p on every stage (the
     * W of stage i's first i micro-batches waits to the end); AFAB holds m */
    for (int p = 1; p <= 16; p *= 2)
        for (int m = 1; m <= 64; m *= 4)
            for (int i = 0; i < p; i++) {
                double want = p - i < m ? p - i : m;
                CHECK(mesh_plan_inflight(MESH_PP_1F1B, p, m, 1, i) == want);
                CHECK(mesh_plan_inflight(MESH_PP_ZB1, p, m, 1, i) == (p < m ? p : m));
                CHECK(mesh_plan_inflight(MESH_PP_AFAB, p, m, 1, i) == m);
            }
    /* interleaved: the first stage holds p + (p - 1)/v stages' worth, the factor
     * 1 + (p - 1)/(p v) of Korthikanti et al. */
    CHECK(NEAR(mesh_plan_inflight(MESH_PP_INTERLEAVED, 8, 64, 2, 0), 8 + 7.0 / 2, 1e-12));
    CHECK(NEAR(mesh_plan_inflight(MESH_PP_INTERLEAVED, 16, 64, 4, 0), 16 + 15.0 / 4, 1e-12));
    /* bubble over the ideal time: (p-1)/m, i.e. (p-1)/(m+p-1) of the step */
    double bub = mesh_plan_bubble(MESH_PP_1F1B, 8, 32, 1);
    CHECK(NEAR(bub, 7.0 / 32, 1e-12) && NEAR(bub / (1 + bub), 7.0 / 39, 1e-12));
    CHECK(NEAR(mesh_plan_bubble(MESH_PP_AFAB, 4, 8, 1), 3.0 / 8, 1e-12));
    CHECK(NEAR(mesh_plan_bubble(MESH_PP_INTERLEAVED, 8, 32, 4), 7.0 / 128, 1e-12));
    CHECK(NEAR(mesh_plan_bubble(MESH_PP_ZB1, 8, 32, 1), 7.0 / 96, 1e-12));
    CHECK(mesh_plan_bubble(MESH_PP_NONE, 1, 32, 1) == 0);
    CHECK(mesh_plan_inflight(MESH_PP_1F1B, 4, 8, 1, 4) == 0); /* no such stage */
}

static mesh_plan_eval_t eval(const mesh_plan_model_t *m, const mesh_plan_cluster_t *c,
                             const char *spec, double batch_tokens)
{
    mesh_plan_layout_t l = {0};
    unsigned set = 0;
    mesh_plan_params_t p = {.field_mask = MESH_PLAN_PARAM_FIELD_BATCH,
                            .batch_tokens = batch_tokens};
    mesh_plan_eval_t e;
    CHECK_MSG(mesh_plan_layout_parse(spec, &l, &set) == MESH_OK, "%s", spec);
    CHECK(mesh_plan_evaluate(m, c, &p, &l, &e) == MESH_OK);
    return e;
}

static void test_pipeline_memory(void)
{
    /* 1F1B: the first stage keeps p micro-batches of L/p layers, L layers' worth for any p */
    mesh_plan_model_t m = gpt3();
    mesh_plan_cluster_t c;
    CHECK(mesh_plan_cluster_preset("a100-80g", 1024, &c) == MESH_OK);
    double layer = mesh_plan_act_layer(&m, 1, 8, 1, 1, MESH_PLAN_RECOMPUTE_SELECTIVE, 0, 1);
    const char *specs[] = {"tp=8,pp=4,schedule=1f1b,recompute=selective,zero=1",
                           "tp=8,pp=8,schedule=1f1b,recompute=selective,zero=1",
                           "tp=8,pp=16,schedule=1f1b,recompute=selective,zero=1"};
    for (int i = 0; i < 3; i++) {
        mesh_plan_eval_t e = eval(&m, &c, specs[i], 1536.0 * 2048);
        CHECK_MSG(e.reject == MESH_PLAN_OK, "%s: %s", specs[i], e.why);
        CHECK_MSG(NEAR(e.mem[MESH_PLAN_MEM_ACT], 96 * layer, 1e-9), "%s: %.3g, want %.3g", specs[i],
                  e.mem[MESH_PLAN_MEM_ACT], 96 * layer);
    }
    /* AFAB keeps all m micro-batches: 96 per pipeline here */
    mesh_plan_eval_t afab =
        eval(&m, &c, "tp=8,pp=8,schedule=afab,recompute=full,zero=1", 1536.0 * 2048);
    double full = mesh_plan_act_layer(&m, 1, 8, 1, 1, MESH_PLAN_RECOMPUTE_FULL, 0, 1);
    CHECK(afab.layout.micro_batches == 96);
    CHECK(afab.mem[MESH_PLAN_MEM_ACT] >= 12 * 96 * full);

    /* Under a pipeline ZeRO-2 and 3 reduce and gather once per step per stage: 2 Psi_s (d-1)/d
     * bytes, as DDP and ZeRO-1 */
    double b = 16.0 * 2048; /* dp = 16: one micro-batch per replica */
    mesh_plan_eval_t z0 = eval(&m, &c, "tp=8,pp=8,zero=0,mbs=1,recompute=full", b);
    mesh_plan_eval_t z1 = eval(&m, &c, "tp=8,pp=8,zero=1,mbs=1,recompute=full", b);
    mesh_plan_eval_t z2 = eval(&m, &c, "tp=8,pp=8,zero=2,mbs=1,recompute=full", b);
    mesh_plan_eval_t z3 = eval(&m, &c, "tp=8,pp=8,zero=3,mbs=1,recompute=full", b);
    CHECK(z0.layout.micro_batches == 1);
    CHECK(NEAR(z0.comm_bytes[MESH_AXIS_DP], z2.comm_bytes[MESH_AXIS_DP], 1e-12));
    CHECK(NEAR(z1.comm_bytes[MESH_AXIS_DP], z2.comm_bytes[MESH_AXIS_DP], 1e-12));
    CHECK_MSG(NEAR(z3.comm_bytes[MESH_AXIS_DP], z2.comm_bytes[MESH_AXIS_DP], 1e-12),
              "zero-3 / zero-2 volume under pp %.3f",
              z3.comm_bytes[MESH_AXIS_DP] / z2.comm_bytes[MESH_AXIS_DP]);
    /* the states per rank at the step's peak: the stage's whole parameters (stage 3) and
     * gradients (2, 3) beside their shards, over dp = 16 */
    double psi = z1.mem[MESH_PLAN_MEM_PARAMS] / 2; /* the fullest stage's parameters */
    CHECK(NEAR(z2.mem[MESH_PLAN_MEM_GRADS], psi * (2 + 2.0 / 16), 1e-12));
    CHECK(NEAR(z3.mem[MESH_PLAN_MEM_PARAMS], psi * (2 + 2.0 / 16), 1e-12));
    CHECK(NEAR(z3.mem[MESH_PLAN_MEM_GRADS], psi * (2 + 2.0 / 16), 1e-12));
    CHECK(NEAR(z3.mem[MESH_PLAN_MEM_OPTIM], psi * 12 / 16, 1e-12));
    CHECK(NEAR(z0.mem[MESH_PLAN_MEM_OPTIM] / z1.mem[MESH_PLAN_MEM_OPTIM], 16, 1e-9));
    /* without a pipeline ZeRO-3 gathers per micro-batch forward and backward: 3 times the
     * parameters, ZeRO-2 and DDP 2 (175B over tp=8 does not fit: the bytes still come back) */
    mesh_plan_eval_t y2 = eval(&m, &c, "tp=8,zero=2,mbs=1,recompute=full", 128.0 * 2048);
    mesh_plan_eval_t y3 = eval(&m, &c, "tp=8,zero=3,mbs=1,recompute=full", 128.0 * 2048);
    CHECK_MSG(NEAR(y3.comm_bytes[MESH_AXIS_DP] / y2.comm_bytes[MESH_AXIS_DP], 1.5, 1e-12),
              "zero-3 / zero-2 volume %.3f",
              y3.comm_bytes[MESH_AXIS_DP] / y2.comm_bytes[MESH_AXIS_DP]);
    CHECK(y3.mem[MESH_PLAN_MEM_PARAMS] < y2.mem[MESH_PLAN_MEM_PARAMS] / 8);
}

/* CPU ranks train in fp32 (mesh-train): mesh-train's 100M model on tp=2 pp=2 dp=2, ZeRO 1,
 * 1F1B over 2 micro-batches, even stages of 6 blocks, no sequence parallelism. Per rank of the
 * first stage: 4 + 4 + 8/2 bytes a parameter; 6 blocks x 2 micro-batches in flight x the
 * activations of a block in fp32, sbh (16 + 48/t) + 4 a s^2 b / t = 9,437,184 bytes; buffers:
 * the reserve, four pipeline messages of [s, h] fp32 and the receive buffer of the tied
 * table's shard, [V/t, h] fp32. */
static void test_cpu_memory(void)
{
    mesh_plan_model_t m = {.name = "mesh-train-100m",
                           .layers = 12,
                           .hidden = 768,
                           .heads = 12,
                           .vocab = 16384,
                           .seq = 256,
                           .tied = 1};
    mesh_plan_cluster_t c;
    CHECK(mesh_plan_cluster_preset("cpu", 8, &c) == MESH_OK);
    c.gpus_per_node = 8;
    CHECK(c.precision == MESH_PLAN_PREC_FP32);
    mesh_plan_cluster_t filled;
    CHECK(mesh_plan_cluster_check(&c, &filled) == MESH_OK);
    mesh_plan_params_t p = {.field_mask =
                                MESH_PLAN_PARAM_FIELD_BATCH | MESH_PLAN_PARAM_FIELD_CHOICES,
                            .batch_tokens = 1024,
                            .no_sp = 1};
    mesh_plan_layout_t l = {0};
    unsigned set = 0;
    CHECK(mesh_plan_layout_parse("tp=2,pp=2,dp=2,zero=1,mbs=1,schedule=1f1b,recompute=none,even=1",
                                 &l, &set) == MESH_OK);
    CHECK(l.even == 1 && (set & MESH_PLAN_SET_EVEN));
    mesh_plan_eval_t e;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &l, &e) == MESH_OK);
    CHECK_MSG(e.reject == MESH_PLAN_OK, "%s", e.why);
    CHECK(e.stage_layers_first == 6 && e.stage_layers_last == 6 && e.layout.micro_batches == 2);
    double act = 9437184.0;
    CHECK(
        NEAR(mesh_plan_act_layer(&m, 1, 2, 1, 0, MESH_PLAN_RECOMPUTE_NONE, 0, 1) * 2, act, 1e-12));
    CHECK_MSG(NEAR(e.mem[MESH_PLAN_MEM_ACT], 12 * act, 1e-12), "activations %.0f, want %.0f",
              e.mem[MESH_PLAN_MEM_ACT], 12 * act);
    /* the reserve, the pipeline's messages, the tied table's gradient, and two reductions in
     * flight (mesh_zero's max_inflight), each with the ring's receive scratch: half of a 4 MiB
     * bucket over dp = 2 */
    CHECK(filled.inflight == 2 && filled.bucket_bytes == 4 << 20 && filled.coll_window == 8 << 20);
    double buffers =
        filled.reserve + 4.0 * 4 * 256 * 768 + 4.0 * 8192 * 768 + 2 * (1.0 / 2) * (4 << 20);
    CHECK_MSG(NEAR(e.mem[MESH_PLAN_MEM_BUFFERS], buffers, 1e-12), "buffers %.0f, want %.0f",
              e.mem[MESH_PLAN_MEM_BUFFERS], buffers);
    CHECK(NEAR(e.mem[MESH_PLAN_MEM_GRADS], e.mem[MESH_PLAN_MEM_PARAMS], 1e-12) &&
          NEAR(e.mem[MESH_PLAN_MEM_OPTIM], e.mem[MESH_PLAN_MEM_PARAMS], 1e-12));
    /* ZeRO 2 without a pipeline: the gradient shard (4/4 bytes a parameter), and beside it the
     * staging of the two buckets in flight, of the block whose gradients the backward pass is
     * writing (12 C^2 + 2 C = 7,079,424 parameters as the planner counts a block, over tp = 2)
     * and of the tied table's gradient (8192 x 768 over tp = 2), and the two reductions'
     * receive scratch, 3/4 of a bucket each over dp = 4; a wider bound counts more, a larger
     * bucket a larger window, up to 8 MiB */
    mesh_plan_layout_t z2 = {0};
    set = 0;
    CHECK(mesh_plan_layout_parse("tp=2,dp=4,zero=2,mbs=1,recompute=none", &z2, &set) == MESH_OK);
    mesh_plan_eval_t e2;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &z2, &e2) == MESH_OK);
    double psi = e2.mem[MESH_PLAN_MEM_PARAMS] / 4; /* parameters of a tp rank */
    CHECK_MSG(NEAR(e2.mem[MESH_PLAN_MEM_GRADS], psi, 1e-12), "grads %.0f, want %.0f",
              e2.mem[MESH_PLAN_MEM_GRADS], psi);
    double mib = 1 << 20, block = 4.0 * 7079424 / 2, table = 4.0 * 8192 * 768;
    double base = filled.reserve + block + table;
    CHECK_MSG(NEAR(e2.mem[MESH_PLAN_MEM_BUFFERS], base + 2 * 4 * mib + 2 * 3 * mib, 1e-12),
              "buffers %.0f, want %.0f", e2.mem[MESH_PLAN_MEM_BUFFERS],
              base + 2 * 4 * mib + 2 * 3 * mib);
    mesh_plan_cluster_t wide = c;
    wide.inflight = 5;
    wide.bucket_bytes = 16 * mib;
    CHECK(mesh_plan_evaluate(&m, &wide, &p, &z2, &e2) == MESH_OK);
    CHECK(NEAR(e2.mem[MESH_PLAN_MEM_BUFFERS], base + 5 * 16 * mib + 5 * 8 * mib, 1e-12));
    /* stage 1 holds no staging: the scratch only */
    z2.zero = 1;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &z2, &e2) == MESH_OK);
    CHECK(NEAR(e2.mem[MESH_PLAN_MEM_BUFFERS], filled.reserve + 2 * 3 * mib, 1e-12));
    z2.zero = 2;
    /* GPUs: buckets of 40M gradients, no scratch beyond the reserve */
    mesh_plan_cluster_t gpu = c;
    gpu.bucket_bytes = 40e6 * 4;
    gpu.coll_window = -1;
    CHECK(mesh_plan_evaluate(&m, &gpu, &p, &z2, &e2) == MESH_OK);
    CHECK(NEAR(e2.mem[MESH_PLAN_MEM_GRADS], psi, 1e-12));
    CHECK(NEAR(e2.mem[MESH_PLAN_MEM_BUFFERS], base + 2 * fmin(4 * psi, 160e6), 1e-12));
    /* the balanced split puts 7 blocks on the first stage (the head's work is the last's) */
    l.even = 0;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &l, &e) == MESH_OK);
    CHECK(e.stage_layers_first == 7 && e.stage_layers_last == 5);
    /* an even split that does not divide is refused */
    m.layers = 13;
    l.even = 1;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &l, &e) == MESH_OK);
    CHECK(e.reject == MESH_PLAN_REJ_INVALID && strstr(e.why, "evenly"));
    /* the bytes follow the precision: dp moves the fp32 gradients, twice bf16's */
    m.layers = 12;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &l, &e) == MESH_OK);
    mesh_plan_eval_t bf;
    c.precision = MESH_PLAN_PREC_BF16;
    CHECK(mesh_plan_evaluate(&m, &c, &p, &l, &bf) == MESH_OK);
    CHECK(NEAR(e.comm_bytes[MESH_AXIS_TP], 2 * bf.comm_bytes[MESH_AXIS_TP], 1e-12));
    CHECK(NEAR(e.comm_bytes[MESH_AXIS_DP], 2 * bf.comm_bytes[MESH_AXIS_DP], 1e-12));
    /* pp: the activations per micro-batch both ways, then the tied table's fp32 shard */
    double pp = 2 * 2 * 256 * 768.0;
    CHECK_MSG(NEAR(e.comm_bytes[MESH_AXIS_PP], 4 * pp + 4.0 * 8192 * 768, 1e-12), "pp bytes %.0f",
              e.comm_bytes[MESH_AXIS_PP]);
    CHECK(NEAR(bf.comm_bytes[MESH_AXIS_PP], 2 * pp + 4.0 * 8192 * 768, 1e-12));
}

static void test_counts(void)
{
    /* published totals: Llama 2 7B 6.74B, Llama 3 405B 405.9B (the paper's 405B), Mixtral
     * 46.7B (12.9B active), DeepSeek-V3 671B (37B active), GPT-3 175B */
    struct {
        const char *name;
        double total, active, tol;
    } want[] = {{"llama2-7b", 6.74e9, 6.74e9, 0.01},
                {"llama3-405b", 405.9e9, 405.9e9, 0.01},
                {"mixtral-8x7b", 46.7e9, 12.9e9, 0.01},
                {"deepseek-v3", 671e9, 37.5e9, 0.02},
                {"gpt3-175b", 175e9, 175e9, 0.01}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        mesh_plan_model_t m;
        double total, active;
        CHECK(mesh_plan_model_preset(want[i].name, &m) == MESH_OK);
        CHECK(mesh_plan_model_count(&m, &total, &active) == MESH_OK);
        CHECK_MSG(fabs(total / want[i].total - 1) < want[i].tol &&
                      fabs(active / want[i].active - 1) < want[i].tol,
                  "%s: %.4g total, %.4g active", want[i].name, total, active);
    }
    /* a model that is not one: the message names the field */
    mesh_plan_model_t bad = {.layers = 2, .hidden = 100, .heads = 7, .vocab = 10, .seq = 8};
    CHECK(mesh_plan_model_count(&bad, NULL, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "hidden 100") != NULL);
    bad.heads = 4;
    bad.layers = 0;
    CHECK(mesh_plan_model_count(&bad, NULL, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "layers") != NULL);
    mesh_plan_model_t m;
    CHECK(mesh_plan_model_preset("no-such-model", &m) == MESH_ERR_NOT_FOUND);
    CHECK(strstr(mesh_comm_last_error(NULL), "no-such-model") != NULL);
}

/* Layers per stage: the slowest stage as fast as it can be, the first and then the last as
 * light as that allows (they also hold the embedding and the output layer). */
static void test_stage_split(void)
{
    mesh_plan_cluster_t c;
    CHECK(mesh_plan_cluster_preset("h100", 8192, &c) == MESH_OK);
    mesh_plan_model_t m;
    CHECK(mesh_plan_model_preset("llama3-405b", &m) == MESH_OK);
    struct {
        int layers, pp, first, last, most;
    } want[] = {
        {126, 16, 7, 7, 8}, /* as Meta trained it: 7, 8 x 14, 7 */
        {128, 16, 8, 8, 8}, /* 7 on the last would put 9 on another stage */
        {126, 2, 63, 63, 63}, {126, 8, 15, 15, 16}, {126, 64, 1, 1, 2}, {127, 16, 8, 7, 8},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char spec[64];
        m.layers = want[i].layers;
        snprintf(spec, sizeof(spec), "tp=8,pp=%d,zero=1,recompute=full", want[i].pp);
        mesh_plan_eval_t e = eval(&m, &c, spec, 16777216);
        CHECK_MSG(e.stage_layers_first == want[i].first && e.stage_layers_last == want[i].last &&
                      e.stage_layers_max == want[i].most,
                  "%d layers on pp=%d: first %d last %d most %d, want %d %d %d", want[i].layers,
                  want[i].pp, e.stage_layers_first, e.stage_layers_last, e.stage_layers_max,
                  want[i].first, want[i].last, want[i].most);
        /* the slowest stage's work over the average's: max(most, last + head) / ((L + head)/p) */
        double work = fmax(e.stage_layers_max, e.stage_layers_last + e.head_layers);
        CHECK(NEAR(e.stage_imbalance, work / ((want[i].layers + e.head_layers) / want[i].pp) - 1,
                   1e-12));
    }
}

/* Every split of L layers over p stages (each at least one): the least work of the slowest
 * stage, the last counting w more, and among the splits reaching it the fewest layers on the
 * first stage, then on the last. */
static void split_bf(int left, int p, int i, double w, double most, int first, int *cur,
                     double *best, int *bfirst, int *blast)
{
    if (i == p - 1) {
        double load = fmax(most, left + (p > 1 ? w : 0));
        int f = p > 1 ? first : left;
        if (load < *best - 1e-9 ||
            (fabs(load - *best) <= 1e-9 && (f < *bfirst || (f == *bfirst && left < *blast)))) {
            *best = load, *bfirst = f, *blast = left;
        }
        return;
    }
    for (int n = 1; n <= left - (p - 1 - i); n++) {
        cur[i] = n;
        split_bf(left - n, p, i + 1, w, fmax(most, n), i == 0 ? n : first, cur, best, bfirst,
                 blast);
    }
}

/* The planner's split against every split there is, for 1..20 layers on 1..6 stages. */
static void test_stage_split_all(void)
{
    int shapes = 0;
    for (int p = 1; p <= 6; p++) {
        mesh_plan_cluster_t c;
        CHECK(mesh_plan_cluster_preset("cpu", p, &c) == MESH_OK);
        c.gpus_per_node = p;
        for (int L = p; L <= 20; L++)
            for (int v = 0; v < 3; v++) { /* output layers of 0.64, 2.6 and 10 layers' work */
                mesh_plan_model_t m = {.name = "split",
                                       .layers = L,
                                       .hidden = 64,
                                       .heads = 4,
                                       .vocab = (int[]){500, 2000, 8000}[v],
                                       .seq = 16,
                                       .tied = 1};
                char spec[32];
                snprintf(spec, sizeof(spec), "pp=%d,zero=1,recompute=none", p);
                mesh_plan_eval_t e = eval(&m, &c, spec, 16.0 * 16);
                CHECK_MSG(e.reject != MESH_PLAN_REJ_INVALID, "%s: %s", spec, e.why);
                int cur[8], bfirst = 1 << 30, blast = 1 << 30;
                double best = 1e30, w = e.head_layers;
                split_bf(L, p, 0, w, 0, 0, cur, &best, &bfirst, &blast);
                double load = fmax(e.stage_layers_max, e.stage_layers_last + (p > 1 ? w : 0));
                CHECK_MSG(fabs(load - best) < 1e-9 && e.stage_layers_first == bfirst &&
                              e.stage_layers_last == blast,
                          "%d layers on %d stages, head %.3f: slowest %.3f first %d last %d; "
                          "every split: %.3f first %d last %d",
                          L, p, w, load, e.stage_layers_first, e.stage_layers_last, best, bfirst,
                          blast);
                shapes++;
            }
    }
    printf("ok: the stage split is the best of every split, %d shapes\n", shapes);
}

/* One all-to-all of an MoE layer whose ep group spans N = 2 nodes of g = 4 ranks, for E = 16
 * experts and k = 4: flat, k (N-1)/N = 2 rows cross nodes and k (g-1)/(gN) = 1.5 move inside
 * one, both at once; hierarchical, D (N-1)/N rows cross, D = N (1 - C(E - E/N, k) / C(E, k)) =
 * 25/13 nodes hit, then k (g-1)/g = 3 move inside; with routing limited to one node, D = 1. On
 * H100 figures (45 and 360 GB/s) the hierarchical path is the faster. Inside one node of 8:
 * k (ep-1)/ep = 3.5 rows. */
static void test_ep_span(void)
{
    mesh_plan_cluster_t c;
    CHECK(mesh_plan_cluster_preset("h100", 8, &c) == MESH_OK);
    c.gpus_per_node = 4;
    mesh_plan_model_t m = {.name = "moe",
                           .layers = 2,
                           .hidden = 4096,
                           .heads = 32,
                           .vocab = 1000,
                           .seq = 1024,
                           .experts = 16,
                           .top_k = 4};
    double row = 2.0 * 1024 * 4096; /* a micro-batch's tokens, bf16 */
    /* per step: 1 micro-batch, 2 MoE layers, forward and backward, dispatch and combine */
    double per = 2 * 2 * 2 * row;
    for (int limit = 0; limit <= 1; limit++) {
        m.route_nodes = limit;
        mesh_plan_eval_t e = eval(&m, &c, "ep=8,etp=1,zero=1,mbs=1,recompute=none", 8 * 1024.0);
        CHECK_MSG(e.reject == MESH_PLAN_OK, "%s", e.why);
        CHECK(e.axis_nodes[MESH_AXIS_EP] == 2 && e.ep_hier);
        double D = limit ? 1 : 2 * (1 - 70.0 / 1820), rows = D / 2 + 3;
        CHECK_MSG(NEAR(e.comm_bytes[MESH_AXIS_EP], per * rows, 1e-12),
                  "route_nodes %d: %.6g bytes, want %.6g", limit, e.comm_bytes[MESH_AXIS_EP],
                  per * rows);
    }
    c.gpus_per_node = 8;
    m.route_nodes = 0;
    mesh_plan_eval_t e = eval(&m, &c, "ep=8,etp=1,zero=1,mbs=1,recompute=none", 8 * 1024.0);
    CHECK(e.axis_nodes[MESH_AXIS_EP] == 1 && !e.ep_hier);
    CHECK(NEAR(e.comm_bytes[MESH_AXIS_EP], per * 3.5, 1e-12));
}

int main(void)
{
    test_zero_bytes();
    test_activations();
    test_pipeline();
    test_pipeline_memory();
    test_cpu_memory();
    test_counts();
    test_stage_split();
    test_stage_split_all();
    test_ep_span();
    printf("ok\n");
    return 0;
}
