/* Assertions for multi-process tests: a failed check is reported with the rank and counted
 * rather than exiting, so the rank still takes part in the collectives that follow (leaving
 * early would turn one wrong value into failures on every peer). The test exits non-zero when
 * the count is not 0. */
#ifndef MESH_TEST_MP_CHECK_H
#define MESH_TEST_MP_CHECK_H

#include <stdio.h>

#define MESH_MP_CHECK(rank, failures, cond, ...)                                                   \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "[rank %d] %s:%d: %s: ", (rank), __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            (failures)++;                                                                          \
        }                                                                                          \
    } while (0)

#endif
