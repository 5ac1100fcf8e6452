/* The selection map of a communicator: built once from the algorithms' scores and MESH_TUNE,
 * looked up by every call. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t lo, hi; /* bytes, inclusive */
    int forced;    /* cand[0] is MESH_TUNE's choice */
    int ncand;
    const mesh_coll_algo_t **cand;
} mesh_coll_range_t;

struct mesh_coll_map {
    mesh_coll_range_t *ranges[MESH_COLL_TYPE_COUNT];
    int nranges[MESH_COLL_TYPE_COUNT];
};

/* One MESH_TUNE rule "[coll:]algo[@min-max]". */
typedef struct {
    int type; /* -1: every collective with an algorithm of that name */
    char algo[32];
    size_t lo, hi;
} tune_rule_t;

typedef struct {
    tune_rule_t *rules;
    int n;
} tune_t;

static mesh_status_t parse_bytes(const char *p, size_t len, const char *rule, size_t *out)
{
    char buf[32];
    if (len > 0 && len < sizeof(buf)) {
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (strcmp(buf, "inf") == 0) {
            *out = SIZE_MAX;
            return MESH_OK;
        }
        if (mesh_config_parse_size(buf, out) == MESH_OK)
            return MESH_OK;
    }
    return mesh_error(MESH_ERR_INVALID_ARG,
                      "MESH_TUNE rule '%s': '%.*s' is not a size (bytes "
                      "with an optional k/m/g suffix, or inf)",
                      rule, (int)len, p);
}

static mesh_status_t parse_rule(const char *text, size_t len, tune_rule_t *r)
{
    char rule[128];
    snprintf(rule, sizeof(rule), "%.*s", (int)len, text);
    const char *at = strchr(rule, '@'), *colon = strchr(rule, ':');
    if (colon != NULL && at != NULL && colon > at)
        colon = NULL;
    const char *algo = colon ? colon + 1 : rule;
    size_t alen = (size_t)((at ? at : rule + strlen(rule)) - algo);
    r->type = -1;
    r->lo = 0;
    r->hi = SIZE_MAX;
    if (colon != NULL) {
        char coll[32];
        snprintf(coll, sizeof(coll), "%.*s", (int)(colon - rule), rule);
        if ((r->type = mesh_coll_type_parse(coll)) < 0)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "MESH_TUNE rule '%s': unknown collective '%s' "
                              "(mesh-info -A lists them)",
                              rule, coll);
    }
    if (alen == 0 || alen >= sizeof(r->algo))
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "MESH_TUNE rule '%s': expected "
                          "[coll:]algo[@min-max]",
                          rule);
    memcpy(r->algo, algo, alen);
    r->algo[alen] = '\0';
    int known = 0;
    for (int t = 0; t < MESH_COLL_TYPE_COUNT; t++)
        if ((r->type < 0 || r->type == t) && mesh_coll_algo_find((mesh_coll_type_t)t, r->algo))
            known = 1;
    if (!known)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "MESH_TUNE rule '%s': no %s%salgorithm is named "
                          "'%s' (mesh-info -A lists them)",
                          rule, r->type < 0 ? "" : mesh_coll_type_name((mesh_coll_type_t)r->type),
                          r->type < 0 ? "" : " ", r->algo);
    if (at != NULL) {
        const char *dash = strchr(at + 1, '-');
        if (dash == NULL)
            return mesh_error(MESH_ERR_INVALID_ARG, "MESH_TUNE rule '%s': expected algo@min-max",
                              rule);
        MESH_CHECK(parse_bytes(at + 1, (size_t)(dash - at - 1), rule, &r->lo));
        MESH_CHECK(parse_bytes(dash + 1, strlen(dash + 1), rule, &r->hi));
        if (r->lo > r->hi)
            return mesh_error(MESH_ERR_INVALID_ARG, "MESH_TUNE rule '%s': the range is empty",
                              rule);
    }
    return MESH_OK;
}

static mesh_status_t tune_parse(const char *text, tune_t *t)
{
    t->rules = NULL;
    t->n = 0;
    if (text == NULL || *text == '\0')
        return MESH_OK;
    int cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    if ((t->rules = calloc((size_t)cap, sizeof(*t->rules))) == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot parse MESH_TUNE");
    for (const char *p = text; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            mesh_status_t st = parse_rule(p, len, &t->rules[t->n]);
            if (st < 0) {
                free(t->rules);
                return st;
            }
            t->n++;
        }
        p += len + (e != NULL);
    }
    return MESH_OK;
}

