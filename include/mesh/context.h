/*
 * mesh context parallelism over a cp communicator: causal multi-head self-attention whose
 * sequence is split across the cp ranks.
 *
 * Each rank holds seq / cp positions of every sample. Sharding is contiguous (rank i holds the
 * i-th run of positions) or zig-zag (MESH_CP_ZIGZAG): the sequence is cut into 2 * cp chunks and
 * rank i holds chunks i and 2 * cp - 1 - i, back to back, so that under the causal mask every
 * rank has the same work. mesh_cp_chunks names the positions; mesh_cp_shard / mesh_cp_unshard
 * move whole sequences to and from that layout.
 *
 * Two algorithms compute the same result:
 *   ring (MESH_CP_RING, default): the K/V block of each rank travels round the ring with tagged
 *     point-to-point, the next block arriving while the current one is computed; the blocks are
 *     merged with an online softmax (running maximum and sum of exponentials). The backward pass
 *     sends the K/V blocks round again together with their dK/dV accumulators, which end with
 *     their owners; it recomputes the probabilities from the log-sum-exp saved by the forward.
 *   all-gather (MESH_CP_ALLGATHER): K and V are all-gathered over cp and every rank attends its
 *     queries to the whole sequence; the backward pass gathers them again and reduce-scatters
 *     dK/dV.
 * MESH_CP_NO_OVERLAP makes the ring wait for each block before computing (to measure what the
 * overlap hides); results are the same.
 *
 * Layout (fp32, host memory): q, k, v and their gradients are [batch, seq / cp, heads, head_dim]
 * with `stride` elements from one position to the next, so the three may be views of one fused
 * [batch, seq / cp, 3 * heads * head_dim] qkv tensor (stride 3 * heads * head_dim, k = q +
 * heads * head_dim, ...). out and its gradient are [batch, seq / cp, heads * head_dim], lse is
 * [batch, heads, seq / cp]. Position p attends to positions 0..p, scores scaled by `scale`.
 *
 * Calls are collective over the cp communicator unless noted; all ranks pass the same shape.
 * Point-to-point uses tags tag .. tag + 1 of the communicator (MESH_CP_PARAM_FIELD_TAG).
 */
#ifndef MESH_CONTEXT_H
#define MESH_CONTEXT_H

#include <mesh.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mesh_cp *mesh_cp_h;

enum {
    MESH_CP_PARAM_FIELD_FLAGS = 1u << 0,
    MESH_CP_PARAM_FIELD_ALGORITHM = 1u << 1,
    MESH_CP_PARAM_FIELD_TAG = 1u << 2
};

enum {
    MESH_CP_ZIGZAG = 1u << 0,    /* 2 * cp chunks, rank i holds i and 2 * cp - 1 - i */
    MESH_CP_NO_OVERLAP = 1u << 1 /* ring: receive each block before computing it */
};

typedef enum { MESH_CP_RING = 0, MESH_CP_ALLGATHER = 1 } mesh_cp_algorithm_t;

#define MESH_CP_TAG_DEFAULT 0x3c700000 /* the ring's tags when none is given */

typedef struct {
    uint64_t field_mask;
    unsigned flags;                /* MESH_CP_* */
    mesh_cp_algorithm_t algorithm; /* default MESH_CP_RING */
    int tag;                       /* first of the ring's 2 tags; default MESH_CP_TAG_DEFAULT */
} mesh_cp_params_t;

/* A half-open range [start, start + count) of sequence positions. */
typedef struct {
    size_t start;
    size_t count;
} mesh_cp_range_t;

/* The attention's sizes; the same on every cp rank. */
typedef struct {
    size_t batch;
    size_t seq; /* the whole sequence, all cp ranks together */
    int heads;
    size_t head_dim;
    size_t stride; /* elements between positions of q, k, v, dq, dk, dv; 0: heads * head_dim */
    float scale;   /* of the scores q.k; 0: 1 / sqrt(head_dim) */
} mesh_cp_shape_t;

/* comm is the cp communicator (mesh_grid_comm(grid, "cp", ...)); it stays the caller's. */
MESH_API mesh_status_t mesh_cp_create(mesh_comm_h comm, const mesh_cp_params_t *params,
                                      mesh_cp_h *cp);
MESH_API void mesh_cp_destroy(mesh_cp_h cp);
MESH_API int mesh_cp_size(mesh_cp_h cp);
MESH_API int mesh_cp_rank(mesh_cp_h cp);
MESH_API int mesh_cp_zigzag(mesh_cp_h cp);
MESH_API mesh_cp_algorithm_t mesh_cp_algorithm(mesh_cp_h cp);

/* ---------------------------------------------------------------- sharding */

/* The positions cp rank `rank` of `cp` holds, in local order: one chunk of seq / cp contiguous
 * positions, or with zigzag two of seq / (2 * cp) (*nchunks set to 1 or 2). seq not divisible by
 * cp (2 * cp with zigzag): MESH_ERR_INVALID_ARG naming seq. Local, a pure function. */
MESH_API mesh_status_t mesh_cp_chunks(size_t seq, int cp, int rank, int zigzag,
                                      mesh_cp_range_t chunks[2], int *nchunks);
/* This rank's part of full sequences: full [batch, seq, width] -> local [batch, seq / cp, width]
 * in the handle's sharding. Local (a copy). */
MESH_API mesh_status_t mesh_cp_shard(mesh_cp_h cp, const void *full, void *local, size_t batch,
                                     size_t seq, size_t width, mesh_dtype_t dtype);
/* The reverse, collective: every rank gets the whole of full from the ranks' local parts
 * (all-gather). local and full must not overlap. */
MESH_API mesh_status_t mesh_cp_unshard(mesh_cp_h cp, const void *local, void *full, size_t batch,
                                       size_t seq, size_t width, mesh_dtype_t dtype);

/* ---------------------------------------------------------------- causal attention */

/* out = softmax(scale q k^T, causal) v for this rank's queries against the whole sequence's keys;
 * lse (kept for the backward pass) is the log-sum-exp of each query's scores. */
MESH_API mesh_status_t mesh_cp_attention_forward(mesh_cp_h cp, const mesh_cp_shape_t *shape,
                                                 const float *q, const float *k, const float *v,
                                                 float *out, float *lse);
/* dq, dk, dv (overwritten; they must not overlap the inputs) from dout, the gradient of out, and
 * the forward's out and lse. dk and dv are the gradients of this rank's keys and values, summed
 * over the queries of every rank. */
MESH_API mesh_status_t mesh_cp_attention_backward(mesh_cp_h cp, const mesh_cp_shape_t *shape,
                                                  const float *q, const float *k, const float *v,
                                                  const float *out, const float *lse,
                                                  const float *dout, float *dq, float *dk,
                                                  float *dv);

#ifdef __cplusplus
}
#endif

#endif
