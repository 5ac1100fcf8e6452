/*
 * Collectives, point-to-point and groups. Outside a group each call runs to completion on the
 * calling thread (host buffers). Inside ncclGroupStart/End the calls are recorded and issued
 * together in one mesh group at ncclGroupEnd, so that send/recv pairs and operations on several
 * communicators driven by one thread cannot deadlock.
 */
#include "nccl/nccl_priv.h"
#include <stdlib.h>
#include <string.h>

typedef enum {
    OP_ALLREDUCE,
    OP_REDUCE,
    OP_BROADCAST,
    OP_REDUCE_SCATTER,
    OP_ALLGATHER,
    OP_ALLTOALL,
    OP_GATHER,
    OP_SCATTER,
    OP_SEND,
    OP_RECV
} op_kind_t;

typedef struct {
    op_kind_t kind;
    ncclComm_t comm;
    const void *sbuf;
    void *rbuf;
    size_t count;
    mesh_dtype_t dtype;
    size_t dsize;
    mesh_op_t op;
    int root; /* root, or peer of send/recv */
    void *stream;
} op_rec_t;

/* Group state is per thread, as in NCCL. The record array is kept between groups. */
static __thread int group_depth;
static __thread op_rec_t *group_ops;
static __thread int group_nops, group_cap;
static __thread ncclComm_t *group_inits;
static __thread int group_ninits, group_cap_inits;

int nccl_group_depth(void)
{
    return group_depth;
}

void nccl_group_add_init(ncclComm_t comm)
{
    if (group_ninits == group_cap_inits) {
        int cap = group_cap_inits ? 2 * group_cap_inits : 8;
        ncclComm_t *p = realloc(group_inits, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            nccl_init_join(comm); /* cannot defer it: finish it now */
            return;
        }
        group_inits = p;
        group_cap_inits = cap;
    }
    group_inits[group_ninits++] = comm;
}

static const mesh_dtype_t dtype_map[ncclNumTypes] = {
    [ncclInt8] = MESH_INT8,     [ncclUint8] = MESH_UINT8,         [ncclInt32] = MESH_INT32,
    [ncclUint32] = MESH_UINT32, [ncclInt64] = MESH_INT64,         [ncclUint64] = MESH_UINT64,
    [ncclFloat16] = MESH_FP16,  [ncclFloat32] = MESH_FP32,        [ncclFloat64] = MESH_FP64,
    [ncclBfloat16] = MESH_BF16, [ncclFloat8e4m3] = MESH_FP8_E4M3, [ncclFloat8e5m2] = MESH_FP8_E5M2,
};

int nccl_dtype(ncclDataType_t t, mesh_dtype_t *out)
{
    if ((unsigned)t >= ncclNumTypes)
        return 0;
    *out = dtype_map[t];
    return 1;
}

ncclResult_t nccl_op(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t t, mesh_op_t *out,
                     const char *fn)
{
    static const mesh_op_t base[ncclNumOps] = {
        [ncclSum] = MESH_SUM, [ncclProd] = MESH_PROD, [ncclMax] = MESH_MAX,
        [ncclMin] = MESH_MIN, [ncclAvg] = MESH_AVG,
    };
    if ((int)op >= 0 && (int)op < ncclNumOps) {
        *out = base[op];
        return ncclSuccess;
    }
    /* pre-multiplied sums live above the built-in operations, as in NCCL */
    int i = (int)op - ncclNumOps;
    if ((int)op < 0 || i >= 32 || !(comm->premul_live & (1u << i)))
        return nccl_fail(comm, ncclInvalidArgument,
                         "%s: invalid reduction operation %d: neither "
                         "a built-in one (0..%d) nor a live ncclRedOpCreatePreMulSum of this "
                         "communicator",
                         fn, (int)op, ncclNumOps - 1);
    if (comm->premul_dtype[i] != t)
        return nccl_fail(comm, ncclInvalidArgument,
                         "%s: reduction operation %d was created for "
                         "datatype %d, the call uses %d",
                         fn, (int)op, (int)comm->premul_dtype[i], (int)t);
    *out = (mesh_op_t)(MESH_OP_USER_BASE + i);
    return ncclSuccess;
}

