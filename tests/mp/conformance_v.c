/*
 * The v-collectives with layouts a caller may choose: uneven counts back to back (displacements
 * NULL), gaps between the blocks and before the first, blocks in reverse or shuffled rank order,
 * zero counts, and equal counts at displacements that are not the packed ones. all-gather-v and
 * all-to-all-v (different layouts on the send and the receive side, counts that differ by
 * direction) also in place; reduce-scatter-v with every op, MESH_AVG and the pre-multiplied sum
 * included, in place and not. Every byte of a receive buffer is checked: the blocks hold the
 * expected values, gaps and guards still hold poison, and send buffers did not change.
 */
#include "tests/mp/conformance.h"
#include "libmesh/dtype.h"
#include <stdint.h>
#include <string.h>

enum { LAY_PACKED, LAY_GAPS, LAY_REVERSED, LAY_SHUFFLED, LAY_ZEROS, LAY_MOVED, LAY_COUNT };
static const char *const lay_names[LAY_COUNT] = {"packed",   "gaps",  "reversed",
                                                 "shuffled", "zeros", "equal-moved"};

/* The count of rank p's block (all-gather-v, reduce-scatter-v). */
static size_t block_count(int k, size_t n, int p)
{
    switch (k) {
    case LAY_ZEROS:
        return p % 3 == 1 || p == size - 1 ? 0 : n + (size_t)p;
    case LAY_MOVED:
        return n;
    default:
        return n + (size_t)(p % 3);
    }
}

/* What rank a sends to rank b (all-to-all-v); sym: the same both ways, as in place needs. */
static size_t pair_count(int k, size_t n, int a, int b, int sym)
{
    int m = sym ? a + b : 2 * a + b;
    switch (k) {
    case LAY_ZEROS:
        return m % 3 == 1 ? 0 : n + (size_t)((sym ? m : a) % 2);
    case LAY_MOVED:
        return n;
    default:
        return n + (size_t)(m % 3);
    }
}

/* Places nb blocks of counts c in layout k: d[p] gets block p's displacement in elements; returns
 * the extent, a trailing gap included. salt varies the shuffled order. */
