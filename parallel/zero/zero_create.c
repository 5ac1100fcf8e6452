/* ZeRO handle: parameters, registration, finalize (layout and buffers), accessors, destroy. */
#include "zero_impl.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_zero__comm_fail(mesh_comm_h comm, mesh_status_t st, const char *fn,
                                   const char *what)
{
    const char *msg = mesh_comm_last_error(comm);
    if (msg == NULL || *msg == '\0')
        msg = mesh_comm_last_error(NULL);
    return mesh_par_error(st, "%s: %s failed: %s", fn, what,
                          msg && *msg ? msg : mesh_status_string(st));
}

static mesh_status_t check_params(const mesh_zero_params_t *p)
{
    static const char fn[] = "mesh_zero_create";
    uint64_t m = p->field_mask;
    if ((m & MESH_ZERO_PARAM_FIELD_STAGE) && (p->stage < 0 || p->stage > 3))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: stage %d is not 0, 1, 2 or 3", fn,
                              p->stage);
    if ((m & MESH_ZERO_PARAM_FIELD_OPTIMIZER) && p->optimizer != MESH_ZERO_ADAMW &&
        p->optimizer != MESH_ZERO_SGD)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: unknown optimizer %d", fn,
                              (int)p->optimizer);
    if ((m & MESH_ZERO_PARAM_FIELD_LR) && !(p->lr >= 0 && isfinite(p->lr)))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: lr %g is not a finite number >= 0", fn,
                              p->lr);
    if ((m & MESH_ZERO_PARAM_FIELD_BETAS) &&
        !(p->beta1 >= 0 && p->beta1 < 1 && p->beta2 >= 0 && p->beta2 < 1))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: betas (%g, %g) are not in [0, 1)", fn,
                              p->beta1, p->beta2);
    if ((m & MESH_ZERO_PARAM_FIELD_EPS) && !(p->eps >= 0 && isfinite(p->eps)))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: eps %g is not a finite number >= 0", fn,
                              p->eps);
    if ((m & MESH_ZERO_PARAM_FIELD_WEIGHT_DECAY) &&
        !(p->weight_decay >= 0 && isfinite(p->weight_decay)))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: weight_decay %g is not a finite number >= 0", fn,
                              p->weight_decay);
    if ((m & MESH_ZERO_PARAM_FIELD_MOMENTUM) && !(p->momentum >= 0 && p->momentum < 1))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: momentum %g is not in [0, 1)", fn,
                              p->momentum);
    if ((m & MESH_ZERO_PARAM_FIELD_DTYPE) && p->dtype != MESH_FP32 && p->dtype != MESH_BF16)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: dtype %s is not fp32 or bf16", fn,
                              mesh_dtype_name(p->dtype));
    if ((m & MESH_ZERO_PARAM_FIELD_BUCKET_BYTES) && p->bucket_bytes == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: bucket_bytes is 0", fn);
    if ((m & MESH_ZERO_PARAM_FIELD_MAX_GRAD_NORM) &&
        !(p->max_grad_norm >= 0 && isfinite(p->max_grad_norm)))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: max_grad_norm %g is not a finite number >= 0", fn,
                              p->max_grad_norm);
    if ((m & MESH_ZERO_PARAM_FIELD_GRAD_SCALE) && !(p->grad_scale > 0 && isfinite(p->grad_scale)))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: grad_scale %g is not a finite number > 0",
                              fn, p->grad_scale);
    if ((m & MESH_ZERO_PARAM_FIELD_MAX_INFLIGHT) && p->max_inflight < 1)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: max_inflight %d is not >= 1", fn,
                              p->max_inflight);
    return MESH_OK;
}

