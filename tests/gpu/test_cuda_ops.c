/* The CUDA table (mesh_mem_cuda_ops) against the host, on device 0: every dtype x op of the
 * device reductions bitwise equal to mesh_reduce_local3 (scale and divide to mesh_reduce_scale
 * and mesh_reduce_divide) at odd sizes, in place and out of place, aligned, element-aligned and
 * byte-misaligned, with guard bytes around every buffer; copies in every direction; a stream
 * held on a host flag (stream_wait) and a flag written by a stream (stream_write), with wrapping
 * values; event queries; memory kinds. Exits 77 without a driver or a device.
 *
 * NaN results: the host's NaN payloads depend on the compiler's operand order and on the CPU's
 * conversion instructions, so where the host gives a NaN the device must give a NaN of the same
 * kind of float (counted, and printed when the bits differ); every other result, integers and
 * finite floats, must match bit for bit. */
#include <config.h>

#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include "libmesh/mem.h"
#include "libmesh/reduce.h"
#include "tests/harness/harness.h"

#include <stdint.h>
#include <stdio.h>

#if !HAVE_CUDA
int main(void)
{
    printf("skip: built without CUDA\n");
    return MESH_TEST_SKIP;
}
#else
#include "libmesh/cuda/cu_driver.h"

#include <stdatomic.h>
#include <time.h>

#define GUARD  64 /* bytes before and after each buffer; a multiple of 16 */
#define POISON 0xa5

static const mesh_mem_ops_t *ops = &mesh_mem_cuda_ops;
static void *stream;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static long nan_payload_diffs;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sync_stream(void)
{
    CUresult r = mesh_cu.cuStreamSynchronize((CUstream)stream);
    CHECK_MSG(r == CUDA_SUCCESS, "cuStreamSynchronize: %d", (int)r);
}

static void *dev_alloc(size_t bytes)
{
    CUdeviceptr p;
    CUresult r = mesh_cu.cuMemAlloc(&p, bytes);
    CHECK_MSG(r == CUDA_SUCCESS, "cuMemAlloc %zu: %d", bytes, (int)r);
    return (void *)(uintptr_t)p;
}

/* Element i: random bits for integers and fp8; random values with specials for wider floats. */
static void fill(mesh_dtype_t d, void *buf, size_t n)
{
    size_t ds = mesh_dtype_size(d);
    static const double specials[] = {0.0,    -0.0,   1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0,
                                      1e-40,  -3e-39, 65504.0,   70000.0,    1e-7,
                                      3.0e38, 448.0,  57344.0};
    for (size_t i = 0; i < n; i++) {
        uint64_t x = next();
        if (!mesh_dtype_is_float(d) || ds == 1) {
            memcpy((char *)buf + i * ds, &x, ds);
        } else if (x % 16 == 0) {
            mesh_dtype_set(d, buf, i, specials[(x >> 8) % (sizeof(specials) / sizeof(*specials))]);
        } else {
            double v = (double)(int64_t)(x >> 11) / (double)(1ull << 45); /* about +-128 */
            mesh_dtype_set(d, buf, i, (x & 32) ? v : v * 1e-3);
        }
    }
}

/* Device result dev against host result ref over n elements. */
static void compare(mesh_dtype_t d, const void *dev, const void *ref, size_t n, const char *what)
{
    size_t ds = mesh_dtype_size(d);
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const char *)dev + i * ds, (const char *)ref + i * ds, ds) == 0)
            continue;
        double h = mesh_dtype_get(d, ref, i), g = mesh_dtype_get(d, dev, i);
        if (mesh_dtype_is_float(d) && h != h && g != g) {
            nan_payload_diffs++;
            continue;
        }
        CHECK_MSG(0, "%s %s: element %zu of %zu: device %.17g host %.17g", what, mesh_dtype_name(d),
                  i, n, g, h);
    }
}

/* A device buffer with guards: host image img (guards poisoned, data at GUARD + shift). */
typedef struct {
    unsigned char *dev, *img;
    size_t total;
} gbuf_t;

static gbuf_t gbuf(size_t bytes)
{
    gbuf_t g = {.total = bytes + 2 * GUARD + 16};
    g.dev = dev_alloc(g.total);
    g.img = malloc(g.total);
    CHECK(g.img != NULL);
    return g;
}

static void gbuf_put(gbuf_t *g, const void *data, size_t shift, size_t bytes)
{
    memset(g->img, POISON, g->total);
    memcpy(g->img + GUARD + shift, data, bytes);
    CHECK(ops->copy_async(g->dev, g->img, g->total, stream) == MESH_OK);
    sync_stream();
}

