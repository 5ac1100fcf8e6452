/* Reduction operators, memory, registration, windows, and the host side of the device API. */
#include "nccl/nccl_priv.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum,
         (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
          ncclComm_t comm))
{
    static const char fn[] = "ncclRedOpCreatePreMulSum";
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess)
        return res;
    mesh_dtype_t dt;
    if (op == NULL || scalar == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "%s: %s is NULL", fn,
                         op == NULL ? "op" : "scalar");
    if (!nccl_dtype(datatype, &dt))
        return nccl_fail(comm, ncclInvalidArgument, "%s: invalid datatype %d", fn, (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return nccl_fail(comm, ncclInvalidArgument, "%s: invalid residence %d", fn, (int)residence);
    /* The scalar is read here, once: a scalar in device memory is copied to the host first
     * (NCCL reads it when the operation runs; clients write it before creating the op). */
    uint64_t host_scalar = 0;
    mesh_memtype_t where = MESH_MEMTYPE_HOST;
    mesh_status_t st = MESH_OK;
    if (mesh_device_table() != NULL && mesh_mem_type(scalar, &where) == MESH_OK &&
        where == MESH_MEMTYPE_DEVICE) {
        st = mesh_memcpy_async(&host_scalar, scalar, mesh_dtype_size(dt), NULL);
        if (st == MESH_OK)
            st = mesh_stream_synchronize(NULL);
        if (st != MESH_OK)
            return nccl_from_mesh(comm, st);
        scalar = &host_scalar;
    }
    mesh_op_t mop;
    st = mesh_op_create_premul(comm->mc, scalar, dt, &mop);
    if (st != MESH_OK)
        return nccl_from_mesh(comm, st);
    int i = (int)mop - MESH_OP_USER_BASE;
    if (i < 0 || i >= 32) {
        mesh_op_destroy(comm->mc, mop);
        return nccl_fail(comm, ncclInternalError, "%s: no room for another operation", fn);
    }
    comm->premul_live |= 1u << i;
    comm->premul_dtype[i] = datatype;
    *op = (ncclRedOp_t)(ncclNumOps + i);
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))
{
    static const char fn[] = "ncclRedOpDestroy";
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess)
        return res;
    if ((int)op < ncclNumOps)
        return nccl_fail(comm, ncclInvalidArgument, "%s: op %d is a built-in operation", fn,
                         (int)op);
    int i = (int)op - ncclNumOps;
    if (i >= 32 || !(comm->premul_live & (1u << i)))
        return nccl_fail(comm, ncclInvalidArgument,
                         "%s: op %d is not a live "
                         "ncclRedOpCreatePreMulSum operation of this communicator",
                         fn, (int)op);
    mesh_status_t st = mesh_op_destroy(comm->mc, (mesh_op_t)(MESH_OP_USER_BASE + i));
    if (st != MESH_OK)
        return nccl_from_mesh(comm, st);
    comm->premul_live &= ~(1u << i);
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size))
{
    if (ptr == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    void *p = NULL;
    /* memory of the current device where a device table is active, as NCCL's */
    if (mesh_device_table() != NULL) {
        mesh_status_t st = mesh_mem_alloc(MESH_MEMTYPE_DEVICE, size ? size : 1, &p);
        if (st != MESH_OK)
            return nccl_from_mesh(NULL, st);
        *ptr = p;
        return ncclSuccess;
    }
    /* else host memory, aligned so that it also suits window registration */
    if (posix_memalign(&p, NCCL_WIN_REQUIRED_ALIGNMENT, size ? size : 1) != 0)
        return nccl_fail(NULL, ncclSystemError, "ncclMemAlloc: cannot allocate %zu bytes", size);
    *ptr = p;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, (void *ptr))
{
    mesh_mem_free(ptr); /* host memory (from posix_memalign) or the device table's */
    return ncclSuccess;
}

/* Registrations and windows are bookkeeping only: host transports need no pinning. */
typedef struct {
    uint32_t magic;
    ncclComm_t comm;
    void *buf;
    size_t size;
} nccl_reg_t;
#define NCCL_REG_MAGIC 0x72656769u /* "regi" */

static ncclResult_t reg_new(ncclComm_t comm, void *buf, size_t size, const char *fn, void **out)
{
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess)
        return res;
    if (out == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "%s: handle is NULL", fn);
    if (buf == NULL && size > 0)
        return nccl_fail(comm, ncclInvalidArgument, "%s: buff is NULL with size %zu", fn, size);
    nccl_reg_t *r = malloc(sizeof(*r));
    if (r == NULL)
        return nccl_fail(comm, ncclSystemError, "%s: out of memory", fn);
    *r = (nccl_reg_t){.magic = NCCL_REG_MAGIC, .comm = comm, .buf = buf, .size = size};
    *out = r;
    return ncclSuccess;
}

