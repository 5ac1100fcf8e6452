/* The CUDA driver, opened at run time: libmesh links no CUDA library. mesh_cu_load() opens
 * libcuda.so.1 (MESH_CUDA_DRIVER), resolves cuGetProcAddress_v2 (drivers of CUDA 12.0 and
 * later) and through it every entry point below, each at the version whose signature the
 * pointer type names (PFN_<name>_v<version> of cudaTypedefs.h, asked for as CUDA 12.0 so that
 * a newer driver returns the same ABI). Only cuda.h types cross this seam.
 *
 * Contexts: the library's work goes to the context of the stream it is given. Where no stream
 * names one (the legacy NULL stream, allocations, stream and event creation) it uses the
 * calling thread's current context, else the default context: the context current on the
 * thread that first initialised the table, else the primary context of device 0 (what the CUDA
 * runtime uses before cudaSetDevice), retained on first need. The library never leaves a
 * context current on a thread that had none: mesh_cu_enter()/mesh_cu_leave() push and pop it
 * around each call. Kernels are loaded once per context. */
#ifndef MESH_CU_DRIVER_H
#define MESH_CU_DRIVER_H

#include "libmesh/mem.h"
#include "mesh.h"
#include <cudaTypedefs.h>
#include <stddef.h>

/* X(name, pfn version) for every entry point the library uses. */
#define MESH_CU_ENTRY_POINTS(X)                                                                    \
    X(cuInit, 2000)                                                                                \
    X(cuDriverGetVersion, 2020)                                                                    \
    X(cuGetErrorName, 6000)                                                                        \
    X(cuGetErrorString, 6000)                                                                      \
    X(cuDeviceGet, 2000)                                                                           \
    X(cuDeviceGetCount, 2000)                                                                      \
    X(cuDeviceGetAttribute, 2000)                                                                  \
    X(cuDevicePrimaryCtxRetain, 7000)                                                              \
    X(cuCtxGetCurrent, 4000)                                                                       \
    X(cuCtxGetDevice, 2000)                                                                        \
    X(cuCtxPushCurrent, 4000)                                                                      \
    X(cuCtxPopCurrent, 4000)                                                                       \
    X(cuCtxSynchronize, 2000)                                                                      \
    X(cuPointerGetAttributes, 7000)                                                                \
    X(cuMemGetAddressRange, 3020)                                                                  \
    X(cuStreamCreate, 2000)                                                                        \
    X(cuStreamDestroy, 4000)                                                                       \
    X(cuStreamGetCtx, 9020)                                                                        \
    X(cuStreamSynchronize, 2000)                                                                   \
    X(cuStreamWaitEvent, 3020)                                                                     \
    X(cuStreamWriteValue32, 11070)                                                                 \
    X(cuStreamWaitValue32, 11070)                                                                  \
    X(cuLaunchHostFunc, 10000)                                                                     \
    X(cuEventCreate, 2000)                                                                         \
    X(cuEventDestroy, 4000)                                                                        \
    X(cuEventRecord, 2000)                                                                         \
    X(cuEventQuery, 2000)                                                                          \
    X(cuMemcpyAsync, 4000)                                                                         \
    X(cuMemAlloc, 3020)                                                                            \
    X(cuMemFree, 3020)                                                                             \
    X(cuMemHostAlloc, 2020)                                                                        \
    X(cuMemFreeHost, 2000)                                                                         \
    X(cuMemHostGetDevicePointer, 3020)                                                             \
    X(cuModuleLoadData, 2000)                                                                      \
    X(cuModuleUnload, 2000)                                                                        \
    X(cuModuleGetFunction, 2000)                                                                   \
    X(cuLaunchKernel, 4000)                                                                        \
    X(cuIpcGetMemHandle, 4010)                                                                     \
    X(cuIpcOpenMemHandle, 11000)                                                                   \
    X(cuIpcCloseMemHandle, 4010)                                                                   \
    X(cuMemCreate, 10020)                                                                          \
    X(cuMemRelease, 10020)                                                                         \
    X(cuMemRetainAllocationHandle, 11000)                                                          \
    X(cuMemGetAllocationPropertiesFromHandle, 10020)                                               \
    X(cuMemGetAllocationGranularity, 10020)                                                        \
    X(cuMemExportToShareableHandle, 10020)                                                         \
    X(cuMemImportFromShareableHandle, 10020)                                                       \
    X(cuMemAddressReserve, 10020)                                                                  \
    X(cuMemAddressFree, 10020)                                                                     \
    X(cuMemMap, 10020)                                                                             \
    X(cuMemUnmap, 10020)                                                                           \
    X(cuMemSetAccess, 10020)                                                                       \
    X(cuMemGetHandleForAddressRange, 11070)

