/*
 * mesh/dtype.h: the narrow floating-point formats of mesh_dtype_t (fp16, bf16, fp8 e4m3 and
 * e5m2) to and from fp32, as the library's reductions convert them, for clients that store
 * tensors in those formats (the parallel layers, trainers, bindings).
 *
 * One rule for every format:
 * - to fp32: exact (every value of a narrow format is an fp32 value), subnormals included; a
 *   NaN stays a NaN with its sign and payload.
 * - from fp32: round to nearest, ties to even; subnormal results are kept (no flush to zero);
 *   signs are kept (-0 stays -0). A NaN stays a NaN: its sign and the top bits of its payload
 *   are kept, and the quiet bit is set when those bits would all be zero, so a NaN never turns
 *   into an infinity (e4m3 has one NaN per sign: S.1111.111).
 * - overflow does not saturate: fp16 (from 65520), bf16 (from half a step above its largest
 *   value, about 3.39e38) and e5m2 (from 61440) give an infinity of the value's sign; e4m3,
 *   which has no infinity, gives NaN above 464 (448 is its largest value), as it does for
 *   infinities.
 *
 * The per-element conversions are static inline: they sit in the inner loops of reductions and
 * optimizer steps, where a call into the library per element would cost more than the
 * conversion and stop the loop from vectorising; those of fp16 and bf16 select with masks
 * instead of branches for that reason. The formats are fixed, so inlining them fixes nothing
 * that could change. mesh_dtype_convert converts whole arrays between any two of them.
 */
#ifndef MESH_PUBLIC_DTYPE_H
#define MESH_PUBLIC_DTYPE_H

#include <mesh.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Converts count elements of src (src_dtype) into dst (dst_dtype) by the rule above, between
 * any two of fp16, bf16, fp32, fp64, fp8_e4m3 and fp8_e5m2 (fp64 to a narrow format rounds
 * once, from the double). src and dst must not overlap unless they are the same buffer of the
 * same dtype. Other dtypes, or NULL buffers with count > 0: MESH_ERR_INVALID_ARG naming them.
 */
MESH_API mesh_status_t mesh_dtype_convert(void *dst, mesh_dtype_t dst_dtype, const void *src,
                                          mesh_dtype_t src_dtype, size_t count);

/* Under nvcc the same functions compile for the device too, so that device reductions round as
 * the host's do. */
#if defined(__CUDACC__)
#define MESH_DTYPE_INLINE static __host__ __device__ __forceinline__
#else
#define MESH_DTYPE_INLINE static inline
#endif

/* The bits of an fp32 value and back (helpers of the conversions below; memcpy compiles to a
 * register move and keeps the header valid C and C++). */
MESH_DTYPE_INLINE uint32_t mesh_dtype_f2u_(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

MESH_DTYPE_INLINE float mesh_dtype_u2f_(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

MESH_DTYPE_INLINE float mesh_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = (em << 13) + (112u << 23);          /* exponent bias 15 -> 127 */
    uint32_t special = (em << 13) | 0x7f800000u;          /* inf, NaN with its payload */
    uint32_t sub = mesh_dtype_f2u_((float)em * 0x1p-24f); /* subnormals, exact */
    uint32_t is_special = -(uint32_t)(em >= 0x7c00u);
    uint32_t is_normal = -(uint32_t)(em >= 0x400u);
    uint32_t r = (special & is_special) | (normal & is_normal & ~is_special) | (sub & ~is_normal);
    return mesh_dtype_u2f_(sign | r);
}

MESH_DTYPE_INLINE uint16_t mesh_float_to_fp16(float f)
{
    uint32_t x = mesh_dtype_f2u_(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    /* Normal results: add just under half an ulp, plus one when the kept lsb is odd. */
    uint32_t normal = (x + 0xfffu + ((x >> 13) & 1u) - (112u << 23)) >> 13;
    /* Subnormal results: adding 0.5f (whose ulp is fp16's subnormal step) rounds in hardware. */
    uint32_t subr = mesh_dtype_f2u_(mesh_dtype_u2f_(x) + 0.5f) - 0x3f000000u;
    uint32_t nan = 0x7c00u | ((x >> 13) & 0x3ffu);
    nan |= (uint32_t)((nan & 0x3ffu) == 0) << 9;
    uint32_t is_nan = -(uint32_t)(x > 0x7f800000u);
    uint32_t is_inf = -(uint32_t)(x >= 0x477ff000u) & ~is_nan; /* from 65520 */
    uint32_t is_normal = -(uint32_t)(x >= 0x38800000u) & ~is_nan & ~is_inf;
    uint32_t is_sub = ~(is_nan | is_inf | is_normal);
    uint32_t r = (nan & is_nan) | (0x7c00u & is_inf) | (normal & is_normal) | (subr & is_sub);
    return (uint16_t)(sign | r);
}

MESH_DTYPE_INLINE float mesh_bf16_to_float(uint16_t b)
{
    return mesh_dtype_u2f_((uint32_t)b << 16);
}

MESH_DTYPE_INLINE uint16_t mesh_float_to_bf16(float f)
{
    uint32_t x = mesh_dtype_f2u_(f);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16; /* the carry may reach inf: overflow */
    uint32_t nan = x >> 16;
    nan |= (uint32_t)((nan & 0x7fu) == 0) << 6;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

MESH_DTYPE_INLINE float mesh_e4m3_to_float(uint8_t v)
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

MESH_DTYPE_INLINE uint8_t mesh_float_to_e4m3(float f)
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

MESH_DTYPE_INLINE float mesh_e5m2_to_float(uint8_t v)
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

MESH_DTYPE_INLINE uint8_t mesh_float_to_e5m2(float f)
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

#ifdef __cplusplus
}
#endif
#endif /* MESH_PUBLIC_DTYPE_H */
