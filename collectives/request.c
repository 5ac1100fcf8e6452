/* Requests, waiting, and groups. A request's communicator is locked while its schedule is
 * started, progressed or released; its completion is read without the lock, so that a wait sees
 * it as soon as any thread (a progress thread, another communicator's wait) progressed it. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/request.h"
#include "collectives/device/dev.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include "libmesh/wait.h"
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
    if (r != NULL)
        mesh_request_pool = r->group_next;
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
    if (req == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: req is NULL", fn);
    if (!req->live)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: the request was freed already", fn);
    return MESH_OK;
}

int mesh_group_active(void)
{
    return mesh_group_depth > 0;
}

/* The communicator is locked. */
static void request_drop(mesh_request_h r)
{
    mesh_sched_destroy(r->sched);
    r->sched = NULL;
    for (int i = 0; i < 3; i++)
        free(r->owned[i]);
    if (r->dev != NULL) {
        mesh_dev_op_free(r->dev);
        r->dev = NULL;
    }
}

/* A call on device buffers that started, or that never will. The communicator is locked. */
static void request_dev_started(mesh_request_h r)
{
    if (r->dev_unstarted) {
        r->dev_unstarted = 0;
        r->comm->dev_unstarted--;
    }
}

static void request_release(mesh_request_h r)
{
    mesh_comm_t *c = r->comm;
    mesh_comm_lock(c);
    request_dev_started(r);
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

/* Whether the operation ended; its status in r->status. Without the lock. Inline in every wait:
 * a blocking call polls it each round. */
static inline __attribute__((always_inline)) int request_poll(mesh_request_h r)
{
    if (__builtin_expect(r->dev != NULL, 0))
        return mesh_dev_done(r);
    if (r->status != MESH_INPROGRESS)
        return 1;
    mesh_status_t st = mesh_sched_run_status(r->sched);
    if (st == MESH_INPROGRESS)
        return 0;
    r->status = st;
    /* the thread that detected the failure recorded its message on the communicator; the
     * waiter's thread reads it there too (mesh_comm_last_error(NULL)) */
    if (st < 0)
        mesh_error_restore(r->comm->last_error);
    return 1;
}

/* Nothing moved: spin, then sleep until a peer or another thread wakes us (recheck(arg) polls
 * once more after the sleep is announced); now and then let idle communicators answer control
 * messages. */
static void request_idle(mesh_waiter_t *w, int (*recheck)(void *), void *arg)
{
    if (mesh_waiter_idle(w, recheck, arg, -1) || (w->polls & 255) == 0)
        mesh_progress_idle();
}

/* One round for r's communicator (if its lock is free) and then the others; returns events. */
static int request_round(mesh_request_h r)
{
    int events = 0;
    if (mesh_comm_trylock(r->comm)) {
        events = mesh_comm_progress(r->comm);
        mesh_comm_unlock(r->comm);
    }
    if (request_poll(r))
        return events + 1;
    return events + mesh_comm_progress_others(r->comm);
}

static int request_recheck(void *arg)
{
    mesh_request_h r = arg;
    return request_poll(r) || request_round(r) > 0;
}

mesh_status_t mesh_test(mesh_request_h req, int *done)
{
    MESH_CHECK(request_check(req, "mesh_test"));
    if (done == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_test: done is NULL");
    if (!req->started) {
        *done = 0;
        return MESH_OK;
    }
    if (!request_poll(req))
        request_round(req);
    *done = request_poll(req);
    return *done ? req->status : MESH_OK;
}

static mesh_status_t request_wait(mesh_request_h req)
{
    mesh_waiter_t w;
    mesh_waiter_init(&w, -1);
    /* each schedule enforces MESH_TIMEOUT and peer liveness, and no sleep outlasts
     * MESH_PROGRESS_SLICE, so this loop ends */
    while (!request_poll(req)) {
        if (request_round(req) > 0)
            mesh_waiter_reset(&w);
        else
            request_idle(&w, request_recheck, req);
    }
    return req->status;
}

/* A blocking call's wait: the communicator stays locked while its own progress spins, so a
 * round costs no atomic exchange, and is let go around the sweep of the others (when they have
 * work), every 64 rounds, before the waiter sleeps, and when idle communicators are due to
 * answer control messages (request_idle), so that another thread posting on it or sweeping it
 * waits a few rounds at most. Returns with the lock held. */
static mesh_status_t request_wait_held(mesh_request_h r)
{
    mesh_comm_t *c = r->comm;
    unsigned rounds = 0;
    mesh_waiter_t w;
    mesh_waiter_init(&w, -1);
    while (!request_poll(r)) {
        if ((++rounds & 63) == 0) {
            mesh_comm_unlock(c);
            mesh_comm_lock(c);
        }
        int events = mesh_comm_progress(c);
        if (request_poll(r))
            break;
        if (mesh_comm_others_busy(c)) {
            mesh_comm_unlock(c);
            events += mesh_progress_others(c);
            mesh_comm_lock(c);
        }
        if (events > 0) {
            mesh_waiter_reset(&w);
        } else if ((w.polls & 255) == 255 || !mesh_waiter_spin(&w)) {
            mesh_comm_unlock(c);
            request_idle(&w, request_recheck, r);
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

/* The requests of mesh_waitall: the sleep is called off when one of them ends or moves. */
struct request_set {
    int n;
    mesh_request_h *reqs;
};

static int request_set_recheck(void *arg)
{
    struct request_set *set = arg;
    int events = 0;
    for (int i = 0; i < set->n; i++)
        if (set->reqs[i] != NULL && set->reqs[i]->started)
            events += request_recheck(set->reqs[i]);
    return events;
}

mesh_status_t mesh_waitall(int n, mesh_request_h *reqs)
{
    if (n < 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: n %d is negative", n);
    if (n > 0 && reqs == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: reqs is NULL");
    for (int i = 0; i < n; i++) {
        if (reqs[i] != NULL && !reqs[i]->live)
            return mesh_error(MESH_ERR_INVALID_ARG, "mesh_waitall: request %d was freed already",
                              i);
        if (reqs[i] != NULL && !reqs[i]->started)
            return mesh_error(MESH_ERR_INVALID_ARG,
                              "mesh_waitall: request %d belongs to a group "
                              "that has not ended yet",
                              i);
    }
    mesh_waiter_t w;
    mesh_waiter_init(&w, -1);
    struct request_set set = {.n = n, .reqs = reqs};
    for (;;) {
        int pending = 0, events = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i] == NULL || request_poll(reqs[i]))
                continue;
            pending = 1;
            events += request_round(reqs[i]);
        }
        if (!pending)
            break;
        if (events > 0)
            mesh_waiter_reset(&w);
        else
            request_idle(&w, request_set_recheck, &set);
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
    if (events)
        *events = 0;
    if (index == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: index is NULL", fn);
    if (n < 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: n %d is negative", fn, n);
    if (n > 0 && reqs == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "%s: reqs is NULL", fn);
    *index = -1;
    int moved = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            mesh_request_h r = reqs[i];
            if (r != NULL && !r->live)
                return mesh_error(MESH_ERR_INVALID_ARG, "%s: request %d was freed already", fn, i);
            if (r == NULL || !r->started)
                continue;
            if (request_poll(r)) {
                *index = i;
                if (events)
                    *events = moved + 1;
                return r->status;
            }
            if (pass == 0)
                moved += request_round(r);
        }
    }
    if (events)
        *events = moved;
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
    if (req == NULL)
        return;
    if (!req->live) {
        mesh_error(MESH_ERR_INVALID_ARG, "mesh_request_free: the request was freed already");
        return;
    }
    if (req->dev != NULL) {
        /* the engine finishes what the caller's stream waits for, then lets go too */
        req->live = 0;
        mesh_dev_put(req);
        return;
    }
    mesh_comm_t *c = req->comm;
    if (req->started && req->sched != NULL &&
        mesh_sched_run_status(req->sched) == MESH_INPROGRESS) {
        mesh_comm_lock(c);
        if (mesh_sched_run_status(req->sched) == MESH_INPROGRESS)
            mesh_sched_fail(req->sched, MESH_ERR_ABORTED);
        mesh_comm_unlock(c);
    }
    request_release(req);
}

int mesh_progress(void)
{
    return mesh_progress_all();
}

_Static_assert(sizeof(mesh_waiter_t) <= sizeof(((mesh_idle_t *)0)->state),
               "mesh_idle_t holds a waiter");

static mesh_waiter_t *idle_waiter(mesh_idle_t *idle)
{
    return (mesh_waiter_t *)idle->state;
}

void mesh_idle_init(mesh_idle_t *idle, double spin_s, double max_sleep_s)
{
    if (idle == NULL)
        return;
    idle->spin_s = spin_s;
    idle->max_sleep_s = max_sleep_s;
    mesh_waiter_init(idle_waiter(idle), spin_s);
}

void mesh_idle_reset(mesh_idle_t *idle)
{
    if (idle != NULL)
        mesh_waiter_reset(idle_waiter(idle));
}

/* mesh_idle's last look before it sleeps: a round over every communicator with work. */
static int idle_recheck(void *arg)
{
    (void)arg;
    return mesh_progress_others(NULL);
}

int mesh_idle(mesh_idle_t *idle)
{
    if (idle == NULL)
        return 0;
    mesh_waiter_t *w = idle_waiter(idle);
    w->spin_s = idle->spin_s;
    int slept = mesh_waiter_idle(w, idle_recheck, NULL, idle->max_sleep_s);
    if (slept || (w->polls & 255) == 0)
        mesh_progress_idle();
    return slept;
}

mesh_status_t mesh_request_submit(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                  void *owned1, mesh_request_h *user_req)
{
    struct mesh_request tmpl = {.comm = comm,
                                .sched = sched,
                                .status = MESH_INPROGRESS,
                                .internal = user_req == NULL,
                                .owned = {owned0, owned1}};
    mesh_status_t st;
    if (user_req == NULL && mesh_group_depth == 0) {
        /* blocking: the request lives here, for the time of the call */
        tmpl.blocking = 1;
        st = request_start(&tmpl);
        if (st >= 0)
            st = request_wait_held(&tmpl);
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
        if (mesh_group_tail)
            mesh_group_tail->group_next = r;
        else
            mesh_group_head = r;
        mesh_group_tail = r;
        if (user_req)
            *user_req = r;
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
    /* a thread that sleeps (a progress thread, a wait on another request) may drive it */
    mesh_wait_wake_local();
    return MESH_OK;
}

mesh_status_t mesh_group_start(void)
{
    mesh_group_depth++;
    return MESH_OK;
}

/* Takes the calls on device buffers out of the list and hands them to the device engine as one
 * batch (their streams each wait for the whole group); the engine owns them from then on. */
static mesh_status_t group_post_dev(mesh_request_h *head)
{
    int n = 0;
    for (mesh_request_h r = *head; r != NULL; r = r->group_next)
        n += r->dev != NULL;
    if (n == 0)
        return MESH_OK;
    mesh_request_h *dev = malloc(sizeof(*dev) * (size_t)n);
    mesh_request_h *link = head;
    int k = 0;
    while (*link != NULL) {
        mesh_request_h r = *link;
        if (r->dev == NULL) {
            link = &r->group_next;
            continue;
        }
        *link = r->group_next;
        r->group_next = NULL;
        r->started = 1;
        if (dev != NULL) {
            dev[k++] = r;
        } else {
            /* out of memory: never posted, so the engine's reference goes here */
            __atomic_store_n(&r->status, MESH_ERR_NO_MEMORY, __ATOMIC_RELEASE);
            mesh_dev_put(r);
        }
    }
    mesh_status_t st = dev != NULL ? mesh_dev_post(dev, n)
                                   : mesh_error(MESH_ERR_NO_MEMORY,
                                                "mesh_group_end: cannot "
                                                "allocate %d device calls",
                                                n);
    if (dev != NULL && st < 0) {
        for (int i = 0; i < n; i++) {
            __atomic_store_n(&dev[i]->status, st, __ATOMIC_RELEASE);
            mesh_dev_put(dev[i]);
        }
    }
    free(dev);
    return st;
}

static int request_group_recheck(void *arg)
{
    int events = 0;
    for (mesh_request_h r = arg; r != NULL; r = r->group_next)
        if (r->started && r->internal)
            events += request_recheck(r);
    return events;
}

mesh_status_t mesh_group_end(void)
{
    if (mesh_group_depth == 0)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_group_end without mesh_group_start");
    if (--mesh_group_depth > 0)
        return MESH_OK;
    mesh_request_h head = mesh_group_head;
    mesh_group_head = mesh_group_tail = NULL;
    mesh_status_t result = group_post_dev(&head);
    for (mesh_request_h r = head; r != NULL; r = r->group_next) {
        mesh_comm_lock(r->comm);
        mesh_status_t st = request_start(r);
        mesh_comm_unlock(r->comm);
        if (st < 0 && result == MESH_OK)
            result = st;
    }
    /* wait for the operations posted without a request; every communicator keeps moving, since
     * one rank's progress on one communicator may wait for another's */
    mesh_waiter_t w;
    mesh_waiter_init(&w, -1);
    for (;;) {
        int pending = 0, events = 0;
        for (mesh_request_h r = head; r != NULL; r = r->group_next) {
            if (!r->started || !r->internal || request_poll(r))
                continue;
            pending = 1;
            events += request_round(r);
        }
        if (!pending)
            break;
        if (events > 0)
            mesh_waiter_reset(&w);
        else
            request_idle(&w, request_group_recheck, head);
    }
    for (mesh_request_h r = head; r != NULL; r = r->group_next)
        if (r->internal && r->status < 0 && result == MESH_OK)
            result = r->status;
    for (mesh_request_h r = head, next; r != NULL; r = next) {
        next = r->group_next;
        if (r->internal)
            request_release(r);
    }
    return result;
}

void mesh_request_release(mesh_request_h r)
{
    request_release(r);
}

/* Starts s on c (locked) unless c can run nothing more; NULL s: only that test. */
static mesh_status_t request_start_on(mesh_comm_t *c, mesh_sched_t *s)
{
    mesh_status_t st = MESH_OK;
    if (c->released)
        st = mesh_error(MESH_ERR_ABORTED, "the communicator was destroyed before a call on "
                                          "device buffers started");
    else if (atomic_load(&c->aborted))
        st = mesh_error(MESH_ERR_ABORTED, "the communicator was aborted");
    else if (c->failed < 0)
        st = mesh_error(c->failed, "the communicator failed earlier (%s)", c->failure);
    else if (s != NULL && (st = mesh_sched_start(s, 0)) == MESH_OK) {
        /* started already for its waiters: the engine writes nothing they read but status */
        mesh_sched_progress(s);
        mesh_comm_progress(c);
    }
    if (st < 0)
        mesh_comm_fail(c, st);
    return st;
}

mesh_status_t mesh_request_start_dev(mesh_request_h r)
{
    mesh_comm_t *c = r->comm;
    mesh_comm_lock(c);
    /* a pipeline (no schedule of its own) counts as unstarted until its last chunk started:
     * calls made meanwhile must not take its chunks' messages for leftovers */
    if (r->sched != NULL)
        request_dev_started(r);
    mesh_status_t st = request_start_on(c, r->sched);
    mesh_comm_unlock(c);
    return st;
}

mesh_status_t mesh_request_start_chunk(mesh_request_h r, mesh_sched_t *s, int last)
{
    mesh_comm_t *c = r->comm;
    mesh_comm_lock(c);
    if (last)
        request_dev_started(r);
    mesh_status_t st = request_start_on(c, s);
    mesh_comm_unlock(c);
    return st;
}

mesh_status_t mesh_request_submit_dev(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                      void *owned1, struct mesh_dev_op *dev,
                                      mesh_request_h *user_req)
{
    mesh_request_h r = request_alloc();
    if (r == NULL) {
        mesh_sched_destroy(sched);
        mesh_dev_op_free(dev); /* a pipeline's schedules too, under the lock */
        mesh_comm_unlock(comm);
        free(owned0);
        free(owned1);
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a request");
    }
    *r = (struct mesh_request){.live = 1,
                               .comm = comm,
                               .sched = sched,
                               .status = MESH_INPROGRESS,
                               .internal = user_req == NULL,
                               .owned = {owned0, owned1},
                               .dev = dev,
                               .dev_unstarted = 1};
    comm->dev_unstarted++;
    dev->req = r;
    if (user_req != NULL)
        atomic_fetch_add(&dev->refs, 1); /* the user's handle */
    mesh_comm_ref(comm);
    mesh_comm_unlock(comm);
    if (mesh_group_depth > 0) {
        if (mesh_group_tail)
            mesh_group_tail->group_next = r;
        else
            mesh_group_head = r;
        mesh_group_tail = r;
        if (user_req)
            *user_req = r;
        return MESH_OK;
    }
    r->started = 1;
    mesh_status_t st = mesh_dev_post(&r, 1);
    if (st < 0) {
        request_release(r);
        return st;
    }
    if (user_req)
        *user_req = r;
    return MESH_OK;
}
