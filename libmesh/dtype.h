/* Datatypes: sizes, names, and conversions of the narrow floating-point formats. All conversions
 * to narrow formats round to nearest, ties to even. */
#ifndef MESH_DTYPE_H
#define MESH_DTYPE_H

#include "mesh.h"
#include <stdint.h>

static inline int mesh_dtype_valid(mesh_dtype_t d) { return (unsigned)d < MESH_DTYPE_COUNT; }
int mesh_dtype_is_float(mesh_dtype_t d);

float mesh_fp16_to_float(uint16_t h);
uint16_t mesh_float_to_fp16(float f);   /* overflow -> inf */
float mesh_bf16_to_float(uint16_t b);
uint16_t mesh_float_to_bf16(float f);
/* e4m3 "fn" (OCP FP8): bias 7, no infinities, max 448, NaN = S.1111.111; overflow -> NaN */
float mesh_e4m3_to_float(uint8_t v);
uint8_t mesh_float_to_e4m3(float f);
/* e5m2: bias 15, IEEE-style infinities and NaNs, max 57344; overflow -> inf */
float mesh_e5m2_to_float(uint8_t v);
uint8_t mesh_float_to_e5m2(float f);

/* Element i of buf as double / stored from double (rounding as above); for tests and tools. */
double mesh_dtype_get(mesh_dtype_t d, const void *buf, size_t i);
void mesh_dtype_set(mesh_dtype_t d, void *buf, size_t i, double v);

#endif
