/*
 * The driver: for every op, dtype and redop, every size is validated once, then warmed up and
 * timed, out of place and in place. A row's time is each rank's average over the iterations,
 * the maximum across ranks (the slowest rank bounds a collective).
 */
#include "config.h"
#include "bench/bench.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    double time_us; /* < 0: not run (N/A) */
    double algbw, busbw;
    int64_t wrong;  /* -1: not checked */
    char algo[32];
    uint64_t tl_bytes[8]; /* --bytes: per transport, per call, all ranks */
} bench_result_t;

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *bench_alloc(size_t bytes)
{
    size_t len = (bytes + 4095) / 4096 * 4096 + 4096;
    void *p = aligned_alloc(4096, len);
    if (p) memset(p, 0, len); /* touch every page before timing */
    return p;
}

/* Pointers of one call per the in-place conventions of mesh.h (as NCCL's). */
void bench_layout(bench_call_t *c, char *sbuf, char *rbuf, int rank)
{
    size_t block = c->count * bench_dtype_size(c->dtype) * (size_t)rank;
    c->sbuf = sbuf;
    c->rbuf = rbuf;
    if (!c->in_place) return;
    switch (c->op) {
    case BENCH_REDUCE_SCATTER:
    case BENCH_SCATTER:
        c->rbuf = sbuf + block;
        break;
    case BENCH_ALLGATHER:
    case BENCH_GATHER:
        c->rbuf = rbuf;
        c->sbuf = rbuf + block;
        break;
    default:
        c->rbuf = sbuf;
        break;
    }
}

/* --bytes: what this rank has sent over each transport so far. */
static int bench_tl_sent(const bench_backend_t *b, uint64_t *v)
{
    for (int i = 0; i < 8; i++)
        v[i] = 0;
    for (int i = 0; b->tls && b->tls[i] && i < 8; i++)
        if (b->tl_sent(i, &v[i])) return -1;
    return 0;
}

static int bench_row(const bench_opts_t *o, const bench_backend_t *b, bench_call_t *c,
                     const bench_sizes_t *sz, char *sbuf, char *rbuf, bench_result_t *res)
{
    res->time_us = -1;
    res->wrong = -1;
    snprintf(res->algo, sizeof(res->algo), "-");
    if (!b->supports(c->op, c->dtype, c->redop, c->in_place)) return 0;
    bench_layout(c, sbuf, rbuf, b->rank);

    if (o->check) {
        uint64_t wrong;
        bench_fill(c, sz, b->rank, b->size);
        if (b->run(c)) return -1;
        wrong = bench_check(c, sz, b->rank, b->size);
        if (b->sum_u64(&wrong)) return -1;
        res->wrong = (int64_t)wrong;
    }
    for (int i = 0; i < o->warmup; i++)
        if (b->run(c)) return -1;
    if (b->barrier()) return -1;
    uint64_t tl0[8], tl1[8];
    if (o->bytes && bench_tl_sent(b, tl0)) return -1;
    double t0 = bench_now();
    for (int i = 0; i < o->iters; i++)
        if (b->run(c)) return -1;
    double t = (bench_now() - t0) / o->iters;
    if (o->bytes && bench_tl_sent(b, tl1)) return -1;
    for (int i = 0; o->bytes && b->tls && b->tls[i] && i < 8; i++) {
        res->tl_bytes[i] = (tl1[i] - tl0[i]) / (uint64_t)o->iters;
        if (b->sum_u64(&res->tl_bytes[i])) return -1;
    }
    /* before the reduction of the times, which is a collective of its own */
    snprintf(res->algo, sizeof(res->algo), "%s", b->algo(c->op));
    if (b->max_double(&t)) return -1;

    res->time_us = t * 1e6;
    res->algbw = t > 0 ? (double)sz->bytes / t / 1e9 : 0;
    res->busbw = res->algbw * bench_busbw_factor(c->op, b->size);
    return 0;
}

