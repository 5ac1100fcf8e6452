/* mesh-plan's output: the ranked layouts as text or JSON, calibration tables, preset lists. */
#include "config.h"
#include "tools/mesh-plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *const plan_axis_names[MESH_AXIS_COUNT] = {"tp", "cp", "ep", "dp", "pp"};
static const char *const plan_mem_names[MESH_PLAN_MEM_COUNT] = {"params", "grads", "optimizer",
                                                                "activations", "buffers"};
static const char *const plan_rej_names[MESH_PLAN_REJ_COUNT] = {"ok", "memory", "invalid", "span"};

static const char *plan_bytes(double b, char *buf, size_t len)
{
    if (b >= GIB)
        snprintf(buf, len, "%.2f GiB", b / GIB);
    else if (b >= 1024.0 * 1024)
        snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0)
        snprintf(buf, len, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, len, "%.0f B", b);
    return buf;
}

static const char *plan_secs(double s, char *buf, size_t len)
{
    if (s >= 1)
        snprintf(buf, len, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, len, "%.2f ms", s * 1e3);
    else
        snprintf(buf, len, "%.1f us", s * 1e6);
    return buf;
}

static const char *plan_count(double n, char *buf, size_t len)
{
    if (n >= 1e12)
        snprintf(buf, len, "%.2fT", n / 1e12);
    else if (n >= 1e9)
        snprintf(buf, len, "%.1fB", n / 1e9);
    else if (n >= 1e6)
        snprintf(buf, len, "%.1fM", n / 1e6);
    else
        snprintf(buf, len, "%.0f", n);
    return buf;
}

/* The memory a calibration measured, for the text: "host buffers", "cuda device buffers". */
static const char *plan_calib_mem(const mesh_plan_calib_t *calib, char *buf, size_t len)
{
    mesh_plan_calib_entry_t e;
    if (mesh_plan_calib_entry(calib, 0, &e) != MESH_OK)
        return "unknown buffers";
    snprintf(buf, len, "%s%s buffers", e.mem, strcmp(e.mem, "host") ? " device" : "");
    return buf;
}

static void plan_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('"', f);
}

void plan_print_header(const plan_opts_t *o, FILE *f)
{
    const mesh_plan_model_t *m = &o->model;
    const mesh_plan_cluster_t *c = &o->cluster;
    double total = 0, active = 0;
    char a[32], b[32];
    mesh_plan_model_count(m, &total, &active);
    fprintf(f, "model    %s: %s parameters", m->name[0] ? m->name : "(custom)",
            plan_count(total, a, sizeof(a)));
    if (m->experts)
        fprintf(f, " (%s active)", plan_count(active, b, sizeof(b)));
    fprintf(f, ", %d layers, hidden %d, %d heads", m->layers, m->hidden, m->heads);
    if (m->kv_heads && m->kv_heads != m->heads)
        fprintf(f, " (%d kv)", m->kv_heads);
    if (m->experts)
        fprintf(f, ", %d experts top-%d of ffn %d", m->experts, m->top_k,
                m->expert_ffn ? m->expert_ffn : m->ffn);
    fprintf(f, ", vocab %d, seq %d\n", m->vocab, m->seq);
    if (m->params > 0 && fabs(o->model_counted / m->params - 1) > 0.1)
        fprintf(f,
                "         note: the dimensions count %s parameters; layers are scaled to the "
                "params given\n",
                plan_count(o->model_counted, a, sizeof(a)));
    if (m->source)
        fprintf(f, "         source: %s\n", m->source);
    if (o->model_changes)
        fprintf(f, "         changed from the preset: %s\n", o->model_changes);
    fprintf(f,
            "cluster  %s: %d %s, %d per node (%d node%s), %.1f GiB, %.0f %sFLOP/s at %.0f%%, "
            "intra %.1f GB/s %.1f us, inter %.2f GB/s %.1f us, %s, reserve %.0f MiB\n",
            c->name[0] ? c->name : "(custom)", c->gpus, c->cpu ? "ranks" : "GPUs", c->gpus_per_node,
            c->gpus / c->gpus_per_node, c->gpus / c->gpus_per_node == 1 ? "" : "s",
            c->gpu_mem / GIB, c->flops >= 1e12 ? c->flops / 1e12 : c->flops / 1e9,
            c->flops >= 1e12 ? "T" : "G", 100 * (c->efficiency > 0 ? c->efficiency : 0.6),
            c->intra_bw / 1e9, c->intra_lat * 1e6, c->inter_bw / 1e9, c->inter_lat * 1e6,
            c->precision == MESH_PLAN_PREC_FP32 ? "fp32" : "bf16 (fp32 master)",
            c->reserve / (1024.0 * 1024));
    if (o->topo_note[0])
        fprintf(f, "         %s\n", o->topo_note);
    if (o->calib) {
        char mem[48];
        plan_calib_mem(o->calib, mem, sizeof(mem));
        fprintf(f, "         calibrated: %s (%d axis/op curves, measured on %s)\n", o->calib_path,
                mesh_plan_calib_count(o->calib), mem);
        /* a GPU cluster's collectives run on device buffers: host figures may flatter them */
        if (!c->cpu && strncmp(mem, "host", 4) == 0)
            fprintf(f, "         note: the calibration measured host buffers, the cluster's "
                       "GPUs use device buffers (mesh-bench --device)\n");
    }
}

