/* Bootstrap faults: intruders are refused and logged while the real ranks succeed; a rank that
 * never joins, or dies, makes every other rank fail within the timeout naming it. */
#include "tests/unit/test_bootstrap.h"

#include <errno.h>

#define SHORT_TIMEOUT 2.0

static mesh_unique_id_t g_id;
static char g_dir[4096], g_log[4200];

enum { EXIT_JOINED = 0, EXIT_REFUSED = 3 };

static int expect_refused(mesh_status_t st, int rank)
{
    if (st == MESH_ERR_PEER_FAILED || st == MESH_ERR_TIMEOUT)
        return EXIT_REFUSED;
    fprintf(stderr, "intruder claiming rank %d: %s\n", rank, mesh_status_string(st));
    return 1;
}

/* A real rank; rank 0 also creates the id and hands it to the parent through the pipe in arg,
 * so that no other process holds the listener. A rank 1 with arg may be the refused duplicate. */
static int real_rank(int rank, int size, void *arg)
{
    mesh_bootstrap_t *bs = NULL;
    if (rank == 0) {
        if (!getenv("TB_NOLOG"))
            tb_stderr_to(g_log);
        CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
        CHECK(write(*(int *)arg, &g_id, sizeof(g_id)) == sizeof(g_id));
    }
    mesh_status_t st = mesh_bootstrap_tcp_create(&g_id, rank, size, 30, &bs);
    if (st != MESH_OK) {
        if (rank == 1 && arg != NULL)
            return expect_refused(st, rank); /* duplicate rank 1 */
        fprintf(stderr, "rank %d: %s: %s\n", rank, mesh_status_string(st), mesh_error_last());
        return 1;
    }
    int rc = tb_check_allgather(bs);
    bs->destroy(bs);
    return rc;
}

/* Presents a wrong secret (arg "secret") or a wrong size (arg "size"). */
static int intruder(int rank, int size, void *arg)
{
    mesh_unique_id_t id = g_id;
    mesh_uid_layout_t *u = (mesh_uid_layout_t *)id.internal;
    mesh_bootstrap_t *bs = NULL;
    rank = 1, size = 3;
    if (strcmp(arg, "secret") == 0)
        u->secret[7] ^= 1;
    else
        size = 6, rank = 5;
    return expect_refused(mesh_bootstrap_tcp_create(&id, rank, size, 5, &bs), rank);
}

static int raw_connect(void)
{
    mesh_uid_layout_t u;
    struct sockaddr_in a = {.sin_family = AF_INET};
    memcpy(&u, g_id.internal, sizeof(u));
    CHECK(u.family == AF_INET);
    a.sin_port = u.port;
    memcpy(&a.sin_addr, u.addr, 4);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    CHECK_MSG(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "%s", strerror(errno));
    return fd;
}

/* Sends bytes then waits until rank 0 closes the connection. */
static void raw_send_expect_close(const void *buf, size_t len)
{
    char c;
    int fd = raw_connect();
    CHECK(write(fd, buf, len) == (ssize_t)len);
    CHECK(read(fd, &c, 1) <= 0);
    close(fd);
}

