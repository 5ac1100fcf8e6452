/*
 * self: messages from a rank to itself. A send whose receive is already posted is copied at once;
 * otherwise its payload is copied aside so the send completes without waiting for the receive
 * (a schedule may wait on its own send before posting the matching receive). Completions are
 * delivered by progress(), as the contract asks.
 */
#include "config.h"
#define MESH_LOG_SUBSYSTEM "self"
#include "transports/tl.h"
#include "transports/tl_queue.h"
#include "transports/tl_registry.h"
#include "libmesh/log.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct mesh_tl_self_msg {
    struct mesh_tl_self_msg *next;
    uint64_t tag;
    size_t len;
    unsigned char data[];
} mesh_tl_self_msg_t;

typedef struct {
    mesh_tl_iface_t super;
    mesh_tl_ep_t ep;
    int ep_used;
    mesh_tl_opq_t posted; /* receives waiting for a send */
    mesh_tl_opq_t done;   /* completed, delivered by the next progress() */
    mesh_tl_self_msg_t *unexp_head, *unexp_tail;
    atomic_int aborted;
} mesh_tl_self_iface_t;

/* Completion waiting for progress(): length in tl_priv[2], status in tl_priv[3]. */
static void self_defer(mesh_tl_self_iface_t *si, mesh_tl_op_t *op, size_t length,
                       mesh_status_t status)
{
    op->tl_priv[2] = (void *)(uintptr_t)length;
    op->tl_priv[3] = (void *)(intptr_t)status;
    mesh_tl_opq_push(&si->done, op);
}

static mesh_status_t self_deliver(mesh_tl_self_iface_t *si, mesh_tl_op_t *rop, const void *buf,
                                  size_t len)
{
    size_t cap = mesh_tl_op_len(rop);
    if (len > cap) {
        self_defer(si, rop, len, mesh_tl_truncated(&si->ep, len, cap));
        return MESH_OK;
    }
    if (len)
        memcpy(mesh_tl_op_buf(rop), buf, len);
    self_defer(si, rop, len, MESH_OK);
    return MESH_OK;
}

static mesh_status_t self_open(const mesh_tl_open_params_t *params, mesh_tl_iface_t **iface)
{
    mesh_tl_self_iface_t *si = calloc(1, sizeof(*si));
    if (si == NULL)
        return mesh_error(MESH_ERR_NO_MEMORY, "self interface allocation failed");
    si->super.ops = mesh_tl_self_ops;
    si->super.rank = params->rank;
    si->super.size = params->size;
    atomic_init(&si->aborted, 0);
    *iface = &si->super;
    return MESH_OK;
}

static void self_close(mesh_tl_iface_t *iface)
{
    mesh_tl_self_iface_t *si = (mesh_tl_self_iface_t *)iface;
    mesh_tl_self_msg_t *m = si->unexp_head;
    while (m) {
        mesh_tl_self_msg_t *next = m->next;
        free(m);
        m = next;
    }
    free(si);
}

static void self_query(mesh_tl_iface_t *iface, mesh_tl_caps_t *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->flags = MESH_TL_CAP_TAGGED | MESH_TL_CAP_SIGNATURE | MESH_TL_CAP_SINGLE_COPY;
    caps->scope = MESH_TL_SCOPE_SELF;
    caps->latency_us = 0.05;
    caps->bandwidth_GBps = 10.0;
    caps->eager_limit = SIZE_MAX;
    caps->priority = 100;
}

static mesh_status_t self_address(mesh_tl_iface_t *iface, void *addr, size_t *len)
{
    *len = 0;
    return MESH_OK;
}

static int self_reachable(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer)
{
    return peer->rank == iface->rank;
}

static mesh_status_t self_ep_create(mesh_tl_iface_t *iface, const mesh_tl_peer_t *peer,
                                    mesh_tl_ep_t **ep)
{
    mesh_tl_self_iface_t *si = (mesh_tl_self_iface_t *)iface;
    if (peer->rank != iface->rank)
        return mesh_error(MESH_ERR_INVALID_ARG, "self transport cannot reach rank %d (we are %d)",
                          peer->rank, iface->rank);
    if (si->ep_used)
        return mesh_error(MESH_ERR_BUSY, "self endpoint already created");
    si->ep_used = 1;
    si->ep.iface = iface;
    si->ep.peer = peer->rank;
    *ep = &si->ep;
    return MESH_OK;
}

