/* Point-to-point message numbers per (peer, tag). */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/p2p_seq.h"
#include "libmesh/log.h"
#include <stdlib.h>

mesh_status_t mesh_p2p_seq_init(mesh_p2p_seq_t *t, int size)
{
    *t = (mesh_p2p_seq_t){.size = size};
    t->tag0 = calloc(2 * (size_t)size, sizeof(uint32_t));
    if (t->tag0 == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate message numbers for %d ranks", size);
    return MESH_OK;
}

void mesh_p2p_seq_fini(mesh_p2p_seq_t *t)
{
    free(t->tag0);
    free(t->slots);
    *t = (mesh_p2p_seq_t){0};
}

static uint32_t slot_hash(int peer, int tag)
{
    uint64_t k = ((uint64_t)(uint32_t)peer << 32) | (uint32_t)tag;
    k *= 0x9e3779b97f4a7c15ull;
    return (uint32_t)(k >> 32);
}

static mesh_p2p_slot_t *slot_find(mesh_p2p_slot_t *slots, uint32_t cap, int peer, int tag)
{
    for (uint32_t i = slot_hash(peer, tag) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (slots[i].tag < 0 || (slots[i].tag == tag && slots[i].peer == peer))
            return &slots[i];
}

static mesh_status_t slots_grow(mesh_p2p_seq_t *t)
{
    uint32_t cap = t->cap ? 2 * t->cap : 64;
    mesh_p2p_slot_t *slots = malloc(cap * sizeof(*slots));
    if (slots == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot number the messages of %u tags", t->used + 1);
    for (uint32_t i = 0; i < cap; i++)
        slots[i].tag = -1;
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->slots[i].tag >= 0)
            *slot_find(slots, cap, t->slots[i].peer, t->slots[i].tag) = t->slots[i];
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return MESH_OK;
}

mesh_status_t mesh_p2p_seq_next(mesh_p2p_seq_t *t, int peer, int tag, int is_send, uint32_t *seq)
{
    if (tag == 0) {
        *seq = t->tag0[(size_t)is_send * (size_t)t->size + (size_t)peer]++;
        return MESH_OK;
    }
    /* at most half full, so that probes stay short */
    if (2 * (t->used + 1) > t->cap)
        MESH_CHECK(slots_grow(t));
    mesh_p2p_slot_t *s = slot_find(t->slots, t->cap, peer, tag);
    if (s->tag < 0) {
        *s = (mesh_p2p_slot_t){.peer = peer, .tag = tag};
        t->used++;
    }
    *seq = s->next[is_send]++;
    return MESH_OK;
}
