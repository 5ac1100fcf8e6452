/*
 * Pipeline schedules and their static checker, on one process: every generator passes the
 * checker over many shapes; the predicted bubble equals the closed forms (AFAB and 1F1B
 * (p-1)/(m+p-1), interleaved (p-1)/(vm+p-1)); 1F1B stores at most p activations per rank where
 * AFAB stores m; each rank's order of F, B and W and its peak of stored activations equal the
 * definitions (test_orders); ZB-H1 and ZB-V beat 1F1B's bubble at equal F, B, W; interleaved
 * refuses what Megatron-Core refuses; and deliberately broken schedules are refused with the
 * rank, the position and the reason.
 */
#include "tests/harness/harness.h"
#include <mesh/pipeline.h>
#include <mesh/plan.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static mesh_pp_schedule_params_t params(mesh_pp_kind_t kind, int p, int m, int v, int group)
{
    mesh_pp_schedule_params_t prm = {.field_mask = MESH_PP_SCHED_FIELD_CHUNKS,
                                     .kind = kind,
                                     .stages = p,
                                     .microbatches = m,
                                     .chunks = v};
    if (group) {
        prm.field_mask |= MESH_PP_SCHED_FIELD_GROUP;
        prm.group = group;
    }
    return prm;
}

static mesh_pp_schedule_h make(mesh_pp_kind_t kind, int p, int m, int v, int group)
{
    mesh_pp_schedule_params_t prm = params(kind, p, m, v, group);
    mesh_pp_schedule_h s = NULL;
    mesh_status_t st = mesh_pp_schedule_create(&prm, &s);
    CHECK_MSG(st == MESH_OK, "%s p=%d m=%d v=%d: %s", mesh_pp_kind_name(kind), p, m, v,
              mesh_comm_last_error(NULL));
    return s;
}

static mesh_pp_report_t check_ok(mesh_pp_schedule_h s, const mesh_pp_costs_t *c)
{
    mesh_pp_report_t rep;
    mesh_status_t st = mesh_pp_check(s, c, &rep);
    CHECK_MSG(st == MESH_OK, "%s p=%d m=%d v=%d refused: %s",
              mesh_pp_kind_name(mesh_pp_schedule_kind(s)), mesh_pp_schedule_stages(s),
              mesh_pp_schedule_microbatches(s), mesh_pp_schedule_chunks(s),
              mesh_comm_last_error(NULL));
    return rep;
}

/* The check refuses s and its message holds every one of the pieces. */
static void refused(mesh_pp_schedule_h s, const char *what, const char *piece1, const char *piece2)
{
    mesh_status_t st = mesh_pp_check(s, NULL, NULL);
    const char *msg = mesh_comm_last_error(NULL);
    CHECK_MSG(st == MESH_ERR_INVALID_ARG, "%s: accepted", what);
    CHECK_MSG(strstr(msg, piece1) != NULL, "%s: no [%s] in [%s]", what, piece1, msg);
    CHECK_MSG(piece2 == NULL || strstr(msg, piece2) != NULL, "%s: no [%s] in [%s]", what, piece2,
              msg);
    printf("ok: %s: %s\n", what, msg);
}

/* Position of an action in a rank's list, -1 when absent. */
static int find(mesh_pp_schedule_h s, int rank, mesh_pp_op_t op, int mb, int chunk)
{
    for (int i = 0; i < mesh_pp_schedule_length(s, rank); i++) {
        mesh_pp_action_t a;
        CHECK(mesh_pp_schedule_action(s, rank, i, &a) == MESH_OK);
        if (a.op == op && a.mb == mb && a.chunk == chunk)
            return i;
    }
    return -1;
}

static void put(mesh_pp_schedule_h s, int rank, mesh_pp_op_t op, int mb, int chunk, int peer)
{
    mesh_pp_action_t a = {.op = op, .mb = mb, .chunk = chunk, .peer = peer};
    CHECK_MSG(mesh_pp_schedule_insert(s, rank, mesh_pp_schedule_length(s, rank), &a) == MESH_OK,
              "%s", mesh_comm_last_error(NULL));
}

