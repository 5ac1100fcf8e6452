/*
 * Progress across communicators and tagged point-to-point, under meshrun:
 *   cross    each rank blocks on one communicator while its peers need it on another
 *   tags     messages match by (peer, tag) in posting order per tag; bad tags are refused
 *   anyall   mesh_waitall and mesh_testany over requests of two communicators
 *   events   mesh_testany_events: a large message between ranks 0 and 1 moves over rounds
 *            that complete nothing yet report events (over TCP, whose socket buffers hold a
 *            few MB); no request under way, no events
 *   thread   with MESH_PROGRESS_THREAD=1, a nonblocking operation completes while the caller
 *            sleeps
 *   shared   one thread posts on a communicator while another waits on its requests
 *   idle     ranks that wait a second for rank 0 (blocking, mesh_wait, a mesh_testany_events
 *            loop that waits with mesh_idle, and with a progress thread while the caller
 *            sleeps) use under 20% of a core meanwhile (getrusage)
 *   progress_test MODE...
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int rank, size, failures;
static mesh_comm_h world;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)
#define OK(call)                                                                                   \
    do {                                                                                           \
        mesh_status_t st_ = (call);                                                                \
        CHECK(st_ == MESH_OK, "%s: %s (%s)", #call, mesh_status_string(st_),                       \
              mesh_comm_last_error(NULL));                                                         \
    } while (0)

/* Large enough that a ring all-reduce takes many steps: it cannot finish in the moves a call
 * makes when it starts. */
#define BIG (1u << 20)

static void fill(float *x, size_t n, int r, int salt)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((r + 1) * (salt + 1) + (int)(i % 7));
}

static void check_sum(const float *x, size_t n, int salt, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < size; r++)
            want += (float)((r + 1) * (salt + 1) + (int)(i % 7));
        if (x[i] != want) {
            CHECK(0, "%s: element %zu is %g, expected %g", what, i, x[i], want);
            return;
        }
    }
}

/* Even ranks start an all-reduce on a and block on b; odd ranks start one on b and block on a.
 * Each blocked rank's peers need it to move the communicator it is not blocked on. */
static void test_cross(void)
{
    mesh_comm_h a, b;
    OK(mesh_comm_dup(world, &a));
    OK(mesh_comm_dup(world, &b));
    float *xa = malloc(BIG * sizeof(float)), *xb = malloc(BIG * sizeof(float));
    fill(xa, BIG, rank, 1);
    fill(xb, BIG, rank, 2);
    mesh_comm_h first = rank % 2 == 0 ? a : b, second = rank % 2 == 0 ? b : a;
    float *xf = rank % 2 == 0 ? xa : xb, *xs = rank % 2 == 0 ? xb : xa;
    mesh_request_h req;
    OK(mesh_allreduce(first, xf, xf, BIG, MESH_FP32, MESH_SUM, NULL, &req));
    OK(mesh_allreduce(second, xs, xs, BIG, MESH_FP32, MESH_SUM, NULL, NULL));
    OK(mesh_wait(req));
    mesh_request_free(req);
    check_sum(xa, BIG, 1, "all-reduce on the first communicator");
    check_sum(xb, BIG, 2, "all-reduce on the second communicator");
    /* the same with point-to-point: a receive on one communicator whose send waits behind a
     * blocking receive of the peer on the other */
    if (size >= 2 && rank < 2) {
        int peer = 1 - rank;
        mesh_request_h s;
        OK(mesh_send(rank == 0 ? a : b, xa, BIG, MESH_FP32, peer, NULL, &s));
        OK(mesh_recv(rank == 0 ? b : a, xb, BIG, MESH_FP32, peer, NULL, NULL));
        OK(mesh_wait(s));
        mesh_request_free(s);
        check_sum(xb, BIG, 1, "message received while blocked on the other communicator");
    }
    free(xa);
    free(xb);
    mesh_comm_destroy(a);
    mesh_comm_destroy(b);
}

static void expect_invalid(mesh_status_t st, const char *call, const char *word)
{
    const char *msg = mesh_comm_last_error(world);
    CHECK(st == MESH_ERR_INVALID_ARG, "%s returned %s", call, mesh_status_string(st));
    CHECK(strstr(msg, word) != NULL, "%s: message '%s' does not name '%s'", call, msg, word);
}