void plan_print_layout(const plan_opts_t *o, const mesh_plan_eval_t *e, int rank,
                       const mesh_plan_eval_t *best, int full, FILE *f)
{
    const mesh_plan_layout_t *l = &e->layout;
    char a[32], b[32], c[32];
    if (rank > 0)
        fprintf(f, "#%-3d", rank);
    else
        fprintf(f, "    ");
    fprintf(f, "tp=%d cp=%d ep=%d etp=%d dp=%d pp=%d  zero=%d mbs=%d micro-batches=%d %s", l->tp,
            l->cp, l->ep, l->etp, l->dp, l->pp, l->zero, l->mbs, l->micro_batches,
            mesh_pp_kind_name(l->schedule));
    if (l->schedule == MESH_PP_INTERLEAVED)
        fprintf(f, " vpp=%d", l->vpp);
    fprintf(f, " recompute=%s%s%s\n", mesh_plan_recompute_name(l->recompute), l->sp ? " sp" : "",
            l->even ? " even" : "");
    fprintf(f, "    step %s  %.0f tokens/s  MFU %.1f%%", plan_secs(e->step, a, sizeof(a)),
            e->tokens_per_s, 100 * e->mfu);
    if (best && best != e)
        fprintf(f, "  (%+.1f%% vs #1)", 100 * (e->step / best->step - 1));
    fprintf(f, "\n    time   compute %s, bubble %s (%.1f%%), optimizer %s; exposed:",
            plan_secs(e->compute, a, sizeof(a)), plan_secs(e->bubble, b, sizeof(b)),
            100 * e->bubble_fraction, plan_secs(e->optimizer, c, sizeof(c)));
    for (int x = 0; x < MESH_AXIS_COUNT; x++)
        if (e->comm_time[x] > 0)
            fprintf(f, " %s %s", plan_axis_names[x], plan_secs(e->comm_exposed[x], a, sizeof(a)));
    /* GiB, or MiB for ranks that hold less than one */
    double unit = e->mem_total < GIB ? 1024.0 * 1024 : GIB;
    const char *uname = e->mem_total < GIB ? "MiB" : "GiB";
    fprintf(f, "\n    memory");
    for (int k = 0; k < MESH_PLAN_MEM_COUNT; k++)
        fprintf(f, " %s%s %.*f", k ? "+ " : "", plan_mem_names[k], unit < GIB ? 1 : 2,
                e->mem[k] / unit);
    fprintf(f, " = %.*f %s of %.2f GiB", unit < GIB ? 1 : 2, e->mem_total / unit, uname,
            e->mem_limit / GIB);
    fprintf(f, "\n");
    if (l->pp > 1)
        fprintf(f,
                "    stages %d to %d layers: first %d (and the embedding), last %d (and the "
                "output layer and loss, %.2f layers of work); slowest stage %+.1f%% over the "
                "average\n",
                e->stage_layers_min, e->stage_layers_max, e->stage_layers_first,
                e->stage_layers_last, e->head_layers, 100 * e->stage_imbalance);
    if (e->ep_hier)
        fprintf(f,
                "    ep     spans %d nodes: hierarchical dispatch, a token crosses to each "
                "node of its experts once\n",
                e->axis_nodes[MESH_AXIS_EP]);
    if (e->reject != MESH_PLAN_OK || (e->why[0] && !full))
        fprintf(f, "    note   %s\n", e->why);
    if (!full)
        return;
    fprintf(f, "    axis  size  nodes      bytes/step      time/step    exposed  figures\n");
    static const int sizes_of[] = {0, 1, 2, 3, 4};
    for (int k = 0; k < MESH_AXIS_COUNT; k++) {
        int x = sizes_of[k];
        int size = x == MESH_AXIS_TP   ? l->tp
                   : x == MESH_AXIS_CP ? l->cp
                   : x == MESH_AXIS_EP ? l->ep
                   : x == MESH_AXIS_DP ? l->dp
                                       : l->pp;
        if (size <= 1 && e->comm_time[x] == 0)
            continue;
        char d[32];
        fprintf(f, "    %-4s %5d  %5d  %14s  %13s  %9s  %s\n", plan_axis_names[x], size,
                e->axis_nodes[x], plan_bytes(e->comm_bytes[x], a, sizeof(a)),
                plan_secs(e->comm_time[x], b, sizeof(b)),
                plan_secs(e->comm_exposed[x], d, sizeof(d)),
                (e->calibrated & (1u << x)) ? "calibrated"
                : e->axis_nodes[x] > 1      ? "nominal inter-node"
                                            : "nominal intra-node");
    }
    if (e->why[0] && e->reject == MESH_PLAN_OK)
        fprintf(f, "    note   %s\n", e->why);
    (void)o;
}

