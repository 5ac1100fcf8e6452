/* Requests and groups: how the API layer launches schedules. */
#ifndef MESH_COLL_REQUEST_H
#define MESH_COLL_REQUEST_H

#include "collectives/sched.h"

struct mesh_request {
    int live; /* allocated from the pool and not freed */
    mesh_comm_t *comm;
    mesh_sched_t *sched;
    mesh_status_t status; /* MESH_INPROGRESS until the schedule ends */
    int started;
    int internal;   /* posted with a NULL request: freed by whoever waits for it */
    int blocking;   /* a blocking call's, waited for by its caller alone */
    void *owned[3]; /* temporary arrays and buffers freed with the request */
    struct mesh_request *group_next;
    /* a call on device buffers (collectives/device/): the engine starts the schedule once the
     * caller's stream reached the call, and sets status (atomically) when the results are back
     * in device memory */
    struct mesh_dev_op *dev;
    int dev_unstarted; /* counted in comm->dev_unstarted (under its lock) until started */
};

/* Launches a built schedule as the API was asked to, owning it from then on, and owned0 and
 * owned1 (freed with it): inside a group it is recorded and started at mesh_group_end; otherwise
 * it starts now and, when user_req is NULL, is waited for here without allocating anything.
 * Called with the communicator locked (the build ran under the lock); returns with it unlocked. */
mesh_status_t mesh_request_submit(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                  void *owned1, mesh_request_h *user_req);
/* Non-zero while mesh_group_start calls outnumber mesh_group_end calls on this thread. */
int mesh_group_active(void);

/* A call on device buffers: as mesh_request_submit, but the schedule (built on staging buffers)
 * is handed to the device engine with dev (owned from then on), which starts it once the
 * caller's stream reached the call; the call returns once that is enqueued, also with a NULL
 * user_req (whose request the engine frees). Inside a group, handed over at mesh_group_end. */
mesh_status_t mesh_request_submit_dev(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                      void *owned1, struct mesh_dev_op *dev,
                                      mesh_request_h *user_req);
/* For the device engine: starts a handed-over request's schedule (the communicator unlocked),
 * and frees a request nobody holds any more. */
mesh_status_t mesh_request_start_dev(mesh_request_h r);
/* A request whose schedules the engine starts one by one (a device pipeline's chunks; its own
 * schedule NULL): starts s, unless the communicator can run nothing more; last: the request has
 * started then (comm->dev_unstarted). */
mesh_status_t mesh_request_start_chunk(mesh_request_h r, mesh_sched_t *s, int last);
void mesh_request_release(mesh_request_h r);

#endif
