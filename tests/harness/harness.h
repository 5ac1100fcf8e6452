/* Minimal assertions for unit tests: exit 1 with file:line on failure, 77 to skip. */
#ifndef MESH_TEST_HARNESS_H
#define MESH_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

#define MESH_TEST_SKIP 77

#define CHECK(cond)                                                                            \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                   \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

#endif