/* cuda.h renames some entry points (cuMemAlloc to cuMemAlloc_v2...): the pointer type and the
 * name asked of the driver are pasted and stringified from the name unexpanded, the member
 * takes cuda.h's name like every use of it. */
#define MESH_CU_FIELD_(name, ver) PFN_##name##_v##ver name;
typedef struct {
    MESH_CU_ENTRY_POINTS(MESH_CU_FIELD_)
} mesh_cu_driver_t;
#undef MESH_CU_FIELD_

/* The table, valid once mesh_cu_load() returned MESH_OK. */
extern mesh_cu_driver_t mesh_cu;

/* Opens the driver and resolves the table once per process (thread-safe); initialises CUDA
 * (cuInit) and chooses the default context. MESH_ERR_UNSUPPORTED, logged once, when there is
 * no driver, it is older than CUDA 12.0, or there is no device; nothing else changes then. */
mesh_status_t mesh_cu_load(void);

/* Whether the driver is loaded (loading it if not), without recording an error if it cannot be:
 * for queries that answer "host memory" when there is no driver. */
int mesh_cu_ready(void);

/* The status for a failed driver call, logged once naming the call: out of memory ->
 * MESH_ERR_NO_MEMORY, invalid value -> MESH_ERR_INVALID_ARG, not supported ->
 * MESH_ERR_UNSUPPORTED, otherwise MESH_ERR_INTERNAL. */
mesh_status_t mesh_cu_error(CUresult r, const char *call);
#define MESH_CU_CALL(call)                                                                         \
    do {                                                                                           \
        CUresult _r = mesh_cu.call;                                                                \
        if (_r != CUDA_SUCCESS)                                                                    \
            return mesh_cu_error(_r, #call);                                                       \
    } while (0)

/* Makes the context of stream (NULL: the current context, else the default one) current on
 * the calling thread for one call; *pushed says whether mesh_cu_leave() must pop it. The
 * context is returned in *ctx when ctx is not NULL. */
mesh_status_t mesh_cu_enter(CUstream stream, CUcontext *ctx, int *pushed);
void mesh_cu_leave(int pushed);

/* Device of the default context (0 when none was current at load). */
int mesh_cu_default_device(void);

/* Knobs (MESH_CUDA_*), read at load. */
typedef struct {
    int memops;        /* stream memory operations: 1 yes, 0 no (host functions), -1 auto */
    int threads;       /* threads per block of the kernels */
    int blocks_per_sm; /* blocks per multiprocessor at most */
} mesh_cu_knobs_t;
extern mesh_cu_knobs_t mesh_cu_knobs;

/* Kernels (cu_launch.c). reduce: dst = a op b, op SUM..MAX; dst may equal a or b but not
 * overlap them otherwise. scale: dst = src * *scalar, scalar in host memory, read now. */
mesh_status_t mesh_cu_reduce(void *dst, const void *a, const void *b, size_t count,
                             mesh_dtype_t dtype, mesh_op_t op, CUstream stream);
mesh_status_t mesh_cu_scale(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                            const void *scalar, CUstream stream);
mesh_status_t mesh_cu_divide(void *buf, size_t count, mesh_dtype_t dtype, int n, CUstream stream);

/* IPC (cu_ipc.c), as mesh_mem_ops_t's members. */
mesh_status_t mesh_cu_ipc_export(const void *ptr, mesh_mem_ipc_t *handle);
mesh_status_t mesh_cu_ipc_import(const mesh_mem_ipc_t *handle, void **ptr);
void mesh_cu_ipc_close(void *ptr);

/* GPUDirect RDMA (cu_dmabuf.c), as mesh_mem_ops_t's dmabuf_query. */
mesh_status_t mesh_cu_dmabuf_query(int device, char *why, size_t len);

/* The embedded fatbin (generated from cu_kernels.cu at build time). */
extern const unsigned char mesh_cuda_fatbin[];
extern const size_t mesh_cuda_fatbin_size;

#endif
