/*
 * Bruck patterns: peers and block sets as pure functions of (rank, size, step).
 *
 * All-gather: at step k every rank holds the blocks of ranks rank .. rank + 2^k - 1 (mod size)
 * at the front of a rotated buffer (local index j holds block (rank + j) mod size). It sends
 * the first nblocks(k) of them to rank - 2^k and receives as many from rank + 2^k, which land
 * at local index 2^k. The last step may be partial when size is not a power of two.
 *
 * All-to-all: after the rotation in (local slot j holds what goes to rank + j), step k sends
 * every slot whose index has bit k set to rank + 2^k and receives the same slots from
 * rank - 2^k. At the end slot j holds the block from rank - j, which the rotation out places.
 */
#ifndef MESH_COLL_PATTERNS_BRUCK_H
#define MESH_COLL_PATTERNS_BRUCK_H

/* Steps for size ranks: ceil(log2(size)), 0 for size 1. */
static inline int mesh_bruck_nsteps(int size)
{
    int k = 0;
    while ((1 << k) < size)
        k++;
    return k;
}

static inline int mesh_bruck_mod(int x, int size)
{
    return ((x % size) + size) % size;
}

/* ---- all-gather */

static inline int mesh_bruck_ag_send_peer(int rank, int size, int step)
{
    return mesh_bruck_mod(rank - (1 << step), size);
}

static inline int mesh_bruck_ag_recv_peer(int rank, int size, int step)
{
    return mesh_bruck_mod(rank + (1 << step), size);
}

/* Blocks exchanged at step: 2^step, except the last step which carries the rest. */
static inline int mesh_bruck_ag_nblocks(int size, int step)
{
    int held = 1 << step;
    return held < size - held ? held : size - held;
}

/* Local index where the blocks received at step start. */
static inline int mesh_bruck_ag_recv_index(int step)
{
    return 1 << step;
}

/* The block (origin rank) held at local index j. */
static inline int mesh_bruck_ag_block(int rank, int size, int j)
{
    return mesh_bruck_mod(rank + j, size);
}

/* ---- all-to-all */

static inline int mesh_bruck_a2a_send_peer(int rank, int size, int step)
{
    return mesh_bruck_mod(rank + (1 << step), size);
}

static inline int mesh_bruck_a2a_recv_peer(int rank, int size, int step)
{
    return mesh_bruck_mod(rank - (1 << step), size);
}

/* Whether slot j moves at step. */
static inline int mesh_bruck_a2a_moves(int j, int step)
{
    return (j >> step) & 1;
}

/* Number of slots in [0, size) that move at step. */
static inline int mesh_bruck_a2a_nmoved(int size, int step)
{
    int run = 1 << step, period = run << 1;
    int tail = size % period - run;
    return (size / period) * run + (tail > 0 ? tail : 0);
}

/* Rotation in: slot j is filled from the send block for rank + j. */
static inline int mesh_bruck_a2a_in_block(int rank, int size, int j)
{
    return mesh_bruck_mod(rank + j, size);
}

/* Rotation out: slot j finally holds the block received from rank - j. */
static inline int mesh_bruck_a2a_out_block(int rank, int size, int j)
{
    return mesh_bruck_mod(rank - j, size);
}

#endif
