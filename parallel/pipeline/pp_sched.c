/* The pipeline schedule object: per-rank action lists, the stage map, names, editing. */
#include "pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pp_op_names[MESH_PP_OP_COUNT] = {
    [MESH_PP_F] = "F",           [MESH_PP_B] = "B",           [MESH_PP_W] = "W",
    [MESH_PP_SEND_F] = "SEND_F", [MESH_PP_RECV_F] = "RECV_F", [MESH_PP_SEND_B] = "SEND_B",
    [MESH_PP_RECV_B] = "RECV_B"};

/* Caps that keep every (direction, model stage, micro-batch) in a tag below MESH_PP_TAG_END
 * (pp_exec.c). */
#define PP_MAX_MB     (1 << 14)
#define PP_MAX_STAGES (1 << 13)

const char *mesh_pp_op_name(mesh_pp_op_t op)
{
    return (unsigned)op < MESH_PP_OP_COUNT ? pp_op_names[op] : NULL;
}

const char *mesh_pp_action_str(const mesh_pp_action_t *a, char *buf, size_t len)
{
    const char *name = mesh_pp_op_name(a->op);
    int n = snprintf(buf, len, "%s(mb %d, chunk %d)", name ? name : "?", a->mb, a->chunk);
    if (n >= 0 && (size_t)n < len && a->op >= MESH_PP_SEND_F && a->op < MESH_PP_OP_COUNT)
        snprintf(buf + n, len - (size_t)n, " %s rank %d",
                 a->op == MESH_PP_SEND_F || a->op == MESH_PP_SEND_B ? "to" : "from", a->peer);
    return buf;
}

void mesh_pp_drop_results(struct mesh_pp_schedule *s)
{
    if (s->t0)
        for (int r = 0; r < s->p; r++) {
            free(s->t0[r]);
            free(s->t1[r]);
        }
    free(s->t0);
    free(s->t1);
    free(s->rank_bubble);
    free(s->rank_peak);
    s->t0 = s->t1 = NULL;
    s->rank_bubble = NULL;
    s->rank_peak = NULL;
    s->checked = 0;
}

mesh_status_t mesh_pp_alloc(mesh_pp_kind_t kind, int p, int m, int v, struct mesh_pp_schedule **out)
{
    struct mesh_pp_schedule *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule");
    s->kind = kind;
    s->p = p;
    s->m = m;
    s->v = v;
    s->stage_of = malloc(sizeof(int) * (size_t)p * (size_t)v);
    s->list = calloc((size_t)p, sizeof(*s->list));
    if (s->stage_of == NULL || s->list == NULL) {
        mesh_pp_schedule_destroy(s);
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule of %d stages", p);
    }
    for (int r = 0; r < p; r++)
        for (int c = 0; c < v; c++)
            s->stage_of[r * v + c] = c * p + r;
    *out = s;
    return MESH_OK;
}

void mesh_pp_schedule_destroy(mesh_pp_schedule_h s)
{
    if (s == NULL)
        return;
    mesh_pp_drop_results(s);
    if (s->list)
        for (int r = 0; r < s->p; r++)
            free(s->list[r].a);
    free(s->list);
    free(s->stage_of);
    free(s);
}

mesh_status_t mesh_pp_schedule_create(const mesh_pp_schedule_params_t *params,
                                      mesh_pp_schedule_h *sched)
{
    if (params == NULL || sched == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_schedule_create: %s is NULL",
                              params == NULL ? "params" : "sched");
    mesh_pp_kind_t kind = params->kind;
    int p = params->stages, m = params->microbatches;
    int v = kind == MESH_PP_INTERLEAVED || kind == MESH_PP_ZBV ? 2 : 1;
    if (params->field_mask & MESH_PP_SCHED_FIELD_CHUNKS)
        v = params->chunks;
    int group = params->field_mask & MESH_PP_SCHED_FIELD_GROUP ? params->group : p;

    if ((unsigned)kind >= MESH_PP_KIND_COUNT)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "pipeline schedule: unknown kind %d",
                              (int)kind);
    if (kind == MESH_PP_NONE)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "pipeline schedule: kind none names no pipeline (pp = 1); there is "
                              "nothing to build");
    const char *name = mesh_pp_kind_name(kind);
    if (p < 1 || m < 1 || v < 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s schedule: stages (%d), micro-batches (%d) and chunks (%d) must "
                              "be at least 1",
                              name, p, m, v);
    if (m > PP_MAX_MB || (long)p * v > PP_MAX_STAGES)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s schedule: at most %d micro-batches and %d model stages (p x v); "
                              "got %d and %d",
                              name, PP_MAX_MB, PP_MAX_STAGES, m, p * v);
    struct mesh_pp_schedule *s;
    MESH_PAR_CHECK(mesh_pp_alloc(kind, p, m, v, &s));
    if (kind == MESH_PP_ZBV)
        for (int r = 0; r < p; r++)
            if (v == 2)
                s->stage_of[r * v + 1] = 2 * p - 1 - r;
    mesh_status_t st = kind == MESH_PP_USER ? MESH_OK : mesh_pp_generate(s, group);
    if (st != MESH_OK) {
        mesh_pp_schedule_destroy(s);
        return st;
    }
    *sched = s;
    return MESH_OK;
}

