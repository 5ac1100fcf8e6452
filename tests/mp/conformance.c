/*
 * Collective conformance, run under meshrun: every dtype x op x size, in place and out of
 * place, exact expected values. The algorithm is forced by MESH_TUNE (set by the driver); the
 * program reports how many calls used it so the driver can check it was exercised.
 *
 *   conformance --list                 lists "collective algorithm" pairs of the registry
 *   conformance -o COLL [-a ALGO] [-q] [-d DTYPES] [-r REPS]
 *                                      runs one collective (-d: only these comma-separated
 *                                      dtypes, for quicker transport sweeps; -r: every call
 *                                      REPS times on the same buffers with new data each time,
 *                                      so that repeated calls replay their schedule)
 */
#include "mesh.h"
#include "collectives/algo.h"
#include "collectives/comm.h"
#include "libmesh/dtype.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, verbose = 1, failures, calls, used;
static int reps = 1, rep; /* -r, and the repetition running: every input depends on it */
static const char *algo = "";
static const char *only_dtypes; /* -d: comma-separated dtype names, NULL for all */

static int dtype_selected(mesh_dtype_t d)
{
    if (only_dtypes == NULL) return 1;
    const char *name = mesh_dtype_name(d);
    size_t n = strlen(name);
    for (const char *p = only_dtypes; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p += len + (e != NULL);
    }
    return 0;
}

static mesh_comm_h comm;

#define FAIL(...)                                                                              \
    do {                                                                                      \
        fprintf(stderr, "[rank %d] FAIL: ", rank);                                            \
        fprintf(stderr, __VA_ARGS__);                                                         \
        fputc('\n', stderr);                                                                  \
        if (++failures > 20) exit(1);                                                         \
    } while (0)

/* Largest M such that every integer in [0, M) is exact in the dtype. */
static double exact_range(mesh_dtype_t d)
{
    switch (d) {
    case MESH_INT8: return 127;
    case MESH_UINT8: return 255;
    case MESH_FP8_E4M3: return 16;
    case MESH_FP8_E5M2: return 8;
    case MESH_FP16: return 2048;
    case MESH_BF16: return 256;
    default: return 1 << 20;
    }
}

/* Values per element of a sum: fp8 holds every integer only up to 8 (e5m2) or 16 (e4m3), so
 * sums over 8 ranks of 0/1 inputs stay exact in every partial order. */
static size_t sum_mod = 3;

/* Input of rank r at element i for a reduction with op; every result stays exact. */
static double red_input(mesh_op_t op, int r, size_t i)
{
    switch (op) {
    case MESH_SUM: return (double)((r + i + (size_t)rep) % sum_mod);
    case MESH_PROD: return (r == (int)((i + (size_t)rep) % (size_t)size)) ? 2.0 : 1.0;
    case MESH_MIN:
    case MESH_MAX: return (double)(((size_t)r * 7 + i + (size_t)rep) % 5);
    case MESH_AVG:
        /* fp8: every partial sum must stay within the exact integers, so no extra term */
        if (sum_mod == 2) return (double)((i + (size_t)rep) % 2);
        return (double)((i + (size_t)rep) % sum_mod) + (r == (int)(i % (size_t)size) ? size : 0);
    default: return (double)((r + i + (size_t)rep) % sum_mod); /* pre-multiplied sum */
    }
}

