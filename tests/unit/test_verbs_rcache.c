/* verbs registration cache with counting callbacks in place of a device: hits, misses,
 * covering regions, reference counts, LRU eviction under byte and entry limits, no caching. */
#include "config.h"
#include "transports/verbs/verbs_rcache.h"
#include "tests/harness/harness.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int regs, deregs;
    int fail;
    size_t live_bytes;
} counters_t;

static mesh_status_t fake_reg(void *arg, void *addr, size_t len, void **handle, uint32_t *lkey,
                              uint32_t *rkey)
{
    counters_t *c = arg;
    if (c->fail)
        return MESH_ERR_NO_MEMORY;
    c->regs++;
    c->live_bytes += len;
    size_t *h = malloc(sizeof(size_t));
    *h = len;
    *handle = h;
    *lkey = (uint32_t)c->regs;
    *rkey = (uint32_t)c->regs + 1000;
    (void)addr;
    return MESH_OK;
}

static void fake_dereg(void *arg, void *handle)
{
    counters_t *c = arg;
    c->deregs++;
    c->live_bytes -= *(size_t *)handle;
    free(handle);
}

#define PG 4096u

int main(void)
{
    counters_t c = {0};
    mesh_tl_verbs_rcache_t rc;
    char *mem = aligned_alloc(PG, 64 * PG);
    CHECK(mem != NULL);

    /* limits: 8 pages, 3 entries */
    mesh_tl_verbs_rcache_init(&rc, fake_reg, fake_dereg, &c, 8 * PG, 3);
    CHECK(rc.page == PG);
    mesh_tl_verbs_region_t *a, *b, *x;
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 10, 100, &a) == MESH_OK);
    CHECK(a->start == (uintptr_t)mem && a->end == (uintptr_t)mem + PG && a->refs == 1);
    CHECK(c.regs == 1 && rc.misses == 1 && rc.hits == 0);
    /* inside the same page: a hit, same region, one more reference */
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 200, 3000, &b) == MESH_OK);
    CHECK(b == a && a->refs == 2 && c.regs == 1 && rc.hits == 1);
    /* crossing the page: a new, larger region */
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + PG - 1, 2, &x) == MESH_OK);
    CHECK(x != a && x->start == (uintptr_t)mem && x->end == (uintptr_t)mem + 2 * PG);
    CHECK(c.regs == 2 && rc.n == 2 && rc.bytes == 3 * PG);
    /* now a request inside the first page may be served by either covering region */
    mesh_tl_verbs_region_t *y;
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem, 1, &y) == MESH_OK && (y == a || y == x));
    mesh_tl_verbs_rcache_put(&rc, y);
    /* a request covered by the 2-page region only */
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + PG + 5, 10, &y) == MESH_OK && y == x);
    CHECK(x->refs == 2);
    mesh_tl_verbs_rcache_put(&rc, y);
    mesh_tl_verbs_rcache_put(&rc, a);
    mesh_tl_verbs_rcache_put(&rc, b);
    mesh_tl_verbs_rcache_put(&rc, x);
    CHECK(a->refs == 0 && x->refs == 0 && c.deregs == 0); /* cached while under limits */

    /* a third region (4 pages) brings bytes to 7 pages, entries to 3: still fits */
    mesh_tl_verbs_region_t *d;
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 10 * PG, 4 * PG, &d) == MESH_OK);
    CHECK(rc.n == 3 && rc.bytes == 7 * PG && c.deregs == 0);
    /* touch a so that x is the least recently used unreferenced region */
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 1, 1, &y) == MESH_OK);
    CHECK(y == a || y == x);
    mesh_tl_verbs_region_t *touched = y;
    mesh_tl_verbs_rcache_put(&rc, y);
    /* a fourth region exceeds both limits: LRU unreferenced regions go, d (referenced) stays */
    mesh_tl_verbs_region_t *e;
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 20 * PG, 2 * PG, &e) == MESH_OK);
    CHECK(rc.bytes <= 8 * PG && rc.n <= 3);
    CHECK(c.deregs == 1 && rc.evictions == 1);
    /* the evicted one is the untouched region of the first two */
    int found_touched = 0;
    for (size_t i = 0; i < rc.n; i++)
        found_touched |= rc.r[i] == touched;
    CHECK(found_touched);
    /* sorted by start */
    for (size_t i = 1; i < rc.n; i++)
        CHECK(rc.r[i - 1]->start <= rc.r[i]->start);
    /* everything referenced: the cache may exceed its limit until released */
    mesh_tl_verbs_region_t *big;
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 30 * PG, 10 * PG, &big) == MESH_OK);
    CHECK(rc.bytes > 8 * PG);
    mesh_tl_verbs_rcache_put(&rc, big);
    CHECK(rc.bytes <= 8 * PG);
    CHECK(c.live_bytes == rc.bytes);

    /* invalidation forgets unreferenced overlapping regions only */
    int before = c.deregs;
    CHECK(mesh_tl_verbs_rcache_invalidate(&rc, mem + 10 * PG, PG) == 0); /* d is referenced */
    mesh_tl_verbs_rcache_put(&rc, d);
    mesh_tl_verbs_rcache_put(&rc, e);
    int inval = mesh_tl_verbs_rcache_invalidate(&rc, mem + 10 * PG, PG);
    CHECK(inval == 1 && c.deregs - before == 1);

    /* a failed registration leaves nothing behind */
    size_t n0 = rc.n;
    c.fail = 1;
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem + 50 * PG, PG, &y) == MESH_ERR_NO_MEMORY);
    CHECK(rc.n == n0);
    c.fail = 0;
    mesh_tl_verbs_rcache_destroy(&rc);
    CHECK(c.regs == c.deregs && c.live_bytes == 0);

    /* max_bytes 0: no caching, deregistered on the last put */
    counters_t c2 = {0};
    mesh_tl_verbs_rcache_init(&rc, fake_reg, fake_dereg, &c2, 0, 100);
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem, 100, &a) == MESH_OK);
    CHECK(mesh_tl_verbs_rcache_get(&rc, mem, 100, &b) == MESH_OK && b == a);
    mesh_tl_verbs_rcache_put(&rc, a);
    CHECK(c2.deregs == 0);
    mesh_tl_verbs_rcache_put(&rc, b);
    CHECK(c2.deregs == 1 && rc.n == 0 && rc.bytes == 0);
    mesh_tl_verbs_rcache_destroy(&rc);

    /* many regions: every lookup finds its own */
    counters_t c3 = {0};
    mesh_tl_verbs_rcache_init(&rc, fake_reg, fake_dereg, &c3, 1u << 30, 1000);
    mesh_tl_verbs_region_t *rs[32];
    for (int i = 0; i < 32; i++)
        CHECK(mesh_tl_verbs_rcache_get(&rc, mem + (size_t)(31 - i) * PG, PG, &rs[i]) == MESH_OK);
    CHECK(rc.n == 32 && c3.regs == 32);
    for (int i = 0; i < 32; i++) {
        CHECK(mesh_tl_verbs_rcache_get(&rc, mem + (size_t)(31 - i) * PG + 7, 9, &y) == MESH_OK);
        CHECK(y == rs[i]);
        mesh_tl_verbs_rcache_put(&rc, y);
        mesh_tl_verbs_rcache_put(&rc, rs[i]);
    }
    CHECK(c3.regs == 32 && rc.hits == 32);
    mesh_tl_verbs_rcache_destroy(&rc);
    CHECK(c3.deregs == 32);
    free(mem);
    printf("verbs rcache: ok\n");
    return 0;
}
