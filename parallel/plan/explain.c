/*
 * Why the best layout is the best: for each axis the rule of thumb that places it (TP inside
 * the node, PP across nodes when the model does not fit, CP for long sequences, EP for the
 * experts, DP for the rest) and, in numbers, how the best layout with another value of that
 * axis compares; then the same for the ZeRO stage, recomputation, micro-batch and schedule.
 */
#include "planner.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void plan_lines_add(plan_lines_t *ls, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (ls->n == ls->cap) {
        int nc = ls->cap ? 2 * ls->cap : 16;
        char **nl = realloc(ls->line, sizeof(char *) * nc);
        if (!nl)
            return;
        ls->line = nl;
        ls->cap = nc;
    }
    char *copy = strdup(buf);
    if (copy)
        ls->line[ls->n++] = copy;
}

void plan_lines_free(plan_lines_t *ls)
{
    for (int i = 0; i < ls->n; i++)
        free(ls->line[i]);
    free(ls->line);
    memset(ls, 0, sizeof(*ls));
}

/* "+6.1% step time (bubble +0.41 s, tp -0.20 s)", or the reason it cannot be had. */
static void plan_cmp(const mesh_plan_eval_t *alt, const mesh_plan_eval_t *best, char *buf,
                     size_t len)
{
    if (alt->reject != MESH_PLAN_OK) {
        snprintf(buf, len, "%s", alt->why);
        return;
    }
    static const char *const names[] = {"compute", "bubble", "tp", "cp",
                                        "ep",      "dp",     "pp", "optimizer"};
    double d[8];
    d[0] = alt->compute - best->compute;
    d[1] = alt->bubble - best->bubble;
    for (int a = 0; a < MESH_AXIS_COUNT; a++)
        d[2 + a] = alt->comm_exposed[a] - best->comm_exposed[a];
    d[7] = alt->optimizer - best->optimizer;
    int i1 = -1, i2 = -1;
    for (int i = 0; i < 8; i++) {
        if (fabs(d[i]) < 0.005 * best->step)
            continue;
        if (i1 < 0 || fabs(d[i]) > fabs(d[i1]))
            i2 = i1, i1 = i;
        else if (i2 < 0 || fabs(d[i]) > fabs(d[i2]))
            i2 = i;
    }
    int n = snprintf(buf, len, "%+.1f%% step time", 100.0 * (alt->step / best->step - 1));
    if (i1 >= 0 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - n, " (%s %+.3g s%s", names[i1], d[i1], i2 >= 0 ? ", " : ")");
    if (i2 >= 0 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - n, "%s %+.3g s)", names[i2], d[i2]);
}

static int plan_axis_of(const mesh_plan_layout_t *l, int axis)
{
    switch (axis) {
    case MESH_AXIS_TP:
        return l->tp;
    case MESH_AXIS_CP:
        return l->cp;
    case MESH_AXIS_EP:
        return l->ep;
    case MESH_AXIS_DP:
        return l->dp;
    case MESH_AXIS_PP:
        return l->pp;
    default:
        return l->etp; /* MESH_AXIS_COUNT: etp */
    }
}

/* The best fitting layout with another value of the axis; NULL when none. */
static const mesh_plan_eval_t *plan_next(const struct plan_search_view *v, int axis)
{
    int want = plan_axis_of(&v->fit[0].layout, axis);
    for (int i = 1; i < v->nfit; i++)
        if (plan_axis_of(&v->fit[i].layout, axis) != want)
            return &v->fit[i];
    return NULL;
}

/* The first rejected layout (most promising first) that differs from the best one only in
 * the axis, at a larger value (dp taking up the difference). */
static const mesh_plan_eval_t *plan_rejected(const struct plan_search_view *v, int axis)
{
    const mesh_plan_layout_t *b = &v->fit[0].layout;
    int want = plan_axis_of(b, axis);
    static const int axes[] = {MESH_AXIS_TP, MESH_AXIS_CP, MESH_AXIS_EP, MESH_AXIS_PP,
                               MESH_AXIS_COUNT};
    for (int i = 0; i < v->nrej; i++) {
        const mesh_plan_layout_t *l = &v->rej[i].layout;
        int same = 1;
        for (int k = 0; k < 5; k++)
            if (axes[k] != axis && plan_axis_of(l, axes[k]) != plan_axis_of(b, axes[k]) &&
                !(axes[k] == MESH_AXIS_COUNT && axis == MESH_AXIS_TP))
                same = 0;
        if (same && v->rej[i].reject != MESH_PLAN_REJ_INVALID && plan_axis_of(l, axis) > want)
            return &v->rej[i];
    }
    return NULL;
}