static void test_tags(void)
{
    int x = 0;
    expect_invalid(mesh_send_tagged(world, &x, 1, MESH_INT32, 0, -1, NULL, NULL),
                   "mesh_send_tagged(tag -1)", "tag -1");
    expect_invalid(mesh_recv_tagged(world, &x, 1, MESH_INT32, 0, MESH_TAG_MAX + 1, NULL, NULL),
                   "mesh_recv_tagged(tag MESH_TAG_MAX + 1)", "tag");
    expect_invalid(mesh_sendrecv(world, &x, 1, size, &x, 1, 0, MESH_INT32, 0, NULL, NULL),
                   "mesh_sendrecv(dst size)", "dst");
    expect_invalid(mesh_sendrecv(world, &x, 1, 0, &x, 1, -1, MESH_INT32, 0, NULL, NULL),
                   "mesh_sendrecv(src -1)", "src");

    /* a ring exchange in one call, with a tag, small and large */
    for (size_t n = 1; n <= BIG; n *= 1024) {
        int *s = malloc(n * sizeof(int)), *r = malloc(n * sizeof(int));
        for (size_t i = 0; i < n; i++)
            s[i] = rank * 1000 + (int)(i % 1000);
        OK(mesh_sendrecv(world, s, n, (rank + 1) % size, r, n, (rank + size - 1) % size, MESH_INT32,
                         3, NULL, NULL));
        int left = (rank + size - 1) % size;
        for (size_t i = 0; i < n; i++)
            if (r[i] != left * 1000 + (int)(i % 1000)) {
                CHECK(0, "sendrecv of %zu: element %zu is %d", n, i, r[i]);
                break;
            }
        free(s);
        free(r);
    }
    if (size < 2 || rank > 1)
        return;

    /* rank 0 sends tags 5, 7, 5, 0, 7 (small and large); rank 1 receives 7 first */
    static const int tags[] = {5, 7, 5, 0, MESH_TAG_MAX};
    enum { NMSG = 5 };
    size_t lens[NMSG] = {4, BIG, 1000, 17, 3};
    int *bufs[NMSG];
    for (int m = 0; m < NMSG; m++) {
        bufs[m] = malloc(lens[m] * sizeof(int));
        for (size_t i = 0; i < lens[m]; i++)
            bufs[m][i] = rank == 0 ? m * 100000 + (int)i : -1;
    }
    if (rank == 0) {
        mesh_request_h reqs[NMSG];
        for (int m = 0; m < NMSG; m++)
            OK(mesh_send_tagged(world, bufs[m], lens[m], MESH_INT32, 1, tags[m], NULL, &reqs[m]));
        OK(mesh_waitall(NMSG, reqs));
        for (int m = 0; m < NMSG; m++)
            mesh_request_free(reqs[m]);
    } else {
        /* receive in another order than sent: the large tag-7 message first, then the last,
         * then tag 0, then both tag-5 messages in their order */
        static const int order[NMSG] = {1, 4, 3, 0, 2};
        for (int k = 0; k < NMSG; k++) {
            int m = order[k];
            OK(mesh_recv_tagged(world, bufs[m], lens[m], MESH_INT32, 0, tags[m], NULL, NULL));
            for (size_t i = 0; i < lens[m]; i++)
                if (bufs[m][i] != m * 100000 + (int)i) {
                    CHECK(0, "message %d (tag %d): element %zu is %d", m, tags[m], i, bufs[m][i]);
                    break;
                }
        }
    }
    for (int m = 0; m < NMSG; m++)
        free(bufs[m]);
}

static void test_anyall(void)
{
    mesh_comm_h other;
    OK(mesh_comm_dup(world, &other));
    enum { N = 6 };
    float *x[N];
    mesh_request_h reqs[N];
    for (int i = 0; i < N; i++) {
        size_t n = i % 2 ? BIG : 100;
        x[i] = malloc(n * sizeof(float));
        fill(x[i], n, rank, i);
        OK(mesh_allreduce(i % 3 ? world : other, x[i], x[i], n, MESH_FP32, MESH_SUM, NULL,
                          &reqs[i]));
    }
    int seen[N] = {0}, left = N;
    while (left > 0) {
        int idx;
        mesh_status_t st = mesh_testany(N, reqs, &idx);
        CHECK(st == MESH_OK, "mesh_testany: %s", mesh_status_string(st));
        if (st != MESH_OK)
            break;
        if (idx < 0)
            continue;
        CHECK(!seen[idx], "request %d reported twice", idx);
        seen[idx] = 1;
        left--;
        mesh_request_free(reqs[idx]);
        reqs[idx] = NULL;
    }
    for (int i = 0; i < N; i++) {
        check_sum(x[i], i % 2 ? BIG : 100, i, "all-reduce finished through mesh_testany");
        free(x[i]);
    }
    int idx = 7;
    OK(mesh_testany(N, reqs, &idx));
    CHECK(idx == -1, "mesh_testany over no request set index %d", idx);
    OK(mesh_waitall(N, reqs));

    /* mesh_waitall over both communicators */
    for (int i = 0; i < N; i++) {
        x[i] = malloc(BIG * sizeof(float));
        fill(x[i], BIG, rank, i);
        OK(mesh_allreduce(i % 2 ? world : other, x[i], x[i], BIG, MESH_FP32, MESH_SUM, NULL,
                          &reqs[i]));
    }
    OK(mesh_waitall(N, reqs));
    for (int i = 0; i < N; i++) {
        check_sum(x[i], BIG, i, "all-reduce finished through mesh_waitall");
        mesh_request_free(reqs[i]);
        free(x[i]);
    }
    mesh_comm_destroy(other);
}

