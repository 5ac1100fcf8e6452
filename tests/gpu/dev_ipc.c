/*
 * Device buffers inside a node by device copies between IPC mappings
 * (collectives/device/dev_ipc.h), on the active device table (cuda, or the emulated device with
 * MESH_DEVICE_EMU=1), under meshrun:
 *   dev_ipc ipc     all-gather, broadcast, all-reduce (sum, max, avg), reduce-scatter (sum,
 *                   avg), in place and not, all-to-all, and a group of two of them run
 *                   by IPC (the communicator's counter says so each time), exact, guard bytes
 *                   untouched; a call repeated on the same buffers maps nothing new (the cache is
 *                   hit for every peer); a buffer freed and allocated again at the same address is
 *                   mapped anew (its new data arrives, not the old mapping's) and the replaced
 *                   mapping is closed; an output in pinned host memory is staged; no
 *                   descriptor is left open but those the open mappings hold
 *   dev_ipc staged  with MESH_DEVICE_IPC=0: the same calls, staged (the counter stays 0), exact
 * Exits 77 without a device table.
 */
#include "mesh.h"
#include "collectives/comm.h"
#include "collectives/device/dev_ipc.h"
#include "tests/harness/mp_check.h"
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, failures, ipc_mode, device;
static mesh_comm_h comm;
static const mesh_mem_ops_t *ops;
static void *stream, *event;
static uint64_t calls_before;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

#define N 5000 /* elements per rank: several 256-byte chunks, not a multiple of them */

#include "tests/gpu/dev_buf.h"

/* Elements [off, off + N) of b to rank's round g input, on the device. */
static void fill(buf_t *b, size_t off, int g)
{
    for (size_t i = 0; i < N; i++)
        *at(b, off + i) = input(rank, g, i);
    push(b);
}

static void clear(buf_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        *at(b, i) = -1;
    push(b);
}

/* After a call: its stream drained, and the path it took counted (by IPC: ipc calls). */
static void counted(const char *what, mesh_status_t st, int ipc)
{
    CHECK(st == MESH_OK, "%s: %s", what, mesh_comm_last_error(comm));
    sync_stream();
    uint64_t calls = comm->dev_ipc_calls;
    CHECK(calls == calls_before + (uint64_t)ipc, "%s: %llu calls by IPC, expected %llu", what,
          (unsigned long long)calls, (unsigned long long)(calls_before + ipc));
    calls_before = calls;
}

/* ... and its results pulled, the guards checked. */
static void finish(const char *what, mesh_status_t st, buf_t *out)
{
    counted(what, st, ipc_mode);
    pull(out);
    check_guards(out, what);
}

/* Block p of out holds rank p's round g input. */
static void check_gathered(const buf_t *out, int g, const char *what)
{
    for (int p = 0; p < size; p++)
        for (size_t i = 0; i < N; i++)
            if (*at(out, (size_t)p * N + i) != input(p, g, i)) {
                CHECK(0, "%s: rank %d's element %zu is %d, expected %d", what, p, i,
                      *at(out, (size_t)p * N + i), input(p, g, i));
                break;
            }
}

static void check_cache(const char *what, uint64_t maps, uint64_t hits, int open)
{
    uint64_t m, h;
    int o;
    mesh_dev_ipc_stats(comm, &m, &h, &o);
    if (ipc_mode)
        CHECK(m == maps && h == hits && o == open,
              "%s: %llu mappings made, %llu hits, %d open; expected %llu, %llu, %d", what,
              (unsigned long long)m, (unsigned long long)h, o, (unsigned long long)maps,
              (unsigned long long)hits, open);
}