static void test_intruders(void)
{
    int p[2], n = 3;
    pid_t root[3], ranks[6], bad[2];
    char want[3] = {1, 0, 0};
    CHECK(pipe(p) == 0);
    th_tmpdir(g_dir, sizeof(g_dir), "mesh-test-bootstrap");
    snprintf(g_log, sizeof(g_log), "%s/log", g_dir);
    tb_fork_ranks(n, want, real_rank, &p[1], root);
    CHECK(read(p[0], &g_id, sizeof(g_id)) == sizeof(g_id));

    /* Connections that never say anything, more than rank 0 keeps waiting on, must not hold up
     * the others. */
    int silent[70];
    for (int i = 0; i < 70; i++)
        silent[i] = raw_connect();
    tb_fork_ranks(1, NULL, intruder, "secret", &bad[0]);
    tb_fork_ranks(1, NULL, intruder, "size", &bad[1]);
    for (int i = 0; i < 2; i++) {
        int status;
        CHECK(waitpid(bad[i], &status, 0) == bad[i]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_REFUSED, "intruder %d", i);
    }
    char junk[48];
    memset(junk, 'x', sizeof(junk));
    raw_send_expect_close(junk, sizeof(junk));
    /* A well-formed hello with the right secret but a rank out of range. */
    struct {
        uint32_t magic, version;
        uint8_t secret[32];
        int32_t rank, size;
    } h = {htonl(0x6d42534cu), htonl(1), {0}, (int32_t)htonl(7), (int32_t)htonl(3)};
    memcpy(h.secret, ((mesh_uid_layout_t *)g_id.internal)->secret, 32);
    raw_send_expect_close(&h, sizeof(h));

    /* Rank 1 twice: exactly one joins. Rank 2 comes last so that rank 0 is still accepting. */
    want[0] = 0, want[1] = 1;
    tb_fork_ranks(n, want, real_rank, &p[1], &ranks[0]);
    usleep(300000);
    tb_fork_ranks(n, want, real_rank, &p[1], &ranks[3]);
    usleep(300000);
    want[1] = 0, want[2] = 1;
    pid_t r2[3];
    tb_fork_ranks(n, want, real_rank, NULL, r2);

    int status, ok = 0, refused = 0;
    for (int i = 1; i <= 4; i += 3) {
        CHECK(waitpid(ranks[i], &status, 0) == ranks[i] && WIFEXITED(status));
        ok += WEXITSTATUS(status) == EXIT_JOINED;
        refused += WEXITSTATUS(status) == EXIT_REFUSED;
    }
    CHECK_MSG(ok == 1 && refused == 1, "rank 1 twice: %d joined, %d refused", ok, refused);
    CHECK(tb_wait_ranks(1, &r2[2], "rank 2") == 0);
    CHECK(tb_wait_ranks(1, &root[0], "rank 0") == 0);
    for (int i = 0; i < 70; i++)
        close(silent[i]);
    close(p[0]);
    close(p[1]);

    const char *log = tb_slurp(g_log);
    unlink(g_log);
    rmdir(g_dir);
    CHECK_MSG(strstr(log, "wrong secret") != NULL, "log:\n%s", log);
    CHECK_MSG(strstr(log, "size 6, expected 3") != NULL, "log:\n%s", log);
    CHECK_MSG(strstr(log, "not a mesh hello") != NULL, "log:\n%s", log);
    CHECK_MSG(strstr(log, "rank 7 out of range") != NULL, "log:\n%s", log);
    CHECK_MSG(strstr(log, "rank 1 already joined") != NULL, "log:\n%s", log);
    CHECK_MSG(strstr(log, "no hello while 63 others wait") != NULL, "log:\n%s", log);
    CHECK_MSG(strstr(log, "refused bootstrap connection from 127.0.0.1:") != NULL ||
                  strstr(log, "refused bootstrap connection from ") != NULL,
              "log:\n%s", log);
    printf("ok wrong secret, wrong size, garbage, out-of-range and duplicate rank refused and "
           "logged; the real ranks succeeded\n");
}

/* Expects create (or, when a rank dies after create, the first allgather) to fail with st
 * naming the rank in name within the short timeout. */
struct expect {
    mesh_status_t st;
    const char *name;
    int die_rank;   /* this rank exits right after create (-1: none) */
    double timeout; /* 0: MESH_TIMEOUT, which main sets to SHORT_TIMEOUT */
};

