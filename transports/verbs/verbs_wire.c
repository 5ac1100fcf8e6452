/* Encoding and validation of the verbs wire formats (see verbs_wire.h). */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "verbs"
#include "transports/verbs/verbs_wire.h"
#include "libmesh/log.h"
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* layout: type u8, flags u8, reserved u16, msg_id u32, tag u64, len u64 [, raddr u64, rkey u32,
 * reserved u32] */
size_t mesh_tl_verbs_hdr_encode(const mesh_tl_verbs_hdr_t *h, void *buf, size_t cap)
{
    uint8_t *p = buf;
    size_t n;
    switch (h->type) {
    case MESH_TL_VERBS_MSG_EAGER:
    case MESH_TL_VERBS_MSG_FIN:
        n = MESH_TL_VERBS_HDR_EAGER;
        break;
    case MESH_TL_VERBS_MSG_RTS:
        n = MESH_TL_VERBS_HDR_RTS;
        break;
    default:
        return 0;
    }
    if (cap < n)
        return 0;
    p[0] = h->type;
    p[1] = h->flags;
    put16(p + 2, 0);
    put32(p + 4, h->msg_id);
    put64(p + 8, h->tag);
    put64(p + 16, h->type == MESH_TL_VERBS_MSG_FIN ? 0 : h->len);
    if (h->type == MESH_TL_VERBS_MSG_RTS) {
        put64(p + 24, h->raddr);
        put32(p + 32, h->rkey);
        put32(p + 36, 0);
    }
    return n;
}

mesh_status_t mesh_tl_verbs_hdr_decode(const void *buf, size_t total, mesh_tl_verbs_hdr_t *h,
                                       size_t *hdr_len)
{
    const uint8_t *p = buf;
    if (total < MESH_TL_VERBS_HDR_EAGER)
        return mesh_error(MESH_ERR_IO, "verbs message of %zu bytes is shorter than a header",
                          total);
    mesh_tl_verbs_hdr_t x = {.type = p[0],
                             .flags = p[1],
                             .msg_id = get32(p + 4),
                             .tag = get64(p + 8),
                             .len = get64(p + 16)};
    size_t n = MESH_TL_VERBS_HDR_EAGER;
    switch (x.type) {
    case MESH_TL_VERBS_MSG_EAGER:
        if (x.len != total - n)
            return mesh_error(MESH_ERR_IO, "verbs eager header says %llu bytes, %zu arrived",
                              (unsigned long long)x.len, total - n);
        break;
    case MESH_TL_VERBS_MSG_FIN:
        if (total != n || x.len != 0)
            return mesh_error(MESH_ERR_IO, "verbs fin message of %zu bytes", total);
        break;
    case MESH_TL_VERBS_MSG_RTS:
        n = MESH_TL_VERBS_HDR_RTS;
        if (total != n)
            return mesh_error(MESH_ERR_IO, "verbs rts message of %zu bytes", total);
        x.raddr = get64(p + 24);
        x.rkey = get32(p + 32);
        break;
    default:
        return mesh_error(MESH_ERR_IO, "verbs message of unknown type %u", x.type);
    }
    *h = x;
    *hdr_len = n;
    return MESH_OK;
}

/* layout: magic u32, flags u32, comm_uid u64, src u32, dst u32, qpn u32, psn u32, credit_rkey
 * u32, rx_depth u32, credit_addr u64 */
size_t mesh_tl_verbs_conn_encode(const mesh_tl_verbs_conn_msg_t *m, void *buf, size_t cap)
{
    uint8_t *p = buf;
    if (cap < MESH_TL_VERBS_CONN_LEN)
        return 0;
    put32(p, MESH_TL_VERBS_CONN_MAGIC);
    put32(p + 4, m->flags);
    put64(p + 8, m->comm_uid);
    put32(p + 16, m->src);
    put32(p + 20, m->dst);
    put32(p + 24, m->qpn);
    put32(p + 28, m->psn);
    put32(p + 32, m->credit_rkey);
    put32(p + 36, m->rx_depth);
    put64(p + 40, m->credit_addr);
    return MESH_TL_VERBS_CONN_LEN;
}

mesh_status_t mesh_tl_verbs_conn_decode(const void *buf, size_t len, mesh_tl_verbs_conn_msg_t *m)
{
    const uint8_t *p = buf;
    if (len < MESH_TL_VERBS_CONN_LEN)
        return mesh_error(MESH_ERR_IO, "verbs connect message of %zu bytes", len);
    if (get32(p) != MESH_TL_VERBS_CONN_MAGIC)
        return mesh_error(MESH_ERR_IO, "verbs connect message with a wrong magic %08x", get32(p));
    mesh_tl_verbs_conn_msg_t x = {.flags = get32(p + 4),
                                  .comm_uid = get64(p + 8),
                                  .src = get32(p + 16),
                                  .dst = get32(p + 20),
                                  .qpn = get32(p + 24),
                                  .psn = get32(p + 28),
                                  .credit_rkey = get32(p + 32),
                                  .rx_depth = get32(p + 36),
                                  .credit_addr = get64(p + 40)};
    if (x.qpn > 0xffffffu || x.psn > 0xffffffu || x.rx_depth == 0)
        return mesh_error(MESH_ERR_IO,
                          "verbs connect message from rank %u with qpn %u psn %u, %u buffers",
                          x.src, x.qpn, x.psn, x.rx_depth);
    *m = x;
    return MESH_OK;
}
