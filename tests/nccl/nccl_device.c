/*
 * NCCL's API on device buffers ordered on streams: 2 and 4 forked processes sharing one device
 * run every collective (all-reduce with each operation, pre-multiplied sums with a host and a
 * device scalar, broadcast, reduce, all-gather, reduce-scatter, all-to-all), point-to-point in
 * a group, and a group of several collectives, each checked exactly once its stream is
 * synchronized. The communicator's device is the one current at its creation.
 *
 * With --launched DIR the program is one rank of a launcher's world instead (meshrun, and with
 * --nodes K the ranks in K simulated nodes, device data between them staged over the network):
 * the same tests, the unique id passed through a file in DIR.
 *
 * Built two ways from this file:
 *   tests/nccl/nccl_device_emu   NCCL_DEVICE_EMU: the shim's sources on the emulated device
 *                                (MESH_DEVICE_EMU=1), its buffers and streams from mesh's public
 *                                device API. Also: a call returns before its stream ran it (the
 *                                stream held), and another device's buffer is refused.
 *   tests/gpu/nccl_cuda          linked to mesh's libnccl.so.2; buffers from cuMemAlloc and
 *                                streams from cuStreamCreate of GPU 0 through the CUDA driver
 *                                (opened with dlopen). Exits 77 without a driver or a GPU.
 */
#define _GNU_SOURCE
#include "nccl/nccl_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl_children.h"
#include "nccl_launched.h"

#ifdef NCCL_DEVICE_EMU
#include "libmesh/mem_emu.h"
#include <mesh.h>
#define MODE "emu"
#else
#define MODE "cuda"
#endif

