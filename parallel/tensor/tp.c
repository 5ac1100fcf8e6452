/* The tp handle and the arithmetic of shards: which rows, columns, heads and vocabulary entries
 * a tp rank owns. Splits are even or refused. */
#include "tp.h"

#include <stdlib.h>

mesh_status_t mesh_tp_create(mesh_comm_h comm, const mesh_tp_params_t *params, mesh_tp_h *tp)
{
    if (comm == NULL || tp == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_tp_create: %s is NULL",
                              comm == NULL ? "comm" : "tp");
    unsigned flags = 0;
    if (params != NULL && (params->field_mask & MESH_TP_PARAM_FIELD_FLAGS)) {
        if (params->flags & ~(unsigned)MESH_TP_SEQUENCE_PARALLEL)
            return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_tp_create: unknown flags 0x%x",
                                  params->flags);
        flags = params->flags;
    }
    struct mesh_tp *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_tp_create: out of memory");
    t->comm = comm;
    t->size = mesh_comm_size(comm);
    t->rank = mesh_comm_rank(comm);
    t->flags = flags;
    *tp = t;
    return MESH_OK;
}

void mesh_tp_destroy(mesh_tp_h tp)
{
    if (tp == NULL)
        return;
    free(tp->scratch[0]);
    free(tp->scratch[1]);
    free(tp);
}

int mesh_tp_size(mesh_tp_h tp)
{
    return tp ? tp->size : 0;
}
int mesh_tp_rank(mesh_tp_h tp)
{
    return tp ? tp->rank : -1;
}
int mesh_tp_sequence_parallel(mesh_tp_h tp)
{
    return tp ? !!(tp->flags & MESH_TP_SEQUENCE_PARALLEL) : 0;
}

mesh_status_t mesh_tp_check(mesh_tp_h tp, const char *fn)
{
    return tp ? MESH_OK : mesh_par_error(MESH_ERR_INVALID_ARG, "%s: tp is NULL", fn);
}

mesh_status_t mesh_tp_scratch(mesh_tp_h tp, int slot, size_t bytes, void **buf)
{
    if (bytes > tp->scratch_bytes[slot]) {
        void *p = realloc(tp->scratch[slot], bytes);
        if (p == NULL)
            return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_tp: no memory for %zu bytes of scratch",
                                  bytes);
        tp->scratch[slot] = p;
        tp->scratch_bytes[slot] = bytes;
    }
    *buf = tp->scratch[slot];
    return MESH_OK;
}

mesh_status_t mesh_tp_elem(mesh_dtype_t dtype, const char *fn, size_t *elem)
{
    size_t e = mesh_dtype_size(dtype);
    if (e == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "%s: unknown dtype %d", fn, (int)dtype);
    *elem = e;
    return MESH_OK;
}

mesh_status_t mesh_tp_split(size_t n, int parts, int index, const char *what,
                            mesh_tp_range_t *range)
{
    const char *name = what ? what : "size";
    if (range == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_tp_split: range is NULL");
    if (parts < 1 || index < 0 || index >= parts)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "mesh_tp_split: part %d of %d is not a part (%s)", index, parts,
                              name);
    if (n % (size_t)parts != 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG,
                              "%s=%zu does not split evenly across tp=%d (%zu left over)", name, n,
                              parts, n % (size_t)parts);
    range->count = n / (size_t)parts;
    range->start = range->count * (size_t)index;
    return MESH_OK;
}

mesh_status_t mesh_tp_shard(mesh_tp_h tp, size_t n, const char *what, mesh_tp_range_t *range)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_shard"));
    return mesh_tp_split(n, tp->size, tp->rank, what, range);
}

mesh_status_t mesh_tp_heads(mesh_tp_h tp, int heads, size_t head_dim, mesh_tp_range_t *head_range,
                            mesh_tp_range_t *columns)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_heads"));
    if (heads < 1 || head_dim == 0)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_tp_heads: heads=%d head_dim=%zu", heads,
                              head_dim);
    mesh_tp_range_t h;
    MESH_PAR_CHECK(mesh_tp_split((size_t)heads, tp->size, tp->rank, "heads", &h));
    if (head_range)
        *head_range = h;
    if (columns)
        *columns = (mesh_tp_range_t){h.start * head_dim, h.count * head_dim};
    return MESH_OK;
}

mesh_status_t mesh_tp_seq_shard(mesh_tp_h tp, size_t seq, mesh_tp_range_t *range)
{
    MESH_PAR_CHECK(mesh_tp_check(tp, "mesh_tp_seq_shard"));
    if (range == NULL)
        return mesh_par_error(MESH_ERR_INVALID_ARG, "mesh_tp_seq_shard: range is NULL");
    if (!(tp->flags & MESH_TP_SEQUENCE_PARALLEL)) {
        *range = (mesh_tp_range_t){0, seq};
        return MESH_OK;
    }
    return mesh_tp_split(seq, tp->size, tp->rank, "seq", range);
}
