/* Algorithm registry and selection. One algorithm per file; each fills a schedule. */
#ifndef MESH_COLL_ALGO_H
#define MESH_COLL_ALGO_H

#include "collectives/sched.h"

typedef enum {
    MESH_COLL_ALLREDUCE = 0,
    MESH_COLL_REDUCE,
    MESH_COLL_BROADCAST,
    MESH_COLL_REDUCE_SCATTER, /* also reduce_scatterv */
    MESH_COLL_ALLGATHER,      /* also allgatherv */
    MESH_COLL_ALLTOALL,       /* also alltoallv */
    MESH_COLL_GATHER,
    MESH_COLL_SCATTER,
    MESH_COLL_BARRIER,
    MESH_COLL_TYPE_COUNT
} mesh_coll_type_t;

const char *mesh_coll_type_name(mesh_coll_type_t t); /* "allreduce", ... */
int mesh_coll_type_parse(const char *name);          /* -1 if unknown */

/*
 * Arguments as an algorithm sees them. The API layer has validated everything, applied
 * pre-multiplication, and will apply the division of MESH_AVG; op is SUM/PROD/MIN/MAX.
 * Counts and displacements are in elements. For every collective with blocks per rank, counts[]
 * and displs[] are filled (also for the uniform forms, where uniform = 1):
 *   reduce_scatter: counts[i] elements of the result go to rank i, from sbuf + displs[i].
 *   allgather:      rank i's counts[i] elements land at rbuf + displs[i].
 *   alltoall:       counts/displs describe sbuf (what goes to rank i), rcounts/rdispls rbuf.
 *   gather/scatter: count per rank (uniform only).
 * in_place: sbuf == rbuf (reduce_scatter/allgather: sbuf is rbuf's own block).
 */
typedef struct {
    mesh_coll_type_t type;
    const void *sbuf;
    void *rbuf;
    size_t count;
    mesh_dtype_t dtype;
    mesh_op_t op;
    int root;
    int in_place;
    int uniform;
    size_t dsize;
    size_t bytes; /* message size used for selection (nccl-tests' S) */
    const size_t *counts, *displs;
    const size_t *rcounts, *rdispls;
} mesh_coll_args_t;

typedef struct {
    const char *name;  /* short: "ring", "rd", "rabenseifner", ... */
    const char *desc;
    mesh_coll_type_t type;
    /* < 0: cannot serve these arguments; otherwise higher is preferred. */
    int (*score)(const mesh_comm_t *comm, const mesh_coll_args_t *args);
    /* Fills the schedule. MESH_ERR_UNSUPPORTED: try the next candidate. */
    mesh_status_t (*build)(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s);
} mesh_coll_algo_t;

/* The registry (algo_registry.c). */
int mesh_coll_algo_count(void);
const mesh_coll_algo_t *mesh_coll_algo_get(int index);
const mesh_coll_algo_t *mesh_coll_algo_find(mesh_coll_type_t type, const char *name);

/* Picks and builds: MESH_TUNE first, then the highest score that builds. */
mesh_status_t mesh_coll_select_build(mesh_comm_t *comm, const mesh_coll_args_t *args,
                                     mesh_sched_t *s, const mesh_coll_algo_t **chosen);

/* MESH_TUNE: comma-separated rules "[coll:]algo[@min-max]", e.g. "allreduce:ring@1m-inf,bruck".
 * Returns the forced algorithm name for (type, bytes), or NULL. */
const char *mesh_coll_tune_lookup(const char *tune, mesh_coll_type_t type, size_t bytes,
                                  char *buf, size_t buflen);

#endif