/* The cache: hit on a repeat, a fresh mapping for a buffer reallocated at the same address. */
static void test_allgather(void)
{
    buf_t a = buf_new(N), r = buf_new(N * (size_t)size);
    uint64_t peers = (uint64_t)size - 1;
    for (int g = 1; g <= 2; g++) {
        fill(&a, 0, g);
        clear(&r);
        finish("allgather", mesh_allgather(comm, dev(&a), dev(&r), N, MESH_INT32, stream, NULL),
               &r);
        check_gathered(&r, g, g == 1 ? "allgather" : "allgather repeated");
        check_cache(g == 1 ? "first call" : "repeated call", peers, g == 1 ? 0 : peers, (int)peers);
    }
    /* a new allocation where the old one was (the address comes back after a few tries) */
    int32_t *old = a.dev;
    buf_t spare[8];
    int nspare = 0;
    buf_free(&a);
    a = buf_new(N);
    while (a.dev != old && nspare < 8) {
        spare[nspare++] = a;
        a = buf_new(N);
    }
    CHECK(a.dev == old, "no allocation came back at the freed address %p", (void *)old);
    for (int i = 0; i < nspare; i++)
        buf_free(&spare[i]);
    fill(&a, 0, 3);
    clear(&r);
    finish("allgather", mesh_allgather(comm, dev(&a), dev(&r), N, MESH_INT32, stream, NULL), &r);
    check_gathered(&r, 3, "allgather after reallocation");
    check_cache("after reallocation", 2 * peers, peers, (int)peers);
    /* in place: the input is the rank's own block of the output */
    clear(&r);
    fill(&r, (size_t)rank * N, 4);
    finish("allgather in place",
           mesh_allgather(comm, dev(&r) + (size_t)rank * N, dev(&r), N, MESH_INT32, stream, NULL),
           &r);
    check_gathered(&r, 4, "allgather in place");
    /* into pinned host memory: peers cannot map it, so the call is staged */
    int32_t *pinned;
    if (ops->host_alloc((void **)&pinned, N * (size_t)size * 4) != MESH_OK)
        fatal("pinned allocation");
    fill(&a, 0, 5);
    counted("allgather into pinned memory",
            mesh_allgather(comm, dev(&a), pinned, N, MESH_INT32, stream, NULL), 0);
    for (size_t i = 0; i < N * (size_t)size; i++)
        if (pinned[i] != input((int)(i / N), 5, i % N)) {
            CHECK(0, "allgather into pinned memory: element %zu is %d, expected %d", i, pinned[i],
                  input((int)(i / N), 5, i % N));
            break;
        }
    ops->host_free(pinned);
    buf_free(&a);
    buf_free(&r);
}

static void check_all(const buf_t *out, int root, int g, const char *what)
{
    for (size_t i = 0; i < N; i++)
        if (*at(out, i) != input(root, g, i)) {
            CHECK(0, "%s from %d: element %zu is %d, expected %d", what, root, i, *at(out, i),
                  input(root, g, i));
            break;
        }
}

static void test_broadcast(void)
{
    buf_t a = buf_new(N), r = buf_new(N);
    for (int root = 0; root < size; root++) {
        fill(&a, 0, 5 + root);
        clear(&r);
        finish("broadcast",
               mesh_broadcast(comm, dev(&a), dev(&r), N, MESH_INT32, root, stream, NULL), &r);
        check_all(&r, root, 5 + root, "broadcast");
        if (rank == root)
            fill(&r, 0, 9);
        finish("broadcast in place",
               mesh_broadcast(comm, dev(&r), dev(&r), N, MESH_INT32, root, stream, NULL), &r);
        check_all(&r, root, 9, "broadcast in place");
    }
    pull(&a);
    check_guards(&a, "broadcast input");
    buf_free(&a);
    buf_free(&r);
}

static int32_t expect(mesh_op_t op, int g, size_t i)
{
    int32_t acc = input(0, g, i);
    for (int p = 1; p < size; p++) {
        int32_t v = input(p, g, i);
        acc = op == MESH_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return op == MESH_AVG ? acc / size : acc;
}

static void test_allreduce(void)
{
    const mesh_op_t red[] = {MESH_SUM, MESH_MAX, MESH_AVG};
    buf_t a = buf_new(N), r = buf_new(N);
    for (int k = 0; k < 3; k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            int g = 10 + k * 2 + inplace;
            char what[64];
            snprintf(what, sizeof(what), "allreduce %s%s", mesh_op_name(red[k]),
                     inplace ? " in place" : "");
            clear(&r);
            fill(inplace ? &r : &a, 0, g);
            finish(what,
                   mesh_allreduce(comm, inplace ? dev(&r) : dev(&a), dev(&r), N, MESH_INT32, red[k],
                                  stream, NULL),
                   &r);
            for (size_t i = 0; i < N; i++)
                if (*at(&r, i) != expect(red[k], g, i)) {
                    CHECK(0, "%s: element %zu is %d, expected %d", what, i, *at(&r, i),
                          expect(red[k], g, i));
                    break;
                }
        }
    }
    pull(&a);
    check_guards(&a, "allreduce input");
    buf_free(&a);
    buf_free(&r);
}

