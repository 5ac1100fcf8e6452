/* Local reductions: every dtype x op against values computed in double on small integers (exact
 * in every type), at counts and offsets that cover vector bodies and tails, with every aliasing
 * of the operands; integer wrap-around, NaN propagation, single rounding of narrow floats, scale
 * and the AVG divide. */
#include "tests/harness/harness.h"
#include "libmesh/dtype.h"
#include "libmesh/reduce.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXN 4200

static const mesh_dtype_t dtypes[] = {MESH_INT8,  MESH_UINT8,  MESH_INT32,    MESH_UINT32,
                                      MESH_INT64, MESH_UINT64, MESH_FP16,     MESH_BF16,
                                      MESH_FP32,  MESH_FP64,   MESH_FP8_E4M3, MESH_FP8_E5M2};
static const mesh_op_t ops[] = {MESH_SUM, MESH_PROD, MESH_MIN, MESH_MAX};
static const size_t counts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 1000, 4097};

static int is_unsigned(mesh_dtype_t d)
{
    return d == MESH_UINT8 || d == MESH_UINT32 || d == MESH_UINT64;
}

static int is_fp8(mesh_dtype_t d)
{
    return d == MESH_FP8_E4M3 || d == MESH_FP8_E5M2;
}

/* Small integers whose sums and products every type holds exactly. */
static double value(mesh_dtype_t d, size_t i, int which)
{
    int range = is_fp8(d) ? 2 : 8;
    int v = (int)((i * (which ? 7u : 3u) + (which ? 5u : 1u)) % (unsigned)(2 * range + 1));
    return is_unsigned(d) ? v % (range + 1) : v - range;
}

static double apply(mesh_op_t op, double a, double b)
{
    switch (op) {
    case MESH_SUM:
        return a + b;
    case MESH_PROD:
        return a * b;
    case MESH_MIN:
        return a < b ? a : b;
    case MESH_MAX:
        return a > b ? a : b;
    default:
        abort();
    }
}

static void fill(mesh_dtype_t d, void *buf, size_t n, int which)
{
    for (size_t i = 0; i < n; i++)
        mesh_dtype_set(d, buf, i, value(d, i, which));
}

static void expect(mesh_dtype_t d, mesh_op_t op, const void *buf, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double want = apply(op, value(d, i, 0), value(d, i, 1));
        double got = mesh_dtype_get(d, buf, i);
        CHECK_MSG(got == want, "%s %s %s n=%zu i=%zu: got %g expected %g", what, mesh_dtype_name(d),
                  mesh_op_name(op), n, i, got, want);
    }
}

static void check_matrix(void)
{
    static uint64_t abuf[MAXN + 2], bbuf[MAXN + 2], dbuf[MAXN + 2];
    for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
        mesh_dtype_t d = dtypes[t];
        size_t es = mesh_dtype_size(d);
        for (size_t o = 0; o < 4; o++) {
            mesh_op_t op = ops[o];
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                size_t n = counts[c];
                for (size_t off = 0; off < 2; off++) { /* off: misaligned by one element */
                    char *a = (char *)abuf + off * es, *b = (char *)bbuf + off * es;
                    char *dst = (char *)dbuf + off * es;

                    fill(d, a, n, 0);
                    fill(d, b, n, 1);
                    memset(dbuf, 0x5a, sizeof(dbuf));
                    mesh_reduce_local3(dst, a, b, n, d, op);
                    expect(d, op, dst, n, "local3");
                    /* nothing written past the end */
                    CHECK(((unsigned char *)dst)[n * es] == 0x5a);

                    memset(dbuf, 0x5a, sizeof(dbuf));
                    mesh_reduce_local3_stream(dst, a, b, n, d, op);
                    expect(d, op, dst, n, "local3_stream");
                    CHECK(((unsigned char *)dst)[n * es] == 0x5a);
                    if (off)
                        CHECK(((unsigned char *)dbuf)[0] == 0x5a);

                    mesh_reduce_local(a, b, n, d, op);
                    expect(d, op, a, n, "local");

                    fill(d, a, n, 0);
                    mesh_reduce_local3(a, a, b, n, d, op);
                    expect(d, op, a, n, "local3 dst=a");

                    fill(d, a, n, 0);
                    mesh_reduce_local3(b, a, b, n, d, op);
                    expect(d, op, b, n, "local3 dst=b");

                    /* dst = a op a and local(dst, dst) */
                    fill(d, a, n, 0);
                    mesh_reduce_local3(a, a, a, n, d, op);
                    fill(d, b, n, 0);
                    mesh_reduce_local(b, b, n, d, op);
                    for (size_t i = 0; i < n; i++) {
                        double v = value(d, i, 0), want = apply(op, v, v);
                        CHECK(mesh_dtype_get(d, a, i) == want);
                        CHECK(mesh_dtype_get(d, b, i) == want);
                    }
                }
            }
        }
    }
}

