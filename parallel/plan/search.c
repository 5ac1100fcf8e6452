/*
 * The search: every axis layout (tp, cp, ep, etp, pp; dp the rest) the constraints allow, and
 * for each the best variant (ZeRO stage, micro-batch size, schedule, recomputation) that fits,
 * or the closest one and why it does not. Ranked by predicted step time.
 */
#include "planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mesh_plan_result {
    plan_ctx_t x;
    mesh_plan_eval_t *fit, *rej;
    int nfit, nrej, capfit, caprej;
    long combos, variants, rejected[MESH_PLAN_REJ_COUNT];
    int forced_span;
    plan_lines_t reasons;
};

typedef struct {
    mesh_plan_eval_t best, closest, invalid;
    int has_best, has_closest, has_invalid;
    long count;
} plan_vres_t;

static int plan_better(const mesh_plan_eval_t *a, const mesh_plan_eval_t *b)
{
    if (a->step < b->step * (1 - 1e-9))
        return 1;
    if (a->step > b->step * (1 + 1e-9))
        return 0;
    return a->mem_total < b->mem_total;
}

/* Values of one knob: the pinned or fixed one, else those allowed. */
static int plan_choices(const plan_ctx_t *x, unsigned pin, unsigned bit, int pinned, int fixed,
                        const int *all, int nall, unsigned mask, int *out)
{
    if (pin & bit) {
        out[0] = pinned;
        return 1;
    }
    if (x->p.fix_set & bit) {
        out[0] = fixed;
        return 1;
    }
    int n = 0;
    for (int i = 0; i < nall; i++)
        if (!mask || (mask & (1u << all[i])))
            out[n++] = all[i];
    return n;
}

static void plan_variants(const plan_ctx_t *x, const mesh_plan_layout_t *axes, unsigned pin,
                          plan_vres_t *r)
{
    const mesh_plan_params_t *p = &x->p;
    const mesh_plan_layout_t *fx = &p->fix;
    static const int zall[] = {0, 1, 2, 3}, rall[] = {0, 1, 2}, vall[] = {2, 4},
                     sall[] = {MESH_PP_AFAB, MESH_PP_1F1B, MESH_PP_INTERLEAVED, MESH_PP_ZB1};
    int zs[4], rs[3], ss[4], vs[2], ms[32], nm = 0, mall[32], nmall = 0;
    int nz =
        plan_choices(x, pin, MESH_PLAN_SET_ZERO, axes->zero, fx->zero, zall, 4, p->zero_mask, zs);
    int nr = plan_choices(x, pin, MESH_PLAN_SET_RECOMPUTE, axes->recompute, fx->recompute, rall, 3,
                          p->recompute_mask, rs);
    int ns = axes->pp == 1 ? (ss[0] = MESH_PP_NONE, 1)
                           : plan_choices(x, pin, MESH_PLAN_SET_SCHEDULE, axes->schedule,
                                          fx->schedule, sall, 4, p->schedule_mask, ss);
    for (int b = 1; b <= p->max_mbs && nmall < 32; b *= 2)
        mall[nmall++] = b;
    nm = plan_choices(x, pin, MESH_PLAN_SET_MBS, axes->mbs, fx->mbs, mall, nmall, 0, ms);
    memset(r, 0, sizeof(*r));
    for (int iz = 0; iz < nz; iz++)
        for (int im = 0; im < nm; im++)
            for (int is = 0; is < ns; is++) {
                int nv = ss[is] == MESH_PP_INTERLEAVED
                             ? plan_choices(x, pin, MESH_PLAN_SET_VPP, axes->vpp, fx->vpp, vall, 2,
                                            0, vs)
                             : (vs[0] = 1, 1);
                for (int iv = 0; iv < nv; iv++)
                    for (int ir = 0; ir < nr; ir++) {
                        mesh_plan_eval_t e;
                        memset(&e, 0, sizeof(e));
                        e.layout = *axes;
                        e.layout.zero = zs[iz];
                        e.layout.mbs = ms[im];
                        e.layout.schedule = (mesh_pp_kind_t)ss[is];
                        e.layout.vpp = vs[iv];
                        e.layout.recompute = (mesh_plan_recompute_t)rs[ir];
                        e.layout.micro_batches = 0;
                        r->count++;
                        e.reject = plan_structure(x, &e.layout, 1, e.why, sizeof(e.why));
                        if (e.reject != MESH_PLAN_OK) {
                            if (!r->has_invalid)
                                r->invalid = e;
                            r->has_invalid = 1;
                            continue;
                        }
                        plan_eval(x, &e.layout, &e);
                        if (e.reject == MESH_PLAN_OK) {
                            if (!r->has_best || plan_better(&e, &r->best))
                                r->best = e;
                            r->has_best = 1;
                        } else if (!r->has_closest || e.mem_total < r->closest.mem_total) {
                            r->closest = e;
                            r->has_closest = 1;
                        }
                    }
            }
}

