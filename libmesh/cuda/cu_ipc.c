/* CUDA IPC for mesh_mem_cuda_ops: device memory of one process mapped into another of the node.
 *
 * Two kinds of handle (mesh_mem_ipc_t.kind):
 *   MESH_CU_IPC_LEGACY  cuIpcGetMemHandle on the allocation holding the pointer (cudaMalloc,
 *                       cuMemAlloc); opened with cuIpcOpenMemHandle, peer access enabled lazily.
 *   MESH_CU_IPC_FD      allocations of cuMemCreate made with POSIX file descriptor handles (what
 *                       PyTorch's expandable segments and NCCL's buffers use): the descriptor of
 *                       cuMemExportToShareableHandle travels over a Unix socket (SCM_RIGHTS);
 *                       the importer maps it with cuMemImportFromShareableHandle,
 *                       cuMemAddressReserve, cuMemMap and cuMemSetAccess for its device.
 * Either way the handle names the whole allocation and the offset of the exported pointer in it.
 *
 * Peers in one process share raw pointers: CUDA cannot open a handle in the process that made it
 * (cuIpcOpenMemHandle fails there), so an import of this process's own handle is refused.
 *
 * Imports are counted per allocation: importing the same handle again returns the same mapping,
 * and ipc_close unmaps it when the last import is closed. An allocation is known by its handle
 * and its buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID, unique in the exporting process), so that
 * an allocation made where a freed one was never finds the old mapping. */
#define MESH_LOG_SUBSYSTEM "cuda"
#include <config.h>

#include "libmesh/cuda/cu_driver.h"
#include "libmesh/log.h"
#include "libmesh/mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MESH_CU_IPC_LEGACY 1
#define MESH_CU_IPC_FD     2

/* The handle bytes of an FD export: who exported what, for counting imports (the descriptor
 * itself differs in each process it reaches). */
typedef struct {
    uint64_t pid;
    uint64_t base;
    uint64_t size;
    int64_t device;
    uint64_t id;
} mesh_cu_fd_key_t;

typedef struct {
    int kind;
    uint64_t id;
    unsigned char key[MESH_MEM_IPC_BYTES];
    CUdeviceptr base;
    size_t size;
    CUmemGenericAllocationHandle alloc; /* MESH_CU_IPC_FD */
    int refs;
} mesh_cu_import_t;

static pthread_mutex_t mesh_cu_ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_cu_import_t *mesh_cu_imports;
static size_t mesh_cu_nimports, mesh_cu_cap_imports;

/* ---------------------------------------------------------------- export */

/* An allocation of cuMemCreate: its POSIX descriptor, or MESH_ERR_UNSUPPORTED when it was made
 * without that handle type. */
