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

/* Inline forms of the conversions (identical results) for the reduction loops; those of fp16
 * and bf16 are written without branches so that the loops vectorise. The device kernels
 * (libmesh/cuda/) compile these same functions, so that a device rounds as the host does. */
#ifdef __CUDACC__
#define MESH_DTYPE_INLINE static __host__ __device__ __forceinline__
#else
#define MESH_DTYPE_INLINE static inline
#endif

typedef union {
    float f;
    uint32_t u;
} mesh_dtype_bits_t;

MESH_DTYPE_INLINE float mesh_fp16_to_float_inline(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = (em << 13) + (112u << 23);   /* exponent bias 15 -> 127 */
    uint32_t special = (em << 13) | 0x7f800000u;   /* inf, NaN with its payload */
    mesh_dtype_bits_t sub = {.f = (float)em * 0x1p-24f}; /* subnormals, exact */
    /* Selection by masks rather than branches: the loops using this stay vectorisable. */
    uint32_t is_special = -(uint32_t)(em >= 0x7c00u);
    uint32_t is_normal = -(uint32_t)(em >= 0x400u);
    uint32_t r = (special & is_special) | (normal & is_normal & ~is_special) | (sub.u & ~is_normal);
    mesh_dtype_bits_t out = {.u = sign | r};
    return out.f;
}

MESH_DTYPE_INLINE uint16_t mesh_float_to_fp16_inline(float f)
{
    mesh_dtype_bits_t in = {.f = f};
    uint32_t sign = (in.u >> 16) & 0x8000u;
    uint32_t x = in.u & 0x7fffffffu;
    /* Normal results: add just under half an ulp, plus one when the kept lsb is odd. */
    uint32_t normal = (x + 0xfffu + ((x >> 13) & 1u) - (112u << 23)) >> 13;
    /* Subnormal results: adding 0.5f (whose ulp is fp16's subnormal step) rounds in hardware. */
    mesh_dtype_bits_t sub = {.u = x};
    sub.f += 0.5f;
    uint32_t subr = sub.u - 0x3f000000u;
    uint32_t nan = 0x7c00u | ((x >> 13) & 0x3ffu);
    nan |= (uint32_t)((nan & 0x3ffu) == 0) << 9;
    uint32_t is_nan = -(uint32_t)(x > 0x7f800000u);
    uint32_t is_inf = -(uint32_t)(x >= 0x477ff000u) & ~is_nan;
    uint32_t is_normal = -(uint32_t)(x >= 0x38800000u) & ~is_nan & ~is_inf;
    uint32_t is_sub = ~(is_nan | is_inf | is_normal);
    uint32_t r = (nan & is_nan) | (0x7c00u & is_inf) | (normal & is_normal) | (subr & is_sub);
    return (uint16_t)(sign | r);
}

MESH_DTYPE_INLINE float mesh_bf16_to_float_inline(uint16_t b)
{
    mesh_dtype_bits_t out = {.u = (uint32_t)b << 16};
    return out.f;
}

MESH_DTYPE_INLINE uint16_t mesh_float_to_bf16_inline(float f)
{
    mesh_dtype_bits_t in = {.f = f};
    uint32_t x = in.u;
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = x >> 16;
    nan |= (uint32_t)((nan & 0x7fu) == 0) << 6;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

MESH_DTYPE_INLINE uint32_t mesh_dtype_f2u_(float f)
{
    mesh_dtype_bits_t b = {.f = f};
    return b.u;
}

MESH_DTYPE_INLINE float mesh_dtype_u2f_(uint32_t u)
{
    mesh_dtype_bits_t b = {.u = u};
    return b.f;
}

MESH_DTYPE_INLINE float mesh_e4m3_to_float_inline(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t em = v & 0x7fu;
    uint32_t normal = (em << 20) + (120u << 23); /* exponent bias 7 -> 127 */
    uint32_t sub = mesh_dtype_f2u_((float)em * 0x1p-9f);
    uint32_t is_nan = -(uint32_t)(em == 0x7fu);
    uint32_t is_normal = -(uint32_t)(em >= 0x08u);
    return mesh_dtype_u2f_(sign | (0x7fc00000u & is_nan) | (normal & is_normal & ~is_nan) |
                           (sub & ~is_normal));
}

MESH_DTYPE_INLINE uint8_t mesh_float_to_e4m3_inline(float f)
{
    uint32_t x = mesh_dtype_f2u_(f);
    uint32_t sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    uint32_t normal = (x + 0x7ffffu + ((x >> 20) & 1u) - (120u << 23)) >> 20;
    /* Subnormals step by 2^-9, the ulp of 2^14: the addition rounds. */
    uint32_t sub = mesh_dtype_f2u_(mesh_dtype_u2f_(x) + 0x1p14f) - 0x46800000u;
    /* Above 464 (half way from the largest finite value 448 to the next step, a tie that goes
     * to the even 448) the format has nothing: NaN, as for infinities and NaNs. */
    uint32_t is_nan = -(uint32_t)(x > 0x43e80000u);
    uint32_t is_normal = -(uint32_t)(x >= 0x3c800000u) & ~is_nan; /* from 2^-6 */
    uint32_t r = (0x7fu & is_nan) | (normal & is_normal) | (sub & ~(is_nan | is_normal));
    return (uint8_t)(sign | r);
}

MESH_DTYPE_INLINE float mesh_e5m2_to_float_inline(uint8_t v)
{
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t em = v & 0x7fu;
    uint32_t special = 0x7f800000u | ((em & 3u) << 21);
    uint32_t normal = (em << 21) + (112u << 23); /* exponent bias 15 -> 127 */
    uint32_t sub = mesh_dtype_f2u_((float)em * 0x1p-16f);
    uint32_t is_special = -(uint32_t)(em >= 0x7cu);
    uint32_t is_normal = -(uint32_t)(em >= 0x04u);
    return mesh_dtype_u2f_(sign | (special & is_special) | (normal & is_normal & ~is_special) |
                           (sub & ~is_normal));
}

MESH_DTYPE_INLINE uint8_t mesh_float_to_e5m2_inline(float f)
{
    uint32_t x = mesh_dtype_f2u_(f);
    uint32_t sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    uint32_t nanm = (x >> 21) & 3u;
    uint32_t nan = 0x7cu | nanm | ((uint32_t)(nanm == 0) << 1);
    uint32_t normal = (x + 0xfffffu + ((x >> 21) & 1u) - (112u << 23)) >> 21;
    uint32_t sub = mesh_dtype_f2u_(mesh_dtype_u2f_(x) + 0x1p7f) - 0x43000000u;
    uint32_t is_nan = -(uint32_t)(x > 0x7f800000u);
    /* from 61440, half way from 57344 to 2^16: the tie goes to inf */
    uint32_t is_inf = -(uint32_t)(x >= 0x47700000u) & ~is_nan;
    uint32_t is_normal = -(uint32_t)(x >= 0x38800000u) & ~(is_nan | is_inf); /* from 2^-14 */
    uint32_t r = (nan & is_nan) | (0x7cu & is_inf) | (normal & is_normal) |
                 (sub & ~(is_nan | is_inf | is_normal));
    return (uint8_t)(sign | r);
}

/* Pre-multiplied sums a communicator holds at once: ops MESH_OP_USER_BASE and up. */
#define MESH_OP_PREMUL_MAX 32

#endif