int plan_best_variant(const plan_ctx_t *x, const mesh_plan_layout_t *l, unsigned pin,
                      mesh_plan_eval_t *out)
{
    plan_vres_t r;
    plan_variants(x, l, pin, &r);
    if (r.has_best)
        *out = r.best;
    else if (r.has_closest)
        *out = r.closest;
    else if (r.has_invalid)
        *out = r.invalid;
    return r.has_best;
}

static int plan_push(mesh_plan_eval_t **arr, int *n, int *cap, const mesh_plan_eval_t *e)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        mesh_plan_eval_t *na = realloc(*arr, sizeof(**arr) * nc);
        if (!na)
            return -1;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = *e;
    return 0;
}

/* Divisors of n in ascending order, at most max of them up to limit. */
static int plan_divisors(long n, long limit, int *out, int max)
{
    int k = 0;
    for (long d = 1; d <= n && d <= limit && k < max; d++)
        if (n % d == 0)
            out[k++] = (int)d;
    return k;
}

static void plan_variant_text(const mesh_plan_layout_t *l, char *buf, size_t len)
{
    snprintf(buf, len, "zero=%d, mbs=%d, %s recompute", l->zero, l->mbs,
             mesh_plan_recompute_name(l->recompute));
}

/* One axis layout: its best variant into fit, or the reason into rej. */
static int plan_combo(struct mesh_plan_result *r, mesh_plan_layout_t *axes)
{
    const plan_ctx_t *x = &r->x;
    int gpn = x->cl.gpus_per_node;
    const char *U = PLAN_UNIT(x);
    mesh_plan_eval_t e;
    memset(&e, 0, sizeof(e));
    e.layout = *axes;
    e.layout.mbs = 1;
    r->combos++;
    e.reject = plan_structure(x, &e.layout, 1, e.why, sizeof(e.why));
    if (e.reject == MESH_PLAN_REJ_INVALID) {
        r->rejected[MESH_PLAN_REJ_INVALID]++;
        return plan_push(&r->rej, &r->nrej, &r->caprej, &e);
    }
    axes->dp = e.layout.dp;
    axes->edp = e.layout.edp;
    axes->etp = e.layout.etp;
    /* tp stays inside a node, and etp x ep inside one or over whole nodes, unless asked for or
     * fixed by the user */
    unsigned fs = x->p.fix_set;
    long eg = (long)axes->etp * axes->ep;
    char span[128] = "";
    if ((axes->tp > gpn || gpn % axes->tp) && !x->p.allow_span && !(fs & MESH_PLAN_SET_TP))
        snprintf(span, sizeof(span), "tp=%d spans nodes of %d %s", axes->tp, gpn, U);
    else if (x->m.experts && axes->ep > 1 &&
             (axes->etp > gpn || gpn % axes->etp || (eg > gpn && eg % gpn) ||
              (eg < gpn && gpn % eg)) &&
             !x->p.allow_span && !(fs & (MESH_PLAN_SET_EP | MESH_PLAN_SET_ETP)))
        snprintf(span, sizeof(span), "etp x ep = %ld spans nodes of %d %s", eg, gpn, U);

    plan_vres_t v;
    plan_variants(x, axes, 0, &v);
    r->variants += v.count;
    char var[96];
    if (v.has_best) {
        e = v.best;
        if (span[0]) {
            e.reject = MESH_PLAN_REJ_SPAN;
            snprintf(e.why, sizeof(e.why), "%s", span);
            r->rejected[MESH_PLAN_REJ_SPAN]++;
            return plan_push(&r->rej, &r->nrej, &r->caprej, &e);
        }
        return plan_push(&r->fit, &r->nfit, &r->capfit, &e);
    }
    if (v.has_closest) {
        e = v.closest;
        plan_variant_text(&e.layout, var, sizeof(var));
        char mem[sizeof(e.why)];
        snprintf(mem, sizeof(mem), "%s", e.why);
        snprintf(e.why, sizeof(e.why), "%.60s%s%.100s, even with %.60s", span, span[0] ? "; " : "",
                 mem, var);
        r->rejected[MESH_PLAN_REJ_MEMORY]++;
        return plan_push(&r->rej, &r->nrej, &r->caprej, &e);
    }
    e = v.has_invalid ? v.invalid : e;
    if (!v.has_invalid)
        snprintf(e.why, sizeof(e.why),
                 "no allowed ZeRO stage, micro-batch size, schedule and "
                 "recomputation");
    e.reject = MESH_PLAN_REJ_INVALID;
    r->rejected[MESH_PLAN_REJ_INVALID]++;
    return plan_push(&r->rej, &r->nrej, &r->caprej, &e);
}

