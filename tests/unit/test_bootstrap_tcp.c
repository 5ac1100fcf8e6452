/* Unique-id bootstrap: forked ranks join rank 0's listener and allgather exact blobs. */
#include "tests/unit/test_bootstrap.h"

static mesh_unique_id_t g_id;

static int rank_main(int rank, int size, void *arg)
{
    mesh_bootstrap_t *bs = NULL;
    mesh_status_t st = mesh_bootstrap_tcp_create(&g_id, rank, size, 30, &bs);
    if (st != MESH_OK) {
        fprintf(stderr, "rank %d/%d: create failed: %s: %s\n", rank, size, mesh_status_string(st),
                mesh_error_last());
        return 1;
    }
    CHECK(bs->rank == rank && bs->size == size);
    int rc = tb_check_allgather(bs);
    bs->destroy(bs);
    return rc;
}

/* Children are ranks 0..n-1; rank 0 finds the listener the parent created before forking. */
static void test_children(int n)
{
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    mesh_uid_layout_t u;
    memcpy(&u, g_id.internal, sizeof(u));
    CHECK(u.magic == MESH_UID_MAGIC && u.port != 0 && u.listener_token != 0);
    double t0 = mesh_time();
    CHECK_MSG(tb_run_ranks(n, rank_main, NULL, "uid children") == 0, "%d ranks", n);
    printf("ok uid path, %d ranks as children (%.2f s)\n", n, mesh_time() - t0);
}

/* The parent is rank 0 and the children the other ranks. */
static void test_parent_root(int n)
{
    pid_t pids[n];
    char want[n];
    memset(want, 1, sizeof(want));
    want[0] = 0;
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    tb_fork_ranks(n, want, rank_main, NULL, pids);
    CHECK(rank_main(0, n, NULL) == 0);
    CHECK(tb_wait_ranks(n, pids, "uid parent root") == 0);
    /* The listener is released with the bootstrap: the id cannot be used again on rank 0 here
     * through the token, and its port is free again. */
    printf("ok uid path, parent is rank 0 of %d\n", n);
}

/* An id made elsewhere (no listener in this process): rank 0 listens on the id's address. */
static void test_foreign_id(int n)
{
    mesh_uid_layout_t u = {.magic = MESH_UID_MAGIC, .family = AF_INET};
    int port = tb_free_port(0);
    u.port = htons((uint16_t)port);
    uint32_t lo = htonl(INADDR_LOOPBACK);
    memcpy(u.addr, &lo, 4);
    for (int i = 0; i < 32; i++)
        u.secret[i] = (uint8_t)(i * 37 + 5);
    u.listener_token = 0x1234567887654321ull;
    memset(&g_id, 0, sizeof(g_id));
    memcpy(g_id.internal, &u, sizeof(u));
    CHECK_MSG(tb_run_ranks(n, rank_main, NULL, "foreign id") == 0, "%d ranks", n);
    printf("ok id from another process, rank 0 listens on 127.0.0.1:%d\n", port);

    /* An address that is not on this host: rank 0 cannot serve it. */
    uint32_t far = htonl(0xcb00714d); /* 203.0.113.77, documentation range */
    memcpy(u.addr, &far, 4);
    memcpy(g_id.internal, &u, sizeof(u));
    mesh_bootstrap_t *bs = NULL;
    mesh_status_t st = mesh_bootstrap_tcp_create(&g_id, 0, 2, 2, &bs);
    CHECK_MSG(st == MESH_ERR_BOOTSTRAP, "got %s", mesh_status_string(st));
    CHECK_MSG(strstr(mesh_error_last(), "203.0.113.77") != NULL, "%s", mesh_error_last());
    printf("ok non-local id address refused on rank 0: %s\n", mesh_error_last());
}

static void test_bad_args(void)
{
    mesh_bootstrap_t *bs = NULL;
    mesh_unique_id_t junk;
    memset(&junk, 0x5a, sizeof(junk));
    CHECK(mesh_bootstrap_tcp_create(&junk, 0, 2, 1, &bs) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    CHECK(mesh_bootstrap_tcp_create(&g_id, 2, 2, 1, &bs) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_bootstrap_tcp_create(&g_id, -1, 2, 1, &bs) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_bootstrap_tcp_create(&g_id, 0, 0, 1, &bs) == MESH_ERR_INVALID_ARG);
    CHECK(bs == NULL);

    /* Address parsing. */
    mesh_sockaddr_t a;
    char buf[80];
    CHECK(mesh_sock_parse_addr("127.0.0.1:4567", &a) == MESH_OK);
    CHECK(strcmp(mesh_sock_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:4567") == 0);
    CHECK(mesh_sock_parse_addr("[::1]:99", &a) == MESH_OK);
    CHECK(strcmp(mesh_sock_addr_str(&a, buf, sizeof(buf)), "[::1]:99") == 0);
    CHECK(mesh_sock_parse_addr("localhost:7", &a) == MESH_OK);
    CHECK(strcmp(mesh_sock_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:7") == 0);
    CHECK(mesh_sock_parse_addr("10.1.2.3", &a) == MESH_OK);
    CHECK(strcmp(mesh_sock_addr_str(&a, buf, sizeof(buf)), "10.1.2.3:0") == 0);
    CHECK(mesh_sock_parse_addr("::1", &a) == MESH_OK);
    CHECK(strcmp(mesh_sock_addr_str(&a, buf, sizeof(buf)), "[::1]:0") == 0);
    CHECK(mesh_sock_parse_addr("1.2.3.4:70000", &a) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_sock_parse_addr("1.2.3.4:x", &a) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_sock_parse_addr("[::1", &a) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_sock_parse_addr(":80", &a) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_sock_parse_addr("no-such-host.invalid:1", &a) == MESH_ERR_NOT_FOUND);
    CHECK(strstr(mesh_error_last(), "no-such-host.invalid") != NULL);
    CHECK(mesh_sock_local_addr(&a) == MESH_OK);
    printf("ok argument checks; local address %s\n", mesh_sock_addr_str(&a, buf, sizeof(buf)));
}

int main(void)
{
    static const int sizes[] = {1, 2, 3, 5, 8};
    alarm(2 * TB_WATCHDOG_S);
    test_bad_args();
    for (int i = 0; i < 5; i++)
        test_children(sizes[i]);
    test_parent_root(3);
    test_parent_root(1);
    test_foreign_id(3);
    return 0;
}
