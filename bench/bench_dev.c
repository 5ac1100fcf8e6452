/* mesh-bench's device buffers: allocation, copies and the stream through mesh.h's device calls,
 * and the agreement of the ranks on the table (one rank without it fails them all alike). */
#include "config.h"
#include "bench/bench_dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_CUDA
#define DEV_NO_CUDA "no usable CUDA driver and GPU"
#else
#define DEV_NO_CUDA "this build has no CUDA (configure --with-cuda)"
#endif

static void *dev_stream;

void *bench_dev_stream(void)
{
    return dev_stream;
}

static void *dev_alloc(size_t bytes, int pinned_host)
{
    void *p = NULL;
    mesh_status_t st =
        mesh_mem_alloc(pinned_host ? MESH_MEMTYPE_HOST_PINNED : MESH_MEMTYPE_DEVICE, bytes, &p);
    if (st == MESH_OK)
        return p;
    fprintf(stderr, "error: cannot allocate %zu bytes of %s memory: %s: %s\n", bytes,
            pinned_host ? "pinned host" : "device", mesh_status_string(st),
            mesh_comm_last_error(NULL));
    return NULL;
}

static int dev_copy(void *dst, const void *src, size_t bytes)
{
    mesh_status_t st = mesh_memcpy_async(dst, src, bytes, dev_stream);
    if (st == MESH_OK)
        return 0;
    fprintf(stderr, "error: copy of %zu bytes on the bench's stream: %s: %s\n", bytes,
            mesh_status_string(st), mesh_comm_last_error(NULL));
    return -1;
}

static int dev_sync(void)
{
    mesh_status_t st = mesh_stream_synchronize(dev_stream);
    if (st == MESH_OK)
        return 0;
    fprintf(stderr, "error: waiting for the bench's stream: %s: %s\n", mesh_status_string(st),
            mesh_comm_last_error(NULL));
    return -1;
}

void bench_dev_preinit(const char *mem)
{
    if (mem && strcmp(mem, "emu") == 0)
        setenv("MESH_DEVICE_EMU", "1", 1);
}

/* This rank's table and stream; 0, or -1 after printing why. */
static int dev_local(int rank, const char *mem, bench_device_t *dev)
{
    const char *table = mesh_device_table();
    mesh_status_t st;
    if (table == NULL) {
        fprintf(stderr,
                "error: rank %d: -m %s: no device table is active: " DEV_NO_CUDA
                ", and MESH_DEVICE_EMU is off (-m emu takes the emulated device)\n",
                rank, mem);
        return -1;
    }
    if (strcmp(mem, "device") != 0 && strcmp(mem, table) != 0) {
        fprintf(stderr, "error: rank %d: -m %s: the active device table is %s\n", rank, mem, table);
        return -1;
    }
    if ((st = mesh_device_current(&dev->device)) != MESH_OK ||
        (st = mesh_stream_create(&dev_stream)) != MESH_OK) {
        fprintf(stderr, "error: rank %d: %s device: %s: %s\n", rank, table, mesh_status_string(st),
                mesh_comm_last_error(NULL));
        return -1;
    }
    dev->table = table;
    return 0;
}

int bench_dev_setup(mesh_comm_h comm, const char *mem, bench_device_t *dev)
{
    int rank = mesh_comm_rank(comm), size = mesh_comm_size(comm);
    int mine[2], ok;
    *dev = (bench_device_t){.alloc = dev_alloc,
                            .free = mesh_mem_free,
                            .copy = dev_copy,
                            .sync = dev_sync,
                            .device = -1};
    ok = dev_local(rank, mem, dev) == 0;
    if (mesh_allreduce(comm, &ok, &ok, 1, MESH_INT32, MESH_MIN, NULL, NULL) != MESH_OK || !ok) {
        if (rank == 0)
            fprintf(stderr, "error: -m %s: not every rank has device buffers\n", mem);
        return 1;
    }
    int *all = malloc(sizeof(mine) * (size_t)size);
    mine[0] = mesh_comm_node(comm, rank);
    mine[1] = dev->device;
    if (all == NULL || mesh_allgather(comm, mine, all, 2, MESH_INT32, NULL, NULL) != MESH_OK) {
        fprintf(stderr, "error: rank %d: cannot gather the ranks' devices: %s\n", rank,
                mesh_comm_last_error(comm));
        free(all);
        return 1;
    }
    dev->sharing = 0;
    for (int r = 0; r < size; r++)
        dev->sharing += all[2 * r] == all[0] && all[2 * r + 1] == all[1];
    free(all);
    return 0;
}

void bench_dev_free(void)
{
    mesh_stream_destroy(dev_stream);
    dev_stream = NULL;
}