/* Copies the device buffer back; checks its guards; the data in out. */
static void gbuf_get(gbuf_t *g, void *out, size_t shift, size_t bytes, const char *what)
{
    CHECK(ops->copy_async(g->img, g->dev, g->total, stream) == MESH_OK);
    sync_stream();
    for (size_t i = 0; i < GUARD + shift; i++)
        CHECK_MSG(g->img[i] == POISON, "%s: guard byte %zu before is %#x", what, i, g->img[i]);
    for (size_t i = GUARD + shift + bytes; i < g->total; i++)
        CHECK_MSG(g->img[i] == POISON, "%s: guard byte after, at %zu, is %#x", what, i, g->img[i]);
    memcpy(out, g->img + GUARD + shift, bytes);
}

static void gbuf_free(gbuf_t *g)
{
    mesh_cu.cuMemFree((CUdeviceptr)(uintptr_t)g->dev);
    free(g->img);
}

static const size_t sizes[] = {1, 3, 17, 255, 1021, 4099, 65537, 1000003};
#define NSIZES (sizeof(sizes) / sizeof(*sizes))

/* Every op of dtype d at n elements with the data shifted by shift bytes from 16-byte aligned. */
static void test_reduce_one(mesh_dtype_t d, size_t n, size_t shift)
{
    size_t ds = mesh_dtype_size(d), bytes = n * ds;
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    unsigned char *ref = malloc(bytes), *out = malloc(bytes);
    CHECK(a && b && ref && out);
    gbuf_t ga = gbuf(bytes), gb = gbuf(bytes), gd = gbuf(bytes);
    char what[96];
    for (mesh_op_t op = MESH_SUM; op <= MESH_MAX; op++) {
        fill(d, a, n);
        fill(d, b, n);
        mesh_reduce_local3(ref, a, b, n, d, op);
        snprintf(what, sizeof(what), "reduce %s n=%zu shift=%zu out of place", mesh_op_name(op), n,
                 shift);
        gbuf_put(&ga, a, shift, bytes);
        gbuf_put(&gb, b, shift, bytes);
        gbuf_put(&gd, ref, shift, 0); /* guards only */
        CHECK(ops->reduce_async(gd.dev + GUARD + shift, ga.dev + GUARD + shift,
                                gb.dev + GUARD + shift, n, d, op, stream) == MESH_OK);
        gbuf_get(&gd, out, shift, bytes, what);
        compare(d, out, ref, n, what);
        /* in place, into b (dst == b) */
        snprintf(what, sizeof(what), "reduce %s n=%zu shift=%zu in place", mesh_op_name(op), n,
                 shift);
        CHECK(ops->reduce_async(gb.dev + GUARD + shift, ga.dev + GUARD + shift,
                                gb.dev + GUARD + shift, n, d, op, stream) == MESH_OK);
        gbuf_get(&gb, out, shift, bytes, what);
        compare(d, out, ref, n, what);
    }
    gbuf_free(&ga);
    gbuf_free(&gb);
    gbuf_free(&gd);
    free(a), free(b), free(ref), free(out);
}

static void test_scale_divide_one(mesh_dtype_t d, size_t n, size_t shift)
{
    size_t ds = mesh_dtype_size(d), bytes = n * ds;
    unsigned char *a = malloc(bytes), *ref = malloc(bytes), *out = malloc(bytes), scalar[8];
    CHECK(a && ref && out);
    gbuf_t ga = gbuf(bytes), gd = gbuf(bytes);
    char what[96];
    fill(d, a, n);
    fill(d, scalar, 1);
    if (mesh_dtype_is_float(d))
        mesh_dtype_set(d, scalar, 0, 0.37);
    mesh_reduce_scale(ref, a, n, d, scalar);
    snprintf(what, sizeof(what), "scale n=%zu shift=%zu", n, shift);
    gbuf_put(&ga, a, shift, bytes);
    gbuf_put(&gd, a, shift, 0);
    CHECK(ops->scale_async(gd.dev + GUARD + shift, ga.dev + GUARD + shift, n, d, scalar, stream) ==
          MESH_OK);
    gbuf_get(&gd, out, shift, bytes, what);
    compare(d, out, ref, n, what);
    for (int k = 1; k <= 8; k += 3) { /* divide by 1, 4 and 7, in place */
        memcpy(ref, a, bytes);
        mesh_reduce_divide(ref, n, d, k);
        snprintf(what, sizeof(what), "divide by %d n=%zu shift=%zu", k, n, shift);
        gbuf_put(&gd, a, shift, bytes);
        CHECK(ops->divide_async(gd.dev + GUARD + shift, n, d, k, stream) == MESH_OK);
        gbuf_get(&gd, out, shift, bytes, what);
        compare(d, out, ref, n, what);
    }
    gbuf_free(&ga);
    gbuf_free(&gd);
    free(a), free(ref), free(out);
}

