/* Internals of the expert-parallel layer (include/mesh/expert.h); public API only. */
#ifndef MESH_PAR_EP_H
#define MESH_PAR_EP_H

#include "../common.h"
#include <mesh/expert.h>
#include <stdint.h>
#include <string.h>

struct mesh_ep {
    mesh_comm_h comm;
    int size, rank;
    int experts, local; /* E and E / size */
    int topk;
    double capacity_factor;
};

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
    size_t *counts;       /* [local][4][size]: the all-to-all-vs' counts and displacements */
    mesh_request_h *reqs; /* [local] */
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

/* The packed scratch for rb-byte rows, or NULL (error recorded). */
void *mesh_ep_scratch(mesh_ep_layout_h l, size_t rb, const char *fn);

static inline float mesh_ep_load(const void *row, size_t i, mesh_dtype_t dtype)
{
    if (dtype == MESH_FP32)
        return ((const float *)row)[i];
    uint32_t u = (uint32_t)((const uint16_t *)row)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline void mesh_ep_store(void *row, size_t i, double v, mesh_dtype_t dtype)
{
    float f = (float)v;
    if (dtype == MESH_FP32) {
        ((float *)row)[i] = f;
        return;
    }
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    /* round to nearest even; a NaN stays a (quiet) NaN. Selects, not branches, so that loops
     * over a row vectorise. */
    uint32_t r = u + 0x7fffu + ((u >> 16) & 1u), q = u | 0x00400000u;
    ((uint16_t *)row)[i] = (uint16_t)(((u & 0x7fffffffu) > 0x7f800000u ? q : r) >> 16);
}

#endif