void plan_print_result(const plan_opts_t *o, mesh_plan_result_h r, FILE *f)
{
    long combos = 0, variants = 0, rej[MESH_PLAN_REJ_COUNT] = {0};
    int n = mesh_plan_result_count(r), nrej = mesh_plan_result_rejected_count(r);
    mesh_plan_result_stats(r, &combos, &variants, rej);
    plan_print_header(o, f);
    double bt = (o->params.field_mask & MESH_PLAN_PARAM_FIELD_BATCH) ? o->params.batch_tokens
                                                                     : o->model.batch_tokens;
    fprintf(f, "batch    %.0f tokens = %.0f sequences of %d\n", bt, bt / o->model.seq,
            o->model.seq);
    fprintf(f,
            "search   %ld axis layouts, %ld variants; rejected: %ld memory, %ld invalid, %ld "
            "span\n\n",
            combos, variants, rej[MESH_PLAN_REJ_MEMORY], rej[MESH_PLAN_REJ_INVALID],
            rej[MESH_PLAN_REJ_SPAN]);
    const mesh_plan_eval_t *best = mesh_plan_result_layout(r, 0);
    if (o->check) {
        if (best) {
            const mesh_plan_layout_t *l = &best->layout;
            int g = o->cluster.gpus_per_node;
            fprintf(f, "fits: %s\n", o->check);
            plan_print_layout(o, best, 0, NULL, 1, f);
            if (best->axis_nodes[MESH_AXIS_TP] > 1)
                fprintf(f,
                        "    note   tp=%d spans nodes of %d %s: its collectives of every layer "
                        "cross the network\n",
                        l->tp, g, o->cluster.cpu ? "ranks" : "GPUs");
            if (l->ep > 1 && (l->etp * l->ep > g || g % (l->etp * l->ep)) && !best->ep_hier)
                fprintf(f,
                        "    note   etp x ep = %d spans nodes of %d %s: the all-to-alls cross "
                        "the network\n",
                        l->etp * l->ep, g, o->cluster.cpu ? "ranks" : "GPUs");
            for (int i = 0; mesh_plan_result_reason(r, i); i++)
                if (strncmp(mesh_plan_result_reason(r, i), "zero=", 5) == 0 ||
                    strncmp(mesh_plan_result_reason(r, i), "recompute=", 10) == 0 ||
                    strncmp(mesh_plan_result_reason(r, i), "mbs=", 4) == 0 ||
                    strncmp(mesh_plan_result_reason(r, i), "schedule=", 9) == 0)
                    fprintf(f, "    %s\n", mesh_plan_result_reason(r, i));
        } else {
            const mesh_plan_eval_t *e = mesh_plan_result_rejected(r, 0);
            fprintf(f, "does not fit: %s: %s\n", o->check, e ? e->why : "no layout");
            if (e && e->reject != MESH_PLAN_REJ_INVALID)
                plan_print_layout(o, e, 0, NULL, 1, f);
        }
        return;
    }
    if (n == 0) {
        fprintf(f,
                "nothing fits: %ld axis layouts rejected (%ld exceed memory, %ld invalid, %ld "
                "span nodes)\n",
                combos, rej[MESH_PLAN_REJ_MEMORY], rej[MESH_PLAN_REJ_INVALID],
                rej[MESH_PLAN_REJ_SPAN]);
    }
    if (mesh_plan_result_forced_span(r))
        fprintf(f, "forced: no layout fits with tp and ep inside a node; these span nodes\n\n");
    int close = 1;
    while (close < n && mesh_plan_result_layout(r, close)->step < 1.01 * best->step)
        close++;
    if (close > 1)
        fprintf(f,
                "note     #1 to #%d are within 1%% of each other, closer than the model can tell "
                "apart: take the one your software runs best\n\n",
                close);
    for (int i = 0; i < n; i++) {
        plan_print_layout(o, mesh_plan_result_layout(r, i), i + 1, best, i == 0, f);
        if (i == 0 && mesh_plan_result_reason(r, 0)) {
            fprintf(f, "    why\n");
            for (int k = 0; mesh_plan_result_reason(r, k); k++)
                fprintf(f, "      %s\n", mesh_plan_result_reason(r, k));
        }
        fprintf(f, "\n");
    }
    int shown = nrej < o->rejected ? nrej : o->rejected;
    if (shown > 0)
        fprintf(f, "rejected (the most promising first; %d of %d):\n", shown, nrej);
    for (int i = 0; i < shown; i++) {
        const mesh_plan_eval_t *e = mesh_plan_result_rejected(r, i);
        const mesh_plan_layout_t *l = &e->layout;
        char a[32];
        fprintf(f, "  tp=%d cp=%d ep=%d etp=%d dp=%d pp=%d: %s", l->tp, l->cp, l->ep, l->etp, l->dp,
                l->pp, e->why);
        if (e->reject != MESH_PLAN_REJ_INVALID && e->step > 0)
            fprintf(f, " [%s a step]", plan_secs(e->step, a, sizeof(a)));
        fprintf(f, "\n");
    }
}

