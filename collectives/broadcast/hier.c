/*
 * Hierarchical broadcast: a binomial tree among one leader per node (the root on its node, local
 * rank 0 elsewhere) rooted at the root's node, then a binomial tree within each node from its
 * leader. The vector moves in segments, each forwarded as soon as it arrived, so the node trees
 * work on one segment while the network carries the next. Every other node receives the vector
 * exactly once across the network. Any node sizes, equal or not.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/hier.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static int score(const mesh_comm_t *comm, size_t bytes)
{
    if (comm->nnodes <= 1 || !comm->node_size)
        return -1;
    if (mesh_hier_max_node_size(comm->nnodes, comm->node_size) == 1)
        return 1; /* one rank per node: a plain tree over the nodes */
    return bytes > 64 * 1024 ? 110 : 105;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int me = comm->rank, root = a->root, root_node = comm->node_of[root];
    size_t bytes = a->count * a->dsize;
    mesh_coll_hier_t h;

    if (bytes == 0)
        return mesh_sched_build_status(s);
    mesh_coll_hier_node(comm, &h);
    int nn = h.nnodes, L = h.L, lr = h.lr;
    const int *nr = h.local.ranks;
    int leader = mesh_hier_leader(comm->node_first, comm->node_ranks, h.node, root_node, root);
    int lroot = comm->local_rank[leader];
    int vnode = mesh_hier_node_vrank(h.node, root_node, nn);

    /* peers: the parent (-1 on the tree's root), then the children across nodes (leaders
     * only), then the children within the node, farthest first in each tree */
    int np = 0, parent = -1, peers[64];
    if (me == leader) {
        if (vnode != 0) {
            int pv = mesh_binomial_parent(vnode, 0, nn);
            int pk = mesh_hier_node_of_vrank(pv, root_node, nn);
            parent = mesh_hier_leader(comm->node_first, comm->node_ranks, pk, root_node, root);
        }
        for (int i = mesh_binomial_nchildren(vnode, 0, nn) - 1; i >= 0; i--) {
            int ck = mesh_hier_node_of_vrank(mesh_binomial_child(vnode, 0, nn, i), root_node, nn);
            peers[np++] = mesh_hier_leader(comm->node_first, comm->node_ranks, ck, root_node, root);
        }
    } else {
        parent = nr[mesh_binomial_parent(lr, lroot, L)];
    }
    for (int i = mesh_binomial_nchildren(lr, lroot, L) - 1; i >= 0; i--)
        peers[np++] = nr[mesh_binomial_child(lr, lroot, L, i)];

    const char *src = me == root ? (const char *)a->sbuf : (const char *)a->rbuf;
    if (me == root && !a->in_place)
        mesh_sched_copy(s, a->rbuf, a->sbuf, bytes, NULL, 0);
    size_t seg = MESH_COLL_RING_SEG_BYTES / a->dsize * a->dsize;
    seg = seg ? seg : a->dsize;
    for (size_t off = 0; off < bytes; off += seg) {
        size_t len = bytes - off < seg ? bytes - off : seg;
        int got = -1;
        if (parent >= 0)
            got = mesh_sched_recv(s, parent, (char *)a->rbuf + off, len, NULL, 0);
        for (int i = 0; i < np; i++)
            mesh_sched_send(s, peers[i], src + off, len, &got, 1);
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_broadcast_hier = {
    .name = "hier",
    .desc = "binomial tree over node leaders from the root's node, then within each node, "
            "segmented; multi-node",
    .type = MESH_COLL_BROADCAST,
    .score = score,
    .build = build};
