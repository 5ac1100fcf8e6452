/*
 * Where mesh-train's model meets mesh: the grid of the run, which axis splits what, the model's
 * hooks (tp regions, vocabulary-parallel embedding and loss, parameters and gradients from the
 * optimizer), and the gathering of full parameters for dumps. The model files never call mesh.
 */
#ifndef MESH_TRAIN_LAYOUT_H
#define MESH_TRAIN_LAYOUT_H

#include "gpt.h"
#include "optim.h"
#include <mesh.h>
#include <mesh/context.h>
#include <mesh/expert.h>
#include <mesh/tensor.h>
#include <mesh/zero.h>

typedef struct {
    int size[MESH_AXIS_COUNT];
    const char *order;
    int sequence_parallel;
    int bf16;
    int stage; /* ZeRO */
    /* mixture of experts (0 experts: none) */
    int experts, topk;
    double capacity;
    int capacity_groups; /* 0: the ep groups */
    /* context parallelism: the whole sequence's length, the sharding and the algorithm */
    int seq, cp_zigzag, cp_no_overlap;
    const char *cp_algo; /* ring or allgather; NULL: not given (ring) */
} layout_params_t;

typedef struct {
    /* dp_comm is the dense layers' data-parallel group: dp x ep ranks ("dp-ep") */
    mesh_comm_h world, tp_comm, dp_comm, pp_comm, cp_comm;
    /* the dense optimizer's and the router statistics': dp x ep x cp ("cp-dp-ep"; cp ranks
     * hold the same parameters and other tokens) */
    mesh_comm_h zero_comm;
    mesh_grid_h grid;
    mesh_tp_h tp;
    mesh_cp_h cp;
    int tp_size, tp_rank, dp_size, dp_rank, pp_size, pp_rank, cp_size, cp_rank;
    int *cp_pos; /* [seq / cp] the sequence positions this cp rank holds, in local order */
    gpt_t *m;
    optim_t opt; /* the dense and the experts' optimizers, chained */
    int bf16, stage;
    int *prefetched;        /* stage 3: groups gathered ahead of their use */
    float *work_p, *work_g; /* fp32 copies the model works on when storage is bf16 */
    int *held;              /* per group: acquisitions not yet released */
    int boundary;           /* the micro-batch being run is the last before a step */
    /* Pipeline parallelism (set before layout_bind): the tensors this rank's stages hold
     * (NULL: all), and the pp rank holding the other copy of the tied token table (-1: none).
     * The token table's gradient is complete only when both stages have run their backward
     * passes, so group 0 is handed to the optimizer by layout_pp_handover after the step's
     * schedule, not by the hooks. */
    int *owned;
    int tied_peer;
    /* Mixture of experts: the experts spread over ep_comm (the expert grid's "ep"), their
     * tensors in the chain's expert optimizer over the expert data-parallel group ("edp"), the norm
     * summed over "etp-ep"; the routing of each (micro-batch, block) until its backward pass. */
    mesh_comm_h ep_comm, edp_comm, etp_ep_comm;
    int ep_size, ep_rank, edp_size;
    int capacity_split; /* capacity groups per ep group (ep=1 only: parts of a rank's tokens) */
    mesh_ep_h ep;
    mesh_ep_layout_h *routes; /* [micro-batches x L] */
    char err[512];
} layout_t;

/* Builds the grid (refusing layouts mesh-train does not run and cp options it cannot honour),
 * the tp and the cp handles, the cp rank's positions (mesh_cp_chunks) and with experts the ep
 * handle. */
int layout_create(layout_t *lo, mesh_comm_h world, const layout_params_t *p);
/* What layout_create refuses of the sizes and options alone (before any communicator), for
 * --mesh auto to skip: -1 with err set, 0 when they go together. */
int layout_refused(const layout_params_t *p, char *err, size_t len);
/* Points the model's hooks at the layout; registers its tensors with the sharded optimizer
 * (created with zp, over dp, the norm summed over tp) and finalizes it. */
int layout_bind(layout_t *lo, gpt_t *m, const mesh_zero_params_t *zp);
/* Mixture of experts (layout_moe.c): the groups and the ep handle, from layout_create; the
 * hooks, from layout_bind. */
int layout_moe_create(layout_t *lo, const layout_params_t *p);
int layout_moe_bind(layout_t *lo);
/* Pipeline parallelism, after the step's schedule has run: the tied token table's gradient
 * summed with the other stage's copy, then group 0 handed to the optimizer. */
int layout_pp_handover(layout_t *lo);
/* Model initialisation independent of the layout: each full tensor from (seed, name), then this
 * rank's shard. */
int layout_init_params(layout_t *lo, uint64_t seed);
/* Writes every tensor whole, in table order, as text (one value per line after a
 * "# name rows cols" line); collective, world rank 0 writes. */
int layout_dump_params(layout_t *lo, const char *path);
/* Every tensor whole on world rank 0 (out: their full sizes back to back in table order; NULL
 * elsewhere); collective. With pp, each tensor comes from the first stage holding it. */
int layout_gather_params(layout_t *lo, float *out);
/* Checkpoint: the optimizer's shards and index (the experts' optimizer's in experts/), and
 * mesh-train.txt (the model, with experts their tp and ep, and the step). */
int layout_save(layout_t *lo, const char *dir, int64_t step);
int layout_load(layout_t *lo, const char *dir, int64_t *step);
void layout_destroy(layout_t *lo);

#endif
