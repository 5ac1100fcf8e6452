/* Narrow float conversions against an independent reference built on frexp/ldexp/rint:
 * every bit pattern of fp16, bf16, e4m3 and e5m2 decodes right and round-trips; float inputs
 * around every rounding boundary, ties, overflow, subnormals and NaN encode right. */
#include "tests/harness/harness.h"
#include "libmesh/dtype.h"
#include "mesh/dtype.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int ebits, mbits, bias;
    int fn; /* e4m3 "fn": no infinities, only S.1111.111 is NaN, overflow gives NaN */
    float (*to_float)(uint8_t *ignored, unsigned bits);
    unsigned (*from_float)(float f);
} fmt_t;

static float fp16_dec(uint8_t *x, unsigned b)
{
    (void)x;
    return mesh_fp16_to_float((uint16_t)b);
}
static float bf16_dec(uint8_t *x, unsigned b)
{
    (void)x;
    return mesh_bf16_to_float((uint16_t)b);
}
static float e4m3_dec(uint8_t *x, unsigned b)
{
    (void)x;
    return mesh_e4m3_to_float((uint8_t)b);
}
static float e5m2_dec(uint8_t *x, unsigned b)
{
    (void)x;
    return mesh_e5m2_to_float((uint8_t)b);
}
static unsigned fp16_enc(float f)
{
    return mesh_float_to_fp16(f);
}
static unsigned bf16_enc(float f)
{
    return mesh_float_to_bf16(f);
}
static unsigned e4m3_enc(float f)
{
    return mesh_float_to_e4m3(f);
}
static unsigned e5m2_enc(float f)
{
    return mesh_float_to_e5m2(f);
}

static const fmt_t fmts[] = {
    {"fp16", 5, 10, 15, 0, fp16_dec, fp16_enc},
    {"bf16", 8, 7, 127, 0, bf16_dec, bf16_enc},
    {"e4m3", 4, 3, 7, 1, e4m3_dec, e4m3_enc},
    {"e5m2", 5, 2, 15, 0, e5m2_dec, e5m2_enc},
};

static unsigned nbits(const fmt_t *f)
{
    return 1u + (unsigned)f->ebits + (unsigned)f->mbits;
}

