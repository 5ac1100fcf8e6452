/*
 * A hang with every peer alive: the last rank never posts, while the others wait in a blocking
 * all-reduce, then in a nonblocking receive from it finished by mesh_wait. Every waiting rank
 * must fail with MESH_ERR_TIMEOUT no sooner than MESH_TIMEOUT and no later than MESH_TIMEOUT
 * + MESH_HANG_PROBE + 1 s after the call (the silent rank answers no probe, so the probe runs
 * to its end); the silent rank stays alive (asleep) meanwhile. Each case runs on a
 * communicator of its own (a failed call fails its communicator).
 *   hang        (under meshrun, MESH_TIMEOUT set)
 */
#include "mesh.h"
#include "tests/harness/mp_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size, failures;

#define CHECK(cond, ...) MESH_MP_CHECK(rank, failures, cond, __VA_ARGS__)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    for (double d; (d = t - now()) > 0;)
        usleep((useconds_t)(d * 1e6) + 1);
}

static void one_case(mesh_comm_h world, double timeout, double probe, int p2p)
{
    int silent = size - 1;
    const char *what = p2p ? "receive from the silent rank" : "all-reduce";
    mesh_comm_h c;
    mesh_status_t st = mesh_comm_dup(world, &c);
    CHECK(st == MESH_OK, "dup: %s", mesh_comm_last_error(world));
    if (st != MESH_OK)
        return;
    mesh_barrier(world, NULL);
    double t0 = now();
    if (rank != silent) {
        int x = rank, y = 0;
        if (p2p) {
            mesh_request_h req;
            st = mesh_recv(c, &y, 1, MESH_INT32, silent, NULL, &req);
            CHECK(st == MESH_OK, "posting the receive: %s", mesh_comm_last_error(c));
            if (st == MESH_OK) {
                st = mesh_wait(req);
                mesh_request_free(req);
            }
        } else {
            st = mesh_allreduce(c, &x, &y, 1, MESH_INT32, MESH_SUM, NULL, NULL);
        }
        double took = now() - t0;
        printf("rank %d: %s: %s after %.2f s (MESH_TIMEOUT %.1f): %s\n", rank, what,
               mesh_status_string(st), took, timeout, mesh_comm_last_error(c));
        CHECK(st == MESH_ERR_TIMEOUT, "%s: %s, want %s", what, mesh_status_string(st),
              mesh_status_string(MESH_ERR_TIMEOUT));
        double bound = timeout + probe + 1.0;
        CHECK(took >= timeout * 0.95 && took <= bound,
              "%s timed out after %.2f s, want %.1f to %.1f s", what, took, timeout, bound);
    }
    /* everybody stays until every waiting rank is past its bound */
    sleep_until(t0 + timeout + probe + 1.3);
    mesh_comm_destroy(c);
    mesh_barrier(world, NULL);
}

int main(void)
{
    const char *t = getenv("MESH_TIMEOUT");
    double timeout = t ? atof(t) : 0;
    mesh_comm_h world;
    if (timeout <= 0 || timeout > 30) {
        fprintf(stderr, "hang: set MESH_TIMEOUT to a few seconds\n");
        return 2;
    }
    if (mesh_comm_init_env(&world) != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 1;
    }
    rank = mesh_comm_rank(world);
    size = mesh_comm_size(world);
    /* the probe's length (MESH_HANG_PROBE, 1 s unless set) */
    const char *pr = getenv("MESH_HANG_PROBE");
    double probe = pr ? atof(pr) : 1.0;
    one_case(world, timeout, probe, 0);
    one_case(world, timeout, probe, 1);
    mesh_comm_destroy(world);
    return failures ? 1 : 0;
}
