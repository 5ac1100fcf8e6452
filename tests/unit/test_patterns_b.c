/* Exhaustive checks of the Bruck, pairwise and dissemination patterns for sizes 1..64, against
 * simulations that move block identities between ranks. */
#include "collectives/patterns/bruck.h"
#include "collectives/patterns/dissemination.h"
#include "collectives/patterns/pairwise.h"
#include "tests/harness/harness.h"
#include <stdint.h>
#include <string.h>

#define MAXN 64

static int ceil_log2(int n)
{
    int k = 0;
    for (long v = 1; v < n; v *= 2)
        k++;
    return k;
}

static uint64_t all_bits(int n)
{
    return n == 64 ? ~0ull : (1ull << n) - 1;
}

static void test_pairwise(int n)
{
    static int sent[MAXN][MAXN], recvd[MAXN][MAXN];
    memset(sent, 0, sizeof(sent));
    memset(recvd, 0, sizeof(recvd));
    for (int r = 0; r < n; r++) {
        CHECK(mesh_pairwise_send_peer(r, n, 0) == r);
        CHECK(mesh_pairwise_recv_peer(r, n, 0) == r);
    }
    for (int s = 1; s < n; s++) {
        int seen_dst[MAXN] = {0};
        for (int r = 0; r < n; r++) {
            int sp = mesh_pairwise_send_peer(r, n, s), rp = mesh_pairwise_recv_peer(r, n, s);
            CHECK_MSG(sp >= 0 && sp < n && sp != r, "n %d step %d rank %d send %d", n, s, r, sp);
            CHECK_MSG(rp >= 0 && rp < n && rp != r, "n %d step %d rank %d recv %d", n, s, r, rp);
            /* the send peer of r at step s receives from r at step s */
            CHECK_MSG(mesh_pairwise_recv_peer(sp, n, s) == r, "n %d step %d rank %d", n, s, r);
            /* every rank is the destination of exactly one sender per step */
            CHECK(seen_dst[sp]++ == 0);
            if ((n & (n - 1)) == 0)
                CHECK(sp == rp);
            sent[r][sp]++;
            recvd[r][rp]++;
        }
    }
    for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++) {
            CHECK_MSG(sent[r][p] == (p != r), "n %d: %d sends to %d %d times", n, r, p, sent[r][p]);
            CHECK_MSG(recvd[r][p] == (p != r), "n %d: %d recvs from %d %d times", n, r, p,
                      recvd[r][p]);
        }
}

static void test_bruck_allgather(int n)
{
    static int slot[MAXN][MAXN], next[MAXN][MAXN];
    uint64_t have[MAXN];
    int steps = mesh_bruck_nsteps(n);
    CHECK(steps == ceil_log2(n));
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < n; j++)
            slot[r][j] = -1;
        slot[r][0] = r;
        have[r] = 1ull << r;
    }
    for (int k = 0; k < steps; k++) {
        int cnt = mesh_bruck_ag_nblocks(n, k), at = mesh_bruck_ag_recv_index(k);
        CHECK(cnt >= 1 && cnt <= (1 << k));
        memcpy(next, slot, sizeof(slot));
        for (int r = 0; r < n; r++) {
            int dst = mesh_bruck_ag_send_peer(r, n, k);
            CHECK(dst >= 0 && dst < n);
            CHECK(mesh_bruck_ag_recv_peer(dst, n, k) == r);
            for (int j = 0; j < cnt; j++) {
                CHECK_MSG(slot[r][j] >= 0, "n %d step %d rank %d sends empty slot %d", n, k, r, j);
                CHECK(at + j < n && next[dst][at + j] == -1);
                next[dst][at + j] = slot[r][j];
                CHECK_MSG(!(have[dst] & (1ull << slot[r][j])), "n %d: block sent twice", n);
                have[dst] |= 1ull << slot[r][j];
            }
        }
        memcpy(slot, next, sizeof(slot));
    }
    for (int r = 0; r < n; r++) {
        CHECK_MSG(have[r] == all_bits(n), "n %d rank %d misses blocks", n, r);
        for (int j = 0; j < n; j++)
            CHECK_MSG(slot[r][j] == mesh_bruck_ag_block(r, n, j) && slot[r][j] == (r + j) % n,
                      "n %d rank %d index %d holds %d", n, r, j, slot[r][j]);
    }
}

typedef struct {
    int src, dst;
} item_t;

static void test_bruck_alltoall(int n)
{
    static item_t slot[MAXN][MAXN], next[MAXN][MAXN];
    int steps = mesh_bruck_nsteps(n);
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++) {
            int b = mesh_bruck_a2a_in_block(r, n, j);
            CHECK(b == (r + j) % n);
            slot[r][j] = (item_t){r, b};
        }
    for (int k = 0; k < steps; k++) {
        int moved = 0;
        for (int j = 0; j < n; j++)
            moved += mesh_bruck_a2a_moves(j, k);
        CHECK_MSG(moved == mesh_bruck_a2a_nmoved(n, k), "n %d step %d", n, k);
        CHECK(moved >= 1);
        memcpy(next, slot, sizeof(slot));
        for (int r = 0; r < n; r++) {
            int dst = mesh_bruck_a2a_send_peer(r, n, k);
            CHECK(mesh_bruck_a2a_recv_peer(dst, n, k) == r);
            for (int j = 0; j < n; j++)
                if (mesh_bruck_a2a_moves(j, k))
                    next[dst][j] = slot[r][j];
        }
        memcpy(slot, next, sizeof(slot));
    }
    for (int r = 0; r < n; r++) {
        uint64_t from = 0;
        for (int j = 0; j < n; j++) {
            CHECK_MSG(slot[r][j].dst == r, "n %d rank %d slot %d has data for %d", n, r, j,
                      slot[r][j].dst);
            CHECK(slot[r][j].src == mesh_bruck_a2a_out_block(r, n, j));
            from |= 1ull << slot[r][j].src;
        }
        CHECK(from == all_bits(n));
    }
}

static void test_dissemination(int n)
{
    uint64_t heard[MAXN], next[MAXN];
    int rounds = mesh_dissem_nrounds(n);
    CHECK(rounds == ceil_log2(n));
    for (int r = 0; r < n; r++)
        heard[r] = 1ull << r;
    for (int k = 0; k < rounds; k++) {
        memcpy(next, heard, sizeof(heard));
        for (int r = 0; r < n; r++) {
            int dst = mesh_dissem_send_peer(r, n, k);
            CHECK(dst >= 0 && dst < n && dst != r);
            CHECK(mesh_dissem_recv_peer(dst, n, k) == r);
            next[dst] |= heard[r];
        }
        memcpy(heard, next, sizeof(heard));
        /* after k+1 rounds every rank has heard from exactly min(2^(k+1), n) ranks */
        int expect = (2 << k) < n ? (2 << k) : n;
        for (int r = 0; r < n; r++)
            CHECK(__builtin_popcountll(heard[r]) == expect);
    }
    for (int r = 0; r < n; r++)
        CHECK_MSG(heard[r] == all_bits(n), "n %d rank %d", n, r);
}

int main(void)
{
    for (int n = 1; n <= MAXN; n++) {
        test_pairwise(n);
        test_bruck_allgather(n);
        test_bruck_alltoall(n);
        test_dissemination(n);
    }
    printf("patterns b: sizes 1..%d ok\n", MAXN);
    return 0;
}
