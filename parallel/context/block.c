/* The attention's math on one block of keys: the online-softmax merge of the forward pass and
 * the gradients of the backward pass, under the causal mask of global positions. No
 * communication; the ring and the all-gather variant both run their blocks through here. */
#include "cp.h"

#include <math.h>
#include <string.h>

void mesh_cp_pack(const mesh_cp_dims_t *d, const float *k, const float *v, float *kv)
{
    size_t rows = d->batch * d->local;
    for (size_t r = 0; r < rows; r++) {
        memcpy(kv + r * d->width, k + r * d->stride, d->width * sizeof(float));
        memcpy(kv + d->block + r * d->width, v + r * d->stride, d->width * sizeof(float));
    }
}

void mesh_cp_unpack(const mesh_cp_dims_t *d, const float *kv, float *k, float *v)
{
    size_t rows = d->batch * d->local;
    for (size_t r = 0; r < rows; r++) {
        memcpy(k + r * d->stride, kv + r * d->width, d->width * sizeof(float));
        memcpy(v + r * d->stride, kv + d->block + r * d->width, d->width * sizeof(float));
    }
}

void mesh_cp_store(const mesh_cp_dims_t *d, const float *rows, float *dst)
{
    size_t n = d->batch * d->local;
    for (size_t r = 0; r < n; r++)
        memcpy(dst + r * d->stride, rows + r * d->width, d->width * sizeof(float));
}

