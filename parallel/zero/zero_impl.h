/* The ZeRO layer's state, shared by its files; public API only (mesh.h, mesh/zero.h). */
#ifndef MESH_PAR_ZERO_IMPL_H
#define MESH_PAR_ZERO_IMPL_H

#include "../common.h"
#include <mesh/dtype.h>
#include <mesh/zero.h>
#include <stddef.h>
#include <stdint.h>

/* Tensor offsets and bucket slices are aligned to this many bytes. */
#define ZERO_ALIGN_BYTES 64

typedef struct {
    char *name;
    size_t numel;
    int ndim;
    size_t shape[MESH_ZERO_MAX_DIMS];
    unsigned flags;
    int group;
    size_t offset; /* first element in the flat buffers */
    int bucket;
    double norm_weight; /* 1, 0.5 (shared) or 0 (a replica counted elsewhere) */
    unsigned ready_mb;  /* serial of the micro-batch that last marked it ready */
    int initialized;    /* set by mesh_zero_init_param */
} zero_tensor_t;

typedef struct {
    size_t start, numel; /* padded: numel is a multiple of d x alignment */
    size_t slice;        /* numel / d */
    size_t shard_off;    /* where this rank's slice sits in the shard arrays */
    int first, count;    /* tensors, as indices into the layout order */
    int group;           /* stage 3: the group of every tensor in it */
    int ready;           /* tensors marked ready in this micro-batch */
    int posted;          /* reduction started in this micro-batch */
    mesh_request_h req;  /* reduction in flight */
} zero_bucket_t;

typedef struct {
    int id;           /* the group number the model uses */
    int first, count; /* buckets (stage 3) */
    int refs;         /* gathers not yet released */
    int waited;
    mesh_request_h *reqs; /* one per bucket while gathering */
} zero_group_t;

/* A run of one tensor inside this rank's part of one bucket: what the optimizer and the norm
 * walk. gidx indexes the flat buffers, lidx the optimizer arrays (shard, or full in stage 0). */
typedef struct {
    int tensor;
    int bucket;
    size_t gidx, lidx, len;
} zero_seg_t;

struct mesh_zero {
    mesh_comm_h dp, mp;
    int rank, size, mp_rank, mp_size;
    int stage;
    mesh_zero_optimizer_t opt;
    double lr, beta1, beta2, eps, wd, momentum, max_norm, grad_scale;
    int bias_correction, overlap;
    int max_inflight; /* gradient reductions under way at once */
    mesh_dtype_t dtype;
    size_t esize; /* bytes per parameter element */
    size_t bucket_bytes;

    zero_tensor_t *t; /* registration order */
    int nt, tcap;
    int *order; /* layout order: indices into t */
    int *hash;  /* open addressing over names: index into t, -1 empty */
    size_t hcap;
    zero_bucket_t *b;
    int nb;
    zero_group_t *g; /* sorted by id */
    int ng;
    zero_seg_t *seg;
    int nseg;
    int finalized;

    size_t numel; /* registered */
    size_t N;     /* padded flat size */
    size_t S;     /* shard size: N / d */
    size_t L;     /* optimizer array length: N (stage 0) or S */

    void *param;       /* N elements: the parameters (0-2) or stage 3's gathered copies */
    void *param_shard; /* stage 3: S elements */
    void *grad;        /* N elements: the gradients (0-1) or staging (2-3) */
    void *grad_shard;  /* stages 2-3: S elements */
    float *master;     /* bf16 only: L floats */
    float *state[2];   /* AdamW m, v; SGD momentum in state[0] (L floats each) */
    int nstate;
    size_t map_bytes[4]; /* mapped lengths of param, param_shard, grad, grad_shard */

    int64_t step;
    int synced;    /* master weights taken from the parameters (first step) */
    unsigned mb;   /* micro-batch serial */
    int mb_last;   /* this micro-batch is the last before the step */
    int mb_open;   /* begun (micro_begin) or written to (a ready mark) */
    int mb_ended;  /* its reductions have all been started */
    int mb_first;  /* first micro-batch of the step (stages 2-3: copy, not add) */
    int next_post; /* buckets post from nb - 1 down to 0: the next one */
};

