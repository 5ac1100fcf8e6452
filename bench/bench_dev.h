/* mesh-bench's device buffers (-m device, cuda or emu): the table's memory and a stream through
 * mesh.h's device calls, as bench_device_t hooks. */
#ifndef MESH_BENCH_DEV_H
#define MESH_BENCH_DEV_H

#include "bench/bench.h"
#include "mesh.h"

/* Before the communicator: -m emu enables the emulated device (MESH_DEVICE_EMU=1). */
void bench_dev_preinit(const char *mem);
/* After it: checks on every rank that the table asked for (mem: "device" for any) is active,
 * creates the stream and finds the ranks sharing rank 0's device. 0 with *dev filled; 1 after
 * printing why (on the ranks that lack it), on every rank alike. */
int bench_dev_setup(mesh_comm_h comm, const char *mem, bench_device_t *dev);
/* The stream every call and copy runs on (NULL before setup: host buffers). */
void *bench_dev_stream(void);
void bench_dev_free(void);

#endif
