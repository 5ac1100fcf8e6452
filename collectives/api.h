/* Shared argument checks and the launch path of the public entry points. Each check records
 * the message on the communicator and returns MESH_ERR_INVALID_ARG naming the argument. */
#ifndef MESH_COLL_API_H
#define MESH_COLL_API_H

#include "collectives/algo.h"
#include "collectives/signature.h"
#include "libmesh/mem.h"

#define CHECK_ARG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return mesh_comm_fail(comm, mesh_error(MESH_ERR_INVALID_ARG, __VA_ARGS__));            \
    } while (0)

/* The checks of every call pass inline, in a few instructions; anything else goes to the
 * out-of-line form (_slow), which checks in full and refuses naming the argument. */
/* A live communicator's handle (not NULL, destroyed or foreign: MESH_COMM_MAGIC). */
mesh_status_t mesh_api_check_handle(const mesh_comm_t *comm, const char *fn);
mesh_status_t mesh_api_check_comm_slow(mesh_comm_t *comm, const char *fn, void *stream);
mesh_status_t mesh_api_check_dtype_slow(mesh_comm_t *comm, const char *fn, mesh_dtype_t dtype);
mesh_status_t mesh_api_check_op_slow(mesh_comm_t *comm, const char *fn, mesh_op_t op,
                                     mesh_dtype_t dtype, mesh_op_t *base, const void **scalar);
mesh_status_t mesh_api_check_buf_slow(mesh_comm_t *comm, const char *fn, const char *name,
                                      const void *buf, size_t count);
mesh_status_t mesh_api_check_root(mesh_comm_t *comm, const char *fn, int root);
mesh_status_t mesh_api_check_count_slow(mesh_comm_t *comm, const char *fn, size_t count,
                                        size_t dsize, size_t mult);
mesh_status_t mesh_api_check_overlap_slow(mesh_comm_t *comm, const char *fn, const void *a,
                                          size_t alen, const void *b, size_t blen, int in_place);

/* The largest buffer mesh accepts, in bytes: beyond any machine's memory and address space, so
 * that every sum of counts, displacements and offsets below it is exact. */
#define MESH_API_MAX_BYTES ((size_t)1 << 48)

/* A live, healthy communicator, and no stream where no device table is active (host buffers;
 * with a table, mesh_api_check_mem judges the stream with the buffers). */
static inline mesh_status_t mesh_api_check_comm(mesh_comm_t *comm, const char *fn, void *stream)
{
    if (comm != NULL && comm->magic == MESH_COMM_MAGIC &&
        (stream == NULL || !mesh_mem_host_only()) && comm->failed >= 0 &&
        !atomic_load_explicit(&comm->aborted, memory_order_relaxed))
        return MESH_OK;
    return mesh_api_check_comm_slow(comm, fn, stream);
}

static inline mesh_status_t mesh_api_check_dtype(mesh_comm_t *comm, const char *fn,
                                                 mesh_dtype_t dtype)
{
    return (unsigned)dtype < MESH_DTYPE_COUNT ? MESH_OK
                                              : mesh_api_check_dtype_slow(comm, fn, dtype);
}

/* Resolves op into a base op plus pre-multiplication scalar (NULL if none). AVG reduces as a
 * sum; the division happens once, at completion. */
static inline mesh_status_t mesh_api_check_op(mesh_comm_t *comm, const char *fn, mesh_op_t op,
                                              mesh_dtype_t dtype, mesh_op_t *base,
                                              const void **scalar)
{
    if ((unsigned)op >= MESH_OP_COUNT)
        return mesh_api_check_op_slow(comm, fn, op, dtype, base, scalar);
    *scalar = NULL;
    *base = op == MESH_AVG ? MESH_SUM : op;
    return MESH_OK;
}

static inline mesh_status_t mesh_api_check_buf(mesh_comm_t *comm, const char *fn, const char *name,
                                               const void *buf, size_t count)
{
    return buf != NULL || count == 0 ? MESH_OK
                                     : mesh_api_check_buf_slow(comm, fn, name, buf, count);
}

/* count elements of dsize bytes, mult times (the ranks' blocks), within MESH_API_MAX_BYTES:
 * multiplied, not divided, since this runs on every call. */
static inline mesh_status_t mesh_api_check_count(mesh_comm_t *comm, const char *fn, size_t count,
                                                 size_t dsize, size_t mult)
{
    size_t bytes;
    if (!__builtin_mul_overflow(count, dsize, &bytes) &&
        !__builtin_mul_overflow(bytes, mult ? mult : 1, &bytes) && bytes <= MESH_API_MAX_BYTES)
        return MESH_OK;
    return mesh_api_check_count_slow(comm, fn, count, dsize, mult);
}

/* Two buffers of the given byte lengths either coincide where the caller said in place, or
 * do not overlap at all. */
