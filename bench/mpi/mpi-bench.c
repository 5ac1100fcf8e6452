/*
 * mpi-bench: the same benchmark as mesh-bench through MPI's collectives, for side-by-side
 * numbers (bench/compare.sh). Types without an MPI equivalent (fp16, bf16, fp8) and the avg
 * reduction are reported as N/A, and so is in-place reduce_scatter, whose MPI_IN_PLACE layout
 * differs from mesh's.
 */
#include "config.h"
#include "bench/bench.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static bench_backend_t mpi_backend;

static MPI_Datatype mpi_dtype(bench_dtype_t d)
{
    switch (d) {
    case BENCH_INT8:
        return MPI_INT8_T;
    case BENCH_UINT8:
        return MPI_UINT8_T;
    case BENCH_INT32:
        return MPI_INT32_T;
    case BENCH_UINT32:
        return MPI_UINT32_T;
    case BENCH_INT64:
        return MPI_INT64_T;
    case BENCH_UINT64:
        return MPI_UINT64_T;
    case BENCH_FP32:
        return MPI_FLOAT;
    case BENCH_FP64:
        return MPI_DOUBLE;
    default:
        return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(bench_redop_t r)
{
    switch (r) {
    case BENCH_SUM:
        return MPI_SUM;
    case BENCH_PROD:
        return MPI_PROD;
    case BENCH_MIN:
        return MPI_MIN;
    case BENCH_MAX:
        return MPI_MAX;
    default:
        return MPI_OP_NULL;
    }
}

static int mpi_supports(bench_op_t op, bench_dtype_t d, bench_redop_t r, int in_place)
{
    if (mpi_dtype(d) == MPI_DATATYPE_NULL || op == BENCH_DISPATCH_COMBINE)
        return 0;
    if (bench_op_is_reduction(op) && mpi_op(r) == MPI_OP_NULL)
        return 0;
    if (in_place && (op == BENCH_REDUCE_SCATTER || op == BENCH_SENDRECV))
        return 0;
    return 1;
}

static int mpi_check(int rc, const bench_call_t *c)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "error: rank %d: %s of %zu elements failed: %s\n", mpi_backend.rank,
            bench_op_name(c->op), c->count, msg);
    return -1;
}

static int mpi_run(const bench_call_t *c)
{
    MPI_Datatype t = mpi_dtype(c->dtype);
    MPI_Op op = mpi_op(c->redop);
    int n = (int)c->count, rank = mpi_backend.rank, size = mpi_backend.size;
    const void *in = c->in_place ? MPI_IN_PLACE : c->sbuf;
    int rc;

    if (c->count > INT_MAX) {
        fprintf(stderr, "error: %zu elements exceed MPI's int count\n", c->count);
        return -1;
    }
    switch (c->op) {
    case BENCH_ALLREDUCE:
        rc = MPI_Allreduce(in, c->rbuf, n, t, op, MPI_COMM_WORLD);
        break;
    case BENCH_REDUCE:
        rc = MPI_Reduce(c->in_place && rank == c->root ? MPI_IN_PLACE : c->sbuf, c->rbuf, n, t, op,
                        c->root, MPI_COMM_WORLD);
        break;
    case BENCH_BROADCAST: /* out of place, the root's copy into rbuf is part of the operation */
        if (!c->in_place && rank == c->root)
            memcpy(c->rbuf, c->sbuf, c->count * bench_dtype_size(c->dtype));
        rc = MPI_Bcast(c->rbuf, n, t, c->root, MPI_COMM_WORLD);
        break;
    case BENCH_REDUCE_SCATTER:
        rc = MPI_Reduce_scatter_block(c->sbuf, c->rbuf, n, t, op, MPI_COMM_WORLD);
        break;
    case BENCH_ALLGATHER:
        rc = MPI_Allgather(in, n, t, c->rbuf, n, t, MPI_COMM_WORLD);
        break;
    case BENCH_ALLTOALL:
        rc = MPI_Alltoall(in, n, t, c->rbuf, n, t, MPI_COMM_WORLD);
        break;
    case BENCH_GATHER:
        rc = MPI_Gather(c->in_place && rank == c->root ? MPI_IN_PLACE : c->sbuf, n, t, c->rbuf, n,
                        t, c->root, MPI_COMM_WORLD);
        break;
    case BENCH_SCATTER:
        rc = MPI_Scatter(c->sbuf, n, t, c->in_place && rank == c->root ? MPI_IN_PLACE : c->rbuf, n,
                         t, c->root, MPI_COMM_WORLD);
        break;
    case BENCH_SENDRECV:
        rc = MPI_Sendrecv(c->sbuf, n, t, (rank + 1) % size, 0, c->rbuf, n, t,
                          (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    default:
        return -1;
    }
    return mpi_check(rc, c);
}

static const char *mpi_algo(bench_op_t op)
{
    return "mpi";
}
static int mpi_barrier(void)
{
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static int mpi_max_double(double *v)
{
    return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

static int mpi_sum_u64(uint64_t *v)
{
    return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

static void mpi_abort(void)
{
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Host names of every rank, gathered once: they give the node count and the description. */
static char *mpi_hosts;

static void mpi_describe(FILE *out)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = 0;
    fprintf(out, "# mpi-bench: %d rank%s on %d host%s; %s\n", mpi_backend.size,
            mpi_backend.size == 1 ? "" : "s", mpi_backend.nnodes,
            mpi_backend.nnodes == 1 ? "" : "s", version);
    const char *btl = getenv("OMPI_MCA_btl");
    fprintf(out, "# byte transfer layers: %s\n", btl ? btl : "(mpirun's choice)");
    for (int r = 0; r < mpi_backend.size && r < 64; r++)
        fprintf(out, "#   rank %d on %s\n", r, mpi_hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len, rc = bench_parse(argc, argv, "mpi-bench", &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (o.memcpy_mode)
        return bench_memcpy(&o, MPI_Wtime);
    if (o.algo) {
        fprintf(stderr, "error: -a selects mesh algorithms; mpi-bench has none to force\n");
        return 2;
    }

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_backend.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_backend.size);
    MPI_Get_processor_name(name, &len);
    mpi_hosts = calloc((size_t)mpi_backend.size, MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, mpi_hosts, MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, MPI_COMM_WORLD);
    mpi_backend.nnodes = 0;
    for (int r = 0; r < mpi_backend.size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(mpi_hosts + (size_t)q * MPI_MAX_PROCESSOR_NAME,
                          mpi_hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME) == 0;
        mpi_backend.nnodes += !seen;
    }
    mpi_backend.name = "mpi";
    mpi_backend.supports = mpi_supports;
    mpi_backend.run = mpi_run;
    mpi_backend.algo = mpi_algo;
    mpi_backend.barrier = mpi_barrier;
    mpi_backend.max_double = mpi_max_double;
    mpi_backend.sum_u64 = mpi_sum_u64;
    mpi_backend.abort = mpi_abort;
    mpi_backend.now = MPI_Wtime;
    mpi_backend.describe = mpi_describe;

    rc = bench_main(&o, &mpi_backend);
    free(mpi_hosts);
    MPI_Finalize();
    return rc;
}
