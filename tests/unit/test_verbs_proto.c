/* verbs state machines and accounting: every (state, event) pair of the connection and message
 * machines against a table of legal transitions, protocol choice at its boundaries, credits
 * and their return. */
#include "config.h"
#include "transports/verbs/verbs_proto.h"
#include "tests/harness/harness.h"
#include <string.h>

static void test_conn(void)
{
    enum { N = 0, I, R, Y, F, C };
    enum { CR = 0, PI, PA, ER, CL };
    /* expected[state][event]; -1: illegal */
    static const int expected[6][5] = {
        /*          create info ack error close */
        /* none  */ {I, -1, -1, -1, C},
        /* init  */ {-1, R, -1, F, C},
        /* rts   */ {-1, R, Y, F, C},
        /* ready */ {-1, Y, Y, F, C},
        /* fail  */ {-1, F, F, F, C},
        /* close */ {-1, -1, -1, -1, C},
    };
    for (int s = 0; s < 6; s++)
        for (int e = 0; e < 5; e++) {
            int got = mesh_tl_verbs_conn_next((mesh_tl_verbs_conn_state_t)s,
                                              (mesh_tl_verbs_conn_event_t)e);
            CHECK_MSG(got == expected[s][e], "state %d event %d -> %d, want %d", s, e, got,
                      expected[s][e]);
        }
    CHECK(strcmp(mesh_tl_verbs_conn_name(MESH_TL_VERBS_CONN_READY), "ready") == 0);
    CHECK(strcmp(mesh_tl_verbs_conn_name((mesh_tl_verbs_conn_state_t)42), "?") == 0);
    /* a healthy path */
    int s = MESH_TL_VERBS_CONN_NONE;
    s = mesh_tl_verbs_conn_next(s, MESH_TL_VERBS_EV_CREATE);
    s = mesh_tl_verbs_conn_next(s, MESH_TL_VERBS_EV_PEER_INFO);
    s = mesh_tl_verbs_conn_next(s, MESH_TL_VERBS_EV_PEER_ACK);
    CHECK(s == MESH_TL_VERBS_CONN_READY);

    /* resends: first at once, then after interval, doubling, capped at 1 s */
    CHECK(mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_INIT, 10.0, 0, 0, 0.1));
    CHECK(!mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_INIT, 0.05, 0.0, 1, 0.1));
    CHECK(mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_INIT, 0.1, 0.0, 1, 0.1));
    CHECK(!mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_RTS, 0.15, 0.0, 2, 0.1));
    CHECK(mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_RTS, 0.2, 0.0, 2, 0.1));
    CHECK(!mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_RTS, 0.99, 0.0, 30, 0.1));
    CHECK(mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_RTS, 1.0, 0.0, 30, 0.1));
    CHECK(!mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_READY, 100.0, 0, 0, 0.1));
    CHECK(!mesh_tl_verbs_conn_resend_due(MESH_TL_VERBS_CONN_FAILED, 100.0, 0, 0, 0.1));
}

static void test_pick(void)
{
    /* hdr 24, inline 64, bounce 8192 */
    CHECK(mesh_tl_verbs_proto_pick(0, 24, 64, 8192) == MESH_TL_VERBS_PROTO_INLINE);
    CHECK(mesh_tl_verbs_proto_pick(40, 24, 64, 8192) == MESH_TL_VERBS_PROTO_INLINE);
    CHECK(mesh_tl_verbs_proto_pick(41, 24, 64, 8192) == MESH_TL_VERBS_PROTO_EAGER);
    CHECK(mesh_tl_verbs_proto_pick(8168, 24, 64, 8192) == MESH_TL_VERBS_PROTO_EAGER);
    CHECK(mesh_tl_verbs_proto_pick(8169, 24, 64, 8192) == MESH_TL_VERBS_PROTO_RNDV);
    CHECK(mesh_tl_verbs_proto_pick((size_t)-1, 24, 64, 8192) == MESH_TL_VERBS_PROTO_RNDV);
    /* a device without inline data */
    CHECK(mesh_tl_verbs_proto_pick(0, 24, 0, 8192) == MESH_TL_VERBS_PROTO_EAGER);
}