static void test_closed_forms(void)
{
    int shapes = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 3 * p + 2; m++) {
            double want = (double)(p - 1) / (m + p - 1);
            mesh_pp_schedule_h afab = make(MESH_PP_AFAB, p, m, 1, 0);
            mesh_pp_schedule_h f1b = make(MESH_PP_1F1B, p, m, 1, 0);
            mesh_pp_report_t ra = check_ok(afab, NULL), rf = check_ok(f1b, NULL);
            CHECK_MSG(fabs(ra.bubble - want) < 1e-12, "afab p=%d m=%d bubble %.6f want %.6f", p, m,
                      ra.bubble, want);
            CHECK_MSG(fabs(rf.bubble - want) < 1e-12, "1f1b p=%d m=%d bubble %.6f want %.6f", p, m,
                      rf.bubble, want);
            for (int r = 0; r < p; r++) {
                int pa, pf;
                CHECK(mesh_pp_check_rank(afab, r, NULL, &pa) == MESH_OK);
                CHECK(mesh_pp_check_rank(f1b, r, NULL, &pf) == MESH_OK);
                CHECK_MSG(pa == m, "afab p=%d m=%d rank %d stores %d, not m", p, m, r, pa);
                int w = p - r < m ? p - r : m;
                CHECK_MSG(pf == w && pf <= p, "1f1b p=%d m=%d rank %d stores %d, want %d", p, m, r,
                          pf, w);
            }
            mesh_pp_schedule_destroy(afab);
            mesh_pp_schedule_destroy(f1b);
            shapes++;
        }
    printf("ok: afab and 1f1b bubble (p-1)/(m+p-1) exactly, peak m and min(p-r,m), %d shapes\n",
           shapes);

    /* any costs: the bubble of both is (p-1)(f+b+w) / ((m+p-1)(f+b+w)) with no comm cost */
    mesh_pp_costs_t c = {.field_mask =
                             MESH_PP_COSTS_FIELD_F | MESH_PP_COSTS_FIELD_B | MESH_PP_COSTS_FIELD_W,
                         .f = 1.5,
                         .b = 2.25,
                         .w = 0.5};
    mesh_pp_schedule_h s = make(MESH_PP_1F1B, 4, 8, 1, 0);
    mesh_pp_report_t rep = check_ok(s, &c);
    CHECK(fabs(rep.bubble - 3.0 / 11) < 1e-12);
    CHECK(fabs(rep.makespan - 11 * 4.25) < 1e-9);
    mesh_pp_schedule_destroy(s);

    shapes = 0;
    for (int p = 2; p <= 6; p++)
        for (int v = 2; v <= 4; v++)
            for (int k = 1; k <= 3; k++) {
                int m = k * p;
                mesh_pp_schedule_h il = make(MESH_PP_INTERLEAVED, p, m, v, 0);
                mesh_pp_report_t ri = check_ok(il, NULL);
                double want = (double)(p - 1) / (v * m + p - 1);
                CHECK_MSG(fabs(ri.bubble - want) < 1e-12,
                          "interleaved p=%d v=%d m=%d bubble %.6f want %.6f", p, v, m, ri.bubble,
                          want);
                mesh_pp_schedule_destroy(il);
                shapes++;
            }
    printf("ok: interleaved bubble (p-1)/(vm+p-1) exactly, %d shapes with m a multiple of p\n",
           shapes);
    /* groups other than p, as Megatron allows: 2p+1 micro-batches in groups of p+1 */
    for (int p = 2; p <= 6; p++) {
        mesh_pp_schedule_h il = make(MESH_PP_INTERLEAVED, p, 2 * p + 1, 2, p + 1);
        mesh_pp_report_t ri = check_ok(il, NULL);
        printf("ok: interleaved p=%d v=2 m=%d group %d passes: bubble %.4f, (p-1)/(vm+p-1) "
               "%.4f\n",
               p, 2 * p + 1, p + 1, ri.bubble, (double)(p - 1) / (2 * (2 * p + 1) + p - 1));
        mesh_pp_schedule_destroy(il);
    }
}

static void test_zero_bubble(void)
{
    for (int p = 2; p <= 8; p++)
        for (int k = 0; k < 4; k++) {
            int m = (int[]){p, 2 * p, 2 * p + 1, 3 * p}[k];
            mesh_pp_schedule_h f1b = make(MESH_PP_1F1B, p, m, 1, 0);
            mesh_pp_schedule_h zb = make(MESH_PP_ZB1, p, m, 1, 0);
            mesh_pp_schedule_h zv = make(MESH_PP_ZBV, p, m, 2, 0);
            mesh_pp_report_t rf = check_ok(f1b, NULL), rz = check_ok(zb, NULL);
            /* zbv's chunks are half stages: the same model at half the cost per action */
            mesh_pp_costs_t half = {.field_mask = MESH_PP_COSTS_FIELD_F | MESH_PP_COSTS_FIELD_B |
                                                  MESH_PP_COSTS_FIELD_W,
                                    .f = 0.5,
                                    .b = 0.5,
                                    .w = 0.5};
            mesh_pp_report_t rv = check_ok(zv, &half);
            CHECK(rz.split_backward && rv.split_backward && !rf.split_backward);
            CHECK_MSG(rz.bubble < rf.bubble, "p=%d m=%d: zb1 bubble %.4f not below 1f1b's %.4f", p,
                      m, rz.bubble, rf.bubble);
            /* ZB-H1 idles (p-1)(F+B-W) per rank against 1F1B's (p-1)(F+B+W) */
            double want = (double)(p - 1) / (3 * m + p - 1);
            CHECK_MSG(fabs(rz.bubble - want) < 1e-12, "p=%d m=%d: zb1 bubble %.6f want %.6f", p, m,
                      rz.bubble, want);
            CHECK_MSG(rz.peak_activations <= p, "zb1 p=%d m=%d stores %d > p", p, m,
                      rz.peak_activations);
            CHECK_MSG(rv.bubble < rz.bubble, "p=%d m=%d: zbv bubble %.4f not below zb1's %.4f", p,
                      m, rv.bubble, rz.bubble);
            CHECK_MSG(rv.peak_activations <= 2 * p,
                      "zbv p=%d m=%d stores %d half-stage "
                      "activations > 2p",
                      p, m, rv.peak_activations);
            if (p == 4 && m == 8)
                printf("ok: p=4 m=8 F=B=W: bubble 1f1b %.4f, zb1 %.4f, zbv %.4f; peaks %d %d "
                       "%d/2\n",
                       rf.bubble, rz.bubble, rv.bubble, rf.peak_activations, rz.peak_activations,
                       rv.peak_activations);
            mesh_pp_schedule_destroy(f1b);
            mesh_pp_schedule_destroy(zb);
            mesh_pp_schedule_destroy(zv);
        }
    printf("ok: zb1 bubble (p-1)/(3m+p-1) below 1f1b's, zbv below zb1's, p=2..8\n");
}

