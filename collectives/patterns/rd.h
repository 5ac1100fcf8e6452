/*
 * Recursive doubling and halving over any rank count. The size - pof2 "extra" ranks are folded
 * into the largest power-of-two core first: among the first 2 * (size - pof2) ranks, each even
 * rank is extra and hands its data to the odd rank above it, which joins the core. Core ranks are
 * numbered 0..pof2-1 (the "core rank"); at step k a core rank exchanges with core rank ^ (1 << k).
 *
 * Recursive halving works on a vector split into pof2 blocks (see ring.h for the split): after
 * `level` halving steps a core rank c holds the window of pof2 >> level blocks that contains
 * block c; the step from level to level + 1 exchanges with core rank c ^ (pof2 >> (level + 1)).
 * Recursive doubling (the all-gather half) walks the levels back up.
 */
#ifndef MESH_PATTERN_RD_H
#define MESH_PATTERN_RD_H

/* Largest power of two <= size (size >= 1). */
static inline int mesh_rd_pof2(int size)
{
    int p = 1;
    while (p * 2 <= size)
        p *= 2;
    return p;
}
static inline int mesh_rd_log2(int pof2)
{
    int l = 0;
    while ((1 << l) < pof2)
        l++;
    return l;
}
static inline int mesh_rd_nextra(int size)
{
    return size - mesh_rd_pof2(size);
}

/* An extra rank only sends its input to its partner and receives the result back. */
static inline int mesh_rd_is_extra(int rank, int size)
{
    return rank < 2 * mesh_rd_nextra(size) && rank % 2 == 0;
}
/* The other rank of a folded pair, or -1 for a rank outside the first 2 * nextra. */
static inline int mesh_rd_fold_partner(int rank, int size)
{
    if (rank >= 2 * mesh_rd_nextra(size))
        return -1;
    return rank % 2 == 0 ? rank + 1 : rank - 1;
}
/* Core rank of rank, or -1 for an extra rank. */
static inline int mesh_rd_core_rank(int rank, int size)
{
    int extra = mesh_rd_nextra(size);
    if (rank < 2 * extra)
        return rank % 2 == 0 ? -1 : rank / 2;
    return rank - extra;
}
/* The rank that plays core rank c. */
static inline int mesh_rd_core_to_rank(int c, int size)
{
    int extra = mesh_rd_nextra(size);
    return c < extra ? 2 * c + 1 : c + extra;
}
/* The lowest rank that core rank c represents (itself and, when folded, its extra partner);
 * c == pof2 gives size, so core rank c represents ranks [first(c), first(c + 1)). */
static inline int mesh_rd_core_first_rank(int c, int size)
{
    int extra = mesh_rd_nextra(size);
    return c < extra ? 2 * c : c + extra;
}
/* Partner (a rank, not a core rank) of core rank c's holder at doubling step k. */
static inline int mesh_rd_partner(int rank, int size, int step)
{
    int c = mesh_rd_core_rank(rank, size);
    if (c < 0)
        return -1;
    return mesh_rd_core_to_rank(c ^ (1 << step), size);
}

/* Recursive halving window, in blocks of a pof2-block split: first block and block count held by
 * core rank c after `level` halving steps (level 0: the whole vector). */
static inline int mesh_rh_window_first(int c, int pof2, int level)
{
    return c & ~((pof2 >> level) - 1);
}
static inline int mesh_rh_window_blocks(int pof2, int level)
{
    return pof2 >> level;
}
/* Core rank exchanged with when going from level to level + 1 (and back in the doubling). */
static inline int mesh_rh_partner(int c, int pof2, int level)
{
    return c ^ (pof2 >> (level + 1));
}

#endif
