/*
 * The GPT's mixture-of-experts MLP (gpt_moe, the layer a block's spec puts in its MLP slot): a
 * router (linear d_model -> E without bias, softmax over the experts), each token sent to its k
 * most probable experts (ties to the lower id) with those probabilities as weights, not
 * renormalised, and E expert MLPs (fc, GELU, projection, no biases), each a tp region like the
 * dense MLP. The load-balancing loss of Switch and GShard,
 * E sum_e f_e P_e (f_e the fraction of the k choices that name e, P_e the mean probability of e),
 * is counted over every data-parallel rank's tokens of the micro-batch, so that it does not
 * depend on the layout; its gradient flows through P only.
 *
 * Communication goes through the hooks: the moves of tokens to the experts' ranks (moe_route,
 * _dispatch, _combine and their backward passes) and the sums of the router's statistics over
 * the data-parallel ranks and of its weights' gradients over tp. Without hooks every expert is
 * here and this file routes, drops and moves the rows itself, as mesh/expert.h does on one rank:
 * a capacity of ceil(f tokens k / E) rows per expert, the first tokens in order kept (tokens
 * counted per capacity group).
 */
#include "gpt.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One block's routing and expert rows, kept from the forward to the backward pass. */
typedef struct gpt_moe_acts {
    gpt_real *probs;      /* [N, E] router probabilities */
    gpt_real *w;          /* [N k] weights of the choices */
    int32_t *ids;         /* [N k] chosen experts */
    uint8_t *dropped;     /* [N k] */
    int32_t *slot;        /* [N k] the expert row of a choice (one process), -1 dropped */
    int rows, *erows;     /* rows received, per local expert [El] */
    gpt_real *xe, *h, *g; /* [rmax, C], [rmax, Fel] twice: expert inputs, fc out, GELU out */
    gpt_real *ye;         /* [rmax, C] expert outputs (partial sums under tp) */
    gpt_real *gathered;   /* [N k, C] each choice's expert output (combine's) */
    double *f;            /* [E] global fraction of choices per expert */
    double inv_tokens;    /* 1 / tokens of the micro-batch over the data-parallel ranks */
    /* split backward: the gradients of the expert outputs and fc outputs, and of the router's
     * logits, [rmax, C], [rmax, Fel], [N, E] */
    gpt_real *kdye, *kdh, *kdl;
} gpt_moe_acts_t;

typedef struct gpt_moe_scratch {
    gpt_real *dye, *dg, *dh, *dxe; /* [rmax, C], [rmax, Fel] twice, [rmax, C] */
    gpt_real *dw, *dprobs;         /* [N k], [N, E] */
    double *stats;                 /* [2 E] */
} gpt_moe_scratch_t;

/* Whether block l's MLP slot holds this layer (its buffers are kept for those blocks only). */
static int moe_block(const gpt_t *m, int l)
{
    return m->blocks[l].mlp == &gpt_moe;
}

#define ALLOC(p, n)                                                                                \
    do {                                                                                           \
        if (!((p) = calloc((size_t)(n), sizeof(*(p)))))                                            \
            return -1;                                                                             \
    } while (0)

static int moe_alloc(gpt_t *m)
{
    if (m->E == 0)
        return 0;
    size_t N = (size_t)m->b * m->T, K = (size_t)m->K, C = (size_t)m->C, F = (size_t)m->Fel;
    /* each of ep ranks sends a local expert at most one row per token */
    m->rmax = (int)((size_t)m->cfg.ep * N * (size_t)(m->K < m->El ? m->K : m->El));
    size_t R = (size_t)m->rmax;
    for (int i = 0; i < m->n_mb; i++) {
        ALLOC(m->acts[i].moe, m->L);
        for (int l = 0; l < m->L; l++) {
            gpt_moe_acts_t *e = &m->acts[i].moe[l];
            if (!moe_block(m, l))
                continue;
            ALLOC(e->probs, N * m->E);
            ALLOC(e->w, N * K);
            ALLOC(e->ids, N * K);
            ALLOC(e->dropped, N * K);
            ALLOC(e->slot, N * K);
            ALLOC(e->erows, m->El);
            ALLOC(e->xe, R * C);
            ALLOC(e->h, R * F);
            ALLOC(e->g, R * F);
            ALLOC(e->ye, R * C);
            ALLOC(e->gathered, N * K * C);
            ALLOC(e->f, m->E);
        }
    }
    ALLOC(m->moe_scr, 1);
    gpt_moe_scratch_t *s = m->moe_scr;
    ALLOC(s->dye, R * C);
    ALLOC(s->dg, R * F);
    ALLOC(s->dh, R * F);
    ALLOC(s->dxe, R * C);
    ALLOC(s->dw, N * K);
    ALLOC(s->dprobs, N * m->E);
    ALLOC(s->stats, 2 * m->E);
    return 0;
}

