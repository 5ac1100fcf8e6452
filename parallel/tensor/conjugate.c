/* The conjugate communication of tensor and sequence parallelism: f (identity / all-reduce),
 * g (all-reduce / identity), the sequence all-gather and reduce-scatter, and the tp region's two
 * ends, which pick between them by mode. */
#include "tp.h"

#include <string.h>

/* Sums count elements over tp into out (in place when in == out). */
static mesh_status_t tp_allreduce(mesh_tp_h tp, const void *in, void *out, size_t count,
                                  mesh_dtype_t dtype, const char *fn)
{
    if (tp->size == 1 || count == 0) {
        size_t e;
        MESH_PAR_CHECK(mesh_tp_elem(dtype, fn, &e));
        if (in != out && count)
            memmove(out, in, count * e);
        return MESH_OK;
    }
    mesh_status_t st = mesh_allreduce(tp->comm, in, out, count, dtype, MESH_SUM, NULL, NULL);
    return st == MESH_OK ? MESH_OK : mesh_par_fail(tp->comm, st, fn);
}

static mesh_status_t tp_copy(const void *in, void *out, size_t count, mesh_dtype_t dtype,
                             const char *fn)
{
    size_t e;
    MESH_PAR_CHECK(mesh_tp_elem(dtype, fn, &e));
    if (count && (in == NULL || out == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: NULL buffer for %zu elements", fn, count);
    if (in != out && count)
        memmove(out, in, count * e);
    return MESH_OK;
}

mesh_status_t mesh_tp_copy_forward(mesh_tp_h tp, const void *in, void *out, size_t count,
                                   mesh_dtype_t dtype)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_copy_forward"));
    return tp_copy(in, out, count, dtype, "mesh_tp_copy_forward");
}

mesh_status_t mesh_tp_copy_backward(mesh_tp_h tp, const void *grad_in, void *grad_out, size_t count,
                                    mesh_dtype_t dtype)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_copy_backward"));
    return tp_allreduce(tp, grad_in, grad_out, count, dtype, "mesh_tp_copy_backward");
}

mesh_status_t mesh_tp_reduce_forward(mesh_tp_h tp, const void *in, void *out, size_t count,
                                     mesh_dtype_t dtype)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_reduce_forward"));
    return tp_allreduce(tp, in, out, count, dtype, "mesh_tp_reduce_forward");
}

mesh_status_t mesh_tp_reduce_backward(mesh_tp_h tp, const void *grad_in, void *grad_out,
                                      size_t count, mesh_dtype_t dtype)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_reduce_backward"));
    return tp_copy(grad_in, grad_out, count, dtype, "mesh_tp_reduce_backward");
}

