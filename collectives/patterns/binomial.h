/*
 * Binomial tree relative to a root. Ranks are renumbered vr = (rank - root) mod size; the parent
 * of vr > 0 is vr with its lowest set bit cleared, and the children of vr are vr + 2^k for every
 * 2^k below vr's lowest set bit (below size for the root) with vr + 2^k < size. The subtree of vr
 * is the contiguous relative range [vr, vr + subtree size), which is what scatter and gather of
 * blocks rely on. Children are indexed from the nearest (vr + 1, the smallest subtree) outwards.
 */
#ifndef MESH_PATTERN_BINOMIAL_H
#define MESH_PATTERN_BINOMIAL_H

static inline int mesh_binomial_vrank(int rank, int root, int size)
{
    return ((rank - root) % size + size) % size;
}
static inline int mesh_binomial_rank(int vrank, int root, int size)
{
    return (vrank + root) % size;
}
/* Lowest set bit of vr; for the root, the first power of two >= size. */
static inline int mesh_binomial_span_(int vr, int size)
{
    if (vr == 0) {
        int m = 1;
        while (m < size)
            m *= 2;
        return m;
    }
    return vr & -vr;
}
/* Parent rank, or -1 for the root. */
static inline int mesh_binomial_parent(int rank, int root, int size)
{
    int vr = mesh_binomial_vrank(rank, root, size);
    if (vr == 0)
        return -1;
    return mesh_binomial_rank(vr & (vr - 1), root, size);
}
static inline int mesh_binomial_nchildren(int rank, int root, int size)
{
    int vr = mesh_binomial_vrank(rank, root, size), span = mesh_binomial_span_(vr, size), n = 0;
    for (int m = 1; m < span && vr + m < size; m *= 2)
        n++;
    return n;
}
/* Child i (0 = nearest), as a rank. */
static inline int mesh_binomial_child(int rank, int root, int size, int i)
{
    int vr = mesh_binomial_vrank(rank, root, size);
    return mesh_binomial_rank(vr + (1 << i), root, size);
}
/* Number of ranks in the subtree of rank (itself included). */
static inline int mesh_binomial_subtree(int rank, int root, int size)
{
    int vr = mesh_binomial_vrank(rank, root, size), span = mesh_binomial_span_(vr, size);
    return span < size - vr ? span : size - vr;
}

#endif