static double red_expect(mesh_op_t op, size_t i, double premul)
{
    double acc = red_input(op, 0, i);
    for (int r = 1; r < size; r++) {
        double v = red_input(op, r, i);
        switch (op) {
        case MESH_PROD: acc *= v; break;
        case MESH_MIN: acc = v < acc ? v : acc; break;
        case MESH_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op == MESH_AVG) acc /= size;
    if ((int)op >= MESH_OP_COUNT) {
        acc = 0;
        for (int r = 0; r < size; r++) acc += premul * red_input(op, r, i);
    }
    return acc;
}

/* Data of rank r's block element i for moving collectives. */
static double move_value(mesh_dtype_t d, int r, size_t i)
{
    return (double)(((size_t)r * 131 + i * 7 + (size_t)rep * 3) % (size_t)exact_range(d));
}

static void fill(mesh_dtype_t d, void *buf, size_t off, size_t n, double (*f)(mesh_dtype_t, int, size_t),
                 int r)
{
    for (size_t i = 0; i < n; i++) mesh_dtype_set(d, buf, off + i, f(d, r, i));
}

static void *xalloc(size_t bytes)
{
    /* odd offset: algorithms must not assume aligned buffers */
    char *p = malloc(bytes + 64);
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memset(p, 0xa5, bytes + 64);
    return p;
}
#define BUF(p) ((void *)((char *)(p) + 1))
/* Back to the poison xalloc wrote, so that a repetition cannot pass on the last one's result. */
#define POISON(p, bytes) memset((p), 0xa5, (bytes) + 64)

static void note_call(void)
{
    calls++;
    if (strcmp(mesh_comm_last_algorithm(comm), algo) == 0) used++;
}

static int check_status(mesh_status_t st, const char *what, mesh_dtype_t d, size_t n, int inplace)
{
    if (st == MESH_OK) return 0;
    FAIL("%s %s count=%zu %s: %s (%s)", what, mesh_dtype_name(d), n, inplace ? "in-place" : "",
         mesh_status_string(st), mesh_comm_last_error(comm));
    return 1;
}

static void compare(const char *what, mesh_dtype_t d, mesh_op_t op, size_t n, int inplace,
                    const void *buf, size_t off, size_t i, double want)
{
    double got = mesh_dtype_get(d, buf, off + i);
    if (got != want && !(got != got && want != want))
        FAIL("%s %s op=%s count=%zu%s: element %zu is %g, expected %g (algo %s)", what,
             mesh_dtype_name(d), mesh_op_name(op), n, inplace ? " in-place" : "", i, got, want,
             mesh_comm_last_algorithm(comm));
}

static mesh_op_t cur_op;
static double red_input_d(mesh_dtype_t d, int r, size_t i) { (void)d; return red_input(cur_op, r, i); }

static void run_reduction(mesh_coll_type_t type, mesh_dtype_t d, mesh_op_t user_op, mesh_op_t op,
                          size_t n, int inplace, int root, double premul)
{
    size_t ds = mesh_dtype_size(d), total = type == MESH_COLL_REDUCE_SCATTER ? n * size : n;
    void *s = xalloc(total * ds), *r = xalloc(total * ds);
    cur_op = user_op;
    sum_mod = d == MESH_FP8_E4M3 || d == MESH_FP8_E5M2 ? 2 : 3;
    for (rep = 0; rep < reps; rep++) {
        POISON(r, total * ds);
        fill(d, BUF(s), 0, total, red_input_d, rank);
        mesh_status_t st;
        const char *what = mesh_coll_type_name(type);
        if (type == MESH_COLL_ALLREDUCE) {
            st = mesh_allreduce(comm, BUF(s), inplace ? BUF(s) : BUF(r), n, d, op, NULL, NULL);
        } else if (type == MESH_COLL_REDUCE) {
            st = mesh_reduce(comm, BUF(s), inplace ? BUF(s) : BUF(r), n, d, op, root, NULL, NULL);
        } else {
            void *rb = inplace ? (char *)BUF(s) + (size_t)rank * n * ds : BUF(r);
            st = mesh_reduce_scatter(comm, BUF(s), rb, n, d, op, NULL, NULL);
        }
        note_call();
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
    }
    free(s);
    free(r);
}

static void run_bcast(mesh_dtype_t d, size_t n, int inplace, int root)
{
    size_t ds = mesh_dtype_size(d);
    void *s = xalloc(n * ds), *r = xalloc(n * ds);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, n * ds);
        if (inplace && rank != root) POISON(s, n * ds);
        if (rank == root) fill(d, BUF(s), 0, n, move_value, root);
        mesh_status_t st = mesh_broadcast(comm, BUF(s), inplace ? BUF(s) : BUF(r), n, d, root, NULL,
                                          NULL);
        note_call();
        if (!check_status(st, "broadcast", d, n, inplace))
            for (size_t i = 0; i < n; i++)
                compare("broadcast", d, MESH_SUM, n, inplace, inplace ? BUF(s) : BUF(r), 0, i,
                        move_value(d, root, i));
    }
    free(s);
    free(r);
}