static void test_msg(void)
{
    enum { Q = 0, P, WF, WL, M, RD, D, F };
    enum { PO = 0, LO, FI, ER };
    /* expected[proto eager/rndv][state][event] */
    static const int eager[8][4] = {
        /* queued */ {P, -1, -1, F},   /* posted */ {-1, D, -1, F},
        /* wait_fin */ {-1, -1, D, F},
        /* wait_l */ {-1, D, -1, F},   /* matched */ {-1, -1, -1, F},
        /* reading */ {-1, D, -1, F},  /* done */ {-1, -1, -1, -1},
        /* failed */ {-1, -1, -1, F},
    };
    static const int rndv[8][4] = {
        {P, -1, -1, F},  {-1, WF, WL, F}, {-1, -1, D, F},   {-1, D, -1, F},
        {RD, -1, -1, F}, {-1, D, -1, F},  {-1, -1, -1, -1}, {-1, -1, -1, F},
    };
    for (int s = 0; s < 8; s++)
        for (int e = 0; e < 4; e++) {
            int g1 = mesh_tl_verbs_msg_next((mesh_tl_verbs_msg_state_t)s, MESH_TL_VERBS_PROTO_EAGER,
                                            (mesh_tl_verbs_msg_event_t)e);
            int g2 = mesh_tl_verbs_msg_next((mesh_tl_verbs_msg_state_t)s, MESH_TL_VERBS_PROTO_RNDV,
                                            (mesh_tl_verbs_msg_event_t)e);
            CHECK_MSG(g1 == eager[s][e], "eager state %d event %d -> %d", s, e, g1);
            CHECK_MSG(g2 == rndv[s][e], "rndv state %d event %d -> %d", s, e, g2);
        }
}

static void test_credits(void)
{
    mesh_tl_verbs_credits_t c = {.depth = 4};
    CHECK(mesh_tl_verbs_credits_avail(&c) == 4);
    for (int i = 0; i < 4; i++)
        CHECK(mesh_tl_verbs_credits_take(&c) == 1);
    CHECK(mesh_tl_verbs_credits_take(&c) == 0 && c.sent == 4);
    mesh_tl_verbs_credits_update(&c, 3);
    CHECK(mesh_tl_verbs_credits_avail(&c) == 3);
    mesh_tl_verbs_credits_update(&c, 2); /* stale: ignored */
    CHECK(c.peer_freed == 3 && mesh_tl_verbs_credits_avail(&c) == 3);
    mesh_tl_verbs_credits_update(&c, 9); /* more than we sent: ignored */
    CHECK(c.peer_freed == 3);
    mesh_tl_verbs_credits_update(&c, 4);
    CHECK(mesh_tl_verbs_credits_avail(&c) == 4);
    /* long runs: counters only grow */
    for (int i = 0; i < 100000; i++) {
        CHECK(mesh_tl_verbs_credits_take(&c));
        mesh_tl_verbs_credits_update(&c, c.sent);
    }
    CHECK(c.sent == 100004 && mesh_tl_verbs_credits_avail(&c) == 4);

    mesh_tl_verbs_creturn_t r = {0};
    CHECK(!mesh_tl_verbs_creturn_due(&r, 8, 1));
    r.reposted = 3;
    CHECK(!mesh_tl_verbs_creturn_due(&r, 8, 0));
    CHECK(mesh_tl_verbs_creturn_due(&r, 8, 1));
    r.reposted = 8;
    CHECK(mesh_tl_verbs_creturn_due(&r, 8, 0));
    r.in_flight = 8;
    CHECK(!mesh_tl_verbs_creturn_due(&r, 8, 1));
    r.in_flight = 0;
    r.reported = 8;
    CHECK(!mesh_tl_verbs_creturn_due(&r, 8, 1));
}

int main(void)
{
    test_conn();
    test_pick();
    test_msg();
    test_credits();
    printf("verbs proto: ok\n");
    return 0;
}