/* Checks a sequence-split shape; sets the bytes of one rank's block ([batch, seq/tp, width]). */
static mesh_status_t sp_shape(mesh_tp_h tp, const void *a, const void *b, size_t batch, size_t seq,
                              size_t width, mesh_dtype_t dtype, const char *fn, size_t *elem,
                              size_t *rows_local)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, fn));
    MESH_PAR_CHECK(mesh_tp_elem(dtype, fn, elem));
    mesh_tp_range_t r;
    if (mesh_tp_split(seq, tp->size, tp->rank, "seq", &r) != MESH_OK)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s", fn, mesh_comm_last_error(NULL));
    if (batch * seq * width != 0 && (a == NULL || b == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: NULL buffer", fn);
    if (a == b && batch * seq * width != 0 && tp->size > 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: in and out are the same buffer", fn);
    *rows_local = r.count;
    return MESH_OK;
}

/* [batch][tp][sl][width] <-> [tp][batch][sl][width]: the communication wants each rank's
 * positions of every sample back to back. */
static void sp_permute(const char *src, char *dst, size_t batch, int parts, size_t block,
                       int to_rank_major)
{
    for (size_t b = 0; b < batch; b++)
        for (int r = 0; r < parts; r++) {
            size_t sample_major = (b * (size_t)parts + (size_t)r) * block;
            size_t rank_major = ((size_t)r * batch + b) * block;
            if (to_rank_major)
                memcpy(dst + rank_major, src + sample_major, block);
            else
                memcpy(dst + sample_major, src + rank_major, block);
        }
}

static mesh_status_t sp_allgather(mesh_tp_h tp, const void *local, void *full, size_t batch,
                                  size_t seq, size_t width, mesh_dtype_t dtype, const char *fn)
{
    size_t e, sl;
    MESH_PAR_CHECK(sp_shape(tp, local, full, batch, seq, width, dtype, fn, &e, &sl));
    size_t count = batch * sl * width;
    if (count == 0)
        return MESH_OK;
    if (tp->size == 1) {
        memmove(full, local, count * e);
        return MESH_OK;
    }
    void *dst = full;
    if (batch > 1)
        MESH_PAR_CHECK(mesh_tp_scratch(tp, 0, count * e * (size_t)tp->size, &dst));
    mesh_status_t st = mesh_allgather(tp->comm, local, dst, count, dtype, NULL, NULL);
    if (st != MESH_OK)
        return mesh_par_fail(tp->comm, st, fn);
    if (batch > 1)
        sp_permute(dst, full, batch, tp->size, sl * width * e, 0);
    return MESH_OK;
}

static mesh_status_t sp_reduce_scatter(mesh_tp_h tp, const void *full, void *local, size_t batch,
                                       size_t seq, size_t width, mesh_dtype_t dtype, const char *fn)
{
    size_t e, sl;
    MESH_PAR_CHECK(sp_shape(tp, full, local, batch, seq, width, dtype, fn, &e, &sl));
    size_t count = batch * sl * width;
    if (count == 0)
        return MESH_OK;
    if (tp->size == 1) {
        memmove(local, full, count * e);
        return MESH_OK;
    }
    const void *src = full;
    if (batch > 1) {
        void *s;
        MESH_PAR_CHECK(mesh_tp_scratch(tp, 0, count * e * (size_t)tp->size, &s));
        sp_permute(full, s, batch, tp->size, sl * width * e, 1);
        src = s;
    }
    mesh_status_t st =
        mesh_reduce_scatter(tp->comm, src, local, count, dtype, MESH_SUM, NULL, NULL);
    return st == MESH_OK ? MESH_OK : mesh_par_fail(tp->comm, st, fn);
}

mesh_status_t mesh_tp_sp_gather_forward(mesh_tp_h tp, const void *local, void *full, size_t batch,
                                        size_t seq, size_t width, mesh_dtype_t dtype)
{
    return sp_allgather(tp, local, full, batch, seq, width, dtype, "mesh_tp_sp_gather_forward");
}

mesh_status_t mesh_tp_sp_gather_backward(mesh_tp_h tp, const void *grad_full, void *grad_local,
                                         size_t batch, size_t seq, size_t width, mesh_dtype_t dtype)
{
    return sp_reduce_scatter(tp, grad_full, grad_local, batch, seq, width, dtype,
                             "mesh_tp_sp_gather_backward");
}

mesh_status_t mesh_tp_sp_scatter_forward(mesh_tp_h tp, const void *full, void *local, size_t batch,
                                         size_t seq, size_t width, mesh_dtype_t dtype)
{
    return sp_reduce_scatter(tp, full, local, batch, seq, width, dtype,
                             "mesh_tp_sp_scatter_forward");
}

mesh_status_t mesh_tp_sp_scatter_backward(mesh_tp_h tp, const void *grad_local, void *grad_full,
                                          size_t batch, size_t seq, size_t width,
                                          mesh_dtype_t dtype)
{
    return sp_allgather(tp, grad_local, grad_full, batch, seq, width, dtype,
                        "mesh_tp_sp_scatter_backward");
}

#define TP_SP(tp) ((tp) != NULL && ((tp)->flags & MESH_TP_SEQUENCE_PARALLEL))

mesh_status_t mesh_tp_enter_forward(mesh_tp_h tp, const void *outside, void *inside, size_t batch,
                                    size_t seq, size_t width, mesh_dtype_t dtype)
{
    if (TP_SP(tp))
        return mesh_tp_sp_gather_forward(tp, outside, inside, batch, seq, width, dtype);
    return mesh_tp_copy_forward(tp, outside, inside, batch * seq * width, dtype);
}

mesh_status_t mesh_tp_enter_backward(mesh_tp_h tp, const void *grad_inside, void *grad_outside,
                                     size_t batch, size_t seq, size_t width, mesh_dtype_t dtype)
{
    if (TP_SP(tp))
        return mesh_tp_sp_gather_backward(tp, grad_inside, grad_outside, batch, seq, width, dtype);
    return mesh_tp_copy_backward(tp, grad_inside, grad_outside, batch * seq * width, dtype);
}

mesh_status_t mesh_tp_exit_forward(mesh_tp_h tp, const void *inside, void *outside, size_t batch,
                                   size_t seq, size_t width, mesh_dtype_t dtype)
{
    if (TP_SP(tp))
        return mesh_tp_sp_scatter_forward(tp, inside, outside, batch, seq, width, dtype);
    return mesh_tp_reduce_forward(tp, inside, outside, batch * seq * width, dtype);
}

mesh_status_t mesh_tp_exit_backward(mesh_tp_h tp, const void *grad_outside, void *grad_inside,
                                    size_t batch, size_t seq, size_t width, mesh_dtype_t dtype)
{
    if (TP_SP(tp))
        return mesh_tp_sp_scatter_backward(tp, grad_outside, grad_inside, batch, seq, width, dtype);
    return mesh_tp_reduce_backward(tp, grad_outside, grad_inside, batch * seq * width, dtype);
}

mesh_status_t mesh_tp_replicated_grad(mesh_tp_h tp, void *grad, size_t count, mesh_dtype_t dtype)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_replicated_grad"));
    if (!TP_SP(tp))
        return MESH_OK;
    return tp_allreduce(tp, grad, grad, count, dtype, "mesh_tp_replicated_grad");
}
