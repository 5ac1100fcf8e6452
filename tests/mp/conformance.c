/*
 * Collective conformance, run under meshrun: every dtype x op x size, in place and out of
 * place, exact expected values; the v-collectives also with caller-chosen layouts (gaps, blocks
 * out of order, zero and uneven counts: conformance_v.c). Every buffer has guard bytes around
 * it: nothing outside a buffer may change, nor a send buffer, nor a gap between blocks. The
 * algorithm is forced by MESH_TUNE (set by the driver); the program reports how many calls used
 * it so the driver can check it was exercised.
 *
 *   conformance --list                 lists "collective algorithm" pairs of the registry
 *   conformance -o COLL [-a ALGO] [-q] [-d DTYPES] [-r REPS] [-s] [-D [-R]]
 *                                      runs one collective (-d: only these comma-separated
 *                                      dtypes, for quicker transport sweeps; -r: every call
 *                                      REPS times on the same buffers with new data each time,
 *                                      so that repeated calls replay their schedule; -s: small
 *                                      sizes only; -D: on device buffers of the active table,
 *                                      cuda or emu, ordered on a stream; exits 77 with no
 *                                      device; -R: each call with a request waited for)
 */
#include "tests/mp/conformance.h"
#include "collectives/comm.h"
#include "collectives/device/dev.h"
#include "collectives/device/dev_ipc.h"
#include "libmesh/dtype.h"
#include "libmesh/mem.h"
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int rank, size, failures, calls, used;
static int verbose = 1;
int reps = 1, rep; /* -r, and the repetition running: every input depends on it */
const char *algo = "";
static const char *only_dtypes; /* -d: comma-separated dtype names, NULL for all */
static int small_only;          /* -s: no large sizes */

