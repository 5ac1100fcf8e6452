/* Device reductions: dst = a op b, dst = src * scalar and buf = buf / n for every dtype, with the
 * arithmetic of libmesh/reduce.c so that a device's result equals the host's bit for bit:
 * narrow floats convert with dtype.h's own functions, compute in fp32 and round once; signed
 * sums and products run on the unsigned type of the same width; float min/max return the first
 * operand when it is NaN. NaNs made by arithmetic follow x86's rule (the first NaN operand,
 * made quiet; an invalid operation gives the default NaN), where a GPU would give its own
 * canonical NaN.
 *
 * Kernels have C names that cu_launch.c builds: mesh_cu_<kind>_<tag>[_<op>] (cu_kernels.h).
 * Each runs a grid-stride loop over 16-byte vectors when every pointer is 16-byte aligned, over
 * elements when they are aligned to the element, else over bytes (any address is legal). Built
 * with nvcc into a fatbin embedded in libmesh (libmesh/cuda/Makefile.inc); compiled without
 * fast-math, so that fp32 keeps subnormals and divisions round correctly, as on the host. */
extern "C" {
#include "libmesh/dtype.h"
}

#include <stddef.h>
#include <stdint.h>

typedef unsigned long long mesh_cu_n_t;

/* ---------------------------------------------------------------- NaNs as on x86 */

/* The arithmetic (everything above the loop) also compiles as host C++ without nvcc: the test
 * tests/gpu/test_cuda_arith.cc checks it against reduce.c element by element on every machine,
 * those without a device included. */
#ifdef __CUDACC__
#define MESH_CU_HD __host__ __device__ __forceinline__
#else
#define MESH_CU_HD inline
#endif

MESH_CU_HD uint64_t mesh_cu_d2u(double d)
{
    union {
        double d;
        uint64_t u;
    } b = {d};
    return b.u;
}

MESH_CU_HD double mesh_cu_u2d(uint64_t u)
{
    union {
        uint64_t u;
        double d;
    } b = {u};
    return b.d;
}

MESH_CU_HD float mesh_cu_nan(float r, float x, float y)
{
    if (r == r)
        return r;
    if (x != x)
        return mesh_dtype_u2f_(mesh_dtype_f2u_(x) | 0x00400000u);
    if (y != y)
        return mesh_dtype_u2f_(mesh_dtype_f2u_(y) | 0x00400000u);
    return mesh_dtype_u2f_(0xffc00000u);
}

MESH_CU_HD double mesh_cu_nan(double r, double x, double y)
{
    if (r == r)
        return r;
    if (x != x)
        return mesh_cu_u2d(mesh_cu_d2u(x) | 0x0008000000000000ull);
    if (y != y)
        return mesh_cu_u2d(mesh_cu_d2u(y) | 0x0008000000000000ull);
    return mesh_cu_u2d(0xfff8000000000000ull);
}

/* IEEE operations rounded to nearest, never contracted into fused multiply-adds. */
#if defined(__CUDA_ARCH__)
#define MESH_CU_FADD(x, y) __fadd_rn(x, y)
#define MESH_CU_FMUL(x, y) __fmul_rn(x, y)
#define MESH_CU_FDIV(x, y) __fdiv_rn(x, y)
#define MESH_CU_DADD(x, y) __dadd_rn(x, y)
#define MESH_CU_DMUL(x, y) __dmul_rn(x, y)
#define MESH_CU_DDIV(x, y) __ddiv_rn(x, y)
#else
#define MESH_CU_FADD(x, y) ((x) + (y))
#define MESH_CU_FMUL(x, y) ((x) * (y))
#define MESH_CU_FDIV(x, y) ((x) / (y))
#define MESH_CU_DADD(x, y) ((x) + (y))
#define MESH_CU_DMUL(x, y) ((x) * (y))
#define MESH_CU_DDIV(x, y) ((x) / (y))
#endif

/* ---------------------------------------------------------------- loads and stores per type */