static ncclResult_t reg_free(ncclComm_t comm, void *handle, const char *fn)
{
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess)
        return res;
    nccl_reg_t *r = handle;
    if (r == NULL || r->magic != NCCL_REG_MAGIC || r->comm != comm)
        return nccl_fail(comm, ncclInvalidArgument, "%s: handle was not registered on comm", fn);
    r->magic = 0;
    free(r);
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRegister,
         (const ncclComm_t comm, void *buff, size_t size, void **handle))
{
    return reg_new(comm, buff, size, "ncclCommRegister", handle);
}

NCCL_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle))
{
    return reg_free(comm, handle, "ncclCommDeregister");
}

NCCL_API(ncclResult_t, ncclCommWindowRegister,
         (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags))
{
    static const char fn[] = "ncclCommWindowRegister";
    if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
        return nccl_fail(comm, ncclInvalidArgument, "%s: unknown winFlags 0x%x", fn, winFlags);
    return reg_new(comm, buff, size, fn, (void **)win);
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))
{
    return reg_free(comm, win, "ncclCommWindowDeregister");
}

/* ---------------------------------------------------------------- device API
 * mesh has no device-side communication API: the entry points that create device resources
 * refuse, while the team queries, pure arithmetic on the rank layout, answer. */

static ncclResult_t no_device_api(ncclComm_t comm, const char *fn)
{
    nccl_report_unserved(fn);
    return nccl_fail(comm && comm->magic == NCCL_COMM_MAGIC ? comm : NULL, ncclInvalidUsage,
                     "%s: the NCCL device API is not available in mesh", fn);
}

NCCL_API(ncclResult_t, ncclDevCommCreate,
         (ncclComm_t comm, const ncclDevCommRequirements_t *reqs, ncclDevComm_t *outDevComm))
{
    return no_device_api(comm, "ncclDevCommCreate");
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const ncclDevComm_t *devComm))
{
    return no_device_api(comm, "ncclDevCommDestroy");
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement,
         (ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t *outHandle,
          ncclDevResourceRequirements_t *outReq))
{
    return no_device_api(NULL, "ncclLsaBarrierCreateRequirement");
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement,
         (ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t *outHandle,
          ncclDevResourceRequirements_t *outReq))
{
    return no_device_api(comm, "ncclGinBarrierCreateRequirement");
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement,
         (int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
          ncclDevResourceRequirements_t *outReq))
{
    return no_device_api(NULL, "ncclLLA2ACreateRequirement");
}

NCCL_API(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize))
{
    /* one 16-byte line carries 8 payload bytes next to its flags */
    if (maxElts <= 0 || maxEltSize <= 0)
        return 0;
    return maxElts * ((maxEltSize + 7) / 8);
}

/* The load/store-accessible team is this rank's node when the node's ranks are contiguous,
 * else this rank alone. */
static ncclTeam_t lsa_team(ncclComm_t comm)
{
    ncclTeam_t t = {1, 0, 1};
    if (comm == NULL || comm->magic != NCCL_COMM_MAGIC || comm->mc == NULL)
        return t;
    mesh_comm_h mc = comm->mc;
    int node = mesh_comm_node(mc, comm->rank), size = mesh_comm_local_size(mc, node);
    int local = mesh_comm_local_rank(mc, comm->rank), first = comm->rank - local;
    for (int i = 0; i < size; i++)
        if (first + i >= comm->nranks || mesh_comm_node(mc, first + i) != node)
            return t;
    return (ncclTeam_t){size, local, 1};
}

NCCL_API(ncclTeam_t, ncclTeamWorld, (ncclComm_t comm))
{
    ncclTeam_t t = {1, 0, 1};
    if (comm != NULL && comm->magic == NCCL_COMM_MAGIC)
        t = (ncclTeam_t){comm->nranks, comm->rank, 1};
    return t;
}

NCCL_API(ncclTeam_t, ncclTeamLsa, (ncclComm_t comm))
{
    return lsa_team(comm);
}

NCCL_API(ncclTeam_t, ncclTeamRail, (ncclComm_t comm))
{
    /* ranks with the same position in every node: the outer factor of the lsa team */
    ncclTeam_t lsa = lsa_team(comm);
    int n = comm != NULL && comm->magic == NCCL_COMM_MAGIC ? comm->nranks : 1;
    return (ncclTeam_t){n / lsa.nRanks, (comm ? comm->rank : 0) / lsa.nRanks, lsa.nRanks};
}

NCCL_API(int, ncclTeamRankToWorld, (ncclComm_t comm, ncclTeam_t team, int rank))
{
    int me = comm != NULL && comm->magic == NCCL_COMM_MAGIC ? comm->rank : 0;
    return me + (rank - team.rank) * team.stride;
}

NCCL_API(int, ncclTeamRankToLsa, (ncclComm_t comm, ncclTeam_t team, int rank))
{
    ncclTeam_t lsa = lsa_team(comm);
    int me = comm != NULL && comm->magic == NCCL_COMM_MAGIC ? comm->rank : 0;
    int world = me + (rank - team.rank) * team.stride;
    return world - (me - lsa.rank);
}