mesh_status_t mesh_pp_schedule_copy(mesh_pp_schedule_h s, mesh_pp_schedule_h *copy)
{
    if (s == NULL || copy == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_schedule_copy: %s is NULL",
                              s == NULL ? "sched" : "copy");
    struct mesh_pp_schedule *c;
    MESH_PAR_CHECK(mesh_pp_alloc(s->kind, s->p, s->m, s->v, &c));
    memcpy(c->stage_of, s->stage_of, sizeof(int) * (size_t)s->p * (size_t)s->v);
    for (int r = 0; r < s->p; r++)
        for (int i = 0; i < s->list[r].n; i++) {
            const mesh_pp_action_t *a = &s->list[r].a[i];
            mesh_status_t st = mesh_pp_push(c, r, a->op, a->mb, a->chunk, a->peer);
            if (st != MESH_OK) {
                mesh_pp_schedule_destroy(c);
                return st;
            }
        }
    *copy = c;
    return MESH_OK;
}

int mesh_pp_schedule_stages(mesh_pp_schedule_h s)
{
    return s ? s->p : -1;
}
int mesh_pp_schedule_microbatches(mesh_pp_schedule_h s)
{
    return s ? s->m : -1;
}
int mesh_pp_schedule_chunks(mesh_pp_schedule_h s)
{
    return s ? s->v : -1;
}
mesh_pp_kind_t mesh_pp_schedule_kind(mesh_pp_schedule_h s)
{
    return s ? s->kind : MESH_PP_USER;
}

int mesh_pp_schedule_length(mesh_pp_schedule_h s, int rank)
{
    return s && rank >= 0 && rank < s->p ? s->list[rank].n : -1;
}

static mesh_status_t pp_check_pos(mesh_pp_schedule_h s, const char *fn, int rank, int index,
                                  int extra)
{
    if (s == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: sched is NULL", fn);
    if (rank < 0 || rank >= s->p)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: rank %d is outside 0..%d", fn, rank,
                              s->p - 1);
    if (index < 0 || index >= s->list[rank].n + extra)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: index %d is outside 0..%d of rank %d", fn,
                              index, s->list[rank].n + extra - 1, rank);
    return MESH_OK;
}