static int moe_alloc_wgrad(gpt_t *m)
{
    size_t N = (size_t)m->b * m->T, R = (size_t)m->rmax;
    for (int i = 0; m->E && i < m->n_mb; i++)
        for (int l = 0; l < m->L; l++) {
            gpt_moe_acts_t *e = &m->acts[i].moe[l];
            if (!moe_block(m, l))
                continue;
            ALLOC(e->kdye, R * m->C);
            ALLOC(e->kdh, R * m->Fel);
            ALLOC(e->kdl, N * m->E);
        }
    return 0;
}

static void moe_release(gpt_t *m)
{
    for (int i = 0; m->acts && i < m->n_mb; i++) {
        for (int l = 0; m->acts[i].moe && l < m->L; l++) {
            gpt_moe_acts_t *e = &m->acts[i].moe[l];
            free(e->probs), free(e->w), free(e->ids), free(e->dropped), free(e->slot);
            free(e->erows), free(e->xe), free(e->h), free(e->g), free(e->ye), free(e->gathered);
            free(e->f), free(e->kdye), free(e->kdh), free(e->kdl);
        }
        free(m->acts[i].moe);
        m->acts[i].moe = NULL;
    }
    gpt_moe_scratch_t *s = m->moe_scr;
    if (s) {
        free(s->dye), free(s->dg), free(s->dh), free(s->dxe), free(s->dw), free(s->dprobs);
        free(s->stats);
    }
    free(s);
    m->moe_scr = NULL;
}

/* ---------------------------------------------------------------- router */

/* probs = softmax(in W^T) per row; the k largest (the lower id first among equals) */
static void route(const gpt_t *m, gpt_moe_acts_t *e, const gpt_real *in, const gpt_real *w, int N)
{
    int E = m->E, K = m->K;
    gpt_matmul_forward(e->probs, in, w, NULL, N, m->C, E);
    for (int t = 0; t < N; t++) {
        gpt_real *p = e->probs + (size_t)t * E;
        gpt_real mx = p[0];
        for (int j = 1; j < E; j++)
            mx = p[j] > mx ? p[j] : mx;
        double sum = 0;
        for (int j = 0; j < E; j++)
            sum += p[j] = GPT_EXP(p[j] - mx);
        for (int j = 0; j < E; j++)
            p[j] = (gpt_real)(p[j] / sum);
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int x = 0; x < E; x++) {
                int taken = 0;
                for (int q = 0; q < j; q++)
                    taken |= e->ids[(size_t)t * K + q] == x;
                if (!taken && (best < 0 || p[x] > p[best]))
                    best = x;
            }
            e->ids[(size_t)t * K + j] = best;
            e->w[(size_t)t * K + j] = p[best];
        }
    }
}

/* f_e, P_e over the data-parallel ranks' tokens; returns E sum_e f_e P_e */
static int balance(gpt_t *m, gpt_moe_acts_t *e, int N, double *aux)
{
    int E = m->E, K = m->K;
    double *st = m->moe_scr->stats; /* choices per expert, then probability sums */
    memset(st, 0, 2 * (size_t)E * sizeof(double));
    for (int t = 0; t < N; t++) {
        for (int j = 0; j < K; j++)
            st[e->ids[(size_t)t * K + j]] += 1;
        for (int x = 0; x < E; x++)
            st[E + x] += e->probs[(size_t)t * E + x];
    }
    if (m->ops.moe_dp_sum && m->ops.moe_dp_sum(m->ops.ctx, st, 2 * E))
        return -1;
    double choices = 0, a = 0;
    for (int x = 0; x < E; x++)
        choices += st[x];
    double tokens = choices / K;
    e->inv_tokens = 1.0 / tokens;
    for (int x = 0; x < E; x++) {
        e->f[x] = st[x] / choices;
        a += e->f[x] * (st[E + x] / tokens);
    }
    *aux = E * a;
    return 0;
}

