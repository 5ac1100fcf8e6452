/* Minimal assertions for unit tests: exit 1 with file:line on failure, 77 to skip. */
#ifndef MESH_TEST_HARNESS_H
#define MESH_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESH_TEST_SKIP 77

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Makes a new folder NAME-XXXXXX for a test's files in $TMPDIR (else /tmp) and puts its path in
 * buf: tests run wherever the tree and the temporary folder are, spaces in paths included. */
static inline void th_tmpdir(char *buf, size_t len, const char *name)
{
    const char *t = getenv("TMPDIR");
    int n = snprintf(buf, len, "%s/%s-XXXXXX", t && *t ? t : "/tmp", name);
    CHECK_MSG(n > 0 && (size_t)n < len, "TMPDIR too long for %zu bytes", len);
    CHECK_MSG(mkdtemp(buf) != NULL, "mkdtemp %s failed", buf);
}

#endif