static void refuse_params(mesh_pp_kind_t kind, int p, int m, int v, int group, const char *piece)
{
    mesh_pp_schedule_params_t prm = params(kind, p, m, v, group);
    mesh_pp_schedule_h s = NULL;
    mesh_status_t st = mesh_pp_schedule_create(&prm, &s);
    const char *msg = mesh_comm_last_error(NULL);
    CHECK_MSG(st == MESH_ERR_INVALID_ARG && s == NULL, "%s p=%d m=%d v=%d accepted",
              mesh_pp_kind_name(kind), p, m, v);
    CHECK_MSG(strstr(msg, piece) != NULL, "no [%s] in [%s]", piece, msg);
    printf("ok: refused %s p=%d m=%d v=%d group %d: %s\n", mesh_pp_kind_name(kind), p, m, v, group,
           msg);
}

static void test_rules(void)
{
    refuse_params(MESH_PP_INTERLEAVED, 4, 3, 2, 0, "at least as many micro-batches as stages");
    refuse_params(MESH_PP_INTERLEAVED, 4, 9, 2, 0, "9 % 4 = 1 must be 0 or at least the stages");
    refuse_params(MESH_PP_INTERLEAVED, 4, 9, 2, 3, "must lie between the stages (4)");
    refuse_params(MESH_PP_INTERLEAVED, 4, 8, 1, 0, "at least 2 chunks per stage");
    refuse_params(MESH_PP_INTERLEAVED, 1, 8, 2, 0, "at least 2 stages");
    refuse_params(MESH_PP_1F1B, 4, 8, 2, 0, "1 chunk per stage");
    refuse_params(MESH_PP_ZBV, 4, 8, 3, 0, "exactly 2 chunks");
    refuse_params(MESH_PP_AFAB, 0, 8, 1, 0, "must be at least 1");
    mesh_pp_kind_t k;
    CHECK(mesh_pp_kind_parse("gpipe", &k) == MESH_OK && k == MESH_PP_AFAB);
    CHECK(mesh_pp_kind_parse("zb-h1", &k) == MESH_OK && k == MESH_PP_ZB1);
    CHECK(mesh_pp_kind_parse("zbh1", &k) == MESH_OK && k == MESH_PP_ZB1);
    CHECK(strcmp(mesh_pp_kind_name(MESH_PP_ZB1), "zb1") == 0);
    /* "none" names a layout without a pipeline: parsed and named, never built */
    CHECK(mesh_pp_kind_parse("none", &k) == MESH_OK && k == MESH_PP_NONE);
    CHECK(strcmp(mesh_pp_kind_name(MESH_PP_NONE), "none") == 0);
    refuse_params(MESH_PP_NONE, 1, 1, 1, 0, "kind none names no pipeline");
    CHECK(mesh_pp_kind_parse("interleaved", &k) == MESH_OK && k == MESH_PP_INTERLEAVED);
    CHECK(mesh_pp_kind_parse("2f2b", &k) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "unknown pipeline schedule '2f2b'") != NULL);
}

