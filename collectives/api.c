/* Public collective entry points: validate, shape the arguments, select, build, launch. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/api.h"
#include "collectives/request.h"
#include "libmesh/dtype.h"
#include "libmesh/log.h"
#include "libmesh/reduce.h"
#include <stdlib.h>
#include <string.h>

/* Common checks of every call; fn names the API function in messages. */
mesh_status_t mesh_api_check_comm(mesh_comm_t *comm, const char *fn, void *stream)
{
    if (comm == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if (atomic_load(&comm->aborted))
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_ABORTED, "%s: communicator was aborted", fn));
    if (comm->failed < 0)
        return mesh_comm_fail(comm, mesh_error(comm->failed,
                                               "%s: communicator failed earlier (%s); abort and "
                                               "destroy it",
                                               fn, mesh_status_string(comm->failed)));
    if (stream != NULL)
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_INVALID_ARG,
                                               "%s: stream must be NULL for host buffers", fn));
    return MESH_OK;
}

mesh_status_t mesh_api_check_dtype(mesh_comm_t *comm, const char *fn, mesh_dtype_t dtype)
{
    CHECK_ARG(mesh_dtype_valid(dtype), "%s: dtype %d is not a mesh_dtype_t", fn, (int)dtype);
    return MESH_OK;
}

/* Resolves op into a base op plus pre-multiplication scalar (NULL if none). */
mesh_status_t mesh_api_check_op(mesh_comm_t *comm, const char *fn, mesh_op_t op, mesh_dtype_t dtype,
                              mesh_op_t *base, const void **scalar)
{
    *scalar = NULL;
    if ((unsigned)op < MESH_OP_COUNT) {
        /* AVG reduces as a sum; the division happens once, at completion */
        *base = op == MESH_AVG ? MESH_SUM : op;
        return MESH_OK;
    }
    int idx = (int)op - MESH_OP_USER_BASE;
    CHECK_ARG(idx >= 0 && idx < MESH_COMM_MAX_PREMUL && comm->premul[idx].used,
              "%s: op %d is neither a mesh_op_t nor a live pre-multiplied sum of this "
              "communicator", fn, (int)op);
    CHECK_ARG(comm->premul[idx].dtype == dtype,
              "%s: op %d was created for dtype %s, the call uses %s", fn, (int)op,
              mesh_dtype_name(comm->premul[idx].dtype), mesh_dtype_name(dtype));
    *base = MESH_SUM;
    *scalar = comm->premul[idx].scalar;
    return MESH_OK;
}

mesh_status_t mesh_api_check_buf(mesh_comm_t *comm, const char *fn, const char *name,
                               const void *buf, size_t count)
{
    CHECK_ARG(buf != NULL || count == 0, "%s: %s is NULL with count %zu", fn, name, count);
    return MESH_OK;
}

mesh_status_t mesh_api_check_root(mesh_comm_t *comm, const char *fn, int root)
{
    CHECK_ARG(root >= 0 && root < comm->size, "%s: root %d is outside 0..%d", fn, root,
              comm->size - 1);
    return MESH_OK;
}

mesh_status_t mesh_api_check_count(mesh_comm_t *comm, const char *fn, size_t count, size_t dsize,
                                 size_t mult)
{
    CHECK_ARG(dsize == 0 || count <= SIZE_MAX / dsize / (mult ? mult : 1) / 2,
              "%s: count %zu is too large", fn, count);
    return MESH_OK;
}

/* Two buffers of the given byte lengths either coincide where the caller said in place, or
 * do not overlap at all. */
mesh_status_t mesh_api_check_overlap(mesh_comm_t *comm, const char *fn, const void *a, size_t alen,
                                   const void *b, size_t blen, int in_place)
{
    if (in_place || a == NULL || b == NULL || alen == 0 || blen == 0) return MESH_OK;
    const char *pa = a, *pb = b;
    CHECK_ARG(pa + alen <= pb || pb + blen <= pa,
              "%s: sbuf and rbuf overlap without being in place", fn);
    return MESH_OK;
}

struct avg_arg {
    void *buf;
    size_t count;
    mesh_dtype_t dtype;
    int n;
};

static void avg_finalize(mesh_sched_t *s, void *arg)
{
    struct avg_arg *a = arg;
    mesh_reduce_divide(a->buf, a->count, a->dtype, a->n);
}

/* The replay key of a call: every argument the selection and the build read, the per-rank
 * arrays included, in buf when it fits (API_KEY_STACK bytes) and in *heap otherwise. Returns its
 * length; 0 (no replay) when there is no memory for it. */
