/* CPU reductions. All-reduce bandwidth depends on these loops, so each (type, op) pair has its
 * own simple loop over restrict pointers that the compiler vectorises, chosen once per call;
 * a plain loop handles buffers that overlap. Narrow floats compute in fp32 and round once.
 * Signed integer sums and products run on the unsigned type of the same width: they wrap. */
#pragma GCC optimize("O3")

#include "libmesh/reduce.h"
#include "libmesh/dtype.h"

#include <stdint.h>

/* Integer min/max, and float min/max that return NaN when either input is NaN. */
#define MESH_R_SUM(x, y)  ((x) + (y))
#define MESH_R_PROD(x, y) ((x) * (y))
#define MESH_R_MIN(x, y)  ((x) < (y) ? (x) : (y))
#define MESH_R_MAX(x, y)  ((x) > (y) ? (x) : (y))
#define MESH_R_FMIN(x, y) ((((x) < (y)) | ((x) != (x))) ? (x) : (y))
#define MESH_R_FMAX(x, y) ((((x) > (y)) | ((x) != (x))) ? (x) : (y))

#define MESH_R_ID(v) (v)

typedef void (*mesh_reduce2_fn)(void *d, const void *s, size_t n);
typedef void (*mesh_reduce3_fn)(void *d, const void *a, const void *b, size_t n);

typedef struct {
    mesh_reduce2_fn two;     /* d = d op s, no overlap */
    mesh_reduce3_fn three;   /* d = a op b, no overlap */
    mesh_reduce3_fn overlap; /* d = a op b, any aliasing */
} mesh_reduce_fns_t;

#define MESH_REDUCE_DEFINE(name, T, CT, LD, ST, OP)                                            \
    static void name##_2(void *dv, const void *sv, size_t n)                                   \
    {                                                                                         \
        T *restrict d = dv;                                                                   \
        const T *restrict s = sv;                                                             \
        for (size_t i = 0; i < n; i++) {                                                      \
            CT x = LD(d[i]), y = LD(s[i]);                                                    \
            d[i] = ST(OP(x, y));                                                              \
        }                                                                                     \
    }                                                                                         \
    static void name##_3(void *dv, const void *av, const void *bv, size_t n)                   \
    {                                                                                         \
        T *restrict d = dv;                                                                   \
        const T *restrict a = av;                                                             \
        const T *restrict b = bv;                                                             \
        for (size_t i = 0; i < n; i++) {                                                      \
            CT x = LD(a[i]), y = LD(b[i]);                                                    \
            d[i] = ST(OP(x, y));                                                              \
        }                                                                                     \
    }                                                                                         \
    static void name##_o(void *dv, const void *av, const void *bv, size_t n)                   \
    {                                                                                         \
        T *d = dv;                                                                            \
        const T *a = av, *b = bv;                                                             \
        for (size_t i = 0; i < n; i++) {                                                      \
            CT x = LD(a[i]), y = LD(b[i]);                                                    \
            d[i] = ST(OP(x, y));                                                              \
        }                                                                                     \
    }

/* Integer types: signed sums and products use the unsigned functions. */
#define MESH_REDUCE_INT(tag, T, UT)                                                            \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_min, T, T, MESH_R_ID, MESH_R_ID, MESH_R_MIN)        \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_max, T, T, MESH_R_ID, MESH_R_ID, MESH_R_MAX)
#define MESH_REDUCE_UINT(tag, T)                                                               \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_sum, T, T, MESH_R_ID, (T), MESH_R_SUM)              \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_prod, T, T, MESH_R_ID, (T), MESH_R_PROD)            \
    MESH_REDUCE_INT(tag, T, T)
#define MESH_REDUCE_FLOAT(tag, T, CT, LD, ST)                                                  \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_sum, T, CT, LD, ST, MESH_R_SUM)                     \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_prod, T, CT, LD, ST, MESH_R_PROD)                   \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_min, T, CT, LD, ST, MESH_R_FMIN)                    \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_max, T, CT, LD, ST, MESH_R_FMAX)

