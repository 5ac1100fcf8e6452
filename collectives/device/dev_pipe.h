/* A device call in chunks (dev_pipe.c builds it, dev_pipe_run.c runs it on the engine). */
#ifndef MESH_COLL_DEV_PIPE_H
#define MESH_COLL_DEV_PIPE_H

#include "collectives/device/dev.h"

/* Chunks in flight at most: one copied in, one on the wire, one copied out. */
#define MESH_DEV_PIPE_DEPTH 3

enum { PIPE_WAIT, PIPE_IN, PIPE_RUN, PIPE_OUT, PIPE_DONE };

struct mesh_dev_pipe_chunk {
    mesh_sched_t *s;
    size_t first, count; /* elements of the call */
    int state;
};

struct mesh_dev_pipe {
    int n;     /* chunks */
    int depth; /* slots: chunk k runs on slot k % depth */
    size_t slot_bytes, chunk_elems, dsize, count;
    int scale; /* a pre-multiplied sum: each chunk's input scaled once it arrived */
    mesh_dtype_t dtype;
    unsigned char scalar[16];
    size_t in_offset; /* of the input's chunk in a slot */
    void *ev_in[MESH_DEV_PIPE_DEPTH], *ev_out[MESH_DEV_PIPE_DEPTH];
    /* the engine's */
    int next;           /* the next chunk to copy in */
    int lo;             /* chunks before it are done */
    mesh_status_t fail; /* the first failure; the pipeline drains its copies, then ends */
    double t_first, t_last;
    mesh_dev_stage_stats_t stats;
    struct mesh_dev_pipe_chunk c[];
};

#endif
