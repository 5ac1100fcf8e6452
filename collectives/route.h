/*
 * Transport selection of a communicator. MESH_TLS says which transports may be opened at all;
 * MESH_NET orders the network transports (scope net) and limits them to those it names. A peer
 * on this rank's node goes over the narrowest-scope transport that reaches it (self, then shm);
 * a peer on another node over the first transport in MESH_NET that is open on both sides and
 * reaches it. Both ranks of a pair decide alike because a transport reaches a peer only when the
 * peer published an address for it.
 */
#ifndef MESH_COLL_ROUTE_H
#define MESH_COLL_ROUTE_H

#include "collectives/comm.h"

#define MESH_ROUTE_NET_MAX  8
#define MESH_ROUTE_NAME_MAX 16

typedef struct {
    int n;
    int explicit_net; /* MESH_NET differs from its default: skipping one of them warns */
    char name[MESH_ROUTE_NET_MAX][MESH_ROUTE_NAME_MAX];
    char why[MESH_ROUTE_NET_MAX][128]; /* why it was not opened ("" when it was) */
} mesh_route_t;

/* Parses a MESH_NET value. Names must be network transports this version knows (built or not)
 * or transports of the registry; anything else fails with MESH_ERR_INVALID_ARG naming it. */
mesh_status_t mesh_route_parse_net(const char *spec, int explicit_net, mesh_route_t *r);
/* Position of name in the MESH_NET order, or -1. */
int mesh_route_net_index(const mesh_route_t *r, const char *name);
/* caps.priority a known network transport reports (MESH_TL_PRIO_*), or -1 for other names; lets
 * mesh-info describe a transport that cannot open here. */
int mesh_route_net_priority(const char *name);
/* The i-th network transport name this version knows (built or not), NULL past the end. */
const char *mesh_route_known_net(int i);
/* Opens the transports MESH_TLS and MESH_NET allow and that can run here, into c->tls. */
mesh_status_t mesh_route_open(mesh_comm_t *c, const char *node, mesh_route_t *r);
/* Whether a serves a peer better than b: narrower scope, then MESH_NET order, then priority. */
int mesh_route_better(const mesh_route_t *r, const mesh_comm_tl_t *a, const mesh_comm_tl_t *b);
/* Logs which network transport carries the inter-node peers and why not the ones before it
 * (info on the first rank of each node, debug elsewhere). */
void mesh_route_report(const mesh_comm_t *c, const mesh_route_t *r);

#endif
