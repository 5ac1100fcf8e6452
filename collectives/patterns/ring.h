/*
 * Ring pattern: neighbours and the block each rank sends and receives at every step of the
 * reduce-scatter and all-gather phases, plus the element-aligned split of a vector into blocks.
 *
 * Block convention: after the reduce-scatter phase rank r holds the fully reduced block r, and
 * the all-gather phase starts from that state. Each phase has size - 1 steps; at step s a rank
 * sends one block to its right neighbour and receives one from its left neighbour.
 */
#ifndef MESH_PATTERN_RING_H
#define MESH_PATTERN_RING_H

#include <stddef.h>

static inline int mesh_ring_mod(int a, int size)
{
    return ((a % size) + size) % size;
}
static inline int mesh_ring_right(int rank, int size)
{
    return mesh_ring_mod(rank + 1, size);
}
static inline int mesh_ring_left(int rank, int size)
{
    return mesh_ring_mod(rank - 1, size);
}

/* Reduce-scatter step s (0 <= s < size - 1): the partial block sent right, and the block
 * received from the left and reduced into (the left neighbour's sent block). */
static inline int mesh_ring_rs_send_block(int rank, int size, int step)
{
    return mesh_ring_mod(rank - step - 1, size);
}
static inline int mesh_ring_rs_recv_block(int rank, int size, int step)
{
    return mesh_ring_mod(rank - step - 2, size);
}

/* All-gather step s: forwards the block received at step s - 1 (its own block at step 0). */
static inline int mesh_ring_ag_send_block(int rank, int size, int step)
{
    return mesh_ring_mod(rank - step, size);
}
static inline int mesh_ring_ag_recv_block(int rank, int size, int step)
{
    return mesh_ring_mod(rank - step - 1, size);
}

/* Splits count elements into nblocks blocks whose lengths differ by at most one, the longer
 * ones first; blocks may be empty when count < nblocks. Offsets are in elements. */
static inline size_t mesh_block_offset(size_t count, int nblocks, int i)
{
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks;
    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}
static inline size_t mesh_block_count(size_t count, int nblocks, int i)
{
    return mesh_block_offset(count, nblocks, i + 1) - mesh_block_offset(count, nblocks, i);
}

#endif
