/*
 * Binomial-tree scatter, the gather tree run backwards: relative to the root, rank v receives
 * its subtree (relative ranks v .. v + lowbit(v) - 1, clipped) from v - lowbit(v), keeps its
 * own block and passes each child v + mask its part, largest first. The root sends straight
 * from its buffer where a subtree does not wrap around the end of it. The tree is
 * patterns/binomial.h's; the score is the gather's, the same bytes crossing the same links.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, root = a->root;
    int v = mesh_binomial_vrank(r, root, n), sub = mesh_binomial_subtree(r, root, n);
    int nch = mesh_binomial_nchildren(r, root, n);
    size_t blk = a->count * a->dsize;
    const char *sb = a->sbuf;
    char *rb = a->rbuf;
    /* every rank knows the count: with nothing to move there is nothing to wait for */
    if (blk == 0)
        return mesh_sched_build_status(s);

    if (v == 0) {
        if (!a->in_place)
            mesh_sched_copy(s, rb, sb + (size_t)r * blk, blk, NULL, 0);
        for (int i = nch - 1; i >= 0; i--) {
            int first = mesh_binomial_child(r, root, n, i);
            int cnt = mesh_binomial_subtree(first, root, n);
            size_t bytes = (size_t)cnt * blk;
            if (first + cnt <= n) {
                mesh_sched_send(s, first, sb + (size_t)first * blk, bytes, NULL, 0);
                continue;
            }
            /* the subtree wraps past the last rank: pack both pieces */
            char *tmp = mesh_sched_scratch(s, bytes);
            if (tmp == NULL)
                return mesh_sched_build_status(s);
            size_t head = (size_t)(n - first) * blk;
            int c = mesh_sched_copy(s, tmp, sb + (size_t)first * blk, head, NULL, 0);
            c = mesh_sched_copy(s, tmp + head, sb, bytes - head, &c, 1);
            mesh_sched_send(s, first, tmp, bytes, &c, 1);
        }
        return mesh_sched_build_status(s);
    }

    int parent = mesh_binomial_parent(r, root, n);
    if (sub == 1) {
        mesh_sched_recv(s, parent, rb, blk, NULL, 0);
        return mesh_sched_build_status(s);
    }
    char *tmp = mesh_sched_scratch(s, (size_t)sub * blk);
    if (tmp == NULL)
        return mesh_sched_build_status(s);
    int rv = mesh_sched_recv(s, parent, tmp, (size_t)sub * blk, NULL, 0);
    mesh_sched_copy(s, rb, tmp, blk, &rv, 1);
    for (int i = nch - 1; i >= 0; i--) {
        int ch = mesh_binomial_child(r, root, n, i);
        size_t at = (size_t)(mesh_binomial_vrank(ch, root, n) - v) * blk;
        mesh_sched_send(s, ch, tmp + at, (size_t)mesh_binomial_subtree(ch, root, n) * blk, &rv, 1);
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_scatter_binomial = {
    .name = "binomial",
    .desc = "binomial tree, log2 rounds; small messages",
    .type = MESH_COLL_SCATTER,
    .score = mesh_coll_binomial_blocks_score,
    .build = build};