static void test_events(void)
{
    enum { LEN = 64 << 20 };
    int idx = 7, events = 7;
    OK(mesh_testany_events(0, NULL, &idx, &events));
    CHECK(idx == -1 && events == 0, "no request: index %d, events %d", idx, events);
    CHECK(mesh_testany_events(0, NULL, NULL, &events) == MESH_ERR_INVALID_ARG,
          "a NULL index is refused");
    if (rank > 1)
        return;
    char *buf = malloc(LEN);
    CHECK(buf != NULL, "malloc");
    if (buf == NULL)
        return;
    memset(buf, rank ? 0 : 0x5a, LEN);
    mesh_request_h req[1];
    OK(rank == 0 ? mesh_send(world, buf, LEN, MESH_UINT8, 1, NULL, &req[0])
                 : mesh_recv(world, buf, LEN, MESH_UINT8, 0, NULL, &req[0]));
    long moving = 0, quiet = 0;
    for (;;) {
        mesh_status_t st = mesh_testany_events(1, req, &idx, &events);
        CHECK(st == MESH_OK, "mesh_testany_events: %s", mesh_status_string(st));
        if (st != MESH_OK)
            break;
        if (idx == 0) {
            CHECK(events > 0, "the round that completed the request reported %d events", events);
            break;
        }
        CHECK(idx == -1 && events >= 0, "index %d, events %d", idx, events);
        if (events > 0)
            moving++;
        else
            quiet++;
    }
    mesh_request_free(req[0]);
    /* a round moves at most 8 MiB each way on one TCP stream: 64 MiB take several */
    CHECK(moving > 0, "no round reported data moving before the completion (%ld quiet)", quiet);
    size_t bad = 0;
    for (size_t i = 0; rank == 1 && i < LEN; i++)
        bad += buf[i] != 0x5a;
    CHECK(bad == 0, "%zu bytes received wrong", bad);
    req[0] = NULL;
    OK(mesh_testany_events(1, req, &idx, &events));
    CHECK(idx == -1 && events == 0, "a freed slot: index %d, events %d", idx, events);
    free(buf);
}

/* Started, then left alone: the progress thread must finish it. */
static void test_thread(void)
{
    const char *v = getenv("MESH_PROGRESS_THREAD");
    int on = v != NULL && strcmp(v, "1") == 0;
    float *x = malloc(BIG * sizeof(float));
    fill(x, BIG, rank, 4);
    mesh_request_h req;
    OK(mesh_allreduce(world, x, x, BIG, MESH_FP32, MESH_SUM, NULL, &req));
    sleep(2);
    int done = 0;
    OK(mesh_test(req, &done));
    if (on)
        CHECK(done, "the progress thread left a started all-reduce unfinished for 2 s");
    else
        printf("rank %d: without a progress thread the all-reduce %s on its own\n", rank,
               done ? "finished" : "did not finish");
    OK(mesh_wait(req));
    mesh_request_free(req);
    check_sum(x, BIG, 4, "all-reduce completed by the progress thread");
    free(x);
}

/* One thread posts, another waits: the communicator is shared between them. */
enum { SHARED_OPS = 200, SHARED_N = 1000 };
static mesh_request_h shared_reqs[SHARED_OPS];
static float *shared_bufs[SHARED_OPS];
static int shared_posted;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t shared_cond = PTHREAD_COND_INITIALIZER;

static void *shared_poster(void *arg)
{
    (void)arg;
    for (int i = 0; i < SHARED_OPS; i++) {
        shared_bufs[i] = malloc(SHARED_N * sizeof(float));
        fill(shared_bufs[i], SHARED_N, rank, i % 5);
        mesh_request_h r = NULL;
        OK(mesh_allreduce(world, shared_bufs[i], shared_bufs[i], SHARED_N, MESH_FP32, MESH_SUM,
                          NULL, &r));
        pthread_mutex_lock(&shared_lock);
        shared_reqs[i] = r;
        shared_posted = i + 1;
        pthread_cond_signal(&shared_cond);
        pthread_mutex_unlock(&shared_lock);
    }
    return NULL;
}

