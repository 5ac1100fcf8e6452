/* Internals of the expert-parallel layer (include/mesh/expert.h); public API only. */
#ifndef MESH_PAR_EP_H
#define MESH_PAR_EP_H

#include "../common.h"
#include <mesh/dtype.h>
#include <mesh/expert.h>
#include <stdint.h>
#include <string.h>

struct mesh_ep {
    mesh_comm_h comm;
    int size, rank;
    int experts, local; /* E and E / size */
    int topk;
    double capacity_factor;
    mesh_ep_path_t path;
    /* the node map: nodes, node_of[rank], ranks of node b at node_ranks[node_first[b]..+1],
     * node_index[rank] its place there */
    int nodes;
    int *node_of, *node_first, *node_ranks, *node_index;
    /* seconds per byte between nodes over inside a node (ep_probe.c); 0 until measured */
    double link_ratio;
};

/* The rank of node b that forwards rows of rank p there (p itself on its own node). */
static inline int mesh_ep_forwarder(mesh_ep_h ep, int p, int b)
{
    if (ep->node_of[p] == b)
        return p;
    int n = ep->node_first[b + 1] - ep->node_first[b];
    return ep->node_ranks[ep->node_first[b] + ep->node_index[p] % n];
}

struct mesh_ep_hier;

/* Counts are indexed [peer * local + l]: the peer's local expert l on the send side, this
 * rank's local expert l on the receive side. */
struct mesh_ep_layout {
    mesh_ep_h ep;
    size_t tokens, capacity;
    size_t nsend, nrecv;
    size_t *scount, *soff; /* kept rows to each (dest, its expert); offsets in the packed rows */
    size_t *rcount, *roff; /* rows from each (source, my expert); offsets in the expert rows */
    int64_t *send_slot;    /* [nsend]: t * k + j of each packed row */
    int64_t *slot_row;     /* [tokens * k]: packed row of each choice, -1 when dropped */
    size_t *expert_rows;   /* [local] */
    uint64_t *routed, *dropped; /* [local] */
    mesh_ep_source_t *sources;  /* [nrecv] */
    /* rows a rank routes to its own experts skip the all-to-all: packed rows [self_lo, self_hi)
     * are expert rows self_map[r - self_lo] */
    size_t self_lo, self_hi;
    size_t *self_map;
    void *scratch; /* packed rows, kept between calls */
    size_t scratch_size;
    size_t *counts;            /* [local][4][size]: the all-to-all-vs' counts and displacements */
    mesh_request_h *reqs;      /* [local] */
    mesh_ep_path_t path;       /* FLAT or HIER */
    struct mesh_ep_hier *hier; /* the hierarchical path's plan; NULL on the flat path */
};

/* Moves rows between the packed source side and the grouped expert side: forward sends
 * packed -> expert rows, reverse sends them back. rb is the row size in bytes. The rows that
 * stay on this rank are not moved (see mesh_ep_row). */
mesh_status_t mesh_ep_move(mesh_ep_layout_h l, const void *packed, void *grouped, size_t rb,
                           int reverse, const char *fn);
/* Where packed row r of rb bytes lives: in the expert rows when it stays on this rank. */
static inline char *mesh_ep_row(mesh_ep_layout_h l, char *packed, char *grouped, size_t r,
                                size_t rb)
{
    if (r >= l->self_lo && r < l->self_hi)
        return grouped + l->self_map[r - l->self_lo] * rb;
    return packed + r * rb;
}

/* out = sum over j < n of w[j] * rows[j] (hidden elements of dtype), in order, in double,
 * rounded once; acc holds hidden doubles (unused for n <= 2). */
void mesh_ep_weighted_sum(char *out, const char **rows, const double *w, int n, size_t hidden,
                          mesh_dtype_t dtype, double *acc);

/* Waits for and frees reqs[0..n); the first failure (st, else the wait's) names fn. */
mesh_status_t mesh_ep_wait(mesh_ep_h ep, mesh_request_h *reqs, int n, mesh_status_t st,
                           const char *fn);
/* The packed scratch for rb-byte rows, or NULL (error recorded). */
void *mesh_ep_scratch(mesh_ep_layout_h l, size_t rb, const char *fn);
/* At least bytes of scratch, or NULL (error recorded). */
void *mesh_ep_scratch_bytes(mesh_ep_layout_h l, size_t bytes, const char *fn);

/* Fills ep's node map from its communicator; MESH_ERR_NO_MEMORY (nothing recorded). */
mesh_status_t mesh_ep_node_map(mesh_ep_h ep);
/* Hierarchical path (ep_hier.c). Rows this rank's routing sends to other nodes: cross[0] one
 * per choice (flat), cross[1] one per token and node (hierarchical); cross[2] the choices
 * whose forwarder passes them on to another rank of its node (the hop the hierarchical path
 * adds), cross[3] the choices on other ranks of this rank's node (sent inside it on either
 * path). Local. */
void mesh_ep_hier_count(mesh_ep_h ep, size_t tokens, const int32_t *ids, int64_t cross[4]);
/* The cost of a byte between nodes over inside a node, measured on the first call (collective
 * over the ep communicator, ep_probe.c) and kept. */
mesh_status_t mesh_ep_measure_link(mesh_ep_h ep, double *ratio);
/* Builds l->hier from a built layout (slot_row, counts, offsets) and its routing; collective
 * over the ep communicator. */
mesh_status_t mesh_ep_hier_build(mesh_ep_layout_h l, const int32_t *ids);
void mesh_ep_hier_destroy(struct mesh_ep_hier *h);
/* Token rows -> expert rows: in [tokens] rows to out [nrecv] rows, each scaled by its choice's
 * weight when weights is not NULL. */
mesh_status_t mesh_ep_hier_forward(mesh_ep_layout_h l, const void *in, const float *weights,
                                   void *out, size_t hidden, mesh_dtype_t dtype, const char *fn);
/* Expert rows -> per token, the weighted sum of its kept rows (weights 1 where NULL), and
 * gathered rows when not NULL (see mesh_ep_combine). */
mesh_status_t mesh_ep_hier_reverse(mesh_ep_layout_h l, const void *rows, const float *weights,
                                   void *out, void *gathered, size_t hidden, mesh_dtype_t dtype,
                                   const char *fn);

/* Element i of a row of fp32 or bf16 (bf16 by the library's rule, mesh/dtype.h). */
static inline float mesh_ep_load(const void *row, size_t i, mesh_dtype_t dtype)
{
    return dtype == MESH_FP32 ? ((const float *)row)[i]
                              : mesh_bf16_to_float(((const uint16_t *)row)[i]);
}

static inline void mesh_ep_store(void *row, size_t i, double v, mesh_dtype_t dtype)
{
    float f = (float)v;
    if (dtype == MESH_FP32)
        ((float *)row)[i] = f;
    else
        ((uint16_t *)row)[i] = mesh_float_to_bf16(f);
}

#endif