static int g_rank = -1;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__,      \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define NCCLCHECK(call)                                                                            \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        CHECK(r_ == ncclSuccess, "%s -> %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_),      \
              ncclGetLastError(NULL));                                                             \
    } while (0)

#define COUNT 4099 /* elements per rank and block: odd, not a multiple of any chunk */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the device: buffers, streams and the program's host buffers */
#include "nccl_device_mem.h"

/* ---------------------------------------------------------------- typed values */

static size_t dsize(ncclDataType_t t)
{
    return t == ncclFloat64 ? 8 : 4;
}

static void put(ncclDataType_t t, void *buf, size_t i, double v)
{
    if (t == ncclInt32)
        ((int32_t *)buf)[i] = (int32_t)v;
    else if (t == ncclFloat32)
        ((float *)buf)[i] = (float)v;
    else
        ((double *)buf)[i] = v;
}

static double get(ncclDataType_t t, const void *buf, size_t i)
{
    if (t == ncclInt32)
        return ((const int32_t *)buf)[i];
    if (t == ncclFloat32)
        return ((const float *)buf)[i];
    return ((const double *)buf)[i];
}

static const char *tname(ncclDataType_t t)
{
    return t == ncclInt32 ? "int32" : t == ncclFloat32 ? "float32" : "float64";
}

/* Rank r's element i for an operation (exact in every type and every result). */
static double in_val(ncclRedOp_t op, int r, int n, size_t i)
{
    switch (op) {
    case ncclProd:
        return 1 + (double)((r + i) % 3);
    case ncclMax:
    case ncclMin:
        return (double)((r * 7 + i * 3) % 11) - 5;
    default: /* sums and averages: the average is exact too */
        return (double)(r * n) + (double)(i % 7);
    }
}

static double reduced(ncclRedOp_t op, int n, size_t i)
{
    double acc = in_val(op, 0, n, i);
    for (int r = 1; r < n; r++) {
        double v = in_val(op, r, n, i);
        if (op == ncclProd)
            acc *= v;
        else if (op == ncclMax)
            acc = v > acc ? v : acc;
        else if (op == ncclMin)
            acc = v < acc ? v : acc;
        else
            acc += v;
    }
    return op == ncclAvg ? acc / n : acc;
}

/* A device buffer of count elements holding vals(i), written through the stream. */
static void *dev_filled(ncclDataType_t t, size_t count, double (*vals)(size_t, void *), void *arg,
                        void *stream)
{
    void *h = host_alloc(count * dsize(t)), *d = dev_alloc(count * dsize(t));
    for (size_t i = 0; i < count; i++)
        put(t, h, i, vals(i, arg));
    dev_copy_in(d, h, count * dsize(t), stream);
    return d;
}

static double minus_one(size_t i, void *arg)
{
    (void)i;
    (void)arg;
    return -1;
}

/* The device buffer's count elements, read back after the stream ran everything before. */
static void *read_back(ncclDataType_t t, const void *d, size_t count, void *stream)
{
    void *h = host_alloc(count * dsize(t));
    dev_copy_out(h, d, count * dsize(t), stream);
    dev_sync(stream);
    return h;
}

static void expect_all(const char *what, ncclDataType_t t, const void *h, size_t count,
                       double (*want)(size_t, void *), void *arg)
{
    for (size_t i = 0; i < count; i++) {
        double w = want(i, arg), g = get(t, h, i);
        CHECK(g == w, "%s (%s): element %zu is %g, expected %g", what, tname(t), i, g, w);
    }
}

/* ---------------------------------------------------------------- the tests */

struct ctx {
    int r, n;
    ncclRedOp_t op;
    int root;
    double scalar;
};

static double v_in(size_t i, void *a)
{
    struct ctx *c = a;
    return in_val(c->op, c->r, c->n, i);
}

static double v_reduced(size_t i, void *a)
{
    struct ctx *c = a;
    return c->scalar * reduced(c->op, c->n, i);
}

static void test_allreduce(ncclComm_t comm, int r, int n, void *s)
{
    static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    static const char *names[] = {"sum", "prod", "max", "min", "avg"};
    static const ncclDataType_t types[] = {ncclInt32, ncclFloat32, ncclFloat64};
    for (size_t o = 0; o < 5; o++)
        for (size_t k = 0; k < 3; k++) {
            ncclDataType_t t = types[k];
            if (ops[o] == ncclAvg && t == ncclInt32)
                continue; /* NCCL's integer average truncates; the float ones are exact here */
            struct ctx c = {r, n, ops[o], 0, 1};
            void *in = dev_filled(t, COUNT, v_in, &c, s);
            void *out = dev_filled(t, COUNT, minus_one, NULL, s);
            NCCLCHECK(ncclAllReduce(in, out, COUNT, t, ops[o], comm, s));
            char what[64];
            snprintf(what, sizeof(what), "allreduce %s", names[o]);
            expect_all(what, t, read_back(t, out, COUNT, s), COUNT, v_reduced, &c);
            /* in place */
            NCCLCHECK(ncclAllReduce(in, in, COUNT, t, ops[o], comm, s));
            snprintf(what, sizeof(what), "in-place allreduce %s", names[o]);
            expect_all(what, t, read_back(t, in, COUNT, s), COUNT, v_reduced, &c);
            dev_free(in);
            dev_free(out);
            host_free_all();
        }
}

static void test_premulsum(ncclComm_t comm, int r, int n, void *s)
{
    for (int device_scalar = 0; device_scalar < 2; device_scalar++) {
        float scalar = device_scalar ? 3.0f : 0.5f;
        void *where = &scalar, *d_scalar = NULL;
        if (device_scalar) {
            d_scalar = dev_alloc(sizeof(float));
            dev_copy_in(d_scalar, &scalar, sizeof(float), s);
            dev_sync(s);
            where = d_scalar;
        }
        ncclRedOp_t op;
        NCCLCHECK(ncclRedOpCreatePreMulSum(
            &op, where, ncclFloat32, device_scalar ? ncclScalarDevice : ncclScalarHostImmediate,
            comm));
        struct ctx c = {r, n, ncclSum, 0, scalar};
        void *in = dev_filled(ncclFloat32, COUNT, v_in, &c, s);
        void *out = dev_filled(ncclFloat32, COUNT, minus_one, NULL, s);
        NCCLCHECK(ncclAllReduce(in, out, COUNT, ncclFloat32, op, comm, s));
        expect_all(device_scalar ? "premulsum (device scalar)" : "premulsum (host scalar)",
                   ncclFloat32, read_back(ncclFloat32, out, COUNT, s), COUNT, v_reduced, &c);
        NCCLCHECK(ncclRedOpDestroy(op, comm));
        dev_free(in);
        dev_free(out);
        if (d_scalar != NULL)
            dev_free(d_scalar);
        host_free_all();
    }
}

/* Element i of rank r's block b (b: the block's destination, or -1 for a single block). */
static double blk(int r, int b, size_t i)
{
    return (double)(r * 100000 + (b + 1) * 1000) + (double)(i % 997);
}

static double v_rank(size_t i, void *a)
{
    struct ctx *c = a;
    return blk(c->r, -1, i);
}

static double v_root(size_t i, void *a)
{
    struct ctx *c = a;
    return blk(c->root, -1, i);
}

static double v_gathered(size_t i, void *a)
{
    (void)a;
    return blk((int)(i / COUNT), -1, i % COUNT);
}

static double v_blocks(size_t i, void *a)
{
    struct ctx *c = a;
    return blk(c->r, (int)(i / COUNT), i % COUNT);
}

static double v_scattered(size_t i, void *a)
{
    struct ctx *c = a;
    double sum = 0;
    for (int r = 0; r < c->n; r++)
        sum += blk(r, c->r, i);
    return sum;
}

static double v_exchanged(size_t i, void *a)
{
    struct ctx *c = a;
    return blk((int)(i / COUNT), c->r, i % COUNT);
}

static double v_reduce_root(size_t i, void *a)
{
    struct ctx *c = a;
    double sum = 0;
    for (int r = 0; r < c->n; r++)
        sum += blk(r, -1, i);
    return c->r == c->root ? sum : -1;
}

static void test_rooted_and_blocks(ncclComm_t comm, int r, int n, void *s)
{
    const ncclDataType_t t = ncclFloat64;
    struct ctx c = {r, n, ncclSum, n - 1, 1};
    /* broadcast out of place from the last rank, then in place (ncclBcast) from rank 0 */
    void *in = dev_filled(t, COUNT, v_rank, &c, s);
    void *out = dev_filled(t, COUNT, minus_one, NULL, s);
    NCCLCHECK(ncclBroadcast(in, out, COUNT, t, c.root, comm, s));
    expect_all("broadcast", t, read_back(t, out, COUNT, s), COUNT, v_root, &c);
    c.root = 0;
    NCCLCHECK(ncclBcast(in, COUNT, t, 0, comm, s));
    expect_all("bcast", t, read_back(t, in, COUNT, s), COUNT, v_root, &c);
    dev_free(in);
    dev_free(out);
    host_free_all();

    /* reduce to rank 1: the others' receive buffers stay as they were */
    c.root = 1;
    in = dev_filled(t, COUNT, v_rank, &c, s);
    out = dev_filled(t, COUNT, minus_one, NULL, s);
    NCCLCHECK(ncclReduce(in, out, COUNT, t, ncclSum, c.root, comm, s));
    expect_all("reduce", t, read_back(t, out, COUNT, s), COUNT, v_reduce_root, &c);
    dev_free(in);
    dev_free(out);
    host_free_all();

    /* all-gather */
    in = dev_filled(t, COUNT, v_rank, &c, s);
    out = dev_filled(t, (size_t)n * COUNT, minus_one, NULL, s);
    NCCLCHECK(ncclAllGather(in, out, COUNT, t, comm, s));
    expect_all("allgather", t, read_back(t, out, (size_t)n * COUNT, s), (size_t)n * COUNT,
               v_gathered, &c);
    dev_free(in);
    dev_free(out);
    host_free_all();

    /* reduce-scatter: block b of every rank sums into rank b */
    in = dev_filled(t, (size_t)n * COUNT, v_blocks, &c, s);
    out = dev_filled(t, COUNT, minus_one, NULL, s);
    NCCLCHECK(ncclReduceScatter(in, out, COUNT, t, ncclSum, comm, s));
    expect_all("reducescatter", t, read_back(t, out, COUNT, s), COUNT, v_scattered, &c);
    dev_free(out);
    host_free_all();

    /* all-to-all: block b goes to rank b */
    out = dev_filled(t, (size_t)n * COUNT, minus_one, NULL, s);
    NCCLCHECK(ncclAlltoAll(in, out, COUNT, t, comm, s));
    expect_all("alltoall", t, read_back(t, out, (size_t)n * COUNT, s), (size_t)n * COUNT,
               v_exchanged, &c);
    dev_free(in);
    dev_free(out);
    host_free_all();
}

static double v_from_prev(size_t i, void *a)
{
    struct ctx *c = a;
    return blk((c->r + c->n - 1) % c->n, 0, i);
}

static double v_from_next(size_t i, void *a)
{
    struct ctx *c = a;
    return blk((c->r + 1) % c->n, 1, i);
}

static double v_mine0(size_t i, void *a)
{
    struct ctx *c = a;
    return blk(c->r, 0, i);
}

static double v_mine1(size_t i, void *a)
{
    struct ctx *c = a;
    return blk(c->r, 1, i);
}

/* A ring both ways in one group, receives posted first on one side and last on the other, and
 * large enough that a send needs its receiver. Then a group of three collectives. */
static void test_groups(ncclComm_t comm, int r, int n, void *s)
{
    const ncclDataType_t t = ncclFloat32;
    const size_t big = (size_t)1 << 20;
    struct ctx c = {r, n, ncclSum, 0, 1};
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    void *s0 = dev_filled(t, big, v_mine0, &c, s), *s1 = dev_filled(t, big, v_mine1, &c, s);
    void *r0 = dev_filled(t, big, minus_one, NULL, s), *r1 = dev_filled(t, big, minus_one, NULL, s);
    NCCLCHECK(ncclGroupStart());
    if (r % 2 == 0) {
        NCCLCHECK(ncclRecv(r0, big, t, prev, comm, s));
        NCCLCHECK(ncclRecv(r1, big, t, next, comm, s));
        NCCLCHECK(ncclSend(s0, big, t, next, comm, s));
        NCCLCHECK(ncclSend(s1, big, t, prev, comm, s));
    } else {
        NCCLCHECK(ncclSend(s0, big, t, next, comm, s));
        NCCLCHECK(ncclSend(s1, big, t, prev, comm, s));
        NCCLCHECK(ncclRecv(r0, big, t, prev, comm, s));
        NCCLCHECK(ncclRecv(r1, big, t, next, comm, s));
    }
    NCCLCHECK(ncclGroupEnd());
    expect_all("send/recv from the previous rank", t, read_back(t, r0, big, s), big, v_from_prev,
               &c);
    expect_all("send/recv from the next rank", t, read_back(t, r1, big, s), big, v_from_next, &c);
    dev_free(s0);
    dev_free(s1);
    dev_free(r0);
    dev_free(r1);
    host_free_all();

    /* an uneven all-to-all as frameworks write it (PyTorch's all_to_all_single with splits):
     * a send to and a receive from every rank, itself included, in one group; rank r sends
     * (r + j + 1) * 100 elements to rank j */
    {
        size_t sdispl[8], rdispl[8], stot = 0, rtot = 0;
        for (int j = 0; j < n; j++) {
            sdispl[j] = stot;
            rdispl[j] = rtot;
            stot += (size_t)(r + j + 1) * 100;
            rtot += (size_t)(j + r + 1) * 100;
        }
        float *h = host_alloc(stot * 4);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < (size_t)(r + j + 1) * 100; i++)
                h[sdispl[j] + i] = (float)blk(r, j, i);
        void *sb = dev_alloc(stot * 4), *rb = dev_filled(t, rtot, minus_one, NULL, s);
        dev_copy_in(sb, h, stot * 4, s);
        NCCLCHECK(ncclGroupStart());
        for (int j = 0; j < n; j++) {
            NCCLCHECK(ncclSend((float *)sb + sdispl[j], (size_t)(r + j + 1) * 100, t, j, comm, s));
            NCCLCHECK(ncclRecv((float *)rb + rdispl[j], (size_t)(j + r + 1) * 100, t, j, comm, s));
        }
        NCCLCHECK(ncclGroupEnd());
        float *got = read_back(t, rb, rtot, s);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < (size_t)(j + r + 1) * 100; i++)
                CHECK(got[rdispl[j] + i] == (float)blk(j, r, i),
                      "uneven all-to-all by send/recv: element %zu from rank %d is %g, expected %g",
                      i, j, got[rdispl[j] + i], blk(j, r, i));
        dev_free(sb);
        dev_free(rb);
        host_free_all();
    }

    /* all-reduce, all-gather and broadcast in one group, on one stream */
    c.op = ncclMax;
    c.root = n - 1;
    void *ar_in = dev_filled(t, COUNT, v_in, &c, s),
         *ar_out = dev_filled(t, COUNT, minus_one, 0, s);
    void *ag_in = dev_filled(t, COUNT, v_rank, &c, s);
    void *ag_out = dev_filled(t, (size_t)n * COUNT, minus_one, NULL, s);
    void *bc = dev_filled(t, COUNT, v_rank, &c, s);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(ar_in, ar_out, COUNT, t, ncclMax, comm, s));
    NCCLCHECK(ncclAllGather(ag_in, ag_out, COUNT, t, comm, s));
    NCCLCHECK(ncclBroadcast(bc, bc, COUNT, t, c.root, comm, s));
    NCCLCHECK(ncclGroupEnd());
    expect_all("grouped allreduce", t, read_back(t, ar_out, COUNT, s), COUNT, v_reduced, &c);
    expect_all("grouped allgather", t, read_back(t, ag_out, (size_t)n * COUNT, s),
               (size_t)n * COUNT, v_gathered, &c);
    expect_all("grouped broadcast", t, read_back(t, bc, COUNT, s), COUNT, v_root, &c);
    dev_free(ar_in);
    dev_free(ar_out);
    dev_free(ag_in);
    dev_free(ag_out);
    dev_free(bc);
    host_free_all();
}

