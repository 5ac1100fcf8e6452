/*
 * mesh expert parallelism: token dispatch and combine for mixture-of-experts layers over an ep
 * communicator (mesh_grid_comm(grid, "ep", ...)).
 *
 * E experts are spread evenly over the ep ranks: rank r owns experts [r * E / ep, (r + 1) * E /
 * ep). Each rank routes its own tokens, each to its top-k experts (k distinct ids per token),
 * and a layout built from those ids is reused by the four moves of one layer:
 *
 *   dispatch           token rows [tokens, H] -> expert rows [recv_rows, H] on the owners
 *   combine            expert rows -> per token, the sum of its experts' rows times its weights
 *   dispatch_backward  gradients of expert rows -> token gradients (a combine with weights 1)
 *   combine_backward   token gradients -> weighted gradients of expert rows (a dispatch), and
 *                      the gradients of the weights
 *
 * Expert rows on a rank are grouped by local expert, and inside an expert ordered by global
 * token order: source rank, then the token's index on it. mesh_ep_layout_sources tells where
 * each came from.
 *
 * Capacity: with a capacity factor f > 0 every expert takes at most
 * ceil(f * global_tokens * k / E) tokens, and the ones it takes are the first in global token
 * order; the rest are dropped (their slot contributes nothing to combine). The global token
 * order is the concatenation of the ranks' tokens, so the same global batch drops the same
 * tokens whatever the ep size. f = 0 is dropless.
 *
 * Building a layout exchanges per-destination counts with a small all-to-all (two with a
 * capacity: the owners decide what is kept and tell the sources), then the source positions of
 * the rows. Bad routing input on any rank fails the layout on every rank (MESH_ERR_INVALID_ARG;
 * the offending rank's message names the argument, the others' name that rank). Rows travel
 * by mesh_alltoallv on the ep communicator, one per local expert index, all in flight at once,
 * straight into their place: the path is the one mesh picks for that communicator; the rows
 * a rank routes to its own experts are copied, never sent.
 *
 * Hierarchical path (MESH_EP_PATH_HIER): when the ep communicator spans nodes, a token row
 * crosses to another node once, not once per expert chosen there: dispatch and combine_backward
 * send each token's row to one forwarder per other node (the rank there with the sender's index
 * on its own node, modulo that node's size: a rail), which copies it (combine_backward: scales
 * it by each choice's weight, sent beside it) to the experts of its node; rows for experts of
 * the sender's own node go to them directly. combine and dispatch_backward run the reverse way:
 * expert rows go to the forwarder, which sends a source the rows of its choices on that node in
 * one message; where all of a token's kept choices lie on one other node and combine needs no
 * gathered rows, the forwarder sums them (the same weighted sum, in the same order, in double,
 * rounded once) and one row crosses instead. A token whose choices span nodes brings back its
 * rows: summing part of them elsewhere would change the rounding, and every path gives the
 * same bits. MESH_EP_PATH_AUTO (the default) takes this path when the ep communicator spans
 * more than one node and it is expected to be faster. With r the cost of a byte between nodes
 * over the cost of one inside a node (link_ratio), the flat path takes max(r x its rows between
 * nodes, its rows inside nodes), both kinds moving at once; the hierarchical path takes r x its
 * rows between nodes, then the rows inside nodes (those its forwarders pass on, and those that
 * stay in their node on either path) in a second phase. Rows are counted from the routed
 * choices, before any capacity, summed over the ranks, and r is the same on every rank, so
 * every rank chooses alike. Unless
 * given, the ratio is measured once per handle, at its first layout that could take either
 * path: pairs of ranks on one node and pairs on two nodes take turns exchanging 1 MiB five
 * times; each pair's median counts, and the slowest pair of each kind (a few milliseconds,
 * collective). mesh_ep_link_ratio tells the ratio in use, mesh_ep_layout_path the choice. The
 * hierarchical path and the measurement use point-to-point messages with tag
 * MESH_EP_TAG on the ep communicator, which the caller's own messages there must not use while
 * a move or a layout's creation runs.
 *
 * Buffers are host memory; rows are fp32 or bf16; combine sums in double and rounds once.
 * Calls taking a layout are collective over the ep communicator; a layout's calls must not run
 * concurrently (it keeps their scratch).
 */
#ifndef MESH_EXPERT_H
#define MESH_EXPERT_H

#include <mesh.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mesh_ep *mesh_ep_h;
typedef struct mesh_ep_layout *mesh_ep_layout_h;

enum {
    MESH_EP_PARAM_FIELD_EXPERTS = 1u << 0,
    MESH_EP_PARAM_FIELD_TOPK = 1u << 1,
    MESH_EP_PARAM_FIELD_CAPACITY = 1u << 2,
    MESH_EP_PARAM_FIELD_PATH = 1u << 3,
    MESH_EP_PARAM_FIELD_LINK_RATIO = 1u << 4
};

/* How rows travel (see above). */
typedef enum {
    MESH_EP_PATH_AUTO = 0, /* hierarchical across nodes where it is expected to be faster */
    MESH_EP_PATH_FLAT = 1, /* one mesh_alltoallv per local expert index */
    MESH_EP_PATH_HIER = 2  /* forwarders per node, also on one node (for tests) */
} mesh_ep_path_t;

/* The point-to-point tag of the hierarchical path. */
#define MESH_EP_TAG 0x3e9e0001

