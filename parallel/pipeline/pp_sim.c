/*
 * The static checker's dynamic half: the lists run under the executor's rule, each action as
 * early as the rule allows. Sends and receives cost their rank nothing and never block; an F or
 * B waits until its input is there: the later of its send and its receive being posted, plus
 * the communication cost (and the wake-up cost after a long wait). Ranks that all wait on one
 * another deadlock; otherwise the run gives each action's start and end, the makespan, each rank's
 * bubble and its peak of stored activations.
 */
#include "pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the send that feeds compute action a of rank r stands: its rank and position, with the
 * position of the rank's own receive; 0 when the input is local or there is none. */
static int pp_feed(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x, int r,
                   const mesh_pp_action_t *a, int *q, int *k, int *recv)
{
    int st = s->stage_of[r * s->v + a->chunk], other;
    mesh_pp_op_t rop, sop;
    if (a->op == MESH_PP_F) {
        other = st - 1;
        rop = MESH_PP_RECV_F;
        sop = MESH_PP_SEND_F;
    } else if (a->op == MESH_PP_B) {
        other = st + 1;
        rop = MESH_PP_RECV_B;
        sop = MESH_PP_SEND_B;
    } else {
        return 0;
    }
    if (other < 0 || other >= s->p * s->v || x->rank_at[other] == r)
        return 0;
    *q = x->rank_at[other];
    *k = *mesh_pp_pos(s, x, *q, sop, a->mb, x->chunk_at[other]);
    *recv = *mesh_pp_pos(s, x, r, rop, a->mb, a->chunk);
    return 1;
}

