/*
 * The benchmark's validation, without any library: every collective is carried out here on
 * n simulated ranks' buffers (filled by bench_fill, laid out by bench_layout), bench_check must
 * then find nothing wrong, and must find exactly the one element corrupted afterwards. Inputs
 * and every partial reduction, in both orders, must be exact in the type.
 */
#include "config.h"
#include "bench/bench.h"
#include "tests/harness/harness.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXN     8
#define MAXCOUNT 40

static char sbufs[MAXN][MAXN * MAXCOUNT * 8 + 64], rbufs[MAXN][MAXN * MAXCOUNT * 8 + 64];
static char input[MAXN][MAXN * MAXCOUNT * 8]; /* each rank's input, before anything ran */
static bench_call_t calls[MAXN];
static bench_opts_t opts;

static int representable(bench_dtype_t d, double v)
{
    unsigned char b[8];
    bench_encode(d, v, b);
    return bench_decode(d, b) == v;
}

static double fold(const bench_call_t *c, int n, size_t idx, int reverse)
{
    size_t dsize = bench_dtype_size(c->dtype);
    double acc = 0;
    for (int k = 0; k < n; k++) {
        int q = reverse ? n - 1 - k : k;
        double v = bench_decode(c->dtype, input[q] + idx * dsize);
        CHECK_MSG(representable(c->dtype, v), "input %g of %s", v, bench_dtype_name(c->dtype));
        if (k == 0)
            acc = v;
        else if (c->redop == BENCH_PROD)
            acc *= v;
        else if (c->redop == BENCH_MIN)
            acc = fmin(acc, v);
        else if (c->redop == BENCH_MAX)
            acc = fmax(acc, v);
        else
            acc += v;
        CHECK_MSG(representable(c->dtype, acc), "partial %g of %s %s over %d ranks", acc,
                  bench_redop_name(c->redop), bench_dtype_name(c->dtype), n);
    }
    return c->redop == BENCH_AVG ? acc / n : acc;
}

/* The reduced element idx, stored into out. */
static void reduced(const bench_call_t *c, int n, size_t idx, void *out)
{
    double fwd = fold(c, n, idx, 0), bwd = fold(c, n, idx, 1);
    CHECK(fwd == bwd);
    bench_encode(c->dtype, fwd, out);
}

static void run_collective(bench_op_t op, int n, size_t cnt, size_t dsize)
{
    size_t blk = cnt * dsize;
    for (int r = 0; r < n; r++) {
        bench_call_t *c = &calls[r];
        char *out = c->rbuf;
        switch (op) {
        case BENCH_ALLREDUCE:
        case BENCH_REDUCE:
            if (op == BENCH_REDUCE && r != c->root)
                break;
            for (size_t j = 0; j < cnt; j++)
                reduced(c, n, j, out + j * dsize);
            break;
        case BENCH_REDUCE_SCATTER:
            for (size_t j = 0; j < cnt; j++)
                reduced(c, n, (size_t)r * cnt + j, out + j * dsize);
            break;
        case BENCH_BROADCAST:
            memcpy(out, input[c->root], blk);
            break;
        case BENCH_ALLGATHER:
        case BENCH_GATHER:
            if (op == BENCH_GATHER && r != c->root)
                break;
            for (int q = 0; q < n; q++)
                memcpy(out + (size_t)q * blk, input[q], blk);
            break;
        case BENCH_ALLTOALL:
            for (int q = 0; q < n; q++)
                memcpy(out + (size_t)q * blk, input[q] + (size_t)r * blk, blk);
            break;
        case BENCH_SCATTER:
            memcpy(out, input[c->root] + (size_t)r * blk, blk);
            break;
        case BENCH_SENDRECV:
            memcpy(out, input[(r + n - 1) % n], blk);
            break;
        case BENCH_DISPATCH_COMBINE: /* identity experts: the token rows come back */
            memcpy(out, input[r], blk);
            break;
        default:
            CHECK(0);
        }
    }
}

/* The rank and element whose corruption bench_check must notice. */
static void victim(bench_op_t op, int n, int root, size_t cnt, int *rank, size_t *elem)
{
    int rooted = op == BENCH_REDUCE || op == BENCH_GATHER;
    *rank = rooted ? root : n - 1;
    *elem =
        op == BENCH_ALLGATHER || op == BENCH_GATHER || op == BENCH_ALLTOALL ? n * cnt - 1 : cnt - 1;
}

