/* The cp handle's insides and the attention's block math, shared by the files of
 * parallel/context. */
#ifndef MESH_PAR_CP_H
#define MESH_PAR_CP_H

#include "mesh/context.h"
#include "../common.h"

struct mesh_cp {
    mesh_comm_h comm;
    int size;
    int rank;
    unsigned flags;
    mesh_cp_algorithm_t algorithm;
    int tag;
    void *scratch; /* grown on demand, one call's buffers carved from it */
    size_t scratch_bytes;
};

/* A shape resolved for one rank: local = seq / cp positions per sample, width = heads *
 * head_dim, block = batch * local * width (the elements of one rank's K, or of its V). */
typedef struct {
    size_t batch, seq, local, width, stride, head_dim, block;
    int heads;
    float scale;
} mesh_cp_dims_t;

/* The positions of one rank's local rows: chunk c starts at local row `offset[c]`. */
typedef struct {
    mesh_cp_range_t chunk[2];
    size_t offset[2];
    int n;
} mesh_cp_rows_t;

/* A cp handle that is not NULL; records the error naming the function otherwise. */
mesh_status_t mesh_cp_check(mesh_cp_h cp, const char *fn);
/* Scratch with room for bytes (valid until the next call on the handle). */
mesh_status_t mesh_cp_scratch(mesh_cp_h cp, size_t bytes, void **buf);
/* The positions rank holds in the handle's sharding; seq was checked by mesh_cp_dims. */
void mesh_cp_rows(mesh_cp_h cp, int rank, size_t seq, mesh_cp_rows_t *rows);

/* The two algorithms; arguments checked, dims resolved. */
mesh_status_t mesh_cp_ring_forward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                   const float *k, const float *v, float *out, float *lse);
mesh_status_t mesh_cp_ring_backward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                    const float *k, const float *v, const float *out,
                                    const float *lse, const float *dout, float *dq, float *dk,
                                    float *dv);
mesh_status_t mesh_cp_gather_forward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                     const float *k, const float *v, float *out, float *lse);
mesh_status_t mesh_cp_gather_backward(mesh_cp_h cp, const mesh_cp_dims_t *d, const float *q,
                                      const float *k, const float *v, const float *out,
                                      const float *lse, const float *dout, float *dq, float *dk,
                                      float *dv);

/* ---------------------------------------------------------------- block math (local)
 * A K/V block is one rank's keys then values, packed: kv[0 .. block) = K, kv[block .. 2 block)
 * = V, each [batch, local, width]. Per-query state (running maximum m, sum of exponentials l,
 * lse, delta) is [batch, heads, local]. tmp holds `local` floats. */

/* k, v (strided) -> kv; kv -> k, v (strided); rows [batch, local, width] -> dst (strided). */
void mesh_cp_pack(const mesh_cp_dims_t *d, const float *k, const float *v, float *kv);
void mesh_cp_unpack(const mesh_cp_dims_t *d, const float *kv, float *k, float *v);
void mesh_cp_store(const mesh_cp_dims_t *d, const float *rows, float *dst);
/* acc [batch, local, width] = 0, m = -inf, l = 0. */
void mesh_cp_forward_init(const mesh_cp_dims_t *d, float *acc, float *m, float *l);
/* Merges the causal scores of the queries q (strided, rows qr) against the block kv (rows kr)
 * into the running state: acc is rescaled by exp(m_old - m_new) and gains the block's p v. */
void mesh_cp_forward_block(const mesh_cp_dims_t *d, const float *q, const mesh_cp_rows_t *qr,
                           const float *kv, const mesh_cp_rows_t *kr, float *acc, float *m,
                           float *l, float *tmp);
/* out = acc / l; lse = m + log l. */
void mesh_cp_forward_finish(const mesh_cp_dims_t *d, const float *acc, const float *m,
                            const float *l, float *out, float *lse);
/* delta = rowsum(dout * out) per query and head; dq [batch, local, width] = 0. */
void mesh_cp_backward_init(const mesh_cp_dims_t *d, const float *out, const float *dout,
                           float *delta, float *dq);
/* Adds the block's part to dq ([batch, local, width]) and to dkv (packed like kv), the
 * probabilities recomputed from lse. */
void mesh_cp_backward_block(const mesh_cp_dims_t *d, const float *q, const mesh_cp_rows_t *qr,
                            const float *dout, const float *lse, const float *delta,
                            const float *kv, const mesh_cp_rows_t *kr, float *dq, float *dkv);

#endif
