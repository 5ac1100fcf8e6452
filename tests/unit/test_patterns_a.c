/* Exhaustive checks of the ring, recursive doubling/halving and binomial patterns for every
 * communicator size 1..64 (and every root for the trees), against properties computed here. */
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/rd.h"
#include "collectives/patterns/ring.h"
#include "tests/harness/harness.h"
#include <stdint.h>
#include <string.h>

#define MAXN 64

static void test_ring(int n)
{
    /* Reduce-scatter: simulate which ranks' contributions each (rank, block) partial holds. */
    static uint64_t part[MAXN][MAXN];
    for (int r = 0; r < n; r++) {
        CHECK(mesh_ring_right(mesh_ring_left(r, n), n) == r);
        CHECK(mesh_ring_left(r, n) == (r + n - 1) % n);
        for (int b = 0; b < n; b++)
            part[r][b] = 1ull << r;
    }
    for (int s = 0; s < n - 1; s++) {
        uint64_t sent[MAXN];
        for (int r = 0; r < n; r++)
            sent[r] = part[r][mesh_ring_rs_send_block(r, n, s)];
        for (int r = 0; r < n; r++) {
            int l = mesh_ring_left(r, n), b = mesh_ring_rs_recv_block(r, n, s);
            /* what arrives is the block the left neighbour sent */
            CHECK(b == mesh_ring_rs_send_block(l, n, s));
            /* a partial is forwarded the step after it was reduced */
            if (s > 0)
                CHECK(mesh_ring_rs_send_block(r, n, s) == mesh_ring_rs_recv_block(r, n, s - 1));
            CHECK((part[r][b] & sent[l]) == 0); /* never reduce a contribution twice */
            part[r][b] |= sent[l];
        }
    }
    uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
    for (int r = 0; r < n; r++)
        CHECK(part[r][r] == all);

    /* All-gather: every rank ends with every block, each received exactly once. */
    static int have[MAXN][MAXN];
    memset(have, 0, sizeof(have));
    for (int r = 0; r < n; r++)
        have[r][r] = 1;
    for (int s = 0; s < n - 1; s++) {
        int sent[MAXN];
        for (int r = 0; r < n; r++) {
            sent[r] = mesh_ring_ag_send_block(r, n, s);
            CHECK(have[r][sent[r]]);
        }
        for (int r = 0; r < n; r++) {
            int b = mesh_ring_ag_recv_block(r, n, s);
            CHECK(b == sent[mesh_ring_left(r, n)]);
            CHECK(!have[r][b]);
            have[r][b] = 1;
        }
    }
    for (int r = 0; r < n; r++)
        for (int b = 0; b < n; b++)
            CHECK(have[r][b]);
}

static void test_blocks(int n)
{
    size_t counts[] = {0, 1, 2, 3, 7, 63, 64, 65, 1000, 4097};
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t c = counts[ci], sum = 0, mn = (size_t)-1, mx = 0;
        CHECK(mesh_block_offset(c, n, 0) == 0);
        for (int i = 0; i < n; i++) {
            size_t len = mesh_block_count(c, n, i);
            CHECK(mesh_block_offset(c, n, i) == sum);
            sum += len;
            mn = len < mn ? len : mn;
            mx = len > mx ? len : mx;
            if (i > 0)
                CHECK(len <= mesh_block_count(c, n, i - 1));
        }
        CHECK(sum == c);
        CHECK(mesh_block_offset(c, n, n) == c);
        CHECK(mx - mn <= 1);
    }
}

