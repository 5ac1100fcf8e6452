/*
 * mesh-bench: collective bandwidth and latency in the conventions of nccl-tests, on mesh's
 * public API. Start it under meshrun (or torchrun, or mpirun with PMIx); alone it runs as a
 * single rank. See `mesh-bench --help` and bench/bench.h.
 */
#include "config.h"
#include "bench/bench.h"
#include "bench/bench_dev.h"
#include "bench/bench_ep.h"
#include "mesh.h"

#include <stdlib.h>
#include <string.h>

_Static_assert((int)BENCH_E5M2 == (int)MESH_FP8_E5M2 && (int)BENCH_FP32 == (int)MESH_FP32 &&
                   (int)BENCH_DTYPE_COUNT == (int)MESH_DTYPE_COUNT,
               "bench dtypes follow mesh_dtype_t");
_Static_assert((int)BENCH_AVG == (int)MESH_AVG && (int)BENCH_MIN == (int)MESH_MIN,
               "bench redops follow mesh_op_t");
_Static_assert((int)BENCH_AXIS_TP == (int)MESH_AXIS_TP && (int)BENCH_AXIS_PP == (int)MESH_AXIS_PP &&
                   (int)BENCH_AXIS_COUNT == (int)MESH_AXIS_COUNT,
               "bench axes follow mesh_axis_t");

#define BENCH_TL_NAME 8 /* bytes per peer in the gathered route table */

#define BENCH_AXES_MAX 16

static mesh_comm_h bench_comm; /* the whole communicator: barriers, times, wrong counts */
static mesh_comm_h bench_cur;  /* the communicator being measured: bench_comm or an axis */
static bench_backend_t mesh_backend;
static char *bench_routes; /* [size][size][BENCH_TL_NAME]: transport of each rank to each peer */
static const char *bench_tls[9]; /* --bytes: the transports of the route table */

static mesh_grid_h bench_grid;
static int bench_naxes;
static struct {
    char name[32];
    mesh_comm_h comm;
} bench_axis_comms[BENCH_AXES_MAX];
static int *bench_coords;    /* [size][BENCH_AXIS_COUNT + 1]: each rank's coordinates, grid rank */
static char bench_mesh[256]; /* the grid for titles */

static const bench_opts_t *bench_o;
static bench_device_t bench_device; /* -m device, cuda or emu */

static int mesh_supports(bench_op_t op, bench_dtype_t d, bench_redop_t r, int in_place)
{
    if (op == BENCH_DISPATCH_COMBINE) /* the expert layer's buffers are host memory */
        return !in_place && !mesh_backend.dev && (d == BENCH_FP32 || d == BENCH_BF16);
    return !(in_place && op == BENCH_SENDRECV);
}

/* A ring over the measured communicator: along pp each stage sends to the next and receives
 * from the previous, the last stage sending to the first. */
static mesh_status_t ring_sendrecv(const bench_call_t *c)
{
    int rank = mesh_comm_rank(bench_cur), size = mesh_comm_size(bench_cur);
    return mesh_sendrecv(bench_cur, c->sbuf, c->count, (rank + 1) % size, c->rbuf, c->count,
                         (rank + size - 1) % size, (mesh_dtype_t)c->dtype, 0, bench_dev_stream(),
                         NULL);
}

