/*
 * Every coll_a algorithm on the schedule simulator (coll_a_sim.c): rank counts 1..9 and 16, node
 * layouts for the hierarchical ones, counts from 0 to a few pipeline segments (the segment size
 * is shrunk at compile time), every root, in place and out of place, unaligned buffers, int8,
 * int64 and fp64 with each op; results compared exactly with a reference computed here.
 */
#include "tests/harness/harness.h"
#include "tests/unit/coll_a_sim.h"
#include <stdint.h>
#include <string.h>

extern const mesh_coll_algo_t mesh_coll_allreduce_ring, mesh_coll_allreduce_rd,
    mesh_coll_allreduce_rabenseifner, mesh_coll_allreduce_hier, mesh_coll_reduce_binomial,
    mesh_coll_reduce_rabenseifner, mesh_coll_broadcast_binomial,
    mesh_coll_broadcast_scatter_allgather, mesh_coll_reduce_scatter_ring,
    mesh_coll_reduce_scatter_rh, mesh_coll_reduce_scatter_pairwise;

static const mesh_coll_algo_t *const algos[] = {
    &mesh_coll_allreduce_ring,         &mesh_coll_allreduce_rd,
    &mesh_coll_allreduce_rabenseifner, &mesh_coll_allreduce_hier,
    &mesh_coll_reduce_binomial,        &mesh_coll_reduce_rabenseifner,
    &mesh_coll_broadcast_binomial,     &mesh_coll_broadcast_scatter_allgather,
    &mesh_coll_reduce_scatter_ring,    &mesh_coll_reduce_scatter_rh,
    &mesh_coll_reduce_scatter_pairwise};

static mesh_comm_t comms[SIM_MAXN];
static int node_of[SIM_MAXN], local_rank[SIM_MAXN], node_size[SIM_MAXN], node_first[SIM_MAXN],
    node_ranks[SIM_MAXN];

/* nnodes nodes, ranks placed in blocks or round robin */
static void make_comms(int n, int nnodes, int rr)
{
    memset(node_size, 0, sizeof(node_size));
    for (int r = 0; r < n; r++) {
        node_of[r] = rr ? r % nnodes : r * nnodes / n;
        local_rank[r] = node_size[node_of[r]]++;
    }
    for (int k = 0, pos = 0; k < nnodes; k++) {
        node_first[k] = pos;
        for (int r = 0; r < n; r++)
            if (node_of[r] == k)
                node_ranks[pos++] = r;
    }
    for (int r = 0; r < n; r++) {
        comms[r] = (mesh_comm_t){.rank = r, .size = n, .nnodes = nnodes};
        comms[r].node_of = node_of;
        comms[r].local_rank = local_rank;
        comms[r].node_size = node_size;
        comms[r].node_first = node_first;
        comms[r].node_ranks = node_ranks;
    }
}

static size_t dsize_of(mesh_dtype_t d)
{
    return d == MESH_INT8 ? 1 : 8;
}

static double val(int r, size_t e, mesh_op_t op)
{
    if (op == MESH_PROD)
        return (double)((r + e) % 3 + 1);
    return (double)((int)((r * 37 + e * 11) % 23) - 11);
}

static void store(mesh_dtype_t d, void *buf, size_t i, double v)
{
    if (d == MESH_INT8) {
        int8_t x = (int8_t)(int64_t)v;
        memcpy((char *)buf + i, &x, 1);
    } else if (d == MESH_INT64) {
        int64_t x = (int64_t)v;
        memcpy((char *)buf + 8 * i, &x, 8);
    } else {
        memcpy((char *)buf + 8 * i, &v, 8);
    }
}

/* The reduction of element e over ranks, stored as dtype would wrap it. */
static void expect(mesh_dtype_t d, mesh_op_t op, int n, size_t e, void *out)
{
    uint64_t acc = 0;
    double dacc = 0;
    for (int r = 0; r < n; r++) {
        double v = val(r, e, op);
        uint64_t u = (uint64_t)(int64_t)v;
        if (r == 0) {
            acc = u;
            dacc = v;
            continue;
        }
        switch (op) {
        case MESH_SUM:
            acc += u;
            dacc += v;
            break;
        case MESH_PROD:
            acc *= u;
            dacc *= v;
            break;
        case MESH_MIN:
            acc = (int64_t)u < (int64_t)acc ? u : acc;
            dacc = v < dacc ? v : dacc;
            break;
        default:
            acc = (int64_t)u > (int64_t)acc ? u : acc;
            dacc = v > dacc ? v : dacc;
            break;
        }
    }
    if (d == MESH_INT8) {
        int8_t x = (int8_t)(uint8_t)acc;
        memcpy(out, &x, 1);
    } else if (d == MESH_INT64) {
        memcpy(out, &acc, 8);
    } else {
        memcpy(out, &dacc, 8);
    }
}

