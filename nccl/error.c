/* Results, messages and versions of the NCCL layer. */
#include "nccl/nccl_priv.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The last failure of this thread, whatever the communicator. */
static __thread char nccl_thread_error[NCCL_ERR_LEN];
static int nccl_debug_warn = -1;

void nccl_debug_init(void)
{
    /* NCCL_DEBUG=WARN (or INFO, TRACE...) prints each failure once, as NCCL does */
    const char *d = getenv("NCCL_DEBUG");
    nccl_debug_warn = d != NULL && *d != '\0' && strcasecmp(d, "VERSION") != 0;
}

/* ---------------------------------------------------------------- report at exit
 * With MESH_NCCL_REPORT on, the process prints at exit the entry points it called that mesh
 * does not serve and the distinct failures its calls met, so that a client (a framework) can be
 * checked for calls the drop-in cannot carry. */

#define REPORT_MAX 16

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int report_on = -1;
static int report_nunserved, report_nfailed;
static struct {
    const char *fn;
    int calls;
} report_unserved[REPORT_MAX];
static struct {
    char msg[160];
    int calls;
} report_failed[REPORT_MAX];

static void report_print(void)
{
    pthread_mutex_lock(&report_lock);
    fprintf(stderr,
            "mesh libnccl.so.2 report (pid %d): %d entry point(s) called that mesh does "
            "not serve%s\n",
            (int)getpid(), report_nunserved, report_nunserved ? ":" : "");
    for (int i = 0; i < report_nunserved; i++)
        fprintf(stderr, "  unserved %s: %d call(s)\n", report_unserved[i].fn,
                report_unserved[i].calls);
    fprintf(stderr, "mesh libnccl.so.2 report (pid %d): %d distinct failure(s)%s\n", (int)getpid(),
            report_nfailed, report_nfailed ? ":" : "");
    for (int i = 0; i < report_nfailed; i++)
        fprintf(stderr, "  failed %d call(s): %s\n", report_failed[i].calls, report_failed[i].msg);
    pthread_mutex_unlock(&report_lock);
}

/* Whether MESH_NCCL_REPORT is on; the first call that finds it on arms the print at exit. */
static int report_enabled(void)
{
    pthread_mutex_lock(&report_lock);
    if (report_on < 0) {
        const char *v = mesh_config_get("NCCL_REPORT");
        report_on = v != NULL && (v[0] == '1' || v[0] == 'y' || v[0] == 'Y' || v[0] == 't' ||
                                  v[0] == 'T' || strcasecmp(v, "on") == 0);
        if (report_on)
            atexit(report_print);
    }
    int on = report_on;
    pthread_mutex_unlock(&report_lock);
    return on;
}

void nccl_report_init(void)
{
    report_enabled();
}

void nccl_report_unserved(const char *fn)
{
    if (!report_enabled())
        return;
    pthread_mutex_lock(&report_lock);
    int i = 0;
    while (i < report_nunserved && strcmp(report_unserved[i].fn, fn) != 0)
        i++;
    if (i < REPORT_MAX) {
        if (i == report_nunserved)
            report_unserved[report_nunserved++].fn = fn;
        report_unserved[i].calls++;
    }
    pthread_mutex_unlock(&report_lock);
}

static void report_failure(const char *msg)
{
    if (report_on <= 0) /* never looks the knob up itself: a failure may come before mesh runs */
        return;
    pthread_mutex_lock(&report_lock);
    int i = 0;
    while (i < report_nfailed && strncmp(report_failed[i].msg, msg, 159) != 0)
        i++;
    if (i < REPORT_MAX) {
        if (i == report_nfailed)
            snprintf(report_failed[report_nfailed++].msg, 160, "%s", msg);
        report_failed[i].calls++;
    }
    pthread_mutex_unlock(&report_lock);
}

static void record(ncclComm_t comm, const char *msg)
{
    report_failure(msg);
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