static int mesh_run(const bench_call_t *c)
{
    mesh_comm_h comm = bench_cur;
    mesh_dtype_t t = (mesh_dtype_t)c->dtype;
    mesh_op_t op = (mesh_op_t)c->redop;
    void *stream = bench_dev_stream(); /* NULL for host buffers */
    mesh_status_t st;

    switch (c->op) {
    case BENCH_ALLREDUCE:
        st = mesh_allreduce(comm, c->sbuf, c->rbuf, c->count, t, op, stream, NULL);
        break;
    case BENCH_REDUCE:
        st = mesh_reduce(comm, c->sbuf, c->rbuf, c->count, t, op, c->root, stream, NULL);
        break;
    case BENCH_BROADCAST:
        st = mesh_broadcast(comm, c->sbuf, c->rbuf, c->count, t, c->root, stream, NULL);
        break;
    case BENCH_REDUCE_SCATTER:
        st = mesh_reduce_scatter(comm, c->sbuf, c->rbuf, c->count, t, op, stream, NULL);
        break;
    case BENCH_ALLGATHER:
        st = mesh_allgather(comm, c->sbuf, c->rbuf, c->count, t, stream, NULL);
        break;
    case BENCH_ALLTOALL:
        st = mesh_alltoall(comm, c->sbuf, c->rbuf, c->count, t, stream, NULL);
        break;
    case BENCH_GATHER:
        st = mesh_gather(comm, c->sbuf, c->rbuf, c->count, t, c->root, stream, NULL);
        break;
    case BENCH_SCATTER:
        st = mesh_scatter(comm, c->sbuf, c->rbuf, c->count, t, c->root, stream, NULL);
        break;
    case BENCH_SENDRECV:
        st = ring_sendrecv(c);
        break;
    case BENCH_DISPATCH_COMBINE: {
        mesh_ep_path_t path = MESH_EP_PATH_AUTO;
        if (bench_o->ep_path)
            bench_ep_path(bench_o->ep_path, &path);
        st = bench_ep_run(comm, c->sbuf, c->rbuf, c->count, t, bench_o->skew, path);
        break;
    }
    default:
        st = MESH_ERR_INVALID_ARG;
        break;
    }
    if (st == MESH_OK)
        return 0;
    fprintf(stderr, "error: rank %d: %s of %zu %s elements (%s) failed: %s: %s\n",
            mesh_backend.rank, bench_op_name(c->op), c->count, bench_dtype_name(c->dtype),
            c->in_place ? "in place" : "out of place", mesh_status_string(st),
            mesh_comm_last_error(comm));
    return -1;
}

/* Axis i becomes the communicator of mesh_run. */
static int mesh_axis(int i, bench_axis_t *a)
{
    mesh_comm_h comm = bench_axis_comms[i].comm;
    bench_cur = comm;
    *a = (bench_axis_t){.rank = mesh_comm_rank(comm),
                        .size = mesh_comm_size(comm),
                        .nnodes = mesh_comm_node_count(comm)};
    a->groups = mesh_backend.size / a->size;
    snprintf(a->name, sizeof(a->name), "%s", bench_axis_comms[i].name);
    return 0;
}

static const char *mesh_algo(bench_op_t op)
{
    if (op == BENCH_SENDRECV)
        return "p2p";
    if (op == BENCH_DISPATCH_COMBINE)
        return bench_ep_algo();
    const char *a = mesh_comm_last_algorithm(bench_cur);
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

static int bench_aborted;

static void mesh_abort_(void)
{
    bench_aborted = 1;
    mesh_comm_abort(bench_comm);
}

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
            MESH_VERSION_MINOR, MESH_VERSION_PATCH, size, size == 1 ? "" : "s", mesh_backend.nnodes,
            mesh_backend.nnodes == 1 ? "" : "s");
    if (tune && *tune)
        fprintf(out, "# MESH_TUNE=%s\n", tune);
    if (mesh_backend.dev)
        fprintf(out,
                "# device buffers of the %s table, on a stream; rank 0's device %d is shared "
                "by %d of the %d ranks\n",
                bench_device.table, bench_device.device, bench_device.sharing, size);
    for (int r = 0; r < size && r < 64; r++) {
        fprintf(out, "#   rank %2d: node %d, local rank %d of %d; peers:", r,
                mesh_comm_node(bench_comm, r), mesh_comm_local_rank(bench_comm, r),
                mesh_comm_local_size(bench_comm, mesh_comm_node(bench_comm, r)));
        for (int p = 0; p < size && p < 16; p++)
            fprintf(out, " %d:%s", p, bench_routes + ((size_t)r * size + p) * BENCH_TL_NAME);
        fprintf(out, "%s\n", size > 16 ? " ..." : "");
    }
    if (size > 64)
        fprintf(out, "#   ... %d more ranks\n", size - 64);
    if (!bench_grid)
        return;
    fprintf(out, "# mesh %s\n", bench_mesh);
    for (int r = 0; r < size && r < 64; r++) {
        const int *c = bench_coords + (size_t)r * (BENCH_AXIS_COUNT + 1);
        fprintf(out, "#   rank %2d: grid rank %2d, node %d:", r, c[BENCH_AXIS_COUNT],
                mesh_comm_node(bench_comm, r));
        for (int x = 0; x < BENCH_AXIS_COUNT; x++)
            fprintf(out, " %s %d", bench_axis_name((bench_axis_id_t)x), c[x]);
        fprintf(out, "\n");
    }
}

