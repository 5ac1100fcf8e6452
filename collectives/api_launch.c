/* The launch path of every collective: the replay key, selection and build, MESH_AVG's division,
 * and submission as a request. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/api.h"
#include "collectives/request.h"
#include "collectives/device/dev.h"
#include "collectives/signature.h"
#include "libmesh/log.h"
#include "libmesh/reduce.h"
#include <stdlib.h>
#include <string.h>

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
        int type, dtype, op, opcode, root, in_place, uniform, avg, arrays, device;
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
    /* the caller's operation is in the signature a replay keeps: MESH_AVG runs as a sum, and
     * divides only where the result lands (a reduce's root) */
    k.opcode = a->opcode;
    k.root = a->root;
    k.in_place = a->in_place;
    k.uniform = a->uniform;
    k.avg = avg;
    k.device = a->mem != NULL; /* device copies between IPC mappings (staged calls: host) */
    const size_t *arr[4] = {a->counts, a->displs, a->rcounts, a->rdispls};
    size_t row = sizeof(size_t) * (size_t)comm->size, len = sizeof(k);
    for (int i = 0; i < 4; i++) {
        k.arrays |= (arr[i] != NULL) << i;
        len += arr[i] != NULL ? row : 0;
    }
    unsigned char *key = buf;
    if (len > API_KEY_STACK && (key = *heap = malloc(len)) == NULL)
        return 0;
    memcpy(key, &k, sizeof(k));
    size_t off = sizeof(k);
    for (int i = 0; i < 4; i++) {
        if (arr[i] == NULL)
            continue;
        memcpy(key + off, arr[i], row);
        off += row;
    }
    return len;
}

/* Selection and build of a created schedule, and MESH_AVG's division at its completion. */
static mesh_status_t api_build(mesh_comm_t *comm, const mesh_coll_args_t *args, void *avg_buf,
                               size_t avg_count, mesh_sched_t *s, const mesh_coll_algo_t **algo)
{
    mesh_status_t st = args->mem != NULL ? mesh_dev_ipc_build(comm, args, avg_buf != NULL, s, algo)
                                         : mesh_coll_select_build(comm, args, s, algo);
    if (st < 0)
        return st;
    MESH_CHECK(mesh_sched_build_status(s));
    if (avg_buf != NULL && args->mem == NULL) {
        struct avg_arg *a = mesh_sched_scratch(s, sizeof(*a));
        if (a == NULL)
            return mesh_sched_build_status(s);
        *a = (struct avg_arg){avg_buf, avg_count, args->dtype, comm->size};
        mesh_sched_on_complete(s, avg_finalize, a);
    }
    return MESH_OK;
}

mesh_status_t mesh_api_build_locked(mesh_comm_t *comm, mesh_coll_args_t *args, void *avg_buf,
                                    size_t avg_count, int look, mesh_sched_t **out)
{
    int root = args->type == MESH_COLL_REDUCE || args->type == MESH_COLL_BROADCAST ||
                       args->type == MESH_COLL_GATHER || args->type == MESH_COLL_SCATTER
                   ? args->root
                   : -1;
    uint32_t seq = comm->coll_seq++;
    uint32_t sig = mesh_coll_sig(args, args->opcode, comm->size);
    const mesh_coll_algo_t *algo = NULL;
    mesh_sched_t *s = NULL;
    MESH_CHECK(mesh_comm_start_call(comm, &(mesh_health_call_t){seq, sig, args->count, root},
                                    look && !mesh_group_active()));
    MESH_CHECK(mesh_sched_create(comm, args->dtype, args->op, &s));
    mesh_sched_set_tag(s, mesh_tag_coll(seq, sig));
    mesh_sched_set_call(s, seq, args->count, root);
    mesh_status_t st = api_build(comm, args, avg_buf, avg_count, s, &algo);
    if (st < 0) {
        mesh_sched_destroy(s);
        return st;
    }
    comm->last_algo = algo->name;
    *out = s;
    return MESH_OK;
}