/* Names the cycle of waits that the stuck ranks form, starting from the first stuck rank. */
static mesh_status_t pp_deadlock(const struct mesh_pp_schedule *s, const mesh_pp_index_t *x,
                                 const int *pc)
{
    int *seen = calloc((size_t)s->p, sizeof(int)), r = 0;
    char msg[1024] = "", act[96];
    size_t len = 0;
    if (seen == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot name a deadlock");
    while (pc[r] >= s->list[r].n)
        r++;
    int first = r, q = 0, k = 0, recv;
    /* every stuck rank waits on a rank that is stuck too; walk until a rank comes again */
    while (!seen[r]) {
        seen[r] = 1;
        pp_feed(s, x, r, &s->list[r].a[pc[r]], &q, &k, &recv);
        if (r != first && len < sizeof(msg))
            len +=
                (size_t)snprintf(msg + len, sizeof(msg) - len, "; rank %d, position %d, %s ", r,
                                 pc[r], mesh_pp_action_str(&s->list[r].a[pc[r]], act, sizeof(act)));
        if (len < sizeof(msg))
            len += (size_t)snprintf(msg + len, sizeof(msg) - len,
                                    "waits for %s at rank %d's position %d",
                                    mesh_pp_action_str(&s->list[q].a[k], act, sizeof(act)), q, k);
        r = q;
    }
    free(seen);
    if (len < sizeof(msg))
        snprintf(msg + len, sizeof(msg) - len,
                 r == first ? " (a cycle)"
                            : "; and rank %d waits "
                              "in that cycle",
                 r);
    return mesh_pp_refuse(s, first, pc[first],
                          "deadlock under the executor's rule (a rank "
                          "waits only at an F or B whose input has not arrived): it %s",
                          msg);
}

static double pp_cost(const mesh_pp_costs_t *c, int split, mesh_pp_op_t op)
{
    switch (op) {
    case MESH_PP_F:
        return c->f;
    case MESH_PP_B:
        return split ? c->b : c->b + c->w;
    case MESH_PP_W:
        return c->w;
    default:
        return 0;
    }
}

static mesh_status_t pp_alloc_results(struct mesh_pp_schedule *s)
{
    s->t0 = calloc((size_t)s->p, sizeof(double *));
    s->t1 = calloc((size_t)s->p, sizeof(double *));
    s->rank_bubble = calloc((size_t)s->p, sizeof(double));
    s->rank_peak = calloc((size_t)s->p, sizeof(int));
    if (s->t0 == NULL || s->t1 == NULL || s->rank_bubble == NULL || s->rank_peak == NULL)
        goto err;
    for (int r = 0; r < s->p; r++) {
        size_t n = s->list[r].n ? (size_t)s->list[r].n : 1;
        s->t0[r] = malloc(sizeof(double) * n);
        s->t1[r] = malloc(sizeof(double) * n);
        if (s->t0[r] == NULL || s->t1[r] == NULL)
            goto err;
    }
    return MESH_OK;
err:
    mesh_pp_drop_results(s);
    return mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate the checker's timeline");
}

/* Peak of activations stored between an F and the backward action that frees it. */
static int pp_peak(const struct mesh_pp_schedule *s, int r, int split)
{
    int now = 0, peak = 0;
    for (int i = 0; i < s->list[r].n; i++) {
        mesh_pp_op_t op = s->list[r].a[i].op;
        if (op == MESH_PP_F && ++now > peak)
            peak = now;
        if (op == (split ? MESH_PP_W : MESH_PP_B))
            now--;
    }
    return peak;
}

mesh_status_t mesh_pp_simulate(struct mesh_pp_schedule *s, const mesh_pp_index_t *x,
                               const mesh_pp_costs_t *costs)
{
    int *pc = calloc((size_t)s->p, sizeof(int));
    double *clock = calloc((size_t)s->p, sizeof(double));
    mesh_status_t st = MESH_OK;
    if (pc == NULL || clock == NULL) {
        st = mesh_par_error(MESH_ERR_NO_MEMORY, "cannot allocate the checker's state");
        goto out;
    }
    mesh_pp_drop_results(s);
    if ((st = pp_alloc_results(s)) != MESH_OK)
        goto out;

    for (int moved = 1; moved;) {
        moved = 0;
        for (int r = 0; r < s->p; r++)
            while (pc[r] < s->list[r].n) {
                const mesh_pp_action_t *a = &s->list[r].a[pc[r]];
                double start = clock[r];
                int q, k, recv;
                if (pp_feed(s, x, r, a, &q, &k, &recv)) {
                    if (pc[q] <= k)
                        break; /* its send is not posted yet */
                    double posted = s->t0[q][k] > s->t0[r][recv] ? s->t0[q][k] : s->t0[r][recv];
                    double there = posted + costs->comm;
                    if (there > start)
                        start = there + (there - start >= costs->wake_after ? costs->wake : 0);
                }
                s->t0[r][pc[r]] = start;
                s->t1[r][pc[r]] = clock[r] = start + pp_cost(costs, x->split, a->op);
                if (a->op <= MESH_PP_W)
                    clock[r] += costs->gap;
                pc[r]++;
                moved = 1;
            }
    }
    for (int r = 0; r < s->p; r++)
        if (pc[r] < s->list[r].n) {
            st = pp_deadlock(s, x, pc);
            mesh_pp_drop_results(s);
            goto out;
        }

    double makespan = 0;
    for (int r = 0; r < s->p; r++)
        for (int i = 0; i < s->list[r].n; i++)
            if (s->t1[r][i] > makespan)
                makespan = s->t1[r][i];
    memset(&s->report, 0, sizeof(s->report));
    s->report.makespan = makespan;
    s->report.split_backward = x->split;
    s->report.peak_rank = -1;
    for (int r = 0; r < s->p; r++) {
        double busy = 0;
        for (int i = 0; i < s->list[r].n; i++)
            busy += pp_cost(costs, x->split, s->list[r].a[i].op);
        s->rank_bubble[r] = makespan > 0 ? (makespan - busy) / makespan : 0;
        s->report.bubble += s->rank_bubble[r] / s->p;
        s->rank_peak[r] = pp_peak(s, r, x->split);
        if (s->rank_peak[r] > s->report.peak_activations || s->report.peak_rank < 0) {
            s->report.peak_activations = s->rank_peak[r];
            s->report.peak_rank = r;
        }
    }
    s->split = x->split;
    s->checked = 1;
out:
    free(pc);
    free(clock);
    return st;
}

mesh_status_t mesh_pp_check(mesh_pp_schedule_h s, const mesh_pp_costs_t *costs,
                            mesh_pp_report_t *report)
{
    if (s == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_check: sched is NULL");
    mesh_pp_costs_t c = {.f = 1, .b = 1, .w = 1};
    if (costs) {
        if (costs->field_mask & MESH_PP_COSTS_FIELD_F)
            c.f = costs->f;
        if (costs->field_mask & MESH_PP_COSTS_FIELD_B)
            c.b = costs->b;
        if (costs->field_mask & MESH_PP_COSTS_FIELD_W)
            c.w = costs->w;
        if (costs->field_mask & MESH_PP_COSTS_FIELD_COMM)
            c.comm = costs->comm;
        if (costs->field_mask & MESH_PP_COSTS_FIELD_WAKE)
            c.wake = costs->wake;
        if (costs->field_mask & MESH_PP_COSTS_FIELD_WAKE_AFTER)
            c.wake_after = costs->wake_after;
        if (costs->field_mask & MESH_PP_COSTS_FIELD_GAP)
            c.gap = costs->gap;
    }
    if (!(c.f >= 0 && c.b >= 0 && c.w >= 0 && c.comm >= 0 && c.wake >= 0 && c.wake_after >= 0 &&
          c.gap >= 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_pp_check: costs must be numbers >= 0; got F=%g B=%g W=%g "
                              "comm=%g wake=%g wake_after=%g gap=%g",
                              c.f, c.b, c.w, c.comm, c.wake, c.wake_after, c.gap);
    mesh_pp_index_t x;
    MESH_PAR_CHECK(mesh_pp_check_structure(s, &x));
    mesh_status_t st = mesh_pp_simulate(s, &x, &c);
    mesh_pp_index_free(&x);
    if (st == MESH_OK && report)
        *report = s->report;
    return st;
}

mesh_status_t mesh_pp_check_rank(mesh_pp_schedule_h s, int rank, double *bubble,
                                 int *peak_activations)
{
    if (s == NULL || !s->checked)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_pp_check_rank: the schedule has not passed mesh_pp_check "
                              "since it last changed");
    if (rank < 0 || rank >= s->p)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_pp_check_rank: rank %d is outside 0..%d",
                              rank, s->p - 1);
    if (bubble)
        *bubble = s->rank_bubble[rank];
    if (peak_activations)
        *peak_activations = s->rank_peak[rank];
    return MESH_OK;
}

mesh_status_t mesh_pp_check_time(mesh_pp_schedule_h s, int rank, int index, double *start,
                                 double *end)
{
    if (s == NULL || !s->checked)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_pp_check_time: the schedule has not passed mesh_pp_check "
                              "since it last changed");
    if (rank < 0 || rank >= s->p || index < 0 || index >= s->list[rank].n)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_pp_check_time: rank %d position %d is not in the schedule",
                              rank, index);
    if (start)
        *start = s->t0[rank][index];
    if (end)
        *end = s->t1[rank][index];
    return MESH_OK;
}