static void self_ep_destroy(mesh_tl_ep_t *ep)
{
    ((mesh_tl_self_iface_t *)ep->iface)->ep_used = 0;
}

static mesh_status_t self_isend(mesh_tl_ep_t *ep, uint64_t tag, const void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_self_iface_t *si = (mesh_tl_self_iface_t *)ep->iface;
    if (atomic_load_explicit(&si->aborted, memory_order_acquire))
        return mesh_error(MESH_ERR_ABORTED, "send to self after abort");
    mesh_tl_op_set(op, tag, buf, len);
    mesh_tl_op_t *rop = mesh_tl_opq_take_tag(&si->posted, tag);
    if (rop) {
        self_deliver(si, rop, buf, len);
    } else {
        mesh_tl_self_msg_t *m = malloc(sizeof(*m) + len);
        if (m == NULL)
            return mesh_error(MESH_ERR_NO_MEMORY, "no memory to keep a %zu-byte message to self",
                              len);
        m->next = NULL;
        m->tag = tag;
        m->len = len;
        if (len)
            memcpy(m->data, buf, len);
        if (si->unexp_tail)
            si->unexp_tail->next = m;
        else
            si->unexp_head = m;
        si->unexp_tail = m;
    }
    self_defer(si, op, len, MESH_OK);
    return MESH_OK;
}

static mesh_status_t self_irecv(mesh_tl_ep_t *ep, uint64_t tag, void *buf, size_t len,
                                mesh_tl_op_t *op)
{
    mesh_tl_self_iface_t *si = (mesh_tl_self_iface_t *)ep->iface;
    if (atomic_load_explicit(&si->aborted, memory_order_acquire))
        return mesh_error(MESH_ERR_ABORTED, "receive from self after abort");
    mesh_tl_op_set(op, tag, buf, len);
    mesh_tl_self_msg_t *prev = NULL;
    for (mesh_tl_self_msg_t *m = si->unexp_head; m; prev = m, m = m->next) {
        if (!mesh_tl_tag_match(tag, m->tag))
            continue;
        op->peer_tag = m->tag;
        if (prev)
            prev->next = m->next;
        else
            si->unexp_head = m->next;
        if (si->unexp_tail == m)
            si->unexp_tail = prev;
        self_deliver(si, op, m->data, m->len);
        free(m);
        return MESH_OK;
    }
    mesh_tl_opq_push(&si->posted, op);
    return MESH_OK;
}

static int self_progress(mesh_tl_iface_t *iface)
{
    mesh_tl_self_iface_t *si = (mesh_tl_self_iface_t *)iface;
    int n = 0;
    mesh_tl_op_t *op;
    if (atomic_load_explicit(&si->aborted, memory_order_acquire))
        n += mesh_tl_opq_fail_all(&si->posted, MESH_ERR_ABORTED);
    while ((op = mesh_tl_opq_pop(&si->done)) != NULL) {
        mesh_tl_op_complete(op, (size_t)(uintptr_t)op->tl_priv[2],
                            (mesh_status_t)(intptr_t)op->tl_priv[3]);
        n++;
    }
    return n;
}

static mesh_status_t self_ep_check(mesh_tl_ep_t *ep)
{
    return MESH_OK;
}

/* Only a flag: the owner's next progress() fails the posted receives, so abort never touches
 * the queues from another thread. */
static void self_abort(mesh_tl_iface_t *iface)
{
    atomic_store_explicit(&((mesh_tl_self_iface_t *)iface)->aborted, 1, memory_order_release);
}

const mesh_tl_ops_t mesh_tl_self_ops = {
    .name = "self",
    .doc = "loopback to the same rank",
    .config = NULL,
    .usable = mesh_tl_stub_usable,
    .open = self_open,
    .close = self_close,
    .query = self_query,
    .address = self_address,
    .reachable = self_reachable,
    .ep_create = self_ep_create,
    .ep_destroy = self_ep_destroy,
    .wireup = mesh_tl_stub_wireup,
    .isend = self_isend,
    .irecv = self_irecv,
    .progress = self_progress,
    .ep_check = self_ep_check,
    .abort = self_abort,
    .wait_arm = mesh_tl_nowait_arm,
    .mem_reg = mesh_tl_stub_mem_reg,
    .mem_dereg = mesh_tl_stub_mem_dereg,
    .put = mesh_tl_stub_put,
    .get = mesh_tl_stub_get,
    .flush = mesh_tl_stub_flush,
};
