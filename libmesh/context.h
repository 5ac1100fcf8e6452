/* The process-wide context: the only global state. Created once on first use. */
#ifndef MESH_CONTEXT_H
#define MESH_CONTEXT_H

#include "mesh.h"
#include <pthread.h>

/* Registers the tables of the base services (configuration, log, core, progress, reductions,
 * sockets) once and reads this host's identity; later calls return the first result. */
mesh_status_t mesh_context_init(void);

/* This host's node label: MESH_NODE_ID if set, else the host name. */
const char *mesh_context_node_name(void);
/* Identity of this process's pid namespace (so pid liveness checks are only trusted between
 * processes that share one). */
unsigned long long mesh_context_pidns(void);
/* Whether process pid of pid namespace pidns is known to have ended (exited, killed, or a zombie
 * not yet reaped). Always 0 for processes of another namespace or host. */
int mesh_context_pid_gone(int pid, unsigned long long pidns);

#endif
