/*
 * The static checker's structural half: the stage map, every action's fields, sends matched
 * one to one with receives, the order of actions on each rank, and that nothing is missing.
 * The first fault found refuses the schedule with its rank, position and reason.
 */
#include "pp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

mesh_status_t mesh_pp_refuse(const struct mesh_pp_schedule *s, int rank, int index, const char *fmt,
                             ...)
{
    char why[512], act[96] = "end of its list";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (index < s->list[rank].n)
        mesh_pp_action_str(&s->list[rank].a[index], act, sizeof(act));
    return mesh_par_error(MESH_ERR_INVALID_ARG, "%s schedule refused: rank %d, position %d, %s: %s",
                          mesh_pp_kind_name(s->kind), rank, index, act, why);
}

void mesh_pp_index_free(mesh_pp_index_t *x)
{
    free(x->rank_at);
    free(x->chunk_at);
    free(x->pos);
    x->rank_at = x->chunk_at = x->pos = NULL;
}

static mesh_status_t pp_stage_map(const struct mesh_pp_schedule *s, mesh_pp_index_t *x)
{
    int n = s->p * s->v;
    for (int i = 0; i < n; i++)
        x->rank_at[i] = -1;
    for (int i = 0; i < n; i++) {
        int st = s->stage_of[i];
        if (x->rank_at[st] >= 0)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "%s schedule refused: stage map: stage %d is on rank %d chunk "
                                  "%d and on rank %d chunk %d",
                                  mesh_pp_kind_name(s->kind), st, x->rank_at[st], x->chunk_at[st],
                                  i / s->v, i % s->v);
        x->rank_at[st] = i / s->v;
        x->chunk_at[st] = i % s->v;
    }
    return MESH_OK;
}

/* Why a send or receive cannot exist on this chunk, by the stage map. */
static mesh_status_t pp_no_peer(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x, int r,
                                int i)
{
    const mesh_pp_action_t *a = &s->list[r].a[i];
    int st = s->stage_of[r * s->v + a->chunk], last = s->p * s->v - 1;
    int up = a->op == MESH_PP_SEND_F || a->op == MESH_PP_RECV_B, other = up ? st + 1 : st - 1;
    if (other < 0 || other > last)
        return mesh_pp_refuse(s, r, i, "stage %d is the %s model stage: there is no stage %d", st,
                              up ? "last" : "first", other);
    return mesh_pp_refuse(s, r, i,
                          "stage %d is on this rank too (chunk %d): the %s is handed over "
                          "locally, not sent",
                          other, x->chunk_at[other],
                          a->op == MESH_PP_SEND_F || a->op == MESH_PP_RECV_F ? "activation"
                                                                             : "gradient");
}

/* Fields, peers and duplicates; fills the positions. */
static mesh_status_t pp_fields(const struct mesh_pp_schedule *s, mesh_pp_index_t *x)
{
    for (int r = 0; r < s->p; r++)
        for (int i = 0; i < s->list[r].n; i++) {
            const mesh_pp_action_t *a = &s->list[r].a[i];
            if ((unsigned)a->op >= MESH_PP_OP_COUNT || a->mb < 0 || a->mb >= s->m || a->chunk < 0 ||
                a->chunk >= s->v)
                return mesh_pp_refuse(s, r, i,
                                      "op, micro-batch or chunk out of range (%d "
                                      "micro-batches, %d chunks)",
                                      s->m, s->v);
            if (a->op == MESH_PP_W)
                x->split = 1;
            if (a->op >= MESH_PP_SEND_F) {
                int peer = mesh_pp_peer_of(s, r, a);
                if (peer < 0)
                    return pp_no_peer(s, x, r, i);
                if (a->peer != peer) {
                    int st = s->stage_of[r * s->v + a->chunk];
                    int other =
                        a->op == MESH_PP_SEND_F || a->op == MESH_PP_RECV_B ? st + 1 : st - 1;
                    return mesh_pp_refuse(s, r, i, "stage %d is on rank %d, not rank %d", other,
                                          peer, a->peer);
                }
            }
            int *pos = mesh_pp_pos(s, x, r, a->op, a->mb, a->chunk);
            if (*pos >= 0)
                return mesh_pp_refuse(s, r, i,
                                      "a second %s of this micro-batch and chunk (the "
                                      "first is at position %d)",
                                      mesh_pp_op_name(a->op), *pos);
            *pos = i;
        }
    return MESH_OK;
}