typedef struct {
    uint64_t field_mask;
    int experts;            /* E, a multiple of the ep size (required) */
    int topk;               /* k, 1..E (required) */
    double capacity_factor; /* 0 (default): dropless */
    mesh_ep_path_t path;    /* MESH_EP_PATH_AUTO (default) */
    double link_ratio;      /* for MESH_EP_PATH_AUTO: seconds per byte between nodes over inside
                               a node, > 0 (NVLink against one InfiniBand rail: about 10);
                               default: measured */
} mesh_ep_params_t;

/* Where an expert row came from: the source rank, the token's index there and which of its k
 * choices this is. */
typedef struct {
    int32_t rank;
    int32_t slot;
    int64_t token;
} mesh_ep_source_t;

/* comm stays the caller's. Local: no communication. */
MESH_API mesh_status_t mesh_ep_create(mesh_comm_h comm, const mesh_ep_params_t *params,
                                      mesh_ep_h *ep);
MESH_API void mesh_ep_destroy(mesh_ep_h ep);
MESH_API int mesh_ep_size(mesh_ep_h ep);
MESH_API int mesh_ep_rank(mesh_ep_h ep);
/* The experts this rank owns: [*first, *first + *count). */
MESH_API void mesh_ep_local_experts(mesh_ep_h ep, int *first, int *count);

/* expert_ids [tokens * k]: token t's choices at t * k .. t * k + k - 1, each in 0..E-1 and
 * distinct. tokens may differ between ranks and be 0 (expert_ids may then be NULL). */
MESH_API mesh_status_t mesh_ep_layout_create(mesh_ep_h ep, size_t tokens, const int32_t *expert_ids,
                                             mesh_ep_layout_h *layout);
MESH_API void mesh_ep_layout_destroy(mesh_ep_layout_h layout);
/* Rows this rank receives (the kept assignments to its experts). */
MESH_API size_t mesh_ep_layout_recv_rows(mesh_ep_layout_h layout);
/* Tokens of this rank the layout was built for. */
MESH_API size_t mesh_ep_layout_tokens(mesh_ep_layout_h layout);
/* The path the layout's moves take: MESH_EP_PATH_FLAT or MESH_EP_PATH_HIER (never AUTO). */
MESH_API mesh_ep_path_t mesh_ep_layout_path(mesh_ep_layout_h layout);
/* The link ratio the automatic path weighs rows with: the one given, the one measured, or 0
 * while nothing asked for it yet (a forced path, one node, or no layout built). */
MESH_API double mesh_ep_link_ratio(mesh_ep_h ep);
/* Per-expert capacity (0: dropless). */
MESH_API size_t mesh_ep_layout_capacity(mesh_ep_layout_h layout);
/* rows [local experts]: how many expert rows each local expert has, in order. */
MESH_API mesh_status_t mesh_ep_layout_expert_rows(mesh_ep_layout_h layout, size_t *rows);
/* sources [recv_rows]: where each expert row came from. */
MESH_API mesh_status_t mesh_ep_layout_sources(mesh_ep_layout_h layout, mesh_ep_source_t *sources);
/* routed, dropped [local experts]: tokens routed to each local expert by all ranks and how many
 * of them the capacity dropped. */
MESH_API mesh_status_t mesh_ep_layout_stats(mesh_ep_layout_h layout, uint64_t *routed,
                                            uint64_t *dropped);
/* dropped [tokens * k]: 1 where this rank's choice was dropped, else 0. */
MESH_API mesh_status_t mesh_ep_layout_dropped(mesh_ep_layout_h layout, uint8_t *dropped);

/* in [tokens, hidden] -> out [recv_rows, hidden]. */
MESH_API mesh_status_t mesh_ep_dispatch(mesh_ep_layout_h layout, const void *in, void *out,
                                        size_t hidden, mesh_dtype_t dtype);
/* expert_out [recv_rows, hidden], weights [tokens * k] -> out [tokens, hidden]:
 * out[t] = sum over t's kept choices j, in order, of weights[t * k + j] * row(t, j).
 * gathered, when not NULL, gets row(t, j) at [t * k + j] (zeros where dropped), for
 * combine_backward's weight gradients. */
MESH_API mesh_status_t mesh_ep_combine(mesh_ep_layout_h layout, const void *expert_out,
                                       const float *weights, void *out, void *gathered,
                                       size_t hidden, mesh_dtype_t dtype);
/* grad_out [recv_rows, hidden] -> grad_in [tokens, hidden]: the sum of each token's kept rows. */
MESH_API mesh_status_t mesh_ep_dispatch_backward(mesh_ep_layout_h layout, const void *grad_out,
                                                 void *grad_in, size_t hidden, mesh_dtype_t dtype);
/* grad_out [tokens, hidden] -> grad_expert_out [recv_rows, hidden], the row of (t, j) being
 * weights[t * k + j] * grad_out[t]. grad_weights [tokens * k], when not NULL, gets
 * dot(grad_out[t], gathered[t * k + j]) (0 where dropped); it needs combine's gathered. */
MESH_API mesh_status_t mesh_ep_combine_backward(mesh_ep_layout_h layout, const void *grad_out,
                                                const float *weights, const void *gathered,
                                                void *grad_expert_out, float *grad_weights,
                                                size_t hidden, mesh_dtype_t dtype);

#ifdef __cplusplus
}
#endif

#endif
