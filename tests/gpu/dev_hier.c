/*
 * Device buffers across nodes by the hierarchical path (collectives/device/dev_hier.h), on the
 * active device table (cuda, or the emulated device with MESH_DEVICE_EMU=1), under
 * meshrun --nodes:
 *   dev_hier hier    all-reduce (sum, max, avg; small, medium and large, so that the rail takes
 *                    both recursive doubling and the ring, and some ranks hold an empty chunk),
 *                    all-gather, broadcast (every root) and reduce-scatter (sum, avg), in place
 *                    and not, and a group of
 *                    two, exact, guard bytes untouched; each call counted by the communicator as
 *                    hierarchical, its peers' buffers looked up in the IPC cache, and the bytes
 *                    it copied between device and host exactly this rank's inter-node share (an
 *                    all-reduce of B bytes on L ranks per node: its chunk of about B/L each way;
 *                    all-gather: its block out, the rail's N - 1 blocks in; broadcast: a chunk;
 *                    reduce-scatter: the rail's N blocks out, its own in)
 *   dev_hier staged  the same calls exact, none hierarchical (unequal nodes, MESH_DEVICE_HIER=0)
 *   dev_hier refused with MESH_DEVICE_HIER=1 on a layout the path cannot serve: every call
 *                    fails with MESH_ERR_UNSUPPORTED, and the communicator still works after it
 *   dev_hier silent  the last rank skips an all-reduce (alive, silent): every other rank's call
 *                    fails (its request, within a few timeouts) and releases its stream
 * Exits 77 without a device table.
 */
#include "mesh.h"
#include "collectives/comm.h"
#include "collectives/device/dev_ipc.h"
#include "tests/harness/mp_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size, failures, hier_mode, device, L, lr, node, nnodes;
static mesh_comm_h comm;
static const mesh_mem_ops_t *ops;
static void *stream, *event;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

#include "tests/gpu/dev_buf.h"

static void fill(buf_t *b, size_t off, size_t n, int g)
{
    for (size_t i = 0; i < n; i++)
        *at(b, off + i) = input(rank, g, i);
    push(b);
}

static void clear(buf_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        *at(b, i) = -1;
    push(b);
}

/* ---- what a call did */

typedef struct {
    uint64_t calls, to_host, from_host, lookups;
} counts_t;

static counts_t now(void)
{
    uint64_t maps, hits;
    int open;
    mesh_dev_ipc_stats(comm, &maps, &hits, &open);
    return (counts_t){comm->dev_hier_calls, comm->dev_hier_to_host, comm->dev_hier_from_host,
                      maps + hits};
}

static counts_t before;

/* The call returned st; its stream drained, and (hierarchical) it staged to_host and from_host
 * bytes and looked up `lookups` peers' buffers. */
static void counted(const char *what, mesh_status_t st, uint64_t to_host, uint64_t from_host,
                    uint64_t lookups)
{
    CHECK(st == MESH_OK, "%s: %s", what, mesh_comm_last_error(comm));
    sync_stream();
    counts_t c = now();
    uint64_t calls = c.calls - before.calls;
    if (hier_mode) {
        CHECK(calls == 1, "%s: %llu calls hierarchical, expected 1", what,
              (unsigned long long)calls);
        CHECK(c.to_host - before.to_host == to_host && c.from_host - before.from_host == from_host,
              "%s: %llu bytes staged to host and %llu back, expected %llu and %llu", what,
              (unsigned long long)(c.to_host - before.to_host),
              (unsigned long long)(c.from_host - before.from_host), (unsigned long long)to_host,
              (unsigned long long)from_host);
        CHECK(c.lookups - before.lookups == lookups,
              "%s: %llu peers' buffers looked up through IPC, expected %llu", what,
              (unsigned long long)(c.lookups - before.lookups), (unsigned long long)lookups);
    } else {
        CHECK(calls == 0 && c.to_host == before.to_host,
              "%s: %llu calls hierarchical, expected none", what, (unsigned long long)calls);
    }
    before = c;
}

/* Chunk i of L of n int32 (dev_hier.c's split: whole 256-byte lines). */
static void chunk(size_t n, int i, size_t *lo, size_t *len)
{
    size_t unit = 64, per = ((n + unit - 1) / unit + (size_t)L - 1) / (size_t)L * unit;
    *lo = per * (size_t)i < n ? per * (size_t)i : n;
    *len = n - *lo < per ? n - *lo : per;
}

/* ---- the collectives */

