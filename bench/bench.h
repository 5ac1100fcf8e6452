/*
 * The collective benchmark shared by mesh-bench and mpi-bench: options, sizes, data patterns,
 * validation and the nccl-tests style report. A backend (mesh or MPI) supplies the calls.
 * Nothing here depends on either library, so both binaries measure exactly the same thing.
 */
#ifndef MESH_BENCH_H
#define MESH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Same order as mesh_dtype_t and mesh_op_t (mesh-bench checks it at compile time). */
typedef enum {
    BENCH_INT8 = 0,
    BENCH_UINT8,
    BENCH_INT32,
    BENCH_UINT32,
    BENCH_INT64,
    BENCH_UINT64,
    BENCH_FP16,
    BENCH_BF16,
    BENCH_FP32,
    BENCH_FP64,
    BENCH_E4M3,
    BENCH_E5M2,
    BENCH_DTYPE_COUNT
} bench_dtype_t;

typedef enum {
    BENCH_SUM = 0,
    BENCH_PROD,
    BENCH_MIN,
    BENCH_MAX,
    BENCH_AVG,
    BENCH_REDOP_COUNT
} bench_redop_t;

typedef enum {
    BENCH_ALLREDUCE = 0,
    BENCH_REDUCE,
    BENCH_BROADCAST,
    BENCH_REDUCE_SCATTER,
    BENCH_ALLGATHER,
    BENCH_ALLTOALL,
    BENCH_GATHER,
    BENCH_SCATTER,
    BENCH_SENDRECV,
    BENCH_OP_COUNT
} bench_op_t;

typedef struct {
    unsigned ops;      /* bit per bench_op_t */
    unsigned dtypes;   /* bit per bench_dtype_t */
    unsigned redops;   /* bit per bench_redop_t */
    size_t min_bytes, max_bytes;
    size_t factor;
    int iters, warmup;
    int check;
    int root;
    const char *algo;  /* -a */
    const char *csv;   /* --csv FILE */
    int memcpy_mode;   /* --memcpy */
    int bytes;         /* --bytes: bytes each transport carried per call */
} bench_opts_t;

/* One call as the driver prepares it; buffers follow the in-place conventions of mesh.h. */
typedef struct {
    bench_op_t op;
    bench_dtype_t dtype;
    bench_redop_t redop;
    int root;
    int in_place;
    const void *sbuf;
    void *rbuf;
    size_t count; /* the count argument: total, per rank block, or per peer (see bench_sizes) */
} bench_call_t;

typedef struct bench_backend {
    const char *name; /* "mesh", "mpi" */
    int rank, size, nnodes;
    /* 0 when the backend cannot do this combination (the row shows N/A). */
    int (*supports)(bench_op_t op, bench_dtype_t dtype, bench_redop_t redop, int in_place);
    /* Runs one call, blocking; 0, or -1 after printing why. */
    int (*run)(const bench_call_t *c);
    /* Name of the algorithm the last call used. */
    const char *(*algo)(bench_op_t op);
    int (*barrier)(void);
    int (*max_double)(double *v); /* across ranks, in place */
    int (*sum_u64)(uint64_t *v);
    void (*abort)(void);
    /* Lines describing the environment (ranks, nodes, transports), printed by rank 0. */
    void (*describe)(FILE *out);
    /* --bytes (NULL where unknown): names of the transports in use, NULL-terminated, and the
     * bytes this rank has sent so far over transport i. */
    const char *const *tls;
    int (*tl_sent)(int i, uint64_t *bytes);
} bench_backend_t;

/* bench_opts.c */
/* 0: run; 1: --help printed; 2: usage error printed. */
int bench_parse(int argc, char **argv, const char *prog, bench_opts_t *o);
const char *bench_op_name(bench_op_t op);
const char *bench_dtype_name(bench_dtype_t d);
const char *bench_redop_name(bench_redop_t r);
size_t bench_dtype_size(bench_dtype_t d);
int bench_op_is_reduction(bench_op_t op);
/* MESH_TUNE text forcing -a for the chosen ops (algo verbatim when it contains ':'). */
void bench_tune_string(const bench_opts_t *o, char *buf, size_t len);

/* Sizes of one row, nccl-tests style: S is the size of the whole buffer that the operation
 * moves (all blocks for allgather, reduce_scatter, alltoall, gather, scatter). */
typedef struct {
    size_t count;  /* the count argument */
    size_t bytes;  /* S */
    size_t sbytes; /* send buffer bytes */
    size_t rbytes; /* receive buffer bytes */
} bench_sizes_t;
void bench_sizes(bench_op_t op, bench_dtype_t d, size_t bytes, int nranks, bench_sizes_t *sz);
/* busbw = algbw * factor (DESIGN.md section 7). */
double bench_busbw_factor(bench_op_t op, int nranks);

/* bench_data.c */
/* Element conversions of the types, exact for the values the benchmark uses. */
void bench_encode(bench_dtype_t d, double v, void *out);
double bench_decode(bench_dtype_t d, const void *in);
/* Fills this rank's input of c (buffers from c) and poisons the output. */
void bench_fill(const bench_call_t *c, const bench_sizes_t *sz, int rank, int nranks);
/* Wrong elements of this rank's output. */
uint64_t bench_check(const bench_call_t *c, const bench_sizes_t *sz, int rank, int nranks);

/* bench_run.c */
/* Sets c->sbuf and c->rbuf inside the two buffers per the in-place conventions of mesh.h:
 * reduce_scatter and scatter receive at sbuf + rank's block, allgather and gather send from
 * rbuf + rank's block, the others use one buffer. */
void bench_layout(bench_call_t *c, char *sbuf, char *rbuf, int rank);
/* Runs every selected op, dtype and redop over the sizes; returns the process exit status. */
int bench_main(const bench_opts_t *o, const bench_backend_t *b);
double bench_now(void);
int bench_memcpy(const bench_opts_t *o);

#endif
