/*
 * Registration cache: registered regions kept in an array sorted by start address, each with a
 * reference count and a last-use tick. A lookup hits when one region covers the whole request;
 * a miss registers the page-aligned request. Unreferenced regions are evicted least recently
 * used first while the cache holds more than max_bytes or max_entries; max_bytes == 0 disables
 * caching (a region is deregistered when its last reference goes). Registration goes through
 * callbacks, so the cache runs without a device in tests.
 *
 * A cached region stays pinned to the pages it was registered on: memory the application
 * unmaps and maps again at the same address must be passed to invalidate() first (or caching
 * turned off with IB_RCACHE_MAX=0).
 */
#ifndef MESH_TL_VERBS_RCACHE_H
#define MESH_TL_VERBS_RCACHE_H

#include "mesh.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uintptr_t start, end; /* [start, end), page aligned */
    int refs;
    uint64_t used; /* tick of the last lookup that returned it */
    void *handle;  /* the registration (struct ibv_mr *) */
    uint32_t lkey, rkey;
} mesh_tl_verbs_region_t;

typedef mesh_status_t (*mesh_tl_verbs_reg_fn)(void *arg, void *addr, size_t len, void **handle,
                                              uint32_t *lkey, uint32_t *rkey);
typedef void (*mesh_tl_verbs_dereg_fn)(void *arg, void *handle);

typedef struct {
    mesh_tl_verbs_reg_fn reg;
    mesh_tl_verbs_dereg_fn dereg;
    void *arg;
    size_t max_bytes;
    size_t max_entries;
    size_t page;
    mesh_tl_verbs_region_t **r; /* sorted by start, then end */
    size_t n, cap;
    size_t bytes;   /* sum of region lengths */
    size_t longest; /* longest region ever cached: bounds the backward search */
    uint64_t tick;
    uint64_t hits, misses, evictions;
} mesh_tl_verbs_rcache_t;

void mesh_tl_verbs_rcache_init(mesh_tl_verbs_rcache_t *rc, mesh_tl_verbs_reg_fn reg,
                               mesh_tl_verbs_dereg_fn dereg, void *arg, size_t max_bytes,
                               size_t max_entries);
/* Deregisters everything, referenced or not (the interface is closing). */
void mesh_tl_verbs_rcache_destroy(mesh_tl_verbs_rcache_t *rc);
/* A region covering [addr, addr + len) with one more reference. */
mesh_status_t mesh_tl_verbs_rcache_get(mesh_tl_verbs_rcache_t *rc, const void *addr, size_t len,
                                       mesh_tl_verbs_region_t **region);
/* Drops a reference; may evict. */
void mesh_tl_verbs_rcache_put(mesh_tl_verbs_rcache_t *rc, mesh_tl_verbs_region_t *region);
/* Forgets unreferenced regions overlapping [addr, addr + len); returns how many. */
int mesh_tl_verbs_rcache_invalidate(mesh_tl_verbs_rcache_t *rc, const void *addr, size_t len);

#endif
