/*
 * The driver: for every axis (or the whole communicator), op, dtype and redop, every size is
 * validated once, then warmed up and timed, out of place and in place. A row's time is each
 * rank's average over the iterations, the maximum across ranks (the slowest rank bounds a
 * collective). Along an axis every group runs the same calls at once, as in training, and the
 * barrier and the maximum span all of them.
 */
#include "config.h"
#include "bench/bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void *bench_alloc(size_t bytes)
{
    size_t len = (bytes + 4095) / 4096 * 4096 + 4096;
    void *p = aligned_alloc(4096, len);
    if (p)
        memset(p, 0, len); /* touch every page before timing */
    return p;
}

/* The two buffers of the calls; with device buffers, their host copies (pinned) too. */
typedef struct {
    char *s, *r;   /* what the calls get */
    char *hs, *hr; /* host copies of device buffers; NULL for host buffers */
} bench_bufs_t;

static void bench_bufs_free(const bench_backend_t *b, bench_bufs_t *bufs)
{
    void (*release)(void *) = b->dev ? b->dev->free : free;
    release(bufs->s);
    release(bufs->r);
    if (b->dev) {
        release(bufs->hs);
        release(bufs->hr);
    }
    *bufs = (bench_bufs_t){0};
}

/* Two buffers of bytes (their host copies too for device buffers); -1 after printing why. */
static int bench_bufs_alloc(const bench_backend_t *b, size_t bytes, bench_bufs_t *bufs)
{
    *bufs = (bench_bufs_t){0};
    if (!b->dev) {
        bufs->s = bench_alloc(bytes);
        bufs->r = bench_alloc(bytes);
    } else {
        size_t len = (bytes + 4095) / 4096 * 4096 + 4096; /* as bench_alloc */
        bufs->s = b->dev->alloc(len, 0);
        bufs->r = bufs->s ? b->dev->alloc(len, 0) : NULL;
        bufs->hs = bufs->r ? b->dev->alloc(len, 1) : NULL;
        bufs->hr = bufs->hs ? b->dev->alloc(len, 1) : NULL;
        if (bufs->hr) {
            memset(bufs->hs, 0, len);
            memset(bufs->hr, 0, len);
        }
        if (bufs->hr && (b->dev->copy(bufs->s, bufs->hs, len) ||
                         b->dev->copy(bufs->r, bufs->hr, len) || b->dev->sync())) {
            bench_bufs_free(b, bufs);
            return -1;
        }
    }
    if (bufs->s && bufs->r && (!b->dev || bufs->hr))
        return 0;
    fprintf(stderr, "error: rank %d: cannot allocate 2 x %zu bytes%s\n", b->rank, bytes,
            b->dev ? " of device memory and their host copies" : "");
    bench_bufs_free(b, bufs);
    return -1;
}

/* Pointers of one call per the in-place conventions of mesh.h (as NCCL's). */
void bench_layout(bench_call_t *c, char *sbuf, char *rbuf, int rank)
{
    size_t block = c->count * bench_dtype_size(c->dtype) * (size_t)rank;
    c->sbuf = sbuf;
    c->rbuf = rbuf;
    if (!c->in_place)
        return;
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
        if (b->tl_sent(i, &v[i]))
            return -1;
    return 0;
}

/* One validated call: the data is written and checked on the host; device buffers get it by
 * copies on the bench's stream, and give the results back after the call ran there. */
static int bench_validate(const bench_backend_t *b, const bench_axis_t *a, const bench_call_t *c,
                          const bench_sizes_t *sz, const bench_bufs_t *bufs, uint64_t *wrong)
{
    const bench_device_t *dev = b->dev;
    bench_call_t h = *c;
    size_t len = sz->sbytes > sz->rbytes ? sz->sbytes : sz->rbytes;
    if (dev)
        bench_layout(&h, bufs->hs, bufs->hr, a->rank);
    bench_fill(&h, sz, a->rank, a->size);
    if (dev && (dev->copy(bufs->s, bufs->hs, len) || dev->copy(bufs->r, bufs->hr, len)))
        return -1;
    if (b->run(c))
        return -1;
    if (dev &&
        (dev->copy(bufs->hs, bufs->s, len) || dev->copy(bufs->hr, bufs->r, len) || dev->sync()))
        return -1;
    *wrong = bench_check(&h, sz, a->rank, a->size);
    return 0;
}

#define BENCH_MIN_TIME_ITERS_MAX 10000000L

