/*
 * Where mesh-train's model meets mesh: the grid of the run, which axis splits what, the model's
 * hooks (tp regions, vocabulary-parallel embedding and loss, parameters and gradients from the
 * optimizer), and the gathering of full parameters for dumps. The model files never call mesh.
 */
#ifndef MESH_TRAIN_LAYOUT_H
#define MESH_TRAIN_LAYOUT_H

#include "gpt.h"
#include <mesh.h>
#include <mesh/tensor.h>
#include <mesh/zero.h>

typedef struct {
    int size[MESH_AXIS_COUNT];
    const char *order;
    int sequence_parallel;
    int bf16;
    int stage; /* ZeRO */
} layout_params_t;

typedef struct {
    mesh_comm_h world, tp_comm, dp_comm;
    mesh_grid_h grid;
    mesh_tp_h tp;
    int tp_size, tp_rank, dp_size, dp_rank;
    gpt_t *m;
    mesh_zero_h z;
    int bf16, stage;
    int *prefetched;        /* stage 3: groups gathered ahead of their use */
    float *work_p, *work_g; /* fp32 copies the model works on when storage is bf16 */
    int *held;              /* per group: acquisitions not yet released */
    int boundary;           /* the micro-batch being run is the last before a step */
    char err[512];
} layout_t;

/* Builds the grid (refusing axes whose layer mesh-train does not have yet) and the tp handle. */
int layout_create(layout_t *lo, mesh_comm_h world, const layout_params_t *p);
/* Points the model's hooks at the layout; registers its tensors with the sharded optimizer
 * (created with zp, over dp, the norm summed over tp) and finalizes it. */
int layout_bind(layout_t *lo, gpt_t *m, const mesh_zero_params_t *zp);
/* Model initialisation independent of the layout: each full tensor from (seed, name), then this
 * rank's shard. */
int layout_init_params(layout_t *lo, uint64_t seed);
/* Writes every tensor whole, in table order, as text (one value per line after a
 * "# name rows cols" line); collective, world rank 0 writes. */
int layout_dump_params(layout_t *lo, const char *path);
/* Checkpoint: the optimizer's shards and index, and mesh-train.txt (the model and the step). */
int layout_save(layout_t *lo, const char *dir, int64_t step);
int layout_load(layout_t *lo, const char *dir, int64_t *step);
void layout_destroy(layout_t *lo);

#endif
