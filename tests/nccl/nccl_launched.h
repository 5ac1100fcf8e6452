/* Ranks started by a launcher (meshrun, which sets MESH_RANK and MESH_SIZE, with --nodes as
 * network namespaces) instead of forked by the test: rank 0's ncclUniqueId reaches the others
 * through a file in a folder they share (the namespaces separate the network, not the files),
 * as a framework's store would carry it. Included by tests/nccl/nccl_device.c alone. */
#ifndef MESH_TEST_NCCL_LAUNCHED_H
#define MESH_TEST_NCCL_LAUNCHED_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* This rank and the world size from the launcher's environment; 0, or -1 without them. */
static int nccl_launched_rank(int *rank, int *size)
{
    const char *r = getenv("MESH_RANK"), *n = getenv("MESH_SIZE");
    if (r == NULL || n == NULL)
        return -1;
    *rank = atoi(r);
    *size = atoi(n);
    return *size >= 1 && *rank >= 0 && *rank < *size ? 0 : -1;
}

/* Rank 0 publishes len bytes as dir/nccl.id (written aside, then renamed, so that a reader
 * never sees half of it); 0, or -1 after printing why. */
static int nccl_launched_put(const char *dir, const void *id, size_t len)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof(tmp), "%s/nccl.id.tmp", dir);
    snprintf(path, sizeof(path), "%s/nccl.id", dir);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, 1, len, f) != len || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "rank 0: cannot publish the unique id in %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The others wait up to limit seconds for it; 0, or -1 after printing why. */
static int nccl_launched_get(const char *dir, int rank, void *id, size_t len, double limit)
{
    char path[4096];
    struct timespec t0, t;
    snprintf(path, sizeof(path), "%s/nccl.id", dir);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            size_t got = fread(id, 1, len, f);
            fclose(f);
            if (got == len)
                return 0;
            fprintf(stderr, "rank %d: %s holds %zu bytes, not %zu\n", rank, path, got, len);
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) * 1e-9 > limit) {
            fprintf(stderr, "rank %d: no unique id in %s after %.0f s\n", rank, path, limit);
            return -1;
        }
        usleep(10 * 1000);
    }
}

#endif
