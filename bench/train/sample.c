/*
 * mesh-train's text generation: the trained parameters gathered whole on world rank 0 from any
 * layout, which runs them as one process (the same model with tp = cp = ep = 1) over the last
 * --seq tokens of the text so far, and appends the next byte: the most likely one, or one drawn
 * from the softmax of the logits over the temperature.
 */
#include "sample.h"
#include "data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one-process model of the run's configuration, its parameters in params. */
static int one_process(const run_t *r, gpt_t *m, gpt_flat_t *flat, float *params)
{
    gpt_config_t cfg = r->m.cfg;
    char err[256];
    cfg.tp = 1, cfg.tp_rank = 0, cfg.sequence_parallel = 0, cfg.cp = 1, cfg.cp_rank = 0;
    cfg.ep = 1, cfg.ep_rank = 0, cfg.pos = NULL, cfg.capacity = 0, cfg.capacity_groups = 0;
    if (gpt_create(m, &cfg, err, sizeof(err)) || gpt_alloc_acts(m, 1, 1)) {
        fprintf(stderr, "mesh-train: --sample: %s\n", err);
        return -1;
    }
    /* the same table as the run's, tensors whole and back to back */
    size_t off = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const gpt_tensor_t *t = &m->tensors[i], *u = &r->m.tensors[i];
        if (i >= r->m.n_tensors || strcmp(t->name, u->name) || t->offset != off) {
            fprintf(stderr, "mesh-train: --sample: tensor %d (%s) out of place\n", i, t->name);
            return -1;
        }
        off += (size_t)t->rows * t->cols;
    }
    flat->m = m, flat->params = params, flat->grads = calloc(m->n_params, sizeof(gpt_real));
    if (!flat->grads)
        return -1;
    m->ops.ctx = flat, m->ops.acquire = gpt_flat_acquire;
    m->dloss_scale = 1;
    return 0;
}

/* The next token after ctx[0, n): the logits at position n - 1 of a window of at most T. */
static int next_token(gpt_t *m, const int32_t *ctx, size_t n, double temperature, uint64_t *rng)
{
    size_t len = n < (size_t)m->T ? n : (size_t)m->T;
    gpt_acts_t *a = &m->acts[0];
    /* positions after len are padding that causal attention keeps out of position len - 1 */
    for (int t = 0; t < m->T; t++) {
        a->tokens[t] = t < (int)len ? ctx[n - len + (size_t)t] : 0;
        a->targets[t] = 0;
    }
    double loss;
    if (gpt_forward(m, 0, &loss))
        return -1;
    const gpt_real *z = a->logits + (len - 1) * (size_t)m->V;
    int best = 0;
    for (int v = 1; v < m->V; v++)
        best = z[v] > z[best] ? v : best;
    if (temperature <= 0)
        return best;
    double sum = 0, *p = malloc((size_t)m->V * sizeof(double));
    if (!p)
        return -1;
    for (int v = 0; v < m->V; v++)
        sum += p[v] = exp((z[v] - z[best]) / temperature);
    *rng = train_data_mix(*rng + 0x9e3779b97f4a7c15ull);
    double u = (double)(*rng >> 11) / 9007199254740992.0 * sum;
    int pick = m->V - 1;
    for (int v = 0; v < m->V; v++) {
        if (u < p[v]) {
            pick = v;
            break;
        }
        u -= p[v];
    }
    free(p);
    return pick;
}

/* Prints tokens[0, n) as text. */
static void print_tokens(const run_t *r, const int32_t *tokens, size_t n)
{
    uint8_t buf[4096];
    for (size_t i = 0; i < n; i++)
        fwrite(buf, 1, text_bytes(&r->text, tokens + i, 1, buf, sizeof(buf)), stdout);
}

/* Rank 0's generation from the whole parameters; prints the text. */
static int generate(run_t *r, float *params)
{
    const train_opts_t *o = &r->o;
    gpt_t m;
    gpt_flat_t flat = {0};
    memset(&m, 0, sizeof(m));
    size_t plen = strlen(o->prompt), k = 0, n = 0;
    int32_t *ctx = malloc((plen + (size_t)o->sample) * sizeof(int32_t));
    int rc = !ctx || one_process(r, &m, &flat, params) ? -1 : 0;
    if (rc == 0)
        n = k = text_tokens(&r->text, (const uint8_t *)o->prompt, plen, ctx);
    uint64_t rng = train_data_mix(o->sample_seed ^ 0x5a3b1e5eedull);
    while (rc == 0 && n < k + (size_t)o->sample) {
        int tok = next_token(&m, ctx, n, o->temperature, &rng);
        if (tok < 0)
            rc = -1;
        else
            ctx[n++] = tok;
    }
    if (rc == 0) {
        char how[96] = "greedy";
        if (o->temperature > 0)
            snprintf(how, sizeof(how), "drawn at temperature %g with sample seed %llu",
                     o->temperature, (unsigned long long)o->sample_seed);
        printf("# sample: %d tokens after a prompt of %zu bytes (%zu tokens), %s\n", o->sample,
               plen, k, how);
        print_tokens(r, ctx, n);
        printf("\n# end of sample\n");
        fflush(stdout);
    } else {
        fprintf(stderr, "mesh-train: --sample: the generation failed\n");
    }
    free(ctx), free(flat.grads);
    gpt_destroy(&m);
    return rc;
}

int sample_text(run_t *r)
{
    size_t total = 0;
    for (int i = 0; i < r->m.n_tensors; i++)
        total += (size_t)r->m.tensors[i].rows * r->m.tensors[i].cols;
    float *params = r->say ? malloc(total * sizeof(float)) : NULL;
    int rc = r->say && !params ? -1 : 0;
    /* every rank takes part in the gather; a rank that could not allocate fails the run */
    if (rc == 0)
        rc = layout_gather_params(&r->lo, params);
    if (rc == 0 && r->say)
        rc = generate(r, params);
    free(params);
    return rc;
}
