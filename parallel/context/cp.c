/* The cp handle and the sharding of sequences: which positions a cp rank holds, contiguous or
 * zig-zag, and the copies between whole sequences and that layout. */
#include "cp.h"

#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_cp_create(mesh_comm_h comm, const mesh_cp_params_t *params, mesh_cp_h *cp)
{
    if (comm == NULL || cp == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_cp_create: %s is NULL",
                              comm == NULL ? "comm" : "cp");
    unsigned flags = 0;
    mesh_cp_algorithm_t algorithm = MESH_CP_RING;
    int tag = MESH_CP_TAG_DEFAULT;
    if (params != NULL && (params->field_mask & MESH_CP_PARAM_FIELD_FLAGS)) {
        if (params->flags & ~(unsigned)(MESH_CP_ZIGZAG | MESH_CP_NO_OVERLAP))
            return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_cp_create: unknown flags 0x%x",
                                  params->flags);
        flags = params->flags;
    }
    if (params != NULL && (params->field_mask & MESH_CP_PARAM_FIELD_ALGORITHM)) {
        if (params->algorithm != MESH_CP_RING && params->algorithm != MESH_CP_ALLGATHER)
            return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_cp_create: unknown algorithm %d",
                                  (int)params->algorithm);
        algorithm = params->algorithm;
    }
    if (params != NULL && (params->field_mask & MESH_CP_PARAM_FIELD_TAG)) {
        if (params->tag < 0 || params->tag > MESH_TAG_MAX - 1)
            return mesh_par_error(MESH_ERR_INVALID_ARG,
                                  "mesh_cp_create: tag %d is not in 0..MESH_TAG_MAX-1",
                                  params->tag);
        tag = params->tag;
    }
    struct mesh_cp *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_cp_create: out of memory");
    c->comm = comm;
    c->size = mesh_comm_size(comm);
    c->rank = mesh_comm_rank(comm);
    c->flags = flags;
    c->algorithm = algorithm;
    c->tag = tag;
    *cp = c;
    return MESH_OK;
}

void mesh_cp_destroy(mesh_cp_h cp)
{
    if (cp == NULL)
        return;
    free(cp->scratch);
    free(cp);
}

int mesh_cp_size(mesh_cp_h cp)
{
    return cp ? cp->size : 0;
}
int mesh_cp_rank(mesh_cp_h cp)
{
    return cp ? cp->rank : -1;
}
int mesh_cp_zigzag(mesh_cp_h cp)
{
    return cp ? !!(cp->flags & MESH_CP_ZIGZAG) : 0;
}
mesh_cp_algorithm_t mesh_cp_algorithm(mesh_cp_h cp)
{
    return cp ? cp->algorithm : MESH_CP_RING;
}

mesh_status_t mesh_cp_check(mesh_cp_h cp, const char *fn)
{
    return cp ? MESH_OK : mesh_par_error(MESH_ERR_INVALID_ARG, "%s: cp is NULL", fn);
}

mesh_status_t mesh_cp_scratch(mesh_cp_h cp, size_t bytes, void **buf)
{
    if (bytes > cp->scratch_bytes) {
        void *p = realloc(cp->scratch, bytes);
        if (p == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_cp: no memory for %zu bytes of scratch",
                                  bytes);
        cp->scratch = p;
        cp->scratch_bytes = bytes;
    }
    *buf = cp->scratch;
    return MESH_OK;
}

mesh_status_t mesh_cp_chunks(size_t seq, int cp, int rank, int zigzag, mesh_cp_range_t chunks[2],
                             int *nchunks)
{
    if (chunks == NULL || nchunks == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_cp_chunks: %s is NULL",
                              chunks == NULL ? "chunks" : "nchunks");
    if (cp < 1 || rank < 0 || rank >= cp)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_cp_chunks: rank %d of cp=%d", rank, cp);
    size_t parts = (size_t)cp * (zigzag ? 2 : 1);
    if (seq == 0 || seq % parts != 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "seq=%zu does not split evenly into %zu chunks (cp=%d%s)", seq, parts,
                              cp, zigzag ? ", zigzag" : "");
    size_t len = seq / parts;
    chunks[0] = (mesh_cp_range_t){(size_t)rank * len, len};
    if (zigzag)
        chunks[1] = (mesh_cp_range_t){(parts - 1 - (size_t)rank) * len, len};
    *nchunks = zigzag ? 2 : 1;
    return MESH_OK;
}

