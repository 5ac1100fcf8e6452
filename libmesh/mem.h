/*
 * Memory types and the device seam.
 *
 * Every buffer handed to a collective has a kind: host memory, or memory that a device table
 * owns (device, managed, host memory pinned for a device). Algorithms and schedules never test
 * for CUDA: they ask mesh_mem_query() what a pointer is, and every local step on device memory
 * (copy, reduce, stream ordering, IPC) goes through the owning table's ops.
 *
 * Tables: "cuda" (libmesh/cuda/, built with --with-cuda; opens libcuda.so.1 at run time, so one
 * build serves machines with and without a driver) and "emu" (an emulated device: host memory
 * registered as device memory, with asynchronous streams, for tests on machines without a GPU).
 * Host memory has no table.
 *
 * Streams and events are opaque pointers of the owning table (CUstream, CUevent for cuda).
 * Flags are 32-bit words in host memory allocated with host_alloc: the host writes them with a
 * release store and a stream waits on them (stream_wait), or a stream writes them (stream_write)
 * and the host reads them with an acquire load. This is how an operation is ordered on the
 * caller's stream without the CPU blocking the caller, and without any kernel waiting on another
 * process's kernel.
 */
#ifndef MESH_MEM_H
#define MESH_MEM_H

#include "mesh.h"
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MESH_MEM_HOST = 0,    /* pageable host memory, or memory no table knows */
    MESH_MEM_HOST_PINNED, /* host memory registered with a device (copy engines reach it) */
    MESH_MEM_DEVICE,      /* memory of one device */
    MESH_MEM_MANAGED,     /* managed memory (treated as device memory of its preferred device) */
    MESH_MEM_KIND_COUNT
} mesh_mem_kind_t;

struct mesh_mem_ops;

typedef struct {
    mesh_mem_kind_t kind;
    int device;                     /* device ordinal; -1 for host memory */
    const struct mesh_mem_ops *ops; /* owning table; NULL for MESH_MEM_HOST */
    void *base;                     /* allocation holding the pointer, when known (IPC) */
    size_t size;                    /* its size in bytes, 0 when unknown */
} mesh_mem_info_t;

/* An exported allocation, passed to peers of the same node. */
#define MESH_MEM_IPC_BYTES 64
typedef struct {
    int kind;      /* table-defined: legacy handle, or POSIX file descriptor */
    int fd;        /* for fd handles: a descriptor in the exporting process, which the exporter
                      owns after ipc_export and closes once its peers imported it (they get
                      their own over a Unix socket with SCM_RIGHTS, or with pidfd_getfd);
                      -1 otherwise */
    size_t size;   /* bytes mapped */
    size_t offset; /* of the exported pointer inside the mapping */
    uint64_t id;   /* the allocation's identity in the exporting process, never reused for
                      another allocation there (an address can be): what importers cache on */
    unsigned char handle[MESH_MEM_IPC_BYTES];
} mesh_mem_ipc_t;