/* Rank r's block of the reduction of every rank's whole input (N * size elements). */
static void test_reduce_scatter(void)
{
    const mesh_op_t red[] = {MESH_SUM, MESH_AVG};
    size_t total = N * (size_t)size, mine = (size_t)rank * N;
    buf_t a = buf_new(total), r = buf_new(N);
    for (int k = 0; k < 2; k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            int g = 20 + k * 2 + inplace;
            char what[64];
            snprintf(what, sizeof(what), "reduce_scatter %s%s", mesh_op_name(red[k]),
                     inplace ? " in place" : "");
            for (size_t i = 0; i < total; i++)
                *at(&a, i) = input(rank, g, i);
            push(&a);
            clear(&r);
            buf_t *out = inplace ? &a : &r;
            finish(what,
                   mesh_reduce_scatter(comm, dev(&a), inplace ? dev(&a) + mine : dev(&r), N,
                                       MESH_INT32, red[k], stream, NULL),
                   out);
            size_t off = inplace ? mine : 0;
            for (size_t i = 0; i < N; i++)
                if (*at(out, off + i) != expect(red[k], g, mine + i)) {
                    CHECK(0, "%s: element %zu is %d, expected %d", what, i, *at(out, off + i),
                          expect(red[k], g, mine + i));
                    break;
                }
        }
    }
    buf_free(&a);
    buf_free(&r);
}

/* Rank r's block p of round g: element p * N + i of its input. */
static void test_alltoall(void)
{
    size_t total = N * (size_t)size;
    buf_t a = buf_new(total), r = buf_new(total);
    for (int g = 30; g < 32; g++) {
        for (size_t i = 0; i < total; i++)
            *at(&a, i) = input(rank, g, i);
        push(&a);
        clear(&r);
        finish("alltoall", mesh_alltoall(comm, dev(&a), dev(&r), N, MESH_INT32, stream, NULL), &r);
        for (int p = 0; p < size; p++)
            for (size_t i = 0; i < N; i++)
                if (*at(&r, (size_t)p * N + i) != input(p, g, (size_t)rank * N + i)) {
                    CHECK(0, "alltoall: element %zu from rank %d is %d, expected %d", i, p,
                          *at(&r, (size_t)p * N + i), input(p, g, (size_t)rank * N + i));
                    break;
                }
    }
    pull(&a);
    check_guards(&a, "alltoall input");
    buf_free(&a);
    buf_free(&r);
}

/* A group of an all-gather and an all-reduce on one stream: both by IPC, started together. */
static void test_group(void)
{
    buf_t a = buf_new(N), g = buf_new(N * (size_t)size), r = buf_new(N);
    fill(&a, 0, 40);
    clear(&g);
    clear(&r);
    mesh_status_t st = mesh_group_start();
    if (st == MESH_OK)
        st = mesh_allgather(comm, dev(&a), dev(&g), N, MESH_INT32, stream, NULL);
    if (st == MESH_OK)
        st = mesh_allreduce(comm, dev(&a), dev(&r), N, MESH_INT32, MESH_SUM, stream, NULL);
    mesh_status_t end = mesh_group_end();
    CHECK(st == MESH_OK && end == MESH_OK, "group: %s", mesh_comm_last_error(comm));
    sync_stream();
    uint64_t calls = comm->dev_ipc_calls;
    CHECK(calls == calls_before + 2 * (uint64_t)ipc_mode, "group: %llu calls by IPC, expected %llu",
          (unsigned long long)calls, (unsigned long long)(calls_before + 2 * ipc_mode));
    calls_before = calls;
    pull(&g);
    pull(&r);
    check_gathered(&g, 40, "group allgather");
    for (size_t i = 0; i < N; i++)
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

/* Descriptors this process has open. */
static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "ipc") != 0 && strcmp(mode, "staged") != 0) {
        fprintf(stderr, "usage: dev_ipc ipc|staged\n");
        return 2;
    }
    ipc_mode = strcmp(mode, "ipc") == 0;
    int rc = dev_setup("dev_ipc");
    if (rc != 0)
        return rc;
    if (size < 2) {
        fprintf(stderr, "dev_ipc needs 2 ranks or more\n");
        return 2;
    }
    int fds = open_fds();
    test_allgather();
    test_broadcast();
    test_allreduce();
    test_reduce_scatter();
    test_alltoall();
    test_group();
    /* exported descriptors are closed once their call ended; a mapping may keep one */
    uint64_t maps, hits;
    int open;
    mesh_dev_ipc_stats(comm, &maps, &hits, &open);
    int now = open_fds();
    CHECK(now <= fds + open, "%d descriptors open, %d before the calls and %d mappings open", now,
          fds, open);
    dev_teardown();
    mesh_comm_destroy(comm);
    if (rank == 0 && failures == 0)
        printf("dev_ipc %s on %s: %d ranks ok\n", mode, ops->name, size);
    return failures ? 1 : 0;
}
