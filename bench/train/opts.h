#ifndef MESH_TRAIN_OPTS_H
#define MESH_TRAIN_OPTS_H

#include <mesh.h>
#include <stdint.h>

typedef struct {
    int size[MESH_AXIS_COUNT]; /* 0: not given */
    int plan;                  /* --mesh auto: the planner fills what was not given */
    const char *order;
    int zero, zero_given;
    int layers, d_model, heads, seq, vocab;
    int batch, microbatches, microbatches_given, steps;
    const char *schedule; /* pipeline schedule; NULL: not given */
    int chunks;           /* 0: not given */
    double lr, clip, weight_decay;
    uint64_t seed;
    int bf16;
    int sequence_parallel;
    int cp_zigzag, cp_no_overlap; /* --cp-zigzag, --cp-no-overlap */
    const char *cp_algo;          /* ring or allgather; NULL: not given (ring) */
    int overlap;
    double bucket_mb;
    int inflight; /* --reductions-in-flight */
    const char *csv, *save, *load, *dump;
    int quiet;
    int comm_report; /* --comm-report */
    /* mixture of experts: experts 0 means none */
    int experts, topk, expert_ffn;
    uint64_t moe_layers; /* bit l: block l; 0 when not given: the odd blocks */
    double capacity, aux_loss;
    int capacity_groups; /* 0: not given */
    /* a text corpus (NULL: seeded synthetic tokens), its validation and sampling */
    const char *data;
    int bpe; /* byte-pair merges learnt on the training bytes; 0: one token per byte */
    double val_frac;
    int val_every, val_batches; /* val_every 0: after the last step only */
    int vocab_given;
    int sample;         /* tokens to generate after training (or from --load); 0: none */
    const char *prompt; /* the text they follow */
    double temperature; /* 0: greedy */
    uint64_t sample_seed;
} train_opts_t;

/* 0: run; 1: --help was printed; -1: bad option (message printed). */
int train_opts_parse(train_opts_t *o, int argc, char **argv, int print);

#endif