static void check_wrap(void)
{
    int8_t i8a[3] = {127, -128, 100}, i8b[3] = {1, -1, 3};
    mesh_reduce_local(i8a, i8b, 3, MESH_INT8, MESH_SUM);
    CHECK(i8a[0] == -128 && i8a[1] == 127 && i8a[2] == 103);
    int8_t i8c[2] = {100, -128}, i8d[2] = {3, -1};
    mesh_reduce_local(i8c, i8d, 2, MESH_INT8, MESH_PROD);
    CHECK(i8c[0] == 44 && i8c[1] == -128);
    uint8_t u8a[2] = {255, 16}, u8b[2] = {1, 16};
    mesh_reduce_local(u8a, u8b, 2, MESH_UINT8, MESH_SUM);
    CHECK(u8a[0] == 0 && u8a[1] == 32);
    mesh_reduce_local(u8b, u8b, 2, MESH_UINT8, MESH_PROD);
    CHECK(u8b[0] == 1 && u8b[1] == 0);
    int32_t i32a[2] = {INT32_MAX, INT32_MIN}, i32b[2] = {1, -1};
    mesh_reduce_local(i32a, i32b, 2, MESH_INT32, MESH_SUM);
    CHECK(i32a[0] == INT32_MIN && i32a[1] == INT32_MAX);
    int32_t i32c[1] = {65536}, i32d[1] = {65536};
    mesh_reduce_local(i32c, i32d, 1, MESH_INT32, MESH_PROD);
    CHECK(i32c[0] == 0);
    int64_t i64a[2] = {INT64_MAX, -5}, i64b[2] = {1, 7};
    mesh_reduce_local(i64a, i64b, 2, MESH_INT64, MESH_SUM);
    CHECK(i64a[0] == INT64_MIN && i64a[1] == 2);
    uint64_t u64a[1] = {UINT64_MAX}, u64b[1] = {2};
    mesh_reduce_local(u64a, u64b, 1, MESH_UINT64, MESH_SUM);
    CHECK(u64a[0] == 1);
    int64_t i64c[2] = {-3, INT64_MIN}, i64d[2] = {2, 0};
    mesh_reduce_local(i64c, i64d, 2, MESH_INT64, MESH_MIN);
    CHECK(i64c[0] == -3 && i64c[1] == INT64_MIN);
    uint32_t u32a[1] = {0x80000000u}, u32b[1] = {1};
    mesh_reduce_local(u32a, u32b, 1, MESH_UINT32, MESH_MAX);
    CHECK(u32a[0] == 0x80000000u); /* unsigned comparison */
}

static void check_nan(void)
{
    for (size_t t = 6; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
        mesh_dtype_t d = dtypes[t];
        for (int o = MESH_MIN; o <= MESH_MAX; o++) {
            uint64_t a[40], b[40];
            /* NaN in a, in b, in both, in neither, at positions in vector bodies and tails */
            for (size_t i = 0; i < 40; i++) {
                mesh_dtype_set(d, a, i, i % 4 == 1 || i % 4 == 3 ? NAN : 1.0);
                mesh_dtype_set(d, b, i, i % 4 == 2 || i % 4 == 3 ? NAN : -1.0);
            }
            mesh_reduce_local(a, b, 40, d, (mesh_op_t)o);
            for (size_t i = 0; i < 40; i++) {
                double r = mesh_dtype_get(d, a, i);
                if (i % 4 == 0)
                    CHECK(r == (o == MESH_MIN ? -1.0 : 1.0));
                else
                    CHECK_MSG(isnan(r), "%s %s i=%zu: %g", mesh_dtype_name(d),
                              mesh_op_name((mesh_op_t)o), i, r);
            }
        }
    }
}