/* n calls, on the device too; *s: the seconds they took. */
static int bench_calls(const bench_backend_t *b, bench_call_t *c, long n, double *s)
{
    double t0 = b->now();
    for (long i = 0; i < n; i++)
        if (b->run(c))
            return -1;
    if (b->dev && b->dev->sync())
        return -1;
    *s = b->now() - t0;
    return 0;
}

/* The timed calls: -n of them, and with --min-time more, batch after batch, until the slowest
 * rank has timed that long; each batch is sized by the time per call so far, and the sizes come
 * from the maximum across ranks, so every rank makes the same calls. *n: how many; *t: the
 * seconds of one. */
static int bench_timed(const bench_opts_t *o, const bench_backend_t *b, bench_call_t *c, long *n,
                       double *t)
{
    long done = 0, batch = o->iters;
    double spent = 0;
    for (;;) {
        double s;
        if (bench_calls(b, c, batch, &s))
            return -1;
        done += batch;
        spent += s;
        if (o->min_time <= 0 || done >= BENCH_MIN_TIME_ITERS_MAX)
            break;
        double most = spent;
        if (b->max_double(&most))
            return -1;
        if (most >= o->min_time)
            break;
        double want = most > 0 ? (o->min_time - most) * (double)done / most : (double)done;
        batch = want < (double)(BENCH_MIN_TIME_ITERS_MAX - done) ? (long)want + 1
                                                                 : BENCH_MIN_TIME_ITERS_MAX - done;
    }
    *n = done;
    *t = spent / (double)done;
    return 0;
}

static int bench_row(const bench_opts_t *o, const bench_backend_t *b, const bench_axis_t *a,
                     bench_call_t *c, const bench_sizes_t *sz, const bench_bufs_t *bufs,
                     bench_result_t *res)
{
    res->time_us = -1;
    res->wrong = -1;
    snprintf(res->algo, sizeof(res->algo), "-");
    if (!b->supports(c->op, c->dtype, c->redop, c->in_place))
        return 0;
    bench_layout(c, bufs->s, bufs->r, a->rank);

    if (o->check) {
        uint64_t wrong;
        if (bench_validate(b, a, c, sz, bufs, &wrong) || b->sum_u64(&wrong))
            return -1;
        res->wrong = (int64_t)wrong;
    }
    double warm, t;
    if (bench_calls(b, c, o->warmup, &warm))
        return -1;
    /* device calls return once enqueued: the timed ones start on an idle stream */
    if ((b->dev && b->dev->sync()) || b->barrier())
        return -1;
    uint64_t tl0[8], tl1[8];
    if (o->bytes && bench_tl_sent(b, tl0))
        return -1;
    long iters;
    if (bench_timed(o, b, c, &iters, &t))
        return -1;
    if (o->bytes && bench_tl_sent(b, tl1))
        return -1;
    for (int i = 0; o->bytes && b->tls && b->tls[i] && i < 8; i++) {
        res->tl_bytes[i] = (tl1[i] - tl0[i]) / (uint64_t)iters;
        if (b->sum_u64(&res->tl_bytes[i]))
            return -1;
    }
    /* before the reduction of the times, which is a collective of its own */
    snprintf(res->algo, sizeof(res->algo), "%s", b->algo(c->op));
    if (b->max_double(&t))
        return -1;

    res->time_us = t * 1e6;
    res->algbw = t > 0 ? (double)sz->bytes / t / 1e9 : 0;
    res->busbw = res->algbw * bench_busbw_factor(c->op, a->size);
    return 0;
}

/* The device's copy rate for S bytes (device to device, through the table) in GB/s, measured
 * by rank 0 alone while the others wait (0 on them): the bound of what ranks sharing the device
 * receive per second. */
static int bench_copy_rate(const bench_opts_t *o, const bench_backend_t *b,
                           const bench_bufs_t *bufs, size_t bytes, double *gbps)
{
    const bench_device_t *dev = b->dev;
    *gbps = 0;
    if (b->barrier())
        return -1;
    if (b->rank == 0 && bytes > 0) {
        for (int i = 0; i < o->warmup; i++)
            if (dev->copy(bufs->r, bufs->s, bytes))
                return -1;
        if (dev->sync())
            return -1;
        double t0 = b->now();
        for (int i = 0; i < o->iters; i++)
            if (dev->copy(bufs->r, bufs->s, bytes))
                return -1;
        if (dev->sync())
            return -1;
        double t = (b->now() - t0) / o->iters;
        *gbps = t > 0 ? (double)bytes / t / 1e9 : 0;
    }
    return b->barrier();
}

