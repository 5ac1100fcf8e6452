/*
 * Mismatched calls across ranks: one rank calls another collective, another operation, another
 * datatype of the same size, another count or root than the others. Every rank must fail with
 * MESH_ERR_MISMATCH, its message naming both calls, and never return MESH_OK with wrong data.
 * Each case runs on a communicator of its own (a mismatch fails the communicator). A rank whose
 * part only sends (a root) may finish its call first; its next call on the communicator fails.
 * Broadcast and reduce with the roots split between the halves of the ranks end on every rank
 * without an error (each half's messages stay within it but for one, which nobody receives);
 * the message left over fails the next call, on every rank. Last, a destroyed communicator's
 * handle and a pointer that is no communicator's are refused with MESH_ERR_INVALID_ARG. Every
 * failure's structured form (mesh_comm_error_info) names a rank and the status.
 *   mismatch
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;
static mesh_comm_h world;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

enum { N = 1024 };

/* Runs the case's call on a fresh copy of world; the odd rank (the last) makes the other call.
 * want: words every rank's message must hold. */
static void run_case(const char *name, int (*call)(mesh_comm_h, int odd), const char *want1,
                     const char *want2, int may_finish)
{
    mesh_comm_h c;
    if (mesh_comm_dup(world, &c) != MESH_OK) {
        CHECK(0, "%s: dup: %s", name, mesh_comm_last_error(world));
        return;
    }
    int odd = rank == size - 1;
    mesh_status_t st = (mesh_status_t)call(c, odd);
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", mesh_comm_last_error(c));
    /* a rank whose part of a rooted call only sends may finish it before anyone can tell; the
     * verdict reaches it while it waits below, and its next call on the communicator fails */
    CHECK(st == MESH_ERR_MISMATCH || (st == MESH_OK && may_finish), "%s: returned %s (%s)", name,
          mesh_status_string(st), msg);
    mesh_barrier(world, NULL);
    int x = 0;
    mesh_status_t later = mesh_allreduce(c, &x, &x, 1, MESH_INT32, MESH_SUM, NULL, NULL);
    CHECK(later == MESH_ERR_MISMATCH, "%s: a later call on the communicator returned %s", name,
          mesh_status_string(later));
    if (st == MESH_OK)
        snprintf(msg, sizeof(msg), "%s", mesh_comm_last_error(c));
    CHECK(strstr(msg, want1) != NULL && strstr(msg, want2) != NULL,
          "%s: message '%s' does not name both calls ('%s', '%s')", name, msg, want1, want2);
    if (rank == 0)
        printf("%s: %s\n", name, msg);
    /* the structured form: the status, a rank of the communicator that called otherwise, and
     * the call the failure ended where it ended one */
    mesh_error_info_t info;
    mesh_status_t ist = mesh_comm_error_info(c, &info);
    CHECK(ist == MESH_OK && info.status == MESH_ERR_MISMATCH && info.rank >= 0 &&
              info.rank < size && strstr(info.message, want1) != NULL,
          "%s: error info: %s, status %s, rank %d, '%s'", name, mesh_status_string(ist),
          mesh_status_string(info.status), info.rank, info.message);
    CHECK(st != MESH_ERR_MISMATCH || info.operation[0] != '\0', "%s: error info names no operation",
          name);
    if (rank == 0)
        printf("%s: error info: rank %d, operation '%s'\n", name, info.rank, info.operation);
    mesh_comm_abort(c);
    mesh_comm_destroy(c);
    /* every rank is done with it before the next case */
    mesh_barrier(world, NULL);
}

static float buf[N], out[N];

static int coll_vs_bcast(mesh_comm_h c, int odd)
{
    return odd ? mesh_broadcast(c, buf, out, N, MESH_FP32, size - 1, NULL, NULL)
               : mesh_allreduce(c, buf, out, N, MESH_FP32, MESH_SUM, NULL, NULL);
}
static int op_sum_vs_max(mesh_comm_h c, int odd)
{
    return mesh_allreduce(c, buf, out, N, MESH_FP32, odd ? MESH_MAX : MESH_SUM, NULL, NULL);
}
static int dtype_fp32_vs_int32(mesh_comm_h c, int odd)
{
    return mesh_allreduce(c, buf, out, N, odd ? MESH_INT32 : MESH_FP32, MESH_SUM, NULL, NULL);
}
static int avg_vs_sum(mesh_comm_h c, int odd)
{
    return mesh_allreduce(c, buf, out, N, MESH_FP32, odd ? MESH_AVG : MESH_SUM, NULL, NULL);
}
static int count_vs_count(mesh_comm_h c, int odd)
{
    return mesh_allgather(c, buf, out, odd ? 7 : 8, MESH_FP32, NULL, NULL);
}
static int root_vs_root(mesh_comm_h c, int odd)
{
    /* rank 0 gathers at 0; the last rank thinks the root is 1 */
    return mesh_gather(c, buf, out, 4, MESH_FP32, odd ? 1 : 0, NULL, NULL);
}
/* The lower half of the ranks names one root, the upper half another. */
static int split_root(int lower_root, int upper_root)
{
    return rank < size / 2 ? lower_root : upper_root;
}
static int broadcast_root_split(mesh_comm_h c, int odd)
{
    (void)odd;
    return mesh_broadcast(c, buf, out, N, MESH_FP32, split_root(0, size / 2), NULL, NULL);
}
static int reduce_root_split(mesh_comm_h c, int odd)
{
    /* each half names a root in the other: every rank sends, the roots receive nothing */
    (void)odd;
    return mesh_reduce(c, buf, out, N, MESH_FP32, MESH_SUM, split_root(size / 2, 0), NULL, NULL);
}

