/*
 * Schedule phases: the pieces the collectives are composed of. Each is a whole collective over a
 * group of ranks (the communicator, the ranks of one node, or one rail across nodes) and lives
 * with the collective it performs:
 *
 *   ring reduce-scatter                reduce_scatter/ring.c
 *   recursive-halving reduce-scatter   reduce_scatter/rh.c
 *   ring all-gather                    allgather/ring.c
 *   recursive-doubling all-gather      allgather/rd.c (the halving walked back)
 *   ring all-reduce                    allreduce/ring.c (ring reduce-scatter + ring all-gather)
 *   recursive-doubling all-reduce      allreduce/rd.c
 *   linear gather and scatter          gather/linear.c (and the binomial ones' score)
 *
 * Each phase waits for `deps` before touching user-visible memory and returns in *done one task
 * that completes after every task of the phase, so phases compose by chaining done into the
 * next phase's deps. The groups and block layouts they run over are set up in phases.c.
 */
#ifndef MESH_COLL_PHASES_H
#define MESH_COLL_PHASES_H

#include "collectives/algo.h"
#include "libmesh/log.h"
#include <stdlib.h>

/* ---- groups */

/* A group of ranks: member i is comm rank ranks[i] (rank i when ranks is NULL). */
typedef struct {
    int me;
    int n;
    const int *ranks;
} mesh_coll_group_t;

static inline int mesh_coll_group_rank(const mesh_coll_group_t *g, int i)
{
    return g->ranks ? g->ranks[i] : i;
}

/* The whole communicator. */
static inline mesh_coll_group_t mesh_coll_group_all(const mesh_comm_t *comm)
{
    return (mesh_coll_group_t){.me = comm->rank, .n = comm->size, .ranks = NULL};
}

/*
 * This rank in the node map (patterns/hier.h): local rank lr of the L ranks on node `node` of
 * nnodes. local: the ranks of this node (member lr); rail: (0, lr) .. (nnodes - 1, lr) (member
 * node), set only by mesh_coll_hier_rails.
 */
typedef struct {
    int node, nnodes, L, lr;
    mesh_coll_group_t local, rail;
} mesh_coll_hier_t;

/* Any node sizes. */
void mesh_coll_hier_node(const mesh_comm_t *comm, mesh_coll_hier_t *h);
/* With the rail, which lines up only when every node has the same number of ranks: otherwise
 * MESH_ERR_UNSUPPORTED, naming `what`. The rail's ranks live in s's scratch. */
mesh_status_t mesh_coll_hier_rails(const mesh_comm_t *comm, mesh_sched_t *s, const char *what,
                                   mesh_coll_hier_t *h);

/* Blocks of a collective with a block per rank (counts, displs) as the hierarchical phases see
 * them: rail_off/rail_len[k] for block (k, lr) of the rail, node_off/node_len + k * L for the
 * blocks of (k, 0 .. L-1). */
typedef struct {
    size_t *rail_off, *rail_len, *node_off, *node_len;
} mesh_coll_hier_blocks_t;
/* In s's scratch; needs h from mesh_coll_hier_rails. */
mesh_status_t mesh_coll_hier_blocks(const mesh_comm_t *comm, mesh_sched_t *s,
                                    const mesh_coll_hier_t *h, const size_t *counts,
                                    const size_t *displs, mesh_coll_hier_blocks_t *b);

/* ---- ring phases
 *
 * Block i is the block that member i ends the reduce-scatter with and starts the all-gather with
 * (see patterns/ring.h); blocks are split into segments of MESH_COLL_RING_SEG_BYTES so that the
 * reduction of one segment overlaps the transfer of the next.
 */

/* Pipelining unit of the ring phases. A fixed size for now: large enough that per-message costs
 * vanish, small enough that a block of a large message gives the pipeline several stages. */
