/*
 * mesh-train's optimizer: the ZeRO instances of a run chained as one, as Megatron-Core's
 * ChainedOptimizer chains its dense and expert optimizers. The dense layers' instance shards over
 * the data-parallel group; with experts, theirs shards over the expert data-parallel group (their
 * tensors are not replicated across ep). A tensor is registered with the instance of its kind;
 * the calls of a micro-batch and a step then apply to every instance, or to those holding
 * tensors of the group they name, and the step clips all of them with the model's one gradient
 * norm. The layout (layout.c) and main speak to this, never to an instance pair.
 */
#ifndef MESH_TRAIN_OPTIM_H
#define MESH_TRAIN_OPTIM_H

#include <mesh.h>
#include <mesh/zero.h>

enum { OPTIM_DENSE = 0, OPTIM_EXPERT = 1, OPTIM_KINDS };

typedef struct {
    mesh_zero_h z[OPTIM_KINDS]; /* by kind; NULL where this rank has no tensor of the kind */
    /* the run has experts: the norm is the square root of the instances' squares, the experts'
     * summed over the pipeline stages (norm_comm) since their instance's spans no stages */
    int chained;
    mesh_comm_h norm_comm;
    unsigned char *holds; /* [groups] bit kind: that instance holds tensors of the group */
    int groups;
} optim_t;

/* An instance of a kind over comm (collective over it); groups: the model's tensor groups. */
int optim_create(optim_t *o, int kind, mesh_comm_h comm, const mesh_zero_params_t *p, int groups);
/* The run has experts (whether or not this rank holds some): the step sums the norm over the
 * instances, the experts' over pp_comm (NULL: one stage). */
void optim_chain(optim_t *o, mesh_comm_h pp_comm);
/* The instance holding tensors of a kind (NULL: none here). */
mesh_zero_h optim_zero(const optim_t *o, int kind);
int optim_add(optim_t *o, int kind, const char *name, size_t numel, const size_t shape[2],
              unsigned flags, int group);
int optim_finalize(optim_t *o);
/* Stage 3's gathers of a group's parameters (the instances holding the group's tensors). */
int optim_gather(optim_t *o, int group);
int optim_wait_params(optim_t *o, int group);
int optim_release(optim_t *o, int group);
int optim_progress(optim_t *o);
int optim_micro_begin(optim_t *o, int last);
/* Ends the micro-batch and waits for every instance's gradient reductions (the step then only
 * computes), for timing them apart. */
int optim_wait_grads(optim_t *o);
/* The step of every instance with the model's gradient norm (*norm). */
int optim_step(optim_t *o, double *norm);
/* The instances' model-state memory, summed. */
int optim_memory(const optim_t *o, mesh_zero_memory_t *mem);
/* Checkpoints: the dense instance's files in dir, the experts' in dir/experts. */
int optim_save(optim_t *o, const char *dir);
int optim_load(optim_t *o, const char *dir);
void optim_destroy(optim_t *o);

#endif
