/* Stage 3: a group's parameters are all-gathered from the shards into the full buffer for the
 * time the model uses them, then given back. */
#include "zero_impl.h"
#include <stdlib.h>

/* The group id of z, for fn; NULL where the stage keeps whole parameters (nothing to do).
 * gathered: the group must be gathered already. */
static mesh_status_t find_group(struct mesh_zero *z, const char *fn, int id, int gathered,
                                zero_group_t **gr)
{
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (!z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: call mesh_zero_finalize first", fn);
    int g = mesh_zero__group(z, id);
    if (g < 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: no tensor has group %d", fn, id);
    if (z->stage == 3 && gathered && z->g[g].refs == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: group %d is not gathered", fn, id);
    *gr = z->stage == 3 ? &z->g[g] : NULL;
    return MESH_OK;
}

static mesh_status_t wait_group(struct mesh_zero *z, zero_group_t *gr, const char *fn)
{
    mesh_status_t first = MESH_OK;
    for (int k = 0; gr->reqs && k < gr->count; k++) {
        if (gr->reqs[k] == NULL)
            continue;
        mesh_status_t st = mesh_wait(gr->reqs[k]);
        mesh_request_free(gr->reqs[k]);
        gr->reqs[k] = NULL;
        if (st != MESH_OK && first == MESH_OK)
            first = mesh_zero__comm_fail(z->dp, st, fn, "parameter all-gather");
    }
    return first;
}

mesh_status_t mesh_zero_gather(mesh_zero_h z, int id)
{
    static const char fn[] = "mesh_zero_gather";
    zero_group_t *gr;
    MESH_PAR_CHECK(find_group(z, fn, id, 0, &gr));
    if (gr == NULL)
        return MESH_OK;
    if (gr->refs++ > 0)
        return mesh_zero__poll(z); /* already gathered or on its way */
    if (gr->reqs == NULL && (gr->reqs = calloc((size_t)gr->count, sizeof(*gr->reqs))) == NULL) {
        gr->refs--;
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    }
    gr->waited = 0;
    for (int k = 0; k < gr->count; k++) {
        const zero_bucket_t *bk = &z->b[gr->first + k];
        mesh_status_t st = mesh_allgather(z->dp, zero_at(z, z->param_shard, bk->shard_off),
                                          zero_at(z, z->param, bk->start), bk->slice, z->dtype,
                                          NULL, &gr->reqs[k]);
        if (st != MESH_OK) {
            gr->reqs[k] = NULL;
            st = mesh_zero__comm_fail(z->dp, st, fn, "parameter all-gather");
            wait_group(z, gr, fn);
            gr->refs--;
            return st;
        }
    }
    return mesh_zero__poll(z);
}

mesh_status_t mesh_zero_wait_params(mesh_zero_h z, int id)
{
    static const char fn[] = "mesh_zero_wait_params";
    zero_group_t *gr;
    MESH_PAR_CHECK(find_group(z, fn, id, 1, &gr));
    if (gr == NULL)
        return MESH_OK;
    MESH_PAR_CHECK(wait_group(z, gr, fn));
    gr->waited = 1;
    return MESH_OK;
}

mesh_status_t mesh_zero_release(mesh_zero_h z, int id)
{
    static const char fn[] = "mesh_zero_release";
    zero_group_t *gr;
    MESH_PAR_CHECK(find_group(z, fn, id, 1, &gr));
    if (gr == NULL)
        return MESH_OK;
    if (--gr->refs > 0)
        return MESH_OK;
    /* the all-gather must be over before its pages go */
    mesh_status_t st = wait_group(z, gr, fn);
    gr->waited = 0;
    const zero_bucket_t *a = &z->b[gr->first], *e = &z->b[gr->first + gr->count - 1];
    mesh_zero__drop(zero_at(z, z->param, a->start), (e->start + e->numel - a->start) * z->esize);
    return st;
}