#define API_KEY_STACK 512
static size_t api_key(const mesh_comm_t *comm, const mesh_coll_args_t *a, int avg,
                      unsigned char *buf, unsigned char **heap)
{
    struct {
        const void *sbuf;
        void *rbuf;
        size_t count, dsize, bytes;
        int type, dtype, op, root, in_place, uniform, avg, arrays;
    } k;
    memset(&k, 0, sizeof(k)); /* padding too: keys are compared as bytes */
    k.sbuf = a->sbuf;
    k.rbuf = a->rbuf;
    k.count = a->count;
    k.dsize = a->dsize;
    k.bytes = a->bytes;
    k.type = (int)a->type;
    k.dtype = (int)a->dtype;
    k.op = (int)a->op;
    k.root = a->root;
    k.in_place = a->in_place;
    k.uniform = a->uniform;
    k.avg = avg;
    const size_t *arr[4] = {a->counts, a->displs, a->rcounts, a->rdispls};
    size_t row = sizeof(size_t) * (size_t)comm->size, len = sizeof(k);
    for (int i = 0; i < 4; i++) {
        k.arrays |= (arr[i] != NULL) << i;
        len += arr[i] != NULL ? row : 0;
    }
    unsigned char *key = buf;
    if (len > API_KEY_STACK && (key = *heap = malloc(len)) == NULL) return 0;
    memcpy(key, &k, sizeof(k));
    size_t off = sizeof(k);
    for (int i = 0; i < 4; i++) {
        if (arr[i] == NULL) continue;
        memcpy(key + off, arr[i], row);
        off += row;
    }
    return len;
}

/* Selects and builds (or replays the graph of an identical earlier call) and launches; takes
 * ownership of owned[] (freed with the request). */
mesh_status_t mesh_api_launch(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                            size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                            mesh_request_h *req)
{
    mesh_status_t st;
    mesh_sched_t *s = NULL;
    void *tmp = NULL;
    const mesh_coll_algo_t *algo = NULL;
    unsigned char keybuf[API_KEY_STACK], *heap = NULL;
    /* a pre-multiplied sum scales into a fresh buffer every call: never the same arguments */
    size_t keylen = comm->replay && scalar == NULL
                        ? api_key(comm, args, avg_buf != NULL, keybuf, &heap)
                        : 0;
    const unsigned char *key = heap ? heap : keybuf;
    if (keylen != 0) s = mesh_sched_reuse(comm, key, keylen, (const void **)&algo);
    if (s != NULL) {
        mesh_sched_set_tag(s, mesh_tag_coll(comm->coll_seq++, 0), 0);
        comm->replays++;
        goto launch;
    }
    st = mesh_sched_create(comm, args->dtype, args->op, &s);
    if (st < 0) goto err;
    mesh_sched_set_tag(s, mesh_tag_coll(comm->coll_seq++, 0), 0);
    if (scalar != NULL && in_count > 0) {
        /* pre-multiplied sum: scale our contribution once, then sum */
        tmp = malloc(in_count * args->dsize);
        if (tmp == NULL) {
            st = mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate %zu bytes for a pre-multiplied "
                            "sum", in_count * args->dsize);
            goto err;
        }
        mesh_reduce_scale(tmp, args->sbuf, in_count, args->dtype, scalar);
        args->sbuf = tmp;
        args->in_place = 0;
    }
    st = mesh_coll_select_build(comm, args, s, &algo);
    if (st < 0) goto err;
    st = mesh_sched_status(s);
    if (st < 0) goto err;
    if (avg_buf != NULL) {
        struct avg_arg *a = mesh_sched_scratch(s, sizeof(*a));
        if (a == NULL) {
            st = mesh_sched_status(s);
            goto err;
        }
        *a = (struct avg_arg){avg_buf, avg_count, args->dtype, comm->size};
        mesh_sched_on_complete(s, avg_finalize, a);
    }
    mesh_sched_set_key(s, key, keylen, algo);
launch:
    free(heap);
    heap = NULL;
    comm->last_algo = algo->name;
    return mesh_comm_fail(comm, mesh_request_submit(comm, s, owned0, tmp, req));
err:
    free(heap);
    mesh_sched_destroy(s);
    free(tmp);
    free(owned0);
    return mesh_comm_fail(comm, st);
}

mesh_status_t mesh_allreduce(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                             mesh_dtype_t dtype, mesh_op_t op, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_allreduce";
    mesh_op_t base;
    const void *scalar;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_op(comm, fn, op, dtype, &base, &scalar));
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf", sbuf, count));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf", rbuf, count));
    MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, count * ds, sbuf == rbuf));
    mesh_coll_args_t a = {.type = MESH_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                          .dtype = dtype, .op = base, .in_place = sbuf == rbuf, .uniform = 1,
                          .dsize = ds, .bytes = count * ds};
    return mesh_api_launch(comm, &a, scalar, count, op == MESH_AVG ? rbuf : NULL, count, NULL, req);
}

