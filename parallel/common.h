/* Helpers shared by the parallel layers; public API only. */
#ifndef MESH_PAR_COMMON_H
#define MESH_PAR_COMMON_H

#include <mesh.h>

/* Records the message of a failure (mesh_comm_last_error(NULL)) and returns status. */
#define mesh_par_error(status, ...) mesh_error_report((status), __VA_ARGS__)

/* A failed mesh call on comm: the layer's context, then the communicator's own message. */
mesh_status_t mesh_par_fail(mesh_comm_h comm, mesh_status_t status, const char *what);

/* qsort's comparison of doubles, ascending. */
static inline int mesh_par_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MESH_PAR_CHECK(expr)                                                                       \
    do {                                                                                           \
        mesh_status_t _st = (expr);                                                                \
        if (_st < 0)                                                                               \
            return _st;                                                                            \
    } while (0)

#endif