static void plan_json_layout(const mesh_plan_eval_t *e, FILE *f)
{
    const mesh_plan_layout_t *l = &e->layout;
    fprintf(f,
            "{\"tp\": %d, \"cp\": %d, \"ep\": %d, \"etp\": %d, \"dp\": %d, \"pp\": %d, "
            "\"edp\": %d, \"zero\": %d, \"mbs\": %d, \"micro_batches\": %d, \"schedule\": \"%s\", "
            "\"vpp\": %d, \"recompute\": \"%s\", \"sp\": %s, \"even\": %s, \"fits\": %s, "
            "\"reason\": \"%s\", "
            "\"why\": ",
            l->tp, l->cp, l->ep, l->etp, l->dp, l->pp, l->edp, l->zero, l->mbs, l->micro_batches,
            mesh_pp_kind_name(l->schedule), l->vpp, mesh_plan_recompute_name(l->recompute),
            l->sp ? "true" : "false", l->even ? "true" : "false",
            e->reject == MESH_PLAN_OK ? "true" : "false", plan_rej_names[e->reject]);
    plan_json_str(f, e->why);
    if (e->reject == MESH_PLAN_REJ_INVALID) {
        fprintf(f, "}");
        return;
    }
    fprintf(f,
            ", \"step_s\": %.6g, \"compute_s\": %.6g, \"bubble_s\": %.6g, \"bubble_fraction\": "
            "%.4f, \"optimizer_s\": %.6g, \"tokens_per_s\": %.6g, \"mfu\": %.4f, \"memory_gib\": {",
            e->step, e->compute, e->bubble, e->bubble_fraction, e->optimizer, e->tokens_per_s,
            e->mfu);
    for (int k = 0; k < MESH_PLAN_MEM_COUNT; k++)
        fprintf(f, "\"%s\": %.4f, ", plan_mem_names[k], e->mem[k] / GIB);
    fprintf(f,
            "\"total\": %.4f, \"limit\": %.4f}, \"stage_layers\": [%d, %d], "
            "\"stage_layers_first\": %d, \"stage_layers_last\": %d, \"head_layers\": %.4f, "
            "\"stage_imbalance\": %.4f, \"ep_hierarchical\": %s, \"axes\": {",
            e->mem_total / GIB, e->mem_limit / GIB, e->stage_layers_min, e->stage_layers_max,
            e->stage_layers_first, e->stage_layers_last, e->head_layers, e->stage_imbalance,
            e->ep_hier ? "true" : "false");
    for (int x = 0; x < MESH_AXIS_COUNT; x++)
        fprintf(f,
                "%s\"%s\": {\"nodes\": %d, \"bytes\": %.6g, \"time_s\": %.6g, \"exposed_s\": "
                "%.6g, \"calibrated\": %s}",
                x ? ", " : "", plan_axis_names[x], e->axis_nodes[x], e->comm_bytes[x],
                e->comm_time[x], e->comm_exposed[x],
                (e->calibrated & (1u << x)) ? "true" : "false");
    fprintf(f, "}}");
}

