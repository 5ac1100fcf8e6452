/*
 * Input patterns and validation. Reductions use small integers chosen per dtype and rank count
 * so that every partial result is exact in the type, whatever the reduction order (fp8 e5m2
 * holds the integers up to 8 exactly, e4m3 up to 16, bf16 up to 256, fp16 up to 2048); results
 * are then compared bit for bit. Data-movement collectives use a byte pattern of (rank, index),
 * also compared bit for bit.
 */
#include "config.h"
#include "bench/bench.h"

#include <math.h>
#include <string.h>

#define BENCH_POISON 0xa5

/* Largest integer such that every integer from 0 to it is exact in the type. */
static long bench_exact_limit(bench_dtype_t d)
{
    switch (d) {
    case BENCH_INT8:
        return 127;
    case BENCH_UINT8:
        return 255;
    case BENCH_FP16:
        return 2048;
    case BENCH_BF16:
        return 256;
    case BENCH_E4M3:
        return 16;
    case BENCH_E5M2:
        return 8;
    default:
        return 1l << 20;
    }
}

static int bench_is_signed(bench_dtype_t d)
{
    return d != BENCH_UINT8 && d != BENCH_UINT32 && d != BENCH_UINT64;
}

/* IEEE-style narrow float with eb exponent and mb mantissa bits, for exact normal values. */
static uint32_t bench_minifloat(double v, int eb, int mb, int bias)
{
    uint32_t sign = v < 0;
    int e;
    v = fabs(v);
    if (v == 0)
        return sign << (eb + mb);
    double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
    uint32_t exp = (uint32_t)(e - 1 + bias);
    uint32_t frac = (uint32_t)llround((2 * m - 1) * (double)(1u << mb));
    if (frac == 1u << mb) {
        frac = 0;
        exp++;
    }
    return (sign << (eb + mb)) | (exp << mb) | frac;
}

void bench_encode(bench_dtype_t d, double v, void *out)
{
    union {
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        uint16_t h;
        float f;
        double g;
    } u;
    switch (d) {
    case BENCH_INT8:
        u.i8 = (int8_t)v;
        break;
    case BENCH_UINT8:
        u.u8 = (uint8_t)v;
        break;
    case BENCH_INT32:
        u.i32 = (int32_t)v;
        break;
    case BENCH_UINT32:
        u.u32 = (uint32_t)v;
        break;
    case BENCH_INT64:
        u.i64 = (int64_t)v;
        break;
    case BENCH_UINT64:
        u.u64 = (uint64_t)v;
        break;
    case BENCH_FP16:
        u.h = (uint16_t)bench_minifloat(v, 5, 10, 15);
        break;
    case BENCH_BF16:
        u.h = (uint16_t)bench_minifloat(v, 8, 7, 127);
        break;
    case BENCH_FP32:
        u.f = (float)v;
        break;
    case BENCH_FP64:
        u.g = v;
        break;
    case BENCH_E4M3:
        u.u8 = (uint8_t)bench_minifloat(v, 4, 3, 7);
        break;
    case BENCH_E5M2:
        u.u8 = (uint8_t)bench_minifloat(v, 5, 2, 15);
        break;
    default:
        return;
    }
    memcpy(out, &u, bench_dtype_size(d));
}

static double bench_minifloat_value(uint32_t bits, int eb, int mb, int bias)
{
    uint32_t exp = (bits >> mb) & ((1u << eb) - 1), frac = bits & ((1u << mb) - 1);
    double v = exp ? ldexp(1.0 + ldexp(frac, -mb), (int)exp - bias)
                   : ldexp(frac, 1 - bias - mb); /* subnormal */
    return (bits >> (eb + mb)) & 1 ? -v : v;
}