/* T: the stored type; C: the type computed in; ld/st convert (reduce.c's LD and ST). */
#define MESH_CU_CONV(name, T_, C_, LD, ST)                                                         \
    struct name {                                                                                  \
        typedef T_ T;                                                                              \
        typedef C_ C;                                                                              \
        static MESH_CU_HD C ld(T v) { return LD(v); }                                              \
        static MESH_CU_HD T st(C v) { return ST(v); }                                              \
    };
#define MESH_CU_ID(v) (v)
MESH_CU_CONV(cv_u8, uint8_t, uint8_t, MESH_CU_ID, (uint8_t))
MESH_CU_CONV(cv_i8, int8_t, int8_t, MESH_CU_ID, (int8_t))
MESH_CU_CONV(cv_u32, uint32_t, uint32_t, MESH_CU_ID, MESH_CU_ID)
MESH_CU_CONV(cv_i32, int32_t, int32_t, MESH_CU_ID, MESH_CU_ID)
MESH_CU_CONV(cv_u64, uint64_t, uint64_t, MESH_CU_ID, MESH_CU_ID)
MESH_CU_CONV(cv_i64, int64_t, int64_t, MESH_CU_ID, MESH_CU_ID)
MESH_CU_CONV(cv_f32, float, float, MESH_CU_ID, MESH_CU_ID)
MESH_CU_CONV(cv_f64, double, double, MESH_CU_ID, MESH_CU_ID)
MESH_CU_CONV(cv_f16, uint16_t, float, mesh_fp16_to_float, mesh_float_to_fp16)
MESH_CU_CONV(cv_bf16, uint16_t, float, mesh_bf16_to_float, mesh_float_to_bf16)
MESH_CU_CONV(cv_e4m3, uint8_t, float, mesh_e4m3_to_float, mesh_float_to_e4m3)
MESH_CU_CONV(cv_e5m2, uint8_t, float, mesh_e5m2_to_float, mesh_float_to_e5m2)

/* ---------------------------------------------------------------- operations */

/* Arithmetic in a float type goes through mesh_cu_nan; integer arithmetic is plain. The
 * integer casts of reduce.c (uint8_t sums computed in int, then truncated) come from st(). */
template <typename C> struct mesh_cu_arith {
    static MESH_CU_HD C sum(C x, C y) { return x + y; }
    static MESH_CU_HD C prod(C x, C y) { return x * y; }
    static MESH_CU_HD C div(C x, C y) { return x / y; }
};
template <> struct mesh_cu_arith<float> {
    static MESH_CU_HD float sum(float x, float y) { return mesh_cu_nan(MESH_CU_FADD(x, y), x, y); }
    static MESH_CU_HD float prod(float x, float y) { return mesh_cu_nan(MESH_CU_FMUL(x, y), x, y); }
    static MESH_CU_HD float div(float x, float y) { return mesh_cu_nan(MESH_CU_FDIV(x, y), x, y); }
};
template <> struct mesh_cu_arith<double> {
    static MESH_CU_HD double sum(double x, double y)
    {
        return mesh_cu_nan(MESH_CU_DADD(x, y), x, y);
    }
    static MESH_CU_HD double prod(double x, double y)
    {
        return mesh_cu_nan(MESH_CU_DMUL(x, y), x, y);
    }
    static MESH_CU_HD double div(double x, double y)
    {
        return mesh_cu_nan(MESH_CU_DDIV(x, y), x, y);
    }
};

/* Element operations: f(x, y) on stored values. y is the scalar for scale and divide. */
template <class V> struct op_sum {
    typedef typename V::C C;
    MESH_CU_HD typename V::T operator()(typename V::T x, typename V::T y) const
    {
        return V::st(mesh_cu_arith<C>::sum(V::ld(x), V::ld(y)));
    }
};
template <class V> struct op_prod {
    typedef typename V::C C;
    MESH_CU_HD typename V::T operator()(typename V::T x, typename V::T y) const
    {
        return V::st(mesh_cu_arith<C>::prod(V::ld(x), V::ld(y)));
    }
};
/* reduce.c's MESH_R_MIN/MAX for integers, MESH_R_FMIN/FMAX for floats: the same expression
 * serves both (x != x is false for integers). */
