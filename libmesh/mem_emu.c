/* The emulated device's memory and table: allocations are shared mappings of memfds, recorded in
 * a registry that answers queries (device memory of a device, or pinned host memory), exported
 * as their file descriptor and imported by mapping it, as CUDA's POSIX-fd handles are. */
#define _GNU_SOURCE
#define MESH_LOG_SUBSYSTEM "mem"
#include "libmesh/mem_emu.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EMU_IPC_FD 1 /* mesh_mem_ipc_t.kind of the emulated device's handles */

struct emu_block {
    char *base;
    size_t size;   /* bytes asked for */
    size_t mapped; /* bytes mapped (at least a page) */
    int device;    /* -1: pinned host memory */
    int fd;        /* the memfd (allocations, imports); -1 for pinned host memory */
    int imported;
    uint64_t id; /* the allocation's identity (an import keeps its exporter's) */
};

static uint64_t emu_next_id; /* under emu_lock */

static pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_block *emu_blocks;
static int emu_nblocks, emu_cap;
static int emu_default_device;
static __thread int emu_thread_device = -1;

static mesh_status_t emu_add(const struct emu_block *b)
{
    pthread_mutex_lock(&emu_lock);
    if (emu_nblocks == emu_cap) {
        int cap = emu_cap ? 2 * emu_cap : 64;
        struct emu_block *n = realloc(emu_blocks, sizeof(*n) * (size_t)cap);
        if (n == NULL) {
            pthread_mutex_unlock(&emu_lock);
            return mesh_error(MESH_ERR_NO_MEMORY, "emu: cannot record an allocation");
        }
        emu_blocks = n;
        emu_cap = cap;
    }
    emu_blocks[emu_nblocks] = *b;
    if (!b->imported)
        emu_blocks[emu_nblocks].id = ++emu_next_id;
    emu_nblocks++;
    pthread_mutex_unlock(&emu_lock);
    return MESH_OK;
}

/* The block holding ptr, removed from the registry when take; 0 if none. */
static int emu_find(const void *ptr, struct emu_block *out, int take, int exact)
{
    const char *p = ptr;
    int found = 0;
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; i < emu_nblocks; i++) {
        struct emu_block *b = &emu_blocks[i];
        if (exact ? p != b->base : (p < b->base || p >= b->base + (b->size ? b->size : 1)))
            continue;
        *out = *b;
        found = 1;
        if (take)
            emu_blocks[i] = emu_blocks[--emu_nblocks];
        break;
    }
    pthread_mutex_unlock(&emu_lock);
    return found;
}

static size_t emu_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return bytes == 0 ? page : (bytes + page - 1) / page * page;
}

/* Maps the block's descriptor and registers the mapping; on failure the descriptor is closed
 * and nothing stays mapped. what: the caller, for the message. */
static mesh_status_t emu_map(struct emu_block *b, const char *what)
{
    b->base = mmap(NULL, b->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
    if (b->base == MAP_FAILED) {
        close(b->fd);
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: %s: mmap %zu bytes: %m", what, b->mapped);
    }
    mesh_status_t st = emu_add(b);
    if (st < 0) {
        munmap(b->base, b->mapped);
        close(b->fd);
    }
    return st;
}

mesh_status_t mesh_mem_emu_alloc(void **ptr, size_t bytes, int device)
{
    if (ptr == NULL || device < 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "emu: alloc needs a pointer and a device >= 0");
    if (!mesh_mem_table_active(&mesh_mem_emu_ops))
        mesh_mem_detect_only(&mesh_mem_emu_ops);
    struct emu_block b = {.size = bytes, .mapped = emu_round(bytes), .device = device};
    b.fd = memfd_create("mesh-emu", MFD_CLOEXEC);
    if (b.fd < 0)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: memfd_create: %m");
    if (ftruncate(b.fd, (off_t)b.mapped) != 0) {
        close(b.fd);
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: ftruncate %zu bytes: %m", b.mapped);
    }
    MESH_CHECK(emu_map(&b, "alloc"));
    *ptr = b.base;
    return MESH_OK;
}

void mesh_mem_emu_free(void *ptr)
{
    struct emu_block b;
    if (ptr == NULL || !emu_find(ptr, &b, 1, 1))
        return;
    munmap(b.base, b.mapped);
    if (b.fd >= 0)
        close(b.fd);
}

void mesh_mem_emu_set_device(int device)
{
    emu_thread_device = device;
}

static mesh_status_t emu_init(void)
{
    MESH_CHECK(mesh_mem_config_register());
    emu_default_device = (int)mesh_config_int("DEVICE_EMU_DEVICE");
    mesh_mem_emu_stream_configure((long)mesh_config_int("DEVICE_EMU_DELAY_US"));
    return MESH_OK;
}

static mesh_status_t emu_query(const void *ptr, mesh_mem_info_t *info)
{
    struct emu_block b;
    if (!emu_find(ptr, &b, 0, 0)) {
        *info = (mesh_mem_info_t){.kind = MESH_MEM_HOST, .device = -1};
        return MESH_OK;
    }
    *info = (mesh_mem_info_t){.kind = b.device < 0 ? MESH_MEM_HOST_PINNED : MESH_MEM_DEVICE,
                              .device = b.device,
                              .ops = &mesh_mem_emu_ops,
                              .base = b.base,
                              .size = b.size};
    return MESH_OK;
}

static mesh_status_t emu_current_device(int *device)
{
    *device = emu_thread_device >= 0 ? emu_thread_device : emu_default_device;
    return MESH_OK;
}

static mesh_status_t emu_host_alloc(void **ptr, size_t bytes)
{
    struct emu_block b = {.size = bytes, .mapped = bytes, .device = -1, .fd = -1};
    if (posix_memalign((void **)&b.base, 64, bytes ? bytes : 1) != 0)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: cannot allocate %zu bytes of pinned memory",
                          bytes);
    mesh_status_t st = emu_add(&b);
    if (st < 0) {
        free(b.base);
        return st;
    }
    *ptr = b.base;
    return MESH_OK;
}

