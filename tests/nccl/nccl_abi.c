/*
 * A program written against NVIDIA's own nccl.h, linked against mesh's libnccl.so.2, run as 1,
 * 2 and 4 forked processes that pass the unique ids through pipes (as nccl-tests does over
 * MPI). Host buffers only: streams are NULL. Every result is checked exactly.
 */
#define _GNU_SOURCE
#include <nccl.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl_children.h"

static int g_rank = -1;

/* Host entry point of the device API (nccl_device/core.h, which is C++ only). */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", g_rank, __FILE__, __LINE__,      \
                    #cond);                                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define NCCLCHECK(call)                                                                            \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s:%d: %s -> %d (%s): %s\n", g_rank, __FILE__, __LINE__,     \
                    #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL));               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define NIDS  4
#define COUNT 37

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- typed element access */

static size_t dsize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    default:
        return 8;
    }
}

static void put(ncclDataType_t t, void *buf, size_t i, double v)
{
    switch (t) {
    case ncclInt8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case ncclUint8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case ncclInt32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case ncclUint32:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    case ncclInt64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case ncclUint64:
        ((uint64_t *)buf)[i] = (uint64_t)v;
        break;
    case ncclFloat32:
        ((float *)buf)[i] = (float)v;
        break;
    case ncclFloat64:
        ((double *)buf)[i] = v;
        break;
    case ncclBfloat16: { /* small integers are exact in bf16: the top half of a float */
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
        break;
    }
    default:
        CHECK(0);
    }
}

static double get(ncclDataType_t t, const void *buf, size_t i)
{
    switch (t) {
    case ncclInt8:
        return ((const int8_t *)buf)[i];
    case ncclUint8:
        return ((const uint8_t *)buf)[i];
    case ncclInt32:
        return ((const int32_t *)buf)[i];
    case ncclUint32:
        return ((const uint32_t *)buf)[i];
    case ncclInt64:
        return (double)((const int64_t *)buf)[i];
    case ncclUint64:
        return (double)((const uint64_t *)buf)[i];
    case ncclFloat32:
        return ((const float *)buf)[i];
    case ncclFloat64:
        return ((const double *)buf)[i];
    case ncclBfloat16: {
        uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default:
        CHECK(0);
    }
    return 0;
}

static void *alloc(ncclDataType_t t, size_t n)
{
    void *p = calloc(n ? n : 1, dsize(t));
    CHECK(p != NULL);
    return p;
}

static void expect(const char *what, ncclDataType_t t, const void *buf, size_t i, double want)
{
    double got = get(t, buf, i);
    if (got != want) {
        fprintf(stderr, "rank %d: %s dtype %d element %zu: got %g, expected %g\n", g_rank, what,
                (int)t, i, got, want);
        exit(1);
    }
}

/* ---------------------------------------------------------------- collectives */

/* Small integers whose sums, products, minima, maxima and averages are exact in every type. */
static double in_val(ncclRedOp_t op, int r, int n, size_t i)
{
    switch (op) {
    case ncclProd:
        return 1 + (double)((r + (int)i) % 2);
    case ncclAvg:
        return n * (1 + (double)((r + (int)i) % 3));
    default:
        return r + 1 + (double)(i % 5);
    }
}

static double reduced(ncclRedOp_t op, int n, size_t i)
{
    double acc = op == ncclProd ? 1 : op == ncclMin ? 1e9 : op == ncclMax ? -1e9 : 0;
    for (int r = 0; r < n; r++) {
        double v = in_val(op, r, n, i);
        if (op == ncclProd)
            acc *= v;
        else if (op == ncclMin)
            acc = v < acc ? v : acc;
        else if (op == ncclMax)
            acc = v > acc ? v : acc;
        else
            acc += v;
    }
    return op == ncclAvg ? acc / n : acc;
}

static void test_allreduce(ncclComm_t comm, int r, int n)
{
    static const ncclDataType_t types[] = {ncclInt8,    ncclUint8,   ncclInt32,
                                           ncclUint32,  ncclInt64,   ncclUint64,
                                           ncclFloat32, ncclFloat64, ncclBfloat16};
    static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
            ncclDataType_t t = types[ti];
            ncclRedOp_t op = ops[oi];
            void *s = alloc(t, COUNT), *d = alloc(t, COUNT);
            for (size_t i = 0; i < COUNT; i++)
                put(t, s, i, in_val(op, r, n, i));
            NCCLCHECK(ncclAllReduce(s, d, COUNT, t, op, comm, NULL));
            for (size_t i = 0; i < COUNT; i++)
                expect("allreduce", t, d, i, reduced(op, n, i));
            /* in place */
            NCCLCHECK(ncclAllReduce(s, s, COUNT, t, op, comm, NULL));
            for (size_t i = 0; i < COUNT; i++)
                expect("allreduce in place", t, s, i, reduced(op, n, i));
            free(s);
            free(d);
        }
    }
}

