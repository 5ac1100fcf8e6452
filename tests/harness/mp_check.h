/* Assertions for multi-process tests: a failed check is reported with the rank and counted
 * rather than exiting, so the rank still takes part in the collectives that follow (leaving
 * early would turn one wrong value into failures on every peer). The test exits non-zero when
 * the count is not 0. */
#ifndef MESH_TEST_MP_CHECK_H
#define MESH_TEST_MP_CHECK_H

#include "mesh.h"
#include <stdio.h>

/* The test's communicator from meshrun's environment, with this rank and the size; returns 1,
 * with the status and the library's message printed, when it cannot be made, else 0. */
static inline int mesh_mp_init(mesh_comm_h *comm, int *rank, int *size)
{
    mesh_status_t st = mesh_comm_init_env(comm);
    if (st != MESH_OK) {
        fprintf(stderr, "init: %s: %s\n", mesh_status_string(st), mesh_comm_last_error(NULL));
        return 1;
    }
    *rank = mesh_comm_rank(*comm);
    *size = mesh_comm_size(*comm);
    return 0;
}

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
