/* The checkpoint index: written from a handle, read back and checked line by line. */
#include "zero_ckpt.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mesh_zero__ckpt_path(char *buf, size_t len, const char *dir, int mp_rank, int dp_rank)
{
    int n = dp_rank < 0 ? snprintf(buf, len, "%s/index-mp%d.txt", dir, mp_rank)
                        : snprintf(buf, len, "%s/shard-mp%d-dp%d.bin", dir, mp_rank, dp_rank);
    return n > 0 && (size_t)n < len;
}

static const char *opt_name(int opt)
{
    return opt == MESH_ZERO_SGD ? "sgd" : "adamw";
}

mesh_status_t mesh_zero__index_write(const struct mesh_zero *z, const char *path)
{
    static const char fn[] = "mesh_zero_save";
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return mesh_par_error(MESH_ERR_IO, "%s: cannot create %s: %s", fn, path, strerror(errno));
    fprintf(f, "%s %d\nstage %d\ndp %d\nmp %d %d\ndtype %s\noptimizer %s %d\nstep %" PRId64 "\n",
            ZERO_INDEX_FORMAT, ZERO_CKPT_VERSION, z->stage, z->size, z->mp_rank, z->mp_size,
            mesh_dtype_name(z->dtype), opt_name(z->opt), z->nstate, z->step);
    fprintf(f, "numel %zu\npadded %zu\nshard %zu\nbuckets %d\n", z->numel, z->N, z->S, z->nb);
    for (int b = 0; b < z->nb; b++)
        fprintf(f, "b %zu %zu\n", z->b[b].start, z->b[b].numel);
    fprintf(f, "tensors %d\n", z->nt);
    for (int k = 0; k < z->nt; k++) {
        const zero_tensor_t *t = &z->t[z->order[k]];
        fprintf(f, "t %s %zu %zu %d %u %d", t->name, t->offset, t->numel, t->group, t->flags,
                t->ndim);
        for (int d = 0; d < t->ndim; d++)
            fprintf(f, " %zu", t->shape[d]);
        fputc('\n', f);
    }
    fputs("end\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return mesh_par_error(MESH_ERR_IO, "%s: cannot write %s: %s", fn, path, strerror(errno));
    return MESH_OK;
}

void mesh_zero__index_free(zero_index_t *ix)
{
    for (int i = 0; ix->t && i < ix->nt; i++)
        free(ix->t[i].name);
    free(ix->t);
    free(ix->bstart);
    free(ix->bnumel);
    free(ix->bshard);
    memset(ix, 0, sizeof(*ix));
}

typedef struct {
    FILE *f;
    const char *path;
    int line;
    char buf[1024];
} reader_t;

static mesh_status_t bad(const reader_t *r, const char *what)
{
    return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_zero_load: %s line %d: %s", r->path, r->line,
                          what);
}

/* Next line into r->buf; MESH_ERR_INVALID_ARG at the end of the file. */
static mesh_status_t next_line(reader_t *r)
{
    if (fgets(r->buf, sizeof(r->buf), r->f) == NULL) {
        r->line++;
        return bad(r, "unexpected end of file (truncated index)");
    }
    r->line++;
    size_t n = strlen(r->buf);
    if (n == 0 || r->buf[n - 1] != '\n')
        return bad(r, "line too long or not terminated");
    r->buf[n - 1] = '\0';
    return MESH_OK;
}

static mesh_status_t parse_header(reader_t *r, zero_index_t *ix)
{
    int version, n;
    char dtype[16], opt[16];
    long long step;
    MESH_PAR_CHECK(next_line(r));
    if (sscanf(r->buf, ZERO_INDEX_FORMAT " %d %n", &version, &n) != 1 || r->buf[n] != '\0')
        return bad(r, "not a mesh ZeRO checkpoint index");
    if (version != ZERO_CKPT_VERSION)
        return bad(r, "unsupported index version");
    struct {
        const char *fmt;
        int count;
    } keys[] = {
        {"stage %d %n", 1},          {"dp %d %n", 1},     {"mp %d %d %n", 2},  {"dtype %15s %n", 1},
        {"optimizer %15s %d %n", 2}, {"step %lld %n", 1}, {"numel %zu %n", 1}, {"padded %zu %n", 1},
        {"shard %zu %n", 1},         {"buckets %d %n", 1}};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        MESH_PAR_CHECK(next_line(r));
        int got = -1;
        n = 0;
        switch (k) {
        case 0:
            got = sscanf(r->buf, keys[k].fmt, &ix->stage, &n);
            break;
        case 1:
            got = sscanf(r->buf, keys[k].fmt, &ix->dp, &n);
            break;
        case 2:
            got = sscanf(r->buf, keys[k].fmt, &ix->mp_rank, &ix->mp_size, &n);
            break;
        case 3:
            got = sscanf(r->buf, keys[k].fmt, dtype, &n);
            break;
        case 4:
            got = sscanf(r->buf, keys[k].fmt, opt, &ix->nstate, &n);
            break;
        case 5:
            got = sscanf(r->buf, keys[k].fmt, &step, &n);
            break;
        case 6:
            got = sscanf(r->buf, keys[k].fmt, &ix->numel, &n);
            break;
        case 7:
            got = sscanf(r->buf, keys[k].fmt, &ix->padded, &n);
            break;
        case 8:
            got = sscanf(r->buf, keys[k].fmt, &ix->shard, &n);
            break;
        case 9:
            got = sscanf(r->buf, keys[k].fmt, &ix->nb, &n);
            break;
        }
        if (got != keys[k].count || r->buf[n] != '\0') {
            char what[96];
            snprintf(what, sizeof(what), "expected '%.*s'", (int)strcspn(keys[k].fmt, "%") - 1,
                     keys[k].fmt);
            return bad(r, what);
        }
    }
    ix->step = step;
    ix->optimizer = strcmp(opt, "sgd") == 0 ? MESH_ZERO_SGD : MESH_ZERO_ADAMW;
    if (strcmp(opt, "sgd") != 0 && strcmp(opt, "adamw") != 0)
        return bad(r, "unknown optimizer");
    if (ix->stage < 0 || ix->stage > 3 || ix->dp < 1 || ix->mp_size < 1 || ix->mp_rank < 0 ||
        ix->mp_rank >= ix->mp_size || ix->nstate < 0 || ix->nstate > 2 || step < 0 || ix->nb < 1 ||
        ix->padded % (size_t)ix->dp != 0 || ix->shard != ix->padded / (size_t)ix->dp)
        return bad(r, "inconsistent header values");
    return MESH_OK;
}