static void test_rooted_and_blocks(ncclComm_t comm, int r, int n)
{
    static const ncclDataType_t types[] = {ncclInt32, ncclUint64, ncclFloat32, ncclFloat64};
    const size_t c = 7;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        ncclDataType_t t = types[ti];
        void *s = alloc(t, n * c), *d = alloc(t, n * c);
        for (int root = 0; root < n; root++) {
            for (size_t i = 0; i < c; i++)
                put(t, s, i, r * 100 + i);
            memset(d, 0, n * c * dsize(t));
            NCCLCHECK(ncclBroadcast(s, d, c, t, root, comm, NULL));
            for (size_t i = 0; i < c; i++)
                expect("broadcast", t, d, i, root * 100 + i);
            NCCLCHECK(ncclBcast(s, c, t, root, comm, NULL));
            for (size_t i = 0; i < c; i++)
                expect("bcast", t, s, i, root * 100 + i);
        }
        /* reduce (sum) to the last rank */
        for (size_t i = 0; i < c; i++)
            put(t, s, i, r + 1 + i);
        memset(d, 0, c * dsize(t));
        NCCLCHECK(ncclReduce(s, d, c, t, ncclSum, n - 1, comm, NULL));
        if (r == n - 1)
            for (size_t i = 0; i < c; i++)
                expect("reduce", t, d, i, n * (n + 1) / 2 + n * (double)i);
        /* all-gather, out of place and in place */
        for (size_t i = 0; i < c; i++)
            put(t, s, i, r * 100 + i);
        NCCLCHECK(ncclAllGather(s, d, c, t, comm, NULL));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < c; i++)
                expect("allgather", t, d, p * c + i, p * 100 + i);
        memset(d, 0, n * c * dsize(t));
        for (size_t i = 0; i < c; i++)
            put(t, d, r * c + i, r * 100 + i);
        NCCLCHECK(ncclAllGather((char *)d + r * c * dsize(t), d, c, t, comm, NULL));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < c; i++)
                expect("allgather in place", t, d, p * c + i, p * 100 + i);
        /* reduce-scatter (sum) */
        for (size_t j = 0; j < n * c; j++)
            put(t, s, j, (r + 1) * (double)(j + 1));
        NCCLCHECK(ncclReduceScatter(s, d, c, t, ncclSum, comm, NULL));
        for (size_t i = 0; i < c; i++)
            expect("reducescatter", t, d, i, n * (n + 1) / 2 * (double)(r * c + i + 1));
        /* all-to-all */
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < c; i++)
                put(t, s, p * c + i, r * 1000 + p * 10 + i);
        NCCLCHECK(ncclAlltoAll(s, d, c, t, comm, NULL));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < c; i++)
                expect("alltoall", t, d, p * c + i, p * 1000 + r * 10 + i);
        /* gather to rank 0, scatter from the last rank */
        for (size_t i = 0; i < c; i++)
            put(t, s, i, r * 100 + i);
        memset(d, 0, n * c * dsize(t));
        NCCLCHECK(ncclGather(s, d, c, t, 0, comm, NULL));
        if (r == 0)
            for (int p = 0; p < n; p++)
                for (size_t i = 0; i < c; i++)
                    expect("gather", t, d, p * c + i, p * 100 + i);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < c; i++)
                put(t, s, p * c + i, r == n - 1 ? (double)(p * 100 + i) : -1.0);
        memset(d, 0, n * c * dsize(t));
        NCCLCHECK(ncclScatter(s, d, c, t, n - 1, comm, NULL));
        for (size_t i = 0; i < c; i++)
            expect("scatter", t, d, i, r * 100 + i);
        free(s);
        free(d);
    }
}