mesh_status_t mesh_reduce(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                          mesh_dtype_t dtype, mesh_op_t op, int root, void *stream,
                          mesh_request_h *req)
{
    static const char fn[] = "mesh_reduce";
    mesh_op_t base;
    const void *scalar;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_op(comm, fn, op, dtype, &base, &scalar));
    MESH_CHECK(mesh_api_check_root(comm, fn, root));
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf", sbuf, count));
    int is_root = comm->rank == root;
    if (is_root) {
        MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf (at the root)", rbuf, count));
        MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, count * ds, sbuf == rbuf));
    }
    mesh_coll_args_t a = {.type = MESH_COLL_REDUCE, .sbuf = sbuf, .rbuf = is_root ? rbuf : NULL,
                          .count = count, .dtype = dtype, .op = base, .root = root,
                          .in_place = sbuf == rbuf, .uniform = 1, .dsize = ds,
                          .bytes = count * ds};
    return mesh_api_launch(comm, &a, scalar, count, op == MESH_AVG && is_root ? rbuf : NULL, count, NULL,
                  req);
}

mesh_status_t mesh_broadcast(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t count,
                             mesh_dtype_t dtype, int root, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_broadcast";
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_root(comm, fn, root));
    size_t ds = mesh_dtype_size(dtype);
    MESH_CHECK(mesh_api_check_count(comm, fn, count, ds, 1));
    if (comm->rank == root) {
        MESH_CHECK(mesh_api_check_buf(comm, fn, "sbuf (at the root)", sbuf, count));
        MESH_CHECK(mesh_api_check_overlap(comm, fn, sbuf, count * ds, rbuf, count * ds, sbuf == rbuf));
    }
    MESH_CHECK(mesh_api_check_buf(comm, fn, "rbuf", rbuf, count));
    mesh_coll_args_t a = {.type = MESH_COLL_BROADCAST, .sbuf = comm->rank == root ? sbuf : rbuf,
                          .rbuf = rbuf, .count = count, .dtype = dtype, .op = MESH_SUM,
                          .root = root, .in_place = sbuf == rbuf, .uniform = 1, .dsize = ds,
                          .bytes = count * ds};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, NULL, req);
}

/* counts[] and displs[] back to back, in one allocation (freed with the request). */
mesh_status_t mesh_api_alloc_blocks(mesh_comm_t *comm, const char *fn, int arrays, size_t **out)
{
    size_t *p = malloc(sizeof(size_t) * (size_t)comm->size * (size_t)arrays);
    if (p == NULL)
        return mesh_comm_fail(comm, mesh_error(MESH_ERR_NO_MEMORY, "%s: cannot allocate counts",
                                               fn));
    *out = p;
    return MESH_OK;
}

/* Fills displacements back to back and returns the total. */
size_t mesh_api_pack_displs(int n, const size_t *counts, const size_t *given, size_t *displs,
                          size_t *extent)
{
    size_t total = 0, end = 0;
    for (int i = 0; i < n; i++) {
        displs[i] = given ? given[i] : total;
        total += counts[i];
        if (displs[i] + counts[i] > end) end = displs[i] + counts[i];
    }
    if (extent) *extent = end;
    return total;
}

/* counts[] and displs[] for the block collectives: a copy of the caller's counts (v-variants) or
 * `fill` for every rank; *uniform tells whether all counts are equal. */
static mesh_status_t blocks_from(mesh_comm_t *comm, const char *fn, const size_t *counts,
                                 size_t fill, size_t **blocks, int *uniform)
{
    MESH_CHECK(mesh_api_alloc_blocks(comm, fn, 2, blocks));
    *uniform = 1;
    for (int i = 0; i < comm->size; i++) {
        (*blocks)[i] = counts ? counts[i] : fill;
        *uniform &= (*blocks)[i] == (*blocks)[0];
    }
    return MESH_OK;
}

static mesh_status_t reduce_scatter_common(mesh_comm_t *comm, const char *fn, const void *sbuf,
                                           void *rbuf, size_t *blocks, int uniform,
                                           mesh_dtype_t dtype, mesh_op_t op, void *stream,
                                           mesh_request_h *req)
{
    mesh_op_t base;
    const void *scalar;
    size_t ds = mesh_dtype_size(dtype);
    size_t *counts = blocks, *displs = blocks + comm->size;
    size_t total = mesh_api_pack_displs(comm->size, counts, NULL, displs, NULL);
    mesh_status_t st;
    if ((st = mesh_api_check_op(comm, fn, op, dtype, &base, &scalar)) < 0 ||
        (st = mesh_api_check_count(comm, fn, total, ds, 1)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "sbuf", sbuf, total)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "rbuf", rbuf, counts[comm->rank])) < 0) {
        free(blocks);
        return st;
    }
    int in_place = sbuf != NULL && (const char *)sbuf + displs[comm->rank] * ds == (char *)rbuf;
    if ((st = mesh_api_check_overlap(comm, fn, sbuf, total * ds, rbuf, counts[comm->rank] * ds,
                            in_place)) < 0) {
        free(blocks);
        return st;
    }
    mesh_coll_args_t a = {.type = MESH_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                          .count = counts[comm->rank], .dtype = dtype, .op = base,
                          .in_place = in_place, .uniform = uniform, .dsize = ds,
                          .bytes = total * ds, .counts = counts, .displs = displs};
    return mesh_api_launch(comm, &a, scalar, total, op == MESH_AVG ? rbuf : NULL, counts[comm->rank],
                  blocks, req);
}

