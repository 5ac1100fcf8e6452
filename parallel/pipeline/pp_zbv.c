/*
 * ZB-V: two chunks per rank laid out in a V (rank r holds model stages r and 2p - 1 - r, so the
 * first and the last stage share rank 0 and the turn of the V is local to rank p - 1), with the
 * backward split into B and W. The order comes from running the pipeline greedily at unit
 * costs: whenever a rank is free it starts, among the actions whose inputs are there, the
 * oldest micro-batch's B, else its F (the later stage first) while fewer than 2p activations
 * are stored (1F1B's peak on its first rank, in half-stage chunks; the last slot is kept for
 * chunk 1, so that micro-batches can always turn and come back), else the oldest pending W.
 */
#include "pp.h"

#include <stdlib.h>

typedef struct {
    int p, m, S;
    int *fdone, *bdone; /* [m][S]: when F and B of (micro-batch, stage) end; -1 before */
    int *next;          /* [p][2][3]: next micro-batch of F, B and W on each chunk */
    int *stored;        /* [p] */
} zbv_t;

#define ZBV_NEXT(z, r, c, op) (z)->next[((r)*2 + (c)) * 3 + (op)]

static int zbv_stage(const zbv_t *z, int r, int c)
{
    return c == 0 ? r : 2 * z->p - 1 - r;
}

/* Whether what ends at when (-1: not started) has ended by time t. */
static int zbv_ended(int when, int t)
{
    return when >= 0 && when <= t;
}

/* The micro-batch whose op (MESH_PP_F, _B or _W, also the index of next) rank r can start on
 * chunk c at time t, or -1. */
static int zbv_ready(const zbv_t *z, int r, int c, mesh_pp_op_t op, int t)
{
    int mb = ZBV_NEXT(z, r, c, op), st = zbv_stage(z, r, c);
    switch (op) {
    case MESH_PP_F: /* the previous stage's F, and room for the activation */
        if (mb >= z->m || z->stored[r] + 1 > 2 * z->p - (c == 0))
            return -1;
        return st == 0 || zbv_ended(z->fdone[mb * z->S + st - 1], t) ? mb : -1;
    case MESH_PP_B: /* its F and the next stage's B */
        if (mb >= z->m || mb >= ZBV_NEXT(z, r, c, MESH_PP_F))
            return -1;
        if (!zbv_ended(z->fdone[mb * z->S + st], t))
            return -1;
        return st == z->S - 1 || zbv_ended(z->bdone[mb * z->S + st + 1], t) ? mb : -1;
    default: /* its B */
        if (mb >= ZBV_NEXT(z, r, c, MESH_PP_B))
            return -1;
        return zbv_ended(z->bdone[mb * z->S + st], t) ? mb : -1;
    }
}

/* The action rank r starts at time t, or 0 when it has none ready: a B, else an F, else a W;
 * of each the oldest micro-batch, the later stage first. */
static int zbv_pick(zbv_t *z, int r, int t, mesh_pp_action_t *a)
{
    static const mesh_pp_op_t order[] = {MESH_PP_B, MESH_PP_F, MESH_PP_W};
    for (int i = 0; i < 3; i++) {
        int best = -1, best_c = 0;
        for (int c = 1; c >= 0; c--) {
            int mb = zbv_ready(z, r, c, order[i], t);
            if (mb >= 0 && (best < 0 || mb < best))
                best = mb, best_c = c;
        }
        if (best >= 0) {
            *a = (mesh_pp_action_t){.op = order[i], .mb = best, .chunk = best_c};
            return 1;
        }
    }
    return 0;
}

mesh_status_t mesh_pp_zbv_order(const struct mesh_pp_schedule *s, int rank, mesh_pp_action_t *out,
                                int *n)
{
    zbv_t z = {.p = s->p, .m = s->m, .S = 2 * s->p};
    size_t cells = (size_t)z.m * (size_t)z.S;
    z.fdone = malloc(sizeof(int) * cells);
    z.bdone = malloc(sizeof(int) * cells);
    z.next = calloc((size_t)z.p * 6, sizeof(int));
    z.stored = calloc((size_t)z.p, sizeof(int));
    int *busy = calloc((size_t)z.p, sizeof(int)); /* time each rank is free again */
    mesh_status_t st = MESH_OK;
    if (!z.fdone || !z.bdone || !z.next || !z.stored || !busy) {
        st = mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate a zbv schedule");
        goto out;
    }
    for (size_t i = 0; i < cells; i++)
        z.fdone[i] = z.bdone[i] = -1;
    *n = 0;
    int left = 3 * 2 * z.m * z.p;
    for (int t = 0; left > 0; t++) {
        int started = 0;
        for (int r = 0; r < z.p; r++) {
            mesh_pp_action_t a;
            if (busy[r] > t || !zbv_pick(&z, r, t, &a))
                continue;
            started = 1;
            int stg = zbv_stage(&z, r, a.chunk);
            if (a.op == MESH_PP_F) {
                z.fdone[a.mb * z.S + stg] = t + 1;
                z.stored[r]++;
                ZBV_NEXT(&z, r, a.chunk, 0)++;
            } else if (a.op == MESH_PP_B) {
                z.bdone[a.mb * z.S + stg] = t + 1;
                ZBV_NEXT(&z, r, a.chunk, 1)++;
            } else {
                z.stored[r]--;
                ZBV_NEXT(&z, r, a.chunk, 2)++;
            }
            busy[r] = t + 1;
            left--;
            if (r == rank) {
                a.peer = -1;
                out[(*n)++] = a;
            }
        }
        /* with unit costs every rank is free again at t + 1: nothing started means no rank
         * will ever find an action ready */
        if (!started) {
            st = mesh_par_error(MESH_ERR_INTERNAL, "zbv generator is stuck at time %d", t);
            goto out;
        }
    }
out:
    free(z.fdone);
    free(z.bdone);
    free(z.next);
    free(z.stored);
    free(busy);
    return st;
}