typedef struct mesh_mem_ops {
    const char *name; /* "cuda", "emu" */

    /* Loads the driver; MESH_ERR_UNSUPPORTED (with a message) when none is usable. Called once
     * per process before any other op; idempotent. */
    mesh_status_t (*init)(void);
    /* Kind and device of ptr. MESH_OK with kind MESH_MEM_HOST for memory this table does not
     * own. */
    mesh_status_t (*query)(const void *ptr, mesh_mem_info_t *info);
    /* The calling thread's current device (what the rank uses). */
    mesh_status_t (*current_device)(int *device);

    /* Streams and events of the table, for the library's internal work. */
    mesh_status_t (*stream_create)(void **stream);
    void (*stream_destroy)(void *stream);
    mesh_status_t (*event_create)(void **event);
    void (*event_destroy)(void *event);
    mesh_status_t (*event_record)(void *event, void *stream);
    /* MESH_OK when every work recorded before the event completed, MESH_INPROGRESS if not. */
    mesh_status_t (*event_query)(void *event);
    /* Later work on stream waits for event. */
    mesh_status_t (*stream_wait_event)(void *stream, void *event);

    /* Work enqueued on a stream. Any direction: host, pinned or device memory at either end. */
    mesh_status_t (*copy_async)(void *dst, const void *src, size_t bytes, void *stream);
    /* dst = a op b over count elements (op one of SUM, PROD, MIN, MAX), accumulating as
     * mesh_reduce_local3 does, so that results equal the host's. dst may alias a or b. */
    mesh_status_t (*reduce_async)(void *dst, const void *a, const void *b, size_t count,
                                  mesh_dtype_t dtype, mesh_op_t op, void *stream);
    /* dst[i] = src[i] * scalar (scalar: one element of dtype, read at enqueue time). */
    mesh_status_t (*scale_async)(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                                 const void *scalar, void *stream);
    /* buf[i] = buf[i] / n, as mesh_reduce_divide. */
    mesh_status_t (*divide_async)(void *buf, size_t count, mesh_dtype_t dtype, int n, void *stream);

    /* Stream and host ordering through a flag in memory from host_alloc. */
    mesh_status_t (*stream_write)(void *stream, uint32_t *flag, uint32_t value);
    /* Later work on stream waits until (int32_t)(*flag - value) >= 0. */
    mesh_status_t (*stream_wait)(void *stream, uint32_t *flag, uint32_t value);

    /* Host memory that copy engines reach and streams can wait on (staging, flags). */
    mesh_status_t (*host_alloc)(void **ptr, size_t bytes);
    void (*host_free)(void *ptr);
    /* Memory of device (an ordinal of the table), for programs and tests that need device
     * buffers (cuda: cuMemAlloc in the device's primary context, retained for the process).
     * dev_free takes what dev_alloc returned, NULL included. */
    mesh_status_t (*dev_alloc)(void **ptr, size_t bytes, int device);
    void (*dev_free)(void *ptr);

    /* CUDA IPC. export: a handle for the allocation holding ptr. import: maps a peer's
     * handle (a process of the same node) and returns the address of the exported pointer;
     * close unmaps it. MESH_ERR_UNSUPPORTED where the table cannot share memory. */
    mesh_status_t (*ipc_export)(const void *ptr, mesh_mem_ipc_t *handle);
    mesh_status_t (*ipc_import)(const mesh_mem_ipc_t *handle, void **ptr);
    void (*ipc_close)(void *ptr);

    /* GPUDirect RDMA: whether device's memory can be exported as a dma-buf file descriptor
     * (cuda: cuMemGetHandleForAddressRange), which a NIC registers with ibv_reg_dmabuf_mr.
     * MESH_OK if so; MESH_ERR_UNSUPPORTED otherwise, the reason in why (nothing logged). NULL:
     * the table never can. */
    mesh_status_t (*dmabuf_query)(int device, char *why, size_t len);
} mesh_mem_ops_t;

/* The kind of ptr: asks each registered table (the first that owns it answers). Never fails
 * for a pointer no table knows: that is host memory. Where no table is active it answers host
 * memory after one load. */
mesh_status_t mesh_mem_query(const void *ptr, mesh_mem_info_t *info);

/* The tables built in, in the order they are asked ("emu" only when MESH_DEVICE_EMU is set).
 * NULL name: the first active table. NULL when the table is not active. */
const mesh_mem_ops_t *mesh_mem_table(const char *name);

/* Initialises the tables once (the cuda table's init loads the driver); the first query does it
 * too. Communicator creation calls it, so that no collective pays for it. */
void mesh_mem_init(void);
/* Whether ops initialised and is asked by mesh_mem_query. */
int mesh_mem_table_active(const mesh_mem_ops_t *ops);
/* A table whose memory exists although the table is not active (the emulated allocator used
 * with MESH_DEVICE_EMU off): queries still recognise its pointers, so that collectives refuse
 * them (MESH_ERR_UNSUPPORTED) rather than read them as host memory. */
void mesh_mem_detect_only(const mesh_mem_ops_t *ops);

/* The hot path's test: no table is active nor detecting, so every pointer is host memory. */
enum { MESH_MEM_STATE_UNKNOWN = 0, MESH_MEM_STATE_HOST, MESH_MEM_STATE_TABLES };
extern int mesh_mem_state_; /* read and written with __atomic builtins (C and C++ alike) */
static inline int mesh_mem_host_only(void)
{
    return __atomic_load_n(&mesh_mem_state_, __ATOMIC_RELAXED) == MESH_MEM_STATE_HOST;
}

/* The memory table's config (MESH_DEVICE_EMU*). */
mesh_status_t mesh_mem_config_register(void);

#if HAVE_CUDA
extern const mesh_mem_ops_t mesh_mem_cuda_ops;
/* The cuda table's knobs (registered with the memory tables', so mesh-info lists them before
 * any driver is loaded). */
mesh_status_t mesh_mem_cuda_config_register(void);
#endif
extern const mesh_mem_ops_t mesh_mem_emu_ops;

#endif
