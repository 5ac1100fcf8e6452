/* Public communicator API: creation, split, dup, destroy, abort and queries. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/api.h"
#include "libmesh/bootstrap.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/topo.h"
#include "libmesh/wait.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A one-rank bootstrap: nothing to exchange. */
static mesh_status_t solo_allgather(mesh_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    memcpy(out, in, len);
    return MESH_OK;
}
static void solo_destroy(mesh_bootstrap_t *bs)
{
    (void)bs;
}

static double comm_timeout(const mesh_comm_params_t *p)
{
    if (p && (p->field_mask & MESH_COMM_PARAM_FIELD_TIMEOUT) && p->timeout_s > 0)
        return p->timeout_s;
    return mesh_default_timeout();
}

static mesh_status_t create_over(mesh_bootstrap_t *bs, double timeout, const char *node,
                                 mesh_comm_h *comm)
{
    mesh_status_t st = mesh_comm_create(bs, timeout, node ? node : mesh_context_node_name(), comm);
    bs->destroy(bs);
    return st;
}

mesh_status_t mesh_unique_id(mesh_unique_id_t *id)
{
    MESH_CHECK(mesh_coll_global_init());
    if (id == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_unique_id: id is NULL");
    return mesh_bootstrap_uid_create(id);
}

mesh_status_t mesh_comm_init_rank(mesh_comm_h *comm, int size, const mesh_unique_id_t *id, int rank)
{
    static const char fn[] = "mesh_comm_init_rank";
    MESH_CHECK(mesh_coll_global_init());
    if (comm == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (size < 1)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: size %d is not positive", fn, size);
    if (rank < 0 || rank >= size)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: rank %d is outside 0..%d", fn, rank, size - 1);
    double timeout = mesh_default_timeout();
    if (size == 1) {
        /* a single rank needs nobody: the id's contents are not used */
        mesh_bootstrap_t solo = {.rank = 0,
                                 .size = 1,
                                 .timeout_s = timeout,
                                 .allgather = solo_allgather,
                                 .destroy = solo_destroy};
        return create_over(&solo, timeout, NULL, comm);
    }
    if (id == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: id is NULL", fn);
    mesh_bootstrap_t *bs;
    MESH_CHECK(mesh_bootstrap_tcp_create(id, rank, size, timeout, &bs));
    return create_over(bs, timeout, NULL, comm);
}

mesh_status_t mesh_comm_init_env(mesh_comm_h *comm)
{
    return mesh_comm_init(comm, NULL);
}

mesh_status_t mesh_comm_init(mesh_comm_h *comm, const mesh_comm_params_t *p)
{
    static const char fn[] = "mesh_comm_init";
    MESH_CHECK(mesh_coll_global_init());
    if (comm == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    double timeout = comm_timeout(p);
    const char *node = p && (p->field_mask & MESH_COMM_PARAM_FIELD_NODE) ? p->node : NULL;
    mesh_bootstrap_t *bs;
    if (p && (p->field_mask & MESH_COMM_PARAM_FIELD_OOB)) {
        uint64_t need = MESH_COMM_PARAM_FIELD_RANK | MESH_COMM_PARAM_FIELD_SIZE;
        if ((p->field_mask & need) != need)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s: an oob allgather needs rank and size", fn);
        if (p->oob_allgather == NULL)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s: oob_allgather is NULL", fn);
        if (p->size < 1 || p->rank < 0 || p->rank >= p->size)
            return mesh_error(MESH_ERR_INVALID_ARG, "%s: rank %d / size %d are invalid", fn,
                              p->rank, p->size);
        MESH_CHECK(mesh_bootstrap_oob_create(p->oob_allgather, p->oob_ctx, p->rank, p->size,
                                             timeout, &bs));
    } else {
        MESH_CHECK(mesh_bootstrap_env_create(timeout, &bs));
    }
    return create_over(bs, timeout, node, comm);
}

/* A bootstrap over a parent communicator: every parent rank takes part in each round, and each
 * new communicator keeps its members' blobs. */
typedef struct {
    mesh_bootstrap_t base;
    mesh_comm_t *parent;
    int *members; /* parent ranks of the new communicator, in new-rank order */
} split_bootstrap_t;

static mesh_status_t split_allgather(mesh_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    split_bootstrap_t *sb = (split_bootstrap_t *)bs;
    mesh_comm_t *parent = sb->parent;
    char *all = malloc(len * (size_t)parent->size);
    if (all == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "split: cannot allocate %zu bytes", len);
    mesh_status_t st = mesh_allgather(parent, in, all, len, MESH_UINT8, NULL, NULL);
    if (st == MESH_OK && sb->members != NULL)
        for (int i = 0; i < bs->size; i++)
            memcpy((char *)out + (size_t)i * len, all + (size_t)sb->members[i] * len, len);
    free(all);
    return st;
}

static void split_destroy(mesh_bootstrap_t *bs)
{
    (void)bs;
}

typedef struct {
    int32_t color, key;
} color_key_t;

mesh_status_t mesh_comm_split(mesh_comm_h comm, int color, int key, mesh_comm_h *newcomm)
{
    static const char fn[] = "mesh_comm_split";
    MESH_CHECK(mesh_api_check_comm(comm, fn, NULL));
    CHECK_ARG(newcomm != NULL, "%s: newcomm is NULL", fn);
    CHECK_ARG(color >= 0 || color == MESH_COLOR_NONE,
              "%s: color %d is negative (use "
              "MESH_COLOR_NONE to opt out)",
              fn, color);
    int n = comm->size;
    color_key_t mine = {color, key}, *all = malloc(sizeof(color_key_t) * (size_t)n);
    int *members = malloc(sizeof(int) * (size_t)n);
    if (all == NULL || members == NULL) {
        free(all);
        free(members);
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_NO_MEMORY, "%s: out of memory", fn));
    }
    mesh_status_t st = mesh_allgather(comm, &mine, all, sizeof(mine), MESH_UINT8, NULL, NULL);
    int count = 0, me = -1;
    if (st == MESH_OK && color != MESH_COLOR_NONE) {
        for (int r = 0; r < n; r++)
            if (all[r].color == color)
                members[count++] = r;
        /* order by key, then by parent rank (insertion sort keeps equal keys stable) */
        for (int i = 1; i < count; i++) {
            int r = members[i], j = i - 1;
            while (j >= 0 && all[members[j]].key > all[r].key) {
                members[j + 1] = members[j];
                j--;
            }
            members[j + 1] = r;
        }
        for (int i = 0; i < count; i++)
            if (members[i] == comm->rank)
                me = i;
    }
    if (st == MESH_OK) {
        split_bootstrap_t sb = {.base = {.rank = me < 0 ? 0 : me,
                                         .size = count ? count : 1,
                                         .timeout_s = comm->timeout_s,
                                         .allgather = split_allgather,
                                         .destroy = split_destroy},
                                .parent = comm,
                                .members = me < 0 ? NULL : members};
        mesh_comm_h out = NULL;
        if (me < 0)
            st = mesh_comm_create_skip(&sb.base);
        else
            st = mesh_comm_create(&sb.base, comm->timeout_s,
                                  comm->node_names[comm->node_of[comm->rank]], &out);
        if (st == MESH_OK)
            *newcomm = out;
    }
    free(all);
    free(members);
    return mesh_comm_fail(comm, st);
}

mesh_status_t mesh_comm_dup(mesh_comm_h comm, mesh_comm_h *newcomm)
{
    MESH_CHECK(mesh_api_check_comm(comm, "mesh_comm_dup", NULL));
    return mesh_comm_split(comm, 0, comm->rank, newcomm);
}

void mesh_comm_destroy(mesh_comm_h comm)
{
    if (comm == NULL)
        return;
    if (mesh_api_check_handle(comm, "mesh_comm_destroy") < 0)
        return;
    mesh_comm_release(comm);
}

void mesh_comm_abort(mesh_comm_h comm)
{
    if (comm == NULL || mesh_api_check_handle(comm, "mesh_comm_abort") < 0)
        return;
    atomic_store(&comm->aborted, 1);
    mesh_comm_abort_transports(comm);
    /* a thread of ours asleep in a wait sees the abort now, not at the end of its slice */
    mesh_wait_wake_local();
}

int mesh_comm_rank(mesh_comm_h comm)
{
    return mesh_comm_live(comm) ? comm->rank : -1;
}
int mesh_comm_size(mesh_comm_h comm)
{
    return mesh_comm_live(comm) ? comm->size : -1;
}

const char *mesh_comm_last_error(mesh_comm_h comm)
{
    return mesh_comm_live(comm) ? comm->last_error : mesh_error_last();
}

mesh_status_t mesh_comm_error_info(mesh_comm_h comm, mesh_error_info_t *info)
{
    static const char fn[] = "mesh_comm_error_info";
    MESH_CHECK(mesh_api_check_handle(comm, fn));
    if (info == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: info is NULL", fn);
    *info = (mesh_error_info_t){.status = MESH_OK, .rank = -1};
    /* the failure is written once, under the lock, by whichever thread saw it */
    mesh_comm_lock(comm);
    if (comm->failed < 0) {
        info->status = comm->failed;
        info->rank = comm->health.err_rank;
        snprintf(info->operation, sizeof(info->operation), "%s", comm->health.err_call);
        snprintf(info->message, sizeof(info->message), "%s", comm->failure);
    } else if (comm->last_status < 0) {
        info->status = comm->last_status;
        snprintf(info->message, sizeof(info->message), "%s", comm->last_error);
    }
    mesh_comm_unlock(comm);
    return MESH_OK;
}

int mesh_comm_node_count(mesh_comm_h comm)
{
    return mesh_comm_live(comm) ? comm->nnodes : -1;
}

int mesh_comm_node(mesh_comm_h comm, int rank)
{
    return mesh_comm_live(comm) && rank >= 0 && rank < comm->size ? comm->node_of[rank] : -1;
}

int mesh_comm_local_rank(mesh_comm_h comm, int rank)
{
    return mesh_comm_live(comm) && rank >= 0 && rank < comm->size ? comm->local_rank[rank] : -1;
}

int mesh_comm_local_size(mesh_comm_h comm, int node)
{
    return mesh_comm_live(comm) && node >= 0 && node < comm->nnodes ? comm->node_size[node] : -1;
}

int mesh_comm_node_ranks(mesh_comm_h comm, int node, int *ranks, int max)
{
    if (!mesh_comm_live(comm) || node < 0 || node >= comm->nnodes)
        return -1;
    int n = comm->node_size[node];
    for (int i = 0; ranks && i < n && i < max; i++)
        ranks[i] = comm->node_ranks[comm->node_first[node] + i];
    return n;
}

mesh_status_t mesh_comm_rank_info(mesh_comm_h comm, int rank, mesh_rank_info_t *info)
{
    static const char fn[] = "mesh_comm_rank_info";
    MESH_CHECK(mesh_api_check_handle(comm, fn));
    CHECK_ARG(info != NULL, "%s: info is NULL", fn);
    CHECK_ARG(rank >= 0 && rank < comm->size, "%s: rank %d is outside 0..%d", fn, rank,
              comm->size - 1);
    uint64_t want = info->field_mask, got = 0;
    const mesh_topo_summary_t *s = &comm->summary[rank];
    if (want & MESH_RANK_INFO_FIELD_NODE) {
        info->node = comm->node_of[rank];
        info->local_rank = comm->local_rank[rank];
        info->node_name = comm->node_names[info->node];
        got |= MESH_RANK_INFO_FIELD_NODE;
    }
    if (want & MESH_RANK_INFO_FIELD_GPU) {
        info->gpu = s->gpu;
        got |= MESH_RANK_INFO_FIELD_GPU;
    }
    if (want & MESH_RANK_INFO_FIELD_CPUS) {
        info->cpu_first = s->cpu_first;
        info->cpu_last = s->cpu_last;
        info->cpu_count = s->cpu_count;
        got |= MESH_RANK_INFO_FIELD_CPUS;
    }
    if (want & MESH_RANK_INFO_FIELD_NIC) {
        snprintf(info->nic, sizeof(info->nic), "%.*s", (int)sizeof(s->nic), s->nic);
        got |= MESH_RANK_INFO_FIELD_NIC;
    }
    info->field_mask = got;
    return MESH_OK;
}

mesh_status_t mesh_comm_tl_bytes(mesh_comm_h comm, const char *transport, uint64_t *sent,
                                 uint64_t *received)
{
    static const char fn[] = "mesh_comm_tl_bytes";
    MESH_CHECK(mesh_api_check_handle(comm, fn));
    CHECK_ARG(transport != NULL, "%s: transport is NULL", fn);
    uint64_t s = 0, r = 0;
    int found = 0;
    for (int t = 0; t < comm->ntls; t++) {
        if (strcmp(comm->tls[t].ops->name, transport) != 0)
            continue;
        s += comm->tls[t].bytes_sent;
        r += comm->tls[t].bytes_recv;
        found = 1;
    }
    if (!found && mesh_tl_find(transport) == NULL)
        return mesh_comm_fail(
            comm, mesh_error(MESH_ERR_NOT_FOUND, "%s: no transport named '%s'", fn, transport));
    if (sent)
        *sent = s;
    if (received)
        *received = r;
    return MESH_OK;
}

const char *mesh_comm_peer_transport(mesh_comm_h comm, int peer)
{
    if (!mesh_comm_live(comm) || peer < 0 || peer >= comm->size)
        return NULL;
    return comm->tls[comm->peers[peer].tl].ops->name;
}

const char *mesh_config_get(const char *name)
{
    /* every table is registered once the library is initialised */
    mesh_coll_global_init();
    return mesh_config_value(name);
}

const char *mesh_comm_last_algorithm(mesh_comm_h comm)
{
    return mesh_comm_live(comm) && comm->last_algo ? comm->last_algo : "";
}

mesh_status_t mesh_op_create_premul(mesh_comm_h comm, const void *scalar, mesh_dtype_t dtype,
                                    mesh_op_t *op)
{
    static const char fn[] = "mesh_op_create_premul";
    MESH_CHECK(mesh_api_check_handle(comm, fn));
    CHECK_ARG(scalar != NULL, "%s: scalar is NULL", fn);
    CHECK_ARG(op != NULL, "%s: op is NULL", fn);
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    for (int i = 0; i < MESH_COMM_MAX_PREMUL; i++) {
        if (comm->premul[i].used)
            continue;
        comm->premul[i].used = 1;
        comm->premul[i].dtype = dtype;
        memcpy(comm->premul[i].scalar, scalar, mesh_dtype_size(dtype));
        *op = (mesh_op_t)(MESH_OP_USER_BASE + i);
        return MESH_OK;
    }
    return mesh_comm_fail(comm, mesh_error(MESH_ERR_BUSY,
                                           "%s: all %d pre-multiplied sums of the "
                                           "communicator are in use",
                                           fn, MESH_COMM_MAX_PREMUL));
}

mesh_status_t mesh_op_destroy(mesh_comm_h comm, mesh_op_t op)
{
    static const char fn[] = "mesh_op_destroy";
    MESH_CHECK(mesh_api_check_handle(comm, fn));
    int i = (int)op - MESH_OP_USER_BASE;
    CHECK_ARG(i >= 0 && i < MESH_COMM_MAX_PREMUL && comm->premul[i].used,
              "%s: op %d is not a live pre-multiplied sum", fn, (int)op);
    comm->premul[i].used = 0;
    return MESH_OK;
}
