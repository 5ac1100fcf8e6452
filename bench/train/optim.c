/* mesh-train's optimizer: replicated over dp (all-reduce of the gradients), global-norm clipping
 * with tp-replicated tensors counted once, AdamW on fp32 master weights. */
#include "optim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char name[32];
    size_t numel, offset;
    unsigned flags;
    int group;
} opt_tensor_t;

struct train_opt {
    mesh_comm_h dp, tp;
    train_opt_params_t p;
    int n, cap;
    opt_tensor_t *t;
    size_t total;
    float *master, *m, *v;
    uint16_t *param16, *grad16; /* bf16 storage */
    float *grad32;              /* fp32 gradients; the parameters are the master copy */
    int64_t steps;
};

static int fail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "mesh-train: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return -1;
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);         /* nearest even */
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int train_opt_create(mesh_comm_h dp, mesh_comm_h tp, const train_opt_params_t *p, train_opt_t **out)
{
    if (p->stage < 0 || p->stage > 3)
        return fail("--zero %s%s: stages are 0..3", "", "");
    train_opt_t *o = calloc(1, sizeof(*o));
    if (!o)
        return -1;
    o->dp = dp, o->tp = tp, o->p = *p;
    *out = o;
    return 0;
}

int train_opt_add(train_opt_t *o, const char *name, size_t numel, unsigned flags, int group)
{
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        opt_tensor_t *t = realloc(o->t, (size_t)cap * sizeof(*t));
        if (!t)
            return -1;
        o->t = t, o->cap = cap;
    }
    opt_tensor_t *t = &o->t[o->n++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->numel = numel, t->flags = flags, t->group = group, t->offset = o->total;
    o->total += numel;
    return 0;
}

int train_opt_finalize(train_opt_t *o)
{
    size_t n = o->total ? o->total : 1;
    o->master = calloc(n, 4), o->m = calloc(n, 4), o->v = calloc(n, 4);
    if (o->p.bf16)
        o->param16 = calloc(n, 2), o->grad16 = calloc(n, 2);
    else
        o->grad32 = calloc(n, 4);
    if (!o->master || !o->m || !o->v || (o->p.bf16 ? !o->param16 || !o->grad16 : !o->grad32))
        return fail("out of memory for %s%s parameters", "", "");
    return 0;
}

static opt_tensor_t *find(train_opt_t *o, const char *name)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->t[i].name, name))
            return &o->t[i];
    fail("optimizer: no tensor %s%s", name, "");
    return NULL;
}

int train_opt_gather(train_opt_t *o, int group)
{
    return (void)o, (void)group, 0;
}
int train_opt_release(train_opt_t *o, int group)
{
    return (void)o, (void)group, 0;
}
int train_opt_grad_ready(train_opt_t *o, const char *name)
{
    return (void)o, (void)name, 0;
}

int train_opt_param(train_opt_t *o, const char *name, void **ptr)
{
    opt_tensor_t *t = find(o, name);
    if (!t)
        return -1;
    *ptr = o->p.bf16 ? (void *)(o->param16 + t->offset) : (void *)(o->master + t->offset);
    return 0;
}

int train_opt_grad(train_opt_t *o, const char *name, void **ptr)
{
    opt_tensor_t *t = find(o, name);
    if (!t)
        return -1;
    *ptr = o->p.bf16 ? (void *)(o->grad16 + t->offset) : (void *)(o->grad32 + t->offset);
    return 0;
}

int train_opt_set(train_opt_t *o, const char *name, const float *values)
{
    opt_tensor_t *t = find(o, name);
    if (!t)
        return -1;
    memcpy(o->master + t->offset, values, t->numel * 4);
    if (o->p.bf16)
        for (size_t i = 0; i < t->numel; i++) {
            o->param16[t->offset + i] = to_bf16(values[i]);
            o->master[t->offset + i] = from_bf16(o->param16[t->offset + i]);
        }
    return 0;
}

static float grad_at(const train_opt_t *o, size_t i)
{
    return o->p.bf16 ? from_bf16(o->grad16[i]) : o->grad32[i];
}

int train_opt_step(train_opt_t *o, double *grad_norm)
{
    mesh_status_t st = MESH_OK;
    if (mesh_comm_size(o->dp) > 1) {
        /* the loss is the global mean, so the sum of the ranks' gradients is its gradient */
        void *g = o->p.bf16 ? (void *)o->grad16 : (void *)o->grad32;
        st = mesh_allreduce(o->dp, g, g, o->total, o->p.bf16 ? MESH_BF16 : MESH_FP32, MESH_SUM,
                            NULL, NULL);
        if (st != MESH_OK)
            return fail("gradient all-reduce over dp: %s%s", mesh_comm_last_error(o->dp), "");
    }
    int tp_rank = o->tp ? mesh_comm_rank(o->tp) : 0;
    double sq = 0;
    for (int i = 0; i < o->n; i++) {
        const opt_tensor_t *t = &o->t[i];
        if ((t->flags & TRAIN_OPT_REPLICATED) && tp_rank != 0)
            continue;
        for (size_t k = 0; k < t->numel; k++) {
            double g = grad_at(o, t->offset + k);
            sq += g * g;
        }
    }
    if (o->tp && mesh_comm_size(o->tp) > 1) {
        st = mesh_allreduce(o->tp, &sq, &sq, 1, MESH_FP64, MESH_SUM, NULL, NULL);
        if (st != MESH_OK)
            return fail("gradient norm over tp: %s%s", mesh_comm_last_error(o->tp), "");
    }
    double norm = sqrt(sq), coef = 1.0;
    if (o->p.clip > 0 && norm > o->p.clip)
        coef = o->p.clip / (norm + 1e-6);
    o->steps++;
    double b1 = o->p.beta1, b2 = o->p.beta2;
    double c1 = 1.0 - pow(b1, (double)o->steps), c2 = 1.0 - pow(b2, (double)o->steps);
    for (size_t i = 0; i < o->total; i++) {
        float g = (float)(grad_at(o, i) * coef);
        o->m[i] = (float)(b1 * o->m[i] + (1 - b1) * g);
        o->v[i] = (float)(b2 * o->v[i] + (1 - b2) * (double)g * g);
        double upd = (o->m[i] / c1) / (sqrt(o->v[i] / c2) + o->p.eps);
        o->master[i] -= (float)(o->p.lr * (upd + o->p.weight_decay * o->master[i]));
        if (o->p.bf16)
            o->param16[i] = to_bf16(o->master[i]);
    }
    if (o->p.bf16)
        memset(o->grad16, 0, o->total * 2);
    else
        memset(o->grad32, 0, o->total * 4);
    *grad_norm = norm;
    return 0;
}

