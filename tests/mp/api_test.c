/*
 * API behaviour under meshrun: argument validation, point-to-point in groups, nonblocking
 * requests, repeated calls (replayed schedules), split/dup, the node map and per-transport byte
 * counters.
 *   api_test [--expect-nodes K]
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, failures;
static mesh_comm_h comm;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

/* The call must fail with MESH_ERR_INVALID_ARG and a message that names `word`. */
#define EXPECT_INVALID(call, word)                                                                 \
    do {                                                                                           \
        mesh_status_t st_ = (call);                                                                \
        const char *msg_ = mesh_comm_last_error(comm);                                             \
        CHECK(st_ == MESH_ERR_INVALID_ARG, "%s returned %s", #call, mesh_status_string(st_));      \
        CHECK(strstr(msg_, word) != NULL, "message '%s' does not name '%s'", msg_, word);          \
    } while (0)

/* Counts and displacements whose sums wrap around size_t, impossible sizes and overlapping
 * receive blocks are refused on every v-collective, naming the argument; nothing is sent. */
static void test_layouts(void)
{
    int x[16] = {0}, y[16] = {0};
    size_t n = (size_t)size;
    size_t *wrap = calloc(n, sizeof(size_t)), *ones = calloc(n, sizeof(size_t));
    size_t *far = calloc(n, sizeof(size_t)), *zero = calloc(n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        ones[i] = 1;
        zero[i] = 0;
        /* two halves of the address space each: their sum wraps to a small number */
        wrap[i] = i % 2 ? SIZE_MAX / 2 + 2 : SIZE_MAX / 2;
        far[i] = SIZE_MAX - 1; /* a displacement whose end wraps */
    }
    if (n == 1)
        wrap[0] = SIZE_MAX; /* one rank: one count beyond any buffer */
    EXPECT_INVALID(mesh_allgatherv(comm, x, y, wrap, NULL, MESH_INT32, NULL, NULL), "recvcounts");
    EXPECT_INVALID(mesh_allgatherv(comm, x, y, ones, far, MESH_INT32, NULL, NULL), "displs");
    EXPECT_INVALID(mesh_reduce_scatterv(comm, x, y, wrap, MESH_INT32, MESH_SUM, NULL, NULL),
                   "recvcounts");
    EXPECT_INVALID(mesh_alltoallv(comm, x, wrap, NULL, y, ones, NULL, MESH_INT32, NULL, NULL),
                   "sendcounts");
    EXPECT_INVALID(mesh_alltoallv(comm, x, ones, NULL, y, wrap, NULL, MESH_INT32, NULL, NULL),
                   "recvcounts");
    EXPECT_INVALID(mesh_alltoallv(comm, x, ones, far, y, ones, NULL, MESH_INT32, NULL, NULL),
                   "sdispls");
    EXPECT_INVALID(mesh_alltoallv(comm, x, ones, NULL, y, ones, far, MESH_INT32, NULL, NULL),
                   "rdispls");
    /* a count beyond any memory is called too large, not an overlap or a failed allocation */
    EXPECT_INVALID(mesh_allreduce(comm, x, y, (size_t)1 << 60, MESH_INT32, MESH_SUM, NULL, NULL),
                   "too large");
    EXPECT_INVALID(mesh_allgather(comm, x, y, (size_t)1 << 50, MESH_INT32, NULL, NULL),
                   "sendcount");
    EXPECT_INVALID(mesh_alltoall(comm, x, y, (size_t)1 << 47, MESH_FP64, NULL, NULL), "count");
    EXPECT_INVALID(
        mesh_reduce_scatter(comm, x, y, (size_t)1 << 62, MESH_INT32, MESH_SUM, NULL, NULL),
        "recvcount");
    if (n >= 2) {
        /* two ranks' blocks written over each other */
        size_t *same = calloc(n, sizeof(size_t));
        for (size_t i = 0; i < n; i++)
            same[i] = i < 2 ? 0 : 2 * i;
        EXPECT_INVALID(mesh_allgatherv(comm, x, y, ones, same, MESH_INT32, NULL, NULL), "overlap");
        EXPECT_INVALID(mesh_alltoallv(comm, x, ones, NULL, y, ones, same, MESH_INT32, NULL, NULL),
                       "overlap");
        /* reading one block twice is fine: sends may share their source */
        free(same);
    }
    /* empty blocks overlap nothing: all at displacement 0 is a valid (empty) all-gather-v */
    CHECK(mesh_allgatherv(comm, x, y, zero, zero, MESH_INT32, NULL, NULL) == MESH_OK, "%s",
          mesh_comm_last_error(comm));
    free(wrap);
    free(ones);
    free(far);
    free(zero);
}

/* A communicator destroyed with a request pending: the request completes with
 * MESH_ERR_ABORTED and stays usable until freed; a second free or a wait after the free is
 * refused, not a crash. */
static void test_lifetime(void)
{
    mesh_comm_h dup;
    CHECK(mesh_comm_dup(comm, &dup) == MESH_OK, "dup: %s", mesh_comm_last_error(comm));
    size_t n = (size_t)1 << 20;
    float *x = calloc(n, sizeof(float));
    mesh_request_h r = NULL, done = NULL;
    int one = 1, sum = 0;
    CHECK(mesh_allreduce(dup, &one, &sum, 1, MESH_INT32, MESH_SUM, NULL, &done) == MESH_OK, "%s",
          mesh_comm_last_error(dup));
    CHECK(mesh_wait(done) == MESH_OK && sum == size, "small all-reduce on the copy");
    /* a receive nobody answers stays pending on every rank until the destroy */
    CHECK(mesh_recv_tagged(dup, x, n, MESH_FP32, (rank + 1) % size, 99, NULL, &r) == MESH_OK, "%s",
          mesh_comm_last_error(dup));
    CHECK(mesh_barrier(comm, NULL) == MESH_OK, "barrier");
    mesh_comm_destroy(dup);
    /* aborted by the destroy, or failed first because the peer destroyed its copy earlier (the
     * barrier's wait moves dup too) */
    int flag = 0;
    mesh_status_t st = mesh_test(r, &flag);
    CHECK(flag && (st == MESH_ERR_ABORTED || st == MESH_ERR_PEER_FAILED),
          "test after destroy: %s, done %d", mesh_status_string(st), flag);
    mesh_status_t again = mesh_wait(r);
    CHECK(again == st, "wait after destroy: %s, test said %s", mesh_status_string(again),
          mesh_status_string(st));
    CHECK(mesh_wait(done) == MESH_OK, "a request completed before the destroy keeps its status");
    mesh_request_free(r);
    mesh_request_free(done);
    mesh_request_free(r); /* refused, not a crash */
    CHECK(strstr(mesh_comm_last_error(NULL), "freed already") != NULL, "second free: '%s'",
          mesh_comm_last_error(NULL));
    CHECK(mesh_wait(r) == MESH_ERR_INVALID_ARG, "wait after free accepted");
    CHECK(strstr(mesh_comm_last_error(NULL), "freed already") != NULL, "%s",
          mesh_comm_last_error(NULL));
    free(x);
}

static void test_invalid_args(void)
{
    int x[16] = {0}, y[16 * 64];
    size_t counts[64];
    for (int i = 0; i < 64; i++)
        counts[i] = 1;
    mesh_request_h req;
    EXPECT_INVALID(mesh_allreduce(comm, NULL, y, 4, MESH_INT32, MESH_SUM, NULL, NULL), "sbuf");
    EXPECT_INVALID(mesh_allreduce(comm, x, NULL, 4, MESH_INT32, MESH_SUM, NULL, NULL), "rbuf");
    EXPECT_INVALID(mesh_allreduce(comm, x, y, 4, (mesh_dtype_t)99, MESH_SUM, NULL, NULL), "dtype");
    EXPECT_INVALID(mesh_allreduce(comm, x, y, 4, MESH_INT32, (mesh_op_t)77, NULL, NULL), "op");
    EXPECT_INVALID(mesh_allreduce(comm, x, y, SIZE_MAX / 2, MESH_INT32, MESH_SUM, NULL, NULL),
                   "count");
    EXPECT_INVALID(mesh_allreduce(comm, x, y, 4, MESH_INT32, MESH_SUM, (void *)1, NULL), "stream");
    EXPECT_INVALID(mesh_allreduce(comm, x, x + 1, 4, MESH_INT32, MESH_SUM, NULL, NULL), "overlap");
    EXPECT_INVALID(mesh_reduce(comm, x, y, 4, MESH_INT32, MESH_SUM, size, NULL, NULL), "root");
    EXPECT_INVALID(mesh_reduce(comm, x, y, 4, MESH_INT32, MESH_SUM, -1, NULL, NULL), "root");
    EXPECT_INVALID(mesh_broadcast(comm, x, y, 4, MESH_INT32, size + 3, NULL, NULL), "root");
    EXPECT_INVALID(mesh_broadcast(comm, x, NULL, 4, MESH_INT32, 0, NULL, NULL), "rbuf");
    EXPECT_INVALID(mesh_reduce_scatter(comm, NULL, y, 1, MESH_FP32, MESH_SUM, NULL, NULL), "sbuf");
    EXPECT_INVALID(mesh_reduce_scatterv(comm, x, y, NULL, MESH_FP32, MESH_SUM, NULL, NULL),
                   "recvcounts");
    EXPECT_INVALID(mesh_allgather(comm, x, NULL, 1, MESH_INT32, NULL, NULL), "rbuf");
    EXPECT_INVALID(mesh_allgatherv(comm, x, y, NULL, NULL, MESH_INT32, NULL, NULL), "recvcounts");
    EXPECT_INVALID(mesh_alltoall(comm, x, y, 1, (mesh_dtype_t)-1, NULL, NULL), "dtype");
    EXPECT_INVALID(mesh_alltoallv(comm, x, NULL, NULL, y, counts, NULL, MESH_INT32, NULL, NULL),
                   "sendcounts");
    EXPECT_INVALID(mesh_gather(comm, x, y, 1, MESH_INT32, -2, NULL, NULL), "root");
    EXPECT_INVALID(mesh_scatter(comm, x, NULL, 1, MESH_INT32, 0, NULL, NULL), "rbuf");
    EXPECT_INVALID(mesh_send(comm, x, 1, MESH_INT32, size, NULL, NULL), "peer");
    EXPECT_INVALID(mesh_recv(comm, NULL, 1, MESH_INT32, 0, NULL, NULL), "buf");
    EXPECT_INVALID(mesh_comm_split(comm, -5, 0, NULL), "newcomm");
    mesh_comm_h nc;
    EXPECT_INVALID(mesh_comm_split(comm, -5, 0, &nc), "color");
    EXPECT_INVALID(mesh_op_create_premul(comm, NULL, MESH_FP32, NULL), "scalar");
    EXPECT_INVALID(mesh_op_destroy(comm, (mesh_op_t)(MESH_OP_USER_BASE + 3)), "op");
    float two = 2;
    mesh_op_t pm;
    CHECK(mesh_op_create_premul(comm, &two, MESH_FP32, &pm) == MESH_OK, "premul");
    EXPECT_INVALID(mesh_allreduce(comm, x, y, 4, MESH_INT32, pm, NULL, NULL), "dtype");
    mesh_op_destroy(comm, pm);
    /* NULL communicator: the message is on the thread */
    CHECK(mesh_allreduce(NULL, x, y, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_ERR_INVALID_ARG,
          "NULL comm accepted");
    CHECK(strstr(mesh_comm_last_error(NULL), "comm") != NULL, "%s", mesh_comm_last_error(NULL));
    CHECK(mesh_wait(NULL) == MESH_ERR_INVALID_ARG, "wait(NULL)");
    CHECK(mesh_test(NULL, NULL) == MESH_ERR_INVALID_ARG, "test(NULL)");
    CHECK(mesh_group_end() == MESH_ERR_INVALID_ARG, "unbalanced group end");
    CHECK(mesh_comm_tl_bytes(comm, "nosuch", NULL, NULL) == MESH_ERR_NOT_FOUND, "tl bytes");
    (void)req;
    test_layouts();
    /* the communicator still works after all of that */
    int one = 1, sum = 0;
    CHECK(mesh_allreduce(comm, &one, &sum, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_OK, "%s",
          mesh_comm_last_error(comm));
    CHECK(sum == size, "sum %d", sum);
}

/* Every rank sends to every rank (itself too), receives posted first, in a group. */
static void test_group_p2p(size_t n)
{
    int *sbuf = malloc(sizeof(int) * n * size), *rbuf = malloc(sizeof(int) * n * size);
    for (int p = 0; p < size; p++)
        for (size_t i = 0; i < n; i++)
            sbuf[p * n + i] = (int)(rank * 1000003 + p * 101 + i);
    memset(rbuf, 0, sizeof(int) * n * size);
    mesh_group_start();
    for (int k = 0; k < size; k++) {
        int p = (rank + k) % size;
        mesh_recv(comm, rbuf + p * n, n, MESH_INT32, p, NULL, NULL);
    }
    for (int k = size - 1; k >= 0; k--) {
        int p = (rank + k) % size;
        mesh_send(comm, sbuf + p * n, n, MESH_INT32, p, NULL, NULL);
    }
    mesh_status_t st = mesh_group_end();
    CHECK(st == MESH_OK, "group p2p: %s %s", mesh_status_string(st), mesh_comm_last_error(comm));
    for (int p = 0; p < size && st == MESH_OK; p++)
        for (size_t i = 0; i < n; i++)
            if (rbuf[p * n + i] != (int)(p * 1000003 + rank * 101 + i)) {
                CHECK(0, "p2p n=%zu from %d element %zu: %d", n, p, i, rbuf[p * n + i]);
                break;
            }
    free(sbuf);
    free(rbuf);
}

/* Several nonblocking collectives in flight, waited for in reverse order. */
static void test_nonblocking(void)
{
    enum { K = 4, N = 100000 };
    static float in[K][N], out[K][N];
    mesh_request_h req[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++)
            in[k][i] = (float)(rank + k + i % 7);
        CHECK(mesh_allreduce(comm, in[k], out[k], N, MESH_FP32, MESH_SUM, NULL, &req[k]) == MESH_OK,
              "start %d", k);
    }
    for (int k = K - 1; k >= 0; k--) {
        CHECK(mesh_wait(req[k]) == MESH_OK, "wait %d: %s", k, mesh_comm_last_error(comm));
        mesh_request_free(req[k]);
        float want0 = (float)(size * (size - 1) / 2 + size * k);
        CHECK(out[k][0] == want0, "req %d: %g != %g", k, out[k][0], want0);
        CHECK(out[k][N - 1] == want0 + size * ((N - 1) % 7), "req %d tail", k);
    }
    int done = 0, v = rank, w = 0;
    mesh_request_h r;
    CHECK(mesh_allreduce(comm, &v, &w, 1, MESH_INT32, MESH_MAX, NULL, &r) == MESH_OK, "max");
    while (!done)
        CHECK(mesh_test(r, &done) == MESH_OK, "test");
    mesh_request_free(r);
    CHECK(w == size - 1, "max %d", w);
}

/* Calls that differ in one argument only (receive buffer, count, op, in place), more of them
 * than a communicator keeps finished schedules, taking turns: each must run on its own
 * arguments, with the data of this round. */
static void test_replay(void)
{
    enum { N = 33, CALLS = 6, ROUNDS = 4 };
    static int in[2][N], out[2][N];
    for (int round = 0; round < ROUNDS; round++) {
        for (int c = 0; c < CALLS; c++) {
            int *src = in[c == 2], *dst = c == 3 ? src : out[c == 1];
            int n = c == 4 ? N - 1 : N, base = round * 10 + c;
            mesh_op_t op = c == 5 ? MESH_MAX : MESH_SUM;
            for (int i = 0; i < N; i++) {
                src[i] = base + rank + i;
                if (dst != src)
                    dst[i] = -1;
            }
            mesh_status_t st =
                mesh_allreduce(comm, src, dst, (size_t)n, MESH_INT32, op, NULL, NULL);
            CHECK(st == MESH_OK, "replay round %d call %d: %s", round, c,
                  mesh_comm_last_error(comm));
            for (int i = 0; i < N; i++) {
                int want = op == MESH_MAX ? base + size - 1 + i
                                          : size * (base + i) + size * (size - 1) / 2;
                if (i >= n)
                    want = dst == src ? base + rank + i : -1;
                CHECK(dst[i] == want, "replay round %d call %d: element %d is %d, expected %d",
                      round, c, i, dst[i], want);
            }
        }
    }
    /* a reduce with MESH_AVG divides only at the root: elsewhere it runs as the sum on the same
     * buffers before it, and must not replay that call's graph, whose signature says sum */
    for (int round = 0; round < 2; round++) {
        for (int avg = 0; avg < 2; avg++) {
            for (int i = 0; i < N; i++) {
                in[0][i] = round * 100 + avg * 10 + i;
                out[0][i] = -1;
            }
            mesh_status_t st = mesh_reduce(comm, in[0], out[0], N, MESH_INT32,
                                           avg ? MESH_AVG : MESH_SUM, 0, NULL, NULL);
            CHECK(st == MESH_OK, "reduce %s round %d: %s", avg ? "avg" : "sum", round,
                  mesh_comm_last_error(comm));
            for (int i = 0; i < N && rank == 0; i++)
                CHECK(out[0][i] == (avg ? 1 : size) * in[0][i],
                      "reduce %s round %d: element %d is %d, expected %d", avg ? "avg" : "sum",
                      round, i, out[0][i], (avg ? 1 : size) * in[0][i]);
        }
    }
}

static void test_split(void)
{
    mesh_comm_h half = NULL, dup = NULL, none = (mesh_comm_h)1;
    int color = rank % 2;
    CHECK(mesh_comm_split(comm, color, -rank, &half) == MESH_OK, "split: %s",
          mesh_comm_last_error(comm));
    int expect = (size - color + 1) / 2;
    CHECK(mesh_comm_size(half) == expect, "split size %d != %d", mesh_comm_size(half), expect);
    /* key -rank reverses the order */
    CHECK(mesh_comm_rank(half) == expect - 1 - rank / 2, "split rank %d", mesh_comm_rank(half));
    int v = rank, sum = 0, want = 0;
    for (int r = color; r < size; r += 2)
        want += r;
    CHECK(mesh_allreduce(half, &v, &sum, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_OK, "%s",
          mesh_comm_last_error(half));
    CHECK(sum == want, "split sum %d != %d", sum, want);
    CHECK(mesh_comm_dup(comm, &dup) == MESH_OK, "dup");
    CHECK(mesh_comm_rank(dup) == rank && mesh_comm_size(dup) == size, "dup rank/size");
    CHECK(mesh_allreduce(dup, &v, &sum, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_OK, "dup ar");
    CHECK(sum == size * (size - 1) / 2, "dup sum %d", sum);
    CHECK(mesh_comm_split(comm, rank == 0 ? 0 : MESH_COLOR_NONE, 0, &none) == MESH_OK, "none");
    CHECK((rank == 0) == (none != NULL), "MESH_COLOR_NONE gives NULL");
    if (none)
        mesh_comm_destroy(none);
    mesh_comm_destroy(half);
    mesh_comm_destroy(dup);
}

static void test_node_map(int expect_nodes)
{
    int nodes = mesh_comm_node_count(comm);
    if (expect_nodes > 0)
        CHECK(nodes == expect_nodes, "nodes %d != %d", nodes, expect_nodes);
    int total = 0;
    for (int n = 0; n < nodes; n++)
        total += mesh_comm_local_size(comm, n);
    CHECK(total == size, "node sizes sum to %d", total);
    /* traffic to every peer, then check where the bytes went */
    uint64_t shm0, tcp0, shm1, tcp1;
    mesh_comm_tl_bytes(comm, "shm", &shm0, NULL);
    mesh_comm_tl_bytes(comm, "tcp", &tcp0, NULL);
    test_group_p2p(1000);
    mesh_comm_tl_bytes(comm, "shm", &shm1, NULL);
    mesh_comm_tl_bytes(comm, "tcp", &tcp1, NULL);
    int local_peers = 0, remote_peers = 0;
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        int same = mesh_comm_node(comm, p) == mesh_comm_node(comm, rank);
        const char *tl = mesh_comm_peer_transport(comm, p);
        CHECK(strcmp(tl, same ? "shm" : "tcp") == 0, "peer %d (same node %d) over %s", p, same, tl);
        local_peers += same;
        remote_peers += !same;
    }
    CHECK((shm1 - shm0) == (uint64_t)local_peers * 4000, "shm bytes %llu for %d local peers",
          (unsigned long long)(shm1 - shm0), local_peers);
    CHECK((tcp1 - tcp0) == (uint64_t)remote_peers * 4000, "tcp bytes %llu for %d remote peers",
          (unsigned long long)(tcp1 - tcp0), remote_peers);
}

int main(int argc, char **argv)
{
    int expect_nodes = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--expect-nodes") == 0 && i + 1 < argc)
            expect_nodes = atoi(argv[++i]);
    if (mesh_mp_init(&comm, &rank, &size))
        return 1;
    test_invalid_args();
    test_lifetime();
    test_group_p2p(1);
    test_group_p2p(300000);
    test_nonblocking();
    test_replay();
    test_split();
    test_node_map(expect_nodes);
    CHECK(mesh_barrier(comm, NULL) == MESH_OK, "final barrier");
    /* a rank that is done may leave while others still talk: that is no failure */
    if (size >= 3 && rank == 0) {
        printf("api_test: %d ranks ok (rank 0 left early)\n", size);
        fflush(stdout);
        _exit(failures ? 1 : 0);
    }
    if (size >= 3 && (rank == 1 || rank == 2)) {
        int v = -1;
        if (rank == 2) {
            usleep(700000);
            CHECK(mesh_send(comm, &rank, 1, MESH_INT32, 1, NULL, NULL) == MESH_OK, "late send");
        } else {
            CHECK(mesh_recv(comm, &v, 1, MESH_INT32, 2, NULL, NULL) == MESH_OK,
                  "receive after rank 0 left: %s", mesh_comm_last_error(comm));
            CHECK(v == 2, "late value %d", v);
        }
    }
    mesh_comm_destroy(comm);
    if (failures == 0 && rank == 0)
        printf("api_test: %d ranks ok\n", size);
    return failures ? 1 : 0;
}