static void test_rd(int n)
{
    int p = mesh_rd_pof2(n), lg = mesh_rd_log2(p), extra = mesh_rd_nextra(n);
    CHECK(p <= n && 2 * p > n && (p & (p - 1)) == 0 && (1 << lg) == p);
    CHECK(extra == n - p && extra < p);
    int seen[MAXN] = {0}, nextra = 0;
    for (int r = 0; r < n; r++) {
        int c = mesh_rd_core_rank(r, n), f = mesh_rd_fold_partner(r, n);
        if (mesh_rd_is_extra(r, n)) {
            nextra++;
            CHECK(c < 0);
            CHECK(f >= 0 && f < n && !mesh_rd_is_extra(f, n));
            CHECK(mesh_rd_fold_partner(f, n) == r);
            CHECK(mesh_rd_partner(r, n, 0) == -1);
        } else {
            CHECK(c >= 0 && c < p);
            CHECK(!seen[c]);
            seen[c] = 1;
            CHECK(mesh_rd_core_to_rank(c, n) == r);
            if (f >= 0)
                CHECK(mesh_rd_is_extra(f, n) && mesh_rd_fold_partner(f, n) == r);
            /* core rank c stands for [first(c), first(c + 1)): itself and its extra partner */
            int lo = mesh_rd_core_first_rank(c, n), hi = mesh_rd_core_first_rank(c + 1, n);
            CHECK(lo <= r && r < hi);
            CHECK(hi - lo == (f >= 0 ? 2 : 1));
            if (f >= 0)
                CHECK(lo <= f && f < hi);
        }
    }
    CHECK(nextra == extra);
    CHECK(mesh_rd_core_first_rank(0, n) == 0 && mesh_rd_core_first_rank(p, n) == n);

    /* Doubling: partner symmetry, and the union of data reaches every core rank. */
    uint64_t know[MAXN];
    for (int c = 0; c < p; c++)
        know[c] = 1ull << c;
    for (int k = 0; k < lg; k++) {
        uint64_t next[MAXN];
        for (int c = 0; c < p; c++) {
            int r = mesh_rd_core_to_rank(c, n), q = mesh_rd_partner(r, n, k);
            CHECK(q >= 0 && q < n && q != r && !mesh_rd_is_extra(q, n));
            CHECK(mesh_rd_partner(q, n, k) == r);
            int qc = mesh_rd_core_rank(q, n);
            CHECK((know[c] & know[qc]) == 0); /* disjoint: no double counting */
            next[c] = know[c] | know[qc];
        }
        memcpy(know, next, sizeof(know));
    }
    uint64_t all = p == 64 ? ~0ull : (1ull << p) - 1;
    for (int c = 0; c < p; c++)
        CHECK(know[c] == all);

    /* Halving: windows shrink to the own block, and the kept and sent halves partition the
     * window; partners at a level share the same window. */
    for (int c = 0; c < p; c++) {
        for (int lv = 0; lv < lg; lv++) {
            int f = mesh_rh_window_first(c, p, lv), nb = mesh_rh_window_blocks(p, lv);
            int q = mesh_rh_partner(c, p, lv);
            CHECK(q >= 0 && q < p && mesh_rh_partner(q, p, lv) == c);
            CHECK(mesh_rh_window_first(q, p, lv) == f);
            int kf = mesh_rh_window_first(c, p, lv + 1), qf = mesh_rh_window_first(q, p, lv + 1);
            int kb = mesh_rh_window_blocks(p, lv + 1);
            CHECK(2 * kb == nb);
            CHECK(kf != qf && (kf == f || kf == f + kb) && (qf == f || qf == f + kb));
            CHECK(c >= kf && c < kf + kb);
        }
        CHECK(mesh_rh_window_first(c, p, lg) == c && mesh_rh_window_blocks(p, lg) == 1);
        CHECK(mesh_rh_window_first(c, p, 0) == 0 && mesh_rh_window_blocks(p, 0) == p);
    }
    /* The windows of all core ranks at any level partition the blocks. */
    for (int lv = 0; lv <= lg; lv++) {
        int cover[MAXN] = {0};
        for (int c = 0; c < p; c++) {
            if (mesh_rh_window_first(c, p, lv) != c - c % mesh_rh_window_blocks(p, lv))
                CHECK(0);
            if (c % mesh_rh_window_blocks(p, lv) == 0)
                for (int b = 0; b < mesh_rh_window_blocks(p, lv); b++)
                    cover[c + b]++;
        }
        for (int b = 0; b < p; b++)
            CHECK(cover[b] == 1);
    }
}

static void test_binomial(int n)
{
    for (int root = 0; root < n; root++) {
        int parent[MAXN], nparent_refs[MAXN] = {0};
        for (int r = 0; r < n; r++) {
            int vr = mesh_binomial_vrank(r, root, n);
            CHECK(vr >= 0 && vr < n && mesh_binomial_rank(vr, root, n) == r);
            parent[r] = mesh_binomial_parent(r, root, n);
            if (r == root)
                CHECK(parent[r] == -1);
            else
                CHECK(parent[r] >= 0 && parent[r] < n && parent[r] != r);
        }
        /* children lists agree with parents: every non-root rank has exactly one parent */
        for (int r = 0; r < n; r++) {
            int nc = mesh_binomial_nchildren(r, root, n), sub = 1, prev = -1;
            for (int i = 0; i < nc; i++) {
                int ch = mesh_binomial_child(r, root, n, i);
                CHECK(ch >= 0 && ch < n && parent[ch] == r);
                nparent_refs[ch]++;
                int vch = mesh_binomial_vrank(ch, root, n);
                /* subtrees are contiguous relative ranges, children in increasing order */
                CHECK(vch > prev);
                CHECK(vch == mesh_binomial_vrank(r, root, n) + sub);
                prev = vch;
                sub += mesh_binomial_subtree(ch, root, n);
            }
            CHECK(sub == mesh_binomial_subtree(r, root, n));
        }
        for (int r = 0; r < n; r++)
            CHECK(nparent_refs[r] == (r == root ? 0 : 1));
        CHECK(mesh_binomial_subtree(root, root, n) == n);
        /* connected and acyclic: walking up reaches the root within log2(n) + 1 hops */
        for (int r = 0; r < n; r++) {
            int x = r, hops = 0;
            while (x != root) {
                x = parent[x];
                CHECK(++hops <= 7);
            }
        }
    }
}

int main(void)
{
    for (int n = 1; n <= MAXN; n++) {
        test_ring(n);
        test_blocks(n);
        test_rd(n);
        test_binomial(n);
    }
    return 0;
}
