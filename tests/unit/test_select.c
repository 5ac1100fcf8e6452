/* The selection map: for communicators of 1..9 ranks over 1..3 nodes, with and without
 * MESH_TUNE, the map's choice at every probed size equals the highest-scoring algorithm (the
 * forced one first where a rule applies), and bad MESH_TUNE rules are refused naming the rule. */
#include "collectives/algo.h"
#include "collectives/comm.h"
#include "libmesh/log.h"
#include "tests/harness/harness.h"
#include <stdint.h>
#include <string.h>

typedef struct {
    size_t bytes;
    const mesh_coll_algo_t *first;
    int forced;
} probe_t;

static void find_range(size_t lo, size_t hi, const mesh_coll_algo_t *const *cand, int ncand,
                       int forced, void *arg)
{
    probe_t *p = arg;
    if (p->bytes < lo || p->bytes > hi)
        return;
    CHECK_MSG(p->first == NULL && p->forced < 0, "size %zu is in two ranges", p->bytes);
    p->first = ncand > 0 ? cand[0] : NULL;
    p->forced = forced;
}

/* The choice by scoring every algorithm, as the map must reproduce it. */
static const mesh_coll_algo_t *brute(const mesh_comm_t *c, mesh_coll_type_t t, size_t bytes,
                                     const mesh_coll_algo_t *forced)
{
    const mesh_coll_algo_t *best = NULL;
    int best_score = -1;
    for (int i = 0; i < mesh_coll_algo_count(); i++) {
        const mesh_coll_algo_t *a = mesh_coll_algo_get(i);
        if (a->type != t)
            continue;
        int sc = a->score(c, bytes);
        if (sc < 0)
            continue;
        if (a == forced)
            return a;
        if (sc > best_score) {
            best = a;
            best_score = sc;
        }
    }
    return best;
}

static void check_shape(int size, int nnodes, const char *tune,
                        const mesh_coll_algo_t *(*forced_of)(mesh_coll_type_t, size_t))
{
    int node_size[8];
    for (int n = 0; n < nnodes; n++)
        node_size[n] = size / nnodes + (n < size % nnodes);
    mesh_comm_t c = {.size = size, .nnodes = nnodes, .node_size = node_size};
    mesh_coll_map_t *map;
    CHECK_MSG(mesh_coll_map_build(&c, tune, &map) == MESH_OK, "%s", mesh_error_last());
    size_t sizes[200];
    int ns = 0;
    sizes[ns++] = 0;
    sizes[ns++] = SIZE_MAX;
    for (int k = 0; k < 40; k++) {
        size_t p = (size_t)1 << k;
        sizes[ns++] = p;
        sizes[ns++] = p + 1;
        sizes[ns++] = p - 1;
        sizes[ns++] = p + p / 3;
    }
    for (int t = 0; t < MESH_COLL_TYPE_COUNT; t++) {
        for (int i = 0; i < ns; i++) {
            probe_t p = {.bytes = sizes[i], .forced = -1};
            mesh_coll_map_foreach(map, (mesh_coll_type_t)t, find_range, &p);
            CHECK_MSG(p.forced >= 0, "%s: size %zu is in no range",
                      mesh_coll_type_name((mesh_coll_type_t)t), sizes[i]);
            const mesh_coll_algo_t *f = forced_of ? forced_of((mesh_coll_type_t)t, sizes[i]) : NULL;
            const mesh_coll_algo_t *want = brute(&c, (mesh_coll_type_t)t, sizes[i], f);
            CHECK_MSG(p.first == want,
                      "%d ranks on %d nodes, MESH_TUNE '%s', %s of %zu bytes: "
                      "map picks %s, scores pick %s",
                      size, nnodes, tune ? tune : "", mesh_coll_type_name((mesh_coll_type_t)t),
                      sizes[i], p.first ? p.first->name : "none", want ? want->name : "none");
            CHECK(p.forced == (f != NULL && want == f));
        }
    }
    mesh_coll_map_free(map);
}

/* MESH_TUNE=allreduce:ring@1m-inf,bruck,reduce_scatter:pairwise@100-5000 */
static const mesh_coll_algo_t *tune1(mesh_coll_type_t t, size_t bytes)
{
    const mesh_coll_algo_t *pick = NULL;
    if (t == MESH_COLL_ALLREDUCE && bytes >= ((size_t)1 << 20))
        pick = mesh_coll_algo_find(t, "ring");
    if (mesh_coll_algo_find(t, "bruck"))
        pick = mesh_coll_algo_find(t, "bruck");
    if (t == MESH_COLL_REDUCE_SCATTER && bytes >= 100 && bytes <= 5000)
        pick = mesh_coll_algo_find(t, "pairwise");
    return pick;
}

static void check_refused(const char *tune, const char *word)
{
    int node_size[1] = {4};
    mesh_comm_t c = {.size = 4, .nnodes = 1, .node_size = node_size};
    mesh_coll_map_t *map = NULL;
    CHECK_MSG(mesh_coll_map_build(&c, tune, &map) == MESH_ERR_INVALID_ARG, "'%s' accepted", tune);
    CHECK_MSG(strstr(mesh_error_last(), word) != NULL, "'%s': message '%s' lacks '%s'", tune,
              mesh_error_last(), word);
}

int main(void)
{
    for (int size = 1; size <= 9; size++)
        for (int nodes = 1; nodes <= 3 && nodes <= size; nodes++) {
            check_shape(size, nodes, NULL, NULL);
            check_shape(size, nodes, "allreduce:ring@1m-inf,bruck,reduce_scatter:pairwise@100-5000",
                        tune1);
        }
    check_refused("allreduce:rign", "rign");
    check_refused("alreduce:ring", "alreduce");
    check_refused("ring@1x-2", "1x");
    check_refused("ring@64k", "min-max");
    check_refused("ring@2m-1m", "empty");
    check_refused("allgather:rabenseifner", "rabenseifner");
    check_refused("ring,nosuch", "nosuch");
    return 0;
}