static void plan_axis_line(const struct plan_search_view *v, plan_lines_t *out, int axis,
                           const char *name, const char *rule)
{
    const mesh_plan_eval_t *b = &v->fit[0], *n = plan_next(v, axis);
    char cmp[256] = "", tail[512] = "", axes[96];
    if (n) {
        plan_cmp(n, b, cmp, sizeof(cmp));
        plan_axes_text(&n->layout, v->x->m.experts > 0, axes, sizeof(axes));
        snprintf(tail, sizeof(tail), "; next best %s=%d (%s): %s", name,
                 plan_axis_of(&n->layout, axis), axes, cmp);
    }
    /* a larger value turned down says where the axis stops growing */
    const mesh_plan_eval_t *r = plan_rejected(v, axis);
    if (r && (!n || plan_axis_of(&r->layout, axis) != plan_axis_of(&n->layout, axis))) {
        size_t k = strlen(tail), nl = strlen(name);
        int own = strncmp(r->why, name, nl) == 0 && r->why[nl] == '='; /* "tp=16 spans ..." */
        if (own)
            snprintf(tail + k, sizeof(tail) - k, "; %s", r->why);
        else
            snprintf(tail + k, sizeof(tail) - k, "; %s=%d: %s", name,
                     plan_axis_of(&r->layout, axis), r->why);
    }
    plan_lines_add(out, "%s=%d: %s%s", name, plan_axis_of(&b->layout, axis), rule, tail);
}

/* The ZeRO stage, recomputation, micro-batch size and schedule of the best axes, each against
 * the best variant with another value. */
static void plan_knob_line(const struct plan_search_view *v, plan_lines_t *out, unsigned bit,
                           const char *what, const char *rule)
{
    const mesh_plan_eval_t *b = &v->fit[0];
    char tail[768] = "";
    size_t k = 0;
    int vals[8], n = 0;
    if (bit == MESH_PLAN_SET_ZERO)
        for (int z = 0; z < 4; z++)
            vals[n++] = z;
    else if (bit == MESH_PLAN_SET_RECOMPUTE)
        for (int z = 0; z < MESH_PLAN_RECOMPUTE_COUNT; z++)
            vals[n++] = z;
    else if (bit == MESH_PLAN_SET_MBS)
        for (int z = 1; z <= 8; z *= 2)
            vals[n++] = z;
    else
        for (int z = 0; z < MESH_PP_KIND_COUNT; z++)
            if (PLAN_SCHEDULES >> z & 1)
                vals[n++] = z;
    for (int i = 0; i < n; i++) {
        mesh_plan_layout_t l = b->layout;
        int cur;
        char label[48];
        if (bit == MESH_PLAN_SET_ZERO) {
            cur = l.zero, l.zero = vals[i];
            snprintf(label, sizeof(label), "zero=%d", vals[i]);
        } else if (bit == MESH_PLAN_SET_RECOMPUTE) {
            cur = l.recompute, l.recompute = (mesh_plan_recompute_t)vals[i];
            snprintf(label, sizeof(label), "%s", mesh_plan_recompute_name(l.recompute));
        } else if (bit == MESH_PLAN_SET_MBS) {
            cur = l.mbs, l.mbs = vals[i];
            snprintf(label, sizeof(label), "mbs=%d", vals[i]);
        } else {
            if (l.pp == 1)
                return;
            cur = l.schedule, l.schedule = (mesh_pp_kind_t)vals[i];
            snprintf(label, sizeof(label), "%s", mesh_pp_kind_name(l.schedule));
        }
        if (vals[i] == cur)
            continue;
        /* a value the request excludes is still shown, marked, for what it would change */
        unsigned mask = bit == MESH_PLAN_SET_ZERO        ? v->x->p.zero_mask
                        : bit == MESH_PLAN_SET_RECOMPUTE ? v->x->p.recompute_mask
                        : bit == MESH_PLAN_SET_SCHEDULE  ? v->x->p.schedule_mask
                                                         : ~0u;
        int fixed = (v->x->p.fix_set & bit) != 0;
        if (fixed || (bit != MESH_PLAN_SET_MBS && !(mask & (1u << vals[i]))) ||
            (bit == MESH_PLAN_SET_MBS && vals[i] > v->x->p.max_mbs))
            snprintf(label + strlen(label), sizeof(label) - strlen(label), " (excluded)");
        mesh_plan_eval_t e;
        memset(&e, 0, sizeof(e));
        plan_best_variant(v->x, &l, bit, &e);
        if (e.reject == MESH_PLAN_REJ_INVALID && !e.why[0])
            continue;
        char cmp[256];
        plan_cmp(&e, b, cmp, sizeof(cmp));
        if (k < sizeof(tail))
            k += snprintf(tail + k, sizeof(tail) - k, "; %s: %s", label, cmp);
    }
    plan_lines_add(out, "%s: %s%s", what, rule, tail);
}