#ifndef MESH_COLL_RING_SEG_BYTES /* tests shrink it to exercise the pipelining */
#define MESH_COLL_RING_SEG_BYTES ((size_t)1 << 20)
#endif
/* Receive slots of the ring reduce-scatter: segments beyond this many bytes reuse slots in turn.
 * Deep enough that a receive is posted before its segment arrives (a segment that arrives first
 * is copied once more on a streaming transport such as tcp), small enough to stay in the
 * last-level cache and to be kept by the schedule pool between calls (at most
 * MESH_SCHED_SCRATCH_KEEP_BYTES). From a peer whose transport copies large messages once, when
 * the receive is posted (MESH_TL_CAP_SINGLE_COPY: shm), a quarter of it, which stays in the
 * core's own cache. */
#ifndef MESH_COLL_RING_WINDOW_BYTES /* tests shrink it to exercise slot reuse */
#define MESH_COLL_RING_WINDOW_BYTES ((size_t)8 << 20)
#endif
/* An own block at least this large is reduced into with non-temporal stores in the last step of
 * the reduce-scatter: it is past the core's own cache by the time anyone reads it, and ordinary
 * stores would first read every line of it from memory. */
#ifndef MESH_COLL_RING_STREAM_BYTES
#define MESH_COLL_RING_STREAM_BYTES ((size_t)4 << 20)
#endif
_Static_assert(MESH_COLL_RING_WINDOW_BYTES <= MESH_SCHED_SCRATCH_KEEP_BYTES,
               "the ring's receive window must fit in the scratch a pooled schedule keeps");

typedef struct {
    mesh_coll_group_t g;
    size_t dsize;
    /* reduce-scatter: block i is read from src + src_off[i] elements. all-gather: when src is
     * not NULL, the own block is sent from src instead of acc (the caller places it into acc
     * itself, if it wants it there); src_off is not read. */
    const void *src;
    const size_t *src_off;
    /* reduce-scatter: partial results of block i go to acc + acc_off[i] (never the own block);
     * with acc NULL they stay in the phase's receive slots instead. all-gather: block i is
     * received into acc + acc_off[i]. */
    void *acc;
    const size_t *acc_off;
    /* reduce-scatter: the fully reduced own block is written here (may alias its src block). */
    void *own;
    const size_t *len; /* [n] elements of block i */
    const int *deps;
    int ndeps;
} mesh_coll_ring_phase_t;

/* In reduce_scatter/ring.c. */
mesh_status_t mesh_coll_ring_reduce_scatter_phase(mesh_sched_t *s, const mesh_coll_ring_phase_t *p,
                                                  int *done);
/* In allgather/ring.c. */
mesh_status_t mesh_coll_ring_allgather_phase(mesh_sched_t *s, const mesh_coll_ring_phase_t *p,
                                             int *done);

/* What both ring phases derive from p: the neighbours (comm ranks), the segment in elements and
 * the longest block. */
typedef struct {
    int left, right;
    size_t segel, maxlen;
} mesh_coll_ring_walk_t;
mesh_coll_ring_walk_t mesh_coll_ring_walk(const mesh_coll_ring_phase_t *p);
/* Elements of the segment at element off of a block of len elements. */
static inline size_t mesh_coll_ring_seg(size_t len, size_t off, size_t segel)
{
    return len - off < segel ? len - off : segel;
}

/* count elements split evenly over n ring members, member i holding block (i - first) mod n
 * (patterns/ring.h): element offsets and lengths, in s's scratch. */
mesh_status_t mesh_coll_ring_split(mesh_sched_t *s, size_t count, int n, int first, size_t **off,
                                   size_t **len);

/* ---- all-reduce phases: dst = reduction of every member's src (count elements; src may equal
 * dst) */

/* In allreduce/ring.c: the ring phase over g that both halves of a ring all-reduce share, blocks
 * split evenly; the reduce-scatter leaves member i's block reduced in dst, the all-gather (with
 * src set to NULL) spreads them. */
mesh_status_t mesh_coll_ring_allreduce_setup(mesh_sched_t *s, const mesh_coll_group_t *g,
                                             const void *src, void *dst, size_t count, size_t dsize,
                                             const int *deps, int ndeps, mesh_coll_ring_phase_t *p);
