/*
 * Step time of a layout. Compute: matmul flops (2 per parameter a token goes through, forward;
 * backward twice that; causal attention 2 x heads x head_dim x seq per token and layer) at the
 * cluster's peak times its efficiency, or the time to read the weights where that is longer
 * (experts that receive few tokens), plus what recomputation runs again. Per micro-batch on the
 * slowest pipeline stage, on the critical path: TP all-gathers and reduce-scatters (or
 * all-reduces) of every layer, the CP ring's K/V exchange beyond what attention hides, the EP
 * all-to-alls, the pipeline sends, and ZeRO-3's gathers (pp = 1) beyond what compute hides.
 * Per step: the bubble of the schedule, the data-parallel gradient reduction beyond the last
 * backward (and ZeRO-1/2's parameter all-gather beyond the first forward; under a pipeline
 * ZeRO-2 and 3 reduce and gather once per step per stage, as ZeRO-1), a tied output layer's
 * gradient exchanged between the first and the last stage, and the optimizer step. Bytes are
 * bf16's, or fp32's for a cluster that trains in fp32. A collective hidden under compute still
 * costs overlap_cost of its time.
 */
#include "planner.h"

#include <math.h>
#include <string.h>

typedef struct {
    double f, b, r; /* seconds of forward, backward, recomputation per micro-batch */
    double comm[MESH_AXIS_COUNT], exposed[MESH_AXIS_COUNT], bytes[MESH_AXIS_COUNT];
    double mb; /* critical path of one micro-batch */
} plan_stage_time_t;

/* Per layer and micro-batch, one direction: time and bytes sent of the TP collectives. */
static void plan_tp_layer(const plan_ctx_t *x, const mesh_plan_layout_t *l, int nodes, int moe,
                          double *t, double *bytes, unsigned *cal)
{
    double S = plan_elem_bytes(x) * l->mbs * ((double)x->m.seq / l->cp) * x->m.hidden;
    int c = 0, n = l->tp;
    /* attention and MLP each enter and leave the TP region once; an MoE layer whose experts
     * are not tensor-parallel leaves it once */
    double k = moe && l->etp == 1 ? 1.0 : 2.0;
    *t = *bytes = 0;
    if (n <= 1)
        return;
    if (l->sp) {
        *t = k * (plan_coll_time(x, "tp", MESH_PLAN_OP_ALLGATHER, n, nodes, S, &c) +
                  plan_coll_time(x, "tp", MESH_PLAN_OP_REDUCE_SCATTER, n, nodes, S, &c));
        *bytes = k * 2.0 * S * (n - 1) / n;
    } else {
        *t = k * plan_coll_time(x, "tp", MESH_PLAN_OP_ALLREDUCE, n, nodes, S, &c);
        *bytes = k * 2.0 * S * (n - 1) / n;
    }
    if (c)
        *cal |= 1u << MESH_AXIS_TP;
}

/* Seconds of a matmul: its flops at the efficient peak, unless reading its weights from memory
 * takes longer (an expert that gets few tokens). */
static double plan_mm(const plan_ctx_t *x, double flops, double params)
{
    double t = flops / (x->cl.flops * x->cl.efficiency);
    if (x->cl.mem_bw > 0)
        t = fmax(t, plan_elem_bytes(x) * params / (0.8 * x->cl.mem_bw));
    return t;
}

/* Forward seconds of one layer per micro-batch on one rank, and its attention core. */
static double plan_layer_fwd(const plan_ctx_t *x, const mesh_plan_layout_t *l, int moe,
                             double *core_s)
{
    const mesh_plan_model_t *m = &x->m;
    const plan_counts_t *c = &x->c;
    double tok = (double)l->mbs * m->seq / l->cp, tsp = l->sp && l->tp > 1 ? l->tp : 1;
    double F = x->cl.flops * x->cl.efficiency;
    /* causal attention: each query against half the sequence on average, QK^T and AV */
    *core_s = 2.0 * m->heads * m->head_dim * (double)m->seq * tok / l->tp / F;
    double t = plan_mm(x, 2.0 * c->attn * tok / l->tp, c->attn / l->tp) + *core_s;
    if (!moe)
        return t + plan_mm(x, 2.0 * c->mlp * tok / l->tp, c->mlp / l->tp);
    double tok_in = tok / tsp, local = (double)m->experts / l->ep;
    t += plan_mm(x, 2.0 * c->shared * tok / l->tp, c->shared / l->tp);
    t += 2.0 * c->router * tok_in / F;
    /* the token copies this rank's experts receive: top_k per token of the ep group, each
     * expert's slice of etp */
    double copies = l->etp * tok_in * m->top_k;
    t += plan_mm(x, 2.0 * copies * c->expert / l->etp, local * c->expert / l->etp);
    return t;
}

