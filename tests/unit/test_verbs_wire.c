/* verbs wire formats: exact bytes, round trips and rejection of malformed buffers. */
#include "config.h"
#include "transports/verbs/verbs_wire.h"
#include "tests/harness/harness.h"
#include <string.h>

static void test_eager(void)
{
    uint8_t buf[64];
    mesh_tl_verbs_hdr_t h = {.type = MESH_TL_VERBS_MSG_EAGER,
                             .flags = 0,
                             .msg_id = 0x01020304,
                             .tag = 0x1122334455667788ull,
                             .len = 5};
    CHECK(mesh_tl_verbs_hdr_encode(&h, buf, 23) == 0);
    CHECK(mesh_tl_verbs_hdr_encode(&h, buf, sizeof(buf)) == MESH_TL_VERBS_HDR_EAGER);
    /* little-endian on the wire whatever the host */
    static const uint8_t want[24] = {1,    0,    0,    0,    4, 3, 2, 1, 0x88, 0x77, 0x66, 0x55,
                                     0x44, 0x33, 0x22, 0x11, 5, 0, 0, 0, 0,    0,    0,    0};
    CHECK(memcmp(buf, want, sizeof(want)) == 0);
    mesh_tl_verbs_hdr_t d;
    size_t hl = 0;
    CHECK(mesh_tl_verbs_hdr_decode(buf, 24 + 5, &d, &hl) == MESH_OK);
    CHECK(hl == 24 && d.type == MESH_TL_VERBS_MSG_EAGER && d.tag == h.tag && d.len == 5);
    CHECK(d.msg_id == 0x01020304);
    /* the length must agree with what arrived */
    CHECK(mesh_tl_verbs_hdr_decode(buf, 24 + 4, &d, &hl) == MESH_ERR_IO);
    CHECK(mesh_tl_verbs_hdr_decode(buf, 24 + 6, &d, &hl) == MESH_ERR_IO);
    CHECK(mesh_tl_verbs_hdr_decode(buf, 10, &d, &hl) == MESH_ERR_IO);
    h.len = 0;
    CHECK(mesh_tl_verbs_hdr_encode(&h, buf, sizeof(buf)) == 24);
    CHECK(mesh_tl_verbs_hdr_decode(buf, 24, &d, &hl) == MESH_OK && d.len == 0);
}

static void test_rts_fin(void)
{
    uint8_t buf[64];
    mesh_tl_verbs_hdr_t h = {.type = MESH_TL_VERBS_MSG_RTS,
                             .msg_id = 77,
                             .tag = 9,
                             .len = (1ull << 33) + 1,
                             .raddr = 0x7fff12345678ull,
                             .rkey = 0xdeadbeef};
    CHECK(mesh_tl_verbs_hdr_encode(&h, buf, 39) == 0);
    CHECK(mesh_tl_verbs_hdr_encode(&h, buf, sizeof(buf)) == MESH_TL_VERBS_HDR_RTS);
    mesh_tl_verbs_hdr_t d;
    size_t hl;
    CHECK(mesh_tl_verbs_hdr_decode(buf, 40, &d, &hl) == MESH_OK && hl == 40);
    CHECK(d.len == (1ull << 33) + 1 && d.raddr == 0x7fff12345678ull && d.rkey == 0xdeadbeef);
    CHECK(d.msg_id == 77 && d.tag == 9);
    CHECK(mesh_tl_verbs_hdr_decode(buf, 41, &d, &hl) == MESH_ERR_IO);

    mesh_tl_verbs_hdr_t f = {.type = MESH_TL_VERBS_MSG_FIN, .msg_id = 78, .len = 123};
    CHECK(mesh_tl_verbs_hdr_encode(&f, buf, sizeof(buf)) == 24);
    CHECK(mesh_tl_verbs_hdr_decode(buf, 24, &d, &hl) == MESH_OK);
    CHECK(d.type == MESH_TL_VERBS_MSG_FIN && d.msg_id == 78 && d.len == 0);
    CHECK(mesh_tl_verbs_hdr_decode(buf, 25, &d, &hl) == MESH_ERR_IO);

    mesh_tl_verbs_hdr_t bad = {.type = 9};
    CHECK(mesh_tl_verbs_hdr_encode(&bad, buf, sizeof(buf)) == 0);
    buf[0] = 9;
    CHECK(mesh_tl_verbs_hdr_decode(buf, 24, &d, &hl) == MESH_ERR_IO);
}

static void test_conn(void)
{
    uint8_t buf[64];
    mesh_tl_verbs_conn_msg_t m = {.comm_uid = 0xabcdef0123456789ull,
                                  .src = 3,
                                  .dst = 12,
                                  .qpn = 0x123456,
                                  .psn = 0xabcdef,
                                  .flags = MESH_TL_VERBS_CONN_ACK,
                                  .credit_rkey = 0x42,
                                  .rx_depth = 32,
                                  .credit_addr = 0x1000};
    CHECK(mesh_tl_verbs_conn_encode(&m, buf, 47) == 0);
    CHECK(mesh_tl_verbs_conn_encode(&m, buf, sizeof(buf)) == MESH_TL_VERBS_CONN_LEN);
    CHECK(buf[0] == 0x56 && buf[3] == 0x4d); /* "MSHV" little-endian */
    mesh_tl_verbs_conn_msg_t d;
    CHECK(mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_OK);
    CHECK(d.comm_uid == m.comm_uid && d.src == 3 && d.dst == 12 && d.qpn == 0x123456);
    CHECK(d.psn == 0xabcdef && d.flags == MESH_TL_VERBS_CONN_ACK && d.credit_rkey == 0x42);
    CHECK(d.credit_addr == 0x1000 && d.rx_depth == 32);
    m.flags = MESH_TL_VERBS_CONN_ACK | MESH_TL_VERBS_CONN_DONE;
    mesh_tl_verbs_conn_encode(&m, buf, sizeof(buf));
    CHECK(buf[4] == 3 && mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_OK && d.flags == 3);
    mesh_tl_verbs_conn_encode(&(mesh_tl_verbs_conn_msg_t){.rx_depth = 1}, buf, sizeof(buf));
    CHECK(mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_OK && d.flags == 0);
    m.flags = MESH_TL_VERBS_CONN_ACK;
    mesh_tl_verbs_conn_encode(&m, buf, sizeof(buf));
    CHECK(buf[36] == 32 && buf[37] == 0 && buf[40] == 0 && buf[41] == 0x10);
    CHECK(mesh_tl_verbs_conn_decode(buf, 47, &d) == MESH_ERR_IO);
    m.psn = 0x1000000; /* PSNs are 24 bits */
    mesh_tl_verbs_conn_encode(&m, buf, sizeof(buf));
    CHECK(mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_ERR_IO);
    m.psn = 1;
    m.rx_depth = 0; /* a peer with no buffers for us */
    mesh_tl_verbs_conn_encode(&m, buf, sizeof(buf));
    CHECK(mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_ERR_IO);
    m.rx_depth = 1;
    mesh_tl_verbs_conn_encode(&m, buf, sizeof(buf));
    CHECK(mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_OK);
    buf[0] ^= 1;
    CHECK(mesh_tl_verbs_conn_decode(buf, 48, &d) == MESH_ERR_IO);
}

int main(void)
{
    test_eager();
    test_rts_fin();
    test_conn();
    printf("verbs wire: ok\n");
    return 0;
}
