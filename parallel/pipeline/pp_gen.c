/*
 * Schedule generators. Each kind first orders a rank's compute actions (F, B, W); pp_emit then
 * adds the communication the stage map implies: the send of an output right after the action
 * that makes it, and the receive of an input one compute action ahead of the action that uses
 * it, so that the message can land while the rank still computes.
 */
#include "pp.h"

#include <stdlib.h>

typedef struct {
    mesh_pp_action_t *a;
    int n;
} pp_order_t;

static void pp_add(pp_order_t *o, mesh_pp_op_t op, int mb, int chunk)
{
    o->a[o->n++] = (mesh_pp_action_t){.op = op, .mb = mb, .chunk = chunk, .peer = -1};
}

/* The receive a compute action needs, if its input comes from another rank. */
static int pp_recv_of(const struct mesh_pp_schedule *s, int rank, const mesh_pp_action_t *c,
                      mesh_pp_action_t *recv)
{
    if (c->op == MESH_PP_W)
        return 0;
    recv->op = c->op == MESH_PP_F ? MESH_PP_RECV_F : MESH_PP_RECV_B;
    recv->mb = c->mb;
    recv->chunk = c->chunk;
    recv->peer = mesh_pp_peer_of(s, rank, recv);
    return recv->peer >= 0;
}

static mesh_status_t pp_emit(struct mesh_pp_schedule *s, int rank, const pp_order_t *o)
{
    for (int k = 0; k < o->n; k++) {
        mesh_pp_action_t recv;
        /* post the receives of the next compute action before this one runs */
        if (k == 0 && pp_recv_of(s, rank, &o->a[0], &recv))
            MESH_PAR_CHECK(mesh_pp_push(s, rank, recv.op, recv.mb, recv.chunk, recv.peer));
        if (k + 1 < o->n && pp_recv_of(s, rank, &o->a[k + 1], &recv))
            MESH_PAR_CHECK(mesh_pp_push(s, rank, recv.op, recv.mb, recv.chunk, recv.peer));
        const mesh_pp_action_t *c = &o->a[k];
        MESH_PAR_CHECK(mesh_pp_push(s, rank, c->op, c->mb, c->chunk, -1));
        if (c->op == MESH_PP_W)
            continue;
        mesh_pp_action_t send = {.op = c->op == MESH_PP_F ? MESH_PP_SEND_F : MESH_PP_SEND_B,
                                 .mb = c->mb,
                                 .chunk = c->chunk};
        send.peer = mesh_pp_peer_of(s, rank, &send);
        if (send.peer >= 0)
            MESH_PAR_CHECK(mesh_pp_push(s, rank, send.op, send.mb, send.chunk, send.peer));
    }
    return MESH_OK;
}

/* GPipe: every forward, then every backward, in micro-batch order. */
static void pp_afab(const struct mesh_pp_schedule *s, int r, pp_order_t *o)
{
    (void)r;
    for (int i = 0; i < s->m; i++)
        pp_add(o, MESH_PP_F, i, 0);
    for (int i = 0; i < s->m; i++)
        pp_add(o, MESH_PP_B, i, 0);
}

/* 1F1B: p - r - 1 warm-up forwards, then a forward and a backward in turn, then the rest of
 * the backwards; at most p - r activations are ever stored on rank r. */
static void pp_1f1b(const struct mesh_pp_schedule *s, int r, pp_order_t *o)
{
    int warm = s->p - r - 1 < s->m ? s->p - r - 1 : s->m;
    for (int i = 0; i < warm; i++)
        pp_add(o, MESH_PP_F, i, 0);
    for (int i = 0; i < s->m - warm; i++) {
        pp_add(o, MESH_PP_F, warm + i, 0);
        pp_add(o, MESH_PP_B, i, 0);
    }
    for (int i = s->m - warm; i < s->m; i++)
        pp_add(o, MESH_PP_B, i, 0);
}

/*
 * ZB-H1: 1F1B's order with the backward split into B and W. Rank r holds back the W of its
 * first r micro-batches, so that the input gradients (B) run down the pipeline without waiting
 * for weight gradients, and does them at the end, where 1F1B's cool-down leaves it idle. Its
 * stored activations stay within p, as 1F1B's first rank.
 */
static void pp_zb1(const struct mesh_pp_schedule *s, int r, pp_order_t *o)
{
    int m = s->m, f = 0, b = 0, w = 0;
    int warm = s->p - r - 1 < m ? s->p - r - 1 : m;
    for (; f < warm; f++)
        pp_add(o, MESH_PP_F, f, 0);
    for (int k = 0; k < r && f < m; k++) {
        pp_add(o, MESH_PP_F, f++, 0);
        pp_add(o, MESH_PP_B, b++, 0);
    }
    while (f < m) {
        pp_add(o, MESH_PP_F, f++, 0);
        pp_add(o, MESH_PP_B, b++, 0);
        pp_add(o, MESH_PP_W, w++, 0);
    }
    while (b < m) {
        pp_add(o, MESH_PP_B, b++, 0);
        pp_add(o, MESH_PP_W, w++, 0);
    }
    while (w < m)
        pp_add(o, MESH_PP_W, w++, 0);
}

