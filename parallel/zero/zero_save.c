/* Checkpoint save: every rank writes its shard, dp rank 0 the index; the ranks agree on the
 * outcome. */
#include "zero_ckpt.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

mesh_status_t mesh_zero__check_idle(const struct mesh_zero *z, const char *fn)
{
    if (z == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: z is NULL", fn);
    if (!z->finalized)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: call mesh_zero_finalize first", fn);
    if (z->mb_open)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s: a micro-batch is in progress: call it "
                              "between mesh_zero_step and the next micro-batch",
                              fn);
    for (int g = 0; z->stage == 3 && g < z->ng; g++)
        if (z->g[g].refs > 0)
            return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: group %d is still gathered", fn,
                                  z->g[g].id);
    return MESH_OK;
}

/* One round over comm: the lowest failing rank's status and message reach every rank. */
static mesh_status_t agree_on(mesh_comm_h comm, const char *fn, const char *label, mesh_status_t st)
{
    struct {
        int32_t status;
        char msg[500];
    } m = {0};
    if (st < 0) { /* before the calls below can replace it */
        m.status = st;
        snprintf(m.msg, sizeof(m.msg), "%s", mesh_comm_last_error(NULL));
    }
    int32_t mine = st < 0 ? mesh_comm_rank(comm) : INT32_MAX, low;
    mesh_status_t cs = mesh_allreduce(comm, &mine, &low, 1, MESH_INT32, MESH_MIN, NULL, NULL);
    if (cs != MESH_OK)
        return mesh_zero__comm_fail(comm, cs, fn, "agreement");
    if (low == INT32_MAX)
        return MESH_OK;
    cs = mesh_broadcast(comm, &m, &m, sizeof(m), MESH_UINT8, low, NULL, NULL);
    if (cs != MESH_OK)
        return mesh_zero__comm_fail(comm, cs, fn, "agreement");
    if (low == mesh_comm_rank(comm))
        return st; /* its message is still this thread's */
    return mesh_par_error((mesh_status_t)m.status, "%s (on %s rank %d)", m.msg, label, (int)low);
}

mesh_status_t mesh_zero__agree(struct mesh_zero *z, const char *fn, mesh_status_t st)
{
    st = agree_on(z->dp, fn, "dp", st);
    if (z->mp_size > 1)
        st = agree_on(z->mp, fn, "mp", st);
    return st;
}

static mesh_status_t make_dir(const char *dir, const char *fn)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: directory name too long", fn);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return mesh_par_error(MESH_ERR_IO, "%s: cannot create %s: %s", fn, path,
                                  strerror(errno));
        *p = c;
        if (c == '\0')
            break;
    }
    return MESH_OK;
}

/* This rank's slice of bucket b in an optimizer-side array (master or state). */
static const float *slice_of(const struct mesh_zero *z, const float *arr, int b)
{
    const zero_bucket_t *bk = &z->b[b];
    size_t lo = bk->start + (size_t)z->rank * bk->slice;
    return arr + (z->stage == 0 ? lo : bk->shard_off);
}

static const float *master_slice(const struct mesh_zero *z, int b)
{
    if (z->master)
        return slice_of(z, z->master, b);
    if (z->stage == 3)
        return (const float *)z->param_shard + z->b[b].shard_off;
    return (const float *)z->param + z->b[b].start + (size_t)z->rank * z->b[b].slice;
}

static mesh_status_t write_shard(const struct mesh_zero *z, const char *path, const char *fn)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return mesh_par_error(MESH_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
    zero_ckpt_header_t h = {.version = ZERO_CKPT_VERSION,
                            .header_bytes = sizeof(h),
                            .dp_rank = (uint32_t)z->rank,
                            .dp_size = (uint32_t)z->size,
                            .mp_rank = (uint32_t)z->mp_rank,
                            .mp_size = (uint32_t)z->mp_size,
                            .stage = (uint32_t)z->stage,
                            .nstate = (uint32_t)z->nstate,
                            .step = z->step,
                            .shard_numel = z->S,
                            .optimizer = (uint32_t)z->opt};
    memcpy(h.magic, ZERO_CKPT_MAGIC, sizeof(h.magic));
    int ok = fwrite(&h, sizeof(h), 1, f) == 1;
    for (int k = -1; ok && k < z->nstate; k++)
        for (int b = 0; ok && b < z->nb; b++) {
            const float *src = k < 0 ? master_slice(z, b) : slice_of(z, z->state[k], b);
            ok = fwrite(src, sizeof(float), z->b[b].slice, f) == z->b[b].slice;
        }
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        remove(tmp);
        return mesh_par_error(MESH_ERR_IO, "%s: cannot write %s: %s", fn, tmp, strerror(err));
    }
    if (rename(tmp, path) != 0)
        return mesh_par_error(MESH_ERR_IO, "%s: cannot rename %s to %s: %s", fn, tmp, path,
                              strerror(errno));
    return MESH_OK;
}

mesh_status_t mesh_zero_save(mesh_zero_h z, const char *dir)
{
    static const char fn[] = "mesh_zero_save";
    MESH_PAR_CHECK(mesh_zero__check_idle(z, fn));
    if (dir == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: dir is NULL", fn);
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    mesh_zero__sync_master(z);
    mesh_status_t st = make_dir(dir, fn);
    if (st == MESH_OK && !mesh_zero__ckpt_path(path, sizeof(path), dir, z->mp_rank, z->rank))
        st = mesh_par_error(MESH_ERR_INVALID_ARG, "%s: directory name too long", fn);
    if (st == MESH_OK)
        st = write_shard(z, path, fn);
    if (st == MESH_OK && z->rank == 0) {
        mesh_zero__ckpt_path(path, sizeof(path), dir, z->mp_rank, -1);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        st = mesh_zero__index_write(z, tmp);
        if (st == MESH_OK && rename(tmp, path) != 0)
            st = mesh_par_error(MESH_ERR_IO, "%s: cannot rename %s to %s: %s", fn, tmp, path,
                                strerror(errno));
    }
    return mesh_zero__agree(z, fn, st);
}
