/* The layers of the GPT: each a _forward/_backward pair of small functions over flat fp32 arrays.
 * Matrix products go to sgemm (OpenBLAS, one thread per rank). */
#include "gpt.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void gpt_matmul_forward(gpt_real *out, const gpt_real *in, const gpt_real *w, const gpt_real *bias,
                        int n, int ic, int oc)
{
    GPT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, oc, ic, 1.0f, in, ic, w, ic, 0.0f, out,
             oc);
    if (bias)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < oc; o++)
                out[(size_t)i * oc + o] += bias[o];
}

void gpt_matmul_backward(gpt_real *din, gpt_real *dw, gpt_real *dbias, const gpt_real *dout,
                         const gpt_real *in, const gpt_real *w, int n, int ic, int oc,
                         int accumulate)
{
    if (din)
        GPT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, ic, oc, 1.0f, dout, oc, w, ic,
                 accumulate ? 1.0f : 0.0f, din, ic);
    if (dw)
        GPT_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, oc, ic, n, 1.0f, dout, oc, in, ic, 1.0f,
                 dw, ic);
    if (dbias)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < oc; o++)
                dbias[o] += dout[(size_t)i * oc + o];
}

void gpt_layernorm_forward(gpt_real *out, gpt_real *mean, gpt_real *rstd, const gpt_real *in,
                           const gpt_real *w, const gpt_real *b, int n, int c)
{
    for (int i = 0; i < n; i++) {
        const gpt_real *x = in + (size_t)i * c;
        double m = 0, v = 0;
        for (int k = 0; k < c; k++)
            m += x[k];
        m /= c;
        for (int k = 0; k < c; k++)
            v += (x[k] - m) * (x[k] - m);
        gpt_real s = (gpt_real)(1.0 / sqrt(v / c + 1e-5));
        gpt_real *o = out + (size_t)i * c;
        for (int k = 0; k < c; k++)
            o[k] = ((x[k] - (gpt_real)m) * s) * w[k] + b[k];
        mean[i] = (gpt_real)m;
        rstd[i] = s;
    }
}

void gpt_layernorm_backward(gpt_real *din, gpt_real *dw, gpt_real *db, const gpt_real *dout,
                            const gpt_real *in, const gpt_real *w, const gpt_real *mean,
                            const gpt_real *rstd, int n, int c)
{
    for (int i = 0; i < n; i++) {
        const gpt_real *x = in + (size_t)i * c, *d = dout + (size_t)i * c;
        gpt_real *dx = din + (size_t)i * c;
        double dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int k = 0; k < c; k++) {
            gpt_real norm = (x[k] - mean[i]) * rstd[i];
            gpt_real dn = w[k] * d[k];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * norm;
        }
        dnorm_mean /= c;
        dnorm_norm_mean /= c;
        for (int k = 0; k < c; k++) {
            gpt_real norm = (x[k] - mean[i]) * rstd[i];
            gpt_real dn = w[k] * d[k];
            if (dw) {
                db[k] += d[k];
                dw[k] += norm * d[k];
            }
            dx[k] += (gpt_real)((dn - dnorm_mean - norm * dnorm_norm_mean) * rstd[i]);
        }
    }
}

