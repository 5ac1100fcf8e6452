/* Requests and groups: how the API layer launches schedules. */
#ifndef MESH_COLL_REQUEST_H
#define MESH_COLL_REQUEST_H

#include "collectives/sched.h"

struct mesh_request {
    mesh_comm_t *comm;
    mesh_sched_t *sched;
    mesh_status_t status; /* MESH_INPROGRESS until the schedule ends */
    int started;
    int internal;         /* posted with a NULL request: freed by whoever waits for it */
    void *owned[3];       /* temporary arrays and buffers freed with the request */
    struct mesh_request *group_next;
};

/* Wraps a built schedule. */
mesh_status_t mesh_request_create(mesh_comm_t *comm, mesh_sched_t *sched, mesh_request_h *out);
/* Launches a request as the API was asked to: inside a group it is recorded and started at
 * mesh_group_end; otherwise it starts now and, when user_req is NULL, is waited for here. */
mesh_status_t mesh_request_launch(mesh_request_h req, mesh_request_h *user_req);
/* Wraps and launches a built schedule, which it owns from then on, as do owned0 and owned1 (freed
 * with it); a blocking call outside a group allocates nothing. */
mesh_status_t mesh_request_submit(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                  void *owned1, mesh_request_h *user_req);
/* Non-zero while mesh_group_start calls outnumber mesh_group_end calls on this thread. */
int mesh_group_active(void);

#endif
