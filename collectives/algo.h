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
    int opcode;   /* the caller's operation for the call's signature (signature.h): 0 none */
    const size_t *counts, *displs;
    const size_t *rcounts, *rdispls;
    /* the buffers' memory: NULL for host memory, else the device table owning them (device
     * `device`, ordered on `stream`). The device engine stages device buffers through host
     * memory, so algorithms see host memory (mem NULL) until schedules run on device memory. */
    const struct mesh_mem_ops *mem;
    int device;
    void *stream;
    int mappable; /* every buffer given is device memory (not managed, not pinned host memory):
                     peers of the node can map it through IPC (collectives/device/dev_ipc.h) */
} mesh_coll_args_t;

typedef struct {
    const char *name; /* short: "ring", "rd", "rabenseifner", ... */
    const char *desc;
    mesh_coll_type_t type;
    /* Preference for a message of this many bytes (nccl-tests' S) on this communicator's shape
     * (ranks, nodes, ranks per node): < 0 cannot serve it; otherwise higher is preferred. Read
     * once per communicator to build its selection map, at every size where it may change. */
    int (*score)(const mesh_comm_t *comm, size_t bytes);
    /* Optional: whether the call's layout suits the algorithm (equal counts, packed blocks);
     * checked per call, for the candidates the map offers. NULL: every layout. */
    int (*fits)(const mesh_comm_t *comm, const mesh_coll_args_t *args);
    /* Fills the schedule. MESH_ERR_UNSUPPORTED: try the next candidate. */
    mesh_status_t (*build)(mesh_comm_t *comm, const mesh_coll_args_t *args, mesh_sched_t *s);
} mesh_coll_algo_t;

/* The registry (algo_registry.c). */
int mesh_coll_algo_count(void);
const mesh_coll_algo_t *mesh_coll_algo_get(int index);
const mesh_coll_algo_t *mesh_coll_algo_find(mesh_coll_type_t type, const char *name);
/* An algorithm's score for a call: < 0 when the shape or the layout rules it out. */
static inline int mesh_coll_algo_score(const mesh_coll_algo_t *a, const mesh_comm_t *comm,
                                       const mesh_coll_args_t *args)
{
    if (a->fits != NULL && !a->fits(comm, args))
        return -1;
    return a->score(comm, args->bytes);
}

/*
 * Selection map of a communicator, built once at creation: per collective, the message-size
 * ranges over which the candidates keep one order (best score first, registry order breaking
 * ties), with MESH_TUNE's forced algorithm, where a rule applies, put first. A call looks up its
 * range and builds the first candidate that fits its layout and does not decline.
 */
typedef struct mesh_coll_map mesh_coll_map_t; /* comm->coll_map */

/* tune: MESH_TUNE's text ("" or NULL: none). A rule naming an unknown collective or algorithm, or
 * with a malformed range, fails with MESH_ERR_INVALID_ARG saying which. */
mesh_status_t mesh_coll_map_build(const mesh_comm_t *comm, const char *tune, mesh_coll_map_t **map);
void mesh_coll_map_free(mesh_coll_map_t *map);
/* MESH_TUNE's check in the config table (mesh_config_check_fn). */
int mesh_coll_tune_check(const char *value, char *why, size_t len);
/* Visits the ranges of one collective in increasing size: bytes lo..hi (inclusive), the
 * candidates in order and whether the first is forced by MESH_TUNE. */
typedef void (*mesh_coll_map_visit_fn)(size_t lo, size_t hi, const mesh_coll_algo_t *const *cand,
                                       int ncand, int forced, void *arg);
void mesh_coll_map_foreach(const mesh_coll_map_t *map, mesh_coll_type_t type,
                           mesh_coll_map_visit_fn fn, void *arg);

/* Picks from comm's map and builds. */
mesh_status_t mesh_coll_select_build(mesh_comm_t *comm, const mesh_coll_args_t *args,
                                     mesh_sched_t *s, const mesh_coll_algo_t **chosen);

#endif
