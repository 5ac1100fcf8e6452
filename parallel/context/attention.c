/* The causal attention's entry points: arguments checked, the shape resolved for this rank,
 * then the handle's algorithm (ring.c or gather.c). */
#include "cp.h"

#include <math.h>

static mesh_status_t dims(mesh_cp_h cp, const mesh_cp_shape_t *s, const char *fn, mesh_cp_dims_t *d)
{
    MESH_PAR_CHECK(mesh_cp_check(cp, fn));
    if (s == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: shape is NULL", fn);
    if (s->batch == 0 || s->heads < 1 || s->head_dim == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: shape batch=%zu heads=%d head_dim=%zu", fn,
                              s->batch, s->heads, s->head_dim);
    mesh_cp_range_t ch[2];
    int n;
    MESH_PAR_CHECK(
        mesh_cp_chunks(s->seq, cp->size, cp->rank, !!(cp->flags & MESH_CP_ZIGZAG), ch, &n));
    size_t width = (size_t)s->heads * s->head_dim;
    if (s->stride != 0 && s->stride < width)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: shape stride=%zu is less than heads * head_dim = %zu", fn,
                              s->stride, width);
    if (!(s->scale >= 0.0f) || isinf(s->scale))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: shape scale=%g", fn, (double)s->scale);
    d->batch = s->batch;
    d->seq = s->seq;
    d->local = s->seq / (size_t)cp->size;
    d->width = width;
    d->stride = s->stride ? s->stride : width;
    d->head_dim = s->head_dim;
    d->heads = s->heads;
    d->block = s->batch * d->local * width;
    d->scale = s->scale > 0.0f ? s->scale : 1.0f / sqrtf((float)s->head_dim);
    return MESH_OK;
}

/* The first NULL of n named pointers, or NULL. */
static const char *null_arg(int n, const void *const *p, const char *const *names)
{
    for (int i = 0; i < n; i++)
        if (p[i] == NULL)
            return names[i];
    return NULL;
}

mesh_status_t mesh_cp_attention_forward(mesh_cp_h cp, const mesh_cp_shape_t *shape, const float *q,
                                        const float *k, const float *v, float *out, float *lse)
{
    static const char *fn = "mesh_cp_attention_forward";
    mesh_cp_dims_t d;
    MESH_PAR_CHECK(dims(cp, shape, fn, &d));
    const void *p[] = {q, k, v, out, lse};
    static const char *const names[] = {"q", "k", "v", "out", "lse"};
    const char *missing = null_arg(5, p, names);
    if (missing)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn, missing);
    if (cp->algorithm == MESH_CP_ALLGATHER)
        return mesh_cp_gather_forward(cp, &d, q, k, v, out, lse);
    return mesh_cp_ring_forward(cp, &d, q, k, v, out, lse);
}

mesh_status_t mesh_cp_attention_backward(mesh_cp_h cp, const mesh_cp_shape_t *shape, const float *q,
                                         const float *k, const float *v, const float *out,
                                         const float *lse, const float *dout, float *dq, float *dk,
                                         float *dv)
{
    static const char *fn = "mesh_cp_attention_backward";
    mesh_cp_dims_t d;
    MESH_PAR_CHECK(dims(cp, shape, fn, &d));
    const void *p[] = {q, k, v, out, lse, dout, dq, dk, dv};
    static const char *const names[] = {"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"};
    const char *missing = null_arg(9, p, names);
    if (missing)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn, missing);
    if (cp->algorithm == MESH_CP_ALLGATHER)
        return mesh_cp_gather_backward(cp, &d, q, k, v, out, lse, dout, dq, dk, dv);
    return mesh_cp_ring_backward(cp, &d, q, k, v, out, lse, dout, dq, dk, dv);
}
