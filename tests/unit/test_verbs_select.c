/* verbs device selection and error mapping without a device: MESH_IB_HCA parsing and matching,
 * RoCE GID choice, completion statuses and async events to mesh statuses naming the peer. */
#include "config.h"
#include "transports/verbs/verbs_select.h"
#include "libmesh/log.h"
#include "tests/harness/harness.h"
#include <string.h>

static void test_hca(void)
{
    mesh_tl_verbs_hca_t l[MESH_TL_VERBS_HCA_MAX];
    int n = -1;
    CHECK(mesh_tl_verbs_hca_parse("", l, MESH_TL_VERBS_HCA_MAX, &n) == MESH_OK && n == 0);
    CHECK(mesh_tl_verbs_hca_parse(NULL, l, MESH_TL_VERBS_HCA_MAX, &n) == MESH_OK && n == 0);
    CHECK(mesh_tl_verbs_hca_match(l, 0, "mlx5_7", 2) == 0); /* empty list: anything */
    CHECK(mesh_tl_verbs_hca_parse("mlx5_0:1,mlx5_1,bnxt_re0:2", l, MESH_TL_VERBS_HCA_MAX, &n) ==
          MESH_OK);
    CHECK(n == 3);
    CHECK(strcmp(l[0].name, "mlx5_0") == 0 && l[0].port == 1);
    CHECK(strcmp(l[1].name, "mlx5_1") == 0 && l[1].port == 0);
    CHECK(strcmp(l[2].name, "bnxt_re0") == 0 && l[2].port == 2);
    CHECK(mesh_tl_verbs_hca_match(l, n, "mlx5_0", 1) == 0);
    CHECK(mesh_tl_verbs_hca_match(l, n, "mlx5_0", 2) == -1);
    CHECK(mesh_tl_verbs_hca_match(l, n, "mlx5_1", 2) == 1);
    CHECK(mesh_tl_verbs_hca_match(l, n, "bnxt_re0", 2) == 2);
    CHECK(mesh_tl_verbs_hca_match(l, n, "mlx5_10", 1) == -1);
    CHECK(mesh_tl_verbs_hca_parse("mlx5_0:", l, MESH_TL_VERBS_HCA_MAX, &n) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_error_last(), "MESH_IB_HCA") && strstr(mesh_error_last(), "mlx5_0:"));
    CHECK(mesh_tl_verbs_hca_parse("mlx5_0:0", l, MESH_TL_VERBS_HCA_MAX, &n) ==
          MESH_ERR_INVALID_ARG);
    CHECK(mesh_tl_verbs_hca_parse("mlx5_0:x", l, MESH_TL_VERBS_HCA_MAX, &n) ==
          MESH_ERR_INVALID_ARG);
    CHECK(mesh_tl_verbs_hca_parse("mlx5_0:256", l, MESH_TL_VERBS_HCA_MAX, &n) ==
          MESH_ERR_INVALID_ARG);
    CHECK(mesh_tl_verbs_hca_parse("a,,b", l, MESH_TL_VERBS_HCA_MAX, &n) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_tl_verbs_hca_parse(":1", l, MESH_TL_VERBS_HCA_MAX, &n) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_tl_verbs_hca_parse("a,b,c", l, 2, &n) == MESH_ERR_INVALID_ARG);
}

static mesh_tl_verbs_gid_t gid(int index, mesh_tl_verbs_gid_type_t type, const char *kind)
{
    mesh_tl_verbs_gid_t g = {.index = index, .type = type};
    if (strcmp(kind, "v4") == 0) {
        g.raw[10] = g.raw[11] = 0xff;
        g.raw[12] = 10;
        g.raw[15] = (uint8_t)index;
    } else if (strcmp(kind, "ll") == 0) {
        g.raw[0] = 0xfe;
        g.raw[1] = 0x80;
        g.raw[15] = 1;
    } else if (strcmp(kind, "global") == 0) {
        g.raw[0] = 0x20;
        g.raw[1] = 0x01;
        g.raw[15] = 1;
    }
    return g;
}