static void test_groups(ncclComm_t comm, int r, int n)
{
    const size_t c = 11;
    int32_t *s = calloc(n * c, 4), *d = calloc(n * c, 4), *ring = calloc(c, 4);
    CHECK(s && d && ring);
    /* a ring shift and an exchange with every rank (self included), all in one group */
    for (size_t i = 0; i < c; i++)
        s[i] = r * 10 + (int)i;
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(s, c, ncclInt32, next, comm, NULL));
    NCCLCHECK(ncclRecv(ring, c, ncclInt32, prev, comm, NULL));
    for (int p = 0; p < n; p++) {
        NCCLCHECK(ncclRecv(d + p * c, c, ncclInt32, p, comm, NULL));
        NCCLCHECK(ncclSend(s, c, ncclInt32, p, comm, NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    for (size_t i = 0; i < c; i++)
        CHECK(ring[i] == prev * 10 + (int)i);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < c; i++)
            CHECK(d[p * c + i] == p * 10 + (int)i);
    /* two collectives issued together, in a nested group */
    double x = r + 1, sum = 0;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(&x, &sum, 1, ncclFloat64, ncclSum, comm, NULL));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclAllGather(s, d, c, ncclInt32, comm, NULL));
    CHECK(sum == 0); /* nothing runs before the outer end */
    NCCLCHECK(ncclGroupEnd());
    CHECK(sum == n * (n + 1) / 2.0);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < c; i++)
            CHECK(d[p * c + i] == p * 10 + (int)i);
    /* a simulated group estimates and runs nothing */
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    double y = 7;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, comm, NULL));
    NCCLCHECK(ncclGroupSimulateEnd(&sim));
    CHECK(y == 7);
    CHECK(sim.estimatedTime >= 0);
    free(s);
    free(d);
    free(ring);
}

static void test_premulsum(ncclComm_t comm, int r, int n)
{
    float scalar = 2.5f, xs = (float)(r + 1), ys = 0;
    ncclRedOp_t op;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    CHECK((int)op >= (int)ncclNumOps);
    NCCLCHECK(ncclAllReduce(&xs, &ys, 1, ncclFloat32, op, comm, NULL));
    CHECK(ys == 2.5f * n * (n + 1) / 2);
    /* the wrong dtype for this operator is refused */
    double xd = 1, yd;
    CHECK(ncclAllReduce(&xd, &yd, 1, ncclFloat64, op, comm, NULL) == ncclInvalidArgument);
    NCCLCHECK(ncclRedOpDestroy(op, comm));
    /* a "device" scalar: memory from ncclMemAlloc */
    double *dscal;
    NCCLCHECK(ncclMemAlloc((void **)&dscal, sizeof(double)));
    *dscal = -3;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&op, dscal, ncclFloat64, ncclScalarDevice, comm));
    xd = r;
    NCCLCHECK(ncclAllReduce(&xd, &yd, 1, ncclFloat64, op, comm, NULL));
    CHECK(yd == -3.0 * n * (n - 1) / 2);
    NCCLCHECK(ncclRedOpDestroy(op, comm));
    NCCLCHECK(ncclMemFree(dscal));
}

