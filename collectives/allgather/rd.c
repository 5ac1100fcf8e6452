/*
 * Recursive-doubling all-gather: in step k a rank exchanges everything it holds with the rank
 * whose (virtual) index differs in bit k, so log2(size) steps suffice for power-of-two sizes.
 * Other sizes fold: the first 2*rem ranks pair up, the even one hands its block to the odd one,
 * stays out of the doubling and gets the full result back at the end. The virtual ranks keep
 * the original order, so what a virtual group holds is a contiguous range of original blocks;
 * ranges that are contiguous in the receive buffer travel as one message. The phase builder
 * here is the doubling that walks a recursive-halving reduce-scatter back (Rabenseifner).
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/rd.h"
#include "collectives/phases.h"
#include "libmesh/log.h"
#include <stdlib.h>

mesh_status_t mesh_coll_rd_allgather_phase(mesh_sched_t *s, const mesh_coll_group_t *g, void *buf,
                                           const size_t *bnd, size_t count, size_t dsize,
                                           const mesh_coll_rh_result_t *rh, int *done)
{
    int n = g->n, p = mesh_rd_pof2(n), lg = mesh_rd_log2(p);
    int fold = mesh_rd_fold_partner(g->me, n);
    int fold_rank = fold >= 0 ? mesh_coll_group_rank(g, fold) : -1;
    char *b = buf;
    size_t ds = dsize;

    if (rh->core < 0) {
        /* extra rank: the vector comes back from the partner, after our input left */
        *done = mesh_sched_recv(s, fold_rank, buf, count * ds, &rh->done, 1);
        return mesh_sched_build_status(s);
    }
    int cr = rh->core, ready = rh->last;
    for (int lv = lg - 1; lv >= 0; lv--) {
        int qr = mesh_rh_partner(cr, p, lv);
        int peer = mesh_coll_group_rank(g, mesh_rd_core_to_rank((qr + rh->shift) % p, n));
        int kf = mesh_rh_window_first(cr, p, lv + 1), qf = mesh_rh_window_first(qr, p, lv + 1);
        int nb = mesh_rh_window_blocks(p, lv + 1);
        size_t kn = bnd[kf + nb] - bnd[kf], qn = bnd[qf + nb] - bnd[qf];
        int sd = kn ? mesh_sched_send(s, peer, b + bnd[kf] * ds, kn * ds, &ready, 1) : -1;
        /* the partner's window was sent from (or reduced into) this memory while halving */
        int rv = qn ? mesh_sched_recv(s, peer, b + bnd[qf] * ds, qn * ds,
                                      (int[]){rh->sent[lv], rh->last}, 2)
                    : -1;
        ready = mesh_sched_nop(s, (int[]){ready, sd, rv}, 3);
    }
    if (fold >= 0)
        ready = mesh_sched_send(s, fold_rank, buf, count * ds, &ready, 1);
    *done = ready;
    return mesh_sched_build_status(s);
}

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

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, p2 = mesh_rd_pof2(n);
    size_t ds = a->dsize;
    char *rb = a->rbuf;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += a->counts[i];
    if (total == 0)
        return mesh_sched_build_status(s);
    rd_ctx_t c = {.s = s, .a = a, .ids = malloc(sizeof(int) * (size_t)(n + 1))};
    if (c.ids == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "allgather rd: no memory for %d ids", n);

    int have = -1; /* joins everything this rank holds so far */
    if (!a->in_place)
        have = mesh_sched_copy(s, rb + a->displs[r] * ds, a->sbuf, a->counts[r] * ds, NULL, 0);

    int fold = mesh_rd_fold_partner(r, n);
    if (mesh_rd_is_extra(r, n)) {
        /* folded out: hand the block over to r + 1, get the rest back */
        mesh_sched_send(s, fold, rb + a->displs[r] * ds, a->counts[r] * ds, &have, 1);
        xfer(&c, 0, fold, 0, r, NULL, 0);
        xfer(&c, 0, fold, r + 1, n, NULL, 0);
        free(c.ids);
        return mesh_sched_build_status(s);
    }
    if (fold >= 0) {
        /* the core rank of the pair, r - 1 its extra rank */
        xfer(&c, 0, fold, fold, r, NULL, 0);
        c.ids[c.nids++] = have;
        have = mesh_sched_nop(s, c.ids, c.nids);
    }
    int v = mesh_rd_core_rank(r, n);
    for (int mask = 1; mask < p2; mask <<= 1) {
        int pv = v ^ mask, peer = mesh_rd_core_to_rank(pv, n);
        int mine = v & ~(mask - 1), theirs = pv & ~(mask - 1);
        if (mask == 1 && fold < 0 && !a->in_place) {
            /* the own block alone travels from where the caller has it, alongside the copy
             * (even when empty: the partner expects one message for a single block) */
            mesh_sched_send(s, peer, a->sbuf, a->counts[r] * ds, NULL, 0);
        } else {
            xfer(&c, 1, peer, mesh_rd_core_first_rank(mine, n),
                 mesh_rd_core_first_rank(mine + mask, n), &have, 1);
        }
        xfer(&c, 0, peer, mesh_rd_core_first_rank(theirs, n),
             mesh_rd_core_first_rank(theirs + mask, n), NULL, 0);
        c.ids[c.nids++] = have;
        have = mesh_sched_nop(s, c.ids, c.nids);
    }
    if (fold >= 0) {
        xfer(&c, 1, fold, 0, fold, &have, 1);
        xfer(&c, 1, fold, r, n, &have, 1);
    }
    free(c.ids);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_allgather_rd = {
    .name = "rd",
    .desc = "recursive doubling, log2 steps; folds non-power-of-two sizes",
    .type = MESH_COLL_ALLGATHER,
    .score = score,
    .build = build};