static mesh_status_t mesh_cu_export_fd(CUmemGenericAllocationHandle alloc, const void *ptr,
                                       const mesh_mem_info_t *info, mesh_mem_ipc_t *h)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    MESH_CU_CALL(cuMemGetAllocationPropertiesFromHandle(&prop, alloc));
    if (!(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "device memory %p (cuMemCreate) was made without POSIX file "
                          "descriptor handles: it cannot be shared with another process",
                          ptr);
    int fd = -1;
    MESH_CU_CALL(
        cuMemExportToShareableHandle(&fd, alloc, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    mesh_cu_fd_key_t key = {.pid = (uint64_t)getpid(),
                            .base = (uint64_t)(uintptr_t)info->base,
                            .size = info->size,
                            .device = info->device,
                            .id = h->id};
    memset(h, 0, sizeof(*h));
    h->kind = MESH_CU_IPC_FD;
    h->fd = fd;
    h->size = info->size;
    h->offset = (size_t)((const char *)ptr - (const char *)info->base);
    memcpy(h->handle, &key, sizeof(key));
    return MESH_OK;
}

static mesh_status_t mesh_cu_export_legacy(const void *ptr, const mesh_mem_info_t *info,
                                           mesh_mem_ipc_t *h)
{
    CUipcMemHandle ih;
    _Static_assert(sizeof(ih) <= MESH_MEM_IPC_BYTES, "CUipcMemHandle fits mesh_mem_ipc_t");
    MESH_CU_CALL(cuIpcGetMemHandle(&ih, (CUdeviceptr)info->base));
    memset(h, 0, sizeof(*h));
    h->kind = MESH_CU_IPC_LEGACY;
    h->fd = -1;
    h->size = info->size;
    h->offset = (size_t)((const char *)ptr - (const char *)info->base);
    memcpy(h->handle, &ih, sizeof(ih));
    return MESH_OK;
}

/* For MESH_CU_IPC_FD, h->fd is a new descriptor that the caller owns (and closes once sent). */
mesh_status_t mesh_cu_ipc_export(const void *ptr, mesh_mem_ipc_t *h)
{
    mesh_mem_info_t info;
    MESH_CHECK(mesh_mem_cuda_ops.query(ptr, &info));
    if (info.kind != MESH_MEM_DEVICE)
        return mesh_error(MESH_ERR_INVALID_ARG, "IPC export: %p is not device memory (kind %d)",
                          ptr, (int)info.kind);
    if (info.base == NULL || info.size == 0)
        return mesh_error(MESH_ERR_INTERNAL, "IPC export: no allocation range for %p", ptr);
    int pushed;
    MESH_CHECK(mesh_cu_enter(NULL, NULL, &pushed));
    uint64_t id = 0;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_BUFFER_ID;
    void *data = &id;
    CUresult r = mesh_cu.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS) {
        mesh_cu_leave(pushed);
        return mesh_cu_error(r, "cuPointerGetAttributes(BUFFER_ID)");
    }
    mesh_status_t st;
    CUmemGenericAllocationHandle alloc;
    h->id = id; /* read by mesh_cu_export_fd's key */
    if (mesh_cu.cuMemRetainAllocationHandle(&alloc, (void *)ptr) == CUDA_SUCCESS) {
        st = mesh_cu_export_fd(alloc, ptr, &info, h);
        (void)mesh_cu.cuMemRelease(alloc);
    } else {
        st = mesh_cu_export_legacy(ptr, &info, h);
    }
    if (st == MESH_OK)
        h->id = id;
    mesh_cu_leave(pushed);
    return st;
}

/* ---------------------------------------------------------------- import */

static mesh_status_t mesh_cu_import_fd(const mesh_mem_ipc_t *h, mesh_cu_import_t *e)
{
    CUdevice dev;
    CUresult r;
    mesh_status_t st = MESH_OK;
    MESH_CU_CALL(cuCtxGetDevice(&dev));
    MESH_CU_CALL(cuMemImportFromShareableHandle(&e->alloc, (void *)(uintptr_t)h->fd,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    if ((r = mesh_cu.cuMemAddressReserve(&e->base, h->size, 0, 0, 0)) != CUDA_SUCCESS) {
        st = mesh_cu_error(r, "cuMemAddressReserve");
        goto err_release;
    }
    if ((r = mesh_cu.cuMemMap(e->base, h->size, 0, e->alloc, 0)) != CUDA_SUCCESS) {
        st = mesh_cu_error(r, "cuMemMap");
        goto err_free;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = (int)dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = mesh_cu.cuMemSetAccess(e->base, h->size, &access, 1)) != CUDA_SUCCESS) {
        st = mesh_cu_error(r, "cuMemSetAccess");
        goto err_unmap;
    }
    e->size = h->size;
    return MESH_OK;
err_unmap:
    (void)mesh_cu.cuMemUnmap(e->base, h->size);
err_free:
    (void)mesh_cu.cuMemAddressFree(e->base, h->size);
err_release:
    (void)mesh_cu.cuMemRelease(e->alloc);
    return st;
}

static mesh_status_t mesh_cu_import_legacy(const mesh_mem_ipc_t *h, mesh_cu_import_t *e)
{
    CUipcMemHandle ih;
    memcpy(&ih, h->handle, sizeof(ih));
    CUresult r = mesh_cu.cuIpcOpenMemHandle(&e->base, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_DEVICE)
        return mesh_error(MESH_ERR_UNSUPPORTED,
                          "cuIpcOpenMemHandle refused the handle (error %d): a handle cannot be "
                          "opened in the process that exported it (peers in one process share "
                          "pointers), nor on a device without peer access to its memory",
                          (int)r);
    if (r != CUDA_SUCCESS)
        return mesh_cu_error(r, "cuIpcOpenMemHandle");
    e->size = h->size;
    return MESH_OK;
}

static mesh_cu_import_t *mesh_cu_import_find(int kind, uint64_t id, const unsigned char *key)
{
    for (size_t i = 0; i < mesh_cu_nimports; i++)
        if (mesh_cu_imports[i].kind == kind && mesh_cu_imports[i].id == id &&
            memcmp(mesh_cu_imports[i].key, key, MESH_MEM_IPC_BYTES) == 0)
            return &mesh_cu_imports[i];
    return NULL;
}

static mesh_status_t mesh_cu_import_new(const mesh_mem_ipc_t *h, mesh_cu_import_t **out)
{
    if (mesh_cu_nimports == mesh_cu_cap_imports) {
        size_t cap = mesh_cu_cap_imports ? 2 * mesh_cu_cap_imports : 16;
        mesh_cu_import_t *n = realloc(mesh_cu_imports, cap * sizeof(*n));
        if (n == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "no memory for %zu IPC imports", cap);
        mesh_cu_imports = n;
        mesh_cu_cap_imports = cap;
    }
    mesh_cu_import_t e = {.kind = h->kind, .id = h->id, .refs = 1};
    memcpy(e.key, h->handle, MESH_MEM_IPC_BYTES);
    int pushed;
    MESH_CHECK(mesh_cu_enter(NULL, NULL, &pushed));
    mesh_status_t st =
        h->kind == MESH_CU_IPC_FD ? mesh_cu_import_fd(h, &e) : mesh_cu_import_legacy(h, &e);
    mesh_cu_leave(pushed);
    if (st != MESH_OK)
        return st;
    mesh_cu_imports[mesh_cu_nimports] = e;
    *out = &mesh_cu_imports[mesh_cu_nimports++];
    return MESH_OK;
}

mesh_status_t mesh_cu_ipc_import(const mesh_mem_ipc_t *h, void **ptr)
{
    if (h->kind != MESH_CU_IPC_LEGACY && h->kind != MESH_CU_IPC_FD)
        return mesh_error(MESH_ERR_INVALID_ARG, "IPC import: handle kind %d is not CUDA's",
                          h->kind);
    if (h->offset >= h->size)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "IPC import: offset %zu outside the %zu bytes "
                          "exported",
                          h->offset, h->size);
    if (h->kind == MESH_CU_IPC_FD) {
        mesh_cu_fd_key_t key;
        memcpy(&key, h->handle, sizeof(key));
        if (key.pid == (uint64_t)getpid())
            return mesh_error(MESH_ERR_UNSUPPORTED,
                              "IPC import: the handle comes from this "
                              "process (peers in one process share pointers)");
        if (h->fd < 0)
            return mesh_error(MESH_ERR_INVALID_ARG, "IPC import: no file descriptor in the "
                                                    "handle");
    }
    pthread_mutex_lock(&mesh_cu_ipc_lock);
    mesh_status_t st = MESH_OK;
    mesh_cu_import_t *e = mesh_cu_import_find(h->kind, h->id, h->handle);
    if (e != NULL)
        e->refs++;
    else
        st = mesh_cu_import_new(h, &e);
    if (st == MESH_OK)
        *ptr = (void *)(uintptr_t)(e->base + h->offset);
    pthread_mutex_unlock(&mesh_cu_ipc_lock);
    return st;
}

static void mesh_cu_unmap(mesh_cu_import_t *e)
{
    int pushed;
    if (mesh_cu_enter(NULL, NULL, &pushed) != MESH_OK)
        return;
    CUresult r;
    if (e->kind == MESH_CU_IPC_LEGACY) {
        if ((r = mesh_cu.cuIpcCloseMemHandle(e->base)) != CUDA_SUCCESS)
            (void)mesh_cu_error(r, "cuIpcCloseMemHandle");
    } else {
        if ((r = mesh_cu.cuMemUnmap(e->base, e->size)) != CUDA_SUCCESS)
            (void)mesh_cu_error(r, "cuMemUnmap");
        if ((r = mesh_cu.cuMemAddressFree(e->base, e->size)) != CUDA_SUCCESS)
            (void)mesh_cu_error(r, "cuMemAddressFree");
        if ((r = mesh_cu.cuMemRelease(e->alloc)) != CUDA_SUCCESS)
            (void)mesh_cu_error(r, "cuMemRelease");
    }
    mesh_cu_leave(pushed);
}

void mesh_cu_ipc_close(void *ptr)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    pthread_mutex_lock(&mesh_cu_ipc_lock);
    size_t i = 0;
    while (i < mesh_cu_nimports &&
           !(p >= mesh_cu_imports[i].base && p < mesh_cu_imports[i].base + mesh_cu_imports[i].size))
        i++;
    if (i == mesh_cu_nimports) {
        mesh_log_warn("IPC close: %p is no imported mapping", ptr);
    } else if (--mesh_cu_imports[i].refs == 0) {
        mesh_cu_unmap(&mesh_cu_imports[i]);
        mesh_cu_imports[i] = mesh_cu_imports[--mesh_cu_nimports];
    }
    pthread_mutex_unlock(&mesh_cu_ipc_lock);
}
