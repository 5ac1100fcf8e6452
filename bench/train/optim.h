/*
 * mesh-train's optimizer, behind the interface of the sharded optimizer (ZeRO) it is to be served
 * by: tensors registered by name, flat buffers, gradients marked ready as the backward pass
 * produces them, one step (reduction over dp, global norm, clipping, AdamW). This build keeps
 * full replicas on every dp rank whatever the stage: gradients are all-reduced over dp, the
 * optimizer state is not partitioned.
 */
#ifndef MESH_TRAIN_OPTIM_H
#define MESH_TRAIN_OPTIM_H

#include <mesh.h>
#include <stddef.h>
#include <stdint.h>

typedef struct train_opt train_opt_t;

typedef struct {
    int stage; /* 0..3 */
    double lr, beta1, beta2, eps, weight_decay;
    double clip; /* global-norm clipping; 0: none */
    int bf16;    /* parameters and gradients stored and reduced in bf16 */
    int overlap; /* start reductions as gradients become ready */
    size_t bucket_bytes;
} train_opt_params_t;

enum {
    TRAIN_OPT_REPLICATED = 1u << 0 /* held whole by every tp rank: counted once in the norm */
};

/* dp: the data-parallel communicator; tp: the one a norm is summed over (NULL: none). */
int train_opt_create(mesh_comm_h dp, mesh_comm_h tp, const train_opt_params_t *p,
                     train_opt_t **out);
int train_opt_add(train_opt_t *o, const char *name, size_t numel, unsigned flags, int group);
int train_opt_finalize(train_opt_t *o);
/* Parameters of a group usable between gather and release (stage 3 fetches them; others hold
 * them always). */
int train_opt_gather(train_opt_t *o, int group);
int train_opt_release(train_opt_t *o, int group);
/* The tensor's parameters and gradients, in the stored dtype (fp32 or bf16). */
int train_opt_param(train_opt_t *o, const char *name, void **ptr);
int train_opt_grad(train_opt_t *o, const char *name, void **ptr);
/* Sets a tensor's parameters (and fp32 master copy) from fp32 values. */
int train_opt_set(train_opt_t *o, const char *name, const float *values);
int train_opt_grad_ready(train_opt_t *o, const char *name);
/* Reduces the gradients, clips by the global norm, steps and zeroes the gradients. */
int train_opt_step(train_opt_t *o, double *grad_norm);
int train_opt_save(train_opt_t *o, const char *dir, int64_t step);
int train_opt_load(train_opt_t *o, const char *dir, int64_t *step);
void train_opt_destroy(train_opt_t *o);

#endif
