/*
 * Binomial-tree gather: relative to the root, rank v receives the subtrees of v + 1, v + 2,
 * v + 4, ... (while those bits of v are clear) and then sends its whole subtree, a contiguous
 * run of blocks in relative order, to v minus its lowest set bit. log2(size) rounds; meant for
 * small blocks, since inner ranks forward data. The root receives straight into its buffer
 * where a subtree does not wrap around the end of it. The tree is patterns/binomial.h's.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

int mesh_coll_binomial_blocks_score(const mesh_comm_t *comm, size_t bytes)
{
    return bytes <= ((size_t)64 << 10) ? 20 : 5;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, root = a->root;
    int v = mesh_binomial_vrank(r, root, n), sub = mesh_binomial_subtree(r, root, n);
    int nch = mesh_binomial_nchildren(r, root, n);
    size_t blk = a->count * a->dsize;
    char *rb = a->rbuf;
    const char *own = (r == root && a->in_place) ? rb + (size_t)root * blk : a->sbuf;
    /* every rank knows the count: with nothing to move there is nothing to wait for */
    if (blk == 0)
        return mesh_sched_build_status(s);

    if (v == 0) {
        if (!a->in_place)
            mesh_sched_copy(s, rb + (size_t)r * blk, own, blk, NULL, 0);
        for (int i = 0; i < nch; i++) {
            int first = mesh_binomial_child(r, root, n, i);
            int cnt = mesh_binomial_subtree(first, root, n);
            size_t bytes = (size_t)cnt * blk;
            if (first + cnt <= n) {
                mesh_sched_recv(s, first, rb + (size_t)first * blk, bytes, NULL, 0);
                continue;
            }
            /* the subtree wraps past the last rank: receive, then split */
            char *tmp = mesh_sched_scratch(s, bytes);
            if (tmp == NULL)
                return mesh_sched_build_status(s);
            int rv = mesh_sched_recv(s, first, tmp, bytes, NULL, 0);
            size_t head = (size_t)(n - first) * blk;
            mesh_sched_copy(s, rb + (size_t)first * blk, tmp, head, &rv, 1);
            mesh_sched_copy(s, rb, tmp + head, bytes - head, &rv, 1);
        }
        return mesh_sched_build_status(s);
    }

    int parent = mesh_binomial_parent(r, root, n);
    if (sub == 1) {
        mesh_sched_send(s, parent, own, blk, NULL, 0);
        return mesh_sched_build_status(s);
    }
    char *tmp = mesh_sched_scratch(s, (size_t)sub * blk);
    if (tmp == NULL)
        return mesh_sched_build_status(s);
    int have = mesh_sched_copy(s, tmp, own, blk, NULL, 0);
    for (int i = 0; i < nch; i++) {
        int ch = mesh_binomial_child(r, root, n, i);
        size_t at = (size_t)(mesh_binomial_vrank(ch, root, n) - v) * blk;
        int rv = mesh_sched_recv(s, ch, tmp + at, (size_t)mesh_binomial_subtree(ch, root, n) * blk,
                                 NULL, 0);
        have = mesh_sched_nop(s, (int[]){have, rv}, 2);
    }
    mesh_sched_send(s, parent, tmp, (size_t)sub * blk, &have, 1);
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_gather_binomial = {
    .name = "binomial",
    .desc = "binomial tree, log2 rounds; small messages",
    .type = MESH_COLL_GATHER,
    .score = mesh_coll_binomial_blocks_score,
    .build = build};