static int allgather_vs_alltoall(mesh_comm_h c, int odd)
{
    static float big[N * 16];
    return odd ? mesh_alltoall(c, buf, big, 1, MESH_FP32, NULL, NULL)
               : mesh_allgather(c, buf, big, 1, MESH_FP32, NULL, NULL);
}

/* A destroyed communicator and a pointer to something else are refused, never followed. */
static void check_dead_handles(void)
{
    mesh_comm_h c;
    if (mesh_comm_dup(world, &c) != MESH_OK) {
        CHECK(0, "dup: %s", mesh_comm_last_error(world));
        return;
    }
    /* every rank has its connections up before any destroys it */
    mesh_barrier(world, NULL);
    mesh_comm_destroy(c);
    int x = 1;
    mesh_status_t st = mesh_allreduce(c, &x, &x, 1, MESH_INT32, MESH_SUM, NULL, NULL);
    const char *msg = mesh_comm_last_error(NULL);
    CHECK(st == MESH_ERR_INVALID_ARG && strstr(msg, "mesh_allreduce: comm was destroyed"),
          "all-reduce on a destroyed communicator returned %s (%s)", mesh_status_string(st), msg);
    st = mesh_broadcast(c, &x, &x, 1, MESH_INT32, 0, NULL, NULL);
    CHECK(st == MESH_ERR_INVALID_ARG, "broadcast on a destroyed communicator returned %s",
          mesh_status_string(st));
    mesh_comm_h d;
    st = mesh_comm_dup(c, &d);
    CHECK(st == MESH_ERR_INVALID_ARG, "dup of a destroyed communicator returned %s",
          mesh_status_string(st));
    CHECK(mesh_comm_rank(c) == -1 && mesh_comm_size(c) == -1,
          "rank and size of a destroyed communicator: %d, %d", mesh_comm_rank(c),
          mesh_comm_size(c));
    mesh_comm_destroy(c); /* a second destroy is refused, not a double free */
    CHECK(strstr(mesh_comm_last_error(NULL), "mesh_comm_destroy: comm was destroyed") != NULL,
          "a second destroy said '%s'", mesh_comm_last_error(NULL));
    static uint64_t foreign[64];
    for (int i = 0; i < 64; i++)
        foreign[i] = 0x5555555555555555ull;
    st = mesh_allreduce((mesh_comm_h)foreign, &x, &x, 1, MESH_INT32, MESH_SUM, NULL, NULL);
    msg = mesh_comm_last_error(NULL);
    CHECK(st == MESH_ERR_INVALID_ARG && strstr(msg, "comm is not a communicator"),
          "all-reduce on a foreign handle returned %s (%s)", mesh_status_string(st), msg);
    if (rank == 0)
        printf("dead handles: refused\n");
}

int main(void)
{
    /* rank 0 gives up first (4 s): a hang from a mismatch is found by its probe, and the
     * verdict reaches the others while they still wait */
    const char *base = getenv("MESH_TIMEOUT");
    int me = getenv("MESH_RANK") ? atoi(getenv("MESH_RANK")) : 0;
    mesh_comm_params_t p = {.field_mask = MESH_COMM_PARAM_FIELD_TIMEOUT,
                            .timeout_s = me == 0 ? 4 : (base ? atof(base) : 30)};
    if (mesh_comm_init(&world, &p) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    rank = mesh_comm_rank(world);
    size = mesh_comm_size(world);
    if (size < 2 || size > 16) {
        fprintf(stderr, "mismatch needs 2 to 16 ranks\n");
        return 2;
    }
    for (int i = 0; i < N; i++)
        buf[i] = (float)(rank + i % 5);
    run_case("allreduce against broadcast", coll_vs_bcast, "broadcast", "allreduce", 1);
    run_case("sum against max", op_sum_vs_max, "max", "sum", 0);
    run_case("fp32 against int32", dtype_fp32_vs_int32, "int32", "fp32", 0);
    run_case("sum against avg", avg_vs_sum, "avg", "sum", 0);
    run_case("count 8 against 7", count_vs_count, "allgather", "count", 0);
    if (size >= 3)
        run_case("root 0 against 1", root_vs_root, "gather", "root", 1);
    run_case("allgather against alltoall", allgather_vs_alltoall, "alltoall", "allgather", 0);
    if (size % 2 == 0) {
        run_case("broadcast roots split", broadcast_root_split, "broadcast", "root", 1);
        run_case("reduce roots split", reduce_root_split, "reduce", "root", 1);
    }
    check_dead_handles();
    mesh_comm_destroy(world);
    if (rank == 0)
        printf("mismatch: %d ranks %s\n", size, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
