/* mesh_mem_cuda_ops: device memory through the CUDA driver (libmesh/mem.h). Streams and events
 * are CUstream and CUevent; work goes to the stream's context (cu_driver.h). Host flags are
 * ordered with stream memory operations, or host functions where a device refuses those. */
#define MESH_LOG_SUBSYSTEM "cuda"
#include <config.h>

#include "libmesh/cuda/cu_driver.h"
#include "libmesh/log.h"
#include "libmesh/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static mesh_status_t mesh_cu_init(void)
{
    return mesh_cu_load();
}

/* ---------------------------------------------------------------- memory kinds */

static mesh_status_t mesh_cu_query(const void *ptr, mesh_mem_info_t *info)
{
    mesh_mem_info_t r = {.kind = MESH_MEM_HOST, .device = -1};
    if (ptr == NULL || !mesh_cu_ready()) {
        *info = r;
        return MESH_OK;
    }
    /* Each attribute lands in a zeroed 8-byte word: the driver writes 1 to 8 bytes. */
    uint64_t type = 0, ordinal = 0, managed = 0, start = 0, size = 0;
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&type, &ordinal, &managed, &start, &size};
    CUresult res = mesh_cu.cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)ptr);
    if (res == CUDA_ERROR_INVALID_CONTEXT) {
        /* some drivers want a context for this; any will do */
        int pushed;
        MESH_CHECK(mesh_cu_enter(NULL, NULL, &pushed));
        res = mesh_cu.cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)ptr);
        mesh_cu_leave(pushed);
    }
    if (res != CUDA_SUCCESS)
        return mesh_cu_error(res, "cuPointerGetAttributes");
    if ((unsigned)type == CU_MEMORYTYPE_HOST) {
        r.kind = MESH_MEM_HOST_PINNED;
    } else if ((unsigned)type == CU_MEMORYTYPE_DEVICE || (unsigned)type == CU_MEMORYTYPE_UNIFIED ||
               managed != 0) {
        r.kind = managed != 0 ? MESH_MEM_MANAGED : MESH_MEM_DEVICE;
        r.device = (int)(int32_t)ordinal;
    } else {
        *info = r; /* no CUDA allocation holds ptr */
        return MESH_OK;
    }
    r.ops = &mesh_mem_cuda_ops;
    r.base = (void *)(uintptr_t)start;
    r.size = (size_t)size;
    *info = r;
    return MESH_OK;
}

static mesh_status_t mesh_cu_current_device(int *device)
{
    CUcontext ctx = NULL;
    MESH_CU_CALL(cuCtxGetCurrent(&ctx));
    if (ctx == NULL) {
        *device = mesh_cu_default_device();
        return MESH_OK;
    }
    CUdevice dev;
    MESH_CU_CALL(cuCtxGetDevice(&dev));
    *device = (int)dev;
    return MESH_OK;
}

/* ---------------------------------------------------------------- streams and events */

/* Runs expr (a CUresult) with stream's context current; st gets the status. */
#define MESH_CU_IN_CTX(stream, expr, name)                                                         \
    ({                                                                                             \
        int _cpushed;                                                                              \
        mesh_status_t _cst = mesh_cu_enter((CUstream)(stream), NULL, &_cpushed);                   \
        if (_cst == MESH_OK) {                                                                     \
            CUresult _cr = (expr);                                                                 \
            if (_cr != CUDA_SUCCESS)                                                               \
                _cst = mesh_cu_error(_cr, name);                                                   \
            mesh_cu_leave(_cpushed);                                                               \
        }                                                                                          \
        _cst;                                                                                      \
    })

