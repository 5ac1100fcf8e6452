/* Datatype sizes and names, element access, and conversions of whole arrays between the
 * floating-point formats (the rule: mesh/dtype.h). */
#include "libmesh/dtype.h"
#include "libmesh/log.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
    int is_float;
} mesh_dtype_info[MESH_DTYPE_COUNT] = {
    [MESH_INT8] = {"int8", 1, 0},         [MESH_UINT8] = {"uint8", 1, 0},
    [MESH_INT32] = {"int32", 4, 0},       [MESH_UINT32] = {"uint32", 4, 0},
    [MESH_INT64] = {"int64", 8, 0},       [MESH_UINT64] = {"uint64", 8, 0},
    [MESH_FP16] = {"fp16", 2, 1},         [MESH_BF16] = {"bf16", 2, 1},
    [MESH_FP32] = {"fp32", 4, 1},         [MESH_FP64] = {"fp64", 8, 1},
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
#define MESH_LOAD(T, buf, i)                                                                       \
    ({                                                                                             \
        T v_;                                                                                      \
        memcpy(&v_, (const char *)(buf) + (i) * sizeof(T), sizeof(T));                             \
        v_;                                                                                        \
    })
#define MESH_STORE(T, buf, i, val)                                                                 \
    do {                                                                                           \
        T v_ = (val);                                                                              \
        memcpy((char *)(buf) + (i) * sizeof(T), &v_, sizeof(T));                                   \
    } while (0)

double mesh_dtype_get(mesh_dtype_t d, const void *buf, size_t i)
{
    switch (d) {
    case MESH_INT8:
        return MESH_LOAD(int8_t, buf, i);
    case MESH_UINT8:
        return MESH_LOAD(uint8_t, buf, i);
    case MESH_INT32:
        return MESH_LOAD(int32_t, buf, i);
    case MESH_UINT32:
        return MESH_LOAD(uint32_t, buf, i);
    case MESH_INT64:
        return (double)MESH_LOAD(int64_t, buf, i);
    case MESH_UINT64:
        return (double)MESH_LOAD(uint64_t, buf, i);
    case MESH_FP16:
        return mesh_fp16_to_float(MESH_LOAD(uint16_t, buf, i));
    case MESH_BF16:
        return mesh_bf16_to_float(MESH_LOAD(uint16_t, buf, i));
    case MESH_FP32:
        return MESH_LOAD(float, buf, i);
    case MESH_FP64:
        return MESH_LOAD(double, buf, i);
    case MESH_FP8_E4M3:
        return mesh_e4m3_to_float(MESH_LOAD(uint8_t, buf, i));
    case MESH_FP8_E5M2:
        return mesh_e5m2_to_float(MESH_LOAD(uint8_t, buf, i));
    default:
        return 0.0;
    }
}

void mesh_dtype_set(mesh_dtype_t d, void *buf, size_t i, double v)
{
    switch (d) {
    case MESH_INT8:
        MESH_STORE(int8_t, buf, i, (int8_t)v);
        break;
    case MESH_UINT8:
        MESH_STORE(uint8_t, buf, i, (uint8_t)v);
        break;
    case MESH_INT32:
        MESH_STORE(int32_t, buf, i, (int32_t)v);
        break;
    case MESH_UINT32:
        MESH_STORE(uint32_t, buf, i, (uint32_t)v);
        break;
    case MESH_INT64:
        MESH_STORE(int64_t, buf, i, (int64_t)v);
        break;
    case MESH_UINT64:
        MESH_STORE(uint64_t, buf, i, (uint64_t)v);
        break;
    case MESH_FP16:
        MESH_STORE(uint16_t, buf, i, mesh_float_to_fp16(mesh_double_to_float_odd(v)));
        break;
    case MESH_BF16:
        MESH_STORE(uint16_t, buf, i, mesh_float_to_bf16(mesh_double_to_float_odd(v)));
        break;
    case MESH_FP32:
        MESH_STORE(float, buf, i, (float)v);
        break;
    case MESH_FP64:
        MESH_STORE(double, buf, i, v);
        break;
    case MESH_FP8_E4M3:
        MESH_STORE(uint8_t, buf, i, mesh_float_to_e4m3(mesh_double_to_float_odd(v)));
        break;
    case MESH_FP8_E5M2:
        MESH_STORE(uint8_t, buf, i, mesh_float_to_e5m2(mesh_double_to_float_odd(v)));
        break;
    default:
        break;
    }
}

/* fp32 -> a float dtype and back, one element at a time through the inline conversions. */
static void mesh_dtype_from_float(void *dst, mesh_dtype_t d, const float *src, size_t n)
{
    switch (d) {
    case MESH_FP16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mesh_float_to_fp16(src[i]);
        break;
    case MESH_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = mesh_float_to_bf16(src[i]);
        break;
    case MESH_FP8_E4M3:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = mesh_float_to_e4m3(src[i]);
        break;
    case MESH_FP8_E5M2:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = mesh_float_to_e5m2(src[i]);
        break;
    case MESH_FP64:
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = src[i];
        break;
    default:
        memmove(dst, src, n * sizeof(float));
        break;
    }
}

static void mesh_dtype_to_float(float *dst, const void *src, mesh_dtype_t d, size_t n)
{
    switch (d) {
    case MESH_FP16:
        for (size_t i = 0; i < n; i++)
            dst[i] = mesh_fp16_to_float(((const uint16_t *)src)[i]);
        break;
    case MESH_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = mesh_bf16_to_float(((const uint16_t *)src)[i]);
        break;
    case MESH_FP8_E4M3:
        for (size_t i = 0; i < n; i++)
            dst[i] = mesh_e4m3_to_float(((const uint8_t *)src)[i]);
        break;
    case MESH_FP8_E5M2:
        for (size_t i = 0; i < n; i++)
            dst[i] = mesh_e5m2_to_float(((const uint8_t *)src)[i]);
        break;
    default:
        memmove(dst, src, n * sizeof(float));
        break;
    }
}

MESH_API mesh_status_t mesh_dtype_convert(void *dst, mesh_dtype_t dst_dtype, const void *src,
                                          mesh_dtype_t src_dtype, size_t count)
{
    if (!mesh_dtype_is_float(dst_dtype))
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "mesh_dtype_convert: dst_dtype %s (%d) is not a floating-point type",
                          mesh_dtype_name(dst_dtype), (int)dst_dtype);
    if (!mesh_dtype_is_float(src_dtype))
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "mesh_dtype_convert: src_dtype %s (%d) is not a floating-point type",
                          mesh_dtype_name(src_dtype), (int)src_dtype);
    if (count && (!dst || !src))
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_dtype_convert: %s is NULL with count %zu",
                          dst ? "src" : "dst", count);
    if (dst_dtype == src_dtype) {
        memmove(dst, src, count * mesh_dtype_size(src_dtype));
    } else if (src_dtype == MESH_FP32) {
        mesh_dtype_from_float(dst, dst_dtype, src, count);
    } else if (dst_dtype == MESH_FP32 && src_dtype != MESH_FP64) {
        mesh_dtype_to_float(dst, src, src_dtype, count);
    } else { /* from fp64 (rounded once) or between two narrow formats (exact through double) */
        for (size_t i = 0; i < count; i++)
            mesh_dtype_set(dst_dtype, dst, i, mesh_dtype_get(src_dtype, src, i));
    }
    return MESH_OK;
}