/* Bytes all ranks received per second over the copy rate, for a row's time. */
static void bench_print_ratio(const bench_result_t *r, double f, double bytes, double copy)
{
    if (r->time_us <= 0 || f <= 0 || copy <= 0)
        printf("  %7s", "-");
    else
        printf("  %7.3f", f * bytes / (r->time_us * 1e-6) / 1e9 / copy);
}

static void bench_print_result(const bench_result_t *r)
{
    if (r->time_us < 0) {
        printf("  %9s  %7s  %7s  %6s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    char wrong[24] = "N/A";
    if (r->wrong >= 0)
        snprintf(wrong, sizeof(wrong), "%" PRId64, r->wrong);
    printf("  %9.2f  %7.3f  %7.3f  %6s", r->time_us, r->algbw, r->busbw, wrong);
}

static void bench_table_header(const bench_opts_t *o, const bench_backend_t *b,
                               const bench_axis_t *a, bench_op_t op)
{
    if (b->naxes) {
        printf("#\n# axis %s: %s, group size %d, %d group%s at once, group of rank 0 on %d "
               "node%s\n",
               a->name, bench_op_name(op), a->size, a->groups, a->groups == 1 ? "" : "s", a->nnodes,
               a->nnodes == 1 ? "" : "s");
        if (op == BENCH_SENDRECV)
            printf("# sendrecv: each rank sends to the next of its group and receives from the "
                   "previous (a ring)\n");
    }
    printf("#\n# %s: %d rank%s on %d node%s, iters %d, warmup %d, check %d%s%s\n",
           bench_op_name(op), a->size, a->size == 1 ? "" : "s", a->nnodes,
           a->nnodes == 1 ? "" : "s", o->iters, o->warmup, o->check, o->algo ? ", algo " : "",
           o->algo ? o->algo : "");
    if (o->min_time > 0)
        printf("# each size timed for at least %g s (more iterations than %d where they are "
               "shorter)\n",
               o->min_time, o->iters);
    if (o->bytes && b->tls)
        printf("# transport=B: bytes sent over it per out-of-place call, summed over the ranks\n");
    printf("# time: each rank's average over the iterations, max across ranks%s; algbw = S/time; "
           "busbw = algbw x %.3f\n#\n",
           a->groups > 1 ? " of all groups" : "", bench_busbw_factor(op, a->size));
    if (b->dev) {
        printf("# device buffers (%s table): calls on a stream, time until it completed; "
               "copybw = a device-to-device copy of S bytes on rank 0's device alone\n",
               b->dev->table);
        printf("# rx/copy = bytes all ranks receive per second (%.3g x S / time) / copybw: about "
               "1 at most for ranks sharing one device (%d of %d here)\n",
               bench_recv_factor(op, a->size) * a->groups, b->dev->sharing, b->size);
    }
    printf("# %10s  %12s  %6s  %5s  %4s  %39s  %39s", "", "", "", "", "", "out-of-place",
           "in-place");
    if (b->dev)
        printf("  %7s  %7s  %7s", "bound", "out", "in");
    printf("\n");
    printf("# %10s  %12s  %6s  %5s  %4s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    if (b->dev)
        printf("  %7s  %7s  %7s", "copybw", "rx/copy", "rx/copy");
    printf("  %s\n", "algo");
    printf("# %10s  %12s  %6s  %5s  %4s  %9s  %7s  %7s  %6s  %9s  %7s  %7s  %6s", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    if (b->dev)
        printf("  %7s  %7s  %7s", "(GB/s)", "", "");
    printf("\n");
}

/* One table: every size of one (op, dtype, redop). Returns -1 on a failed call. */
static int bench_table(const bench_opts_t *o, const bench_backend_t *b, const bench_axis_t *a,
                       bench_op_t op, bench_dtype_t d, bench_redop_t redop,
                       const bench_bufs_t *bufs, bench_out_t *out, uint64_t *total_wrong)
{
    int rooted =
        op == BENCH_REDUCE || op == BENCH_BROADCAST || op == BENCH_GATHER || op == BENCH_SCATTER;
    double bw_sum = 0;
    int bw_n = 0;

    if (b->rank == 0)
        bench_table_header(o, b, a, op);
    for (size_t bytes = o->min_bytes;;) {
        bench_sizes_t sz;
        bench_result_t res[2] = {0};
        double copy = 0;
        bench_sizes(op, d, bytes, a->size, &sz);
        if (b->dev && bench_copy_rate(o, b, bufs, sz.bytes, &copy))
            return -1;
        for (int ip = 0; ip < 2; ip++) {
            bench_call_t c = {.op = op,
                              .dtype = d,
                              .redop = redop,
                              .root = o->root,
                              .in_place = ip,
                              .count = sz.count};
            if (bench_row(o, b, a, &c, &sz, bufs, &res[ip]))
                return -1;
            if (res[ip].wrong > 0)
                *total_wrong += (uint64_t)res[ip].wrong;
            if (res[ip].time_us >= 0) {
                bw_sum += res[ip].busbw;
                bw_n++;
            }
            if (b->rank == 0)
                bench_out_row(out, a, &c, &sz, &res[ip]);
        }
        if (b->rank == 0) {
            printf("  %10zu  %12zu  %6s  %5s  %4d", sz.bytes, sz.bytes / bench_dtype_size(d),
                   bench_dtype_name(d),
                   bench_op_is_reduction(op) ? bench_redop_name(redop) : "none",
                   rooted ? o->root : -1);
            bench_print_result(&res[0]);
            bench_print_result(&res[1]);
            if (b->dev) {
                double f = bench_recv_factor(op, a->size) * a->groups; /* all groups at once */
                printf("  %7.3f", copy);
                bench_print_ratio(&res[0], f, (double)sz.bytes, copy);
                bench_print_ratio(&res[1], f, (double)sz.bytes, copy);
            }
            if (res[1].time_us >= 0 && strcmp(res[0].algo, res[1].algo) != 0)
                printf("  %s/%s", res[0].algo, res[1].algo);
            else
                printf("  %s", res[0].algo);
            for (int i = 0; o->bytes && b->tls && b->tls[i] && i < 8; i++)
                printf("  %s=%" PRIu64, b->tls[i], res[0].tl_bytes[i]);
            printf("\n");
            fflush(stdout);
        }
        if (bytes > o->max_bytes / o->factor)
            break;
        bytes = bytes ? bytes * o->factor : 1;
    }
    if (b->rank == 0)
        printf("# avg bus bandwidth: %.3f GB/s\n", bw_n ? bw_sum / bw_n : 0.0);
    return 0;
}

#define BENCH_MAX_AXES 16
#define BENCH_ROOTED                                                                               \
    (1u << BENCH_REDUCE | 1u << BENCH_BROADCAST | 1u << BENCH_GATHER | 1u << BENCH_SCATTER)

/* Every table of one axis; -1 on a failed call. */
static int bench_axis_run(const bench_opts_t *o, const bench_backend_t *b, const bench_axis_t *a,
                          const bench_bufs_t *bufs, bench_out_t *out, uint64_t *total_wrong)
{
    for (int op = 0; op < BENCH_OP_COUNT; op++) {
        if (!(a->ops & (1u << op)))
            continue;
        for (int d = 0; d < BENCH_DTYPE_COUNT; d++) {
            if (!(o->dtypes & (1u << d)))
                continue;
            for (int r = 0; r < BENCH_REDOP_COUNT; r++) {
                if (!(o->redops & (1u << r)))
                    continue;
                if (bench_table(o, b, a, (bench_op_t)op, (bench_dtype_t)d, (bench_redop_t)r, bufs,
                                out, total_wrong))
                    return -1;
                if (!bench_op_is_reduction((bench_op_t)op))
                    break; /* one table, no redop */
            }
        }
    }
    return 0;
}

/* The communicators to measure: the axes of the grid, or the whole communicator. */
static int bench_axes_measured(const bench_opts_t *o, const bench_backend_t *b, bench_axis_t *axes,
                               int *naxes)
{
    if ((o->mesh || o->axes) && !b->axis) {
        if (b->rank == 0)
            fprintf(stderr, "error: --mesh and --axes need mesh-bench\n");
        return 2;
    }
    if (!b->axis) {
        axes[0] = (bench_axis_t){.name = "world",
                                 .rank = b->rank,
                                 .size = b->size,
                                 .groups = 1,
                                 .nnodes = b->nnodes,
                                 .ops = o->ops};
        *naxes = 1;
    } else {
        if (b->naxes > BENCH_MAX_AXES) {
            if (b->rank == 0)
                fprintf(stderr, "error: --axes: %d axes, at most %d\n", b->naxes, BENCH_MAX_AXES);
            return 2;
        }
        for (int i = 0; i < b->naxes; i++) {
            if (b->axis(i, &axes[i]))
                return 1;
            axes[i].ops = bench_axis_ops(o, axes[i].name);
        }
        *naxes = b->naxes;
    }
    for (int i = 0; i < *naxes; i++) {
        if (o->root < axes[i].size || !(axes[i].ops & BENCH_ROOTED))
            continue;
        if (b->rank == 0)
            fprintf(stderr, "error: -R %d: the root must be below the %d ranks of %s\n", o->root,
                    axes[i].size, axes[i].name);
        return 2;
    }
    return 0;
}

static double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* --idle: rank 0 sleeps, the others wait in a barrier; each reports the CPU it used. */
static int bench_idle(const bench_opts_t *o, const bench_backend_t *b)
{
    if (b->barrier())
        return 1;
    double c0 = bench_cpu_s(), t0 = b->now();
    if (b->rank == 0) {
        struct timespec ts = {.tv_sec = (time_t)o->idle};
        ts.tv_nsec = (long)((o->idle - (double)ts.tv_sec) * 1e9);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    if (b->barrier())
        return 1;
    double wall = b->now() - t0, pct = 100 * (bench_cpu_s() - c0) / wall;
    printf("# idle: rank %d waited %.3f s, CPU %.2f%% of a core%s\n", b->rank, wall, pct,
           b->rank == 0 ? " (the sleeper)" : "");
    fflush(stdout);
    double most = b->rank == 0 ? 0 : pct;
    if (b->max_double(&most))
        return 1;
    if (b->rank == 0)
        printf("# idle: most CPU of a waiting rank: %.2f%%\n", most);
    return 0;
}

int bench_main(const bench_opts_t *o, const bench_backend_t *b)
{
    if (o->idle > 0)
        return bench_idle(o, b);
    bench_axis_t axes[BENCH_MAX_AXES];
    bench_out_t *out = NULL;
    uint64_t total_wrong = 0;
    int naxes = 0, rc = bench_axes_measured(o, b, axes, &naxes), err = 0;

    if (rc)
        return rc;
    if (o->mem && !b->dev) {
        if (b->rank == 0)
            fprintf(stderr, "error: -m %s: %s-bench has no device buffers\n", o->mem, b->name);
        return 2;
    }
    bench_bufs_t bufs;
    if (bench_bufs_alloc(b, o->max_bytes, &bufs)) {
        b->abort();
        return 1;
    }
    if (b->rank == 0) {
        b->describe(stdout);
        out = bench_out_open(o, b, &err);
    }
    for (int i = 0; i < naxes && rc == 0; i++) {
        bench_axis_t cur;
        if (b->axis && b->axis(i, &cur))
            rc = 1; /* makes it the communicator of run() */
        else if (bench_axis_run(o, b, &axes[i], &bufs, out, &total_wrong))
            rc = 1;
        if (rc)
            b->abort();
    }
    if (rc == 0 && b->rank == 0) {
        printf("#\n# wrong elements: %" PRIu64 " %s\n#\n", total_wrong,
               total_wrong ? "FAILED" : "OK");
    }
    /* a failed plot or file is reported, and does not hide the measurements */
    if (b->rank == 0 && bench_out_close(out, o, b))
        err = 1;
    bench_bufs_free(b, &bufs);
    return rc ? rc : total_wrong || err ? 1 : 0;
}

int bench_memcpy(const bench_opts_t *o, double (*now)(void))
{
    char *src = bench_alloc(o->max_bytes), *dst = bench_alloc(o->max_bytes);
    FILE *csv = o->csv ? fopen(o->csv, "w") : NULL;
    if (!src || !dst) {
        fprintf(stderr, "error: cannot allocate 2 x %zu bytes\n", o->max_bytes);
        return 1;
    }
    if (csv)
        fprintf(csv, "%s\n", bench_csv_header);
    memset(src, 1, o->max_bytes);
    printf("# memcpy bandwidth of one process: bytes copied / time, average over %d iterations\n",
           o->iters);
    printf("# %10s  %9s  %7s\n# %10s  %9s  %7s\n", "size", "time", "bw", "(B)", "(us)", "(GB/s)");
    for (size_t bytes = o->min_bytes;;) {
        for (int i = 0; i < o->warmup; i++)
            memcpy(dst, src, bytes);
        double t0 = now();
        for (int i = 0; i < o->iters; i++) {
            memcpy(dst, src, bytes);
            __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep every copy */
        }
        double t = (now() - t0) / o->iters;
        double bw = t > 0 ? (double)bytes / t / 1e9 : 0;
        printf("  %10zu  %9.2f  %7.3f\n", bytes, t * 1e6, bw);
        if (csv)
            fprintf(csv, "memcpy,1,1,%zu,uint8,memcpy,%.3f,%.4f,%.4f,-1,0,none,none\n", bytes,
                    t * 1e6, bw, bw);
        if (bytes > o->max_bytes / o->factor)
            break;
        bytes = bytes ? bytes * o->factor : 1;
    }
    if (csv)
        fclose(csv);
    free(src);
    free(dst);
    return 0;
}
