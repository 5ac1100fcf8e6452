/*
 * mesh-train's pipeline parallelism: the model's blocks split over the stages of a schedule
 * (mesh/pipeline.h), the embedding on the first stage, the final layernorm, head and loss on
 * the last, and the executor's callbacks that run the model's parts.
 */
#ifndef MESH_TRAIN_PIPE_H
#define MESH_TRAIN_PIPE_H

#include "gpt.h"
#include "layout.h"
#include <mesh/pipeline.h>

typedef struct {
    layout_t *lo;
    gpt_t *m;
    mesh_pp_schedule_h sched;
    mesh_pp_exec_h exec;
    int p, v, stages, mb; /* ranks, chunks per rank, model stages, micro-batches */
    int split;            /* the schedule splits the backward into B and W */
    int *bwd_done;        /* per chunk: micro-batches whose weight gradients are in */
    double loss;          /* sum of the rows' losses of this step (last stage) */
    char err[512];
} pipe_t;

/* Builds the schedule (kind by name; chunks 0: the kind's default) and marks the tensors this
 * rank's stages hold in the layout; before layout_bind, after gpt_alloc_acts. Refuses with a
 * message in err what does not divide. */
int pipe_create(pipe_t *pp, layout_t *lo, gpt_t *m, const char *schedule, int chunks);
/* After layout_bind: the executor. */
int pipe_start(pipe_t *pp);
/* One step's forward and backward passes over every micro-batch (tokens and targets already in
 * m->acts), the tied embedding's gradient summed and every gradient handed to the optimizer;
 * *loss_sum is this rank's sum of row losses (non-zero on the last stage only). */
int pipe_step(pipe_t *pp, double *loss_sum);
/* Micro-batch mb's forward pass alone (validation), stage after stage: each stage's output is
 * sent to the rank of the next; *loss_sum as pipe_step's. No gradient is touched. */
int pipe_forward(pipe_t *pp, int mb, double *loss_sum);
void pipe_destroy(pipe_t *pp);

#endif
