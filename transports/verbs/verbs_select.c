/* Selection and error mapping of the verbs transport (see verbs_select.h). */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "verbs"
#include "transports/verbs/verbs_select.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_tl_verbs_hca_parse(const char *spec, mesh_tl_verbs_hca_t *list, int max, int *n)
{
    int count = 0;
    for (const char *p = spec ? spec : ""; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t nlen = colon ? (size_t)(colon - p) : len;
        if (nlen == 0 || nlen >= IBV_SYSFS_NAME_MAX)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "MESH_IB_HCA: entry '%.*s' needs a device name (e.g. mlx5_0:1)",
                              (int)len, p);
        if (count == max)
            return mesh_error(MESH_ERR_INVALID_ARG, "MESH_IB_HCA: more than %d entries", max);
        mesh_tl_verbs_hca_t h = {.port = 0};
        memcpy(h.name, p, nlen);
        if (colon) {
            char num[8] = "";
            size_t plen = len - nlen - 1;
            char *end = NULL;
            if (plen > 0 && plen < sizeof(num))
                memcpy(num, colon + 1, plen);
            long v = plen > 0 && plen < sizeof(num) ? strtol(num, &end, 10) : 0;
            if (end == NULL || *end || v < 1 || v > 255)
                return mesh_error(MESH_ERR_INVALID_ARG,
                                  "MESH_IB_HCA: entry '%.*s' has a bad port (1 to 255)", (int)len,
                                  p);
            h.port = (int)v;
        }
        list[count++] = h;
        p += len + (e != NULL);
    }
    *n = count;
    return MESH_OK;
}

int mesh_tl_verbs_hca_match(const mesh_tl_verbs_hca_t *list, int n, const char *dev, int port)
{
    if (n == 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, dev) == 0 && (list[i].port == 0 || list[i].port == port))
            return i;
    return -1;
}

static int gid_rank(const mesh_tl_verbs_gid_t *g)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    int zero = 1;
    for (int i = 0; i < 16; i++)
        zero &= g->raw[i] == 0;
    if (zero)
        return -1;
    int linklocal = g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
    switch (g->type) {
    case MESH_TL_VERBS_GID_ROCE_V2:
        if (memcmp(g->raw, v4mapped, sizeof(v4mapped)) == 0)
            return 4;
        return linklocal ? 2 : 3;
    case MESH_TL_VERBS_GID_ROCE_V1:
        return 1;
    default:
        return 0;
    }
}

int mesh_tl_verbs_gid_pick(const mesh_tl_verbs_gid_t *gids, int n)
{
    int best = -1, best_rank = -1;
    for (int i = 0; i < n; i++) {
        int r = gid_rank(&gids[i]);
        if (r > best_rank || (r == best_rank && r >= 0 && gids[i].index < gids[best].index)) {
            best = i;
            best_rank = r;
        }
    }
    return best < 0 || best_rank < 0 ? -1 : gids[best].index;
}

mesh_status_t mesh_tl_verbs_wc_status(enum ibv_wc_status status, int peer, char *why, size_t len)
{
    const char *what;
    switch (status) {
    case IBV_WC_SUCCESS:
        return MESH_OK;
    case IBV_WC_RETRY_EXC_ERR:
        what = "no acknowledgement after every retry: the peer is dead or the link is down";
        break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        what = "the peer posted no receive buffer in time";
        break;
    case IBV_WC_WR_FLUSH_ERR:
        what = "flushed: the connection failed earlier";
        break;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
        what = "the peer rejected a request";
        break;
    case IBV_WC_RESP_TIMEOUT_ERR:
        what = "the peer's response timed out";
        break;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR:
        what = "local error on the connection";
        break;
    default:
        what = "connection error";
        break;
    }
    snprintf(why, len, "rank %d: %s (%s)", peer, what, ibv_wc_status_str(status));
    return MESH_ERR_PEER_FAILED;
}

mesh_status_t mesh_tl_verbs_async_status(enum ibv_event_type ev, int peer, char *why, size_t len)
{
    switch (ev) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
        snprintf(why, len, "rank %d: connection failed (%s)", peer, ibv_event_type_str(ev));
        return MESH_ERR_PEER_FAILED;
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL:
        snprintf(why, len, "every peer lost: local %s", ibv_event_type_str(ev));
        return MESH_ERR_PEER_FAILED;
    case IBV_EVENT_CQ_ERR:
        snprintf(why, len, "completion queue error (%s)", ibv_event_type_str(ev));
        return MESH_ERR_IO;
    default:
        return MESH_OK;
    }
}
