/* Environment bootstrap: MESH_RANK/SIZE/ADDR and torchrun's variables, set in each forked rank
 * before the library reads its configuration there. */
#include "tests/unit/test_bootstrap.h"

static int g_port;

static void clean_env(void)
{
    static const char *vars[] = {
        "MESH_RANK", "MESH_SIZE",      "MESH_ADDR",   "MESH_SECRET", "MESH_BOOTSTRAP_PORT_OFFSET",
        "RANK",      "WORLD_SIZE",     "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
        "PMIX_RANK", "PMIX_NAMESPACE", NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

static void setenv_int(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", v);
    CHECK(setenv(name, buf, 1) == 0);
}

static int run_env_rank(int rank, int size)
{
    mesh_bootstrap_t *bs = NULL;
    mesh_status_t st = mesh_bootstrap_env_create(30, &bs);
    if (st != MESH_OK) {
        fprintf(stderr, "rank %d/%d: env create failed: %s: %s\n", rank, size,
                mesh_status_string(st), mesh_error_last());
        return 1;
    }
    CHECK(bs->rank == rank && bs->size == size);
    int rc = tb_check_allgather(bs);
    bs->destroy(bs);
    return rc;
}

static int mesh_rank(int rank, int size, void *arg)
{
    char addr[64];
    clean_env();
    snprintf(addr, sizeof(addr), "%s:%d", (const char *)arg, g_port);
    setenv_int("MESH_RANK", rank);
    setenv_int("MESH_SIZE", size);
    CHECK(setenv("MESH_ADDR", addr, 1) == 0);
    return run_env_rank(rank, size);
}

static int torch_rank(int rank, int size, void *arg)
{
    clean_env();
    setenv_int("RANK", rank);
    setenv_int("LOCAL_RANK", rank);
    setenv_int("WORLD_SIZE", size);
    CHECK(setenv("MASTER_ADDR", "127.0.0.1", 1) == 0);
    setenv_int("MASTER_PORT", g_port);
    if (arg != NULL)
        CHECK(setenv("MESH_SECRET", "c0ffee", 1) == 0);
    return run_env_rank(rank, size);
}

/* Rank 1 presents a different MESH_SECRET: rank 0 refuses it and both time out. */
static int secret_rank(int rank, int size, void *arg)
{
    char addr[64];
    clean_env();
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", g_port);
    setenv_int("MESH_RANK", rank);
    setenv_int("MESH_SIZE", size);
    CHECK(setenv("MESH_ADDR", addr, 1) == 0);
    CHECK(setenv("MESH_SECRET", rank == 1 ? "other" : "mine", 1) == 0);
    mesh_bootstrap_t *bs = NULL;
    mesh_status_t st = mesh_bootstrap_env_create(2, &bs);
    CHECK_MSG(st == MESH_ERR_TIMEOUT || (rank == 1 && st == MESH_ERR_PEER_FAILED), "rank %d: %s",
              rank, mesh_status_string(st));
    return 0;
}

/* Each case runs in its own process: the configuration is read when the library first
 * looks at it there. */
static int errors_rank(int rank, int size, void *arg)
{
    mesh_bootstrap_t *bs = NULL;
    mesh_status_t st;
    const char *m;
    clean_env();
    switch (*(const int *)arg) {
    case 0:
        st = mesh_bootstrap_env_create(1, &bs);
        m = mesh_error_last();
        CHECK_MSG(st == MESH_ERR_NOT_FOUND, "%s", mesh_status_string(st));
        CHECK_MSG(strstr(m, "MESH_RANK") && strstr(m, "MESH_ADDR") && strstr(m, "WORLD_SIZE") &&
                      strstr(m, "MASTER_ADDR") && strstr(m, "MASTER_PORT"),
                  "%s", m);
        break;
    case 1:
        CHECK(setenv("MESH_RANK", "1", 1) == 0 && setenv("MESH_SIZE", "2", 1) == 0);
        st = mesh_bootstrap_env_create(1, &bs);
        CHECK_MSG(st == MESH_ERR_INVALID_ARG && strstr(mesh_error_last(), "MESH_ADDR"), "%s: %s",
                  mesh_status_string(st), mesh_error_last());
        break;
    case 2:
        CHECK(setenv("MESH_RANK", "2", 1) == 0 && setenv("MESH_SIZE", "2", 1) == 0);
        CHECK(setenv("MESH_ADDR", "127.0.0.1:1", 1) == 0);
        st = mesh_bootstrap_env_create(1, &bs);
        CHECK_MSG(st == MESH_ERR_INVALID_ARG &&
                      strstr(mesh_error_last(), "MESH_RANK=2 is not below MESH_SIZE=2"),
                  "%s: %s", mesh_status_string(st), mesh_error_last());
        break;
    case 3:
        CHECK(setenv("RANK", "0", 1) == 0 && setenv("WORLD_SIZE", "2", 1) == 0);
        st = mesh_bootstrap_env_create(1, &bs);
        CHECK_MSG(st == MESH_ERR_INVALID_ARG && strstr(mesh_error_last(), "MASTER_ADDR"), "%s: %s",
                  mesh_status_string(st), mesh_error_last());
        break;
    case 4: {
        /* MESH_SOCKET_IFNAME picks the interface of the unique id's address. */
        mesh_unique_id_t id;
        mesh_uid_layout_t u;
        CHECK(setenv("MESH_SOCKET_IFNAME", "lo", 1) == 0);
        CHECK(mesh_bootstrap_uid_create(&id) == MESH_OK);
        memcpy(&u, id.internal, sizeof(u));
        CHECK(u.family == AF_INET && u.addr[0] == 127 && u.port != 0);
        break;
    }
    case 5: {
        mesh_unique_id_t id;
        CHECK(setenv("MESH_SOCKET_IFNAME", "nosuchif", 1) == 0);
        st = mesh_bootstrap_uid_create(&id);
        CHECK_MSG(st == MESH_ERR_NOT_FOUND && strstr(mesh_error_last(), "nosuchif"), "%s",
                  mesh_error_last());
        break;
    }
    case 6:
        /* set, but to a bad value: said so, never "not set" */
        CHECK(setenv("MESH_RANK", "0", 1) == 0 && setenv("MESH_SIZE", "0", 1) == 0);
        CHECK(setenv("MESH_ADDR", "127.0.0.1:1", 1) == 0);
        st = mesh_bootstrap_env_create(1, &bs);
        CHECK_MSG(st == MESH_ERR_INVALID_ARG &&
                      strstr(mesh_error_last(), "MESH_SIZE=0 must be at least 1"),
                  "%s: %s", mesh_status_string(st), mesh_error_last());
        break;
    case 7:
        CHECK(setenv("RANK", "two", 1) == 0 && setenv("WORLD_SIZE", "2", 1) == 0);
        CHECK(setenv("MASTER_ADDR", "127.0.0.1", 1) == 0 && setenv("MASTER_PORT", "1", 1) == 0);
        st = mesh_bootstrap_env_create(1, &bs);
        CHECK_MSG(st == MESH_ERR_INVALID_ARG && strstr(mesh_error_last(), "RANK=two is not a rank"),
                  "%s: %s", mesh_status_string(st), mesh_error_last());
        break;
    case 8:
        CHECK(setenv("RANK", "0", 1) == 0 && setenv("WORLD_SIZE", "2", 1) == 0);
        CHECK(setenv("MASTER_ADDR", "127.0.0.1", 1) == 0 && setenv("MASTER_PORT", "x", 1) == 0);
        st = mesh_bootstrap_env_create(1, &bs);
        CHECK_MSG(st == MESH_ERR_INVALID_ARG &&
                      strstr(mesh_error_last(), "MASTER_PORT=x is not a port"),
                  "%s: %s", mesh_status_string(st), mesh_error_last());
        break;
    }
    CHECK(bs == NULL);
    return 0;
}

int main(void)
{
    static const int sizes[] = {1, 2, 3, 5, 8};
    alarm(2 * TB_WATCHDOG_S);

    for (int c = 0; c < 9; c++)
        CHECK_MSG(tb_run_ranks(1, errors_rank, &c, "env errors") == 0, "%d", c);
    printf("ok missing or partial launcher variables are reported; MESH_SOCKET_IFNAME works\n");

    for (int i = 0; i < 5; i++) {
        g_port = tb_free_port(0);
        CHECK_MSG(tb_run_ranks(sizes[i], mesh_rank, "127.0.0.1", "MESH_*") == 0, "%d ranks",
                  sizes[i]);
        printf("ok MESH_RANK/SIZE/ADDR, %d ranks on port %d\n", sizes[i], g_port);
    }
    g_port = tb_free_port(0);
    CHECK(tb_run_ranks(3, mesh_rank, "localhost", "MESH_* by name") == 0);
    printf("ok MESH_ADDR given as a host name\n");
    g_port = tb_free_port(0);
    CHECK(tb_run_ranks(3, mesh_rank, "[::1]", "MESH_* over IPv6") == 0);
    printf("ok MESH_ADDR given as [::1]:port\n");

    for (int i = 0; i < 5; i++) {
        /* Something (torch's store) already listens on MASTER_PORT: mesh uses the next port. */
        g_port = tb_free_port(1);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)g_port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int store = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(store >= 0 && bind(store, (struct sockaddr *)&a, sizeof(a)) == 0 &&
              listen(store, 8) == 0);
        CHECK_MSG(tb_run_ranks(sizes[i], torch_rank, i == 2 ? "secret" : NULL, "torchrun") == 0,
                  "%d ranks", sizes[i]);
        close(store);
        printf("ok torchrun variables, %d ranks, MASTER_PORT %d busy\n", sizes[i], g_port);
    }

    g_port = tb_free_port(0);
    CHECK(tb_run_ranks(2, secret_rank, NULL, "secret mismatch") == 0);
    printf("ok ranks with different MESH_SECRET do not join\n");
    return 0;
}
