/* Device buffers of the device tests (dev_ipc.c, dev_hier.c): int32 elements between guard
 * elements, each with its image in pinned host memory, moved by the device table's copies on the
 * test's stream and checked on the host. The including file defines, before it includes this:
 * rank, size, failures (ints), comm, device (the device index), ops (the device table), stream
 * and event (the test's), and CHECK. */
#ifndef MESH_TESTS_GPU_DEV_BUF_H
#define MESH_TESTS_GPU_DEV_BUF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GUARD  16 /* int32 guard elements around every buffer */
#define POISON ((int32_t)0x5a5a5a5a)

/* A device buffer of n elements between guards, and its image in pinned host memory. */
typedef struct {
    int32_t *dev, *host; /* the allocations; the data starts GUARD elements in */
    size_t n;
} buf_t;

static void fatal(const char *what)
{
    fprintf(stderr, "[rank %d] %s: %s\n", rank, what, mesh_comm_last_error(NULL));
    exit(2);
}

static void sync_stream(void)
{
    if (ops->event_record(event, stream) != MESH_OK)
        fatal("event record");
    for (long k = 0;; k++) {
        mesh_status_t st = ops->event_query(event);
        if (st == MESH_OK)
            return;
        if (st != MESH_INPROGRESS || k > 600000)
            fatal("stream sync");
        usleep(100);
    }
}

static int32_t *at(const buf_t *b, size_t i) /* host image of element i */
{
    return b->host + GUARD + i;
}
static int32_t *dev(const buf_t *b) /* device address of element 0 */
{
    return b->dev + GUARD;
}

/* Host image to the device (guards included), or back. */
static void push(buf_t *b)
{
    if (ops->copy_async(b->dev, b->host, (b->n + 2 * GUARD) * 4, stream) != MESH_OK)
        fatal("copy to the device");
    sync_stream();
}
static void pull(buf_t *b)
{
    if (ops->copy_async(b->host, b->dev, (b->n + 2 * GUARD) * 4, stream) != MESH_OK)
        fatal("copy from the device");
    sync_stream();
}

static buf_t buf_new(size_t n)
{
    buf_t b = {NULL, NULL, n};
    size_t bytes = (n + 2 * GUARD) * 4;
    if (ops->dev_alloc((void **)&b.dev, bytes, device) != MESH_OK ||
        ops->host_alloc((void **)&b.host, bytes) != MESH_OK)
        fatal("allocation");
    for (size_t i = 0; i < n + 2 * GUARD; i++)
        b.host[i] = POISON;
    push(&b);
    return b;
}

static void buf_free(buf_t *b)
{
    ops->dev_free(b->dev);
    ops->host_free(b->host);
}

static void check_guards(const buf_t *b, const char *what)
{
    for (size_t i = 0; i < GUARD; i++) {
        CHECK(b->host[i] == POISON, "%s: guard %zu before the buffer changed", what, GUARD - i);
        CHECK(b->host[GUARD + b->n + i] == POISON, "%s: guard %zu after the buffer changed", what,
              i);
    }
}

/* Rank r's input element i in round g: multiples of the size, so that averages are exact. */
static int32_t input(int r, int g, size_t i)
{
    return (int32_t)size * (int32_t)(r * 7 + g * 131 + (int)(i % 1013));
}

/* The test's communicator from meshrun's environment, its rank and size, the device table, and a
 * stream and an event on the current device. Returns 0; 77 without a device table (prog named in
 * the message), 1 when the communicator cannot be made. */
static int dev_setup(const char *prog)
{
    if (mesh_mp_init(&comm, &rank, &size))
        return 1;
    ops = mesh_mem_table(NULL);
    if (ops == NULL) {
        fprintf(stderr,
                "%s needs a device: a CUDA driver and GPU, or the emulated one "
                "(MESH_DEVICE_EMU=1)\n",
                prog);
        mesh_comm_destroy(comm);
        return 77;
    }
    if (ops->current_device(&device) != MESH_OK || ops->stream_create(&stream) != MESH_OK ||
        ops->event_create(&event) != MESH_OK)
        fatal("device setup");
    return 0;
}

/* Frees the stream and the event of dev_setup. */
static void dev_teardown(void)
{
    ops->event_destroy(event);
    ops->stream_destroy(stream);
}

#endif
