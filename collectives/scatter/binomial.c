/*
 * Binomial-tree scatter, the gather tree run backwards: relative to the root, rank v receives
 * its subtree (relative ranks v .. v + lowbit(v) - 1, clipped) from v - lowbit(v), keeps its
 * own block and passes each child v + mask its part, largest first. The root sends straight
 * from its buffer where a subtree does not wrap around the end of it.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    return bytes <= ((size_t)64 << 10) ? 20 : 5;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int n = comm->size, r = comm->rank, root = a->root;
    int v = (r - root + n) % n;
    size_t blk = a->count * a->dsize;
    const char *sb = a->sbuf;
    char *rb = a->rbuf;
    /* every rank knows the count: with nothing to move there is nothing to wait for */
    if (blk == 0)
        return mesh_sched_status(s);

    int lowbit = 1;
    while (lowbit < n && !(v & lowbit))
        lowbit <<= 1;
    int sub = v == 0 ? n : (lowbit < n - v ? lowbit : n - v);

    if (v == 0) {
        if (!a->in_place)
            mesh_sched_copy(s, rb, sb + (size_t)r * blk, blk, NULL, 0);
        for (int mask = lowbit >> 1; mask >= 1; mask >>= 1) {
            if (mask >= n)
                continue;
            int cnt = mask < n - mask ? mask : n - mask;
            int first = (root + mask) % n;
            size_t bytes = (size_t)cnt * blk;
            if (first + cnt <= n) {
                mesh_sched_send(s, first, sb + (size_t)first * blk, bytes, NULL, 0);
                continue;
            }
            /* the subtree wraps past the last rank: pack both pieces */
            char *tmp = mesh_sched_scratch(s, bytes);
            if (tmp == NULL)
                return mesh_sched_status(s);
            size_t head = (size_t)(n - first) * blk;
            int c = mesh_sched_copy(s, tmp, sb + (size_t)first * blk, head, NULL, 0);
            c = mesh_sched_copy(s, tmp + head, sb, bytes - head, &c, 1);
            mesh_sched_send(s, first, tmp, bytes, &c, 1);
        }
        return mesh_sched_status(s);
    }

    int parent = (v - lowbit + root) % n;
    if (sub == 1) {
        mesh_sched_recv(s, parent, rb, blk, NULL, 0);
        return mesh_sched_status(s);
    }
    char *tmp = mesh_sched_scratch(s, (size_t)sub * blk);
    if (tmp == NULL)
        return mesh_sched_status(s);
    int rv = mesh_sched_recv(s, parent, tmp, (size_t)sub * blk, NULL, 0);
    mesh_sched_copy(s, rb, tmp, blk, &rv, 1);
    for (int mask = lowbit >> 1; mask >= 1; mask >>= 1) {
        if (v + mask >= n)
            continue;
        int cnt = mask < n - v - mask ? mask : n - v - mask;
        mesh_sched_send(s, (v + mask + root) % n, tmp + (size_t)mask * blk, (size_t)cnt * blk, &rv,
                        1);
    }
    return mesh_sched_status(s);
}

const mesh_coll_algo_t mesh_coll_scatter_binomial = {
    .name = "binomial",
    .desc = "binomial tree, log2 rounds; small messages",
    .type = MESH_COLL_SCATTER,
    .score = score,
    .build = build};
