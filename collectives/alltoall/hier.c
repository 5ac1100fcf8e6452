/*
 * Hierarchical all-to-all with node aggregation. Rank (k, l) sends its blocks for the ranks of
 * its own node straight to them; for every other node j it sends the L blocks meant for
 * (j, 0..L-1) as one message to its rail peer (j, l), which keeps its own block and forwards
 * the others within node j (patterns/hier.h). Each pair of nodes thus exchanges L messages per
 * direction instead of L^2, each L times larger, with the same bytes on the network; the price
 * is one extra hop within the node for (L-1)/L of the remote data. Uniform counts only (a relay
 * must know the size of what it forwards); needs the same number of ranks on every node.
 */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/algo.h"
#include "collectives/patterns/hier.h"
#include "collectives/phases.h"
#include "libmesh/log.h"

static int uniform(const mesh_comm_t *comm, const mesh_coll_args_t *a)
{
    for (int i = 0; i < comm->size; i++)
        if (a->counts[i] != a->counts[0] || a->rcounts[i] != a->counts[0])
            return 0;
    return 1;
}

static int score(const mesh_comm_t *comm, size_t bytes)
{
    int L = mesh_hier_rails(comm->nnodes, comm->node_size);
    if (comm->nnodes <= 1 || L < 1)
        return -1;
    if (L == 1)
        return 1;
    /* one message per rail peer instead of L pays while per-message costs dominate; for large
     * blocks (bytes holds size of them) the relay hop within the node costs more than the
     * messages it saves */
    return bytes <= 16 * 1024 * (size_t)comm->size ? 40 : 5;
}

static mesh_status_t build(mesh_comm_t *comm, const mesh_coll_args_t *a, mesh_sched_t *s)
{
    int me = comm->rank, n = comm->size;
    const int *nf = comm->node_first, *nr = comm->node_ranks;
    size_t ds = a->dsize, blk = a->counts[0] * ds;
    char *rb = a->rbuf;
    const char *sb = a->sbuf;
    const size_t *sdispls = a->displs;
    int ready = -1; /* the send side is readable and the receive buffer writable */
    mesh_coll_hier_t h;

    MESH_CHECK(mesh_coll_hier_rails(comm, s, "hierarchical all-to-all", &h));
    if (!uniform(comm, a))
        return mesh_error(MESH_ERR_UNSUPPORTED, "hierarchical all-to-all: counts differ");
    int k = h.node, nn = h.nnodes, L = h.L, l = h.lr;
    if (blk == 0)
        return mesh_sched_build_status(s);
    if (a->in_place) {
        /* the outgoing blocks move aside before anything lands on them */
        char *tmp = mesh_sched_scratch(s, blk * (size_t)n);
        size_t *packed = mesh_sched_scratch(s, sizeof(size_t) * (size_t)n);
        if (!tmp || !packed)
            return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical all-to-all: no memory");
        mesh_coll_ids_t ids = {0};
        for (int i = 0; i < n; i++) {
            packed[i] = (size_t)i * a->counts[0];
            mesh_coll_ids_add(&ids, mesh_sched_copy(s, tmp + (size_t)i * blk,
                                                    sb + a->displs[i] * ds, blk, NULL, 0));
        }
        MESH_CHECK(mesh_coll_ids_join(s, &ids, NULL, 0, &ready));
        sb = tmp;
        sdispls = packed;
    }
    /* rail messages: what goes to node j, and what arrives from it, L blocks each */
    char *in = mesh_sched_scratch(s, blk * (size_t)L * (size_t)nn), *out = NULL;
    int *got = mesh_sched_scratch(s, sizeof(int) * (size_t)nn);
    if (!in || !got)
        return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical all-to-all: no memory for %zu bytes",
                          blk * (size_t)L * (size_t)nn);

    /* within the node: the own block, then the direct blocks */
    mesh_sched_copy(s, rb + a->rdispls[me] * ds, sb + sdispls[me] * ds, blk, &ready, 1);
    for (int m = 0; m < L; m++) {
        int p = h.local.ranks[m];
        if (m == l)
            continue;
        mesh_sched_send(s, p, sb + sdispls[p] * ds, blk, &ready, 1);
        mesh_sched_recv(s, p, rb + a->rdispls[p] * ds, blk, &ready, 1);
    }
    /* across nodes: one message per rail peer, sent from the user's buffer when the blocks for
     * that node already lie back to back in node order */
    for (int j = 0; j < nn; j++) {
        got[j] = -1;
        if (j == k)
            continue;
        int peer = h.rail.ranks[j], first = nr[nf[j]], packed = 0;
        for (int m = 0; m < L; m++)
            packed |= sdispls[nr[nf[j] + m]] * ds != sdispls[first] * ds + (size_t)m * blk;
        const char *msg = sb + sdispls[first] * ds;
        int dep = ready;
        if (packed) {
            if (!out && !(out = mesh_sched_scratch(s, blk * (size_t)L * (size_t)nn)))
                return mesh_error(MESH_ERR_NO_MEMORY, "hierarchical all-to-all: no memory");
            char *o = out + (size_t)j * L * blk;
            mesh_coll_ids_t ids = {0};
            for (int m = 0; m < L; m++)
                mesh_coll_ids_add(&ids, mesh_sched_copy(s, o + (size_t)m * blk,
                                                        sb + sdispls[nr[nf[j] + m]] * ds, blk,
                                                        &ready, 1));
            MESH_CHECK(mesh_coll_ids_join(s, &ids, NULL, 0, &dep));
            msg = o;
        }
        mesh_sched_send(s, peer, msg, blk * (size_t)L, &dep, 1);
        got[j] = mesh_sched_recv(s, peer, in + (size_t)j * L * blk, blk * (size_t)L, &ready, 1);
        /* this rank's block from (j, l); the rest is relayed to (k, m) */
        mesh_sched_copy(s, rb + a->rdispls[peer] * ds, in + ((size_t)j * L + l) * blk, blk, &got[j],
                        1);
    }
    /* relays within the node, in node order on both sides of every pair */
    for (int j = 0; j < nn; j++) {
        if (j == k)
            continue;
        for (int m = 0; m < L; m++) {
            int p = h.local.ranks[m];
            if (m == l)
                continue;
            mesh_sched_send(s, p, in + ((size_t)j * L + m) * blk, blk, &got[j], 1);
            int src = mesh_hier_rank(nf, nr, j, m); /* relayed by p, its rail peer on node j */
            mesh_sched_recv(s, p, rb + a->rdispls[src] * ds, blk, &ready, 1);
        }
    }
    return mesh_sched_build_status(s);
}

const mesh_coll_algo_t mesh_coll_alltoall_hier = {
    .name = "hier",
    .desc = "blocks for a remote node aggregated into one message per rail peer, relayed "
            "within the node; multi-node, uniform counts",
    .type = MESH_COLL_ALLTOALL,
    .score = score,
    .fits = uniform,
    .build = build};
