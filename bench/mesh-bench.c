/*
 * mesh-bench: collective bandwidth and latency in the conventions of nccl-tests, on mesh's
 * public API. Start it under meshrun (or torchrun, or mpirun with PMIx); alone it runs as a
 * single rank. See `mesh-bench --help` and bench/bench.h.
 */
#include "config.h"
#include "bench/bench.h"
#include "mesh.h"

#include <stdlib.h>
#include <string.h>

_Static_assert((int)BENCH_E5M2 == (int)MESH_FP8_E5M2 && (int)BENCH_FP32 == (int)MESH_FP32 &&
                   (int)BENCH_DTYPE_COUNT == (int)MESH_DTYPE_COUNT,
               "bench dtypes follow mesh_dtype_t");
_Static_assert((int)BENCH_AVG == (int)MESH_AVG && (int)BENCH_MIN == (int)MESH_MIN,
               "bench redops follow mesh_op_t");

#define BENCH_TL_NAME 8 /* bytes per peer in the gathered route table */

static mesh_comm_h bench_comm;
static bench_backend_t mesh_backend;
static char *bench_routes; /* [size][size][BENCH_TL_NAME]: transport of each rank to each peer */
static const char *bench_tls[9]; /* --bytes: the transports of the route table */

static int mesh_supports(bench_op_t op, bench_dtype_t d, bench_redop_t r, int in_place)
{
    return !(in_place && op == BENCH_SENDRECV);
}

static mesh_status_t mesh_sendrecv(const bench_call_t *c)
{
    int rank = mesh_backend.rank, size = mesh_backend.size;
    mesh_dtype_t t = (mesh_dtype_t)c->dtype;
    mesh_status_t st = mesh_group_start();
    if (st != MESH_OK) return st;
    st = mesh_send(bench_comm, c->sbuf, c->count, t, (rank + 1) % size, NULL, NULL);
    if (st == MESH_OK)
        st = mesh_recv(bench_comm, c->rbuf, c->count, t, (rank + size - 1) % size, NULL, NULL);
    mesh_status_t end = mesh_group_end();
    return st != MESH_OK ? st : end;
}

static int mesh_run(const bench_call_t *c)
{
    mesh_comm_h comm = bench_comm;
    mesh_dtype_t t = (mesh_dtype_t)c->dtype;
    mesh_op_t op = (mesh_op_t)c->redop;
    mesh_status_t st;

    switch (c->op) {
    case BENCH_ALLREDUCE:
        st = mesh_allreduce(comm, c->sbuf, c->rbuf, c->count, t, op, NULL, NULL);
        break;
    case BENCH_REDUCE:
        st = mesh_reduce(comm, c->sbuf, c->rbuf, c->count, t, op, c->root, NULL, NULL);
        break;
    case BENCH_BROADCAST:
        st = mesh_broadcast(comm, c->sbuf, c->rbuf, c->count, t, c->root, NULL, NULL);
        break;
    case BENCH_REDUCE_SCATTER:
        st = mesh_reduce_scatter(comm, c->sbuf, c->rbuf, c->count, t, op, NULL, NULL);
        break;
    case BENCH_ALLGATHER:
        st = mesh_allgather(comm, c->sbuf, c->rbuf, c->count, t, NULL, NULL);
        break;
    case BENCH_ALLTOALL:
        st = mesh_alltoall(comm, c->sbuf, c->rbuf, c->count, t, NULL, NULL);
        break;
    case BENCH_GATHER:
        st = mesh_gather(comm, c->sbuf, c->rbuf, c->count, t, c->root, NULL, NULL);
        break;
    case BENCH_SCATTER:
        st = mesh_scatter(comm, c->sbuf, c->rbuf, c->count, t, c->root, NULL, NULL);
        break;
    case BENCH_SENDRECV:
        st = mesh_sendrecv(c);
        break;
    default:
        st = MESH_ERR_INVALID_ARG;
        break;
    }
    if (st == MESH_OK) return 0;
    fprintf(stderr, "error: rank %d: %s of %zu %s elements (%s) failed: %s: %s\n",
            mesh_backend.rank, bench_op_name(c->op), c->count, bench_dtype_name(c->dtype),
            c->in_place ? "in place" : "out of place", mesh_status_string(st),
            mesh_comm_last_error(comm));
    return -1;
}

static const char *mesh_algo(bench_op_t op)
{
    if (op == BENCH_SENDRECV) return "p2p";
    const char *a = mesh_comm_last_algorithm(bench_comm);
    return a && *a ? a : "?";
}

static int mesh_fail(const char *what, mesh_status_t st)
{
    fprintf(stderr, "error: rank %d: %s failed: %s: %s\n", mesh_backend.rank, what,
            mesh_status_string(st), mesh_comm_last_error(bench_comm));
    return -1;
}

static int mesh_barrier_(void)
{
    mesh_status_t st = mesh_barrier(bench_comm, NULL);
    return st == MESH_OK ? 0 : mesh_fail("barrier", st);
}

static int mesh_max_double(double *v)
{
    mesh_status_t st = mesh_allreduce(bench_comm, v, v, 1, MESH_FP64, MESH_MAX, NULL, NULL);
    return st == MESH_OK ? 0 : mesh_fail("allreduce of the times", st);
}