void plan_explain(const struct plan_search_view *v, plan_lines_t *out)
{
    const plan_ctx_t *x = v->x;
    const mesh_plan_model_t *m = &x->m;
    int gpn = x->cl.gpus_per_node;
    char rule[640], what[64];
    if (v->nfit == 0)
        return;
    const mesh_plan_eval_t *b = &v->fit[0];
    const mesh_plan_layout_t *l = &b->layout;
    if (v->forced_span)
        plan_lines_add(out,
                       "forced: no layout fits with tp and etp x ep inside a node of %d "
                       "%s, so these span nodes",
                       gpn, PLAN_UNIT(x));

    snprintf(rule, sizeof(rule), "%s",
             l->tp > gpn ? "TP beyond the node, forced: no layout fits with less"
             : l->tp > 1 ? "TP inside the node, where its collectives of every layer, on the "
                           "critical path, run over the fastest links"
                         : "no TP: the layers fit whole, and TP's collectives would sit on the "
                           "critical path of every layer");
    size_t k = strlen(rule);
    if (l->tp > 1)
        snprintf(rule + k, sizeof(rule) - k, " (%.2f s exposed per step)",
                 b->comm_exposed[MESH_AXIS_TP]);
    plan_axis_line(v, out, MESH_AXIS_TP, "tp", rule);

    if (l->pp > 1) {
        const mesh_plan_eval_t *one = NULL;
        for (int i = 0; i < v->nrej && !one; i++)
            if (v->rej[i].layout.pp == 1 && v->rej[i].reject == MESH_PLAN_REJ_MEMORY)
                one = &v->rej[i];
        int fits1 = 0;
        for (int i = 0; i < v->nfit; i++)
            fits1 |= v->fit[i].layout.pp == 1;
        if (!fits1 && one)
            snprintf(rule, sizeof(rule),
                     "PP across nodes because the model does not fit "
                     "otherwise (pp=1 at best %s); bubble %.1f%% of the step",
                     one->why, 100 * b->bubble_fraction);
        else
            snprintf(rule, sizeof(rule),
                     "PP across nodes: fewer parameters per rank shorten the "
                     "data-parallel reduction more than the bubble (%.1f%% of the step) costs",
                     100 * b->bubble_fraction);
        size_t k = strlen(rule);
        snprintf(rule + k, sizeof(rule) - k,
                 "; first stage %d layers + the embedding, last %d + "
                 "the output layer (%.2f layers of work), the slowest stage %.1f%% over the "
                 "average",
                 b->stage_layers_first, b->stage_layers_last, b->head_layers,
                 100 * b->stage_imbalance);
    } else {
        snprintf(rule, sizeof(rule),
                 "no pipeline: the model fits without one, and a pipeline "
                 "adds a bubble");
    }
    plan_axis_line(v, out, MESH_AXIS_PP, "pp", rule);

    if (l->cp > 1)
        snprintf(rule, sizeof(rule),
                 "CP for the long sequence: %d tokens split %d ways, "
                 "activations per rank divided as much (%.2f s of K/V exchange exposed)",
                 m->seq, l->cp, b->comm_exposed[MESH_AXIS_CP]);
    else
        snprintf(rule, sizeof(rule), "no CP: the %d-token sequence fits in memory whole", m->seq);
    plan_axis_line(v, out, MESH_AXIS_CP, "cp", rule);

    if (m->experts) {
        char where[96];
        if (b->axis_nodes[MESH_AXIS_EP] > 1)
            snprintf(where, sizeof(where), "across %d nodes%s", b->axis_nodes[MESH_AXIS_EP],
                     b->ep_hier ? ", hierarchical: a token crosses once to each node of its "
                                  "experts"
                                : "");
        else
            snprintf(where, sizeof(where), "inside the node");
        snprintf(rule, sizeof(rule),
                 "EP for the %d experts: %d per rank, all-to-all %s "
                 "(%.2f s exposed)",
                 m->experts, m->experts / l->ep, where, b->comm_exposed[MESH_AXIS_EP]);
        plan_axis_line(v, out, MESH_AXIS_EP, "ep", rule);
        snprintf(rule, sizeof(rule),
                 "experts split %d ways along their hidden size; expert "
                 "data parallel edp=%d",
                 l->etp, l->edp);
        plan_axis_line(v, out, MESH_AXIS_COUNT, "etp", rule);
    }

    snprintf(rule, sizeof(rule),
             "DP for the rest: %d %s / (tp x cp x ep x pp = %d); each "
             "replica runs %d micro-batch%s of %d sequence%s (%.2f s of reduction exposed)",
             x->cl.gpus, PLAN_UNIT(x), l->tp * l->cp * l->ep * l->pp, l->micro_batches,
             l->micro_batches == 1 ? "" : "es", l->mbs, l->mbs == 1 ? "" : "s",
             b->comm_exposed[MESH_AXIS_DP]);
    plan_lines_add(out, "dp=%d: %s", l->dp, rule);

    static const char *const zrule[] = {
        "no sharding: the model states fit and every stage adds communication",
        "optimizer states sharded over the data-parallel ranks",
        "optimizer states and gradients sharded over the data-parallel ranks",
        "parameters, gradients and optimizer states sharded; parameters gathered per layer"};
    snprintf(what, sizeof(what), "zero=%d", l->zero);
    plan_knob_line(v, out, MESH_PLAN_SET_ZERO, what,
                   l->pp > 1 && l->zero >= 2
                       ? (l->zero == 2 ? "optimizer states and gradients sharded; the stage's "
                                         "gradients reduced once per step"
                                       : "parameters, gradients and optimizer states sharded "
                                         "between steps; the stage's parameters gathered once "
                                         "per step")
                       : zrule[l->zero]);
    static const char *const rrule[] = {
        "activations kept: they fit", "attention scores recomputed: the cheapest memory saved",
        "layers run again in the backward pass: only the layer inputs are kept"};
    snprintf(what, sizeof(what), "recompute=%s", mesh_plan_recompute_name(l->recompute));
    plan_knob_line(v, out, MESH_PLAN_SET_RECOMPUTE, what, rrule[l->recompute]);
    snprintf(what, sizeof(what), "mbs=%d", l->mbs);
    snprintf(rule, sizeof(rule), "%d micro-batch%s per step%s", l->micro_batches,
             l->micro_batches == 1 ? "" : "es",
             l->pp > 1 ? ": more of them shrink the bubble" : "");
    plan_knob_line(v, out, MESH_PLAN_SET_MBS, what, rule);
    if (l->pp > 1) {
        snprintf(what, sizeof(what), "schedule=%s", mesh_pp_kind_name(l->schedule));
        if (l->schedule == MESH_PP_INTERLEAVED)
            snprintf(what + strlen(what), sizeof(what) - strlen(what), " vpp=%d", l->vpp);
        snprintf(rule, sizeof(rule),
                 "bubble %.1f%% of the step, %.1f micro-batches in flight on "
                 "the first stage",
                 100 * b->bubble_fraction,
                 mesh_plan_inflight(l->schedule, l->pp, l->micro_batches, l->vpp, 0));
        plan_knob_line(v, out, MESH_PLAN_SET_SCHEDULE, what, rule);
    }
}
