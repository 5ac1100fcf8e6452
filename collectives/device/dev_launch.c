/* A collective on device buffers: inside a node, the ones dev_ipc.c serves run by device copies
 * between the ranks' buffers, across nodes the ones dev_hier.c serves by such copies inside each
 * node and staging only what crosses the network; otherwise the device ranges it reads and writes
 * go to staging, the arguments are redirected there, and the call is built and launched as a host
 * call whose start the device engine holds until the caller's stream reaches it. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/device/dev.h"
#include "collectives/api.h"
#include "libmesh/log.h"
#include <stdlib.h>

/* Elements from the start of a buffer to the end of its last block. */
static size_t blocks_extent(const mesh_comm_t *comm, const size_t *counts, const size_t *displs)
{
    size_t end = 0;
    for (int i = 0; i < comm->size; i++)
        if (counts[i] > 0 && displs[i] + counts[i] > end)
            end = displs[i] + counts[i];
    return end;
}

/* Bytes of sbuf the call reads and of rbuf it may write. */
static void call_extents(const mesh_comm_t *comm, const mesh_coll_args_t *a, size_t *sbytes,
                         size_t *rbytes)
{
    size_t ds = a->dsize, n = a->count, all = n * (size_t)comm->size;
    *sbytes = *rbytes = 0;
    switch (a->type) {
    case MESH_COLL_ALLREDUCE:
    case MESH_COLL_REDUCE:
    case MESH_COLL_BROADCAST:
        *sbytes = *rbytes = n * ds;
        break;
    case MESH_COLL_REDUCE_SCATTER:
        *sbytes = a->bytes;
        *rbytes = n * ds;
        break;
    case MESH_COLL_ALLGATHER:
        *sbytes = n * ds;
        *rbytes = blocks_extent(comm, a->counts, a->displs) * ds;
        break;
    case MESH_COLL_ALLTOALL:
        *sbytes = blocks_extent(comm, a->counts, a->displs) * ds;
        *rbytes = blocks_extent(comm, a->rcounts, a->rdispls) * ds;
        break;
    case MESH_COLL_GATHER:
        *sbytes = n * ds;
        *rbytes = all * ds;
        break;
    case MESH_COLL_SCATTER:
        *sbytes = all * ds;
        *rbytes = n * ds;
        break;
    default:
        break;
    }
}

mesh_status_t mesh_dev_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                              size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                              mesh_request_h *req)
{
    int hier = mesh_dev_hier_select(comm, args, scalar);
    if (hier < 0) {
        free(owned0);
        return mesh_comm_fail(comm, hier);
    }
    /* both build their schedules on the device buffers themselves (mesh_dev_ipc_build) */
    if (hier || mesh_dev_ipc_serves(comm, args, scalar))
        return mesh_dev_ipc_launch(comm, args, avg_buf, avg_count, owned0, req);
    /* large element-wise calls stage in chunks, pipelined (dev_pipe.c) */
    if (mesh_dev_pipe_serves(comm, args, scalar, in_count, avg_buf, avg_count))
        return mesh_dev_pipe_launch(comm, args, scalar, avg_buf, owned0, req);
    mesh_dev_op_t *d = NULL;
    size_t sbytes, rbytes;
    call_extents(comm, args, &sbytes, &rbytes);
    mesh_status_t st = mesh_dev_op_create(comm, args, &d);
    /* a layout with gaps leaves bytes of rbuf unwritten: they go in so that they come back */
    if (st == MESH_OK)
        st = mesh_dev_op_add(d, args->sbuf, sbytes, 1, 0);
    if (st == MESH_OK)
        st = mesh_dev_op_add(d, args->rbuf, rbytes, !args->uniform, 1);
    if (st == MESH_OK)
        st = mesh_dev_op_stage(d);
    if (st < 0) {
        mesh_dev_op_free(d);
        free(owned0);
        return mesh_comm_fail(comm, st);
    }
    args->sbuf = mesh_dev_op_map(d, args->sbuf);
    args->rbuf = mesh_dev_op_map(d, args->rbuf);
    avg_buf = mesh_dev_op_map(d, avg_buf);
    args->mem = NULL; /* the schedule runs on the staging buffers */
    return mesh_api_launch_on(comm, args, scalar, in_count, avg_buf, avg_count, owned0, d, req);
}
