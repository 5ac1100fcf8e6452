/* Launches of the device reductions (cu_kernels.cu): the embedded fatbin is loaded once per
 * context on first use (cuModuleLoadData), each kernel fetched by name on its first launch. */
#define MESH_LOG_SUBSYSTEM "cuda"
#include <config.h>

#include "libmesh/cuda/cu_driver.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Kernel slots: reduce (dtype x op), scale (dtype), divide (dtype). */
#define MESH_CU_SLOT_REDUCE(d, op) ((int)(d) * (MESH_MAX + 1) + (int)(op))
#define MESH_CU_SLOT_SCALE(d)      (MESH_DTYPE_COUNT * (MESH_MAX + 1) + (int)(d))
#define MESH_CU_SLOT_DIVIDE(d)     (MESH_DTYPE_COUNT * (MESH_MAX + 2) + (int)(d))
#define MESH_CU_SLOTS              (MESH_DTYPE_COUNT * (MESH_MAX + 3))
/* Contexts a process uses at once (one per device, or a few more). */
#define MESH_CU_MODULES 32

typedef struct {
    CUcontext ctx;
    CUmodule module;
    int sms; /* multiprocessors of the context's device */
    CUfunction fn[MESH_CU_SLOTS];
} mesh_cu_module_t;

static pthread_mutex_t mesh_cu_modules_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_cu_module_t mesh_cu_modules[MESH_CU_MODULES];

/* Kernel name tags per dtype, as reduce.c dispatches: signed sums, products and scales run on
 * the unsigned kernels. */
static const char *const mesh_cu_tag_minmax[MESH_DTYPE_COUNT] = {
    [MESH_INT8] = "i8",   [MESH_UINT8] = "u8",   [MESH_INT32] = "i32",     [MESH_UINT32] = "u32",
    [MESH_INT64] = "i64", [MESH_UINT64] = "u64", [MESH_FP16] = "f16",      [MESH_BF16] = "bf16",
    [MESH_FP32] = "f32",  [MESH_FP64] = "f64",   [MESH_FP8_E4M3] = "e4m3", [MESH_FP8_E5M2] = "e5m2",
};
static const char *const mesh_cu_tag_arith[MESH_DTYPE_COUNT] = {
    [MESH_INT8] = "u8",   [MESH_UINT8] = "u8",   [MESH_INT32] = "u32",     [MESH_UINT32] = "u32",
    [MESH_INT64] = "u64", [MESH_UINT64] = "u64", [MESH_FP16] = "f16",      [MESH_BF16] = "bf16",
    [MESH_FP32] = "f32",  [MESH_FP64] = "f64",   [MESH_FP8_E4M3] = "e4m3", [MESH_FP8_E5M2] = "e5m2",
};
static const char *const mesh_cu_op_names[MESH_MAX + 1] = {"sum", "prod", "min", "max"};

