/* Shared argument checks and the launch path of the public entry points. Each check records
 * the message on the communicator and returns MESH_ERR_INVALID_ARG naming the argument. */
#ifndef MESH_COLL_API_H
#define MESH_COLL_API_H

#include "collectives/algo.h"

#define CHECK_ARG(cond, ...)                                                                   \
    do {                                                                                      \
        if (!(cond))                                                                          \
            return mesh_comm_fail(comm, mesh_error(MESH_ERR_INVALID_ARG, __VA_ARGS__));       \
    } while (0)

mesh_status_t mesh_api_check_comm(mesh_comm_t *comm, const char *fn, void *stream);
mesh_status_t mesh_api_check_dtype(mesh_comm_t *comm, const char *fn, mesh_dtype_t dtype);
mesh_status_t mesh_api_check_op(mesh_comm_t *comm, const char *fn, mesh_op_t op,
                                mesh_dtype_t dtype, mesh_op_t *base, const void **scalar);
mesh_status_t mesh_api_check_buf(mesh_comm_t *comm, const char *fn, const char *name,
                                 const void *buf, size_t count);
mesh_status_t mesh_api_check_root(mesh_comm_t *comm, const char *fn, int root);
mesh_status_t mesh_api_check_count(mesh_comm_t *comm, const char *fn, size_t count, size_t dsize,
                                   size_t mult);
mesh_status_t mesh_api_check_overlap(mesh_comm_t *comm, const char *fn, const void *a,
                                     size_t alen, const void *b, size_t blen, int in_place);
/* size * arrays size_t values (counts, displs, ...), freed with the request. */
mesh_status_t mesh_api_alloc_blocks(mesh_comm_t *comm, const char *fn, int arrays, size_t **out);
/* The opening of the entry points with a block per rank (all-gather, reduce-scatter and their
 * v-variants): checks the communicator and the dtype, then fills counts[] and displs[] (2 * size
 * values, freed with the request) with a copy of the caller's recvcounts (v: not NULL) or `fill`
 * for every rank (fill * size elements must be addressable); *uniform tells whether all counts
 * are equal. */
mesh_status_t mesh_api_open_blocks(mesh_comm_t *comm, const char *fn, void *stream,
                                   mesh_dtype_t dtype, int v, const size_t *counts, size_t fill,
                                   size_t **blocks, int *uniform);
/* Fills displacements (given, or back to back); returns the total count and the extent. */
size_t mesh_api_pack_displs(int n, const size_t *counts, const size_t *given, size_t *displs,
                            size_t *extent);
/* Pre-multiplies (scalar != NULL) in_count input elements, selects, builds and launches; divides
 * avg_count elements of avg_buf by the size at completion (MESH_AVG); owned0 is freed with the
 * request (or on error). */
mesh_status_t mesh_api_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                              size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                              mesh_request_h *req);

#endif