static int32_t expect(mesh_op_t op, int g, size_t i)
{
    int32_t acc = input(0, g, i);
    for (int p = 1; p < size; p++) {
        int32_t v = input(p, g, i);
        acc = op == MESH_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return op == MESH_AVG ? acc / size : acc;
}

static void test_allreduce(size_t n)
{
    const mesh_op_t red[] = {MESH_SUM, MESH_MAX, MESH_AVG};
    buf_t a = buf_new(n), r = buf_new(n);
    size_t lo, len;
    chunk(n, lr, &lo, &len);
    for (int k = 0; k < 3; k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            int g = 10 + k * 2 + inplace;
            char what[96];
            snprintf(what, sizeof(what), "allreduce %s of %zu%s", mesh_op_name(red[k]), n,
                     inplace ? " in place" : "");
            clear(&r);
            fill(inplace ? &r : &a, 0, n, g);
            counted(what,
                    mesh_allreduce(comm, inplace ? dev(&r) : dev(&a), dev(&r), n, MESH_INT32,
                                   red[k], stream, NULL),
                    len * 4, len * 4, 2 * (uint64_t)(L - 1));
            pull(&r);
            check_guards(&r, what);
            for (size_t i = 0; i < n; i++)
                if (*at(&r, i) != expect(red[k], g, i)) {
                    CHECK(0, "%s: element %zu is %d, expected %d", what, i, *at(&r, i),
                          expect(red[k], g, i));
                    break;
                }
        }
    }
    /* about 1/L of the vector each way: at most a 256-byte line more */
    CHECK(len * 4 <= n * 4 / (size_t)L + 256, "allreduce of %zu: a chunk of %zu elements", n, len);
    pull(&a);
    check_guards(&a, "allreduce input");
    buf_free(&a);
    buf_free(&r);
}

/* Block p of out holds rank p's round g input. */
static void check_gathered(const buf_t *out, size_t n, int g, const char *what)
{
    for (int p = 0; p < size; p++)
        for (size_t i = 0; i < n; i++)
            if (*at(out, (size_t)p * n + i) != input(p, g, i)) {
                CHECK(0, "%s: rank %d's element %zu is %d, expected %d", what, p, i,
                      *at(out, (size_t)p * n + i), input(p, g, i));
                break;
            }
}

static void test_allgather(size_t n)
{
    buf_t a = buf_new(n), r = buf_new(n * (size_t)size);
    uint64_t out = n * 4, in = (uint64_t)(nnodes - 1) * n * 4, peers = (uint64_t)(L - 1);
    for (int g = 1; g <= 2; g++) {
        fill(&a, 0, n, g);
        clear(&r);
        counted("allgather", mesh_allgather(comm, dev(&a), dev(&r), n, MESH_INT32, stream, NULL),
                out, in, peers);
        pull(&r);
        check_guards(&r, "allgather");
        check_gathered(&r, n, g, "allgather");
    }
    clear(&r);
    fill(&r, (size_t)rank * n, n, 4);
    counted("allgather in place",
            mesh_allgather(comm, dev(&r) + (size_t)rank * n, dev(&r), n, MESH_INT32, stream, NULL),
            out, in, peers);
    pull(&r);
    check_guards(&r, "allgather in place");
    check_gathered(&r, n, 4, "allgather in place");
    pull(&a);
    check_guards(&a, "allgather input");
    buf_free(&a);
    buf_free(&r);
}

static void check_all(const buf_t *out, size_t n, int root, int g, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (*at(out, i) != input(root, g, i)) {
            CHECK(0, "%s from %d: element %zu is %d, expected %d", what, root, i, *at(out, i),
                  input(root, g, i));
            break;
        }
}

static void test_broadcast(size_t n)
{
    buf_t a = buf_new(n), r = buf_new(n);
    size_t lo, len;
    chunk(n, lr, &lo, &len);
    for (int root = 0; root < size; root++) {
        int home = comm->node_of[root] == node;
        /* the root's node copies its chunks out, the other nodes in; peers' outputs (and the
         * root's input, on its node) looked up */
        uint64_t out = home ? len * 4 : 0, in = home ? 0 : len * 4;
        uint64_t peers = (uint64_t)(L - 1) + (home && rank != root);
        fill(&a, 0, n, 5 + root);
        clear(&r);
        counted("broadcast",
                mesh_broadcast(comm, dev(&a), dev(&r), n, MESH_INT32, root, stream, NULL), out, in,
                peers);
        pull(&r);
        check_guards(&r, "broadcast");
        check_all(&r, n, root, 5 + root, "broadcast");
        if (rank == root)
            fill(&r, 0, n, 9);
        counted("broadcast in place",
                mesh_broadcast(comm, dev(&r), dev(&r), n, MESH_INT32, root, stream, NULL), out, in,
                peers);
        pull(&r);
        check_guards(&r, "broadcast in place");
        check_all(&r, n, root, 9, "broadcast in place");
    }
    pull(&a);
    check_guards(&a, "broadcast input");
    buf_free(&a);
    buf_free(&r);
}

