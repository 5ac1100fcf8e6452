/*
 * One run of mesh-train: what main builds before its training loop and tears down after it
 * (run.c). The setup reads as its steps: the world, the layout (planned with --mesh auto), the
 * model, the pipeline, the optimizer and the parameters, then the log's header.
 */
#ifndef MESH_TRAIN_RUN_H
#define MESH_TRAIN_RUN_H

#include "gpt.h"
#include "layout.h"
#include "opts.h"
#include "pipe.h"
#include "text.h"

#include <mesh.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    train_opts_t o;
    mesh_comm_h world;
    int say; /* world rank 0: it prints */
    layout_t lo;
    gpt_t m;
    pipe_t pp;     /* pp > 1 only */
    int b;         /* samples per micro-batch on this rank */
    int64_t start; /* the step a loaded checkpoint was saved after; 0 without --load */
    char plan_why[1024];
    FILE *csv;
    /* --data: the corpus on every rank and its unigram entropy (nats per token) */
    text_t text;
    double unigram;
} run_t;

/* How a run ends: well; refused by every rank alike (they leave together); failed on this rank
 * (the others are aborted rather than left waiting). */
enum { RUN_OK = 0, RUN_REFUSED, RUN_FAILED };

/* Whether this process prints the options' messages: rank 0 of a launcher, or the only one. */
int run_first_rank(void);
/* The world communicator, under a launcher or as one rank; prints why not. */
int run_world(run_t *r);
/* Everything the loop needs, after the options and the world; RUN_*. */
int run_setup(run_t *r);
/* Frees the run, settles with the other ranks as status says and returns the exit status. */
int run_teardown(run_t *r, int status);

#endif