/* Every send has its receive on the peer, and every receive its send. */
static mesh_status_t pp_matching(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x)
{
    static const mesh_pp_op_t other_op[MESH_PP_OP_COUNT] = {[MESH_PP_SEND_F] = MESH_PP_RECV_F,
                                                            [MESH_PP_RECV_F] = MESH_PP_SEND_F,
                                                            [MESH_PP_SEND_B] = MESH_PP_RECV_B,
                                                            [MESH_PP_RECV_B] = MESH_PP_SEND_B};
    for (int r = 0; r < s->p; r++)
        for (int i = 0; i < s->list[r].n; i++) {
            const mesh_pp_action_t *a = &s->list[r].a[i];
            if (a->op < MESH_PP_SEND_F)
                continue;
            int st = s->stage_of[r * s->v + a->chunk];
            int up = a->op == MESH_PP_SEND_F || a->op == MESH_PP_RECV_B;
            int other = up ? st + 1 : st - 1, c = x->chunk_at[other];
            mesh_pp_op_t op = other_op[a->op];
            if (*mesh_pp_pos(s, x, a->peer, op, a->mb, c) >= 0)
                continue;
            int send = a->op == MESH_PP_SEND_F || a->op == MESH_PP_SEND_B;
            return mesh_pp_refuse(s, r, i,
                                  "no matching %s: rank %d has no %s(mb %d, chunk %d) %s rank %d",
                                  send ? "receive" : "send", a->peer, mesh_pp_op_name(op), a->mb, c,
                                  send ? "from" : "to", r);
        }
    return MESH_OK;
}

/* An action that needs another one of the same rank before it. */
static mesh_status_t pp_after(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x, int r,
                              int i, mesh_pp_op_t op, int mb, int chunk, const char *what)
{
    int j = *mesh_pp_pos(s, x, r, op, mb, chunk);
    if (j >= 0 && j < i)
        return MESH_OK;
    if (j < 0)
        return mesh_pp_refuse(s, r, i, "%s, %s(mb %d, chunk %d), is not in the list", what,
                              mesh_pp_op_name(op), mb, chunk);
    return mesh_pp_refuse(s, r, i, "it comes before %s, %s(mb %d, chunk %d) at position %d", what,
                          mesh_pp_op_name(op), mb, chunk, j);
}

/* F before B before W, inputs before the actions that use them, outputs after. */
static mesh_status_t pp_order(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x)
{
    int last = s->p * s->v - 1;
    for (int r = 0; r < s->p; r++)
        for (int i = 0; i < s->list[r].n; i++) {
            const mesh_pp_action_t *a = &s->list[r].a[i];
            int st = s->stage_of[r * s->v + a->chunk], mb = a->mb, c = a->chunk;
            switch (a->op) {
            case MESH_PP_F:
                if (st == 0)
                    break;
                if (x->rank_at[st - 1] == r)
                    MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_F, mb, x->chunk_at[st - 1],
                                            "its input's forward"));
                else
                    MESH_PAR_CHECK(
                        pp_after(s, x, r, i, MESH_PP_RECV_F, mb, c, "the receive of its input"));
                break;
            case MESH_PP_B:
                MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_F, mb, c, "its forward"));
                if (st == last)
                    break;
                if (x->rank_at[st + 1] == r)
                    MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_B, mb, x->chunk_at[st + 1],
                                            "the backward that makes its output's gradient"));
                else
                    MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_RECV_B, mb, c,
                                            "the receive of its output's gradient"));
                break;
            case MESH_PP_W:
                MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_B, mb, c, "its backward"));
                break;
            case MESH_PP_SEND_F:
                MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_F, mb, c, "the forward it sends"));
                break;
            case MESH_PP_SEND_B:
                MESH_PAR_CHECK(pp_after(s, x, r, i, MESH_PP_B, mb, c, "the backward it sends"));
                break;
            default:
                break;
            }
        }
    return MESH_OK;
}

