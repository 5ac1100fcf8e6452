/* Optimizer arithmetic on one segment of the shard, in fp32, and the accessors of the arrays a
 * segment maps to. The formulas are torch.optim's (AdamW with decoupled weight decay and bias
 * correction folded into the step size; SGD with L2 weight decay and a momentum buffer that
 * starts as the first gradient). */
#include "zero_impl.h"
#include <math.h>

float *mesh_zero__master(const struct mesh_zero *z, const zero_seg_t *s)
{
    if (z->master)
        return z->master + s->lidx;
    /* fp32: the parameters are the master weights */
    if (z->stage == 3)
        return (float *)z->param_shard + s->lidx;
    return (float *)z->param + s->gidx;
}

const void *mesh_zero__grad_of(const struct mesh_zero *z, const zero_seg_t *s)
{
    /* stages 0-1 reduce in place in the full buffer; 2-3 fold into the shard */
    if (z->stage >= 2)
        return zero_at(z, z->grad_shard, s->lidx);
    return zero_at(z, z->grad, s->gidx);
}

void mesh_zero__write_params(struct mesh_zero *z, const zero_seg_t *s)
{
    if (z->master == NULL)
        return; /* fp32: updated in place */
    void *dst = z->stage == 3 ? zero_at(z, z->param_shard, s->lidx) : zero_at(z, z->param, s->gidx);
    const float *src = z->master + s->lidx;
    for (size_t i = 0; i < s->len; i++)
        zero_put(z, dst, i, src[i]);
}

/* g: gradients in the parameter dtype, multiplied by scale here. */
void mesh_zero__adamw(const struct mesh_zero *z, float *p, const void *g, float scale, float *m,
                      float *v, size_t n, double wd)
{
    float b1 = (float)z->beta1, b2 = (float)z->beta2, eps = (float)z->eps;
    double t = (double)z->step;
    double bc1 = z->bias_correction ? 1.0 - pow(z->beta1, t) : 1.0;
    double bc2 = z->bias_correction ? 1.0 - pow(z->beta2, t) : 1.0;
    float step_size = (float)(z->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float decay = (float)(1.0 - z->lr * wd);
    for (size_t i = 0; i < n; i++) {
        float gi = zero_get(z, g, i) * scale;
        float pi = p[i] * decay;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = pi - step_size * (m[i] / denom);
    }
}

void mesh_zero__sgd(const struct mesh_zero *z, float *p, const void *g, float scale, float *buf,
                    size_t n, double wd)
{
    float lr = (float)z->lr, mu = (float)z->momentum, decay = (float)wd;
    int first = z->step == 1;
    for (size_t i = 0; i < n; i++) {
        float gi = zero_get(z, g, i) * scale + decay * p[i];
        if (buf) {
            buf[i] = first ? gi : mu * buf[i] + gi;
            gi = buf[i];
        }
        p[i] -= lr * gi;
    }
}
