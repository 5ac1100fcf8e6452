/* The flat-buffer layout: tensors by group, buckets formed in backward order and padded to the
 * dp size, groups, and the segments of this rank's part that the optimizer walks. */
#include "zero_impl.h"
#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Stable order by group, so that a group is contiguous whatever the registration order. */
static void layout_order(struct mesh_zero *z)
{
    for (int i = 0; i < z->nt; i++)
        z->order[i] = i;
    for (int i = 1; i < z->nt; i++) { /* insertion sort: stable, and models are small */
        int v = z->order[i], j = i - 1;
        while (j >= 0 && z->t[z->order[j]].group > z->t[v].group) {
            z->order[j + 1] = z->order[j];
            j--;
        }
        z->order[j + 1] = v;
    }
}

/* Buckets from the end of the layout: a bucket closes once it holds bucket_bytes, and in
 * stage 3 where the group changes. Fills first/count in layout order. */
static int form_buckets(struct mesh_zero *z)
{
    int nb = 0, end = z->nt; /* the open bucket covers order[i + 1 .. end) */
    size_t bytes = 0;
    for (int i = z->nt - 1; i >= 0; i--) {
        const zero_tensor_t *t = &z->t[z->order[i]];
        if (end - i > 1 && z->stage == 3 && t->group != z->t[z->order[i + 1]].group) {
            z->b[nb++] = (zero_bucket_t){.first = i + 1, .count = end - i - 1};
            end = i + 1;
            bytes = 0;
        }
        bytes += t->numel * z->esize;
        if (bytes >= z->bucket_bytes || i == 0) {
            z->b[nb++] = (zero_bucket_t){.first = i, .count = end - i};
            end = i;
            bytes = 0;
        }
    }
    /* formed last to first: reverse into layout order */
    for (int i = 0; i < nb / 2; i++) {
        zero_bucket_t tmp = z->b[i];
        z->b[i] = z->b[nb - 1 - i];
        z->b[nb - 1 - i] = tmp;
    }
    return nb;
}

