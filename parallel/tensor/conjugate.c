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

/* Checks a sequence-split shape; sets the element size and the rows of one rank's block
 * ([batch, seq/tp, width]). Where there is nothing to communicate (no elements, or one rank: in
 * is copied to out) it sets *done. */
static mesh_status_t sp_shape(mesh_tp_h tp, const void *in, void *out, size_t batch, size_t seq,
                              size_t width, mesh_dtype_t dtype, const char *fn, size_t *elem,
                              size_t *rows_local, int *done)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, fn));
    MESH_PAR_CHECK(mesh_tp_elem(dtype, fn, elem));
    mesh_tp_range_t r;
    if (mesh_tp_split(seq, tp->size, tp->rank, "seq", &r) != MESH_OK)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s", fn, mesh_comm_last_error(NULL));
    if (batch * seq * width != 0 && (in == NULL || out == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: NULL buffer", fn);
    if (in == out && batch * seq * width != 0 && tp->size > 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: in and out are the same buffer", fn);
    size_t count = batch * r.count * width;
    if (count != 0 && tp->size == 1)
        memmove(out, in, count * *elem);
    *rows_local = r.count;
    *done = count == 0 || tp->size == 1;
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

/* The sequence all-gather (gather: in local, out full) or reduce-scatter (in full, out local). */
static mesh_status_t sp_exchange(mesh_tp_h tp, const void *in, void *out, size_t batch, size_t seq,
                                 size_t width, mesh_dtype_t dtype, const char *fn, int gather)
{
    size_t e = 0, sl = 0;
    int done = 1;
    MESH_PAR_CHECK(sp_shape(tp, in, out, batch, seq, width, dtype, fn, &e, &sl, &done));
    if (done)
        return MESH_OK;
    size_t count = batch * sl * width;
    void *scratch = NULL;
    if (batch > 1)
        MESH_PAR_CHECK(mesh_tp_scratch(tp, 0, count * e * (size_t)tp->size, &scratch));
    mesh_status_t st;
    if (gather) {
        st = mesh_allgather(tp->comm, in, scratch ? scratch : out, count, dtype, NULL, NULL);
        if (st == MESH_OK && scratch)
            sp_permute(scratch, out, batch, tp->size, sl * width * e, 0);
    } else {
        if (scratch)
            sp_permute(in, scratch, batch, tp->size, sl * width * e, 1);
        st = mesh_reduce_scatter(tp->comm, scratch ? scratch : in, out, count, dtype, MESH_SUM,
                                 NULL, NULL);
    }
    return st == MESH_OK ? MESH_OK : mesh_par_fail(tp->comm, st, fn);
}

mesh_status_t mesh_tp_sp_gather_forward(mesh_tp_h tp, const void *local, void *full, size_t batch,
                                        size_t seq, size_t width, mesh_dtype_t dtype)
{
    return sp_exchange(tp, local, full, batch, seq, width, dtype, "mesh_tp_sp_gather_forward", 1);
}

mesh_status_t mesh_tp_sp_gather_backward(mesh_tp_h tp, const void *grad_full, void *grad_local,
                                         size_t batch, size_t seq, size_t width, mesh_dtype_t dtype)
{
    return sp_exchange(tp, grad_full, grad_local, batch, seq, width, dtype,
                       "mesh_tp_sp_gather_backward", 0);
}

mesh_status_t mesh_tp_sp_scatter_forward(mesh_tp_h tp, const void *full, void *local, size_t batch,
                                         size_t seq, size_t width, mesh_dtype_t dtype)
{
    return sp_exchange(tp, full, local, batch, seq, width, dtype, "mesh_tp_sp_scatter_forward", 0);
}

mesh_status_t mesh_tp_sp_scatter_backward(mesh_tp_h tp, const void *grad_local, void *grad_full,
                                          size_t batch, size_t seq, size_t width,
                                          mesh_dtype_t dtype)
{
    return sp_exchange(tp, grad_local, grad_full, batch, seq, width, dtype,
                       "mesh_tp_sp_scatter_backward", 1);
}

#define TP_SP(tp) ((tp) != NULL && ((tp)->flags & MESH_TP_SEQUENCE_PARALLEL))

/* The ends of the tp region: the sequence collective under sequence parallelism, else the
 * conjugate operator over every element. */
#define TP_END(name, sp, whole)                                                                    \
    mesh_status_t name(mesh_tp_h tp, const void *in, void *out, size_t batch, size_t seq,          \
                       size_t width, mesh_dtype_t dtype)                                           \
    {                                                                                              \
        if (TP_SP(tp))                                                                             \
            return sp(tp, in, out, batch, seq, width, dtype);                                      \
        return whole(tp, in, out, batch * seq * width, dtype);                                     \
    }

TP_END(mesh_tp_enter_forward, mesh_tp_sp_gather_forward, mesh_tp_copy_forward)
TP_END(mesh_tp_enter_backward, mesh_tp_sp_gather_backward, mesh_tp_copy_backward)
TP_END(mesh_tp_exit_forward, mesh_tp_sp_scatter_forward, mesh_tp_reduce_forward)
TP_END(mesh_tp_exit_backward, mesh_tp_sp_scatter_backward, mesh_tp_reduce_backward)

mesh_status_t mesh_tp_replicated_grad(mesh_tp_h tp, void *grad, size_t count, mesh_dtype_t dtype)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_replicated_grad"));
    if (!TP_SP(tp))
        return MESH_OK;
    return tp_allreduce(tp, grad, grad, count, dtype, "mesh_tp_replicated_grad");
}