/* Rank r's block of the reduction of every rank's whole input (n * size elements). */
static void test_reduce_scatter(size_t n)
{
    const mesh_op_t red[] = {MESH_SUM, MESH_AVG};
    size_t total = n * (size_t)size, mine = (size_t)rank * n;
    buf_t a = buf_new(total), r = buf_new(n);
    /* the node's partials of the rail's N blocks out, this rank's block in; peers' inputs */
    uint64_t out = (uint64_t)nnodes * n * 4, in = n * 4, peers = (uint64_t)(L - 1);
    for (int k = 0; k < 2; k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            int g = 20 + k * 2 + inplace;
            char what[96];
            snprintf(what, sizeof(what), "reduce_scatter %s of %zu%s", mesh_op_name(red[k]), n,
                     inplace ? " in place" : "");
            for (size_t i = 0; i < total; i++)
                *at(&a, i) = input(rank, g, i);
            push(&a);
            clear(&r);
            buf_t *res = inplace ? &a : &r;
            counted(what,
                    mesh_reduce_scatter(comm, dev(&a), inplace ? dev(&a) + mine : dev(&r), n,
                                        MESH_INT32, red[k], stream, NULL),
                    out, in, peers);
            pull(res);
            check_guards(res, what);
            size_t off = inplace ? mine : 0;
            for (size_t i = 0; i < n; i++)
                if (*at(res, off + i) != expect(red[k], g, mine + i)) {
                    CHECK(0, "%s: element %zu is %d, expected %d", what, i, *at(res, off + i),
                          expect(red[k], g, mine + i));
                    break;
                }
            /* in place, the other blocks of the input are the caller's still */
            for (size_t i = 0; inplace && i < total; i++)
                if ((i < mine || i >= mine + n) && *at(&a, i) != input(rank, g, i)) {
                    CHECK(0, "%s: input element %zu changed to %d", what, i, *at(&a, i));
                    break;
                }
        }
    }
    buf_free(&a);
    buf_free(&r);
}

/* An all-gather and an all-reduce in a group on one stream. */
static void test_group(size_t n)
{
    buf_t a = buf_new(n), g = buf_new(n * (size_t)size), r = buf_new(n);
    fill(&a, 0, n, 40);
    clear(&g);
    clear(&r);
    mesh_status_t st = mesh_group_start();
    if (st == MESH_OK)
        st = mesh_allgather(comm, dev(&a), dev(&g), n, MESH_INT32, stream, NULL);
    if (st == MESH_OK)
        st = mesh_allreduce(comm, dev(&a), dev(&r), n, MESH_INT32, MESH_SUM, stream, NULL);
    mesh_status_t end = mesh_group_end();
    CHECK(st == MESH_OK && end == MESH_OK, "group: %s", mesh_comm_last_error(comm));
    sync_stream();
    counts_t c = now();
    CHECK(c.calls - before.calls == (hier_mode ? 2u : 0u), "group: %llu calls hierarchical",
          (unsigned long long)(c.calls - before.calls));
    before = c;
    pull(&g);
    pull(&r);
    check_gathered(&g, n, 40, "group allgather");
    for (size_t i = 0; i < n; i++)
        if (*at(&r, i) != expect(MESH_SUM, 40, i)) {
            CHECK(0, "group allreduce: element %zu is %d, expected %d", i, *at(&r, i),
                  expect(MESH_SUM, 40, i));
            break;
        }
    check_guards(&g, "group allgather");
    check_guards(&r, "group allreduce");
    buf_free(&a);
    buf_free(&g);
    buf_free(&r);
}