static int mesh_sum_u64(uint64_t *v)
{
    mesh_status_t st = mesh_allreduce(bench_comm, v, v, 1, MESH_UINT64, MESH_SUM, NULL, NULL);
    return st == MESH_OK ? 0 : mesh_fail("allreduce of the wrong counts", st);
}

static void mesh_abort_(void) { mesh_comm_abort(bench_comm); }

/* Every rank's transport to every peer, gathered once before the first table. */
static int mesh_gather_routes(void)
{
    int size = mesh_backend.size;
    size_t row = (size_t)size * BENCH_TL_NAME;
    char *mine = calloc(1, row);
    bench_routes = calloc((size_t)size, row);
    if (!mine || !bench_routes) {
        free(mine);
        fprintf(stderr, "error: out of memory for the route table\n");
        return -1;
    }
    for (int p = 0; p < size; p++) {
        const char *tl = mesh_comm_peer_transport(bench_comm, p);
        snprintf(mine + (size_t)p * BENCH_TL_NAME, BENCH_TL_NAME, "%s", tl ? tl : "?");
    }
    mesh_status_t st = mesh_allgather(bench_comm, mine, bench_routes, row, MESH_UINT8, NULL, NULL);
    free(mine);
    return st == MESH_OK ? 0 : mesh_fail("allgather of the route table", st);
}

static void mesh_describe(FILE *out)
{
    int size = mesh_backend.size;
    const char *tune = getenv("MESH_TUNE");
    fprintf(out, "# mesh-bench: mesh %d.%d.%d, %d rank%s on %d node%s\n", MESH_VERSION_MAJOR,
            MESH_VERSION_MINOR, MESH_VERSION_PATCH, size, size == 1 ? "" : "s",
            mesh_backend.nnodes, mesh_backend.nnodes == 1 ? "" : "s");
    if (tune && *tune) fprintf(out, "# MESH_TUNE=%s\n", tune);
    for (int r = 0; r < size && r < 64; r++) {
        fprintf(out, "#   rank %2d: node %d, local rank %d of %d; peers:", r,
                mesh_comm_node(bench_comm, r), mesh_comm_local_rank(bench_comm, r),
                mesh_comm_local_size(bench_comm, mesh_comm_node(bench_comm, r)));
        for (int p = 0; p < size && p < 16; p++)
            fprintf(out, " %d:%s", p, bench_routes + ((size_t)r * size + p) * BENCH_TL_NAME);
        fprintf(out, "%s\n", size > 16 ? " ..." : "");
    }
    if (size > 64) fprintf(out, "#   ... %d more ranks\n", size - 64);
}

static int mesh_tl_sent(int i, uint64_t *bytes)
{
    mesh_status_t st = mesh_comm_tl_bytes(bench_comm, bench_tls[i], bytes, NULL);
    return st == MESH_OK ? 0 : mesh_fail("mesh_comm_tl_bytes", st);
}

/* Every transport some rank uses to reach a peer, in order of first use, for --bytes. */
static void mesh_list_tls(void)
{
    int size = mesh_backend.size, n = 0;
    for (size_t e = 0; e < (size_t)size * (size_t)size && n < 8; e++) {
        const char *tl = bench_routes + e * BENCH_TL_NAME;
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= strcmp(bench_tls[i], tl) == 0;
        if (!seen) bench_tls[n++] = tl;
    }
    bench_tls[n] = NULL;
}

static mesh_status_t mesh_init(void)
{
    /* no launcher: a single rank on a fresh id */
    if (!getenv("MESH_RANK") && !getenv("RANK") && !getenv("PMIX_RANK")) {
        mesh_unique_id_t id;
        mesh_status_t st = mesh_unique_id(&id);
        return st != MESH_OK ? st : mesh_comm_init_rank(&bench_comm, 1, &id, 0);
    }
    return mesh_comm_init_env(&bench_comm);
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    char tune[1024];
    int rc = bench_parse(argc, argv, "mesh-bench", &o);
    if (rc) return rc == 1 ? 0 : 2;
    if (o.memcpy_mode) return bench_memcpy(&o);

    /* -a goes through the same override string users set, read when the library starts */
    bench_tune_string(&o, tune, sizeof(tune));
    if (tune[0]) setenv("MESH_TUNE", tune, 1);

    mesh_status_t st = mesh_init();
    if (st != MESH_OK) {
        fprintf(stderr, "error: cannot create the communicator: %s: %s\n",
                mesh_status_string(st), mesh_comm_last_error(NULL));
        return 1;
    }
    mesh_backend = (bench_backend_t){.name = "mesh",
                                     .rank = mesh_comm_rank(bench_comm),
                                     .size = mesh_comm_size(bench_comm),
                                     .nnodes = mesh_comm_node_count(bench_comm),
                                     .supports = mesh_supports,
                                     .run = mesh_run,
                                     .algo = mesh_algo,
                                     .barrier = mesh_barrier_,
                                     .max_double = mesh_max_double,
                                     .sum_u64 = mesh_sum_u64,
                                     .abort = mesh_abort_,
                                     .describe = mesh_describe};
    if (mesh_gather_routes()) {
        mesh_comm_abort(bench_comm);
        mesh_comm_destroy(bench_comm);
        return 1;
    }
    mesh_list_tls();
    mesh_backend.tls = bench_tls;
    mesh_backend.tl_sent = mesh_tl_sent;
    rc = bench_main(&o, &mesh_backend);
    mesh_comm_destroy(bench_comm);
    free(bench_routes);
    return rc;
}
