/* Datatypes: validity, element access for tests and tools. The conversions of the narrow
 * floating-point formats, and their rounding rule, are public: mesh/dtype.h. */
#ifndef MESH_DTYPE_H
#define MESH_DTYPE_H

#include "mesh.h"
#include "mesh/dtype.h"
#include <stdint.h>

static inline int mesh_dtype_valid(mesh_dtype_t d)
{
    return (unsigned)d < MESH_DTYPE_COUNT;
}
int mesh_dtype_is_float(mesh_dtype_t d);

/* Element i of buf as double / stored from double (rounding as mesh/dtype.h says, once: from
 * the double); for tests and tools. */
double mesh_dtype_get(mesh_dtype_t d, const void *buf, size_t i);
void mesh_dtype_set(mesh_dtype_t d, void *buf, size_t i, double v);

/* Pre-multiplied sums a communicator holds at once: ops MESH_OP_USER_BASE and up. */
#define MESH_OP_PREMUL_MAX 32

#endif
