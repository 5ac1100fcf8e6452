/* Waiting for the forked ranks of the NCCL API tests (nccl_abi.c, nccl_device.c). */
#ifndef MESH_TEST_NCCL_CHILDREN_H
#define MESH_TEST_NCCL_CHILDREN_H

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double nccl_children_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Reaps the n processes pids[] (0: reaped), killing those still running after limit seconds.
 * 1 when one failed or was killed, else 77 when one exited 77 (nothing to test), else 0. */
static int nccl_wait_children(pid_t *pids, int n, double limit)
{
    int failed = 0, skipped = 0, left = n;
    double t0 = nccl_children_now();
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < n; i++) {
                if (pids[i] != p)
                    continue;
                pids[i] = 0;
                left--;
                if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
                    skipped = 1;
                } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    fprintf(stderr, "process %d failed (status 0x%x)\n", i, status);
                    failed = 1;
                }
            }
            continue;
        }
        if (nccl_children_now() - t0 > limit) {
            fprintf(stderr, "processes still running after %.0f s: killing them\n", limit);
            for (int i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            failed = 1;
            limit = 1e9;
        }
        usleep(10 * 1000);
    }
    return failed ? 1 : skipped ? 77 : 0;
}

#endif