void mesh_cp_forward_init(const mesh_cp_dims_t *d, float *acc, float *m, float *l)
{
    size_t n = d->batch * (size_t)d->heads * d->local;
    memset(acc, 0, d->block * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
}

/* The keys of chunk kc that query position pos sees: 0 when the chunk lies after it. */
static size_t visible(const mesh_cp_range_t *kc, size_t pos)
{
    if (pos < kc->start)
        return 0;
    size_t n = pos - kc->start + 1;
    return n < kc->count ? n : kc->count;
}

static float dot(const float *a, const float *b, size_t n)
{
    float s = 0.0f;
    for (size_t e = 0; e < n; e++)
        s += a[e] * b[e];
    return s;
}

/* One query row and head against the first nk keys of a chunk starting at packed row krow. */
static void forward_row(const mesh_cp_dims_t *d, const float *qi, const float *kv, size_t krow,
                        size_t nk, size_t h, float *o, float *m, float *l, float *tmp)
{
    const size_t hd = d->head_dim;
    float mx = -INFINITY;
    for (size_t j = 0; j < nk; j++) {
        tmp[j] = d->scale * dot(qi, kv + (krow + j) * d->width + h * hd, hd);
        mx = tmp[j] > mx ? tmp[j] : mx;
    }
    float mnew = *m > mx ? *m : mx;
    float alpha = expf(*m - mnew); /* 0 while nothing was seen (m = -inf) */
    float sum = 0.0f;
    for (size_t e = 0; e < hd; e++)
        o[e] *= alpha;
    for (size_t j = 0; j < nk; j++) {
        float p = expf(tmp[j] - mnew);
        const float *vj = kv + d->block + (krow + j) * d->width + h * hd;
        sum += p;
        for (size_t e = 0; e < hd; e++)
            o[e] += p * vj[e];
    }
    *l = *l * alpha + sum;
    *m = mnew;
}

void mesh_cp_forward_block(const mesh_cp_dims_t *d, const float *q, const mesh_cp_rows_t *qr,
                           const float *kv, const mesh_cp_rows_t *kr, float *acc, float *m,
                           float *l, float *tmp)
{
    for (size_t b = 0; b < d->batch; b++)
        for (int qc = 0; qc < qr->n; qc++)
            for (int kc = 0; kc < kr->n; kc++) {
                const mesh_cp_range_t *qch = &qr->chunk[qc], *kch = &kr->chunk[kc];
                if (kch->start >= qch->start + qch->count)
                    continue; /* the whole chunk lies in these queries' future */
                size_t krow = b * d->local + kr->offset[kc];
                for (size_t i = 0; i < qch->count; i++) {
                    size_t nk = visible(kch, qch->start + i);
                    if (nk == 0)
                        continue;
                    size_t row = qr->offset[qc] + i, qrow = b * d->local + row;
                    for (int h = 0; h < d->heads; h++) {
                        size_t si = (b * (size_t)d->heads + (size_t)h) * d->local + row;
                        forward_row(d, q + qrow * d->stride + (size_t)h * d->head_dim, kv, krow, nk,
                                    (size_t)h, acc + qrow * d->width + (size_t)h * d->head_dim,
                                    &m[si], &l[si], tmp);
                    }
                }
            }
}

void mesh_cp_forward_finish(const mesh_cp_dims_t *d, const float *acc, const float *m,
                            const float *l, float *out, float *lse)
{
    for (size_t b = 0; b < d->batch; b++)
        for (int h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->local; i++) {
                size_t si = (b * (size_t)d->heads + (size_t)h) * d->local + i;
                size_t c = (b * d->local + i) * d->width + (size_t)h * d->head_dim;
                float inv = 1.0f / l[si];
                for (size_t e = 0; e < d->head_dim; e++)
                    out[c + e] = acc[c + e] * inv;
                lse[si] = m[si] + logf(l[si]);
            }
}

void mesh_cp_backward_init(const mesh_cp_dims_t *d, const float *out, const float *dout,
                           float *delta, float *dq)
{
    for (size_t b = 0; b < d->batch; b++)
        for (size_t i = 0; i < d->local; i++) {
            size_t row = b * d->local + i;
            memset(dq + row * d->width, 0, d->width * sizeof(float));
            for (int h = 0; h < d->heads; h++) {
                size_t c = row * d->width + (size_t)h * d->head_dim;
                delta[(b * (size_t)d->heads + (size_t)h) * d->local + i] =
                    dot(out + c, dout + c, d->head_dim);
            }
        }
}

/* One query row and head against the first nk keys of a chunk starting at packed row krow:
 * p = exp(s - lse), ds = p (dout.v - delta); dq += scale ds k, dk += scale ds q, dv += p dout. */
static void backward_row(const mesh_cp_dims_t *d, const float *qi, const float *doi, float lse,
                         float delta, const float *kv, size_t krow, size_t nk, size_t h, float *dqi,
                         float *dkv)
{
    const size_t hd = d->head_dim;
    for (size_t j = 0; j < nk; j++) {
        size_t c = (krow + j) * d->width + h * hd;
        const float *kj = kv + c, *vj = kv + d->block + c;
        float p = expf(d->scale * dot(qi, kj, hd) - lse);
        float ds = p * (dot(doi, vj, hd) - delta) * d->scale;
        float *dkj = dkv + c, *dvj = dkv + d->block + c;
        for (size_t e = 0; e < hd; e++) {
            dqi[e] += ds * kj[e];
            dkj[e] += ds * qi[e];
            dvj[e] += p * doi[e];
        }
    }
}

void mesh_cp_backward_block(const mesh_cp_dims_t *d, const float *q, const mesh_cp_rows_t *qr,
                            const float *dout, const float *lse, const float *delta,
                            const float *kv, const mesh_cp_rows_t *kr, float *dq, float *dkv)
{
    for (size_t b = 0; b < d->batch; b++)
        for (int qc = 0; qc < qr->n; qc++)
            for (int kc = 0; kc < kr->n; kc++) {
                const mesh_cp_range_t *qch = &qr->chunk[qc], *kch = &kr->chunk[kc];
                if (kch->start >= qch->start + qch->count)
                    continue;
                size_t krow = b * d->local + kr->offset[kc];
                for (size_t i = 0; i < qch->count; i++) {
                    size_t nk = visible(kch, qch->start + i);
                    if (nk == 0)
                        continue;
                    size_t row = qr->offset[qc] + i, qrow = b * d->local + row;
                    for (int h = 0; h < d->heads; h++) {
                        size_t si = (b * (size_t)d->heads + (size_t)h) * d->local + row;
                        size_t c = qrow * d->width + (size_t)h * d->head_dim;
                        backward_row(d, q + qrow * d->stride + (size_t)h * d->head_dim, dout + c,
                                     lse[si], delta[si], kv, krow, nk, (size_t)h, dq + c, dkv);
                    }
                }
            }
}