static void test_split_shrink(ncclComm_t comm, int r, int n)
{
    ncclComm_t sub = NULL;
    int cnt, me;
    /* color by parity, key reversing the order */
    NCCLCHECK(ncclCommSplit(comm, r % 2, n - r, &sub, NULL));
    CHECK(sub != NULL);
    int want_cnt = (n + (r % 2 ? 0 : 1)) / 2, want_me = 0;
    for (int q = r + 2; q < n; q += 2)
        want_me++;
    NCCLCHECK(ncclCommCount(sub, &cnt));
    NCCLCHECK(ncclCommUserRank(sub, &me));
    CHECK(cnt == want_cnt && me == want_me);
    int64_t v = r, sum = 0, want = 0;
    for (int q = r % 2; q < n; q += 2)
        want += q;
    NCCLCHECK(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, NULL));
    CHECK(sum == want);
    NCCLCHECK(ncclCommFinalize(sub));
    NCCLCHECK(ncclCommDestroy(sub));
    /* rank 0 opts out; a nonblocking configuration is honoured */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    sub = (ncclComm_t)&cfg; /* must be overwritten */
    ncclResult_t res = ncclCommSplit(comm, r == 0 ? NCCL_SPLIT_NOCOLOR : 5, r, &sub, &cfg);
    CHECK(res == ncclSuccess || res == ncclInProgress);
    if (r == 0) {
        CHECK(sub == NULL);
    } else {
        ncclResult_t st;
        do
            NCCLCHECK(ncclCommGetAsyncError(sub, &st));
        while (st == ncclInProgress);
        CHECK(st == ncclSuccess);
        NCCLCHECK(ncclCommCount(sub, &cnt));
        NCCLCHECK(ncclCommUserRank(sub, &me));
        CHECK(cnt == n - 1 && me == r - 1);
        NCCLCHECK(ncclCommDestroy(sub));
    }
    /* shrink away the last rank, which does not take part */
    if (n > 1 && r < n - 1) {
        int excl = n - 1;
        NCCLCHECK(ncclCommShrink(comm, &excl, 1, &sub, NULL, NCCL_SHRINK_DEFAULT));
        NCCLCHECK(ncclCommCount(sub, &cnt));
        NCCLCHECK(ncclCommUserRank(sub, &me));
        CHECK(cnt == n - 1 && me == r);
        v = r + 1;
        NCCLCHECK(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, NULL));
        CHECK(sum == (int64_t)(n - 1) * n / 2);
        NCCLCHECK(ncclCommDestroy(sub));
    }
}

static void test_errors(ncclComm_t comm, int r, int n)
{
    int x = 0, y = 0;
    CHECK(ncclAllReduce(&x, &y, 1, (ncclDataType_t)42, ncclSum, comm, NULL) == ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "datatype") != NULL);
    /* a bad operation is named as the caller wrote it, never by mesh's internal number */
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt32, (ncclRedOp_t)(ncclNumOps + 30), comm, NULL) ==
          ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "reduction operation 35") != NULL);
    CHECK(ncclAllReduce(&x, &y, 1, ncclInt32, (ncclRedOp_t)1000, comm, NULL) ==
          ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "reduction operation 1000") != NULL);
    CHECK(ncclRedOpDestroy((ncclRedOp_t)(ncclNumOps + 3), comm) == ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "op 8") != NULL);
    CHECK(ncclBroadcast(&x, &y, 1, ncclInt32, n, comm, NULL) == ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "root") != NULL);
    CHECK(ncclSend(&x, 1, ncclInt32, -1, comm, NULL) == ncclInvalidArgument);
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
    CHECK(ncclCommCount(NULL, &x) == ncclInvalidArgument);
    /* the device API is not offered */
    CHECK(ncclDevCommCreate(comm, NULL, NULL) == ncclInvalidUsage);
    CHECK(strstr(ncclGetLastError(comm), "ncclDevCommCreate") != NULL);
    /* argument errors do not poison the communicator */
    ncclResult_t st;
    NCCLCHECK(ncclCommGetAsyncError(comm, &st));
    CHECK(st == ncclSuccess);
    int v = r;
    NCCLCHECK(ncclAllReduce(&v, &y, 1, ncclInt32, ncclMax, comm, NULL));
    CHECK(y == n - 1);
    /* registration and windows are accepted on host memory */
    void *buf, *h;
    ncclWindow_t win;
    NCCLCHECK(ncclMemAlloc(&buf, 1 << 16));
    CHECK(((uintptr_t)buf & 4095) == 0);
    NCCLCHECK(ncclCommRegister(comm, buf, 1 << 16, &h));
    NCCLCHECK(ncclCommDeregister(comm, h));
    NCCLCHECK(ncclCommWindowRegister(comm, buf, 1 << 16, &win, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclCommWindowDeregister(comm, win));
    NCCLCHECK(ncclMemFree(buf));
}

/* ---------------------------------------------------------------- abort of a blocked call */

typedef struct {
    ncclComm_t comm;
    int peer;
    atomic_int done; /* set last, with release: res and t_end are read after it */
    ncclResult_t res;
    double t_end;
} blocked_t;

static void *blocked_recv(void *arg)
{
    blocked_t *b = arg;
    int v;
    /* nobody sends: only the abort ends this */
    b->res = ncclRecv(&v, 1, ncclInt32, b->peer, b->comm, NULL);
    b->t_end = now_s();
    atomic_store_explicit(&b->done, 1, memory_order_release);
    return NULL;
}

