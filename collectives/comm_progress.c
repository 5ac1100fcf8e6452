/* Progress of communicators: each one's active schedules, and the process's other
 * communicators while one of them waits, so that a rank blocked on one communicator keeps
 * serving its peers on the others. */
#define MESH_LOG_SUBSYSTEM "comm"
#include "collectives/device/dev.h"
#include "collectives/comm.h"
#include "collectives/sched.h"
#include "libmesh/progress.h"
#include "libmesh/wait.h"
#include "libmesh/log.h"
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void mesh_comm_lock_slow(mesh_comm_t *c)
{
    /* marked 2 while anyone may sleep, so that the unlock wakes one; a thread that takes it
     * after sleeping keeps the mark, since others may still sleep */
    while (atomic_exchange_explicit(&c->lock, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &c->lock, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void mesh_comm_lock_wake(mesh_comm_t *c)
{
    syscall(SYS_futex, &c->lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The oldest collective still under way, or seq: every collective before it ended here. */
static uint32_t oldest_call(const mesh_comm_t *c, uint32_t seq)
{
    uint32_t floor = seq & MESH_TAG_COLL_SEQ_MASK;
    for (int i = 0; i < c->nactive; i++) {
        uint64_t tag = mesh_sched_tag(c->active[i]);
        if (tag & MESH_TAG_P2P)
            continue;
        uint32_t s = mesh_tag_coll_seq(tag);
        if (((seq - s) & MESH_TAG_COLL_SEQ_MASK) > ((seq - floor) & MESH_TAG_COLL_SEQ_MASK))
            floor = s;
    }
    return floor;
}

mesh_status_t mesh_comm_start_call(mesh_comm_t *c, const mesh_health_call_t *call, int look)
{
    /* only a rooted collective (broadcast, reduce, gather, scatter) can end on every rank with a
     * message left over, when the ranks named different roots: every other mismatch shows in a
     * message's signature or length. So the two calls after one look, and a stream of other
     * collectives pays nothing */
    int after_rooted = c->health.look_calls > 0;
    if (look && after_rooted)
        c->health.look_calls--;
    if (call->root >= 0)
        c->health.look_calls = 2;
    if (!look || !after_rooted || c->dev_unstarted > 0)
        return mesh_health_start_call(c, call, UINT32_MAX);
    /* what peers sent before this call is taken in first, so that a message the last call left
     * behind is seen before this one sends anything */
    int events = 0;
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface)
            events += mesh_tl_progress(c->tls[t].iface);
    if (events > 0) {
        mesh_status_t st = mesh_health_poll(c);
        if (st < 0)
            mesh_comm_fail_active(c, st);
    }
    if (c->failed < 0) {
        mesh_error_restore(c->failure);         /* said once already, by who saw it */
        mesh_health_failed(c, c->failed, call); /* the call it ended, when none was named */
        return c->failed;
    }
    return mesh_health_start_call(c, call, oldest_call(c, call->seq));
}

void mesh_comm_fail_active(mesh_comm_t *c, mesh_status_t status)
{
    while (c->nactive > 0)
        mesh_sched_fail(c->active[c->nactive - 1], status);
}

int mesh_comm_progress(mesh_comm_t *c)
{
    int events = 0;
    for (int t = 0; t < c->ntls; t++)
        if (c->tls[t].iface)
            events += mesh_tl_progress(c->tls[t].iface);
    /* a verdict arrives as the completion of a standing receive: an event; one taken in
     * while a schedule probed (health.c) fails the others here */
    if (events > 0 || c->health.fail_all < 0) {
        mesh_status_t st = mesh_health_poll(c);
        if (st < 0)
            mesh_comm_fail_active(c, st);
    }
    /* backwards: a schedule that ends is replaced by the last one, already visited */
    for (int i = c->nactive - 1; i >= 0; i--)
        if (i < c->nactive)
            mesh_sched_progress(c->active[i]);
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

/* The registry's other callback: what wakes a sleeper when a peer gives this communicator work. */
static void comm_wait_arm(void *obj, struct mesh_wait_set *set)
{
    mesh_comm_t *c = obj;
    if (!mesh_comm_trylock(c)) {
        set->blind = 1; /* another thread is in it: look again soon */
        return;
    }
    for (int t = 0; t < c->ntls; t++) {
        mesh_tl_iface_t *iface = c->tls[t].iface;
        if (iface == NULL)
            continue;
        if (iface->ops.wait_arm)
            iface->ops.wait_arm(iface, set);
        else
            set->blind = 1;
    }
    mesh_comm_unlock(c);
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

void mesh_comm_register(mesh_comm_t *c)
{
    mesh_progress_add(c, comm_progress_try, comm_wait_arm);
}
void mesh_comm_unregister(mesh_comm_t *c)
{
    mesh_progress_remove(c);
}