static void test_broken(void)
{
    mesh_pp_schedule_h base = make(MESH_PP_1F1B, 2, 3, 1, 0), s;
    check_ok(base, NULL);

    /* swapped actions: the last stage runs B(0) before F(0) */
    CHECK(mesh_pp_schedule_copy(base, &s) == MESH_OK);
    int f = find(s, 1, MESH_PP_F, 0, 0), b = find(s, 1, MESH_PP_B, 0, 0);
    mesh_pp_action_t fa, ba;
    CHECK(mesh_pp_schedule_action(s, 1, f, &fa) == MESH_OK);
    CHECK(mesh_pp_schedule_action(s, 1, b, &ba) == MESH_OK);
    CHECK(mesh_pp_schedule_remove(s, 1, b) == MESH_OK);
    CHECK(mesh_pp_schedule_insert(s, 1, b, &fa) == MESH_OK);
    CHECK(mesh_pp_schedule_remove(s, 1, f) == MESH_OK);
    CHECK(mesh_pp_schedule_insert(s, 1, f, &ba) == MESH_OK);
    refused(s, "B before its F",
            "rank 1, position 1, B(mb 0, chunk 0): it comes before its "
            "forward, F(mb 0, chunk 0) at position 3",
            NULL);
    mesh_pp_schedule_destroy(s);

    /* swapped actions: a send before the forward that fills it */
    CHECK(mesh_pp_schedule_copy(base, &s) == MESH_OK);
    int sf = find(s, 0, MESH_PP_SEND_F, 1, 0);
    mesh_pp_action_t sa;
    CHECK(mesh_pp_schedule_action(s, 0, sf, &sa) == MESH_OK);
    CHECK(mesh_pp_schedule_remove(s, 0, sf) == MESH_OK);
    CHECK(mesh_pp_schedule_insert(s, 0, find(s, 0, MESH_PP_F, 1, 0), &sa) == MESH_OK);
    refused(s, "send before its forward",
            "rank 0, position 3, SEND_F(mb 1, chunk 0) to rank 1: "
            "it comes before the forward it sends, F(mb 1, chunk 0) at position 4",
            NULL);
    mesh_pp_schedule_destroy(s);

    /* a missing receive */
    CHECK(mesh_pp_schedule_copy(base, &s) == MESH_OK);
    CHECK(mesh_pp_schedule_remove(s, 1, find(s, 1, MESH_PP_RECV_F, 2, 0)) == MESH_OK);
    refused(s, "missing receive", "rank 0, position",
            "SEND_F(mb 2, chunk 0) to rank 1: no "
            "matching receive: rank 1 has no RECV_F(mb 2, chunk 0) from rank 0");
    mesh_pp_schedule_destroy(s);

    /* a missing send */
    CHECK(mesh_pp_schedule_copy(base, &s) == MESH_OK);
    CHECK(mesh_pp_schedule_remove(s, 1, find(s, 1, MESH_PP_SEND_B, 1, 0)) == MESH_OK);
    refused(s, "missing send",
            "RECV_B(mb 1, chunk 0) from rank 1: no matching send: rank 1 has "
            "no SEND_B(mb 1, chunk 0) to rank 0",
            "rank 0, position");
    mesh_pp_schedule_destroy(s);

    /* a duplicated send */
    CHECK(mesh_pp_schedule_copy(base, &s) == MESH_OK);
    int s0 = find(s, 0, MESH_PP_SEND_F, 0, 0);
    CHECK(mesh_pp_schedule_action(s, 0, s0, &sa) == MESH_OK);
    CHECK(mesh_pp_schedule_insert(s, 0, mesh_pp_schedule_length(s, 0), &sa) == MESH_OK);
    char want[128];
    snprintf(want, sizeof(want),
             "a second SEND_F of this micro-batch and chunk (the first is at "
             "position %d)",
             s0);
    refused(s, "duplicated send", "rank 0, position", want);
    mesh_pp_schedule_destroy(s);

    /* a missing forward, a missing W of a split schedule */
    CHECK(mesh_pp_schedule_copy(base, &s) == MESH_OK);
    CHECK(mesh_pp_schedule_remove(s, 0, find(s, 0, MESH_PP_F, 2, 0)) == MESH_OK);
    refused(s, "missing forward", "rank 0, position",
            "the forward it sends, F(mb 2, chunk 0), is not in the list");
    mesh_pp_schedule_destroy(s);
    mesh_pp_schedule_h zb = make(MESH_PP_ZB1, 3, 4, 1, 0);
    CHECK(mesh_pp_schedule_remove(zb, 2, find(zb, 2, MESH_PP_W, 3, 0)) == MESH_OK);
    refused(zb, "missing W", "rank 2, position",
            "W(mb 3, chunk 0) is missing: the schedule "
            "splits the backward");
    mesh_pp_schedule_destroy(zb);

    /* a cycle: rank 0 sends its first activation only after a backward that needs it */
    mesh_pp_schedule_h u;
    mesh_pp_schedule_params_t prm = {.kind = MESH_PP_USER, .stages = 2, .microbatches = 1};
    CHECK(mesh_pp_schedule_create(&prm, &u) == MESH_OK);
    put(u, 0, MESH_PP_F, 0, 0, -1);
    put(u, 0, MESH_PP_RECV_B, 0, 0, MESH_PP_PEER_AUTO);
    put(u, 0, MESH_PP_B, 0, 0, -1);
    put(u, 0, MESH_PP_SEND_F, 0, 0, MESH_PP_PEER_AUTO);
    put(u, 1, MESH_PP_RECV_F, 0, 0, MESH_PP_PEER_AUTO);
    put(u, 1, MESH_PP_F, 0, 0, -1);
    put(u, 1, MESH_PP_B, 0, 0, -1);
    put(u, 1, MESH_PP_SEND_B, 0, 0, MESH_PP_PEER_AUTO);
    refused(u, "cycle", "user schedule refused: rank 0, position 2, B(mb 0, chunk 0): deadlock",
            "it waits for SEND_B(mb 0, chunk 0) to rank 0 at rank 1's position 3; rank 1, "
            "position 1, F(mb 0, chunk 0) waits for SEND_F(mb 0, chunk 0) to rank 1 at rank 0's "
            "position 3 (a cycle)");
    mesh_pp_schedule_destroy(u);

    /* a send to the wrong rank, a send past the last stage, a stage map given twice */
    mesh_pp_schedule_h p3 = make(MESH_PP_1F1B, 3, 3, 1, 0);
    CHECK(mesh_pp_schedule_copy(p3, &s) == MESH_OK);
    s0 = find(s, 0, MESH_PP_SEND_F, 1, 0);
    CHECK(mesh_pp_schedule_action(s, 0, s0, &sa) == MESH_OK);
    sa.peer = 2;
    CHECK(mesh_pp_schedule_remove(s, 0, s0) == MESH_OK);
    CHECK(mesh_pp_schedule_insert(s, 0, s0, &sa) == MESH_OK);
    refused(s, "wrong peer", "SEND_F(mb 1, chunk 0) to rank 2: stage 1 is on rank 1, not rank 2",
            NULL);
    mesh_pp_schedule_destroy(s);
    CHECK(mesh_pp_schedule_copy(p3, &s) == MESH_OK);
    sa = (mesh_pp_action_t){.op = MESH_PP_SEND_F, .mb = 0, .chunk = 0, .peer = 0};
    CHECK(mesh_pp_schedule_insert(s, 2, mesh_pp_schedule_length(s, 2), &sa) == MESH_OK);
    refused(s, "send past the last stage", "rank 2, position",
            "stage 2 is the last model stage: there is no stage 3");
    mesh_pp_schedule_destroy(s);
    CHECK(mesh_pp_schedule_copy(p3, &s) == MESH_OK);
    CHECK(mesh_pp_schedule_set_stage(s, 2, 0, 1) == MESH_OK);
    refused(s, "stage map", "stage map: stage 1 is on rank 1 chunk 0 and on rank 2 chunk 0", NULL);
    mesh_pp_schedule_destroy(s);
    CHECK(mesh_pp_schedule_insert(p3, 3, 0, &sa) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "rank 3 is outside 0..2") != NULL);
    mesh_pp_schedule_destroy(p3);
    CHECK(mesh_pp_check_rank(base, 0, NULL, NULL) == MESH_OK);
    mesh_pp_schedule_destroy(base);
}