static double v_sum_ranks(size_t i, void *a)
{
    struct ctx *c = a;
    double sum = 0;
    for (int r = 0; r < c->n; r++)
        sum += blk(r, -1, i % COUNT);
    return c->scalar * sum;
}

static double v_prev_rank(size_t i, void *a)
{
    struct ctx *c = a;
    return blk((c->r + c->n - 1) % c->n, -1, i);
}

static double v_root_prev(size_t i, void *a)
{
    struct ctx *c = a;
    return blk((c->root + c->n - 1) % c->n, -1, i);
}

static double v_reduced_at_root(size_t i, void *a)
{
    struct ctx *c = a;
    return c->r == c->root ? v_sum_ranks(i, a) : -1;
}

/* Eight calls queued on one stream before it is synchronized, each but the independent
 * all-to-all reading what an earlier one wrote: all-reduce, all-gather of its result,
 * reduce-scatter of that, a reduce of that to the last rank, a grouped send/recv around the
 * ring, a broadcast of what rank 1 received, and the all-to-all. Every result is checked once
 * the stream ran them all. */
static void test_queued(ncclComm_t comm, int r, int n, void *s)
{
    const ncclDataType_t t = ncclFloat64;
    const size_t nc = (size_t)n * COUNT;
    struct ctx c = {r, n, ncclSum, 1, 1};
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    void *x = dev_filled(t, COUNT, v_rank, &c, s), *y = dev_filled(t, COUNT, minus_one, NULL, s);
    void *z = dev_filled(t, nc, minus_one, NULL, s), *w = dev_filled(t, COUNT, minus_one, NULL, s);
    void *red = dev_filled(t, COUNT, minus_one, NULL, s);
    void *p = dev_filled(t, COUNT, minus_one, NULL, s), *bc = dev_filled(t, COUNT, minus_one, 0, s);
    void *q = dev_filled(t, nc, v_blocks, &c, s), *q2 = dev_filled(t, nc, minus_one, NULL, s);
    NCCLCHECK(ncclAllReduce(x, y, COUNT, t, ncclSum, comm, s));
    NCCLCHECK(ncclAllGather(y, z, COUNT, t, comm, s));
    NCCLCHECK(ncclReduceScatter(z, w, COUNT, t, ncclSum, comm, s));
    NCCLCHECK(ncclReduce(w, red, COUNT, t, ncclMax, n - 1, comm, s));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(x, COUNT, t, next, comm, s));
    NCCLCHECK(ncclRecv(p, COUNT, t, prev, comm, s));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclBroadcast(p, bc, COUNT, t, 1, comm, s));
    NCCLCHECK(ncclAlltoAll(q, q2, COUNT, t, comm, s));
    expect_all("queued allreduce", t, read_back(t, y, COUNT, s), COUNT, v_sum_ranks, &c);
    expect_all("queued allgather of its result", t, read_back(t, z, nc, s), nc, v_sum_ranks, &c);
    c.scalar = n;
    expect_all("queued reduce-scatter of that", t, read_back(t, w, COUNT, s), COUNT, v_sum_ranks,
               &c);
    c.root = n - 1;
    expect_all("queued reduce of that", t, read_back(t, red, COUNT, s), COUNT, v_reduced_at_root,
               &c);
    expect_all("queued send/recv from the previous rank", t, read_back(t, p, COUNT, s), COUNT,
               v_prev_rank, &c);
    c.root = 1;
    expect_all("queued broadcast of what rank 1 received", t, read_back(t, bc, COUNT, s), COUNT,
               v_root_prev, &c);
    expect_all("queued alltoall", t, read_back(t, q2, nc, s), nc, v_exchanged, &c);
    void *bufs[] = {x, y, z, w, red, p, bc, q, q2};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        dev_free(bufs[i]);
    host_free_all();
}