static mesh_status_t mesh_cu_module_load(mesh_cu_module_t *m, CUcontext ctx)
{
    CUdevice dev;
    MESH_CU_CALL(cuCtxGetDevice(&dev));
    MESH_CU_CALL(cuDeviceGetAttribute(&m->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUresult r = mesh_cu.cuModuleLoadData(&m->module, mesh_cuda_fatbin);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "the kernels built into libmesh (%zu bytes of fatbin) do not run on "
                          "device %d: rebuild with its architecture in NVCC_ARCHS",
                          mesh_cuda_fatbin_size, (int)dev);
    if (r != CUDA_SUCCESS)
        return mesh_cu_error(r, "cuModuleLoadData");
    __atomic_store_n(&m->ctx, ctx, __ATOMIC_RELEASE); /* module and sms are set */
    return MESH_OK;
}

/* The kernel in slot for the current context ctx, and its device's multiprocessors. Entries
 * and slots are written once, under the lock: a launch that finds its kernel takes no lock. */
static mesh_status_t mesh_cu_function(CUcontext ctx, int slot, const char *name, CUfunction *fn,
                                      int *sms)
{
    for (int i = 0; i < MESH_CU_MODULES; i++) {
        CUcontext c = __atomic_load_n(&mesh_cu_modules[i].ctx, __ATOMIC_ACQUIRE);
        if (c == NULL || c == ctx) {
            CUfunction f =
                c ? __atomic_load_n(&mesh_cu_modules[i].fn[slot], __ATOMIC_ACQUIRE) : NULL;
            if (f != NULL) {
                *fn = f;
                *sms = mesh_cu_modules[i].sms;
                return MESH_OK;
            }
            break;
        }
    }
    mesh_status_t st = MESH_OK;
    pthread_mutex_lock(&mesh_cu_modules_lock);
    mesh_cu_module_t *m = NULL;
    for (int i = 0; i < MESH_CU_MODULES && m == NULL; i++)
        if (mesh_cu_modules[i].ctx == ctx || mesh_cu_modules[i].ctx == NULL)
            m = &mesh_cu_modules[i];
    if (m == NULL)
        st = mesh_error(MESH_ERR_NO_MEMORY, "more than %d CUDA contexts in one process",
                        MESH_CU_MODULES);
    else if (m->ctx == NULL)
        st = mesh_cu_module_load(m, ctx);
    if (st == MESH_OK && m->fn[slot] == NULL) {
        CUfunction f;
        CUresult r = mesh_cu.cuModuleGetFunction(&f, m->module, name);
        if (r != CUDA_SUCCESS)
            st = mesh_cu_error(r, "cuModuleGetFunction");
        else
            __atomic_store_n(&m->fn[slot], f, __ATOMIC_RELEASE);
    }
    if (st == MESH_OK) {
        *fn = m->fn[slot];
        *sms = m->sms;
    }
    pthread_mutex_unlock(&mesh_cu_modules_lock);
    return st;
}

/* Launches kernel name (slot) over bytes of data on stream. */
static mesh_status_t mesh_cu_launch(int slot, const char *name, size_t bytes, void **args,
                                    CUstream stream)
{
    CUcontext ctx;
    CUfunction fn;
    int pushed, sms;
    MESH_CHECK(mesh_cu_enter(stream, &ctx, &pushed));
    mesh_status_t st = mesh_cu_function(ctx, slot, name, &fn, &sms);
    if (st == MESH_OK) {
        size_t threads = (size_t)mesh_cu_knobs.threads, units = (bytes + 15) / 16;
        size_t blocks = (units + threads - 1) / threads;
        size_t most = (size_t)sms * (size_t)mesh_cu_knobs.blocks_per_sm;
        blocks = blocks > most ? most : blocks < 1 ? 1 : blocks;
        CUresult r = mesh_cu.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, 0,
                                            stream, args, NULL);
        if (r != CUDA_SUCCESS)
            st = mesh_cu_error(r, name);
    }
    mesh_cu_leave(pushed);
    return st;
}

static int mesh_cu_overlap(const void *p, const void *q, size_t bytes)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + bytes && b < a + bytes;
}

mesh_status_t mesh_cu_reduce(void *dst, const void *a, const void *b, size_t count,
                             mesh_dtype_t dtype, mesh_op_t op, CUstream stream)
{
    if (!mesh_dtype_valid(dtype))
        return mesh_error(MESH_ERR_INVALID_ARG, "device reduction: unknown dtype %d", (int)dtype);
    if ((unsigned)op > MESH_MAX)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "device reduction: op %d is not one of sum, "
                          "prod, min, max",
                          (int)op);
    size_t bytes = count * mesh_dtype_size(dtype);
    if (count == 0)
        return MESH_OK;
    /* Threads of a kernel run in no order: dst may be a or b, but not overlap them otherwise. */
    if ((dst != a && mesh_cu_overlap(dst, a, bytes)) ||
        (dst != b && mesh_cu_overlap(dst, b, bytes)))
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "device reduction: dst %p overlaps a %p or b %p "
                          "without being equal to it",
                          dst, a, b);
    char name[64];
    const char *tag =
        op == MESH_SUM || op == MESH_PROD ? mesh_cu_tag_arith[dtype] : mesh_cu_tag_minmax[dtype];
    snprintf(name, sizeof(name), "mesh_cu_reduce_%s_%s", tag, mesh_cu_op_names[op]);
    unsigned long long n = count;
    void *args[] = {&dst, &a, &b, &n};
    return mesh_cu_launch(MESH_CU_SLOT_REDUCE(dtype, op), name, bytes, args, stream);
}

/* The scalar argument of a kernel: an integer, a float or a double. */
typedef union {
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
} mesh_cu_scalar_t;

/* reduce.c's scale multiplies by a uint32 (8 and 32-bit integers), a uint64, a float (every
 * float type but fp64, narrow ones widened) or a double. */
