/* The synthetic model of the ZeRO tests and its single-process reference (see zero_model.h). */
#include "zero_model.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(zm_model_t *md, const char *name, int ndim, size_t d0, size_t d1, size_t d2,
                int group, unsigned flags, int key, int direct)
{
    zm_spec_t *t = &md->t[md->n++];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    t->numel = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    t->group = group;
    t->flags = flags;
    t->key = key;
    t->direct_init = direct;
}

void zm_model(zm_model_t *md, zm_mp_mode_t mode, int m, int mp, const char *variant, int big)
{
    (void)mp;
    md->n = 0;
    const unsigned nd = MESH_ZERO_NO_DECAY, rep = MESH_ZERO_REPLICATED, sh = MESH_ZERO_SHARED;
    if (mode == ZM_MP_TP) { /* every tp rank: its part of the matrices, copies of the norms */
        add(md, "emb", 2, 37, 11, 0, 0, 0, m, 0);
        add(md, "emb.ln", 1, 17, 0, 0, 0, rep | nd, -1, 1);
        add(md, "h1.w", 2, 19, 23, 0, 1, 0, m, 0);
        add(md, "h1.ln", 1, 129, 0, 0, 1, rep | nd, -1, 0);
        add(md, "h1.b", 1, 5, 0, 0, 1, nd, m, 1);
        add(md, "head", 1, 1031, 0, 0, 2, 0, m, 0);
        return;
    }
    if (mode == ZM_MP_PP) { /* two stages; the tied embedding on both */
        if (m == 0) {
            add(md, "tied", 2, 31, 9, 0, 0, sh, -1, 0);
            add(md, "blk0.w", 2, 19, 23, 0, 0, 0, -1, 1);
            add(md, "blk0.ln", 1, 129, 0, 0, 0, nd, -1, 0);
            add(md, "blk1.w", 3, 3, 5, 11, 1, 0, -1, 0);
        } else {
            add(md, "blk2.w", 1, 1031, 0, 0, 2, 0, -1, 0);
            add(md, "blk3.ln", 1, 65, 0, 0, 3, nd, -1, 1);
            add(md, "tied", 2, 31, 9, 0, 4, sh, -1, 0);
            add(md, "ln_f", 1, 33, 0, 0, 4, nd, -1, 0);
        }
        return;
    }
    int shape = strcmp(variant, "shape") == 0;
    add(md, "emb", 2, shape ? 11 : 37, shape ? 37 : 11, 0, 0, 0, -1, 0);
    add(md, "emb.b", 1, 13, 0, 0, 0, nd, -1, 1);
    add(md, "h1.w", 2, 19, 23, 0, 1, 0, -1, 0);
    add(md, "h1.b", 1, 5, 0, 0, 1, nd, -1, 0);
    add(md, "h1.ln", 1, 129, 0, 0, 1, nd, -1, 1);
    add(md, "h2.w", 3, 3, 5, 11, 2, 0, -1, 0);
    if (strcmp(variant, "missing") != 0)
        add(md, "h2.proj", 1, 1031, 0, 0, 2, 0, -1, 1);
    if (big)
        add(md, "big", 2, 512, 1001, 0, 2, 0, -1, 0);
    add(md, "head", 1, 2113, 0, 0, 3, 0, -1, 0);
    add(md, "head.s", 1, 1, 0, 0, 3, nd, -1, 0);
    if (strcmp(variant, "extra") == 0)
        add(md, "extra", 1, 7, 0, 0, 3, 0, -1, 0);
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t zm_base(const zm_spec_t *t, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = t->name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return mix(seed ^ h ^ ((uint64_t)(t->key + 1) << 48));
}

float zm_init(const zm_spec_t *t, uint64_t seed, size_t i)
{
    uint64_t x = mix(zm_base(t, seed) ^ 0x5eedull ^ mix(i));
    return (float)((double)(x >> 40) / 8388608.0 - 1.0);
}

void zm_sample(uint64_t base, long sample, size_t i, float *a, float *c)
{
    uint64_t x = mix(base ^ mix((uint64_t)sample * 0x100000001b3ull + i));
    double side = (mix(base ^ (i * 0x9e3779b97f4a7c15ull)) & 1) ? 1.0 : -1.0;
    *a = (float)(0.5 + (double)(x >> 40) / 16777216.0);
    *c = (float)(side * (2.0 + (double)(x & 0xffffffu) / 16777216.0));
}

float zm_round_bf16(float x)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = x};
    v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;
    return v.f;
}