/* The cost model's message, wake-up and gap terms, on schedules small enough to work out. */
static void test_costs(void)
{
    mesh_pp_schedule_h s = make(MESH_PP_1F1B, 1, 2, 1, 0);
    mesh_pp_costs_t c = {.field_mask = MESH_PP_COSTS_FIELD_GAP, .gap = 0.5};
    mesh_pp_report_t rep = check_ok(s, &c);
    /* F B F B of 1, 2, 1, 2 with a gap after each but the last: 6 busy in 7.5 */
    CHECK_MSG(fabs(rep.makespan - 7.5) < 1e-12 && fabs(rep.bubble - 0.2) < 1e-12,
              "gap: makespan %g bubble %g", rep.makespan, rep.bubble);
    mesh_pp_schedule_destroy(s);

    s = make(MESH_PP_1F1B, 2, 1, 1, 0);
    int f1 = find(s, 1, MESH_PP_F, 0, 0);
    double t0;
    c = (mesh_pp_costs_t){.field_mask = MESH_PP_COSTS_FIELD_COMM | MESH_PP_COSTS_FIELD_WAKE |
                                        MESH_PP_COSTS_FIELD_WAKE_AFTER,
                          .comm = 0.25,
                          .wake = 0.5,
                          .wake_after = 1};
    check_ok(s, &c);
    /* rank 1 waited 1.25 >= 1 for the activation sent at 1: it starts 0.5 late */
    CHECK(mesh_pp_check_time(s, 1, f1, &t0, NULL) == MESH_OK && fabs(t0 - 1.75) < 1e-12);
    c.wake_after = 2;
    check_ok(s, &c);
    CHECK(mesh_pp_check_time(s, 1, f1, &t0, NULL) == MESH_OK && fabs(t0 - 1.25) < 1e-12);
    c.field_mask |= MESH_PP_COSTS_FIELD_F;
    c.f = -1;
    CHECK(mesh_pp_check(s, &c, NULL) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "costs must be numbers >= 0") != NULL);
    mesh_pp_schedule_destroy(s);
    printf("ok: message, wake-up and gap costs move the timeline as stated\n");
}

