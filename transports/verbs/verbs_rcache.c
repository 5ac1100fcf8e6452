/* Registration cache (see verbs_rcache.h). */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "verbs"
#include "transports/verbs/verbs_rcache.h"
#include "libmesh/log.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mesh_tl_verbs_rcache_init(mesh_tl_verbs_rcache_t *rc, mesh_tl_verbs_reg_fn reg,
                               mesh_tl_verbs_dereg_fn dereg, void *arg, size_t max_bytes,
                               size_t max_entries)
{
    memset(rc, 0, sizeof(*rc));
    rc->reg = reg;
    rc->dereg = dereg;
    rc->arg = arg;
    rc->max_bytes = max_bytes;
    rc->max_entries = max_entries;
    long page = sysconf(_SC_PAGESIZE);
    rc->page = page > 0 ? (size_t)page : 4096;
}

static void region_free(mesh_tl_verbs_rcache_t *rc, mesh_tl_verbs_region_t *r)
{
    rc->dereg(rc->arg, r->handle);
    rc->bytes -= r->end - r->start;
    free(r);
}

static void remove_at(mesh_tl_verbs_rcache_t *rc, size_t i)
{
    region_free(rc, rc->r[i]);
    memmove(&rc->r[i], &rc->r[i + 1], (rc->n - i - 1) * sizeof(rc->r[0]));
    rc->n--;
}

void mesh_tl_verbs_rcache_destroy(mesh_tl_verbs_rcache_t *rc)
{
    for (size_t i = 0; i < rc->n; i++)
        region_free(rc, rc->r[i]);
    free(rc->r);
    rc->r = NULL;
    rc->n = rc->cap = 0;
}

/* First index whose region starts after start (or at start with a larger end). */
static size_t upper_bound(const mesh_tl_verbs_rcache_t *rc, uintptr_t start, uintptr_t end)
{
    size_t lo = 0, hi = rc->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const mesh_tl_verbs_region_t *r = rc->r[mid];
        if (r->start < start || (r->start == start && r->end <= end))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void evict(mesh_tl_verbs_rcache_t *rc)
{
    while (rc->bytes > rc->max_bytes || rc->n > rc->max_entries) {
        size_t victim = rc->n;
        for (size_t i = 0; i < rc->n; i++)
            if (rc->r[i]->refs == 0 && (victim == rc->n || rc->r[i]->used < rc->r[victim]->used))
                victim = i;
        if (victim == rc->n)
            return; /* everything in use: over the limit until released */
        remove_at(rc, victim);
        rc->evictions++;
    }
}

mesh_status_t mesh_tl_verbs_rcache_get(mesh_tl_verbs_rcache_t *rc, const void *addr, size_t len,
                                       mesh_tl_verbs_region_t **region)
{
    uintptr_t a = (uintptr_t)addr;
    uintptr_t start = a & ~(uintptr_t)(rc->page - 1);
    uintptr_t end = (a + (len ? len : 1) + rc->page - 1) & ~(uintptr_t)(rc->page - 1);
    rc->tick++;
    /* a covering region starts at or before start and at most `longest` bytes before end */
    size_t i = upper_bound(rc, start, UINTPTR_MAX);
    while (i > 0) {
        mesh_tl_verbs_region_t *r = rc->r[--i];
        if (r->start + rc->longest < end)
            break;
        if (r->start <= start && r->end >= end) {
            r->refs++;
            r->used = rc->tick;
            rc->hits++;
            *region = r;
            return MESH_OK;
        }
    }
    rc->misses++;
    if (rc->n == rc->cap) {
        size_t cap = rc->cap ? 2 * rc->cap : 16;
        mesh_tl_verbs_region_t **nr = realloc(rc->r, cap * sizeof(*nr));
        if (nr == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "registration cache of %zu regions", cap);
        rc->r = nr;
        rc->cap = cap;
    }
    mesh_tl_verbs_region_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "registration cache region");
    r->start = start;
    r->end = end;
    mesh_status_t st = rc->reg(rc->arg, (void *)start, end - start, &r->handle, &r->lkey, &r->rkey);
    if (st != MESH_OK) {
        free(r);
        return st;
    }
    r->refs = 1;
    r->used = rc->tick;
    size_t at = upper_bound(rc, start, end);
    memmove(&rc->r[at + 1], &rc->r[at], (rc->n - at) * sizeof(rc->r[0]));
    rc->r[at] = r;
    rc->n++;
    rc->bytes += end - start;
    if (end - start > rc->longest)
        rc->longest = end - start;
    evict(rc);
    *region = r;
    return MESH_OK;
}

void mesh_tl_verbs_rcache_put(mesh_tl_verbs_rcache_t *rc, mesh_tl_verbs_region_t *region)
{
    if (--region->refs > 0)
        return;
    if (rc->max_bytes == 0) {
        for (size_t i = 0; i < rc->n; i++)
            if (rc->r[i] == region) {
                remove_at(rc, i);
                return;
            }
    }
    evict(rc);
}

int mesh_tl_verbs_rcache_invalidate(mesh_tl_verbs_rcache_t *rc, const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, b = a + len;
    int n = 0;
    for (size_t i = rc->n; i > 0; i--) {
        mesh_tl_verbs_region_t *r = rc->r[i - 1];
        if (r->refs == 0 && r->start < b && r->end > a) {
            remove_at(rc, i - 1);
            n++;
        }
    }
    return n;
}
