/*
 * mesh tensor and sequence parallelism over a tp communicator (Megatron-style).
 *
 * A column-parallel linear layer splits its output features across tp ranks; a row-parallel one
 * splits its input features. A block is "column then row" (attention: qkv then proj; MLP: fc
 * then proj), and the communication sits at the two ends of that tp region:
 *
 *   without sequence parallelism          with sequence parallelism (MESH_TP_SEQUENCE_PARALLEL)
 *   enter: identity fwd, all-reduce bwd   enter: all-gather fwd, reduce-scatter bwd (sequence)
 *   exit:  all-reduce fwd, identity bwd   exit:  reduce-scatter fwd, all-gather bwd (sequence)
 *
 * Outside a tp region, activations are whole (every tp rank holds the same rows) or, with
 * sequence parallelism, split along the sequence: of a [batch, seq, width] tensor each rank
 * holds seq / tp consecutive positions of every sample, [batch, seq / tp, width]. Parameters
 * that every tp rank holds whole (layernorm, the bias of a row-parallel layer, position
 * embeddings) then see only their rank's rows, and mesh_tp_replicated_grad sums their gradients.
 *
 * The vocabulary is split too: the embedding looks up the rows of its vocabulary range and the
 * exit sums the ranks' parts; the cross-entropy reduces the maximum and the sum of exponentials
 * across tp, so no rank ever holds the full logits.
 *
 * Splits must be even: a size that tp does not divide is refused naming it. Buffers are host
 * memory; the conjugate operators take any dtype mesh reduces (fp32, bf16, ...), the embedding
 * and the cross-entropy fp32. Calls are collective over the tp communicator unless noted.
 */
#ifndef MESH_TENSOR_H
#define MESH_TENSOR_H

#include <mesh.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mesh_tp *mesh_tp_h;

enum { MESH_TP_PARAM_FIELD_FLAGS = 1u << 0 };

enum {
    MESH_TP_SEQUENCE_PARALLEL = 1u << 0 /* activations outside tp regions split along seq */
};

typedef struct {
    uint64_t field_mask;
    unsigned flags; /* MESH_TP_* */
} mesh_tp_params_t;

/* A half-open range [start, start + count) of rows, columns, heads or vocabulary entries. */
typedef struct {
    size_t start;
    size_t count;
} mesh_tp_range_t;

/* comm is the tp communicator (mesh_grid_comm(grid, "tp", ...)); it stays the caller's. */
MESH_API mesh_status_t mesh_tp_create(mesh_comm_h comm, const mesh_tp_params_t *params,
                                      mesh_tp_h *tp);
MESH_API void mesh_tp_destroy(mesh_tp_h tp);
MESH_API int mesh_tp_size(mesh_tp_h tp);
MESH_API int mesh_tp_rank(mesh_tp_h tp);
MESH_API int mesh_tp_sequence_parallel(mesh_tp_h tp);

/* ---------------------------------------------------------------- shard arithmetic (local) */

/* Part `index` of n split evenly into `parts`. n not divisible by parts: MESH_ERR_INVALID_ARG,
 * the message naming `what` ("heads", "vocab", ...), n and parts. */
MESH_API mesh_status_t mesh_tp_split(size_t n, int parts, int index, const char *what,
                                     mesh_tp_range_t *range);
/* This tp rank's part of n (output features of a column-parallel layer, input features of a
 * row-parallel one, vocabulary entries). */
MESH_API mesh_status_t mesh_tp_shard(mesh_tp_h tp, size_t n, const char *what,
                                     mesh_tp_range_t *range);
/* Attention: the heads this rank computes and their columns in each of q, k and v
 * (heads x head_dim features each). */
MESH_API mesh_status_t mesh_tp_heads(mesh_tp_h tp, int heads, size_t head_dim,
                                     mesh_tp_range_t *head_range, mesh_tp_range_t *columns);
/* Sequence positions this rank holds outside tp regions: seq / tp of them with sequence
 * parallelism (seq not divisible by tp is refused), all of them otherwise. */
MESH_API mesh_status_t mesh_tp_seq_shard(mesh_tp_h tp, size_t seq, mesh_tp_range_t *range);

/* ---------------------------------------------------------------- conjugate operators */

/* f: the input of a column-parallel layer. Forward is the identity (a copy when in != out);
 * backward sums the input gradient's partial contributions of the tp ranks (all-reduce;
 * in place when in == out). count is in elements of dtype. */
