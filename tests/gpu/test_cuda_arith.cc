/* The arithmetic of the device kernels (libmesh/cuda/cu_kernels.cu), compiled for the host,
 * against the host reductions (libmesh/reduce.c) element by element: every dtype x op of the
 * reductions, scale and divide, on random bits (so every special value: NaNs, infinities,
 * subnormals, overflow of the narrow formats, integer wrapping), bitwise. Where the host's
 * result is a NaN the kernels' must be a NaN too: the host's NaN payloads depend on the
 * compiler's operand order and the CPU's conversion instructions. Runs on every machine; the
 * GPU tests check the kernels themselves on a device. */
#include "libmesh/cuda/cu_kernels.cu"

extern "C" {
#include "libmesh/reduce.h"
}
#include "tests/harness/harness.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 100003

static uint64_t rng = 0x2545f4914f6cdd1dull;
static long nan_payloads;

static uint64_t next()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

template <typename T, class F> static void run(F f, const void *a, const void *b, void *d)
{
    const T *x = (const T *)a, *y = (const T *)(b ? b : a);
    T *r = (T *)d;
    for (size_t i = 0; i < N; i++)
        r[i] = f(x[i], y[i]);
}

static void compare(mesh_dtype_t dt, const void *got, const void *want, const char *what, int arg)
{
    size_t ds = mesh_dtype_size(dt);
    for (size_t i = 0; i < N; i++) {
        if (memcmp((const char *)got + i * ds, (const char *)want + i * ds, ds) == 0)
            continue;
        double g = mesh_dtype_get(dt, got, i), w = mesh_dtype_get(dt, want, i);
        if (mesh_dtype_is_float(dt) && g != g && w != w) {
            nan_payloads++;
            continue;
        }
        CHECK_MSG(0, "%s (%d) %s element %zu: kernel %.17g host %.17g", what, arg,
                  mesh_dtype_name(dt), i, g, w);
    }
}

/* The kernels' name tags as cu_launch.c picks them: sums and products of signed integers on
 * the unsigned types. */
#define MESH_T_REDUCE(dt, arith, mm)                                                               \
    case dt:                                                                                       \
        if (op == MESH_SUM)                                                                        \
            run<cv_##arith::T>(op_sum<cv_##arith>(), a, b, d);                                     \
        if (op == MESH_PROD)                                                                       \
            run<cv_##arith::T>(op_prod<cv_##arith>(), a, b, d);                                    \
        if (op == MESH_MIN)                                                                        \
            run<cv_##mm::T>(op_min<cv_##mm>(), a, b, d);                                           \
        if (op == MESH_MAX)                                                                        \
            run<cv_##mm::T>(op_max<cv_##mm>(), a, b, d);                                           \
        break;

static void kernel_reduce(mesh_dtype_t dt, mesh_op_t op, const void *a, const void *b, void *d)
{
    switch (dt) {
        MESH_T_REDUCE(MESH_INT8, u8, i8)
        MESH_T_REDUCE(MESH_UINT8, u8, u8)
        MESH_T_REDUCE(MESH_INT32, u32, i32)
        MESH_T_REDUCE(MESH_UINT32, u32, u32)
        MESH_T_REDUCE(MESH_INT64, u64, i64)
        MESH_T_REDUCE(MESH_UINT64, u64, u64)
        MESH_T_REDUCE(MESH_FP16, f16, f16)
        MESH_T_REDUCE(MESH_BF16, bf16, bf16)
        MESH_T_REDUCE(MESH_FP32, f32, f32)
        MESH_T_REDUCE(MESH_FP64, f64, f64)
        MESH_T_REDUCE(MESH_FP8_E4M3, e4m3, e4m3)
        MESH_T_REDUCE(MESH_FP8_E5M2, e5m2, e5m2)
    default:
        CHECK(0);
    }
}

/* scale's scalar as cu_launch.c passes it */
static void kernel_scale(mesh_dtype_t dt, const void *a, const unsigned char *s, void *d)
{
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    memcpy(&u8, s, 1), memcpy(&u16, s, 2), memcpy(&u32, s, 4), memcpy(&u64, s, 8);
    memcpy(&f32, s, 4), memcpy(&f64, s, 8);
    switch (dt) {
    case MESH_INT8:
    case MESH_UINT8:
        run<uint8_t>(op_scale<cv_u8, uint32_t>{u8}, a, NULL, d);
        break;
    case MESH_INT32:
    case MESH_UINT32:
        run<uint32_t>(op_scale<cv_u32, uint32_t>{u32}, a, NULL, d);
        break;
    case MESH_INT64:
    case MESH_UINT64:
        run<uint64_t>(op_scale<cv_u64, uint64_t>{u64}, a, NULL, d);
        break;
    case MESH_FP16:
        run<uint16_t>(op_scale<cv_f16, float>{mesh_fp16_to_float(u16)}, a, NULL, d);
        break;
    case MESH_BF16:
        run<uint16_t>(op_scale<cv_bf16, float>{mesh_bf16_to_float(u16)}, a, NULL, d);
        break;
    case MESH_FP32:
        run<float>(op_scale<cv_f32, float>{f32}, a, NULL, d);
        break;
    case MESH_FP64:
        run<double>(op_scale<cv_f64, double>{f64}, a, NULL, d);
        break;
    case MESH_FP8_E4M3:
        run<uint8_t>(op_scale<cv_e4m3, float>{mesh_e4m3_to_float(u8)}, a, NULL, d);
        break;
    case MESH_FP8_E5M2:
        run<uint8_t>(op_scale<cv_e5m2, float>{mesh_e5m2_to_float(u8)}, a, NULL, d);
        break;
    default:
        CHECK(0);
    }
}