static void test_reductions(void)
{
    for (mesh_dtype_t d = 0; d < MESH_DTYPE_COUNT; d++) {
        size_t ds = mesh_dtype_size(d);
        /* 16-byte aligned (vectors), element-aligned, and byte-misaligned (wider types) */
        size_t shifts[] = {0, ds < 16 ? ds : 8, 1};
        int nshifts = ds > 1 ? 3 : 2;
        for (size_t s = 0; s < NSIZES; s++)
            for (int k = 0; k < nshifts; k++) {
                test_reduce_one(d, sizes[s], shifts[k]);
                test_scale_divide_one(d, sizes[s], shifts[k]);
            }
        printf("ok: reduce, scale, divide %s\n", mesh_dtype_name(d));
    }
    printf("NaN results with other bits than the host's: %ld\n", nan_payload_diffs);
}

/* dst may equal a or b, not overlap them otherwise. */
static void test_reduce_refusals(void)
{
    char *d = dev_alloc(4096);
    CHECK(ops->reduce_async(d + 4, d, d + 1024, 100, MESH_FP32, MESH_SUM, stream) ==
          MESH_ERR_INVALID_ARG);
    CHECK(ops->reduce_async(d, d, d, 100, MESH_FP32, MESH_AVG, stream) == MESH_ERR_INVALID_ARG);
    CHECK(ops->reduce_async(d, d, d, 100, MESH_DTYPE_COUNT, MESH_SUM, stream) ==
          MESH_ERR_INVALID_ARG);
    CHECK(ops->reduce_async(d, d, d, 0, MESH_FP32, MESH_SUM, stream) == MESH_OK);
    mesh_cu.cuMemFree((CUdeviceptr)(uintptr_t)d);
    printf("ok: refusals\n");
}

static void test_query(void)
{
    mesh_mem_info_t info;
    char *d = dev_alloc(1 << 20);
    CHECK(ops->query(d + 4096, &info) == MESH_OK);
    CHECK(info.kind == MESH_MEM_DEVICE && info.device == 0 && info.ops == ops);
    CHECK(info.base == d && info.size >= (1u << 20));
    void *pinned;
    CHECK(ops->host_alloc(&pinned, 12345) == MESH_OK);
    CHECK(ops->query(pinned, &info) == MESH_OK && info.kind == MESH_MEM_HOST_PINNED);
    CHECK(((unsigned char *)pinned)[12344] == 0);
    void *heap = malloc(100);
    int local;
    CHECK(ops->query(heap, &info) == MESH_OK && info.kind == MESH_MEM_HOST && info.ops == NULL);
    CHECK(ops->query(&local, &info) == MESH_OK && info.kind == MESH_MEM_HOST);
    int dev = -1;
    CHECK(ops->current_device(&dev) == MESH_OK && dev == 0);
    free(heap);
    ops->host_free(pinned);
    mesh_cu.cuMemFree((CUdeviceptr)(uintptr_t)d);
    printf("ok: query\n");
}

/* Every direction: pageable host, pinned host, device, each to each. */
static void test_copies(void)
{
    const size_t n = (3u << 20) + 7;
    void *pinned[2], *pageable[2] = {malloc(n), malloc(n)}, *dev[2] = {dev_alloc(n), dev_alloc(n)};
    CHECK(pageable[0] && pageable[1]);
    CHECK(ops->host_alloc(&pinned[0], n) == MESH_OK && ops->host_alloc(&pinned[1], n) == MESH_OK);
    void **kinds[3] = {pageable, pinned, dev};
    const char *names[3] = {"pageable", "pinned", "device"};
    unsigned char *src = malloc(n), *out = malloc(n);
    CHECK(src && out);
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 3; t++) {
            for (size_t i = 0; i < n; i++)
                src[i] = (unsigned char)(i * 7 + s * 3 + t);
            CHECK(ops->copy_async(kinds[s][0], src, n, stream) == MESH_OK);
            memset(out, 0, n);
            CHECK(ops->copy_async(kinds[t][1], out, n, stream) == MESH_OK); /* clear */
            CHECK(ops->copy_async((char *)kinds[t][1] + 1, (char *)kinds[s][0] + 3, n - 5,
                                  stream) == MESH_OK);
            CHECK(ops->copy_async(out, kinds[t][1], n, stream) == MESH_OK);
            sync_stream();
            CHECK_MSG(out[0] == 0 && out[n - 4] == 0 && out[n - 1] == 0, "%s to %s: ends", names[s],
                      names[t]);
            CHECK_MSG(memcmp(out + 1, src + 3, n - 5) == 0, "%s to %s: data", names[s], names[t]);
        }
    CHECK(ops->copy_async(dev[0], dev[1], 0, stream) == MESH_OK);
    for (int i = 0; i < 2; i++) {
        ops->host_free(pinned[i]);
        free(pageable[i]);
        mesh_cu.cuMemFree((CUdeviceptr)(uintptr_t)dev[i]);
    }
    free(src), free(out);
    printf("ok: copies in every direction\n");
}

