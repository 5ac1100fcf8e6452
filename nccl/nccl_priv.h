/* Shared internals of libnccl.so.2: the communicator wrapper, result mapping, last error. */
#ifndef MESH_NCCL_PRIV_H
#define MESH_NCCL_PRIV_H

#include "nccl/nccl_abi.h"
#include <mesh.h>
#include <pthread.h>
#include <stdatomic.h>

/*
 * Defines pname (a global symbol) and name as a weak alias of it, both exported, the way
 * profilers expect to interpose on name and still reach pname.
 */
#define NCCL_EXPORT __attribute__((visibility("default")))
#define NCCL_API(ret, name, params)                                                                \
    NCCL_EXPORT ret name params __attribute__((weak, alias("p" #name)));                           \
    NCCL_EXPORT ret p##name params

#define NCCL_COMM_MAGIC 0x6e63636cu /* "nccl" */
#define NCCL_ERR_LEN    512

struct ncclComm {
    uint32_t magic;
    mesh_comm_h mc; /* NULL until creation finished (or on failure) */
    int nranks, rank;
    int blocking;
    int device;
    atomic_int state;     /* ncclInProgress while creation runs, then its result */
    atomic_int async_err; /* sticky failure seen by an operation (ncclSuccess if none) */
    atomic_int busy;      /* threads inside mesh calls on this communicator */
    atomic_int aborted;
    int revoked;
    int finalized;
    /* pre-multiplied sums created on it: NCCL's op value ncclNumOps + i is live while bit i is
     * set, for datatype premul_dtype[i] */
    uint32_t premul_live;
    ncclDataType_t premul_dtype[32];
    pthread_mutex_t lock;
    pthread_t thread; /* creation thread of a nonblocking or grouped init */
    int has_thread;
    int detached; /* aborted during creation: the creation thread frees the wrapper */
    mesh_unique_id_t id;
    char last_error[NCCL_ERR_LEN];
};

/* Records a failure message (thread and communicator) and returns res. */
ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Maps a mesh status to a result, recording mesh's message for a failure. */
ncclResult_t nccl_from_mesh(ncclComm_t comm, mesh_status_t st);
/* Checks the handle and waits for its creation to finish; fn names the caller. */
ncclResult_t nccl_comm_ready(ncclComm_t comm, const char *fn);
/* The same, but a revoked communicator passes (it may still be shrunk). */
ncclResult_t nccl_comm_ready_revoked(ncclComm_t comm, const char *fn);

int nccl_dtype(ncclDataType_t t, mesh_dtype_t *out);
ncclResult_t nccl_op(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t t, mesh_op_t *out,
                     const char *fn);

/* Thread-local group depth of the NCCL layer and the creations started inside the group. */
int nccl_group_depth(void);
void nccl_group_add_init(ncclComm_t comm);
/* Waits for the creation thread of comm; returns the creation's result. */
ncclResult_t nccl_init_join(ncclComm_t comm);
/* Creates a communicator from an id, blocking or not as config says. */
ncclResult_t nccl_init_common(ncclComm_t *out, int nranks, const mesh_unique_id_t *id, int rank,
                              const ncclConfig_t *config, const char *fn);
/* Reads a configuration (NULL allowed): blocking flag and validity. */
ncclResult_t nccl_config_read(const ncclConfig_t *config, int *blocking, const char *fn);
/* Allocates a wrapper around an existing mesh communicator. */
ncclResult_t nccl_comm_wrap(mesh_comm_h mc, int blocking, ncclComm_t *out);
void nccl_comm_free(ncclComm_t comm);

/* MESH_NCCL_REPORT: reads the knob (communicator creation does, so that the report is armed
 * before the first failure), and counts a call of an entry point mesh does not serve. */
void nccl_report_init(void);
void nccl_report_unserved(const char *fn);

/* Reads NCCL_DEBUG again. */
void nccl_debug_init(void);

/* NVIDIA's library exports this one as a plain global, without a p-alias. */
NCCL_EXPORT void ncclResetDebugInitInternal(void);

#endif
