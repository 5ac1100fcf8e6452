/*
 * The hierarchical algorithms on the schedule simulator (coll_a_sim.c, which also checks bounds,
 * races between a rank's tasks and send/receive matching): node layouts N x L up to 12 ranks,
 * placed by node and round robin, and unequal nodes, where every algorithm but the broadcast
 * must decline; counts from 0 to several pipeline segments (shrunk at compile time), in place
 * and out of place, v-counts with gaps, every root; results compared exactly.
 */
#include "tests/harness/harness.h"
#include "tests/unit/coll_a_sim.h"
#include <stdint.h>
#include <string.h>

extern const mesh_coll_algo_t mesh_coll_allreduce_hier, mesh_coll_reduce_scatter_hier,
    mesh_coll_allgather_hier, mesh_coll_broadcast_hier, mesh_coll_alltoall_hier;
static const mesh_coll_algo_t *const algos[] = {
    &mesh_coll_allreduce_hier, &mesh_coll_reduce_scatter_hier, &mesh_coll_allgather_hier,
    &mesh_coll_broadcast_hier, &mesh_coll_alltoall_hier};

static const char *type_name(mesh_coll_type_t t)
{
    static const char *const names[] = {"allreduce",      "reduce",    "broadcast",
                                        "reduce_scatter", "allgather", "alltoall"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

static mesh_comm_t comms[SIM_MAXN];
static int node_of[SIM_MAXN], local_rank[SIM_MAXN], node_size[SIM_MAXN], node_first[SIM_MAXN],
    node_ranks[SIM_MAXN], nnodes;

/* node_of[] is set; derives the rest of the node map */
static void make_comms(int n)
{
    memset(node_size, 0, sizeof(node_size));
    nnodes = 0;
    for (int r = 0; r < n; r++) {
        local_rank[r] = node_size[node_of[r]]++;
        nnodes = node_of[r] + 1 > nnodes ? node_of[r] + 1 : nnodes;
    }
    for (int k = 0, pos = 0; k < nnodes; k++) {
        node_first[k] = pos;
        for (int r = 0; r < n; r++)
            if (node_of[r] == k)
                node_ranks[pos++] = r;
    }
    for (int r = 0; r < n; r++)
        comms[r] = (mesh_comm_t){.rank = r,
                                 .size = n,
                                 .nnodes = nnodes,
                                 .node_of = node_of,
                                 .local_rank = local_rank,
                                 .node_size = node_size,
                                 .node_first = node_first,
                                 .node_ranks = node_ranks};
}

static int64_t val(int r, size_t e)
{
    return (int64_t)((r * 37 + (int)e * 11) % 23) - 11;
}

static int64_t *xalloc(size_t n)
{
    int64_t *p = malloc(n * 8 + 8);
    memset(p, 0x5a, n * 8 + 8);
    return p;
}

/* One run; 1 passed, 0 failed, -1 declined. */
static int run(const mesh_coll_algo_t *a, int n, size_t cnt, int root, int ip, int v, unsigned seed)
{
    size_t counts[SIM_MAXN], displs[SIM_MAXN], total = 0;
    int64_t *sb[SIM_MAXN], *rb[SIM_MAXN];
    mesh_coll_args_t args[SIM_MAXN];
    mesh_sched_t *s[SIM_MAXN];
    int ok = 1, decl = -2;

    for (int i = 0; i < n; i++) {
        counts[i] = v && a->type != MESH_COLL_ALLTOALL ? (cnt + 5 * (size_t)i) % 7 : cnt;
        displs[i] = total + (v ? 2 : 0);
        total = displs[i] + counts[i];
    }
    sim_reset(n);
    for (int r = 0; r < n; r++) {
        mesh_coll_args_t *g = &args[r];
        *g = (mesh_coll_args_t){.type = a->type,
                                .count = cnt,
                                .dtype = MESH_INT64,
                                .op = MESH_SUM,
                                .root = root,
                                .in_place = ip,
                                .uniform = !v,
                                .dsize = 8,
                                .counts = counts,
                                .displs = displs,
                                .rcounts = counts,
                                .rdispls = displs};
        size_t sl = 0, rl = 0;
        switch (a->type) {
        case MESH_COLL_ALLREDUCE:
            sl = rl = cnt;
            break;
        case MESH_COLL_BROADCAST:
            sl = rl = cnt;
            break;
        case MESH_COLL_REDUCE_SCATTER:
            sl = total;
            rl = counts[r];
            break;
        case MESH_COLL_ALLGATHER:
            sl = counts[r];
            rl = total;
            break;
        default:
            sl = rl = total;
            break;
        }
        sb[r] = xalloc(sl);
        rb[r] = xalloc(rl);
        g->bytes =
            (a->type == MESH_COLL_ALLREDUCE || a->type == MESH_COLL_BROADCAST ? cnt : total) * 8;
        for (size_t e = 0; e < sl; e++) {
            if (a->type == MESH_COLL_ALLGATHER)
                sb[r][e] = val(r, e);
            else if (a->type == MESH_COLL_ALLTOALL)
                sb[r][e] = val(r * SIM_MAXN + (int)(e / (cnt + (v ? 2 : 0) + !cnt)), e);
            else
                sb[r][e] = val(a->type == MESH_COLL_BROADCAST ? root : r, e);
        }
        g->sbuf = sb[r];
        g->rbuf = rb[r];
        if (ip) {
            if (a->type == MESH_COLL_REDUCE_SCATTER) {
                g->rbuf = sb[r] + displs[r];
            } else if (a->type == MESH_COLL_ALLGATHER) {
                memcpy(rb[r] + displs[r], sb[r], counts[r] * 8);
                g->sbuf = rb[r] + displs[r];
            } else if (a->type != MESH_COLL_BROADCAST || r == root) {
                g->rbuf = sb[r];
            }
        }
        if (a->type == MESH_COLL_BROADCAST && r != root)
            g->sbuf = NULL;
        int64_t *out = g->rbuf;
        size_t ol = a->type == MESH_COLL_REDUCE_SCATTER ? counts[r] : rl;
        if (ip && a->type == MESH_COLL_ALLGATHER) {
            sim_region(r, rb[r], rl * 8, 1);
        } else if ((void *)out == (void *)sb[r]) {
            sim_region(r, sb[r], sl * 8, 1);
        } else {
            sim_region(r, g->sbuf, g->sbuf ? sl * 8 : 0, 0);
            sim_region(r, out, ol * 8, 1);
        }
    }
    for (int r = 0; r < n; r++) {
        int d = mesh_coll_algo_score(a, &comms[r], &args[r]) < 0;
        CHECK(decl == -2 || decl == d); /* the same verdict on every rank */
        decl = d;
    }
    if (decl) {
        ok = -1;
        goto out;
    }
    for (int r = 0; r < n; r++) {
        mesh_sched_create(&comms[r], MESH_INT64, MESH_SUM, &s[r]);
        CHECK(a->build(&comms[r], &args[r], s[r]) == MESH_OK);
    }
    if (sim_run(s, n, seed))
        ok = 0;
    for (int r = 0; r < n && ok; r++) {
        const int64_t *out = args[r].rbuf;
        for (size_t i = 0;
             i < (a->type == MESH_COLL_ALLTOALL || a->type == MESH_COLL_ALLGATHER ? (size_t)n
                                                                                  : 1) &&
             ok;
             i++) {
            size_t len = a->type == MESH_COLL_ALLREDUCE || a->type == MESH_COLL_BROADCAST
                             ? cnt
                             : counts[a->type == MESH_COLL_REDUCE_SCATTER ? (size_t)r : i];
            size_t base =
                a->type == MESH_COLL_ALLTOALL || a->type == MESH_COLL_ALLGATHER ? displs[i] : 0;
            for (size_t e = 0; e < len && ok; e++) {
                int64_t want = 0;
                if (a->type == MESH_COLL_ALLREDUCE)
                    for (int q = 0; q < n; q++)
                        want += val(q, e);
                else if (a->type == MESH_COLL_REDUCE_SCATTER)
                    for (int q = 0; q < n; q++)
                        want += val(q, displs[r] + e);
                else if (a->type == MESH_COLL_BROADCAST)
                    want = val(root, e);
                else if (a->type == MESH_COLL_ALLGATHER)
                    want = val((int)i, e);
                else
                    want = val((int)i * SIM_MAXN + r, displs[r] + e);
                if (out[base + e] != want) {
                    fprintf(stderr, "rank %d block %zu element %zu: %lld, expected %lld\n", r, i, e,
                            (long long)out[base + e], (long long)want);
                    ok = 0;
                }
            }
        }
    }
    for (int r = 0; r < n; r++)
        mesh_sched_destroy(s[r]);
out:
    for (int r = 0; r < n; r++) {
        free(sb[r]);
        free(rb[r]);
    }
    return ok;
}

int main(void)
{
    static const size_t cnts[] = {0, 1, 2, 5, 13, 40};
    unsigned seed = 1;
    int runs = 0, failures = 0;
    /* layouts: N x L by node and round robin, then unequal nodes as meshrun places them */
    static const int uneven[][2] = {{3, 2}, {5, 2}, {7, 3}, {5, 3}};
    for (int li = 0; li < 2 * 4 * 4 + 4; li++) {
        int n, N, L = 0, rr = 0;
        if (li < 32) {
            N = 1 + li / 8;
            L = 1 + (li / 2) % 4;
            rr = li % 2;
            n = N * L;
            if (N == 1 && rr)
                continue;
            for (int r = 0; r < n; r++)
                node_of[r] = rr ? r % N : r / L;
        } else {
            n = uneven[li - 32][0];
            N = uneven[li - 32][1];
            int base = n / N, extra = n % N;
            for (int r = 0; r < n; r++)
                node_of[r] = r < extra * (base + 1) ? r / (base + 1)
                                                    : extra + (r - extra * (base + 1)) / base;
        }
        make_comms(n);
        for (size_t ai = 0; ai < sizeof(algos) / sizeof(algos[0]); ai++) {
            const mesh_coll_algo_t *a = algos[ai];
            int served = 0, declined = 0;
            for (size_t ci = 0; ci < sizeof(cnts) / sizeof(cnts[0]); ci++)
                for (int root = 0; root < (a->type == MESH_COLL_BROADCAST ? n : 1); root++)
                    for (int ip = 0; ip < 2; ip++)
                        for (int v = 0; v < 2; v++) {
                            if (v && a->type != MESH_COLL_REDUCE_SCATTER &&
                                a->type != MESH_COLL_ALLGATHER && a->type != MESH_COLL_ALLTOALL)
                                continue;
                            if (v && ip && a->type == MESH_COLL_ALLTOALL)
                                continue;
                            int ok = run(a, n, cnts[ci], root, ip, v, seed++);
                            if (ok < 0) {
                                declined++;
                                continue;
                            }
                            served++;
                            runs++;
                            if (!ok) {
                                failures++;
                                fprintf(stderr,
                                        "FAIL %s:%s n=%d nodes=%d%s count=%zu root=%d "
                                        "inplace=%d v=%d\n",
                                        type_name(a->type), a->name, n, N, rr ? " rr" : "",
                                        cnts[ci], root, ip, v);
                                if (failures > 5)
                                    return 1;
                            }
                        }
            /* one node: every one declines; unequal nodes: all but the broadcast; equal
             * nodes: all serve (the all-to-all only uniform counts) */
            if (N == 1 || (!L && a->type != MESH_COLL_BROADCAST))
                CHECK_MSG(served == 0, "%s n=%d nodes=%d", type_name(a->type), n, N);
            else
                CHECK_MSG(served > 0 && (a->type == MESH_COLL_ALLTOALL || !declined),
                          "%s n=%d nodes=%d", type_name(a->type), n, N);
        }
    }
    printf("%d runs, %d failures\n", runs, failures);
    return failures ? 1 : 0;
}