static void test_gid(void)
{
    /* the usual RoCE table: v1 and v2 link-local, then v1 and v2 IPv4-mapped */
    mesh_tl_verbs_gid_t t[] = {
        gid(0, MESH_TL_VERBS_GID_ROCE_V1, "ll"),     gid(1, MESH_TL_VERBS_GID_ROCE_V2, "ll"),
        gid(2, MESH_TL_VERBS_GID_ROCE_V1, "v4"),     gid(3, MESH_TL_VERBS_GID_ROCE_V2, "v4"),
        gid(4, MESH_TL_VERBS_GID_ROCE_V2, "global"), gid(5, MESH_TL_VERBS_GID_ROCE_V2, "v4")};
    CHECK(mesh_tl_verbs_gid_pick(t, 6) == 3);
    CHECK(mesh_tl_verbs_gid_pick(t, 3) == 1); /* no v4-mapped v2: v2 link-local beats v1 */
    CHECK(mesh_tl_verbs_gid_pick(t + 4, 1) == 4);
    CHECK(mesh_tl_verbs_gid_pick(t, 1) == 0);
    mesh_tl_verbs_gid_t z[] = {gid(0, MESH_TL_VERBS_GID_ROCE_V2, "zero"),
                               gid(1, MESH_TL_VERBS_GID_IB, "ll")};
    CHECK(mesh_tl_verbs_gid_pick(z, 2) == 1);
    CHECK(mesh_tl_verbs_gid_pick(z, 1) == -1);
    CHECK(mesh_tl_verbs_gid_pick(z, 0) == -1);
    /* v2 IPv4-mapped preferred over v2 global IPv6 whatever the order */
    mesh_tl_verbs_gid_t o[] = {gid(7, MESH_TL_VERBS_GID_ROCE_V2, "global"),
                               gid(9, MESH_TL_VERBS_GID_ROCE_V2, "v4")};
    CHECK(mesh_tl_verbs_gid_pick(o, 2) == 9);
}

static void test_errors(void)
{
    char why[256];
    CHECK(mesh_tl_verbs_wc_status(IBV_WC_SUCCESS, 3, why, sizeof(why)) == MESH_OK);
    static const enum ibv_wc_status bad[] = {
        IBV_WC_RETRY_EXC_ERR,  IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR,
        IBV_WC_REM_ACCESS_ERR, IBV_WC_LOC_PROT_ERR,      IBV_WC_GENERAL_ERR,
        IBV_WC_REM_OP_ERR,     IBV_WC_RESP_TIMEOUT_ERR,  IBV_WC_FATAL_ERR};
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = 0;
        CHECK(mesh_tl_verbs_wc_status(bad[i], 7, why, sizeof(why)) == MESH_ERR_PEER_FAILED);
        CHECK_MSG(strncmp(why, "rank 7: ", 8) == 0, "%s", why);
        CHECK_MSG(strstr(why, ibv_wc_status_str(bad[i])) != NULL, "%s", why);
    }
    mesh_tl_verbs_wc_status(IBV_WC_RETRY_EXC_ERR, 12, why, sizeof(why));
    CHECK(strstr(why, "rank 12") && strstr(why, "dead or the link is down"));

    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_COMM_EST, 1, why, sizeof(why)) == MESH_OK);
    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_PORT_ACTIVE, -1, why, sizeof(why)) == MESH_OK);
    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_QP_FATAL, 5, why, sizeof(why)) ==
          MESH_ERR_PEER_FAILED);
    CHECK(strncmp(why, "rank 5: ", 8) == 0);
    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_QP_ACCESS_ERR, 6, why, sizeof(why)) ==
          MESH_ERR_PEER_FAILED);
    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_PORT_ERR, -1, why, sizeof(why)) ==
          MESH_ERR_PEER_FAILED);
    CHECK(strstr(why, "every peer lost"));
    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_DEVICE_FATAL, -1, why, sizeof(why)) ==
          MESH_ERR_PEER_FAILED);
    CHECK(mesh_tl_verbs_async_status(IBV_EVENT_CQ_ERR, -1, why, sizeof(why)) == MESH_ERR_IO);
}

int main(void)
{
    test_hca();
    test_gid();
    test_errors();
    printf("verbs select: ok\n");
    return 0;
}