/* Device memory from ncclMemAlloc carries a collective as well. */
static void test_memalloc(ncclComm_t comm, int r, int n, void *s)
{
    const ncclDataType_t t = ncclInt32;
    struct ctx c = {r, n, ncclSum, 0, 1};
    void *h = host_alloc(COUNT * 4), *d = NULL;
    for (size_t i = 0; i < COUNT; i++)
        put(t, h, i, v_in(i, &c));
    NCCLCHECK(ncclMemAlloc(&d, COUNT * 4));
#ifdef NCCL_DEVICE_EMU
    mesh_memtype_t mt;
    CHECK(mesh_mem_type(d, &mt) == MESH_OK && mt == MESH_MEMTYPE_DEVICE,
          "ncclMemAlloc did not return device memory");
#endif
    dev_copy_in(d, h, COUNT * 4, s);
    NCCLCHECK(ncclAllReduce(d, d, COUNT, t, ncclSum, comm, s));
    expect_all("allreduce on ncclMemAlloc memory", t, read_back(t, d, COUNT, s), COUNT, v_reduced,
               &c);
    NCCLCHECK(ncclMemFree(d));
    host_free_all();
}

#ifdef NCCL_DEVICE_EMU
/* The call returns once its work is enqueued: with the stream held, neither its input copy nor
 * the collective nor the copy out ran; released, the stream delivers the result. */
