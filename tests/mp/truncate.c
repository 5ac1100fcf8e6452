/*
 * A receive shorter than its message, through the public API, on whatever transport carries the
 * pair (the driver forces it with MESH_TLS and --nodes; --expect names it): rank 0 sends to the
 * last rank (itself on one rank: the self transport), one byte more than the receive holds and
 * many more, at eager and rendezvous sizes, with the receive posted before the message comes
 * and after it came. The receive must fail with MESH_ERR_TRUNCATED and a message naming the
 * sender and both sizes, nothing before or after the receive buffer may change, and the send
 * must complete. Each case runs on a communicator of its own (a failed call fails its
 * communicator).
 *   truncate [--expect TRANSPORT]
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size, failures;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)
#define GUARD            64

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* cap and len in elements of dtype: the receive's and the message's */
static void one_case(mesh_comm_h world, size_t cap, size_t len, mesh_dtype_t dt, int late,
                     const char *expect)
{
    mesh_comm_h c;
    int src = 0, dst = size - 1;
    size_t ds = mesh_dtype_size(dt);
    mesh_status_t st = mesh_comm_dup(world, &c);
    CHECK(st == MESH_OK, "dup: %s", mesh_comm_last_error(world));
    if (st != MESH_OK)
        return;
    const char *tl = mesh_comm_peer_transport(c, rank == dst ? src : dst);
    if (expect && (rank == src || rank == dst))
        CHECK(tl && strcmp(tl, expect) == 0, "rank %d talks to rank %d over %s, not %s", rank,
              rank == dst ? src : dst, tl ? tl : "(none)", expect);
    unsigned char *sbuf = malloc(len * ds + 1), *rbuf = malloc(cap * ds + 2 * GUARD + 1);
    memset(sbuf, 0x5c, len * ds + 1);
    memset(rbuf, 0xee, cap * ds + 2 * GUARD + 1);
    mesh_request_h sreq = NULL, rreq = NULL;
    if (rank == dst && !late) {
        st = mesh_recv(c, rbuf + GUARD, cap, dt, src, NULL, &rreq);
        CHECK(st == MESH_OK, "posting the receive: %s", mesh_comm_last_error(c));
    }
    if (!late)
        mesh_barrier(world, NULL); /* the receive is posted before the send */
    if (rank == src) {
        st = mesh_send(c, sbuf, len, dt, dst, NULL, &sreq);
        CHECK(st == MESH_OK, "send of %zu: %s", len, mesh_comm_last_error(c));
    }
    if (late)
        mesh_barrier(world, NULL); /* the send is posted before the receive */
    if (late && rank == dst) {
        /* the message (or its rendezvous request) arrives before the receive is posted */
        for (double t = now() + 0.05; now() < t;)
            mesh_progress();
        st = mesh_recv(c, rbuf + GUARD, cap, dt, src, NULL, &rreq);
        CHECK(st == MESH_OK, "posting the late receive: %s", mesh_comm_last_error(c));
    }
    if (rank == dst && rreq) {
        st = mesh_wait(rreq);
        const char *msg = mesh_comm_last_error(c);
        char who[32], bytes[48], room[48];
        snprintf(who, sizeof(who), "rank %d", src);
        snprintf(bytes, sizeof(bytes), "%zu-byte message", len * ds);
        snprintf(room, sizeof(room), "%zu-byte receive", cap * ds);
        const char *how = late ? "late" : "early";
        CHECK(st == MESH_ERR_TRUNCATED, "%s receive of %zu x %s for %zu: %s (%s)", how, cap,
              mesh_dtype_name(dt), len, mesh_status_string(st), msg);
        CHECK(strstr(msg, who) && strstr(msg, bytes) && strstr(msg, room),
              "%s receive of %zu for %zu over %s: message '%s' names not %s, %s and %s", how, cap,
              len, tl, msg, who, bytes, room);
        for (size_t i = 0; i < GUARD; i++) {
            CHECK(rbuf[i] == 0xee, "byte %zu before the receive buffer changed", GUARD - i);
            CHECK(rbuf[GUARD + cap * ds + i] == 0xee, "byte %zu after the receive buffer changed",
                  i);
        }
        mesh_request_free(rreq);
    }
    if (rank == src && sreq) {
        st = mesh_wait(sreq);
        CHECK(st == MESH_OK, "send of %zu over %s: %s (%s)", len, tl, mesh_status_string(st),
              mesh_comm_last_error(c));
        mesh_request_free(sreq);
    }
    mesh_comm_destroy(c);
    free(sbuf);
    free(rbuf);
    mesh_barrier(world, NULL);
}

int main(int argc, char **argv)
{
    const char *expect = argc > 2 && strcmp(argv[1], "--expect") == 0 ? argv[2] : NULL;
    mesh_comm_h world;
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    rank = mesh_comm_rank(world);
    size = mesh_comm_size(world);
    /* receive and message in elements: one more, and many more, at sizes below and above
     * every transport's eager limit (shm 16 KiB, verbs 8 KiB, ucx 1 MiB without RDMA) */
    static const size_t cases[][2] = {{0, 1},           {63, 64},       {100, 5000},
                                      {16384, 16385},   {300, 1 << 20}, {1 << 20, (1 << 20) + 1},
                                      {65536, 3u << 20}};
    for (int late = 0; late < 2; late++)
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
            one_case(world, cases[k][0], cases[k][1], MESH_UINT8, late, expect);
    one_case(world, 1000, 1001, MESH_FP64, 0, expect);
    one_case(world, 1000, 1001, MESH_FP64, 1, expect);
    mesh_comm_destroy(world);
    if (rank == 0)
        printf("truncate: %d ranks%s%s: %s\n", size, expect ? " over " : "", expect ? expect : "",
               failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