/* The communicators of --axes (default: every axis longer than 1); 0, or 2 on a bad name. */
static int mesh_axes_pick(const bench_opts_t *o)
{
    char buf[256];
    mesh_status_t st;
    if (!o->axes || strcmp(o->axes, "all") == 0) {
        for (int x = 0; x < BENCH_AXIS_COUNT; x++)
            if (o->mesh_size[x] > 1)
                snprintf(bench_axis_comms[bench_naxes++].name, sizeof(bench_axis_comms[0].name),
                         "%s", bench_axis_name((bench_axis_id_t)x));
        if (!bench_naxes)
            snprintf(bench_axis_comms[bench_naxes++].name, 32, "tp"); /* one rank */
    } else {
        snprintf(buf, sizeof(buf), "%s", o->axes);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            if (bench_naxes == BENCH_AXES_MAX || strlen(tok) >= sizeof(bench_axis_comms[0].name)) {
                if (!mesh_backend.rank)
                    fprintf(stderr, "error: --axes: too many axes or too long a name\n");
                return 2;
            }
            snprintf(bench_axis_comms[bench_naxes++].name, sizeof(bench_axis_comms[0].name), "%s",
                     tok);
        }
    }
    for (int i = 0; i < bench_naxes; i++) {
        st = mesh_grid_comm(bench_grid, bench_axis_comms[i].name, &bench_axis_comms[i].comm);
        if (st == MESH_OK)
            continue;
        if (!mesh_backend.rank)
            fprintf(stderr, "error: --axes: no communicator for '%s': %s: %s\n",
                    bench_axis_comms[i].name, mesh_status_string(st), mesh_comm_last_error(NULL));
        return 2;
    }
    return 0;
}

/* Builds the grid of --mesh over the whole communicator, the axis communicators and the table
 * of coordinates; 0, 1 when the grid failed, 2 on a usage error. */