/* Selects and builds (or replays the graph of an identical earlier call) and launches; takes
 * ownership of owned[] (freed with the request) and of dev. */
mesh_status_t mesh_api_launch_on(mesh_comm_t *comm, mesh_coll_args_t *args, const void *scalar,
                                 size_t in_count, void *avg_buf, size_t avg_count, void *owned0,
                                 struct mesh_dev_op *dev, mesh_request_h *req)
{
    mesh_status_t st;
    mesh_sched_t *s = NULL;
    void *tmp = NULL;
    const mesh_coll_algo_t *algo = NULL;
    unsigned char keybuf[API_KEY_STACK], *heap = NULL;
    /* a pre-multiplied sum scales into a fresh buffer every call: never the same arguments; a
     * device call across nodes takes a pinned buffer for its rail phase per call */
    int fresh = scalar != NULL || (args->mem != NULL && comm->nnodes > 1);
    size_t keylen =
        comm->replay && !fresh ? api_key(comm, args, avg_buf != NULL, keybuf, &heap) : 0;
    const unsigned char *key = heap ? heap : keybuf;
    uint32_t sig;
    int root = args->type == MESH_COLL_REDUCE || args->type == MESH_COLL_BROADCAST ||
                       args->type == MESH_COLL_GATHER || args->type == MESH_COLL_SCATTER
                   ? args->root
                   : -1;
    mesh_comm_lock(comm); /* released by mesh_request_submit */
    uint32_t seq = comm->coll_seq++;
    if (keylen != 0)
        s = mesh_sched_reuse(comm, key, keylen, (const void **)&algo);
    if (s != NULL) {
        /* a replayed graph keeps the signature of the identical call that built it */
        sig = mesh_sched_replay_call(s, seq, args->count, root);
        st = mesh_comm_start_call(comm, &(mesh_health_call_t){seq, sig, args->count, root},
                                  !mesh_group_active());
        if (st < 0)
            goto err;
        comm->replays++;
        goto launch;
    }
    sig = mesh_coll_sig(args, args->opcode, comm->size);
    st = mesh_comm_start_call(comm, &(mesh_health_call_t){seq, sig, args->count, root},
                              !mesh_group_active());
    if (st < 0)
        goto err;
    st = mesh_sched_create(comm, args->dtype, args->op, &s);
    if (st < 0)
        goto err;
    mesh_sched_set_tag(s, mesh_tag_coll(seq, sig));
    mesh_sched_set_call(s, seq, args->count, root);
    if (scalar != NULL && in_count > 0 && dev != NULL) {
        /* staged device input: the engine scales it once it arrived, before the schedule */
        mesh_dev_op_scale(dev, (void *)args->sbuf, in_count, args->dtype, scalar);
    } else if (scalar != NULL && in_count > 0) {
        /* pre-multiplied sum: scale our contribution once, then sum */
        tmp = malloc(in_count * args->dsize);
        if (tmp == NULL) {
            st = mesh_error(MESH_ERR_NO_MEMORY,
                            "cannot allocate %zu bytes for a pre-multiplied "
                            "sum",
                            in_count * args->dsize);
            goto err;
        }
        mesh_reduce_scale(tmp, args->sbuf, in_count, args->dtype, scalar);
        args->sbuf = tmp;
        args->in_place = 0;
    }
    st = api_build(comm, args, avg_buf, avg_count, s, &algo);
    if (st < 0)
        goto err;
    mesh_sched_set_key(s, key, keylen, algo);
launch:
    free(heap);
    heap = NULL;
    comm->last_algo = algo->name;
    st = dev != NULL ? mesh_request_submit_dev(comm, s, owned0, tmp, dev, req)
                     : mesh_request_submit(comm, s, owned0, tmp, req);
    return st < 0 ? mesh_comm_fail(comm, st) : st;
err:
    free(heap);
    mesh_sched_destroy(s);
    mesh_comm_unlock(comm);
    free(tmp);
    free(owned0);
    mesh_dev_op_free(dev);
    return mesh_comm_fail(comm, st);
}