/* A schedule built action by action equals the generator's, and passes. */
static void test_user_built(void)
{
    mesh_pp_schedule_h g = make(MESH_PP_1F1B, 2, 2, 1, 0), u;
    mesh_pp_schedule_params_t prm = {.kind = MESH_PP_USER, .stages = 2, .microbatches = 2};
    CHECK(mesh_pp_schedule_create(&prm, &u) == MESH_OK);
    CHECK(mesh_pp_check(u, NULL, NULL) == MESH_ERR_INVALID_ARG); /* empty: F missing */
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < mesh_pp_schedule_length(g, r); i++) {
            mesh_pp_action_t a;
            CHECK(mesh_pp_schedule_action(g, r, i, &a) == MESH_OK);
            put(u, r, a.op, a.mb, a.chunk, a.op >= MESH_PP_SEND_F ? MESH_PP_PEER_AUTO : -1);
            mesh_pp_action_t b;
            CHECK(mesh_pp_schedule_action(u, r, i, &b) == MESH_OK);
            CHECK(memcmp(&a, &b, sizeof(a)) == 0);
        }
    mesh_pp_report_t rg = check_ok(g, NULL), ru = check_ok(u, NULL);
    CHECK(rg.bubble == ru.bubble && rg.makespan == ru.makespan);
    double t0, t1;
    CHECK(mesh_pp_check_time(u, 1, find(u, 1, MESH_PP_F, 0, 0), &t0, &t1) == MESH_OK);
    CHECK(t0 == 1 && t1 == 2);
    mesh_pp_action_t a = {.op = MESH_PP_F, .mb = 0, .chunk = 0, .peer = -1};
    CHECK(mesh_pp_schedule_insert(u, 0, 0, &a) == MESH_OK);
    CHECK(mesh_pp_check_time(u, 1, 0, &t0, &t1) == MESH_ERR_INVALID_ARG); /* changed */
    printf("ok: a schedule built action by action equals 1f1b's and passes\n");
    mesh_pp_schedule_destroy(g);
    mesh_pp_schedule_destroy(u);
}

/*
 * Per-rank order and peak activations against the closed forms, for every shape in range. A
 * rank's compute actions (F, B, W in list order) must equal the definition action for action,
 * and the checker's peak of stored (micro-batch, chunk) activations on each rank must equal the
 * formula, so that a generator holding one more activation than its definition fails here even
 * though its schedule stays valid. The definitions (r the rank, p stages, m micro-batches, v
 * chunks per rank):
 *
 *   afab (GPipe): F(0) .. F(m-1), then B(0) .. B(m-1).                       peak m
 *   1f1b (Megatron-Core's forward_backward_pipelining_without_interleaving): w = min(p-r-1, m)
 *     warm-up forwards F(0) .. F(w-1); then F(w+i), B(i) for i < m-w; then the cool-down
 *     B(m-w) .. B(m-1).                                                       peak min(p-r, m)
 *   zb1 (ZB-H1, Qi et al. 2023, "Zero Bubble Pipeline Parallelism", sec. 3): 1F1B's w warm-up
 *     forwards; then r pairs F, B whose W is deferred; then F, B, W in turn (the W of the
 *     oldest micro-batch) while forwards remain; B, W while backwards remain; the deferred Ws
 *     last. An activation is held from its F to its W.                       peak min(p, m)
 *   interleaved (Megatron-Core's forward_backward_pipelining_with_interleaving): the virtual
 *     micro-batches k = 0 .. mv-1 run in groups of g micro-batches (default g = p; the last
 *     group takes what is left), each group through chunk 0, then chunk 1, ...: with G = the
 *     group of k holding L micro-batches from g0, k's micro-batch is g0 + (k - g0 v) mod L and
 *     its forward chunk (k - g0 v) / L; backward k runs the same micro-batch on chunk v-1-c.
 *     Warm-up w = min(2(p-r-1) + (v-1)g, mv) forwards, then F(w+k), B(k) in turn, then the
 *     cool-down backwards.                                              peak min(w + 1, mv)
 * The planner's memory model (mesh_plan_inflight, <mesh/plan.h>) must hold the same peaks, in
 * stages' worth of activations: v times its figure is the peak here for afab, 1f1b, zb1 and
 * interleaved with groups of p.
 *
 *   zbv (ZB-V, the same paper, sec. 6; its order comes from a greedy run, pp_zbv.c): before
 *     its first B, rank r runs min(m, 2p-1-r) forwards of chunk 0 (the way down the V) and
 *     min(m, r+1) of chunk 1 (the way up); each rank's peak, in half-stage chunks, is that of
 *     1F1B's first rank in full stages.                                    peak min(2p, 2m)
 */
