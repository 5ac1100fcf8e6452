/* Progress of communicators: each one's active schedules, and the process's other
 * communicators while one of them waits, so that a rank blocked on one communicator keeps
 * serving its peers on the others. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/comm.h"
#include "collectives/request.h"
#include "collectives/sched.h"
#include "libmesh/progress.h"
#include "libmesh/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mesh_status_t mesh_comm_activate_grow(mesh_comm_t *c)
{
    int cap = c->cap_active ? 2 * c->cap_active : 8;
    mesh_sched_t **a = realloc(c->active, (size_t)cap * sizeof(*a));
    if (a == NULL) return mesh_error(MESH_ERR_NO_MEMORY, "cannot keep %d operations under way", cap);
    c->active = a;
    c->cap_active = cap;
    return MESH_OK;
}

/* Shared schedules are counted process-wide (an atomic add) as the communicator gets its first
 * and loses its last; a blocking call, which drives itself, is not counted. */
void mesh_comm_share(mesh_comm_t *c, int delta)
{
    atomic_store_explicit(&c->nshared_hint, c->nshared + delta, memory_order_relaxed);
    int before = c->nshared;
    c->nshared += delta;
    if (before == 0 || c->nshared == 0) mesh_progress_active_add(delta);
}

void mesh_comm_deactivate_at(mesh_comm_t *c, mesh_sched_t *s)
{
    for (int i = c->nactive - 1; i >= 0; i--) {
        if (c->active[i] != s) continue;
        /* the last one takes its place: progress walks the array backwards, so it has been
         * visited already in a pass that removes s */
        c->active[i] = c->active[--c->nactive];
        atomic_store_explicit(&c->nactive_hint, c->nactive, memory_order_relaxed);
        return;
    }
}

void mesh_comm_set_failed(mesh_comm_t *c, mesh_status_t status)
{
    if (status >= 0) return;
    if (c->failed >= 0) {
        c->failed = status;
        /* the detecting thread holds the message now; whichever thread waits reads it here */
        snprintf(c->last_error, sizeof(c->last_error), "%s", mesh_error_last());
        snprintf(c->failure, sizeof(c->failure), "%s", mesh_error_last());
    }
}

/* The oldest collective still under way, or seq: every collective before it ended here. */
static uint32_t oldest_call(const mesh_comm_t *c, uint32_t seq)
{
    uint32_t floor = seq & MESH_TAG_COLL_SEQ_MASK;
    for (int i = 0; i < c->nactive; i++) {
        uint64_t tag = mesh_sched_tag(c->active[i]);
        if (tag & MESH_TAG_P2P) continue;
        uint32_t s = mesh_tag_coll_seq(tag);
        if (((seq - s) & MESH_TAG_COLL_SEQ_MASK) > ((seq - floor) & MESH_TAG_COLL_SEQ_MASK))
            floor = s;
    }
    return floor;
}

mesh_status_t mesh_comm_start_call(mesh_comm_t *c, uint32_t seq, uint32_t sig, uint64_t count,
                                   int root)
{
    mesh_comm_note_call(c, seq, sig, count, root);
    /* the operations of a group start together at its end: its earlier members' messages may
     * wait already; the first call after the group looks */
    if (mesh_group_active()) return MESH_OK;
    /* what peers sent before this call is taken in first, so that a message the last call left
     * behind is seen before this one sends anything */
    int events = 0;
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface) events += mesh_tl_progress(c->tls[t].iface);
    if (events > 0) mesh_comm_check_verdicts(c);
    if (c->failed < 0) {
        mesh_error_restore(c->failure); /* said once already, by who saw it */
        return c->failed;
    }
    return mesh_comm_check_orphans(c, oldest_call(c, seq));
}

void mesh_comm_fail_active(mesh_comm_t *c, mesh_status_t status)
{
    while (c->nactive > 0) mesh_sched_fail(c->active[c->nactive - 1], status);
}

int mesh_comm_progress(mesh_comm_t *c)
{
    int events = 0;
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface) events += mesh_tl_progress(c->tls[t].iface);
    /* a verdict arrives as the completion of a standing receive: an event */
    if (events > 0) mesh_comm_check_verdicts(c);
    /* backwards: a schedule that ends is replaced by the last one, already visited */
    for (int i = c->nactive - 1; i >= 0; i--)
        if (i < c->nactive) mesh_sched_progress(c->active[i]);
    return events;
}

/* The registry's callback: a communicator with work under way (or any, idle_too) and a free
 * lock. */
static int comm_progress_try(void *obj, int idle_too)
{
    mesh_comm_t *c = obj;
    if ((!idle_too && atomic_load_explicit(&c->nactive_hint, memory_order_relaxed) == 0) ||
        !mesh_comm_trylock(c))
        return 0;
    int events = mesh_comm_progress(c);
    mesh_comm_unlock(c);
    return events;
}

int mesh_comm_others_busy(mesh_comm_t *self)
{
    int mine = self != NULL && atomic_load_explicit(&self->nshared_hint, memory_order_relaxed) > 0;
    return mesh_progress_active_count() > mine;
}

int mesh_comm_progress_others(mesh_comm_t *self)
{
    return mesh_comm_others_busy(self) ? mesh_progress_others(self) : 0;
}

void mesh_comm_register(mesh_comm_t *c) { mesh_progress_add(c, comm_progress_try); }
void mesh_comm_unregister(mesh_comm_t *c) { mesh_progress_remove(c); }