static void test_stream_order(ncclComm_t comm, int r, int n, void *s)
{
    const ncclDataType_t t = ncclInt32;
    struct ctx c = {r, n, ncclSum, 0, 1};
    int32_t *h_in = host_alloc(COUNT * 4), *h_out = host_alloc(COUNT * 4);
    for (size_t i = 0; i < COUNT; i++) {
        h_in[i] = (int32_t)v_in(i, &c);
        h_out[i] = -1;
    }
    int32_t *d_in = dev_alloc(COUNT * 4), *d_out = dev_alloc(COUNT * 4);
    for (size_t i = 0; i < COUNT; i++)
        d_in[i] = d_out[i] = -7; /* stale values: emulated device memory is host memory */
    mesh_mem_emu_hold(1);
    dev_copy_in(d_in, h_in, COUNT * 4, s);
    double t0 = now_s();
    NCCLCHECK(ncclAllReduce(d_in, d_out, COUNT, t, ncclSum, comm, s));
    double dt = now_s() - t0;
    dev_copy_out(h_out, d_out, COUNT * 4, s);
    usleep(50 * 1000);
    CHECK(d_in[0] == -7 && d_out[0] == -7 && h_out[0] == -1,
          "the stream's work ran while it was held (in %d, out %d)", d_in[0], d_out[0]);
    mesh_mem_emu_hold(0);
    dev_sync(s);
    expect_all("allreduce ordered on a held stream", t, h_out, COUNT, v_reduced, &c);
    printf("rank %d: ncclAllReduce returned in %.1f ms with its stream held\n", r, dt * 1e3);
    dev_free(d_in);
    dev_free(d_out);
    host_free_all();
}