typedef struct {
    mesh_pp_action_t *a;
    int n;
} order_t;

static void order_add(order_t *o, mesh_pp_op_t op, int mb, int chunk)
{
    o->a[o->n++] = (mesh_pp_action_t){.op = op, .mb = mb, .chunk = chunk, .peer = -1};
}

/* The k-th virtual micro-batch of the interleaved order: its micro-batch and forward chunk. */
static void il_virtual(int m, int v, int g, int k, int *mb, int *chunk)
{
    int g0 = k / (g * v) * g; /* groups before the last are whole */
    int len = (g0 + g < m ? g0 + g : m) - g0, in = k - g0 * v;
    *mb = g0 + in % len;
    *chunk = in / len;
}

/* F or B of virtual micro-batch k; the backward runs the chunks in reverse. */
static void il_add(order_t *o, int m, int v, int g, mesh_pp_op_t op, int k)
{
    int mb, c;
    il_virtual(m, v, g, k, &mb, &c);
    order_add(o, op, mb, op == MESH_PP_F ? c : v - 1 - c);
}

static void want_order(mesh_pp_kind_t kind, int p, int m, int v, int g, int r, order_t *o)
{
    o->n = 0;
    if (kind == MESH_PP_AFAB) {
        for (int i = 0; i < m; i++)
            order_add(o, MESH_PP_F, i, 0);
        for (int i = 0; i < m; i++)
            order_add(o, MESH_PP_B, i, 0);
        return;
    }
    if (kind == MESH_PP_1F1B || kind == MESH_PP_ZB1) {
        int w = p - r - 1 < m ? p - r - 1 : m, zb = kind == MESH_PP_ZB1;
        int held = zb ? (r < m - w ? r : m - w) : 0; /* pairs whose W waits to the end */
        int nw = 0;
        for (int i = 0; i < w; i++)
            order_add(o, MESH_PP_F, i, 0);
        for (int i = 0; i < m - w; i++) {
            order_add(o, MESH_PP_F, w + i, 0);
            order_add(o, MESH_PP_B, i, 0);
            if (zb && i >= held)
                order_add(o, MESH_PP_W, nw++, 0);
        }
        for (int i = m - w; i < m; i++) {
            order_add(o, MESH_PP_B, i, 0);
            if (zb)
                order_add(o, MESH_PP_W, nw++, 0);
        }
        while (zb && nw < m)
            order_add(o, MESH_PP_W, nw++, 0);
        return;
    }
    /* interleaved */
    int total = m * v, w = 2 * (p - r - 1) + (v - 1) * g;
    if (w > total)
        w = total;
    for (int k = 0; k < w; k++)
        il_add(o, m, v, g, MESH_PP_F, k);
    for (int k = 0; k < total - w; k++) {
        il_add(o, m, v, g, MESH_PP_F, w + k);
        il_add(o, m, v, g, MESH_PP_B, k);
    }
    for (int k = total - w; k < total; k++)
        il_add(o, m, v, g, MESH_PP_B, k);
}

static int want_peak(mesh_pp_kind_t kind, int p, int m, int v, int g, int r)
{
    switch (kind) {
    case MESH_PP_AFAB:
        return m;
    case MESH_PP_1F1B:
        return p - r < m ? p - r : m;
    case MESH_PP_ZB1:
        return p < m ? p : m;
    case MESH_PP_ZBV:
        return 2 * (p < m ? p : m);
    default: {
        int w = 2 * (p - r - 1) + (v - 1) * g;
        return w + 1 < m * v ? w + 1 : m * v;
    }
    }
}

/* The rank's F, B and W in list order. */
static const char *action_text(const mesh_pp_action_t *a, char *buf, size_t len)
{
    snprintf(buf, len, "%s(mb %d, chunk %d)", mesh_pp_op_name(a->op), a->mb, a->chunk);
    return buf;
}

static void got_order(mesh_pp_schedule_h s, int r, order_t *o)
{
    o->n = 0;
    for (int i = 0; i < mesh_pp_schedule_length(s, r); i++) {
        mesh_pp_action_t a;
        CHECK(mesh_pp_schedule_action(s, r, i, &a) == MESH_OK);
        if (a.op == MESH_PP_F || a.op == MESH_PP_B || a.op == MESH_PP_W)
            order_add(o, a.op, a.mb, a.chunk);
    }
}