MESH_API mesh_status_t mesh_tp_copy_forward(mesh_tp_h tp, const void *in, void *out, size_t count,
                                            mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_copy_backward(mesh_tp_h tp, const void *grad_in, void *grad_out,
                                             size_t count, mesh_dtype_t dtype);
/* g: the output of a row-parallel layer. Forward sums the partial outputs (all-reduce);
 * backward is the identity. */
MESH_API mesh_status_t mesh_tp_reduce_forward(mesh_tp_h tp, const void *in, void *out, size_t count,
                                              mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_reduce_backward(mesh_tp_h tp, const void *grad_in, void *grad_out,
                                               size_t count, mesh_dtype_t dtype);

/* Along the sequence of [batch, seq, width] tensors (seq is the full length; local tensors are
 * [batch, seq / tp, width]). in and out must not overlap. */
/* all-gather forward: local -> full; backward: reduce-scatter full -> local. */
MESH_API mesh_status_t mesh_tp_sp_gather_forward(mesh_tp_h tp, const void *local, void *full,
                                                 size_t batch, size_t seq, size_t width,
                                                 mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_sp_gather_backward(mesh_tp_h tp, const void *grad_full,
                                                  void *grad_local, size_t batch, size_t seq,
                                                  size_t width, mesh_dtype_t dtype);
/* reduce-scatter forward: partial full -> summed local; backward: all-gather local -> full. */
MESH_API mesh_status_t mesh_tp_sp_scatter_forward(mesh_tp_h tp, const void *full, void *local,
                                                  size_t batch, size_t seq, size_t width,
                                                  mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_sp_scatter_backward(mesh_tp_h tp, const void *grad_local,
                                                   void *grad_full, size_t batch, size_t seq,
                                                   size_t width, mesh_dtype_t dtype);

/* The two ends of a tp region, in the tp handle's mode: enter is f (or the sequence all-gather),
 * exit is g (or the sequence reduce-scatter). `outside` tensors are [batch, seq / tp, width]
 * with sequence parallelism and [batch, seq, width] without; `inside` ones [batch, seq, width].
 * Without sequence parallelism inside and outside may be the same buffer. */
MESH_API mesh_status_t mesh_tp_enter_forward(mesh_tp_h tp, const void *outside, void *inside,
                                             size_t batch, size_t seq, size_t width,
                                             mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_enter_backward(mesh_tp_h tp, const void *grad_inside,
                                              void *grad_outside, size_t batch, size_t seq,
                                              size_t width, mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_exit_forward(mesh_tp_h tp, const void *inside, void *outside,
                                            size_t batch, size_t seq, size_t width,
                                            mesh_dtype_t dtype);
MESH_API mesh_status_t mesh_tp_exit_backward(mesh_tp_h tp, const void *grad_outside,
                                             void *grad_inside, size_t batch, size_t seq,
                                             size_t width, mesh_dtype_t dtype);

/* The gradient of a parameter every tp rank holds whole and applies outside tp regions: with
 * sequence parallelism each rank saw its own positions, so the parts are summed (all-reduce in
 * place); without it every rank already has the whole gradient and nothing is sent. */
MESH_API mesh_status_t mesh_tp_replicated_grad(mesh_tp_h tp, void *grad, size_t count,
                                               mesh_dtype_t dtype);

/* ---------------------------------------------------------------- vocabulary-parallel layers */

/* Token embedding whose table is split by vocabulary: weight is this rank's rows
 * [vocab / tp, width] of the full [vocab, width] table. tokens [batch, seq] (every tp rank passes
 * all of them, each in 0..vocab-1) give out, the outside tensor of the tp mode (see enter/exit):
 * each rank looks up the tokens of its range and the exit sums the parts. fp32. */
MESH_API mesh_status_t mesh_tp_embedding_forward(mesh_tp_h tp, const int32_t *tokens, size_t batch,
                                                 size_t seq, const float *weight, size_t vocab,
                                                 size_t width, float *out);
/* Adds the gradient of this rank's rows to grad_weight [vocab / tp, width]; grad_out is the
 * gradient of out. */
MESH_API mesh_status_t mesh_tp_embedding_backward(mesh_tp_h tp, const int32_t *tokens, size_t batch,
                                                  size_t seq, const float *grad_out, size_t vocab,
                                                  size_t width, float *grad_weight);

/* Cross-entropy over logits split by vocabulary: logits [rows, vocab / tp] hold this rank's
 * columns; targets [rows] are global ids. Gives loss[rows] = logsumexp - logit[target] on every
 * rank and lse[rows] (the log-sum-exp, kept for the backward pass). The row maximum is
 * all-reduced (max), then the sums of exponentials and the target logits (sum). fp32. */
MESH_API mesh_status_t mesh_tp_cross_entropy_forward(mesh_tp_h tp, const float *logits, size_t rows,
                                                     size_t vocab, const int32_t *targets,
                                                     float *loss, float *lse);
/* grad_logits = (softmax - onehot(target)) * grad_loss[row], this rank's columns; no
 * communication (local). grad_logits may be logits itself. */
MESH_API mesh_status_t mesh_tp_cross_entropy_backward(mesh_tp_h tp, const float *logits,
                                                      size_t rows, size_t vocab,
                                                      const int32_t *targets, const float *lse,
                                                      const float *grad_loss, float *grad_logits);

#ifdef __cplusplus
}
#endif

#endif
