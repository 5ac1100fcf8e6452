/* Argument checks shared by the public entry points; each names the argument it refuses. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include <stdlib.h>

/* Common checks of every call; fn names the API function in messages. */
mesh_status_t mesh_api_check_comm(mesh_comm_t *comm, const char *fn, void *stream)
{
    if (comm == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (atomic_load(&comm->aborted))
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_ABORTED, "%s: communicator was aborted", fn));
    if (comm->failed < 0)
        return mesh_comm_fail(comm, mesh_error(comm->failed,
                                               "%s: communicator failed earlier (%s); abort and "
                                               "destroy it",
                                               fn, mesh_status_string(comm->failed)));
    if (stream != NULL)
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_INVALID_ARG,
                                               "%s: stream must be NULL for host buffers", fn));
    return MESH_OK;
}

mesh_status_t mesh_api_check_dtype(mesh_comm_t *comm, const char *fn, mesh_dtype_t dtype)
{
    CHECK_ARG(mesh_dtype_valid(dtype), "%s: dtype %d is not a mesh_dtype_t", fn, (int)dtype);
    return MESH_OK;
}

/* Resolves op into a base op plus pre-multiplication scalar (NULL if none). */
mesh_status_t mesh_api_check_op(mesh_comm_t *comm, const char *fn, mesh_op_t op, mesh_dtype_t dtype,
                              mesh_op_t *base, const void **scalar)
{
    *scalar = NULL;
    if ((unsigned)op < MESH_OP_COUNT) {
        /* AVG reduces as a sum; the division happens once, at completion */
        *base = op == MESH_AVG ? MESH_SUM : op;
        return MESH_OK;
    }
    int idx = (int)op - MESH_OP_USER_BASE;
    CHECK_ARG(idx >= 0 && idx < MESH_COMM_MAX_PREMUL && comm->premul[idx].used,
              "%s: op %d is neither a mesh_op_t nor a live pre-multiplied sum of this "
              "communicator", fn, (int)op);
    CHECK_ARG(comm->premul[idx].dtype == dtype,
              "%s: op %d was created for dtype %s, the call uses %s", fn, (int)op,
              mesh_dtype_name(comm->premul[idx].dtype), mesh_dtype_name(dtype));
    *base = MESH_SUM;
    *scalar = comm->premul[idx].scalar;
    return MESH_OK;
}

mesh_status_t mesh_api_check_buf(mesh_comm_t *comm, const char *fn, const char *name,
                               const void *buf, size_t count)
{
    CHECK_ARG(buf != NULL || count == 0, "%s: %s is NULL with count %zu", fn, name, count);
    return MESH_OK;
}

mesh_status_t mesh_api_check_root(mesh_comm_t *comm, const char *fn, int root)
{
    CHECK_ARG(root >= 0 && root < comm->size, "%s: root %d is outside 0..%d", fn, root,
              comm->size - 1);
    return MESH_OK;
}

mesh_status_t mesh_api_check_count(mesh_comm_t *comm, const char *fn, size_t count, size_t dsize,
                                 size_t mult)
{
    CHECK_ARG(dsize == 0 || count <= SIZE_MAX / dsize / (mult ? mult : 1) / 2,
              "%s: count %zu is too large", fn, count);
    return MESH_OK;
}

/* Two buffers of the given byte lengths either coincide where the caller said in place, or
 * do not overlap at all. */
mesh_status_t mesh_api_check_overlap(mesh_comm_t *comm, const char *fn, const void *a, size_t alen,
                                   const void *b, size_t blen, int in_place)
{
    if (in_place || a == NULL || b == NULL || alen == 0 || blen == 0) return MESH_OK;
    const char *pa = a, *pb = b;
    CHECK_ARG(pa + alen <= pb || pb + blen <= pa,
              "%s: sbuf and rbuf overlap without being in place", fn);
    return MESH_OK;
}

/* counts[] and displs[] back to back, in one allocation (freed with the request). */
mesh_status_t mesh_api_alloc_blocks(mesh_comm_t *comm, const char *fn, int arrays, size_t **out)
{
    size_t *p = malloc(sizeof(size_t) * (size_t)comm->size * (size_t)arrays);
    if (p == NULL)
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_NO_MEMORY, "%s: cannot allocate counts",
                                               fn));
    *out = p;
    return MESH_OK;
}

/* Fills displacements back to back and returns the total. */
size_t mesh_api_pack_displs(int n, const size_t *counts, const size_t *given, size_t *displs,
                          size_t *extent)
{
    size_t total = 0, end = 0;
    for (int i = 0; i < n; i++) {
        displs[i] = given ? given[i] : total;
        total += counts[i];
        if (displs[i] + counts[i] > end) end = displs[i] + counts[i];
    }
    if (extent) *extent = end;
    return total;
}

/* counts[] and displs[] for the block collectives: a copy of the caller's counts (v-variants) or
 * `fill` for every rank; *uniform tells whether all counts are equal. */
mesh_status_t mesh_api_open_blocks(mesh_comm_t *comm, const char *fn, void *stream,
                                   mesh_dtype_t dtype, int v, const size_t *counts, size_t fill,
                                   size_t **blocks, int *uniform)
{
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    if (v)
        CHECK_ARG(counts != NULL, "%s: recvcounts is NULL", fn);
    else
        MESH_CHECK(
            mesh_api_check_count(comm, fn, fill, mesh_dtype_size(dtype), (size_t)comm->size));
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 2, blocks));
    *uniform = 1;
    for (int i = 0; i < comm->size; i++) {
        (*blocks)[i] = counts ? counts[i] : fill;
        *uniform &= (*blocks)[i] == (*blocks)[0];
    }
    return MESH_OK;
}