static int failing_rank(int rank, int size, void *arg)
{
    const struct expect *e = arg;
    mesh_bootstrap_t *bs = NULL;
    double t0 = mesh_time();
    mesh_status_t st = mesh_bootstrap_tcp_create(&g_id, rank, size, e->timeout, &bs);
    if (e->die_rank >= 0) {
        CHECK_MSG(st == MESH_OK, "rank %d: %s", rank, mesh_error_last());
        if (rank == e->die_rank)
            _exit(0);
        int x = rank, all[size];
        st = mesh_bootstrap_allgather(bs, &x, all, sizeof(x));
    }
    double dt = mesh_time() - t0;
    const char *m = mesh_error_last();
    CHECK_MSG(st == e->st, "rank %d: got %s, want %s (%s)", rank, mesh_status_string(st),
              mesh_status_string(e->st), m);
    CHECK_MSG(strstr(m, e->name) != NULL, "rank %d: message lacks '%s': %s", rank, e->name, m);
    CHECK_MSG(dt < SHORT_TIMEOUT + 3, "rank %d took %.1f s", rank, dt);
    if (e->st == MESH_ERR_TIMEOUT)
        CHECK_MSG(dt >= SHORT_TIMEOUT - 0.1, "%.2f s", dt);
    if (bs) {
        /* Once failed, the bootstrap stays failed. */
        int x = 0, all[size];
        CHECK(mesh_bootstrap_allgather(bs, &x, all, sizeof(x)) < 0);
        bs->destroy(bs);
    }
    return 0;
}

static void run_failing(int n, const char *want, const struct expect *e, const char *what)
{
    pid_t pids[n];
    tb_fork_ranks(n, want, failing_rank, (void *)e, pids);
    CHECK_MSG(tb_wait_ranks(n, pids, what) == 0, "%s", what);
    printf("ok %s\n", what);
}

static void test_missing(void)
{
    /* Rank 3 of 4 never starts: ranks 0..2 time out (MESH_TIMEOUT) naming it. */
    struct expect e = {MESH_ERR_TIMEOUT, "rank 3 never joined", -1, 0};
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    run_failing(4, (const char[]){1, 1, 1, 0}, &e, "rank 3 of 4 never joins: others time out");

    /* Two of 5 missing: both named. */
    e.name = "ranks 2, 4 never joined";
    e.timeout = SHORT_TIMEOUT;
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    run_failing(5, (const char[]){1, 1, 0, 1, 0}, &e, "ranks 2 and 4 of 5 never join");

    /* Rank 0 never starts, nobody listens: connection attempts are retried until the deadline. */
    mesh_uid_layout_t u = {.magic = MESH_UID_MAGIC, .family = AF_INET};
    uint32_t lo = htonl(INADDR_LOOPBACK);
    u.port = htons((uint16_t)tb_free_port(0));
    memcpy(u.addr, &lo, 4);
    memcpy(g_id.internal, &u, sizeof(u));
    e.name = "rank 0";
    run_failing(3, (const char[]){0, 1, 1}, &e, "rank 0 never listens: others time out");

    /* Rank 0 never starts but its listener exists (held by this process): same outcome. */
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    run_failing(3, (const char[]){0, 1, 1}, &e, "rank 0 never accepts: others time out");
}

static void test_death(void)
{
    /* Rank 2 exits after joining: rank 0 and rank 1 fail the allgather naming rank 2. */
    struct expect e = {MESH_ERR_PEER_FAILED, "rank 2", 2, SHORT_TIMEOUT};
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    run_failing(3, NULL, &e, "rank 2 dies: ranks 0 and 1 name it");

    /* Rank 0 exits after joining: the others fail naming rank 0. */
    e.name = "rank 0";
    e.die_rank = 0;
    CHECK(mesh_bootstrap_uid_create(&g_id) == MESH_OK);
    run_failing(3, NULL, &e, "rank 0 dies: the others name it");
}

int main(void)
{
    alarm(2 * TB_WATCHDOG_S);
    signal(SIGPIPE, SIG_IGN);
    CHECK(setenv("MESH_TIMEOUT", "2", 1) == 0);
    test_intruders();
    test_missing();
    test_death();
    return 0;
}
