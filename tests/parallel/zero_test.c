/*
 * The ZeRO layer under meshrun, against the single-process reference of zero_model.c: for each
 * stage asked, the synthetic model trains for --steps steps (micro-batches, stage-3 gathers with
 * prefetch, gradients marked ready in a different order on odd and even ranks) and after every
 * step the gradient norm, the clipping verdict and every parameter must equal the reference's
 * (odd steps ask mesh_zero_grad_sqnorm for the norm and give it to mesh_zero_step_norm); at the
 * end every stage's parameters must equal stage 0's.
 *   zero_test [--stages 0,1,2,3] [--dtype fp32|bf16] [--opt adamw|sgd] [--steps N] [--micro K]
 *             [--batch B] [--bucket BYTES] [--overlap 0|1] [--inflight K] [--no-ready]
 *             [--clip NORM]
 *             [--mp tp|pp] [--bytes] [--memory] [--big] [--variant missing|extra|shape]
 *             [--save DIR --save-at K] [--final FILE] [--load DIR --start K] [--compare FILE]
 *             [--expect-load-error TEXT] [--check-overlap]
 * --mp: a grid of tp=2 (or pp=2) and dp = world / 2, the norm summed over tp (pp) with
 * replicated (shared) tensors. --bytes: the bytes each rank sends on dp in every step equal
 * 2 Psi (d-1)/d (stages 0-2) or 3 Psi (d-1)/d (stage 3). --memory: the report by category
 * equals DESIGN's formulas. --final/--compare: the parameters after the last step, written by
 * the first rank / compared with such a file (a run continued from a checkpoint against an
 * uninterrupted one). --check-overlap: the last group's reduction is under way before the
 * backward pass ends with overlap on, and nothing was sent with it off (stages 0-2).
 */
#include "tests/harness/mp_check.h"
#include "zero_model.h"
#include <math.h>
#include <mesh.h>
#include <mesh/zero.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int wrank, failures;
#define CHECK(cond, ...) MESH_MP_CHECK(wrank, failures, cond, __VA_ARGS__)

static struct {
    int stages[4], nstages;
    int bf16, steps, micro, batch, overlap, inflight, ready, bytes, memory, big, start;
    int check_overlap, save_at;
    size_t bucket;
    double clip;
    mesh_zero_optimizer_t opt;
    zm_mp_mode_t mp;
    const char *variant, *save, *final, *load, *compare, *expect_error;
} o = {.stages = {0, 1, 2, 3},
       .nstages = 4,
       .steps = 10,
       .micro = 1,
       .batch = 24,
       .overlap = 1,
       .ready = 1,
       .bucket = 3000,
       .variant = ""};

static mesh_comm_h world, dp, mp;
static int d, r, mrank, msize;
static zm_model_t md;
static zm_conf_t conf;

static void die(const char *what, mesh_status_t st)
{
    fprintf(stderr, "[rank %d] %s: %s: %s\n", wrank, what, mesh_status_string(st),
            mesh_comm_last_error(NULL));
    exit(1);
}
#define MUST(call)                                                                                 \
    do {                                                                                           \
        mesh_status_t st_ = (call);                                                                \
        if (st_ != MESH_OK)                                                                        \
            die(#call, st_);                                                                       \
    } while (0)

static float get(const void *p, size_t i)
{
    if (!o.bf16)
        return ((const float *)p)[i];
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)((const uint16_t *)p)[i] << 16};
    return v.f;
}

static void put(void *p, size_t i, float x)
{
    if (!o.bf16) {
        ((float *)p)[i] = x;
        return;
    }
    union {
        float f;
        uint32_t u;
    } v = {.f = zm_round_bf16(x)};
    ((uint16_t *)p)[i] = (uint16_t)(v.u >> 16);
}