void mesh_cp_rows(mesh_cp_h cp, int rank, size_t seq, mesh_cp_rows_t *rows)
{
    mesh_cp_chunks(seq, cp->size, rank, !!(cp->flags & MESH_CP_ZIGZAG), rows->chunk, &rows->n);
    rows->offset[0] = 0;
    rows->offset[1] = rows->chunk[0].count;
}

/* Copies between full [batch, seq, width] and the local rows of `rank`; to_local picks the
 * direction. */
static void move_rows(mesh_cp_h cp, int rank, char *full, char *local, size_t batch, size_t seq,
                      size_t row_bytes, int to_local)
{
    mesh_cp_rows_t r;
    mesh_cp_rows(cp, rank, seq, &r);
    size_t nlocal = seq / (size_t)cp->size;
    for (size_t b = 0; b < batch; b++)
        for (int c = 0; c < r.n; c++) {
            char *f = full + (b * seq + r.chunk[c].start) * row_bytes;
            char *l = local + (b * nlocal + r.offset[c]) * row_bytes;
            size_t n = r.chunk[c].count * row_bytes;
            if (to_local)
                memcpy(l, f, n);
            else
                memcpy(f, l, n);
        }
}

static mesh_status_t shard_args(mesh_cp_h cp, const void *a, const void *b, size_t seq,
                                mesh_dtype_t dtype, const char *fn, const char *na, const char *nb,
                                size_t *elem)
{
    MESH_PAR_CHECK(mesh_cp_check(cp, fn));
    if (a == NULL || b == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: %s is NULL", fn, a == NULL ? na : nb);
    *elem = mesh_dtype_size(dtype);
    if (*elem == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: unknown dtype %d", fn, (int)dtype);
    mesh_cp_range_t ch[2];
    int n;
    return mesh_cp_chunks(seq, cp->size, cp->rank, !!(cp->flags & MESH_CP_ZIGZAG), ch, &n);
}

mesh_status_t mesh_cp_shard(mesh_cp_h cp, const void *full, void *local, size_t batch, size_t seq,
                            size_t width, mesh_dtype_t dtype)
{
    size_t elem;
    MESH_PAR_CHECK(
        shard_args(cp, full, local, seq, dtype, "mesh_cp_shard", "full", "local", &elem));
    move_rows(cp, cp->rank, (char *)full, local, batch, seq, width * elem, 1);
    return MESH_OK;
}

mesh_status_t mesh_cp_unshard(mesh_cp_h cp, const void *local, void *full, size_t batch, size_t seq,
                              size_t width, mesh_dtype_t dtype)
{
    size_t elem;
    MESH_PAR_CHECK(
        shard_args(cp, local, full, seq, dtype, "mesh_cp_unshard", "local", "full", &elem));
    size_t count = batch * (seq / (size_t)cp->size) * width, bytes = count * elem;
    if (cp->size == 1) {
        memcpy(full, local, bytes);
        return MESH_OK;
    }
    void *all = NULL;
    MESH_PAR_CHECK(mesh_cp_scratch(cp, bytes * (size_t)cp->size, &all));
    mesh_status_t st = mesh_allgather(cp->comm, local, all, count, dtype, NULL, NULL);
    if (st != MESH_OK)
        return mesh_par_fail(cp->comm, st, "mesh_cp_unshard: all-gather over cp");
    for (int r = 0; r < cp->size; r++)
        move_rows(cp, r, full, (char *)all + (size_t)r * bytes, batch, seq, width * elem, 0);
    return MESH_OK;
}