static void test_shared(void)
{
    pthread_t t;
    pthread_create(&t, NULL, shared_poster, NULL);
    for (int i = 0; i < SHARED_OPS; i++) {
        pthread_mutex_lock(&shared_lock);
        while (shared_posted <= i)
            pthread_cond_wait(&shared_cond, &shared_lock);
        mesh_request_h r = shared_reqs[i];
        pthread_mutex_unlock(&shared_lock);
        if (r == NULL)
            continue;
        OK(mesh_wait(r));
        mesh_request_free(r);
        check_sum(shared_bufs[i], SHARED_N, i % 5, "all-reduce posted by another thread");
        free(shared_bufs[i]);
    }
    pthread_join(t, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process (every thread: the progress thread's count). */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Rank 0 sleeps a second, then broadcasts; the others wait for it meanwhile: in the blocking
 * call, in mesh_wait, or (with a progress thread) asleep while that thread drives the receive.
 * A waiting rank spins for a millisecond at most, then sleeps until its peer sends: it must
 * use under 20% of a core (generous, so that a loaded machine's accounting cannot fail it). */
static void test_idle(void)
{
    const char *v = getenv("MESH_PROGRESS_THREAD");
    int thread = v != NULL && strcmp(v, "1") == 0;
    static const char *how[] = {"blocking broadcast", "mesh_wait", "mesh_idle loop",
                                "progress thread"};
    for (int mode = 0; mode < 4; mode++) {
        if (mode == 3 && !thread)
            continue;
        int32_t x = rank == 0 ? 1000 + mode : -1;
        OK(mesh_barrier(world, NULL));
        if (rank == 0) {
            usleep(1000000);
            OK(mesh_broadcast(world, &x, &x, 1, MESH_INT32, 0, NULL, NULL));
            continue;
        }
        double c0 = cpu_s(), t0 = now_s();
        if (mode == 0) {
            OK(mesh_broadcast(world, &x, &x, 1, MESH_INT32, 0, NULL, NULL));
        } else {
            mesh_request_h req = NULL;
            OK(mesh_broadcast(world, &x, &x, 1, MESH_INT32, 0, NULL, &req));
            if (mode == 2 && req) {
                /* a caller polling on its own, as mesh_torch's engine does */
                mesh_idle_t idle;
                mesh_idle_init(&idle, -1, 0);
                int index = -1, events = 0, rounds = 0;
                while (index < 0 && rounds++ < 10000000) {
                    OK(mesh_testany_events(1, &req, &index, &events));
                    if (events > 0)
                        mesh_idle_reset(&idle);
                    else if (index < 0)
                        mesh_idle(&idle);
                }
                CHECK(index == 0, "the mesh_idle loop gave up after %d rounds", rounds);
            }
            if (mode == 3)
                usleep(1200000);
            if (req) {
                OK(mesh_wait(req));
                mesh_request_free(req);
            }
        }
        double wall = now_s() - t0, cpu = cpu_s() - c0;
        CHECK(x == 1000 + mode, "%s: got %d from rank 0, expected %d", how[mode], (int)x,
              1000 + mode);
        CHECK(wall > 0.5, "%s: the wait took %.3f s, but rank 0 sent after 1 s", how[mode], wall);
        CHECK(cpu < 0.2 * wall, "%s: %.3f s of CPU over %.3f s of waiting (%.0f%%)", how[mode], cpu,
              wall, 100 * cpu / wall);
        printf("rank %d: idle in %s: %.3f s, CPU %.1f%%\n", rank, how[mode], wall,
               100 * cpu / wall);
    }
}

int main(int argc, char **argv)
{
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    rank = mesh_comm_rank(world);
    size = mesh_comm_size(world);
    for (int i = 1; i < argc; i++) {
        int before = failures;
        if (strcmp(argv[i], "cross") == 0)
            test_cross();
        else if (strcmp(argv[i], "tags") == 0)
            test_tags();
        else if (strcmp(argv[i], "anyall") == 0)
            test_anyall();
        else if (strcmp(argv[i], "events") == 0)
            test_events();
        else if (strcmp(argv[i], "thread") == 0)
            test_thread();
        else if (strcmp(argv[i], "shared") == 0)
            test_shared();
        else if (strcmp(argv[i], "idle") == 0)
            test_idle();
        else {
            fprintf(stderr, "unknown mode %s\n", argv[i]);
            failures++;
        }
        if (rank == 0)
            printf("%s: %s\n", argv[i], failures == before ? "ok" : "FAIL");
        mesh_barrier(world, NULL);
    }
    mesh_comm_destroy(world);
    return failures ? 1 : 0;
}
