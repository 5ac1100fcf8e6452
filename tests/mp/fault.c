/*
 * Peer failure: N ranks run all-reduces; the last rank kills itself with SIGKILL in the middle
 * of one. Every survivor must return an error that names the dead rank within the timeout, and
 * never hang. With "stop", the last rank stops itself (SIGSTOP) instead, alive but silent, and
 * the survivors have unequal timeouts (rank r waits MESH_TIMEOUT * (r + 1)): every survivor must
 * name the stopped rank, not the survivor that timed out first. The program launches its own
 * ranks (so that the survivors are not killed by a launcher) and checks them.
 *   fault [NRANKS] [MESH_TLS value or ""] [stop]
 */
#include "mesh.h"
#include "tests/harness/free_port.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int stop_mode;

static int rank_main(void)
{
    mesh_comm_h comm;
    int my_rank = atoi(getenv("MESH_RANK"));
    /* unequal timeouts: the first survivor to give up must not be taken for the culprit */
    mesh_comm_params_t params = {.field_mask = MESH_COMM_PARAM_FIELD_TIMEOUT,
                                 .timeout_s = atof(getenv("MESH_TIMEOUT")) * (my_rank + 1)};
    mesh_status_t st = mesh_comm_init(&comm, stop_mode ? &params : NULL);
    if (st != MESH_OK) {
        fprintf(stderr, "init: %s\n", mesh_comm_last_error(NULL));
        return 3;
    }
    int rank = mesh_comm_rank(comm), size = mesh_comm_size(comm), victim = size - 1;
    size_t n = 1 << 20;
    float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
    for (int it = 0; it < 1000; it++) {
        mesh_request_h req;
        st = mesh_allreduce(comm, a, b, n, MESH_FP32, MESH_SUM, NULL, &req);
        if (st == MESH_OK) {
            if (rank == victim && it == 3) {
                /* die (or stop) with the collective half done */
                for (int k = 0; k < 50; k++)
                    mesh_progress();
                raise(stop_mode ? SIGSTOP : SIGKILL);
            }
            double t0 = now();
            st = mesh_wait(req);
            double waited = now() - t0;
            mesh_request_free(req);
            if (st != MESH_OK) {
                const char *msg = mesh_comm_last_error(comm);
                char want[32];
                snprintf(want, sizeof(want), "rank %d", victim);
                printf("rank %d: %s after %.2f s: %s\n", rank, mesh_status_string(st), waited, msg);
                int ok = (st == MESH_ERR_PEER_FAILED || st == MESH_ERR_TIMEOUT) &&
                         strstr(msg, want) != NULL;
                if (stop_mode)
                    ok = ok && st == MESH_ERR_TIMEOUT && strstr(msg, "stopped answering") &&
                         waited < atof(getenv("MESH_TIMEOUT")) + 3;
                /* every later call fails fast too */
                int x = 0;
                mesh_status_t again =
                    mesh_allreduce(comm, &x, &x, 1, MESH_INT32, MESH_SUM, NULL, NULL);
                ok = ok && again != MESH_OK;
                mesh_comm_abort(comm);
                mesh_comm_destroy(comm);
                return ok ? 0 : 4;
            }
        }
        if (st != MESH_OK)
            break;
    }
    fprintf(stderr, "rank %d: no failure seen\n", rank);
    return 5;
}

int main(int argc, char **argv)
{
    stop_mode = argc > 3 && strcmp(argv[3], "stop") == 0;
    if (getenv("MESH_RANK"))
        return rank_main();
    int n = argc > 1 ? atoi(argv[1]) : 3;
    if (argc > 2 && argv[2][0])
        setenv("MESH_TLS", argv[2], 1);
    int port = mesh_test_free_port(0); /* rank 0's listener */
    if (port < 0) {
        fprintf(stderr, "fault: no free loopback port found\n");
        return 99;
    }
    char addr[64], size_s[16], rank_s[16];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    snprintf(size_s, sizeof(size_s), "%d", n);
    setenv("MESH_ADDR", addr, 1);
    setenv("MESH_SIZE", size_s, 1);
    if (!getenv("MESH_TIMEOUT"))
        setenv("MESH_TIMEOUT", "10", 1);
    double timeout = atof(getenv("MESH_TIMEOUT"));
    pid_t pids[64];
    double t0 = now();
    for (int r = 0; r < n; r++) {
        snprintf(rank_s, sizeof(rank_s), "%d", r);
        setenv("MESH_RANK", rank_s, 1);
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)(timeout * 3 + 30)); /* a hang shows as SIGALRM */
            execv("/proc/self/exe", argv);
            _exit(127);
        }
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int status;
        if (stop_mode && r == n - 1)
            kill(pids[r], SIGKILL); /* the survivors are done */
        waitpid(pids[r], &status, 0);
        if (r == n - 1) {
            if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
                fprintf(stderr, "victim rank %d did not die by SIGKILL (status %#x)\n", r, status);
                bad = 1;
            }
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "survivor rank %d: %s %d\n", r, WIFEXITED(status) ? "exit" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            bad = 1;
        }
    }
    double took = now() - t0;
    printf("fault: %d ranks, %s, %s: all survivors reported it in %.1f s (timeout %.0f s)\n", n,
           getenv("MESH_TLS") ? getenv("MESH_TLS") : "default transports",
           stop_mode ? "a stopped rank, unequal timeouts" : "a killed rank", took, timeout);
    if (took > timeout + 20) {
        fprintf(stderr, "took longer than the timeout allows\n");
        bad = 1;
    }
    return bad;
}