static void run_allgather(mesh_dtype_t d, size_t n, int inplace, int vary)
{
    size_t ds = mesh_dtype_size(d);
    size_t *counts = malloc(sizeof(size_t) * size), *displs = malloc(sizeof(size_t) * size), tot = 0;
    for (int i = 0; i < size; i++) {
        counts[i] = vary ? n + (size_t)(i % 3) : n;
        displs[i] = tot + (vary ? 1 : 0); /* gaps between blocks when varying */
        tot = displs[i] + counts[i];
    }
    void *r = xalloc(tot * ds), *s = xalloc(counts[rank] * ds);
    void *sb = inplace ? (char *)BUF(r) + displs[rank] * ds : BUF(s);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, tot * ds);
        fill(d, sb, 0, counts[rank], move_value, rank);
        mesh_status_t st = vary ? mesh_allgatherv(comm, sb, BUF(r), counts, displs, d, NULL, NULL)
                                : mesh_allgather(comm, sb, BUF(r), n, d, NULL, NULL);
        note_call();
        if (!check_status(st, vary ? "allgatherv" : "allgather", d, n, inplace))
            for (int p = 0; p < size; p++)
                for (size_t i = 0; i < counts[p]; i++)
                    compare(vary ? "allgatherv" : "allgather", d, MESH_SUM, n, inplace, BUF(r),
                            displs[p], i, move_value(d, p, i));
    }
    free(r);
    free(s);
    free(counts);
    free(displs);
}

static double a2a_value(mesh_dtype_t d, int from, int to, size_t i)
{
    return move_value(d, from * 5 + to, i);
}

static void run_alltoall(mesh_dtype_t d, size_t n, int inplace, int vary)
{
    size_t ds = mesh_dtype_size(d);
    size_t sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;
    for (int p = 0; p < size; p++) {
        /* rank a sends n + (a + b) % 3 elements to rank b */
        sc[p] = vary ? n + (size_t)((rank + p) % 3) : n;
        rc[p] = vary ? n + (size_t)((p + rank) % 3) : n;
        sd[p] = stot;
        rd[p] = rtot;
        stot += sc[p];
        rtot += rc[p];
    }
    if (inplace && vary) return;
    void *s = xalloc(stot * ds), *r = xalloc(rtot * ds);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, rtot * ds);
        for (int p = 0; p < size; p++)
            for (size_t i = 0; i < sc[p]; i++)
                mesh_dtype_set(d, BUF(s), sd[p] + i, a2a_value(d, rank, p, i));
        mesh_status_t st;
        if (vary) st = mesh_alltoallv(comm, BUF(s), sc, sd, BUF(r), rc, rd, d, NULL, NULL);
        else st = mesh_alltoall(comm, BUF(s), inplace ? BUF(s) : BUF(r), n, d, NULL, NULL);
        note_call();
        const void *out = inplace ? BUF(s) : BUF(r);
        if (!check_status(st, vary ? "alltoallv" : "alltoall", d, n, inplace))
            for (int p = 0; p < size; p++)
                for (size_t i = 0; i < rc[p]; i++)
                    compare(vary ? "alltoallv" : "alltoall", d, MESH_SUM, n, inplace, out, rd[p], i,
                            a2a_value(d, p, rank, i));
    }
    free(s);
    free(r);
}