MESH_REDUCE_UINT(u8, uint8_t)
MESH_REDUCE_UINT(u32, uint32_t)
MESH_REDUCE_UINT(u64, uint64_t)
MESH_REDUCE_INT(i8, int8_t, uint8_t)
MESH_REDUCE_INT(i32, int32_t, uint32_t)
MESH_REDUCE_INT(i64, int64_t, uint64_t)
MESH_REDUCE_FLOAT(f32, float, float, MESH_R_ID, MESH_R_ID)
MESH_REDUCE_FLOAT(f64, double, double, MESH_R_ID, MESH_R_ID)
MESH_REDUCE_FLOAT(f16, uint16_t, float, mesh_fp16_to_float_inline, mesh_float_to_fp16_inline)
MESH_REDUCE_FLOAT(bf16, uint16_t, float, mesh_bf16_to_float_inline, mesh_float_to_bf16_inline)
MESH_REDUCE_FLOAT(e4m3, uint8_t, float, mesh_e4m3_to_float, mesh_float_to_e4m3)
MESH_REDUCE_FLOAT(e5m2, uint8_t, float, mesh_e5m2_to_float, mesh_float_to_e5m2)

#define MESH_FNS(name) {name##_2, name##_3, name##_o}
#define MESH_FNS_OPS(sum, prod, tag)                                                           \
    {MESH_FNS(mesh_reduce_##sum##_sum), MESH_FNS(mesh_reduce_##prod##_prod),                   \
     MESH_FNS(mesh_reduce_##tag##_min), MESH_FNS(mesh_reduce_##tag##_max)}

static const mesh_reduce_fns_t mesh_reduce_table[MESH_DTYPE_COUNT][MESH_MAX + 1] = {
    [MESH_INT8] = MESH_FNS_OPS(u8, u8, i8),
    [MESH_UINT8] = MESH_FNS_OPS(u8, u8, u8),
    [MESH_INT32] = MESH_FNS_OPS(u32, u32, i32),
    [MESH_UINT32] = MESH_FNS_OPS(u32, u32, u32),
    [MESH_INT64] = MESH_FNS_OPS(u64, u64, i64),
    [MESH_UINT64] = MESH_FNS_OPS(u64, u64, u64),
    [MESH_FP16] = MESH_FNS_OPS(f16, f16, f16),
    [MESH_BF16] = MESH_FNS_OPS(bf16, bf16, bf16),
    [MESH_FP32] = MESH_FNS_OPS(f32, f32, f32),
    [MESH_FP64] = MESH_FNS_OPS(f64, f64, f64),
    [MESH_FP8_E4M3] = MESH_FNS_OPS(e4m3, e4m3, e4m3),
    [MESH_FP8_E5M2] = MESH_FNS_OPS(e5m2, e5m2, e5m2),
};

static const mesh_reduce_fns_t *mesh_reduce_fns(mesh_dtype_t dtype, mesh_op_t op)
{
    if (!mesh_dtype_valid(dtype) || (unsigned)op > MESH_MAX)
        return NULL;
    return &mesh_reduce_table[dtype][op];
}

static int mesh_reduce_overlap(const void *p, const void *q, size_t bytes)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + bytes && b < a + bytes;
}

void mesh_reduce_local(void *dst, const void *src, size_t count, mesh_dtype_t dtype, mesh_op_t op)
{
    const mesh_reduce_fns_t *f = mesh_reduce_fns(dtype, op);
    if (f == NULL || count == 0)
        return;
    if (mesh_reduce_overlap(dst, src, count * mesh_dtype_size(dtype)))
        f->overlap(dst, dst, src, count);
    else
        f->two(dst, src, count);
}

void mesh_reduce_local3(void *dst, const void *a, const void *b, size_t count, mesh_dtype_t dtype,
                        mesh_op_t op)
{
    const mesh_reduce_fns_t *f = mesh_reduce_fns(dtype, op);
    if (f == NULL || count == 0)
        return;
    size_t bytes = count * mesh_dtype_size(dtype);
    int oa = mesh_reduce_overlap(dst, a, bytes), ob = mesh_reduce_overlap(dst, b, bytes);
    /* Every op is commutative, so dst aliasing either input is a two-operand reduction. */
    if (dst == a && !ob)
        f->two(dst, b, count);
    else if (dst == b && !oa)
        f->two(dst, a, count);
    else if (oa || ob)
        f->overlap(dst, a, b, count);
    else
        f->three(dst, a, b, count);
}

/* dst = src * scalar and buf = buf / n, for in-place or disjoint buffers. */
#define MESH_SCALE_DEFINE(tag, T, CT, LD, ST)                                                  \
    __attribute__((unused)) static void mesh_scale_##tag(void *dv, const void *sv, size_t n,  \
                                                         CT c)                                \
    {                                                                                         \
        T *d = dv;                                                                            \
        const T *s = sv;                                                                      \
        for (size_t i = 0; i < n; i++)                                                        \
            d[i] = ST(LD(s[i]) * c);                                                          \
    }                                                                                         \
    static void mesh_divide_##tag(void *bv, size_t n, CT c)                                    \
    {                                                                                         \
        T *b = bv;                                                                            \
        for (size_t i = 0; i < n; i++)                                                        \
            b[i] = ST(LD(b[i]) / c);                                                          \
    }

MESH_SCALE_DEFINE(u8, uint8_t, uint32_t, MESH_R_ID, (uint8_t))
MESH_SCALE_DEFINE(i8, int8_t, int32_t, MESH_R_ID, (int8_t))
MESH_SCALE_DEFINE(u32, uint32_t, uint32_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(i32, int32_t, int32_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(u64, uint64_t, uint64_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(i64, int64_t, int64_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(f32, float, float, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(f64, double, double, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(f16, uint16_t, float, mesh_fp16_to_float_inline, mesh_float_to_fp16_inline)
MESH_SCALE_DEFINE(bf16, uint16_t, float, mesh_bf16_to_float_inline, mesh_float_to_bf16_inline)
MESH_SCALE_DEFINE(e4m3, uint8_t, float, mesh_e4m3_to_float, mesh_float_to_e4m3)
MESH_SCALE_DEFINE(e5m2, uint8_t, float, mesh_e5m2_to_float, mesh_float_to_e5m2)

void mesh_reduce_scale(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                       const void *scalar)
{
    if (count == 0)
        return;
    switch (dtype) {
    /* Signed products wrap: they run on the unsigned type of the same width. */
    case MESH_INT8:
    case MESH_UINT8: mesh_scale_u8(dst, src, count, *(const uint8_t *)scalar); break;
    case MESH_INT32:
    case MESH_UINT32: mesh_scale_u32(dst, src, count, *(const uint32_t *)scalar); break;
    case MESH_INT64:
    case MESH_UINT64: mesh_scale_u64(dst, src, count, *(const uint64_t *)scalar); break;
    case MESH_FP32: mesh_scale_f32(dst, src, count, *(const float *)scalar); break;
    case MESH_FP64: mesh_scale_f64(dst, src, count, *(const double *)scalar); break;
    case MESH_FP16:
        mesh_scale_f16(dst, src, count, mesh_fp16_to_float(*(const uint16_t *)scalar));
        break;
    case MESH_BF16:
        mesh_scale_bf16(dst, src, count, mesh_bf16_to_float(*(const uint16_t *)scalar));
        break;
    case MESH_FP8_E4M3:
        mesh_scale_e4m3(dst, src, count, mesh_e4m3_to_float(*(const uint8_t *)scalar));
        break;
    case MESH_FP8_E5M2:
        mesh_scale_e5m2(dst, src, count, mesh_e5m2_to_float(*(const uint8_t *)scalar));
        break;
    default: break;
    }
}

void mesh_reduce_divide(void *buf, size_t count, mesh_dtype_t dtype, int n)
{
    if (count == 0 || n == 0)
        return;
    switch (dtype) {
    case MESH_INT8: mesh_divide_i8(buf, count, n); break;
    case MESH_UINT8: mesh_divide_u8(buf, count, (uint32_t)n); break;
    case MESH_INT32: mesh_divide_i32(buf, count, n); break;
    case MESH_UINT32: mesh_divide_u32(buf, count, (uint32_t)n); break;
    case MESH_INT64: mesh_divide_i64(buf, count, n); break;
    case MESH_UINT64: mesh_divide_u64(buf, count, (uint64_t)n); break;
    case MESH_FP32: mesh_divide_f32(buf, count, (float)n); break;
    case MESH_FP64: mesh_divide_f64(buf, count, (double)n); break;
    case MESH_FP16: mesh_divide_f16(buf, count, (float)n); break;
    case MESH_BF16: mesh_divide_bf16(buf, count, (float)n); break;
    case MESH_FP8_E4M3: mesh_divide_e4m3(buf, count, (float)n); break;
    case MESH_FP8_E5M2: mesh_divide_e5m2(buf, count, (float)n); break;
    default: break;
    }
}