static void one(bench_op_t op, bench_dtype_t d, bench_redop_t redop, int n, size_t cnt, int ip)
{
    size_t dsize = bench_dtype_size(d);
    bench_sizes_t sz;
    int blocks = op == BENCH_REDUCE_SCATTER || op == BENCH_ALLGATHER || op == BENCH_ALLTOALL ||
                 op == BENCH_GATHER || op == BENCH_SCATTER;
    bench_sizes(op, d, cnt * dsize * (size_t)(blocks ? n : 1), n, &sz);
    CHECK_MSG(sz.count == cnt, "%s count %zu, expected %zu", bench_op_name(op), sz.count, cnt);
    for (int r = 0; r < n; r++) {
        calls[r] = (bench_call_t){
            .op = op, .dtype = d, .redop = redop, .root = n - 1, .in_place = ip, .count = cnt};
        bench_layout(&calls[r], sbufs[r], rbufs[r], r);
        bench_fill(&calls[r], &sz, r, n);
        /* the input as the collective sees it */
        const char *in = calls[r].sbuf;
        size_t inbytes = op == BENCH_ALLGATHER || op == BENCH_GATHER ? cnt * dsize : sz.sbytes;
        memcpy(input[r], in, inbytes);
    }
    run_collective(op, n, cnt, dsize);
    for (int r = 0; r < n; r++)
        CHECK_MSG(bench_check(&calls[r], &sz, r, n) == 0,
                  "%s %s %s n=%d count=%zu in_place=%d "
                  "rank %d",
                  bench_op_name(op), bench_dtype_name(d), bench_redop_name(redop), n, cnt, ip, r);
    if (cnt == 0)
        return;
    int vr;
    size_t ve;
    victim(op, n, n - 1, cnt, &vr, &ve);
    ((unsigned char *)calls[vr].rbuf)[ve * dsize] ^= 0xff;
    CHECK_MSG(bench_check(&calls[vr], &sz, vr, n) == 1, "%s %s corruption on rank %d unnoticed",
              bench_op_name(op), bench_dtype_name(d), vr);
}

/* mesh-bench's options from ARGS split at spaces, then the NEXTRA words of EXTRA as they are
 * (paths, which may hold spaces). */
