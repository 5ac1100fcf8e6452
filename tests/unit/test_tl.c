/*
 * Transport conformance: every registered transport, with as many processes as its scope
 * allows (self: 1; node and network transports: 2, 3 and 4 processes forming one node), checks
 * exact contents and byte counts for sizes from 0 to 9 MiB with receives posted before and after
 * the data arrives, many outstanding tags between one pair received in reverse order, all pairs
 * at once, and that a peer killed with SIGKILL turns into MESH_ERR_PEER_FAILED on every
 * survivor, and that wireup with a peer that never connects times out naming it. Receives
 * shorter than their messages fail with MESH_ERR_TRUNCATED and write nothing past the buffer,
 * with the endpoint still usable afterwards. Addresses
 * are exchanged through shared memory, not the bootstrap. The whole suite runs again with
 * MESH_SHM_CMA=0 (large messages through the ring) and with cross-memory attach refused by the
 * kernel (the EPERM fallback). Usage: test_tl [transport] ; alarm() watchdogs bound every process.
 */
#include "config.h"
#include "transports/tl.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "tests/harness/harness.h"
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4
#define NODE      "testnode"
#define WAIT_S    30.0

typedef struct {
    atomic_int count;
    atomic_int gen;
    atomic_int failed;
    int pid[MAX_RANKS];
    size_t addr_len[MAX_RANKS];
    unsigned char addr[MAX_RANKS][MESH_TL_ADDR_MAX];
} shared_t;

static shared_t *sh;
static int g_rank, g_size;
static const mesh_tl_ops_t *g_ops;
static int g_signature; /* the transport reports senders' signatures (MESH_TL_CAP_SIGNATURE) */
static mesh_tl_iface_t *g_iface;
static mesh_tl_ep_t *g_ep[MAX_RANKS];

