/*
 * Hierarchical patterns: the node map seen as N nodes of L ranks. Member (k, l) is the rank with
 * local rank l on node k; the "rail" of local rank l is (0, l), (1, l), ..., (N-1, l), the ranks
 * that talk across nodes in the rail phases. Rails line up only when every node has the same
 * number of ranks. Pure functions of the node map, plus the inter-node traffic of the orders an
 * algorithm can choose between (elements summed over every rank, blocks of n elements).
 */
#ifndef MESH_PATTERN_HIER_H
#define MESH_PATTERN_HIER_H

#include <stddef.h>

/* Ranks per node when every node has the same number, else -1 (rails do not line up). */
static inline int mesh_hier_rails(int nnodes, const int *node_size)
{
    if (nnodes < 1 || !node_size)
        return -1;
    for (int k = 1; k < nnodes; k++)
        if (node_size[k] != node_size[0])
            return -1;
    return node_size[0];
}

/* Score of a rail-based algorithm: declines (-1) on one node or unequal nodes, 1 with one rank
 * per node (the rail is the whole communicator, nothing to gain), otherwise 110 above 64 KiB and
 * small_score below, where log-step flat algorithms compete. */
static inline int mesh_hier_rail_score(int nnodes, const int *node_size, size_t bytes,
                                       int small_score)
{
    int L = mesh_hier_rails(nnodes, node_size);
    if (nnodes <= 1 || L < 1)
        return -1;
    if (L == 1)
        return 1;
    return bytes > 64 * 1024 ? 110 : small_score;
}

/* Largest node. */
static inline int mesh_hier_max_node_size(int nnodes, const int *node_size)
{
    int m = 0;
    for (int k = 0; k < nnodes; k++)
        m = node_size[k] > m ? node_size[k] : m;
    return m;
}

/* Rank (k, l). */
static inline int mesh_hier_rank(const int *node_first, const int *node_ranks, int k, int l)
{
    return node_ranks[node_first[k] + l];
}

/* Broadcast leader of node k: the root on its own node, local rank 0 elsewhere. */
static inline int mesh_hier_leader(const int *node_first, const int *node_ranks, int k,
                                   int root_node, int root)
{
    return k == root_node ? root : node_ranks[node_first[k]];
}

/* Position of node k among the leaders, renumbered so that the root's node is 0 (the root of the
 * inter-node tree), and back. */
static inline int mesh_hier_node_vrank(int k, int root_node, int nnodes)
{
    return ((k - root_node) % nnodes + nnodes) % nnodes;
}
static inline int mesh_hier_node_of_vrank(int v, int root_node, int nnodes)
{
    return (v + root_node) % nnodes;
}

/*
 * Aggregated all-to-all: the block from (k, l) to (j, m) travels
 *   k == j: straight from (k, l) to (j, m) within the node;
 *   k != j: in the one rail message (k, l) -> (j, l), which carries every block of (k, l) for
 *           node j (L blocks), then from the relay (j, l) to (j, m) within node j (no second hop
 *           when m == l).
 * So each pair of rail peers exchanges one message per direction and no block crosses the
 * network twice. mesh_hier_a2a_relay gives the rank holding the block after the network hop.
 */
static inline int mesh_hier_a2a_relay(const int *node_first, const int *node_ranks, int k, int l,
                                      int j, int m)
{
    return k == j ? node_ranks[node_first[j] + m] : node_ranks[node_first[j] + l];
}

/*
 * Inter-node elements of a reduce-scatter of blocks of n elements on N nodes x L ranks with
 * rings: node first (a node reduce-scatter leaves each rank with its rail's N blocks, then a rail
 * reduce-scatter of those) sends (N-1) n per rank; rail first (a rail reduce-scatter of the L n
 * elements each node needs, then the node reduce-scatter) sends (N-1) L n per rank.
 */
static inline size_t mesh_hier_rs_net_node_first(int nnodes, int L, size_t n)
{
    return (size_t)nnodes * (size_t)L * (size_t)(nnodes - 1) * n;
}
static inline size_t mesh_hier_rs_net_rail_first(int nnodes, int L, size_t n)
{
    return (size_t)nnodes * (size_t)L * (size_t)(nnodes - 1) * (size_t)L * n;
}

/*
 * Inter-node elements of an all-gather of blocks of n elements: rail first (each rank gathers its
 * rail's N blocks, then the node all-gathers) sends (N-1) n per rank, the least possible: every
 * block enters every other node exactly once. Node first (node all-gather, then each rank
 * exchanges the whole node's L blocks on its rail) sends (N-1) L n per rank, L times more. One
 * leader per node sends (N-1) L n: the same total as rail first, but on one rank per node.
 */
static inline size_t mesh_hier_ag_net_rail_first(int nnodes, int L, size_t n)
{
    return (size_t)nnodes * (size_t)L * (size_t)(nnodes - 1) * n;
}
static inline size_t mesh_hier_ag_net_node_first(int nnodes, int L, size_t n)
{
    return (size_t)nnodes * (size_t)L * (size_t)(nnodes - 1) * (size_t)L * n;
}

#endif
