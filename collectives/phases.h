/*
 * Schedule phases shared by the collectives: ring reduce-scatter and ring all-gather over
 * arbitrary block layouts, and recursive-doubling all-reduce, each over a group of ranks (the
 * whole communicator, the ranks of one node, or one rail across nodes). Each phase waits for
 * `deps` before touching user-visible memory and returns in *done one task that completes after
 * every task of the phase, so phases compose by chaining done into the next phase's deps.
 *
 * Ring phases: block i is the block that member i ends the reduce-scatter with and starts the
 * all-gather with (see patterns/ring.h); blocks are split into segments of
 * MESH_COLL_RING_SEG_BYTES so that the reduction of one segment overlaps the transfer of the next.
 */
#ifndef MESH_COLL_PHASES_H
#define MESH_COLL_PHASES_H

#include "collectives/sched.h"
#include "libmesh/log.h"
#include <stdlib.h>

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

typedef struct {
    mesh_coll_group_t g;
    size_t dsize;
    /* reduce-scatter: block i is read from src + src_off[i] elements. all-gather: when src is
     * not NULL, the own block is sent from src + src_off[me] instead of acc (the caller places it
     * into acc itself, if it wants it there). */
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
/* In allreduce/ring.c. */
mesh_status_t mesh_coll_ring_allgather_phase(mesh_sched_t *s, const mesh_coll_ring_phase_t *p,
                                             int *done);
/* In allreduce/ring.c: dst = reduction of every member's src (count elements; src may equal
 * dst) by the two ring phases over n element-aligned blocks. */
mesh_status_t mesh_coll_ring_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                             const void *src, void *dst, size_t count, size_t dsize,
                                             const int *deps, int ndeps, int *done);
/* In allreduce/rd.c: dst = reduction of every member's src (count elements; src may equal dst),
 * identical bits on every member. */
mesh_status_t mesh_coll_rd_allreduce_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                           const void *src, void *dst, size_t count, size_t dsize,
                                           const int *deps, int ndeps, int *done);

/*
 * In allreduce/rabenseifner.c. Recursive-halving reduce-scatter of a packed vector split into
 * pof2 core blocks, core block i being elements [bnd[i], bnd[i + 1]) (pof2 + 1 entries). Extra
 * ranks fold first: they send src to their partner and are done. Core ranks are renumbered
 * relative to core rank `shift` (relative core rank (c - shift) mod pof2 ends with block of that
 * index, which lets a binomial gather to core rank `shift` move contiguous ranges). acc is a
 * whole-vector workspace (may equal src) where the own windows accumulate. deps: when src and
 * acc are ready.
 */
typedef struct {
    int core;     /* relative core rank, -1 on an extra rank */
    int last;     /* acc's own block is final after this task (extra: its send) */
    int done;     /* every task of the phase */
    int sent[32]; /* the send at each halving level (-1: none), for a following all-gather */
} mesh_coll_rh_result_t;
mesh_status_t mesh_coll_rh_reduce_scatter_phase(mesh_sched_t *s, const mesh_coll_group_t *g,
                                                int shift, const void *src, void *acc,
                                                const size_t *bnd, size_t count, size_t dsize,
                                                const int *deps, int ndeps,
                                                mesh_coll_rh_result_t *res);

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
    return mesh_sched_status(s);
}

#endif
