/*
 * Calls on device buffers of the emulated device, under meshrun: stream ordering as NCCL's, and
 * the refusals of the argument checks.
 *   emu_stream order    the call returns while the streams are held, before its work ran; work
 *                       enqueued on the stream before the call provides its input and work
 *                       enqueued after it sees its result; a request completes only when the
 *                       results are back; point-to-point and grouped send/recv (a ring, in both
 *                       orders, large enough to need the receiver) on device buffers
 *   emu_stream errors   host and device memory mixed (either way round), another device's
 *                       memory, a stream with host buffers: refused naming the argument, and
 *                       the communicator still works
 *   emu_stream nodes    ranks on 2 nodes: the ordering checks of order, device data staged
 *                       through pinned host memory between the nodes, and a group of an
 *                       all-reduce and a broadcast
 *   emu_stream notable  MESH_DEVICE_EMU off, emulated memory anyway: MESH_ERR_UNSUPPORTED
 *   emu_stream pipefail a large all-reduce in pipelined chunks (collectives/device/dev_pipe.c)
 *                       completes; in the next one the last rank exits: every survivor's
 *                       request fails naming it, and its stream is released (never hangs)
 */
#include "mesh.h"
#include "libmesh/mem_emu.h"
#include "tests/harness/mp_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, failures;
static mesh_comm_h comm;
static const mesh_mem_ops_t *emu;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