int zm_ref_init(zm_ref_t *r, const zm_conf_t *c, zm_mp_mode_t mode, int mp, const char *variant,
                int big)
{
    memset(r, 0, sizeof(*r));
    r->c = *c;
    r->mp = mp;
    for (int m = 0; m < mp; m++) {
        zm_model(&r->md[m], mode, m, mp, variant, big);
        for (int k = 0; k < r->md[m].n; k++) {
            const zm_spec_t *t = &r->md[m].t[k];
            r->w[m][k] = malloc(sizeof(float) * t->numel);
            r->m[m][k] = calloc(t->numel, sizeof(float));
            r->v[m][k] = calloc(t->numel, sizeof(float));
            if (!r->w[m][k] || !r->m[m][k] || !r->v[m][k])
                return -1;
            for (size_t i = 0; i < t->numel; i++) {
                float x = zm_init(t, c->seed, i);
                /* written through the parameters: the master starts from the rounded value */
                r->w[m][k][i] = c->bf16 && t->direct_init ? zm_round_bf16(x) : x;
            }
            r->counted[m][k] = 1;
            for (int m2 = 0; m2 < m; m2++)
                for (int k2 = 0; k2 < r->md[m2].n; k2++)
                    if (strcmp(r->md[m2].t[k2].name, t->name) == 0 && r->md[m2].t[k2].key == t->key)
                        r->counted[m][k] = 0;
        }
    }
    return 0;
}

void zm_ref_free(zm_ref_t *r)
{
    for (int m = 0; m < r->mp; m++)
        for (int k = 0; k < r->md[m].n; k++) {
            free(r->w[m][k]);
            free(r->m[m][k]);
            free(r->v[m][k]);
        }
}

void zm_ref_step(zm_ref_t *r)
{
    const zm_conf_t *c = &r->c;
    float *g[8][ZM_MAX_TENSORS];
    double sq = 0;
    for (int m = 0; m < r->mp; m++)
        for (int k = 0; k < r->md[m].n; k++) {
            const zm_spec_t *t = &r->md[m].t[k];
            g[m][k] = calloc(t->numel, sizeof(float));
            uint64_t base = zm_base(t, c->seed);
            for (size_t i = 0; i < t->numel; i++) {
                float w = c->bf16 ? zm_round_bf16(r->w[m][k][i]) : r->w[m][k][i], acc = 0;
                for (int s = 0; s < c->batch; s++) {
                    float a, cc;
                    zm_sample(base, r->step * c->batch + s, i, &a, &cc);
                    acc += a * (w - cc);
                }
                g[m][k][i] = acc / (float)c->batch;
                if (r->counted[m][k])
                    sq += (double)g[m][k][i] * g[m][k][i];
            }
        }
    r->norm = sqrt(sq);
    double coef = 1.0;
    if (c->max_norm > 0) {
        coef = c->max_norm / (r->norm + 1e-6);
        if (coef > 1.0)
            coef = 1.0;
    }
    r->clipped = coef < 1.0;
    r->step++;
    double t = (double)r->step;
    float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    float step_size = (float)(c->lr / (1.0 - pow(c->beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, t));
    for (int m = 0; m < r->mp; m++)
        for (int k = 0; k < r->md[m].n; k++) {
            const zm_spec_t *sp = &r->md[m].t[k];
            double wd = (sp->flags & MESH_ZERO_NO_DECAY) ? 0.0 : c->wd;
            float *w = r->w[m][k], *mm = r->m[m][k], *vv = r->v[m][k];
            for (size_t i = 0; i < sp->numel; i++) {
                float gi = g[m][k][i] * (float)coef;
                if (c->opt == MESH_ZERO_ADAMW) {
                    float p = w[i] * (float)(1.0 - c->lr * wd);
                    mm[i] = b1 * mm[i] + (1.0f - b1) * gi;
                    vv[i] = b2 * vv[i] + (1.0f - b2) * gi * gi;
                    w[i] = p - step_size * (mm[i] / (sqrtf(vv[i]) / bc2_sqrt + eps));
                } else {
                    gi += (float)wd * w[i];
                    if (c->momentum > 0) {
                        mm[i] = r->step == 1 ? gi : (float)c->momentum * mm[i] + gi;
                        gi = mm[i];
                    }
                    w[i] -= (float)c->lr * gi;
                }
            }
            free(g[m][k]);
        }
}