/* ---------------------------------------------------------------- one process: every expert */

/* The capacity counts each of capacity_groups consecutive parts of the tokens apart, as that
 * many ep groups would. */
static void local_route(const gpt_t *m, gpt_moe_acts_t *e, int N)
{
    int E = m->E, K = m->K, G = m->cfg.capacity_groups > 1 ? m->cfg.capacity_groups : 1;
    int per = N / G;
    size_t cap = m->cfg.capacity > 0 ? (size_t)ceil(m->cfg.capacity * (double)per * K / E) : 0;
    int row = 0;
    for (int x = 0; x < E; x++) {
        size_t taken = 0, kept = 0;
        for (int t = 0; t < N; t++)
            for (int j = 0; j < K; j++) {
                if (j == 0 && t % per == 0)
                    taken = 0;
                size_t c = (size_t)t * K + j;
                if (e->ids[c] != x)
                    continue;
                e->dropped[c] = cap && taken >= cap;
                e->slot[c] = e->dropped[c] ? -1 : row++;
                taken += !e->dropped[c];
                kept += !e->dropped[c];
            }
        e->erows[x] = (int)kept;
    }
    e->rows = row;
}

static void local_dispatch(const gpt_t *m, const gpt_moe_acts_t *e, const gpt_real *in,
                           gpt_real *rows, int N)
{
    size_t C = (size_t)m->C;
    for (size_t c = 0; c < (size_t)N * m->K; c++)
        if (e->slot[c] >= 0)
            memcpy(rows + (size_t)e->slot[c] * C, in + c / m->K * C, C * sizeof(gpt_real));
}

/* out[t] = sum over t's kept choices, in order, of weight x row, summed in double */
static void local_combine(const gpt_t *m, const gpt_moe_acts_t *e, const gpt_real *rows,
                          gpt_real *out, gpt_real *gathered, int N)
{
    size_t C = (size_t)m->C, K = (size_t)m->K;
    for (size_t t = 0; t < (size_t)N; t++)
        for (size_t k = 0; k < C; k++) {
            double s = 0;
            for (size_t j = 0; j < K; j++) {
                int r = e->slot[t * K + j];
                gpt_real v = r >= 0 ? rows[(size_t)r * C + k] : 0;
                gathered[(t * K + j) * C + k] = v;
                s += (double)e->w[t * K + j] * v;
            }
            out[t * C + k] = (gpt_real)s;
        }
}

static void local_combine_bwd(const gpt_t *m, const gpt_moe_acts_t *e, const gpt_real *dout,
                              gpt_real *drows, gpt_real *dw, int N)
{
    size_t C = (size_t)m->C, K = (size_t)m->K;
    for (size_t c = 0; c < (size_t)N * K; c++) {
        const gpt_real *d = dout + c / K * C, *gr = e->gathered + c * C;
        double dot = 0;
        for (size_t k = 0; k < C; k++)
            dot += (double)d[k] * gr[k];
        dw[c] = (gpt_real)dot;
        int r = e->slot[c];
        for (size_t k = 0; r >= 0 && k < C; k++)
            drows[(size_t)r * C + k] = e->w[c] * d[k];
    }
}

static void local_dispatch_bwd(const gpt_t *m, const gpt_moe_acts_t *e, const gpt_real *drows,
                               gpt_real *din, int N)
{
    size_t C = (size_t)m->C, K = (size_t)m->K;
    for (size_t t = 0; t < (size_t)N; t++)
        for (size_t k = 0; k < C; k++) {
            double s = 0;
            for (size_t j = 0; j < K; j++) {
                int r = e->slot[t * K + j];
                if (r >= 0)
                    s += drows[(size_t)r * C + k];
            }
            din[t * C + k] = (gpt_real)s;
        }
}

/* ---------------------------------------------------------------- the block's MLP */

/* Every tp rank routed every token alike: each adds the router's weight gradient of the
 * positions it holds outside the region (all of them without sequence parallelism, where
 * nothing is summed), rows t0 - T cp_rank on of the cp rank's T. */