/* Expected distinct nodes among a token's top_k experts, drawn without repeat from the E
 * experts spread evenly over N nodes, the draws limited to R of the nodes (R = N: no limit):
 * R (1 - C(E R/N - E/N, k) / C(E R/N, k)). */
double plan_ep_nodes_hit(int experts, int top_k, int nodes, int route_nodes)
{
    int R = route_nodes > 0 && route_nodes < nodes ? route_nodes : nodes;
    double pool = (double)experts * R / nodes, per = (double)experts / nodes, miss = 1;
    for (int i = 0; i < top_k; i++)
        miss *= pool - per - i > 0 ? (pool - per - i) / (pool - i) : 0;
    return R * (1 - miss);
}

/*
 * One all-to-all of the expert dispatch (or combine) when the ep group spans N nodes of g of
 * its ranks each, with t tokens on this rank, each of top_k copies of h bf16 values, its
 * experts anywhere with equal chance. Flat (one all-to-all over the group): the copies for
 * other nodes, k (N-1)/N of them, cross nodes while those for the node's g-1 other ranks,
 * k (g-1)/(gN), move inside it, both at once. Hierarchical (include/mesh/expert.h, DeepEP): a
 * token crosses to each other node of its experts once, D (N-1)/N rows with D the nodes its
 * experts hit (plan_ep_nodes_hit), and a forwarder there hands the copies on to the node's
 * ranks, k (g-1)/g rows, in a second phase. The faster is taken, as mesh's expert layer does
 * (MESH_EP_PATH_AUTO). Returns 1 when hierarchical; *t_s and *bytes: one all-to-all's time and
 * the bytes this rank sends.
 */
int plan_ep_span(const plan_ctx_t *x, const mesh_plan_layout_t *l, int N, double t, double *t_s,
                 double *bytes, int *cal)
{
    const mesh_plan_model_t *m = &x->m;
    double row = plan_elem_bytes(x) * t * m->hidden, k = m->top_k;
    int g = l->ep / N > 1 ? l->ep / N : 1;
    /* an all-to-all that sends b bytes from each rank of n moves S = b n / (n - 1) */
#define PLAN_A2A(n, nodes, b)                                                                      \
    ((n) > 1 && (b) > 0 ? plan_coll_time(x, "ep", MESH_PLAN_OP_ALLTOALL, (n), (nodes),             \
                                         (b) * (n) / ((n)-1.0), cal)                               \
                        : 0)
    double f_inter = row * k * (N - 1) / N, f_intra = row * k * (g - 1) / ((double)g * N);
    double flat = fmax(PLAN_A2A(N, N, f_inter), PLAN_A2A(g, 1, f_intra));
    double D = plan_ep_nodes_hit(m->experts, m->top_k, N, m->route_nodes);
    double h_inter = row * D * (N - 1) / N, h_intra = row * k * (g - 1) / g;
    double hier = PLAN_A2A(N, N, h_inter) + PLAN_A2A(g, 1, h_intra);
#undef PLAN_A2A
    if (hier < flat) {
        *t_s = hier;
        *bytes = h_inter + h_intra;
        return 1;
    }
    *t_s = flat;
    *bytes = f_inter + f_intra;
    return 0;
}