static mesh_status_t issue(const op_rec_t *r)
{
    mesh_comm_h mc = r->comm->mc;
    switch (r->kind) {
    case OP_ALLREDUCE:
        return mesh_allreduce(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->op, r->stream, NULL);
    case OP_REDUCE:
        return mesh_reduce(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->op, r->root, r->stream,
                           NULL);
    case OP_BROADCAST:
        return mesh_broadcast(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->root, r->stream, NULL);
    case OP_REDUCE_SCATTER:
        return mesh_reduce_scatter(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->op, r->stream,
                                   NULL);
    case OP_ALLGATHER:
        return mesh_allgather(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->stream, NULL);
    case OP_ALLTOALL:
        return mesh_alltoall(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->stream, NULL);
    case OP_GATHER:
        return mesh_gather(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->root, r->stream, NULL);
    case OP_SCATTER:
        return mesh_scatter(mc, r->sbuf, r->rbuf, r->count, r->dtype, r->root, r->stream, NULL);
    case OP_SEND:
        return mesh_send(mc, r->sbuf, r->count, r->dtype, r->root, r->stream, NULL);
    case OP_RECV:
        return mesh_recv(mc, r->rbuf, r->count, r->dtype, r->root, r->stream, NULL);
    }
    return MESH_ERR_INTERNAL;
}

/* Validates what NCCL checks at call time, then runs the operation or records it. */
static ncclResult_t submit(op_kind_t kind, const char *fn, ncclComm_t comm, const void *sbuf,
                           void *rbuf, size_t count, ncclDataType_t dt, int reduces, ncclRedOp_t op,
                           int root, const char *root_name, void *stream)
{
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess)
        return res;
    op_rec_t r = {.kind = kind,
                  .comm = comm,
                  .sbuf = sbuf,
                  .rbuf = rbuf,
                  .count = count,
                  .root = root,
                  .stream = stream};
    if (!nccl_dtype(dt, &r.dtype))
        return nccl_fail(comm, ncclInvalidArgument, "%s: invalid datatype %d", fn, (int)dt);
    r.dsize = mesh_dtype_size(r.dtype);
    if (reduces && (res = nccl_op(comm, op, dt, &r.op, fn)) != ncclSuccess)
        return res;
    if (root_name != NULL && (root < 0 || root >= comm->nranks))
        return nccl_fail(comm, ncclInvalidArgument, "%s: %s %d is outside 0..%d", fn, root_name,
                         root, comm->nranks - 1);
    if (group_depth > 0) {
        if (group_nops == group_cap) {
            int cap = group_cap ? 2 * group_cap : 16;
            op_rec_t *p = realloc(group_ops, (size_t)cap * sizeof(*p));
            if (p == NULL)
                return nccl_fail(comm, ncclSystemError,
                                 "%s: cannot grow the group to %d "
                                 "operations",
                                 fn, cap);
            group_ops = p;
            group_cap = cap;
        }
        group_ops[group_nops++] = r;
        return ncclSuccess;
    }
    atomic_fetch_add(&comm->busy, 1);
    mesh_status_t st = issue(&r);
    res = st == MESH_OK ? ncclSuccess : nccl_from_mesh(comm, st);
    atomic_fetch_sub(&comm->busy, 1); /* last touch: an abort may free comm from here on */
    return res;
}

NCCL_API(ncclResult_t, ncclAllReduce,
         (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, ncclStream_t stream))
{
    return submit(OP_ALLREDUCE, "ncclAllReduce", comm, sendbuff, recvbuff, count, datatype, 1, op,
                  0, NULL, stream);
}

