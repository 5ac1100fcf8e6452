/* Requests and groups: how the API layer launches schedules. */
#ifndef MESH_COLL_REQUEST_H
#define MESH_COLL_REQUEST_H

#include "collectives/sched.h"

struct mesh_request {
    int live;             /* allocated from the pool and not freed */
    mesh_comm_t *comm;
    mesh_sched_t *sched;
    mesh_status_t status; /* MESH_INPROGRESS until the schedule ends */
    int started;
    int internal;         /* posted with a NULL request: freed by whoever waits for it */
    int blocking;         /* a blocking call's, waited for by its caller alone */
    void *owned[3];       /* temporary arrays and buffers freed with the request */
    struct mesh_request *group_next;
};

/* Launches a built schedule as the API was asked to, owning it from then on, and owned0 and
 * owned1 (freed with it): inside a group it is recorded and started at mesh_group_end; otherwise
 * it starts now and, when user_req is NULL, is waited for here without allocating anything.
 * Called with the communicator locked (the build ran under the lock); returns with it unlocked. */
mesh_status_t mesh_request_submit(mesh_comm_t *comm, mesh_sched_t *sched, void *owned0,
                                  void *owned1, mesh_request_h *user_req);
/* Non-zero while mesh_group_start calls outnumber mesh_group_end calls on this thread. */
int mesh_group_active(void);

#endif
