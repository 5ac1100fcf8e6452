/* Argument checks shared by the public entry points; each names the argument it refuses. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include <stdlib.h>

mesh_status_t mesh_api_check_handle(const mesh_comm_t *comm, const char *fn)
{
    if (comm == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (comm->magic == MESH_COMM_MAGIC)
        return MESH_OK;
    if (comm->magic == 0 && comm->released)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm was destroyed (mesh_comm_destroy)", fn);
    return mesh_error(MESH_ERR_INVALID_ARG,
                      "%s: comm is not a communicator (destroyed, or not a "
                      "mesh_comm_h)",
                      fn);
}

/* Common checks of every call; fn names the API function in messages. */
mesh_status_t mesh_api_check_comm_slow(mesh_comm_t *comm, const char *fn, void *stream)
{
    MESH_CHECK(mesh_api_check_handle(comm, fn));
    if (atomic_load(&comm->aborted))
        return mesh_comm_fail(comm,
                              mesh_error(MESH_ERR_ABORTED, "%s: communicator was aborted", fn));
    if (comm->failed < 0)
        return mesh_comm_fail(comm,
                              mesh_error(comm->failed,
                                         "%s: the communicator failed earlier (%s: %s); "
                                         "abort and destroy it",
                                         fn, mesh_status_string(comm->failed), comm->failure));
    if (stream != NULL && mesh_mem_host_only())
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_INVALID_ARG,
                                               "%s: stream must be NULL for host buffers (no "
                                               "device table is active)",
                                               fn));
    return MESH_OK;
}

mesh_status_t mesh_api_check_dtype_slow(mesh_comm_t *comm, const char *fn, mesh_dtype_t dtype)
{
    CHECK_ARG(mesh_dtype_valid(dtype), "%s: dtype %d is not a mesh_dtype_t", fn, (int)dtype);
    return MESH_OK;
}

mesh_status_t mesh_api_check_op_slow(mesh_comm_t *comm, const char *fn, mesh_op_t op,
                                     mesh_dtype_t dtype, mesh_op_t *base, const void **scalar)
{
    *scalar = NULL;
    if ((unsigned)op < MESH_OP_COUNT) {
        /* the caller's operation is named by the call's signature: ranks must agree on it */
        /* AVG reduces as a sum; the division happens once, at completion */
        *base = op == MESH_AVG ? MESH_SUM : op;
        return MESH_OK;
    }
    int idx = (int)op - MESH_OP_USER_BASE;
    CHECK_ARG(idx >= 0 && idx < MESH_COMM_MAX_PREMUL && comm->premul[idx].used,
              "%s: op %d is neither a mesh_op_t nor a live pre-multiplied sum of this "
              "communicator",
              fn, (int)op);
    CHECK_ARG(comm->premul[idx].dtype == dtype,
              "%s: op %d was created for dtype %s, the call uses %s", fn, (int)op,
              mesh_dtype_name(comm->premul[idx].dtype), mesh_dtype_name(dtype));
    *base = MESH_SUM;
    *scalar = comm->premul[idx].scalar;
    return MESH_OK;
}

mesh_status_t mesh_api_check_buf_slow(mesh_comm_t *comm, const char *fn, const char *name,
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

mesh_status_t mesh_api_check_count_slow(mesh_comm_t *comm, const char *fn, size_t count,
                                        size_t dsize, size_t mult)
{
    if (mult == 0)
        mult = 1;
    size_t bytes;
    int over =
        __builtin_mul_overflow(count, dsize, &bytes) || __builtin_mul_overflow(bytes, mult, &bytes);
    CHECK_ARG(!over && bytes <= MESH_API_MAX_BYTES,
              "%s: count %zu is too large: %s%zu elements of %zu bytes exceed the largest buffer "
              "mesh accepts (%zu bytes)",
              fn, count, mult > 1 ? "the ranks' " : "", mult > 1 ? count : count, dsize,
              (size_t)MESH_API_MAX_BYTES);
    return MESH_OK;
}

mesh_status_t mesh_api_check_overlap_slow(mesh_comm_t *comm, const char *fn, const void *a,
                                          size_t alen, const void *b, size_t blen, int in_place)
{
    if (in_place || a == NULL || b == NULL || alen == 0 || blen == 0)
        return MESH_OK;
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
        return mesh_comm_fail(comm,
                              mesh_error(MESH_ERR_NO_MEMORY, "%s: cannot allocate counts", fn));
    *out = p;
    return MESH_OK;
}

mesh_status_t mesh_api_layout(mesh_comm_t *comm, const char *fn, const char *cname,
                              const char *dname, const size_t *counts, size_t fill,
                              const size_t *displs, size_t dsize, int written, size_t *out,
                              size_t *total, size_t *extent, int *uniform)
{
    int n = comm->size;
    size_t limit = MESH_API_MAX_BYTES / (dsize ? dsize : 1), sum = 0, end = 0;
    int packed = 1;
    if (counts == NULL && displs == NULL && fill <= limit / (size_t)n) {
        /* the uniform forms, on every call: blocks of fill elements back to back */
        for (int i = 0; i < n; i++) {
            out[i] = fill;
            out[n + i] = sum;
            sum += fill;
        }
        *total = *extent = sum;
        if (uniform)
            *uniform = 1;
        return MESH_OK;
    }
    for (int i = 0; i < n; i++) {
        size_t c = counts ? counts[i] : fill;
        CHECK_ARG(c <= limit,
                  "%s: %s[%d] = %zu exceeds the largest buffer mesh accepts (%zu "
                  "bytes)",
                  fn, cname, i, c, (size_t)MESH_API_MAX_BYTES);
        size_t d = displs ? displs[i] : sum;
        CHECK_ARG(d <= limit - c,
                  "%s: %s[%d] = %zu plus %s[%d] = %zu lies beyond the largest "
                  "buffer mesh accepts (%zu bytes)",
                  fn, dname ? dname : "the blocks before it", i, d, cname, i, c,
                  (size_t)MESH_API_MAX_BYTES);
        CHECK_ARG(sum <= limit - c,
                  "%s: %s sum to more than the largest buffer mesh accepts "
                  "(%zu bytes)",
                  fn, cname, (size_t)MESH_API_MAX_BYTES);
        packed &= d == sum && c == (counts ? counts[0] : fill);
        out[i] = c;
        out[n + i] = d;
        sum += c;
        if (d + c > end)
            end = d + c;
    }
    *total = sum;
    *extent = end;
    if (uniform)
        *uniform = packed;
    if (!written || displs == NULL || n < 2)
        return MESH_OK;
    /* blocks that are written must not overlap each other: sort their starts */
    int *order = malloc(sizeof(int) * (size_t)n);
    if (order == NULL)
        return mesh_comm_fail(comm,
                              mesh_error(MESH_ERR_NO_MEMORY, "%s: cannot check %s", fn, dname));
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (out[i] == 0)
            continue;
        int j = m++;
        while (j > 0 && out[n + order[j - 1]] > out[n + i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int k = 1; k < m; k++) {
        int a = order[k - 1], b = order[k];
        if (out[n + a] + out[a] > out[n + b]) {
            free(order);
            CHECK_ARG(0,
                      "%s: the blocks of ranks %d and %d overlap in the receive buffer "
                      "(%s[%d] = %zu, %s[%d] = %zu, %s[%d] = %zu)",
                      fn, a, b, dname, a, out[n + a], cname, a, out[a], dname, b, out[n + b]);
        }
    }
    free(order);
    return MESH_OK;
}