void plan_json_result(const plan_opts_t *o, mesh_plan_result_h r, const char *mode, FILE *f)
{
    const mesh_plan_model_t *m = &o->model;
    const mesh_plan_cluster_t *c = &o->cluster;
    long combos = 0, variants = 0, rej[MESH_PLAN_REJ_COUNT] = {0};
    double total = 0, active = 0;
    mesh_plan_result_stats(r, &combos, &variants, rej);
    mesh_plan_model_count(m, &total, &active);
    fprintf(f, "{\n  \"mode\": \"%s\",\n  \"model\": {\"name\": ", mode);
    plan_json_str(f, m->name);
    fprintf(f,
            ", \"params\": %.6g, \"active_params\": %.6g, \"layers\": %d, \"hidden\": %d, "
            "\"heads\": %d, \"kv_heads\": %d, \"ffn\": %d, \"vocab\": %d, \"seq\": %d, "
            "\"experts\": %d, \"top_k\": %d},\n",
            total, active, m->layers, m->hidden, m->heads, m->kv_heads ? m->kv_heads : m->heads,
            m->ffn ? m->ffn : 4 * m->hidden, m->vocab, m->seq, m->experts, m->top_k);
    fprintf(f, "  \"cluster\": {\"name\": ");
    plan_json_str(f, c->name);
    fprintf(f,
            ", \"gpus\": %d, \"gpus_per_node\": %d, \"gpu_mem_gib\": %.4f, \"flops\": %.6g, "
            "\"efficiency\": %.3f, \"intra_bw\": %.6g, \"inter_bw\": %.6g, \"cpu\": %s, "
            "\"calibrated\": %s",
            c->gpus, c->gpus_per_node, c->gpu_mem / GIB, c->flops,
            c->efficiency > 0 ? c->efficiency : 0.6, c->intra_bw, c->inter_bw,
            c->cpu ? "true" : "false", o->calib ? "true" : "false");
    mesh_plan_calib_entry_t ce;
    if (o->calib && mesh_plan_calib_entry(o->calib, 0, &ce) == MESH_OK) {
        fprintf(f, ", \"calibration_mem\": ");
        plan_json_str(f, ce.mem);
    }
    fprintf(f, "},\n");
    double bt = (o->params.field_mask & MESH_PLAN_PARAM_FIELD_BATCH) ? o->params.batch_tokens
                                                                     : m->batch_tokens;
    fprintf(f,
            "  \"batch_tokens\": %.0f,\n  \"search\": {\"axis_layouts\": %ld, \"variants\": "
            "%ld, \"rejected\": {\"memory\": %ld, \"invalid\": %ld, \"span\": %ld}},\n",
            bt, combos, variants, rej[MESH_PLAN_REJ_MEMORY], rej[MESH_PLAN_REJ_INVALID],
            rej[MESH_PLAN_REJ_SPAN]);
    fprintf(f, "  \"forced_span\": %s,\n  \"fits\": %s,\n  \"layouts\": [",
            mesh_plan_result_forced_span(r) ? "true" : "false",
            mesh_plan_result_count(r) > 0 ? "true" : "false");
    for (int i = 0; i < mesh_plan_result_count(r); i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        plan_json_layout(mesh_plan_result_layout(r, i), f);
    }
    fprintf(f, "\n  ],\n  \"reasons\": [");
    for (int i = 0; mesh_plan_result_reason(r, i); i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        plan_json_str(f, mesh_plan_result_reason(r, i));
    }
    int nrej = mesh_plan_result_rejected_count(r);
    int shown = nrej < o->rejected ? nrej : o->rejected;
    if (o->check && shown == 0 && nrej > 0)
        shown = 1;
    fprintf(f, "\n  ],\n  \"rejected_total\": %d,\n  \"rejected\": [", nrej);
    for (int i = 0; i < shown; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        plan_json_layout(mesh_plan_result_rejected(r, i), f);
    }
    fprintf(f, "\n  ]\n}\n");
}

