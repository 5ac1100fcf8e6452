/*
 * Bootstrap under a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix). PMIx only carries rank 0's
 * unique id (address and secret) to the others; the allgathers then run over the TCP star, which
 * is bounded by our own deadline.
 */
#define MESH_LOG_SUBSYSTEM "bootstrap"
#include <config.h>
#include "libmesh/bootstrap.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"

#include <pmix.h>
#include <stdlib.h>
#include <string.h>

#define PMIX_KEY_ID "mesh.bootstrap.uid"

typedef struct {
    mesh_bootstrap_t base;
    mesh_bootstrap_t *star;
} pmix_bs_t;

static mesh_status_t pmix_bs_allgather(mesh_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    return mesh_bootstrap_allgather(((pmix_bs_t *)bs)->star, in, out, len);
}

static void pmix_bs_destroy(mesh_bootstrap_t *bs)
{
    pmix_bs_t *p = (pmix_bs_t *)bs;
    p->star->destroy(p->star);
    free(p);
    PMIx_Finalize(NULL, 0);
}

/* Rank 0 publishes the id; everyone fences (collecting data) and the others read it. */
static mesh_status_t pmix_exchange_id(const pmix_proc_t *me, double timeout_s, mesh_unique_id_t *id)
{
    pmix_status_t rc;
    pmix_value_t v, *got = NULL;

    if (me->rank == 0) {
        MESH_CHECK(mesh_bootstrap_uid_create(id));
        PMIX_VALUE_CONSTRUCT(&v);
        v.type = PMIX_BYTE_OBJECT;
        v.data.bo.bytes = id->internal;
        v.data.bo.size = sizeof(id->internal);
        rc = PMIx_Put(PMIX_GLOBAL, PMIX_KEY_ID, &v);
        if (rc == PMIX_SUCCESS)
            rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS)
            return mesh_error(MESH_ERR_BOOTSTRAP,
                              "pmix rank 0: cannot publish the bootstrap "
                              "address: %s",
                              PMIx_Error_string(rc));
    }
    pmix_info_t info[2];
    bool collect = true;
    int tmo = timeout_s < 1 ? 1 : (int)timeout_s;
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
    rc = PMIx_Fence(NULL, 0, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS)
        return mesh_error(rc == PMIX_ERR_TIMEOUT ? MESH_ERR_TIMEOUT : MESH_ERR_BOOTSTRAP,
                          "pmix rank %u: fence failed: %s", me->rank, PMIx_Error_string(rc));
    if (me->rank == 0)
        return MESH_OK;

    pmix_proc_t root;
    PMIX_PROC_CONSTRUCT(&root);
    PMIX_LOAD_NSPACE(root.nspace, me->nspace);
    root.rank = 0;
    rc = PMIx_Get(&root, PMIX_KEY_ID, NULL, 0, &got);
    if (rc != PMIX_SUCCESS || got == NULL || got->type != PMIX_BYTE_OBJECT ||
        got->data.bo.size != sizeof(id->internal)) {
        if (got != NULL)
            PMIX_VALUE_RELEASE(got);
        return mesh_error(MESH_ERR_BOOTSTRAP,
                          "pmix rank %u: no bootstrap address from rank 0: "
                          "%s",
                          me->rank, PMIx_Error_string(rc));
    }
    memcpy(id->internal, got->data.bo.bytes, sizeof(id->internal));
    PMIX_VALUE_RELEASE(got);
    return MESH_OK;
}

mesh_status_t mesh_bootstrap_pmix_create(double timeout_s, mesh_bootstrap_t **bs)
{
    pmix_proc_t me, wild;
    pmix_value_t *val = NULL;
    mesh_unique_id_t id;
    mesh_status_t st;

    if (timeout_s <= 0)
        timeout_s = mesh_default_timeout();
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        return mesh_error(MESH_ERR_BOOTSTRAP, "PMIx_Init failed: %s", PMIx_Error_string(rc));
    PMIX_PROC_CONSTRUCT(&wild);
    PMIX_LOAD_NSPACE(wild.nspace, me.nspace);
    wild.rank = PMIX_RANK_WILDCARD;
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || val == NULL || val->type != PMIX_UINT32) {
        if (val != NULL)
            PMIX_VALUE_RELEASE(val);
        st = mesh_error(MESH_ERR_BOOTSTRAP, "pmix rank %u: no job size: %s", me.rank,
                        PMIx_Error_string(rc));
        goto err_fini;
    }
    int size = (int)val->data.uint32;
    PMIX_VALUE_RELEASE(val);

    pmix_bs_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "no memory for the pmix bootstrap");
        goto err_fini;
    }
    MESH_CHECK_GOTO(pmix_exchange_id(&me, timeout_s, &id), st, err_free);
    MESH_CHECK_GOTO(mesh_bootstrap_tcp_create(&id, (int)me.rank, size, timeout_s, &p->star), st,
                    err_free);
    p->base = (mesh_bootstrap_t){.rank = (int)me.rank,
                                 .size = size,
                                 .timeout_s = timeout_s,
                                 .allgather = pmix_bs_allgather,
                                 .destroy = pmix_bs_destroy};
    *bs = &p->base;
    return MESH_OK;
err_free:
    free(p);
err_fini:
    PMIx_Finalize(NULL, 0);
    return st;
}
