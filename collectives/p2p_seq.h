/* Point-to-point message numbers per (peer, tag): the n-th send to a peer with a tag matches the
 * n-th receive from this rank with that tag, whatever other tags do in between. Tag 0 (mesh_send
 * and mesh_recv) is counted in plain arrays; other tags in a small hash table. */
#ifndef MESH_COLL_P2P_SEQ_H
#define MESH_COLL_P2P_SEQ_H

#include "mesh.h"
#include <stdint.h>

typedef struct {
    int peer;
    int tag;          /* -1: empty slot */
    uint32_t next[2]; /* [0] receives, [1] sends */
} mesh_p2p_slot_t;

typedef struct {
    int size;
    uint32_t *tag0;         /* [2 * size]: receives from, then sends to, each peer with tag 0 */
    mesh_p2p_slot_t *slots; /* open addressing, cap a power of two */
    uint32_t cap, used;
} mesh_p2p_seq_t;

mesh_status_t mesh_p2p_seq_init(mesh_p2p_seq_t *t, int size);
void mesh_p2p_seq_fini(mesh_p2p_seq_t *t);
/* Takes the number of the next send (is_send) or receive with (peer, tag). */
mesh_status_t mesh_p2p_seq_next(mesh_p2p_seq_t *t, int peer, int tag, int is_send, uint32_t *seq);

#endif
