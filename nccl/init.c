/* Communicator creation, status queries and teardown. */
#include "nccl/nccl_priv.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The mesh unique id travels inside the NCCL id verbatim: both are 128 bytes. */
_Static_assert(sizeof(ncclUniqueId) == sizeof(mesh_unique_id_t), "unique id sizes differ");

NCCL_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
{
    if (uniqueId == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    mesh_unique_id_t id;
    mesh_status_t st = mesh_unique_id(&id);
    if (st != MESH_OK)
        return nccl_from_mesh(NULL, st);
    memcpy(uniqueId->internal, id.internal, sizeof(id.internal));
    return ncclSuccess;
}

/* Whether the caller's configuration reaches field (by its size) at a version that has it. */
#define CONFIG_HAS(cfg, field, since)                                                              \
    ((cfg)->size >= offsetof(ncclConfig_t, field) + sizeof((cfg)->field) &&                        \
     (cfg)->version >= (since))

ncclResult_t nccl_config_read(const ncclConfig_t *config, int *blocking, const char *fn)
{
    *blocking = 1;
    if (config == NULL)
        return ncclSuccess;
    if (config->size < offsetof(ncclConfig_t, blocking) || config->magic != NCCL_CONFIG_MAGIC)
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: config (size %zu, magic 0x%x) was not set up with "
                         "NCCL_CONFIG_INITIALIZER",
                         fn, config->size, config->magic);
    /* newer headers append fields: size bounds what is read, so any later version is fine */
    if (config->version < NCCL_VERSION(2, 14, 0))
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: config version %u is older than the "
                         "first configurable release (2.14)",
                         fn, config->version);
    if (CONFIG_HAS(config, blocking, NCCL_VERSION(2, 14, 0)) &&
        config->blocking != NCCL_CONFIG_UNDEF_INT) {
        if (config->blocking != 0 && config->blocking != 1)
            return nccl_fail(NULL, ncclInvalidArgument, "%s: config blocking %d is not 0 or 1", fn,
                             config->blocking);
        *blocking = config->blocking;
    }
    /* the remaining fields tune GPU kernels and networks mesh chooses itself */
    return ncclSuccess;
}

ncclResult_t nccl_comm_wrap(mesh_comm_h mc, int blocking, ncclComm_t *out)
{
    ncclComm_t c = calloc(1, sizeof(*c));
    if (c == NULL)
        return nccl_fail(NULL, ncclSystemError, "cannot allocate a communicator");
    c->magic = NCCL_COMM_MAGIC;
    c->mc = mc;
    c->blocking = blocking;
    c->device = -1; /* cudaCpuDeviceId until creation takes the caller's device */
    c->nranks = mc ? mesh_comm_size(mc) : 0;
    c->rank = mc ? mesh_comm_rank(mc) : -1;
    atomic_init(&c->state, mc ? ncclSuccess : ncclInProgress);
    atomic_init(&c->async_err, ncclSuccess);
    atomic_init(&c->busy, 0);
    atomic_init(&c->aborted, 0);
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return ncclSuccess;
}

void nccl_comm_free(ncclComm_t c)
{
    if (c->mc != NULL)
        mesh_comm_destroy(c->mc);
    pthread_mutex_destroy(&c->lock);
    c->magic = 0;
    free(c);
}

static void *init_thread(void *arg)
{
    ncclComm_t c = arg;
    mesh_comm_h mc = NULL;
    mesh_status_t st = mesh_comm_init_rank(&mc, c->nranks, &c->id, c->rank);
    ncclResult_t res = st == MESH_OK ? ncclSuccess : nccl_from_mesh(c, st);
    pthread_mutex_lock(&c->lock);
    c->mc = mc;
    atomic_store(&c->state, res);
    int detached = c->detached;
    pthread_mutex_unlock(&c->lock);
    if (detached)
        nccl_comm_free(c); /* aborted meanwhile: nobody else holds it */
    return NULL;
}