void plan_print_calib(const plan_opts_t *o, FILE *f)
{
    int n = mesh_plan_calib_count(o->calib);
    char mem[48];
    mesh_plan_calib_entry_t e0;
    plan_calib_mem(o->calib, mem, sizeof(mem));
    if (o->json) {
        fprintf(f, "{\"calibration\": ");
        plan_json_str(f, o->calib_path);
        fprintf(f, ", \"mem\": ");
        plan_json_str(f, mesh_plan_calib_entry(o->calib, 0, &e0) == MESH_OK ? e0.mem : "");
        fprintf(f, ", \"entries\": [");
    } else {
        fprintf(f,
                "calibration from %s: %d curves (axis, op, group size, nodes), measured on %s\n"
                "  axis     op               ranks nodes points        sizes          alpha  "
                "     busbw  fit error\n",
                o->calib_path, n, mem);
    }
    for (int i = 0; i < n; i++) {
        mesh_plan_calib_entry_t e;
        char a[32], b[32], c[32];
        mesh_plan_calib_entry(o->calib, i, &e);
        if (o->json) {
            fprintf(f, "%s\n  {\"axis\": ", i ? "," : "");
            plan_json_str(f, e.axis);
            fprintf(f,
                    ", \"op\": \"%s\", \"nranks\": %d, \"nodes\": %d, \"points\": %d, "
                    "\"min_bytes\": %.0f, \"max_bytes\": %.0f, \"alpha_s\": %.6g, \"busbw\": "
                    "%.6g, \"fit_err\": %.4f}",
                    mesh_plan_op_name(e.op), e.nranks, e.nodes, e.npoints, e.min_bytes, e.max_bytes,
                    e.alpha, e.busbw, e.fit_err);
        } else {
            fprintf(f, "  %-8s %-15s %5d %5d %6d %10s-%-10s %9s %8.3f GB/s %8.1f%%\n", e.axis,
                    mesh_plan_op_name(e.op), e.nranks, e.nodes, e.npoints,
                    plan_bytes(e.min_bytes, a, sizeof(a)), plan_bytes(e.max_bytes, b, sizeof(b)),
                    plan_secs(e.alpha, c, sizeof(c)), e.busbw / 1e9, 100 * e.fit_err);
        }
    }
    if (o->json)
        fprintf(f, "\n]}\n");
}

int plan_compare(const plan_opts_t *o, const mesh_plan_calib_t *second, FILE *f)
{
    int n = mesh_plan_calib_count(second), total = 0, within = 0, missing = 0;
    double worst = 0;
    if (o->json)
        fprintf(f,
                "{\"calibration\": \"%s\", \"compared\": \"%s\", \"tolerance\": %.3f, "
                "\"rows\": [",
                o->calib_path, o->compare_path, o->tolerance);
    else
        fprintf(f,
                "predicted from %s, measured in %s (sizes from %.0f bytes)\n"
                "  axis     op               ranks nodes        size   predicted    measured  "
                "  error\n",
                o->calib_path, o->compare_path, o->min_bytes);
    for (int i = 0; i < n; i++) {
        mesh_plan_calib_entry_t e;
        double bytes[256], secs[256];
        mesh_plan_calib_entry(second, i, &e);
        int np = mesh_plan_calib_points(second, i, bytes, secs, 256);
        for (int k = 0; k < np && k < 256; k++) {
            if (bytes[k] < o->min_bytes)
                continue;
            double pred;
            char a[32], b[32], c[32];
            if (mesh_plan_calib_predict(o->calib, e.axis, e.op, e.nranks, e.nodes, bytes[k],
                                        &pred) != MESH_OK) {
                missing++;
                continue;
            }
            double err = pred / secs[k] - 1;
            total++;
            within += fabs(err) <= o->tolerance;
            if (fabs(err) > fabs(worst))
                worst = err;
            if (o->json) {
                fprintf(f, "%s\n  {\"axis\": ", total > 1 ? "," : "");
                plan_json_str(f, e.axis);
                fprintf(f,
                        ", \"op\": \"%s\", \"nranks\": %d, \"nodes\": %d, \"bytes\": %.0f, "
                        "\"predicted_s\": %.6g, \"measured_s\": %.6g, \"error\": %.4f}",
                        mesh_plan_op_name(e.op), e.nranks, e.nodes, bytes[k], pred, secs[k], err);
            } else {
                fprintf(f, "  %-8s %-15s %5d %5d %11s %11s %11s %+7.1f%%%s\n", e.axis,
                        mesh_plan_op_name(e.op), e.nranks, e.nodes,
                        plan_bytes(bytes[k], a, sizeof(a)), plan_secs(pred, b, sizeof(b)),
                        plan_secs(secs[k], c, sizeof(c)), 100 * err,
                        fabs(err) > o->tolerance ? "  over" : "");
            }
        }
    }
    if (o->json)
        fprintf(f, "\n], \"total\": %d, \"within\": %d, \"missing\": %d, \"worst\": %.4f}\n", total,
                within, missing, worst);
    else
        fprintf(f, "%d of %d within %.0f%% (worst %+.1f%%)%s\n", within, total, 100 * o->tolerance,
                100 * worst,
                missing ? "; some curves of the second run were not in the first" : "");
    return total > 0 && within == total ? 0 : 1;
}