static void emu_host_free(void *ptr)
{
    struct emu_block b;
    if (ptr != NULL && emu_find(ptr, &b, 1, 1))
        free(b.base);
}

static mesh_status_t emu_ipc_export(const void *ptr, mesh_mem_ipc_t *handle)
{
    struct emu_block b;
    if (!emu_find(ptr, &b, 0, 0) || b.fd < 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "emu: %p is not emulated device memory", ptr);
    memset(handle, 0, sizeof(*handle));
    handle->kind = EMU_IPC_FD;
    /* the caller's to close, as cuMemExportToShareableHandle's */
    handle->fd = fcntl(b.fd, F_DUPFD_CLOEXEC, 0);
    if (handle->fd < 0)
        return mesh_error(MESH_ERR_NO_MEMORY, "emu: export: dup: %m");
    handle->id = b.id;
    handle->size = b.mapped;
    handle->offset = (size_t)((const char *)ptr - b.base);
    memcpy(handle->handle, &b.device, sizeof(b.device));
    return MESH_OK;
}

/* handle->fd is a descriptor of this process (received over a Unix socket, or the exporter's
 * own in the same process): the mapping keeps a duplicate of it. */
static mesh_status_t emu_ipc_import(const mesh_mem_ipc_t *handle, void **ptr)
{
    if (handle->kind != EMU_IPC_FD || handle->fd < 0 || handle->offset >= handle->size)
        return mesh_error(MESH_ERR_INVALID_ARG, "emu: not an emulated device's handle");
    struct emu_block b = {
        .size = handle->size, .mapped = handle->size, .imported = 1, .id = handle->id};
    memcpy(&b.device, handle->handle, sizeof(b.device));
    b.fd = fcntl(handle->fd, F_DUPFD_CLOEXEC, 0);
    if (b.fd < 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "emu: import: dup: %m");
    MESH_CHECK(emu_map(&b, "import"));
    *ptr = b.base + handle->offset;
    return MESH_OK;
}

static void emu_ipc_close(void *ptr)
{
    struct emu_block b;
    if (ptr == NULL || !emu_find(ptr, &b, 0, 0) || !b.imported)
        return;
    if (!emu_find(b.base, &b, 1, 1))
        return;
    munmap(b.base, b.mapped);
    close(b.fd);
}

const mesh_mem_ops_t mesh_mem_emu_ops = {
    .name = "emu",
    .init = emu_init,
    .query = emu_query,
    .current_device = emu_current_device,
    .stream_create = mesh_mem_emu_stream_create,
    .stream_destroy = mesh_mem_emu_stream_destroy,
    .event_create = mesh_mem_emu_event_create,
    .event_destroy = mesh_mem_emu_event_destroy,
    .event_record = mesh_mem_emu_event_record,
    .event_query = mesh_mem_emu_event_query,
    .stream_wait_event = mesh_mem_emu_stream_wait_event,
    .copy_async = mesh_mem_emu_copy_async,
    .reduce_async = mesh_mem_emu_reduce_async,
    .scale_async = mesh_mem_emu_scale_async,
    .divide_async = mesh_mem_emu_divide_async,
    .stream_write = mesh_mem_emu_stream_write,
    .stream_wait = mesh_mem_emu_stream_wait,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .dev_alloc = mesh_mem_emu_alloc,
    .dev_free = mesh_mem_emu_free,
    .ipc_export = emu_ipc_export,
    .ipc_import = emu_ipc_import,
    .ipc_close = emu_ipc_close,
};