mesh_status_t mesh_zero_create(mesh_comm_h dp, const mesh_zero_params_t *params, mesh_zero_h *out)
{
    static const char fn[] = "mesh_zero_create";
    if (dp == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: dp_comm is NULL", fn);
    if (out == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    mesh_zero_params_t p = {0};
    if (params != NULL)
        p = *params;
    int size = mesh_comm_size(dp), rank = mesh_comm_rank(dp);
    if (size < 1 || rank < 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: dp_comm is not a usable communicator", fn);
    MESH_PAR_CHECK(check_params(&p));
    uint64_t m = p.field_mask;
    mesh_comm_h mp = (m & MESH_ZERO_PARAM_FIELD_MP_COMM) ? p.mp_comm : NULL;
    if (mp != NULL && (mesh_comm_size(mp) < 1 || mesh_comm_rank(mp) < 0))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: mp_comm is not a usable communicator", fn);

    struct mesh_zero *z = calloc(1, sizeof(*z));
    if (z == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    z->dp = dp;
    z->mp = mp;
    z->rank = rank;
    z->size = size;
    z->mp_rank = mp ? mesh_comm_rank(mp) : 0;
    z->mp_size = mp ? mesh_comm_size(mp) : 1;
    z->stage = (m & MESH_ZERO_PARAM_FIELD_STAGE) ? p.stage : 0;
    z->opt = (m & MESH_ZERO_PARAM_FIELD_OPTIMIZER) ? p.optimizer : MESH_ZERO_ADAMW;
    z->lr = (m & MESH_ZERO_PARAM_FIELD_LR) ? p.lr : 1e-3;
    z->beta1 = (m & MESH_ZERO_PARAM_FIELD_BETAS) ? p.beta1 : 0.9;
    z->beta2 = (m & MESH_ZERO_PARAM_FIELD_BETAS) ? p.beta2 : 0.999;
    z->eps = (m & MESH_ZERO_PARAM_FIELD_EPS) ? p.eps : 1e-8;
    z->wd = (m & MESH_ZERO_PARAM_FIELD_WEIGHT_DECAY) ? p.weight_decay : 0.0;
    z->bias_correction = (m & MESH_ZERO_PARAM_FIELD_BIAS_CORRECTION) ? p.bias_correction != 0 : 1;
    z->momentum = (m & MESH_ZERO_PARAM_FIELD_MOMENTUM) ? p.momentum : 0.0;
    z->dtype = (m & MESH_ZERO_PARAM_FIELD_DTYPE) ? p.dtype : MESH_FP32;
    z->esize = mesh_dtype_size(z->dtype);
    z->bucket_bytes = (m & MESH_ZERO_PARAM_FIELD_BUCKET_BYTES) ? p.bucket_bytes : (size_t)4 << 20;
    z->overlap = (m & MESH_ZERO_PARAM_FIELD_OVERLAP) ? p.overlap != 0 : 1;
    z->max_inflight = (m & MESH_ZERO_PARAM_FIELD_MAX_INFLIGHT) ? p.max_inflight : 2;
    z->max_norm = (m & MESH_ZERO_PARAM_FIELD_MAX_GRAD_NORM) ? p.max_grad_norm : 0.0;
    z->grad_scale = (m & MESH_ZERO_PARAM_FIELD_GRAD_SCALE) ? p.grad_scale : 1.0 / size;
    z->nstate = z->opt == MESH_ZERO_ADAMW ? 2 : (z->momentum > 0 ? 1 : 0);
    *out = z;
    return MESH_OK;
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MESH_ZERO_MAX_NAME)
        return 0;
    for (; *s; s++)
        if (isspace((unsigned char)*s) || !isprint((unsigned char)*s))
            return 0;
    return 1;
}

mesh_status_t mesh_zero_add(mesh_zero_h z, const char *name, size_t numel, int ndim,
                            const size_t *shape, unsigned flags, int group)
{
    static const char fn[] = "mesh_zero_add";
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s' added after mesh_zero_finalize", fn,
                              name ? name : "(null)");
    if (name == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: name is NULL", fn);
    if (!name_ok(name))
        return mesh_par_error(
            MESH_ERR_INVALID_ARG,
            "%s: name '%.*s' must have 1 to %d printable characters and no white space", fn,
            MESH_ZERO_MAX_NAME, name, MESH_ZERO_MAX_NAME);
    if (numel == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s' has numel 0", fn, name);
    if (ndim < 0 || ndim > MESH_ZERO_MAX_DIMS || (ndim > 0 && shape == NULL))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s': ndim %d with %s shape (at most %d)",
                              fn, name, ndim, shape ? "a" : "no", MESH_ZERO_MAX_DIMS);
    size_t prod = 1;
    for (int i = 0; i < ndim; i++)
        prod *= shape[i];
    if (ndim > 0 && prod != numel)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: '%s': shape has %zu elements, numel is %zu", fn, name, prod,
                              numel);
    if (flags & ~(unsigned)(MESH_ZERO_REPLICATED | MESH_ZERO_SHARED | MESH_ZERO_NO_DECAY))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s': unknown flags 0x%x", fn, name,
                              flags);
    if (group < 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s': group %d < 0", fn, name, group);
    if (mesh_zero__find(z, name) >= 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s' is already registered", fn, name);
    if (z->nt == z->tcap) {
        int cap = z->tcap ? 2 * z->tcap : 16;
        zero_tensor_t *t = realloc(z->t, sizeof(*t) * (size_t)cap);
        if (t == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
        z->t = t;
        z->tcap = cap;
    }
    zero_tensor_t *t = &z->t[z->nt];
    *t = (zero_tensor_t){
        .numel = numel, .ndim = ndim > 0 ? ndim : 1, .flags = flags, .group = group};
    t->name = strdup(name);
    if (t->name == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    if (ndim > 0)
        memcpy(t->shape, shape, sizeof(size_t) * (size_t)ndim);
    else
        t->shape[0] = numel;
    z->nt++;
    return MESH_OK;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static mesh_status_t build_hash(struct mesh_zero *z)
{
    z->hcap = 16;
    while (z->hcap < 2 * (size_t)z->nt)
        z->hcap *= 2;
    z->hash = malloc(sizeof(int) * z->hcap);
    if (z->hash == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_finalize: no memory");
    for (size_t i = 0; i < z->hcap; i++)
        z->hash[i] = -1;
    for (int i = 0; i < z->nt; i++) {
        size_t h = (size_t)fnv(1469598103934665603ull, z->t[i].name, strlen(z->t[i].name));
        while (z->hash[h & (z->hcap - 1)] >= 0)
            h++;
        z->hash[h & (z->hcap - 1)] = i;
    }
    return MESH_OK;
}

int mesh_zero__find(const struct mesh_zero *z, const char *name)
{
    if (z->hash == NULL) {
        for (int i = 0; i < z->nt; i++)
            if (strcmp(z->t[i].name, name) == 0)
                return i;
        return -1;
    }
    size_t h = (size_t)fnv(1469598103934665603ull, name, strlen(name));
    for (;; h++) {
        int i = z->hash[h & (z->hcap - 1)];
        if (i < 0)
            return -1;
        if (strcmp(z->t[i].name, name) == 0)
            return i;
    }
}

mesh_status_t mesh_zero__lookup(const struct mesh_zero *z, const char *fn, const char *name,
                                int *index)
{
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (name == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: name is NULL", fn);
    if (!z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s': call mesh_zero_finalize first", fn,
                              name);
    int i = mesh_zero__find(z, name);
    if (i < 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: no tensor named '%s'", fn, name);
    *index = i;
    return MESH_OK;
}

int mesh_zero__group(const struct mesh_zero *z, int id)
{
    int lo = 0, hi = z->ng - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (z->g[mid].id == id)
            return mid;
        if (z->g[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Every dp rank must have registered the same tensors in the same way. */
static mesh_status_t check_same_layout(struct mesh_zero *z)
{
    static const char fn[] = "mesh_zero_finalize";
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < z->nt; i++) {
        const zero_tensor_t *t = &z->t[i];
        uint64_t rec[3] = {t->numel, t->flags, (uint64_t)t->group};
        h = fnv(h, t->name, strlen(t->name) + 1);
        h = fnv(h, rec, sizeof(rec));
    }
    uint64_t v[2] = {h, ~h}, r[2];
    mesh_status_t st = mesh_allreduce(z->dp, v, r, 2, MESH_UINT64, MESH_MIN, NULL, NULL);
    if (st != MESH_OK)
        return mesh_zero__comm_fail(z->dp, st, fn, "layout check on dp_comm");
    if (r[0] != h || r[1] != ~h)
        return mesh_par_error(MESH_ERR_MISMATCH,
                              "%s: the dp ranks registered different tensors (names, sizes, flags "
                              "or groups differ; this is dp rank %d)",
                              fn, z->rank);
    return MESH_OK;
}

static mesh_status_t alloc_buffers(struct mesh_zero *z)
{
    static const char fn[] = "mesh_zero_finalize";
    size_t pb = z->N * z->esize, sb = z->S * z->esize;
    z->map_bytes[0] = pb;
    z->map_bytes[1] = z->stage == 3 ? sb : 0;
    z->map_bytes[2] = pb;
    z->map_bytes[3] = z->stage >= 2 ? sb : 0;
    void **dst[4] = {&z->param, &z->param_shard, &z->grad, &z->grad_shard};
    for (int i = 0; i < 4; i++) {
        if (z->map_bytes[i] == 0)
            continue;
        *dst[i] = mesh_zero__map(z->map_bytes[i]);
        if (*dst[i] == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: cannot map %zu bytes", fn,
                                  z->map_bytes[i]);
    }
    if (z->dtype == MESH_BF16) {
        z->master = calloc(z->L, sizeof(float));
        if (z->master == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    }
    for (int i = 0; i < z->nstate; i++) {
        z->state[i] = calloc(z->L, sizeof(float));
        if (z->state[i] == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    }
    return MESH_OK;
}

/* Frees what finalize built (requests in flight are cancelled). */
static void release_layout(struct mesh_zero *z)
{
    for (int b = 0; b < z->nb; b++)
        mesh_request_free(z->b[b].req);
    for (int g = 0; g < z->ng; g++) {
        if (z->g[g].reqs)
            for (int k = 0; k < z->g[g].count; k++)
                mesh_request_free(z->g[g].reqs[k]);
        free(z->g[g].reqs);
    }
    void **maps[4] = {&z->param, &z->param_shard, &z->grad, &z->grad_shard};
    for (int i = 0; i < 4; i++) {
        if (*maps[i])
            mesh_zero__unmap(*maps[i], z->map_bytes[i]);
        *maps[i] = NULL;
    }
    free(z->master);
    free(z->state[0]);
    free(z->state[1]);
    free(z->order);
    free(z->hash);
    free(z->b);
    free(z->g);
    free(z->seg);
    z->master = z->state[0] = z->state[1] = NULL;
    z->order = z->hash = NULL;
    z->b = NULL;
    z->g = NULL;
    z->seg = NULL;
    z->nb = z->ng = z->nseg = 0;
}

mesh_status_t mesh_zero_finalize(mesh_zero_h z)
{
    static const char fn[] = "mesh_zero_finalize";
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: called twice", fn);
    if (z->nt == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: no tensor registered", fn);
    mesh_status_t st;
    if ((st = check_same_layout(z)) < 0 || (st = mesh_zero__layout(z)) < 0 ||
        (st = build_hash(z)) < 0 || (st = mesh_zero__norm_weights(z)) < 0 ||
        (st = alloc_buffers(z)) < 0) {
        release_layout(z); /* as it was: registered, not finalized */
        return st;
    }
    for (int i = 0; i < z->nt; i++)
        z->numel += z->t[i].numel;
    z->finalized = 1;
    z->mb = 1;
    z->mb_last = 1;
    z->mb_first = 1;
    z->next_post = z->nb - 1;
    return MESH_OK;
}

mesh_status_t mesh_zero_set_lr(mesh_zero_h z, double lr)
{
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_zero_set_lr: z is NULL");
    if (!(lr >= 0 && isfinite(lr)))
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_zero_set_lr: lr %g is not a finite number >= 0", lr);
    z->lr = lr;
    return MESH_OK;
}

mesh_status_t mesh_zero_param(mesh_zero_h z, const char *name, void **ptr)
{
    static const char fn[] = "mesh_zero_param";
    int i = -1;
    MESH_PAR_CHECK(mesh_zero__lookup(z, fn, name, &i));
    if (ptr == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: ptr is NULL", fn);
    const zero_tensor_t *t = &z->t[i];
    if (z->stage == 3) {
        const zero_group_t *g = &z->g[mesh_zero__group(z, t->group)];
        if (g->refs == 0 || !g->waited)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "%s: '%s': its group %d is not %s (stage 3: mesh_zero_gather and "
                                  "mesh_zero_wait_params first)",
                                  fn, name, t->group, g->refs == 0 ? "gathered" : "waited for");
    }
    *ptr = zero_at(z, z->param, t->offset);
    return MESH_OK;
}

mesh_status_t mesh_zero_grad(mesh_zero_h z, const char *name, void **ptr)
{
    static const char fn[] = "mesh_zero_grad";
    int i = -1;
    MESH_PAR_CHECK(mesh_zero__lookup(z, fn, name, &i));
    if (ptr == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: ptr is NULL", fn);
    *ptr = zero_at(z, z->grad, z->t[i].offset);
    return MESH_OK;
}

mesh_status_t mesh_zero_init_param(mesh_zero_h z, const char *name, const float *values)
{
    static const char fn[] = "mesh_zero_init_param";
    int i = -1;
    MESH_PAR_CHECK(mesh_zero__lookup(z, fn, name, &i));
    if (values == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: '%s': values is NULL", fn, name);
    zero_tensor_t *t = &z->t[i];
    if (z->stage != 3) /* every rank holds the whole tensor */
        for (size_t k = 0; k < t->numel; k++)
            zero_put(z, z->param, t->offset + k, values[k]);
    for (int s = 0; s < z->nseg; s++) {
        const zero_seg_t *sg = &z->seg[s];
        if (sg->tensor != i)
            continue;
        float *mw = mesh_zero__master(z, sg);
        memcpy(mw, values + (sg->gidx - t->offset), sizeof(float) * sg->len);
        mesh_zero__write_params(z, sg);
    }
    t->initialized = 1;
    return MESH_OK;
}

void mesh_zero_destroy(mesh_zero_h z)
{
    if (z == NULL)
        return;
    release_layout(z);
    for (int i = 0; i < z->nt; i++)
        free(z->t[i].name);
    free(z->t);
    free(z);
}