void plan_time(const plan_ctx_t *x, const mesh_plan_layout_t *l, const int *stage_layers,
               mesh_plan_eval_t *out)
{
    const mesh_plan_model_t *m = &x->m;
    const plan_counts_t *c = &x->c;
    const mesh_plan_cluster_t *cl = &x->cl;
    int p = l->pp, M = l->micro_batches, v = l->schedule == MESH_PP_INTERLEAVED ? l->vpp : 1;
    double ov = cl->overlap_cost;
    double tok = (double)l->mbs * m->seq / l->cp; /* tokens of a micro-batch on one rank */
    double tsp = l->sp && l->tp > 1 ? l->tp : 1;
    double h = m->hidden, e = plan_elem_bytes(x);
    unsigned cal = 0;
    int cf = 0;

    double core_s, dense_s = plan_layer_fwd(x, l, 0, &core_s);
    double moe_s = m->experts ? plan_layer_fwd(x, l, 1, &core_s) : 0;
    double out_s = plan_mm(x, 2.0 * c->output * tok / l->tp, c->output / l->tp);

    int n_tp = plan_group_nodes(x, 1, l->tp), n_cp = plan_group_nodes(x, l->tp, l->cp);
    int n_ep = plan_group_nodes(x, l->etp, l->ep);
    int n_dp = plan_group_nodes(x, l->tp, l->cp * l->ep * l->dp);
    int n_edp = plan_group_nodes(x, l->etp * l->ep, l->edp);
    int n_pp = plan_group_nodes(x, l->tp * l->cp * l->ep * l->dp, l->pp);
    out->axis_nodes[MESH_AXIS_TP] = n_tp;
    out->axis_nodes[MESH_AXIS_CP] = n_cp;
    out->axis_nodes[MESH_AXIS_EP] = n_ep;
    out->axis_nodes[MESH_AXIS_DP] = n_dp;
    out->axis_nodes[MESH_AXIS_PP] = n_pp;

    double tp_d, tp_db, tp_m, tp_mb;
    plan_tp_layer(x, l, n_tp, 0, &tp_d, &tp_db, &cal);
    plan_tp_layer(x, l, n_tp, 1, &tp_m, &tp_mb, &cal);

    /* CP: cp - 1 ring steps of this rank's K and V per layer forward; K, V and their gradients
     * backward; each step hides behind the attention of the block it brings */
    double cp_t = 0, cp_b = 0, cp_fx = 0, cp_bx = 0;
    if (l->cp > 1) {
        double kv = (m->kv_heads >= l->tp ? (double)m->kv_heads / l->tp : 1.0) * m->head_dim;
        double S = 2.0 * e * tok * kv;
        cf = 0;
        double t = plan_coll_time(x, "cp", MESH_PLAN_OP_SENDRECV, l->cp, n_cp, S, &cf);
        if (cf)
            cal |= 1u << MESH_AXIS_CP;
        double hide = core_s / l->cp;
        cp_t = (l->cp - 1) * t;
        cp_b = (l->cp - 1) * S;
        cp_fx = (l->cp - 1) * (fmax(0, t - hide) + ov * fmin(t, hide));
        cp_bx = (l->cp - 1) * (fmax(0, 2 * t - 2 * hide) + ov * fmin(2 * t, 2 * hide));
    }
    /* EP: dispatch and combine forward, their reverses backward, not overlapped */
    double ep_t = 0, ep_b = 0;
    if (l->ep > 1) {
        double S = e * (tok / tsp) * m->top_k * h;
        cf = 0;
        if (n_ep > 1) {
            out->ep_hier = plan_ep_span(x, l, n_ep, tok / tsp, &ep_t, &ep_b, &cf);
            ep_t *= 2;
            ep_b *= 2;
        } else {
            ep_t = 2 * plan_coll_time(x, "ep", MESH_PLAN_OP_ALLTOALL, l->ep, n_ep, S, &cf);
            ep_b = 2 * S * (l->ep - 1) / l->ep;
        }
        if (cf)
            cal |= 1u << MESH_AXIS_EP;
    }
    /* PP: one activation forward and one gradient backward per stage boundary, v of them per
     * micro-batch when interleaved */
    double pp_t = 0, pp_b = 0;
    if (p > 1) {
        double S = e * tok * h / tsp;
        cf = 0;
        pp_t = 2.0 * v * plan_coll_time(x, "pp", MESH_PLAN_OP_SENDRECV, p, n_pp, S, &cf);
        if (cf)
            cal |= 1u << MESH_AXIS_PP;
        pp_b = 2.0 * v * S;
    }
    /* a tied output layer: the first and the last stage add their copies' gradients once per
     * step, after the last backward pass, each sending its shard (fp32 sums) to the other */
    double tied_t = 0, tied_b = 0;
    if (p > 1 && m->tied) {
        tied_b = 4.0 * c->output / l->tp;
        cf = 0;
        tied_t = plan_coll_time(x, "pp", MESH_PLAN_OP_SENDRECV, p, n_pp, tied_b, &cf);
        if (cf)
            cal |= 1u << MESH_AXIS_PP;
    }
    int dd = l->dp * l->ep * l->cp;
    int full = l->recompute == MESH_PLAN_RECOMPUTE_FULL;

    plan_stage_time_t worst = {0}, st;
    double dp_time = 0, dp_exposed = 0, dp_bytes = 0, opt = 0;
    int start = 0;
    for (int i = 0; i < p; i++) {
        int n = stage_layers[i], nmoe = 0;
        for (int k = start; k < start + n; k++)
            nmoe += plan_is_moe_layer(m, c, k);
        start += n;
        int nd = n - nmoe, last = i == p - 1;
        memset(&st, 0, sizeof(st));
        st.f = nd * dense_s + nmoe * moe_s + (last ? out_s : 0);
        st.b = 2 * st.f;
        st.r = full                                            ? nd * dense_s + nmoe * moe_s
               : l->recompute == MESH_PLAN_RECOMPUTE_SELECTIVE ? n * core_s
                                                               : 0;
        double dirs = full ? 3.0 : 2.0; /* forward, backward, forward again */
        double tp_dir = nd * tp_d + nmoe * tp_m, tp_dirb = nd * tp_db + nmoe * tp_mb;
        if (last && l->tp > 1 && l->sp) { /* the output layer's gather and its reverse */
            tp_dir += 0.5 * tp_d;
            tp_dirb += 0.5 * tp_db;
        }
        if (i == 0 && l->tp > 1) { /* the vocabulary-parallel embedding: its rows summed over
                                      tp (reduce-scatter with SP, all-reduce without) and, with
                                      SP, the gather of their gradient: a quarter of a layer's */
            tp_dir += 0.25 * tp_d;
            tp_dirb += 0.25 * tp_db;
        }
        st.comm[MESH_AXIS_TP] = st.exposed[MESH_AXIS_TP] = dirs * tp_dir;
        st.bytes[MESH_AXIS_TP] = dirs * tp_dirb;
        st.comm[MESH_AXIS_CP] = n * (dirs + 1) * cp_t; /* backward moves twice the bytes */
        st.exposed[MESH_AXIS_CP] = n * ((full ? 2 : 1) * cp_fx + cp_bx);
        st.bytes[MESH_AXIS_CP] = n * (dirs + 1) * cp_b;
        st.comm[MESH_AXIS_EP] = st.exposed[MESH_AXIS_EP] = nmoe * dirs * ep_t;
        st.bytes[MESH_AXIS_EP] = nmoe * dirs * ep_b;
        st.comm[MESH_AXIS_PP] = st.exposed[MESH_AXIS_PP] = pp_t;
        st.bytes[MESH_AXIS_PP] = pp_b;

        /* data parallel: the gradients of this stage's parameters */
        double dense, expert;
        plan_stage_params(x, l, stage_layers, i, &dense, &expert);
        double Gd = e * dense, Ge = e * expert, t_ar = 0, t_rs = 0, t_ag = 0, b = 0;
        cf = 0;
        if (dd > 1) {
            t_ar += plan_coll_time(x, "dp", MESH_PLAN_OP_ALLREDUCE, dd, n_dp, Gd, &cf);
            t_rs += plan_coll_time(x, "dp", MESH_PLAN_OP_REDUCE_SCATTER, dd, n_dp, Gd, &cf);
            t_ag += plan_coll_time(x, "dp", MESH_PLAN_OP_ALLGATHER, dd, n_dp, Gd, &cf);
            b += Gd * (dd - 1) / dd;
        }
        if (l->edp > 1 && expert > 0) {
            t_ar += plan_coll_time(x, "dp", MESH_PLAN_OP_ALLREDUCE, l->edp, n_edp, Ge, &cf);
            t_rs += plan_coll_time(x, "dp", MESH_PLAN_OP_REDUCE_SCATTER, l->edp, n_edp, Ge, &cf);
            t_ag += plan_coll_time(x, "dp", MESH_PLAN_OP_ALLGATHER, l->edp, n_edp, Ge, &cf);
            b += Ge * (l->edp - 1) / l->edp;
        }
        if (cf)
            cal |= 1u << MESH_AXIS_DP;
        double s_time = 0, s_exp = 0, s_bytes = 0;
/* what compute does not hide of t under `under`, and what the hidden part costs it */
#define PLAN_EXPOSE(t, under) (fmax(0, (t) - (under)) + ov * fmin((t), (under)))
        if (l->zero == 3 && p == 1) { /* per micro-batch: gather forward and backward,
                                           scatter grads */
            st.comm[MESH_AXIS_DP] = 2 * t_ag + t_rs;
            st.exposed[MESH_AXIS_DP] = PLAN_EXPOSE(t_ag, st.f) + PLAN_EXPOSE(t_ag + t_rs, st.b);
            st.bytes[MESH_AXIS_DP] = 3 * b;
        } else if (l->zero == 0) {
            s_time = t_ar;
            s_exp = PLAN_EXPOSE(t_ar, st.b);
            s_bytes = 2 * b;
        } else { /* stages 1 and 2, and under a pipeline 3: once per step, the gradients
                    reduce-scattered after the stage's last backward pass and the parameters
                    gathered before its first forward pass (stage 3) or after the update */
            s_time = t_rs + t_ag;
            s_exp = PLAN_EXPOSE(t_rs, st.b) + PLAN_EXPOSE(t_ag, st.f);
            s_bytes = 2 * b;
        }
#undef PLAN_EXPOSE
        if (cl->mem_bw > 0) { /* Adam reads and writes about 28 bytes per parameter it owns */
            double own = l->zero >= 1 ? dense / dd + expert / l->edp : dense + expert;
            double o = 28.0 * own / cl->mem_bw;
            if (o > opt)
                opt = o;
        }
        for (int a = 0; a < MESH_AXIS_COUNT; a++)
            st.mb += st.exposed[a];
        st.mb += st.f + st.b + st.r;
        if (st.mb > worst.mb)
            worst = st;
        if (s_exp > dp_exposed)
            dp_exposed = s_exp;
        if (s_time > dp_time) {
            dp_time = s_time;
            dp_bytes = s_bytes;
        }
    }
    double units = mesh_plan_bubble(l->schedule, p, M, v) * M;
    out->compute = M * (worst.f + worst.b + worst.r);
    out->bubble = units * worst.mb;
    out->optimizer = opt;
    for (int a = 0; a < MESH_AXIS_COUNT; a++) {
        out->comm_time[a] = M * worst.comm[a];
        out->comm_exposed[a] = M * worst.exposed[a];
        out->comm_bytes[a] = M * worst.bytes[a];
    }
    out->comm_time[MESH_AXIS_DP] += dp_time;
    out->comm_exposed[MESH_AXIS_DP] += dp_exposed;
    out->comm_bytes[MESH_AXIS_DP] += dp_bytes;
    out->comm_time[MESH_AXIS_PP] += tied_t;
    out->comm_exposed[MESH_AXIS_PP] += tied_t;
    out->comm_bytes[MESH_AXIS_PP] += tied_b;
    out->step = M * worst.mb + out->bubble + dp_exposed + tied_t + opt;
    out->bubble_fraction = out->step > 0 ? out->bubble / out->step : 0;
    out->calibrated = cal;
    out->tokens_per_s = x->batch_tokens / out->step;
    double matmul = c->active - (m->tied ? 0 : c->embed);
    double model = x->batch_tokens *
                   (6.0 * matmul + 6.0 * m->layers * m->heads * m->head_dim * (double)m->seq);
    out->mfu = model / (out->step * cl->gpus * cl->flops);
}