/* One file per tp rank, written by dp rank 0: a header, the tensors' names and sizes, then
 * master weights, first and second moments. */
#define CKPT_MAGIC "MTRAIN01"

static void ckpt_path(train_opt_t *o, const char *dir, char *path, size_t len)
{
    int r = o->tp ? mesh_comm_rank(o->tp) : 0, n = o->tp ? mesh_comm_size(o->tp) : 1;
    snprintf(path, len, "%s/optim-tp%d-of-%d.bin", dir, r, n);
}

int train_opt_save(train_opt_t *o, const char *dir, int64_t step)
{
    char path[4096];
    if (mesh_comm_rank(o->dp) == 0) {
        if (mkdir(dir, 0755) && errno != EEXIST)
            return fail("--save %s: %s", dir, strerror(errno));
        ckpt_path(o, dir, path, sizeof(path));
        FILE *f = fopen(path, "wb");
        if (!f)
            return fail("--save: %s: %s", path, strerror(errno));
        int32_t n = o->n;
        int ok = fwrite(CKPT_MAGIC, 8, 1, f) == 1 && fwrite(&step, 8, 1, f) == 1 &&
                 fwrite(&o->steps, 8, 1, f) == 1 && fwrite(&n, 4, 1, f) == 1;
        for (int i = 0; ok && i < o->n; i++) {
            uint64_t numel = o->t[i].numel;
            ok = fwrite(o->t[i].name, 32, 1, f) == 1 && fwrite(&numel, 8, 1, f) == 1;
        }
        float *arr[3] = {o->master, o->m, o->v};
        for (int a = 0; ok && a < 3; a++)
            ok = fwrite(arr[a], 4, o->total, f) == o->total;
        if (fclose(f) || !ok)
            return fail("--save: writing %s failed%s", path, "");
    }
    /* the files are complete before any rank goes on (a load may follow) */
    return mesh_barrier(o->dp, NULL) == MESH_OK ? 0 : -1;
}

int train_opt_load(train_opt_t *o, const char *dir, int64_t *step)
{
    char path[4096], magic[8];
    ckpt_path(o, dir, path, sizeof(path));
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail("--load: %s: %s (saved with another tp size?)", path, strerror(errno));
    int64_t s, steps;
    int32_t n;
    int ok = fread(magic, 8, 1, f) == 1 && !memcmp(magic, CKPT_MAGIC, 8) &&
             fread(&s, 8, 1, f) == 1 && fread(&steps, 8, 1, f) == 1 && fread(&n, 4, 1, f) == 1;
    if (!ok)
        return fclose(f), fail("--load: %s: not a mesh-train checkpoint%s", path, "");
    if (n != o->n)
        return fclose(f), fail("--load: %s holds another model%s", path, "");
    for (int i = 0; i < o->n; i++) {
        char name[33] = {0};
        uint64_t numel;
        if (fread(name, 32, 1, f) != 1 || fread(&numel, 8, 1, f) != 1)
            return fclose(f), fail("--load: %s: truncated in the index at %s", path, o->t[i].name);
        if (strcmp(name, o->t[i].name) || numel != o->t[i].numel) {
            fclose(f);
            fprintf(stderr,
                    "mesh-train: --load: %s: tensor %d is %s of %llu elements, the model's "
                    "is %s of %zu\n",
                    path, i, name, (unsigned long long)numel, o->t[i].name, o->t[i].numel);
            return -1;
        }
    }
    /* everything is read before anything changes: nothing is half-loaded */
    float *arr = malloc(3 * o->total * 4 + 4);
    if (!arr || fread(arr, 4, 3 * o->total, f) != 3 * o->total) {
        free(arr);
        fclose(f);
        return fail("--load: %s: truncated in the data%s", path, "");
    }
    fclose(f);
    memcpy(o->master, arr, o->total * 4);
    memcpy(o->m, arr + o->total, o->total * 4);
    memcpy(o->v, arr + 2 * o->total, o->total * 4);
    free(arr);
    if (o->p.bf16)
        for (size_t i = 0; i < o->total; i++)
            o->param16[i] = to_bf16(o->master[i]);
    o->steps = steps;
    *step = s;
    return 0;
}

void train_opt_destroy(train_opt_t *o)
{
    if (!o)
        return;
    free(o->t), free(o->master), free(o->m), free(o->v), free(o->param16), free(o->grad16);
    free(o->grad32), free(o);
}