static int plan_enumerate(struct mesh_plan_result *r)
{
    const plan_ctx_t *x = &r->x;
    const mesh_plan_params_t *p = &x->p;
    const mesh_plan_model_t *m = &x->m;
    int world = x->cl.gpus, gpn = x->cl.gpus_per_node;
    unsigned fs = p->fix_set;
    int tps[64], cps[64], pps[256], eps[256], etps[2];
    long tlim = p->max_tp > 0 ? p->max_tp : p->allow_span ? world : 2L * gpn;
    int ntp = (fs & MESH_PLAN_SET_TP)
                  ? (tps[0] = p->fix.tp, 1)
                  : plan_divisors(world, tlim < m->heads ? tlim : m->heads, tps, 64);
    for (int a = 0; a < ntp; a++) {
        int tp = tps[a];
        if (tp < 1 || world % tp)
            continue;
        int ncp = 0;
        if (fs & MESH_PLAN_SET_CP)
            cps[ncp++] = p->fix.cp;
        else
            for (int c = 1; c <= world / tp && c <= (p->max_cp > 0 ? p->max_cp : 64) && ncp < 64;
                 c++)
                if ((world / tp) % c == 0 && (c == 1 || m->seq % (2 * c) == 0))
                    cps[ncp++] = c;
        for (int b = 0; b < ncp; b++) {
            int cp = cps[b];
            if (cp < 1 || (world / tp) % cp)
                continue;
            long rest = world / tp / cp;
            long plim = p->max_pp > 0 && p->max_pp < m->layers ? p->max_pp : m->layers;
            int npp = (fs & MESH_PLAN_SET_PP) ? (pps[0] = p->fix.pp, 1)
                                              : plan_divisors(rest, plim, pps, 256);
            for (int c = 0; c < npp; c++) {
                int pp = pps[c];
                if (pp < 1 || rest % pp)
                    continue;
                long rest2 = rest / pp;
                int nep = 0;
                if (fs & MESH_PLAN_SET_EP)
                    eps[nep++] = p->fix.ep;
                else if (!m->experts)
                    eps[nep++] = 1;
                else {
                    long elim = p->max_ep > 0 ? p->max_ep : m->experts; /* whole nodes */
                    for (long e = 1; e <= rest2 && e <= elim && nep < 256; e++)
                        if (rest2 % e == 0 && m->experts % e == 0)
                            eps[nep++] = (int)e;
                }
                int netp = 0;
                if (!m->experts)
                    etps[netp++] = tp;
                else if (fs & MESH_PLAN_SET_ETP)
                    etps[netp++] = p->fix.etp;
                else {
                    etps[netp++] = 1;
                    if (tp > 1)
                        etps[netp++] = tp;
                }
                for (int d = 0; d < nep; d++)
                    for (int t = 0; t < netp; t++) {
                        mesh_plan_layout_t l = {
                            .tp = tp, .cp = cp, .ep = eps[d], .pp = pp, .etp = etps[t]};
                        if (fs & MESH_PLAN_SET_DP) {
                            if (eps[d] < 1 || rest2 % eps[d] || rest2 / eps[d] != p->fix.dp)
                                continue;
                            l.dp = p->fix.dp;
                        }
                        if (plan_combo(r, &l) != 0)
                            return -1;
                    }
            }
        }
    }
    return 0;
}