/* Distinct groups of the model, ascending. */
static int groups(int *ids)
{
    int n = 0;
    for (int k = 0; k < md.n; k++) {
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= ids[i] == md.t[k].group;
        if (!seen)
            ids[n++] = md.t[k].group;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    return n;
}

static mesh_zero_h make(int stage, mesh_zero_params_t *pp)
{
    mesh_zero_params_t p = {.field_mask =
                                MESH_ZERO_PARAM_FIELD_STAGE | MESH_ZERO_PARAM_FIELD_OPTIMIZER |
                                MESH_ZERO_PARAM_FIELD_LR | MESH_ZERO_PARAM_FIELD_BETAS |
                                MESH_ZERO_PARAM_FIELD_EPS | MESH_ZERO_PARAM_FIELD_WEIGHT_DECAY |
                                MESH_ZERO_PARAM_FIELD_MOMENTUM | MESH_ZERO_PARAM_FIELD_DTYPE |
                                MESH_ZERO_PARAM_FIELD_BUCKET_BYTES | MESH_ZERO_PARAM_FIELD_OVERLAP |
                                MESH_ZERO_PARAM_FIELD_MAX_GRAD_NORM,
                            .stage = stage,
                            .optimizer = conf.opt,
                            .lr = conf.lr,
                            .beta1 = conf.beta1,
                            .beta2 = conf.beta2,
                            .eps = conf.eps,
                            .weight_decay = conf.wd,
                            .momentum = conf.momentum,
                            .dtype = o.bf16 ? MESH_BF16 : MESH_FP32,
                            .bucket_bytes = o.bucket,
                            .overlap = o.overlap,
                            .max_grad_norm = conf.max_norm};
    if (o.inflight) {
        p.field_mask |= MESH_ZERO_PARAM_FIELD_MAX_INFLIGHT;
        p.max_inflight = o.inflight;
    }
    if (mp) {
        p.field_mask |= MESH_ZERO_PARAM_FIELD_MP_COMM;
        p.mp_comm = mp;
    }
    if (pp)
        *pp = p;
    mesh_zero_h z;
    MUST(mesh_zero_create(dp, &p, &z));
    for (int k = 0; k < md.n; k++) {
        const zm_spec_t *t = &md.t[k];
        MUST(mesh_zero_add(z, t->name, t->numel, t->ndim, t->shape, t->flags, t->group));
    }
    MUST(mesh_zero_finalize(z));
    float *v = malloc(sizeof(float) * 600000);
    for (int k = 0; k < md.n; k++) {
        const zm_spec_t *t = &md.t[k];
        for (size_t i = 0; i < t->numel; i++)
            v[i] = zm_init(t, conf.seed, i);
        if (t->direct_init && stage != 3) { /* the model writes its parameters itself */
            void *p;
            MUST(mesh_zero_param(z, t->name, &p));
            for (size_t i = 0; i < t->numel; i++)
                put(p, i, v[i]);
        } else {
            for (size_t i = 0; o.bf16 && t->direct_init && i < t->numel; i++)
                v[i] = zm_round_bf16(v[i]);
            MUST(mesh_zero_init_param(z, t->name, v));
        }
    }
    free(v);
    return z;
}

/* Parameters of every tensor as floats (stage 3: gathered, outside any measured window). */
static float **read_params(mesh_zero_h z)
{
    float **out = calloc((size_t)md.n, sizeof(float *));
    int ids[ZM_MAX_TENSORS], ng = groups(ids);
    for (int gi = 0; gi < ng; gi++) {
        MUST(mesh_zero_gather(z, ids[gi]));
        MUST(mesh_zero_wait_params(z, ids[gi]));
        for (int k = 0; k < md.n; k++) {
            if (md.t[k].group != ids[gi])
                continue;
            void *p;
            MUST(mesh_zero_param(z, md.t[k].name, &p));
            out[k] = malloc(sizeof(float) * md.t[k].numel);
            for (size_t i = 0; i < md.t[k].numel; i++)
                out[k][i] = get(p, i);
        }
        MUST(mesh_zero_release(z, ids[gi]));
    }
    return out;
}

static void free_params(float **p)
{
    for (int k = 0; p && k < md.n; k++)
        free(p[k]);
    free(p);
}

static double tolerance(float ref, long step)
{
    /* fp32: 1e-6 (relative above 1). bf16: the reference's gradients are not rounded to bf16, so
     * its master weights drift from the layer's by a small part of the steps taken (2% of lr per
     * step), and the parameters compared are rounded: two units in the last place. */
    return o.bf16 ? ldexp(fabs(ref), -7) + 0.02 * conf.lr * (double)step
                  : 1e-6 * fmax(1.0, fabs(ref));
}

/* Stage 3: every group gathered (the next one prefetched), read, released; others: no-ops. */
static void forward(mesh_zero_h z)
{
    int ids[ZM_MAX_TENSORS], ng = groups(ids);
    MUST(mesh_zero_gather(z, ids[0]));
    for (int gi = 0; gi < ng; gi++) {
        if (gi + 1 < ng)
            MUST(mesh_zero_gather(z, ids[gi + 1]));
        MUST(mesh_zero_wait_params(z, ids[gi]));
        if (gi == 0) { /* gathers nest: the inner release keeps the parameters */
            MUST(mesh_zero_gather(z, ids[gi]));
            MUST(mesh_zero_release(z, ids[gi]));
        }
        for (int k = 0; k < md.n; k++) {
            void *p;
            if (md.t[k].group == ids[gi])
                MUST(mesh_zero_param(z, md.t[k].name, &p));
        }
        MUST(mesh_zero_release(z, ids[gi]));
    }
}

static uint64_t dp_bytes_sent(void)
{
    const char *seen[8];
    int n = 0;
    uint64_t total = 0;
    for (int p = 0; p < d; p++) {
        const char *tl = mesh_comm_peer_transport(dp, p);
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= strcmp(seen[i], tl) == 0;
        if (dup || n == 8)
            continue;
        seen[n++] = tl;
        uint64_t s = 0;
        MUST(mesh_comm_tl_bytes(dp, tl, &s, NULL));
        total += s;
    }
    return total;
}

/* With overlap on, the reduction of the last group's bucket must be under way while the
 * backward pass goes on (the bytes sent on dp grow before the micro-batch ends); with overlap
 * off, nothing may have been sent. Stage 3's prefetching gathers would blur the count. */
static void check_overlap(mesh_zero_h z, uint64_t before)
{
    if (!o.overlap) {
        CHECK(dp_bytes_sent() == before,
              "overlap off, yet bytes were sent during the backward pass");
        return;
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { /* the peers reach the same point and progress too; 10 s is far beyond any need */
        MUST(mesh_zero_progress(z));
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (dp_bytes_sent() == before && t.tv_sec - t0.tv_sec < 10);
    CHECK(dp_bytes_sent() > before,
          "overlap on, yet no reduction started during the backward pass");
}

/* Gradients of this rank's samples of micro-batch j, group by group from the last. */
static void backward(mesh_zero_h z, int stage, long step, int j)
{
    int ids[ZM_MAX_TENSORS], ng = groups(ids);
    int per = o.batch / d / o.micro;
    long s0 = step * o.batch + (long)r * (o.batch / d) + (long)j * per;
    float scale = (float)d / (float)o.batch;
    MUST(mesh_zero_gather(z, ids[ng - 1]));
    for (int gi = ng - 1; gi >= 0; gi--) {
        if (gi > 0)
            MUST(mesh_zero_gather(z, ids[gi - 1]));
        MUST(mesh_zero_wait_params(z, ids[gi]));
        int probe =
            o.check_overlap && gi == ng - 1 && stage < 3 && (stage >= 2 || j == o.micro - 1);
        uint64_t before = probe ? dp_bytes_sent() : 0;
        for (int n = 0; n < md.n; n++) {
            /* ready marks in a different order on odd and even ranks: the layer must still start
             * the same sequence of reductions everywhere */
            int k = (r % 2) ? n : md.n - 1 - n;
            const zm_spec_t *t = &md.t[k];
            if (t->group != ids[gi])
                continue;
            void *p, *g;
            MUST(mesh_zero_param(z, t->name, &p));
            MUST(mesh_zero_grad(z, t->name, &g));
            uint64_t base = zm_base(t, conf.seed);
            for (size_t i = 0; i < t->numel; i++) {
                float w = get(p, i), acc = 0;
                for (int s = 0; s < per; s++) {
                    float a, c;
                    zm_sample(base, s0 + s, i, &a, &c);
                    acc += a * (w - c);
                }
                put(g, i, get(g, i) + scale * acc);
            }
            if (o.ready)
                MUST(mesh_zero_grad_ready(z, t->name));
        }
        if (probe)
            check_overlap(z, before);
        MUST(mesh_zero_release(z, ids[gi]));
    }
}

static void check_bytes(int stage, uint64_t sent, const mesh_zero_memory_t *m, long step)
{
    size_t es = o.bf16 ? 2 : 4;
    double f = (stage == 3 ? 3.0 : 2.0) * (d - 1) / d;
    double padded = f * (double)m->padded_numel * es, raw = f * (double)m->numel * es;
    double pad = padded - raw;
    /* the norm's all-reduce of one double adds a few bytes in stages 1-3 */
    CHECK(fabs((double)sent - padded) <= 0.01 * padded + 256,
          "stage %d step %ld: sent %llu bytes on dp, %.0f expected (%.1f x padded Psi)", stage,
          step, (unsigned long long)sent, padded, f);
    CHECK(fabs((double)sent - raw) <= 0.02 * raw + pad + 256,
          "stage %d step %ld: sent %llu bytes on dp, formula %.0f +- 2%% + padding %.0f", stage,
          step, (unsigned long long)sent, raw, pad);
    if (wrank == 0 && getenv("ZERO_TEST_VERBOSE"))
        printf("bytes stage %d step %ld: sent %llu on dp, %.0f expected (raw formula %.0f)\n",
               stage, step, (unsigned long long)sent, padded, raw);
}

static void check_memory(mesh_zero_h z, int stage, int after_step)
{
    mesh_zero_memory_t m;
    MUST(mesh_zero_memory(z, &m));
    double n = (double)m.numel, pad = (double)(m.padded_numel - m.numel), dd = d;
    double es = o.bf16 ? 2 : 4, mw = o.bf16 ? 4 : 0;
    double st = conf.opt == MESH_ZERO_ADAMW ? 8 : conf.momentum > 0 ? 4 : 0;
    /* bytes per parameter by category: DESIGN section 9 (bf16), and its fp32 counterpart */
    double want[4] = {stage == 3 ? es / dd : es, stage >= 2 ? es / dd : es,
                      stage == 0 ? mw : mw / dd, stage == 0 ? st : st / dd};
    size_t got[4] = {m.params, m.grads, m.master, m.optimizer};
    const char *what[4] = {"params", "grads", "master", "optimizer"};
    double total = 0, wtotal = 0;
    for (int c = 0; c < 4; c++) {
        CHECK(fabs((double)got[c] - want[c] * n) <= 0.02 * want[c] * n + want[c] * pad,
              "stage %d %s: %zu bytes, formula %.0f (+-2%% + padding %.0f)", stage, what[c], got[c],
              want[c] * n, want[c] * pad);
        total += (double)got[c];
        wtotal += want[c];
    }
    double formula = conf.opt == MESH_ZERO_ADAMW && o.bf16 ? (stage == 0   ? 16
                                                              : stage == 1 ? 4 + 12 / dd
                                                              : stage == 2 ? 2 + 14 / dd
                                                                           : 16 / dd)
                                                           : wtotal;
    CHECK(fabs(total - formula * n) <= 0.02 * formula * n + 16 * pad,
          "stage %d: model states %.0f bytes, DESIGN's %.4f bytes x %zu params = %.0f", stage,
          total, formula, m.numel, formula * n);
    CHECK(m.master_is_params == !o.bf16, "stage %d: master_is_params %d", stage,
          m.master_is_params);
    CHECK(m.shard_numel * (size_t)d == m.padded_numel, "stage %d: shard %zu x %d != %zu", stage,
          m.shard_numel, d, m.padded_numel);
    if (after_step && stage >= 2) /* staging given back: a few edge pages and bookkeeping */
        CHECK(m.buffers <= (size_t)65536 + (size_t)md.n * 4 * 4096,
              "stage %d: %zu bytes of staging still resident after the step", stage, m.buffers);
    if (wrank == 0 && after_step)
        printf("memory stage %d: params %zu grads %zu master %zu optimizer %zu buffers %zu "
               "(%zu params, %zu padded)\n",
               stage, m.params, m.grads, m.master, m.optimizer, m.buffers, m.numel, m.padded_numel);
}

static void compare(float **got, zm_ref_t *ref, int stage, long step)
{
    int bad = 0;
    double worst = 0;
    for (int k = 0; k < md.n; k++)
        for (size_t i = 0; i < md.t[k].numel; i++) {
            float want = ref->w[mrank][k][i];
            if (o.bf16)
                want = zm_round_bf16(want);
            double diff = fabs((double)got[k][i] - want);
            if (diff > worst)
                worst = diff;
            if (diff > tolerance(want, step) && bad++ < 3)
                CHECK(0, "stage %d step %ld: %s[%zu] = %.9g, reference %.9g", stage, step,
                      md.t[k].name, i, got[k][i], want);
        }
    if (wrank == 0 && getenv("ZERO_TEST_VERBOSE"))
        printf("stage %d step %ld: largest difference from the reference %.3g\n", stage, step,
               worst);
}

/* The file of this rank's model-parallel part: FILE, or FILE.mpM with --mp. */
static const char *part_file(const char *file)
{
    static char buf[4096];
    if (msize == 1)
        return file;
    snprintf(buf, sizeof(buf), "%s.mp%d", file, mrank);
    return buf;
}

static void write_final(float **p)
{
    if (r != 0 || !o.final)
        return;
    const char *path = part_file(o.final);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot create %s", path);
    for (int k = 0; f && k < md.n; k++)
        fwrite(p[k], sizeof(float), md.t[k].numel, f);
    if (f)
        fclose(f);
}

static void compare_file(float **p)
{
    const char *path = part_file(o.compare);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    for (int k = 0; f && k < md.n; k++) {
        float *v = malloc(sizeof(float) * md.t[k].numel);
        size_t got = fread(v, sizeof(float), md.t[k].numel, f);
        CHECK(got == md.t[k].numel, "%s: short", path);
        int bad = 0;
        for (size_t i = 0; i < got; i++)
            if (fabs((double)p[k][i] - v[i]) > tolerance(v[i], o.steps) && bad++ < 3)
                CHECK(0, "continued run: %s[%zu] = %.9g, uninterrupted %.9g", md.t[k].name, i,
                      p[k][i], v[i]);
        free(v);
    }
    if (f)
        fclose(f);
}

/* A checkpoint that must not load: every rank fails naming it, and nothing changed. */
static void expect_load_error(int stage)
{
    mesh_zero_h z = make(stage, NULL);
    float **before = read_params(z);
    mesh_status_t st = mesh_zero_load(z, o.load);
    const char *msg = mesh_comm_last_error(NULL);
    CHECK(st != MESH_OK, "loading %s succeeded", o.load);
    CHECK(strstr(msg, o.expect_error) != NULL, "message '%s' lacks '%s'", msg, o.expect_error);
    if (wrank == 0)
        printf("stage %d: load failed as expected: %s\n", stage, msg);
    float **after = read_params(z);
    for (int k = 0; k < md.n; k++)
        CHECK(memcmp(before[k], after[k], sizeof(float) * md.t[k].numel) == 0,
              "%s changed by a failed load", md.t[k].name);
    free_params(before);
    free_params(after);
    /* and it trains on from its own state: step 1 (not the checkpoint's) equals the reference */
    zm_ref_t ref;
    CHECK(zm_ref_init(&ref, &conf, o.mp, msize, o.variant, o.big) == 0, "reference");
    for (int j = 0; j < o.micro; j++) {
        if (o.micro > 1)
            MUST(mesh_zero_micro_begin(z, j == o.micro - 1));
        forward(z);
        backward(z, stage, 0, j);
    }
    mesh_zero_step_info_t info;
    MUST(mesh_zero_step(z, &info));
    zm_ref_step(&ref);
    CHECK(info.step == 1, "step count %lld after a failed load", (long long)info.step);
    float **p = read_params(z);
    compare(p, &ref, stage, 1);
    free_params(p);
    zm_ref_free(&ref);
    mesh_zero_destroy(z);
}

/* Calls out of order fail with MESH_ERR_INVALID_ARG naming what is wrong, and change nothing. */
static void misuse(mesh_zero_h z, int stage)
{
    void *p;
    const char *t0 = md.t[0].name;
    CHECK(mesh_zero_param(z, "nosuch", &p) == MESH_ERR_INVALID_ARG &&
              strstr(mesh_comm_last_error(NULL), "nosuch"),
          "an unknown name: %s", mesh_comm_last_error(NULL));
    CHECK(mesh_zero_gather(z, 999) == MESH_ERR_INVALID_ARG, "group 999 gathered");
    CHECK(mesh_zero_add(z, "late", 4, 0, NULL, 0, 0) == MESH_ERR_INVALID_ARG,
          "added after finalize");
    CHECK(mesh_zero_step_norm(z, -1.0, NULL) == MESH_ERR_INVALID_ARG, "a negative norm taken");
    if (stage != 3)
        return;
    CHECK(mesh_zero_param(z, t0, &p) == MESH_ERR_INVALID_ARG &&
              strstr(mesh_comm_last_error(NULL), "not gathered"),
          "stage 3 parameters read without a gather: %s", mesh_comm_last_error(NULL));
    CHECK(mesh_zero_release(z, md.t[0].group) == MESH_ERR_INVALID_ARG, "released, not gathered");
    MUST(mesh_zero_gather(z, md.t[0].group));
    CHECK(mesh_zero_param(z, t0, &p) == MESH_ERR_INVALID_ARG, "read before wait_params");
    CHECK(mesh_zero_step(z, NULL) == MESH_ERR_INVALID_ARG &&
              strstr(mesh_comm_last_error(NULL), "still gathered"),
          "a step with a group gathered: %s", mesh_comm_last_error(NULL));
    MUST(mesh_zero_release(z, md.t[0].group));
}

static float **run_stage(int stage)
{
    mesh_zero_h z = make(stage, NULL);
    zm_ref_t ref;
    CHECK(zm_ref_init(&ref, &conf, o.mp, msize, o.variant, o.big) == 0, "reference");
    if (o.memory)
        check_memory(z, stage, 0);
    long start = 0;
    if (o.load) {
        MUST(mesh_zero_load(z, o.load));
        for (start = 0; start < o.start; start++)
            zm_ref_step(&ref);
    }
    misuse(z, stage);
    if (o.save && o.save_at == 0) /* before any step: the master weights as initialised */
        MUST(mesh_zero_save(z, o.save));
    for (long step = start; step < o.steps; step++) {
        uint64_t b0 = dp_bytes_sent();
        for (int j = 0; j < o.micro; j++) {
            if (o.micro > 1)
                MUST(mesh_zero_micro_begin(z, j == o.micro - 1));
            forward(z);
            backward(z, stage, step, j);
            if (step == start && o.ready)
                CHECK(mesh_zero_grad_ready(z, md.t[0].name) == MESH_ERR_INVALID_ARG,
                      "a tensor marked ready twice in a micro-batch");
        }
        mesh_zero_step_info_t info;
        if (step % 2) { /* the norm asked for first and given back: the same step */
            double sq;
            MUST(mesh_zero_grad_sqnorm(z, &sq));
            MUST(mesh_zero_step_norm(z, sqrt(sq), &info));
        } else {
            MUST(mesh_zero_step(z, &info));
        }
        uint64_t b1 = dp_bytes_sent();
        mesh_zero_memory_t m;
        MUST(mesh_zero_memory(z, &m));
        if (o.bytes)
            check_bytes(stage, b1 - b0, &m, step);
        if (o.memory && step == start)
            check_memory(z, stage, 1);
        zm_ref_step(&ref);
        CHECK(info.step == step + 1, "stage %d: step count %lld, expected %ld", stage,
              (long long)info.step, step + 1);
        CHECK(fabs(info.grad_norm - ref.norm) <= 1e-5 * ref.norm + 1e-9 || o.bf16,
              "stage %d step %ld: norm %.9g, reference %.9g", stage, step + 1, info.grad_norm,
              ref.norm);
        CHECK(!o.bf16 || fabs(info.grad_norm - ref.norm) <= 0.02 * ref.norm,
              "stage %d step %ld: bf16 norm %.9g, reference %.9g", stage, step, info.grad_norm,
              ref.norm);
        CHECK(info.clipped == ref.clipped, "stage %d step %ld: clipped %d, reference %d", stage,
              step, info.clipped, ref.clipped);
        if (o.clip > 0 && step == start)
            CHECK(info.clipped, "stage %d: the norm was not clipped", stage);
        float **p = read_params(z);
        compare(p, &ref, stage, step + 1);
        free_params(p);
        if (o.save && step + 1 == o.save_at)
            MUST(mesh_zero_save(z, o.save));
    }
    float **p = read_params(z);
    zm_ref_free(&ref);
    mesh_zero_destroy(z);
    return p;
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "--stages") && v) {
            o.nstages = 0;
            for (const char *p = v; *p; p++)
                if (*p >= '0' && *p <= '3')
                    o.stages[o.nstages++] = *p - '0';
        } else if (!strcmp(a, "--dtype") && v)
            o.bf16 = !strcmp(v, "bf16");
        else if (!strcmp(a, "--opt") && v)
            o.opt = !strcmp(v, "sgd") ? MESH_ZERO_SGD : MESH_ZERO_ADAMW;
        else if (!strcmp(a, "--steps") && v)
            o.steps = atoi(v);
        else if (!strcmp(a, "--micro") && v)
            o.micro = atoi(v);
        else if (!strcmp(a, "--batch") && v)
            o.batch = atoi(v);
        else if (!strcmp(a, "--bucket") && v)
            o.bucket = (size_t)atol(v);
        else if (!strcmp(a, "--overlap") && v)
            o.overlap = atoi(v);
        else if (!strcmp(a, "--inflight") && v)
            o.inflight = atoi(v);
        else if (!strcmp(a, "--clip") && v)
            o.clip = atof(v);
        else if (!strcmp(a, "--mp") && v)
            o.mp = !strcmp(v, "pp") ? ZM_MP_PP : ZM_MP_TP;
        else if (!strcmp(a, "--variant") && v)
            o.variant = v;
        else if (!strcmp(a, "--save") && v)
            o.save = v;
        else if (!strcmp(a, "--save-at") && v)
            o.save_at = atoi(v);
        else if (!strcmp(a, "--final") && v)
            o.final = v;
        else if (!strcmp(a, "--load") && v)
            o.load = v;
        else if (!strcmp(a, "--start") && v)
            o.start = atoi(v);
        else if (!strcmp(a, "--compare") && v)
            o.compare = v;
        else if (!strcmp(a, "--expect-load-error") && v)
            o.expect_error = v;
        else {
            used = 0;
            if (!strcmp(a, "--no-ready"))
                o.ready = 0;
            else if (!strcmp(a, "--bytes"))
                o.bytes = 1;
            else if (!strcmp(a, "--memory"))
                o.memory = 1;
            else if (!strcmp(a, "--big"))
                o.big = 1;
            else if (!strcmp(a, "--check-overlap"))
                o.check_overlap = 1;
            else {
                fprintf(stderr, "zero_test: unknown or incomplete option %s\n", a);
                exit(2);
            }
        }
        i += used;
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    MUST(mesh_comm_init_env(&world));
    wrank = mesh_comm_rank(world);
    mesh_grid_h grid = NULL;
    dp = world;
    msize = 1;
    if (o.mp != ZM_MP_NONE) {
        mesh_grid_params_t gp = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES};
        gp.size[o.mp == ZM_MP_PP ? MESH_AXIS_PP : MESH_AXIS_TP] = 2;
        gp.size[MESH_AXIS_DP] = mesh_comm_size(world) / 2;
        MUST(mesh_grid_create(world, &gp, &grid));
        MUST(mesh_grid_comm(grid, "dp", &dp));
        MUST(mesh_grid_comm(grid, o.mp == ZM_MP_PP ? "pp" : "tp", &mp));
        mrank = mesh_comm_rank(mp);
        msize = mesh_comm_size(mp);
    }
    d = mesh_comm_size(dp);
    r = mesh_comm_rank(dp);
    if (o.batch % d != 0 || (o.batch / d) % o.micro != 0) {
        fprintf(stderr, "zero_test: batch %d does not split into %d ranks x %d micro-batches\n",
                o.batch, d, o.micro);
        return 2;
    }
    zm_model(&md, o.mp, mrank, msize, o.variant, o.big);
    conf = (zm_conf_t){.opt = o.opt,
                       .lr = o.opt == MESH_ZERO_SGD ? 0.02 : 0.01,
                       .beta1 = 0.9,
                       .beta2 = 0.95,
                       .eps = 1e-8,
                       .wd = 0.1,
                       .momentum = 0.9,
                       .max_norm = o.clip,
                       .bf16 = o.bf16,
                       .batch = o.batch,
                       .seed = 1234};

    float **final[4] = {NULL};
    for (int i = 0; i < o.nstages; i++) {
        int stage = o.stages[i];
        if (o.expect_error) {
            expect_load_error(stage);
            continue;
        }
        final[i] = run_stage(stage);
        if (i == 0)
            write_final(final[0]);
        if (o.compare)
            compare_file(final[i]);
        if (o.stages[0] == 0 && i > 0) { /* every stage ends where stage 0 does */
            int bad = 0;
            for (int k = 0; k < md.n; k++)
                for (size_t e = 0; e < md.t[k].numel; e++)
                    if (fabs((double) final[i][k][e] - final[0][k][e]) >
                            tolerance(final[0][k][e], o.steps) &&
                        bad++ < 3)
                        CHECK(0, "stage %d: %s[%zu] = %.9g, stage 0 %.9g", stage, md.t[k].name, e,
                              final[i][k][e], final[0][k][e]);
        }
        if (wrank == 0)
            printf("ok: stage %d, dp %d%s, %s, %s, %d steps x %d micro-batches\n", stage, d,
                   o.mp == ZM_MP_TP   ? " x tp 2"
                   : o.mp == ZM_MP_PP ? " x pp 2"
                                      : "",
                   o.bf16 ? "bf16" : "fp32", o.opt == MESH_ZERO_SGD ? "sgd" : "adamw", o.steps,
                   o.micro);
    }
    for (int i = 0; i < o.nstages; i++)
        free_params(final[i]);
    mesh_grid_destroy(grid);
    mesh_comm_destroy(world);
    if (failures)
        fprintf(stderr, "[rank %d] %d check(s) failed\n", wrank, failures);
    return failures ? 1 : 0;
}