/* A buffer of another device than the communicator's is refused, naming both devices, and the
 * communicator still works. */
static void test_other_device(ncclComm_t comm, int r, int n, void *s)
{
    int mine = dev_expected(), other = mine == 0 ? 1 : 0;
    void *foreign = NULL;
    CHECK(mesh_mem_emu_alloc(&foreign, COUNT * 4, other) == MESH_OK, "foreign allocation");
    void *d = dev_alloc(COUNT * 4);
    ncclResult_t res = ncclAllReduce(foreign, foreign, COUNT, ncclInt32, ncclSum, comm, s);
    const char *msg = ncclGetLastError(comm);
    char want[2][32];
    snprintf(want[0], sizeof(want[0]), "device %d", other);
    snprintf(want[1], sizeof(want[1]), "device %d", mine);
    CHECK(res == ncclInvalidArgument, "a buffer of device %d gave %d (%s)", other, (int)res, msg);
    CHECK(strstr(msg, want[0]) != NULL && strstr(msg, want[1]) != NULL,
          "the message '%s' does not name devices %d and %d", msg, other, mine);
    if (r == 0)
        printf("a buffer of another device: %s\n", msg);
    mesh_mem_free(foreign);
    int32_t x = 0;
    /* host memory with a stream is refused too */
    res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, s);
    CHECK(res == ncclInvalidArgument, "host memory on a stream gave %d", (int)res);
    struct ctx c = {r, n, ncclSum, 0, 1};
    void *in = dev_filled(ncclInt32, COUNT, v_in, &c, s);
    NCCLCHECK(ncclAllReduce(in, d, COUNT, ncclInt32, ncclSum, comm, s));
    expect_all("allreduce after the refusals", ncclInt32, read_back(ncclInt32, d, COUNT, s), COUNT,
               v_reduced, &c);
    dev_free(in);
    dev_free(d);
    host_free_all();
}
#else
static volatile uint32_t *hold_flag;

