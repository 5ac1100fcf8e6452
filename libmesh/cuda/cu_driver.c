/* The CUDA driver opened with dlopen, its entry points through cuGetProcAddress (cu_driver.h). */
#define MESH_LOG_SUBSYSTEM "cuda"
#include <config.h>

#include "libmesh/config.h"
#include "libmesh/cuda/cu_driver.h"
#include "libmesh/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The ABI asked of cuGetProcAddress for every entry point (see cu_driver.h). */
#define MESH_CU_ABI_VERSION 12000

mesh_cu_driver_t mesh_cu;
mesh_cu_knobs_t mesh_cu_knobs;

static pthread_once_t mesh_cu_once = PTHREAD_ONCE_INIT;
static mesh_status_t mesh_cu_status = MESH_ERR_UNSUPPORTED;
static void *mesh_cu_dl;
static char mesh_cu_why[512]; /* why the load failed, given to every caller */
static CUcontext mesh_cu_default_ctx;
static int mesh_cu_default_dev;

static const mesh_config_entry_t mesh_cu_entries[] = {
    {.name = "CUDA_DRIVER",
     .dflt = "libcuda.so.1",
     .type = MESH_CFG_STRING,
     .doc = "The CUDA driver library that libmesh opens at run time for device memory."},
    {.name = "CUDA_MEMOPS",
     .dflt = "auto",
     .type = MESH_CFG_ENUM,
     .choices = "auto|yes|no",
     .doc = "Order streams on host flags with stream memory operations (cuStreamWriteValue32, "
            "cuStreamWaitValue32); no: host functions on the stream instead; auto: memory "
            "operations, falling back to host functions where the device refuses them."},
    {.name = "CUDA_THREADS",
     .dflt = "512",
     .type = MESH_CFG_INT,
     .range = "32..1024",
     .doc = "Threads per block of the device reduction kernels (a multiple of 32)."},
    {.name = "CUDA_BLOCKS_PER_SM",
     .dflt = "4",
     .type = MESH_CFG_INT,
     .range = "1..64",
     .doc = "Blocks per multiprocessor at most for a device reduction kernel's grid."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_cu_config = {"cuda", mesh_cu_entries};

mesh_status_t mesh_mem_cuda_config_register(void)
{
    return mesh_config_register(&mesh_cu_config);
}

static mesh_status_t mesh_cu_read_knobs(void)
{
    MESH_CHECK(mesh_config_register(&mesh_cu_config));
    const char *m = mesh_config_str("CUDA_MEMOPS");
    mesh_cu_knobs.memops = !strcmp(m, "yes") ? 1 : !strcmp(m, "no") ? 0 : -1;
    mesh_cu_knobs.threads = (int)mesh_config_int("CUDA_THREADS") & ~31;
    mesh_cu_knobs.blocks_per_sm = (int)mesh_config_int("CUDA_BLOCKS_PER_SM");
    return MESH_OK;
}

/* No usable driver: an ordinary state of a machine without a GPU, logged at info level (once,
 * as load runs once) and kept as this thread's last error for the caller to report. */
__attribute__((format(printf, 1, 2))) static mesh_status_t mesh_cu_absent(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    mesh_log_info("device memory unsupported: %s", msg);
    mesh_error_restore(msg);
    return MESH_ERR_UNSUPPORTED;
}

mesh_status_t mesh_cu_error(CUresult r, const char *call)
{
    const char *name = NULL, *text = NULL;
    if (mesh_cu.cuGetErrorName == NULL || mesh_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = "CUDA_ERROR_UNKNOWN";
    if (mesh_cu.cuGetErrorString == NULL || mesh_cu.cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = "unknown error";
    mesh_status_t st = r == CUDA_ERROR_OUT_OF_MEMORY   ? MESH_ERR_NO_MEMORY
                       : r == CUDA_ERROR_INVALID_VALUE ? MESH_ERR_INVALID_ARG
                       : r == CUDA_ERROR_NOT_SUPPORTED ? MESH_ERR_UNSUPPORTED
                                                       : MESH_ERR_INTERNAL;
    return mesh_error(st, "%s failed: %s (%d, %s)", call, name, (int)r, text);
}

/* Resolves every entry point of the table; the first missing one fails the load. */
static mesh_status_t mesh_cu_resolve(PFN_cuGetProcAddress_v12000 gpa)
{
    void *fn;
    CUdriverProcAddressQueryResult found;
#define MESH_CU_RESOLVE_(name, ver)                                                                \
    fn = NULL;                                                                                     \
    if (gpa(#name, &fn, MESH_CU_ABI_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) !=         \
            CUDA_SUCCESS ||                                                                        \
        fn == NULL || found != CU_GET_PROC_ADDRESS_SUCCESS)                                        \
        return mesh_cu_absent("the CUDA driver has no %s (for CUDA %d)", #name,                    \
                              MESH_CU_ABI_VERSION);                                                \
    mesh_cu.name = (PFN_##name##_v##ver)fn;
    MESH_CU_ENTRY_POINTS(MESH_CU_RESOLVE_)
#undef MESH_CU_RESOLVE_
    return MESH_OK;
}

/* The default context: the one current on the thread that loads the table, else device 0's
 * primary context, retained only when first needed (a process that always has a context
 * current, or passes streams, never creates one on device 0). */
static mesh_status_t mesh_cu_choose_context(void)
{
    CUcontext ctx = NULL;
    int count = 0;
    MESH_CU_CALL(cuDeviceGetCount(&count));
    if (count == 0)
        return mesh_cu_absent("the CUDA driver sees no device");
    if (mesh_cu.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != NULL) {
        CUdevice dev;
        MESH_CU_CALL(cuCtxGetDevice(&dev));
        mesh_cu_default_ctx = ctx;
        mesh_cu_default_dev = (int)dev;
    }
    return MESH_OK;
}

static pthread_mutex_t mesh_cu_default_lock = PTHREAD_MUTEX_INITIALIZER;

static mesh_status_t mesh_cu_default_context(CUcontext *ctx)
{
    mesh_status_t st = MESH_OK;
    pthread_mutex_lock(&mesh_cu_default_lock);
    if (mesh_cu_default_ctx == NULL) {
        CUdevice dev;
        CUresult r = mesh_cu.cuDeviceGet(&dev, mesh_cu_default_dev);
        if (r == CUDA_SUCCESS)
            r = mesh_cu.cuDevicePrimaryCtxRetain(&mesh_cu_default_ctx, dev);
        if (r != CUDA_SUCCESS)
            st = mesh_cu_error(r, "cuDevicePrimaryCtxRetain");
    }
    *ctx = mesh_cu_default_ctx;
    pthread_mutex_unlock(&mesh_cu_default_lock);
    return st;
}

static mesh_status_t mesh_cu_load_once_(void)
{
    MESH_CHECK(mesh_cu_read_knobs());
    const char *lib = mesh_config_str("CUDA_DRIVER");
    mesh_cu_dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (mesh_cu_dl == NULL)
        return mesh_cu_absent("no CUDA driver: dlopen %s: %s", lib, dlerror());
    PFN_cuGetProcAddress_v12000 gpa =
        (PFN_cuGetProcAddress_v12000)dlsym(mesh_cu_dl, "cuGetProcAddress_v2");
    if (gpa == NULL)
        return mesh_cu_absent("the CUDA driver %s is older than CUDA 12.0 (no cuGetProcAddress_v2)",
                              lib);
    MESH_CHECK(mesh_cu_resolve(gpa));
    int version = 0;
    MESH_CU_CALL(cuDriverGetVersion(&version));
    if (version < MESH_CU_ABI_VERSION)
        return mesh_cu_absent("the CUDA driver supports CUDA %d.%d; 12.0 needed", version / 1000,
                              version % 1000 / 10);
    CUresult r = mesh_cu.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE)
        return mesh_cu_absent("the CUDA driver sees no device");
    if (r != CUDA_SUCCESS)
        return mesh_cu_error(r, "cuInit");
    MESH_CHECK(mesh_cu_choose_context());
    mesh_log_debug("CUDA driver %d.%d from %s, default device %d", version / 1000,
                   version % 1000 / 10, lib, mesh_cu_default_dev);
    return MESH_OK;
}

static void mesh_cu_load_once(void)
{
    mesh_cu_status = mesh_cu_load_once_();
    if (mesh_cu_status != MESH_OK) {
        snprintf(mesh_cu_why, sizeof(mesh_cu_why), "%s", mesh_error_last());
        /* Nothing half-loaded stays behind: no pointer of the table is ever called. */
        memset(&mesh_cu, 0, sizeof(mesh_cu));
        if (mesh_cu_dl != NULL)
            dlclose(mesh_cu_dl);
        mesh_cu_dl = NULL;
    }
}

mesh_status_t mesh_cu_load(void)
{
    pthread_once(&mesh_cu_once, mesh_cu_load_once);
    if (mesh_cu_status != MESH_OK)
        mesh_error_restore(mesh_cu_why);
    return mesh_cu_status;
}

int mesh_cu_ready(void)
{
    pthread_once(&mesh_cu_once, mesh_cu_load_once);
    return mesh_cu_status == MESH_OK;
}

int mesh_cu_default_device(void)
{
    return mesh_cu_default_dev;
}

mesh_status_t mesh_cu_enter(CUstream stream, CUcontext *ctx, int *pushed)
{
    CUcontext want = NULL, cur = NULL;
    *pushed = 0;
    MESH_CU_CALL(cuCtxGetCurrent(&cur));
    /* The legacy NULL stream and the per-thread stream belong to the current context. */
    if (stream != NULL && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD)
        MESH_CU_CALL(cuStreamGetCtx(stream, &want));
    else if (cur != NULL)
        want = cur;
    else
        MESH_CHECK(mesh_cu_default_context(&want));
    if (want != cur) {
        MESH_CU_CALL(cuCtxPushCurrent(want));
        *pushed = 1;
    }
    if (ctx != NULL)
        *ctx = want;
    return MESH_OK;
}

void mesh_cu_leave(int pushed)
{
    CUcontext ctx;
    if (pushed)
        (void)mesh_cu.cuCtxPopCurrent(&ctx);
}
