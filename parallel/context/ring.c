/* Ring attention: every rank's K/V block travels round the cp ring (to rank + 1, from rank - 1)
 * while the block at hand is computed. After s steps a rank holds the block of rank - s.
 * Forward merges the blocks with the online softmax; backward sends each block's dK/dV
 * accumulator round behind it, each rank adding its queries' part, so that after cp steps the
 * sums arrive at their owners. */
#include "cp.h"

#include <string.h>

/* Waits for and frees *req (when there is one). */
static mesh_status_t finish(mesh_cp_h cp, mesh_request_h *req, const char *what)
{
    if (*req == NULL)
        return MESH_OK;
    mesh_status_t st = mesh_wait(*req);
    mesh_request_free(*req);
    *req = NULL;
    return st == MESH_OK ? MESH_OK : mesh_par_fail(cp->comm, st, what);
}

/* After a failure: waits for and frees *req without recording its status over the first. */
static void drop(mesh_request_h *req)
{
    if (*req == NULL)
        return;
    (void)mesh_wait(*req);
    mesh_request_free(*req);
    *req = NULL;
}

/* Sends count floats of sbuf to the next rank and receives as many from the previous one into
 * rbuf; nonblocking (*req) unless the handle turned overlap off. */
static mesh_status_t pass(mesh_cp_h cp, const float *sbuf, float *rbuf, size_t count, int tag,
                          mesh_request_h *req, const char *what)
{
    int next = (cp->rank + 1) % cp->size, prev = (cp->rank + cp->size - 1) % cp->size;
    int overlap = !(cp->flags & MESH_CP_NO_OVERLAP);
    mesh_status_t st = mesh_sendrecv(cp->comm, sbuf, count, next, rbuf, count, prev, MESH_FP32, tag,
                                     NULL, overlap ? req : NULL);
    return st == MESH_OK ? MESH_OK : mesh_par_fail(cp->comm, st, what);
}

mesh_status_t mesh_cp_ring_forward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                   const float *k, const float *v, float *out, float *lse)
{
    const size_t kvn = 2 * d->block, state = d->batch * (size_t)d->heads * d->local;
    float *kv[2] = {NULL, NULL}, *acc, *m, *l, *tmp;
    MESH_PAR_CHECK(mesh_cp_scratch(cp, (2 * kvn + d->block + 2 * state + d->local) * sizeof(float),
                                   (void **)&kv[0]));
    kv[1] = kv[0] + kvn;
    acc = kv[1] + kvn;
    m = acc + d->block;
    l = m + state;
    tmp = l + state;
    mesh_cp_rows_t qr;
    mesh_cp_rows(cp, cp->rank, d->seq, &qr);
    mesh_cp_pack(d, k, v, kv[0]);
    mesh_cp_forward_init(d, acc, m, l);
    mesh_request_h req = NULL;
    mesh_status_t st = MESH_OK;
    for (int s = 0, cur = 0; s < cp->size; s++, cur ^= 1) {
        if (s + 1 < cp->size) {
            st = pass(cp, kv[cur], kv[cur ^ 1], kvn, cp->tag, &req,
                      "mesh_cp_attention_forward: K/V to the next cp rank");
            if (st != MESH_OK)
                return st;
        }
        mesh_cp_rows_t kr;
        mesh_cp_rows(cp, (cp->rank + cp->size - s) % cp->size, d->seq, &kr);
        mesh_cp_forward_block(d, q, &qr, kv[cur], &kr, acc, m, l, tmp);
        st = finish(cp, &req, "mesh_cp_attention_forward: K/V from the previous cp rank");
        if (st != MESH_OK)
            return st;
    }
    mesh_cp_forward_finish(d, acc, m, l, out, lse);
    return MESH_OK;
}

mesh_status_t mesh_cp_ring_backward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                    const float *k, const float *v, const float *out,
                                    const float *lse, const float *dout, float *dq, float *dk,
                                    float *dv)
{
    const size_t kvn = 2 * d->block, state = d->batch * (size_t)d->heads * d->local;
    float *kv[2] = {NULL, NULL}, *part[2], *in, *dqb, *delta;
    MESH_PAR_CHECK(
        mesh_cp_scratch(cp, (5 * kvn + d->block + state) * sizeof(float), (void **)&kv[0]));
    kv[1] = kv[0] + kvn;
    part[0] = kv[1] + kvn;
    part[1] = part[0] + kvn;
    in = part[1] + kvn;
    dqb = in + kvn;
    delta = dqb + d->block;
    mesh_cp_rows_t qr;
    mesh_cp_rows(cp, cp->rank, d->seq, &qr);
    mesh_cp_pack(d, k, v, kv[0]);
    mesh_cp_backward_init(d, out, dout, delta, dqb);
    mesh_request_h rkv = NULL, rd = NULL;
    mesh_status_t st = MESH_OK;
    int cur = 0;
    for (int s = 0; s < cp->size; s++, cur ^= 1) {
        if (s + 1 < cp->size) {
            st = pass(cp, kv[cur], kv[cur ^ 1], kvn, cp->tag, &rkv,
                      "mesh_cp_attention_backward: K/V to the next cp rank");
            if (st != MESH_OK)
                goto err;
        }
        mesh_cp_rows_t kr;
        mesh_cp_rows(cp, (cp->rank + cp->size - s) % cp->size, d->seq, &kr);
        memset(part[cur], 0, kvn * sizeof(float));
        mesh_cp_backward_block(d, q, &qr, dout, lse, delta, kv[cur], &kr, dqb, part[cur]);
        if (s > 0) {
            /* the sums of the ranks before this one for the block at hand */
            st = finish(cp, &rd, "mesh_cp_attention_backward: dK/dV from the previous cp rank");
            if (st != MESH_OK)
                goto err;
            for (size_t i = 0; i < kvn; i++)
                part[cur][i] += in[i];
        }
        if (cp->size > 1) {
            /* on to the next rank; after the last step that is the block's owner */
            st = pass(cp, part[cur], in, kvn, cp->tag + 1, &rd,
                      "mesh_cp_attention_backward: dK/dV to the next cp rank");
            if (st != MESH_OK)
                goto err;
        }
        st = finish(cp, &rkv, "mesh_cp_attention_backward: K/V from the previous cp rank");
        if (st != MESH_OK)
            goto err;
    }
    st = finish(cp, &rd, "mesh_cp_attention_backward: dK/dV of this rank's block");
    if (st != MESH_OK)
        return st;
    mesh_cp_store(d, dqb, dq);
    mesh_cp_unpack(d, cp->size > 1 ? in : part[0], dk, dv);
    return MESH_OK;
err:
    /* leave no operation behind on the communicator's buffers */
    drop(&rkv);
    drop(&rd);
    return st;
}
