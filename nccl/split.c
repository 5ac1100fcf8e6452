/* Communicators derived from others: split, shrink, and revoking a parent before a shrink. */
#include "nccl/nccl_priv.h"
#include <stdlib.h>
#include <string.h>

/* The child nm of comm as an NCCL communicator on the parent's device; nm is destroyed if that
 * fails. */
static ncclResult_t adopt(ncclComm_t comm, mesh_comm_h nm, int blocking, ncclComm_t *newcomm)
{
    ncclResult_t res = nccl_comm_wrap(nm, blocking, newcomm);
    if (res != ncclSuccess) {
        mesh_comm_destroy(nm);
        return res;
    }
    (*newcomm)->device = comm->device;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommSplit,
         (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config))
{
    static const char fn[] = "ncclCommSplit";
    ncclResult_t res = nccl_comm_ready(comm, fn);
    if (res != ncclSuccess)
        return res;
    if (newcomm == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "%s: newcomm is NULL", fn);
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return nccl_fail(comm, ncclInvalidArgument,
                         "%s: color %d is negative (use "
                         "NCCL_SPLIT_NOCOLOR to opt out)",
                         fn, color);
    /* a split without a configuration inherits the parent's blocking mode */
    int blocking = comm->blocking;
    if (config != NULL && (res = nccl_config_read(config, &blocking, fn)) != ncclSuccess)
        return res;
    mesh_comm_h nm = NULL;
    atomic_fetch_add(&comm->busy, 1);
    mesh_status_t st =
        mesh_comm_split(comm->mc, color == NCCL_SPLIT_NOCOLOR ? MESH_COLOR_NONE : color, key, &nm);
    res = st == MESH_OK ? ncclSuccess : nccl_from_mesh(comm, st);
    atomic_fetch_sub(&comm->busy, 1);
    if (res != ncclSuccess)
        return res;
    if (nm == NULL) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    return adopt(comm, nm, blocking, newcomm);
}

/* The survivors of a shrink exchange their creation data over the parent's point-to-point
 * channels, among themselves only: excluded ranks take no part (they may be gone). */
typedef struct {
    mesh_comm_h parent;
    const int *members; /* parent ranks of the new communicator, in new-rank order */
    int n, me;
} shrink_ctx_t;

static int shrink_allgather(const void *in, void *out, size_t len, void *arg)
{
    shrink_ctx_t *x = arg;
    mesh_status_t st = mesh_group_start();
    for (int i = 0; i < x->n && st == MESH_OK; i++) {
        if (i == x->me)
            continue;
        st = mesh_send(x->parent, in, len, MESH_UINT8, x->members[i], NULL, NULL);
        if (st == MESH_OK)
            st = mesh_recv(x->parent, (char *)out + (size_t)i * len, len, MESH_UINT8, x->members[i],
                           NULL, NULL);
    }
    mesh_status_t end = mesh_group_end();
    memcpy((char *)out + (size_t)x->me * len, in, len);
    return st == MESH_OK && end == MESH_OK ? 0 : -1;
}

NCCL_API(ncclResult_t, ncclCommShrink,
         (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
          ncclConfig_t *config, int shrinkFlags))
{
    static const char fn[] = "ncclCommShrink";
    ncclResult_t res = nccl_comm_ready_revoked(comm, fn);
    if (res != ncclSuccess)
        return res;
    if (newcomm == NULL)
        return nccl_fail(comm, ncclInvalidArgument, "%s: newcomm is NULL", fn);
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == NULL))
        return nccl_fail(comm, ncclInvalidArgument, "%s: %d excluded ranks with list %p", fn,
                         excludeRanksCount, (void *)excludeRanksList);
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
        return nccl_fail(comm, ncclInvalidArgument, "%s: unknown shrinkFlags 0x%x", fn,
                         shrinkFlags);
    int blocking = comm->blocking;
    if (config != NULL && (res = nccl_config_read(config, &blocking, fn)) != ncclSuccess)
        return res;
    int n = comm->nranks, *members = malloc(sizeof(int) * (size_t)n);
    char *gone = calloc((size_t)n, 1);
    if (members == NULL || gone == NULL) {
        free(members);
        free(gone);
        return nccl_fail(comm, ncclSystemError, "%s: out of memory", fn);
    }
    for (int i = 0; i < excludeRanksCount; i++) {
        int r = excludeRanksList[i];
        if (r < 0 || r >= n) {
            free(members);
            free(gone);
            return nccl_fail(comm, ncclInvalidArgument, "%s: excluded rank %d is outside 0..%d", fn,
                             r, n - 1);
        }
        gone[r] = 1;
    }
    int count = 0, me = -1;
    for (int r = 0; r < n; r++) {
        if (gone[r])
            continue;
        if (r == comm->rank)
            me = count;
        members[count++] = r;
    }
    free(gone);
    if (me < 0) {
        free(members);
        return nccl_fail(comm, ncclInvalidArgument, "%s: rank %d is in its own exclusion list", fn,
                         comm->rank);
    }
    mesh_comm_h nm = NULL;
    mesh_status_t st;
    atomic_fetch_add(&comm->busy, 1);
    if (count == 1) {
        mesh_unique_id_t unused;
        memset(&unused, 0, sizeof(unused));
        st = mesh_comm_init_rank(&nm, 1, &unused, 0);
    } else {
        shrink_ctx_t x = {.parent = comm->mc, .members = members, .n = count, .me = me};
        mesh_comm_params_t p = {.field_mask = MESH_COMM_PARAM_FIELD_RANK |
                                              MESH_COMM_PARAM_FIELD_SIZE |
                                              MESH_COMM_PARAM_FIELD_OOB,
                                .rank = me,
                                .size = count,
                                .oob_allgather = shrink_allgather,
                                .oob_ctx = &x};
        st = mesh_comm_init(&nm, &p);
    }
    res = st == MESH_OK ? ncclSuccess : nccl_from_mesh(comm, st);
    atomic_fetch_sub(&comm->busy, 1);
    free(members);
    if (res != ncclSuccess)
        return res;
    return adopt(comm, nm, blocking, newcomm);
}

NCCL_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
{
    ncclResult_t res = nccl_comm_ready_revoked(comm, "ncclCommRevoke");
    if (res != ncclSuccess)
        return res;
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
        return nccl_fail(comm, ncclInvalidArgument, "ncclCommRevoke: revokeFlags 0x%x must be 0",
                         revokeFlags);
    /* host operations finish inside their calls, so nothing is in flight to stop; from now on
     * the communicator only serves ncclCommShrink and teardown */
    comm->revoked = 1;
    return ncclSuccess;
}