ncclResult_t nccl_init_join(ncclComm_t c)
{
    pthread_mutex_lock(&c->lock);
    int join = c->has_thread && !c->detached;
    c->has_thread = 0;
    pthread_mutex_unlock(&c->lock);
    if (join)
        pthread_join(c->thread, NULL);
    /* another thread may be joining it: wait for the result all the same */
    while (atomic_load(&c->state) == ncclInProgress)
        sched_yield();
    return atomic_load(&c->state);
}

ncclResult_t nccl_init_common(ncclComm_t *out, int nranks, const mesh_unique_id_t *id, int rank,
                              const ncclConfig_t *config, const char *fn)
{
    int blocking;
    if (out == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    ncclResult_t res = nccl_config_read(config, &blocking, fn);
    if (res != ncclSuccess)
        return res;
    if (nranks < 1)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: nranks %d is not positive", fn, nranks);
    if (rank < 0 || rank >= nranks)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: rank %d is outside 0..%d", fn, rank,
                         nranks - 1);
    ncclComm_t c;
    res = nccl_comm_wrap(NULL, blocking, &c);
    if (res != ncclSuccess)
        return res;
    c->nranks = nranks;
    c->rank = rank;
    c->id = *id;
    /* NCCL binds a communicator to the device current at its creation (cudaGetDevice): take it
     * on the caller's thread, since a nonblocking creation runs on another one */
    int device;
    if (mesh_device_table() != NULL && mesh_device_current(&device) == MESH_OK)
        c->device = device;
    nccl_report_init();
    int grouped = nccl_group_depth() > 0;
    if (blocking && !grouped) {
        /* the common case runs on the caller's thread */
        init_thread(c);
        res = atomic_load(&c->state);
        if (res != ncclSuccess) {
            nccl_comm_free(c);
            return res;
        }
        *out = c;
        return ncclSuccess;
    }
    /* nonblocking, or several ranks created from one thread inside a group: each creation
     * runs on its own thread, joined by ncclGroupEnd or polled with ncclCommGetAsyncError */
    c->has_thread = 1;
    if (pthread_create(&c->thread, NULL, init_thread, c) != 0) {
        nccl_comm_free(c);
        return nccl_fail(NULL, ncclSystemError, "%s: cannot start the creation thread", fn);
    }
    if (grouped)
        nccl_group_add_init(c);
    *out = c;
    return blocking ? ncclSuccess : ncclInProgress;
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig,
         (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config))
{
    mesh_unique_id_t id;
    memcpy(id.internal, commId.internal, sizeof(id.internal));
    return nccl_init_common(comm, nranks, &id, rank, config, "ncclCommInitRankConfig");
}