static void run_gather_scatter(mesh_coll_type_t type, mesh_dtype_t d, size_t n, int inplace,
                               int root)
{
    size_t ds = mesh_dtype_size(d), all = n * (size_t)size;
    void *big = xalloc(all * ds), *small = xalloc(n * ds);
    mesh_status_t st;
    /* the root's own block, in place */
    void *own = inplace && rank == root ? (char *)BUF(big) + (size_t)root * n * ds : BUF(small);
    for (rep = 0; rep < reps; rep++) {
        if (type == MESH_COLL_GATHER) {
            POISON(big, all * ds);
            void *sb = own;
            fill(d, sb, 0, n, move_value, rank);
            st = mesh_gather(comm, sb, BUF(big), n, d, root, NULL, NULL);
            note_call();
            if (!check_status(st, "gather", d, n, inplace) && rank == root)
                for (int p = 0; p < size; p++)
                    for (size_t i = 0; i < n; i++)
                        compare("gather", d, MESH_SUM, n, inplace, BUF(big), (size_t)p * n, i,
                                move_value(d, p, i));
        } else {
            POISON(small, n * ds);
            if (rank == root)
                for (int p = 0; p < size; p++) fill(d, BUF(big), (size_t)p * n, n, move_value, p);
            void *rb = own;
            st = mesh_scatter(comm, BUF(big), rb, n, d, root, NULL, NULL);
            note_call();
            if (!check_status(st, "scatter", d, n, inplace))
                for (size_t i = 0; i < n; i++)
                    compare("scatter", d, MESH_SUM, n, inplace, rb, 0, i, move_value(d, rank, i));
        }
    }
    free(big);
    free(small);
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
        case MESH_COLL_REDUCE_SCATTER:
            for (int op = 0; op <= MESH_OP_COUNT; op++) {
                if (op == MESH_OP_COUNT) {
                    /* pre-multiplied sum with scalar 2 */
                    unsigned char scalar[8];
                    mesh_op_t pm;
                    mesh_dtype_set(d, scalar, 0, 2.0);
                    if (mesh_op_create_premul(comm, scalar, d, &pm) != MESH_OK) {
                        FAIL("premul create: %s", mesh_comm_last_error(comm));
                        continue;
                    }
                    run_reduction(type, d, (mesh_op_t)MESH_OP_COUNT, pm, n, inplace, root, 2.0);
                    mesh_op_destroy(comm, pm);
                } else {
                    run_reduction(type, d, (mesh_op_t)op, (mesh_op_t)op, n, inplace, root, 1.0);
                }
            }
            break;
        case MESH_COLL_BROADCAST: run_bcast(d, n, inplace, root); break;
        case MESH_COLL_ALLGATHER:
            run_allgather(d, n, inplace, 0);
            run_allgather(d, n, inplace, 1);
            break;
        case MESH_COLL_ALLTOALL:
            run_alltoall(d, n, inplace, 0);
            run_alltoall(d, n, inplace, 1);
            break;
        case MESH_COLL_GATHER:
        case MESH_COLL_SCATTER: run_gather_scatter(type, d, n, inplace, root); break;
        case MESH_COLL_BARRIER:
            for (rep = 0; rep < reps && inplace == 0 && n == 0; rep++) {
                mesh_status_t st = mesh_barrier(comm, NULL);
                note_call();
                check_status(st, "barrier", MESH_UINT8, 0, 0);
            }
            break;
        default: break;
        }
    }
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
        }
    }
    int type = coll ? mesh_coll_type_parse(coll) : -1;
    if (type < 0 || reps < 1) {
        fprintf(stderr,
                "usage: conformance --list | -o COLLECTIVE [-a ALGO] [-q] [-d DTYPES] [-r REPS]\n");
        return 2;
    }
    mesh_status_t st = mesh_comm_init_env(&comm);
    if (st != MESH_OK) {
        fprintf(stderr, "init failed: %s: %s\n", mesh_status_string(st), mesh_comm_last_error(NULL));
        return 1;
    }
    rank = mesh_comm_rank(comm);
    size = mesh_comm_size(comm);
    for (int d = 0; d < MESH_DTYPE_COUNT; d++)
        for (size_t k = 0; k < sizeof(small_sizes) / sizeof(small_sizes[0]); k++)
            if (dtype_selected((mesh_dtype_t)d))
                run_type((mesh_coll_type_t)type, (mesh_dtype_t)d, small_sizes[k]);
    /* large sizes for a few dtypes keep the run short */
    const mesh_dtype_t big_types[] = {MESH_FP32, MESH_BF16, MESH_INT8};
    for (size_t t = 0; t < 3; t++)
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
    if (rank == 0) printf("USED %d\n", used);
    /* calls that ran a schedule built for an earlier identical call (collectives/comm.h) */
    if (rank == 0) printf("REPLAYS %llu\n", (unsigned long long)comm->replays);
    mesh_comm_destroy(comm);
    return failures ? 1 : 0;
}
