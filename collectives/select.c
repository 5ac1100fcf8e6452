/* Algorithm selection: MESH_TUNE rules first, then the highest score that builds. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "libmesh/config.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_bytes(const char *p, size_t len, size_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf)) return -1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (strcmp(buf, "inf") == 0) {
        *out = SIZE_MAX;
        return 0;
    }
    return mesh_config_parse_size(buf, out) == MESH_OK ? 0 : -1;
}

/* One rule "[coll:]algo[@min-max]" of length len; writes the algorithm name if it applies. */
static int rule_applies(const char *rule, size_t len, mesh_coll_type_t type, size_t bytes,
                        char *name, size_t namelen)
{
    const char *colon = memchr(rule, ':', len);
    const char *at = memchr(rule, '@', len);
    const char *algo = rule;
    if (colon != NULL && (at == NULL || colon < at)) {
        size_t clen = (size_t)(colon - rule);
        const char *tname = mesh_coll_type_name(type);
        if (strlen(tname) != clen || strncmp(tname, rule, clen) != 0) return 0;
        algo = colon + 1;
    }
    size_t alen = (size_t)((at ? at : rule + len) - algo);
    if (at != NULL) {
        const char *end = rule + len;
        const char *dash = memchr(at + 1, '-', (size_t)(end - at - 1));
        size_t lo = 0, hi = SIZE_MAX;
        if (dash == NULL || parse_bytes(at + 1, (size_t)(dash - at - 1), &lo) < 0 ||
            parse_bytes(dash + 1, (size_t)(end - dash - 1), &hi) < 0) {
            mesh_log_warn("ignoring MESH_TUNE rule '%.*s': expected algo@min-max", (int)len,
                          rule);
            return 0;
        }
        if (bytes < lo || bytes > hi) return 0;
    }
    if (alen == 0 || alen >= namelen) return 0;
    memcpy(name, algo, alen);
    name[alen] = '\0';
    return 1;
}

const char *mesh_coll_tune_lookup(const char *tune, mesh_coll_type_t type, size_t bytes, char *buf,
                                  size_t buflen)
{
    if (tune == NULL) return NULL;
    for (const char *p = tune; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        /* the last matching rule wins, so later rules refine earlier ones */
        char name[64];
        if (len && rule_applies(p, len, type, bytes, name, sizeof(name)) &&
            mesh_coll_algo_find(type, name) != NULL)
            snprintf(buf, buflen, "%s", name);
        p += len + (e != NULL);
    }
    return buf[0] ? buf : NULL;
}

mesh_status_t mesh_coll_select_build(mesh_comm_t *comm, const mesh_coll_args_t *args,
                                     mesh_sched_t *s, const mesh_coll_algo_t **chosen)
{
    char buf[64] = "";
    const char *forced = comm->tune && comm->tune[0]
                             ? mesh_coll_tune_lookup(comm->tune, args->type, args->bytes, buf,
                                                     sizeof(buf))
                             : NULL;
    if (forced != NULL) {
        const mesh_coll_algo_t *a = mesh_coll_algo_find(args->type, forced);
        if (a->score(comm, args) >= 0) {
            mesh_status_t st = a->build(comm, args, s);
            if (st != MESH_ERR_UNSUPPORTED) {
                *chosen = a;
                return st;
            }
        }
        mesh_log_debug("%s: forced algorithm %s cannot serve %zu bytes on %d ranks; using the "
                       "default choice",
                       mesh_coll_type_name(args->type), forced, args->bytes, comm->size);
    }
    /* highest score first; an algorithm that returns UNSUPPORTED from build is skipped */
    int tried[64] = {0};
    for (;;) {
        int best = -1, best_score = -1;
        for (int i = 0; i < mesh_coll_algo_count() && i < 64; i++) {
            const mesh_coll_algo_t *a = mesh_coll_algo_get(i);
            if (a->type != args->type || tried[i]) continue;
            int sc = a->score(comm, args);
            if (sc > best_score) {
                best_score = sc;
                best = i;
            }
        }
        if (best < 0)
            return mesh_error(MESH_ERR_UNSUPPORTED, "no %s algorithm serves %zu bytes on %d ranks",
                              mesh_coll_type_name(args->type), args->bytes, comm->size);
        tried[best] = 1;
        const mesh_coll_algo_t *a = mesh_coll_algo_get(best);
        mesh_status_t st = a->build(comm, args, s);
        if (st == MESH_ERR_UNSUPPORTED) continue;
        mesh_log_debug("%s: %zu bytes on %d ranks -> %s", mesh_coll_type_name(args->type),
                       args->bytes, comm->size, a->name);
        *chosen = a;
        return st;
    }
}