/* Releases the held stream after 3 s whatever happens, so that a call that waited for its
 * stream fails the check below instead of hanging. */
static void *release_later(void *arg)
{
    (void)arg;
    for (int i = 0; i < 300 && *hold_flag == 0; i++)
        usleep(10 * 1000);
    __atomic_store_n(hold_flag, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The call returns once its work is enqueued: the stream waits on a flag in mapped host memory
 * (cuStreamWaitValue32), the all-reduce returns at once, and its output, read on another
 * stream meanwhile, is still the old one; released, the stream delivers the result. Skipped
 * where the driver has no stream memory operations. */
static void test_stream_hold(ncclComm_t comm, int r, int n, void *s)
{
    const ncclDataType_t t = ncclInt32;
    struct ctx c = {r, n, ncclSum, 0, 1};
    void *flag = NULL, *peek = NULL;
    CUdeviceptr flag_dev = 0;
    if (cu.host_alloc == NULL || cu.host_devptr == NULL || cu.wait_value == NULL ||
        cu.host_alloc(&flag, 4, 0x02 /* CU_MEMHOSTALLOC_DEVICEMAP */) != 0 ||
        cu.host_devptr(&flag_dev, flag, 0) != 0 || cu.host_alloc(&peek, COUNT * 4, 0) != 0) {
        printf("rank %d: no mapped host memory: stream hold not checked\n", r);
        return;
    }
    hold_flag = flag;
    *hold_flag = 0;
    void *in = dev_filled(t, COUNT, v_in, &c, s), *out = dev_filled(t, COUNT, minus_one, NULL, s);
    dev_sync(s);
    if (cu.wait_value(s, flag_dev, 1, 0 /* CU_STREAM_WAIT_VALUE_GEQ */) != 0) {
        printf("rank %d: no stream memory operations: stream hold not checked\n", r);
    } else {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, release_later, NULL) == 0, "thread");
        double t0 = now_s();
        NCCLCHECK(ncclAllReduce(in, out, COUNT, t, ncclSum, comm, s));
        double dt = now_s() - t0;
        void *s2 = dev_stream();
        CU(cu.dtoh(peek, (CUdeviceptr)(uintptr_t)out, COUNT * 4, s2));
        dev_sync(s2);
        int32_t seen = ((int32_t *)peek)[0], held = __atomic_load_n(hold_flag, __ATOMIC_SEQ_CST);
        __atomic_store_n(hold_flag, 1, __ATOMIC_SEQ_CST);
        pthread_join(th, NULL);
        CHECK(dt < 2.0 && !held, "ncclAllReduce took %.2f s on a held stream", dt);
        CHECK(seen == -1, "the output changed (%d) while the stream was held", seen);
        dev_stream_free(s2);
        printf("rank %d: ncclAllReduce returned in %.2f ms on a held stream\n", r, dt * 1e3);
    }
    expect_all("allreduce ordered on a held stream", t, read_back(t, out, COUNT, s), COUNT,
               v_reduced, &c);
    dev_free(in);
    dev_free(out);
    cu.host_free(flag);
    cu.host_free(peek);
    host_free_all();
}
#endif

static void rank_main(int r, int n, const ncclUniqueId *id)
{
    g_rank = r;
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, n, *id, r));
    int v;
    NCCLCHECK(ncclCommCuDevice(comm, &v));
    CHECK(v == dev_expected(), "ncclCommCuDevice gave %d, the current device is %d", v,
          dev_expected());
    void *s = dev_stream();
    test_allreduce(comm, r, n, s);
    test_premulsum(comm, r, n, s);
    test_rooted_and_blocks(comm, r, n, s);
    test_groups(comm, r, n, s);
    test_queued(comm, r, n, s);
    test_memalloc(comm, r, n, s);
#ifdef NCCL_DEVICE_EMU
    test_stream_order(comm, r, n, s);
    test_other_device(comm, r, n, s);
    /* an entry point mesh does not serve, for the report of MESH_NCCL_REPORT */
    CHECK(ncclDevCommCreate(comm, NULL, NULL) == ncclInvalidUsage, "ncclDevCommCreate served");
#else
    test_stream_hold(comm, r, n, s);
