/* CPU reductions. Narrow types (fp16, bf16, fp8) compute in fp32 and round once per call. */
#ifndef MESH_REDUCE_H
#define MESH_REDUCE_H

#include "mesh.h"
#include <stddef.h>

/* op is one of MESH_SUM, MESH_PROD, MESH_MIN, MESH_MAX (AVG and pre-multiplied sums are built
 * from SUM by the callers with the two helpers below). */
void mesh_reduce_local(void *dst, const void *src, size_t count, mesh_dtype_t dtype, mesh_op_t op);
/* dst = a op b (dst may alias a or b). */
void mesh_reduce_local3(void *dst, const void *a, const void *b, size_t count, mesh_dtype_t dtype,
                        mesh_op_t op);
/* dst = a op b for a result that will not be read again soon (larger than the core's cache):
 * fp32, fp16 and bf16 are written with non-temporal stores where the CPU has AVX2, so that the
 * old contents of dst are not read from memory first. Otherwise, and when dst overlaps a or b,
 * the same as mesh_reduce_local3. */
void mesh_reduce_local3_stream(void *dst, const void *a, const void *b, size_t count,
                               mesh_dtype_t dtype, mesh_op_t op);
/* dst[i] = src[i] * scalar (scalar has type dtype). */
void mesh_reduce_scale(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                       const void *scalar);
/* buf[i] = buf[i] / n (integer division for integer types). */
void mesh_reduce_divide(void *buf, size_t count, mesh_dtype_t dtype, int n);

/* The reductions' table: MESH_REDUCE_AVX2. */
mesh_status_t mesh_reduce_config_register(void);

#endif
