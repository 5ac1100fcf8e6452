/* Shared pieces of the bootstrap tests: forked ranks, a watchdog, and an allgather check with
 * exact contents over several rounds and lengths. */
#ifndef MESH_TEST_BOOTSTRAP_H
#define MESH_TEST_BOOTSTRAP_H

#include "libmesh/bootstrap.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "tests/harness/free_port.h"
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TB_WATCHDOG_S 60

/* Byte i of rank r's blob in round k: distinct across ranks, rounds and positions. */
static inline uint8_t tb_byte(int r, int k, size_t i)
{
    return (uint8_t)(r * 131 + k * 29 + i * 7 + (i >> 8) * 3 + 1);
}

/* Several rounds of different lengths, including 0 and one larger than a socket buffer.
 * Returns 0 on success, else prints why and returns 1. */
static inline int tb_check_allgather(mesh_bootstrap_t *bs)
{
    static const size_t lens[] = {8, 1, 0, 77, 4096, 3, 300000, 16};
    int rank = bs->rank, size = bs->size;
    for (int k = 0; k < (int)(sizeof(lens) / sizeof(lens[0])); k++) {
        size_t len = lens[k];
        uint8_t *in = malloc(len + 1), *out = malloc(len * (size_t)size + 1);
        CHECK(in != NULL && out != NULL);
        for (size_t i = 0; i < len; i++)
            in[i] = tb_byte(rank, k, i);
        memset(out, 0xee, len * (size_t)size + 1);
        mesh_status_t st = mesh_bootstrap_allgather(bs, in, out, len);
        if (st != MESH_OK) {
            fprintf(stderr, "rank %d round %d: allgather failed: %s: %s\n", rank, k,
                    mesh_status_string(st), mesh_error_last());
            return 1;
        }
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < len; i++)
                if (out[(size_t)r * len + i] != tb_byte(r, k, i)) {
                    fprintf(stderr, "rank %d round %d: byte %zu of rank %d is %u, expected %u\n",
                            rank, k, i, r, out[(size_t)r * len + i], tb_byte(r, k, i));
                    return 1;
                }
        CHECK(out[len * (size_t)size] == 0xee); /* nothing written past the end */
        free(in);
        free(out);
    }
    /* In place: the rank's own block already sits in out. */
    int vals[size];
    vals[rank] = 1000 + rank;
    CHECK(mesh_bootstrap_allgather(bs, &vals[rank], vals, sizeof(int)) == MESH_OK);
    for (int r = 0; r < size; r++)
        CHECK_MSG(vals[r] == 1000 + r, "in place rank %d", r);
    return 0;
}

typedef int (*tb_rank_fn)(int rank, int size, void *arg);

/* Forks one child per rank with want[rank] != 0 (NULL: all); each exits with fn's result.
 * Returns the pids (0 for ranks not started). */
static inline void tb_fork_ranks(int size, const char *want, tb_rank_fn fn, void *arg, pid_t *pids)
{
    fflush(NULL);
    for (int r = 0; r < size; r++) {
        pids[r] = 0;
        if (want != NULL && !want[r])
            continue;
        pid_t p = fork();
        CHECK(p >= 0);
        if (p == 0) {
            alarm(TB_WATCHDOG_S);
            int rc = fn(r, size, arg);
            fflush(NULL);
            _exit(rc);
        }
        pids[r] = p;
    }
}

/* Waits for the children; returns how many did not exit with 0 (each one is printed). */
static inline int tb_wait_ranks(int size, const pid_t *pids, const char *what)
{
    int bad = 0;
    for (int r = 0; r < size; r++) {
        if (pids[r] == 0)
            continue;
        int status;
        CHECK(waitpid(pids[r], &status, 0) == pids[r]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "%s: rank %d %s %d\n", what, r,
                    WIFEXITED(status) ? "exited with" : "died of signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            bad++;
        }
    }
    return bad;
}

static inline int tb_run_ranks(int size, tb_rank_fn fn, void *arg, const char *what)
{
    pid_t pids[size];
    tb_fork_ranks(size, NULL, fn, arg, pids);
    return tb_wait_ranks(size, pids, what);
}

/* A loopback port nobody listens on now (and, with want_next, whose successor is free too). */
static inline int tb_free_port(int want_next)
{
    int port = mesh_test_free_port(want_next);
    CHECK(port > 0);
    return port;
}

/* Redirects this process's stderr into a file the parent reads afterwards. */
static inline void tb_stderr_to(const char *path)
{
    FILE *f = freopen(path, "w", stderr);
    CHECK(f != NULL);
    setvbuf(stderr, NULL, _IONBF, 0);
}

static inline char *tb_slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#endif