#endif
    /* the default stream (NULL) orders work as well */
    struct ctx c = {r, n, ncclMin, 0, 1};
    void *in = dev_filled(ncclInt32, COUNT, v_in, &c, NULL);
    NCCLCHECK(ncclAllReduce(in, in, COUNT, ncclInt32, ncclMin, comm, NULL));
    expect_all("allreduce on the default stream", ncclInt32, read_back(ncclInt32, in, COUNT, NULL),
               COUNT, v_reduced, &c);
    dev_free(in);
    host_free_all();
    dev_sync(s);
    NCCLCHECK(ncclCommFinalize(comm));
    NCCLCHECK(ncclCommDestroy(comm));
    dev_stream_free(s);
}

/* ---------------------------------------------------------------- launching */

/* n processes; rank 0 makes the id and passes it on through pipes. 77: no device. */
static int run_world(int n)
{
    int fds[8][2];
    pid_t pids[8];
    for (int i = 1; i < n; i++)
        CHECK(pipe(fds[i]) == 0, "pipe");
    double t0 = now_s();
    fflush(stdout); /* the children exit(): they must not print the parent's buffer again */
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0, "fork");
        if (pids[r] > 0)
            continue;
        g_rank = r;
        int setup = dev_setup();
        ncclUniqueId id;
        memset(&id, 0, sizeof(id));
        if (r == 0) {
            if (setup == 0)
                NCCLCHECK(ncclGetUniqueId(&id));
            for (int i = 1; i < n; i++)
                CHECK(write(fds[i][1], &id, sizeof(id)) == sizeof(id), "write");
        } else {
            size_t got = 0;
            while (got < sizeof(id)) {
                ssize_t k = read(fds[r][0], (char *)&id + got, sizeof(id) - got);
                CHECK(k > 0 || (k < 0 && errno == EINTR), "read");
                if (k > 0)
                    got += (size_t)k;
            }
        }
        if (setup != 0)
            _exit(setup);
        rank_main(r, n, &id);
        exit(0); /* not _exit: MESH_NCCL_REPORT prints at exit */
    }
    for (int i = 1; i < n; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
    int res = nccl_wait_children(pids, n, 240);
    printf("nccl_device (%s): %d processes on one device: %s (%.1f s)\n", MODE, n,
           res == 0    ? "ok"
           : res == 77 ? "no device"
                       : "FAILED",
           now_s() - t0);
    return res;
}

/* One rank of a launcher's world (--launched DIR): every test as above, the unique id passed
 * through DIR. 77: no device. */
static int run_launched(const char *dir)
{
    int r, n;
    double t0 = now_s();
    if (nccl_launched_rank(&r, &n) != 0) {
        fprintf(stderr, "--launched: MESH_RANK and MESH_SIZE are not set (start it with "
                        "meshrun)\n");
        return 2;
    }
    g_rank = r;
    CHECK(n >= 2, "--launched needs 2 ranks or more, not %d", n);
    int setup = dev_setup();
    if (setup != 0) /* the same verdict on every rank: none waits for an id that never comes */
        return setup;
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (r == 0) {
        NCCLCHECK(ncclGetUniqueId(&id));
        CHECK(nccl_launched_put(dir, &id, sizeof(id)) == 0, "the id was not published");
    } else {
        CHECK(nccl_launched_get(dir, r, &id, sizeof(id), 60) == 0, "no id");
    }
    rank_main(r, n, &id);
    const char *node = getenv("MESH_NODE_ID");
    printf("nccl_device (%s): rank %d of %d on %s: ok (%.1f s)\n", MODE, r, n,
           node != NULL ? node : "this node", now_s() - t0);
    return 0;
}

int main(int argc, char **argv)
{
    /* the worlds to run: the arguments, or 2 and 4 */
    int worlds[8] = {2, 4}, nw = 2, failed = 0;
    if (argc == 3 && strcmp(argv[1], "--launched") == 0)
        return run_launched(argv[2]);
    if (argc > 1) {
        nw = argc - 1 < 8 ? argc - 1 : 8;
        for (int i = 0; i < nw; i++)
            worlds[i] = atoi(argv[i + 1]);
    }
    for (int i = 0; i < nw; i++) {
        CHECK(worlds[i] >= 2 && worlds[i] <= 8, "ranks %d outside 2..8", worlds[i]);
        int res = run_world(worlds[i]);
        if (res == 77)
            return 77;
        failed |= res;
    }
    return failed;
}