double bench_decode(bench_dtype_t d, const void *in)
{
    union {
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        uint16_t h;
        float f;
        double g;
    } u;
    memcpy(&u, in, bench_dtype_size(d));
    switch (d) {
    case BENCH_INT8:
        return u.i8;
    case BENCH_UINT8:
        return u.u8;
    case BENCH_INT32:
        return u.i32;
    case BENCH_UINT32:
        return u.u32;
    case BENCH_INT64:
        return (double)u.i64;
    case BENCH_UINT64:
        return (double)u.u64;
    case BENCH_FP16:
        return bench_minifloat_value(u.h, 5, 10, 15);
    case BENCH_BF16:
        return bench_minifloat_value(u.h, 8, 7, 127);
    case BENCH_FP32:
        return u.f;
    case BENCH_FP64:
        return u.g;
    case BENCH_E4M3:
        return bench_minifloat_value(u.u8, 4, 3, 7);
    case BENCH_E5M2:
        return bench_minifloat_value(u.u8, 5, 2, 15);
    default:
        return 0;
    }
}

/* Input value of element idx on rank q for a reduction. */
static double bench_value(const bench_call_t *c, int q, int n, size_t idx)
{
    long lim = bench_exact_limit(c->dtype), m = lim / n;
    switch (c->redop) {
    case BENCH_SUM:
        if (m >= 1)
            return (double)(((size_t)q * 5 + idx * 3) % (size_t)(m < 3 ? m + 1 : 4));
        /* more ranks than exact integers: a sparse 0/1 pattern keeps the sum in range */
        return ((size_t)q + idx) % (size_t)((n + lim - 1) / lim) == 0;
    case BENCH_AVG: /* the same on every rank, so the mean is exact in every type */
        return m >= 1 ? (double)(idx % (size_t)(m < 3 ? m + 1 : 4)) : 0;
    case BENCH_PROD:
        if ((size_t)q == idx % (size_t)n)
            return 2;
        if (bench_is_signed(c->dtype) && n > 1 && (size_t)q == (idx + 1) % (size_t)n)
            return -1;
        return 1;
    default: { /* min, max */
        long r = lim + 1 < 11 ? lim + 1 : 11;
        long v = (long)(((size_t)q * 7 + idx * 3) % (size_t)r);
        return (double)(bench_is_signed(c->dtype) ? v - r / 2 : v);
    }
    }
}