typedef struct {
    mesh_dtype_t dt;
    mesh_op_t op;
    size_t count;
    int root, in_place, vcounts;
} case_t;

static char *bufs[SIM_MAXN][2];

static char *alloc_unaligned(size_t bytes, int idx)
{
    char *p = malloc(bytes + 2);
    memset(p, 0x5a, bytes + 2);
    return p + 1 + (idx & 0);
}

static int run(const mesh_coll_algo_t *a, int n, const case_t *c, unsigned seed)
{
    size_t ds = dsize_of(c->dt);
    size_t counts[SIM_MAXN], displs[SIM_MAXN], total = 0;
    mesh_coll_args_t args[SIM_MAXN];
    mesh_sched_t *s[SIM_MAXN];
    int ok = 1;

    for (int i = 0; i < n; i++) {
        counts[i] = c->vcounts ? (c->count + 5 * (size_t)i) % 7 : c->count;
        displs[i] = total + (c->vcounts ? 2 : 0); /* gaps between v blocks */
        total = displs[i] + counts[i];
    }
    sim_reset(n);
    for (int r = 0; r < n; r++) {
        mesh_coll_args_t *g = &args[r];
        *g = (mesh_coll_args_t){.type = a->type,
                                .count = c->count,
                                .dtype = c->dt,
                                .op = c->op,
                                .root = c->root,
                                .uniform = !c->vcounts,
                                .dsize = ds,
                                .counts = counts,
                                .displs = displs};
        char *sb = NULL, *rb = NULL;
        size_t slen = 0, rlen = 0;
        switch (a->type) {
        case MESH_COLL_ALLREDUCE:
        case MESH_COLL_REDUCE:
            slen = c->count;
            rlen = a->type == MESH_COLL_REDUCE && r != c->root ? 0 : c->count;
            g->bytes = c->count * ds;
            break;
        case MESH_COLL_BROADCAST:
            slen = r == c->root ? c->count : 0;
            rlen = c->count;
            g->bytes = c->count * ds;
            break;
        default:
            slen = total;
            rlen = counts[r];
            g->bytes = total * ds;
            break;
        }
        sb = alloc_unaligned(slen * ds, 0);
        rb = alloc_unaligned(rlen * ds, 1);
        bufs[r][0] = sb;
        bufs[r][1] = rb;
        for (size_t e = 0; e < slen; e++)
            store(c->dt, sb, e, val(r, e, c->op));
        g->sbuf = slen || a->type != MESH_COLL_BROADCAST ? sb : NULL;
        g->rbuf = rlen || a->type != MESH_COLL_REDUCE ? rb : NULL;
        if (c->in_place &&
            ((a->type != MESH_COLL_BROADCAST && a->type != MESH_COLL_REDUCE) || r == c->root)) {
            g->in_place = 1;
            if (a->type == MESH_COLL_REDUCE_SCATTER)
                g->rbuf = sb + displs[r] * ds;
            else
                g->rbuf = sb;
        }
        if (a->type == MESH_COLL_BROADCAST && r != c->root)
            g->sbuf = NULL;
        if (g->in_place && a->type != MESH_COLL_REDUCE_SCATTER) {
            sim_region(r, sb, slen * ds, 1);
        } else {
            sim_region(r, sb, slen * ds, 0);
            sim_region(r, g->rbuf, (a->type == MESH_COLL_REDUCE_SCATTER ? counts[r] : rlen) * ds,
                       1);
        }
    }
    for (int r = 0; r < n; r++) {
        if (mesh_coll_algo_score(a, &comms[r], &args[r]) < 0) {
            CHECK(r == 0); /* a decline is the same on every rank */
            ok = -1;
            goto out;
        }
        mesh_sched_create(&comms[r], c->dt, c->op, &s[r]);
        CHECK(a->build(&comms[r], &args[r], s[r]) == MESH_OK);
    }
    if (sim_run(s, n, seed)) {
        ok = 0;
    } else {
        for (int r = 0; r < n && ok; r++) {
            const mesh_coll_args_t *g = &args[r];
            unsigned char want[8];
            switch (a->type) {
            case MESH_COLL_ALLREDUCE:
            case MESH_COLL_REDUCE:
                if (a->type == MESH_COLL_REDUCE && r != c->root)
                    break;
                for (size_t e = 0; e < c->count && ok; e++) {
                    expect(c->dt, c->op, n, e, want);
                    if (memcmp((char *)g->rbuf + e * ds, want, ds)) {
                        fprintf(stderr, "rank %d element %zu wrong\n", r, e);
                        ok = 0;
                    }
                }
                break;
            case MESH_COLL_BROADCAST:
                for (size_t e = 0; e < c->count && ok; e++) {
                    unsigned char w[8];
                    store(c->dt, w, 0, val(c->root, e, c->op));
                    if (memcmp((char *)g->rbuf + e * ds, w, ds)) {
                        fprintf(stderr, "rank %d element %zu wrong\n", r, e);
                        ok = 0;
                    }
                }
                break;
            default:
                for (size_t e = 0; e < counts[r] && ok; e++) {
                    expect(c->dt, c->op, n, displs[r] + e, want);
                    if (memcmp((char *)g->rbuf + e * ds, want, ds)) {
                        fprintf(stderr, "rank %d element %zu wrong\n", r, e);
                        ok = 0;
                    }
                }
                break;
            }
        }
    }
    for (int r = 0; r < n; r++)
        mesh_sched_destroy(s[r]);
out:
    for (int r = 0; r < n; r++) {
        free(bufs[r][0] - 1);
        free(bufs[r][1] - 1);
    }
    return ok;
}