mesh_status_t mesh_pp_schedule_action(mesh_pp_schedule_h s, int rank, int index,
                                      mesh_pp_action_t *action)
{
    MESH_PAR_CHECK(pp_check_pos(s, "mesh_pp_schedule_action", rank, index, 0));
    if (action == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_schedule_action: action is NULL");
    *action = s->list[rank].a[index];
    return MESH_OK;
}

mesh_status_t mesh_pp_push(struct mesh_pp_schedule *s, int rank, mesh_pp_op_t op, int mb, int chunk,
                           int peer)
{
    mesh_pp_list_t *l = &s->list[rank];
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        mesh_pp_action_t *a = realloc(l->a, sizeof(*a) * (size_t)cap);
        if (a == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot grow the list of rank %d", rank);
        l->a = a;
        l->cap = cap;
    }
    l->a[l->n++] = (mesh_pp_action_t){.op = op, .mb = mb, .chunk = chunk, .peer = peer};
    mesh_pp_drop_results(s);
    return MESH_OK;
}

mesh_status_t mesh_pp_schedule_insert(mesh_pp_schedule_h s, int rank, int index,
                                      const mesh_pp_action_t *a)
{
    const char *fn = "mesh_pp_schedule_insert";
    MESH_PAR_CHECK(pp_check_pos(s, fn, rank, index, 1));
    if (a == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: action is NULL", fn);
    if ((unsigned)a->op >= MESH_PP_OP_COUNT)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: op %d is not a mesh_pp_op_t", fn,
                              (int)a->op);
    if (a->mb < 0 || a->mb >= s->m)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: micro-batch %d is outside 0..%d", fn,
                              a->mb, s->m - 1);
    if (a->chunk < 0 || a->chunk >= s->v)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: chunk %d is outside 0..%d", fn, a->chunk,
                              s->v - 1);
    int comm = a->op >= MESH_PP_SEND_F;
    if (comm && (a->peer < MESH_PP_PEER_AUTO || a->peer >= s->p))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: peer %d is neither a rank (0..%d) nor MESH_PP_PEER_AUTO", fn,
                              a->peer, s->p - 1);
    int peer = comm ? a->peer : -1;
    if (peer == MESH_PP_PEER_AUTO && comm)
        peer = mesh_pp_peer_of(s, rank, a);
    if (comm && peer < 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: %s of chunk %d on rank %d has no peer: stage %d has no "
                              "neighbour on another rank in that direction",
                              fn, mesh_pp_op_name(a->op), a->chunk, rank,
                              s->stage_of[rank * s->v + a->chunk]);
    MESH_PAR_CHECK(mesh_pp_push(s, rank, a->op, a->mb, a->chunk, peer));
    mesh_pp_list_t *l = &s->list[rank];
    mesh_pp_action_t last = l->a[l->n - 1];
    memmove(&l->a[index + 1], &l->a[index], sizeof(*l->a) * (size_t)(l->n - 1 - index));
    l->a[index] = last;
    return MESH_OK;
}

mesh_status_t mesh_pp_schedule_remove(mesh_pp_schedule_h s, int rank, int index)
{
    MESH_PAR_CHECK(pp_check_pos(s, "mesh_pp_schedule_remove", rank, index, 0));
    mesh_pp_list_t *l = &s->list[rank];
    memmove(&l->a[index], &l->a[index + 1], sizeof(*l->a) * (size_t)(l->n - index - 1));
    l->n--;
    mesh_pp_drop_results(s);
    return MESH_OK;
}

int mesh_pp_schedule_stage(mesh_pp_schedule_h s, int rank, int chunk)
{
    if (s == NULL || rank < 0 || rank >= s->p || chunk < 0 || chunk >= s->v)
        return -1;
    return s->stage_of[rank * s->v + chunk];
}

mesh_status_t mesh_pp_schedule_set_stage(mesh_pp_schedule_h s, int rank, int chunk, int stage)
{
    const char *fn = "mesh_pp_schedule_set_stage";
    if (s == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: sched is NULL", fn);
    if (rank < 0 || rank >= s->p || chunk < 0 || chunk >= s->v)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: rank %d chunk %d is outside %d ranks of %d chunks", fn, rank,
                              chunk, s->p, s->v);
    if (stage < 0 || stage >= mesh_pp_nstages(s))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: stage %d is outside 0..%d", fn, stage,
                              mesh_pp_nstages(s) - 1);
    s->stage_of[rank * s->v + chunk] = stage;
    mesh_pp_drop_results(s);
    return MESH_OK;
}

int mesh_pp_rank_of(const struct mesh_pp_schedule *s, int stage, int *chunk)
{
    for (int i = 0; i < s->p * s->v; i++)
        if (s->stage_of[i] == stage) {
            if (chunk)
                *chunk = i % s->v;
            return i / s->v;
        }
    return -1;
}

int mesh_pp_peer_of(const struct mesh_pp_schedule *s, int rank, const mesh_pp_action_t *a)
{
    int st = s->stage_of[rank * s->v + a->chunk];
    int fwd = a->op == MESH_PP_SEND_F || a->op == MESH_PP_RECV_B; /* towards stage + 1 */
    int other = fwd ? st + 1 : st - 1;
    if (other < 0 || other >= mesh_pp_nstages(s))
        return -1;
    int peer = mesh_pp_rank_of(s, other, NULL);
    return peer == rank ? -1 : peer;
}
