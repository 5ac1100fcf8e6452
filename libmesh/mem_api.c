/* The public calls on device memory (mesh.h, "device memory"): allocation, streams and copies of
 * the active device table, with their arguments checked, for clients that see no mem.h. */
#include <config.h> /* the generated one */
#define MESH_LOG_SUBSYSTEM "mem"
#include "libmesh/log.h"
#include "libmesh/mem.h"
#include "libmesh/progress.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* The active table, or MESH_ERR_UNSUPPORTED naming what was asked. */
static mesh_status_t api_table(const char *what, const mesh_mem_ops_t **ops)
{
    *ops = mesh_mem_table(NULL);
    if (*ops != NULL)
        return MESH_OK;
    return mesh_error(MESH_ERR_UNSUPPORTED,
                      "%s: no device table is active (no usable CUDA driver and GPU, and "
                      "MESH_DEVICE_EMU is off)",
                      what);
}

MESH_API const char *mesh_device_table(void)
{
    const mesh_mem_ops_t *ops = mesh_mem_table(NULL);
    return ops != NULL ? ops->name : NULL;
}

MESH_API mesh_status_t mesh_device_current(int *device)
{
    const mesh_mem_ops_t *ops;
    if (device == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_device_current: device is NULL");
    MESH_CHECK(api_table("mesh_device_current", &ops));
    return ops->current_device(device);
}

MESH_API mesh_status_t mesh_mem_alloc(mesh_memtype_t type, size_t bytes, void **ptr)
{
    const mesh_mem_ops_t *ops;
    int device;
    if (ptr == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_mem_alloc: ptr is NULL");
    *ptr = NULL;
    if (bytes == 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_mem_alloc: bytes is 0");
    switch (type) {
    case MESH_MEMTYPE_HOST:
        if (posix_memalign(ptr, 64, bytes) != 0)
            return mesh_error(MESH_ERR_NO_MEMORY, "mesh_mem_alloc: %zu bytes of host memory",
                              bytes);
        return MESH_OK;
    case MESH_MEMTYPE_HOST_PINNED:
        MESH_CHECK(api_table("mesh_mem_alloc of pinned host memory", &ops));
        return ops->host_alloc(ptr, bytes);
    case MESH_MEMTYPE_DEVICE:
        MESH_CHECK(api_table("mesh_mem_alloc of device memory", &ops));
        MESH_CHECK(ops->current_device(&device));
        return ops->dev_alloc(ptr, bytes, device);
    default:
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_mem_alloc: unknown memory type %d",
                          (int)type);
    }
}

MESH_API void mesh_mem_free(void *ptr)
{
    mesh_mem_info_t info;
    if (ptr == NULL)
        return;
    if (mesh_mem_query(ptr, &info) != MESH_OK || info.ops == NULL || info.kind == MESH_MEM_HOST) {
        free(ptr);
        return;
    }
    if (info.kind == MESH_MEM_HOST_PINNED)
        info.ops->host_free(ptr);
    else
        info.ops->dev_free(ptr);
}

MESH_API mesh_status_t mesh_mem_type(const void *ptr, mesh_memtype_t *type)
{
    mesh_mem_info_t info;
    if (type == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_mem_type: type is NULL");
    MESH_CHECK(mesh_mem_query(ptr, &info));
    *type = info.kind == MESH_MEM_HOST          ? MESH_MEMTYPE_HOST
            : info.kind == MESH_MEM_HOST_PINNED ? MESH_MEMTYPE_HOST_PINNED
                                                : MESH_MEMTYPE_DEVICE;
    return MESH_OK;
}

MESH_API mesh_status_t mesh_stream_create(void **stream)
{
    const mesh_mem_ops_t *ops;
    if (stream == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_stream_create: stream is NULL");
    *stream = NULL;
    MESH_CHECK(api_table("mesh_stream_create", &ops));
    return ops->stream_create(stream);
}

MESH_API void mesh_stream_destroy(void *stream)
{
    const mesh_mem_ops_t *ops = mesh_mem_table(NULL);
    if (stream != NULL && ops != NULL)
        ops->stream_destroy(stream);
}

MESH_API mesh_status_t mesh_memcpy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    const mesh_mem_ops_t *ops;
    if (bytes == 0)
        return MESH_OK;
    if (dst == NULL || src == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_memcpy_async: %s is NULL",
                          dst == NULL ? "dst" : "src");
    MESH_CHECK(api_table("mesh_memcpy_async", &ops));
    return ops->copy_async(dst, src, bytes, stream);
}

/* Yields for the first 100 us, then naps from 1 us doubling to 100 us. */
static void api_nap(double waited_s, long *nap_ns)
{
    if (waited_s < 100e-6) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, *nap_ns};
    nanosleep(&ts, NULL);
    if (*nap_ns < 100000)
        *nap_ns *= 2;
}

MESH_API mesh_status_t mesh_stream_synchronize(void *stream)
{
    const mesh_mem_ops_t *ops;
    void *event;
    MESH_CHECK(api_table("mesh_stream_synchronize", &ops));
    MESH_CHECK(ops->event_create(&event));
    mesh_status_t st = ops->event_record(event, stream);
    double t0 = mesh_time(), limit = mesh_default_timeout();
    long nap_ns = 1000;
    while (st == MESH_OK && ops->event_query(event) == MESH_INPROGRESS) {
        double waited = mesh_time() - t0;
        if (waited > limit) {
            st = mesh_error(MESH_ERR_TIMEOUT,
                            "mesh_stream_synchronize: the stream's work did not complete in "
                            "%.0f s (MESH_TIMEOUT)",
                            limit);
            break;
        }
        api_nap(waited, &nap_ns);
    }
    if (st == MESH_OK)
        st = ops->event_query(event); /* MESH_OK, or the stream's failure */
    ops->event_destroy(event);
    return st;
}
