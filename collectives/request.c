/* Requests, waiting, and groups. */
#define MESH_LOG_SUBSYSTEM "coll"
#include "collectives/request.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/progress.h"
#include <stdlib.h>

/* Group state is per thread, like NCCL's. */
static __thread int mesh_group_depth;
static __thread mesh_request_h mesh_group_head, mesh_group_tail;

int mesh_group_active(void) { return mesh_group_depth > 0; }

static void request_drop(mesh_request_h r)
{
    mesh_sched_destroy(r->sched);
    for (int i = 0; i < 3; i++) free(r->owned[i]);
}

static void request_release(mesh_request_h r)
{
    request_drop(r);
    free(r);
}

static mesh_status_t request_start(mesh_request_h r)
{
    r->started = 1;
    mesh_status_t st = mesh_sched_start(r->sched);
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

static int request_poll(mesh_request_h r)
{
    if (r->status != MESH_INPROGRESS) return 1;
    mesh_status_t st = mesh_sched_state(r->sched);
    if (st == MESH_INPROGRESS) return 0;
    r->status = st;
    if (st < 0) mesh_comm_fail(r->comm, st);
    return 1;
}

mesh_status_t mesh_test(mesh_request_h req, int *done)
{
    if (req == NULL || done == NULL)
        return mesh_error(MESH_ERR_INVALID_ARG, "mesh_test: %s is NULL",
                          req == NULL ? "req" : "done");
    if (!req->started) {
        *done = 0;
        return MESH_OK;
    }
    if (!request_poll(req)) mesh_comm_progress(req->comm);
    *done = request_poll(req);
    return *done ? req->status : MESH_OK;
}

mesh_status_t mesh_wait(mesh_request_h req)
{
    if (req == NULL) return mesh_error(MESH_ERR_INVALID_ARG, "mesh_wait: req is NULL");
    if (!req->started)
        return mesh_error(MESH_ERR_INVALID_ARG,
                          "mesh_wait: the request belongs to a group that has not ended yet");
    unsigned idle = 0;
    while (!request_poll(req)) {
        /* the schedule enforces MESH_TIMEOUT and peer liveness, so this loop ends */
        if (mesh_comm_progress(req->comm) > 0) idle = 0;
        else mesh_backoff(&idle);
    }
    return req->status;
}

void mesh_request_free(mesh_request_h req)
{
    if (req == NULL) return;
    if (req->started && req->status == MESH_INPROGRESS) mesh_sched_fail(req->sched, MESH_ERR_ABORTED);
    request_release(req);
}

int mesh_progress(void) { return mesh_context_progress_all(); }

mesh_status_t mesh_request_submit(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                  void *owned1, mesh_request_h *user_req)
{
    struct mesh_request tmpl = {.comm = comm, .sched = sched, .status = MESH_INPROGRESS,
                                .internal = user_req == NULL, .owned = {owned0, owned1}};
    if (user_req == NULL && mesh_group_depth == 0) {
        /* blocking: the request lives here, for the time of the call */
        mesh_status_t st = request_start(&tmpl);
        if (st >= 0) st = mesh_wait(&tmpl);
        request_drop(&tmpl);
        return st;
    }
    mesh_request_h r = malloc(sizeof(*r));
    if (r == NULL) {
        request_drop(&tmpl);
        return mesh_error(MESH_ERR_NO_MEMORY, "cannot allocate a request");
    }
    *r = tmpl;
    if (mesh_group_depth > 0) {
        /* started at mesh_group_end */
        if (mesh_group_tail) mesh_group_tail->group_next = r;
        else mesh_group_head = r;
        mesh_group_tail = r;
        if (user_req) *user_req = r;
        return MESH_OK;
    }
    mesh_status_t st = request_start(r);
    if (st < 0) {
        request_release(r);
        return st;
    }
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
        mesh_status_t st = request_start(r);
        if (st < 0 && result == MESH_OK) result = st;
    }
    /* wait for the operations posted without a request, driving every communicator of the
     * group, since one rank's progress on one communicator may wait for another's */
    unsigned idle = 0;
    for (;;) {
        int pending = 0, events = 0;
        for (mesh_request_h r = head; r != NULL; r = r->group_next) {
            if (!r->started || !r->internal || request_poll(r)) continue;
            pending = 1;
            events += mesh_comm_progress(r->comm);
        }
        if (!pending) break;
        if (events > 0) idle = 0;
        else mesh_backoff(&idle);
    }
    for (mesh_request_h r = head; r != NULL; r = r->group_next)
        if (r->internal && r->status < 0 && result == MESH_OK) result = r->status;
    for (mesh_request_h r = head, next; r != NULL; r = next) {
        next = r->group_next;
        if (r->internal) request_release(r);
    }
    return result;
}