static void test_abort(ncclComm_t comm, const ncclUniqueId *id, int r, int n)
{
    /* rank 0 waits for rank 1 (itself when alone), the others wait for rank 0; only rank 0
     * aborts, from a second thread, and the others see it as a failed peer */
    blocked_t b = {.peer = r == 0 ? 1 % n : 0};
    int x = 0, y;
    NCCLCHECK(ncclCommInitRank(&b.comm, n, *id, r));
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL)); /* all are here */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, blocked_recv, &b) == 0);
    double t0 = now_s();
    if (r == 0) {
        usleep(300 * 1000);
        CHECK(!atomic_load_explicit(&b.done, memory_order_acquire));
        t0 = now_s();
        NCCLCHECK(ncclCommAbort(b.comm));
    }
    while (!atomic_load_explicit(&b.done, memory_order_acquire) && now_s() - t0 < 15)
        usleep(1000);
    CHECK(atomic_load_explicit(&b.done, memory_order_acquire));
    pthread_join(th, NULL);
    CHECK(b.res != ncclSuccess);
    CHECK(b.t_end - t0 < 10);
    if (r != 0) {
        CHECK(b.res == ncclRemoteError);
        NCCLCHECK(ncclCommAbort(b.comm));
    }
}

/* ---------------------------------------------------------------- one rank */

static void rank_main(int r, int n, ncclUniqueId *ids)
{
    g_rank = r;
    ncclComm_t comm;
    int v;
    ncclUniqueId id0 = ids[0];
    if (n == 1)
        memset(&id0, 0xab, sizeof(id0)); /* a single rank ignores the id */
    NCCLCHECK(ncclCommInitRank(&comm, n, id0, r));
    NCCLCHECK(ncclCommCount(comm, &v));
    CHECK(v == n);
    NCCLCHECK(ncclCommUserRank(comm, &v));
    CHECK(v == r);
    NCCLCHECK(ncclCommCuDevice(comm, &v));

    test_allreduce(comm, r, n);
    test_rooted_and_blocks(comm, r, n);
    test_groups(comm, r, n);
    test_premulsum(comm, r, n);
    test_split_shrink(comm, r, n);
    test_errors(comm, r, n);

    /* nonblocking creation, polled */
    ncclComm_t nb;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "nonblocking";
    ncclResult_t res = ncclCommInitRankConfig(&nb, n, ids[1], r, &cfg);
    CHECK(res == ncclInProgress || res == ncclSuccess);
    ncclResult_t st;
    double t0 = now_s();
    do {
        NCCLCHECK(ncclCommGetAsyncError(nb, &st));
        CHECK(now_s() - t0 < 30);
    } while (st == ncclInProgress);
    CHECK(st == ncclSuccess);
    int x = r + 1, y = 0;
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, nb, NULL));
    CHECK(y == n * (n + 1) / 2);
    NCCLCHECK(ncclCommFinalize(nb));
    NCCLCHECK(ncclCommDestroy(nb));

    /* a configuration not made by NCCL_CONFIG_INITIALIZER is refused */
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    CHECK(ncclCommInitRankConfig(&nb, n, ids[1], r, &bad) == ncclInvalidArgument);

    /* the scalable variant */
    ncclComm_t sc;
    /* with the shorter configuration of an older release (2.14: up to netName) */
    ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
    old.size = offsetof(ncclConfig_t, splitShare);
    old.version = 21400;
    old.blocking = 1;
    NCCLCHECK(ncclCommInitRankScalable(&sc, n, r, 1, &ids[3], &old));
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclMin, sc, NULL));
    CHECK(y == 1);
    NCCLCHECK(ncclCommDestroy(sc));

    test_abort(comm, &ids[2], r, n);

    /* everybody is still here: the first communicator still works */
    NCCLCHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclMax, comm, NULL));
    CHECK(y == n);
    NCCLCHECK(ncclCommFinalize(comm));
    NCCLCHECK(ncclCommDestroy(comm));
}

/* ---------------------------------------------------------------- launching */

