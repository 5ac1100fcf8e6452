/*
 * Helpers shared by the transports: an intrusive FIFO of operations (through op->tl_next) and
 * the fields every transport keeps in op->tl_priv. Posted receives and pending sends live in
 * these queues; matching is first-in first-out per tag, so two messages with the same tag
 * between one pair match their receives in posting order.
 */
#ifndef MESH_TL_QUEUE_H
#define MESH_TL_QUEUE_H

#include "libmesh/log.h"
#include "transports/tl.h"
#include <stdatomic.h>
#include <stdint.h>

/* The refusals a transport's send or receive starts with (dir: "send to", "receive from"):
 * nothing is posted once the interface is aborted, nor to a peer seen to fail (failed: its
 * status, or MESH_OK where the post does not look; why: what failed). */
static inline mesh_status_t mesh_tl_post_check(const atomic_int *aborted, mesh_status_t failed,
                                               const char *why, const char *dir, int peer)
{
    if (atomic_load_explicit(aborted, memory_order_acquire))
        return mesh_error(MESH_ERR_ABORTED, "%s rank %d after abort", dir, peer);
    if (failed < 0)
        return mesh_error(failed, "%s failed peer rank %d: %s", dir, peer, why);
    return MESH_OK;
}

/* tl_priv[0..2] hold the tag, buffer and length of the operation; tl_priv[3] is the
 * transport's own (progress counters, cookies). */
static inline void mesh_tl_op_set(mesh_tl_op_t *op, uint64_t tag, const void *buf, size_t len)
{
    op->tl_next = NULL;
    op->tl_priv[0] = (void *)(uintptr_t)tag;
    op->tl_priv[1] = (void *)buf;
    op->tl_priv[2] = (void *)(uintptr_t)len;
    op->tl_priv[3] = NULL;
}
static inline uint64_t mesh_tl_op_tag(const mesh_tl_op_t *op)
{
    return (uint64_t)(uintptr_t)op->tl_priv[0];
}
static inline void *mesh_tl_op_buf(const mesh_tl_op_t *op)
{
    return op->tl_priv[1];
}
static inline size_t mesh_tl_op_len(const mesh_tl_op_t *op)
{
    return (size_t)op->tl_priv[2];
}

static inline void mesh_tl_op_complete(mesh_tl_op_t *op, size_t length, mesh_status_t status)
{
    op->length = length;
    __atomic_store_n(&op->status, (int)status, __ATOMIC_RELEASE);
}

typedef struct {
    mesh_tl_op_t *head;
    mesh_tl_op_t *tail;
} mesh_tl_opq_t;

static inline int mesh_tl_opq_empty(const mesh_tl_opq_t *q)
{
    return q->head == NULL;
}

static inline void mesh_tl_opq_push(mesh_tl_opq_t *q, mesh_tl_op_t *op)
{
    op->tl_next = NULL;
    if (q->tail)
        q->tail->tl_next = op;
    else
        q->head = op;
    q->tail = op;
}

static inline mesh_tl_op_t *mesh_tl_opq_pop(mesh_tl_opq_t *q)
{
    mesh_tl_op_t *op = q->head;
    if (op) {
        q->head = op->tl_next;
        if (!q->head)
            q->tail = NULL;
        op->tl_next = NULL;
    }
    return op;
}

/* Removes and returns the oldest posted receive that a message with this tag matches
 * (mesh_tl_tag_match), recording the tag in its peer_tag; NULL if none. */
static inline mesh_tl_op_t *mesh_tl_opq_take_tag(mesh_tl_opq_t *q, uint64_t tag)
{
    mesh_tl_op_t *prev = NULL;
    for (mesh_tl_op_t *op = q->head; op; prev = op, op = op->tl_next) {
        if (!mesh_tl_tag_match(mesh_tl_op_tag(op), tag))
            continue;
        op->peer_tag = tag;
        if (prev)
            prev->tl_next = op->tl_next;
        else
            q->head = op->tl_next;
        if (q->tail == op)
            q->tail = prev;
        op->tl_next = NULL;
        return op;
    }
    return NULL;
}

/* Completes every operation of the queue with status and empties it; returns how many. */
static inline int mesh_tl_opq_fail_all(mesh_tl_opq_t *q, mesh_status_t status)
{
    int n = 0;
    mesh_tl_op_t *op;
    while ((op = mesh_tl_opq_pop(q)) != NULL) {
        mesh_tl_op_complete(op, 0, status);
        n++;
    }
    return n;
}

#endif