/* MESH_DEVICE_HIER=1 on a layout the path cannot serve: refused, and the next call works. */
static void test_refused(void)
{
    buf_t a = buf_new(100), r = buf_new(100);
    mesh_status_t st =
        mesh_allreduce(comm, dev(&a), dev(&r), 100, MESH_INT32, MESH_SUM, stream, NULL);
    CHECK(st == MESH_ERR_UNSUPPORTED, "allreduce with MESH_DEVICE_HIER=1: %s, expected refused",
          mesh_status_string(st));
    CHECK(strstr(mesh_comm_last_error(comm), "MESH_DEVICE_HIER") != NULL,
          "the refusal does not name MESH_DEVICE_HIER: %s", mesh_comm_last_error(comm));
    fill(&a, 0, 100, 3);
    clear(&r);
    int32_t *host = malloc(100 * 4), *back = malloc(100 * 4);
    for (int i = 0; i < 100; i++)
        host[i] = rank + 1;
    st = mesh_allreduce(comm, host, back, 100, MESH_INT32, MESH_SUM, NULL, NULL);
    CHECK(st == MESH_OK && back[7] == size * (size + 1) / 2, "host allreduce after a refusal: %s",
          mesh_comm_last_error(comm));
    free(host);
    free(back);
    buf_free(&a);
    buf_free(&r);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A silent peer: the call fails on the stream within the timeout (a few of them), never hangs. */
static void test_silent(void)
{
    size_t n = 50000;
    buf_t a = buf_new(n), r = buf_new(n);
    double timeout = atof(getenv("MESH_TIMEOUT") ? getenv("MESH_TIMEOUT") : "60");
    if (rank == size - 1) {
        sleep((unsigned)(3 * timeout + 2)); /* until every other rank gave up */
    } else {
        mesh_request_h req = NULL;
        double t0 = seconds();
        mesh_status_t st =
            mesh_allreduce(comm, dev(&a), dev(&r), n, MESH_INT32, MESH_SUM, stream, &req);
        CHECK(st == MESH_OK, "allreduce: %s", mesh_comm_last_error(comm));
        if (st == MESH_OK) {
            st = mesh_wait(req);
            mesh_request_free(req);
        }
        double waited = seconds() - t0;
        CHECK(st == MESH_ERR_TIMEOUT || st == MESH_ERR_PEER_FAILED,
              "allreduce with a silent peer: %s (%s), expected a timeout or a failed peer",
              mesh_status_string(st), mesh_comm_last_error(comm));
        CHECK(waited < 3 * timeout, "the call failed after %.1f s, the timeout is %.0f s", waited,
              timeout);
        sync_stream(); /* the stream goes on */
        counts_t c = now();
        CHECK(c.calls == before.calls, "a failed call counted as done");
    }
    buf_free(&a);
    buf_free(&r);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "hier") != 0 && strcmp(mode, "staged") != 0 && strcmp(mode, "refused") != 0 &&
        strcmp(mode, "silent") != 0) {
        fprintf(stderr, "usage: dev_hier hier|staged|refused|silent\n");
        return 2;
    }
    hier_mode = strcmp(mode, "hier") == 0;
    int rc = dev_setup("dev_hier");
    if (rc != 0)
        return rc;
    nnodes = comm->nnodes;
    node = comm->node_of[rank];
    L = comm->node_size[node];
    lr = comm->local_rank[rank];
    if (nnodes < 2) {
        fprintf(stderr, "dev_hier needs ranks on 2 nodes or more (meshrun --nodes)\n");
        return 2;
    }
    before = now();
    if (strcmp(mode, "refused") == 0) {
        test_refused();
    } else if (strcmp(mode, "silent") == 0) {
        test_silent();
        dev_teardown();
        mesh_comm_abort(comm); /* its calls failed: nothing to wait for */
        if (rank == 0 && failures == 0)
            printf("dev_hier silent on %s: %d ranks on %d nodes ok\n", ops->name, size, nnodes);
        return failures ? 1 : 0;
    } else {
        test_allreduce(5000);    /* chunks of whole lines, the last one short */
        test_allreduce(3);       /* one line: one rank per node holds it all */
        test_allreduce(100000);  /* rail chunks above 64 KiB: the ring */
        test_allreduce(1000000); /* chunks in several parts through the pipeline */
        test_allgather(5000);
        test_allgather(1);
        test_broadcast(5000);
        test_broadcast(70000);
        test_reduce_scatter(5000);
        test_reduce_scatter(1);
        test_group(3000);
    }
    dev_teardown();
    mesh_comm_destroy(comm);
    if (rank == 0 && failures == 0)
        printf("dev_hier %s on %s: %d ranks on %d nodes ok\n", mode, ops->name, size, nnodes);
    return failures ? 1 : 0;
}