int mesh_coll_tune_check(const char *value, char *why, size_t len)
{
    tune_t t;
    char saved[512];
    snprintf(saved, sizeof(saved), "%s", mesh_error_last());
    mesh_status_t st = tune_parse(value, &t);
    if (st == MESH_OK) {
        free(t.rules);
        return 0;
    }
    snprintf(why, len, "%s", mesh_error_last());
    mesh_error_restore(saved);
    return -1;
}

/* The forced algorithm for (type, bytes): the last rule that applies wins. */
static const mesh_coll_algo_t *tune_pick(const tune_t *t, mesh_coll_type_t type, size_t bytes)
{
    const mesh_coll_algo_t *pick = NULL;
    for (int i = 0; i < t->n; i++) {
        const tune_rule_t *r = &t->rules[i];
        if ((r->type >= 0 && r->type != (int)type) || bytes < r->lo || bytes > r->hi)
            continue;
        const mesh_coll_algo_t *a = mesh_coll_algo_find(type, r->algo);
        if (a != NULL)
            pick = a;
    }
    return pick;
}

/* The candidates for a message of bytes, best first: out[] holds registry indices (at most the
 * registry's size); *forced tells whether out[0] is MESH_TUNE's. Returns how many. */
static int order_at(const mesh_comm_t *comm, mesh_coll_type_t type, const tune_t *tune,
                    size_t bytes, int *out, int *scores, int *forced)
{
    int n = 0;
    const mesh_coll_algo_t *f = tune_pick(tune, type, bytes);
    *forced = 0;
    for (int i = 0; i < mesh_coll_algo_count(); i++) {
        const mesh_coll_algo_t *a = mesh_coll_algo_get(i);
        if (a->type != type)
            continue;
        int sc = a->score(comm, bytes);
        if (sc < 0)
            continue;
        if (a == f) {
            sc = -1; /* above every score */
            *forced = 1;
        }
        /* insertion by score, stable in registry order */
        int j = n++;
        while (j > 0 &&
               (sc == -1 ? scores[j - 1] != -1 : scores[j - 1] != -1 && scores[j - 1] < sc)) {
            out[j] = out[j - 1];
            scores[j] = scores[j - 1];
            j--;
        }
        out[j] = i;
        scores[j] = sc;
    }
    return n;
}

typedef struct {
    const mesh_comm_t *comm;
    mesh_coll_type_t type;
    const tune_t *tune;
    int cap;
    int *a, *b, *sa, *sb; /* scratch orders */
    size_t *bounds;       /* sizes where a new range starts */
    int nbounds, capbounds;
} builder_t;

static int same_order(builder_t *B, size_t x, size_t y)
{
    int fx, fy;
    int nx = order_at(B->comm, B->type, B->tune, x, B->a, B->sa, &fx);
    int ny = order_at(B->comm, B->type, B->tune, y, B->b, B->sb, &fy);
    return nx == ny && fx == fy && memcmp(B->a, B->b, (size_t)nx * sizeof(int)) == 0;
}