NCCL_API(ncclResult_t, ncclReduce,
         (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, ncclStream_t stream))
{
    return submit(OP_REDUCE, "ncclReduce", comm, sendbuff, recvbuff, count, datatype, 1, op, root,
                  "root", stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, NCCL_ABI_ROOTED_PARAMS)
{
    return submit(OP_BROADCAST, "ncclBroadcast", comm, sendbuff, recvbuff, count, datatype, 0, 0,
                  root, "root", stream);
}

NCCL_API(ncclResult_t, ncclBcast,
         (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          ncclStream_t stream))
{
    return submit(OP_BROADCAST, "ncclBcast", comm, buff, buff, count, datatype, 0, 0, root, "root",
                  stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter,
         (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, ncclStream_t stream))
{
    return submit(OP_REDUCE_SCATTER, "ncclReduceScatter", comm, sendbuff, recvbuff, recvcount,
                  datatype, 1, op, 0, NULL, stream);
}

NCCL_API(ncclResult_t, ncclAllGather,
         (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
          ncclComm_t comm, ncclStream_t stream))
{
    return submit(OP_ALLGATHER, "ncclAllGather", comm, sendbuff, recvbuff, sendcount, datatype, 0,
                  0, 0, NULL, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll,
         (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclComm_t comm, ncclStream_t stream))
{
    return submit(OP_ALLTOALL, "ncclAlltoAll", comm, sendbuff, recvbuff, count, datatype, 0, 0, 0,
                  NULL, stream);
}

NCCL_API(ncclResult_t, ncclGather, NCCL_ABI_ROOTED_PARAMS)
{
    return submit(OP_GATHER, "ncclGather", comm, sendbuff, recvbuff, count, datatype, 0, 0, root,
                  "root", stream);
}

NCCL_API(ncclResult_t, ncclScatter, NCCL_ABI_ROOTED_PARAMS)
{
    return submit(OP_SCATTER, "ncclScatter", comm, sendbuff, recvbuff, count, datatype, 0, 0, root,
                  "root", stream);
}

NCCL_API(ncclResult_t, ncclSend,
         (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          ncclStream_t stream))
{
    return submit(OP_SEND, "ncclSend", comm, sendbuff, NULL, count, datatype, 0, 0, peer, "peer",
                  stream);
}

NCCL_API(ncclResult_t, ncclRecv,
         (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          ncclStream_t stream))
{
    return submit(OP_RECV, "ncclRecv", comm, NULL, recvbuff, count, datatype, 0, 0, peer, "peer",
                  stream);
}

NCCL_API(ncclResult_t, ncclGroupStart, (void))
{
    group_depth++;
    return ncclSuccess;
}

/* Waits for the creations started in the group; returns the first failure. */
static ncclResult_t join_inits(void)
{
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < group_ninits; i++) {
        ncclComm_t c = group_inits[i];
        if (c->blocking) {
            ncclResult_t r = nccl_init_join(c);
            if (r != ncclSuccess && res == ncclSuccess)
                res = r;
        }
    }
    group_ninits = 0;
    return res;
}

static ncclResult_t run_group(void)
{
    int n = group_nops;
    if (n == 0)
        return ncclSuccess;
    for (int i = 0; i < n; i++)
        atomic_fetch_add(&group_ops[i].comm->busy, 1);
    mesh_status_t first = MESH_OK, st;
    ncclComm_t culprit = group_ops[0].comm;
    mesh_group_start();
    for (int i = 0; i < n; i++) {
        st = issue(&group_ops[i]);
        if (st < 0 && first == MESH_OK) {
            first = st;
            culprit = group_ops[i].comm;
        }
    }
    st = mesh_group_end();
    if (first == MESH_OK)
        first = st;
    ncclResult_t res = first == MESH_OK ? ncclSuccess : nccl_from_mesh(culprit, first);
    group_nops = 0;
    for (int i = 0; i < n; i++)
        atomic_fetch_sub(&group_ops[i].comm->busy, 1);
    return res;
}

NCCL_API(ncclResult_t, ncclGroupEnd, (void))
{
    if (group_depth == 0)
        return nccl_fail(NULL, ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart");
    if (--group_depth > 0)
        return ncclSuccess;
    ncclResult_t res = join_inits();
    ncclResult_t ops = run_group();
    return res != ncclSuccess ? res : ops;
}

/* Rough cost of one operation on host memory: a latency per step plus bytes over a copy
 * bandwidth, scaled by how much data each rank moves (the nccl-tests bus factors). */
static double estimate_us(const op_rec_t *r)
{
    double n = r->comm->nranks, bytes = (double)r->count * (double)r->dsize;
    double steps = n > 1 ? n - 1 : 0, factor = 1;
    switch (r->kind) {
    case OP_ALLREDUCE:
        factor = n > 1 ? 2 * (n - 1) / n : 0;
        steps *= 2;
        break;
    case OP_REDUCE_SCATTER:
    case OP_ALLGATHER:
    case OP_ALLTOALL:
    case OP_GATHER:
    case OP_SCATTER:
        factor = n > 1 ? n - 1 : 0;
        break;
    case OP_SEND:
    case OP_RECV:
        steps = 1;
        break;
    default:
        break;
    }
    return steps * 5.0 + bytes * factor / 5000.0; /* 5 us per step, 5 GB/s */
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))
{
    static const char fn[] = "ncclGroupSimulateEnd";
    if (group_depth == 0)
        return nccl_fail(NULL, ncclInvalidUsage, "%s: no matching ncclGroupStart", fn);
    if (simInfo == NULL || simInfo->magic != NCCL_SIM_INFO_MAGIC ||
        simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: simInfo was not set up with "
                         "NCCL_SIM_INFO_INITIALIZER",
                         fn);
    if (--group_depth > 0)
        return ncclSuccess;
    ncclResult_t res = join_inits();
    /* the operations are estimated, not run: each communicator is used by one at a time */
    double total = 0;
    for (int i = 0; i < group_nops; i++)
        total += estimate_us(&group_ops[i]);
    group_nops = 0;
    simInfo->estimatedTime = (float)total;
    return res;
}
