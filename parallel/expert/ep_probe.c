/* The cost of moving a byte between nodes against moving it inside a node, measured once per
 * expert handle: the automatic path weighs the rows the hierarchical path saves between nodes
 * against the hop inside the node it adds. */
#include "ep.h"
#include <stdlib.h>

#define PROBE_BYTES  (1u << 20)
#define PROBE_ROUNDS 5

/* The median seconds of PROBE_ROUNDS exchanges of PROBE_BYTES (both ways at once) with each of
 * peer[0] (inside the node) and peer[1] (another node), taking turns so that both kinds see the
 * same load; 0 for a kind without a peer. Every rank takes part in the barriers. */
static mesh_status_t probe(mesh_ep_h ep, const int peer[2], char *buf, double secs[2])
{
    double t[2][PROBE_ROUNDS] = {{0}};
    mesh_status_t st = MESH_OK;
    for (int r = 0; r < PROBE_ROUNDS && st == MESH_OK; r++) {
        for (int kind = 0; kind < 2 && st == MESH_OK; kind++) {
            st = mesh_barrier(ep->comm, NULL);
            if (st != MESH_OK || peer[kind] < 0)
                continue;
            double t0 = mesh_time_now();
            st = mesh_sendrecv(ep->comm, buf, PROBE_BYTES, peer[kind], buf + PROBE_BYTES,
                               PROBE_BYTES, peer[kind], MESH_UINT8, MESH_EP_TAG, NULL, NULL);
            t[kind][r] = mesh_time_now() - t0;
        }
    }
    for (int kind = 0; kind < 2; kind++) {
        qsort(t[kind], PROBE_ROUNDS, sizeof(double), mesh_par_cmp_double);
        secs[kind] = t[kind][PROBE_ROUNDS / 2];
    }
    return st;
}

mesh_status_t mesh_ep_measure_link(mesh_ep_h ep, double *ratio)
{
    if (ep->link_ratio > 0) {
        *ratio = ep->link_ratio;
        return MESH_OK;
    }
    /* pairs: ranks i and i ^ 1 of a node, and rank i of nodes b and b ^ 1 */
    int b = ep->node_of[ep->rank], i = ep->node_index[ep->rank], ob = b ^ 1;
    int n = ep->node_first[b + 1] - ep->node_first[b];
    int intra = (i ^ 1) < n ? ep->node_ranks[ep->node_first[b] + (i ^ 1)] : -1;
    int cross = ob < ep->nodes && i < ep->node_first[ob + 1] - ep->node_first[ob]
                    ? ep->node_ranks[ep->node_first[ob] + i]
                    : -1;
    char *buf = calloc(2, PROBE_BYTES);
    if (buf == NULL)
        return mesh_par_error(MESH_ERR_NO_MEMORY, "mesh_ep_layout_create: out of memory");
    double t[2];
    mesh_status_t st = probe(ep, (const int[2]){intra, cross}, buf, t);
    free(buf);
    /* the slowest pair of each kind, the same on every rank */
    if (st == MESH_OK)
        st = mesh_allreduce(ep->comm, t, t, 2, MESH_FP64, MESH_MAX, NULL, NULL);
    if (st != MESH_OK)
        return mesh_par_fail(ep->comm, st, "mesh_ep_layout_create: link probe");
    /* no rank shares a node: every choice on another node arrives where it is needed */
    ep->link_ratio = t[0] > 0 ? t[1] / t[0] : 1e30;
    if (!(ep->link_ratio > 0))
        ep->link_ratio = 1e30;
    *ratio = ep->link_ratio;
    return MESH_OK;
}

double mesh_ep_link_ratio(mesh_ep_h ep)
{
    return ep ? ep->link_ratio : 0;
}
