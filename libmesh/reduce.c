/* CPU reductions. All-reduce bandwidth depends on these loops, so each (type, op) pair has its
 * own simple loop over restrict pointers that the compiler vectorises, chosen once per call;
 * a plain loop handles buffers that overlap. Narrow floats compute in fp32 and round once.
 * Signed integer sums and products run on the unsigned type of the same width: they wrap. */
#pragma GCC optimize("O3")

#include "libmesh/reduce.h"
#include "libmesh/config.h"
#include "libmesh/dtype.h"

#include <stdint.h>
#include <string.h>

/* Integer min/max, and float min/max that return NaN when either input is NaN. */
#define MESH_R_SUM(x, y)  ((x) + (y))
#define MESH_R_PROD(x, y) ((x) * (y))
#define MESH_R_MIN(x, y)  ((x) < (y) ? (x) : (y))
#define MESH_R_MAX(x, y)  ((x) > (y) ? (x) : (y))
#define MESH_R_FMIN(x, y) ((((x) < (y)) | ((x) != (x))) ? (x) : (y))
#define MESH_R_FMAX(x, y) ((((x) > (y)) | ((x) != (x))) ? (x) : (y))

#define MESH_R_ID(v) (v)

/* x86-64's baseline is SSE2; an AVX2 clone of each loop, chosen at load time, doubles the
 * vector width and makes the narrow-float conversions cheaper. Not under ThreadSanitizer: the
 * choosing runs at relocation, before its runtime, and its instrumentation faults there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__gnu_linux__) &&   \
    !defined(__SANITIZE_THREAD__)
#define MESH_REDUCE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MESH_REDUCE_CLONES
#endif

typedef void (*mesh_reduce2_fn)(void *d, const void *s, size_t n);
typedef void (*mesh_reduce3_fn)(void *d, const void *a, const void *b, size_t n);

typedef struct {
    mesh_reduce2_fn two;     /* d = d op s, no overlap */
    mesh_reduce3_fn three;   /* d = a op b, no overlap */
    mesh_reduce3_fn overlap; /* d = a op b, any aliasing */
} mesh_reduce_fns_t;

#define MESH_REDUCE_DEFINE(name, T, CT, LD, ST, OP)                                                \
    MESH_REDUCE_CLONES static void name##_2(void *dv, const void *sv, size_t n)                    \
    {                                                                                              \
        T *restrict d = dv;                                                                        \
        const T *restrict s = sv;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            CT x = LD(d[i]), y = LD(s[i]);                                                         \
            d[i] = ST(OP(x, y));                                                                   \
        }                                                                                          \
    }                                                                                              \
    MESH_REDUCE_CLONES static void name##_3(void *dv, const void *av, const void *bv, size_t n)    \
    {                                                                                              \
        T *restrict d = dv;                                                                        \
        const T *restrict a = av;                                                                  \
        const T *restrict b = bv;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            CT x = LD(a[i]), y = LD(b[i]);                                                         \
            d[i] = ST(OP(x, y));                                                                   \
        }                                                                                          \
    }                                                                                              \
    static void name##_o(void *dv, const void *av, const void *bv, size_t n)                       \
    {                                                                                              \
        T *d = dv;                                                                                 \
        const T *a = av, *b = bv;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            CT x = LD(a[i]), y = LD(b[i]);                                                         \
            d[i] = ST(OP(x, y));                                                                   \
        }                                                                                          \
    }

/* Integer types: signed sums and products use the unsigned functions. */
#define MESH_REDUCE_INT(tag, T, UT)                                                                \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_min, T, T, MESH_R_ID, MESH_R_ID, MESH_R_MIN)            \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_max, T, T, MESH_R_ID, MESH_R_ID, MESH_R_MAX)
#define MESH_REDUCE_UINT(tag, T)                                                                   \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_sum, T, T, MESH_R_ID, (T), MESH_R_SUM)                  \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_prod, T, T, MESH_R_ID, (T), MESH_R_PROD)                \
    MESH_REDUCE_INT(tag, T, T)
