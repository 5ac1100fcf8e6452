/*
 * Checkpoint format of the ZeRO layer, in a directory:
 *   index-mpR.txt        written by dp rank 0 of model-parallel rank R: a text file of
 *                        "key value" lines (format, stage, dp, mp, dtype, optimizer, step,
 *                        numel, padded, shard), the buckets ("b START NUMEL", padded, in layout
 *                        order) and the tensors ("t NAME OFFSET NUMEL GROUP FLAGS NDIM DIMS...",
 *                        OFFSET global in the saved layout), then "end".
 *   shard-mpR-dpr.bin    a 64-byte header (zero_ckpt_header_t, native byte order, checked by
 *                        its magic), then the master weights and each optimizer state array of
 *                        dp rank r's shard: shard fp32 values each, the rank's slice of every
 *                        bucket in layout order (slice = bucket numel / dp).
 * Element g of the saved flat buffer, in bucket b, sits in file r = (g - start_b) / slice_b at
 * position shard_off_b + (g - start_b) % slice_b, whatever stage wrote it.
 */
#ifndef MESH_PAR_ZERO_CKPT_H
#define MESH_PAR_ZERO_CKPT_H

#include "zero_impl.h"

#define ZERO_CKPT_MAGIC   "MESHZRO1"
#define ZERO_CKPT_VERSION 1
#define ZERO_INDEX_FORMAT "mesh-zero-index"

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint32_t dp_rank, dp_size;
    uint32_t mp_rank, mp_size;
    uint32_t stage, nstate;
    int64_t step;
    uint64_t shard_numel;
    uint32_t optimizer, reserved;
} zero_ckpt_header_t;

/* A parsed index. */
typedef struct {
    int stage, dp, mp_rank, mp_size, nstate, optimizer;
    int64_t step;
    size_t numel, padded, shard;
    int nb, nt;
    size_t *bstart, *bnumel, *bshard; /* per bucket: start, numel, offset of a slice in a shard */
    zero_tensor_t *t;                 /* name, offset, numel, group, flags, ndim, shape */
} zero_index_t;

/* Reads and checks path; errors name the file and line. */
mesh_status_t mesh_zero__index_read(const char *path, zero_index_t *ix);
void mesh_zero__index_free(zero_index_t *ix);
mesh_status_t mesh_zero__index_write(const struct mesh_zero *z, const char *path);

/* "dir/index-mpR.txt", "dir/shard-mpR-dpr.bin"; 0 when they do not fit. */
int mesh_zero__ckpt_path(char *buf, size_t len, const char *dir, int mp_rank, int dp_rank);

/* Collective over dp and mp: every rank returns MESH_OK if st is MESH_OK everywhere, else the
 * status and message of the lowest failing rank. */
mesh_status_t mesh_zero__agree(struct mesh_zero *z, const char *fn, mesh_status_t st);

/* Fails unless z is between steps: no micro-batch begun, nothing in flight, nothing gathered. */
mesh_status_t mesh_zero__check_idle(const struct mesh_zero *z, const char *fn);

#endif