static const size_t sizes[] = {0, 1, 7, 4096, 65536 + 3, 1u << 20, 9u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Spins with progress so transports keep draining while ranks wait for each other. */
static void barrier(void)
{
    int gen = atomic_load(&sh->gen);
    if (atomic_fetch_add(&sh->count, 1) == g_size - 1) {
        atomic_store(&sh->count, 0);
        atomic_fetch_add(&sh->gen, 1);
        return;
    }
    unsigned idle = 0;
    while (atomic_load(&sh->gen) == gen) {
        CHECK_MSG(!atomic_load(&sh->failed), "another rank failed");
        if (g_iface && mesh_tl_progress(g_iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
}

static unsigned char pattern(int src, int dst, size_t size, size_t i)
{
    return (unsigned char)(src * 131 + dst * 31 + size * 3 + i * 7 + (i >> 9));
}

static void fill(unsigned char *b, int src, int dst, size_t size)
{
    for (size_t i = 0; i < size; i++)
        b[i] = pattern(src, dst, size, i);
}

static void verify(const unsigned char *b, int src, int dst, size_t size, const char *what)
{
    for (size_t i = 0; i < size; i++)
        CHECK_MSG(b[i] == pattern(src, dst, size, i),
                  "%s: %s rank %d <- %d size %zu: byte %zu is %u, want %u", g_ops->name, what, dst,
                  src, size, i, b[i], pattern(src, dst, size, i));
}

/* Progresses until every op completed; returns how long it took. */
static double wait_all(mesh_tl_op_t **ops, int n, double limit)
{
    double t0 = mesh_time();
    unsigned idle = 0;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++)
            pending += ops[i]->status == MESH_INPROGRESS;
        if (!pending)
            return mesh_time() - t0;
        CHECK_MSG(mesh_time() - t0 < limit, "%s: rank %d: %d operations still pending after %.0f s",
                  g_ops->name, g_rank, pending, limit);
        if (mesh_tl_progress(g_iface) > 0)
            idle = 0;
        else
            mesh_backoff(&idle);
    }
}

static int peers(int *list)
{
    int n = 0;
    for (int p = 0; p < g_size; p++)
        if (g_ep[p])
            list[n++] = p;
    return n;
}

/* Every pair exchanges each size at once; late: receives are posted after the data arrived.
 * flags: MESH_TL_OP_* of the sends. */
static void test_sizes(int late, unsigned flags)
{
    int pl[MAX_RANKS], np = peers(pl);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t size = sizes[k];
        unsigned char *sbuf[MAX_RANKS], *rbuf[MAX_RANKS];
        mesh_tl_op_t sop[MAX_RANKS] = {0}, rop[MAX_RANKS] = {0};
        mesh_tl_op_t *all[2 * MAX_RANKS];
        uint64_t tag = MESH_TL_TAG_EXACT | ((uint64_t)(1 + late + 3 * !!flags) << 40) | k;
        for (int i = 0; i < np; i++) {
            sop[i].flags = flags;
            sbuf[i] = malloc(size + 1);
            rbuf[i] = malloc(size + 16);
            CHECK(sbuf[i] && rbuf[i]);
            fill(sbuf[i], g_rank, pl[i], size);
            memset(rbuf[i], 0xee, size + 16);
        }
        if (!late) {
            for (int i = 0; i < np; i++)
                CHECK(mesh_tl_irecv(g_ep[pl[i]], tag, rbuf[i], size + 16, &rop[i]) == MESH_OK);
            barrier();
        }
        for (int i = 0; i < np; i++)
            CHECK(mesh_tl_isend(g_ep[pl[i]], tag, sbuf[i], size, &sop[i]) == MESH_OK);
        if (late) {
            /* give the data time to arrive unexpected (rendezvous headers for large ones); with
             * late == 2 only a little of it, so that a large message is matched mid-way */
            double t = mesh_time() + (late == 2 ? 0.002 : 0.05);
            while (mesh_time() < t)
                mesh_tl_progress(g_iface);
            barrier();
            for (int i = 0; i < np; i++)
                CHECK(mesh_tl_irecv(g_ep[pl[i]], tag, rbuf[i], size + 16, &rop[i]) == MESH_OK);
        }
        for (int i = 0; i < np; i++) {
            all[2 * i] = &sop[i];
            all[2 * i + 1] = &rop[i];
        }
        wait_all(all, 2 * np, WAIT_S);
        for (int i = 0; i < np; i++) {
            CHECK_MSG(sop[i].status == MESH_OK && rop[i].status == MESH_OK,
                      "%s: size %zu with rank %d: send %d receive %d", g_ops->name, size, pl[i],
                      sop[i].status, rop[i].status);
            CHECK_MSG(sop[i].length == size && rop[i].length == size,
                      "%s: size %zu with rank %d: sent %zu received %zu bytes", g_ops->name, size,
                      pl[i], sop[i].length, rop[i].length);
            verify(rbuf[i], pl[i], g_rank, size,
                   late == 2 ? "receive posted mid-way"
                   : late    ? "late receive"
                             : "early receive");
            for (int j = 0; j < 16; j++)
                CHECK(rbuf[i][size + j] == 0xee);
            free(sbuf[i]);
            free(rbuf[i]);
        }
        barrier();
    }
}

/* A receive shorter than its message, posted while the message is still arriving: rank 0 sends
 * 24 MiB to rank 1, which posts a 1 MiB receive after its first round of progress that moved
 * anything (a round takes at most 8 MiB of a tcp stream, so the rest is still to come). The
 * receive fails with MESH_ERR_TRUNCATED, the rest of the message is dropped, the send completes
 * and the endpoint stays healthy: a message that follows arrives whole. */
static void test_truncate_midway(void)
{
    enum { LEN = 24 << 20, CAP = 1 << 20, NEXT = 4096 };
    uint64_t tag = MESH_TL_TAG_EXACT | (0x76ull << 40), tag2 = tag | 1;
    if (g_size < 2)
        return;
    barrier();
    if (g_rank > 1) {
        barrier();
        return;
    }
    int peer = 1 - g_rank;
    unsigned char *big = malloc(LEN), *next = malloc(NEXT), *got = malloc(NEXT);
    CHECK(big && next && got);
    fill(next, 0, 1, NEXT);
    mesh_tl_op_t op = {0}, op2 = {0};
    if (g_rank == 0) {
        memset(big, 0x5c, LEN);
        CHECK(mesh_tl_isend(g_ep[peer], tag, big, LEN, &op) == MESH_OK);
        CHECK(mesh_tl_isend(g_ep[peer], tag2, next, NEXT, &op2) == MESH_OK);
    } else {
        double t = mesh_time() + 5;
        while (mesh_tl_progress(g_iface) <= 0 && mesh_time() < t)
            ;
        CHECK(mesh_tl_irecv(g_ep[peer], tag, big, CAP, &op) == MESH_OK);
        CHECK(mesh_tl_irecv(g_ep[peer], tag2, got, NEXT, &op2) == MESH_OK);
    }
    mesh_tl_op_t *both[2] = {&op, &op2};
    wait_all(both, 2, WAIT_S);
    if (g_rank == 0) {
        CHECK_MSG(op.status == MESH_OK && op2.status == MESH_OK,
                  "%s: sends of %d and %d bytes to rank 1: status %d and %d", g_ops->name, LEN,
                  NEXT, op.status, op2.status);
    } else {
        CHECK_MSG(op.status == MESH_ERR_TRUNCATED,
                  "%s: receive of %d bytes posted while a %d-byte message arrived: status %d",
                  g_ops->name, CAP, LEN, op.status);
        CHECK_MSG(op2.status == MESH_OK && op2.length == NEXT,
                  "%s: the message after the truncated one: status %d, length %zu", g_ops->name,
                  op2.status, op2.length);
        verify(got, 0, 1, NEXT, "after a truncated receive");
    }
    free(big);
    free(next);
    free(got);
    barrier();
}

/* Receives shorter than their messages, by one byte and by more, eager and rendezvous sizes
 * (eager limits: shm 16 KiB, verbs 8 KiB, ucx 1 MiB here; tcp and ofi pieces of 512 KiB and
 * MESH_OFI_MAX_MSG), posted before the message arrives and after (late): every one fails with
 * MESH_ERR_TRUNCATED and the message's length, the error names the peer and both sizes, the
 * bytes after the receive buffer stay as they were, and the sends complete. test_tags, which
 * runs next, shows the endpoints still deliver what follows. */
static void test_truncate(int late)
{
    static const size_t cases[][2] = {{0, 1},
                                      {63, 64},
                                      {40, 1000},
                                      {16383, 16384},
                                      {16384, 16400},
                                      {65536, 65537},
                                      {100, 200000},
                                      {1 << 20, (1 << 20) + 1},
                                      {(1 << 20) - 1, 3u << 20}};
    enum { NC = sizeof(cases) / sizeof(cases[0]), TAIL = 64 };
    int pl[MAX_RANKS], np = peers(pl);
    for (int c = 0; c < NC; c++) {
        size_t cap = cases[c][0], len = cases[c][1];
        unsigned char *sbuf = malloc(len), *rbuf[MAX_RANKS];
        mesh_tl_op_t sop[MAX_RANKS] = {0}, rop[MAX_RANKS] = {0};
        mesh_tl_op_t *all[2 * MAX_RANKS];
        uint64_t tag = MESH_TL_TAG_EXACT | (0x75ull << 40) | ((uint64_t)late << 32) | (uint64_t)c;
        CHECK(sbuf);
        memset(sbuf, 0x5c, len);
        for (int i = 0; i < np; i++) {
            rbuf[i] = malloc(cap + TAIL);
            CHECK(rbuf[i]);
            memset(rbuf[i], 0xee, cap + TAIL);
        }
        /* a failure may come while the barrier below still progresses */
        mesh_error_clear();
        if (!late) {
            for (int i = 0; i < np; i++)
                CHECK(mesh_tl_irecv(g_ep[pl[i]], tag, rbuf[i], cap, &rop[i]) == MESH_OK);
            barrier();
        }
        for (int i = 0; i < np; i++)
            CHECK(mesh_tl_isend(g_ep[pl[i]], tag, sbuf, len, &sop[i]) == MESH_OK);
        if (late) {
            double t = mesh_time() + 0.05;
            while (mesh_time() < t)
                mesh_tl_progress(g_iface);
            barrier();
            for (int i = 0; i < np; i++)
                CHECK(mesh_tl_irecv(g_ep[pl[i]], tag, rbuf[i], cap, &rop[i]) == MESH_OK);
        }
        for (int i = 0; i < np; i++) {
            all[2 * i] = &sop[i];
            all[2 * i + 1] = &rop[i];
        }
        wait_all(all, 2 * np, WAIT_S);
        char want_len[48], want_cap[48];
        snprintf(want_len, sizeof(want_len), " %zu-byte message from rank ", len);
        snprintf(want_cap, sizeof(want_cap), " %zu-byte receive", cap);
        const char *msg = mesh_error_last();
        for (int i = 0; i < np; i++) {
            const char *how = late ? "late" : "early";
            CHECK_MSG(rop[i].status == MESH_ERR_TRUNCATED,
                      "%s: %s receive of %zu bytes from rank %d, message of %zu: status %d",
                      g_ops->name, how, cap, pl[i], len, rop[i].status);
            CHECK_MSG(rop[i].length == len || rop[i].length == 0,
                      "%s: %s receive of %zu bytes from rank %d: length %zu, message of %zu",
                      g_ops->name, how, cap, pl[i], rop[i].length, len);
            CHECK_MSG(sop[i].status == MESH_OK, "%s: send of %zu bytes to rank %d: status %d",
                      g_ops->name, len, pl[i], sop[i].status);
            for (size_t j = 0; j < TAIL; j++)
                CHECK_MSG(rbuf[i][cap + j] == 0xee,
                          "%s: %s receive of %zu bytes from rank %d (message %zu): byte %zu past "
                          "the buffer was written",
                          g_ops->name, how, cap, pl[i], len, j);
            free(rbuf[i]);
        }
        /* the last failure of this rank, from whichever peer came last: the peer and both
         * sizes, or the receive's size alone where that peer's receive learned no length */
        int unsized = 0;
        for (int i = 0; i < np; i++)
            unsized |= rop[i].length == 0;
        CHECK_MSG(strstr(msg, want_cap) &&
                      (strstr(msg, want_len) || (unsized && !strstr(msg, "-byte message"))) &&
                      strstr(msg, "rank "),
                  "%s: truncation message '%s' does not name the peer and both sizes (%zu, %zu)",
                  g_ops->name, msg, len, cap);
        free(sbuf);
        barrier();
    }
}

/* Many tags outstanding between each pair, received in reverse order, mixed sizes. */
#define NTAGS 48
static void test_tags(void)
{
    int pl[MAX_RANKS], np = peers(pl);
    static mesh_tl_op_t sop[MAX_RANKS][NTAGS], rop[MAX_RANKS][NTAGS];
    static unsigned char *sbuf[MAX_RANKS][NTAGS], *rbuf[MAX_RANKS][NTAGS];
    static mesh_tl_op_t *all[2 * MAX_RANKS * NTAGS];
    int n = 0;
    for (int i = 0; i < np; i++) {
        for (int t = NTAGS - 1; t >= 0; t--) {
            size_t size = sizes[t % NSIZES] / (t >= (int)NSIZES ? 4 : 1) + (size_t)t % 3;
            rbuf[i][t] = malloc(size + 1);
            CHECK(rbuf[i][t]);
            /* half the receives are posted now, half after the sends */
            if (t % 2 == 0) {
                CHECK(mesh_tl_irecv(g_ep[pl[i]], MESH_TL_TAG_EXACT + 0x7700000000ull + (uint64_t)t,
                                    rbuf[i][t], size, &rop[i][t]) == MESH_OK);
                all[n++] = &rop[i][t];
            }
        }
    }
    barrier();
    for (int i = 0; i < np; i++) {
        for (int t = 0; t < NTAGS; t++) {
            size_t size = sizes[t % NSIZES] / (t >= (int)NSIZES ? 4 : 1) + (size_t)t % 3;
            sbuf[i][t] = malloc(size + 1);
            CHECK(sbuf[i][t]);
            fill(sbuf[i][t], g_rank, pl[i] + 100 * t, size);
            CHECK(mesh_tl_isend(g_ep[pl[i]], MESH_TL_TAG_EXACT + 0x7700000000ull + (uint64_t)t,
                                sbuf[i][t], size, &sop[i][t]) == MESH_OK);
            all[n++] = &sop[i][t];
        }
    }
    for (int i = 0; i < np; i++) {
        for (int t = NTAGS - 1; t >= 0; t--) {
            if (t % 2 == 0)
                continue;
            size_t size = sizes[t % NSIZES] / (t >= (int)NSIZES ? 4 : 1) + (size_t)t % 3;
            CHECK(mesh_tl_irecv(g_ep[pl[i]], MESH_TL_TAG_EXACT + 0x7700000000ull + (uint64_t)t,
                                rbuf[i][t], size, &rop[i][t]) == MESH_OK);
            all[n++] = &rop[i][t];
        }
    }
    wait_all(all, n, WAIT_S);
    for (int i = 0; i < np; i++) {
        for (int t = 0; t < NTAGS; t++) {
            size_t size = sizes[t % NSIZES] / (t >= (int)NSIZES ? 4 : 1) + (size_t)t % 3;
            CHECK_MSG(rop[i][t].status == MESH_OK && rop[i][t].length == size,
                      "%s: tag %d from rank %d: status %d length %zu, want %zu", g_ops->name, t,
                      pl[i], rop[i][t].status, rop[i][t].length, size);
            CHECK(sop[i][t].status == MESH_OK && sop[i][t].length == size);
            verify(rbuf[i][t], pl[i], g_rank + 100 * t, size, "tag test");
            free(sbuf[i][t]);
            free(rbuf[i][t]);
        }
    }
    barrier();
}

/* The last rank dies; every survivor waiting on it must see MESH_ERR_PEER_FAILED. */
static void test_kill(void)
{
    int victim = g_size - 1;
    barrier();
    if (g_rank == victim)
        raise(SIGKILL);
    size_t big = 9u << 20;
    unsigned char *sbuf = calloc(1, big), *rbuf = malloc(64);
    mesh_tl_op_t sop = {0}, rop = {0};
    mesh_tl_op_t *all[2] = {&sop, &rop};
    CHECK(sbuf && rbuf);
    /* either post may find the peer known dead already (another survivor saw it first and
     * said so): that is a valid answer too */
    mesh_status_t st = mesh_tl_irecv(g_ep[victim], MESH_TL_TAG_EXACT | 0x99, rbuf, 64, &rop);
    if (st != MESH_OK) {
        CHECK(st == MESH_ERR_PEER_FAILED);
        rop.status = st;
    }
    st = mesh_tl_isend(g_ep[victim], MESH_TL_TAG_EXACT | 0x9a, sbuf, big, &sop);
    if (st != MESH_OK) {
        CHECK(st == MESH_ERR_PEER_FAILED);
        sop.status = st;
    }
    double t = wait_all(all, 2, 10.0);
    CHECK_MSG(rop.status == MESH_ERR_PEER_FAILED && sop.status == MESH_ERR_PEER_FAILED,
              "%s: rank %d: receive %d send %d after the peer died", g_ops->name, g_rank,
              rop.status, sop.status);
    CHECK_MSG(strstr(mesh_error_last(), "rank") != NULL, "error message names no rank: %s",
              mesh_error_last());
    CHECK(g_ops->ep_check(g_ep[victim]) == MESH_ERR_PEER_FAILED);
    printf("  %s n=%d: rank %d saw rank %d die after %.3f s\n", g_ops->name, g_size, g_rank, victim,
           t);
    free(sbuf);
    free(rbuf);
}

/* The last rank sends two messages to rank 0 and exits at once; rank 0, which posted one
 * receive before and does nothing until the process is gone, then asks whether the peer is
 * alive and posts the other receive: both must still deliver, since the bytes were sent before
 * the peer left (a peer that finished its part and left is no failure). */
static void test_send_and_leave(void)
{
    int last = g_size - 1;
    unsigned char a[100], b[100];
    mesh_tl_op_t ra = {0}, rb = {0}, sa = {0}, sb = {0};
    if (g_rank == 0) {
        memset(a, 0, sizeof(a));
        memset(b, 0, sizeof(b));
        CHECK(mesh_tl_irecv(g_ep[last], MESH_TL_TAG_EXACT | 0x31, a, sizeof(a), &ra) == MESH_OK);
    }
    barrier();
    if (g_rank == last) {
        fill(a, last, 0, sizeof(a));
        fill(b, last, 1, sizeof(b));
        CHECK(mesh_tl_isend(g_ep[0], MESH_TL_TAG_EXACT | 0x31, a, sizeof(a), &sa) == MESH_OK);
        CHECK(mesh_tl_isend(g_ep[0], MESH_TL_TAG_EXACT | 0x32, b, sizeof(b), &sb) == MESH_OK);
        mesh_tl_op_t *all[2] = {&sa, &sb};
        wait_all(all, 2, WAIT_S);
        CHECK(sa.status == MESH_OK && sb.status == MESH_OK);
        _exit(0);
    }
    if (g_rank != 0)
        return;
    double t0 = mesh_time();
    while (!mesh_context_pid_gone(sh->pid[last], mesh_context_pidns())) {
        CHECK_MSG(mesh_time() - t0 < WAIT_S, "rank %d did not exit", last);
        usleep(1000);
    }
    CHECK_MSG(g_ops->ep_check(g_ep[last]) == MESH_OK || ra.status == MESH_OK,
              "%s: a peer that sent and left counts as failed before its message was read",
              g_ops->name);
    CHECK(mesh_tl_irecv(g_ep[last], MESH_TL_TAG_EXACT | 0x32, b, sizeof(b), &rb) == MESH_OK);
    mesh_tl_op_t *all[2] = {&ra, &rb};
    wait_all(all, 2, WAIT_S);
    CHECK_MSG(ra.status == MESH_OK && rb.status == MESH_OK && ra.length == sizeof(a) &&
                  rb.length == sizeof(b),
              "%s: messages of a peer that left: status %d, %d, lengths %zu, %zu", g_ops->name,
              ra.status, rb.status, ra.length, rb.length);
    verify(a, last, 0, sizeof(a), "sent before leaving");
    verify(b, last, 1, sizeof(b), "sent before leaving");
}

/* A collective's tag (bit 63 clear) matches a receive posted with another signature in its low
 * MESH_TL_TAG_SIG_BITS bits, and the receive reports the sender's whole tag; with bit 63 set,
 * tags match exactly. Small and large messages, receives posted before and after. */
static void test_sig_match(void)
{
    static const size_t sizes[] = {8, (size_t)1 << 20};
    for (int late = 0; late < 2; late++) {
        for (int k = 0; k < 2; k++) {
            size_t size = sizes[k];
            int np, pl[MAX_RANKS];
            np = peers(pl);
            unsigned char *sbuf[MAX_RANKS], *rbuf[MAX_RANKS];
            static mesh_tl_op_t sop[MAX_RANKS], rop[MAX_RANKS], xop[MAX_RANKS];
            static mesh_tl_op_t *all[4 * MAX_RANKS];
            int n = 0;
            uint64_t base = (0x33ull << 48) | ((uint64_t)(late * 2 + k) << 30);
            for (int i = 0; i < np; i++) {
                sbuf[i] = malloc(size);
                rbuf[i] = malloc(size);
                CHECK(sbuf[i] && rbuf[i]);
                fill(sbuf[i], g_rank, pl[i], size);
                memset(rbuf[i], 0, size);
                /* the receive's signature is this rank's, the message's the sender's */
                if (!late)
                    CHECK(mesh_tl_irecv(g_ep[pl[i]], base | (0x100u + (unsigned)g_rank), rbuf[i],
                                        size, &rop[i]) == MESH_OK);
            }
            barrier();
            for (int i = 0; i < np; i++) {
                CHECK(mesh_tl_isend(g_ep[pl[i]], base | (0x100u + (unsigned)g_rank), sbuf[i], size,
                                    &sop[i]) == MESH_OK);
                all[n++] = &sop[i];
            }
            for (int i = 0; i < np; i++) {
                if (late)
                    CHECK(mesh_tl_irecv(g_ep[pl[i]], base | (0x100u + (unsigned)g_rank), rbuf[i],
                                        size, &rop[i]) == MESH_OK);
                all[n++] = &rop[i];
            }
            wait_all(all, n, WAIT_S);
            for (int i = 0; i < np; i++) {
                CHECK_MSG(rop[i].status == MESH_OK && rop[i].length == size,
                          "%s: signed tag from rank %d (%zu bytes, %s): status %d", g_ops->name,
                          pl[i], size, late ? "late" : "early", rop[i].status);
                /* a transport without signatures reports the receive's own tag */
                uint64_t want = base | (0x100u + (unsigned)(g_signature ? pl[i] : g_rank));
                CHECK_MSG(rop[i].peer_tag == want,
                          "%s: rank %d's message reported tag %#llx, sent %#llx", g_ops->name,
                          pl[i], (unsigned long long)rop[i].peer_tag, (unsigned long long)want);
                verify(rbuf[i], pl[i], g_rank, size, "signed tag");
            }
            /* exact tags: a receive with other low bits stays unmatched until its own message */
            static mesh_tl_op_t sop2[MAX_RANKS];
            n = 0;
            for (int i = 0; i < np; i++) {
                CHECK(mesh_tl_irecv(g_ep[pl[i]], MESH_TL_TAG_EXACT | base | 1, rbuf[i], size,
                                    &xop[i]) == MESH_OK);
                CHECK(mesh_tl_isend(g_ep[pl[i]], MESH_TL_TAG_EXACT | base | 2, sbuf[i], size,
                                    &sop[i]) == MESH_OK);
            }
            double t0 = mesh_time();
            while (mesh_time() - t0 < 0.05)
                mesh_tl_progress(g_iface);
            for (int i = 0; i < np; i++)
                CHECK_MSG(xop[i].status == MESH_INPROGRESS,
                          "%s: an exact tag matched a message with other low bits", g_ops->name);
            barrier();
            n = 0;
            for (int i = 0; i < np; i++) {
                CHECK(mesh_tl_irecv(g_ep[pl[i]], MESH_TL_TAG_EXACT | base | 2, rbuf[i], size,
                                    &rop[i]) == MESH_OK);
                CHECK(mesh_tl_isend(g_ep[pl[i]], MESH_TL_TAG_EXACT | base | 1, sbuf[i], size,
                                    &sop2[i]) == MESH_OK);
                all[n++] = &rop[i];
                all[n++] = &sop[i];
                all[n++] = &sop2[i];
                all[n++] = &xop[i];
            }
            wait_all(all, n, WAIT_S);
            for (int i = 0; i < np; i++)
                CHECK_MSG(rop[i].status == MESH_OK && xop[i].status == MESH_OK &&
                              rop[i].peer_tag == (MESH_TL_TAG_EXACT | base | 2),
                          "%s: exact tags from rank %d: status %d, %d", g_ops->name, pl[i],
                          rop[i].status, xop[i].status);
            barrier();
            for (int i = 0; i < np; i++) {
                free(sbuf[i]);
                free(rbuf[i]);
            }
        }
    }
}

/* Rank 0 never creates its endpoint to the last rank: the last rank's wireup must time out at
 * its deadline and name rank 0 (a transport whose endpoints need nothing from the peer may
 * also succeed). */
static void test_silent_peer(void)
{
    int last = g_size - 1;
    if (g_rank == last) {
        mesh_tl_peer_t peer = {.rank = 0,
                               .node = NODE,
                               .pid = sh->pid[0],
                               .pidns = mesh_context_pidns(),
                               .addr = sh->addr[0],
                               .addr_len = sh->addr_len[0]};
        CHECK(g_ops->reachable(g_iface, &peer));
        CHECK(g_ops->ep_create(g_iface, &peer, &g_ep[0]) == MESH_OK);
        double t0 = mesh_time();
        mesh_status_t st = g_ops->wireup(g_iface, t0 + 1.0);
        double t = mesh_time() - t0;
        CHECK_MSG(st == MESH_ERR_TIMEOUT, "%s: wireup with a silent peer returned %d", g_ops->name,
                  st);
        CHECK_MSG(t >= 0.9 && t < 5.0, "%s: wireup gave up after %.2f s, deadline 1 s", g_ops->name,
                  t);
        CHECK_MSG(strstr(mesh_error_last(), "rank") && strstr(mesh_error_last(), "0"),
                  "%s: timeout message names no rank: %s", g_ops->name, mesh_error_last());
        g_ops->ep_destroy(g_ep[0]);
        g_ep[0] = NULL;
    }
    barrier();
}

static void drop_ptrace(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK(syscall(SYS_capget, &h, d) == 0);
    d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
    CHECK(syscall(SYS_capset, &h, d) == 0);
    CHECK(prctl(PR_SET_DUMPABLE, 0) == 0);
}

static int child(int rank, int size, uint64_t uid, int kill_case, int no_ptrace)
{
    alarm(120);
    g_rank = rank;
    g_size = size;
    if (no_ptrace)
        drop_ptrace();
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    mesh_tl_open_params_t op = {
        .rank = rank, .size = size, .comm_uid = uid, .node = NODE, .timeout_s = 20};
    CHECK(g_ops->open(&op, &g_iface) == MESH_OK);
    CHECK(g_ops->address(g_iface, sh->addr[rank], &sh->addr_len[rank]) == MESH_OK);
    CHECK(sh->addr_len[rank] <= MESH_TL_ADDR_MAX);
    sh->pid[rank] = getpid();
    barrier();
    if (kill_case == 2) {
        test_silent_peer();
        g_ops->close(g_iface);
        return 0;
    }
    if (kill_case == 3) { /* the last rank dies before any endpoint exists */
        if (rank == size - 1)
            raise(SIGKILL);
        g_ops->close(g_iface);
        return 0;
    }
    for (int p = 0; p < size; p++) {
        mesh_tl_peer_t peer = {.rank = p,
                               .node = NODE,
                               .pid = sh->pid[p],
                               .pidns = mesh_context_pidns(),
                               .addr = sh->addr[p],
                               .addr_len = sh->addr_len[p]};
        if (!g_ops->reachable(g_iface, &peer)) {
            CHECK_MSG(p == rank, "%s cannot reach rank %d", g_ops->name, p);
            continue;
        }
        CHECK(g_ops->ep_create(g_iface, &peer, &g_ep[p]) == MESH_OK);
    }
    CHECK(g_ops->wireup(g_iface, mesh_time() + 20) == MESH_OK);
    barrier();
    if (kill_case == 4) {
        test_send_and_leave();
    } else if (kill_case) {
        test_kill();
    } else {
        test_sizes(0, 0);
        test_sizes(1, 0);
        test_sizes(2, 0);
        /* sends whose buffer is written right after: eager up to a larger size on shm */
        test_sizes(0, MESH_TL_OP_SRC_REUSED);
        test_sizes(1, MESH_TL_OP_SRC_REUSED);
        test_truncate(0);
        test_truncate(1);
        test_truncate_midway();
        test_tags();
        test_sig_match();
    }
    for (int p = 0; p < size; p++)
        if (g_ep[p])
            g_ops->ep_destroy(g_ep[p]);
    g_ops->close(g_iface);
    return 0;
}

/* Runs one case in size processes; returns 0 on success. */
static int run_case(const mesh_tl_ops_t *ops, int size, int kill_case, int no_ptrace)
{
    static unsigned counter;
    uint64_t uid = ((uint64_t)getpid() << 32) ^ ((uint64_t)time(NULL) << 8) ^ ++counter;
    memset(sh, 0, sizeof(*sh));
    g_ops = ops;
    pid_t pids[MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(child(r, size, uid, kill_case, no_ptrace));
    }
    int bad = 0;
    for (int n = 0; n < size; n++) {
        int st;
        /* the killed rank is reaped last: survivors must see through a zombie */
        pid_t p = waitpid(kill_case == 1 && n < size - 1 ? pids[n] : -1, &st, 0);
        CHECK(p > 0);
        int r = 0;
        while (r < size && pids[r] != p)
            r++;
        int expect_kill = (kill_case == 1 || kill_case == 3) && r == size - 1;
        int ok = expect_kill ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                             : WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok) {
            fprintf(stderr, "%s n=%d%s: rank %d ended with status 0x%x\n", ops->name, size,
                    kill_case == 1 ? " (kill)"
                    : kill_case    ? " (silent)"
                                   : "",
                    r, st);
            atomic_store(&sh->failed, 1);
            bad = 1;
        }
    }
    if (kill_case == 3) {
        /* what the dead rank left behind goes with the next interface opened here */
        mesh_tl_open_params_t p = {
            .rank = 0, .size = 1, .comm_uid = uid ^ 1, .node = NODE, .timeout_s = 5};
        mesh_tl_iface_t *next;
        CHECK(ops->open(&p, &next) == MESH_OK);
        ops->close(next);
    }
    /* nothing may remain in /dev/shm for this communicator */
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "mesh-%016llx-", (unsigned long long)uid);
    DIR *d = opendir("/dev/shm");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
                fprintf(stderr, "%s: leaked /dev/shm/%s\n", ops->name, e->d_name);
                bad = 1;
            }
        }
        closedir(d);
    }
    return bad;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    int no_ptrace = getenv("TEST_TL_NO_PTRACE") != NULL;
    /* ucx over its tcp transport unless the caller chose (the same on any machine) */
    setenv("UCX_TLS", "tcp", 0);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    CHECK(mesh_context_init() == MESH_OK);
    CHECK(mesh_tl_global_init() == MESH_OK);
    int failures = 0, ran = 0;
    for (int t = 0; t < mesh_tl_count(); t++) {
        const mesh_tl_ops_t *ops = mesh_tl_get(t);
        CHECK(ops && ops->name && mesh_tl_find(ops->name) == ops);
        if (only && strcmp(only, ops->name) != 0)
            continue;
        /* ofi runs on whatever provider fi_getinfo picks; test_tl_ofi.sh names one */
        if (!only && strcmp(ops->name, "ofi") == 0)
            continue;
        if (!ops->usable()) {
            printf("%s: not usable here, skipped\n", ops->name);
            continue;
        }
        /* the scope decides the process counts; a probe interface tells it */
        mesh_tl_open_params_t p = {.rank = 0,
                                   .size = 1,
                                   .comm_uid = 0x7e57u ^ (uint64_t)getpid(),
                                   .node = NODE,
                                   .timeout_s = 5};
        mesh_tl_iface_t *probe;
        mesh_tl_caps_t caps;
        CHECK(ops->open(&p, &probe) == MESH_OK);
        ops->query(probe, &caps);
        ops->close(probe);
        CHECK(caps.flags & MESH_TL_CAP_TAGGED);
        g_signature = (caps.flags & MESH_TL_CAP_SIGNATURE) != 0;
        int lo = caps.scope == MESH_TL_SCOPE_SELF ? 1 : 2;
        int hi = caps.scope == MESH_TL_SCOPE_SELF ? 1 : MAX_RANKS;
        for (int n = lo; n <= hi; n++) {
            double t0 = mesh_time();
            int bad = run_case(ops, n, 0, no_ptrace);
            printf("%-5s n=%d: %s (%.1f s)\n", ops->name, n, bad ? "FAILED" : "ok",
                   mesh_time() - t0);
            failures += bad;
            ran++;
            if (n >= 2 && n != 3) {
                bad = run_case(ops, n, 1, no_ptrace);
                printf("%-5s n=%d peer killed: %s\n", ops->name, n, bad ? "FAILED" : "ok");
                failures += bad;
                ran++;
            }
            if (n == 2) {
                bad = run_case(ops, n, 2, no_ptrace);
                printf("%-5s n=%d silent peer: %s\n", ops->name, n, bad ? "FAILED" : "ok");
                failures += bad;
                ran++;
                bad = run_case(ops, n, 3, no_ptrace);
                printf("%-5s n=%d killed before wireup: %s\n", ops->name, n, bad ? "FAILED" : "ok");
                failures += bad;
                ran++;
                /* where a completed send means the bytes are in the peer's ring or kernel */
                if (strcmp(ops->name, "shm") == 0 || strcmp(ops->name, "tcp") == 0) {
                    bad = run_case(ops, n, 4, no_ptrace);
                    printf("%-5s n=%d sent and left: %s\n", ops->name, n, bad ? "FAILED" : "ok");
                    failures += bad;
                    ran++;
                }
            }
        }
        fflush(stdout);
    }
    CHECK_MSG(ran > 0, "no transport ran");
    return failures ? 1 : 0;
}