/* mmap'ed arrays: page aligned, zero filled, pages given back by zero_mem_drop. */
void *mesh_zero__map(size_t bytes);
void mesh_zero__unmap(void *p, size_t bytes);
/* Zeroes [p, p + bytes) and gives the whole pages inside it back to the kernel. */
void mesh_zero__drop(void *p, size_t bytes);
/* Bytes of [p, p + bytes) resident in memory. */
size_t mesh_zero__resident(const void *p, size_t bytes);

/* Elements of the parameter dtype (bf16 converted by the library's rule, mesh/dtype.h). */
static inline float zero_get(const struct mesh_zero *z, const void *base, size_t i)
{
    return z->dtype == MESH_BF16 ? mesh_bf16_to_float(((const uint16_t *)base)[i])
                                 : ((const float *)base)[i];
}

static inline void zero_put(const struct mesh_zero *z, void *base, size_t i, float x)
{
    if (z->dtype == MESH_BF16)
        ((uint16_t *)base)[i] = mesh_float_to_bf16(x);
    else
        ((float *)base)[i] = x;
}

static inline void *zero_at(const struct mesh_zero *z, void *base, size_t i)
{
    return (char *)base + i * z->esize;
}

/* Name lookup (after finalize, or a linear scan before). -1: unknown. */
int mesh_zero__find(const struct mesh_zero *z, const char *name);
/* The tensor named, or MESH_ERR_INVALID_ARG naming fn and the name. */
mesh_status_t mesh_zero__lookup(const struct mesh_zero *z, const char *fn, const char *name,
                                int *index);
/* Group index of a group id, -1: none. */
int mesh_zero__group(const struct mesh_zero *z, int id);

/* Layout (zero_layout.c): offsets, buckets, groups and segments for z's dp size and stage. */
mesh_status_t mesh_zero__layout(struct mesh_zero *z);
/* Norm weights of the tensors: exchanges the replicated names over mp_comm (collective). */
mesh_status_t mesh_zero__norm_weights(struct mesh_zero *z);

/* Gradients (zero_grad.c). */
mesh_status_t mesh_zero__poll(struct mesh_zero *z);
/* Ends the micro-batch: starts every reduction not started (where the stage communicates). */
mesh_status_t mesh_zero__end_micro(struct mesh_zero *z, const char *fn);
/* Waits for every reduction in flight and folds them into the shard (stages 2-3). */
mesh_status_t mesh_zero__wait_reductions(struct mesh_zero *z, const char *fn);

/* Optimizer kernels (zero_optim.c) over one segment: p master weights, g gradients in the
 * parameter dtype (multiplied by scale), wd the tensor's weight decay. */
void mesh_zero__adamw(const struct mesh_zero *z, float *p, const void *g, float scale, float *m,
                      float *v, size_t n, double wd);
void mesh_zero__sgd(const struct mesh_zero *z, float *p, const void *g, float scale, float *buf,
                    size_t n, double wd);

/* The fp32 master array behind a segment, and the gradient it reads. */
float *mesh_zero__master(const struct mesh_zero *z, const zero_seg_t *s);
const void *mesh_zero__grad_of(const struct mesh_zero *z, const zero_seg_t *s);
/* Writes the parameters of a segment from the master weights (bf16: rounds). */
void mesh_zero__write_params(struct mesh_zero *z, const zero_seg_t *s);
/* Master weights of the tensors the model initialised through mesh_zero_param (bf16, stages
 * 0-2), once: before the first step or save. */
void mesh_zero__sync_master(struct mesh_zero *z);
/* Stages 1-2: all-gathers every bucket's parameters in place (blocking, started together). */
mesh_status_t mesh_zero__allgather_params(struct mesh_zero *z, const char *fn);

/* A failed call on a communicator: fn, what, and the communicator's message. */
mesh_status_t mesh_zero__comm_fail(mesh_comm_h comm, mesh_status_t st, const char *fn,
                                   const char *what);

#endif
