/* Requests, waiting, and groups. A request's communicator is locked while its schedule is
 * started, progressed or released; its completion is read without the lock, so that a wait sees
 * it as soon as any thread (a progress thread, another communicator's wait) progressed it. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/request.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <pthread.h>
#include <stdlib.h>

/* Group state is per thread, like NCCL's; a few bytes of static TLS, so that every call reads
 * it without a call into the dynamic linker. */
#define GROUP_TLS __thread __attribute__((tls_model("initial-exec")))
static GROUP_TLS int mesh_group_depth;
static GROUP_TLS mesh_request_h mesh_group_head, mesh_group_tail;

/* Requests come from a process-wide pool and their memory is never given back, so that a handle
 * used after mesh_request_free still points at a request: one freed and not yet reused is
 * recognised (live == 0) and refused; one reused since is a newer request (documented). */
#define REQUEST_SLAB 64
static pthread_mutex_t mesh_request_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static mesh_request_h mesh_request_pool;

static mesh_request_h request_alloc(void)
{
    pthread_mutex_lock(&mesh_request_pool_lock);
    if (mesh_request_pool == NULL) {
        mesh_request_h slab = calloc(REQUEST_SLAB, sizeof(*slab));
        for (int i = 0; slab != NULL && i < REQUEST_SLAB; i++) {
            slab[i].group_next = mesh_request_pool;
            mesh_request_pool = &slab[i];
        }
    }
    mesh_request_h r = mesh_request_pool;
    if (r != NULL) mesh_request_pool = r->group_next;
    pthread_mutex_unlock(&mesh_request_pool_lock);
    return r;
}

static void request_put(mesh_request_h r)
{
    pthread_mutex_lock(&mesh_request_pool_lock);
    r->live = 0;
    r->group_next = mesh_request_pool;
    mesh_request_pool = r;
    pthread_mutex_unlock(&mesh_request_pool_lock);
}

static mesh_status_t request_check(mesh_request_h req, const char *fn)
{
    if (req == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "%s: req is NULL", fn);
    if (!req->live)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: the request was freed already", fn);
    return MESH_OK;
}

int mesh_group_active(void) { return mesh_group_depth > 0; }

/* The communicator is locked. */
static void request_drop(mesh_request_h r)
{
    mesh_sched_destroy(r->sched);
    r->sched = NULL;
    for (int i = 0; i < 3; i++) free(r->owned[i]);
}

static void request_release(mesh_request_h r)
{
    mesh_comm_t *c = r->comm;
    mesh_comm_lock(c);
    request_drop(r);
    mesh_comm_unlock(c);
    request_put(r);
    mesh_comm_unref(c);
}

/* The communicator is locked. */
static mesh_status_t request_start(mesh_request_h r)
{
    r->started = 1;
    mesh_status_t st = mesh_sched_start(r->sched, r->blocking);
    if (st < 0) {
        r->status = st;
        return mesh_comm_fail(r->comm, st);
    }
    /* make the first moves at once, posting before polling the transports: small operations
     * often complete here */
    mesh_sched_progress(r->sched);
    mesh_comm_progress(r->comm);
    return MESH_OK;
}

/* Whether the operation ended; its status in r->status. Without the lock. */
static int request_poll(mesh_request_h r)
{
    if (r->status != MESH_INPROGRESS) return 1;
    mesh_status_t st = mesh_sched_run_status(r->sched);
    if (st == MESH_INPROGRESS) return 0;
    r->status = st;
    /* the thread that detected the failure recorded its message on the communicator; the
     * waiter's thread reads it there too (mesh_comm_last_error(NULL)) */
    if (st < 0) mesh_error_restore(r->comm->last_error);
    return 1;
}

/* Nothing moved: back off, and now and then let idle communicators answer control messages. */
static void request_idle(unsigned *idle)
{
    mesh_backoff(idle);
    if ((*idle & 255) == 0) mesh_progress_idle();
}

/* One round for r's communicator (if its lock is free) and then the others; returns events. */
static int request_round(mesh_request_h r)
{
    int events = 0;
    if (mesh_comm_trylock(r->comm)) {
        events = mesh_comm_progress(r->comm);
        mesh_comm_unlock(r->comm);
    }
    if (request_poll(r)) return events + 1;
    return events + mesh_comm_progress_others(r->comm);
}

