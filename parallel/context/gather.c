/* All-gather attention: every rank gathers the K/V blocks of all cp ranks and attends its
 * queries to the whole sequence (the blocks in the future of every local query are skipped).
 * The backward pass gathers them again, computes each block's dK/dV part and reduce-scatters
 * the parts, so each rank receives the sums for its own block. */
#include "cp.h"

#include <string.h>

/* all: cp blocks of 2 * block floats, this rank's packed then gathered in place. */
static mesh_status_t gather(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *k, const float *v,
                            float *all, const char *fn)
{
    const size_t kvn = 2 * d->block;
    float *own = all + (size_t)cp->rank * kvn;
    mesh_cp_pack(d, k, v, own);
    if (cp->size == 1)
        return MESH_OK;
    mesh_status_t st = mesh_allgather(cp->comm, own, all, kvn, MESH_FP32, NULL, NULL);
    return st == MESH_OK ? MESH_OK : mesh_par_fail(cp->comm, st, fn);
}

mesh_status_t mesh_cp_gather_forward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                     const float *k, const float *v, float *out, float *lse)
{
    const size_t kvn = 2 * d->block, state = d->batch * (size_t)d->heads * d->local;
    const size_t n = (size_t)cp->size;
    float *all = NULL, *acc, *m, *l, *tmp;
    MESH_PAR_CHECK(mesh_cp_scratch(cp, (n * kvn + d->block + 2 * state + d->local) * sizeof(float),
                                   (void **)&all));
    acc = all + n * kvn;
    m = acc + d->block;
    l = m + state;
    tmp = l + state;
    MESH_PAR_CHECK(
        gather(cp, d, k, v, all, "mesh_cp_attention_forward: all-gather of K/V over cp"));
    mesh_cp_rows_t qr;
    mesh_cp_rows(cp, cp->rank, d->seq, &qr);
    mesh_cp_forward_init(d, acc, m, l);
    for (int r = 0; r < cp->size; r++) {
        mesh_cp_rows_t kr;
        mesh_cp_rows(cp, r, d->seq, &kr);
        mesh_cp_forward_block(d, q, &qr, all + (size_t)r * kvn, &kr, acc, m, l, tmp);
    }
    mesh_cp_forward_finish(d, acc, m, l, out, lse);
    return MESH_OK;
}

mesh_status_t mesh_cp_gather_backward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                      const float *k, const float *v, const float *out,
                                      const float *lse, const float *dout, float *dq, float *dk,
                                      float *dv)
{
    const size_t kvn = 2 * d->block, state = d->batch * (size_t)d->heads * d->local;
    const size_t n = (size_t)cp->size;
    float *all = NULL, *dall, *own, *dqb, *delta;
    MESH_PAR_CHECK(
        mesh_cp_scratch(cp, (2 * n * kvn + kvn + d->block + state) * sizeof(float), (void **)&all));
    dall = all + n * kvn;
    own = dall + n * kvn;
    dqb = own + kvn;
    delta = dqb + d->block;
    MESH_PAR_CHECK(
        gather(cp, d, k, v, all, "mesh_cp_attention_backward: all-gather of K/V over cp"));
    mesh_cp_rows_t qr;
    mesh_cp_rows(cp, cp->rank, d->seq, &qr);
    mesh_cp_backward_init(d, out, dout, delta, dqb);
    memset(dall, 0, n * kvn * sizeof(float));
    for (int r = 0; r < cp->size; r++) {
        mesh_cp_rows_t kr;
        mesh_cp_rows(cp, r, d->seq, &kr);
        mesh_cp_backward_block(d, q, &qr, dout, lse, delta, all + (size_t)r * kvn, &kr, dqb,
                               dall + (size_t)r * kvn);
    }
    if (cp->size > 1) {
        mesh_status_t st =
            mesh_reduce_scatter(cp->comm, dall, own, kvn, MESH_FP32, MESH_SUM, NULL, NULL);
        if (st != MESH_OK)
            return mesh_par_fail(cp->comm, st,
                                 "mesh_cp_attention_backward: reduce-scatter of dK/dV over cp");
    }
    mesh_cp_store(d, dqb, dq);
    mesh_cp_unpack(d, cp->size > 1 ? own : dall, dk, dv);
    return MESH_OK;
}
