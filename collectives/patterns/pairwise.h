/*
 * Pairwise exchange: size steps; step 0 is the rank itself, and over steps 1 .. size-1 every
 * rank sends to and receives from every other rank exactly once. Power-of-two sizes pair ranks
 * by XOR (send and receive peer coincide, so each step is a symmetric exchange); other sizes
 * send to rank + step and receive from rank - step.
 */
#ifndef MESH_COLL_PATTERNS_PAIRWISE_H
#define MESH_COLL_PATTERNS_PAIRWISE_H

static inline int mesh_pairwise_is_pow2(int size)
{
    return size > 0 && (size & (size - 1)) == 0;
}

static inline int mesh_pairwise_send_peer(int rank, int size, int step)
{
    if (mesh_pairwise_is_pow2(size))
        return rank ^ step;
    return (rank + step) % size;
}

static inline int mesh_pairwise_recv_peer(int rank, int size, int step)
{
    if (mesh_pairwise_is_pow2(size))
        return rank ^ step;
    return (rank - step % size + size) % size;
}

#endif