static int run_world(int n)
{
    int fds[8][2];
    pid_t pids[8];
    for (int i = 1; i < n; i++)
        CHECK(pipe(fds[i]) == 0);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] > 0)
            continue;
        ncclUniqueId ids[NIDS];
        g_rank = r;
        if (r == 0) {
            for (int k = 0; k < NIDS; k++)
                NCCLCHECK(ncclGetUniqueId(&ids[k]));
            for (int i = 1; i < n; i++)
                CHECK(write(fds[i][1], ids, sizeof(ids)) == sizeof(ids));
        } else {
            size_t got = 0;
            while (got < sizeof(ids)) {
                ssize_t k = read(fds[r][0], (char *)ids + got, sizeof(ids) - got);
                CHECK(k > 0 || (k < 0 && errno == EINTR));
                if (k > 0)
                    got += (size_t)k;
            }
        }
        rank_main(r, n, ids);
        _exit(0);
    }
    for (int i = 1; i < n; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
    int failed = nccl_wait_children(pids, n, 50) != 0; /* a rank that skips (77) fails here */
    printf("%d process(es): %s\n", n, failed ? "FAILED" : "ok");
    return failed;
}

/* Several ranks of one process, created by ncclCommInitAll and driven by one thread. */
static void init_all_main(void)
{
    enum { N = 3 };
    ncclComm_t comms[N];
    int32_t s[N][5], d[N][5];
    g_rank = 0;
    NCCLCHECK(ncclCommInitAll(comms, N, NULL));
    for (int i = 0; i < N; i++) {
        int v;
        NCCLCHECK(ncclCommUserRank(comms[i], &v));
        CHECK(v == i);
        for (int j = 0; j < 5; j++)
            s[i][j] = (i + 1) * (j + 1);
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < N; i++)
        NCCLCHECK(ncclAllReduce(s[i], d[i], 5, ncclInt32, ncclSum, comms[i], NULL));
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 5; j++)
            CHECK(d[i][j] == 6 * (j + 1));
    for (int i = 0; i < N; i++)
        NCCLCHECK(ncclCommDestroy(comms[i]));

    /* aborting a creation that cannot finish (rank 1 never comes) returns at once */
    ncclUniqueId id;
    ncclComm_t lone;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    NCCLCHECK(ncclGetUniqueId(&id));
    CHECK(ncclCommInitRankConfig(&lone, 2, id, 0, &cfg) == ncclInProgress);
    usleep(200 * 1000);
    ncclResult_t st;
    NCCLCHECK(ncclCommGetAsyncError(lone, &st));
    CHECK(st == ncclInProgress);
    double t0 = now_s();
    NCCLCHECK(ncclCommAbort(lone));
    CHECK(now_s() - t0 < 1);
}

int main(void)
{
    /* make sure this runs on mesh's library, not on an installed NVIDIA one */
    Dl_info info;
    CHECK(dladdr((void *)ncclGetVersion, &info) != 0 && info.dli_fname != NULL);
    if (strstr(info.dli_fname, "nccl/.libs/libnccl.so.2") == NULL &&
        getenv("NCCL_ABI_ANY_LIBRARY") == NULL) {
        fprintf(stderr, "linked against %s instead of mesh's nccl/.libs/libnccl.so.2\n",
                info.dli_fname);
        return 1;
    }
    setenv("MESH_TIMEOUT", "20", 0);
    int version = 0;
    NCCLCHECK(ncclGetVersion(&version));
    CHECK(version == NCCL_VERSION_CODE && version == 22809);
    for (int res = ncclSuccess; res < ncclNumResults; res++) {
        const char *msg = ncclGetErrorString((ncclResult_t)res);
        CHECK(msg != NULL && msg[0] != '\0');
        for (int other = ncclSuccess; other < res; other++)
            CHECK(strcmp(msg, ncclGetErrorString((ncclResult_t)other)) != 0);
    }
    CHECK(ncclGetVersion(NULL) == ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(NULL), "version") != NULL);
    CHECK(ncclGetUniqueId(NULL) == ncclInvalidArgument);

    int failed = 0;
    static const int worlds[] = {1, 2, 4};
    for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++)
        failed |= run_world(worlds[w]);

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        init_all_main();
        _exit(0);
    }
    int f = nccl_wait_children(&pid, 1, 50) != 0;
    printf("ncclCommInitAll, 3 ranks in one process: %s\n", f ? "FAILED" : "ok");
    return failed | f;
}