int main(int argc, char **argv)
{
    static const int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};
    static const size_t cnts[] = {0, 1, 2, 3, 7, 16, 17, 31, 64, 100};
    static const struct {
        mesh_dtype_t dt;
        mesh_op_t op;
    } types[] = {{MESH_INT64, MESH_SUM},
                 {MESH_INT8, MESH_SUM},
                 {MESH_FP64, MESH_MAX},
                 {MESH_INT64, MESH_PROD},
                 {MESH_INT64, MESH_MIN}};
    const char *only = argc > 1 ? argv[1] : NULL;
    unsigned seed = 1;
    int failures = 0, runs = 0;

    for (size_t ai = 0; ai < sizeof(algos) / sizeof(algos[0]); ai++) {
        const mesh_coll_algo_t *a = algos[ai];
        char full[64];
        static const char *const tnames[] = {"allreduce", "reduce", "broadcast", "reduce_scatter"};
        snprintf(full, sizeof(full), "%s:%s", tnames[a->type], a->name);
        if (only && !strstr(full, only))
            continue;
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            int n = sizes[si];
            /* node layouts: one node, then (for the hierarchical algorithm) several */
            int layouts[6][2] = {{1, 0}}, nl = 1;
            if (a == &mesh_coll_allreduce_hier)
                for (int k = 2; k <= n && nl < 6; k++)
                    if (n % k == 0 || k == 2) {
                        layouts[nl][0] = k;
                        layouts[nl++][1] = 0;
                        if (nl < 6) {
                            layouts[nl][0] = k;
                            layouts[nl++][1] = 1;
                        }
                    }
            for (int li = 0; li < nl; li++) {
                make_comms(n, layouts[li][0], layouts[li][1]);
                int roots = a->type == MESH_COLL_REDUCE || a->type == MESH_COLL_BROADCAST ? n : 1;
                for (size_t ci = 0; ci < sizeof(cnts) / sizeof(cnts[0]); ci++)
                    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
                        for (int root = 0; root < roots; root++)
                            for (int ip = 0; ip < 2; ip++)
                                for (int v = 0; v < (a->type == MESH_COLL_REDUCE_SCATTER ? 2 : 1);
                                     v++) {
                                    if ((ti > 1 || v) && ci % 3 != 1 && ci != 4)
                                        continue;
                                    case_t c = {types[ti].dt, types[ti].op, cnts[ci], root, ip, v};
                                    int ok = run(a, n, &c, seed++);
                                    if (ok < 0)
                                        continue;
                                    runs++;
                                    if (!ok) {
                                        failures++;
                                        fprintf(stderr,
                                                "FAIL %s n=%d nodes=%d%s count=%zu dt=%d op=%d "
                                                "root=%d inplace=%d v=%d\n",
                                                full, n, layouts[li][0], layouts[li][1] ? "rr" : "",
                                                cnts[ci], c.dt, c.op, root, ip, v);
                                        if (failures > 5)
                                            return 1;
                                    }
                                }
            }
        }
    }
    printf("%d runs, %d failures\n", runs, failures);
    return failures ? 1 : 0;
}