static mesh_status_t parse_buckets(reader_t *r, zero_index_t *ix)
{
    ix->bstart = calloc((size_t)ix->nb, sizeof(size_t));
    ix->bnumel = calloc((size_t)ix->nb, sizeof(size_t));
    ix->bshard = calloc((size_t)ix->nb, sizeof(size_t));
    if (!ix->bstart || !ix->bnumel || !ix->bshard)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_load: no memory");
    size_t pos = 0, shard = 0;
    for (int b = 0; b < ix->nb; b++) {
        int n = 0;
        MESH_PAR_CHECK(next_line(r));
        if (sscanf(r->buf, "b %zu %zu %n", &ix->bstart[b], &ix->bnumel[b], &n) != 2 || r->buf[n])
            return bad(r, "expected 'b START NUMEL'");
        if (ix->bstart[b] != pos || ix->bnumel[b] == 0 || ix->bnumel[b] % (size_t)ix->dp != 0)
            return bad(r, "bucket not contiguous or not a multiple of the dp size");
        ix->bshard[b] = shard;
        pos += ix->bnumel[b];
        shard += ix->bnumel[b] / (size_t)ix->dp;
    }
    if (pos != ix->padded)
        return bad(r, "buckets do not add up to the padded size");
    return MESH_OK;
}

static mesh_status_t parse_tensors(reader_t *r, zero_index_t *ix)
{
    int n = 0;
    MESH_PAR_CHECK(next_line(r));
    if (sscanf(r->buf, "tensors %d %n", &ix->nt, &n) != 1 || r->buf[n] || ix->nt < 1)
        return bad(r, "expected 'tensors COUNT'");
    ix->t = calloc((size_t)ix->nt, sizeof(zero_tensor_t));
    if (ix->t == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_load: no memory");
    size_t total = 0;
    for (int i = 0; i < ix->nt; i++) {
        zero_tensor_t *t = &ix->t[i];
        char name[MESH_ZERO_MAX_NAME + 1];
        int used = 0;
        MESH_PAR_CHECK(next_line(r));
        if (sscanf(r->buf, "t %200s %zu %zu %d %u %d%n", name, &t->offset, &t->numel, &t->group,
                   &t->flags, &t->ndim, &used) != 6 ||
            t->ndim < 1 || t->ndim > MESH_ZERO_MAX_DIMS || t->numel == 0)
            return bad(r, "expected 't NAME OFFSET NUMEL GROUP FLAGS NDIM DIMS...'");
        const char *p = r->buf + used;
        size_t prod = 1;
        for (int d = 0; d < t->ndim; d++) {
            int k = 0;
            if (sscanf(p, " %zu%n", &t->shape[d], &k) != 1)
                return bad(r, "missing dimensions");
            p += k;
            prod *= t->shape[d];
        }
        if (*p != '\0' || prod != t->numel)
            return bad(r, "shape does not match numel");
        /* the tensor must lie inside one bucket */
        int b = 0;
        while (b + 1 < ix->nb && ix->bstart[b + 1] <= t->offset)
            b++;
        if (t->offset + t->numel > ix->bstart[b] + ix->bnumel[b])
            return bad(r, "tensor outside its bucket");
        t->bucket = b;
        if ((t->name = strdup(name)) == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_load: no memory");
        total += t->numel;
    }
    if (total != ix->numel)
        return bad(r, "tensor sizes do not add up to numel");
    MESH_PAR_CHECK(next_line(r));
    if (strcmp(r->buf, "end") != 0)
        return bad(r, "expected 'end'");
    return MESH_OK;
}

mesh_status_t mesh_zero__index_read(const char *path, zero_index_t *ix)
{
    memset(ix, 0, sizeof(*ix));
    reader_t r = {.path = path};
    r.f = fopen(path, "r");
    if (r.f == NULL)
        return mesh_par_error(MESH_ERR_IO, "mesh_zero_load: cannot open %s: %s", path,
                              strerror(errno));
    mesh_status_t st;
    if ((st = parse_header(&r, ix)) < 0 || (st = parse_buckets(&r, ix)) < 0 ||
        (st = parse_tensors(&r, ix)) < 0)
        mesh_zero__index_free(ix);
    fclose(r.f);
    return st;
}
