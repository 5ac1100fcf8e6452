/*
 * The C ABI of NCCL 2.28 as libnccl.so.2 exposes it: types, enum values, struct layouts and
 * prototypes. The library is built against this header so that it needs no CUDA installation;
 * a program built against NVIDIA's nccl.h links against the result unchanged. Streams are
 * plain pointers here (cudaStream_t is a pointer too), and no CUDA type appears.
 */
#ifndef MESH_NCCL_ABI_H
#define MESH_NCCL_ABI_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_MAJOR        2
#define NCCL_MINOR        28
#define NCCL_PATCH        9
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z)                                                                      \
    (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
typedef void *ncclStream_t; /* cudaStream_t at the ABI level */

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT       INT_MIN
#define NCCL_CONFIG_UNDEF_PTR       NULL
#define NCCL_SPLIT_NOCOLOR          -1
#define NCCL_UNDEF_FLOAT            -1.0f
#define NCCL_WIN_DEFAULT            0x00
#define NCCL_WIN_COLL_SYMMETRIC     0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
#define NCCL_SHRINK_DEFAULT         0x00
#define NCCL_SHRINK_ABORT           0x01
#define NCCL_REVOKE_DEFAULT         0x00

#define NCCL_CONFIG_MAGIC   0xcafebeefu
#define NCCL_SIM_INFO_MAGIC 0x74685283u

/* Layout of the 2.28 configuration; older callers pass a shorter prefix (size says how much). */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;

typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime;
} ncclSimInfo_t;

typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclFloat32 = 7,
    ncclFloat64 = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Device-API types that appear in host entry points. */
typedef struct {
    int nRanks, rank, stride;
} ncclTeam_t;
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* The parameters of the collectives that move data to or from a root without reducing. */
#define NCCL_ABI_ROOTED_PARAMS                                                                     \
    (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,        \
     ncclComm_t comm, ncclStream_t stream)

/* X(return type, name, parameters): every host entry point, each exported as name and pname. */
#define NCCL_ABI_FUNCS(X)                                                                          \
    X(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size))                                       \
    X(ncclResult_t, ncclMemFree, (void *ptr))                                                      \
    X(ncclResult_t, ncclGetVersion, (int *version))                                                \
    X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))                                    \
    X(ncclResult_t, ncclCommInitRankConfig,                                                        \
      (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config))        \
    X(ncclResult_t, ncclCommInitRank,                                                              \
      (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))                              \
    X(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist))            \
    X(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))                                           \
    X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                            \
    X(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                                              \
    X(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))                            \
    X(ncclResult_t, ncclCommSplit,                                                                 \
      (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config))            \
    X(ncclResult_t, ncclCommShrink,                                                                \
      (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,         \
       ncclConfig_t *config, int shrinkFlags))                                                     \
    X(ncclResult_t, ncclCommInitRankScalable,                                                      \
      (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,               \
       ncclConfig_t *config))                                                                      \
    X(const char *, ncclGetErrorString, (ncclResult_t result))                                     \
    X(const char *, ncclGetLastError, (ncclComm_t comm))                                           \
    X(void, ncclResetDebugInit, (void))                                                            \
    X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * asyncError))           \
    X(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count))                            \
    X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device))                        \
    X(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank))                          \
    X(ncclResult_t, ncclCommRegister,                                                              \
      (const ncclComm_t comm, void *buff, size_t size, void **handle))                             \
    X(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle))                     \
    X(ncclResult_t, ncclCommWindowRegister,                                                        \
      (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags))                 \
    X(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))                 \
    X(ncclResult_t, ncclRedOpCreatePreMulSum,                                                      \
      (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,   \
       ncclComm_t comm))                                                                           \
    X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))                           \
    X(ncclResult_t, ncclReduce,                                                                    \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,                \
       ncclRedOp_t op, int root, ncclComm_t comm, ncclStream_t stream))                            \
    X(ncclResult_t, ncclBcast,                                                                     \
      (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,               \
       ncclStream_t stream))                                                                       \
    X(ncclResult_t, ncclBroadcast, NCCL_ABI_ROOTED_PARAMS)                                         \
    X(ncclResult_t, ncclAllReduce,                                                                 \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,                \
       ncclRedOp_t op, ncclComm_t comm, ncclStream_t stream))                                      \
    X(ncclResult_t, ncclReduceScatter,                                                             \
      (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,            \
       ncclRedOp_t op, ncclComm_t comm, ncclStream_t stream))                                      \
    X(ncclResult_t, ncclAllGather,                                                                 \
      (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,            \
       ncclComm_t comm, ncclStream_t stream))                                                      \
    X(ncclResult_t, ncclAlltoAll,                                                                  \
      (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,                \
       ncclComm_t comm, ncclStream_t stream))                                                      \
    X(ncclResult_t, ncclGather, NCCL_ABI_ROOTED_PARAMS)                                            \
    X(ncclResult_t, ncclScatter, NCCL_ABI_ROOTED_PARAMS)                                           \
    X(ncclResult_t, ncclSend,                                                                      \
      (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,     \
       ncclStream_t stream))                                                                       \
    X(ncclResult_t, ncclRecv,                                                                      \
      (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,           \
       ncclStream_t stream))                                                                       \
    X(ncclResult_t, ncclGroupStart, (void))                                                        \
    X(ncclResult_t, ncclGroupEnd, (void))                                                          \
    X(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))                               \
    X(ncclResult_t, ncclDevCommCreate,                                                             \
      (ncclComm_t comm, const ncclDevCommRequirements_t *reqs, ncclDevComm_t *outDevComm))         \
    X(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const ncclDevComm_t *devComm))           \
    X(ncclTeam_t, ncclTeamWorld, (ncclComm_t comm))                                                \
    X(ncclTeam_t, ncclTeamLsa, (ncclComm_t comm))                                                  \
    X(ncclTeam_t, ncclTeamRail, (ncclComm_t comm))                                                 \
    X(int, ncclTeamRankToWorld, (ncclComm_t comm, ncclTeam_t team, int rank))                      \
    X(int, ncclTeamRankToLsa, (ncclComm_t comm, ncclTeam_t team, int rank))                        \
    X(ncclResult_t, ncclLsaBarrierCreateRequirement,                                               \
      (ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t *outHandle,                          \
       ncclDevResourceRequirements_t *outReq))                                                     \
    X(ncclResult_t, ncclGinBarrierCreateRequirement,                                               \
      (ncclComm_t comm, ncclTeam_t team, int nBarriers, ncclGinBarrierHandle_t *outHandle,         \
       ncclDevResourceRequirements_t *outReq))                                                     \
    X(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize))                                      \
    X(ncclResult_t, ncclLLA2ACreateRequirement,                                                    \
      (int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,                                      \
       ncclDevResourceRequirements_t *outReq))

#define NCCL_ABI_DECLARE_(ret, name, params)                                                       \
    ret name params;                                                                               \
    ret p##name params;
NCCL_ABI_FUNCS(NCCL_ABI_DECLARE_)
#undef NCCL_ABI_DECLARE_

#ifdef __cplusplus
}
#endif
#endif /* MESH_NCCL_ABI_H */