/* Narrow floats compute in fp32 and round once. */
static void check_single_rounding(void)
{
    uint16_t h[2] = {mesh_float_to_fp16(2048.0f), mesh_float_to_fp16(2048.0f)};
    uint16_t one[2] = {mesh_float_to_fp16(1.0f), mesh_float_to_fp16(3.0f)};
    mesh_reduce_local(h, one, 2, MESH_FP16, MESH_SUM);
    CHECK(mesh_fp16_to_float(h[0]) == 2048.0f); /* 2049: tie to even */
    CHECK(mesh_fp16_to_float(h[1]) == 2052.0f); /* 2051: tie to even, upwards */
    uint16_t bx = mesh_float_to_bf16(1.0f), by = mesh_float_to_bf16(0x1p-8f * 3);
    mesh_reduce_local(&bx, &by, 1, MESH_BF16, MESH_SUM);
    CHECK(mesh_bf16_to_float(bx) == 1.0f + 0x1p-6f); /* 1 + 1.5 ulp: tie to even */
    uint8_t q = mesh_float_to_e4m3(448.0f), r = mesh_float_to_e4m3(32.0f);
    mesh_reduce_local(&q, &r, 1, MESH_FP8_E4M3, MESH_SUM);
    CHECK(q == 0x7f); /* overflow: NaN */
    q = mesh_float_to_e5m2(57344.0f);
    r = mesh_float_to_e5m2(8192.0f);
    mesh_reduce_local(&q, &r, 1, MESH_FP8_E5M2, MESH_SUM);
    CHECK(q == 0x7c); /* overflow: inf */
    q = mesh_float_to_e4m3(3.0f);
    r = mesh_float_to_e4m3(0.375f);
    mesh_reduce_local(&q, &r, 1, MESH_FP8_E4M3, MESH_PROD);
    CHECK(mesh_e4m3_to_float(q) == 1.125f);
}

static void check_scale_divide(void)
{
    for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
        mesh_dtype_t d = dtypes[t];
        uint64_t src[40], dst[40], scalar;
        size_t n = 37;
        fill(d, src, n, 0);
        mesh_dtype_set(d, &scalar, 0, is_fp8(d) ? 2 : 3);
        mesh_reduce_scale(dst, src, n, d, &scalar);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG(mesh_dtype_get(d, dst, i) == value(d, i, 0) * (is_fp8(d) ? 2 : 3),
                      "scale %s i=%zu", mesh_dtype_name(d), i);
        mesh_reduce_scale(src, src, n, d, &scalar); /* in place */
        CHECK(memcmp(src, dst, n * mesh_dtype_size(d)) == 0);

        /* AVG: sums divided by the rank count; integer division truncates toward zero */
        static const double in[] = {7, -7, 9, -9, 6, 0, 1, -1, 5};
        static const double iq[] = {3, -3, 4, -4, 3, 0, 0, 0, 2};
        uint64_t buf[9];
        double x9[9];
        for (size_t i = 0; i < 9; i++) {
            mesh_dtype_set(d, buf, i, is_unsigned(d) ? fabs(in[i]) : in[i]);
            x9[i] = mesh_dtype_get(d, buf, i); /* 9 is 8 in e5m2 */
        }
        mesh_reduce_divide(buf, 9, d, 2);
        for (size_t i = 0; i < 9; i++) {
            double x = x9[i];
            double want = !mesh_dtype_is_float(d) ? (is_unsigned(d) ? fabs(iq[i]) : iq[i]) : x / 2;
            CHECK_MSG(mesh_dtype_get(d, buf, i) == want, "divide %s i=%zu: %g", mesh_dtype_name(d),
                      i, mesh_dtype_get(d, buf, i));
        }
    }
    int8_t s8[2] = {100, -100}, c8 = 3;
    mesh_reduce_scale(s8, s8, 2, MESH_INT8, &c8);
    CHECK(s8[0] == 44 && s8[1] == -44);
    float f[3] = {1.0f, 2.0f, 3.0f};
    mesh_reduce_divide(f, 3, MESH_FP32, 3);
    CHECK(f[0] == 1.0f / 3 && f[1] == 2.0f / 3 && f[2] == 1.0f);
    double g[1] = {1.0};
    mesh_reduce_divide(g, 1, MESH_FP64, 3);
    CHECK(g[0] == 1.0 / 3);
}

int main(int argc, char **argv)
{
    check_matrix();
    check_wrap();
    check_nan();
    check_single_rounding();
    check_scale_divide();
    /* Again with the portable fp16/bf16 loops in place of the AVX2 ones. */
    if (getenv("MESH_REDUCE_AVX2") == NULL) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            setenv("MESH_REDUCE_AVX2", "no", 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "portable run: %d", status);
    }
    (void)argc;
    return 0;
}
