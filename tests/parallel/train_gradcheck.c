/*
 * Gradient check of mesh-train's GPT (bench/train/{gpt,model,layers}.c built in double): the
 * backward pass's gradient of every element of every parameter tensor against central finite
 * differences of the mean loss, |analytic - numeric| <= 1e-7 + 1e-5 |numeric|. Single process,
 * a tiny model (2 layers, d_model 16, 4 heads, seq 8, vocab 32, 2 samples) whose parameters are
 * perturbed from their initialisation so that no gradient is zero by symmetry. Then the split
 * backward of zero-bubble pipelines: B alone adds no weight gradient and passes on the same input
 * gradient, and W after it gives the weight gradients of the backward pass (within 1e-12).
 * Then the same check of a model whose second block is a mixture of experts (4 experts, top 2,
 * the load-balancing loss with coefficient 0.1), dropless and with a capacity factor that drops
 * some of the choices, counted over all the tokens and over each half apart, its split backward
 * too.
 */
#include "bench/train/gpt.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double uniform(uint64_t i)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + 12345;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double loss_of(gpt_t *m)
{
    double s;
    if (gpt_forward(m, 0, &s)) {
        fprintf(stderr, "forward failed\n");
        exit(1);
    }
    return s * m->dloss_scale + m->acts[0].aux;
}

static int split_backward(gpt_t *m, gpt_flat_t *flat)
{
    size_t nx = (size_t)m->b * m->tl * m->C;
    gpt_real *whole = flat->grads, *split = calloc(m->n_params, sizeof(gpt_real));
    gpt_real *dx0 = malloc(nx * sizeof(gpt_real));
    if (!split || !dx0 || gpt_alloc_wgrad(m))
        return 1;
    memcpy(dx0, m->dx, nx * sizeof(gpt_real)); /* d(x[0]) of the whole backward pass */
    flat->grads = split;
    loss_of(m);
    m->split_backward = 1;
    int bad = gpt_head_bwd(m, 0) || gpt_blocks_bwd(m, 0, 0, m->L) || gpt_embed_bwd(m, 0);
    m->split_backward = 0;
    for (size_t i = 0; !bad && i < m->n_params; i++)
        if (split[i] != 0) {
            printf("FAIL split backward: B wrote weight gradient element %zu\n", i);
            bad = 1;
        }
    for (size_t i = 0; !bad && i < nx; i++)
        if (m->dx[i] != dx0[i]) {
            printf("FAIL split backward: d(x[0])[%zu] %.17g, whole pass %.17g\n", i, m->dx[i],
                   dx0[i]);
            bad = 1;
        }
    if (!bad)
        bad = gpt_head_wgrad(m, 0) || gpt_blocks_wgrad(m, 0, 0, m->L) || gpt_embed_wgrad(m, 0);
    for (int ti = 0; !bad && ti < m->n_tensors; ti++) {
        const gpt_tensor_t *t = &m->tensors[ti];
        for (size_t k = 0; k < t->numel; k++) {
            double a = whole[t->offset + k], b = split[t->offset + k];
            if (fabs(a - b) > 1e-12 * (fabs(a) + 1e-300)) {
                printf("FAIL split backward: %s[%zu] %.17g, whole pass %.17g\n", t->name, k, b, a);
                bad = 1;
                break;
            }
        }
    }
    if (!bad)
        printf("split backward: B adds no weight gradient, W gives the whole pass's\n");
    flat->grads = whole;
    free(split), free(dx0);
    return bad;
}

/* The gradient check of one model; 0 when every tensor passes. */
static int check(const gpt_config_t *cfg, double aux_scale, const char *what)
{
    gpt_t m;
    char err[128];
    if (gpt_create(&m, cfg, err, sizeof(err)) || gpt_alloc_acts(&m, 2, 1)) {
        fprintf(stderr, "create: %s\n", err);
        return 1;
    }
    gpt_real *params = calloc(m.n_params, sizeof(gpt_real));
    gpt_real *grads = calloc(m.n_params, sizeof(gpt_real));
    gpt_flat_t flat = {&m, params, grads};
    m.ops.ctx = &flat;
    m.ops.acquire = gpt_flat_acquire;
    for (int i = 0; i < m.n_tensors; i++)
        gpt_init_full(&m, &m.tensors[i], 7, params + m.tensors[i].offset);
    for (size_t i = 0; i < m.n_params; i++)
        params[i] += 0.2 * uniform(i);
    int N = m.b * m.T;
    for (int i = 0; i < N; i++) {
        m.acts[0].tokens[i] = (int32_t)((uniform(1000 + i) + 1) * 0.5 * m.V) % m.V;
        m.acts[0].targets[i] = (int32_t)((uniform(2000 + i) + 1) * 0.5 * m.V) % m.V;
    }
    m.dloss_scale = (gpt_real)(1.0 / N);
    m.aux_scale = (gpt_real)aux_scale;
    double l0 = loss_of(&m);
    uint64_t dropped = m.acts[0].dropped;
    if (gpt_backward(&m, 0))
        return 1;
    int failures = split_backward(&m, &flat);
    size_t checked = 0, zero = 0;
    const double h = 1e-5;
    for (int ti = 0; ti < m.n_tensors; ti++) {
        const gpt_tensor_t *t = &m.tensors[ti];
        double worst = 0;
        size_t worst_i = 0;
        for (size_t k = 0; k < t->numel; k++) {
            gpt_real *p = params + t->offset + k, keep = *p;
            *p = keep + h;
            double up = loss_of(&m);
            *p = keep - h;
            double down = loss_of(&m);
            *p = keep;
            double fd = (up - down) / (2 * h), g = grads[t->offset + k];
            double excess = fabs(g - fd) - (1e-7 + 1e-5 * fabs(fd));
            if (excess > worst)
                worst = excess, worst_i = k;
            zero += g == 0.0;
            checked++;
        }
        if (worst > 0) {
            size_t k = worst_i;
            printf("FAIL %-12s [%zu]: analytic %.10g\n", t->name, k, grads[t->offset + k]);
            failures++;
        }
    }
    printf("gradient check%s: loss %.6f, %zu parameters in %d tensors, %zu exactly zero, "
           "%llu choices dropped, %d tensors failed\n",
           what, l0, checked, m.n_tensors, zero, (unsigned long long)dropped, failures);
    /* a gradient that is zero everywhere would pass against a flat loss: none may be */
    if (zero > checked / 100)
        failures++;
    if (cfg->capacity > 0 && dropped == 0) {
        printf("FAIL%s: the capacity dropped nothing\n", what);
        failures++;
    }
    gpt_destroy(&m);
    free(params), free(grads);
    return failures ? 1 : 0;
}

int main(void)
{
    gpt_config_t cfg = {.vocab = 32, .seq = 8, .d_model = 16, .layers = 2, .heads = 4, .tp = 1};
    int bad = check(&cfg, 0, "");
    cfg.experts = 4, cfg.topk = 2, cfg.expert_ffn = 24, cfg.moe_layers = 2;
    bad |= check(&cfg, 0.1, " (experts, dropless)");
    cfg.capacity = 0.75;
    bad |= check(&cfg, 0.1, " (experts, capacity 0.75)");
    cfg.capacity_groups = 2;
    bad |= check(&cfg, 0.1, " (experts, capacity 0.75 in 2 groups)");
    return bad;
}
