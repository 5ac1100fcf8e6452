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
    BENCH_DISPATCH_COMBINE, /* expert dispatch + combine (mesh-bench only; bench_ep.h) */
    BENCH_OP_COUNT
} bench_op_t;

/* dispatch_combine: rows of at most BENCH_EP_HIDDEN elements, each token to BENCH_EP_TOPK of
 * 2 x ranks experts. */
#define BENCH_EP_HIDDEN 1024
#define BENCH_EP_TOPK   2

/* The axes of --mesh, in the order of mesh_axis_t (mesh-bench checks it at compile time). */
typedef enum {
    BENCH_AXIS_TP = 0,
    BENCH_AXIS_CP,
    BENCH_AXIS_EP,
    BENCH_AXIS_DP,
    BENCH_AXIS_PP,
    BENCH_AXIS_COUNT
} bench_axis_id_t;

typedef struct {
    unsigned ops;    /* bit per bench_op_t */
    unsigned dtypes; /* bit per bench_dtype_t */
    unsigned redops; /* bit per bench_redop_t */
    size_t min_bytes, max_bytes;
    size_t factor;
    int iters, warmup;
    int check;
    int root;
    const char *algo; /* -a */
    const char *csv;  /* --csv FILE */
    int memcpy_mode;  /* --memcpy */
    /* the per-axis bench over a 5D mesh grid (mesh-bench only) */
    const char *mesh;                /* --mesh tp=2,dp=2,...: as given */
    int mesh_size[BENCH_AXIS_COUNT]; /* parsed --mesh; 0 when not named */
    const char *order;               /* --order, innermost first */
    int reorder;                     /* --reorder */
    const char *axes;                /* --axes LIST or all */
    const char *json;                /* --json FILE */
    const char *plot;                /* --plot DIR */
    int bytes;                       /* --bytes: bytes each transport carried per call */
    double skew;                     /* --skew: dispatch_combine's routing skew (0: uniform) */
    const char *ep_path; /* --ep-path: dispatch_combine's path, flat, hier or auto (default) */
    double idle;         /* --idle S: the CPU use of ranks waiting S seconds for rank 0 */
    double min_time;     /* --min-time S: more than -n iterations when they take less */
    const char *mem;     /* -m: NULL or "host"; "device" (--device: any table), "cuda", "emu" */
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

/* One communicator the driver measures: the whole one, or this rank's group along an axis
 * while every other group of that axis runs the same calls at the same time. */
typedef struct {
    char name[32];  /* "tp", "dp-cp", ...; "world" for the whole communicator */
    int rank, size; /* this rank in its group */
    int groups;     /* groups of the axis running at once */
    int nnodes;     /* nodes spanned by the group of rank 0 */
    unsigned ops;   /* ops run on it: the selected ones, sendrecv alone along pp */
} bench_axis_t;

/* A row's result; time_us < 0 when not run (N/A), wrong -1 when not checked. */
typedef struct {
    double time_us;
    double algbw, busbw;
    int64_t wrong;
    char algo[32];
    uint64_t tl_bytes[8]; /* --bytes: per transport, per call, all ranks */
} bench_result_t;

/* Device buffers (mesh-bench -m device, cuda or emu): the driver keeps a host copy of each buffer
 * in pinned memory for the data and its check, and times until the stream completed. */
typedef struct {
    const char *table; /* "cuda", "emu" */
    int device;        /* this rank's device, an ordinal of the table */
    int sharing;       /* ranks sharing rank 0's device (on its node) */
    /* Device memory, or pinned host memory; NULL after printing why. */
    void *(*alloc)(size_t bytes, int pinned_host);
    void (*free)(void *p);
    /* Enqueued on the bench's stream, which every call also runs on; 0 or -1 after printing. */
    int (*copy)(void *dst, const void *src, size_t bytes);
    int (*sync)(void); /* waits until the stream completed its work */
} bench_device_t;

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
    /* Seconds on the backend's monotonic clock (mesh_time_now, MPI_Wtime). */
    double (*now)(void);
    /* Lines describing the environment (ranks, nodes, transports), printed by rank 0. */
    void (*describe)(FILE *out);
    /* Axes of a grid (0: none; the driver measures the whole communicator). axis() makes axis i
     * the communicator of run() and algo() and describes it; barrier, max_double and sum_u64
     * stay on the whole communicator, so all groups start together and the slowest counts. */
    int naxes;
    int (*axis)(int i, bench_axis_t *a);
    const char *mesh; /* the grid for titles: "tp=2,dp=2,pp=2, order tp-cp-ep-dp-pp" */
    /* --bytes (NULL where unknown): names of the transports in use, NULL-terminated, and the
     * bytes this rank has sent so far over transport i. */
    const char *const *tls;
    int (*tl_sent)(int i, uint64_t *bytes);
    const bench_device_t *dev; /* NULL: host buffers */
} bench_backend_t;