/* Reference decoder. */
static double ref_decode(const fmt_t *f, unsigned bits)
{
    unsigned emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    int sign = (bits >> (f->ebits + f->mbits)) & 1;
    unsigned e = (bits >> f->mbits) & emask, m = bits & mmask;
    double v;
    if (!f->fn && e == emask)
        v = m == 0 ? INFINITY : NAN;
    else if (f->fn && e == emask && m == mmask)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(m + (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return sign ? -v : v;
}

static double ref_max(const fmt_t *f)
{
    unsigned emax = (1u << f->ebits) - (f->fn ? 1 : 2);
    unsigned mmax = (1u << f->mbits) - (f->fn ? 2 : 1);
    return ldexp((double)(mmax + (1u << f->mbits)), (int)emax - f->bias - f->mbits);
}

/* Reference encoder, as a value: round to nearest even at the format's precision. */
static double ref_round(const fmt_t *f, double v)
{
    if (isnan(v))
        return NAN;
    double a = fabs(v);
    if (isinf(a))
        return f->fn ? NAN : v;
    int e;
    frexp(a, &e);
    int exp = e - 1 < 1 - f->bias ? 1 - f->bias : e - 1;
    double q = ldexp(a, f->mbits - exp);
    double r = ldexp(rint(q), exp - f->mbits);
    if (r > ref_max(f))
        return f->fn ? NAN : copysign(INFINITY, v);
    return copysign(r, v);
}

static int same_value(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static unsigned long checked;

static void check_encode(const fmt_t *f, float x)
{
    unsigned b = f->from_float(x);
    CHECK_MSG(b < (1u << nbits(f)), "%s: %g gave 0x%x", f->name, (double)x, b);
    double got = ref_decode(f, b), want = ref_round(f, x);
    CHECK_MSG(same_value(got, want), "%s: %.9g (0x%08x) -> 0x%x = %.9g, expected %.9g", f->name,
              (double)x, f2u(x), b, got, want);
    checked++;
}

static void check_format(const fmt_t *f)
{
    unsigned n = 1u << nbits(f);
    double *vals = malloc(n * sizeof(*vals));
    CHECK(vals != NULL);
    /* Every bit pattern: decoding matches the reference and encoding gives the pattern back. */
    for (unsigned b = 0; b < n; b++) {
        float x = f->to_float(NULL, b);
        vals[b] = ref_decode(f, b);
        CHECK_MSG(same_value(x, vals[b]), "%s: 0x%x decodes to %.9g, expected %.9g", f->name, b,
                  (double)x, vals[b]);
        CHECK_MSG(f->from_float(x) == b, "%s: 0x%x -> %.9g -> 0x%x", f->name, b, (double)x,
                  f->from_float(x));
    }
    /* Around every rounding boundary: midpoints between neighbours, and one float either side. */
    for (unsigned b = 0; b + 1 < n / 2; b++) {
        double lo = vals[b], hi = vals[b + 1];
        if (isnan(lo) || isnan(hi) || isinf(hi))
            continue;
        float mid = (float)((lo + hi) / 2);
        CHECK((double)mid == (lo + hi) / 2);
        for (int s = 0; s < 2; s++) {
            float m = s ? -mid : mid;
            check_encode(f, m);
            check_encode(f, nextafterf(m, INFINITY));
            check_encode(f, nextafterf(m, -INFINITY));
            check_encode(f, s ? -(float)lo : (float)lo);
        }
    }
    /* Just past the largest finite value, up to the overflow threshold and beyond. */
    double max = ref_max(f);
    unsigned maxidx = f->fn ? n / 2 - 2 : (((1u << f->ebits) - 1) << f->mbits) - 1;
    CHECK(vals[maxidx] == max);
    double step = max - vals[maxidx - 1];
    CHECK(step > 0);
    for (double x = max; x < 2 * max + 4 * step; x += step / 8) {
        check_encode(f, (float)x);
        check_encode(f, -(float)x);
    }
    free(vals);
}

/* Float bit patterns: every top 16 bits with low bits at and around the halves of fp16 and
 * bf16 steps, and random ones. */
static void check_float_sweep(void)
{
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000,
                                    0x3000, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xffff};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (uint32_t hi = 0; hi < 0x10000; hi++) {
        for (size_t k = 0; k <= sizeof(lows) / sizeof(lows[0]); k++) {
            uint32_t lo;
            if (k < sizeof(lows) / sizeof(lows[0])) {
                lo = lows[k];
            } else {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                lo = (uint32_t)rng & 0xffff;
            }
            float x = u2f(hi << 16 | lo);
            for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
                check_encode(&fmts[i], x);
        }
    }
}

static void check_chosen(void)
{
    /* ties go to the even neighbour */
    CHECK(mesh_float_to_fp16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(mesh_float_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02);
    CHECK(mesh_float_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
    CHECK(mesh_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    CHECK(mesh_float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(mesh_float_to_e4m3(1.0f + 1.0f / 16) == 0x38);
    CHECK(mesh_float_to_e4m3(1.0f + 3.0f / 16) == 0x3a);
    CHECK(mesh_float_to_e5m2(1.0f + 1.0f / 8) == 0x3c);
    CHECK(mesh_float_to_e5m2(1.0f + 3.0f / 8) == 0x3e);
    /* subnormals */
    CHECK(mesh_float_to_fp16(0x1p-24f) == 0x0001);
    CHECK(mesh_float_to_fp16(0x1p-25f) == 0x0000);
    CHECK(mesh_float_to_fp16(3 * 0x1p-25f) == 0x0002);
    CHECK(mesh_float_to_fp16(-0x1p-26f) == 0x8000);
    CHECK(mesh_fp16_to_float(0x03ff) == 1023 * 0x1p-24f);
    CHECK(mesh_float_to_e4m3(0x1p-9f) == 0x01);
    CHECK(mesh_float_to_e4m3(0x1p-10f) == 0x00);
    CHECK(mesh_float_to_e4m3(7 * 0x1p-9f) == 0x07);
    CHECK(mesh_float_to_e4m3(7.5f * 0x1p-9f) == 0x08);
    CHECK(mesh_float_to_e5m2(0x1p-16f) == 0x01);
    CHECK(mesh_float_to_e5m2(3 * 0x1p-16f) == 0x03);
    /* overflow */
    CHECK(mesh_float_to_fp16(65504.0f) == 0x7bff);
    CHECK(mesh_float_to_fp16(65519.0f) == 0x7bff);
    CHECK(mesh_float_to_fp16(65520.0f) == 0x7c00);
    CHECK(mesh_float_to_fp16(-1e10f) == 0xfc00);
    CHECK(mesh_float_to_fp16(INFINITY) == 0x7c00);
    CHECK(mesh_float_to_bf16(FLT_MAX) == 0x7f80);
    CHECK(mesh_float_to_bf16(-INFINITY) == 0xff80);
    CHECK(mesh_float_to_e4m3(448.0f) == 0x7e);
    CHECK(mesh_float_to_e4m3(464.0f) == 0x7e);
    CHECK(mesh_float_to_e4m3(nextafterf(464.0f, 1000.0f)) == 0x7f);
    CHECK(mesh_float_to_e4m3(-1000.0f) == 0xff);
    CHECK(mesh_float_to_e4m3(INFINITY) == 0x7f);
    CHECK(mesh_e4m3_to_float(0x7e) == 448.0f);
    CHECK(isnan(mesh_e4m3_to_float(0x7f)) && isnan(mesh_e4m3_to_float(0xff)));
    CHECK(mesh_e4m3_to_float(0x78) == 256.0f); /* e = 15 is a normal exponent in e4m3fn */
    CHECK(mesh_float_to_e5m2(57344.0f) == 0x7b);
    CHECK(mesh_float_to_e5m2(61439.0f) == 0x7b);
    CHECK(mesh_float_to_e5m2(61440.0f) == 0x7c);
    CHECK(mesh_float_to_e5m2(-INFINITY) == 0xfc);
    CHECK(isinf(mesh_e5m2_to_float(0x7c)) && isnan(mesh_e5m2_to_float(0x7d)));
    /* NaN stays NaN */
    CHECK(isnan(mesh_fp16_to_float(mesh_float_to_fp16(NAN))));
    CHECK(isnan(mesh_bf16_to_float(mesh_float_to_bf16(-NAN))));
    CHECK(isnan(mesh_e4m3_to_float(mesh_float_to_e4m3(NAN))));
    CHECK(isnan(mesh_e5m2_to_float(mesh_float_to_e5m2(NAN))));
    CHECK(isnan(mesh_fp16_to_float(mesh_float_to_fp16(u2f(0x7f800001))))); /* payload below */
    CHECK(isnan(mesh_bf16_to_float(mesh_float_to_bf16(u2f(0x7f800001)))));
    CHECK(isnan(mesh_e5m2_to_float(mesh_float_to_e5m2(u2f(0xff800001)))));
}

static void check_get_set(void)
{
    static const mesh_dtype_t all[] = {MESH_INT8,  MESH_UINT8,  MESH_INT32,    MESH_UINT32,
                                       MESH_INT64, MESH_UINT64, MESH_FP16,     MESH_BF16,
                                       MESH_FP32,  MESH_FP64,   MESH_FP8_E4M3, MESH_FP8_E5M2};
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
    static const char *const names[] = {"int8", "uint8", "int32", "uint32", "int64",    "uint64",
                                        "fp16", "bf16",  "fp32",  "fp64",   "fp8_e4m3", "fp8_e5m2"};
    CHECK(sizeof(all) / sizeof(all[0]) == MESH_DTYPE_COUNT);
    for (int i = 0; i < MESH_DTYPE_COUNT; i++) {
        mesh_dtype_t d = all[i];
        CHECK(mesh_dtype_size(d) == sizes[i]);
        CHECK(strcmp(mesh_dtype_name(d), names[i]) == 0);
        CHECK(mesh_dtype_is_float(d) == (i >= 6));
        unsigned char buf[8 * 4];
        for (int k = 0; k < 4; k++) {
            double v = (i == 1 || i == 3 || i == 5) ? k * 3 : k * 3 - 4;
            mesh_dtype_set(d, buf, (size_t)k, v);
            CHECK_MSG(mesh_dtype_get(d, buf, (size_t)k) == v, "%s %g", names[i], v);
        }
        mesh_dtype_set(d, buf, 1, 2.5);
        CHECK(mesh_dtype_get(d, buf, 1) == (i < 6 ? 2.0 : 2.5));
    }
    CHECK(mesh_dtype_size((mesh_dtype_t)MESH_DTYPE_COUNT) == 0);
    CHECK(mesh_dtype_size((mesh_dtype_t)-1) == 0);
    CHECK(strcmp(mesh_dtype_name((mesh_dtype_t)99), "unknown") == 0);
    CHECK(!mesh_dtype_is_float((mesh_dtype_t)99));
    CHECK(strcmp(mesh_op_name(MESH_SUM), "sum") == 0);
    CHECK(strcmp(mesh_op_name(MESH_PROD), "prod") == 0);
    CHECK(strcmp(mesh_op_name(MESH_MIN), "min") == 0);
    CHECK(strcmp(mesh_op_name(MESH_MAX), "max") == 0);
    CHECK(strcmp(mesh_op_name(MESH_AVG), "avg") == 0);
    CHECK(strcmp(mesh_op_name((mesh_op_t)(MESH_OP_USER_BASE + 3)), "premul_sum") == 0);
    CHECK(strcmp(mesh_op_name((mesh_op_t)20), "unknown") == 0);
    CHECK(strcmp(mesh_op_name((mesh_op_t)1000), "unknown") == 0);
    CHECK(strcmp(mesh_op_name((mesh_op_t)(MESH_OP_USER_BASE + MESH_OP_PREMUL_MAX)), "unknown") ==
          0);
    CHECK(strcmp(mesh_op_name((mesh_op_t)-1), "unknown") == 0);

    /* set from double rounds once: just above a tie goes up, though the nearest float is the
     * tie itself */
    uint16_t h;
    mesh_dtype_set(MESH_FP16, &h, 0, 1.0 + 0x1p-11 + 0x1p-40);
    CHECK(h == 0x3c01);
    mesh_dtype_set(MESH_FP16, &h, 0, 1.0 + 0x1p-11);
    CHECK(h == 0x3c00);
    mesh_dtype_set(MESH_BF16, &h, 0, -(1.0 + 0x1p-8 + 0x1p-50));
    CHECK(h == 0xbf81);
    uint8_t q;
    mesh_dtype_set(MESH_FP8_E4M3, &q, 0, 1.0 + 1.0 / 16 + 0x1p-30);
    CHECK(q == 0x39);
    mesh_dtype_set(MESH_FP8_E5M2, &q, 0, 1e6);
    CHECK(q == 0x7c);
    for (int i = 0; i < 1000; i++) {
        double v = ldexp((double)(rand() % 100000) + (double)rand() / RAND_MAX, -(rand() % 20));
        mesh_dtype_set(MESH_FP16, &h, 0, v);
        CHECK_MSG(same_value(mesh_fp16_to_float(h), ref_round(&fmts[0], v)), "%.17g", v);
        mesh_dtype_set(MESH_FP8_E4M3, &q, 0, -v);
        CHECK_MSG(same_value(mesh_e4m3_to_float(q), ref_round(&fmts[2], -v)), "%.17g", v);
    }
}

/* Whole arrays between every pair of float dtypes: each element as the element conversions
 * give it (through double, rounded once), NaN kept NaN; other dtypes and NULL refused. */
static void check_convert(void)
{
    static const mesh_dtype_t fl[] = {MESH_FP16, MESH_BF16,     MESH_FP32,
                                      MESH_FP64, MESH_FP8_E4M3, MESH_FP8_E5M2};
    enum { N = 37 };
    double in[N];
    for (int i = 0; i < N; i++)
        in[i] = ldexp(i % 2 ? -1.0 - i / 64.0 : 1.0 + i / 7.0, i % 9 - 4);
    in[N - 1] = NAN;
    for (size_t s = 0; s < sizeof(fl) / sizeof(fl[0]); s++) {
        for (size_t d = 0; d < sizeof(fl) / sizeof(fl[0]); d++) {
            uint64_t src[N], dst[N + 1];
            for (int i = 0; i < N; i++)
                mesh_dtype_set(fl[s], src, (size_t)i, in[i]);
            memset(dst, 0xa5, sizeof(dst));
            CHECK(mesh_dtype_convert(dst, fl[d], src, fl[s], N - 1) == MESH_OK);
            for (int i = 0; i < N - 1; i++) {
                uint64_t want = 0, got = 0;
                mesh_dtype_set(fl[d], &want, 0, mesh_dtype_get(fl[s], src, (size_t)i));
                memcpy(&got, (char *)dst + (size_t)i * mesh_dtype_size(fl[d]),
                       mesh_dtype_size(fl[d]));
                CHECK_MSG(got == want, "%s -> %s element %d", mesh_dtype_name(fl[s]),
                          mesh_dtype_name(fl[d]), i);
            }
            /* nothing written past count */
            CHECK(((unsigned char *)dst)[(N - 1) * mesh_dtype_size(fl[d])] == 0xa5);
            CHECK(mesh_dtype_convert(dst, fl[d], (char *)src + (N - 1) * mesh_dtype_size(fl[s]),
                                     fl[s], 1) == MESH_OK);
            CHECK_MSG(isnan(mesh_dtype_get(fl[d], dst, 0)), "NaN %s -> %s", mesh_dtype_name(fl[s]),
                      mesh_dtype_name(fl[d]));
        }
    }
    float f = 1.0f;
    int32_t k = 0;
    CHECK(mesh_dtype_convert(&k, MESH_INT32, &f, MESH_FP32, 1) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "dst_dtype int32") != NULL);
    CHECK(mesh_dtype_convert(&f, MESH_FP32, &k, MESH_INT32, 1) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "src_dtype int32") != NULL);
    CHECK(mesh_dtype_convert(NULL, MESH_BF16, &f, MESH_FP32, 1) == MESH_ERR_INVALID_ARG);
    CHECK(strstr(mesh_comm_last_error(NULL), "dst is NULL") != NULL);
    CHECK(mesh_dtype_convert(NULL, MESH_BF16, NULL, MESH_FP32, 0) == MESH_OK);
}

int main(void)
{
    CHECK(ref_max(&fmts[0]) == 65504.0 && ref_max(&fmts[2]) == 448.0);
    CHECK(ref_max(&fmts[3]) == 57344.0 && ref_max(&fmts[1]) == (double)u2f(0x7f7f0000));
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
        check_format(&fmts[i]);
    check_float_sweep();
    check_chosen();
    check_get_set();
    check_convert();
    printf("%lu float encodings checked\n", checked);
    return 0;
}