static uint32_t load_flag(uint32_t *f)
{
    return atomic_load_explicit((_Atomic uint32_t *)f, memory_order_acquire);
}

static void store_flag(uint32_t *f, uint32_t v)
{
    atomic_store_explicit((_Atomic uint32_t *)f, v, memory_order_release);
}

/* Polls event until it completes (5 s at most). */
static void wait_event(void *ev, const char *what)
{
    double t0 = now();
    mesh_status_t st;
    while ((st = ops->event_query(ev)) == MESH_INPROGRESS)
        CHECK_MSG(now() - t0 < 5.0, "%s: the event never completed", what);
    CHECK_MSG(st == MESH_OK, "%s: event query %d", what, (int)st);
}

/* A stream held on a host flag does nothing until the flag reaches the value (compared with
 * wrapping), and a flag written by a stream comes after the stream's earlier work. */
static void test_ordering(uint32_t start, uint32_t wait_for, uint32_t release)
{
    const size_t n = 1 << 20;
    uint32_t *flags;
    unsigned char *pinned, *dev = dev_alloc(n), *src = malloc(n);
    CHECK(src != NULL);
    CHECK(ops->host_alloc((void **)&flags, 64) == MESH_OK);
    CHECK(ops->host_alloc((void **)&pinned, n) == MESH_OK);
    void *ev, *other;
    CHECK(ops->event_create(&ev) == MESH_OK);
    CHECK(ops->stream_create(&other) == MESH_OK);
    memset(src, 0x5a, n);
    store_flag(&flags[0], start);
    store_flag(&flags[16], 0);
    CHECK(ops->stream_wait(stream, &flags[0], wait_for) == MESH_OK);
    CHECK(ops->copy_async(dev, src, n, stream) == MESH_OK);
    CHECK(ops->copy_async(pinned, dev, n, stream) == MESH_OK);
    CHECK(ops->event_record(ev, stream) == MESH_OK);
    CHECK(ops->stream_write(stream, &flags[16], 7) == MESH_OK);
    /* a second stream ordered after the first one's event */
    CHECK(ops->stream_wait_event(other, ev) == MESH_OK);
    CHECK(ops->stream_write(other, &flags[16] + 1, 9) == MESH_OK);
    double t0 = now();
    while (now() - t0 < 0.2) {
        CHECK_MSG(ops->event_query(ev) == MESH_INPROGRESS,
                  "the held stream went on (flag %u, "
                  "waiting for %u)",
                  start, wait_for);
        CHECK(load_flag(&flags[16]) == 0 && load_flag(&flags[17]) == 0);
    }
    CHECK(pinned[0] == 0 && pinned[n - 1] == 0);
    store_flag(&flags[0], release);
    wait_event(ev, "held stream");
    t0 = now();
    while (load_flag(&flags[16]) != 7 || load_flag(&flags[17]) != 9)
        CHECK_MSG(now() - t0 < 5.0, "stream_write never landed");
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(pinned[i] == 0x5a, "byte %zu not copied before the flag was written", i);
    ops->event_destroy(ev);
    ops->stream_destroy(other);
    ops->host_free(flags);
    ops->host_free(pinned);
    mesh_cu.cuMemFree((CUdeviceptr)(uintptr_t)dev);
    free(src);
}

int main(void)
{
    mesh_status_t st = ops->init();
    if (st == MESH_ERR_UNSUPPORTED) {
        printf("skip: %s\n", mesh_error_last());
        return MESH_TEST_SKIP;
    }
    CHECK_MSG(st == MESH_OK, "init: %s", mesh_status_string(st));
    CHECK(ops->init() == MESH_OK); /* idempotent */
    CUcontext ctx;
    CUdevice dev;
    CHECK(mesh_cu.cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(mesh_cu.cuCtxPushCurrent(ctx) == CUDA_SUCCESS);
    CHECK(ops->stream_create(&stream) == MESH_OK);
    test_query();
    test_copies();
    test_ordering(0, 1, 1);
    test_ordering(0xfffffff0u, 0xfffffff8u, 3u); /* the release wraps past zero */
    printf("ok: stream_wait, stream_write, events (MESH_CUDA_MEMOPS=%s)\n",
           getenv("MESH_CUDA_MEMOPS") ? getenv("MESH_CUDA_MEMOPS") : "auto");
    test_reduce_refusals();
    test_reductions();
    ops->stream_destroy(stream);
    return 0;
}
#endif
