/* mesh-train --mesh auto: the planner's layout among those mesh-train runs. */
#include "auto.h"
#include "layout.h"

#include <mesh/pipeline.h>
#include <mesh/plan.h>

#include <stdio.h>
#include <string.h>

/* What the trainer takes from a plan; broadcast from rank 0 as ints. */
enum { C_OK, C_TP, C_CP, C_EP, C_PP, C_DP, C_ZERO, C_SCHED, C_VPP, C_MB, C_COUNT };

static unsigned sched_bit(const char *name)
{
    mesh_pp_kind_t k;
    if (!name || mesh_pp_kind_parse(name, &k) != MESH_OK)
        return 0;
    /* the planner knows zbv as zb1; user and none are no schedule it chooses among */
    if (k == MESH_PP_ZBV)
        return 1u << MESH_PP_ZB1;
    return k == MESH_PP_USER || k == MESH_PP_NONE ? 0 : 1u << k;
}

/* Why the trainer cannot run a layout the planner accepts; NULL when it can. The planner
 * knows nothing of the vocabulary-parallel head; what the layout refuses of the axes together
 * (cp with a capacity, ...) is layout_refused's. */
static const char *unrunnable(const train_opts_t *o, const mesh_plan_layout_t *l, char *buf,
                              size_t len)
{
    layout_params_t lp = {.stage = l->zero,
                          .experts = o->experts,
                          .seq = o->seq,
                          .cp_zigzag = o->cp_zigzag,
                          .cp_no_overlap = o->cp_no_overlap,
                          .cp_algo = o->cp_algo};
    lp.size[MESH_AXIS_TP] = l->tp, lp.size[MESH_AXIS_CP] = l->cp, lp.size[MESH_AXIS_EP] = l->ep;
    lp.size[MESH_AXIS_DP] = l->dp, lp.size[MESH_AXIS_PP] = l->pp;
    if (layout_refused(&lp, buf, len))
        return buf;
    if (o->experts && l->etp != l->tp)
        return snprintf(buf, len, "etp=%d: mesh-train splits each expert over tp=%d", l->etp,
                        l->tp),
               buf;
    if (o->vocab % l->tp)
        return snprintf(buf, len, "vocab %d is not divisible by tp=%d", o->vocab, l->tp), buf;
    if (o->sequence_parallel && o->seq % l->tp)
        return snprintf(buf, len, "seq %d is not divisible by tp=%d", o->seq, l->tp), buf;
    if (l->pp == 1)
        return o->schedule || o->chunks ? "--schedule and --chunks need pp > 1" : NULL;
    /* the user's schedule runs as given (zbv is planned as zb1); else the planner's */
    mesh_pp_kind_t kind = l->schedule;
    if (o->schedule)
        mesh_pp_kind_parse(o->schedule, &kind);
    int v = o->chunks                     ? o->chunks
            : kind == MESH_PP_INTERLEAVED ? l->vpp
            : kind == MESH_PP_ZBV         ? 2
                                          : 1;
    if (o->layers % (l->pp * v))
        return snprintf(buf, len, "%d layers do not split into pp=%d x %d chunks", o->layers, l->pp,
                        v),
               buf;
    mesh_pp_schedule_params_t sp = {.field_mask = MESH_PP_SCHED_FIELD_CHUNKS,
                                    .kind = kind,
                                    .stages = l->pp,
                                    .microbatches = l->micro_batches,
                                    .chunks = v};
    mesh_pp_schedule_h s;
    if (mesh_pp_schedule_create(&sp, &s) != MESH_OK)
        return snprintf(buf, len, "schedule %s: %s", mesh_pp_kind_name(sp.kind),
                        mesh_comm_last_error(NULL)),
               buf;
    mesh_pp_schedule_destroy(s);
    return NULL;
}

typedef struct {
    int found;
    mesh_plan_eval_t best;
    int rank_in_search;   /* 0: the planner's first, and its reasons apply */
    char reasons[5][160]; /* tp, cp, ep, pp and dp, each to its first ';' */
    char skipped[400];    /* the planner's first when the trainer cannot run it */
    char none[400];       /* why a search gave nothing */
} pick_t;

