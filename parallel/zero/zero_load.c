/* Checkpoint load at any dp size and stage: the index and every file this rank needs are checked
 * and read into new arrays first; only when every rank succeeded do they replace the state. */
#define _XOPEN_SOURCE 700
#include "zero_ckpt.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char fn[] = "mesh_zero_load";

typedef struct {
    const struct mesh_zero *z;
    const char *dir;
    zero_index_t ix;
    int *of_tensor; /* index tensor of each registered tensor */
    int *fd;        /* per saved dp rank, -1 until opened */
    float *arr[3];  /* new master weights and optimizer state, L floats each */
} loader_t;

static void shape_text(char *buf, size_t len, const zero_tensor_t *t)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%zu", d ? "," : "[", t->shape[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/* The checkpoint must hold exactly the registered tensors, with the same shapes. */
static mesh_status_t match_tensors(loader_t *l, const char *ipath)
{
    const struct mesh_zero *z = l->z;
    const zero_index_t *ix = &l->ix;
    if (ix->mp_size != z->mp_size || ix->mp_rank != z->mp_rank)
        return mesh_par_error(MESH_ERR_MISMATCH,
                              "%s: %s is model-parallel rank %d of %d, this is "
                              "rank %d of %d",
                              fn, ipath, ix->mp_rank, ix->mp_size, z->mp_rank, z->mp_size);
    if (ix->optimizer != (int)z->opt || ix->nstate != z->nstate)
        return mesh_par_error(MESH_ERR_MISMATCH,
                              "%s: %s holds the state of %s with %d arrays, this "
                              "optimizer is %s with %d",
                              fn, ipath, ix->optimizer == MESH_ZERO_SGD ? "sgd" : "adamw",
                              ix->nstate, z->opt == MESH_ZERO_SGD ? "sgd" : "adamw", z->nstate);
    l->of_tensor = malloc(sizeof(int) * (size_t)z->nt);
    if (l->of_tensor == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    for (int i = 0; i < z->nt; i++)
        l->of_tensor[i] = -1;
    for (int j = 0; j < ix->nt; j++) {
        const zero_tensor_t *s = &ix->t[j];
        int i = mesh_zero__find(z, s->name);
        if (i < 0)
            return mesh_par_error(MESH_ERR_MISMATCH,
                                  "%s: %s: tensor '%s' of the checkpoint is not "
                                  "registered",
                                  fn, ipath, s->name);
        if (l->of_tensor[i] >= 0)
            return mesh_par_error(MESH_ERR_MISMATCH, "%s: %s: tensor '%s' appears twice", fn, ipath,
                                  s->name);
        const zero_tensor_t *t = &z->t[i];
        int same = s->numel == t->numel && s->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = s->shape[d] == t->shape[d];
        if (!same) {
            char a[160], b[160];
            shape_text(a, sizeof(a), s);
            shape_text(b, sizeof(b), t);
            return mesh_par_error(MESH_ERR_MISMATCH,
                                  "%s: %s: tensor '%s' has shape %s in the "
                                  "checkpoint, %s registered",
                                  fn, ipath, s->name, a, b);
        }
        l->of_tensor[i] = j;
    }
    for (int i = 0; i < z->nt; i++)
        if (l->of_tensor[i] < 0)
            return mesh_par_error(MESH_ERR_MISMATCH, "%s: %s has no tensor '%s'", fn, ipath,
                                  z->t[i].name);
    return MESH_OK;
}

/* Saved bucket holding global element g. */
static int saved_bucket(const zero_index_t *ix, size_t g)
{
    int lo = 0, hi = ix->nb - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ix->bstart[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The saved tensor holding element g, or the next one after it (padding). */
static const char *tensor_at(const zero_index_t *ix, size_t g)
{
    const zero_tensor_t *best = NULL;
    for (int j = 0; j < ix->nt; j++) {
        const zero_tensor_t *t = &ix->t[j];
        if (g < t->offset + t->numel && (best == NULL || t->offset < best->offset))
            best = t;
    }
    return best ? best->name : ix->t[ix->nt - 1].name;
}

/* Names the first tensor whose data lies past the end of a short file of dp rank q. */
static const char *first_missing(const zero_index_t *ix, int q, size_t size)
{
    size_t e = size > sizeof(zero_ckpt_header_t) ? (size - sizeof(zero_ckpt_header_t)) / 4 : 0;
    size_t pos = e % ix->shard;
    if (e / ix->shard > (size_t)ix->nstate)
        return ix->t[0].name;
    int b = 0;
    while (b + 1 < ix->nb && ix->bshard[b + 1] <= pos)
        b++;
    size_t slice = ix->bnumel[b] / (size_t)ix->dp;
    return tensor_at(ix, ix->bstart[b] + (size_t)q * slice + (pos - ix->bshard[b]));
}

static mesh_status_t open_file(loader_t *l, int q, const char *tensor)
{
    const zero_index_t *ix = &l->ix;
    char path[PATH_MAX];
    if (!mesh_zero__ckpt_path(path, sizeof(path), l->dir, ix->mp_rank, q))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: directory name too long", fn);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return mesh_par_error(MESH_ERR_IO, "%s: cannot open %s (it holds tensor '%s'): %s", fn,
                              path, tensor, strerror(errno));
    l->fd[q] = fd;
    struct stat sb;
    size_t want = sizeof(zero_ckpt_header_t) + (size_t)(1 + ix->nstate) * ix->shard * sizeof(float);
    if (fstat(fd, &sb) != 0)
        return mesh_par_error(MESH_ERR_IO, "%s: cannot stat %s: %s", fn, path, strerror(errno));
    if ((size_t)sb.st_size < want)
        return mesh_par_error(MESH_ERR_TRUNCATED,
                              "%s: %s is truncated: %lld bytes, %zu expected; "
                              "tensor '%s' lies past its end",
                              fn, path, (long long)sb.st_size, want,
                              first_missing(ix, q, (size_t)sb.st_size));
    if ((size_t)sb.st_size > want)
        return mesh_par_error(MESH_ERR_MISMATCH,
                              "%s: %s has %lld bytes, %zu expected (it holds "
                              "tensor '%s')",
                              fn, path, (long long)sb.st_size, want, tensor);
    zero_ckpt_header_t h;
    if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        return mesh_par_error(MESH_ERR_IO, "%s: cannot read the header of %s", fn, path);
    const char *what =
        memcmp(h.magic, ZERO_CKPT_MAGIC, sizeof(h.magic)) != 0      ? "magic"
        : h.version != ZERO_CKPT_VERSION                            ? "version"
        : h.header_bytes != sizeof(h)                               ? "header size"
        : h.dp_rank != (uint32_t)q || h.dp_size != (uint32_t)ix->dp ? "dp rank or size"
        : h.mp_rank != (uint32_t)ix->mp_rank || h.mp_size != (uint32_t)ix->mp_size
            ? "mp rank or size"
        : h.nstate != (uint32_t)ix->nstate || h.optimizer != (uint32_t)ix->optimizer ? "optimizer"
        : h.step != ix->step                                                         ? "step"
        : h.shard_numel != ix->shard                                                 ? "shard size"
                                                                                     : NULL;
    if (what)
        return mesh_par_error(MESH_ERR_MISMATCH,
                              "%s: %s: its header does not match the index (%s); "
                              "it holds tensor '%s'",
                              fn, path, what, tensor);
    return MESH_OK;
}

static mesh_status_t read_run(loader_t *l, int q, size_t pos, size_t n, size_t lidx,
                              const char *tensor)
{
    const zero_index_t *ix = &l->ix;
    if (l->fd[q] < 0)
        MESH_PAR_CHECK(open_file(l, q, tensor));
    for (int k = 0; k <= ix->nstate; k++) {
        char *dst = (char *)(l->arr[k] + lidx);
        size_t left = n * sizeof(float);
        off_t off =
            (off_t)(sizeof(zero_ckpt_header_t) + ((size_t)k * ix->shard + pos) * sizeof(float));
        while (left > 0) {
            ssize_t got = pread(l->fd[q], dst, left, off);
            if (got <= 0) {
                char path[PATH_MAX];
                mesh_zero__ckpt_path(path, sizeof(path), l->dir, ix->mp_rank, q);
                return mesh_par_error(MESH_ERR_IO, "%s: cannot read %s (tensor '%s'): %s", fn, path,
                                      tensor, got < 0 ? strerror(errno) : "unexpected end of file");
            }
            dst += got;
            off += got;
            left -= (size_t)got;
        }
    }
    return MESH_OK;
}

/* Reads every element of this rank's part, segment by segment, from the files that hold it. */
static mesh_status_t read_all(loader_t *l)
{
    const struct mesh_zero *z = l->z;
    const zero_index_t *ix = &l->ix;
    for (int s = 0; s < z->nseg; s++) {
        const zero_seg_t *sg = &z->seg[s];
        const zero_tensor_t *t = &z->t[sg->tensor];
        const zero_tensor_t *st = &ix->t[l->of_tensor[sg->tensor]];
        size_t i = sg->gidx - t->offset, end = i + sg->len, lidx = sg->lidx;
        while (i < end) {
            size_t g = st->offset + i;
            int b = saved_bucket(ix, g);
            size_t slice = ix->bnumel[b] / (size_t)ix->dp, in = g - ix->bstart[b];
            size_t q = in / slice, run = slice - in % slice;
            if (run > end - i)
                run = end - i;
            MESH_PAR_CHECK(read_run(l, (int)q, ix->bshard[b] + in % slice, run, lidx, t->name));
            i += run;
            lidx += run;
        }
    }
    return MESH_OK;
}

static mesh_status_t prepare(loader_t *l)
{
    const struct mesh_zero *z = l->z;
    char ipath[PATH_MAX];
    if (!mesh_zero__ckpt_path(ipath, sizeof(ipath), l->dir, z->mp_rank, -1))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: directory name too long", fn);
    MESH_PAR_CHECK(mesh_zero__index_read(ipath, &l->ix));
    MESH_PAR_CHECK(match_tensors(l, ipath));
    l->fd = malloc(sizeof(int) * (size_t)l->ix.dp);
    if (l->fd == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
    for (int q = 0; q < l->ix.dp; q++)
        l->fd[q] = -1;
    for (int k = 0; k <= z->nstate; k++)
        if ((l->arr[k] = calloc(z->L, sizeof(float))) == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory for %zu floats", fn, z->L);
    return read_all(l);
}

static void loader_free(loader_t *l)
{
    for (int q = 0; l->fd && q < l->ix.dp; q++)
        if (l->fd[q] >= 0)
            close(l->fd[q]);
    free(l->fd);
    free(l->of_tensor);
    for (int k = 0; k < 3; k++)
        free(l->arr[k]);
    mesh_zero__index_free(&l->ix);
}

/* Everything checked on every rank: the new arrays become the state. */
static void commit(struct mesh_zero *z, loader_t *l)
{
    if (z->master) {
        free(z->master);
        z->master = l->arr[0];
        l->arr[0] = NULL;
    } else {
        for (int s = 0; s < z->nseg; s++)
            memcpy(mesh_zero__master(z, &z->seg[s]), l->arr[0] + z->seg[s].lidx,
                   sizeof(float) * z->seg[s].len);
    }
    for (int k = 0; k < z->nstate; k++) {
        free(z->state[k]);
        z->state[k] = l->arr[k + 1];
        l->arr[k + 1] = NULL;
    }
    for (int s = 0; s < z->nseg; s++)
        mesh_zero__write_params(z, &z->seg[s]);
    for (int i = 0; i < z->nt; i++)
        z->t[i].initialized = 1;
    z->step = l->ix.step;
    z->synced = 1;
}

mesh_status_t mesh_zero_load(mesh_zero_h z, const char *dir)
{
    MESH_PAR_CHECK(mesh_zero__check_idle(z, fn));
    if (dir == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: dir is NULL", fn);
    loader_t l = {.z = z, .dir = dir};
    mesh_status_t st = mesh_zero__agree(z, fn, prepare(&l));
    if (st == MESH_OK) {
        commit(z, &l);
        st = mesh_zero__allgather_params(z, fn);
    }
    loader_free(&l);
    return st;
}