static mesh_status_t make_groups(struct mesh_zero *z)
{
    int ng = 0;
    for (int i = 0; i < z->nt; i++)
        if (i == 0 || z->t[z->order[i]].group != z->t[z->order[i - 1]].group)
            ng++;
    z->g = calloc((size_t)ng, sizeof(*z->g));
    if (z->g == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_finalize: no memory");
    z->ng = 0;
    for (int b = 0; b < z->nb; b++) {
        int id = z->t[z->order[z->b[b].first]].group;
        z->b[b].group = id;
        if (z->ng == 0 || z->g[z->ng - 1].id != id)
            z->g[z->ng++] = (zero_group_t){.id = id, .first = b};
        z->g[z->ng - 1].count++;
    }
    /* outside stage 3 buckets may span groups: list every group id for validation */
    if (z->stage != 3) {
        z->ng = 0;
        for (int i = 0; i < z->nt; i++) {
            int id = z->t[z->order[i]].group;
            if (z->ng == 0 || z->g[z->ng - 1].id != id)
                z->g[z->ng++] = (zero_group_t){.id = id};
        }
    }
    return MESH_OK;
}

mesh_status_t mesh_zero__layout(struct mesh_zero *z)
{
    size_t a = ZERO_ALIGN_BYTES / z->esize, unit = a * (size_t)z->size;
    z->order = malloc(sizeof(int) * (size_t)z->nt);
    z->b = calloc((size_t)z->nt, sizeof(*z->b));
    if (z->order == NULL || z->b == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_finalize: no memory for the layout");
    layout_order(z);
    z->nb = form_buckets(z);

    size_t pos = 0, shard = 0;
    int nseg = 0;
    for (int b = 0; b < z->nb; b++) {
        zero_bucket_t *bk = &z->b[b];
        size_t off = 0;
        for (int k = bk->first; k < bk->first + bk->count; k++) {
            zero_tensor_t *t = &z->t[z->order[k]];
            off = align_up(off, a);
            t->offset = pos + off;
            t->bucket = b;
            off += t->numel;
        }
        bk->start = pos;
        bk->numel = align_up(off > 0 ? off : 1, unit);
        bk->slice = bk->numel / (size_t)z->size;
        bk->shard_off = z->stage == 0 ? bk->start : shard;
        pos += bk->numel;
        shard += bk->slice;
        nseg += bk->count;
    }
    z->N = pos;
    z->S = shard;
    z->L = z->stage == 0 ? z->N : z->S;
    MESH_PAR_CHECK(make_groups(z));

    /* segments: each tensor's run inside this rank's part of its bucket */
    z->seg = calloc((size_t)(nseg > 0 ? nseg : 1), sizeof(*z->seg));
    if (z->seg == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_zero_finalize: no memory");
    z->nseg = 0;
    for (int b = 0; b < z->nb; b++) {
        const zero_bucket_t *bk = &z->b[b];
        size_t lo = z->stage == 0 ? bk->start : bk->start + (size_t)z->rank * bk->slice;
        size_t hi = z->stage == 0 ? bk->start + bk->numel : lo + bk->slice;
        for (int k = bk->first; k < bk->first + bk->count; k++) {
            const zero_tensor_t *t = &z->t[z->order[k]];
            size_t s = t->offset > lo ? t->offset : lo;
            size_t e = t->offset + t->numel < hi ? t->offset + t->numel : hi;
            if (s >= e)
                continue;
            z->seg[z->nseg++] = (zero_seg_t){.tensor = z->order[k],
                                             .bucket = b,
                                             .gidx = s,
                                             .lidx = bk->shard_off + (s - lo),
                                             .len = e - s};
        }
    }
    return MESH_OK;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

mesh_status_t mesh_zero__norm_weights(struct mesh_zero *z)
{
    static const char fn[] = "mesh_zero_finalize";
    int mine = 0;
    for (int i = 0; i < z->nt; i++) {
        zero_tensor_t *t = &z->t[i];
        t->norm_weight = 1.0;
        if (z->mp_size <= 1)
            continue; /* no model parallelism: every tensor is one copy */
        if (t->flags & MESH_ZERO_REPLICATED)
            mine++;
        else if (t->flags & MESH_ZERO_SHARED)
            t->norm_weight = 0.5;
    }
    if (z->mp_size <= 1)
        return MESH_OK;

    /* replicated names of every mp rank: a copy counts where no lower rank registered it */
    int *counts = calloc((size_t)z->mp_size, sizeof(int));
    size_t *rc = calloc((size_t)z->mp_size, sizeof(size_t));
    uint64_t *own = calloc((size_t)(mine > 0 ? mine : 1), sizeof(uint64_t));
    uint64_t *all = NULL;
    mesh_status_t st = MESH_OK;
    if (counts == NULL || rc == NULL || own == NULL) {
        st = mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
        goto out;
    }
    for (int i = 0, k = 0; i < z->nt; i++)
        if (z->t[i].flags & MESH_ZERO_REPLICATED)
            own[k++] = name_hash(z->t[i].name);
    st = mesh_allgather(z->mp, &mine, counts, 1, MESH_INT32, NULL, NULL);
    if (st != MESH_OK) {
        st = mesh_zero__comm_fail(z->mp, st, fn, "exchange of replicated tensor counts on mp_comm");
        goto out;
    }
    size_t total = 0;
    for (int r = 0; r < z->mp_size; r++) {
        rc[r] = (size_t)counts[r];
        total += rc[r];
    }
    all = calloc(total > 0 ? total : 1, sizeof(uint64_t));
    if (all == NULL) {
        st = mesh_par_error(MESH_ERR_NO_MEMORY, "%s: no memory", fn);
        goto out;
    }
    if (total > 0) {
        st = mesh_allgatherv(z->mp, own, all, rc, NULL, MESH_UINT64, NULL, NULL);
        if (st != MESH_OK) {
            st = mesh_zero__comm_fail(z->mp, st, fn, "exchange of replicated tensor names");
            goto out;
        }
    }
    size_t below = 0; /* entries of lower mp ranks */
    for (int r = 0; r < z->mp_rank; r++)
        below += rc[r];
    for (int i = 0, k = 0; i < z->nt; i++) {
        if (!(z->t[i].flags & MESH_ZERO_REPLICATED))
            continue;
        for (size_t j = 0; j < below; j++)
            if (all[j] == own[k])
                z->t[i].norm_weight = 0.0;
        k++;
    }
out:
    free(counts);
    free(rc);
    free(own);
    free(all);
    return st;
}
