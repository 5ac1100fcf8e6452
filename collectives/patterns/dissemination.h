/*
 * Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k.
 * After ceil(log2(size)) rounds each rank has heard, directly or transitively, from all others.
 */
#ifndef MESH_COLL_PATTERNS_DISSEMINATION_H
#define MESH_COLL_PATTERNS_DISSEMINATION_H

static inline int mesh_dissem_nrounds(int size)
{
    int k = 0;
    while ((1 << k) < size)
        k++;
    return k;
}

static inline int mesh_dissem_send_peer(int rank, int size, int round)
{
    return (rank + (1 << round)) % size;
}

static inline int mesh_dissem_recv_peer(int rank, int size, int round)
{
    return ((rank - (1 << round)) % size + size) % size;
}

#endif