static double bench_expected(const bench_call_t *c, int n, size_t idx)
{
    double acc = bench_value(c, 0, n, idx);
    for (int q = 1; q < n; q++) {
        double v = bench_value(c, q, n, idx);
        switch (c->redop) {
        case BENCH_PROD:
            acc *= v;
            break;
        case BENCH_MIN:
            acc = v < acc ? v : acc;
            break;
        case BENCH_MAX:
            acc = v > acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    return c->redop == BENCH_AVG ? acc / n : acc;
}

/* Element idx of rank q's input, as bytes. */
static void bench_src(const bench_call_t *c, int q, int n, size_t idx, unsigned char *out)
{
    size_t dsize = bench_dtype_size(c->dtype);
    if (bench_op_is_reduction(c->op)) {
        bench_encode(c->dtype, bench_value(c, q, n, idx), out);
        return;
    }
    if (c->op == BENCH_DISPATCH_COMBINE) { /* eighths up to 16, exact in fp32 and bf16 */
        bench_encode(c->dtype, (double)(((size_t)q * 37 + idx * 11) % 255) / 8 - 15.875, out);
        return;
    }
    for (size_t b = 0; b < dsize; b++)
        out[b] = (unsigned char)((size_t)q * 37 + idx * 11 + b * 101 + 1);
}

static void bench_fill_range(const bench_call_t *c, void *buf, int q, int n, size_t first,
                             size_t count)
{
    size_t dsize = bench_dtype_size(c->dtype);
    for (size_t j = 0; j < count; j++)
        bench_src(c, q, n, first + j, (unsigned char *)buf + j * dsize);
}

void bench_fill(const bench_call_t *c, const bench_sizes_t *sz, int rank, int n)
{
    void *sbuf = (void *)c->sbuf;
    size_t dsize = bench_dtype_size(c->dtype), cnt = c->count;

    if (!c->in_place) {
        memset(c->rbuf, BENCH_POISON, sz->rbytes);
        bench_fill_range(c, sbuf, rank, n, 0, sz->sbytes / dsize);
        return;
    }
    switch (c->op) {
    case BENCH_BROADCAST:
        if (rank == c->root)
            bench_fill_range(c, sbuf, rank, n, 0, cnt);
        else
            memset(c->rbuf, BENCH_POISON, sz->rbytes);
        break;
    case BENCH_ALLGATHER:
    case BENCH_GATHER: /* own block inside the poisoned result */
        memset(c->rbuf, BENCH_POISON, sz->rbytes);
        bench_fill_range(c, sbuf, rank, n, 0, cnt);
        break;
    case BENCH_SCATTER:
        bench_fill_range(c, sbuf, rank, n, 0, cnt * (size_t)n);
        if (rank != c->root)
            memset(c->rbuf, BENCH_POISON, cnt * dsize);
        break;
    default: /* allreduce, reduce, reduce_scatter, alltoall: the whole input */
        bench_fill_range(c, sbuf, rank, n, 0, sz->sbytes / dsize);
        break;
    }
}

/* Wrong elements among count at out: a reduced result of indices src_first.., or src_rank's
 * input from src_first on. */
static uint64_t bench_compare(const bench_call_t *c, const void *out, size_t count, int src_rank,
                              size_t src_first, int reduced, int n)
{
    size_t dsize = bench_dtype_size(c->dtype);
    unsigned char want[8];
    uint64_t wrong = 0;
    for (size_t j = 0; j < count; j++) {
        if (reduced)
            bench_encode(c->dtype, bench_expected(c, n, src_first + j), want);
        else
            bench_src(c, src_rank, n, src_first + j, want);
        if (memcmp(want, (const unsigned char *)out + j * dsize, dsize) != 0)
            wrong++;
    }
    return wrong;
}

uint64_t bench_check(const bench_call_t *c, const bench_sizes_t *sz, int rank, int n)
{
    size_t cnt = c->count, dsize = bench_dtype_size(c->dtype);
    const unsigned char *out = c->rbuf;
    uint64_t wrong = 0;
    (void)sz;

    switch (c->op) {
    case BENCH_ALLREDUCE:
        return bench_compare(c, out, cnt, 0, 0, 1, n);
    case BENCH_REDUCE:
        return rank == c->root ? bench_compare(c, out, cnt, 0, 0, 1, n) : 0;
    case BENCH_BROADCAST:
        return bench_compare(c, out, cnt, c->root, 0, 0, n);
    case BENCH_REDUCE_SCATTER:
        return bench_compare(c, out, cnt, 0, (size_t)rank * cnt, 1, n);
    case BENCH_ALLGATHER:
    case BENCH_GATHER:
        if (c->op == BENCH_GATHER && rank != c->root)
            return 0;
        for (int q = 0; q < n; q++)
            wrong += bench_compare(c, out + (size_t)q * cnt * dsize, cnt, q, 0, 0, n);
        return wrong;
    case BENCH_ALLTOALL:
        for (int q = 0; q < n; q++)
            wrong +=
                bench_compare(c, out + (size_t)q * cnt * dsize, cnt, q, (size_t)rank * cnt, 0, n);
        return wrong;
    case BENCH_SCATTER:
        return bench_compare(c, out, cnt, c->root, (size_t)rank * cnt, 0, n);
    case BENCH_SENDRECV:
        return bench_compare(c, out, cnt, (rank + n - 1) % n, 0, 0, n);
    case BENCH_DISPATCH_COMBINE: /* identity experts, weights summing to 1 */
        return bench_compare(c, out, cnt, rank, 0, 0, n);
    default:
        return 0;
    }
}