static int plan_cmp_fit(const void *a, const void *b)
{
    const mesh_plan_eval_t *x = a, *y = b;
    if (plan_better(x, y))
        return -1;
    if (plan_better(y, x))
        return 1;
    return 0;
}

static double plan_rej_key(const mesh_plan_eval_t *e)
{
    return e->reject == MESH_PLAN_REJ_INVALID || !(e->step > 0) ? INFINITY : e->step;
}

static int plan_cmp_rej(const void *a, const void *b)
{
    double x = plan_rej_key(a), y = plan_rej_key(b);
    return x < y ? -1 : x > y;
}

mesh_status_t mesh_plan_search(const mesh_plan_model_t *model, const mesh_plan_cluster_t *cluster,
                               const mesh_plan_params_t *params, mesh_plan_result_h *out)
{
    if (!out)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_plan_search: out is NULL");
    struct mesh_plan_result *r = calloc(1, sizeof(*r));
    if (!r)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_plan_search: out of memory");
    mesh_status_t st = plan_ctx_init(&r->x, model, cluster, params);
    if (st != MESH_OK) {
        free(r);
        return st;
    }
    if (plan_enumerate(r) != 0) {
        mesh_plan_result_free(r);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_plan_search: out of memory");
    }
    /* nothing fits inside the nodes: the layouts that span them and fit are what remains */
    if (r->nfit == 0) {
        int k = 0;
        for (int i = 0; i < r->nrej; i++) {
            mesh_plan_eval_t *e = &r->rej[i];
            if (e->reject == MESH_PLAN_REJ_SPAN && e->mem_total <= e->mem_limit) {
                char why[sizeof(e->why)];
                snprintf(why, sizeof(why), "forced: %.200s", e->why);
                snprintf(e->why, sizeof(e->why), "%s", why);
                e->reject = MESH_PLAN_OK;
                if (plan_push(&r->fit, &r->nfit, &r->capfit, e) != 0) {
                    mesh_plan_result_free(r);
                    return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_plan_search: out of memory");
                }
                r->rejected[MESH_PLAN_REJ_SPAN]--;
                r->forced_span = 1;
            } else {
                r->rej[k++] = *e;
            }
        }
        r->nrej = k;
    }
    if (r->nfit > 1)
        qsort(r->fit, r->nfit, sizeof(*r->fit), plan_cmp_fit);
    if (r->nrej > 1)
        qsort(r->rej, r->nrej, sizeof(*r->rej), plan_cmp_rej);
    struct plan_search_view v = {&r->x, r->fit, r->nfit, r->rej, r->nrej, r->forced_span};
    plan_explain(&v, &r->reasons);
    *out = r;
    return MESH_OK;
}

int mesh_plan_result_count(mesh_plan_result_h r)
{
    if (!r)
        return 0;
    return r->nfit < r->x.p.top ? r->nfit : r->x.p.top;
}

const mesh_plan_eval_t *mesh_plan_result_layout(mesh_plan_result_h r, int i)
{
    return r && i >= 0 && i < mesh_plan_result_count(r) ? &r->fit[i] : NULL;
}

int mesh_plan_result_rejected_count(mesh_plan_result_h r)
{
    return r ? r->nrej : 0;
}

const mesh_plan_eval_t *mesh_plan_result_rejected(mesh_plan_result_h r, int i)
{
    return r && i >= 0 && i < r->nrej ? &r->rej[i] : NULL;
}

void mesh_plan_result_stats(mesh_plan_result_h r, long *axis_layouts, long *variants,
                            long rejected[MESH_PLAN_REJ_COUNT])
{
    if (!r)
        return;
    if (axis_layouts)
        *axis_layouts = r->combos;
    if (variants)
        *variants = r->variants;
    if (rejected)
        for (int i = 0; i < MESH_PLAN_REJ_COUNT; i++)
            rejected[i] = r->rejected[i];
}

const char *mesh_plan_result_reason(mesh_plan_result_h r, int i)
{
    return r && i >= 0 && i < r->reasons.n ? r->reasons.line[i] : NULL;
}

int mesh_plan_result_forced_span(mesh_plan_result_h r)
{
    return r ? r->forced_span : 0;
}

void mesh_plan_result_free(mesh_plan_result_h r)
{
    if (!r)
        return;
    free(r->fit);
    free(r->rej);
    plan_lines_free(&r->reasons);
    free(r);
}
