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
    return op >= MESH_OP_USER_BASE ? "premul_sum" : "unknown";
}

int mesh_dtype_is_float(mesh_dtype_t d)
{
    return mesh_dtype_valid(d) && mesh_dtype_info[d].is_float;
}

static inline uint32_t mesh_f2u(float f)
{
    mesh_dtype_bits_t b = {.f = f};
    return b.u;
}

static inline float mesh_u2f(uint32_t u)
{
    mesh_dtype_bits_t b = {.u = u};
    return b.f;
}

float mesh_fp16_to_float(uint16_t h) { return mesh_fp16_to_float_inline(h); }
uint16_t mesh_float_to_fp16(float f) { return mesh_float_to_fp16_inline(f); }
float mesh_bf16_to_float(uint16_t b) { return mesh_bf16_to_float_inline(b); }
uint16_t mesh_float_to_bf16(float f) { return mesh_float_to_bf16_inline(f); }

float mesh_e4m3_to_float(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t em = v & 0x7fu;
    if (em == 0x7fu)
        return mesh_u2f(sign | 0x7fc00000u);
    if (em >= 0x08u)
        return mesh_u2f(sign | ((em << 20) + (120u << 23))); /* exponent bias 7 -> 127 */
    return mesh_u2f(sign | mesh_f2u((float)em * 0x1p-9f));
}

uint8_t mesh_float_to_e4m3(float f)
{
    uint32_t x = mesh_f2u(f);
    uint32_t sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    /* Above 464 (half way from the largest finite value 448 to the next step, a tie that goes
     * to the even 448) the format has nothing: NaN, as do infinities and NaNs. */
    if (x > 0x43e80000u)
        return (uint8_t)(sign | 0x7fu);
    if (x >= 0x3c800000u) /* 2^-6, the smallest normal */
        return (uint8_t)(sign | ((x + 0x7ffffu + ((x >> 20) & 1u) - (120u << 23)) >> 20));
    /* Subnormals step by 2^-9, the ulp of 2^14: the addition rounds. */
    return (uint8_t)(sign | (mesh_f2u(mesh_u2f(x) + 0x1p14f) - mesh_f2u(0x1p14f)));
}

float mesh_e5m2_to_float(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t em = v & 0x7fu;
    if (em >= 0x7cu)
        return mesh_u2f(sign | 0x7f800000u | ((em & 3u) << 21));
    if (em >= 0x04u)
        return mesh_u2f(sign | ((em << 21) + (112u << 23))); /* exponent bias 15 -> 127 */
    return mesh_u2f(sign | mesh_f2u((float)em * 0x1p-16f));
}

uint8_t mesh_float_to_e5m2(float f)
{
    uint32_t x = mesh_f2u(f);
    uint32_t sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) {
        uint32_t m = (x >> 21) & 3u;
        return (uint8_t)(sign | 0x7cu | (m != 0 ? m : 2u));
    }
    if (x >= 0x47700000u) /* 61440, half way from 57344 to 2^16: the tie goes to inf */
        return (uint8_t)(sign | 0x7cu);
    if (x >= 0x38800000u) /* 2^-14, the smallest normal */
        return (uint8_t)(sign | ((x + 0xfffffu + ((x >> 21) & 1u) - (112u << 23)) >> 21));
    return (uint8_t)(sign | (mesh_f2u(mesh_u2f(x) + 0x1p7f) - mesh_f2u(0x1p7f)));
}

/* double -> float rounding to odd: a later rounding to a format with at most 22 mantissa bits
 * then gives the same result as rounding the double directly (no double rounding). */
static float mesh_double_to_float_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || isnan(v))
        return f;
    uint32_t b = mesh_f2u(f);
    if (fabs((double)f) > fabs(v))
        b--; /* truncate toward zero (sign-magnitude encoding) */
    return mesh_u2f(b | 1u);
}

double mesh_dtype_get(mesh_dtype_t d, const void *buf, size_t i)
{
    switch (d) {
    case MESH_INT8: return ((const int8_t *)buf)[i];
    case MESH_UINT8: return ((const uint8_t *)buf)[i];
    case MESH_INT32: return ((const int32_t *)buf)[i];
    case MESH_UINT32: return ((const uint32_t *)buf)[i];
    case MESH_INT64: return (double)((const int64_t *)buf)[i];
    case MESH_UINT64: return (double)((const uint64_t *)buf)[i];
    case MESH_FP16: return mesh_fp16_to_float(((const uint16_t *)buf)[i]);
    case MESH_BF16: return mesh_bf16_to_float(((const uint16_t *)buf)[i]);
    case MESH_FP32: return ((const float *)buf)[i];
    case MESH_FP64: return ((const double *)buf)[i];
    case MESH_FP8_E4M3: return mesh_e4m3_to_float(((const uint8_t *)buf)[i]);
    case MESH_FP8_E5M2: return mesh_e5m2_to_float(((const uint8_t *)buf)[i]);
    default: return 0.0;
    }
}

void mesh_dtype_set(mesh_dtype_t d, void *buf, size_t i, double v)
{
    switch (d) {
    case MESH_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case MESH_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case MESH_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case MESH_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case MESH_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case MESH_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case MESH_FP16: ((uint16_t *)buf)[i] = mesh_float_to_fp16(mesh_double_to_float_odd(v)); break;
    case MESH_BF16: ((uint16_t *)buf)[i] = mesh_float_to_bf16(mesh_double_to_float_odd(v)); break;
    case MESH_FP32: ((float *)buf)[i] = (float)v; break;
    case MESH_FP64: ((double *)buf)[i] = v; break;
    case MESH_FP8_E4M3:
        ((uint8_t *)buf)[i] = mesh_float_to_e4m3(mesh_double_to_float_odd(v));
        break;
    case MESH_FP8_E5M2:
        ((uint8_t *)buf)[i] = mesh_float_to_e5m2(mesh_double_to_float_odd(v));
        break;
    default: break;
    }
}