template <class V> struct op_min {
    MESH_CU_HD typename V::T operator()(typename V::T x, typename V::T y) const
    {
        typename V::C a = V::ld(x), b = V::ld(y);
        return V::st(((a < b) | (a != a)) ? a : b);
    }
};
template <class V> struct op_max {
    MESH_CU_HD typename V::T operator()(typename V::T x, typename V::T y) const
    {
        typename V::C a = V::ld(x), b = V::ld(y);
        return V::st(((a > b) | (a != a)) ? a : b);
    }
};
/* Unary: the scalar C (the type reduce.c's MESH_SCALE_DEFINE multiplies or divides by). */
template <class V, typename C> struct op_scale {
    C c;
    MESH_CU_HD typename V::T operator()(typename V::T x, typename V::T) const
    {
        return V::st(mesh_cu_arith<C>::prod(V::ld(x), c));
    }
};
template <class V, typename C> struct op_divide {
    C c;
    MESH_CU_HD typename V::T operator()(typename V::T x, typename V::T) const
    {
        return V::st(mesh_cu_arith<C>::div(V::ld(x), c));
    }
};

/* ---------------------------------------------------------------- the loop */
#ifdef __CUDACC__

template <typename T> __device__ __forceinline__ T mesh_cu_ld_bytes(const unsigned char *p)
{
    union {
        T v;
        unsigned char b[sizeof(T)];
    } u;
#pragma unroll
    for (unsigned k = 0; k < sizeof(T); k++)
        u.b[k] = p[k];
    return u.v;
}

template <typename T> __device__ __forceinline__ void mesh_cu_st_bytes(unsigned char *p, T v)
{
    union {
        T v;
        unsigned char b[sizeof(T)];
    } u;
    u.v = v;
#pragma unroll
    for (unsigned k = 0; k < sizeof(T); k++)
        p[k] = u.b[k];
}

/* d[i] = f(a[i], b[i]) for i < n; b == NULL for unary operations (f ignores its y). dst may
 * equal a or b exactly: each element is read before it is written, by the same thread. */
template <typename T, class F>
__device__ __forceinline__ void mesh_cu_map(void *dv, const void *av, const void *bv, mesh_cu_n_t n,
                                            F f)
{
    const bool unary = bv == NULL;
    const mesh_cu_n_t tid = blockIdx.x * (mesh_cu_n_t)blockDim.x + threadIdx.x;
    const mesh_cu_n_t stride = (mesh_cu_n_t)gridDim.x * blockDim.x;
    const uintptr_t m = (uintptr_t)dv | (uintptr_t)av | (uintptr_t)bv;
    mesh_cu_n_t i = 0;
    if ((m & 15) == 0) {
        enum { V = 16 / sizeof(T) };
        union vec {
            uint4 q;
            T e[V];
        };
        const mesh_cu_n_t nv = n / V;
        const uint4 *a = (const uint4 *)av, *b = (const uint4 *)bv;
        uint4 *d = (uint4 *)dv;
        for (mesh_cu_n_t k = tid; k < nv; k += stride) {
            vec x, y, r;
            x.q = a[k];
            y.q = unary ? x.q : b[k];
#pragma unroll
            for (int e = 0; e < V; e++)
                r.e[e] = f(x.e[e], y.e[e]);
            d[k] = r.q;
        }
        i = nv * V;
    }
    if ((m & (sizeof(T) - 1)) == 0) {
        const T *a = (const T *)av, *b = (const T *)bv;
        T *d = (T *)dv;
        for (mesh_cu_n_t k = i + tid; k < n; k += stride)
            d[k] = f(a[k], unary ? a[k] : b[k]);
    } else {
        const unsigned char *a = (const unsigned char *)av, *b = (const unsigned char *)bv;
        unsigned char *d = (unsigned char *)dv;
        for (mesh_cu_n_t k = tid; k < n; k += stride) {
            T x = mesh_cu_ld_bytes<T>(a + k * sizeof(T));
            T y = unary ? x : mesh_cu_ld_bytes<T>(b + k * sizeof(T));
            mesh_cu_st_bytes<T>(d + k * sizeof(T), f(x, y));
        }
    }
}