static void keep_reasons(pick_t *pk, mesh_plan_result_h r)
{
    static const char *const axes[5] = {"tp=", "cp=", "ep=", "pp=", "dp="};
    const char *line;
    for (int a = 0; a < 5; a++)
        pk->reasons[a][0] = 0;
    for (int i = 0; (line = mesh_plan_result_reason(r, i)); i++)
        for (int a = 0; a < 5; a++)
            if (!strncmp(line, axes[a], 3)) {
                size_t n = strcspn(line, ";");
                if (n >= sizeof(pk->reasons[a]))
                    n = sizeof(pk->reasons[a]) - 1;
                memcpy(pk->reasons[a], line, n);
                pk->reasons[a][n] = 0;
            }
}

/* One search; its fastest layout the trainer runs competes with pk's (ties: the earlier). */
static void search(const train_opts_t *o, const mesh_plan_model_t *m, const mesh_plan_cluster_t *cl,
                   const mesh_plan_params_t *p, pick_t *pk)
{
    mesh_plan_result_h r;
    if (mesh_plan_search(m, cl, p, &r) != MESH_OK) {
        snprintf(pk->none, sizeof(pk->none), "%s", mesh_comm_last_error(NULL));
        return;
    }
    char buf[200], skipped[400] = "";
    int n = mesh_plan_result_count(r);
    if (n == 0) {
        const mesh_plan_eval_t *rej = mesh_plan_result_rejected(r, 0);
        snprintf(pk->none, sizeof(pk->none), "%s", rej ? rej->why : "no layout");
    } else if (mesh_plan_result_forced_span(r)) {
        snprintf(pk->none, sizeof(pk->none), "only layouts whose tp spans nodes fit");
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        const mesh_plan_eval_t *e = mesh_plan_result_layout(r, i);
        const char *why = unrunnable(o, &e->layout, buf, sizeof(buf));
        if (why) {
            if (i == 0) {
                char l[160];
                mesh_plan_layout_format(&e->layout, l, sizeof(l));
                snprintf(skipped, sizeof(skipped), "%s cannot run in mesh-train: %s", l, why);
            }
            if (i == n - 1)
                snprintf(pk->none, sizeof(pk->none), "%s", skipped);
            continue;
        }
        if (!pk->found || e->step < pk->best.step) {
            pk->found = 1;
            pk->best = *e;
            pk->rank_in_search = i;
            snprintf(pk->skipped, sizeof(pk->skipped), "%s", skipped);
            if (i == 0)
                keep_reasons(pk, r);
        }
        break;
    }
    mesh_plan_result_free(r);
}

/* The planner's MoE layers are every k-th block from dense + k - 1 on: --moe-layers in that
 * form (mesh-train's default, the odd blocks, is k = 2 from block 1), or -1. */
static int moe_pattern(const train_opts_t *o, int *dense, int *every)
{
    int n = o->layers < 64 ? o->layers : 64, first = -1, next = -1;
    for (int i = 0; i < n; i++)
        if (o->moe_layers >> i & 1) {
            if (first < 0)
                first = i;
            else if (next < 0)
                next = i;
        }
    if (first < 0)
        return -1;
    /* a single MoE block: every block from it on, or one every (layers - first) */
    int ks[2] = {next < 0 ? 1 : next - first, n - first};
    for (int c = 0; c < (next < 0 ? 2 : 1); c++) {
        int k = ks[c], d = first - k + 1, same = d >= 0 && k >= 1;
        for (int i = 0; i < n && same; i++)
            same = (int)(o->moe_layers >> i & 1) == (i >= d && (i - d) % k == k - 1);
        if (same) {
            *dense = d, *every = k;
            return 0;
        }
    }
    return -1;
}