static void bench_print_result(const bench_result_t *r)
{
    if (r->time_us < 0) {
        printf("  %9s  %7s  %7s  %6s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    char wrong[24] = "N/A";
    if (r->wrong >= 0) snprintf(wrong, sizeof(wrong), "%" PRId64, r->wrong);
    printf("  %9.2f  %7.3f  %7.3f  %6s", r->time_us, r->algbw, r->busbw, wrong);
}

static void bench_csv_row(FILE *csv, const bench_backend_t *b, const bench_call_t *c,
                          const bench_sizes_t *sz, const bench_result_t *r)
{
    if (!csv || r->time_us < 0) return;
    fprintf(csv, "%s,%d,%d,%zu,%s,%s,%.3f,%.4f,%.4f,%" PRId64 ",%d,%s\n", bench_op_name(c->op),
            b->size, b->nnodes, sz->bytes, bench_dtype_name(c->dtype), r->algo, r->time_us,
            r->algbw, r->busbw, r->wrong, c->in_place,
            bench_op_is_reduction(c->op) ? bench_redop_name(c->redop) : "none");
}

static void bench_table_header(const bench_opts_t *o, const bench_backend_t *b, bench_op_t op)
{
    printf("#\n# %s: %d rank%s on %d node%s, iters %d, warmup %d, check %d%s%s\n",
           bench_op_name(op), b->size, b->size == 1 ? "" : "s", b->nnodes,
           b->nnodes == 1 ? "" : "s", o->iters, o->warmup, o->check, o->algo ? ", algo " : "",
           o->algo ? o->algo : "");
    if (o->bytes && b->tls)
        printf("# transport=B: bytes sent over it per out-of-place call, summed over the ranks\n");
    printf("# time: each rank's average over the iterations, max across ranks; algbw = S/time; "
           "busbw = algbw x %.3f\n#\n", bench_busbw_factor(op, b->size));
    printf("# %10s  %12s  %6s  %5s  %4s  %39s  %39s\n", "", "", "", "", "", "out-of-place",
           "in-place");
    printf("# %10s  %12s  %6s  %5s  %4s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s  %s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong", "algo");
    printf("# %10s  %12s  %6s  %5s  %4s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
}

/* One table: every size of one (op, dtype, redop). Returns -1 on a failed call. */
static int bench_table(const bench_opts_t *o, const bench_backend_t *b, bench_op_t op,
                       bench_dtype_t d, bench_redop_t redop, char *sbuf, char *rbuf, FILE *csv,
                       uint64_t *total_wrong)
{
    int rooted = op == BENCH_REDUCE || op == BENCH_BROADCAST || op == BENCH_GATHER ||
                 op == BENCH_SCATTER;
    double bw_sum = 0;
    int bw_n = 0;

    if (b->rank == 0) bench_table_header(o, b, op);
    for (size_t bytes = o->min_bytes;;) {
        bench_sizes_t sz;
        bench_result_t res[2] = {0};
        bench_sizes(op, d, bytes, b->size, &sz);
        for (int ip = 0; ip < 2; ip++) {
            bench_call_t c = {.op = op, .dtype = d, .redop = redop, .root = o->root,
                              .in_place = ip, .count = sz.count};
            if (bench_row(o, b, &c, &sz, sbuf, rbuf, &res[ip])) return -1;
            if (res[ip].wrong > 0) *total_wrong += (uint64_t)res[ip].wrong;
            if (res[ip].time_us >= 0) {
                bw_sum += res[ip].busbw;
                bw_n++;
            }
            if (b->rank == 0) bench_csv_row(csv, b, &c, &sz, &res[ip]);
        }
        if (b->rank == 0) {
            printf("  %10zu  %12zu  %6s  %5s  %4d", sz.bytes, sz.bytes / bench_dtype_size(d),
                   bench_dtype_name(d),
                   bench_op_is_reduction(op) ? bench_redop_name(redop) : "none",
                   rooted ? o->root : -1);
            bench_print_result(&res[0]);
            bench_print_result(&res[1]);
            if (res[1].time_us >= 0 && strcmp(res[0].algo, res[1].algo) != 0)
                printf("  %s/%s", res[0].algo, res[1].algo);
            else
                printf("  %s", res[0].algo);
            for (int i = 0; o->bytes && b->tls && b->tls[i] && i < 8; i++)
                printf("  %s=%" PRIu64, b->tls[i], res[0].tl_bytes[i]);
            printf("\n");
            fflush(stdout);
        }
        if (bytes > o->max_bytes / o->factor) break;
        bytes = bytes ? bytes * o->factor : 1;
    }
    if (b->rank == 0) printf("# avg bus bandwidth: %.3f GB/s\n", bw_n ? bw_sum / bw_n : 0.0);
    return 0;
}

int bench_main(const bench_opts_t *o, const bench_backend_t *b)
{
    uint64_t total_wrong = 0;
    FILE *csv = NULL;
    int rc = 0;

    if (o->root >= b->size) {
        if (b->rank == 0)
            fprintf(stderr, "error: -R %d: the root must be below the %d ranks\n", o->root,
                    b->size);
        return 2;
    }
    char *sbuf = bench_alloc(o->max_bytes), *rbuf = bench_alloc(o->max_bytes);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "error: rank %d: cannot allocate 2 x %zu bytes\n", b->rank, o->max_bytes);
        b->abort();
        return 1;
    }
    if (b->rank == 0) {
        b->describe(stdout);
        if (o->csv) {
            csv = fopen(o->csv, "w");
            if (!csv) fprintf(stderr, "error: cannot write %s: %m\n", o->csv);
            else
                fprintf(csv, "op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,"
                             "wrong,in_place,redop\n");
        }
    }
    for (int op = 0; op < BENCH_OP_COUNT && rc == 0; op++) {
        if (!(o->ops & (1u << op))) continue;
        for (int d = 0; d < BENCH_DTYPE_COUNT && rc == 0; d++) {
            if (!(o->dtypes & (1u << d))) continue;
            for (int r = 0; r < BENCH_REDOP_COUNT && rc == 0; r++) {
                if (!(o->redops & (1u << r))) continue;
                if (bench_table(o, b, (bench_op_t)op, (bench_dtype_t)d, (bench_redop_t)r, sbuf,
                                rbuf, csv, &total_wrong)) {
                    b->abort();
                    rc = 1;
                }
                if (!bench_op_is_reduction((bench_op_t)op)) break; /* one table, no redop */
            }
        }
    }
    if (rc == 0 && b->rank == 0) {
        printf("#\n# wrong elements: %" PRIu64 " %s\n#\n", total_wrong,
               total_wrong ? "FAILED" : "OK");
    }
    if (csv) fclose(csv);
    free(sbuf);
    free(rbuf);
    return rc ? rc : total_wrong ? 1 : 0;
}

int bench_memcpy(const bench_opts_t *o)
{
    char *src = bench_alloc(o->max_bytes), *dst = bench_alloc(o->max_bytes);
    FILE *csv = o->csv ? fopen(o->csv, "w") : NULL;
    if (!src || !dst) {
        fprintf(stderr, "error: cannot allocate 2 x %zu bytes\n", o->max_bytes);
        return 1;
    }
    if (csv)
        fprintf(csv, "op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,busbw_GBps,wrong,"
                     "in_place,redop\n");
    memset(src, 1, o->max_bytes);
    printf("# memcpy bandwidth of one process: bytes copied / time, average over %d iterations\n",
           o->iters);
    printf("# %10s  %9s  %7s\n# %10s  %9s  %7s\n", "size", "time", "bw", "(B)", "(us)", "(GB/s)");
    for (size_t bytes = o->min_bytes;;) {
        for (int i = 0; i < o->warmup; i++)
            memcpy(dst, src, bytes);
        double t0 = bench_now();
        for (int i = 0; i < o->iters; i++) {
            memcpy(dst, src, bytes);
            __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep every copy */
        }
        double t = (bench_now() - t0) / o->iters;
        double bw = t > 0 ? (double)bytes / t / 1e9 : 0;
        printf("  %10zu  %9.2f  %7.3f\n", bytes, t * 1e6, bw);
        if (csv)
            fprintf(csv, "memcpy,1,1,%zu,uint8,memcpy,%.3f,%.4f,%.4f,-1,0,none\n", bytes, t * 1e6,
                    bw, bw);
        if (bytes > o->max_bytes / o->factor) break;
        bytes = bytes ? bytes * o->factor : 1;
    }
    if (csv) fclose(csv);
    free(src);
    free(dst);
    return 0;
}