static void router_wgrad(const gpt_t *m, gpt_real *dw, const gpt_real *dl, const gpt_real *in)
{
    size_t first = (size_t)(m->t0 - m->T * m->cfg.cp_rank);
    for (int b = 0; b < m->b; b++) {
        size_t r = (size_t)b * m->T + first;
        gpt_matmul_backward(NULL, dw, NULL, dl + r * m->E, in + r * m->C, NULL, m->tl, m->C, m->E,
                            0);
    }
}

#define MOE(m, name, ...) ((m)->ops.name((m)->ops.ctx, __VA_ARGS__))

static int moe_fwd(gpt_t *m, int mb, int l, const gpt_group_t *p, const gpt_real *in, gpt_real *out)
{
    gpt_acts_t *a = &m->acts[mb];
    gpt_moe_acts_t *e = &a->moe[l];
    int N = m->b * m->T, C = m->C, F = m->Fel, hooks = m->ops.moe_route != NULL;
    gpt_real *in_l = a->ln2_in + gpt_blk(m, l) * N * C;
    if (gpt_enter_fwd(m, in, in_l, C))
        return -1;
    route(m, e, in_l, p->routerw, N);
    double aux;
    if (balance(m, e, N, &aux))
        return -1;
    a->aux += m->aux_scale * aux;
    if (hooks) {
        if (MOE(m, moe_route, mb, l, N, e->ids, &e->rows, e->erows, e->dropped) ||
            MOE(m, moe_dispatch, mb, l, in_l, e->xe))
            return -1;
    } else {
        local_route(m, e, N);
        local_dispatch(m, e, in_l, e->xe, N);
    }
    for (size_t c = 0; c < (size_t)N * m->K; c++)
        a->dropped += e->dropped[c];
    size_t r0 = 0;
    for (int x = 0; x < m->El; x++) {
        int r = e->erows[x];
        const gpt_real *w1 = p->efcw + (size_t)x * F * C, *w2 = p->eprojw + (size_t)x * C * F;
        if (r > 0) {
            gpt_matmul_forward(e->h + r0 * F, e->xe + r0 * C, w1, NULL, r, C, F);
            gpt_gelu_forward(e->g + r0 * F, e->h + r0 * F, r * F);
            gpt_matmul_forward(e->ye + r0 * C, e->g + r0 * F, w2, NULL, r, F, C);
        }
        r0 += (size_t)r;
    }
    if (hooks ? MOE(m, moe_combine, mb, l, e->ye, e->w, m->partial, e->gathered)
              : (local_combine(m, e, e->ye, m->partial, e->gathered, N), 0))
        return -1;
    return gpt_exit_fwd(m, m->partial, out, C);
}