/* The planner's choice on this rank: c[C_OK] = 0 with err set when there is none. */
static void choose(const train_opts_t *o, mesh_comm_h world, int c[C_COUNT], double *step,
                   pick_t *pk, char *err, size_t errlen)
{
    int w = mesh_comm_size(world), nodes = mesh_comm_node_count(world);
    int per = mesh_comm_local_size(world, 0);
    memset(c, 0, sizeof(int) * C_COUNT);
    for (int n = 1; n < nodes; n++)
        if (mesh_comm_local_size(world, n) != per) {
            snprintf(err, errlen,
                     "--mesh auto: the nodes run %d and %d ranks; the planner "
                     "needs the same number on each",
                     per, mesh_comm_local_size(world, n));
            return;
        }
    mesh_plan_model_t m = {.layers = o->layers,
                           .hidden = o->d_model,
                           .heads = o->heads,
                           .vocab = o->vocab,
                           .seq = o->seq,
                           .tied = 1};
    snprintf(m.name, sizeof(m.name), "mesh-train");
    if (o->experts) { /* GELU experts, no shared one, routed top-k */
        m.experts = o->experts;
        m.top_k = o->topk;
        m.expert_ffn = o->expert_ffn ? o->expert_ffn : 4 * o->d_model;
        if (moe_pattern(o, &m.dense_layers, &m.moe_interval)) {
            snprintf(err, errlen,
                     "--mesh auto: the planner takes MoE blocks every k-th from one on; "
                     "--moe-layers is not of that form");
            return;
        }
    }
    mesh_plan_cluster_t cl;
    if (mesh_plan_cluster_preset("cpu", w, &cl) != MESH_OK) {
        snprintf(err, errlen, "--mesh auto: %s", mesh_comm_last_error(NULL));
        return;
    }
    cl.gpus_per_node = per;
    mesh_plan_params_t base = {
        .field_mask = MESH_PLAN_PARAM_FIELD_BATCH | MESH_PLAN_PARAM_FIELD_FIX |
                      MESH_PLAN_PARAM_FIELD_CHOICES | MESH_PLAN_PARAM_FIELD_TOP,
        .batch_tokens = (double)o->batch * o->seq,
        .recompute_mask = 1u << MESH_PLAN_RECOMPUTE_NONE, /* mesh-train keeps activations */
        .no_sp = !o->sequence_parallel,
        .top = 64};
    static const unsigned set[5] = {MESH_PLAN_SET_TP, MESH_PLAN_SET_CP, MESH_PLAN_SET_EP,
                                    MESH_PLAN_SET_PP, MESH_PLAN_SET_DP};
    static const int axis[5] = {MESH_AXIS_TP, MESH_AXIS_CP, MESH_AXIS_EP, MESH_AXIS_PP,
                                MESH_AXIS_DP};
    for (int a = 0; a < 5; a++)
        if (o->size[axis[a]]) {
            base.fix_set |= set[a];
            int v = o->size[axis[a]];
            *(axis[a] == MESH_AXIS_TP   ? &base.fix.tp
              : axis[a] == MESH_AXIS_CP ? &base.fix.cp
              : axis[a] == MESH_AXIS_EP ? &base.fix.ep
              : axis[a] == MESH_AXIS_PP ? &base.fix.pp
                                        : &base.fix.dp) = v;
        }
    if (o->schedule) {
        base.schedule_mask = sched_bit(o->schedule);
        if (!base.schedule_mask) {
            snprintf(err, errlen, "--schedule %s: one of afab, 1f1b, interleaved, zb1, zbv",
                     o->schedule);
            return;
        }
    }
    if (o->chunks) {
        base.fix.vpp = o->chunks;
        base.fix_set |= MESH_PLAN_SET_VPP;
    }
    /* mesh-train gives every stage layers / pp blocks; the planner models ZeRO 2 and 3 under a
     * pipeline as mesh-train runs them, once per step per stage */
    base.fix.even = 1;
    base.fix_set |= MESH_PLAN_SET_EVEN;
    base.zero_mask = o->zero_given ? 1u << o->zero : 0xf;
    memset(pk, 0, sizeof(*pk));
    mesh_plan_params_t p = base;
    /* --microbatches M: the micro-batch size follows from dp, one search per dp */
    for (int dp = 1; dp <= w; dp++) {
        if (o->microbatches_given) {
            if (w % dp || o->batch % (dp * o->microbatches) ||
                (o->size[MESH_AXIS_DP] && o->size[MESH_AXIS_DP] != dp)) {
                if (!pk->none[0])
                    snprintf(pk->none, sizeof(pk->none),
                             "--batch %d does not split into "
                             "dp ranks x --microbatches %d for any dp",
                             o->batch, o->microbatches);
                continue;
            }
            p.fix.dp = dp;
            p.fix.mbs = o->batch / (dp * o->microbatches);
            p.fix_set |= MESH_PLAN_SET_DP | MESH_PLAN_SET_MBS;
        } else if (dp > 1) {
            break;
        }
        search(o, &m, &cl, &p, pk);
    }
    if (!pk->found) {
        snprintf(err, errlen,
                 "--mesh auto: the planner finds no layout mesh-train can run "
                 "on %d rank%s (%d per node): %s",
                 w, w == 1 ? "" : "s", per, pk->none[0] ? pk->none : "no candidate");
        return;
    }
    const mesh_plan_layout_t *l = &pk->best.layout;
    c[C_OK] = 1, c[C_TP] = l->tp, c[C_CP] = l->cp, c[C_EP] = l->ep, c[C_PP] = l->pp;
    c[C_DP] = l->dp, c[C_ZERO] = l->zero;
    c[C_SCHED] = l->schedule, c[C_VPP] = l->vpp, c[C_MB] = l->micro_batches;
    *step = pk->best.step;
}