mesh_status_t mesh_test(mesh_request_h req, int *done)
{
    MESH_CHECK(request_check(req, "mesh_test"));
    if (done == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "mesh_test: done is NULL");
    if (!req->started) {
        *done = 0;
        return MESH_OK;
    }
    if (!request_poll(req)) request_round(req);
    *done = request_poll(req);
    return *done ? req->status : MESH_OK;
}

static mesh_status_t request_wait(mesh_request_h req)
{
    unsigned idle = 0;
    /* each schedule enforces MESH_TIMEOUT and peer liveness, so this loop ends */
    while (!request_poll(req)) {
        if (request_round(req) > 0) idle = 0;
        else request_idle(&idle);
    }
    return req->status;
}

/* A blocking call's wait: the communicator stays locked while its own progress spins, so a
 * round costs no atomic exchange, and is let go around the sweep of the others (when they have
 * work), every 64 rounds, before the backoff yields or sleeps, and when idle communicators
 * are due to answer control messages (request_idle), so that another thread posting on it or
 * sweeping it waits a few rounds at most. Returns with the lock held. */
static mesh_status_t request_wait_held(mesh_request_h r)
{
    mesh_comm_t *c = r->comm;
    unsigned idle = 0, rounds = 0;
    while (!request_poll(r)) {
        if ((++rounds & 63) == 0) {
            mesh_comm_unlock(c);
            mesh_comm_lock(c);
        }
        int events = mesh_comm_progress(c);
        if (request_poll(r)) break;
        if (mesh_comm_others_busy(c)) {
            mesh_comm_unlock(c);
            events += mesh_progress_others(c);
            mesh_comm_lock(c);
        }
        if (events > 0) {
            idle = 0;
        } else if (mesh_backoff_spins(idle) && (idle & 255) != 255) {
            mesh_backoff(&idle);
        } else {
            mesh_comm_unlock(c);
            request_idle(&idle);
            mesh_comm_lock(c);
        }
    }
    return r->status;
}

mesh_status_t mesh_wait(mesh_request_h req)
{
    MESH_CHECK(request_check(req, "mesh_wait"));
    if (!req->started)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "mesh_wait: the request belongs to a group that has not ended yet");
    return request_wait(req);
}

mesh_status_t mesh_waitall(int n, mesh_request_h *reqs)
{
    if (n < 0) return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: n %d is negative", n);
    if (n > 0 && reqs == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: reqs is NULL");
    for (int i = 0; i < n; i++) {
        if (reqs[i] != NULL && !reqs[i]->live)
            return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: request %d was freed already",
                              i);
        if (reqs[i] != NULL && !reqs[i]->started)
            return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: request %d belongs to a group "
                              "that has not ended yet", i);
    }
    unsigned idle = 0;
    for (;;) {
        int pending = 0, events = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i] == NULL || request_poll(reqs[i])) continue;
            pending = 1;
            events += request_round(reqs[i]);
        }
        if (!pending) break;
        if (events > 0) idle = 0;
        else request_idle(&idle);
    }
    for (int i = 0; i < n; i++) {
        if (reqs[i] != NULL && reqs[i]->status < 0) {
            mesh_error_restore(reqs[i]->comm->last_error);
            return reqs[i]->status;
        }
    }
    return MESH_OK;
}

static mesh_status_t request_testany(const char *fn, int n, mesh_request_h *reqs, int *index,
                                     int *events)
{
    if (events) *events = 0;
    if (index == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "%s: index is NULL", fn);
    if (n < 0) return mesh_error(MESH_ERR_INVALID_ARG, "%s: n %d is negative", fn, n);
    if (n > 0 && reqs == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "%s: reqs is NULL", fn);
    *index = -1;
    int moved = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            mesh_request_h r = reqs[i];
            if (r != NULL && !r->live)
                return mesh_error(MESH_ERR_INVALID_ARG, "%s: request %d was freed already", fn,
                                  i);
            if (r == NULL || !r->started) continue;
            if (request_poll(r)) {
                *index = i;
                if (events) *events = moved + 1;
                return r->status;
            }
            if (pass == 0) moved += request_round(r);
        }
    }
    if (events) *events = moved;
    return MESH_OK;
}

