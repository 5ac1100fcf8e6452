/* The emulated device: host memory that the "emu" table owns as device memory, and streams that
 * are threads. A test instrument for the GPU path's host logic (staging, stream ordering, IPC,
 * error paths) on machines without a GPU; never the proof of the GPU path. */
#ifndef MESH_MEM_EMU_H
#define MESH_MEM_EMU_H

#include "libmesh/mem.h"

/* Device memory of the emulated device `device` (bytes may be 0): a shared mapping of a memfd,
 * so that processes of the node can import it (ipc_export/ipc_import). Usable whether or not
 * MESH_DEVICE_EMU is set; without it, collectives refuse it (no active table). */
mesh_status_t mesh_mem_emu_alloc(void **ptr, size_t bytes, int device);
void mesh_mem_emu_free(void *ptr);
/* The calling thread's current device; -1 goes back to MESH_DEVICE_EMU_DEVICE. */
void mesh_mem_emu_set_device(int device);
/* Blocks until every operation enqueued on stream so far ran (NULL: the default stream). */
mesh_status_t mesh_mem_emu_stream_sync(void *stream);
/* Holds (1) or releases (0) every emulated stream before its next operation, so that a test sees
 * a call return while the work it enqueued has not run. */
void mesh_mem_emu_hold(int hold);

/* mem_emu_stream.c, for the table in mem_emu.c */
void mesh_mem_emu_stream_configure(long delay_us);
mesh_status_t mesh_mem_emu_stream_create(void **stream);
void mesh_mem_emu_stream_destroy(void *stream);
mesh_status_t mesh_mem_emu_event_create(void **event);
void mesh_mem_emu_event_destroy(void *event);
mesh_status_t mesh_mem_emu_event_record(void *event, void *stream);
mesh_status_t mesh_mem_emu_event_query(void *event);
mesh_status_t mesh_mem_emu_stream_wait_event(void *stream, void *event);
mesh_status_t mesh_mem_emu_copy_async(void *dst, const void *src, size_t bytes, void *stream);
mesh_status_t mesh_mem_emu_reduce_async(void *dst, const void *a, const void *b, size_t count,
                                        mesh_dtype_t dtype, mesh_op_t op, void *stream);
mesh_status_t mesh_mem_emu_scale_async(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                                       const void *scalar, void *stream);
mesh_status_t mesh_mem_emu_divide_async(void *buf, size_t count, mesh_dtype_t dtype, int n,
                                        void *stream);
mesh_status_t mesh_mem_emu_stream_write(void *stream, uint32_t *flag, uint32_t value);
mesh_status_t mesh_mem_emu_stream_wait(void *stream, uint32_t *flag, uint32_t value);

#endif