static void kernel_divide(mesh_dtype_t dt, const void *a, int n, void *d)
{
    switch (dt) {
    case MESH_INT8:
        run<int8_t>(op_divide<cv_i8, int32_t>{n}, a, NULL, d);
        break;
    case MESH_UINT8:
        run<uint8_t>(op_divide<cv_u8, uint32_t>{(uint32_t)n}, a, NULL, d);
        break;
    case MESH_INT32:
        run<int32_t>(op_divide<cv_i32, int32_t>{n}, a, NULL, d);
        break;
    case MESH_UINT32:
        run<uint32_t>(op_divide<cv_u32, uint32_t>{(uint32_t)n}, a, NULL, d);
        break;
    case MESH_INT64:
        run<int64_t>(op_divide<cv_i64, int64_t>{n}, a, NULL, d);
        break;
    case MESH_UINT64:
        run<uint64_t>(op_divide<cv_u64, uint64_t>{(uint64_t)n}, a, NULL, d);
        break;
    case MESH_FP16:
        run<uint16_t>(op_divide<cv_f16, float>{(float)n}, a, NULL, d);
        break;
    case MESH_BF16:
        run<uint16_t>(op_divide<cv_bf16, float>{(float)n}, a, NULL, d);
        break;
    case MESH_FP32:
        run<float>(op_divide<cv_f32, float>{(float)n}, a, NULL, d);
        break;
    case MESH_FP64:
        run<double>(op_divide<cv_f64, double>{(double)n}, a, NULL, d);
        break;
    case MESH_FP8_E4M3:
        run<uint8_t>(op_divide<cv_e4m3, float>{(float)n}, a, NULL, d);
        break;
    case MESH_FP8_E5M2:
        run<uint8_t>(op_divide<cv_e5m2, float>{(float)n}, a, NULL, d);
        break;
    default:
        CHECK(0);
    }
}

/* Random bits; for fp32 and fp64 two elements in three get a smaller exponent, so that sums
 * and products are mostly finite and round. */
static void fill(mesh_dtype_t dt, unsigned char *buf)
{
    size_t ds = mesh_dtype_size(dt);
    for (size_t i = 0; i < N * ds; i++)
        buf[i] = (unsigned char)next();
    for (size_t i = 0; i < N; i++) {
        if (i % 3 == 0)
            continue;
        if (dt == MESH_FP32)
            ((uint32_t *)buf)[i] &= 0xbfffffffu;
        if (dt == MESH_FP64)
            ((uint64_t *)buf)[i] &= 0xbfffffffffffffffull;
    }
}

int main()
{
    static unsigned char a[N * 8], b[N * 8], want[N * 8], got[N * 8], s[8];
    for (int d = 0; d < MESH_DTYPE_COUNT; d++) {
        mesh_dtype_t dt = (mesh_dtype_t)d;
        for (int op = MESH_SUM; op <= MESH_MAX; op++) {
            fill(dt, a);
            fill(dt, b);
            mesh_reduce_local3(want, a, b, N, dt, (mesh_op_t)op);
            kernel_reduce(dt, (mesh_op_t)op, a, b, got);
            compare(dt, got, want, "reduce", op);
        }
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 8; j++)
                s[j] = (unsigned char)next();
            mesh_reduce_scale(want, a, N, dt, s);
            kernel_scale(dt, a, s, got);
            compare(dt, got, want, "scale", k);
        }
        for (int n = 1; n <= 8; n++) {
            memcpy(want, a, N * mesh_dtype_size(dt));
            mesh_reduce_divide(want, N, dt, n);
            kernel_divide(dt, a, n, got);
            compare(dt, got, want, "divide", n);
        }
        printf("ok: %s\n", mesh_dtype_name(dt));
    }
    printf("NaN results with other bits than the host's: %ld\n", nan_payloads);
    return 0;
}