mesh_status_t mesh_testany(int n, mesh_request_h *reqs, int *index)
{
    return request_testany("mesh_testany", n, reqs, index, NULL);
}

mesh_status_t mesh_testany_events(int n, mesh_request_h *reqs, int *index, int *events)
{
    return request_testany("mesh_testany_events", n, reqs, index, events);
}

void mesh_request_free(mesh_request_h req)
{
    if (req == NULL) return;
    if (!req->live) {
        mesh_error(MESH_ERR_INVALID_ARG, "mesh_request_free: the request was freed already");
        return;
    }
    mesh_comm_t *c = req->comm;
    if (req->started && req->sched != NULL && mesh_sched_run_status(req->sched) == MESH_INPROGRESS) {
        mesh_comm_lock(c);
        if (mesh_sched_run_status(req->sched) == MESH_INPROGRESS)
            mesh_sched_fail(req->sched, MESH_ERR_ABORTED);
        mesh_comm_unlock(c);
    }
    request_release(req);
}

int mesh_progress(void) { return mesh_progress_all(); }

mesh_status_t mesh_request_submit(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                  void *owned1, mesh_request_h *user_req)
{
    struct mesh_request tmpl = {.comm = comm, .sched = sched, .status = MESH_INPROGRESS,
                                .internal = user_req == NULL, .owned = {owned0, owned1}};
    mesh_status_t st;
    if (user_req == NULL && mesh_group_depth == 0) {
        /* blocking: the request lives here, for the time of the call */
        tmpl.blocking = 1;
        st = request_start(&tmpl);
        if (st >= 0) st = request_wait_held(&tmpl);
        request_drop(&tmpl);
        mesh_comm_unlock(comm);
        return st;
    }
    mesh_request_h r = request_alloc();
    if (r == NULL) {
        request_drop(&tmpl);
        mesh_comm_unlock(comm);
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a request");
    }
    *r = tmpl;
    r->live = 1;
    mesh_comm_ref(comm);
    if (mesh_group_depth > 0) {
        /* started at mesh_group_end */
        mesh_comm_unlock(comm);
        if (mesh_group_tail) mesh_group_tail->group_next = r;
        else mesh_group_head = r;
        mesh_group_tail = r;
        if (user_req) *user_req = r;
        return MESH_OK;
    }
    st = request_start(r);
    if (st < 0) {
        request_drop(r);
        mesh_comm_unlock(comm);
        request_put(r);
        mesh_comm_unref(comm);
        return st;
    }
    mesh_comm_unlock(comm);
    *user_req = r;
    return MESH_OK;
}

mesh_status_t mesh_group_start(void)
{
    mesh_group_depth++;
    return MESH_OK;
}

mesh_status_t mesh_group_end(void)
{
    if (mesh_group_depth == 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_group_end without mesh_group_start");
    if (--mesh_group_depth > 0) return MESH_OK;
    mesh_request_h head = mesh_group_head;
    mesh_group_head = mesh_group_tail = NULL;
    mesh_status_t result = MESH_OK;
    for (mesh_request_h r = head; r != NULL; r = r->group_next) {
        mesh_comm_lock(r->comm);
        mesh_status_t st = request_start(r);
        mesh_comm_unlock(r->comm);
        if (st < 0 && result == MESH_OK) result = st;
    }
    /* wait for the operations posted without a request; every communicator keeps moving, since
     * one rank's progress on one communicator may wait for another's */
    unsigned idle = 0;
    for (;;) {
        int pending = 0, events = 0;
        for (mesh_request_h r = head; r != NULL; r = r->group_next) {
            if (!r->started || !r->internal || request_poll(r)) continue;
            pending = 1;
            events += request_round(r);
        }
        if (!pending) break;
        if (events > 0) idle = 0;
        else request_idle(&idle);
    }
    for (mesh_request_h r = head; r != NULL; r = r->group_next)
        if (r->internal && r->status < 0 && result == MESH_OK) result = r->status;
    for (mesh_request_h r = head, next; r != NULL; r = next) {
        next = r->group_next;
        if (r->internal) request_release(r);
    }
    return result;
}