void plan_list_models(int json, FILE *f)
{
    if (json)
        fprintf(f, "{\"models\": [");
    for (int i = 0; i < mesh_plan_model_preset_count(); i++) {
        const mesh_plan_model_t *m = mesh_plan_model_preset_at(i);
        double total = 0, active = 0;
        char a[32], b[32];
        mesh_plan_model_count(m, &total, &active);
        if (json) {
            fprintf(f,
                    "%s\n  {\"name\": \"%s\", \"params\": %.6g, \"active_params\": %.6g, "
                    "\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"kv_heads\": %d, \"seq\": %d, "
                    "\"experts\": %d, \"batch_tokens\": %.0f, \"source\": ",
                    i ? "," : "", m->name, total, active, m->layers, m->hidden, m->heads,
                    m->kv_heads ? m->kv_heads : m->heads, m->seq, m->experts, m->batch_tokens);
            plan_json_str(f, m->source);
            fprintf(f, "}");
        } else {
            fprintf(f, "%-14s %8s", m->name, plan_count(total, a, sizeof(a)));
            if (m->experts)
                fprintf(f, " (%s active)", plan_count(active, b, sizeof(b)));
            fprintf(f, "  %d layers, hidden %d, seq %d", m->layers, m->hidden, m->seq);
            if (m->batch_tokens > 0)
                fprintf(f, ", batch %.0f tokens", m->batch_tokens);
            fprintf(f, "\n               %s\n", m->source);
        }
    }
    if (json)
        fprintf(f, "\n]}\n");
}

void plan_list_clusters(int json, FILE *f)
{
    if (json)
        fprintf(f, "{\"clusters\": [");
    for (int i = 0; i < mesh_plan_cluster_preset_count(); i++) {
        const mesh_plan_cluster_t *c = mesh_plan_cluster_preset_at(i);
        if (json) {
            fprintf(f,
                    "%s\n  {\"name\": \"%s\", \"gpus_per_node\": %d, \"gpu_mem_gib\": %.2f, "
                    "\"flops\": %.6g, \"intra_bw\": %.6g, \"inter_bw\": %.6g, \"intra_lat\": %.3g, "
                    "\"inter_lat\": %.3g, \"source\": ",
                    i ? "," : "", c->name, c->gpus_per_node, c->gpu_mem / GIB, c->flops,
                    c->intra_bw, c->inter_bw, c->intra_lat, c->inter_lat);
            plan_json_str(f, c->source);
            fprintf(f, "}");
        } else {
            fprintf(f,
                    "%-9s %d per node, %.0f GiB, %.0f TFLOP/s, intra %.0f GB/s, inter %.1f "
                    "GB/s\n          %s\n",
                    c->name, c->gpus_per_node, c->gpu_mem / GIB, c->flops / 1e12, c->intra_bw / 1e9,
                    c->inter_bw / 1e9, c->source);
        }
    }
    if (json)
        fprintf(f, "\n]}\n");
}
