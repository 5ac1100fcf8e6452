/* The plan of the expert layer's hierarchical path (ep_hier_plan.c, ep_hier.c). */
#ifndef MESH_PAR_EP_HIER_H
#define MESH_PAR_EP_HIER_H

#include "ep.h"

/* Rows exchanged with one rank of the node: n rows at row off of the staging or expert rows. */
typedef struct {
    int peer;
    size_t off, n;
} mesh_ep_blk_t;

/*
 * Source side (this rank's tokens), per other node b, offsets [nodes + 1] (none for its own):
 * u_tok the tokens with a kept choice on b (token order), e_slot those choices (slot order),
 * z_off the rows that come back when tokens whole on b come back summed. slot_ref tells where
 * a kept choice's row comes back, (index << 2) | where: 0 the rows from the other nodes (Z),
 * 1 the staging (Y), 2 the expert rows; -1 when dropped. slot_zred is the Z row of a choice on
 * another node when whole tokens come back summed. tok_whole: all of a token's kept choices
 * lie on one other node.
 *
 * Forwarder side: the sources of other nodes it serves (fsrc, ascending), their tokens' rows
 * (r_off) and choices (f_off) in the order they send them, then this rank's own choices for
 * its node: fe_src the row (R1 row, or -1 - slot for this rank's own), fe_dst where it goes
 * (staging row, or -1 - expert row on this rank), fe_whole. t_off: rows sent back to each
 * source when whole tokens come back summed. yblk: staging blocks exchanged with the node's
 * other ranks (rank, source, expert order); gblk: expert-row blocks exchanged with their
 * forwarders (source, expert order).
 */
struct mesh_ep_hier {
    size_t *u_off, *e_off, *z_off;
    int64_t *u_tok, *e_slot;
    int64_t *slot_ref, *slot_zred;
    uint8_t *tok_whole;
    int nf;
    int *fsrc;
    size_t *r_off, *f_off, *t_off;
    size_t nfe, ny;
    int64_t *fe_src, *fe_dst;
    uint8_t *fe_whole;
    mesh_ep_blk_t *yblk, *gblk;
    size_t nyblk, ngblk;
    mesh_request_h *reqs;
};

/* Posts a send or receive of bytes (none when 0) with MESH_EP_TAG at reqs[*n]. */
mesh_status_t mesh_ep_hier_post(mesh_ep_h ep, mesh_request_h *reqs, int *n, int send, int peer,
                                const void *buf, size_t bytes);

#endif