static int add_bound(builder_t *B, size_t at)
{
    if (B->nbounds == B->capbounds) {
        int cap = B->capbounds ? 2 * B->capbounds : 16;
        size_t *p = realloc(B->bounds, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return -1;
        B->bounds = p;
        B->capbounds = cap;
    }
    B->bounds[B->nbounds++] = at;
    return 0;
}

/* The order differs at x and y (x < y): find where it changes, by halving. */
static int refine(builder_t *B, size_t x, size_t y)
{
    if (y - x == 1)
        return add_bound(B, y);
    size_t mid = x + (y - x) / 2;
    if (!same_order(B, x, mid) && refine(B, x, mid) < 0)
        return -1;
    if (!same_order(B, mid, y) && refine(B, mid, y) < 0)
        return -1;
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static mesh_status_t build_type(builder_t *B, mesh_coll_map_t *map)
{
    /* scores change at powers of two (or next to them) and MESH_TUNE at its rules' bounds:
     * sample those, then halve every interval whose ends differ */
    int nsamples = 0;
    size_t *samples = malloc((size_t)(66 + 2 * B->tune->n) * sizeof(size_t));
    if (samples == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot build a selection map");
    samples[nsamples++] = 0;
    for (int k = 0; k < 64; k++)
        samples[nsamples++] = (size_t)1 << k;
    samples[nsamples++] = SIZE_MAX;
    for (int i = 0; i < B->tune->n; i++) {
        samples[nsamples++] = B->tune->rules[i].lo;
        if (B->tune->rules[i].hi < SIZE_MAX)
            samples[nsamples++] = B->tune->rules[i].hi + 1;
    }
    qsort(samples, (size_t)nsamples, sizeof(size_t), cmp_size);
    B->nbounds = 0;
    int err = 0;
    for (int i = 0; i + 1 < nsamples && !err; i++)
        if (samples[i] != samples[i + 1] && !same_order(B, samples[i], samples[i + 1]))
            err = refine(B, samples[i], samples[i + 1]) < 0;
    free(samples);
    if (err)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot build a selection map");
    qsort(B->bounds, (size_t)B->nbounds, sizeof(size_t), cmp_size);

    int nr = B->nbounds + 1;
    mesh_coll_range_t *r = calloc((size_t)nr, sizeof(*r));
    if (r == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot build a selection map");
    map->ranges[B->type] = r;
    map->nranges[B->type] = nr;
    for (int i = 0; i < nr; i++) {
        r[i].lo = i == 0 ? 0 : B->bounds[i - 1];
        r[i].hi = i + 1 < nr ? B->bounds[i] - 1 : SIZE_MAX;
        r[i].ncand = order_at(B->comm, B->type, B->tune, r[i].lo, B->a, B->sa, &r[i].forced);
        r[i].cand = calloc((size_t)(r[i].ncand ? r[i].ncand : 1), sizeof(*r[i].cand));
        if (r[i].cand == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "cannot build a selection map");
        for (int k = 0; k < r[i].ncand; k++)
            r[i].cand[k] = mesh_coll_algo_get(B->a[k]);
    }
    return MESH_OK;
}

void mesh_coll_map_free(mesh_coll_map_t *map)
{
    if (map == NULL)
        return;
    for (int t = 0; t < MESH_COLL_TYPE_COUNT; t++) {
        for (int i = 0; map->ranges[t] && i < map->nranges[t]; i++)
            free(map->ranges[t][i].cand);
        free(map->ranges[t]);
    }
    free(map);
}

mesh_status_t mesh_coll_map_build(const mesh_comm_t *comm, const char *tune_text,
                                  mesh_coll_map_t **out)
{
    tune_t tune;
    MESH_CHECK(tune_parse(tune_text, &tune));
    mesh_status_t st = MESH_OK;
    mesh_coll_map_t *map = calloc(1, sizeof(*map));
    int cap = mesh_coll_algo_count();
    builder_t B = {.comm = comm, .tune = &tune, .cap = cap};
    B.a = malloc(4 * (size_t)cap * sizeof(int));
    if (map == NULL || B.a == NULL) {
        st = mesh_error(MESH_ERR_NO_MEMORY, "cannot build a selection map");
        goto out;
    }
    B.b = B.a + cap;
    B.sa = B.b + cap;
    B.sb = B.sa + cap;
    for (int t = 0; t < MESH_COLL_TYPE_COUNT && st == MESH_OK; t++) {
        B.type = (mesh_coll_type_t)t;
        st = build_type(&B, map);
    }
out:
    free(B.a);
    free(B.bounds);
    free(tune.rules);
    if (st != MESH_OK) {
        mesh_coll_map_free(map);
        return st;
    }
    *out = map;
    return MESH_OK;
}

void mesh_coll_map_foreach(const mesh_coll_map_t *map, mesh_coll_type_t type,
                           mesh_coll_map_visit_fn fn, void *arg)
{
    for (int i = 0; i < map->nranges[type]; i++) {
        const mesh_coll_range_t *r = &map->ranges[type][i];
        fn(r->lo, r->hi, r->cand, r->ncand, r->forced, arg);
    }
}

mesh_status_t mesh_coll_select_build(mesh_comm_t *comm, const mesh_coll_args_t *args,
                                     mesh_sched_t *s, const mesh_coll_algo_t **chosen)
{
    const mesh_coll_map_t *map = comm->coll_map;
    const mesh_coll_range_t *r = map->ranges[args->type];
    while (args->bytes > r->hi)
        r++; /* the last range ends at SIZE_MAX */
    for (int i = 0; i < r->ncand; i++) {
        const mesh_coll_algo_t *a = r->cand[i];
        mesh_status_t st =
            a->fits == NULL || a->fits(comm, args) ? a->build(comm, args, s) : MESH_ERR_UNSUPPORTED;
        if (st == MESH_ERR_UNSUPPORTED) {
            if (i == 0 && r->forced)
                mesh_log_debug("%s: forced algorithm %s cannot serve %zu bytes on %d ranks; using "
                               "the default choice",
                               mesh_coll_type_name(args->type), a->name, args->bytes, comm->size);
            continue;
        }
        mesh_log_debug("%s: %zu bytes on %d ranks -> %s", mesh_coll_type_name(args->type),
                       args->bytes, comm->size, a->name);
        *chosen = a;
        return st;
    }
    return mesh_error(MESH_ERR_UNSUPPORTED, "no %s algorithm serves %zu bytes on %d ranks",
                      mesh_coll_type_name(args->type), args->bytes, comm->size);
}