static int moe_bwd(gpt_t *m, int mb, int l, const gpt_group_t *p, gpt_group_t *g,
                   const gpt_real *dout, gpt_real *din)
{
    gpt_acts_t *a = &m->acts[mb];
    gpt_moe_acts_t *e = &a->moe[l];
    gpt_moe_scratch_t *s = m->moe_scr;
    int N = m->b * m->T, C = m->C, F = m->Fel, E = m->E, K = m->K, hooks = m->ops.moe_route != NULL;
    const gpt_real *in_l = a->ln2_in + gpt_blk(m, l) * N * C;
    if (gpt_exit_bwd(m, dout, m->partial, C))
        return -1;
    if (hooks ? MOE(m, moe_combine_bwd, mb, l, m->partial, e->w, e->gathered, s->dye, s->dw)
              : (local_combine_bwd(m, e, m->partial, s->dye, s->dw, N), 0))
        return -1;
    /* under tp the gathered rows were each rank's part of the sums */
    if (m->ops.moe_tp_sum && MOE(m, moe_tp_sum, s->dw, N * K))
        return -1;
    size_t r0 = 0;
    for (int x = 0; x < m->El; x++) {
        int r = e->erows[x];
        const gpt_real *w1 = p->efcw + (size_t)x * F * C, *w2 = p->eprojw + (size_t)x * C * F;
        /* g NULL (split backward): the input gradient only, what W needs kept */
        gpt_real *dw1 = g ? g->efcw + (size_t)x * F * C : NULL;
        gpt_real *dw2 = g ? g->eprojw + (size_t)x * C * F : NULL;
        if (r > 0) {
            gpt_matmul_backward(s->dg + r0 * F, dw2, NULL, s->dye + r0 * C, e->g + r0 * F, w2, r, F,
                                C, 0);
            gpt_gelu_backward(s->dh + r0 * F, e->h + r0 * F, s->dg + r0 * F, r * F);
            gpt_matmul_backward(s->dxe + r0 * C, dw1, NULL, s->dh + r0 * F, e->xe + r0 * C, w1, r,
                                C, F, 0);
        }
        r0 += (size_t)r;
    }
    if (!g) {
        memcpy(e->kdye, s->dye, r0 * C * sizeof(gpt_real));
        memcpy(e->kdh, s->dh, r0 * F * sizeof(gpt_real));
    }
    if (hooks ? MOE(m, moe_dispatch_bwd, mb, l, s->dxe, m->dinside)
              : (local_dispatch_bwd(m, e, s->dxe, m->dinside, N), 0))
        return -1;
    if (hooks && MOE(m, moe_done, mb, l))
        return -1;
    /* the router: the weights' gradients, and the balance loss's through P_e */
    gpt_real *dl = s->dprobs;
    for (int t = 0; t < N; t++) {
        gpt_real *d = dl + (size_t)t * E;
        const gpt_real *pr = e->probs + (size_t)t * E;
        for (int x = 0; x < E; x++)
            d[x] = (gpt_real)(m->aux_scale * E * e->f[x] * e->inv_tokens);
        for (int j = 0; j < K; j++)
            d[e->ids[(size_t)t * K + j]] += s->dw[(size_t)t * K + j];
        double dot = 0;
        for (int x = 0; x < E; x++)
            dot += (double)pr[x] * d[x];
        for (int x = 0; x < E; x++)
            d[x] = pr[x] * (d[x] - (gpt_real)dot);
    }
    /* the router's weight gradient (router_wgrad); its input gradient from one tp rank, which
     * the region's entry sums */
    if (g)
        router_wgrad(m, g->routerw, dl, in_l);
    else
        memcpy(e->kdl, dl, (size_t)N * E * sizeof(gpt_real));
    if (m->cfg.tp_rank == 0)
        gpt_matmul_backward(m->dinside, NULL, NULL, dl, in_l, p->routerw, N, C, E, 1);
    return gpt_enter_bwd(m, m->dinside, din, C);
}

static int moe_wgrad(gpt_t *m, int mb, int l, gpt_group_t *g)
{
    gpt_acts_t *a = &m->acts[mb];
    const gpt_moe_acts_t *e = &a->moe[l];
    int N = m->b * m->T, C = m->C, F = m->Fel;
    size_t r0 = 0;
    for (int x = 0; x < m->El; x++) {
        int r = e->erows[x];
        if (r > 0) {
            gpt_matmul_backward(NULL, g->eprojw + (size_t)x * C * F, NULL, e->kdye + r0 * C,
                                e->g + r0 * F, NULL, r, F, C, 0);
            gpt_matmul_backward(NULL, g->efcw + (size_t)x * F * C, NULL, e->kdh + r0 * F,
                                e->xe + r0 * C, NULL, r, C, F, 0);
        }
        r0 += (size_t)r;
    }
    router_wgrad(m, g->routerw, e->kdl, a->ln2_in + gpt_blk(m, l) * N * C);
    return 0;
}

/* The router [E, C] (whole on every rank) and the experts' fc [E Fe, C] and projection
 * [E C, Fe], this rank's experts split across tp like the dense MLP's. */
static int moe_tensors(const gpt_t *m, int l, gpt_tensor_decl_t *d)
{
    int C = m->C;
    (void)l;
    d[0] = (gpt_tensor_decl_t){"routerw", m->E, C, GPT_WHOLE, offsetof(gpt_group_t, routerw)};
    d[1] =
        (gpt_tensor_decl_t){"efcw", m->E * m->Fe, C, GPT_EXPERT_ROWS, offsetof(gpt_group_t, efcw)};
    d[2] = (gpt_tensor_decl_t){"eprojw", m->E * C, m->Fe, GPT_EXPERT_COLS,
                               offsetof(gpt_group_t, eprojw)};
    return 3;
}

const gpt_layer_t gpt_moe = {.tensors = moe_tensors,
                             .alloc = moe_alloc,
                             .alloc_wgrad = moe_alloc_wgrad,
                             .release = moe_release,
                             .fwd = moe_fwd,
                             .bwd = moe_bwd,
                             .wgrad = moe_wgrad};