static int parse_with(const char *args, int nextra, char **extra)
{
    static char buf[512]; /* opts point into it */
    char *argv[32];
    int argc = 0;
    snprintf(buf, sizeof(buf), "mesh-bench %s", args);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok && argc < 31 - nextra;
         tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    for (int i = 0; i < nextra; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    optind = 0; /* glibc: start a new scan */
    return bench_parse(argc, argv, "mesh-bench", &opts);
}

static int parse(const char *args)
{
    return parse_with(args, 0, NULL);
}

/* --mesh, --axes and the ops of each axis. */
static void test_mesh_options(void)
{
    CHECK(parse("--mesh tp=2,dp=4,pp=1 --axes tp,dp-cp -o allreduce,alltoall") == 0);
    CHECK(opts.mesh_size[BENCH_AXIS_TP] == 2 && opts.mesh_size[BENCH_AXIS_DP] == 4 &&
          opts.mesh_size[BENCH_AXIS_PP] == 1 && opts.mesh_size[BENCH_AXIS_CP] == 0 &&
          opts.mesh_size[BENCH_AXIS_EP] == 0);
    CHECK(strcmp(opts.axes, "tp,dp-cp") == 0 && !opts.reorder && !opts.order);
    CHECK(bench_axis_ops(&opts, "tp") == (1u << BENCH_ALLREDUCE | 1u << BENCH_ALLTOALL));
    CHECK(bench_axis_ops(&opts, "dp-cp") == (1u << BENCH_ALLREDUCE | 1u << BENCH_ALLTOALL));
    CHECK(bench_axis_ops(&opts, "pp") == 1u << BENCH_SENDRECV);
    CHECK(parse("--mesh ep=8 --order pp-ep --reorder --json j --plot d") == 0);
    CHECK(opts.mesh_size[BENCH_AXIS_EP] == 8 && opts.reorder && strcmp(opts.order, "pp-ep") == 0);
    CHECK(strcmp(opts.json, "j") == 0 && strcmp(opts.plot, "d") == 0 && !opts.axes);
    CHECK(parse("--mesh xp=2") == 2);
    CHECK(parse("--mesh tp=2,tp=2") == 2);
    CHECK(parse("--mesh tp=0") == 2);
    CHECK(parse("--mesh tp") == 2);
    CHECK(parse("--mesh ,") == 2);
    CHECK(parse("--axes tp") == 2);
    CHECK(parse("--reorder") == 2);
}

static char *slurp(const char *path)
{
    static char text[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = 0;
    return text;
}

static void no_describe(FILE *out)
{
    (void)out;
}

/* The CSV and JSON rows of two axes, exactly. */
static void test_out_files(void)
{
    static char dir[4096], csv[4200], json[4200];
    bench_backend_t b = {
        .name = "mesh", .rank = 0, .size = 8, .nnodes = 2, .describe = no_describe};
    bench_axis_t tp = {.name = "tp", .rank = 1, .size = 2, .groups = 4, .nnodes = 1};
    bench_axis_t pp = {.name = "pp", .rank = 0, .size = 2, .groups = 4, .nnodes = 2};
    bench_call_t c = {.op = BENCH_ALLREDUCE, .dtype = BENCH_FP32, .redop = BENCH_SUM};
    bench_sizes_t sz = {.count = 256, .bytes = 1024};
    bench_result_t r = {
        .time_us = 10, .algbw = 0.1024, .busbw = 0.1024, .wrong = 0, .algo = "ring"};
    int err;

    th_tmpdir(dir, sizeof(dir), "bench_out");
    snprintf(csv, sizeof(csv), "%s/r.csv", dir);
    snprintf(json, sizeof(json), "%s/r.json", dir);
    char *files[] = {"--csv", csv, "--json", json};
    CHECK(parse_with("--mesh tp=2,dp=2,pp=2", 4, files) == 0);
    bench_out_t *out = bench_out_open(&opts, &b, &err);
    CHECK(out != NULL && err == 0);
    bench_out_row(out, &tp, &c, &sz, &r);
    c.op = BENCH_SENDRECV;
    r.time_us = -1; /* N/A rows are left out */
    bench_out_row(out, &pp, &c, &sz, &r);
    r.time_us = 20;
    r.wrong = -1;
    snprintf(r.algo, sizeof(r.algo), "p2p");
    bench_out_row(out, &pp, &c, &sz, &r);
    CHECK(bench_out_close(out, &opts, &b) == 0);
    CHECK_MSG(strcmp(slurp(csv),
                     "op,nranks,nodes,bytes,dtype,algo,time_us,algbw_GBps,"
                     "busbw_GBps,wrong,in_place,redop,axis,mem\n"
                     "allreduce,2,1,1024,fp32,ring,10.000,0.1024,0.1024,0,0,sum,tp,host\n"
                     "sendrecv,2,2,1024,fp32,p2p,20.000,0.1024,0.1024,-1,0,none,pp,host\n") == 0,
              "csv: %s", slurp(csv));
    CHECK_MSG(strcmp(slurp(json),
                     "{\n  \"bench\": \"mesh\",\n  \"nranks\": 8,\n  \"nodes\": 2,\n"
                     "  \"mem\": \"host\",\n"
                     "  \"mesh\": \"tp=2,dp=2,pp=2\",\n  \"order\": \"tp-cp-ep-dp-pp\",\n"
                     "  \"iters\": 20,\n  \"warmup\": 5,\n  \"rows\": [\n"
                     "    {\"op\": \"allreduce\", \"axis\": \"tp\", \"nranks\": 2, "
                     "\"groups\": 4, \"nodes\": 1, \"bytes\": 1024, \"dtype\": \"fp32\", "
                     "\"redop\": \"sum\", \"in_place\": false, \"algo\": \"ring\", "
                     "\"time_us\": 10.000, \"algbw_GBps\": 0.1024, \"busbw_GBps\": 0.1024, "
                     "\"wrong\": 0},\n"
                     "    {\"op\": \"sendrecv\", \"axis\": \"pp\", \"nranks\": 2, "
                     "\"groups\": 4, \"nodes\": 2, \"bytes\": 1024, \"dtype\": \"fp32\", "
                     "\"redop\": \"none\", \"in_place\": false, \"algo\": \"p2p\", "
                     "\"time_us\": 20.000, \"algbw_GBps\": 0.1024, \"busbw_GBps\": 0.1024, "
                     "\"wrong\": -1}\n  ]\n}\n") == 0,
              "json: %s", slurp(json));

    /* device buffers: the table's name in the mem column and field */
    bench_device_t dev = {.table = "emu", .device = 0, .sharing = 8};
    b.dev = &dev;
    out = bench_out_open(&opts, &b, &err);
    CHECK(out != NULL && err == 0);
    bench_out_row(out, &pp, &c, &sz, &r);
    CHECK(bench_out_close(out, &opts, &b) == 0);
    CHECK_MSG(strstr(slurp(csv), "\nsendrecv,2,2,1024,fp32,p2p,20.000,0.1024,0.1024,-1,0,none,"
                                 "pp,emu\n") != NULL,
              "device csv: %s", slurp(csv));
    CHECK_MSG(strstr(slurp(json), "\n  \"mem\": \"emu\",\n") != NULL, "device json: %s",
              slurp(json));
    unlink(csv);
    unlink(json);
    rmdir(dir);
}

int main(void)
{
    static const int ns[] = {1, 2, 3, 4, 5, 8};
    static const size_t counts[] = {0, 1, 5, 17, MAXCOUNT};
    bench_sizes_t sz;

    /* nccl-tests sizes: the whole buffer for the block collectives */
    bench_sizes(BENCH_ALLGATHER, BENCH_FP32, 1024, 4, &sz);
    CHECK(sz.count == 64 && sz.bytes == 1024 && sz.sbytes == 256 && sz.rbytes == 1024);
    bench_sizes(BENCH_REDUCE_SCATTER, BENCH_FP32, 1024, 3, &sz);
    CHECK(sz.count == 85 && sz.bytes == 1020 && sz.sbytes == 1020 && sz.rbytes == 340);
    bench_sizes(BENCH_ALLREDUCE, BENCH_FP64, 1000, 3, &sz);
    CHECK(sz.count == 125 && sz.bytes == 1000);
    CHECK(bench_busbw_factor(BENCH_ALLREDUCE, 4) == 1.5);
    CHECK(bench_busbw_factor(BENCH_ALLTOALL, 4) == 0.75);
    CHECK(bench_busbw_factor(BENCH_BROADCAST, 4) == 1.0);
    CHECK(bench_busbw_factor(BENCH_DISPATCH_COMBINE, 4) == 3.0);
    /* dispatch_combine: whole rows of BENCH_EP_HIDDEN elements beyond one row */
    bench_sizes(BENCH_DISPATCH_COMBINE, BENCH_FP32, 4 * (3 * BENCH_EP_HIDDEN + 5), 4, &sz);
    CHECK(sz.count == 3 * BENCH_EP_HIDDEN && sz.bytes == sz.count * 4 && sz.rbytes == sz.bytes);
    bench_sizes(BENCH_DISPATCH_COMBINE, BENCH_BF16, 2 * 100, 4, &sz);
    CHECK(sz.count == 100 && sz.sbytes == 200);
    CHECK(parse("-o dispatch_combine --skew 1.5 --ep-path hier") == 0 &&
          opts.ops == 1u << BENCH_DISPATCH_COMBINE && opts.skew == 1.5 &&
          !strcmp(opts.ep_path, "hier"));
    CHECK(parse("--skew -1") == 2 && parse("--ep-path ring") == 2);

    for (int op = 0; op < BENCH_OP_COUNT; op++)
        for (int d = 0; d < BENCH_DTYPE_COUNT; d++)
            for (int r = 0; r < BENCH_REDOP_COUNT; r++) {
                for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
                    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                        for (int ip = 0; ip < 2; ip++) {
                            if (ip && (op == BENCH_SENDRECV || op == BENCH_DISPATCH_COMBINE))
                                continue;
                            one((bench_op_t)op, (bench_dtype_t)d, (bench_redop_t)r, ns[ni],
                                counts[ci], ip);
                        }
                if (!bench_op_is_reduction((bench_op_t)op))
                    break;
            }
    test_mesh_options();
    test_out_files();
    printf("bench data: every op, dtype and redop validated on 1..8 simulated ranks; mesh "
           "options and result files\n");
    return 0;
}
