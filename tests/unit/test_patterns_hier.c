/* Exhaustive checks of the hierarchical patterns (collectives/patterns/hier.h) for every layout
 * of N nodes x L ranks with N * L <= 64, ranks placed by node or round robin: the rail map, the
 * broadcast leaders, the all-to-all relay routes, and the inter-node traffic of each order,
 * counted here by walking the rings over the node map. */
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/hier.h"
#include "collectives/patterns/ring.h"
#include "tests/harness/harness.h"
#include <string.h>

#define MAXN 64

static int node_of[MAXN], local_rank[MAXN], node_size[MAXN], node_first[MAXN], node_ranks[MAXN];

static void layout(int N, int L, int rr)
{
    int n = N * L;
    memset(node_size, 0, sizeof(node_size));
    for (int r = 0; r < n; r++) {
        node_of[r] = rr ? r % N : r / L;
        local_rank[r] = node_size[node_of[r]]++;
    }
    for (int k = 0, pos = 0; k < N; k++) {
        node_first[k] = pos;
        for (int r = 0; r < n; r++)
            if (node_of[r] == k)
                node_ranks[pos++] = r;
    }
}

/* Blocks of n elements sent across nodes by ring reduce-scatters (or all-gathers: the same
 * number of blocks per step) over the groups of one phase: rails (rail = 1) or nodes, each ring
 * moving `blocks` blocks per member, run `rings` times. */
static size_t ring_net(int N, int L, int rail, int blocks, int rings)
{
    size_t total = 0;
    int g = rail ? N : L;
    for (int me = 0; me < N * L; me++) {
        int k = node_of[me], l = local_rank[me], gm = rail ? k : l;
        int right = mesh_ring_right(gm, g);
        int peer = rail ? mesh_hier_rank(node_first, node_ranks, right, l)
                        : mesh_hier_rank(node_first, node_ranks, k, right);
        if (node_of[peer] != k)
            total += (size_t)(g - 1) * (size_t)blocks * (size_t)rings;
    }
    return total;
}

static void test_layout(int N, int L, int rr)
{
    int n = N * L;
    layout(N, L, rr);
    CHECK(mesh_hier_rails(N, node_size) == L);
    CHECK(mesh_hier_max_node_size(N, node_size) == L);
    /* the rail map is a bijection onto the ranks, and (k, l) is on node k with local rank l */
    int seen[MAXN] = {0};
    for (int k = 0; k < N; k++)
        for (int l = 0; l < L; l++) {
            int r = mesh_hier_rank(node_first, node_ranks, k, l);
            CHECK(r >= 0 && r < n && !seen[r]);
            seen[r] = 1;
            CHECK(node_of[r] == k && local_rank[r] == l);
        }
    /* broadcast: one leader per node, the root on its own node; node renumbering inverts */
    for (int root = 0; root < n; root++) {
        int rn = node_of[root], reached[MAXN] = {0};
        for (int k = 0; k < N; k++) {
            int ld = mesh_hier_leader(node_first, node_ranks, k, rn, root);
            CHECK(node_of[ld] == k);
            CHECK(k != rn || ld == root);
            int v = mesh_hier_node_vrank(k, rn, N);
            CHECK(mesh_hier_node_of_vrank(v, rn, N) == k);
            CHECK((v == 0) == (k == rn));
            /* the tree over the leaders reaches every node once, from the root's node */
            if (v != 0) {
                int p = mesh_hier_node_of_vrank(mesh_binomial_parent(v, 0, N), rn, N);
                CHECK(p != k);
            }
            reached[k]++;
        }
        for (int k = 0; k < N; k++)
            CHECK(reached[k] == 1);
    }
    /* all-to-all: every block reaches its destination in at most two hops, the network hop on
     * the source's rail; each ordered pair of rail peers carries exactly L blocks, one message */
    static int rail_blocks[MAXN][MAXN];
    memset(rail_blocks, 0, sizeof(rail_blocks));
    for (int src = 0; src < n; src++)
        for (int dst = 0; dst < n; dst++) {
            int k = node_of[src], l = local_rank[src], j = node_of[dst], m = local_rank[dst];
            int relay = mesh_hier_a2a_relay(node_first, node_ranks, k, l, j, m);
            CHECK(node_of[relay] == j);
            if (k == j) {
                CHECK(relay == dst);
            } else {
                CHECK(local_rank[relay] == l);
                rail_blocks[src][relay]++;
            }
        }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int rail = node_of[a] != node_of[b] && local_rank[a] == local_rank[b];
            CHECK(rail_blocks[a][b] == (rail ? L : 0));
        }
    /* traffic: node-first reduce-scatter = N node rings of L blocks, then a rail ring of N
     * blocks; rail-first = one rail ring of N blocks of L n, then node rings */
    for (size_t blk = 0; blk < 3; blk++) {
        size_t nf = ring_net(N, L, 0, 1, N) * blk + ring_net(N, L, 1, 1, 1) * blk;
        size_t rf = ring_net(N, L, 1, L, 1) * blk + ring_net(N, L, 0, 1, 1) * blk * (size_t)N;
        CHECK(nf == mesh_hier_rs_net_node_first(N, L, blk));
        CHECK(rf == mesh_hier_rs_net_rail_first(N, L, blk));
        CHECK(mesh_hier_rs_net_node_first(N, L, blk) <= mesh_hier_rs_net_rail_first(N, L, blk));
        /* all-gather moves the same blocks in reverse */
        CHECK(mesh_hier_ag_net_rail_first(N, L, blk) == nf);
        CHECK(mesh_hier_ag_net_node_first(N, L, blk) == rf);
        if (L > 1 && N > 1 && blk)
            CHECK(nf * (size_t)L == rf);
    }
}

int main(void)
{
    int sizes[] = {1, 2, 2, 3};
    /* unequal nodes: rails do not line up */
    CHECK(mesh_hier_rails(4, sizes) == -1);
    CHECK(mesh_hier_max_node_size(4, sizes) == 3);
    CHECK(mesh_hier_rails(2, sizes + 1) == 2);
    CHECK(mesh_hier_rails(0, sizes) == -1);
    CHECK(mesh_hier_rails(1, NULL) == -1);
    int layouts = 0;
    for (int N = 1; N <= MAXN; N++)
        for (int L = 1; N * L <= MAXN; L++)
            for (int rr = 0; rr < 2; rr++) {
                test_layout(N, L, rr);
                layouts++;
            }
    printf("%d layouts\n", layouts);
    return 0;
}