static mesh_status_t mesh_cu_stream_create(void **stream)
{
    CUstream s;
    MESH_CHECK(
        MESH_CU_IN_CTX(NULL, mesh_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    *stream = s;
    return MESH_OK;
}

static void mesh_cu_stream_destroy(void *stream)
{
    if (stream != NULL)
        (void)MESH_CU_IN_CTX(stream, mesh_cu.cuStreamDestroy((CUstream)stream), "cuStreamDestroy");
}

static mesh_status_t mesh_cu_event_create(void **event)
{
    CUevent e;
    MESH_CHECK(
        MESH_CU_IN_CTX(NULL, mesh_cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    *event = e;
    return MESH_OK;
}

static void mesh_cu_event_destroy(void *event)
{
    if (event != NULL)
        (void)MESH_CU_IN_CTX(NULL, mesh_cu.cuEventDestroy((CUevent)event), "cuEventDestroy");
}

static mesh_status_t mesh_cu_event_record(void *event, void *stream)
{
    return MESH_CU_IN_CTX(stream, mesh_cu.cuEventRecord((CUevent)event, (CUstream)stream),
                          "cuEventRecord");
}

static mesh_status_t mesh_cu_event_query(void *event)
{
    CUresult r = mesh_cu.cuEventQuery((CUevent)event);
    if (r == CUDA_ERROR_INVALID_CONTEXT) { /* a thread with no context, on some drivers */
        int pushed;
        MESH_CHECK(mesh_cu_enter(NULL, NULL, &pushed));
        r = mesh_cu.cuEventQuery((CUevent)event);
        mesh_cu_leave(pushed);
    }
    if (r == CUDA_SUCCESS)
        return MESH_OK;
    if (r == CUDA_ERROR_NOT_READY)
        return MESH_INPROGRESS;
    return mesh_cu_error(r, "cuEventQuery");
}

static mesh_status_t mesh_cu_stream_wait_event(void *stream, void *event)
{
    return MESH_CU_IN_CTX(stream, mesh_cu.cuStreamWaitEvent((CUstream)stream, (CUevent)event, 0),
                          "cuStreamWaitEvent");
}

/* ---------------------------------------------------------------- data */

static mesh_status_t mesh_cu_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0)
        return MESH_OK;
    /* unified addressing: the driver finds each end's kind */
    return MESH_CU_IN_CTX(
        stream, mesh_cu.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, (CUstream)stream),
        "cuMemcpyAsync");
}

static mesh_status_t mesh_cu_reduce_async(void *dst, const void *a, const void *b, size_t count,
                                          mesh_dtype_t dtype, mesh_op_t op, void *stream)
{
    return mesh_cu_reduce(dst, a, b, count, dtype, op, (CUstream)stream);
}

static mesh_status_t mesh_cu_scale_async(void *dst, const void *src, size_t count,
                                         mesh_dtype_t dtype, const void *scalar, void *stream)
{
    return mesh_cu_scale(dst, src, count, dtype, scalar, (CUstream)stream);
}

static mesh_status_t mesh_cu_divide_async(void *buf, size_t count, mesh_dtype_t dtype, int n,
                                          void *stream)
{
    return mesh_cu_divide(buf, count, dtype, n, (CUstream)stream);
}

/* ---------------------------------------------------------------- flags */

/* Stream memory operations in use: 1 yes, 0 host functions instead (MESH_CUDA_MEMOPS; auto
 * turns to 0 the first time the driver refuses one). */
static atomic_int mesh_cu_memops = -1;

static int mesh_cu_use_memops(void)
{
    int m = atomic_load_explicit(&mesh_cu_memops, memory_order_relaxed);
    if (m < 0) {
        m = mesh_cu_knobs.memops != 0;
        atomic_store(&mesh_cu_memops, m);
    }
    return m;
}

/* A memory operation the device refused (auto mode): host functions from now on. */
static int mesh_cu_memops_refused(CUresult r)
{
    if (r != CUDA_ERROR_NOT_SUPPORTED || mesh_cu_knobs.memops == 1)
        return 0;
    if (atomic_exchange(&mesh_cu_memops, 0) != 0)
        mesh_log_info("stream memory operations unsupported: host functions order streams on "
                      "flags instead");
    return 1;
}

typedef struct {
    uint32_t *flag;
    uint32_t value;
} mesh_cu_flag_op_t;

static void CUDA_CB mesh_cu_host_write(void *arg)
{
    mesh_cu_flag_op_t *op = arg;
    atomic_store_explicit((_Atomic uint32_t *)op->flag, op->value, memory_order_release);
    free(op);
}

/* A host function blocks its stream (and the context's other host functions) until the flag
 * is reached. The fallback cannot hold the stream forever: after a minute it gives up, logged. */
#define MESH_CU_HOST_WAIT_NS (60ull * 1000000000ull)

static void CUDA_CB mesh_cu_host_wait(void *arg)
{
    mesh_cu_flag_op_t *op = arg;
    struct timespec t0, t, nap = {0, 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((int32_t)(atomic_load_explicit((_Atomic uint32_t *)op->flag, memory_order_acquire) -
                     op->value) < 0) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t ns =
            (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t.tv_nsec - t0.tv_nsec);
        if (ns > MESH_CU_HOST_WAIT_NS) {
            mesh_log_error("stream wait on flag %p for %u gave up after %llu s (it holds %u)",
                           (void *)op->flag, op->value, MESH_CU_HOST_WAIT_NS / 1000000000ull,
                           *op->flag);
            break;
        }
        nanosleep(&nap, NULL);
    }
    free(op);
}

static mesh_status_t mesh_cu_host_func(void *stream, CUhostFn fn, uint32_t *flag, uint32_t value)
{
    mesh_cu_flag_op_t *op = malloc(sizeof(*op));
    if (op == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "no memory for a stream flag operation");
    op->flag = flag;
    op->value = value;
    mesh_status_t st = MESH_CU_IN_CTX(stream, mesh_cu.cuLaunchHostFunc((CUstream)stream, fn, op),
                                      "cuLaunchHostFunc");
    if (st != MESH_OK)
        free(op);
    return st;
}

static mesh_status_t mesh_cu_stream_write(void *stream, uint32_t *flag, uint32_t value)
{
    if (mesh_cu_use_memops()) {
        int pushed;
        MESH_CHECK(mesh_cu_enter((CUstream)stream, NULL, &pushed));
        /* the default flags put a fence before the write: earlier work is visible first */
        CUresult r = mesh_cu.cuStreamWriteValue32((CUstream)stream, (CUdeviceptr)flag, value,
                                                  CU_STREAM_WRITE_VALUE_DEFAULT);
        mesh_cu_leave(pushed);
        if (r == CUDA_SUCCESS)
            return MESH_OK;
        if (!mesh_cu_memops_refused(r))
            return mesh_cu_error(r, "cuStreamWriteValue32");
    }
    return mesh_cu_host_func(stream, mesh_cu_host_write, flag, value);
}

static mesh_status_t mesh_cu_stream_wait(void *stream, uint32_t *flag, uint32_t value)
{
    if (mesh_cu_use_memops()) {
        int pushed;
        MESH_CHECK(mesh_cu_enter((CUstream)stream, NULL, &pushed));
        /* GEQ compares as (int32_t)(*flag - value) >= 0: flags may wrap */
        CUresult r = mesh_cu.cuStreamWaitValue32((CUstream)stream, (CUdeviceptr)flag, value,
                                                 CU_STREAM_WAIT_VALUE_GEQ);
        mesh_cu_leave(pushed);
        if (r == CUDA_SUCCESS)
            return MESH_OK;
        if (!mesh_cu_memops_refused(r))
            return mesh_cu_error(r, "cuStreamWaitValue32");
    }
    return mesh_cu_host_func(stream, mesh_cu_host_wait, flag, value);
}

/* ---------------------------------------------------------------- pinned host memory */

/* Portable (every context) and mapped (streams' memory operations reach it), at the same
 * address on the device as on the host (unified addressing), zeroed. */
static mesh_status_t mesh_cu_host_alloc(void **ptr, size_t bytes)
{
    void *p = NULL;
    CUdeviceptr d = 0;
    int pushed;
    MESH_CHECK(mesh_cu_enter(NULL, NULL, &pushed));
    CUresult r = mesh_cu.cuMemHostAlloc(&p, bytes ? bytes : 1,
                                        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    mesh_status_t st = r == CUDA_SUCCESS ? MESH_OK : mesh_cu_error(r, "cuMemHostAlloc");
    if (st == MESH_OK && (r = mesh_cu.cuMemHostGetDevicePointer(&d, p, 0)) != CUDA_SUCCESS)
        st = mesh_cu_error(r, "cuMemHostGetDevicePointer");
    else if (st == MESH_OK && d != (CUdeviceptr)p)
        st = mesh_error(MESH_ERR_UNSUPPORTED,
                        "pinned host memory %p has device address %p: "
                        "the device lacks unified addressing",
                        p, (void *)(uintptr_t)d);
    if (st != MESH_OK && p != NULL)
        (void)mesh_cu.cuMemFreeHost(p);
    mesh_cu_leave(pushed);
    if (st == MESH_OK) {
        memset(p, 0, bytes);
        *ptr = p;
    }
    return st;
}

static void mesh_cu_host_free(void *ptr)
{
    if (ptr == NULL)
        return;
    (void)MESH_CU_IN_CTX(NULL, mesh_cu.cuMemFreeHost(ptr), "cuMemFreeHost");
}

/* ---------------------------------------------------------------- device memory */

/* The primary context of each device, retained once for the process (as the default context
 * is), so that allocations made in it outlive any one call. */
#define MESH_CU_MAX_DEVICES 64
static CUcontext mesh_cu_primary[MESH_CU_MAX_DEVICES];
static pthread_mutex_t mesh_cu_primary_lock = PTHREAD_MUTEX_INITIALIZER;

static mesh_status_t mesh_cu_primary_context(int device, CUcontext *ctx)
{
    int count = 0;
    MESH_CU_CALL(cuDeviceGetCount(&count));
    if (device < 0 || device >= count || device >= MESH_CU_MAX_DEVICES)
        return mesh_error(MESH_ERR_INVALID_ARG, "cuda: device %d: the driver sees %d devices",
                          device, count);
    mesh_status_t st = MESH_OK;
    pthread_mutex_lock(&mesh_cu_primary_lock);
    if (mesh_cu_primary[device] == NULL) {
        CUdevice dev;
        CUresult r = mesh_cu.cuDeviceGet(&dev, device);
        if (r == CUDA_SUCCESS)
            r = mesh_cu.cuDevicePrimaryCtxRetain(&mesh_cu_primary[device], dev);
        if (r != CUDA_SUCCESS)
            st = mesh_cu_error(r, "cuDevicePrimaryCtxRetain");
    }
    *ctx = mesh_cu_primary[device];
    pthread_mutex_unlock(&mesh_cu_primary_lock);
    return st;
}

static mesh_status_t mesh_cu_dev_alloc(void **ptr, size_t bytes, int device)
{
    if (ptr == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "cuda: dev_alloc: ptr is NULL");
    MESH_CHECK(mesh_cu_load());
    CUcontext ctx;
    MESH_CHECK(mesh_cu_primary_context(device, &ctx));
    MESH_CU_CALL(cuCtxPushCurrent(ctx));
    CUdeviceptr d = 0;
    CUresult r = mesh_cu.cuMemAlloc(&d, bytes ? bytes : 1);
    CUcontext popped;
    (void)mesh_cu.cuCtxPopCurrent(&popped);
    if (r != CUDA_SUCCESS)
        return mesh_cu_error(r, "cuMemAlloc");
    *ptr = (void *)(uintptr_t)d;
    return MESH_OK;
}

/* Frees in the context that owns the allocation. */
static void mesh_cu_dev_free(void *ptr)
{
    if (ptr == NULL || !mesh_cu_ready())
        return;
    uint64_t owner = 0;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_CONTEXT;
    void *data = &owner;
    CUresult r = mesh_cu.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS || owner == 0) {
        (void)mesh_cu_error(r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE, "cuMemFree");
        return;
    }
    CUcontext ctx = (CUcontext)(uintptr_t)owner, popped;
    if (mesh_cu.cuCtxPushCurrent(ctx) != CUDA_SUCCESS)
        return;
    if ((r = mesh_cu.cuMemFree((CUdeviceptr)ptr)) != CUDA_SUCCESS)
        (void)mesh_cu_error(r, "cuMemFree");
    (void)mesh_cu.cuCtxPopCurrent(&popped);
}

const mesh_mem_ops_t mesh_mem_cuda_ops = {
    .name = "cuda",
    .init = mesh_cu_init,
    .query = mesh_cu_query,
    .current_device = mesh_cu_current_device,
    .stream_create = mesh_cu_stream_create,
    .stream_destroy = mesh_cu_stream_destroy,
    .event_create = mesh_cu_event_create,
    .event_destroy = mesh_cu_event_destroy,
    .event_record = mesh_cu_event_record,
    .event_query = mesh_cu_event_query,
    .stream_wait_event = mesh_cu_stream_wait_event,
    .copy_async = mesh_cu_copy_async,
    .reduce_async = mesh_cu_reduce_async,
    .scale_async = mesh_cu_scale_async,
    .divide_async = mesh_cu_divide_async,
    .stream_write = mesh_cu_stream_write,
    .stream_wait = mesh_cu_stream_wait,
    .host_alloc = mesh_cu_host_alloc,
    .host_free = mesh_cu_host_free,
    .dev_alloc = mesh_cu_dev_alloc,
    .dev_free = mesh_cu_dev_free,
    .ipc_export = mesh_cu_ipc_export,
    .ipc_import = mesh_cu_ipc_import,
    .ipc_close = mesh_cu_ipc_close,
    .dmabuf_query = mesh_cu_dmabuf_query,
};