static int mesh_grid_setup(const bench_opts_t *o)
{
    mesh_grid_params_t p = {.field_mask = MESH_GRID_PARAM_FIELD_SIZES};
    int prod = 1, rank = mesh_backend.rank, size = mesh_backend.size, rc;
    size_t used = 0;

    for (int x = 0; x < BENCH_AXIS_COUNT; x++) {
        p.size[x] = o->mesh_size[x];
        prod *= o->mesh_size[x] ? o->mesh_size[x] : 1;
        if (o->mesh_size[x])
            used += (size_t)snprintf(bench_mesh + used, sizeof(bench_mesh) - used, "%s%s=%d",
                                     used ? "," : "", bench_axis_name((bench_axis_id_t)x),
                                     o->mesh_size[x]);
    }
    snprintf(bench_mesh + used, sizeof(bench_mesh) - used, ", order %s%s",
             o->order ? o->order : "tp-cp-ep-dp-pp", o->reorder ? ", reordered by node" : "");
    if (prod != size) {
        if (!rank)
            fprintf(stderr, "error: --mesh %s: the axes multiply to %d, not to the %d ranks\n",
                    o->mesh, prod, size);
        return 2;
    }
    if (o->order) {
        p.field_mask |= MESH_GRID_PARAM_FIELD_ORDER;
        p.order = o->order;
    }
    if (o->reorder) {
        p.field_mask |= MESH_GRID_PARAM_FIELD_FLAGS;
        p.flags = MESH_GRID_REORDER;
    }
    mesh_status_t st = mesh_grid_create(bench_comm, &p, &bench_grid);
    if (st != MESH_OK) {
        /* a layout the node map refuses is the same verdict on every rank: said once */
        if (rank == 0 || st != MESH_ERR_INVALID_ARG)
            fprintf(stderr, "error: rank %d: cannot build the mesh %s: %s: %s\n", rank, bench_mesh,
                    mesh_status_string(st), mesh_comm_last_error(NULL));
        return st == MESH_ERR_INVALID_ARG ? 2 : 1;
    }
    if ((rc = mesh_axes_pick(o)))
        return rc;

    int mine[BENCH_AXIS_COUNT + 1];
    for (int x = 0; x < BENCH_AXIS_COUNT; x++)
        mine[x] = mesh_grid_coord(bench_grid, bench_axis_name((bench_axis_id_t)x));
    mine[BENCH_AXIS_COUNT] = mesh_grid_rank(bench_grid);
    bench_coords = calloc((size_t)size, sizeof(mine));
    if (!bench_coords) {
        fprintf(stderr, "error: out of memory for the grid coordinates\n");
        return 1;
    }
    st = mesh_allgather(bench_comm, mine, bench_coords, BENCH_AXIS_COUNT + 1, MESH_INT32, NULL,
                        NULL);
    if (st != MESH_OK) {
        mesh_fail("allgather of the grid coordinates", st);
        return 1;
    }
    return 0;
}

static int mesh_tl_sent(int i, uint64_t *bytes)
{
    mesh_status_t st = mesh_comm_tl_bytes(bench_cur, bench_tls[i], bytes, NULL);
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
        if (!seen)
            bench_tls[n++] = tl;
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
    if (rc)
        return rc == 1 ? 0 : 2;
    if (o.memcpy_mode)
        return bench_memcpy(&o, mesh_time_now);
    bench_o = &o;

    /* -a goes through the same override string users set, read when the library starts */
    bench_tune_string(&o, tune, sizeof(tune));
    if (tune[0])
        setenv("MESH_TUNE", tune, 1);
    bench_dev_preinit(o.mem);

    mesh_status_t st = mesh_init();
    if (st != MESH_OK) {
        fprintf(stderr, "error: cannot create the communicator: %s: %s\n", mesh_status_string(st),
                mesh_comm_last_error(NULL));
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
                                     .now = mesh_time_now,
                                     .describe = mesh_describe};
    bench_cur = bench_comm;
    if (mesh_gather_routes()) {
        mesh_comm_abort(bench_comm);
        mesh_comm_destroy(bench_comm);
        return 1;
    }
    mesh_list_tls();
    mesh_backend.tls = bench_tls;
    mesh_backend.tl_sent = mesh_tl_sent;
    if (o.mem) {
        rc = bench_dev_setup(bench_comm, o.mem, &bench_device);
        if (rc == 0)
            mesh_backend.dev = &bench_device;
    }
    if (o.mesh && rc == 0) {
        rc = mesh_grid_setup(&o);
        mesh_backend.naxes = bench_naxes;
        mesh_backend.axis = mesh_axis;
        mesh_backend.mesh = bench_mesh;
    }
    if (rc == 0)
        rc = bench_main(&o, &mesh_backend);
    /* No rank leaves before every rank is done: a peer that exits while another still drains
     * its last messages can be taken for a failed one. Only the leaving can fail here, after the
     * results stand, so the status does not count. */
    if (!bench_aborted)
        (void)mesh_barrier(bench_comm, NULL);
    bench_ep_free();
    bench_dev_free();
    if (bench_grid)
        mesh_grid_destroy(bench_grid);
    mesh_comm_destroy(bench_comm);
    free(bench_coords);
    free(bench_routes);
    return rc;
}