int train_auto(train_opts_t *o, mesh_comm_h world, char *why, size_t whylen, char *err,
               size_t errlen)
{
    int mine[C_COUNT], c[C_COUNT], differs;
    double step = 0;
    pick_t pk;
    err[0] = 0;
    choose(o, world, mine, &step, &pk, err, errlen);
    /* the planner is deterministic; rank 0's choice is taken, and a rank that differs says so */
    if (mesh_broadcast(world, mine, c, C_COUNT, MESH_INT32, 0, NULL, NULL) != MESH_OK ||
        mesh_broadcast(world, &step, &step, 1, MESH_FP64, 0, NULL, NULL) != MESH_OK) {
        snprintf(err, errlen, "--mesh auto: %s", mesh_comm_last_error(NULL));
        return -1;
    }
    differs = memcmp(mine, c, sizeof(c)) != 0;
    if (mesh_allreduce(world, &differs, &differs, 1, MESH_INT32, MESH_MAX, NULL, NULL) != MESH_OK) {
        snprintf(err, errlen, "--mesh auto: %s", mesh_comm_last_error(NULL));
        return -1;
    }
    if (!c[C_OK]) {
        if (mesh_comm_rank(world) != 0 || !err[0])
            snprintf(err, errlen, "--mesh auto: the planner finds no layout on rank 0");
        return -1;
    }
    if (differs) {
        snprintf(err, errlen, "--mesh auto: the ranks' planners chose different layouts");
        return -1;
    }
    o->size[MESH_AXIS_TP] = c[C_TP], o->size[MESH_AXIS_PP] = c[C_PP];
    o->size[MESH_AXIS_CP] = c[C_CP], o->size[MESH_AXIS_EP] = c[C_EP];
    o->size[MESH_AXIS_DP] = c[C_DP];
    o->zero = c[C_ZERO];
    o->microbatches = c[C_MB];
    if (c[C_PP] > 1 && !o->schedule)
        o->schedule = mesh_pp_kind_name((mesh_pp_kind_t)c[C_SCHED]);
    if (c[C_PP] > 1 && !o->chunks && c[C_SCHED] == MESH_PP_INTERLEAVED)
        o->chunks = c[C_VPP];
    char sched[48] = "";
    if (c[C_PP] > 1)
        snprintf(sched, sizeof(sched), " schedule=%s chunks=%d", o->schedule,
                 o->chunks                                                            ? o->chunks
                 : !strcmp(o->schedule, "interleaved") || !strcmp(o->schedule, "zbv") ? 2
                                                                                      : 1);
    int w = mesh_comm_size(world), nodes = mesh_comm_node_count(world);
    int n = snprintf(why, whylen,
                     "# plan: tp=%d pp=%d dp=%d zero=%d cp=%d ep=%d%s microbatches=%d: "
                     "predicted step %.3f ms on %d CPU rank%s, %d per node (planner's CPU "
                     "figures)",
                     c[C_TP], c[C_PP], c[C_DP], c[C_ZERO], c[C_CP], c[C_EP], sched, c[C_MB],
                     step * 1e3, w, w == 1 ? "" : "s", w / nodes);
    /* the reasons are the planner's for its first layout; rank 0 prints them */
    if (n > 0 && (size_t)n < whylen) {
        if (pk.rank_in_search == 0 && pk.reasons[0][0]) {
            /* tp, pp and dp always; cp and ep where they are more than 1 */
            n += snprintf(why + n, whylen - (size_t)n, "\n# why: %s", pk.reasons[0]);
            for (int a = 1; a < 5 && n > 0 && (size_t)n < whylen; a++)
                if (pk.reasons[a][0] && (a >= 3 || c[a == 1 ? C_CP : C_EP] > 1))
                    n += snprintf(why + n, whylen - (size_t)n, "; %s", pk.reasons[a]);
        } else if (pk.skipped[0])
            snprintf(why + n, whylen - (size_t)n, "\n# why: the fastest mesh-train runs; %s",
                     pk.skipped);
    }
    return 0;
}