/* Compares every rank of one shape; returns the shapes checked (1). */
static int check_shape(mesh_pp_kind_t kind, int p, int m, int v, int g, order_t *want, order_t *got)
{
    const char *k = mesh_pp_kind_name(kind);
    mesh_pp_schedule_h s = make(kind, p, m, v, kind == MESH_PP_INTERLEAVED ? g : 0);
    check_ok(s, NULL);
    for (int r = 0; r < p; r++) {
        int peak;
        CHECK(mesh_pp_check_rank(s, r, NULL, &peak) == MESH_OK);
        int wp = want_peak(kind, p, m, v, g, r);
        CHECK_MSG(peak == wp,
                  "%s p=%d m=%d v=%d group %d rank %d: peak %d activations, the "
                  "definition holds %d",
                  k, p, m, v, g, r, peak, wp);
        if (kind != MESH_PP_ZBV && (kind != MESH_PP_INTERLEAVED || g == p)) {
            double plan = mesh_plan_inflight(kind, p, m, v, r) * v;
            CHECK_MSG(fabs(plan - peak) < 1e-9,
                      "%s p=%d m=%d v=%d rank %d: the planner counts %.3f activations, the "
                      "schedule holds %d",
                      k, p, m, v, r, plan, peak);
        }
        got_order(s, r, got);
        if (kind == MESH_PP_ZBV) {
            int f[2] = {0, 0};
            for (int i = 0; i < got->n && got->a[i].op == MESH_PP_F; i++)
                f[got->a[i].chunk]++;
            int w0 = 2 * p - 1 - r < m ? 2 * p - 1 - r : m, w1 = r + 1 < m ? r + 1 : m;
            CHECK_MSG(f[0] == w0 && f[1] == w1,
                      "zbv p=%d m=%d rank %d: %d + %d forwards of chunks 0 + 1 before the first "
                      "B, the definition runs %d + %d",
                      p, m, r, f[0], f[1], w0, w1);
            continue;
        }
        want_order(kind, p, m, v, g, r, want);
        CHECK_MSG(got->n == want->n,
                  "%s p=%d m=%d v=%d group %d rank %d: %d compute actions, "
                  "want %d",
                  k, p, m, v, g, r, got->n, want->n);
        for (int i = 0; i < got->n; i++) {
            char gb[64], wb[64];
            CHECK_MSG(got->a[i].op == want->a[i].op && got->a[i].mb == want->a[i].mb &&
                          got->a[i].chunk == want->a[i].chunk,
                      "%s p=%d m=%d v=%d group %d rank %d, compute action %d: %s, the "
                      "definition has %s",
                      k, p, m, v, g, r, i, action_text(&got->a[i], gb, sizeof(gb)),
                      action_text(&want->a[i], wb, sizeof(wb)));
        }
    }
    mesh_pp_schedule_destroy(s);
    return 1;
}

static void test_orders(void)
{
    enum { PMAX = 8, MMAX = 3 * PMAX + 2, VMAX = 4 };
    order_t want = {.a = malloc(sizeof(mesh_pp_action_t) * 3 * MMAX * VMAX)},
            got = {.a = malloc(sizeof(mesh_pp_action_t) * 3 * MMAX * VMAX)};
    CHECK(want.a && got.a);
    int shapes[MESH_PP_KIND_COUNT] = {0};
    for (int p = 1; p <= PMAX; p++)
        for (int m = 1; m <= 3 * p + 2; m++) {
            shapes[MESH_PP_AFAB] += check_shape(MESH_PP_AFAB, p, m, 1, 0, &want, &got);
            shapes[MESH_PP_1F1B] += check_shape(MESH_PP_1F1B, p, m, 1, 0, &want, &got);
            shapes[MESH_PP_ZB1] += check_shape(MESH_PP_ZB1, p, m, 1, 0, &want, &got);
            shapes[MESH_PP_ZBV] += check_shape(MESH_PP_ZBV, p, m, 2, 0, &want, &got);
            /* interleaved: every group Megatron-Core accepts (p <= g <= m, m % g 0 or >= p) */
            for (int v = 2; p >= 2 && v <= VMAX; v++)
                for (int g = p; g <= m; g++)
                    if (m % g == 0 || m % g >= p)
                        shapes[MESH_PP_INTERLEAVED] +=
                            check_shape(MESH_PP_INTERLEAVED, p, m, v, g, &want, &got);
        }
    printf("ok: per-rank order and peak equal the definitions: afab %d, 1f1b %d, zb1 %d, "
           "interleaved %d shapes (p 1..%d, m 1..3p+2, v 2..%d, every group); zbv warm-up "
           "and peak %d shapes\n",
           shapes[MESH_PP_AFAB], shapes[MESH_PP_1F1B], shapes[MESH_PP_ZB1],
           shapes[MESH_PP_INTERLEAVED], PMAX, VMAX, shapes[MESH_PP_ZBV]);
    free(want.a);
    free(got.a);
}

int main(void)
{
    setenv("MESH_LOG_LEVEL", "error", 0); /* the refusals below are expected */
    test_closed_forms();
    test_orders();
    test_zero_bubble();
    test_rules();
    test_broken();
    test_costs();
    test_user_built();
    return 0;
}
