/* Bootstrap over the user's out-of-band allgather (any runtime can plug in this way). */
#define MESH_LOG_SUBSYSTEM "bootstrap"
#include "libmesh/bootstrap.h"
#include "libmesh/log.h"

#include <stdlib.h>

typedef struct {
    mesh_bootstrap_t base;
    mesh_oob_allgather_fn fn;
    void *ctx;
} oob_t;

static mesh_status_t oob_allgather(mesh_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    oob_t *o = (oob_t *)bs;
    int rc = o->fn(in, out, len, o->ctx);
    if (rc != 0)
        return mesh_error(MESH_ERR_BOOTSTRAP,
                          "rank %d: the out-of-band allgather callback returned %d (%zu bytes)",
                          bs->rank, rc, len);
    return MESH_OK;
}

static void oob_destroy(mesh_bootstrap_t *bs)
{
    free(bs);
}

mesh_status_t mesh_bootstrap_oob_create(mesh_oob_allgather_fn fn, void *ctx, int rank, int size,
                                        double timeout_s, mesh_bootstrap_t **bs)
{
    if (fn == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "no out-of-band allgather callback");
    if (size < 1 || rank < 0 || rank >= size)
        return mesh_error(MESH_ERR_INVALID_ARG, "bad rank %d for size %d", rank, size);
    oob_t *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "no memory for the oob bootstrap");
    *o = (oob_t){.base = {.rank = rank,
                          .size = size,
                          .timeout_s = timeout_s,
                          .allgather = oob_allgather,
                          .destroy = oob_destroy},
                 .fn = fn,
                 .ctx = ctx};
    *bs = &o->base;
    return MESH_OK;
}
