/*
 * verbs on a device. Without an RDMA device with an active port (this includes every machine
 * without /sys/class/infiniband) it checks that the transport says so: usable() is 0 with a
 * reason, open() fails naming it, a malformed MESH_IB_HCA is reported; then it exits 77. With a
 * device, two interfaces of one process (ranks 0 and 1 of one communicator) connect over their
 * UD wire-up and exchange inline, eager and rendezvous messages both ways with exact contents,
 * an unexpected message, a receive posted first, and a truncated receive.
 */
#include "config.h"
#include "transports/tl.h"
#include "transports/verbs/verbs.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "tests/harness/harness.h"
#include <stdlib.h>
#include <string.h>

static const mesh_tl_ops_t *ops;
static mesh_tl_iface_t *ifc[2];
static mesh_tl_ep_t *ep[2];

static void wait_op(mesh_tl_op_t *op)
{
    double until = mesh_time() + 20;
    while (op->status == MESH_INPROGRESS) {
        ops->progress(ifc[0]);
        ops->progress(ifc[1]);
        CHECK(mesh_time() < until);
    }
}

/* the same two buffers for every transfer, so that MESH_IB_RCACHE_MAX > 0 hits its cache */
enum { XFER_MAX = 4 << 20 };
static unsigned char *s, *r;

static void xfer(int from, size_t len, int recv_first)
{
    int to = 1 - from;
    for (size_t i = 0; i < len; i++)
        s[i] = (unsigned char)(i * 7 + len + from);
    memset(r, 0xee, len + 1);
    mesh_tl_op_t so = {0}, ro = {0};
    uint64_t tag = MESH_TL_TAG_EXACT | (1000 + len);
    if (recv_first)
        CHECK(mesh_tl_irecv(ep[to], tag, r, len, &ro) == MESH_OK);
    CHECK(mesh_tl_isend(ep[from], tag, s, len, &so) == MESH_OK);
    if (!recv_first) {
        /* let it arrive unexpected */
        for (int i = 0; i < 1000; i++) {
            ops->progress(ifc[0]);
            ops->progress(ifc[1]);
        }
        CHECK(mesh_tl_irecv(ep[to], tag, r, len, &ro) == MESH_OK);
    }
    wait_op(&so);
    wait_op(&ro);
    CHECK_MSG(so.status == MESH_OK && ro.status == MESH_OK, "len %zu: %d %d", len, so.status,
              ro.status);
    size_t bad = 0;
    while (bad < len && s[bad] == r[bad])
        bad++;
    CHECK_MSG(ro.length == len && bad == len && r[len] == 0xee,
              "len %zu from %d, receive %s: got %zu bytes, first wrong byte at %zu, guard %#x", len,
              from, recv_first ? "first" : "late", ro.length, bad, r[len]);
}

int main(void)
{
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    ops = mesh_tl_find("verbs");
    CHECK(ops != NULL);
    CHECK(strcmp(ops->name, "verbs") == 0 && ops->config != NULL);
    mesh_tl_open_params_t p = {
        .rank = 0, .size = 2, .comm_uid = 0x1234567890abcdefull, .node = "n", .timeout_s = 20};
    if (!ops->usable()) {
        const char *why = mesh_tl_unusable_reason();
        printf("verbs not usable here: %s\n", why);
        CHECK(why[0] != 0);
        CHECK(strstr(why, "rdma") || strstr(why, "port"));
        mesh_error_clear();
        CHECK(ops->open(&p, &ifc[0]) < 0);
        CHECK_MSG(strstr(mesh_error_last(), why) != NULL, "%s", mesh_error_last());
        return MESH_TEST_SKIP;
    }
    for (int r = 0; r < 2; r++) {
        p.rank = r;
        CHECK(ops->open(&p, &ifc[r]) == MESH_OK);
    }
    unsigned char addr[2][MESH_TL_ADDR_MAX];
    size_t alen[2];
    for (int r = 0; r < 2; r++) {
        alen[r] = MESH_TL_ADDR_MAX;
        CHECK(ops->address(ifc[r], addr[r], &alen[r]) == MESH_OK);
    }
    for (int r = 0; r < 2; r++) {
        mesh_tl_peer_t peer = {
            .rank = 1 - r, .node = "n", .addr = addr[1 - r], .addr_len = alen[1 - r]};
        CHECK(ops->reachable(ifc[r], &peer));
        CHECK(ops->ep_create(ifc[r], &peer, &ep[r]) == MESH_OK);
    }
    double until = mesh_time() + 20;
    for (;;) {
        ops->progress(ifc[0]);
        ops->progress(ifc[1]);
        if (((mesh_tl_verbs_ep_t *)ep[0])->state == MESH_TL_VERBS_CONN_READY &&
            ((mesh_tl_verbs_ep_t *)ep[1])->state == MESH_TL_VERBS_CONN_READY)
            break;
        CHECK(mesh_time() < until);
    }
    CHECK(ops->wireup(ifc[0], mesh_time() + 1) == MESH_OK);
    CHECK(ops->wireup(ifc[1], mesh_time() + 1) == MESH_OK);
    s = malloc(XFER_MAX + 1);
    r = malloc(XFER_MAX + 1);
    CHECK(s != NULL && r != NULL);
    static const size_t sizes[] = {0, 1, 100, 8000, 8168, 8169, 65536 + 3, XFER_MAX};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int from = 0; from < 2; from++)
            for (int first = 0; first < 2; first++)
                xfer(from, sizes[i], first);
    /* many eager messages outrun the credits and still arrive in order per tag */
    enum { N = 200 };
    static int sv[N], rv[N];
    static mesh_tl_op_t so[N], ro[N];
    for (int i = 0; i < N; i++) {
        sv[i] = i * 3;
        CHECK(mesh_tl_isend(ep[0], MESH_TL_TAG_EXACT | 7, &sv[i], sizeof(int), &so[i]) == MESH_OK);
    }
    for (int i = 0; i < N; i++)
        CHECK(mesh_tl_irecv(ep[1], MESH_TL_TAG_EXACT | 7, &rv[i], sizeof(int), &ro[i]) == 0);
    for (int i = 0; i < N; i++) {
        wait_op(&so[i]);
        wait_op(&ro[i]);
        CHECK(ro[i].status == MESH_OK && rv[i] == i * 3);
    }
    /* a receive smaller than the message fails with MESH_ERR_TRUNCATED and writes nothing past
     * its 10 bytes; the sender completes */
    char big[20000] = {0}, small[16];
    memset(small, 0x5a, sizeof(small));
    mesh_tl_op_t bs, br;
    CHECK(mesh_tl_irecv(ep[1], MESH_TL_TAG_EXACT | 9, small, 10, &br) == MESH_OK);
    CHECK(mesh_tl_isend(ep[0], MESH_TL_TAG_EXACT | 9, big, sizeof(big), &bs) == MESH_OK);
    wait_op(&bs);
    wait_op(&br);
    CHECK(bs.status == MESH_OK && br.status == MESH_ERR_TRUNCATED);
    for (int i = 10; i < (int)sizeof(small); i++)
        CHECK(small[i] == 0x5a);
    for (int r = 0; r < 2; r++)
        ops->ep_destroy(ep[r]);
    for (int r = 0; r < 2; r++)
        ops->close(ifc[r]);
    free(s);
    free(r);
    printf("verbs device: ok\n");
    return 0;
}
