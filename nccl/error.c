/* Results, messages and versions of the NCCL layer. */
#include "nccl/nccl_priv.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The last failure of this thread, whatever the communicator. */
static __thread char nccl_thread_error[NCCL_ERR_LEN];
static int nccl_debug_warn = -1;

void nccl_debug_init(void)
{
    /* NCCL_DEBUG=WARN (or INFO, TRACE...) prints each failure once, as NCCL does */
    const char *d = getenv("NCCL_DEBUG");
    nccl_debug_warn = d != NULL && *d != '\0' && strcasecmp(d, "VERSION") != 0;
}

static void record(ncclComm_t comm, const char *msg)
{
    snprintf(nccl_thread_error, sizeof(nccl_thread_error), "%s", msg);
    if (comm != NULL && comm->magic == NCCL_COMM_MAGIC)
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", msg);
    if (nccl_debug_warn < 0)
        nccl_debug_init();
    if (nccl_debug_warn)
        fprintf(stderr, "NCCL WARN %s\n", msg);
}

ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t res, const char *fmt, ...)
{
    char msg[NCCL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    record(comm, msg);
    return res;
}

static ncclResult_t map_status(mesh_status_t st)
{
    switch (st) {
    case MESH_OK:
        return ncclSuccess;
    case MESH_INPROGRESS:
        return ncclInProgress;
    case MESH_ERR_INVALID_ARG:
    case MESH_ERR_TRUNCATED:
    case MESH_ERR_MISMATCH:
    case MESH_ERR_UNSUPPORTED: /* e.g. a datatype and operation mesh cannot combine */
    case MESH_ERR_NOT_FOUND:
        return ncclInvalidArgument;
    case MESH_ERR_BUSY:
    case MESH_ERR_ABORTED:
        return ncclInvalidUsage;
    case MESH_ERR_TIMEOUT:
    case MESH_ERR_PEER_FAILED:
        return ncclRemoteError;
    case MESH_ERR_NO_MEMORY:
    case MESH_ERR_IO:
    case MESH_ERR_BOOTSTRAP:
        return ncclSystemError;
    default:
        return ncclInternalError;
    }
}

ncclResult_t nccl_from_mesh(ncclComm_t comm, mesh_status_t st)
{
    ncclResult_t res = map_status(st);
    if (st >= 0)
        return res;
    const char *msg = mesh_comm_last_error(NULL);
    if ((msg == NULL || *msg == '\0') && comm != NULL && comm->mc != NULL)
        msg = mesh_comm_last_error(comm->mc);
    if (msg == NULL || *msg == '\0')
        msg = mesh_status_string(st);
    record(comm, msg);
    /* failures of the communicator itself (not of one call's arguments) stay visible through
     * ncclCommGetAsyncError, as NCCL reports them */
    if (comm != NULL && (res == ncclRemoteError || res == ncclSystemError ||
                         res == ncclInternalError || st == MESH_ERR_ABORTED))
        atomic_store(&comm->async_err, res);
    return res;
}

NCCL_API(ncclResult_t, ncclGetVersion, (int *version))
{
    if (version == NULL)
        return nccl_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

NCCL_API(const char *, ncclGetErrorString, (ncclResult_t result))
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the mesh developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

NCCL_API(const char *, ncclGetLastError, (ncclComm_t comm))
{
    /* the thread's latest failure is the most precise answer; a communicator's own message
     * serves a thread that did not see the failure itself */
    if (nccl_thread_error[0] != '\0')
        return nccl_thread_error;
    if (comm != NULL && comm->magic == NCCL_COMM_MAGIC)
        return comm->last_error;
    return nccl_thread_error;
}

NCCL_API(void, ncclResetDebugInit, (void))
{
    ncclResetDebugInitInternal();
}

void ncclResetDebugInitInternal(void)
{
    nccl_debug_init();
}
