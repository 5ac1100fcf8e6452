/* Datatype sizes and names, and the narrow floating-point conversions. Every conversion to a
 * narrow format rounds to nearest, ties to even, and keeps NaNs NaN. */
#include "libmesh/dtype.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
    int is_float;
} mesh_dtype_info[MESH_DTYPE_COUNT] = {
    [MESH_INT8] = {"int8", 1, 0},       [MESH_UINT8] = {"uint8", 1, 0},
    [MESH_INT32] = {"int32", 4, 0},     [MESH_UINT32] = {"uint32", 4, 0},
    [MESH_INT64] = {"int64", 8, 0},     [MESH_UINT64] = {"uint64", 8, 0},
    [MESH_FP16] = {"fp16", 2, 1},       [MESH_BF16] = {"bf16", 2, 1},
    [MESH_FP32] = {"fp32", 4, 1},       [MESH_FP64] = {"fp64", 8, 1},
    [MESH_FP8_E4M3] = {"fp8_e4m3", 1, 1}, [MESH_FP8_E5M2] = {"fp8_e5m2", 1, 1},
};

MESH_API size_t mesh_dtype_size(mesh_dtype_t dtype)
{
    return mesh_dtype_valid(dtype) ? mesh_dtype_info[dtype].size : 0;
}

MESH_API const char *mesh_dtype_name(mesh_dtype_t dtype)
{
    return mesh_dtype_valid(dtype) ? mesh_dtype_info[dtype].name : "unknown";
}

MESH_API const char *mesh_op_name(mesh_op_t op)
{
    static const char *const names[MESH_OP_COUNT] = {"sum", "prod", "min", "max", "avg"};
    if ((unsigned)op < MESH_OP_COUNT)
        return names[op];
    return op >= MESH_OP_USER_BASE && op < MESH_OP_USER_BASE + MESH_OP_PREMUL_MAX ? "premul_sum"
                                                                              : "unknown";
}

int mesh_dtype_is_float(mesh_dtype_t d)
{
    return mesh_dtype_valid(d) && mesh_dtype_info[d].is_float;
}

float mesh_fp16_to_float(uint16_t h) { return mesh_fp16_to_float_inline(h); }
uint16_t mesh_float_to_fp16(float f) { return mesh_float_to_fp16_inline(f); }
float mesh_bf16_to_float(uint16_t b) { return mesh_bf16_to_float_inline(b); }
uint16_t mesh_float_to_bf16(float f) { return mesh_float_to_bf16_inline(f); }

float mesh_e4m3_to_float(uint8_t v) { return mesh_e4m3_to_float_inline(v); }
uint8_t mesh_float_to_e4m3(float f) { return mesh_float_to_e4m3_inline(f); }
float mesh_e5m2_to_float(uint8_t v) { return mesh_e5m2_to_float_inline(v); }
uint8_t mesh_float_to_e5m2(float f) { return mesh_float_to_e5m2_inline(f); }

/* double -> float rounding to odd: a later rounding to a format with at most 22 mantissa bits
 * then gives the same result as rounding the double directly (no double rounding). */
static float mesh_double_to_float_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || isnan(v))
        return f;
    uint32_t b = mesh_dtype_f2u_(f);
    if (fabs((double)f) > fabs(v))
        b--; /* truncate toward zero (sign-magnitude encoding) */
    return mesh_dtype_u2f_(b | 1u);
}

/* Buffers handed to tests and tools may be unaligned: access elements through memcpy. */
#define MESH_LOAD(T, buf, i)                                                                   \
    ({                                                                                        \
        T v_;                                                                                 \
        memcpy(&v_, (const char *)(buf) + (i) * sizeof(T), sizeof(T));                       \
        v_;                                                                                   \
    })
#define MESH_STORE(T, buf, i, val)                                                             \
    do {                                                                                      \
        T v_ = (val);                                                                         \
        memcpy((char *)(buf) + (i) * sizeof(T), &v_, sizeof(T));                              \
    } while (0)

double mesh_dtype_get(mesh_dtype_t d, const void *buf, size_t i)
{
    switch (d) {
    case MESH_INT8: return MESH_LOAD(int8_t, buf, i);
    case MESH_UINT8: return MESH_LOAD(uint8_t, buf, i);
    case MESH_INT32: return MESH_LOAD(int32_t, buf, i);
    case MESH_UINT32: return MESH_LOAD(uint32_t, buf, i);
    case MESH_INT64: return (double)MESH_LOAD(int64_t, buf, i);
    case MESH_UINT64: return (double)MESH_LOAD(uint64_t, buf, i);
    case MESH_FP16: return mesh_fp16_to_float(MESH_LOAD(uint16_t, buf, i));
    case MESH_BF16: return mesh_bf16_to_float(MESH_LOAD(uint16_t, buf, i));
    case MESH_FP32: return MESH_LOAD(float, buf, i);
    case MESH_FP64: return MESH_LOAD(double, buf, i);
    case MESH_FP8_E4M3: return mesh_e4m3_to_float(MESH_LOAD(uint8_t, buf, i));
    case MESH_FP8_E5M2: return mesh_e5m2_to_float(MESH_LOAD(uint8_t, buf, i));
    default: return 0.0;
    }
}

void mesh_dtype_set(mesh_dtype_t d, void *buf, size_t i, double v)
{
    switch (d) {
    case MESH_INT8: MESH_STORE(int8_t, buf, i, (int8_t)v); break;
    case MESH_UINT8: MESH_STORE(uint8_t, buf, i, (uint8_t)v); break;
    case MESH_INT32: MESH_STORE(int32_t, buf, i, (int32_t)v); break;
    case MESH_UINT32: MESH_STORE(uint32_t, buf, i, (uint32_t)v); break;
    case MESH_INT64: MESH_STORE(int64_t, buf, i, (int64_t)v); break;
    case MESH_UINT64: MESH_STORE(uint64_t, buf, i, (uint64_t)v); break;
    case MESH_FP16:
        MESH_STORE(uint16_t, buf, i, mesh_float_to_fp16(mesh_double_to_float_odd(v)));
        break;
    case MESH_BF16:
        MESH_STORE(uint16_t, buf, i, mesh_float_to_bf16(mesh_double_to_float_odd(v)));
        break;
    case MESH_FP32: MESH_STORE(float, buf, i, (float)v); break;
    case MESH_FP64: MESH_STORE(double, buf, i, v); break;
    case MESH_FP8_E4M3:
        MESH_STORE(uint8_t, buf, i, mesh_float_to_e4m3(mesh_double_to_float_odd(v)));
        break;
    case MESH_FP8_E5M2:
        MESH_STORE(uint8_t, buf, i, mesh_float_to_e5m2(mesh_double_to_float_odd(v)));
        break;
    default: break;
    }
}
