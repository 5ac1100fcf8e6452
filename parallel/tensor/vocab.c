/* Vocabulary-parallel embedding and cross-entropy: each tp rank owns vocab / tp consecutive
 * entries of the token table and the same columns of the logits. */
#include "tp.h"

#include <float.h>
#include <math.h>
#include <string.h>

static mesh_status_t vocab_range(mesh_tp_h tp, size_t vocab, const char *fn, mesh_tp_range_t *r)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, fn));
    if (vocab == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: vocab is 0", fn);
    if (mesh_tp_split(vocab, tp->size, tp->rank, "vocab", r) != MESH_OK)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s", fn, mesh_comm_last_error(NULL));
    return MESH_OK;
}

static mesh_status_t check_tokens(const int32_t *tokens, size_t n, size_t vocab, const char *fn,
                                  const char *what)
{
    if (n && tokens == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (size_t)tokens[i] >= vocab)
            return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s[%zu]=%d is outside vocab 0..%zu",
                                  fn, what, i, (int)tokens[i], vocab - 1);
    return MESH_OK;
}

mesh_status_t mesh_tp_embedding_forward(mesh_tp_h tp, const int32_t *tokens, size_t batch,
                                        size_t seq, const float *weight, size_t vocab, size_t width,
                                        float *out)
{
    static const char fn[] = "mesh_tp_embedding_forward";
    mesh_tp_range_t r, sr;
    MESH_PAR_CHECK(vocab_range(tp, vocab, fn, &r));
    MESH_PAR_CHECK(mesh_tp_seq_shard(tp, seq, &sr));
    size_t n = batch * seq;
    MESH_PAR_CHECK(check_tokens(tokens, n, vocab, fn, "tokens"));
    if (n * width != 0 && (weight == NULL || out == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                              weight == NULL ? "weight" : "out");
    float *rows;
    MESH_PAR_CHECK(mesh_tp_scratch(tp, 1, n * width * sizeof(float), (void **)&rows));
    for (size_t i = 0; i < n; i++) {
        size_t t = (size_t)tokens[i];
        float *o = rows + i * width;
        if (t >= r.start && t < r.start + r.count)
            memcpy(o, weight + (t - r.start) * width, width * sizeof(float));
        else
            memset(o, 0, width * sizeof(float));
    }
    return mesh_tp_exit_forward(tp, rows, out, batch, seq, width, MESH_FP32);
}

mesh_status_t mesh_tp_embedding_backward(mesh_tp_h tp, const int32_t *tokens, size_t batch,
                                         size_t seq, const float *grad_out, size_t vocab,
                                         size_t width, float *grad_weight)
{
    static const char fn[] = "mesh_tp_embedding_backward";
    mesh_tp_range_t r;
    MESH_PAR_CHECK(vocab_range(tp, vocab, fn, &r));
    size_t n = batch * seq;
    MESH_PAR_CHECK(check_tokens(tokens, n, vocab, fn, "tokens"));
    if (n * width != 0 && (grad_out == NULL || grad_weight == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                              grad_out == NULL ? "grad_out" : "grad_weight");
    float *rows;
    MESH_PAR_CHECK(mesh_tp_scratch(tp, 1, n * width * sizeof(float), (void **)&rows));
    MESH_PAR_CHECK(mesh_tp_exit_backward(tp, grad_out, rows, batch, seq, width, MESH_FP32));
    for (size_t i = 0; i < n; i++) {
        size_t t = (size_t)tokens[i];
        if (t < r.start || t >= r.start + r.count)
            continue;
        float *g = grad_weight + (t - r.start) * width;
        const float *d = rows + i * width;
        for (size_t c = 0; c < width; c++)
            g[c] += d[c];
    }
    return MESH_OK;
}

mesh_status_t mesh_tp_cross_entropy_forward(mesh_tp_h tp, const float *logits, size_t rows,
                                            size_t vocab, const int32_t *targets, float *loss,
                                            float *lse)
{
    static const char fn[] = "mesh_tp_cross_entropy_forward";
    mesh_tp_range_t r;
    MESH_PAR_CHECK(vocab_range(tp, vocab, fn, &r));
    MESH_PAR_CHECK(check_tokens(targets, rows, vocab, fn, "targets"));
    if (rows && (logits == NULL || loss == NULL || lse == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: NULL logits, loss or lse", fn);
    if (rows == 0)
        return MESH_OK;
    /* [0, rows): the sums of exponentials, [rows, 2 rows): target logits (reduced together),
     * [2 rows, 3 rows): row maxima */
    float *buf, *mx;
    MESH_PAR_CHECK(mesh_tp_scratch(tp, 1, 3 * rows * sizeof(float), (void **)&buf));
    mx = buf + 2 * rows;
    size_t vl = r.count;
    for (size_t i = 0; i < rows; i++) {
        const float *l = logits + i * vl;
        float m = -FLT_MAX;
        for (size_t v = 0; v < vl; v++)
            m = l[v] > m ? l[v] : m;
        mx[i] = m;
    }
    mesh_status_t st = MESH_OK;
    if (tp->size > 1)
        st = mesh_allreduce(tp->comm, mx, mx, rows, MESH_FP32, MESH_MAX, NULL, NULL);
    if (st != MESH_OK)
        return mesh_par_fail(tp->comm, st, fn);
    for (size_t i = 0; i < rows; i++) {
        const float *l = logits + i * vl;
        double s = 0;
        for (size_t v = 0; v < vl; v++)
            s += exp((double)l[v] - mx[i]);
        size_t t = (size_t)targets[i];
        buf[rows + i] = (t >= r.start && t < r.start + vl) ? l[t - r.start] : 0.0f;
        buf[i] = (float)s;
    }
    if (tp->size > 1)
        st = mesh_allreduce(tp->comm, buf, buf, 2 * rows, MESH_FP32, MESH_SUM, NULL, NULL);
    if (st != MESH_OK)
        return mesh_par_fail(tp->comm, st, fn);
    for (size_t i = 0; i < rows; i++) {
        lse[i] = (float)((double)mx[i] + log((double)buf[i]));
        loss[i] = lse[i] - buf[rows + i];
    }
    return MESH_OK;
}

mesh_status_t mesh_tp_cross_entropy_backward(mesh_tp_h tp, const float *logits, size_t rows,
                                             size_t vocab, const int32_t *targets, const float *lse,
                                             const float *grad_loss, float *grad_logits)
{
    static const char fn[] = "mesh_tp_cross_entropy_backward";
    mesh_tp_range_t r;
    MESH_PAR_CHECK(vocab_range(tp, vocab, fn, &r));
    MESH_PAR_CHECK(check_tokens(targets, rows, vocab, fn, "targets"));
    if (rows && (logits == NULL || lse == NULL || grad_loss == NULL || grad_logits == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: NULL logits, lse, grad_loss or grad_logits", fn);
    size_t vl = r.count;
    for (size_t i = 0; i < rows; i++) {
        const float *l = logits + i * vl;
        float *g = grad_logits + i * vl;
        size_t t = (size_t)targets[i];
        for (size_t v = 0; v < vl; v++) {
            float p = expf(l[v] - lse[i]);
            g[v] = (p - (r.start + v == t ? 1.0f : 0.0f)) * grad_loss[i];
        }
    }
    return MESH_OK;
}