#define MESH_REDUCE_FLOAT(tag, T, CT, LD, ST)                                                      \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_sum, T, CT, LD, ST, MESH_R_SUM)                         \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_prod, T, CT, LD, ST, MESH_R_PROD)                       \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_min, T, CT, LD, ST, MESH_R_FMIN)                        \
    MESH_REDUCE_DEFINE(mesh_reduce_##tag##_max, T, CT, LD, ST, MESH_R_FMAX)

MESH_REDUCE_UINT(u8, uint8_t)
MESH_REDUCE_UINT(u32, uint32_t)
MESH_REDUCE_UINT(u64, uint64_t)
MESH_REDUCE_INT(i8, int8_t, uint8_t)
MESH_REDUCE_INT(i32, int32_t, uint32_t)
MESH_REDUCE_INT(i64, int64_t, uint64_t)
MESH_REDUCE_FLOAT(f32, float, float, MESH_R_ID, MESH_R_ID)
MESH_REDUCE_FLOAT(f64, double, double, MESH_R_ID, MESH_R_ID)
MESH_REDUCE_FLOAT(f16, uint16_t, float, mesh_fp16_to_float, mesh_float_to_fp16)
MESH_REDUCE_FLOAT(bf16, uint16_t, float, mesh_bf16_to_float, mesh_float_to_bf16)
MESH_REDUCE_FLOAT(e4m3, uint8_t, float, mesh_e4m3_to_float, mesh_float_to_e4m3)
MESH_REDUCE_FLOAT(e5m2, uint8_t, float, mesh_e5m2_to_float, mesh_float_to_e5m2)

#define MESH_FNS(name)                                                                             \
    {                                                                                              \
        name##_2, name##_3, name##_o                                                               \
    }
#define MESH_FNS_OPS(sum, prod, tag)                                                               \
    {                                                                                              \
        MESH_FNS(mesh_reduce_##sum##_sum), MESH_FNS(mesh_reduce_##prod##_prod),                    \
            MESH_FNS(mesh_reduce_##tag##_min), MESH_FNS(mesh_reduce_##tag##_max)                   \
    }

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

/* declared whatever the compiler, so that the knob means the same to every build */
static const mesh_config_entry_t mesh_reduce_entries[] = {
    {.name = "REDUCE_AVX2",
     .dflt = "yes",
     .type = MESH_CFG_BOOL,
     .doc = "Use the AVX2 loops for fp16 and bf16 reductions when the CPU has AVX2 and F16C."},
    {.name = NULL},
};

static const mesh_config_table_t mesh_reduce_config = {"reduce", mesh_reduce_entries};

mesh_status_t mesh_reduce_config_register(void)
{
    return mesh_config_register(&mesh_reduce_config);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define MESH_REDUCE_HAVE_AVX2 1

/* fp16 through the F16C conversion instructions and bf16 through AVX2 integer operations, eight
 * elements at a time, with the rounding of the portable code (NaNs stay NaN but come out quiet
 * from F16C). dst may equal a or b exactly. */
#define MESH_AVX2_TARGET __attribute__((target("avx2,f16c")))

MESH_AVX2_TARGET static inline __m256 mesh_avx2_ld_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

MESH_AVX2_TARGET static inline void mesh_avx2_st_f16(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p,
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

MESH_AVX2_TARGET static inline __m256 mesh_avx2_ld_bf16(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

MESH_AVX2_TARGET static inline void mesh_avx2_st_bf16(uint16_t *p, __m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    r = _mm256_srli_epi32(r, 16);
    /* NaN (|x| > inf as integers): keep the top bits, made quiet */
    __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000));
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, q, nan);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

#define MESH_AVX2_LOOP(name, T, EXPR)                                                              \
    MESH_AVX2_TARGET static void mesh_avx2_##T##_##name(uint16_t *d, const uint16_t *a,            \
                                                        const uint16_t *b, size_t n)               \
    {                                                                                              \
        size_t i = 0;                                                                              \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 x = mesh_avx2_ld_##T(a + i), y = mesh_avx2_ld_##T(b + i);                       \
            mesh_avx2_st_##T(d + i, EXPR);                                                         \
        }                                                                                          \
        if (i < n)                                                                                 \
            mesh_reduce_##T##_##name##_o(d + i, a + i, b + i, n - i);                              \
    }

/* min/max of AVX return the second operand when either is NaN; a NaN first operand is put
 * back by the blend. */
#define MESH_AVX2_NANFIX(r) _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
#define MESH_AVX2_TYPE(T)                                                                          \
    MESH_AVX2_LOOP(sum, T, _mm256_add_ps(x, y))                                                    \
    MESH_AVX2_LOOP(prod, T, _mm256_mul_ps(x, y))                                                   \
    MESH_AVX2_LOOP(min, T, MESH_AVX2_NANFIX(_mm256_min_ps(x, y)))                                  \
    MESH_AVX2_LOOP(max, T, MESH_AVX2_NANFIX(_mm256_max_ps(x, y)))
MESH_AVX2_TYPE(f16)
MESH_AVX2_TYPE(bf16)

/* The same with non-temporal stores, for results larger than the cache (d 32-byte aligned
 * after a head done the ordinary way). fp32 joins in here: its plain loops are vectorised by
 * the compiler already. */
MESH_AVX2_TARGET static inline __m256 mesh_avx2_ld_f32(const float *p)
{
    return _mm256_loadu_ps(p);
}
MESH_AVX2_TARGET static inline void mesh_avx2_nt_f32(float *p, __m256 v)
{
    _mm256_stream_ps(p, v);
}
MESH_AVX2_TARGET static inline void mesh_avx2_nt_f16(uint16_t *p, __m256 v)
{
    _mm_stream_si128((__m128i *)p,
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
MESH_AVX2_TARGET static inline void mesh_avx2_nt_bf16(uint16_t *p, __m256 v)
{
    _Alignas(16) uint16_t t[8];
    mesh_avx2_st_bf16(t, v);
    _mm_stream_si128((__m128i *)p, _mm_load_si128((const __m128i *)t));
}

#define MESH_AVX2_LOOP_NT(name, T, ET, EXPR)                                                       \
    MESH_AVX2_TARGET static void mesh_avx2_nt_##T##_##name(void *dv, const void *av,               \
                                                           const void *bv, size_t n)               \
    {                                                                                              \
        ET *d = dv;                                                                                \
        const ET *a = av, *b = bv;                                                                 \
        size_t i = ((32 - ((uintptr_t)d & 31)) & 31) / sizeof(ET);                                 \
        if (i > n)                                                                                 \
            i = n;                                                                                 \
        mesh_reduce_##T##_##name##_o(d, a, b, i);                                                  \
        for (; i + 8 <= n; i += 8) {                                                               \
            __m256 x = mesh_avx2_ld_##T(a + i), y = mesh_avx2_ld_##T(b + i);                       \
            mesh_avx2_nt_##T(d + i, EXPR);                                                         \
        }                                                                                          \
        _mm_sfence();                                                                              \
        if (i < n)                                                                                 \
            mesh_reduce_##T##_##name##_o(d + i, a + i, b + i, n - i);                              \
    }
#define MESH_AVX2_TYPE_NT(T, ET)                                                                   \
    MESH_AVX2_LOOP_NT(sum, T, ET, _mm256_add_ps(x, y))                                             \
    MESH_AVX2_LOOP_NT(prod, T, ET, _mm256_mul_ps(x, y))                                            \
    MESH_AVX2_LOOP_NT(min, T, ET, MESH_AVX2_NANFIX(_mm256_min_ps(x, y)))                           \
    MESH_AVX2_LOOP_NT(max, T, ET, MESH_AVX2_NANFIX(_mm256_max_ps(x, y)))
MESH_AVX2_TYPE_NT(f32, float)
MESH_AVX2_TYPE_NT(f16, uint16_t)
MESH_AVX2_TYPE_NT(bf16, uint16_t)

typedef void (*mesh_reduce_avx2_fn)(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n);
static const mesh_reduce_avx2_fn mesh_reduce_avx2_f16[MESH_MAX + 1] = {
    mesh_avx2_f16_sum, mesh_avx2_f16_prod, mesh_avx2_f16_min, mesh_avx2_f16_max};
static const mesh_reduce_avx2_fn mesh_reduce_avx2_bf16[MESH_MAX + 1] = {
    mesh_avx2_bf16_sum, mesh_avx2_bf16_prod, mesh_avx2_bf16_min, mesh_avx2_bf16_max};
static const mesh_reduce3_fn mesh_reduce_avx2_nt[3][MESH_MAX + 1] = {
    {mesh_avx2_nt_f32_sum, mesh_avx2_nt_f32_prod, mesh_avx2_nt_f32_min, mesh_avx2_nt_f32_max},
    {mesh_avx2_nt_f16_sum, mesh_avx2_nt_f16_prod, mesh_avx2_nt_f16_min, mesh_avx2_nt_f16_max},
    {mesh_avx2_nt_bf16_sum, mesh_avx2_nt_bf16_prod, mesh_avx2_nt_bf16_min, mesh_avx2_nt_bf16_max}};

static int mesh_reduce_avx2_ok(void)
{
    static int ok = -1; /* racing first calls compute the same answer */
    if (ok < 0)
        ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
             (mesh_reduce_config_register() != MESH_OK || mesh_config_bool("REDUCE_AVX2"));
    return ok;
}

/* The AVX2 loop for fp16 and bf16 when the CPU has it, else NULL. */
static mesh_reduce_avx2_fn mesh_reduce_avx2(mesh_dtype_t dtype, mesh_op_t op)
{
    if (!mesh_reduce_avx2_ok())
        return NULL;
    return dtype == MESH_FP16   ? mesh_reduce_avx2_f16[op]
           : dtype == MESH_BF16 ? mesh_reduce_avx2_bf16[op]
                                : NULL;
}

/* The non-temporal loop for fp32, fp16 and bf16 when the CPU has AVX2, else NULL. */
static mesh_reduce3_fn mesh_reduce_avx2_stream(mesh_dtype_t dtype, mesh_op_t op)
{
    if (!mesh_reduce_avx2_ok())
        return NULL;
    return dtype == MESH_FP32   ? mesh_reduce_avx2_nt[0][op]
           : dtype == MESH_FP16 ? mesh_reduce_avx2_nt[1][op]
           : dtype == MESH_BF16 ? mesh_reduce_avx2_nt[2][op]
                                : NULL;
}
#else
#define MESH_REDUCE_HAVE_AVX2 0
#endif

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

/* Element loops use typed pointers, so buffers not aligned to their element size (legal for
 * users: any byte address works) go through aligned bounce buffers, a chunk at a time. */
#define MESH_REDUCE_BOUNCE_BYTES 16384

static int mesh_reduce_misaligned(size_t ds, const void *a, const void *b, const void *c)
{
    uintptr_t m = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return ds > 1 && (m & (ds - 1)) != 0;
}

static void mesh_reduce_bounced(void *dst, const void *a, const void *b, size_t count,
                                mesh_dtype_t dtype, mesh_op_t op)
{
    _Alignas(64) unsigned char ta[MESH_REDUCE_BOUNCE_BYTES], tb[MESH_REDUCE_BOUNCE_BYTES];
    size_t ds = mesh_dtype_size(dtype), chunk = MESH_REDUCE_BOUNCE_BYTES / ds;
    for (size_t i = 0; i < count; i += chunk) {
        size_t n = count - i < chunk ? count - i : chunk;
        memcpy(ta, (const char *)a + i * ds, n * ds);
        memcpy(tb, (const char *)b + i * ds, n * ds);
        mesh_reduce_local(ta, tb, n, dtype, op);
        memcpy((char *)dst + i * ds, ta, n * ds);
    }
}

void mesh_reduce_local(void *dst, const void *src, size_t count, mesh_dtype_t dtype, mesh_op_t op)
{
    const mesh_reduce_fns_t *f = mesh_reduce_fns(dtype, op);
    if (f == NULL || count == 0)
        return;
    if (mesh_reduce_misaligned(mesh_dtype_size(dtype), dst, src, dst)) {
        mesh_reduce_bounced(dst, dst, src, count, dtype, op);
        return;
    }
    if (mesh_reduce_overlap(dst, src, count * mesh_dtype_size(dtype)))
        f->overlap(dst, dst, src, count);
#if MESH_REDUCE_HAVE_AVX2
    else if (mesh_reduce_avx2(dtype, op) != NULL)
        mesh_reduce_avx2(dtype, op)(dst, dst, src, count);
#endif
    else
        f->two(dst, src, count);
}

void mesh_reduce_local3(void *dst, const void *a, const void *b, size_t count, mesh_dtype_t dtype,
                        mesh_op_t op)
{
    const mesh_reduce_fns_t *f = mesh_reduce_fns(dtype, op);
    if (f == NULL || count == 0)
        return;
    if (mesh_reduce_misaligned(mesh_dtype_size(dtype), dst, a, b)) {
        mesh_reduce_bounced(dst, a, b, count, dtype, op);
        return;
    }
    size_t bytes = count * mesh_dtype_size(dtype);
    int oa = mesh_reduce_overlap(dst, a, bytes), ob = mesh_reduce_overlap(dst, b, bytes);
    /* Every op is commutative, so dst aliasing either input is a two-operand reduction. */
#if MESH_REDUCE_HAVE_AVX2
    if ((dst == a || !oa) && (dst == b || !ob) && mesh_reduce_avx2(dtype, op) != NULL)
        mesh_reduce_avx2(dtype, op)(dst, a, b, count);
    else
#endif
        if (dst == a && !ob)
        f->two(dst, b, count);
    else if (dst == b && !oa)
        f->two(dst, a, count);
    else if (oa || ob)
        f->overlap(dst, a, b, count);
    else
        f->three(dst, a, b, count);
}

void mesh_reduce_local3_stream(void *dst, const void *a, const void *b, size_t count,
                               mesh_dtype_t dtype, mesh_op_t op)
{
#if MESH_REDUCE_HAVE_AVX2
    size_t ds = mesh_dtype_size(dtype), bytes = count * ds;
    mesh_reduce3_fn nt = mesh_reduce_fns(dtype, op) ? mesh_reduce_avx2_stream(dtype, op) : NULL;
    if (nt != NULL && !mesh_reduce_misaligned(ds, dst, a, b) &&
        !mesh_reduce_overlap(dst, a, bytes) && !mesh_reduce_overlap(dst, b, bytes)) {
        nt(dst, a, b, count);
        return;
    }
#endif
    mesh_reduce_local3(dst, a, b, count, dtype, op);
}

/* dst = src * scalar and buf = buf / n, for in-place or disjoint buffers. */
#define MESH_SCALE_DEFINE(tag, T, CT, LD, ST)                                                      \
    __attribute__((unused)) static void mesh_scale_##tag(void *dv, const void *sv, size_t n, CT c) \
    {                                                                                              \
        T *d = dv;                                                                                 \
        const T *s = sv;                                                                           \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = ST(LD(s[i]) * c);                                                               \
    }                                                                                              \
    static void mesh_divide_##tag(void *bv, size_t n, CT c)                                        \
    {                                                                                              \
        T *b = bv;                                                                                 \
        for (size_t i = 0; i < n; i++)                                                             \
            b[i] = ST(LD(b[i]) / c);                                                               \
    }

MESH_SCALE_DEFINE(u8, uint8_t, uint32_t, MESH_R_ID, (uint8_t))
MESH_SCALE_DEFINE(i8, int8_t, int32_t, MESH_R_ID, (int8_t))
MESH_SCALE_DEFINE(u32, uint32_t, uint32_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(i32, int32_t, int32_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(u64, uint64_t, uint64_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(i64, int64_t, int64_t, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(f32, float, float, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(f64, double, double, MESH_R_ID, MESH_R_ID)
MESH_SCALE_DEFINE(f16, uint16_t, float, mesh_fp16_to_float, mesh_float_to_fp16)
MESH_SCALE_DEFINE(bf16, uint16_t, float, mesh_bf16_to_float, mesh_float_to_bf16)
MESH_SCALE_DEFINE(e4m3, uint8_t, float, mesh_e4m3_to_float, mesh_float_to_e4m3)
MESH_SCALE_DEFINE(e5m2, uint8_t, float, mesh_e5m2_to_float, mesh_float_to_e5m2)

void mesh_reduce_scale(void *dst, const void *src, size_t count, mesh_dtype_t dtype,
                       const void *scalar)
{
    if (count == 0)
        return;
    size_t ds = mesh_dtype_size(dtype);
    if (mesh_reduce_misaligned(ds, dst, src, scalar)) {
        _Alignas(64) unsigned char t[MESH_REDUCE_BOUNCE_BYTES], sc[16];
        memcpy(sc, scalar, ds);
        for (size_t i = 0, chunk = sizeof(t) / ds; i < count; i += chunk) {
            size_t n = count - i < chunk ? count - i : chunk;
            memcpy(t, (const char *)src + i * ds, n * ds);
            mesh_reduce_scale(t, t, n, dtype, sc);
            memcpy((char *)dst + i * ds, t, n * ds);
        }
        return;
    }
    switch (dtype) {
    /* Signed products wrap: they run on the unsigned type of the same width. */
    case MESH_INT8:
    case MESH_UINT8:
        mesh_scale_u8(dst, src, count, *(const uint8_t *)scalar);
        break;
    case MESH_INT32:
    case MESH_UINT32:
        mesh_scale_u32(dst, src, count, *(const uint32_t *)scalar);
        break;
    case MESH_INT64:
    case MESH_UINT64:
        mesh_scale_u64(dst, src, count, *(const uint64_t *)scalar);
        break;
    case MESH_FP32:
        mesh_scale_f32(dst, src, count, *(const float *)scalar);
        break;
    case MESH_FP64:
        mesh_scale_f64(dst, src, count, *(const double *)scalar);
        break;
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
    default:
        break;
    }
}

void mesh_reduce_divide(void *buf, size_t count, mesh_dtype_t dtype, int n)
{
    if (count == 0 || n == 0)
        return;
    size_t ds = mesh_dtype_size(dtype);
    if (mesh_reduce_misaligned(ds, buf, buf, buf)) {
        _Alignas(64) unsigned char t[MESH_REDUCE_BOUNCE_BYTES];
        for (size_t i = 0, chunk = sizeof(t) / ds; i < count; i += chunk) {
            size_t k = count - i < chunk ? count - i : chunk;
            memcpy(t, (char *)buf + i * ds, k * ds);
            mesh_reduce_divide(t, k, dtype, n);
            memcpy((char *)buf + i * ds, t, k * ds);
        }
        return;
    }
    switch (dtype) {
    case MESH_INT8:
        mesh_divide_i8(buf, count, n);
        break;
    case MESH_UINT8:
        mesh_divide_u8(buf, count, (uint32_t)n);
        break;
    case MESH_INT32:
        mesh_divide_i32(buf, count, n);
        break;
    case MESH_UINT32:
        mesh_divide_u32(buf, count, (uint32_t)n);
        break;
    case MESH_INT64:
        mesh_divide_i64(buf, count, n);
        break;
    case MESH_UINT64:
        mesh_divide_u64(buf, count, (uint64_t)n);
        break;
    case MESH_FP32:
        mesh_divide_f32(buf, count, (float)n);
        break;
    case MESH_FP64:
        mesh_divide_f64(buf, count, (double)n);
        break;
    case MESH_FP16:
        mesh_divide_f16(buf, count, (float)n);
        break;
    case MESH_BF16:
        mesh_divide_bf16(buf, count, (float)n);
        break;
    case MESH_FP8_E4M3:
        mesh_divide_e4m3(buf, count, (float)n);
        break;
    case MESH_FP8_E5M2:
        mesh_divide_e5m2(buf, count, (float)n);
        break;
    default:
        break;
    }
}