/* In allreduce/ring.c: the two ring phases in turn. */
mesh_status_t mesh_coll_ring_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                             const void *src, void *dst, size_t count, size_t dsize,
                                             const int *deps, int ndeps, int *done);
/* In allreduce/rd.c: identical bits on every member. */
mesh_status_t mesh_coll_rd_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                           const void *src, void *dst, size_t count, size_t dsize,
                                           const int *deps, int ndeps, int *done);

/* ---- recursive halving and doubling (patterns/rd.h) */

/*
 * In reduce_scatter/rh.c. Recursive-halving reduce-scatter of a packed vector split into pof2
 * core blocks, core block i being elements [bnd[i], bnd[i + 1]) (pof2 + 1 entries). Extra ranks
 * fold first: they send src to their partner and are done. Core ranks are renumbered relative to
 * core rank `shift` (relative core rank (c - shift) mod pof2 ends with block of that index, which
 * lets a binomial gather to core rank `shift` move contiguous ranges). acc is a whole-vector
 * workspace (may equal src) where the own windows accumulate. deps: when src and acc are ready.
 */
typedef struct {
    int core;     /* relative core rank, -1 on an extra rank */
    int shift;    /* as given */
    int last;     /* acc's own block is final after this task (extra: its send) */
    int done;     /* every task of the phase */
    int sent[32]; /* the send at each halving level (-1: none), for a following all-gather */
} mesh_coll_rh_result_t;
mesh_status_t mesh_coll_rh_reduce_scatter_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                                int shift, const void *src, void *acc,
                                                const size_t *bnd, size_t count, size_t dsize,
                                                const int *deps, int ndeps,
                                                mesh_coll_rh_result_t *res);
/* In allgather/rd.c: the rh phase walked back. Every core rank starts with its reduced block in
 * buf (the rh phase's acc) and doubles the windows of the halving until it holds the whole
 * vector, each receive waiting for the halving's send from the same memory; extra ranks receive
 * the vector from their partner into buf. */
mesh_status_t mesh_coll_rd_allgather_phase(mesh_sched_t *s, const mesh_coll_group_t *g, void *buf,
                                           const size_t *bnd, size_t count, size_t dsize,
                                           const mesh_coll_rh_result_t *rh, int *done);

/* ---- rooted exchanges */

/* In gather/linear.c, the build and score of both linear gather and linear scatter (by
 * a->type): every rank's block moves straight between it and the root, which posts all its
 * transfers at once. The same bytes cross the same links either way, so both score alike. */
mesh_status_t mesh_coll_linear_build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s);
int mesh_coll_linear_score(const mesh_comm_t *comm, size_t bytes);
/* In gather/binomial.c: the score of the binomial gather and scatter, mirror images over one
 * tree. */
int mesh_coll_binomial_blocks_score(const mesh_comm_t *comm, size_t bytes);

/* ---- task lists */

/* A growable list of task ids, joined by one nop at the end of a phase. */
typedef struct {
    int *v;
    int n, cap, oom;
} mesh_coll_ids_t;

static inline void mesh_coll_ids_add(mesh_coll_ids_t *l, int id)
{
    if (id < 0)
        return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        int *v = (int *)realloc(l->v, (size_t)cap * sizeof(int));
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
}

/* *id = one nop after every listed task and deps; frees the list. */
static inline mesh_status_t mesh_coll_ids_join(mesh_sched_t *s, mesh_coll_ids_t *l, const int *deps,
                                               int ndeps, int *id)
{
    for (int i = 0; i < ndeps; i++)
        mesh_coll_ids_add(l, deps[i]);
    int oom = l->oom, nop = oom ? -1 : mesh_sched_nop(s, l->v, l->n);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = l->oom = 0;
    if (oom)
        return mesh_error(MESH_ERR_NO_MEMORY, "out of memory listing schedule tasks");
    *id = nop;
    return mesh_sched_build_status(s);
}

#endif
