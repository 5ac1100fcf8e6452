/*
 * Recursive-doubling all-gather: in step k a rank exchanges everything it holds with the rank
 * whose (virtual) index differs in bit k, so log2(size) steps suffice for power-of-two sizes.
 * Other sizes fold: the first 2*rem ranks pair up, the even one hands its block to the odd one,
 * stays out of the doubling and gets the full result back at the end. The virtual ranks keep
 * the original order, so what a virtual group holds is a contiguous range of original blocks;
 * ranges that are contiguous in the receive buffer travel as one message.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "libmesh/log.h"
#include <stdlib.h>

typedef struct {
    mesh_sched_t *s;
    const mesh_coll_args_t *a;
    int *ids; /* task ids of the receives posted by the last xfer */
    int nids;
} rd_ctx_t;

static int score(const mesh_comm_t *comm, size_t t)
{
    int n = comm->size;
    if ((n & (n - 1)) == 0)
        return t <= ((size_t)256 << 10) ? 30 : 5;
    return t <= ((size_t)64 << 10) ? 15 : 4;
}

static int contiguous(const mesh_coll_args_t *a, int lo, int hi)
{
    for (int i = lo; i + 1 < hi; i++)
        if (a->displs[i + 1] != a->displs[i] + a->counts[i])
            return 0;
    return 1;
}

/* Sends (or receives) the blocks of original ranks [lo, hi) of the receive buffer. */
static void xfer(rd_ctx_t *c, int send, int peer, int lo, int hi, const int *deps, int ndeps)
{
    const mesh_coll_args_t *a = c->a;
    char *rb = a->rbuf;
    size_t ds = a->dsize;
    c->nids = 0;
    if (lo >= hi)
        return;
    if (contiguous(a, lo, hi)) {
        size_t bytes = (a->displs[hi - 1] + a->counts[hi - 1] - a->displs[lo]) * ds;
        if (send)
            mesh_sched_send(c->s, peer, rb + a->displs[lo] * ds, bytes, deps, ndeps);
        else
            c->ids[c->nids++] =
                mesh_sched_recv(c->s, peer, rb + a->displs[lo] * ds, bytes, NULL, 0);
        return;
    }
    for (int i = lo; i < hi; i++) {
        if (a->counts[i] == 0)
            continue;
        if (send)
            mesh_sched_send(c->s, peer, rb + a->displs[i] * ds, a->counts[i] * ds, deps, ndeps);
        else
            c->ids[c->nids++] =
                mesh_sched_recv(c->s, peer, rb + a->displs[i] * ds, a->counts[i] * ds, NULL, 0);
    }
}

/* First original rank represented by virtual rank v. */
static int orig_lo(int v, int rem)
{
    return v < rem ? 2 * v : v + rem;
}
/* The original rank that takes part in the doubling for virtual rank v. */
static int orig_of(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank;
    int p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    int rem = n - p2;
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += a->counts[i];
    if (total == 0)
        return mesh_sched_status(s);
    rd_ctx_t c = {.s = s, .a = a, .ids = malloc(sizeof(int) * (size_t)(n + 1))};
    if (c.ids == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "allgather rd: no memory for %d ids", n);

    int have = -1; /* joins everything this rank holds so far */
    if (!a->in_place)
        have = mesh_sched_copy(s, rb + a->displs[r] * ds, a->sbuf, a->counts[r] * ds, NULL, 0);

    if (r < 2 * rem && r % 2 == 0) {
        /* folded out: hand the block over, get the rest back */
        mesh_sched_send(s, r + 1, rb + a->displs[r] * ds, a->counts[r] * ds, &have, 1);
        xfer(&c, 0, r + 1, 0, r, NULL, 0);
        xfer(&c, 0, r + 1, r + 1, n, NULL, 0);
        free(c.ids);
        return mesh_sched_status(s);
    }
    if (r < 2 * rem) {
        xfer(&c, 0, r - 1, r - 1, r, NULL, 0);
        c.ids[c.nids++] = have;
        have = mesh_sched_nop(s, c.ids, c.nids);
    }
    int v = r < 2 * rem ? r / 2 : r - rem;
    for (int mask = 1; mask < p2; mask <<= 1) {
        int pv = v ^ mask, peer = orig_of(pv, rem);
        int mine = v & ~(mask - 1), theirs = pv & ~(mask - 1);
        if (mask == 1 && v >= rem && !a->in_place) {
            /* the own block alone travels from where the caller has it, alongside the copy
             * (even when empty: the partner expects one message for a single block) */
            mesh_sched_send(s, peer, a->sbuf, a->counts[r] * ds, NULL, 0);
        } else {
            xfer(&c, 1, peer, orig_lo(mine, rem), orig_lo(mine + mask, rem), &have, 1);
        }
        xfer(&c, 0, peer, orig_lo(theirs, rem), orig_lo(theirs + mask, rem), NULL, 0);
        c.ids[c.nids++] = have;
        have = mesh_sched_nop(s, c.ids, c.nids);
    }
    if (r < 2 * rem) {
        xfer(&c, 1, r - 1, 0, r - 1, &have, 1);
        xfer(&c, 1, r - 1, r, n, &have, 1);
    }
    free(c.ids);
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_rd = {
    .name = "rd",
    .desc = "recursive doubling, log2 steps; folds non-power-of-two sizes",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