NCCL_API(ncclResult_t, ncclCommInitRank,
         (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
{
    mesh_unique_id_t id;
    memcpy(id.internal, commId.internal, sizeof(id.internal));
    return nccl_init_common(comm, nranks, &id, rank, NULL, "ncclCommInitRank");
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable,
         (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
          ncclConfig_t *config))
{
    static const char fn[] = "ncclCommInitRankScalable";
    if (nId < 1 || commIds == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: %s", fn,
                         commIds == NULL ? "commIds is NULL" : "nId must be at least 1");
    /* mesh's bootstrap is rooted at rank 0, which created the first id */
    mesh_unique_id_t id;
    memcpy(id.internal, commIds[0].internal, sizeof(id.internal));
    return nccl_init_common(newcomm, nranks, &id, myrank, config, fn);
}

NCCL_API(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist))
{
    static const char fn[] = "ncclCommInitAll";
    if (comm == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    if (ndev < 1)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: ndev %d is not positive", fn, ndev);
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    ncclResult_t res = ndev > 1 ? pncclGetUniqueId(&id) : ncclSuccess;
    if (res != ncclSuccess)
        return res;
    pncclGroupStart();
    for (int i = 0; i < ndev && res == ncclSuccess; i++) {
        res = pncclCommInitRank(&comm[i], ndev, id, i);
        if (res == ncclSuccess && devlist != NULL)
            comm[i]->device = devlist[i];
    }
    ncclResult_t end = pncclGroupEnd();
    return res != ncclSuccess ? res : end;
}

ncclResult_t nccl_comm_ready(ncclComm_t comm, const char *fn)
{
    ncclResult_t res = nccl_comm_ready_revoked(comm, fn);
    if (res == ncclSuccess && comm->revoked)
        return nccl_fail(comm, ncclInvalidUsage, "%s: the communicator was revoked", fn);
    return res;
}

ncclResult_t nccl_comm_ready_revoked(ncclComm_t comm, const char *fn)
{
    if (comm == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    if (comm->magic != NCCL_COMM_MAGIC)
        return nccl_fail(NULL, ncclInvalidArgument, "%s: comm is not a communicator", fn);
    ncclResult_t res = atomic_load(&comm->state);
    if (res == ncclInProgress)
        res = nccl_init_join(comm);
    if (res != ncclSuccess)
        return nccl_fail(comm, ncclInvalidUsage, "%s: the communicator's creation failed (%s)", fn,
                         pncclGetErrorString(res));
    if (atomic_load(&comm->aborted))
        return nccl_fail(comm, ncclInvalidUsage, "%s: the communicator was aborted", fn);
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError))
{
    if (comm == NULL || asyncError == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "ncclCommGetAsyncError: %s is NULL",
                         comm == NULL ? "comm" : "asyncError");
    ncclResult_t res = atomic_load(&comm->state);
    if (res == ncclSuccess)
        res = atomic_load(&comm->async_err);
    *asyncError = res;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count))
{
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommCount");
    if (res != ncclSuccess)
        return res;
    if (count == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "ncclCommCount: count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank))
{
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommUserRank");
    if (res != ncclSuccess)
        return res;
    if (rank == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device))
{
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommCuDevice");
    if (res != ncclSuccess)
        return res;
    if (device == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
    *device = comm->device;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
{
    ncclResult_t res = nccl_comm_ready(comm, "ncclCommFinalize");
    if (res != ncclSuccess)
        return res;
    /* host operations complete before their call returns: nothing is left to flush */
    comm->finalized = 1;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
{
    if (comm == NULL)
        return ncclSuccess;
    if (comm->magic != NCCL_COMM_MAGIC)
        return nccl_fail(NULL, ncclInvalidArgument, "ncclCommDestroy: comm is not a communicator");
    nccl_init_join(comm);
    nccl_comm_free(comm);
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
{
    if (comm == NULL)
        return ncclSuccess;
    if (comm->magic != NCCL_COMM_MAGIC)
        return nccl_fail(NULL, ncclInvalidArgument, "ncclCommAbort: comm is not a communicator");
    atomic_store(&comm->aborted, 1);
    pthread_mutex_lock(&comm->lock);
    if (atomic_load(&comm->state) == ncclInProgress && comm->has_thread) {
        /* creation still running: never wait for it; its thread frees the wrapper */
        comm->detached = 1;
        pthread_detach(comm->thread);
        pthread_mutex_unlock(&comm->lock);
        return ncclSuccess;
    }
    mesh_comm_h mc = comm->mc;
    pthread_mutex_unlock(&comm->lock);
    nccl_init_join(comm);
    if (mc != NULL)
        mesh_comm_abort(mc); /* wakes every thread waiting inside mesh */
    /* threads woken by the abort leave mesh promptly; free only once they did, and rather
     * leak the communicator than wait without bound */
    double t0 = mesh_time_now();
    while (atomic_load(&comm->busy) > 0) {
        if (mesh_time_now() - t0 > 30)
            return ncclSuccess;
        sched_yield();
    }
    nccl_comm_free(comm);
    return ncclSuccess;
}