static size_t place(int k, int nb, const size_t *c, size_t *d, unsigned salt)
{
    int ord[256];
    unsigned key[256];
    for (int j = 0; j < nb; j++)
        ord[j] = j;
    if (k == LAY_REVERSED || k == LAY_MOVED) {
        for (int j = 0; j < nb; j++)
            ord[j] = nb - 1 - j;
    } else if (k == LAY_SHUFFLED || k == LAY_ZEROS) {
        for (int j = 0; j < nb; j++)
            key[j] = ((unsigned)j * 2654435761u + salt * 40503u) >> 7;
        for (int i = 1; i < nb; i++) /* insertion sort by key: a permutation whatever the keys */
            for (int j = i; j > 0 && key[ord[j - 1]] > key[ord[j]]; j--) {
                int t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
    }
    size_t at = 0;
    for (int j = 0; j <= nb; j++) {
        switch (k) {
        case LAY_PACKED:
        case LAY_MOVED:
            break;
        case LAY_GAPS:
            at += 1 + (size_t)(j % 2);
            break;
        case LAY_REVERSED:
            at += (size_t)((j + salt) % 3);
            break;
        default:
            at += 2;
            break;
        }
        if (j == nb)
            break;
        d[ord[j]] = at;
        at += c[ord[j]];
    }
    return at;
}

static const char *v_name(const char *coll, mesh_dtype_t d, mesh_op_t op, size_t n, int k,
                          int inplace)
{
    static char buf[200];
    snprintf(buf, sizeof(buf), "%s %s op=%s count=%zu layout %s%s (algo %s)", coll,
             mesh_dtype_name(d), (int)op >= MESH_OP_COUNT ? "premul" : mesh_op_name(op), n,
             lay_names[k], inplace ? " in-place" : "", mesh_comm_last_algorithm(comm));
    return buf;
}

/* Elements of a block, compared one by one; the first wrong one is reported. */
static void check_block(const char *call, mesh_dtype_t d, const void *buf, size_t off, size_t cnt,
                        double (*want)(mesh_dtype_t, int, int, size_t), int a, int b)
{
    for (size_t i = 0; i < cnt; i++) {
        double got = mesh_dtype_get(d, buf, off + i), w = want(d, a, b, i);
        if (got != w) {
            FAIL("%s: element %zu of the block of rank %d is %g, expected %g", call, i, a, got, w);
            return;
        }
    }
}

static double gather_value(mesh_dtype_t d, int from, int to, size_t i)
{
    (void)to;
    return move_value(d, from, i);
}

static double pair_value(mesh_dtype_t d, int from, int to, size_t i)
{
    return move_value(d, from * 5 + to, i);
}

static void allgatherv_case(mesh_dtype_t d, size_t n, int k, int inplace)
{
    size_t ds = mesh_dtype_size(d), c[256], dsp[256], off[256], len[256];
    for (int p = 0; p < size; p++)
        c[p] = block_count(k, n, p);
    size_t ext = place(k, size, c, dsp, 1);
    for (int p = 0; p < size; p++) {
        off[p] = dsp[p] * ds;
        len[p] = c[p] * ds;
    }
    void *r = xalloc(ext * ds), *s = xalloc(c[rank] * ds);
    void *sb = inplace ? (char *)BUF(r) + dsp[rank] * ds : BUF(s);
    for (rep = 0; rep < reps; rep++) {
        POISON(r, ext * ds);
        fill(d, sb, 0, c[rank], move_value, rank);
        unsigned char *orig = snapshot(s, c[rank] * ds);
        mesh_status_t st = mesh_allgatherv(comm, DEV(sb), DEV(BUF(r)), c,
                                           k == LAY_PACKED ? NULL : dsp, d, STREAM, REQ);
        st = done_call(st);
        note_call();
        const char *call = v_name("allgatherv", d, MESH_SUM, n, k, inplace);
        if (!check_status(st, call, d, n, inplace)) {
            for (int p = 0; p < size; p++)
                check_block(call, d, BUF(r), dsp[p], c[p], gather_value, p, rank);
            check_outside(r, ext * ds, size, off, len, call, "rbuf");
            check_same(s, orig, c[rank] * ds, call, "sbuf");
        }
        free(orig);
    }
    xfree(r);
    xfree(s);
}

static void alltoallv_case(mesh_dtype_t d, size_t n, int k, int inplace)
{
    size_t ds = mesh_dtype_size(d), sc[256], sd[256], rc[256], rd[256], off[256], len[256];
    for (int p = 0; p < size; p++) {
        sc[p] = pair_count(k, n, rank, p, inplace);
        rc[p] = pair_count(k, n, p, rank, inplace);
    }
    /* the receive side in another order than the send side, unless in place */
    size_t sext = place(k, size, sc, sd, 1), rext = place(k, size, rc, rd, inplace ? 1 : 2);
    for (int p = 0; p < size; p++) {
        off[p] = rd[p] * ds;
        len[p] = rc[p] * ds;
    }
    void *s = xalloc(sext * ds), *r = inplace ? s : xalloc(rext * ds);
    int packed = k == LAY_PACKED;
    for (rep = 0; rep < reps; rep++) {
        POISON(s, sext * ds);
        if (!inplace)
            POISON(r, rext * ds);
        for (int p = 0; p < size; p++)
            for (size_t i = 0; i < sc[p]; i++)
                mesh_dtype_set(d, BUF(s), sd[p] + i, pair_value(d, rank, p, i));
        unsigned char *orig = inplace ? NULL : snapshot(s, sext * ds);
        mesh_status_t st = mesh_alltoallv(comm, DEV(BUF(s)), sc, packed ? NULL : sd, DEV(BUF(r)),
                                          rc, packed ? NULL : rd, d, STREAM, REQ);
        st = done_call(st);
        note_call();
        const char *call = v_name("alltoallv", d, MESH_SUM, n, k, inplace);
        if (!check_status(st, call, d, n, inplace)) {
            for (int p = 0; p < size; p++)
                check_block(call, d, BUF(r), rd[p], rc[p], pair_value, p, rank);
            check_outside(r, rext * ds, size, off, len, call, "rbuf");
            if (orig)
                check_same(s, orig, sext * ds, call, "sbuf");
        }
        free(orig);
    }
    xfree(s);
    if (!inplace)
        xfree(r);
}

struct rs_case {
    size_t n;
    int k, inplace;
};

static mesh_op_t rs_op;
static double rs_input(mesh_dtype_t d, int r, size_t i)
{
    (void)d;
    return red_input(rs_op, r, i);
}

static void reduce_scatterv_case(mesh_coll_type_t type, mesh_dtype_t d, mesh_op_t user_op,
                                 mesh_op_t op, double premul, void *arg)
{
    (void)type;
    const struct rs_case *rc = arg;
    /* every op with uneven counts; the sum and the average (which divides each rank's own
     * count) with the other layouts */
    if (rc->k != LAY_PACKED && user_op != MESH_SUM && user_op != MESH_AVG)
        return;
    size_t ds = mesh_dtype_size(d), c[256], dsp[256], total = 0;
    for (int p = 0; p < size; p++) {
        c[p] = block_count(rc->k, rc->n, p);
        dsp[p] = total;
        total += c[p];
    }
    void *s = xalloc(total * ds), *r = xalloc(c[rank] * ds);
    void *rb = rc->inplace ? (char *)BUF(s) + dsp[rank] * ds : BUF(r);
    rs_op = user_op;
    sum_mod = d == MESH_FP8_E4M3 || d == MESH_FP8_E5M2 ? 2 : 3;
    for (rep = 0; rep < reps; rep++) {
        POISON(r, c[rank] * ds);
        fill(d, BUF(s), 0, total, rs_input, rank);
        unsigned char *orig = rc->inplace ? NULL : snapshot(s, total * ds);
        mesh_status_t st = mesh_reduce_scatterv(comm, DEV(BUF(s)), DEV(rb), c, d, op, STREAM, REQ);
        st = done_call(st);
        note_call();
        const char *call = v_name("reduce_scatterv", d, user_op, rc->n, rc->k, rc->inplace);
        if (!check_status(st, call, d, rc->n, rc->inplace)) {
            for (size_t i = 0; i < c[rank]; i++) {
                double got = mesh_dtype_get(d, rb, i);
                double w = red_expect(user_op, dsp[rank] + i, premul);
                if (got != w) {
                    FAIL("%s: element %zu of rank %d's block is %g, expected %g", call, i, rank,
                         got, w);
                    break;
                }
            }
            if (orig) {
                check_same(s, orig, total * ds, call, "sbuf");
                CHECK_GUARDS(r, c[rank] * ds, call, "rbuf");
            } else {
                CHECK_GUARDS(s, total * ds, call, "sbuf (in place)");
                size_t zero = 0, none = 0;
                check_outside(r, c[rank] * ds, 1, &zero, &none, call, "rbuf (unused in place)");
            }
        }
        free(orig);
    }
    xfree(s);
    xfree(r);
}

/* What the layouts run in, to keep the time small: a 1-byte and an 8-byte type for the moving
 * collectives (a mix-up of bytes and elements shows in the second), an integer and a narrow
 * float for reduce-scatter-v (reductions widen the latter); at large sizes fp32 alone, once. */
static int v_selected(mesh_coll_type_t type, mesh_dtype_t d, size_t n)
{
    if (n > 4096)
        return d == MESH_FP32 && n < ((size_t)1 << 19) / (size_t)size;
    if (n != 0 && n != 1 && n != 7 && n != 1025)
        return 0;
    if (type == MESH_COLL_REDUCE_SCATTER)
        return d == MESH_INT32 || d == MESH_FP16;
    return d == MESH_INT8 || d == MESH_FP64;
}

void run_v(mesh_coll_type_t type, mesh_dtype_t d, size_t n)
{
    if (!v_selected(type, d, n) || size > 256)
        return;
    for (int k = 0; k < LAY_COUNT; k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            switch (type) {
            case MESH_COLL_ALLGATHER:
                allgatherv_case(d, n, k, inplace);
                break;
            case MESH_COLL_ALLTOALL:
                alltoallv_case(d, n, k, inplace);
                break;
            case MESH_COLL_REDUCE_SCATTER: {
                /* no displacements: the layouts that differ in counts only */
                if (k != LAY_PACKED && k != LAY_ZEROS && k != LAY_MOVED)
                    break;
                struct rs_case c = {n, k, inplace};
                for_each_op(type, d, reduce_scatterv_case, &c);
                break;
            }
            default:
                return;
            }
        }
    }
}
