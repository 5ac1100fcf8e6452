/* The pool of finished schedules of a communicator: a new schedule reuses one's memory, and a
 * call identical to an earlier one replays its graph (mesh_sched_reuse). */
#define MESH_LOG_SUBSYSTEM "sched"
#include "collectives/sched_impl.h"
#include "libmesh/log.h"
#include <stdlib.h>
#include <string.h>

/* A communicator keeps a few finished schedules, with their task arrays and up to
 * MESH_SCHED_SCRATCH_KEEP_BYTES of scratch each, so that a stream of collectives does not go
 * through malloc (and page faults) on every call. */
#define SCHED_POOL_MAX 4

/* The communicator's store of schedules: the pool above, and failed schedules whose operations
 * transports may still complete (freed once the transports are closed). */
struct mesh_sched_cache {
    mesh_sched_t *pool;
    int pool_len;
    mesh_sched_t *zombies;
};

static void scratch_free_list(mesh_scratch_t *sc)
{
    while (sc != NULL) {
        mesh_scratch_t *n = sc->next;
        free(sc);
        sc = n;
    }
}

/* Back to a freshly created state, keeping the arrays and a bounded amount of scratch. */
static void sched_reset(mesh_sched_t *s)
{
    size_t kept = 0;
    for (mesh_scratch_t *sc = s->spare; sc != NULL; sc = sc->next)
        kept += sc->size;
    while (s->scratch != NULL) {
        mesh_scratch_t *sc = s->scratch;
        s->scratch = sc->next;
        if (kept + sc->size > MESH_SCHED_SCRATCH_KEEP_BYTES) {
            free(sc);
            continue;
        }
        kept += sc->size;
        sc->next = s->spare;
        s->spare = sc;
    }
    s->status = MESH_OK;
    s->started = 0;
    s->csr_built = 0;
    s->keylen = 0;
    s->ntasks = s->nedges = s->nready = s->ncomp = s->ninflight = s->ndone = 0;
    s->tag_base = 0;
    s->finalize = NULL;
    s->finalize_arg = NULL;
    s->next = NULL;
    memset(s->send_count, 0, 2 * (size_t)s->comm->size * sizeof(uint32_t));
}

struct mesh_sched_cache *mesh_sched_cache_create(void)
{
    return calloc(1, sizeof(struct mesh_sched_cache));
}

mesh_status_t mesh_sched_create(mesh_comm_t *comm, mesh_dtype_t dtype, mesh_op_t op,
                                mesh_sched_t **out)
{
    /* an unkeyed pooled schedule, else the least recently pooled one (its graph is the least
     * likely to be replayed) */
    struct mesh_sched_cache *cache = comm->sched_cache;
    mesh_sched_t **pick = NULL;
    for (mesh_sched_t **pp = &cache->pool; *pp != NULL; pp = &(*pp)->next) {
        pick = pp;
        if ((*pp)->keylen == 0)
            break;
    }
    mesh_sched_t *s = pick ? *pick : NULL;
    if (s != NULL) {
        *pick = s->next;
        cache->pool_len--;
        sched_reset(s);
    } else {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule");
        s->send_count = calloc(2 * (size_t)comm->size, sizeof(uint32_t));
        if (s->send_count == NULL) {
            free(s);
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a schedule for %d ranks",
                              comm->size);
        }
        s->comm = comm;
        s->status = MESH_OK;
    }
    s->recv_count = s->send_count + comm->size;
    s->dtype = dtype;
    s->op = op;
    *out = s;
    return MESH_OK;
}

static void sched_free(mesh_sched_t *s);

static size_t scratch_bytes(const mesh_sched_t *s)
{
    size_t n = 0;
    for (const mesh_scratch_t *sc = s->scratch; sc != NULL; sc = sc->next)
        n += sc->size;
    return n;
}

void mesh_sched_set_key(mesh_sched_t *s, const void *key, size_t len, const void *cookie)
{
    s->keylen = 0;
    if (len == 0 || s->status != MESH_OK)
        return;
    if (len > s->keycap) {
        unsigned char *k = realloc(s->key, len);
        if (k == NULL)
            return;
        s->key = k;
        s->keycap = len;
    }
    memcpy(s->key, key, len);
    s->keylen = len;
    s->cookie = cookie;
}

mesh_sched_t *mesh_sched_reuse(mesh_comm_t *comm, const void *key, size_t len, const void **cookie)
{
    struct mesh_sched_cache *cache = comm->sched_cache;
    for (mesh_sched_t **pp = &cache->pool; *pp != NULL; pp = &(*pp)->next) {
        mesh_sched_t *s = *pp;
        if (s->keylen != len || memcmp(s->key, key, len) != 0)
            continue;
        *pp = s->next;
        cache->pool_len--;
        /* the tasks, their successor lists, scratch and finalizer stay as built */
        s->status = MESH_OK;
        s->started = 0;
        s->nready = s->ncomp = s->ninflight = s->ndone = 0;
        s->next = NULL;
        for (int i = 0; i < s->ntasks; i++) {
            s->tasks[i].state = TASK_WAITING;
            s->tasks[i].ndeps_left = s->tasks[i].ndeps;
        }
        *cookie = s->cookie;
        return s;
    }
    return NULL;
}

void mesh_sched_destroy(mesh_sched_t *s)
{
    if (s == NULL)
        return;
    if (s->started && s->status == MESH_INPROGRESS)
        mesh_sched_fail(s, MESH_ERR_ABORTED);
    struct mesh_sched_cache *cache = s->comm->sched_cache;
    if (cache == NULL) {
        /* its communicator was destroyed: transports are closed, nothing holds our tasks */
        sched_free(s);
        return;
    }
    for (int i = 0; i < s->ninflight; i++) {
        if (s->tasks[s->inflight[i]].op.status == MESH_INPROGRESS) {
            /* a transport still holds one of our operations: keep the memory until the
             * communicator closes its transports */
            s->next = cache->zombies;
            cache->zombies = s;
            return;
        }
    }
    /* only a graph that ran to completion is replayed, and only if its scratch is small
     * enough to keep */
    if (s->keylen != 0 &&
        (s->status != MESH_OK || !s->started || scratch_bytes(s) > MESH_SCHED_SCRATCH_KEEP_BYTES))
        s->keylen = 0;
    if (cache->pool_len < SCHED_POOL_MAX) {
        s->next = cache->pool;
        cache->pool = s;
        cache->pool_len++;
        return;
    }
    sched_free(s);
}

void mesh_sched_cache_free(struct mesh_sched_cache *cache)
{
    if (cache == NULL)
        return;
    mesh_sched_t *lists[2] = {cache->zombies, cache->pool};
    for (int i = 0; i < 2; i++) {
        while (lists[i]) {
            mesh_sched_t *s = lists[i];
            lists[i] = s->next;
            sched_free(s);
        }
    }
    free(cache);
}

static void sched_free(mesh_sched_t *s)
{
    scratch_free_list(s->scratch);
    scratch_free_list(s->spare);
    free(s->tasks);
    free(s->edges);
    free(s->succ);
    free(s->ready);
    free(s->inflight);
    free(s->send_count);
    free(s->key);
    free(s);
}