void gpt_layernorm_wgrad(gpt_real *dw, gpt_real *db, const gpt_real *dout, const gpt_real *in,
                         const gpt_real *mean, const gpt_real *rstd, int n, int c)
{
    for (int i = 0; i < n; i++) {
        const gpt_real *x = in + (size_t)i * c, *d = dout + (size_t)i * c;
        for (int k = 0; k < c; k++) {
            gpt_real norm = (x[k] - mean[i]) * rstd[i];
            db[k] += d[k];
            dw[k] += norm * d[k];
        }
    }
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

void gpt_gelu_forward(gpt_real *out, const gpt_real *in, int n)
{
    for (int i = 0; i < n; i++) {
        gpt_real x = in[i];
        out[i] = 0.5f * x * (1.0f + GPT_TANH(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

void gpt_gelu_backward(gpt_real *din, const gpt_real *in, const gpt_real *dout, int n)
{
    for (int i = 0; i < n; i++) {
        gpt_real x = in[i];
        gpt_real u = GELU_SCALE * (x + 0.044715f * x * x * x);
        gpt_real th = GPT_TANH(u);
        gpt_real sech2 = 1.0f - th * th;
        gpt_real g =
            0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3 * 0.044715f * x * x);
        din[i] = g * dout[i];
    }
}

void gpt_attention_forward(gpt_real *out, gpt_real *att, const gpt_real *qkv, int b, int t, int hl,
                           int hs)
{
    int cl = hl * hs, c3 = 3 * cl;
    gpt_real scale = 1.0f / GPT_SQRT((gpt_real)hs);
    for (int s = 0; s < b; s++)
        for (int h = 0; h < hl; h++)
            for (int i = 0; i < t; i++) {
                const gpt_real *q = qkv + ((size_t)s * t + i) * c3 + h * hs;
                gpt_real *a = att + (((size_t)s * hl + h) * t + i) * t;
                gpt_real mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const gpt_real *k = qkv + ((size_t)s * t + j) * c3 + cl + h * hs;
                    gpt_real d = 0;
                    for (int e = 0; e < hs; e++)
                        d += q[e] * k[e];
                    a[j] = d * scale;
                    mx = a[j] > mx ? a[j] : mx;
                }
                gpt_real sum = 0;
                for (int j = 0; j <= i; j++)
                    sum += (a[j] = GPT_EXP(a[j] - mx));
                for (int j = 0; j <= i; j++)
                    a[j] /= sum;
                for (int j = i + 1; j < t; j++)
                    a[j] = 0;
                gpt_real *o = out + ((size_t)s * t + i) * cl + h * hs;
                memset(o, 0, hs * sizeof(gpt_real));
                for (int j = 0; j <= i; j++) {
                    const gpt_real *v = qkv + ((size_t)s * t + j) * c3 + 2 * cl + h * hs;
                    for (int e = 0; e < hs; e++)
                        o[e] += a[j] * v[e];
                }
            }
}

void gpt_attention_backward(gpt_real *dqkv, gpt_real *datt, const gpt_real *dout,
                            const gpt_real *qkv, const gpt_real *att, int b, int t, int hl, int hs)
{
    int cl = hl * hs, c3 = 3 * cl;
    gpt_real scale = 1.0f / GPT_SQRT((gpt_real)hs);
    memset(dqkv, 0, (size_t)b * t * c3 * sizeof(gpt_real));
    for (int s = 0; s < b; s++)
        for (int h = 0; h < hl; h++)
            for (int i = 0; i < t; i++) {
                const gpt_real *a = att + (((size_t)s * hl + h) * t + i) * t;
                const gpt_real *d = dout + ((size_t)s * t + i) * cl + h * hs;
                const gpt_real *q = qkv + ((size_t)s * t + i) * c3 + h * hs;
                gpt_real *dq = dqkv + ((size_t)s * t + i) * c3 + h * hs;
                /* through out = att v */
                for (int j = 0; j <= i; j++) {
                    const gpt_real *v = qkv + ((size_t)s * t + j) * c3 + 2 * cl + h * hs;
                    gpt_real *dv = dqkv + ((size_t)s * t + j) * c3 + 2 * cl + h * hs;
                    gpt_real da = 0;
                    for (int e = 0; e < hs; e++) {
                        da += d[e] * v[e];
                        dv[e] += a[j] * d[e];
                    }
                    datt[j] = da;
                }
                /* through the softmax: dpre = att (datt - sum(att datt)) */
                gpt_real dot = 0;
                for (int j = 0; j <= i; j++)
                    dot += a[j] * datt[j];
                for (int j = 0; j <= i; j++) {
                    gpt_real dpre = a[j] * (datt[j] - dot) * scale;
                    const gpt_real *k = qkv + ((size_t)s * t + j) * c3 + cl + h * hs;
                    gpt_real *dk = dqkv + ((size_t)s * t + j) * c3 + cl + h * hs;
                    for (int e = 0; e < hs; e++) {
                        dq[e] += dpre * k[e];
                        dk[e] += dpre * q[e];
                    }
                }
            }
}

void gpt_embed_forward(gpt_real *out, const int32_t *tokens, const gpt_real *wte, int n, int c)
{
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * c, wte + (size_t)tokens[i] * c, c * sizeof(gpt_real));
}

void gpt_embed_backward(gpt_real *dwte, const int32_t *tokens, const gpt_real *dout, int n, int c)
{
    for (int i = 0; i < n; i++) {
        gpt_real *g = dwte + (size_t)tokens[i] * c;
        const gpt_real *d = dout + (size_t)i * c;
        for (int k = 0; k < c; k++)
            g[k] += d[k];
    }
}

void gpt_ce_forward(gpt_real *loss, gpt_real *lse, const gpt_real *logits, const int32_t *targets,
                    int n, int v)
{
    for (int i = 0; i < n; i++) {
        const gpt_real *l = logits + (size_t)i * v;
        gpt_real mx = -INFINITY;
        for (int k = 0; k < v; k++)
            mx = l[k] > mx ? l[k] : mx;
        double s = 0;
        for (int k = 0; k < v; k++)
            s += exp((double)l[k] - mx);
        lse[i] = (gpt_real)((double)mx + log(s));
        loss[i] = lse[i] - l[targets[i]];
    }
}

void gpt_ce_backward(gpt_real *dlogits, const gpt_real *logits, const int32_t *targets,
                     const gpt_real *lse, const gpt_real *dloss, int n, int v)
{
    for (int i = 0; i < n; i++) {
        const gpt_real *l = logits + (size_t)i * v;
        gpt_real *d = dlogits + (size_t)i * v;
        for (int k = 0; k < v; k++)
            d[k] = (GPT_EXP(l[k] - lse[i]) - (k == targets[i] ? 1.0f : 0.0f)) * dloss[i];
    }
}