/*
 * Megatron-Core's interleaved 1F1B. Micro-batches run in groups of `group`: a group goes
 * through chunk 0, then chunk 1, ..., before the next group starts (the last group takes what
 * is left). Backward takes the same order with the chunks reversed. Rank r runs
 * 2 (p - r - 1) + (v - 1) group forwards first (all of them if that is more), then one forward
 * and one backward in turn, then the remaining backwards.
 */
static mesh_status_t pp_interleaved(const struct mesh_pp_schedule *s, int r, int group,
                                    pp_order_t *o)
{
    int m = s->m, v = s->v, total = m * v, k = 0;
    int *mb = malloc(sizeof(int) * (size_t)total), *ch = malloc(sizeof(int) * (size_t)total);
    if (mb == NULL || ch == NULL) {
        free(mb);
        free(ch);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate an interleaved schedule");
    }
    for (int g0 = 0; g0 < m; g0 += group) {
        int g1 = g0 + group >= m ? m : g0 + group;
        for (int c = 0; c < v; c++)
            for (int i = g0; i < g1; i++) {
                mb[k] = i;
                ch[k++] = c;
            }
    }
    int warm = (s->p - r - 1) * 2 + (v - 1) * group;
    if (warm > total)
        warm = total;
    for (int i = 0; i < warm; i++)
        pp_add(o, MESH_PP_F, mb[i], ch[i]);
    for (int i = 0; i < total - warm; i++) {
        pp_add(o, MESH_PP_F, mb[warm + i], ch[warm + i]);
        pp_add(o, MESH_PP_B, mb[i], v - 1 - ch[i]);
    }
    for (int i = total - warm; i < total; i++)
        pp_add(o, MESH_PP_B, mb[i], v - 1 - ch[i]);
    free(mb);
    free(ch);
    return MESH_OK;
}

static mesh_status_t pp_interleaved_rules(const struct mesh_pp_schedule *s, int group)
{
    if (s->p < 2)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "interleaved schedule needs at least 2 stages; got %d", s->p);
    if (s->v < 2)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "interleaved schedule needs at least 2 chunks per stage; got %d "
                              "(use 1f1b for one)",
                              s->v);
    if (group < s->p || group > s->m)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "interleaved schedule: the micro-batch group (%d) must lie between "
                              "the stages (%d) and the micro-batches (%d)%s",
                              group, s->p, s->m,
                              s->m < s->p ? ": give at least as many micro-batches as stages" : "");
    int rest = s->m % group;
    if (rest > 0 && rest < s->p)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "interleaved schedule: micro-batches %% group = %d %% %d = %d must "
                              "be 0 or at least the stages (%d); a smaller last group leaves "
                              "the pipeline waiting",
                              s->m, group, rest, s->p);
    return MESH_OK;
}

mesh_status_t mesh_pp_generate(struct mesh_pp_schedule *s, int group)
{
    const char *name = mesh_pp_kind_name(s->kind);
    if (s->kind == MESH_PP_INTERLEAVED) {
        MESH_PAR_CHECK(pp_interleaved_rules(s, group));
    } else if (s->kind == MESH_PP_ZBV) {
        if (s->v != 2)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "zbv schedule runs exactly 2 chunks per stage; got %d", s->v);
    } else if (s->v != 1) {
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s schedule runs 1 chunk per stage; got %d (interleaved and zbv "
                              "take more)",
                              name, s->v);
    }
    pp_order_t o = {.a = malloc(sizeof(mesh_pp_action_t) * 3 * (size_t)s->m * (size_t)s->v)};
    if (o.a == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule");
    mesh_status_t st = MESH_OK;
    for (int r = 0; r < s->p && st == MESH_OK; r++) {
        o.n = 0;
        switch (s->kind) {
        case MESH_PP_AFAB:
            pp_afab(s, r, &o);
            break;
        case MESH_PP_1F1B:
            pp_1f1b(s, r, &o);
            break;
        case MESH_PP_ZB1:
            pp_zb1(s, r, &o);
            break;
        case MESH_PP_INTERLEAVED:
            st = pp_interleaved(s, r, group, &o);
            break;
        case MESH_PP_ZBV:
            st = mesh_pp_zbv_order(s, r, o.a, &o.n);
            break;
        default:
            st = mesh_par_error(MESH_ERR_INTERNAL, "no generator for %s", name);
        }
        if (st == MESH_OK)
            st = pp_emit(s, r, &o);
    }
    free(o.a);
    return st;
}