static mesh_cu_scalar_t mesh_cu_scale_arg(mesh_dtype_t dtype, const void *scalar)
{
    mesh_cu_scalar_t c = {0};
    unsigned char b[8] = {0};
    memcpy(b, scalar, mesh_dtype_size(dtype)); /* any alignment */
    uint8_t u8;
    uint16_t u16;
    memcpy(&u8, b, 1);
    memcpy(&u16, b, 2);
    switch (dtype) {
    case MESH_INT8:
    case MESH_UINT8:
        c.u32 = u8;
        break;
    case MESH_INT32:
    case MESH_UINT32:
        memcpy(&c.u32, b, 4);
        break;
    case MESH_INT64:
    case MESH_UINT64:
        memcpy(&c.u64, b, 8);
        break;
    case MESH_FP16:
        c.f32 = mesh_fp16_to_float(u16);
        break;
    case MESH_BF16:
        c.f32 = mesh_bf16_to_float(u16);
        break;
    case MESH_FP32:
        memcpy(&c.f32, b, 4);
        break;
    case MESH_FP64:
        memcpy(&c.f64, b, 8);
        break;
    case MESH_FP8_E4M3:
        c.f32 = mesh_e4m3_to_float(u8);
        break;
    case MESH_FP8_E5M2:
        c.f32 = mesh_e5m2_to_float(u8);
        break;
    default:
        break;
    }
    return c;
}

/* reduce.c's divide: by an int32 (signed 8 and 32-bit), a uint32, an int64, a uint64, a float
 * or a double. */
static mesh_cu_scalar_t mesh_cu_divide_arg(mesh_dtype_t dtype, int n)
{
    mesh_cu_scalar_t c = {0};
    switch (dtype) {
    case MESH_INT8:
    case MESH_INT32:
        c.i32 = n;
        break;
    case MESH_UINT8:
    case MESH_UINT32:
        c.u32 = (uint32_t)n;
        break;
    case MESH_INT64:
        c.i64 = n;
        break;
    case MESH_UINT64:
        c.u64 = (uint64_t)n;
        break;
    case MESH_FP64:
        c.f64 = (double)n;
        break;
    default:
        c.f32 = (float)n;
        break;
    }
    return c;
}

static int mesh_cu_overlap_partly(const void *d, const void *s, size_t bytes)
{
    return d != s && mesh_cu_overlap(d, s, bytes);
}

mesh_status_t mesh_cu_scale(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                            const void *scalar, CUstream stream)
{
    if (!mesh_dtype_valid(dtype))
        return mesh_error(MESH_ERR_INVALID_ARG, "device scale: unknown dtype %d", (int)dtype);
    if (scalar == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "device scale: scalar is NULL");
    size_t bytes = count * mesh_dtype_size(dtype);
    if (count == 0)
        return MESH_OK;
    if (mesh_cu_overlap_partly(dst, src, bytes))
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "device scale: dst %p overlaps src %p without "
                          "being equal to it",
                          dst, src);
    char name[64];
    snprintf(name, sizeof(name), "mesh_cu_scale_%s", mesh_cu_tag_arith[dtype]);
    mesh_cu_scalar_t c = mesh_cu_scale_arg(dtype, scalar);
    unsigned long long n = count;
    void *args[] = {&dst, &src, &n, &c};
    return mesh_cu_launch(MESH_CU_SLOT_SCALE(dtype), name, bytes, args, stream);
}

mesh_status_t mesh_cu_divide(void *buf, size_t count, mesh_dtype_t dtype, int n, CUstream stream)
{
    if (!mesh_dtype_valid(dtype))
        return mesh_error(MESH_ERR_INVALID_ARG, "device divide: unknown dtype %d", (int)dtype);
    if (count == 0 || n == 0) /* as mesh_reduce_divide: nothing to divide by */
        return MESH_OK;
    char name[64];
    snprintf(name, sizeof(name), "mesh_cu_divide_%s", mesh_cu_tag_minmax[dtype]);
    mesh_cu_scalar_t c = mesh_cu_divide_arg(dtype, n);
    unsigned long long k = count;
    void *args[] = {&buf, &k, &c};
    return mesh_cu_launch(MESH_CU_SLOT_DIVIDE(dtype), name, count * mesh_dtype_size(dtype), args,
                          stream);
}