int dtype_selected(mesh_dtype_t d)
{
    if (only_dtypes == NULL)
        return 1;
    const char *name = mesh_dtype_name(d);
    size_t n = strlen(name);
    for (const char *p = only_dtypes; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

mesh_comm_h comm;

/* Largest M such that every integer in [0, M) is exact in the dtype. */
double exact_range(mesh_dtype_t d)
{
    switch (d) {
    case MESH_INT8:
        return 127;
    case MESH_UINT8:
        return 255;
    case MESH_FP8_E4M3:
        return 16;
    case MESH_FP8_E5M2:
        return 8;
    case MESH_FP16:
        return 2048;
    case MESH_BF16:
        return 256;
    default:
        return 1 << 20;
    }
}

/* Values per element of a sum: fp8 holds every integer only up to 8 (e5m2) or 16 (e4m3), so
 * sums over 8 ranks of 0/1 inputs stay exact in every partial order. */
size_t sum_mod = 3;

/* Input of rank r at element i for a reduction with op; every result stays exact. */
double red_input(mesh_op_t op, int r, size_t i)
{
    switch (op) {
    case MESH_SUM:
        return (double)((r + i + (size_t)rep) % sum_mod);
    case MESH_PROD:
        return (r == (int)((i + (size_t)rep) % (size_t)size)) ? 2.0 : 1.0;
    case MESH_MIN:
    case MESH_MAX:
        return (double)(((size_t)r * 7 + i + (size_t)rep) % 5);
    case MESH_AVG:
        /* fp8: every partial sum must stay within the exact integers, so no extra term */
        if (sum_mod == 2)
            return (double)((i + (size_t)rep) % 2);
        return (double)((i + (size_t)rep) % sum_mod) + (r == (int)(i % (size_t)size) ? size : 0);
    default:
        return (double)((r + i + (size_t)rep) % sum_mod); /* pre-multiplied sum */
    }
}

double red_expect(mesh_op_t op, size_t i, double premul)
{
    double acc = red_input(op, 0, i);
    for (int r = 1; r < size; r++) {
        double v = red_input(op, r, i);
        switch (op) {
        case MESH_PROD:
            acc *= v;
            break;
        case MESH_MIN:
            acc = v < acc ? v : acc;
            break;
        case MESH_MAX:
            acc = v > acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (op == MESH_AVG)
        acc /= size;
    if ((int)op >= MESH_OP_COUNT) {
        acc = 0;
        for (int r = 0; r < size; r++)
            acc += premul * red_input(op, r, i);
    }
    return acc;
}

/* Data of rank r's block element i for moving collectives. */
double move_value(mesh_dtype_t d, int r, size_t i)
{
    return (double)(((size_t)r * 131 + i * 7 + (size_t)rep * 3) % (size_t)exact_range(d));
}

void fill(mesh_dtype_t d, void *buf, size_t off, size_t n, double (*f)(mesh_dtype_t, int, size_t),
          int r)
{
    for (size_t i = 0; i < n; i++)
        mesh_dtype_set(d, buf, off + i, f(d, r, i));
}

int device_mode, use_requests;
void *test_stream;
mesh_request_h cur_req;
static const mesh_mem_ops_t *dev_ops; /* -D: the active device table */
static void *sync_event;
static int dev_ordinal;

static void *host_alloc(size_t bytes)
{
    char *p = malloc(ALLOC_BYTES(bytes));
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* Device mode: every buffer is a device allocation with a host copy (pinned memory of the
 * table). The checks read and write the host copy; a call gets device addresses (DEV), which
 * copy every live buffer to its device allocation first, and done_call copies them back once
 * the stream ran the call. */
#define MAX_SHADOWS 8
static struct shadow {
    char *host, *dev;
    size_t bytes; /* the whole allocation, guards included */
} shadows[MAX_SHADOWS];
static int staged; /* device buffers hold the host copies, and the call may change them */

/* Waits until everything enqueued on the test stream ran (60 s at most). */
static void stream_sync(void)
{
    mesh_status_t st = dev_ops->event_record(sync_event, test_stream);
    for (long k = 0; st == MESH_OK; k++) {
        st = dev_ops->event_query(sync_event);
        if (st != MESH_INPROGRESS)
            break;
        st = MESH_OK;
        if (k > 60L * 1000 * 10) {
            fprintf(stderr, "[rank %d] the test stream did not drain in 60 s\n", rank);
            exit(2);
        }
        usleep(100);
    }
    if (st != MESH_OK) {
        fprintf(stderr, "[rank %d] stream sync: %s\n", rank, mesh_status_string(st));
        exit(2);
    }
}

static void copy_all(int to_device)
{
    for (int k = 0; k < MAX_SHADOWS; k++) {
        struct shadow *sh = &shadows[k];
        if (sh->host == NULL)
            continue;
        mesh_status_t st = to_device
                               ? dev_ops->copy_async(sh->dev, sh->host, sh->bytes, test_stream)
                               : dev_ops->copy_async(sh->host, sh->dev, sh->bytes, test_stream);
        if (st != MESH_OK) {
            fprintf(stderr, "[rank %d] copy %s the device: %s\n", rank, to_device ? "to" : "from",
                    mesh_status_string(st));
            exit(2);
        }
    }
    stream_sync();
}

void *dev_ptr(void *p)
{
    if (!device_mode || p == NULL)
        return p;
    for (int k = 0; k < MAX_SHADOWS; k++) {
        struct shadow *sh = &shadows[k];
        if (sh->host != NULL && (char *)p >= sh->host && (char *)p <= sh->host + sh->bytes) {
            if (!staged)
                copy_all(1);
            staged = 1;
            return sh->dev + ((char *)p - sh->host);
        }
    }
    fprintf(stderr, "[rank %d] %p is no buffer of the test\n", rank, p);
    exit(2);
}

void *xalloc(size_t bytes)
{
    void *p;
    if (!device_mode) {
        p = host_alloc(bytes);
    } else {
        int k = 0;
        while (k < MAX_SHADOWS && shadows[k].host != NULL)
            k++;
        struct shadow *sh = &shadows[k];
        if (k == MAX_SHADOWS ||
            dev_ops->host_alloc((void **)&sh->host, ALLOC_BYTES(bytes)) != MESH_OK ||
            dev_ops->dev_alloc((void **)&sh->dev, ALLOC_BYTES(bytes), dev_ordinal) != MESH_OK) {
            fprintf(stderr, "out of %s device memory: %s\n", dev_ops->name,
                    mesh_comm_last_error(NULL));
            exit(2);
        }
        sh->bytes = ALLOC_BYTES(bytes);
        p = sh->host;
    }
    POISON(p, bytes);
    return p;
}

void xfree(void *p)
{
    if (!device_mode) {
        free(p);
        return;
    }
    for (int k = 0; k < MAX_SHADOWS; k++)
        if (shadows[k].host == p) {
            dev_ops->dev_free(shadows[k].dev);
            dev_ops->host_free(shadows[k].host);
            shadows[k] = (struct shadow){0};
        }
}

mesh_status_t done_call(mesh_status_t st)
{
    if (st == MESH_OK && cur_req != NULL) {
        st = mesh_wait(cur_req);
        mesh_request_free(cur_req);
    }
    cur_req = NULL;
    /* what the caller enqueues after the call sees its results: the stream's end is the
     * check's point of view */
    if (device_mode) {
        if (staged)
            copy_all(0);
        else
            stream_sync();
        staged = 0;
    }
    return st;
}

unsigned char *snapshot(const void *p, size_t bytes)
{
    unsigned char *c = host_alloc(bytes);
    memcpy(c, p, ALLOC_BYTES(bytes));
    return c;
}

/* Where byte k of an allocation is, for messages. */
static void where(size_t bytes, size_t k, char *buf, size_t len)
{
    if (k < GUARD + 1)
        snprintf(buf, len, "%zu bytes before the buffer", GUARD + 1 - k);
    else if (k - GUARD - 1 >= bytes)
        snprintf(buf, len, "%zu bytes after the buffer's end", k - GUARD - 1 - bytes);
    else
        snprintf(buf, len, "byte %zu of the buffer", k - GUARD - 1);
}

void check_same(const void *p, const unsigned char *copy, size_t bytes, const char *what,
                const char *name)
{
    const unsigned char *b = p;
    if (memcmp(b, copy, ALLOC_BYTES(bytes)) == 0)
        return;
    size_t k = 0;
    while (b[k] == copy[k])
        k++;
    char at[64];
    where(bytes, k, at, sizeof(at));
    FAIL("%s: %s changed at %s (0x%02x, was 0x%02x)", what, name, at, b[k], copy[k]);
}

void check_outside(const void *p, size_t bytes, int n, const size_t *off, const size_t *len,
                   const char *what, const char *name)
{
    const unsigned char *b = p;
    size_t total = ALLOC_BYTES(bytes), k = 0;
    while (k < total) {
        /* skip a block that starts at or covers k */
        int in = 0;
        for (int j = 0; j < n && !in; j++) {
            size_t lo = GUARD + 1 + off[j], hi = lo + len[j];
            if (k >= lo && k < hi) {
                k = hi;
                in = 1;
            }
        }
        if (in)
            continue;
        if (b[k] != POISON_BYTE) {
            char at[64];
            where(bytes, k, at, sizeof(at));
            FAIL("%s: %s: %s, outside the data written, changed to 0x%02x", what, name, at, b[k]);
            return;
        }
        k++;
    }
}

void note_call(void)
{
    calls++;
    if (strcmp(mesh_comm_last_algorithm(comm), algo) == 0)
        used++;
}

int check_status(mesh_status_t st, const char *what, mesh_dtype_t d, size_t n, int inplace)
{
    if (st == MESH_OK)
        return 0;
    FAIL("%s %s count=%zu %s: %s (%s)", what, mesh_dtype_name(d), n, inplace ? "in-place" : "",
         mesh_status_string(st), mesh_comm_last_error(comm));
    return 1;
}

void compare(const char *what, mesh_dtype_t d, mesh_op_t op, size_t n, int inplace, const void *buf,
             size_t off, size_t i, double want)
{
    double got = mesh_dtype_get(d, buf, off + i);
    if (got != want && !(got != got && want != want))
        FAIL("%s %s op=%s count=%zu%s: element %zu is %g, expected %g (algo %s)", what,
             mesh_dtype_name(d), mesh_op_name(op), n, inplace ? " in-place" : "", i, got, want,
             mesh_comm_last_algorithm(comm));
}

static mesh_op_t cur_op;
static double red_input_d(mesh_dtype_t d, int r, size_t i)
{
    (void)d;
    return red_input(cur_op, r, i);
}

/* What a check reports: the call, its dtype, count and op, in place or not. */
static const char *call_name(const char *coll, mesh_dtype_t d, mesh_op_t op, size_t n, int inplace)
{
    static char buf[160];
    snprintf(buf, sizeof(buf), "%s %s op=%s count=%zu%s (algo %s)", coll, mesh_dtype_name(d),
             (int)op >= MESH_OP_COUNT ? "premul" : mesh_op_name(op), n, inplace ? " in-place" : "",
             mesh_comm_last_algorithm(comm));
    return buf;
}

static void run_reduction(mesh_coll_type_t type, mesh_dtype_t d, mesh_op_t user_op, mesh_op_t op,
                          size_t n, int inplace, int root, double premul)
{
    size_t ds = mesh_dtype_size(d), total = type == MESH_COLL_REDUCE_SCATTER ? n * size : n;
    void *s = xalloc(total * ds), *r = xalloc(total * ds);
    const char *what = mesh_coll_type_name(type);
    cur_op = user_op;
    sum_mod = d == MESH_FP8_E4M3 || d == MESH_FP8_E5M2 ? 2 : 3;
    for (rep = 0; rep < reps; rep++) {
        POISON(r, total * ds);
        fill(d, BUF(s), 0, total, red_input_d, rank);
        unsigned char *orig = inplace ? NULL : snapshot(s, total * ds);
        mesh_status_t st;
        if (type == MESH_COLL_ALLREDUCE) {
            st = mesh_allreduce(comm, DEV(BUF(s)), DEV(inplace ? BUF(s) : BUF(r)), n, d, op, STREAM,
                                REQ);
        } else if (type == MESH_COLL_REDUCE) {
            st = mesh_reduce(comm, DEV(BUF(s)), DEV(inplace ? BUF(s) : BUF(r)), n, d, op, root,
                             STREAM, REQ);
        } else {
            void *rb = inplace ? (char *)BUF(s) + (size_t)rank * n * ds : BUF(r);
            st = mesh_reduce_scatter(comm, DEV(BUF(s)), DEV(rb), n, d, op, STREAM, REQ);
        }
        st = done_call(st);
        note_call();
        const char *call = call_name(what, d, user_op, n, inplace);
        if (!check_status(st, what, d, n, inplace)) {
            const void *out = inplace ? BUF(s) : BUF(r);
            if (type == MESH_COLL_ALLREDUCE || (type == MESH_COLL_REDUCE && rank == root)) {
                for (size_t i = 0; i < n; i++)
                    compare(what, d, user_op, n, inplace, out, 0, i,
                            red_expect(user_op, i, premul));
            } else if (type == MESH_COLL_REDUCE_SCATTER) {
                size_t off = inplace ? (size_t)rank * n : 0;
                for (size_t i = 0; i < n; i++)
                    compare(what, d, user_op, n, inplace, out, off, i,
                            red_expect(user_op, (size_t)rank * n + i, premul));
            }
        }
        /* the send buffer is read only; a receive buffer is written within its count only, and
         * not at all by a rank that receives nothing */
        if (orig)
            check_same(s, orig, total * ds, call, "sbuf");
        else
            CHECK_GUARDS(s, total * ds, call, "sbuf (in place)");
        if (!inplace) {
            size_t rbytes = type == MESH_COLL_REDUCE_SCATTER           ? n * ds
                            : type == MESH_COLL_REDUCE && rank != root ? 0
                                                                       : n * ds;
            size_t zero = 0;
            check_outside(r, total * ds, 1, &zero, &rbytes, call, "rbuf");
        }
        free(orig);
    }
    xfree(s);
    xfree(r);
}

static void run_bcast(mesh_dtype_t d, size_t n, int inplace, int root)
{
    size_t ds = mesh_dtype_size(d);
    void *s = xalloc(n * ds), *r = xalloc(n * ds);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, n * ds);
        POISON(s, n * ds);
        if (rank == root)
            fill(d, BUF(s), 0, n, move_value, root);
        unsigned char *orig = snapshot(s, n * ds);
        mesh_status_t st = mesh_broadcast(comm, DEV(BUF(s)), DEV(inplace ? BUF(s) : BUF(r)), n, d,
                                          root, STREAM, REQ);
        st = done_call(st);
        note_call();
        const char *call = call_name("broadcast", d, MESH_SUM, n, inplace);
        if (!check_status(st, "broadcast", d, n, inplace))
            for (size_t i = 0; i < n; i++)
                compare("broadcast", d, MESH_SUM, n, inplace, inplace ? BUF(s) : BUF(r), 0, i,
                        move_value(d, root, i));
        if (inplace) {
            CHECK_GUARDS(s, n * ds, call, "buffer");
        } else {
            check_same(s, orig, n * ds, call, "sbuf");
            CHECK_GUARDS(r, n * ds, call, "rbuf");
        }
        free(orig);
    }
    xfree(s);
    xfree(r);
}

static void run_allgather(mesh_dtype_t d, size_t n, int inplace)
{
    size_t ds = mesh_dtype_size(d), tot = n * (size_t)size;
    void *r = xalloc(tot * ds), *s = xalloc(n * ds);
    void *sb = inplace ? (char *)BUF(r) + (size_t)rank * n * ds : BUF(s);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, tot * ds);
        fill(d, sb, 0, n, move_value, rank);
        unsigned char *orig = snapshot(s, n * ds);
        mesh_status_t st = mesh_allgather(comm, DEV(sb), DEV(BUF(r)), n, d, STREAM, REQ);
        st = done_call(st);
        note_call();
        const char *call = call_name("allgather", d, MESH_SUM, n, inplace);
        if (!check_status(st, "allgather", d, n, inplace))
            for (int p = 0; p < size; p++)
                for (size_t i = 0; i < n; i++)
                    compare("allgather", d, MESH_SUM, n, inplace, BUF(r), (size_t)p * n, i,
                            move_value(d, p, i));
        check_same(s, orig, n * ds, call, "sbuf");
        CHECK_GUARDS(r, tot * ds, call, "rbuf");
        free(orig);
    }
    xfree(r);
    xfree(s);
}

static double a2a_value(mesh_dtype_t d, int from, int to, size_t i)
{
    return move_value(d, from * 5 + to, i);
}

static void run_alltoall(mesh_dtype_t d, size_t n, int inplace)
{
    size_t ds = mesh_dtype_size(d), tot = n * (size_t)size;
    void *s = xalloc(tot * ds), *r = xalloc(tot * ds);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, tot * ds);
        for (int p = 0; p < size; p++)
            for (size_t i = 0; i < n; i++)
                mesh_dtype_set(d, BUF(s), (size_t)p * n + i, a2a_value(d, rank, p, i));
        unsigned char *orig = inplace ? NULL : snapshot(s, tot * ds);
        mesh_status_t st =
            mesh_alltoall(comm, DEV(BUF(s)), DEV(inplace ? BUF(s) : BUF(r)), n, d, STREAM, REQ);
        st = done_call(st);
        note_call();
        const char *call = call_name("alltoall", d, MESH_SUM, n, inplace);
        const void *out = inplace ? BUF(s) : BUF(r);
        if (!check_status(st, "alltoall", d, n, inplace))
            for (int p = 0; p < size; p++)
                for (size_t i = 0; i < n; i++)
                    compare("alltoall", d, MESH_SUM, n, inplace, out, (size_t)p * n, i,
                            a2a_value(d, p, rank, i));
        if (orig)
            check_same(s, orig, tot * ds, call, "sbuf");
        CHECK_GUARDS(inplace ? s : r, tot * ds, call, "rbuf");
        free(orig);
    }
    xfree(s);
    xfree(r);
}