static inline mesh_status_t mesh_api_check_overlap(mesh_comm_t *comm, const char *fn, const void *a,
                                                   size_t alen, const void *b, size_t blen,
                                                   int in_place)
{
    if (in_place || a == NULL || b == NULL || alen == 0 || blen == 0 ||
        (const char *)a + alen <= (const char *)b || (const char *)b + blen <= (const char *)a)
        return MESH_OK;
    return mesh_api_check_overlap_slow(comm, fn, a, alen, b, blen, in_place);
}

/* The memory of a call's buffers (sname: sbuf, rname: rbuf; NULL buffers take no part): all
 * host memory, with no stream (args->mem NULL); or all memory that one active device table owns
 * (device memory of the rank's current device, or host memory pinned for it), ordered on stream
 * (args->mem, device and stream set). A mix, another device, a table that is not active, or
 * device buffers on a communicator that spans nodes are refused naming the argument. Where no
 * table is active and there is no stream, one load decides. */
mesh_status_t mesh_api_check_mem_slow(mesh_comm_t *comm, const char *fn, void *stream,
                                      const char *sname, const void *sbuf, const char *rname,
                                      const void *rbuf, mesh_coll_args_t *args);
static inline mesh_status_t mesh_api_check_mem(mesh_comm_t *comm, const char *fn, void *stream,
                                               const char *sname, const void *sbuf,
                                               const char *rname, const void *rbuf,
                                               mesh_coll_args_t *args)
{
    if (stream == NULL && mesh_mem_host_only())
        return MESH_OK;
    return mesh_api_check_mem_slow(comm, fn, stream, sname, sbuf, rname, rbuf, args);
}

/* size * arrays size_t values (counts, displs, ...), freed with the request. */
mesh_status_t mesh_api_alloc_blocks(mesh_comm_t *comm, const char *fn, int arrays, size_t **out);
/* The signature's code of a reduction the caller named (a valid op, checked before). */
static inline int mesh_api_opcode(mesh_op_t op)
{
    return (unsigned)op < MESH_OP_COUNT ? 1 + (int)op : MESH_SIG_OP_PREMUL;
}

/* The one validation path of block layouts (all-gather(v), reduce-scatter(v), all-to-all(v)):
 * block i holds counts[i] elements (fill for every rank when counts is NULL) at displs[i] (back
 * to back when displs is NULL) of a buffer. Every count, displacement, their sum, the total and
 * the extent are checked against MESH_API_MAX_BYTES without overflow, naming the argument and
 * the rank (cname, dname: the caller's names of the arrays); blocks that are written (the
 * receive side) must not overlap each other. Writes counts to out[0..size) and displacements to
 * out[size..2 size); *total and *extent in elements; *uniform (may be NULL): equal counts back to
 * back. */
mesh_status_t mesh_api_layout(mesh_comm_t *comm, const char *fn, const char *cname,
                              const char *dname, const size_t *counts, size_t fill,
                              const size_t *displs, size_t dsize, int written, size_t *out,
                              size_t *total, size_t *extent, int *uniform);
/* Pre-multiplies (scalar != NULL) in_count input elements, selects, builds and launches; divides
 * avg_count elements of avg_buf by the size at completion (MESH_AVG); owned0 is freed with the
 * request (or on error). */
/* mesh_api_launch_on on buffers the schedule reads and writes as they are (host memory, or
 * staging): dev (NULL for a host call) is the device operation they stage, owned from here on.
 * Device calls (args->mem set) go through mesh_dev_launch, which stages them first. */
struct mesh_dev_op;
mesh_status_t mesh_api_launch_on(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                                 size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                                 struct mesh_dev_op *dev, mesh_request_h *req);
mesh_status_t mesh_dev_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                              size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                              mesh_request_h *req);
/* One call built on host buffers (staging), with the communicator locked by the caller: takes
 * the next sequence number, selects and builds; the schedule is not started and not kept for
 * replay. How the device pipeline (collectives/device/dev_pipe.c) makes a call of each chunk.
 * look: the call may look for messages earlier calls left behind (mesh_comm_start_call), which
 * only the first of calls built together, none of them started, may do. */
mesh_status_t mesh_api_build_locked(mesh_comm_t *comm, mesh_coll_args_t *args, void *avg_buf,
                                    size_t avg_count, int look, mesh_sched_t **out);
static inline mesh_status_t mesh_api_launch(mesh_comm_t *comm, mesh_coll_args_t *args,
                                            const void *scalar, size_t in_count, void *avg_buf,
                                            size_t avg_count, void *owned0, mesh_request_h *req)
{
    if (__builtin_expect(args->mem != NULL, 0))
        return mesh_dev_launch(comm, args, scalar, in_count, avg_buf, avg_count, owned0, req);
    return mesh_api_launch_on(comm, args, scalar, in_count, avg_buf, avg_count, owned0, NULL, req);
}

#endif