mesh_status_t mesh_reduce_scatter(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                  size_t recvcount, mesh_dtype_t dtype, mesh_op_t op, void *stream,
                                  mesh_request_h *req)
{
    static const char fn[] = "mesh_reduce_scatter";
    size_t *blocks = NULL;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_count(comm, fn, recvcount, mesh_dtype_size(dtype), (size_t)comm->size));
    int uniform;
    MESH_CHECK(blocks_from(comm, fn, NULL, recvcount, &blocks, &uniform));
    return reduce_scatter_common(comm, fn, sbuf, rbuf, blocks, uniform, dtype, op, stream, req);
}

mesh_status_t mesh_reduce_scatterv(mesh_comm_h comm, const void *sbuf, void *rbuf,
                                   const size_t *recvcounts, mesh_dtype_t dtype, mesh_op_t op,
                                   void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_reduce_scatterv";
    size_t *blocks = NULL;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(recvcounts != NULL, "%s: recvcounts is NULL", fn);
    int uniform;
    MESH_CHECK(blocks_from(comm, fn, recvcounts, 0, &blocks, &uniform));
    return reduce_scatter_common(comm, fn, sbuf, rbuf, blocks, uniform, dtype, op, stream, req);
}

static mesh_status_t allgather_common(mesh_comm_t *comm, const char *fn, const void *sbuf,
                                      void *rbuf, size_t *blocks, const size_t *given_displs,
                                      int uniform, mesh_dtype_t dtype, mesh_request_h *req)
{
    size_t ds = mesh_dtype_size(dtype);
    size_t *counts = blocks, *displs = blocks + comm->size, extent;
    size_t total = mesh_api_pack_displs(comm->size, counts, given_displs, displs, &extent);
    mesh_status_t st;
    size_t mine = counts[comm->rank];
    int in_place = rbuf != NULL && (const char *)rbuf + displs[comm->rank] * ds == (const char *)sbuf;
    if ((st = mesh_api_check_count(comm, fn, extent, ds, 1)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "sbuf", sbuf, mine)) < 0 ||
        (st = mesh_api_check_buf(comm, fn, "rbuf", rbuf, extent)) < 0 ||
        (st = mesh_api_check_overlap(comm, fn, sbuf, mine * ds, rbuf, extent * ds, in_place)) < 0) {
        free(blocks);
        return st;
    }
    mesh_coll_args_t a = {.type = MESH_COLL_ALLGATHER, .sbuf = sbuf, .rbuf = rbuf, .count = mine,
                          .dtype = dtype, .op = MESH_SUM, .in_place = in_place,
                          .uniform = uniform && given_displs == NULL, .dsize = ds,
                          .bytes = total * ds, .counts = counts, .displs = displs};
    return mesh_api_launch(comm, &a, NULL, 0, NULL, 0, blocks, req);
}

mesh_status_t mesh_allgather(mesh_comm_h comm, const void *sbuf, void *rbuf, size_t sendcount,
                             mesh_dtype_t dtype, void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_allgather";
    size_t *blocks = NULL;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    MESH_CHECK(mesh_api_check_count(comm, fn, sendcount, mesh_dtype_size(dtype), (size_t)comm->size));
    int uniform;
    MESH_CHECK(blocks_from(comm, fn, NULL, sendcount, &blocks, &uniform));
    return allgather_common(comm, fn, sbuf, rbuf, blocks, NULL, uniform, dtype, req);
}

mesh_status_t mesh_allgatherv(mesh_comm_h comm, const void *sbuf, void *rbuf,
                              const size_t *recvcounts, const size_t *displs, mesh_dtype_t dtype,
                              void *stream, mesh_request_h *req)
{
    static const char fn[] = "mesh_allgatherv";
    size_t *blocks = NULL;
    MESH_CHECK(mesh_api_check_comm(comm, fn, stream));
    MESH_CHECK(mesh_api_check_dtype(comm, fn, dtype));
    CHECK_ARG(recvcounts != NULL, "%s: recvcounts is NULL", fn);
    int uniform;
    MESH_CHECK(blocks_from(comm, fn, recvcounts, 0, &blocks, &uniform));
    return allgather_common(comm, fn, sbuf, rbuf, blocks, displs, uniform, dtype, req);
}