/* ---------------------------------------------------------------- the kernels */

#define MESH_CU_REDUCE(tag, op)                                                                    \
    extern "C" __global__ void mesh_cu_reduce_##tag##_##op(void *d, const void *a, const void *b,  \
                                                           mesh_cu_n_t n)                          \
    {                                                                                              \
        mesh_cu_map<cv_##tag::T>(d, a, b, n, op_##op<cv_##tag>());                                 \
    }
/* Types whose signed sums and products run on the unsigned kernels have min/max only. */
#define MESH_CU_REDUCE_MINMAX(tag) MESH_CU_REDUCE(tag, min) MESH_CU_REDUCE(tag, max)
#define MESH_CU_REDUCE_ALL(tag)                                                                    \
    MESH_CU_REDUCE(tag, sum) MESH_CU_REDUCE(tag, prod) MESH_CU_REDUCE_MINMAX(tag)

MESH_CU_REDUCE_ALL(u8)
MESH_CU_REDUCE_ALL(u32)
MESH_CU_REDUCE_ALL(u64)
MESH_CU_REDUCE_MINMAX(i8)
MESH_CU_REDUCE_MINMAX(i32)
MESH_CU_REDUCE_MINMAX(i64)
MESH_CU_REDUCE_ALL(f16)
MESH_CU_REDUCE_ALL(bf16)
MESH_CU_REDUCE_ALL(f32)
MESH_CU_REDUCE_ALL(f64)
MESH_CU_REDUCE_ALL(e4m3)
MESH_CU_REDUCE_ALL(e5m2)

/* scale: reduce.c scales signed integers on the unsigned kernels too; divide keeps the sign.
 * C is the scalar's type there (MESH_SCALE_DEFINE's CT). */
#define MESH_CU_SCALE(tag, C)                                                                      \
    extern "C" __global__ void mesh_cu_scale_##tag(void *d, const void *s, mesh_cu_n_t n, C c)     \
    {                                                                                              \
        mesh_cu_map<cv_##tag::T>(d, s, NULL, n, op_scale<cv_##tag, C>{c});                         \
    }
#define MESH_CU_DIVIDE(tag, C)                                                                     \
    extern "C" __global__ void mesh_cu_divide_##tag(void *b, mesh_cu_n_t n, C c)                   \
    {                                                                                              \
        mesh_cu_map<cv_##tag::T>(b, b, NULL, n, op_divide<cv_##tag, C>{c});                        \
    }

MESH_CU_SCALE(u8, uint32_t)
MESH_CU_SCALE(u32, uint32_t)
MESH_CU_SCALE(u64, uint64_t)
MESH_CU_SCALE(f16, float)
MESH_CU_SCALE(bf16, float)
MESH_CU_SCALE(f32, float)
MESH_CU_SCALE(f64, double)
MESH_CU_SCALE(e4m3, float)
MESH_CU_SCALE(e5m2, float)

MESH_CU_DIVIDE(u8, uint32_t)
MESH_CU_DIVIDE(i8, int32_t)
MESH_CU_DIVIDE(u32, uint32_t)
MESH_CU_DIVIDE(i32, int32_t)
MESH_CU_DIVIDE(u64, uint64_t)
MESH_CU_DIVIDE(i64, int64_t)
MESH_CU_DIVIDE(f16, float)
MESH_CU_DIVIDE(bf16, float)
MESH_CU_DIVIDE(f32, float)
MESH_CU_DIVIDE(f64, double)
MESH_CU_DIVIDE(e4m3, float)
MESH_CU_DIVIDE(e5m2, float)
#endif /* __CUDACC__ */
