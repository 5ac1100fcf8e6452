/* Out-of-band bootstrap: the user's allgather over shared memory, and over pipes relayed by a
 * parent process, as a runtime would provide it. */
#include "tests/unit/test_bootstrap.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define SHM_DATA (8u << 20)

typedef struct {
    atomic_int arrived;
    atomic_int gen;
    char data[];
} shm_area_t;

typedef struct {
    shm_area_t *shm;
    int rank, size;
    int up, down; /* pipes to and from the relay */
    int fail_at;  /* call index that returns an error (-1: never) */
    int calls;
} oob_ctx_t;

static shm_area_t *g_shm;

static void shm_barrier(oob_ctx_t *c)
{
    int g = atomic_load(&c->shm->gen);
    if (atomic_fetch_add(&c->shm->arrived, 1) == c->size - 1) {
        atomic_store(&c->shm->arrived, 0);
        atomic_fetch_add(&c->shm->gen, 1);
    } else {
        while (atomic_load(&c->shm->gen) == g)
            sched_yield();
    }
}

static int shm_allgather(const void *in, void *out, size_t len, void *ctx)
{
    oob_ctx_t *c = ctx;
    if (c->calls++ == c->fail_at)
        return -42;
    if (len * (size_t)c->size > SHM_DATA)
        return 1;
    memcpy(c->shm->data + (size_t)c->rank * len, in, len);
    shm_barrier(c);
    memcpy(out, c->shm->data, len * (size_t)c->size);
    shm_barrier(c);
    return 0;
}

static int full_io(ssize_t (*io)(int, void *, size_t), int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = io(fd, p, len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static ssize_t write_io(int fd, void *buf, size_t len)
{
    return write(fd, buf, len);
}

/* Each rank writes (len, blob) up; the relay answers with all blobs. */
static int pipe_allgather(const void *in, void *out, size_t len, void *ctx)
{
    oob_ctx_t *c = ctx;
    uint64_t l = len;
    if (full_io(write_io, c->up, &l, sizeof(l)) || full_io(write_io, c->up, (void *)in, len))
        return 2;
    if (full_io(read, c->down, out, len * (size_t)c->size))
        return 3;
    return 0;
}

static int oob_rank(int rank, int size, void *arg)
{
    oob_ctx_t *c = arg;
    c->rank = rank;
    mesh_bootstrap_t *bs = NULL;
    mesh_oob_allgather_fn fn = c->shm ? shm_allgather : pipe_allgather;
    CHECK(mesh_bootstrap_oob_create(fn, c, rank, size, 5, &bs) == MESH_OK);
    CHECK(bs->rank == rank && bs->size == size);
    int rc = tb_check_allgather(bs);
    if (rc == 0 && c->fail_at >= 0) {
        c->fail_at = c->calls;
        int x = 0, all[size];
        mesh_status_t st = mesh_bootstrap_allgather(bs, &x, all, sizeof(x));
        CHECK_MSG(st == MESH_ERR_BOOTSTRAP && strstr(mesh_error_last(), "-42"), "%s",
                  mesh_error_last());
    }
    bs->destroy(bs);
    return rc;
}

static void test_shm(int n, int fail)
{
    memset(g_shm, 0, sizeof(*g_shm));
    oob_ctx_t c = {.shm = g_shm, .size = n, .fail_at = fail ? 1 << 30 : -1};
    CHECK_MSG(tb_run_ranks(n, oob_rank, &c, "oob shm") == 0, "%d ranks", n);
    printf("ok oob over shared memory, %d ranks%s\n", n, fail ? ", failing callback" : "");
}

static void test_pipes(int n)
{
    int up[n][2], down[n][2];
    pid_t pids[n];
    for (int r = 0; r < n; r++)
        CHECK(pipe(up[r]) == 0 && pipe(down[r]) == 0);
    for (int r = 0; r < n; r++) {
        oob_ctx_t c = {.size = n, .up = up[r][1], .down = down[r][0], .fail_at = -1};
        char want[n];
        memset(want, 0, sizeof(want));
        want[r] = 1;
        pid_t p[n];
        tb_fork_ranks(n, want, oob_rank, &c, p);
        pids[r] = p[r];
        close(up[r][1]);
        close(down[r][0]);
    }
    /* Relay rounds until every rank has closed its pipe. */
    for (;;) {
        uint64_t len = 0;
        char *all = NULL;
        int eof = 0;
        for (int r = 0; r < n; r++) {
            uint64_t l;
            if (full_io(read, up[r][0], &l, sizeof(l))) {
                eof++;
                continue;
            }
            CHECK(r == 0 || l == len);
            len = l;
            if (all == NULL)
                CHECK((all = malloc(len * (size_t)n + 1)) != NULL);
            CHECK(full_io(read, up[r][0], all + (size_t)r * len, len) == 0);
        }
        if (eof) {
            CHECK_MSG(eof == n, "%d of %d ranks left early", eof, n);
            free(all);
            break;
        }
        for (int r = 0; r < n; r++)
            CHECK(full_io(write_io, down[r][1], all, len * (size_t)n) == 0);
        free(all);
    }
    CHECK(tb_wait_ranks(n, pids, "oob pipes") == 0);
    for (int r = 0; r < n; r++) {
        close(up[r][0]);
        close(down[r][1]);
    }
    printf("ok oob over pipes relayed by the parent, %d ranks\n", n);
}

int main(void)
{
    static const int sizes[] = {1, 2, 3, 5, 8};
    alarm(2 * TB_WATCHDOG_S);
    g_shm = mmap(NULL, sizeof(shm_area_t) + SHM_DATA, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(g_shm != MAP_FAILED);
    for (int i = 0; i < 5; i++)
        test_shm(sizes[i], 0);
    test_shm(3, 1);
    test_pipes(3);
    test_pipes(5);

    mesh_bootstrap_t *bs = NULL;
    CHECK(mesh_bootstrap_oob_create(NULL, NULL, 0, 1, 1, &bs) == MESH_ERR_INVALID_ARG);
    CHECK(mesh_bootstrap_oob_create(shm_allgather, NULL, 1, 1, 1, &bs) == MESH_ERR_INVALID_ARG);
    CHECK(bs == NULL);
    return 0;
}