/* bench_opts.c */
/* 0: run; 1: --help printed; 2: usage error printed. */
int bench_parse(int argc, char **argv, const char *prog, bench_opts_t *o);
const char *bench_op_name(bench_op_t op);
const char *bench_dtype_name(bench_dtype_t d);
const char *bench_redop_name(bench_redop_t r);
size_t bench_dtype_size(bench_dtype_t d);
int bench_op_is_reduction(bench_op_t op);
const char *bench_axis_name(bench_axis_id_t a);
/* Ops an axis runs: along pp, sendrecv between neighbouring stages; elsewhere the selected. */
unsigned bench_axis_ops(const bench_opts_t *o, const char *axis);
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
/* Bytes all ranks together receive per call, in units of S, as the fewest any algorithm moves:
 * 2(n-1) for allreduce, n-1 for broadcast, reduce, allgather, reduce_scatter and alltoall,
 * (n-1)/n for gather and scatter, n for sendrecv; 0 where unknown (dispatch_combine). With n
 * ranks on one device every such byte is a copy inside it, so that rate is bounded by the
 * device's copy rate. */
double bench_recv_factor(bench_op_t op, int nranks);

/* bench_data.c */
/* Element conversions of the types, exact for the values the benchmark uses. */
void bench_encode(bench_dtype_t d, double v, void *out);
double bench_decode(bench_dtype_t d, const void *in);
/* Fills this rank's input of c (buffers from c) and poisons the output. */
void bench_fill(const bench_call_t *c, const bench_sizes_t *sz, int rank, int nranks);
/* Wrong elements of this rank's output. */
uint64_t bench_check(const bench_call_t *c, const bench_sizes_t *sz, int rank, int nranks);

/* bench_out.c: the rows as CSV, JSON and, through gnuplot, one PNG per op (rank 0 only). */
typedef struct bench_out bench_out_t;
/* NULL when nothing is asked or on failure; *err is set on failure (message printed). */
bench_out_t *bench_out_open(const bench_opts_t *o, const bench_backend_t *b, int *err);
void bench_out_row(bench_out_t *out, const bench_axis_t *a, const bench_call_t *c,
                   const bench_sizes_t *sz, const bench_result_t *r);
/* Writes what remains (JSON end, plots) and frees; 0, or -1 after printing why. */
int bench_out_close(bench_out_t *out, const bench_opts_t *o, const bench_backend_t *b);
/* The CSV header line, without newline. */
extern const char bench_csv_header[];

/* bench_run.c */
/* Sets c->sbuf and c->rbuf inside the two buffers per the in-place conventions of mesh.h:
 * reduce_scatter and scatter receive at sbuf + rank's block, allgather and gather send from
 * rbuf + rank's block, the others use one buffer. */
void bench_layout(bench_call_t *c, char *sbuf, char *rbuf, int rank);
/* Runs every selected op, dtype and redop over the sizes; returns the process exit status. */
int bench_main(const bench_opts_t *o, const bench_backend_t *b);
int bench_memcpy(const bench_opts_t *o, double (*now)(void));

#endif