/* Every (micro-batch, chunk) runs F and B (and W when the schedule has W) on its rank, and
 * each output that another rank needs is sent. */
static mesh_status_t pp_complete(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x)
{
    int last = s->p * s->v - 1;
    for (int r = 0; r < s->p; r++)
        for (int c = 0; c < s->v; c++) {
            int st = s->stage_of[r * s->v + c], n = s->list[r].n;
            int next_remote = st < last && x->rank_at[st + 1] != r;
            int prev_remote = st > 0 && x->rank_at[st - 1] != r;
            for (int mb = 0; mb < s->m; mb++) {
                int f = *mesh_pp_pos(s, x, r, MESH_PP_F, mb, c);
                int b = *mesh_pp_pos(s, x, r, MESH_PP_B, mb, c);
                if (f < 0 || b < 0)
                    return mesh_pp_refuse(s, r, n,
                                          "%s(mb %d, chunk %d) is missing: every "
                                          "micro-batch runs forward and backward through "
                                          "every chunk",
                                          f < 0 ? "F" : "B", mb, c);
                if (x->split && *mesh_pp_pos(s, x, r, MESH_PP_W, mb, c) < 0)
                    return mesh_pp_refuse(s, r, n,
                                          "W(mb %d, chunk %d) is missing: the schedule "
                                          "splits the backward, so every B has its W",
                                          mb, c);
                if (next_remote && *mesh_pp_pos(s, x, r, MESH_PP_SEND_F, mb, c) < 0)
                    return mesh_pp_refuse(s, r, f,
                                          "its output never leaves: no SEND_F(mb %d, "
                                          "chunk %d) to rank %d, which holds stage %d",
                                          mb, c, x->rank_at[st + 1], st + 1);
                if (prev_remote && *mesh_pp_pos(s, x, r, MESH_PP_SEND_B, mb, c) < 0)
                    return mesh_pp_refuse(s, r, b,
                                          "its input's gradient never leaves: no "
                                          "SEND_B(mb %d, chunk %d) to rank %d, which holds stage "
                                          "%d",
                                          mb, c, x->rank_at[st - 1], st - 1);
            }
        }
    return MESH_OK;
}

mesh_status_t mesh_pp_check_structure(const struct mesh_pp_schedule *s, mesh_pp_index_t *x)
{
    size_t n = (size_t)s->p * s->v, npos = (size_t)s->p * MESH_PP_OP_COUNT * s->m * s->v;
    *x = (mesh_pp_index_t){.rank_at = malloc(sizeof(int) * n),
                           .chunk_at = malloc(sizeof(int) * n),
                           .pos = malloc(sizeof(int) * npos)};
    if (x->rank_at == NULL || x->chunk_at == NULL || x->pos == NULL) {
        mesh_pp_index_free(x);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate the checker's tables");
    }
    for (size_t i = 0; i < npos; i++)
        x->pos[i] = -1;
    mesh_status_t st = pp_stage_map(s, x);
    if (st == MESH_OK)
        st = pp_fields(s, x);
    if (st == MESH_OK)
        st = pp_matching(s, x);
    if (st == MESH_OK)
        st = pp_order(s, x);
    if (st == MESH_OK)
        st = pp_complete(s, x);
    if (st != MESH_OK)
        mesh_pp_index_free(x);
    return st;
}