static void run_gather_scatter(mesh_coll_type_t type, mesh_dtype_t d, size_t n, int inplace,
                               int root)
{
    size_t ds = mesh_dtype_size(d), all = n * (size_t)size;
    void *big = xalloc(all * ds), *small = xalloc(n * ds);
    mesh_status_t st;
    /* the root's own block, in place */
    int own_in_big = inplace && rank == root;
    void *own = own_in_big ? (char *)BUF(big) + (size_t)root * n * ds : BUF(small);
    const char *what = mesh_coll_type_name(type);
    for (rep = 0; rep < reps; rep++) {
        unsigned char *orig;
        if (type == MESH_COLL_GATHER) {
            POISON(big, all * ds);
            fill(d, own, 0, n, move_value, rank);
            orig = snapshot(small, n * ds);
            st = mesh_gather(comm, DEV(own), DEV(BUF(big)), n, d, root, STREAM, REQ);
            st = done_call(st);
            note_call();
            if (!check_status(st, "gather", d, n, inplace) && rank == root)
                for (int p = 0; p < size; p++)
                    for (size_t i = 0; i < n; i++)
                        compare("gather", d, MESH_SUM, n, inplace, BUF(big), (size_t)p * n, i,
                                move_value(d, p, i));
            /* only the root's receive buffer is written */
            const char *call = call_name(what, d, MESH_SUM, n, inplace);
            size_t zero = 0, len = rank == root ? all * ds : 0;
            check_outside(big, all * ds, 1, &zero, &len, call, "rbuf");
            check_same(small, orig, n * ds, call, "sbuf");
        } else {
            POISON(small, n * ds);
            POISON(big, all * ds);
            if (rank == root)
                for (int p = 0; p < size; p++)
                    fill(d, BUF(big), (size_t)p * n, n, move_value, p);
            orig = snapshot(big, all * ds);
            st = mesh_scatter(comm, DEV(BUF(big)), DEV(own), n, d, root, STREAM, REQ);
            st = done_call(st);
            note_call();
            if (!check_status(st, "scatter", d, n, inplace))
                for (size_t i = 0; i < n; i++)
                    compare("scatter", d, MESH_SUM, n, inplace, own, 0, i, move_value(d, rank, i));
            const char *call = call_name(what, d, MESH_SUM, n, inplace);
            check_same(big, orig, all * ds, call, "sbuf");
            size_t zero = 0, len = own_in_big ? 0 : n * ds;
            check_outside(small, n * ds, 1, &zero, &len, call, "rbuf");
        }
        free(orig);
    }
    xfree(big);
    xfree(small);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The last rank enters each barrier 50 ms after the others; no rank may leave before it
 * entered (the clock is the machine's, shared by every rank, simulated nodes included). The
 * entry times are exchanged after the last repetition, so that repeated barriers replay. */
static void run_barriers(void)
{
    double *in = calloc((size_t)reps, sizeof(double)), *out = calloc((size_t)reps, sizeof(double));
    double *all = calloc((size_t)reps * (size_t)size, sizeof(double));
    int ok = 1;
    if (in == NULL || out == NULL || all == NULL)
        exit(2);
    for (rep = 0; rep < reps; rep++) {
        if (size > 1 && rank == size - 1)
            usleep(50000);
        in[rep] = now_s();
        mesh_status_t st = mesh_barrier(comm, NULL);
        out[rep] = now_s();
        st = done_call(st);
        note_call();
        if (check_status(st, "barrier", MESH_UINT8, 0, 0))
            ok = 0;
    }
    mesh_status_t st =
        ok ? mesh_allgather(comm, in, all, (size_t)reps, MESH_FP64, NULL, NULL) : MESH_ERR_INTERNAL;
    if (ok && st != MESH_OK)
        FAIL("allgather of the entry times: %s", mesh_comm_last_error(comm));
    for (int p = 0; p < size && st == MESH_OK; p++)
        for (int k = 0; k < reps; k++)
            if (out[k] < all[(size_t)p * (size_t)reps + (size_t)k])
                FAIL("barrier %d (algo %s): left %.1f ms before rank %d entered", k, algo,
                     (all[(size_t)p * (size_t)reps + (size_t)k] - out[k]) * 1e3, p);
    free(in);
    free(out);
    free(all);
}

void for_each_op(mesh_coll_type_t type, mesh_dtype_t d,
                 void (*fn)(mesh_coll_type_t, mesh_dtype_t, mesh_op_t, mesh_op_t, double, void *),
                 void *arg)
{
    for (int op = 0; op < MESH_OP_COUNT; op++)
        fn(type, d, (mesh_op_t)op, (mesh_op_t)op, 1.0, arg);
    /* pre-multiplied sum with scalar 2 */
    unsigned char scalar[8];
    mesh_op_t pm;
    mesh_dtype_set(d, scalar, 0, 2.0);
    if (mesh_op_create_premul(comm, scalar, d, &pm) != MESH_OK) {
        FAIL("premul create: %s", mesh_comm_last_error(comm));
        return;
    }
    fn(type, d, (mesh_op_t)MESH_OP_COUNT, pm, 2.0, arg);
    mesh_op_destroy(comm, pm);
}

struct red_case {
    size_t n;
    int inplace, root;
};

static void reduction_case(mesh_coll_type_t type, mesh_dtype_t d, mesh_op_t user_op, mesh_op_t op,
                           double premul, void *arg)
{
    struct red_case *c = arg;
    run_reduction(type, d, user_op, op, c->n, c->inplace, c->root, premul);
}

static const size_t small_sizes[] = {0, 1, 7, 63, 1023, 1025};
static const size_t big_sizes[] = {65537, (4u << 20) / 4 + 3};

static void run_type(mesh_coll_type_t type, mesh_dtype_t d, size_t n)
{
    for (int inplace = 0; inplace < 2; inplace++) {
        int root = size > 1 ? (int)(n % (size_t)size) : 0;
        switch (type) {
        case MESH_COLL_ALLREDUCE:
        case MESH_COLL_REDUCE:
        case MESH_COLL_REDUCE_SCATTER: {
            struct red_case c = {n, inplace, root};
            for_each_op(type, d, reduction_case, &c);
            break;
        }
        case MESH_COLL_BROADCAST:
            run_bcast(d, n, inplace, root);
            break;
        case MESH_COLL_ALLGATHER:
            run_allgather(d, n, inplace);
            break;
        case MESH_COLL_ALLTOALL:
            run_alltoall(d, n, inplace);
            break;
        case MESH_COLL_GATHER:
        case MESH_COLL_SCATTER:
            run_gather_scatter(type, d, n, inplace, root);
            break;
        case MESH_COLL_BARRIER:
            if (inplace == 0 && n == 0)
                run_barriers();
            break;
        default:
            break;
        }
    }
    run_v(type, d, n);
}

int main(int argc, char **argv)
{
    const char *coll = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            for (int k = 0; k < mesh_coll_algo_count(); k++) {
                const mesh_coll_algo_t *a = mesh_coll_algo_get(k);
                printf("%s %s\n", mesh_coll_type_name(a->type), a->name);
            }
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            coll = argv[++i];
        } else if (strcmp(argv[i], "-a") == 0 && i + 1 < argc) {
            algo = argv[++i];
        } else if (strcmp(argv[i], "-q") == 0) {
            verbose = 0;
        } else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) {
            only_dtypes = argv[++i];
        } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-D") == 0) {
            device_mode = 1;
        } else if (strcmp(argv[i], "-R") == 0) {
            use_requests = 1;
        } else if (strcmp(argv[i], "-s") == 0) {
            small_only = 1;
        }
    }
    int type = coll ? mesh_coll_type_parse(coll) : -1;
    if (type < 0 || reps < 1) {
        fprintf(stderr, "usage: conformance --list | -o COLLECTIVE [-a ALGO] [-q] [-d DTYPES] "
                        "[-r REPS] [-s] [-D [-R]]\n");
        return 2;
    }
    mesh_status_t st = mesh_comm_init_env(&comm);
    if (st != MESH_OK) {
        fprintf(stderr, "init failed: %s: %s\n", mesh_status_string(st),
                mesh_comm_last_error(NULL));
        return 1;
    }
    rank = mesh_comm_rank(comm);
    size = mesh_comm_size(comm);
    if (device_mode) {
        dev_ops = mesh_mem_table(NULL);
        if (dev_ops == NULL) {
            fprintf(stderr, "-D needs a device: a CUDA driver and GPU, or the emulated one "
                            "(MESH_DEVICE_EMU=1)\n");
            mesh_comm_destroy(comm);
            return 77;
        }
        if (dev_ops->current_device(&dev_ordinal) != MESH_OK ||
            dev_ops->stream_create(&test_stream) != MESH_OK ||
            dev_ops->event_create(&sync_event) != MESH_OK) {
            fprintf(stderr, "%s device: %s\n", dev_ops->name, mesh_comm_last_error(NULL));
            return 2;
        }
        if (rank == 0 && verbose)
            printf("device buffers of the %s table, device %d\n", dev_ops->name, dev_ordinal);
    }
    for (int d = 0; d < MESH_DTYPE_COUNT; d++)
        for (size_t k = 0; k < sizeof(small_sizes) / sizeof(small_sizes[0]); k++)
            if (dtype_selected((mesh_dtype_t)d))
                run_type((mesh_coll_type_t)type, (mesh_dtype_t)d, small_sizes[k]);
    /* large sizes for a few dtypes keep the run short */
    const mesh_dtype_t big_types[] = {MESH_FP32, MESH_BF16, MESH_INT8};
    for (size_t t = 0; t < 3 && !small_only; t++)
        for (size_t k = 0; k < 2 && dtype_selected(big_types[t]); k++) {
            size_t n = big_sizes[k];
            if (type == MESH_COLL_ALLGATHER || type == MESH_COLL_ALLTOALL ||
                type == MESH_COLL_GATHER || type == MESH_COLL_SCATTER ||
                type == MESH_COLL_REDUCE_SCATTER)
                n = n / (size_t)size + 1;
            run_type((mesh_coll_type_t)type, big_types[t], n);
        }
    mesh_barrier(comm, NULL);
    if (rank == 0 && verbose)
        printf("%s algo=%s ranks=%d: %d calls, %d used %s, %d failures\n", coll, algo, size, calls,
               used, algo, failures);
    if (rank == 0)
        printf("USED %d\nCALLS %d\n", used, calls);
    /* calls that ran a schedule built for an earlier identical call (collectives/comm.h) */
    if (rank == 0)
        printf("REPLAYS %llu\n", (unsigned long long)comm->replays);
    /* calls that ran by device copies between IPC mappings, and that cache's work
     * (collectives/device/dev_ipc.h) */
    uint64_t maps, hits;
    int open;
    mesh_dev_ipc_stats(comm, &maps, &hits, &open);
    if (rank == 0)
        printf("IPC calls %llu maps %llu hits %llu open %d\n",
               (unsigned long long)comm->dev_ipc_calls, (unsigned long long)maps,
               (unsigned long long)hits, open);
    /* device calls staged in pipelined chunks (collectives/device/dev_pipe.c), per stage */
    mesh_dev_stage_stats_t ps;
    mesh_dev_stage_stats(comm, &ps);
    if (rank == 0)
        printf("PIPELINED calls %llu chunks %llu in %llu wire %llu out %llu busy_us %.0f %.0f "
               "%.0f overlap_us %.0f span_us %.0f depth %d peak %zu\n",
               (unsigned long long)ps.calls, (unsigned long long)ps.chunks,
               (unsigned long long)ps.bytes[MESH_DEV_STAGE_IN],
               (unsigned long long)ps.bytes[MESH_DEV_STAGE_WIRE],
               (unsigned long long)ps.bytes[MESH_DEV_STAGE_OUT], ps.busy[0] * 1e6, ps.busy[1] * 1e6,
               ps.busy[2] * 1e6, ps.overlap * 1e6, ps.span * 1e6, ps.depth, ps.peak);
    mesh_comm_destroy(comm);
    return failures ? 1 : 0;
}