/* The call must fail with status and a message that names every word given. */
#define EXPECT_FAIL(status, call, ...)                                                             \
    do {                                                                                           \
        mesh_status_t st_ = (call);                                                                \
        const char *msg_ = mesh_comm_last_error(comm);                                             \
        const char *words_[] = {__VA_ARGS__};                                                      \
        CHECK(st_ == (status), "%s returned %s (%s)", #call, mesh_status_string(st_), msg_);       \
        for (size_t w_ = 0; w_ < sizeof(words_) / sizeof(words_[0]); w_++)                         \
            CHECK(strstr(msg_, words_[w_]) != NULL, "message '%s' does not name '%s'", msg_,       \
                  words_[w_]);                                                                     \
    } while (0)

static int32_t *dev_alloc(size_t n, int device)
{
    void *p;
    if (mesh_mem_emu_alloc(&p, n * sizeof(int32_t), device) != MESH_OK) {
        fprintf(stderr, "emulated allocation failed: %s\n", mesh_comm_last_error(NULL));
        exit(2);
    }
    return p;
}

static void *new_stream(void)
{
    void *s;
    if (emu->stream_create(&s) != MESH_OK)
        exit(2);
    return s;
}

/* Rank r's input element i, and the sum over the ranks. */
static int32_t input(int r, size_t i)
{
    return (int32_t)(r * 1000 + (int)(i % 977));
}
static int32_t sum(size_t i)
{
    int32_t s = 0;
    for (int r = 0; r < size; r++)
        s += input(r, i);
    return s;
}

static void order_allreduce(int with_req)
{
    const size_t n = 100000;
    int32_t *host_in = malloc(n * 4), *host_out = malloc(n * 4);
    int32_t *d_in = dev_alloc(n, 0), *d_out = dev_alloc(n, 0);
    void *s = new_stream(), *ev;
    mesh_request_h req = NULL;
    CHECK(emu->event_create(&ev) == MESH_OK, "event");
    for (size_t i = 0; i < n; i++) {
        host_in[i] = input(rank, i);
        host_out[i] = -1;
        d_in[i] = -7; /* stale: the input arrives through the stream */
    }
    mesh_mem_emu_hold(1);
    CHECK(emu->copy_async(d_in, host_in, n * 4, s) == MESH_OK, "copy in");
    mesh_status_t st =
        mesh_allreduce(comm, d_in, d_out, n, MESH_INT32, MESH_SUM, s, with_req ? &req : NULL);
    CHECK(st == MESH_OK, "allreduce: %s", mesh_comm_last_error(comm));
    CHECK(emu->copy_async(host_out, d_out, n * 4, s) == MESH_OK, "copy out");
    CHECK(emu->event_record(ev, s) == MESH_OK, "record");
    /* returned while nothing of it could run */
    usleep(50000);
    CHECK(emu->event_query(ev) == MESH_INPROGRESS, "the stream ran while held");
    CHECK(d_in[0] == -7 && host_out[0] == -1, "work ran while held");
    if (with_req) {
        int done = 1;
        CHECK(mesh_test(req, &done) == MESH_OK && !done, "request done before its input");
    }
    mesh_mem_emu_hold(0);
    if (with_req)
        CHECK(mesh_wait(req) == MESH_OK, "wait: %s", mesh_comm_last_error(comm));
    if (with_req) {
        /* complete means the results are in device memory */
        for (size_t i = 0; i < n; i += 997)
            CHECK(d_out[i] == sum(i), "d_out[%zu] = %d after the wait, expected %d", i, d_out[i],
                  sum(i));
        mesh_request_free(req);
    }
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
    for (size_t i = 0; i < n; i++)
        if (host_out[i] != sum(i)) {
            CHECK(0, "element %zu is %d, expected %d (request %d)", i, host_out[i], sum(i),
                  with_req);
            break;
        }
    emu->event_destroy(ev);
    emu->stream_destroy(s);
    mesh_mem_emu_free(d_in);
    mesh_mem_emu_free(d_out);
    free(host_in);
    free(host_out);
}

/* Calls queued back to back on one stream run in call order, each seeing the previous result. */
static void order_chain(void)
{
    const size_t n = 4099;
    int32_t *d = dev_alloc(n, 0);
    void *s = new_stream();
    for (size_t i = 0; i < n; i++)
        d[i] = 1;
    for (int k = 0; k < 5; k++)
        CHECK(mesh_allreduce(comm, d, d, n, MESH_INT32, MESH_SUM, s, NULL) == MESH_OK,
              "allreduce %d: %s", k, mesh_comm_last_error(comm));
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
    int32_t want = 1;
    for (int k = 0; k < 5; k++)
        want *= size;
    for (size_t i = 0; i < n; i++)
        if (d[i] != want) {
            CHECK(0, "element %zu is %d after 5 in-place sums, expected %d", i, d[i], want);
            break;
        }
    emu->stream_destroy(s);
    mesh_mem_emu_free(d);
}

/* A ring of sends and receives in a group, receive first or send first: large messages wait
 * for their receiver, so a group whose calls were ordered one after the other would hang. */
static void order_group(int recv_first)
{
    const size_t n = (size_t)4 << 20;
    int32_t *ds = dev_alloc(n, 0), *dr = dev_alloc(n, 0);
    void *s = new_stream();
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    for (size_t i = 0; i < n; i++) {
        ds[i] = input(rank, i);
        dr[i] = -1;
    }
    mesh_group_start();
    for (int k = 0; k < 2; k++) {
        mesh_status_t st = (k == 0) == recv_first
                               ? mesh_recv(comm, dr, n, MESH_INT32, from, s, NULL)
                               : mesh_send(comm, ds, n, MESH_INT32, to, s, NULL);
        CHECK(st == MESH_OK, "grouped p2p: %s", mesh_comm_last_error(comm));
    }
    CHECK(mesh_group_end() == MESH_OK, "group end: %s", mesh_comm_last_error(comm));
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
    for (size_t i = 0; i < n; i++)
        if (dr[i] != input(from, i)) {
            CHECK(0, "element %zu from rank %d is %d, expected %d", i, from, dr[i], input(from, i));
            break;
        }
    /* a sendrecv with a request, the other way round */
    mesh_request_h req;
    CHECK(mesh_sendrecv(comm, ds, 1000, from, dr, 1000, to, MESH_INT32, 3, s, &req) == MESH_OK,
          "sendrecv: %s", mesh_comm_last_error(comm));
    CHECK(mesh_wait(req) == MESH_OK, "sendrecv wait: %s", mesh_comm_last_error(comm));
    mesh_request_free(req);
    for (size_t i = 0; i < 1000; i++)
        if (dr[i] != input(to, i)) {
            CHECK(0, "sendrecv element %zu is %d, expected %d", i, dr[i], input(to, i));
            break;
        }
    emu->stream_destroy(s);
    mesh_mem_emu_free(ds);
    mesh_mem_emu_free(dr);
}

static void test_errors(void)
{
    int32_t host[64] = {0}, host2[64];
    int32_t *d0 = dev_alloc(64, 0), *d1 = dev_alloc(64, 1), *d0b = dev_alloc(64, 0);
    void *s = new_stream();
    EXPECT_FAIL(MESH_ERR_INVALID_ARG,
                mesh_allreduce(comm, host, d0, 64, MESH_INT32, MESH_SUM, s, NULL), "mesh_allreduce",
                "rbuf is device memory but sbuf is host memory");
    EXPECT_FAIL(MESH_ERR_INVALID_ARG,
                mesh_allreduce(comm, d0, host, 64, MESH_INT32, MESH_SUM, s, NULL),
                "sbuf is device memory but rbuf is host memory");
    EXPECT_FAIL(MESH_ERR_INVALID_ARG, mesh_allgather(comm, d0, host, 1, MESH_INT32, NULL, NULL),
                "mesh_allgather", "rbuf is host memory");
    EXPECT_FAIL(MESH_ERR_INVALID_ARG,
                mesh_sendrecv(comm, host, 4, 0, d0, 4, 0, MESH_INT32, 0, s, NULL), "mesh_sendrecv",
                "sbuf is host memory");
    /* this rank uses device 0 */
    EXPECT_FAIL(MESH_ERR_INVALID_ARG,
                mesh_allreduce(comm, d1, d1, 64, MESH_INT32, MESH_SUM, s, NULL),
                "sbuf is memory of device 1", "uses device 0");
    EXPECT_FAIL(MESH_ERR_INVALID_ARG,
                mesh_allreduce(comm, d0, d1, 64, MESH_INT32, MESH_SUM, s, NULL),
                "sbuf is memory of device 0 but rbuf is memory of device 1");
    EXPECT_FAIL(MESH_ERR_INVALID_ARG, mesh_send(comm, d1, 4, MESH_INT32, 0, s, NULL), "mesh_send",
                "buf is memory of device 1");
    EXPECT_FAIL(MESH_ERR_INVALID_ARG, mesh_broadcast(comm, host, host2, 64, MESH_INT32, 0, s, NULL),
                "stream must be NULL for host buffers");
    /* a rank whose current device is 1 takes device 1's memory and refuses device 0's */
    mesh_mem_emu_set_device(1);
    EXPECT_FAIL(MESH_ERR_INVALID_ARG,
                mesh_reduce(comm, d0, d0b, 64, MESH_INT32, MESH_SUM, 0, s, NULL),
                "sbuf is memory of device 0", "uses device 1");
    for (int i = 0; i < 64; i++)
        d1[i] = rank + i;
    CHECK(mesh_allreduce(comm, d1, d1, 64, MESH_INT32, MESH_MAX, s, NULL) == MESH_OK,
          "allreduce on device 1: %s", mesh_comm_last_error(comm));
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
    for (int i = 0; i < 64; i++)
        CHECK(d1[i] == size - 1 + i, "d1[%d] = %d", i, d1[i]);
    mesh_mem_emu_set_device(-1);
    /* after every refusal the communicator still works, on host and device buffers */
    int32_t one = 1, all = 0;
    CHECK(mesh_allreduce(comm, &one, &all, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_OK &&
              all == size,
          "host allreduce after the refusals: %d", all);
    d0[0] = 2;
    CHECK(mesh_allreduce(comm, d0, d0b, 1, MESH_INT32, MESH_PROD, s, NULL) == MESH_OK,
          "device allreduce after the refusals: %s", mesh_comm_last_error(comm));
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
    CHECK(d0b[0] == 1 << size, "device allreduce after the refusals: %d", d0b[0]);
    emu->stream_destroy(s);
    mesh_mem_emu_free(d0);
    mesh_mem_emu_free(d0b);
    mesh_mem_emu_free(d1);
}

/* A group of an all-reduce and a broadcast of 300001 elements (pipelined in chunks under a small
 * MESH_DEVICE_STAGING_CHUNK), three times on the same buffers: exact. */
static void group_collectives(void)
{
    const size_t n = 300001;
    int32_t *a = dev_alloc(n, 0), *b = dev_alloc(n, 0);
    void *s = new_stream();
    int root = size > 1 ? 1 : 0;
    for (int it = 0; it < 3; it++) {
        for (size_t i = 0; i < n; i++) {
            a[i] = input(rank, i);
            b[i] = rank == root ? (int32_t)(i % 1009) + it : -1;
        }
        CHECK(mesh_group_start() == MESH_OK, "group start");
        CHECK(mesh_allreduce(comm, a, a, n, MESH_INT32, MESH_SUM, s, NULL) == MESH_OK,
              "grouped allreduce: %s", mesh_comm_last_error(comm));
        CHECK(mesh_broadcast(comm, b, b, n, MESH_INT32, root, s, NULL) == MESH_OK,
              "grouped broadcast: %s", mesh_comm_last_error(comm));
        CHECK(mesh_group_end() == MESH_OK, "group end: %s", mesh_comm_last_error(comm));
        CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
        int bad = 0;
        for (size_t i = 0; i < n && bad < 3; i++) {
            if (a[i] != sum(i) || b[i] != (int32_t)(i % 1009) + it) {
                CHECK(0, "group %d: element %zu: %d and %d, expected %d and %d", it, i, a[i], b[i],
                      sum(i), (int32_t)(i % 1009) + it);
                bad++;
            }
        }
    }
    emu->stream_destroy(s);
    mesh_mem_emu_free(a);
    mesh_mem_emu_free(b);
}

/* Run with MESH_DEVICE_STAGING_CHUNK well below 16 MiB: the calls go in many chunks. */
static void pipe_failure(void)
{
    const size_t n = (size_t)4 << 20;
    int32_t *d = dev_alloc(n, 0);
    void *s = new_stream();
    mesh_request_h req = NULL;
    for (size_t i = 0; i < n; i++)
        d[i] = input(rank, i);
    CHECK(mesh_allreduce(comm, d, d, n, MESH_INT32, MESH_SUM, s, &req) == MESH_OK &&
              mesh_wait(req) == MESH_OK,
          "the first all-reduce: %s", mesh_comm_last_error(comm));
    mesh_request_free(req);
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync");
    for (size_t i = 0; i < n && failures == 0; i++)
        CHECK(d[i] == sum(i), "element %zu is %d, expected %d", i, d[i], sum(i));
    if (rank == size - 1) {
        /* leaves in the middle of the next call (exit status 0: meshrun keeps the others) */
        mesh_allreduce(comm, d, d, n, MESH_INT32, MESH_SUM, s, NULL);
        usleep(20000);
        _exit(0);
    }
    mesh_status_t st = mesh_allreduce(comm, d, d, n, MESH_INT32, MESH_SUM, s, &req);
    CHECK(st == MESH_OK, "the second all-reduce: %s", mesh_comm_last_error(comm));
    if (st == MESH_OK) {
        st = mesh_wait(req);
        char who[32];
        snprintf(who, sizeof(who), "rank %d", size - 1);
        CHECK(st == MESH_ERR_PEER_FAILED || st == MESH_ERR_TIMEOUT,
              "the call a rank left ended with %s (%s)", mesh_status_string(st),
              mesh_comm_last_error(comm));
        CHECK(strstr(mesh_comm_last_error(comm), who) != NULL, "'%s' does not name %s",
              mesh_comm_last_error(comm), who);
        mesh_request_free(req);
    }
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "the stream was not released");
    /* the communicator failed: the next call is refused, and the stream goes on */
    CHECK(mesh_allreduce(comm, d, d, n, MESH_INT32, MESH_SUM, s, NULL) < 0,
          "a call after the failure succeeded");
    CHECK(mesh_mem_emu_stream_sync(s) == MESH_OK, "sync after the refusal");
    emu->stream_destroy(s);
    mesh_mem_emu_free(d);
}

static void test_unsupported(const char *word)
{
    int32_t *d = dev_alloc(64, 0);
    int32_t one = 1, all = 0;
    EXPECT_FAIL(MESH_ERR_UNSUPPORTED,
                mesh_allreduce(comm, d, d, 64, MESH_INT32, MESH_SUM, NULL, NULL), "mesh_allreduce",
                word);
    EXPECT_FAIL(MESH_ERR_UNSUPPORTED, mesh_recv(comm, d, 64, MESH_INT32, 0, NULL, NULL),
                "mesh_recv", word);
    CHECK(mesh_allreduce(comm, &one, &all, 1, MESH_INT32, MESH_SUM, NULL, NULL) == MESH_OK &&
              all == size,
          "host allreduce after the refusals: %d", all);
    mesh_mem_emu_free(d);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (mesh_mp_init(&comm, &rank, &size))
        return 1;
    emu = mesh_mem_table("emu");
    if (strcmp(mode, "notable") == 0) {
        CHECK(emu == NULL, "the emulated device is active");
        test_unsupported("not active");
    } else if (emu == NULL) {
        fprintf(stderr, "%s needs MESH_DEVICE_EMU=1\n", mode);
        return 2;
    } else if (strcmp(mode, "order") == 0 || strcmp(mode, "nodes") == 0) {
        order_allreduce(0);
        order_allreduce(1);
        order_chain();
        if (size > 1) {
            order_group(1);
            order_group(0);
        }
        if (strcmp(mode, "nodes") == 0)
            group_collectives();
    } else if (strcmp(mode, "errors") == 0) {
        test_errors();
    } else if (strcmp(mode, "pipefail") == 0) {
        pipe_failure();
    } else {
        fprintf(stderr, "usage: emu_stream order|errors|nodes|notable|pipefail\n");
        return 2;
    }
    if (strcmp(mode, "pipefail") != 0) /* a rank is gone there */
        mesh_barrier(comm, NULL);
    mesh_comm_destroy(comm);
    if (rank == 0)
        printf("emu_stream %s ranks=%d: %s\n", mode, size, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
