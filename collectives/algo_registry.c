/* Every algorithm, in one table. Order within a collective is the tie-break of equal scores. */
#include "collectives/algo.h"
#include <string.h>

#define MESH_ALGO_LIST(X)                                                                          \
    X(allreduce, ring)                                                                             \
    X(allreduce, rd)                                                                               \
    X(allreduce, rabenseifner)                                                                     \
    X(allreduce, hier)                                                                             \
    X(allreduce, direct)                                                                           \
    X(reduce, binomial)                                                                            \
    X(reduce, rabenseifner)                                                                        \
    X(broadcast, binomial)                                                                         \
    X(broadcast, scatter_allgather)                                                                \
    X(reduce_scatter, ring)                                                                        \
    X(reduce_scatter, rh)                                                                          \
    X(reduce_scatter, pairwise)                                                                    \
    X(allgather, ring)                                                                             \
    X(allgather, rd)                                                                               \
    X(allgather, bruck)                                                                            \
    X(alltoall, pairwise)                                                                          \
    X(alltoall, bruck)                                                                             \
    X(gather, binomial)                                                                            \
    X(gather, linear)                                                                              \
    X(scatter, binomial)                                                                           \
    X(scatter, linear)                                                                             \
    X(barrier, dissemination)                                                                      \
    X(reduce_scatter, hier)                                                                        \
    X(allgather, hier)                                                                             \
    X(broadcast, hier)                                                                             \
    X(alltoall, hier)

#define MESH_ALGO_DECL_(coll, name) extern const mesh_coll_algo_t mesh_coll_##coll##_##name;
MESH_ALGO_LIST(MESH_ALGO_DECL_)
#undef MESH_ALGO_DECL_

static const mesh_coll_algo_t *const mesh_coll_algos[] = {
#define MESH_ALGO_PTR_(coll, name) &mesh_coll_##coll##_##name,
    MESH_ALGO_LIST(MESH_ALGO_PTR_)
#undef MESH_ALGO_PTR_
};

int mesh_coll_algo_count(void)
{
    return (int)(sizeof(mesh_coll_algos) / sizeof(mesh_coll_algos[0]));
}

const mesh_coll_algo_t *mesh_coll_algo_get(int index)
{
    if (index < 0 || index >= mesh_coll_algo_count())
        return NULL;
    return mesh_coll_algos[index];
}

const mesh_coll_algo_t *mesh_coll_algo_find(mesh_coll_type_t type, const char *name)
{
    for (int i = 0; i < mesh_coll_algo_count(); i++) {
        if (mesh_coll_algos[i]->type == type && strcmp(mesh_coll_algos[i]->name, name) == 0)
            return mesh_coll_algos[i];
    }
    return NULL;
}

static const char *const mesh_coll_type_names[MESH_COLL_TYPE_COUNT] = {
    "allreduce", "reduce", "broadcast", "reduce_scatter", "allgather",
    "alltoall",  "gather", "scatter",   "barrier"};

const char *mesh_coll_type_name(mesh_coll_type_t t)
{
    return (unsigned)t < MESH_COLL_TYPE_COUNT ? mesh_coll_type_names[t] : "unknown";
}

int mesh_coll_type_parse(const char *name)
{
    for (int i = 0; i < MESH_COLL_TYPE_COUNT; i++)
        if (strcmp(mesh_coll_type_names[i], name) == 0)
            return i;
    return -1;
}
